#!/usr/bin/python3
"""A bucket in another region, on loopback, for the tests.

usage: regionproxy.py UPSTREAM LOG REGION [--pingpong OTHER] [--deny]

Relays requests to UPSTREAM (s3rver's URL) when their signature's scope
(Authorization's Credential=.../DATE/REGION/s3/...) is REGION; answers any
other region as S3 does a bucket elsewhere: 301 PermanentRedirect with
x-amz-bucket-region: REGION (a HEAD: the header and no body). --pingpong
OTHER: a request in REGION is sent on to OTHER too (a store that never
settles); --deny: a request in REGION is answered 403 AccessDenied.
LOG gets "METHOD REGION" per request; stdout's first line is "port N".
"""
import http.client
import http.server
import sys
import threading
import urllib.parse

up = urllib.parse.urlparse(sys.argv[1])
LOG, REGION = sys.argv[2], sys.argv[3]
PING = sys.argv[sys.argv.index("--pingpong") + 1] if "--pingpong" in sys.argv else None
DENY = "--deny" in sys.argv
lock = threading.Lock()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, headers, body, length=None):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)) if length is None else length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def relay(self):
        auth = self.headers.get("Authorization", "")
        region = auth.split("Credential=")[1].split("/")[2] if "Credential=" in auth else "-"
        with lock, open(LOG, "a") as f:
            f.write(f"{self.command} {region}\n")
        if region != REGION or PING:
            to = PING if region == REGION else REGION
            return self.answer(301, [("x-amz-bucket-region", to), ("Content-Type", "application/xml")],
                               b"<Error><Code>PermanentRedirect</Code><Message>another region"
                               b"</Message></Error>")
        if DENY:
            return self.answer(403, [("Content-Type", "application/xml")],
                               b"<Error><Code>AccessDenied</Code></Error>")
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        c.request(self.command, self.path, headers=dict(self.headers))
        r = c.getresponse()
        body = r.read()
        hs = [(k, v) for k, v in r.getheaders() if k.lower() not in ("content-length", "transfer-encoding", "connection")]
        # A HEAD's length is the object's, not its (empty) body's.
        self.answer(r.status, hs, body, r.getheader("Content-Length") if self.command == "HEAD" else None)
        c.close()

    do_GET = do_HEAD = relay


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
print(f"port {srv.server_address[1]}", flush=True)
srv.serve_forever()
