#!/usr/bin/env python3
"""UDP checks for the interop tests.

Usage: interop_udp.py HOST ECHO_PORT CLOSED_PORT

1. Sends distinct datagrams (1 byte, 512 bytes, 1472 bytes = one full
   Ethernet frame) to ECHO_PORT and expects each back unchanged (a lost
   datagram is retried up to 5 times: UDP may drop, the test must not flake).
2. Connects a UDP socket to CLOSED_PORT, sends one datagram and expects the
   next recv() to fail with ECONNREFUSED (the kernel turns the engine's ICMP
   port unreachable into that error on a connected socket).
Prints one JSON line; exits 0 when both hold.
"""
import errno
import json
import os
import socket
import sys


def main():
    host, echo_port, closed_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = {"echo": [], "refused": False, "refused_error": None}
    ok = True
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    for size in (1, 512, 1472):
        payload = os.urandom(size)
        got = None
        tries = 0
        while got is None and tries < 5:
            tries += 1
            s.sendto(payload, (host, echo_port))
            try:
                data, src = s.recvfrom(65535)
            except socket.timeout:
                continue
            got = (data, src)
        same = got is not None and got[0] == payload and got[1][:2] == (host, echo_port)
        out["echo"].append({"size": size, "tries": tries, "same": same})
        ok = ok and same
    s.close()

    c = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    c.settimeout(3)
    c.connect((host, closed_port))
    for _ in range(3):
        try:
            c.send(b"anyone there?")
            c.recv(100)
            out["refused_error"] = "got a reply from a closed port"
            break
        except ConnectionRefusedError:
            out["refused"] = True
            break
        except socket.timeout:
            out["refused_error"] = "timeout (no ICMP port unreachable)"
        except OSError as e:
            out["refused_error"] = "%s (%s)" % (e, errno.errorcode.get(e.errno, "?"))
            break
    c.close()
    ok = ok and out["refused"]
    out["ok"] = ok
    print(json.dumps(out), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
