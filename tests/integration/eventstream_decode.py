#!/usr/bin/env python3
"""An independent reader of AWS event-stream bytes, for the tests of
sg-fakemodel's Bedrock formats: it shares no code with the server (the
framing from smithy.io's "Amazon Event Stream", the CRC32 from Python's
zlib).

    eventstream_decode.py FILE

prints one JSON line per message:
  {"ok": true, "headers": {...}, "payload": "<text>", "total": N}
or, for a message whose CRC does not hold, "ok": false with "error":
"prelude_crc" or "message_crc" (and decoding goes on at the length the
prelude gave); then a last line {"end": "clean"} when the bytes ended on a
message boundary, or {"end": "truncated", "left": N} with the bytes of the
incomplete message.  A payload that is JSON with a "bytes" member (an
InvokeModelWithResponseStream chunk) also gets "model": the base64-decoded
text.  Every header must be a string (type 7); any other
type is reported as {"error": "header_type"} and ends the reading.
"""
import base64
import json
import struct
import sys
import zlib


def decode(data):
    out = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            out.append({"end": "truncated", "left": len(data) - pos})
            return out
        total, hlen, pcrc = struct.unpack(">III", data[pos:pos + 12])
        if zlib.crc32(data[pos:pos + 8]) != pcrc:
            out.append({"ok": False, "error": "prelude_crc", "total": total})
            if total < 16 or pos + total > len(data):
                out.append({"end": "truncated", "left": len(data) - pos})
                return out
            pos += total
            continue
        if total < 16 + hlen:
            out.append({"error": "length", "total": total})
            return out
        if pos + total > len(data):
            out.append({"end": "truncated", "left": len(data) - pos})
            return out
        msg = data[pos:pos + total]
        (mcrc,) = struct.unpack(">I", msg[-4:])
        rec = {"ok": True, "total": total}
        if zlib.crc32(msg[:-4]) != mcrc:
            rec = {"ok": False, "error": "message_crc", "total": total}
        headers = {}
        h = 12
        while h < 12 + hlen:
            nl = msg[h]
            name = msg[h + 1:h + 1 + nl].decode()
            h += 1 + nl
            if msg[h] != 7:
                out.append({"error": "header_type", "type": msg[h]})
                return out
            (vl,) = struct.unpack(">H", msg[h + 1:h + 3])
            headers[name] = msg[h + 3:h + 3 + vl].decode()
            h += 3 + vl
        rec["headers"] = headers
        rec["payload"] = msg[12 + hlen:-4].decode()
        try:
            body = json.loads(rec["payload"])
        except ValueError:
            body = None
        if isinstance(body, dict) and "bytes" in body:
            rec["model"] = base64.b64decode(body["bytes"], validate=True).decode()
        out.append(rec)
        pos += total
    out.append({"end": "clean"})
    return out


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    for rec in decode(data):
        print(json.dumps(rec, separators=(",", ":")))


if __name__ == "__main__":
    main()
