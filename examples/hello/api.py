"""The example's API: answers JSON on $PORT, naming the world it runs in."""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Api(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"world": os.environ.get("BINKY_WORKTREE"), "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        print("api:", fmt % args, flush=True)


port = int(os.environ["PORT"])
print(f"api listening on {port}", flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Api).serve_forever()
