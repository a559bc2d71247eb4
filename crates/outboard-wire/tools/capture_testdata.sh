#!/bin/sh
# Recaptures the frames in src/testdata.rs (run as root; needs `ip` and python3).
# Builds obA -- obR (router) -- obB with network namespaces and veth pairs, turns
# transmit checksum offload off so checksums on the wire are real, runs the
# traffic described in src/testdata.rs from obA while reading every frame on
# obA's veth with an AF_PACKET socket, and prints "pkttype hex" per frame.
# Tears the namespaces down afterwards. Output goes to stdout.
set -eu
cleanup() { for n in obA obR obB; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup
for n in obA obR obB; do ip netns add "$n"; done
ip link add a0 netns obA type veth peer name r0 netns obR
ip link add r1 netns obR type veth peer name b0 netns obB
ip -n obA addr add 10.9.1.2/24 dev a0; ip -n obA link set a0 up; ip -n obA link set lo up
ip -n obR addr add 10.9.1.1/24 dev r0; ip -n obR addr add 10.9.2.1/24 dev r1
ip -n obR link set r0 up; ip -n obR link set r1 up; ip -n obR link set r1 mtu 1280
ip -n obB addr add 10.9.2.2/24 dev b0; ip -n obB link set b0 mtu 1280; ip -n obB link set b0 up; ip -n obB link set lo up
ip -n obA route add default via 10.9.1.1
ip -n obB route add default via 10.9.2.1
ip netns exec obR sysctl -qw net.ipv4.ip_forward=1
ip netns exec obR sysctl -qw net.ipv4.icmp_ratelimit=0
ip netns exec obB sysctl -qw net.ipv4.icmp_ratelimit=0

txoff='
import socket, fcntl, struct, sys, array
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for dev in sys.argv[1:]:
    buf = array.array("B", struct.pack("II", 0x17, 0))  # ETHTOOL_STXCSUM, off
    fcntl.ioctl(s.fileno(), 0x8946, struct.pack("16sP", dev.encode(), buf.buffer_info()[0]))  # SIOCETHTOOL
'
ip netns exec obA python3 -c "$txoff" a0
ip netns exec obR python3 -c "$txoff" r0 r1
ip netns exec obB python3 -c "$txoff" b0

server='
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("10.9.2.2", 8080)); s.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.9.2.2", 7777))
c, _ = s.accept(); c.recv(100); c.sendall(b"HTTP/1.0 200 OK\r\n\r\nhi\n"); c.close()
u.recvfrom(100)
'
client='
import socket, time, threading, struct
frames = []
def sniff(stop):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
    s.bind(("a0", 0)); s.settimeout(0.2)
    while not stop.is_set():
        try:
            data, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        frames.append((addr[2], data))
stop = threading.Event()
t = threading.Thread(target=sniff, args=(stop,)); t.start()
time.sleep(0.3)
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff
ic = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
m = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + bytes(range(0x10, 0x30))
m = m[:2] + struct.pack("!H", csum(m)) + m[4:]
ic.sendto(m, ("10.9.1.1", 0)); time.sleep(0.3)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"outboard-closed", ("10.9.2.2", 9)); time.sleep(0.3)
u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u2.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 1)
u2.sendto(b"outboard-ttl", ("10.9.2.2", 33434)); time.sleep(0.3)
u3 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u3.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO
u3.sendto(b"D" * 1400, ("10.9.2.2", 33435)); time.sleep(0.3)
c = socket.create_connection(("10.9.2.2", 8080)); c.sendall(b"GET / HTTP/1.0\r\n\r\n"); c.recv(100); c.close(); time.sleep(0.5)
u.sendto(b"hello outboard", ("10.9.2.2", 7777)); time.sleep(0.3)
stop.set(); t.join()
for pkttype, d in frames:
    if d[12:14] != b"\x86\xdd":  # drop IPv6 neighbour discovery noise
        print(pkttype, d.hex())
'
ip netns exec obB python3 -c "$server" &
sleep 0.5
ip netns exec obA python3 -c "$client"
wait
