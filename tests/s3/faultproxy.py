#!/usr/bin/python3
"""A fault-injecting HTTP proxy between pinio and an S3 server (the S3 tests').

usage: faultproxy.py UPSTREAM_URL [--fault KIND] [--count N] [--skip N]
                     [--latency MS] [--replace-with FILE] [--strip HEADERS]
                     [--strip-from get|all] [--stats FILE] [--retry-after S]
                     [--hold-until N]

Listens on 127.0.0.1 at a free port, prints "port N" on its first line, and
forwards every request to UPSTREAM_URL (http://127.0.0.1:PORT). Faults hit
the ranged GETs of each key after the first --skip of them (default 1: the
first ranged GET of an object is its header's), --count of them (default 1;
0: all):

  503        503 SlowDown with Retry-After: 1 (or --retry-after S)
  429        429 Too Many Requests with Retry-After: 1 (or --retry-after S)
             and no error code in the body: a rate limit said by the status
             alone, as Cloud Storage's may be (tests/gcs)
  reset      the headers and half the body, then a TCP reset
  short      Content-Length of the whole range, half the body, then close
  badrange   the bytes of the range one byte on (back, at the end), with
             that range's Content-Range
  wholebody  200 with the whole object instead of the range
  412        412 PreconditionFailed (a store that honours If-Match)
  403        403 AccessDenied
  replace    uploads FILE over the object first, then forwards (an object
             replaced mid-load); the upload waits for the next second of the
             clock, so that its Last-Modified differs from the original's
  escetag    the answer's ETag replaced by one holding a terminal escape
  bigheader  a 200 KB response header line
  manyheaders  200 KB of response headers in 1 KB lines
  hold       the range held back until the key has seen --hold-until
             ranged GETs in all (or 120 s passed), then forwarded; said on
             stderr as "hold released after N, asked again R times" or
             "hold gave up after N, ...", R the GETs of the same range
             meanwhile (a client's retry of it): how many requests a client
             keeps going while one is slow

--strip etag,last-modified takes those headers out of every answer (or of
the GETs' only, with --strip-from get): a store that sends no validator.
The upstream (s3rver) ignores If-Match and If-Unmodified-Since, as such a
store may. --stats FILE keeps FILE up to date with {"requests": N,
"connections": M, "get_bytes": B, "heads": H, "gets": G}: the requests
and TCP connections pinio made, the body bytes of the GETs answered (what
the store sent), and of the requests the HEADs and the GETs; "ranges"
lists each ranged GET's range as asked ("A-B"), in the order they came.

Faults of the listings (ListObjectsV2, every page; --count and --skip do not
apply):

  listcut    the store's page cut after its first </Contents>, with the
             Content-Length of what is sent (a body the connection ended)
  listloop   a page of its own, truncated, whose continuation token cycles
             t1, t2, t1, ... (a store that never ends its listing)
  listesc    a page of its own, the last, whose one key holds a terminal
             escape and a BEL (as XML character references)

Azure (Azurite upstream, tests/az): a request with x-ms-range is a ranged
GET as one with Range is; 503 answers ServerBusy; replace uploads with the
Azure SDK (the connection string in $AZ_CS); badrange answers the range
asked for with a Content-Range (and bytes) one byte on, since changing a
signed x-ms-range would only break the signature; listcut cuts a List
Blobs page after its first </Blob>.

--latency MS delays every request's answer by MS milliseconds (a remote
store's first-byte latency). Each fault injected is said on stderr, "fault
KIND PATH" (a test waits for one there). Stops on SIGTERM; writes nothing to
disk.
"""
import email.utils
import http.client
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-connection"}


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    up = urllib.parse.urlparse(args[0])
    opt = {"--fault": "", "--count": "1", "--skip": "1", "--latency": "0", "--replace-with": "",
           "--strip": "", "--strip-from": "all", "--stats": "", "--retry-after": "1",
           "--hold-until": "0"}
    i = 1
    while i < len(args):
        if args[i] not in opt or i + 1 >= len(args):
            print(f"faultproxy: bad argument {args[i]}", file=sys.stderr)
            return 2
        opt[args[i]] = args[i + 1]
        i += 2
    fault, count, skip = opt["--fault"], int(opt["--count"]), int(opt["--skip"])
    latency = int(opt["--latency"]) / 1000.0
    strip = {h.strip().lower() for h in opt["--strip"].split(",") if h.strip()}
    lock = threading.Lock()
    seen = {}  # key -> ranged GETs so far
    state = {"faults": 0, "requests": 0, "connections": 0, "get_bytes": 0, "heads": 0,
             "gets": 0, "ranges": []}

    def tally(what, n=1):
        """Counts a request, a connection or GET bytes (or appends a range
        asked, `n`, to "ranges"), the file rewritten whole."""
        with lock:
            if what == "ranges":
                state[what].append(n)
            else:
                state[what] += n
            if opt["--stats"]:
                tmp = opt["--stats"] + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({k: state[k] for k in ("requests", "connections", "get_bytes",
                                                     "heads", "gets", "ranges")}, f)
                os.replace(tmp, opt["--stats"])

    def stripped(headers, method):
        if opt["--strip-from"] == "get" and method != "GET":
            return list(headers)
        return [(k, v) for k, v in headers if k.lower() not in strip]

    def newer_than(headers):
        """Waits until the clock's second is past the object's Last-Modified."""
        lm = dict((k.lower(), v) for k, v in headers).get("last-modified")
        if lm:
            t = email.utils.parsedate_to_datetime(lm).timestamp()
            while time.time() < t + 1.05:
                time.sleep(0.05)

    def take_fault(path):
        """Whether this ranged GET of `path` gets the fault."""
        with lock:
            n = seen.get(path, 0)
            seen[path] = n + 1
            cv.notify_all()
            if not fault or n < skip or (count and state["faults"] >= count):
                return False
            state["faults"] += 1
        print(f"fault {fault} {path}", file=sys.stderr, flush=True)
        return True

    cv = threading.Condition(lock)

    held = {}  # the range held -> GETs of it since

    def hold(path, rng):
        """Waits until `path` has seen --hold-until ranged GETs (120 s at most)."""
        want, end = int(opt["--hold-until"]), time.time() + 120
        with cv:
            held[rng] = 0
            while seen.get(path, 0) < want and time.time() < end:
                cv.wait(1)
            n, again = seen.get(path, 0), held.pop(rng)
        how = "released" if n >= want else "gave up"
        print(f"hold {how} after {n}, asked again {again} times", file=sys.stderr, flush=True)

    def replace_blob(path, data):
        """Uploads `data` over the blob of request path /ACCOUNT/CONTAINER/BLOB."""
        from azure.storage.blob import BlobServiceClient
        _, container, blob = urllib.parse.unquote(urllib.parse.urlparse(path).path).lstrip("/").split("/", 2)
        svc = BlobServiceClient.from_connection_string(os.environ["AZ_CS"])
        svc.get_blob_client(container, blob).upload_blob(data, overwrite=True)

    def total_of(handler):
        """The object's size, by a HEAD upstream."""
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        c.request("HEAD", handler.path)
        r = c.getresponse()
        r.read()
        c.close()
        return int(r.getheader("Content-Length", "0"))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            tally("connections")

        def parse_request(self):
            ok = super().parse_request()
            if ok:
                tally("requests")
                if self.command in ("HEAD", "GET"):
                    tally(self.command.lower() + "s")
                rng = self.headers.get("x-ms-range") or self.headers.get("Range")
                if self.command == "GET" and rng and rng.startswith("bytes="):
                    tally("ranges", rng[6:])
            return ok

        def upstream(self, method, body=None, headers=None):
            c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
            h = {k: v for k, v in (headers if headers is not None else self.headers).items()
                 if k.lower() not in HOP}
            c.request(method, self.path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r, data

        def relay(self, headers):
            """A GET forwarded as it arrives, in pieces of a MiB. Why not read
            whole and then sent (as the faults do): 16 ranges of 16 MiB held
            and copied under one interpreter lock made the proxy the slowest
            part of a benchmark, well below the server behind it."""
            c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
            c.request("GET", self.path, headers={k: v for k, v in self.headers.items()
                                                 if k.lower() not in HOP})
            r = c.getresponse()
            n = r.getheader("Content-Length")
            if n is None or not n.isdigit():  # no length to announce: whole, then sent
                data = r.read()
                c.close()
                return self.send(r.status, r.getheaders(), data)
            self.send_response(r.status)
            for k, v in stripped(r.getheaders(), "GET"):
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.end_headers()
            buf = memoryview(bytearray(1 << 20))
            left = int(n)
            while left:
                k = r.readinto(buf[: min(left, len(buf))])
                if not k:  # the upstream ended early: so does this answer
                    self.close_connection = True
                    break
                self.wfile.write(buf[:k])
                left -= k
            tally("get_bytes", int(n) - left)
            c.close()

        def send(self, status, headers, body, head=False):
            self.send_response(status)
            for k, v in stripped(headers, self.command):
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
                if self.command == "GET":
                    tally("get_bytes", len(body))

        def error(self, status, code, extra=()):
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f'<Message>injected</Message></Error>').encode()
            self.send(status, [("Content-Type", "application/xml")] + list(extra), body)

        def do_HEAD(self):
            time.sleep(latency)
            r, data = self.upstream("HEAD")
            self.send_response(r.status)
            for k, v in stripped(r.getheaders(), "HEAD"):
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.end_headers()

        def do_PUT(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            r, data = self.upstream("PUT", body)
            self.send(r.status, r.getheaders(), data)

        def do_DELETE(self):
            r, data = self.upstream("DELETE")
            self.send(r.status, r.getheaders(), data)

        def listing(self):
            """Answers a ListObjectsV2 page under a listing fault."""
            q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            if fault == "listloop":
                tok = "t2" if q.get("continuation-token") == ["t1"] else "t1"
                body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
                        '<IsTruncated>true</IsTruncated>'
                        f'<NextContinuationToken>{tok}</NextContinuationToken><Contents>'
                        f'<Key>{q.get("prefix", [""])[0]}x.safetensors</Key><Size>1</Size>'
                        '</Contents></ListBucketResult>').encode()
                return self.send(200, [("Content-Type", "application/xml")], body)
            if fault == "listesc":
                body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
                        '<IsTruncated>false</IsTruncated><Contents>'
                        f'<Key>{q.get("prefix", [""])[0]}&#27;]0;pwned&#7;a.safetensors</Key>'
                        '<Size>1</Size></Contents></ListBucketResult>').encode()
                return self.send(200, [("Content-Type", "application/xml")], body)
            r, data = self.upstream("GET")
            end = b"</Blob>" if b"<EnumerationResults" in data else b"</Contents>"
            cut = data.find(end)
            if r.status == 200 and cut >= 0:
                data = data[: cut + len(end)]
            self.send(r.status, r.getheaders(), data)

        def do_GET(self):
            time.sleep(latency)
            query = urllib.parse.urlparse(self.path).query
            if fault.startswith("list") and ("list-type=2" in query or "comp=list" in query):
                return self.listing()
            azure = "x-ms-range" in self.headers
            ranged = "Range" in self.headers or azure
            rng = self.headers.get("x-ms-range" if azure else "Range")
            with lock:
                if rng in held:
                    held[rng] += 1
            hit = ranged and take_fault(urllib.parse.urlparse(self.path).path)
            if hit and fault == "hold":
                hold(urllib.parse.urlparse(self.path).path, rng)
                return self.relay(None)
            if hit and fault == "503":
                return self.error(503, "ServerBusy" if azure else "SlowDown",
                                  [("Retry-After", opt["--retry-after"])])
            if hit and fault == "429":
                return self.send(429, [("Content-Type", "text/plain"),
                                       ("Retry-After", opt["--retry-after"])], b"Too Many Requests")
            if hit and fault == "408":
                return self.send(408, [("Content-Type", "text/plain")], b"Request Timeout")
            if hit and fault == "412":
                return self.error(412, "PreconditionFailed")
            if hit and fault == "403":
                return self.error(403, "AccessDenied")
            if hit and fault == "replace":
                with open(opt["--replace-with"], "rb") as f:
                    new = f.read()
                r, _ = self.upstream("HEAD", headers={})
                newer_than(r.getheaders())
                if azure:
                    replace_blob(self.path, new)
                else:
                    self.upstream("PUT", new, {"Content-Length": str(len(new))})
            if hit and fault == "wholebody":
                h = {k: v for k, v in self.headers.items() if k.lower() != "range"}
                r, data = self.upstream("GET", headers=h)
                return self.send(200, r.getheaders(), data)
            h = None
            if hit and fault == "badrange" and azure:
                r, data = self.upstream("GET")
                a, b = (int(x) for x in self.headers["x-ms-range"].split("=")[1].split("-"))
                total = r.getheader("Content-Range", "/0").split("/")[1]
                headers = [(k, v) for k, v in r.getheaders() if k.lower() != "content-range"]
                headers.append(("Content-Range", f"bytes {a + 1}-{b + 1}/{total}"))
                return self.send(r.status, headers, data[1:] + b"\0")
            if hit and fault == "badrange":
                # Another range than the one asked for, one byte on (or back
                # at the object's end), with its own honest Content-Range:
                # taken as asked, its bytes would land one byte off.
                a, b = (int(x) for x in self.headers["Range"].split("=")[1].split("-"))
                h = {k: v for k, v in self.headers.items() if k.lower() != "range"}
                h["Range"] = f"bytes={a + 1}-{b + 1}" if b + 1 < total_of(self) else \
                             f"bytes={a - 1}-{b - 1}"
            if not hit:
                return self.relay(h)
            r, data = self.upstream("GET", headers=h)
            headers = r.getheaders()
            if hit and fault == "escetag":
                headers = [(k, v) for k, v in headers if k.lower() != "etag"]
                headers.append(("ETag", '"\x1b[2J\x1b]0;pwned\x07gone"'))
            if hit and fault == "bigheader":
                headers.append(("X-Big", "b" * 200000))
            if hit and fault == "manyheaders":
                headers += [(f"X-Many-{i}", "m" * 1000) for i in range(200)]
            if hit and fault in ("reset", "short"):
                self.send_response(r.status)
                for k, v in stripped(headers, "GET"):
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                if fault == "reset":  # SO_LINGER 0: close sends a RST
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                self.close_connection = True
                return
            self.send(r.status, headers, data)

    class Server(http.server.ThreadingHTTPServer):
        # socketserver listens with a backlog of 5: a client opening 16
        # connections at once had the others' SYNs dropped, retried a second
        # later (a load at 16 in flight stalled for that second, and once,
        # beside another S3 test, "Couldn't connect to server"). The kernel
        # caps it at somaxconn.
        request_queue_size = 128

    srv = Server(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(f"port {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
