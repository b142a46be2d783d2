#!/usr/bin/python3
"""pinio's S3 requests against botocore's, request by request.

usage: botocore_check.py SIGN_TOOL      (exit 0: all agree; 1: a difference; 77: no botocore)
       botocore_check.py --creds        (the credentials botocore resolves here)

--creds prints what botocore's default credential chain resolves from this
environment, as "METHOD ACCESS_KEY SHA256(SECRET)[:16] SHA256(TOKEN)[:16]"
("none" when nothing, "error CLASS" when botocore raises), for tests/s3/s3_creds_test.sh to hold beside what
pinio fetched from the same endpoints. botocore 1.29 reads no
AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL_SSO, AWS_ENDPOINT_URL_SSO_OIDC (the
service-specific endpoint variables came in 1.31) nor AWS_REGION: they are
passed on to it here (so its SSOTokenProvider refreshes a cached SSO token
at the tests' CreateToken, and writes the cache file as it does).

For each case, the same request (GET with Range, HEAD, If-Match, ListObjectsV2
with prefix/continuation-token, keys with spaces, + = & ~ % and UTF-8, a
session token, virtual-hosted and path-style, custom endpoints with a port or
a path) is signed at one fixed time by botocore's S3 client (its S3SigV4Auth,
the request captured before it is sent) and by pinio (SIGN_TOOL, built from
tests/s3/sign_tool.c, with the configuration in its environment). The URL,
every header botocore signs and the Authorization value must be identical.
Run with Debian's /usr/bin/python3 (python3-botocore).
"""
import calendar
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

if sys.argv[1:2] in (["-h"], ["--help"]) or len(sys.argv) != 2:
    print(__doc__.strip())
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)

try:
    import botocore.auth
    import botocore.exceptions
    import botocore.session
    from botocore import UNSIGNED
    from botocore.config import Config
except ImportError as e:
    print(f"SKIP: botocore is not installed ({e}); scripts/bootstrap installs python3-botocore")
    sys.exit(77)


def resolve_creds():
    import hashlib
    urls = {"sts": os.environ.get("AWS_ENDPOINT_URL_STS"),
            "sso": os.environ.get("AWS_ENDPOINT_URL_SSO"),
            "sso-oidc": os.environ.get("AWS_ENDPOINT_URL_SSO_OIDC")}
    # botocore 1.29 reads AWS_DEFAULT_REGION only; later ones AWS_REGION too.
    if "AWS_REGION" in os.environ:
        os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    create = botocore.session.Session.create_client

    def create_client(self, service_name, *args, **kwargs):
        if urls.get(service_name):
            kwargs["endpoint_url"] = urls[service_name]
        return create(self, service_name, *args, **kwargs)

    botocore.session.Session.create_client = create_client
    try:  # deferred sources (SSO, assume-role) fetch at get_frozen_credentials
        c = botocore.session.Session().get_credentials()
        if c is None:
            return "none"
        f = c.get_frozen_credentials()
    except botocore.exceptions.BotoCoreError as e:
        return f"error {type(e).__name__}"
    h = lambda v: hashlib.sha256(v.encode()).hexdigest()[:16] if v else "-"
    return f"{c.method} {f.access_key} {h(f.secret_key)} {h(f.token)}"


if sys.argv[1] == "--creds":
    print(resolve_creds())
    sys.exit(0)

TOOL = sys.argv[1]
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)
EPOCH = calendar.timegm(NOW.timetuple())
AK, SK = "AKIDPINIOTEST", "pinio/Secret+Key=ForTests0123456789abcd"
TOKEN = "IQoJb3JpZ2luX2VjE/+session=token//ABCdef=="


class _Fixed(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return cls(NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second)


# botocore 1.29's SigV4 signers read datetime.datetime.utcnow(): one fixed time for both signers.
botocore.auth.datetime.datetime = _Fixed


class Captured(Exception):
    pass


def _capture(request, **_):
    raise Captured(request)


def botocore_request(case):
    cfg = {"retries": {"max_attempts": 0}}
    if case.get("anonymous"):
        cfg["signature_version"] = UNSIGNED
    cfg["s3"] = {"addressing_style": case["style"], "us_east_1_regional_endpoint": "regional"}
    client = botocore.session.Session().create_client(
        "s3", region_name=case.get("region", "us-east-1"), endpoint_url=case.get("endpoint"),
        aws_access_key_id=None if case.get("anonymous") else AK,
        aws_secret_access_key=None if case.get("anonymous") else SK,
        aws_session_token=TOKEN if case.get("token") else None, config=Config(**cfg))
    client.meta.events.register("before-send.s3", _capture)
    try:
        getattr(client, case["op"])(**case["args"])
    except Captured as c:
        r = c.args[0]
        headers = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in r.headers.items()}
        return r.method, r.url, headers
    raise AssertionError("botocore sent nothing")


