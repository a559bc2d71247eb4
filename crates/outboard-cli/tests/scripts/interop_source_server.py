#!/usr/bin/env python3
"""TCP source server for the native-API interop tests.

Usage: interop_source_server.py BIND_ADDR PORT BYTES TIMEOUT_S

Prints "listening" once bound, accepts one connection, sends BYTES of random
data, closes, and prints one JSON line {"bytes": N, "sha256": HEX}. Exits 0
on success, 2 on a timeout or socket error.
"""
import hashlib
import json
import os
import socket
import sys
import time

CHUNK = 256 * 1024


def main():
    addr, port, total, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    deadline = time.monotonic() + limit
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    ls.settimeout(limit)
    print("listening", flush=True)
    try:
        s, _ = ls.accept()
        s.settimeout(30)
        h = hashlib.sha256()
        left = total
        while left > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("deadline passed while sending")
            buf = os.urandom(min(CHUNK, left))
            s.sendall(buf)
            h.update(buf)
            left -= len(buf)
        s.shutdown(socket.SHUT_WR)
        # Wait for the client's close so every byte was acknowledged.
        while s.recv(65536):
            pass
        s.close()
    except (OSError, TimeoutError) as e:
        print(json.dumps({"error": str(e)}), flush=True)
        sys.exit(2)
    print(json.dumps({"bytes": total, "sha256": h.hexdigest()}), flush=True)


if __name__ == "__main__":
    main()
