#!/usr/bin/python3
"""A TLS front for a plain HTTP server, on loopback, for the tests.

usage: tlsrelay.py CERT KEY UPSTREAM_PORT

Listens with TLS (CERT, KEY: PEM) on 127.0.0.1 at a free port, says
"port N" on stdout, and relays each connection's bytes both ways to
127.0.0.1:UPSTREAM_PORT unchanged (so s3rver sees the Host that was signed).
"""
import socket
import ssl
import sys
import threading

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
up = int(sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(128)
print(f"port {ls.getsockname()[1]}", flush=True)


def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
    except (ssl.SSLError, OSError):
        c.close()  # a client that does not trust the certificate: its failure
        return
    u = socket.create_connection(("127.0.0.1", up))
    threading.Thread(target=pump, args=(u, t), daemon=True).start()
    pump(t, u)


while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
