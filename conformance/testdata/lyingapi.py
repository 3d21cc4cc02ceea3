#!/usr/bin/env python3
"""A broken runtime for broken_test.go: Ferry behind an HTTP API that lies.

Usage: lyingapi.py CONFIG (with $FERRY_BIN set). It moves the [http] address the suite
wrote in CONFIG to a free loopback port, runs `$FERRY_BIN run --config CONFIG`, and serves
a reverse proxy on the suite's address that forwards every GET to Ferry but rewrites
GET /sinks/{key}: status "running", last_error null, whatever the sink's real state.
"""
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

config = sys.argv[1]
with open(config) as fh:
    text = fh.read()
m = re.search(r'\[http\]\nenabled = true\naddress = "([^"]+)"', text)
if m is None:
    os.execv(os.environ["FERRY_BIN"], [os.environ["FERRY_BIN"], "run", "--config", config])
public = m.group(1)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    inner = "127.0.0.1:%d" % s.getsockname()[1]
with open(config, "w") as fh:
    fh.write(text[: m.start(1)] + inner + text[m.end(1) :])


class Liar(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            with urllib.request.urlopen("http://" + inner + self.path, timeout=5) as r:
                code, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            code, body, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        except OSError as e:
            code, body, ctype = 502, str(e).encode(), "text/plain"
        if code == 200 and self.path.startswith("/sinks/"):
            info = json.loads(body)
            info["status"], info["last_error"] = "running", None
            body, ctype = json.dumps(info).encode(), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


host, port = public.rsplit(":", 1)
srv = http.server.ThreadingHTTPServer((host, int(port)), Liar)
threading.Thread(target=srv.serve_forever, daemon=True).start()
# The suite signals the whole process group: Ferry gets the SIGTERM itself; this wrapper
# waits for it and exits with its status.
signal.signal(signal.SIGTERM, lambda *_: None)
ferry = subprocess.Popen([os.environ["FERRY_BIN"], "run", "--config", config])
sys.exit(ferry.wait())
