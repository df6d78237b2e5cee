#!/usr/bin/env python3
"""A loopback HTTP server for the webfetch tests.

Listens on 127.0.0.1 on a port the system picks, prints that port on one
line of stdout, then serves until killed. Paths:

  /page.html       an HTML page (script, style, head, entities, a list)
  /redirect        302 to /page.html
  /redirect-to?u=  302 to the URL u
  /nowhere         302 without a Location, with a text
  /loop?n=K        302 to /loop?n=K+1, for ever
  /chain?left=K    302 to /chain?left=K-1 until K is 0, then a text
  /big             3 MiB of text/plain ("0123456789" repeated, no newline)
  /bin             5000 bytes of application/octet-stream (Content-Length)
  /bin-stream      image/png of unknown length (read until the close)
  /latin1          text/plain; charset=ISO-8859-1
  /meta1252        text/html whose <meta> says windows-1252
  /latin2          text/plain; charset=ISO-8859-2
  /json            application/json
  /missing         404 with an HTML body
  /slow            answers after 5 s
"""
import http.server
import sys
import time
import urllib.parse

PAGE = b"""<!DOCTYPE html>
<html><head><title>Ignored title</title>
<style>body { color: red; }</style>
<script>var secret = "not text";</script>
</head>
<body>
<h1>Fetch   test</h1>
<p>Fish &amp; chips &lt;3 &quot;quoted&quot; it&#39;s &#x263A; &#9731;&nbsp;ok</p>
<ul><li>one</li><li>two</li></ul>
<script type="text/javascript">document.write("<p>hidden</p>");</script>
<!-- a comment -->
<div>last<br>line</div>
</body></html>
"""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def reply(self, status, ctype, body, length=True, headers=()):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        if length:
            self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def redirect(self, where):
        self.reply(302, "text/html", b"<p>moved</p>", headers=[("Location", where)])

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        p = url.path
        if p == "/page.html":
            self.reply(200, "text/html; charset=utf-8", PAGE)
        elif p == "/redirect":
            self.redirect("/page.html")
        elif p == "/redirect-to":
            self.redirect(urllib.parse.parse_qs(url.query)["u"][0])
        elif p == "/nowhere":
            self.reply(302, "text/plain", b"moved nowhere")
        elif p == "/loop":
            n = int(urllib.parse.parse_qs(url.query).get("n", ["0"])[0])
            self.redirect("/loop?n=%d" % (n + 1))
        elif p == "/chain":
            left = int(urllib.parse.parse_qs(url.query)["left"][0])
            if left > 0:
                self.redirect("/chain?left=%d" % (left - 1))
            else:
                self.reply(200, "text/plain", b"end of chain")
        elif p == "/big":
            self.reply(200, "text/plain", b"0123456789" * ((3 << 20) // 10))
        elif p == "/bin":
            self.reply(200, "application/octet-stream", bytes(range(256)) * 19 + bytes(136))
        elif p == "/bin-stream":
            self.reply(200, "image/png", b"\x89PNG" + bytes(20000), length=False)
        elif p == "/latin1":
            self.reply(200, "text/plain; charset=ISO-8859-1", b"caf\xe9 cr\xe8me")
        elif p == "/meta1252":
            self.reply(200, "text/html",
                       b'<html><head><meta charset="windows-1252"></head>'
                       b"<body><p>\x80 5 \x93quoted\x94</p></body></html>")
        elif p == "/latin2":
            self.reply(200, "text/plain; charset=ISO-8859-2", b"\xb1\xe6")
        elif p == "/json":
            self.reply(200, "application/json", b'{"answer": 42}')
        elif p == "/missing":
            self.reply(404, "text/html", b"<html><body><h1>Not here</h1></body></html>")
        elif p == "/slow":
            time.sleep(5)
            self.reply(200, "text/plain", b"late")
        else:
            self.reply(404, "text/plain", b"no such path")


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
