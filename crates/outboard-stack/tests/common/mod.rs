//! Shared test helpers: stack configs, frame builders (with the wire crate's
//! emitters) and a back-to-back pair of stacks on virtual time.
#![allow(dead_code)]

use outboard_stack::{Stack, StackConfig};
use outboard_time::{Duration, Instant};
use outboard_wire::arp::{ArpOperation, ArpRepr};
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use outboard_wire::icmpv4::Icmpv4Repr;
use outboard_wire::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use outboard_wire::udp::UdpRepr;
use outboard_wire::{TcpRepr, TxChecksum};
use std::net::Ipv4Addr;

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
pub const MAC_PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const IP_PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

pub fn cfg(mac: [u8; 6], ip: Ipv4Addr, secret: u8) -> StackConfig {
    let mut c = StackConfig::new(mac, ip, 24);
    c.secret = [secret; 16];
    c
}

pub fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Every frame the stack wants to send now.
pub fn drain(s: &mut Stack, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; s.config().mtu + 14];
    while let Some(n) = s.poll_transmit(now, &mut buf) {
        assert!(n <= s.config().mtu + 14, "frame of {n} bytes over the MTU");
        out.push(buf[..n].to_vec());
        assert!(out.len() < 100_000, "poll_transmit never ends");
    }
    out
}

pub fn eth(dst: [u8; 6], src: [u8; 6], ty: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload.len()];
    EthernetRepr {
        src_addr: EthernetAddress(src),
        dst_addr: EthernetAddress(dst),
        ethertype: ty,
    }
    .emit(&mut f)
    .unwrap();
    f[14..].copy_from_slice(payload);
    f
}

pub fn arp_frame(
    op: ArpOperation,
    sha: [u8; 6],
    spa: Ipv4Addr,
    tha: [u8; 6],
    tpa: Ipv4Addr,
    eth_dst: [u8; 6],
) -> Vec<u8> {
    let repr = ArpRepr {
        operation: op,
        source_hardware_addr: EthernetAddress(sha),
        source_protocol_addr: spa,
        target_hardware_addr: EthernetAddress(tha),
        target_protocol_addr: tpa,
    };
    let mut p = vec![0u8; 28];
    repr.emit(&mut p).unwrap();
    eth(eth_dst, sha, EtherType::Arp, &p)
}

pub fn ip_repr(src: Ipv4Addr, dst: Ipv4Addr, proto: IpProtocol, len: usize) -> Ipv4Repr {
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len: len,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0x1234,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    }
}

/// An IPv4 packet (header + payload) in an Ethernet frame.
pub fn ip_frame(dst_mac: [u8; 6], src_mac: [u8; 6], ip: &Ipv4Repr, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20 + payload.len()];
    ip.emit(&mut p).unwrap();
    p[20..].copy_from_slice(payload);
    eth(dst_mac, src_mac, EtherType::Ipv4, &p)
}

pub fn udp_bytes(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8 + data.len()];
    u[8..].copy_from_slice(data);
    UdpRepr {
        src_port: sport,
        dst_port: dport,
    }
    .emit(&mut u, src, dst, data.len(), TxChecksum::Compute)
    .unwrap();
    u
}

pub fn udp_frame(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    data: &[u8],
    dst_mac: [u8; 6],
) -> Vec<u8> {
    let u = udp_bytes(src, dst, sport, dport, data);
    ip_frame(
        dst_mac,
        MAC_PEER,
        &ip_repr(src, dst, IpProtocol::Udp, u.len()),
        &u,
    )
}

pub fn icmp_bytes(repr: &Icmpv4Repr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(&mut b).unwrap();
    b
}

pub fn tcp_bytes(src: Ipv4Addr, dst: Ipv4Addr, repr: &TcpRepr, data: &[u8]) -> Vec<u8> {
    let hl = repr.header_len();
    let mut b = vec![0u8; hl + data.len()];
    b[hl..].copy_from_slice(data);
    repr.emit(&mut b, src, dst, data.len(), TxChecksum::Compute)
        .unwrap();
    b
}

pub fn tcp_frame(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    repr: &TcpRepr,
    data: &[u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
) -> Vec<u8> {
    let b = tcp_bytes(src, dst, repr, data);
    ip_frame(
        dst_mac,
        src_mac,
        &ip_repr(src, dst, IpProtocol::Tcp, b.len()),
        &b,
    )
}

/// The IPv4 packet inside an Ethernet frame.
pub fn ip_of(frame: &[u8]) -> Option<(Ipv4Repr, Vec<u8>)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let p = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let r = Ipv4Repr::parse(&p, outboard_wire::RxChecksum::Verify).ok()?;
    Some((r, p.payload().to_vec()))
}

/// Teaches `s` that `ip` is at `mac` (an ARP request from it, for `s`).
pub fn teach_arp(s: &mut Stack, now: Instant, mac: [u8; 6], ip: Ipv4Addr) {
    let me = s.config().addr;
    s.receive_frame(
        now,
        &arp_frame(ArpOperation::Request, mac, ip, [0; 6], me, [0xff; 6]),
    );
    drain(s, now);
}

/// Sees every frame in flight (true: towards B) and may rewrite it; false drops it.
pub type Filter = Box<dyn FnMut(bool, &mut Vec<u8>) -> bool>;

/// Two stacks joined by a wire on virtual time.
pub struct Pair {
    pub a: Stack,
    pub b: Stack,
    pub now: Instant,
    /// One-way delay per hop.
    pub delay: Duration,
    pub frames: u64,
    /// Applied to every frame in flight; false drops it.
    pub filter: Option<Filter>,
}

impl Pair {
    pub fn new() -> Pair {
        let now = t(1000);
        Pair {
            a: Stack::new(cfg(MAC_A, IP_A, 1), now),
            b: Stack::new(cfg(MAC_B, IP_B, 2), now),
            now,
            delay: Duration::from_micros(50),
            frames: 0,
            filter: None,
        }
    }

    pub fn with(a: StackConfig, b: StackConfig) -> Pair {
        let now = t(1000);
        Pair {
            a: Stack::new(a, now),
            b: Stack::new(b, now),
            now,
            delay: Duration::from_micros(50),
            frames: 0,
            filter: None,
        }
    }

    /// Moves what both sides have to send, then fires due timers; when nothing
    /// moved, jumps to the next deadline. Returns false when fully idle.
    pub fn step(&mut self) -> bool {
        let from_a = drain(&mut self.a, self.now);
        let from_b = drain(&mut self.b, self.now);
        let moved = !from_a.is_empty() || !from_b.is_empty();
        self.now += self.delay;
        for (to_b, frames) in [(true, from_a), (false, from_b)] {
            for mut f in frames {
                self.frames += 1;
                if let Some(filter) = self.filter.as_mut() {
                    if !filter(to_b, &mut f) {
                        continue;
                    }
                }
                if to_b {
                    self.b.receive_frame(self.now, &f);
                } else {
                    self.a.receive_frame(self.now, &f);
                }
            }
        }
        if !moved {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(d) if d > self.now => self.now = d,
                Some(_) => {}
                None => return false,
            }
        }
        for s in [&mut self.a, &mut self.b] {
            if s.poll_timeout().is_some_and(|d| d <= self.now) {
                s.handle_timeout(self.now);
            }
        }
        true
    }

    /// Steps until `done` holds or virtual time passes `limit`.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        let mut steps = 0u64;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step() {
                return done(self);
            }
            steps += 1;
            assert!(steps < 5_000_000, "runaway loop");
        }
        done(self)
    }
}
