#!/usr/bin/python3
"""A stand-in for Cloud Storage's XML API (the gs:// tests'): checks each
request's Google-side authorisation, then forwards it to an S3 server.

usage: gcsproxy.py UPSTREAM_URL LOG --auth anon|hmac:ID:SECRET|bearer:FILE

Listens on 127.0.0.1 at a free port and prints "port N" on its first line.
--auth says what every request must carry:

  anon          no Authorization header and no x-amz-* signing headers
  hmac:ID:SECRET  an AWS4-HMAC-SHA256 signature with the HMAC key ID /
                SECRET over the credential scope DATE/auto/s3/aws4_request
                (the XML API's interoperable signing), recomputed here from
                the request as received; Host, x-amz-date,
                x-amz-content-sha256 and any Range / If-Match signed
  bearer:FILE   "Authorization: Bearer T" with T one of FILE's lines (the
                tokens tests/gcs/tokenserver.py issued), and no x-amz-*

A request that passes is forwarded to UPSTREAM_URL (s3rver) without its
signature (the upstream's own keys are not Google's), and the answer sent
back unchanged (its body as it comes: one the upstream cuts or resets is
cut or reset here too, so tests/s3/faultproxy.py can stand behind this
proxy); one that fails gets 403 AccessDenied and is not forwarded.
Each request is logged to LOG as "METHOD PATH auth-ok" or "METHOD PATH
auth-bad WHY". Stops on SIGTERM; writes nothing else.
"""
import argparse
import hashlib
import hmac
import http.client
import http.server
import socket
import struct
import sys
import threading
import urllib.parse


def canonical_query(q):
    pairs = []
    for part in q.split("&") if q else []:
        n, _, v = part.partition("=")
        n, v = urllib.parse.unquote(n), urllib.parse.unquote(v)
        pairs.append((urllib.parse.quote(n, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def hmac_check(method, raw_path, headers, ident, secret):
    """None when the request's signature is the one ID/SECRET makes, else why not."""
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no AWS4-HMAC-SHA256 Authorization"
    fields = dict(f.strip().split("=", 1) for f in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = fields.get("Credential", "").split("/")
    if len(scope) != 5 or scope[0] != ident or scope[2:] != ["auto", "s3", "aws4_request"]:
        return "credential scope " + "/".join(scope[1:]) + " is not DATE/auto/s3/aws4_request of the key"
    signed = fields.get("SignedHeaders", "").split(";")
    for need in ["host", "x-amz-date", "x-amz-content-sha256"] + \
            [h for h in ("range", "if-match") if headers.get(h)]:
        if need not in signed:
            return f"{need} not signed"
    amz_date = headers.get("x-amz-date", "")
    if scope[1] != amz_date[:8]:
        return "the scope's date is not x-amz-date's"
    path, _, query = raw_path.partition("?")
    canon = "\n".join([
        method, path, canonical_query(query),
        "".join(f"{h}:{' '.join((headers.get(h) or '').split())}\n" for h in signed),
        ";".join(signed), headers.get("x-amz-content-sha256", "")])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "/".join(scope[1:]),
                     hashlib.sha256(canon.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in scope[1:]:
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(want, fields.get("Signature", "")) else "signature mismatch"


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def serve(handler):
    """Serves `handler` on 127.0.0.1 at a free port, said as "port N" first."""
    srv = Server(("127.0.0.1", 0), handler)
    print(f"port {srv.server_address[1]}", flush=True)
    srv.serve_forever()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("upstream")
    ap.add_argument("log")
    ap.add_argument("--auth", required=True)
    a = ap.parse_args()
    up = urllib.parse.urlparse(a.upstream)
    kind, _, rest = a.auth.partition(":")
    ident, _, secret = rest.partition(":")
    lock = threading.Lock()

    def log(line):
        with lock, open(a.log, "a") as f:
            f.write(line + "\n")

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def check(self):
            h = self.headers
            if kind == "anon":
                if h.get("Authorization") or any(k.lower().startswith("x-amz-") for k in h):
                    return "an anonymous request carries a signature"
                return None
            if kind == "bearer":
                auth = h.get("Authorization", "")
                with open(rest) as f:
                    issued = set(f.read().split())
                if any(k.lower().startswith("x-amz-") for k in h):
                    return "a bearer request carries x-amz- headers"
                if not auth.startswith("Bearer ") or auth[7:] not in issued:
                    return "no Bearer token the token server issued"
                return None
            return hmac_check(self.command, self.path, h, ident, secret)

        def handle_one(self):
            why = self.check()
            log(f"{self.command} {self.path} " + ("auth-ok" if why is None else "auth-bad " + why))
            if why is not None:
                body = b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code></Error>"
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            fwd = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("authorization", "host") and not k.lower().startswith("x-amz-")}
            c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
            c.request(self.command, self.path, headers=fwd)
            r = c.getresponse()
            n = r.getheader("Content-Length")
            body = b"" if n is not None and n.isdigit() else r.read()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length", "date", "server"):
                    self.send_header(k, v)
            self.send_header("Content-Length", n if n is not None and n.isdigit() else str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                c.close()
                return
            if body:
                self.wfile.write(body)
            else:
                self.relay(r, int(n))
            c.close()

        def relay(self, r, left):
            """The body as it comes, so that an answer the upstream cuts (a
            fault proxy behind this one) reaches the client cut the same
            way: a reset stays a reset, a short body a short body."""
            reset = False
            try:
                while left:
                    chunk = r.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
            except ConnectionResetError:
                reset = True
            except (http.client.IncompleteRead, OSError):
                pass
            if left:
                self.wfile.flush()
                if reset:  # SO_LINGER 0: the close sends a RST
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                self.close_connection = True

        do_GET = do_HEAD = handle_one

    serve(H)


if __name__ == "__main__":
    sys.exit(main())
