#!/usr/bin/env python3
"""TCP echo client for the interop tests.

Usage: interop_echo_client.py HOST PORT BYTES TIMEOUT_S

A sender thread writes BYTES of random data (Nagle left on: TCP_NODELAY
off), then half-closes; the main thread reads the echo until EOF. Both
directions are hashed with SHA-256. Prints one JSON line and exits 0 when
what came back is byte-identical to what was sent, 1 otherwise, 2 on a
timeout or socket error.
"""
import hashlib
import json
import os
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


def main():
    host, port, total, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    deadline = time.monotonic() + limit
    s = socket.create_connection((host, port), timeout=min(limit, 30))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
    # Per-call timeout: a stalled transfer fails instead of hanging.
    s.settimeout(30)
    sent_hash = hashlib.sha256()
    result = {"sent": 0, "send_error": None}
    t0 = time.monotonic()

    def sender():
        try:
            left = total
            while left > 0:
                if time.monotonic() > deadline:
                    raise TimeoutError("overall deadline passed while sending")
                buf = os.urandom(min(CHUNK, left))
                sent_hash.update(buf)
                s.sendall(buf)
                left -= len(buf)
                result["sent"] += len(buf)
            s.shutdown(socket.SHUT_WR)
        except Exception as e:  # reported in the JSON line
            result["send_error"] = repr(e)

    th = threading.Thread(target=sender, daemon=True)
    th.start()
    recv_hash = hashlib.sha256()
    received = 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    error = None
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("overall deadline passed while receiving")
            n = s.recv_into(buf)
            if n == 0:
                break
            recv_hash.update(view[:n])
            received += n
            if received > total:
                raise ValueError("received more than was sent")
    except Exception as e:
        error = repr(e)
    th.join(timeout=max(0.0, deadline - time.monotonic()) + 1)
    secs = time.monotonic() - t0
    s.close()
    out = {
        "bytes": total,
        "sent": result["sent"],
        "received": received,
        "sha256_sent": sent_hash.hexdigest(),
        "sha256_received": recv_hash.hexdigest(),
        "seconds": round(secs, 3),
        "mbit_s": round(received * 8 / secs / 1e6, 1) if secs > 0 else 0.0,
        "send_error": result["send_error"],
        "recv_error": error,
    }
    out["ok"] = (error is None and result["send_error"] is None and received == total
                 and result["sent"] == total and out["sha256_sent"] == out["sha256_received"])
    print(json.dumps(out), flush=True)
    if error is not None or result["send_error"] is not None:
        sys.exit(2)
    sys.exit(0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
