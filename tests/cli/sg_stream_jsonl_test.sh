#!/usr/bin/env bash
# sg-stream --output jsonl, byte for byte: every control character, the
# quote, the backslash, DEL, every printable byte, valid UTF-8 of each
# length and invalid UTF-8 of each kind (a lone continuation, an overlong
# form, a surrogate, a code point past U+10FFFF, a sequence cut short, a
# byte no sequence starts with), in the data, the event type and the id,
# against the rules docs/sg-stream.md gives (`--output`).  The bodies come
# from a small server written here (sg-fakemodel's are JSON, never these
# bytes): SSE for everything an SSE line can hold, NDJSON for the CR an SSE
# line cannot.  The expected lines are built by an escaper written here
# from those rules (Python's strict UTF-8 decoder decides what is well
# formed), and a few are also spelled out literally.
# Usage: sg_stream_jsonl_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
. "$(dirname "$0")/../integration/fakemodel_lib.sh"

OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr

# The server: the bodies, and the lines sg-stream must print for each
# (FM_DIR/NAME.want); it prints its port, then serves until killed.
python3 -u - "$FM_DIR" >"$FM_DIR/srv.out" 2>"$FM_DIR/srv.err" <<'PY' &
import socket, sys

d = sys.argv[1]

def esc(b):
    """The literal the docs promise for the bytes b."""
    out, i = bytearray(b'"'), 0
    while i < len(b):
        c = b[i]
        if c < 0x80:
            if c in (0x22, 0x5C):
                out += b'\\' + bytes([c])
            elif c == 0x0A:
                out += b'\\n'
            elif c == 0x0D:
                out += b'\\r'
            elif c == 0x09:
                out += b'\\t'
            elif c < 0x20 or c == 0x7F:
                out += b'\\u%04x' % c
            else:
                out.append(c)
            i += 1
            continue
        for n in (2, 3, 4):
            try:
                if len(b[i:i + n].decode('utf-8')) == 1:
                    out += b[i:i + n]
                    i += n
                    break
            except UnicodeDecodeError:
                pass
        else:
            out += b'\\ufffd'
            i += 1
    return bytes(out + b'"')

def line(event, data, id_):
    return b'{"event":' + esc(event) + b',"data":' + esc(data) + b',"id":' + esc(id_) + b'}\n'

ctl = bytes(c for c in range(0x20) if c not in (0x0A, 0x0D))
printable = bytes(range(0x20, 0x80))
valid = ['\u00e9', '\u07ff', '\u0800', '\u20ac', '\uffff', '\U00010000', '\U0001F600',
         '\U0010FFFF']
invalid = [b'\x80', b'\xbf', b'\xc0\xaf', b'\xc1\xbf', b'\xe0\x80\xaf', b'\xed\xa0\x80',
           b'\xed\xbf\xbf', b'\xf0\x80\x80\xaf', b'\xf4\x90\x80\x80', b'\xf5\x80\x80\x80',
           b'\xfe', b'\xff', b'\xc3', b'\xe2\x82', b'\xf0\x9f\x98', b'\xe2\x82"',
           b'\xc3\xa9\xa9']
# (event type, data lines, id) per SSE event; data lines joined by LF
events = [
    (b'', [ctl], b''),
    (b'', [printable], b''),
    (b'', [ctl + printable + ctl], b''),
    (b'', [b''], b''),
    (b'', [b'a', b'b', b''], b''),
    (b'', [''.join(valid).encode()], b''),
    (b't"\\\x01\x1f\x7f\xc3\xa9', [b'typed'], b'i"\\\x02\x7f\xe2\x82\xac'),
    (b'', [b'after the id'], b''),
    # a type whose line head passes 32 bytes, then one past the cache's
    # 32 bytes, each twice (the head cached, then reused)
    (b'content_block_delta', [b'd1'], b''),
    (b'content_block_delta', [b'd2'], b''),
    (b'x' * 33, [b'l1'], b''),
    (b'x' * 33, [b'l2'], b''),
    (b'', [b'message again'], b''),
]
for s in valid:
    events.append((b'', [s.encode()], b''))
for s in invalid:
    # alone, at a block's end, inside a long run, next to escapes
    for data in (s, b'x' * 31 + s, b'"' * 40 + s + b'\\' * 40, s + ctl + s):
        events.append((b'', [data], b''))
# long data: escapes at each offset of a 64-byte block, past several blocks
for k in range(0, 70):
    events.append((b'', [b'a' * k + b'"' + b'b' * (130 - k) + b'\\\x01'], b''))

sse, want, last_id = bytearray(), bytearray(), b''
for ev, lines_, id_ in events:
    if ev:
        sse += b'event: ' + ev + b'\n'
    for l in lines_:
        sse += b'data: ' + l + b'\n'
    if id_:
        sse += b'id: ' + id_ + b'\n'
        last_id = id_
    sse += b'\n'
    want += line(ev or b'message', b'\n'.join(lines_), last_id)
