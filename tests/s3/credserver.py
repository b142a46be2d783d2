#!/usr/bin/python3
"""The AWS credential endpoints, on loopback, for the tests.

usage: credserver.py LOG [--keys AK SK] [--expire-in S] [--fail CODE [ERRCODE]]
                         [--malformed] [--hang] [--container-auth TOKEN]
                         [--oidc-fail CODE]

One server answers as every endpoint pinio's credential chain calls:
  POST /  STS: Action=AssumeRoleWithWebIdentity (the WebIdentityToken must
          be "pinio-test-web-identity-token") and Action=AssumeRole (signed:
          an Authorization header with Credential=SOURCE_AK/.../sts/aws4_request);
          XML answers as STS gives them.
  GET /container/..., /v2/credentials/...  the container credentials
          endpoint (JSON; the second as ECS's relative URIs are); with
          --container-auth, the Authorization header must be TOKEN (else 401).
  PUT /latest/api/token, GET /latest/meta-data/iam/security-credentials/[ROLE]
          IMDSv2: the token PUT must carry x-aws-ec2-metadata-token-ttl-seconds,
          each GET the token handed out (else 401).
  GET /federation/credentials?role_name=R&account_id=A  IAM Identity Center's
          GetRoleCredentials: x-amz-sso_bearer_token must be
          "pinio-sso-access-NeverPrint" (else 401 UnauthorizedException);
          JSON roleCredentials with the expiration in milliseconds.
  POST /token  SSO OIDC's CreateToken: the JSON body must be grantType
          "refresh_token", clientId "pinio-sso-client", clientSecret
          "pinio-sso-client-secret-NeverPrint" and refreshToken
          "pinio-sso-refresh-NeverPrint" (else 400 invalid_grant); answers
          accessToken "pinio-sso-access-NeverPrint" (the one GetRoleCredentials
          takes), expiresIn 28800 and refreshToken "pinio-sso-refresh2-NeverPrint";
          --oidc-fail CODE answers CODE instead.
Every answer hands out AK/SK (default s3rver's S3RVER/S3RVER, so that the
data requests signed with them verify) with the session token
"pinio-test-session-NeverPrint", expiring in S seconds (default 3600).
--fail answers every credentials request CODE (with ERRCODE in STS's XML);
--verify-secret SECRET: an AssumeRole's signature must be the one botocore's
SigV4Auth computes with SECRET for the same request (else 403
SignatureDoesNotMatch). --malformed gives an answer without the secret; --hang accepts and never
answers. --listen HOST:PORT binds there (default 127.0.0.1, a free port).
LOG gets one line per request: "METHOD PATH NAME=VALUE..." (the STS form's
Action, RoleArn, RoleSessionName; whether each token was the right one,
never a token). The first line on stdout is "port N".
"""
import argparse
import datetime
import http.server
import json
import sys
import threading
import time
import urllib.parse

TOKEN = "pinio-test-session-NeverPrint"
IMDS_TOKEN = "pinio-imds-token-0123"
SSO_TOKEN = "pinio-sso-access-NeverPrint"
OIDC_WANT = {"grantType": "refresh_token", "clientId": "pinio-sso-client",
             "clientSecret": "pinio-sso-client-secret-NeverPrint",
             "refreshToken": "pinio-sso-refresh-NeverPrint"}
WEB_TOKEN = "pinio-test-web-identity-token"

p = argparse.ArgumentParser()
p.add_argument("log")
p.add_argument("--keys", nargs=2, default=["S3RVER", "S3RVER"])
p.add_argument("--expire-in", type=int, default=3600)
p.add_argument("--fail", nargs="+")
p.add_argument("--malformed", action="store_true")
p.add_argument("--hang", action="store_true")
p.add_argument("--container-auth")
p.add_argument("--verify-secret")
p.add_argument("--oidc-fail", type=int)
p.add_argument("--listen", default="127.0.0.1:0")
a = p.parse_args()
lock = threading.Lock()


def expiry():
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=a.expire_in)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def log(line):
    with lock, open(a.log, "a") as f:
        f.write(line + "\n")


