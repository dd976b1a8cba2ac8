"""A webhook receiver on loopback for CLITests/WebhookTests: Python's own http.server, taking
lensmetadata's POSTs and writing down each request as it came.

    python3 Tests/Python/webhook_server.py MODE LOG      prints "port N" once it listens

Each request is appended to LOG as one JSON line: method, path, Content-Type, Content-Length
and the body (as text), before it is answered. MODE says how it answers:

    ok        204 No Content
    fail500   500 Internal Server Error
    silent    never: it reads the request and then holds the connection without a word
    endless   200 with a chunked body that never ends (32 KB chunks as fast as they are taken,
              for a minute at most)
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, LOG = sys.argv[1], sys.argv[2]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        with lock, open(LOG, "a") as log:
            log.write(json.dumps({"method": "POST", "path": self.path,
                                  "content_type": self.headers.get("Content-Type"),
                                  "content_length": self.headers.get("Content-Length"),
                                  "body": body.decode("utf-8")}) + "\n")
        if MODE == "silent":
            time.sleep(3600)
        elif MODE == "endless":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            end = time.time() + 60
            try:
                while time.time() < end:
                    self.wfile.write(b"8000\r\n" + b"z" * 32768 + b"\r\n")
            except OSError:
                pass  # the client closed: what it should do
        elif MODE == "fail500":
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(204)
            self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("port", server.server_address[1], flush=True)
server.serve_forever()
