#!/usr/bin/python3
"""A stand-in for Google's OAuth2 token endpoint (the gs:// tests'): takes
a service account's JWT bearer grant, verifies it, and issues tokens.

usage: tokenserver.py PUBKEY.pem EMAIL TOKENS LOG [--expires-in S] [--refuse]

Listens on 127.0.0.1 at a free port and prints "port N" on its first line.
POST /token with grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and
assertion=JWT: the JWT's header must be {"alg":"RS256","typ":"JWT"}, its
RS256 signature must verify with PUBKEY.pem (the cryptography module), and
its claims must be iss EMAIL, scope devstorage.read_only, aud this
endpoint's URL, iat and exp an hour apart. A grant that passes gets a new
random access token (appended to TOKENS, for gcsproxy.py) with expires_in
S (default 3599); one that does not gets 400 invalid_grant. --refuse
answers every grant 401 unauthorized_client. Each grant is logged to LOG as
"token ok" or "token bad WHY". It is the GCE metadata server's stand-in
too: GET /computeMetadata/v1/instance/service-accounts/default/token with
"Metadata-Flavor: Google" gets a token the same way ("metadata ok"), one
without the header 403 ("metadata bad"). Stops on SIGTERM.
"""
import argparse
import base64
import http.server
import json
import secrets
import sys
import threading
import urllib.parse

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from gcsproxy import serve  # this folder's


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pubkey")
    ap.add_argument("email")
    ap.add_argument("tokens")
    ap.add_argument("log")
    ap.add_argument("--expires-in", type=int, default=3599)
    ap.add_argument("--refuse", action="store_true")
    a = ap.parse_args()
    with open(a.pubkey, "rb") as f:
        pub = serialization.load_pem_public_key(f.read())
    lock = threading.Lock()

    def log(line):
        with lock, open(a.log, "a") as f:
            f.write(line + "\n")

    def verify(form, aud):
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return "grant_type is not jwt-bearer"
        parts = form.get("assertion", [""])[0].split(".")
        if len(parts) != 3:
            return "the assertion is not a JWT"
        if json.loads(b64d(parts[0])) != {"alg": "RS256", "typ": "JWT"}:
            return "header " + b64d(parts[0]).decode()
        try:
            pub.verify(b64d(parts[2]), (parts[0] + "." + parts[1]).encode(),
                       padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            return "the RS256 signature does not verify"
        c = json.loads(b64d(parts[1]))
        want = {"iss": a.email, "scope": "https://www.googleapis.com/auth/devstorage.read_only",
                "aud": aud}
        for k, v in want.items():
            if c.get(k) != v:
                return f"claim {k} is {c.get(k)!r}"
        if not isinstance(c.get("iat"), int) or c.get("exp") != c["iat"] + 3600:
            return "iat and exp are not an hour apart"
        return None

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            ok = (self.path == "/computeMetadata/v1/instance/service-accounts/default/token"
                  and self.headers.get("Metadata-Flavor") == "Google" and not a.refuse)
            log("metadata ok" if ok else "metadata bad " + self.path)
            if not ok:
                return self.answer(403, {"error": "forbidden"})
            self.issue()

        def issue(self):
            tok = "ya29.pinio-test-" + secrets.token_urlsafe(24)
            with lock, open(a.tokens, "a") as f:
                f.write(tok + "\n")
            self.answer(200, {"access_token": tok, "expires_in": a.expires_in,
                              "token_type": "Bearer"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            port = self.server.server_address[1]
            why = "refused (--refuse)" if a.refuse else verify(form, f"http://127.0.0.1:{port}/token")
            log("token ok" if why is None else "token bad " + why)
            if a.refuse:
                return self.answer(401, {"error": "unauthorized_client"})
            if why is not None:
                return self.answer(400, {"error": "invalid_grant", "error_description": why})
            self.issue()

    serve(H)


if __name__ == "__main__":
    sys.exit(main())
