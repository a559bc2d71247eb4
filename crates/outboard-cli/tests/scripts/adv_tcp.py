#!/usr/bin/env python3
"""Hand-crafted TCP segments against the engine, for tests/adversarial.rs.

Runs on the Linux side of a lab (inside ob-NAME-lnx, as root) and is driven
line by line: each line on stdin is a JSON command, each answer one JSON line
on stdout, so the Rust test can look at `outboard stat` between two steps.
Every wait is bounded (at most 3 s per step).

Commands:
  {"op": "connect", "dport": 7, "sport": 40001}
      3-way handshake by hand: SYN (MSS 1460, no other option), wait for the
      SYN-ACK, ACK it. Answer: {"ok", "iss", "irs", "synack", "snd_nxt", "rcv_nxt"}.
  {"op": "send", "flags": "A", "seq_off": 0, "ack_off": 0, "payload": "text",
   "bad_tcp_checksum": false, "bad_ip_checksum": false, "wait": 1.0,
   "expect": 0, "advance": false, "sport": null, "dport": null, "seq": null}
      Sends one segment with SEQ = SND.NXT + seq_off (or the absolute "seq")
      and ACK = RCV.NXT + ack_off, then collects what the engine sends to our
      port for `wait` seconds (sooner once `expect` segments arrived).
      `advance` moves SND.NXT past the segment. In-order data from the engine
      moves RCV.NXT (so ack_off 0 acknowledges it). "sport" sends from
      another port (a fresh 4-tuple: segments to the listener); "dport"
      sets the engine's port when no connection was made (default 7).
      Answer: {"sent": {...}, "got": [{"flags", "seq", "ack", "len", "payload", "window"}],
               "snd_nxt", "rcv_nxt"}.
  {"op": "quit"}

Flag letters as scapy writes them: F S R P A U E C, "" for none.
Sequence numbers are unsigned 32-bit, offsets wrap.
"""

import json
import queue
import sys
import time

try:
    from scapy.all import ARP, IP, TCP, AsyncSniffer, Ether, conf, get_if_hwaddr, srp1
except ImportError as e:  # pragma: no cover - reported by the Rust test
    print(json.dumps({"error": f"scapy missing ({e}): python3 -m pip install scapy"}), flush=True)
    sys.exit(2)

IFACE = "lnx0"
SRC = "10.77.0.1"
DST = "10.77.0.2"
MAX_WAIT = 3.0

conf.verb = 0
M = 1 << 32


def flags_str(f):
    return str(f) if int(f) else ""


