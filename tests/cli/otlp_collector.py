#!/usr/bin/env python3
"""A test collector for OTLP/HTTP: it takes each POST to /v1/traces, keeps
its body as DIR/NNNN.pb, and answers 200 with an empty
ExportTraceServiceResponse (application/x-protobuf), as a collector does.
It prints its port (it listens on 127.0.0.1:0) on its first line.  The
bodies are read with protoc --decode by otlp_spans.py: nothing here knows
the messages.

Usage: otlp_collector.py DIR
"""
import http.server
import os
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    count = 0

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        ok = (self.path == "/v1/traces" and
              self.headers.get("Content-Type") == "application/x-protobuf")
        if ok:
            Handler.count += 1
            path = os.path.join(sys.argv[1], "%04d.pb" % Handler.count)
            with open(path + ".tmp", "wb") as f:
                f.write(body)
            os.rename(path + ".tmp", path)
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt, *args):
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
