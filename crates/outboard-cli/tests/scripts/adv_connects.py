#!/usr/bin/env python3
"""Legitimate Linux clients for tests/adversarial.rs: connection after
connection to DST:PORT with the kernel's TCP (each closed at once), for
`--seconds` or `--count` connections, whichever comes first; each connect
bounded by `--timeout`. Prints one JSON line: {"n", "failed", "p50_ms",
"p99_ms", "max_ms", "errors"} (latencies of the connects that succeeded).
"""

import argparse
import json
import socket
import sys
import time


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", default="10.77.0.2")
    ap.add_argument("--port", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=5.0)
    a = ap.parse_args()
    lat, errors = [], {}
    deadline = time.monotonic() + a.seconds
    print(json.dumps({"connecting": True}), flush=True)
    while len(lat) + sum(errors.values()) < a.count and time.monotonic() < deadline:
        t0 = time.monotonic()
        try:
            s = socket.create_connection((a.dst, a.port), timeout=a.timeout)
            lat.append((time.monotonic() - t0) * 1000.0)
            s.close()
        except OSError as e:
            k = type(e).__name__
            errors[k] = errors.get(k, 0) + 1
    out = {
        "n": len(lat),
        "failed": sum(errors.values()),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "max_ms": round(max(lat), 3) if lat else None,
        "errors": errors,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
