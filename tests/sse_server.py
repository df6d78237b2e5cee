#!/usr/bin/env python3
"""A loopback stand-in for an OpenAI-compatible server that streams its
replies (server-sent events), for tests/integration/stream.sh.

    sse_server.py PORT_FILE RELEASE_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE). Each POST to
/v1/chat/completions is answered with a stream: the text "Hello, partial
world" in two pieces, then nothing until RELEASE_FILE exists (at most 30 s),
then " and the rest." and [DONE]. The request bodies are appended to
PORT_FILE.requests, one JSON per line. Serves at most 4 requests, then
exits; exits after 60 s in any case."""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

port_file, release = sys.argv[1], sys.argv[2]


def chunk(text):
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})
            + "\n\n").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(port_file + ".requests", "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for piece in ("Hello, ", "partial world"):
            self.wfile.write(chunk(piece))
            self.wfile.flush()
            time.sleep(0.05)
        end = time.time() + 30
        while not os.path.exists(release) and time.time() < end:
            self.wfile.write(b": waiting\n\n")  # a comment keeps the line alive
            self.wfile.flush()
            time.sleep(0.1)
        self.wfile.write(chunk(" and the rest."))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


server = HTTPServer(("127.0.0.1", 0), Handler)
threading.Timer(60, lambda: os._exit(0)).start()
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
for _ in range(4):
    server.handle_request()
os._exit(0)
