#!/usr/bin/env python3
"""A Linux TCP echo server for `outboard fetch --expect-echo`.

Usage: interop_echo_server.py PORT TIMEOUT_S [6]

Listens on 0.0.0.0:PORT (with 6: on [::]:PORT, IPv6), prints `LISTENING` once it does, accepts one
connection and echoes every byte until the peer half-closes, then closes.
Reads and writes run in separate threads through a bounded buffer, so the
echo keeps flowing whatever the client's read/write pattern. Prints one JSON
line (bytes echoed, seconds) and exits 0; 2 on a timeout or error.
"""
import json
import queue
import socket
import sys
import threading
import time


def main():
    port, limit = int(sys.argv[1]), float(sys.argv[2])
    v6 = len(sys.argv) > 3 and sys.argv[3] == "6"
    deadline = time.monotonic() + limit
    ls = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("::" if v6 else "0.0.0.0", port))
    ls.listen(1)
    ls.settimeout(limit)
    print("LISTENING", flush=True)
    c, peer = ls.accept()
    ls.close()
    c.settimeout(30)
    q = queue.Queue(maxsize=64)
    err = {}
    t0 = time.monotonic()

    def writer():
        try:
            while True:
                b = q.get()
                if b is None:
                    break
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
        except Exception as e:
            err["write"] = repr(e)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    total = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("deadline passed")
            b = c.recv(1 << 18)
            if not b:
                break
            total += len(b)
            q.put(b, timeout=30)
    except Exception as e:
        err["read"] = repr(e)
    q.put(None)
    th.join(timeout=max(0.0, deadline - time.monotonic()) + 1)
    c.close()
    secs = time.monotonic() - t0
    print(json.dumps({"peer": "%s:%d" % peer[:2], "echoed": total, "seconds": round(secs, 3),
                      "errors": err}), flush=True)
    sys.exit(2 if err else 0)


if __name__ == "__main__":
    main()