def pinio_request(case, home):
    method, url_b, hdr_b = case["botocore"]
    args = case["args"]
    key = args.get("Key", "")
    cmd = [TOOL, method, args["Bucket"], key, str(EPOCH)]
    # The query in botocore's order (the signer sorts it; the URL keeps it), raw values from the case.
    for pair in filter(None, urllib.parse.urlsplit(url_b).query.split("&")):
        name = urllib.parse.unquote(pair.partition("=")[0])
        if name not in case["query"]:
            raise AssertionError(f"botocore sent query parameter {name!r} the case does not give")
        cmd += ["-q", name, case["query"][name]]
    for h in case.get("headers", []):
        cmd += ["-H", h]
    env = {"PATH": "/usr/bin:/bin", "HOME": home,
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(home, "credentials"),
           "AWS_CONFIG_FILE": os.path.join(home, "config"),
           "AWS_REGION": case.get("region", "us-east-1")}
    if case.get("anonymous"):
        env["AWS_NO_SIGN_REQUEST"] = "true"
    elif case.get("profile"):
        env["AWS_PROFILE"] = "ci"
        with open(env["AWS_SHARED_CREDENTIALS_FILE"], "w") as f:
            f.write(f"[ci]\naws_access_key_id = {AK}\naws_secret_access_key = {SK}\n")
    else:
        env.update(AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK)
    if case.get("token"):
        env["AWS_SESSION_TOKEN"] = TOKEN
    if case.get("endpoint"):
        env["AWS_ENDPOINT_URL"] = case["endpoint"]
    env.update(case.get("env", {}))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AssertionError(f"sign tool failed ({out.returncode}): {out.stderr.strip()}")
    url, headers = None, {}
    for line in out.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "URL":
            url = rest
        else:
            name, _, value = rest.partition(": ")
            headers[name.lower()] = value
    return url, headers


def compare(case, home):
    method, url_b, hdr_b = case["botocore"] = botocore_request(case)
    url_p, hdr_p = pinio_request(case, home)
    problems = []
    if url_p != url_b:
        problems.append(f"URL: pinio {url_p} botocore {url_b}")
    auth = hdr_b.get("authorization")
    if case.get("anonymous"):
        signed = []
        if auth or "authorization" in hdr_p:
            problems.append("an anonymous request carries Authorization")
    else:
        signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    parts = urllib.parse.urlsplit(url_b)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host_b = parts.hostname if parts.port == default else parts.netloc
    if hdr_p.get("host") != host_b:
        problems.append(f"Host: pinio {hdr_p.get('host')} botocore {host_b}")
    for name in signed:
        if name != "host" and hdr_p.get(name) != hdr_b.get(name):
            problems.append(f"{name}: pinio {hdr_p.get(name)!r} botocore {hdr_b.get(name)!r}")
    if hdr_p.get("authorization") != auth:
        problems.append(f"Authorization:\n  pinio    {hdr_p.get('authorization')}\n  botocore {auth}")
    # Nothing sent that botocore does not send (its User-Agent and amz-sdk-* are its own).
    for name in hdr_p:
        if name not in hdr_b and name not in ("host", "user-agent"):
            problems.append(f"pinio sends {name}, botocore does not")
    return problems