class Peer:
    def __init__(self):
        self.q = queue.Queue()
        self.my_mac = get_if_hwaddr(IFACE)
        self.dst_mac = self.resolve()
        self.sock = conf.L2socket(iface=IFACE)
        self.sport = None
        self.dport = 7
        self.snd_nxt = 0
        self.rcv_nxt = 0
        self.sniffer = AsyncSniffer(
            iface=IFACE,
            store=False,
            lfilter=lambda p: IP in p and TCP in p and p[IP].src == DST and p[IP].dst == SRC,
            prn=self.q.put,
        )
        self.sniffer.start()
        # AsyncSniffer opens its socket in its thread: give it a moment.
        t0 = time.time()
        while getattr(self.sniffer, "running", False) is False and time.time() - t0 < 2:
            time.sleep(0.02)
        time.sleep(0.2)

    def resolve(self):
        for _ in range(5):
            ans = srp1(
                Ether(dst="ff:ff:ff:ff:ff:ff", src=get_if_hwaddr(IFACE))
                / ARP(op=1, psrc=SRC, pdst=DST, hwsrc=get_if_hwaddr(IFACE)),
                iface=IFACE,
                timeout=1,
            )
            if ans is not None and ARP in ans:
                return ans[ARP].hwsrc
        raise RuntimeError(f"no ARP answer from {DST}")

    def frame(self, sport, flags, seq, ack, payload=b"", options=None):
        tcp = TCP(sport=sport, dport=self.dport, flags=flags, seq=seq % M, ack=ack % M, window=65535)
        if options:
            tcp.options = options
        return Ether(src=self.my_mac, dst=self.dst_mac) / IP(src=SRC, dst=DST) / tcp / payload

    def drain(self):
        while True:
            try:
                self.q.get_nowait()
            except queue.Empty:
                return

    def collect(self, wait, expect, sport):
        """Segments from the engine to `sport` within `wait` s (stops at `expect`)."""
        got = []
        deadline = time.time() + min(wait, MAX_WAIT)
        while True:
            left = deadline - time.time()
            if left <= 0 or (expect and len(got) >= expect):
                break
            try:
                p = self.q.get(timeout=left)
            except queue.Empty:
                break
            t = p[TCP]
            if t.dport != sport or t.sport != self.dport:
                continue
            data = bytes(t.payload)
            if sport == self.sport and data and t.seq == self.rcv_nxt:
                self.rcv_nxt = (self.rcv_nxt + len(data)) % M
            if sport == self.sport and (int(t.flags) & 0x01) and (t.seq + len(data)) % M == self.rcv_nxt:
                self.rcv_nxt = (self.rcv_nxt + 1) % M
            got.append(
                {
                    "flags": flags_str(t.flags),
                    "seq": t.seq,
                    "ack": t.ack,
                    "len": len(data),
                    "payload": data.decode("latin-1"),
                    "window": t.window,
                }
            )
        return got

    def connect(self, dport, sport):
        self.dport = dport
        self.sport = sport
        iss = 0x1000_0000 + sport * 7919
        self.drain()
        self.sock.send(self.frame(sport, "S", iss, 0, options=[("MSS", 1460)]))
        got = self.collect(MAX_WAIT, 1, sport)
        if not got or got[0]["flags"] != "SA" or got[0]["ack"] != (iss + 1) % M:
            return {"ok": False, "error": "no SYN-ACK", "got": got}
        irs = got[0]["seq"]
        self.snd_nxt = (iss + 1) % M
        self.rcv_nxt = (irs + 1) % M
        self.sock.send(self.frame(sport, "A", self.snd_nxt, self.rcv_nxt))
        return {"ok": True, "iss": iss, "irs": irs, "synack": got[0], "snd_nxt": self.snd_nxt, "rcv_nxt": self.rcv_nxt}

    def send(self, c):
        sport = c.get("sport") or self.sport
        if c.get("dport"):
            self.dport = c["dport"]
        payload = c.get("payload", "").encode("latin-1")
        seq = c["seq"] if c.get("seq") is not None else self.snd_nxt + c.get("seq_off", 0)
        ack = self.rcv_nxt + c.get("ack_off", 0)
        flags = c.get("flags", "A")
        p = self.frame(sport, flags, seq, ack, payload)
        if flags == "":
            p[TCP].flags = 0
        p = Ether(bytes(p))  # checksums computed
        if c.get("bad_tcp_checksum"):
            p[TCP].chksum ^= 0x5A5A
        if c.get("bad_ip_checksum"):
            p[IP].chksum ^= 0x5A5A
        self.drain()
        self.sock.send(p)
        if c.get("advance"):
            n = len(payload) + (1 if "S" in flags else 0) + (1 if "F" in flags else 0)
            self.snd_nxt = (self.snd_nxt + n) % M
        got = self.collect(c.get("wait", 1.0), c.get("expect", 0), sport)
        sent = {"flags": flags, "seq": seq % M, "ack": ack % M, "len": len(payload), "sport": sport}
        return {"sent": sent, "got": got, "snd_nxt": self.snd_nxt, "rcv_nxt": self.rcv_nxt}


def main():
    try:
        peer = Peer()
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(json.dumps({"error": f"setup: {e}"}), flush=True)
        return 1
    print(json.dumps({"ready": True, "engine_mac": peer.dst_mac}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        c = json.loads(line)
        op = c.get("op")
        try:
            if op == "connect":
                out = peer.connect(c["dport"], c["sport"])
            elif op == "send":
                out = peer.send(c)
            elif op == "quit":
                break
            else:
                out = {"error": f"unknown op {op}"}
        except Exception as e:  # noqa: BLE001 - reported to the test
            out = {"error": f"{op}: {e!r}"}
        print(json.dumps(out), flush=True)
    peer.sniffer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
