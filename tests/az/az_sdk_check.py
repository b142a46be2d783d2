#!/usr/bin/python3
"""pinio's Azure SharedKey signatures against the Azure SDK's, request by request.

usage: az_sdk_check.py SIGN_TOOL   (exit 0: all agree; 1: a difference; 77: no SDK)

For each case (a HEAD, a GET with x-ms-range, with If-Match, a List Blobs
page with prefix and marker, blob names with spaces, + = & ~ % and UTF-8,
Azurite's path-style endpoint and the https:// form's default one), pinio
(SIGN_TOOL, built from tests/s3/sign_tool.c, with a connection string in
its environment) builds and signs the request at one fixed time; the Azure
SDK's own SharedKeyCredentialPolicy (Debian's python3-azure) then signs that
same request (method, URL, headers but Authorization). The two Authorization
values must be identical. Run with Debian's /usr/bin/python3.
"""
import os
import subprocess
import sys


def _sdk():
    """The SDK's SharedKey policy and request types, or a skip (77) saying why."""
    try:
        from azure.core.pipeline import PipelineContext, PipelineRequest
        from azure.core.pipeline.transport import HttpRequest
        from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy
    except ImportError as e:
        print(f"SKIP: the Azure SDK is not installed ({e}); scripts/bootstrap installs python3-azure")
        sys.exit(77)
    return PipelineContext, PipelineRequest, HttpRequest, SharedKeyCredentialPolicy


if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
PipelineContext, PipelineRequest, HttpRequest, SharedKeyCredentialPolicy = _sdk()
TOOL = sys.argv[1]
EPOCH = "1767323045"  # 2026-01-02 03:04:05 UTC
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE = f"AccountName=devstoreaccount1;AccountKey={KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1"
PUBLIC = f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY};EndpointSuffix=core.windows.net"

CASES = [  # (connection string, account, method, bucket, key, [-q/-H args])
    (AZURITE, "devstoreaccount1", "HEAD", "az://models", "one/model.safetensors", []),
    (AZURITE, "devstoreaccount1", "GET", "az://models", "one/model.safetensors",
     ["-H", "x-ms-range: bytes=0-262143"]),
    (AZURITE, "devstoreaccount1", "GET", "az://models", "one/model.safetensors",
     ["-H", "x-ms-range: bytes=8388608-16777215", "-H", 'If-Match: "0x8DC0A1B2C3D4E5F"']),
    (AZURITE, "devstoreaccount1", "GET", "az://models", "a b/+=&~%/ünï.safetensors",
     ["-H", "x-ms-range: bytes=0-7", "-H", "If-Unmodified-Since: Fri, 02 Jan 2026 03:04:05 GMT"]),
    (AZURITE, "devstoreaccount1", "GET", "az://models", "",
     ["-q", "restype", "container", "-q", "comp", "list", "-q", "prefix", "sharded/a b+/",
      "-q", "delimiter", "/", "-q", "marker", "2!96!MDAwMDE2IXNoYXJkZWQvYi5zYWZl"]),
    (PUBLIC, "myaccount", "GET", "https://myaccount.blob.core.windows.net/weights",
     "llama/model-00001-of-00002.safetensors", ["-H", "x-ms-range: bytes=0-1048575"]),
    (PUBLIC, "myaccount", "HEAD", "az://$root", "x.safetensors", []),
]


def pinio_request(cs, method, bucket, key, args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    env["AZURE_STORAGE_CONNECTION_STRING"] = cs
    out = subprocess.run([TOOL, method, bucket, key, EPOCH] + args, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: sign_tool {method} {bucket} {key}: {out.stderr.strip()}")
    url, headers = None, []
    for line in out.stdout.splitlines():
        if line.startswith("URL "):
            url = line[4:]
        elif line.startswith("H "):
            name, _, value = line[2:].partition(": ")
            headers.append((name, value))
    return url, headers


def main():
    fails = 0
    for cs, account, method, bucket, key, args in CASES:
        url, headers = pinio_request(cs, method, bucket, key, args)
        ours = dict(headers).get("Authorization")
        req = HttpRequest(method, url, headers={n: v for n, v in headers if n != "Authorization"})
        SharedKeyCredentialPolicy(account, KEY).on_request(PipelineRequest(req, PipelineContext(None)))
        theirs = req.headers.get("Authorization")
        what = f"{method} {url}"
        if not ours or ours != theirs:
            print(f"FAIL: {what}:\n  pinio: {ours}\n  SDK:   {theirs}")
            fails += 1
        else:
            print(f"ok: {what}")
    if fails:
        print(f"{fails} of {len(CASES)} requests signed differently")
        sys.exit(1)
    print(f"all {len(CASES)} requests signed as the Azure SDK signs them")


main()
