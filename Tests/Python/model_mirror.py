"""A model mirror on loopback for CLITests/ModelsTests: a real HTTP server (Python's http.server)
serving the files of a folder, well or badly, so `streamlens models fetch` meets each way a
download goes wrong.

    python3 Tests/Python/model_mirror.py FOLDER      prints "port N" once it listens on 127.0.0.1

GET /MODE/NAME answers FOLDER/NAME as MODE says:
    good     the file
    corrupt  the file with one byte changed (same size)
    short    the first half only, with a Content-Length that says so (a truncated copy)
    drop     a Content-Length for the whole file, half of it, then the connection is cut
    stall    a Content-Length for the whole file, half of it, then nothing (until the client gives up)
    anything else, or a file that is not there: 404
Every request is logged to stderr as "GET /MODE/NAME".
"""
import http.server
import os
import socket
import struct
import sys
import time

FOLDER = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        print(f"GET {self.path}", file=sys.stderr, flush=True)

    def do_GET(self):
        parts = self.path.strip("/").split("/", 1)
        path = os.path.join(FOLDER, parts[1]) if len(parts) == 2 else ""
        if len(parts) != 2 or parts[0] not in ("good", "corrupt", "short", "drop", "stall") or not os.path.isfile(path):
            self.send_error(404, "Not Found")
            return
        mode = parts[0]
        with open(path, "rb") as f:
            body = f.read()
        if mode == "corrupt":
            b = bytearray(body)
            b[len(b) // 2] ^= 0xFF
            body = bytes(b)
        half = body[: len(body) // 2]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(half) if mode == "short" else len(body)))
        self.end_headers()
        if mode in ("good", "corrupt"):
            self.wfile.write(body)
        elif mode == "short":
            self.wfile.write(half)
        elif mode == "drop":
            self.wfile.write(half)
            self.wfile.flush()
            # An abortive close (RST): the server went away mid-download.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif mode == "stall":
            self.wfile.write(half)
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
