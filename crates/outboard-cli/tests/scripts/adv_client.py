#!/usr/bin/env python3
"""A legitimate Linux client for tests/adversarial.rs: connects to the
engine's echo port with the kernel's TCP, sends one request, reads the
echo back, closes. Every step is bounded by `--timeout` seconds overall.
Prints one JSON line: {"ok", "connect_s", "total_s", "error"}.
"""

import argparse
import json
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", default="10.77.0.2")
    ap.add_argument("--port", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--message", default="outboard adversarial: legitimate request during a SYN flood\n")
    a = ap.parse_args()
    msg = a.message.encode()
    t0 = time.monotonic()
    out = {"ok": False, "connect_s": None, "total_s": None, "error": None}
    try:
        s = socket.create_connection((a.dst, a.port), timeout=a.timeout)
        out["connect_s"] = round(time.monotonic() - t0, 3)
        s.settimeout(max(0.5, a.timeout - (time.monotonic() - t0)))
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        s.close()
        out["ok"] = got == msg
        if got != msg:
            out["error"] = f"echo mismatch: {got!r}"
    except OSError as e:
        out["error"] = repr(e)
    out["total_s"] = round(time.monotonic() - t0, 3)
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