sse += b'data: [DONE]\n\n'
open(d + '/sse.want', 'wb').write(want)

# (a CR right before the LF is the line's end, not its content)
nd_lines = [b'x\ry', b'\rz', b'"\r\\\r' + ctl + b'\rz', b'\xff\r\xc3\xa9\rq']
nd = b''.join(l + b'\n' for l in nd_lines)
open(d + '/ndjson.want', 'wb').write(b''.join(line(b'', l, b'') for l in nd_lines))

bodies = {b'/sse': (b'text/event-stream', bytes(sse)),
          b'/ndjson': (b'application/x-ndjson', nd)}
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('127.0.0.1', 0))
srv.listen(8)
print(srv.getsockname()[1])
while True:
    c, _ = srv.accept()
    req = b''
    while b'\r\n\r\n' not in req:
        r = c.recv(65536)
        if not r:
            break
        req += r
    path = req.split(b' ')[1].split(b'?')[0] if req.count(b' ') >= 2 else b''
    ctype, body = bodies.get(path, (b'text/plain', b''))
    status = b'200 OK' if path in bodies else b'404 Not Found'
    c.sendall(b'HTTP/1.1 ' + status + b'\r\nContent-Type: ' + ctype +
              b'\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % len(body) + body)
    c.close()
PY
SRV=$!
trap 'kill "$SRV" 2>/dev/null; fm_cleanup' EXIT
PORT=$(read_port "$SRV" "$FM_DIR/srv.out" "$FM_DIR/srv.err" "the test server") || exit 1
BASE=http://127.0.0.1:$PORT

# same FILE WANT DESCRIPTION: FILE holds exactly WANT's bytes.
same() {
    if cmp -s "$1" "$2"; then
        pass "$3"
    else
        fail "$3: $(cmp "$1" "$2" 2>&1 | head -n 1)"
        diff <(od -c "$2") <(od -c "$1") | head -n 12 >&2
    fi
}

expect 0 "SSE with every byte a data line can hold" -- --output jsonl "$BASE/sse"
same "$OUT" "$FM_DIR/sse.want" "jsonl: every line exactly as the rules make it"
n=$(wc -l <"$FM_DIR/sse.want")
if [ "$(wc -l <"$OUT")" -eq "$n" ] && [ "$n" -ge 150 ]; then
    pass "one line per event ($n)"
else
    fail "$(wc -l <"$OUT") lines, wanted $n"
fi
# the rules spelled out, for the reader (and against a wrong oracle)
has "$OUT" '{"event":"message","data":"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008\t\u000b\u000c\u000e\u000f\u0010' \
    "control characters: \\t by name, the rest (\\b and \\f too) as \\u00XX"
has "$OUT" '\u001e\u001f","id":""}' "... up to U+001F"
has "$OUT" '"data":" !\"#$%&'"'"'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\u007f"' \
    "printable bytes as they are, the quote and the backslash escaped, DEL as \\u007f"
has "$OUT" '{"event":"message","data":"","id":""}' "empty data"
has "$OUT" '{"event":"message","data":"a\nb\n","id":""}' "data lines joined by \\n"
has "$OUT" "{\"event\":\"t\\\"\\\\\\u0001\\u001f\\u007fé\",\"data\":\"typed\",\"id\":\"i\\\"\\\\\\u0002\\u007f€\"}" \
    "the event type and the id escaped alike"
has "$OUT" '{"event":"message","data":"after the id","id":"i\"\\\u0002\u007f€"}' \
    "the last id stays in effect"
has "$OUT" '"data":"é߿ࠀ€￿𐀀😀􏿿"' "valid UTF-8 of 2, 3 and 4 bytes as it is"
has "$OUT" '"data":"\ufffd\ufffd\ufffd"' "a surrogate: one U+FFFD per byte"
has "$OUT" '"data":"\ufffd\ufffd\""' "a sequence cut by a quote: U+FFFD per byte, the quote escaped"
has "$OUT" '"data":"é\ufffd"' "a continuation past a whole sequence: U+FFFD"

expect 0 "NDJSON with a CR inside its lines" -- --format ndjson --output jsonl "$BASE/ndjson"
same "$OUT" "$FM_DIR/ndjson.want" "jsonl: CR as \\r, exactly"
has "$OUT" '{"event":"","data":"x\ry","id":""}' "a lone CR inside a line: \\r"

kill "$SRV" 2>/dev/null
wait "$SRV" 2>/dev/null
if [ "$FM_FAILS" -ne 0 ]; then
    echo "$FM_FAILS failure(s)" >&2
    exit 1
fi
echo "all passed"
