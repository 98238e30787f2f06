#!/usr/bin/env python3
"""Many streams at once through sg-proxy: whole, and late when they stall.

Used by bench/proxy_streams.sh (the figures in bench/RESULTS.md, "sg-proxy
beside nginx").  Opens -n streams at once (each one POST to the proxy's
/v1/chat/completions?QUERY, all in one epoll loop) and reads them to their
end.  For each it records the tokens it got, how it ended ([DONE], or the
in-band error's code), when its last token came and when its error came.
Prints one line: how many ended with [DONE] and every token ("whole"),
the tokens in all, the seconds it took, the proxy's CPU over that time per
token (--pid: /proc/PID/task/*/schedstat), its VmRSS at the peak of open
streams, and with --idle-ms the lateness of each in-band idle_timeout:
its arrival less (the last token's + the idle clock), p50, p99 and max.
Two stamps of each arrival: when this loop read it ("idle_late_ms"), and
when the bytes reached the socket, by the kernel's receive timestamp
(SO_TIMESTAMPNS; "idle_late_rx_ms"): with 10,000 sockets this Python loop
reads a socket up to milliseconds after its bytes came, late on either
end, so the second is the proxy's lateness without the loop's own.

With --background B, B streams of --bg-query are opened first and each
has had its first token before the -n measured ones open: the measured
streams then stall among B others that keep streaming (under --idle-ms
their tokens must come faster than the idle clock).  The line then also
says how many of the B ended with [DONE] and --bg-tokens tokens
("bg_whole"); the other figures are the measured streams'.
"""
import argparse
import glob
import json
import re
import selectors
import socket
import struct
import sys
import time

BODY = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
TOKEN = re.compile(rb'"content":"tok')
CODE = re.compile(rb'"code":"([a-z_]+)"')
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_ the same
# the kernel stamps with CLOCK_REALTIME; the rest here is CLOCK_MONOTONIC
RT_LESS_MONO = time.clock_gettime(time.CLOCK_REALTIME) - time.monotonic()


def cpu_ns(pid):
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except OSError:
            pass
    return total


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Stream:
    def __init__(self, port, query, tag):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.connect_ex(("127.0.0.1", port))
        self.out = (
            b"POST /v1/chat/completions?" + query.encode() + b"&_t=" + tag.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
        )
        self.tail = b""  # the last bytes, for a token split across reads
        self.body = False
        self.tokens = 0
        self.end = "none"
        self.last_token = None
        self.error_at = None
        self.last_token_rx = None  # the same, when the bytes reached the socket
        self.error_rx = None
        self.done = False

    def on_read(self, now):
        """@now: when the loop learned the socket was readable (the bytes
        were there by then; the client's own work on the sockets before
        this one is not counted against the proxy)."""
        rx = None
        try:
            data, anc, _, _ = self.sock.recvmsg(65536, 64)
            for level, kind, d in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, ns = struct.unpack("qq", d[:16])
                    rx = sec + ns / 1e9 - RT_LESS_MONO
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.done = True
            return
        buf = self.tail + data
        if not self.body:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if not sep:
                self.tail = buf
                return
            self.body = True
            if not head.startswith(b"HTTP/1.1 200"):
                self.end = "status " + head.split(b" ")[1].decode()
            buf = rest
        n = len(TOKEN.findall(buf))
        if n:
            self.tokens += n
            self.last_token = now
            self.last_token_rx = rx
        if b"data: [DONE]" in buf:
            self.end = "done"
        m = CODE.search(buf)
        if m:
            self.end = m.group(1).decode()
            self.error_at = now
            self.error_rx = rx
        self.tail = buf[-32:] if b"\n" not in buf[-32:] else buf[buf.rfind(b"\n") + 1:]


