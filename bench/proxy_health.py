#!/usr/bin/env python3
"""Endpoint health through sg-proxy, side by side in one run.

Used by bench/proxy_health.sh (the figures in bench/RESULTS.md, "Endpoint
health through sg-proxy").  Python 3 standard library only.

Part 1, a rate-limited upstream: one sg-fakemodel allowing --limit
requests per --window ms (OpenAI-style headers on every answer, a 429
with retry-after-ms past the limit), and sg-proxy in front of it in each
configuration (health on, the default; --health off; ...), all started
at once.  --clients clients each run operations one after another for
--seconds: an operation is one streamed POST, sent again after whatever
wait a 429 or 503 names (retry-after-ms, else Retry-After, else 100 ms)
until it streams whole - as an SDK that honours Retry-After does, but
without giving up, so that each operation completes or the run ends.
Configurations take turns, --runs times each (each run with a rate
limiter of its own); the median of the runs is printed for: requests
the upstream received, 429s it sent, operations completed, and time to
first token measured by the client from the operation's start (waits
included), p50 and p99.

Part 2, a dead upstream with a fallback: each route's upstream is dead -
nothing listening (connect refused), or a server that accepts and never
answers (a hung host: the route's --first-item 1s ends each attempt) -
and its fallback is sg-fakemodel; with the breaker (default), without it
(--breaker-failures 0), and the fallback alone as the reference.  The
same clients, time to first token p50 and p99 (all operations, and those
that started after --warmup seconds: once the breaker is open).
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BODY = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'


def start(argv, tmp, name):
    """Starts a server that prints its port alone on its first line."""
    out = open(os.path.join(tmp, name + ".out"), "w+")
    err = open(os.path.join(tmp, name + ".err"), "w")
    p = subprocess.Popen(argv, stdout=out, stderr=err)
    for _ in range(200):
        out.seek(0)
        line = out.readline()
        if line.strip().isdigit() and line.endswith("\n"):
            return p, int(line)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    sys.exit(f"{name} did not start: {open(err.name).read()[:400]}")


def stats(fm_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{fm_port}/_stats") as r:
        return json.load(r)


def pct(xs, q):
    """The q-th percentile (nearest rank) of @xs, in ms; nan when empty."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(q / 100.0 * len(s) + 0.999999) - 1))] * 1000.0


