#!/usr/bin/env python3
"""A loopback stand-in for the Anthropic Messages API, for
tests/integration/claude_code.sh: it answers POST /v1/messages (streamed
or not) with scripted tool calls, one per turn, then a plain "done", and
writes every request it gets as one JSON line to LOG.

Usage: messages_api_stub.py LOG SCRIPT.json
SCRIPT.json is a list of {"name": TOOL, "input": {...}}. The turn is the
number of tool results the conversation already holds, so a request that
repeats a turn gets the same answer. A request that offers no tools (a
title, a summary) is answered "done". Listens on 127.0.0.1 only, on a free
port, and prints the port on its first line of output."""
import http.server
import json
import sys

LOG, SCRIPT = sys.argv[1], json.load(open(sys.argv[2]))


def answer(req):
    """The content block and stop reason for a request."""
    seen = set()
    for m in req.get("messages", []):
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    seen.add(b.get("tool_use_id"))
    turn = len(seen)
    if req.get("tools") and turn < len(SCRIPT):
        step = SCRIPT[turn]
        return ({"type": "tool_use", "id": "toolu_%02d" % turn,
                 "name": step["name"], "input": step["input"]}, "tool_use")
    return {"type": "text", "text": "done"}, "end_turn"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply_json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply_json({})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            req = {}
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "request": req}) + "\n")
        path = self.path.split("?")[0]
        if path != "/v1/messages":  # count_tokens and the like
            self.reply_json({"input_tokens": 1})
            return
        block, stop = answer(req)
        model = req.get("model", "stub")
        usage = {"input_tokens": 1, "output_tokens": 1}
        if not req.get("stream"):
            self.reply_json({"id": "msg_stub", "type": "message", "role": "assistant",
                             "model": model, "content": [block], "stop_reason": stop,
                             "stop_sequence": None, "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(kind, data):
            data["type"] = kind
            self.wfile.write(("event: %s\ndata: %s\n\n" % (kind, json.dumps(data))).encode())

        event("message_start", {"message": {
            "id": "msg_stub", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})
        if block["type"] == "text":
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                "text": block["text"]}})
        else:
            start = dict(block, input={})
            event("content_block_start", {"index": 0, "content_block": start})
            event("content_block_delta", {"index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        event("content_block_stop", {"index": 0})
        event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 1}})
        event("message_stop", {})
        self.wfile.flush()
        self.close_connection = True


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
