#!/usr/bin/env python3
"""The spans a test collector received (otlp_collector.py), one JSON line
each: decoded by protoc --decode against the pinned OTLP definitions
(third_party/opentelemetry-proto), so the bytes are read by a decoder no
one here wrote.  Ids in lowercase hex; attributes as a map of their values.

Usage: otlp_spans.py DIR PROTO_ROOT
"""
import glob
import json
import subprocess
import sys

MSG = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
PROTO = "opentelemetry/proto/collector/trace/v1/trace_service.proto"


def tokens(text):
    """protobuf text format: names, '{', '}', ':' and quoted strings."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "{}:":
            yield c
            i += 1
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            raw = text[i + 1:j]
            yield ("s", raw.encode("latin1").decode("unicode_escape").encode("latin1"))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in "{}:":
                j += 1
            yield text[i:j]
            i = j


def parse(toks):
    """A message: a dict of lists (every field may repeat)."""
    out = {}
    for t in toks:
        if t == "}":
            return out
        name = t
        nxt = next(toks)
        if nxt == ":":
            nxt = next(toks)
        if nxt == "{":
            val = parse(toks)
        elif isinstance(nxt, tuple):
            val = nxt[1]
        else:
            val = nxt
        out.setdefault(name, []).append(val)
    return out


def one(m, key, default=None):
    v = m.get(key)
    return v[0] if v else default


def value(anyv):
    for k in ("string_value", "bool_value", "int_value", "double_value"):
        if k in anyv:
            v = anyv[k][0]
            if k == "string_value":
                return v.decode()
            if k == "bool_value":
                return v == "true"
            if k == "int_value":
                return int(v)
            return float(v)
    return None


def attrs(m):
    return {one(a, "key").decode(): value(one(a, "value", {}))
            for a in m.get("attributes", [])}


def main():
    files = sorted(glob.glob(sys.argv[1] + "/*.pb"))
    for f in files:
        with open(f, "rb") as fh:
            text = subprocess.run(["protoc", "--decode=" + MSG, "-I", sys.argv[2], PROTO],
                                  stdin=fh, capture_output=True, check=True).stdout
        msg = parse(tokens(text.decode("latin1")))
        for rs in msg.get("resource_spans", []):
            resource = attrs(one(rs, "resource", {}))
            for ss in rs.get("scope_spans", []):
                for s in ss.get("spans", []):
                    st = one(s, "status", {})
                    print(json.dumps({
                        "service": resource.get("service.name"),
                        "trace_id": one(s, "trace_id", b"").hex(),
                        "span_id": one(s, "span_id", b"").hex(),
                        "parent_span_id": one(s, "parent_span_id", b"").hex(),
                        "trace_state": one(s, "trace_state", b"").decode(),
                        "name": one(s, "name", b"").decode(),
                        "kind": one(s, "kind"),
                        "start": int(one(s, "start_time_unix_nano", "0")),
                        "end": int(one(s, "end_time_unix_nano", "0")),
                        "status": one(st, "code", "STATUS_CODE_UNSET"),
                        "attributes": attrs(s),
                        "events": [one(e, "name", b"").decode() for e in s.get("events", [])],
                    }, sort_keys=True))


if __name__ == "__main__":
    main()
