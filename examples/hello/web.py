"""The example's web front: a page that shows what its own world's API says."""
import os
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API = os.environ["API_URL"]


class Web(BaseHTTPRequestHandler):
    def do_GET(self):
        with urllib.request.urlopen(API + "/hello", timeout=5) as r:
            answer = r.read().decode()
        body = f"<h1>hello from {os.environ.get('BINKY_WORKTREE')}</h1><p>api says {answer}</p>\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        print("web:", fmt % args, flush=True)


# `--port N` (what binky.toml passes), else $PORT.
port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else int(os.environ["PORT"])
print(f"web listening on {port}, api at {API}", flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Web).serve_forever()
