#!/usr/bin/env python3
"""Open N streams at once through sg-proxy, read its memory, close them.

Used by bench/proxy_memory.sh (the figures in bench/RESULTS.md) and by
tests/cli/sg_proxy_memory_test.sh.  Each stream is one POST to the proxy's
/v1/chat/completions; it counts as open once the 200 head and its first
event (the commit at the first token) have arrived.  With every stream
open, the proxy's VmSize and VmRSS are read from /proc/PID/status, and
cpu_s, the CPU (user + system) it spent from the burst's start until then,
from /proc/PID/stat (and, with --quiet S, the memory again S seconds
later, every stream quiet since its first event); then every connection is closed, and after --settle seconds they are read
again.  --bursts repeats that.  Prints one line per measurement, then
"open_all=yes|no" (whether every stream of every burst opened).
"""
import argparse
import os
import selectors
import socket
import sys
import time

BODY = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'


def cpu_s(pid):
    """CPU time @pid has used (user + system), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid):
    """VmSize and VmRSS of @pid, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("VmSize", "VmRSS"):
                out[key] = int(val.split()[0])
    return out["VmSize"], out["VmRSS"]


class Stream:
    def __init__(self, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))
        self.out = (
            b"POST /v1/chat/completions?stall=forever&stall_after=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(BODY)).encode()
            + b"\r\n\r\n"
            + BODY
        )
        self.got = b""
        self.state = "sending"  # sending, reading, open, failed
        self.why = ""

    def on_write(self):
        try:
            n = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.fail(f"send: {e}")
            return
        self.out = self.out[n:]
        if not self.out:
            self.state = "reading"

    def on_read(self):
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.fail(f"recv: {e}")
            return
        if not data:
            self.fail("closed: " + self.got[:200].decode("latin-1"))
            return
        self.got += data
        head, sep, body = self.got.partition(b"\r\n\r\n")
        if not sep:
            return
        status = head.split(b" ", 2)[1] if head.startswith(b"HTTP/") else b"?"
        if status != b"200":
            self.fail(f"status {status.decode()}: " + body[:200].decode("latin-1"))
        elif b"\n\n" in body:
            self.state = "open"
            self.got = b""

    def fail(self, why):
        self.state = "failed"
        self.why = why


def burst(port, n, timeout):
    """Opens @n streams at once; returns them (open or failed)."""
    sel = selectors.DefaultSelector()
    streams = []
    for _ in range(n):
        s = Stream(port)
        streams.append(s)
        sel.register(s.sock, selectors.EVENT_WRITE, s)
    pending = n
    end = time.monotonic() + timeout
    while pending > 0 and time.monotonic() < end:
        for key, mask in sel.select(timeout=0.2):
            s = key.data
            if s.state == "sending" and mask & selectors.EVENT_WRITE:
                s.on_write()
                if s.state == "reading":
                    sel.modify(s.sock, selectors.EVENT_READ, s)
            elif s.state == "reading" and mask & selectors.EVENT_READ:
                s.on_read()
            if s.state in ("open", "failed"):
                sel.unregister(s.sock)
                pending -= 1
    for s in streams:
        if s.state not in ("open", "failed"):
            sel.unregister(s.sock)
            s.fail("no first event within the timeout")
    sel.close()
    return streams


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument(
        "--quiet",
        type=float,
        default=0.0,
        help="also read the memory this many seconds after every stream opened "
        "(the streams quiet meanwhile)",
    )
    a = ap.parse_args()

    size, rss = status_kib(a.pid)
    print(f"baseline VmSize_kib={size} VmRSS_kib={rss}", flush=True)
    all_open = True
    for b in range(1, a.bursts + 1):
        t0 = time.monotonic()
        cpu0 = cpu_s(a.pid)
        streams = burst(a.port, a.n, a.timeout)
        cpu_open = cpu_s(a.pid) - cpu0
        opened = sum(s.state == "open" for s in streams)
        size_open, rss_open = status_kib(a.pid)
        reasons = {}
        for s in streams:
            if s.state == "failed":
                reasons[s.why[:120]] = reasons.get(s.why[:120], 0) + 1
        print(
            f"burst {b} open={opened}/{a.n} secs={time.monotonic() - t0:.1f} "
            f"cpu_s={cpu_open:.2f} "
            f"VmSize_kib={size_open} VmRSS_kib={rss_open} "
            f"per_stream_VmSize_kib={(size_open - size) / a.n:.1f} "
            f"per_stream_RSS_kib={(rss_open - rss) / a.n:.1f}",
            flush=True,
        )
        for why, count in sorted(reasons.items(), key=lambda x: -x[1])[:5]:
            print(f"  {count} failed: {why}", flush=True)
        all_open = all_open and opened == a.n
        if a.quiet > 0:
            time.sleep(a.quiet)
            size_q, rss_q = status_kib(a.pid)
            print(
                f"burst {b} quiet={a.quiet:g}s VmSize_kib={size_q} VmRSS_kib={rss_q} "
                f"per_stream_VmSize_kib={(size_q - size) / a.n:.1f} "
                f"per_stream_RSS_kib={(rss_q - rss) / a.n:.1f}",
                flush=True,
            )
        for s in streams:
            s.sock.close()
        time.sleep(a.settle)
        size_after, rss_after = status_kib(a.pid)
        print(
            f"burst {b} closed VmSize_kib={size_after} VmRSS_kib={rss_after}",
            flush=True,
        )
    print("open_all=" + ("yes" if all_open else "no"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
