#!/usr/bin/env python3
"""A threaded TCP echo server for the live-upgrade tests (run under the shim).

Usage: shim_echo_server.py PORT [udp]

Listens on 0.0.0.0:PORT, prints `LISTENING` once it does, and echoes every
byte of every connection (a thread each) until the peer half-closes. With
`udp`, also holds a UDP socket bound to 0.0.0.0:PORT and echoes every
datagram back to its sender (a thread). Runs until killed.
"""
import socket
import socketserver
import sys
import threading


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                break
            self.request.sendall(data)
        self.request.shutdown(socket.SHUT_WR)


def udp_echo(sock):
    while True:
        data, peer = sock.recvfrom(65536)
        sock.sendto(data, peer)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    port = int(sys.argv[1])
    udp = None
    if len(sys.argv) > 2 and sys.argv[2] == "udp":
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("0.0.0.0", port))
        threading.Thread(target=udp_echo, args=(udp,), daemon=True).start()
    with Server(("0.0.0.0", port), Echo) as s:
        print("LISTENING", flush=True)
        s.serve_forever()


if __name__ == "__main__":
    main()