async def request(port, target):
    """One POST through the proxy: (status, headers, ttft instant or None,
    whole: the stream ended with [DONE])."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(
            b"POST " + target.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer sk-bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
        )
        await w.drain()
        head = await r.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        ttft = None
        rest = b""
        while True:
            chunk = await r.read(65536)
            if not chunk:
                break
            rest += chunk
            if ttft is None and status == 200 and b'"content"' in rest:
                ttft = time.monotonic()
        return status, headers, ttft, status == 200 and b"data: [DONE]" in rest
    finally:
        w.close()


def wait_of(headers):
    """What a 429 or 503 says to wait, in seconds (100 ms when nothing)."""
    try:
        if "retry-after-ms" in headers:
            return min(60.0, float(headers["retry-after-ms"]) / 1000.0)
        if "retry-after" in headers:
            return min(60.0, float(headers["retry-after"]))
    except ValueError:
        pass
    return 0.1


async def client(port, target, end, res):
    while time.monotonic() < end:
        t0 = time.monotonic()
        while time.monotonic() < end:
            try:
                status, headers, ttft, whole = await request(port, target)
            except (OSError, asyncio.IncompleteReadError) as e:
                res["errors"][type(e).__name__] = res["errors"].get(type(e).__name__, 0) + 1
                await asyncio.sleep(0.1)
                continue
            if whole:
                res["ttft"].append((t0, ttft - t0))
                res["completed"] += 1
                break
            res["answers"][status] = res["answers"].get(status, 0) + 1
            await asyncio.sleep(wait_of(headers))


async def load(port, target, clients, seconds):
    res = {"ttft": [], "completed": 0, "answers": {}, "errors": {}}
    start_at = time.monotonic()
    end = start_at + seconds
    await asyncio.gather(*(client(port, target, end, res) for _ in range(clients)))
    res["start"] = start_at
    return res


async def hung_server(sock):
    """Accepts and reads, never answers: a hung host."""

    async def hold(r, w):
        try:
            while await r.read(65536):
                pass
        except OSError:
            pass
        w.close()

    return await asyncio.start_server(hold, sock=sock)


def run_one(port, target, a, fm_port):
    s0 = stats(fm_port)
    res = asyncio.run(load(port, target, a.clients, a.seconds))
    s1 = stats(fm_port)
    ttft = [t for _, t in res["ttft"]]
    late = [t for t0, t in res["ttft"] if t0 >= res["start"] + a.warmup]
    return {
        "sent": s1["received"] - s0["received"],
        "429": s1["rate_limited"] - s0["rate_limited"],
        "completed": res["completed"],
        "p50": pct(ttft, 50),
        "p99": pct(ttft, 99),
        "p99_late": pct(late, 99),
        "p50_late": pct(late, 50),
        "answers": res["answers"],
        "errors": res["errors"],
    }


def proxies(a, tmp, procs, prefix, configs):
    """One sg-proxy per configuration (name, upstream, extra flags), all
    running at once; their ports."""
    ports = []
    for i, (_, upstream, extra) in enumerate(configs):
        p, port = start(
            [a.proxy, "--listen", "127.0.0.1:0", "--upstream", upstream, "--profile",
             "openai", "--max-connections", str(a.clients * 2 + 64), "--log", "/dev/null"]
            + extra, tmp, f"{prefix}{i}")
        procs.append(p)
        ports.append(port)
    return ports


def alternate(a, fm_port, configs, ports, target_of):
    """--runs rounds, each configuration once a round, in turn; the runs of
    each configuration."""
    rows = [(name, []) for name, _, _ in configs]
    for run in range(a.runs):
        for i, (name, _, _) in enumerate(configs):
            r = run_one(ports[i], target_of(run, i), a, fm_port)
            rows[i][1].append(r)
            each_run(f"run {run + 1} {name}", r)
    return rows


def table(title, rows, cols):
    print(f"\n{title}")
    print("| configuration | runs | " + " | ".join(c for c, _ in cols) + " |")
    print("| --- | --- |" + " --- |" * len(cols))
    for name, runs in rows:
        med = []
        for _, key in cols:
            v = statistics.median(r[key] for r in runs)
            med.append(f"{v:.1f}" if isinstance(v, float) else f"{v:g}")
        print(f"| {name} | {len(runs)} | " + " | ".join(med) + " |")


def each_run(label, r):
    print(f"  {label}: sent={r['sent']} 429={r['429']} completed={r['completed']} "
          f"p50={r['p50']:.1f}ms p99={r['p99']:.1f}ms late_p99={r['p99_late']:.1f}ms "
          f"client_saw={r['answers']} errors={r['errors']}", flush=True)


def part1(a, tmp, fm_port, procs):
    up = f"http://127.0.0.1:{fm_port}"
    configs = [("health on (default)", up, []), ("--health off", up, ["--health", "off"])]
    ports = proxies(a, tmp, procs, "rl", configs)
    print(f"part 1: {a.clients} clients, {a.seconds} s a run, upstream limit "
          f"{a.limit} requests per {a.window} ms (n={a.items}, gap={a.gap} ms)", flush=True)
    rows = alternate(a, fm_port, configs, ports, lambda run, i: (
        f"/v1/chat/completions?n={a.items}&gap={a.gap}&rl_requests={a.limit}"
        f"&rl_window={a.window}&rl_key=b{run}c{i}"))
    table("Part 1, medians:", rows,
          [("sent upstream", "sent"), ("429s upstream", "429"), ("completed", "completed"),
           ("TTFT p50 ms", "p50"), ("TTFT p99 ms", "p99")])


def part2(a, tmp, fm_port, procs):
    # nothing listening: a port bound, then let go
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    refused = s.getsockname()[1]
    s.close()
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(1024)
    hung_port = hung.getsockname()[1]
    hung_pid = os.fork()
    if hung_pid == 0:
        async def serve():
            srv = await hung_server(hung)
            await srv.serve_forever()
        asyncio.run(serve())
        os._exit(0)
    hung.close()
    fb = f"http://127.0.0.1:{fm_port}"
    common = ["--first-item", "1s", "--attempts", "3", "--idempotent"]
    configs = []
    for dead_name, dead in (("connect refused", f"http://127.0.0.1:{refused}"),
                            ("hung (accepts, never answers)", f"http://127.0.0.1:{hung_port}")):
        configs.append((f"{dead_name}, with the breaker", dead, ["--fallback", fb] + common))
        configs.append((f"{dead_name}, no breaker", dead,
                        ["--fallback", fb, "--breaker-failures", "0"] + common))
    configs.append(("the fallback alone", fb, common))
    try:
        ports = proxies(a, tmp, procs, "dead", configs)
        print(f"\npart 2: {a.clients} clients, {a.seconds} s a run, the fallback's first "
              f"token after {a.first_delay} ms", flush=True)
        target = f"/v1/chat/completions?n={a.items}&gap={a.gap}&first_delay={a.first_delay}"
        rows = alternate(a, fm_port, configs, ports, lambda run, i: target)
        table(f"Part 2, medians (late: operations started after the first {a.warmup:g} s):",
              rows,
              [("completed", "completed"), ("TTFT p50 ms", "p50"), ("TTFT p99 ms", "p99"),
               ("late p50 ms", "p50_late"), ("late p99 ms", "p99_late")])
    finally:
        os.kill(hung_pid, 9)
        os.waitpid(hung_pid, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--fakemodel", required=True)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--items", type=int, default=5)
    ap.add_argument("--gap", type=int, default=20)
    ap.add_argument("--first-delay", type=int, default=50)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--part", choices=["1", "2", "both"], default="both")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sg-proxy-health.")
    procs = []
    try:
        fm, fm_port = start([a.fakemodel, "--port", "0", "--quiet", "--log-cap", "1000"],
                            tmp, "fm")
        procs.append(fm)
        if a.part in ("1", "both"):
            part1(a, tmp, fm_port, procs)
        if a.part in ("2", "both"):
            part2(a, tmp, fm_port, procs)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
