#!/usr/bin/env python3
"""Many concurrent TCP echo connections, for the interop tests.

Usage: interop_many.py HOST PORT N TIMEOUT_S [--hold]

Opens N connections (non-blocking connects, in batches of 100, all kept
open), sends a distinct 64-byte request on each, reads the 64-byte echo of
each and checks it. With --hold it then prints `HELD N` and waits (at most
TIMEOUT_S) for a line on stdin before closing, so the caller can look at the
engine while every connection is open. Finally closes all and prints one
JSON line; exits 0 when every response matched.
"""
import errno
import json
import os
import resource
import select
import selectors
import socket
import sys
import time

REQ = 64


def main():
    host, port, n, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    hold = "--hold" in sys.argv[5:]
    deadline = time.monotonic() + limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard > 0 else want, hard))
    t0 = time.monotonic()
    socks = []
    sel = selectors.DefaultSelector()
    # Connect in batches of 100: all stay open, the batches only pace the SYNs.
    for start in range(0, n, 100):
        pending = set()
        for i in range(start, min(n, start + 100)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex((host, port))
            if rc not in (0, errno.EINPROGRESS):
                raise OSError(rc, "connect %d: %s" % (i, os.strerror(rc)))
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE, i)
            pending.add(i)
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError("%d connects of batch %d still pending" % (len(pending), start))
            for key, _ in sel.select(timeout=1.0):
                i = key.data
                err = socks[i].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, "connect %d: %s" % (i, os.strerror(err)))
                sel.unregister(socks[i])
                pending.discard(i)
    connect_s = time.monotonic() - t0
    reqs = []
    for i, s in enumerate(socks):
        head = ("req %06d " % i).encode()
        r = head + os.urandom((REQ - len(head)) // 2).hex().encode()
        r = r + b"." * (REQ - len(r))
        assert len(r) == REQ
        reqs.append(r)
        s.setblocking(True)
        s.settimeout(10)
        s.sendall(r)
        s.setblocking(False)
    got = [bytearray() for _ in socks]
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    waiting = set(range(n))
    bad = []
    while waiting:
        if time.monotonic() > deadline:
            raise TimeoutError("%d responses still missing" % len(waiting))
        for key, _ in sel.select(timeout=1.0):
            i = key.data
            data = socks[i].recv(REQ * 2)
            if not data:
                bad.append((i, "closed early"))
                sel.unregister(socks[i])
                waiting.discard(i)
                continue
            got[i] += data
            if len(got[i]) >= REQ:
                sel.unregister(socks[i])
                waiting.discard(i)
                if bytes(got[i]) != reqs[i]:
                    bad.append((i, "mismatch"))
    echo_s = time.monotonic() - t0
    if hold:
        print("HELD %d" % n, flush=True)
        r, _, _ = select.select([sys.stdin], [], [], max(0.0, deadline - time.monotonic()))
        if r:
            sys.stdin.readline()
    for s in socks:
        s.close()
    out = {
        "connections": n,
        "matched": n - len(bad),
        "bad": bad[:10],
        "connect_s": round(connect_s, 3),
        "echo_s": round(echo_s, 3),
        "ok": not bad,
    }
    print(json.dumps(out), flush=True)
    sys.exit(0 if not bad else 1)


if __name__ == "__main__":
    main()
