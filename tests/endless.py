"""A real HTTP server on 127.0.0.1 that answers 200 and never stops sending: the peer that must not grow a
reader's memory. ``newlines=False`` sends one line without end; ``served`` counts the bytes it got out."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EndlessServer:
    def __init__(self, *, newlines: bool = True, content_type: str = "application/json") -> None:
        server = self
        self.served = 0
        self.requests = 0
        self.lock = threading.Lock()
        block = (b'{"x":' + b"1" * 1000 + b"}\n") * 64 if newlines else b"[" + b"1," * 32768

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _endless(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                with server.lock:
                    server.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
                try:
                    while True:
                        self.wfile.write(chunk)
                        with server.lock:
                            server.served += len(block)
                except OSError:
                    pass  # the reader cut it: what we want

            do_GET = do_POST = _endless

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
