#!/usr/bin/python3
"""The workload identity tests' loopback server: an Entra ID token endpoint
and a blob endpoint that takes only its bearer tokens.

usage: tokenserver.py ASSERTION_FILE BLOB_FILE [--expires-in S] [--log FILE]

Listens on 127.0.0.1 at a free port and prints "port N" first.

  POST /TENANT/oauth2/v2.0/token   the client-assertion exchange: the form
      must hold grant_type=client_credentials, client_assertion_type=...jwt-
      bearer, scope=https://storage.azure.com/.default, client_id=test-client
      and client_assertion equal to ASSERTION_FILE's text (else 400
      invalid_client); answers a new token "tok-N" expiring in S seconds
      (default 3600)
  HEAD/GET /ACCOUNT/CONTAINER/BLOB  BLOB_FILE's bytes as any blob, with an
      ETag, x-ms-range honoured (206 + Content-Range), If-Match checked; a
      request without "Authorization: Bearer tok-N" of a token it gave, or
      without x-ms-version, is 403 AuthenticationFailed

--log FILE: a line per request, "token" or "blob METHOD AUTH-OK", appended.
"""
import http.server
import json
import sys
import threading
import urllib.parse

ETAG = '"0x8DC0000TOKENSRV"'


def main():
    assertion_file, blob_file = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    expires = int(opts.get("--expires-in", "3600"))
    log = opts.get("--log")
    with open(blob_file, "rb") as f:
        blob = f.read()
    tokens = set()
    lock = threading.Lock()

    def note(line):
        if log:
            with lock, open(log, "a") as f:
                f.write(line + "\n")

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, status, headers, body=b"", head=False):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            note("token")
            with open(assertion_file) as f:
                want = f.read().strip()
            good = (self.path.endswith("/oauth2/v2.0/token") and
                    form.get("grant_type") == ["client_credentials"] and
                    form.get("client_assertion_type") ==
                    ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"] and
                    form.get("scope") == ["https://storage.azure.com/.default"] and
                    form.get("client_id") == ["test-client"] and
                    form.get("client_assertion") == [want])
            if not good:
                body = json.dumps({"error": "invalid_client",
                                   "error_description": "AADSTS700211: assertion " + want}).encode()
                return self.answer(400, [("Content-Type", "application/json")], body)
            with lock:
                tok = f"tok-{len(tokens) + 1}"
                tokens.add(tok)
            body = json.dumps({"token_type": "Bearer", "expires_in": expires,
                               "access_token": tok}).encode()
            self.answer(200, [("Content-Type", "application/json")], body)

        def blob(self, head):
            auth = self.headers.get("Authorization", "")
            ok = auth.startswith("Bearer ") and auth[7:] in tokens and "x-ms-version" in self.headers
            note(f"blob {self.command} {'auth-ok' if ok else 'auth-bad'}")
            if not ok:
                return self.answer(403, [("x-ms-error-code", "AuthenticationFailed")], b"", head)
            if self.headers.get("If-Match") not in (None, ETAG):
                return self.answer(412, [("x-ms-error-code", "ConditionNotMet")], b"", head)
            h = [("ETag", ETAG), ("Last-Modified", "Fri, 02 Jan 2026 03:04:05 GMT")]
            rng = self.headers.get("x-ms-range")
            if rng:
                a, b = (int(x) for x in rng.split("=")[1].split("-"))
                b = min(b, len(blob) - 1)
                return self.answer(206, h + [("Content-Range", f"bytes {a}-{b}/{len(blob)}")],
                                   blob[a:b + 1], head)
            self.answer(200, h, blob, head)

        def do_HEAD(self):
            self.blob(True)

        def do_GET(self):
            self.blob(False)

    class S(http.server.ThreadingHTTPServer):
        request_queue_size = 128
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    print(f"port {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
