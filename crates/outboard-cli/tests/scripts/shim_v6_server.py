#!/usr/bin/env python3
"""An AF_INET6 server for the shim's IPv6 tests (run under the shim).

Usage: shim_v6_server.py tcp|udp PORT dual|v6only [ADDR]

Binds ADDR (default `::`) port PORT with IPV6_V6ONLY off (dual) or on
(v6only), prints "listening", then serves forever (the test kills it):
- tcp: each connection, in turn, is echoed until the peer's EOF, then one
  JSON line says its getsockname, getpeername (as the socket API gives
  them: sockaddr_in6, IPv4 peers IPv4-mapped), TCP_INFO's path MTU and the
  bytes echoed;
- udp: each datagram is sent back to its source (recvfrom), and a JSON line
  says the source and the size.
"""
import json
import socket
import struct
import sys


def main():
    kind, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    addr = sys.argv[4] if len(sys.argv) > 4 else "::"
    ty = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET6, ty)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if mode == "v6only" else 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    v6only = s.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
    if kind == "tcp":
        s.listen(16)
    print(json.dumps({"listening": s.getsockname()[0], "v6only": v6only, "family": int(s.family)}), flush=True)
    if kind == "udp":
        while True:
            data, src = s.recvfrom(65536)
            s.sendto(data, src)
            print(json.dumps({"from": src[0], "bytes": len(data)}), flush=True)
    while True:
        c, peer = s.accept()
        # tcp_info's tcpi_pmtu (the 14th u32 after 8 one-byte fields).
        pmtu = struct.unpack_from("I", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 60)[0]
        n = 0
        while True:
            b = c.recv(262144)
            if not b:
                break
            c.sendall(b)
            n += len(b)
        out = {"local": c.getsockname()[0], "peer": c.getpeername()[0], "accepted": peer[0], "bytes": n, "pmtu": pmtu}
        c.close()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
