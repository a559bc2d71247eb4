#!/usr/bin/env python3
"""Echo clients that time the gaps a peer sees, for the live-upgrade tests.

Usage:
  upgrade_client.py stream HOST PORT BYTES TIMEOUT_S
      Sends BYTES (seeded pseudo-random, Nagle on) to an echo server from a
      thread, reads the echo back, half-closes after sending; checks the
      echo is byte-identical (SHA-256) and reports the longest gap between
      two reads that returned data ("max_gap_ms").
  upgrade_client.py rr HOST PORT SECONDS TIMEOUT_S
      One connection, a request/response loop for SECONDS: 64-byte requests,
      each echoed in full before the next; checks every answer and reports
      the count, the slowest round trip ("max_rtt_ms") and how many took
      over 50 ms ("over_50ms").

Both print one JSON line once ready ("ready": true, on stdout, flushed) and
one at the end; exit 0 when everything came back exact, 1 when not, 2 on a
timeout or socket error.
"""
import hashlib
import json
import random
import socket
import sys
import threading
import time


def stream(host, port, total, limit):
    s = socket.create_connection((host, port), timeout=min(limit, 30))
    s.settimeout(10)
    rng = random.Random(7)
    sent_hash, got_hash = hashlib.sha256(), hashlib.sha256()
    result = {"sent": 0, "send_error": None}

    def sender():
        try:
            left = total
            while left > 0:
                n = min(256 * 1024, left)
                buf = rng.randbytes(n)
                sent_hash.update(buf)
                s.sendall(buf)
                result["sent"] += n
                left -= n
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            result["send_error"] = repr(e)

    t = threading.Thread(target=sender, daemon=True)
    print(json.dumps({"ready": True}), flush=True)
    t0 = time.monotonic()
    t.start()
    got, max_gap, last = 0, 0.0, time.monotonic()
    deadline = t0 + limit
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("overall deadline")
            b = s.recv(1 << 20)
            now = time.monotonic()
            if not b:
                break
            max_gap = max(max_gap, now - last)
            last = now
            got += len(b)
            got_hash.update(b)
    except (OSError, TimeoutError) as e:
        print(json.dumps({"ok": False, "error": repr(e), "received": got, "max_gap_ms": max_gap * 1e3}))
        return 2
    t.join(timeout=5)
    ok = result["send_error"] is None and got == total and sent_hash.digest() == got_hash.digest()
    print(json.dumps({"ok": ok, "bytes": total, "received": got, "send_error": result["send_error"],
                      "seconds": round(time.monotonic() - t0, 3), "max_gap_ms": round(max_gap * 1e3, 2)}))
    return 0 if ok else 1


def rr(host, port, seconds, limit):
    s = socket.create_connection((host, port), timeout=min(limit, 30))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    print(json.dumps({"ready": True}), flush=True)
    t0 = time.monotonic()
    n, max_rtt, bad, over_50ms = 0, 0.0, 0, 0
    try:
        while time.monotonic() - t0 < seconds:
            req = n.to_bytes(8, "big") * 8
            a = time.monotonic()
            s.sendall(req)
            got = b""
            while len(got) < len(req):
                b = s.recv(len(req) - len(got))
                if not b:
                    raise ConnectionError("closed mid-answer")
                got += b
            rtt = time.monotonic() - a
            max_rtt = max(max_rtt, rtt)
            over_50ms += rtt > 0.05
            bad += got != req
            n += 1
        s.shutdown(socket.SHUT_WR)
        tail = s.recv(16)
    except (OSError, ConnectionError) as e:
        print(json.dumps({"ok": False, "error": repr(e), "requests": n, "max_rtt_ms": max_rtt * 1e3}))
        return 2
    ok = bad == 0 and tail == b"" and n > 0
    print(json.dumps({"ok": ok, "requests": n, "wrong": bad, "max_rtt_ms": round(max_rtt * 1e3, 2), "over_50ms": over_50ms}))
    return 0 if ok else 1


def main():
    mode, host, port, amount, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    if mode == "stream":
        return stream(host, port, int(amount), limit)
    if mode == "rr":
        return rr(host, port, float(amount), limit)
    print("mode must be stream or rr", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
