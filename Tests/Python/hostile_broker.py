"""A peer that is not a broker, for the Kafka and NATS tests: it listens on a free loopback port
(printed as "port N"), accepts every connection and then, by mode, says nothing and reads
everything (silent), sends garbage without end (garbage), or resets the connection (reset)."""
import socket
import sys
import threading
import time

mode = sys.argv[1]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(50)
print(f"port {s.getsockname()[1]}", flush=True)


def serve(c):
    try:
        if mode == "garbage":
            while True:
                c.sendall(b"\x00\xff-ERR garbage \x7f\r\n" * 64)
                time.sleep(0.05)
        elif mode == "reset":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            c.close()
        else:
            while c.recv(65536):
                pass
    except OSError:
        pass


while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