def sigv4_ok(headers, body, secret):
    """Whether Authorization is botocore's SigV4Auth signature of this POST."""
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    auth = headers["Authorization"]
    ak, _, region, service, _ = auth.split("Credential=")[1].split(",")[0].split("/")
    t = datetime.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")

    class Fixed(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return t

    botocore.auth.datetime.datetime = Fixed  # botocore 1.29 signs at utcnow()
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    req = botocore.awsrequest.AWSRequest(
        method="POST", url=f"http://{headers['Host']}/", data=body,
        headers={h: headers[h] for h in signed if h not in ("host", "x-amz-security-token")})
    creds = botocore.credentials.Credentials(ak, secret, headers.get("X-Amz-Security-Token"))
    botocore.auth.SigV4Auth(creds, service, region).add_auth(req)
    return req.headers["Authorization"] == auth


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype="application/json"):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def hang(self):
        if a.hang:
            time.sleep(30)
            return True
        return False

    def creds_json(self):
        if a.fail:
            return self.send(int(a.fail[0]), '{"message": "refused by the test"}')
        d = {"Code": "Success", "AccessKeyId": a.keys[0], "Token": TOKEN, "Expiration": expiry()}
        if not a.malformed:
            d["SecretAccessKey"] = a.keys[1]
        self.send(200, json.dumps(d))

    def do_PUT(self):
        log(f"PUT {self.path} ttl={self.headers.get('x-aws-ec2-metadata-token-ttl-seconds')}")
        if self.hang():
            return
        if self.path != "/latest/api/token" or not self.headers.get("x-aws-ec2-metadata-token-ttl-seconds"):
            return self.send(400, "bad token request", "text/plain")
        self.send(200, IMDS_TOKEN, "text/plain")

    def sso_json(self):
        sso = self.headers.get("x-amz-sso_bearer_token")
        if sso != SSO_TOKEN:
            return self.send(401, '{"__type": "UnauthorizedException", '
                             '"message": "Session token not found or invalid"}')
        if a.fail:
            return self.send(int(a.fail[0]), '{"message": "refused by the test"}')
        ms = int((time.time() + a.expire_in) * 1000)
        d = {"accessKeyId": a.keys[0], "sessionToken": TOKEN, "expiration": ms}
        if not a.malformed:
            d["secretAccessKey"] = a.keys[1]
        self.send(200, json.dumps({"roleCredentials": d}))

    def do_GET(self):
        tok = self.headers.get("x-aws-ec2-metadata-token")
        auth = self.headers.get("Authorization")
        sso = self.headers.get("x-amz-sso_bearer_token")
        log(f"GET {self.path} token={'ok' if tok == IMDS_TOKEN else tok} "
            f"auth={'ok' if auth and auth == a.container_auth else auth} "
            f"sso={'ok' if sso == SSO_TOKEN else 'none' if sso is None else 'wrong'}")
        if self.hang():
            return
        if self.path.startswith("/federation/credentials?"):
            return self.sso_json()
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path.startswith(base):
            if tok != IMDS_TOKEN:
                return self.send(401, "no token", "text/plain")
            if self.path == base:
                return self.send(200, "pinio-test-role", "text/plain")
            if self.path == base + "pinio-test-role":
                return self.creds_json()
            return self.send(404, "no such role", "text/plain")
        if self.path.startswith(("/container/", "/v2/credentials/")):
            if a.container_auth and auth != a.container_auth:
                return self.send(401, '{"message": "bad authorization"}')
            return self.creds_json()
        self.send(404, "not here", "text/plain")

    def create_token(self, raw):
        """SSO OIDC CreateToken, as botocore's sso-oidc client calls it."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        ok = isinstance(body, dict) and {k: body.get(k) for k in OIDC_WANT} == OIDC_WANT
        extra = sorted(set(body) - set(OIDC_WANT)) if isinstance(body, dict) else []
        log(f"POST /token ctype={self.headers.get('Content-Type')} body={'ok' if ok else 'wrong'}"
            f"{' extra=' + ','.join(extra) if extra else ''}")
        if self.hang():
            return
        if a.oidc_fail:
            return self.send(a.oidc_fail, '{"error": "server_error", '
                             '"error_description": "refused by the test"}')
        if not ok or extra:
            return self.send(400, '{"error": "invalid_grant", '
                             '"error_description": "Invalid refresh token provided"}')
        self.send(200, json.dumps({"accessToken": SSO_TOKEN, "tokenType": "Bearer",
                                   "expiresIn": 28800,
                                   "refreshToken": "pinio-sso-refresh2-NeverPrint"}))

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        if self.path == "/token":
            return self.create_token(raw)
        form = urllib.parse.parse_qs(raw.decode())
        f = {k: v[0] for k, v in form.items()}
        auth = self.headers.get("Authorization", "")
        cred = auth.split("Credential=")[1].split(",")[0] if "Credential=" in auth else ""
        log(f"POST {self.path} Action={f.get('Action')} RoleArn={f.get('RoleArn')} "
            f"RoleSessionName={f.get('RoleSessionName')} Credential={cred}")
        if self.hang():
            return
        action = f.get("Action", "")
        err = None
        if a.fail:
            err = (int(a.fail[0]), a.fail[1] if len(a.fail) > 1 else "AccessDenied")
        elif action == "AssumeRoleWithWebIdentity" and f.get("WebIdentityToken") != WEB_TOKEN:
            err = (400, "InvalidIdentityToken")
        elif action == "AssumeRole" and "/sts/aws4_request" not in cred:
            err = (403, "IncompleteSignature")
        elif action == "AssumeRole" and a.verify_secret and not sigv4_ok(self.headers, raw, a.verify_secret):
            err = (403, "SignatureDoesNotMatch")
        elif action not in ("AssumeRole", "AssumeRoleWithWebIdentity"):
            err = (400, "InvalidAction")
        if err:
            return self.send(err[0], "<ErrorResponse><Error><Type>Sender</Type>"
                             f"<Code>{err[1]}</Code><Message>refused by the test</Message>"
                             "</Error></ErrorResponse>", "text/xml")
        secret = "" if a.malformed else f"<SecretAccessKey>{a.keys[1]}</SecretAccessKey>"
        self.send(200, f"<{action}Response><{action}Result><Credentials>"
                  f"<AccessKeyId>{a.keys[0]}</AccessKeyId>{secret}"
                  f"<SessionToken>{TOKEN}</SessionToken><Expiration>{expiry()}</Expiration>"
                  f"</Credentials></{action}Result></{action}Response>", "text/xml")


host, _, port = a.listen.rpartition(":")
srv = http.server.ThreadingHTTPServer((host, int(port)), H)
srv.daemon_threads = True
print(f"port {srv.server_address[1]}", flush=True)
srv.serve_forever()