def fm_get(port, path, method="GET"):
    """One request to sg-fakemodel's own paths: the body."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            data += b
    return data.partition(b"\r\n\r\n")[2]


def fm_events(port, name):
    """sg-fakemodel's log events NAME: {id: t_ns}, and {id: _t tag} for
    received."""
    out = {}
    body = fm_get(port, f"/_log?event={name}")
    for line in body.split(b"\n"):
        line = line.strip().rstrip(b",")
        if not line.startswith(b"{"):
            continue
        # a chunked body's size lines never start with "{"
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if name == "received":
            m = re.search(r"_t=([^&]*)", e.get("query") or "")
            if m:
                out[e["id"]] = m.group(1)
        else:
            out[e["id"]] = e["t_ns"]
    return out


def quantiles(late):
    late = sorted(late)
    q = lambda p: late[min(len(late) - 1, int(p * len(late)))]
    return f"p50={q(0.50):.1f} p99={q(0.99):.1f} max={late[-1]:.1f} of={len(late)}"


def pump(sel, pending):
    """One wait and what it found: requests sent, bytes read, ended
    streams closed (pending[0] counts the open ones)."""
    ready = sel.select(timeout=0.2)
    at = time.monotonic()
    for key, mask in ready:
        s = key.data
        if s.out and mask & selectors.EVENT_WRITE:
            try:
                k = s.sock.send(s.out)
                s.out = s.out[k:]
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                s.out = b""
                s.done = True
            if not s.out and not s.done:
                sel.modify(s.sock, selectors.EVENT_READ, s)
        elif mask & selectors.EVENT_READ:
            s.on_read(at)
        if s.done:
            sel.unregister(s.sock)
            s.sock.close()
            pending[0] -= 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--query", default="n=10&gap=200")
    ap.add_argument("--tokens", type=int, default=10, help="tokens a whole stream has")
    ap.add_argument("--idle-ms", type=float, default=0)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--fm-port", type=int, default=0, help="sg-fakemodel's port")
    ap.add_argument("--background", type=int, default=0, help="streams open beside")
    ap.add_argument("--bg-query", default="n=60&gap=500")
    ap.add_argument("--bg-tokens", type=int, default=60)
    a = ap.parse_args()

    sel = selectors.DefaultSelector()
    background = []
    end = time.monotonic() + a.timeout
    if a.background:
        # every background stream open and past its first token first
        background = [Stream(a.port, a.bg_query, f"b{i}") for i in range(a.background)]
        for s in background:
            sel.register(s.sock, selectors.EVENT_WRITE, s)
        bg_pending = [a.background]
        while (sum(s.tokens > 0 or s.done for s in background) < a.background and
               time.monotonic() < end):
            pump(sel, bg_pending)
    if a.fm_port:
        fm_get(a.fm_port, "/_log/reset", "POST")
    c0 = cpu_ns(a.pid)
    t0 = time.monotonic()
    streams = []
    for i in range(a.n):
        s = Stream(a.port, a.query, f"s{i}")
        streams.append(s)
        sel.register(s.sock, selectors.EVENT_WRITE, s)
    pending = [a.n + (bg_pending[0] if a.background else 0)]
    peak_rss = 0
    next_rss = 0.0
    while sum(not s.done for s in streams) > 0 and time.monotonic() < end:
        pump(sel, pending)
        now = time.monotonic()
        if now >= next_rss:
            peak_rss = max(peak_rss, rss_kib(a.pid))
            next_rss = now + 0.1
    secs = time.monotonic() - t0
    cpu = cpu_ns(a.pid) - c0
    if background:
        # the background streams to their end too: none cut by the idle clock
        while pending[0] > 0 and time.monotonic() < end:
            pump(sel, pending)
    tokens = sum(s.tokens for s in streams)
    whole = sum(s.end == "done" and s.tokens == a.tokens for s in streams)
    ends = {}
    for s in streams:
        ends[s.end] = ends.get(s.end, 0) + 1
    line = (f"streams={a.n} whole={whole} tokens={tokens} secs={secs:.1f} "
            f"cpu_ns_per_token={cpu / max(tokens, 1):.0f} "
            f"cpu_us_per_stream={cpu / 1000 / max(a.n, 1):.0f} peak_rss_kib={peak_rss} "
            f"ends={','.join(f'{k}:{v}' for k, v in sorted(ends.items()))}")
    if background:
        bg_ends = {}
        for s in background:
            bg_ends[s.end] = bg_ends.get(s.end, 0) + 1
        bg_whole = sum(s.end == "done" and s.tokens == a.bg_tokens for s in background)
        line += (f" bg_whole={bg_whole}/{a.background} "
                 f"bg_ends={','.join(f'{k}:{v}' for k, v in sorted(bg_ends.items()))}")
    if a.idle_ms > 0:
        late = sorted((s.error_at - s.last_token) * 1000 - a.idle_ms for s in streams
                      if s.error_at is not None and s.last_token is not None)
        if late:
            line += " idle_late_ms_" + quantiles(late)
        late = sorted((s.error_rx - s.last_token_rx) * 1000 - a.idle_ms for s in streams
                      if s.error_rx is not None and s.last_token_rx is not None)
        if late:
            line += " idle_late_rx_ms_" + quantiles(late)
    if a.idle_ms > 0 and a.fm_port:
        # every stream's end seen upstream (a close may trail the client's
        # answer), at most 10 s more
        gone = {}
        for _ in range(100):
            gone = fm_events(a.fm_port, "client_gone")
            if len(gone) >= a.n:
                break
            time.sleep(0.1)
        stall = fm_events(a.fm_port, "stall_started")
        tag = {t: i for i, t in fm_events(a.fm_port, "received").items()}
        told, closed, after = [], [], []
        for k, s in enumerate(streams):
            i = tag.get(f"s{k}")
            if i is None or i not in stall:
                continue
            due = stall[i] / 1e9 + a.idle_ms / 1000
            if s.error_at is not None:
                told.append((s.error_at - due) * 1000)
            if i in gone:
                closed.append((gone[i] / 1e9 - due) * 1000)
            if i in gone and s.error_at is not None:
                after.append((gone[i] / 1e9 - s.error_at) * 1000)
        if after:
            line += " closed_after_told_ms_" + quantiles(after)
        if told:
            line += " from_stall_told_ms_" + quantiles(told)
        if closed:
            line += " closed_ms_" + quantiles(closed)
    print(line, flush=True)
    for s in streams + background:
        if not s.done:
            s.sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