KEY = "dir one/a b+c=d&e~f%g/\u00e9\u00fc\u4e2d.safetensors"
CASES = [
    {"name": "aws virtual-hosted GET with Range", "region": "us-west-2", "style": "virtual",
     "op": "get_object", "args": {"Bucket": "models", "Key": "llama/model-00001-of-00002.safetensors",
                                  "Range": "bytes=0-9"}, "headers": ["Range: bytes=0-9"]},
    {"name": "aws us-east-1 HEAD", "style": "virtual", "op": "head_object",
     "args": {"Bucket": "models", "Key": "model.safetensors"}},
    {"name": "key with + = & ~ % spaces UTF-8, If-Match and Range", "region": "eu-central-1",
     "style": "virtual", "op": "get_object",
     "args": {"Bucket": "models", "Key": KEY, "Range": "bytes=8-1048583", "IfMatch": '"9b2cf535f27731c974343645a3985328"'},
     "headers": ["Range: bytes=8-1048583", 'If-Match: "9b2cf535f27731c974343645a3985328"']},
    {"name": "session token", "region": "ap-southeast-2", "style": "virtual", "token": True,
     "op": "head_object", "args": {"Bucket": "models", "Key": KEY, "IfMatch": '"etag"'},
     "headers": ['If-Match: "etag"']},
    {"name": "ListObjectsV2 with prefix, continuation token, delimiter", "region": "us-west-2",
     "style": "virtual", "op": "list_objects_v2",
     "args": {"Bucket": "models", "Prefix": "ckpt dir/\u00fc+=&~%/", "ContinuationToken": "1+a/b=c==",
              "Delimiter": "/", "MaxKeys": 1000, "StartAfter": "ckpt dir/a b"},
     "query": {"list-type": "2", "prefix": "ckpt dir/\u00fc+=&~%/", "continuation-token": "1+a/b=c==",
               "delimiter": "/", "max-keys": "1000", "start-after": "ckpt dir/a b", "encoding-type": "url"}},
    {"name": "path-style custom endpoint with port, GET Range", "endpoint": "http://127.0.0.1:9000",
     "style": "path", "op": "get_object",
     "args": {"Bucket": "models", "Key": KEY, "Range": "bytes=0-7"}, "headers": ["Range: bytes=0-7"]},
    {"name": "path-style custom https endpoint, ListObjectsV2", "endpoint": "https://minio.example.com:9443",
     "style": "path", "op": "list_objects_v2", "args": {"Bucket": "ckpts", "Prefix": "run 7/"},
     "query": {"list-type": "2", "prefix": "run 7/", "encoding-type": "url"}},
    {"name": "dotted bucket at AWS goes path-style", "region": "us-west-2", "style": "path",
     "op": "get_object", "args": {"Bucket": "my.models", "Key": "a/b.safetensors", "Range": "bytes=0-0"},
     "headers": ["Range: bytes=0-0"]},
    {"name": "virtual-hosted forced on a custom endpoint", "endpoint": "http://s3.local:9000",
     "style": "virtual", "env": {"PINIO_S3_ADDRESSING": "virtual"}, "op": "head_object",
     "args": {"Bucket": "models", "Key": "x.safetensors"}},
    {"name": "path-style forced at AWS, keys from a profile", "region": "eu-west-1", "style": "path",
     "profile": True, "env": {"PINIO_S3_ADDRESSING": "path"}, "op": "get_object",
     "args": {"Bucket": "models", "Key": "a+b.safetensors", "Range": "bytes=100-199"},
     "headers": ["Range: bytes=100-199"]},
    {"name": "unnormalised key (// ./ ../) is signed as sent", "endpoint": "http://127.0.0.1:9000",
     "style": "path", "op": "head_object", "args": {"Bucket": "models", "Key": "a//b/./c/../d"}},
    {"name": "custom endpoint behind a path, ListObjectsV2", "endpoint": "http://127.0.0.1:9000/s3/proxy/",
     "style": "path", "op": "list_objects_v2", "args": {"Bucket": "models", "Prefix": "a/"},
     "query": {"list-type": "2", "prefix": "a/", "encoding-type": "url"}},
    {"name": "custom endpoint behind a path, GET", "endpoint": "http://127.0.0.1:9000/s3/proxy",
     "style": "path", "op": "get_object", "args": {"Bucket": "models", "Key": KEY, "Range": "bytes=0-0"},
     "headers": ["Range: bytes=0-0"]},
    {"name": "anonymous HEAD", "region": "us-west-2", "style": "virtual", "anonymous": True,
     "op": "head_object", "args": {"Bucket": "public-models", "Key": KEY}},
]


def main():
    tag = os.environ.get("PINIO_TEST_RUN") or f"p{os.getpid()}"
    fails = 0
    for case in CASES:
        home = tempfile.mkdtemp(prefix=f"pinio-{tag}-s3botocore-", dir="/tmp")
        try:
            case.setdefault("query", {})
            problems = compare(case, home)
        except AssertionError as e:
            problems = [str(e)]
        finally:
            shutil.rmtree(home, ignore_errors=True)
        # Criterion's verdict lines, so scripts/lib/testcount.py counts each request as a case.
        slug = "botocore::" + re.sub(r"\W+", "_", case["name"]).strip("_")
        if problems:
            fails += 1
            print(f"[FAIL] {slug}: {case['name']}")
            for p in problems:
                print(f"  {p}")
        else:
            print(f"[PASS] {slug}: {case['botocore'][1]}")
    print(f"{len(CASES) - fails} of {len(CASES)} requests identical to botocore's")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
