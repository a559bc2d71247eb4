//! Drives one `Stack` with frames and calls chosen by arbitrary bytes: raw
//! frames, well-formed frames of every kind built by the wire crate with
//! fields from the input (valid checksums, so they reach deep), segments
//! aimed at the live sequence space of the stack's own connections, ICMP
//! errors quoting what the stack sent, timer jumps and application calls.
//! Shared by the fuzz target `stack_frames` and the proptest in `props.rs`.
//!
//! Checks after every step: no panic, `poll_transmit` terminates with frames
//! that fit the MTU, and memory stays under a bound.

use outboard_stack::{ConnId, ListenerId, Stack, StackConfig, UdpId};
use outboard_time::{Duration, Instant};
use outboard_wire::arp::{ArpOperation, ArpRepr};
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use outboard_wire::icmpv4::{Icmpv4Repr, TimeExceededCode, UnreachableCode};
use outboard_wire::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use outboard_wire::udp::UdpRepr;
use outboard_wire::{RxChecksum, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr, TxChecksum};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const ADDRS: [Ipv4Addr; 6] = [
    Ipv4Addr::new(10, 0, 0, 2),
    Ipv4Addr::new(10, 0, 0, 3),
    Ipv4Addr::new(10, 0, 0, 1),
    Ipv4Addr::new(10, 0, 0, 255),
    Ipv4Addr::new(192, 168, 1, 1),
    Ipv4Addr::new(0, 0, 0, 0),
];
const PORTS: [u16; 5] = [80, 53, 4000, 4001, 33000];
const ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const ADDRS6: [Ipv6Addr; 7] = [
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 9),
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0, 0, 0, 7),
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::UNSPECIFIED,
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 1),
];
const MEMORY_BOUND: usize = 64 * 1024 * 1024;

struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self
            .data
            .split_first()
            .map(|(b, r)| (*b, r))
            .unwrap_or((0, &[]));
        self.data = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.u8()) % from.len()]
    }
    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What the driver remembers of the stack's output, to aim inputs at live state.
#[derive(Default)]
struct Seen {
    /// The last TCP segment the stack sent: (to, repr).
    tcp: Option<(Ipv4Addr, TcpRepr)>,
    /// The last IPv4 packet the stack sent (header and payload), for ICMP quotes.
    ip: Vec<u8>,
    /// The last IPv6 packet the stack sent, for ICMPv6 quotes.
    ip6: Vec<u8>,
}

struct Driver {
    s: Stack,
    now: Instant,
    seen: Seen,
    conns: Vec<ConnId>,
    listener: ListenerId,
    udp: UdpId,
    buf: Vec<u8>,
}

/// Runs the program in `data`. Returns the number of frames the stack sent.
pub fn run(data: &[u8]) -> usize {
    let mut input = Input { data };
    let mut cfg = StackConfig::new(MAC, ADDR, 24);
    cfg.gateway = Some(Ipv4Addr::new(10, 0, 0, 254));
    cfg.syn_queue_cap = usize::from(input.u8() % 8);
    cfg.mtu = [1500, 576, 9000, 68][usize::from(input.u8() % 4)];
    cfg.reassembly_mem_cap = 64 * 1024;
    cfg.tcp.send_buffer = 32 * 1024;
    cfg.tcp.recv_buffer = 32 * 1024;
    // Dual stack (IPv6 stays off on links below its 1280-byte minimum MTU).
    cfg.ipv6 = Some(outboard_stack::Ipv6Config {
        addr: Some((ADDR6, 64)),
        dad_transmits: u32::from(input.u8() % 2),
        ..outboard_stack::Ipv6Config::default()
    });
    let now = Instant::from_millis(1000);
    let mut s = Stack::new(cfg, now);
    let listener = s.tcp_listen(80, 4).expect("fresh stack");
    let udp = s.udp_bind(53).expect("fresh stack");
    let buf = vec![0u8; s.config().mtu + 14];
    let mut d = Driver {
        s,
        now,
        seen: Seen::default(),
        conns: Vec::new(),
        listener,
        udp,
        buf,
    };
    let mut sent = 0;
    let mut steps = 0;
    while !input.is_empty() && steps < 256 {
        steps += 1;
        d.step(&mut input);
        sent += d.drain();
        assert!(
            d.s.memory_in_use() < MEMORY_BOUND,
            "memory {}",
            d.s.memory_in_use()
        );
    }
    // Let every timer run out: the stack must go quiet.
    for _ in 0..10_000 {
        let Some(t) = d.s.poll_timeout() else { break };
        d.now = d.now.max(t);
        d.s.handle_timeout(d.now);
        sent += d.drain();
    }
    sent
}

impl Driver {
    fn step(&mut self, inp: &mut Input<'_>) {
        match inp.u8() % 10 {
            0 => {
                let n = usize::from(inp.u16()) % 1600;
                let f = inp.bytes(n).to_vec();
                self.s.receive_frame(self.now, &f);
            }
            1 => self.arp(inp),
            2 => self.ip_raw(inp),
            3 => self.udp_in(inp),
            4 | 5 => self.tcp_in(inp),
            6 => self.icmp_in(inp),
            7 => {
                self.now +=
                    Duration::from_millis(u64::from(inp.u16()) * u64::from(inp.u8() % 4 + 1));
                if self.s.poll_timeout().is_some_and(|t| t <= self.now) {
                    self.s.handle_timeout(self.now);
                }
            }
            8 if inp.bool() => self.ipv6_in(inp),
            8 => self.app(inp),
            _ => {
                let dst = inp.pick(&ADDRS);
                let n = usize::from(inp.u16()) % 70_000;
                let payload = vec![0xa5u8; n];
                let _ = self.s.udp_send_to(
                    self.now,
                    self.udp,
                    SocketAddrV4::new(dst, inp.pick(&PORTS)),
                    &payload,
                );
                let _ =
                    self.s
                        .icmp_echo_request(self.now, dst, 1, inp.u16(), &payload[..n.min(100)]);
                let dst6 = inp.pick(&ADDRS6);
                let _ = self.s.udp_send_to(self.now, self.udp, SocketAddrV6::new(dst6, inp.pick(&PORTS), 0, 0), &payload);
                let _ = self.s.icmp_echo_request(self.now, dst6, 1, inp.u16(), &payload[..n.min(100)]);
                let _ = self.s.tcp_connect(self.now, SocketAddrV6::new(dst6, inp.pick(&PORTS), 0, 0));
            }
        }
    }

    fn drain(&mut self) -> usize {
        let mut n = 0;
        let limit = self.s.config().mtu + 14;
        while let Some(len) = self.s.poll_transmit(self.now, &mut self.buf) {
            assert!(len <= limit, "frame of {len} bytes over the MTU");
            n += 1;
            assert!(n < 100_000, "poll_transmit never ends");
            self.remember(len);
        }
        n
    }

    fn remember(&mut self, len: usize) {
        let frame = &self.buf[..len];
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        if eth.ethertype() == EtherType::Ipv6 {
            self.seen.ip6 = eth.payload().to_vec();
            return;
        }
        if eth.ethertype() != EtherType::Ipv4 {
            return;
        }
        let Ok(p) = Ipv4Packet::new_checked(eth.payload()) else {
            return;
        };
        let Ok(ip) = Ipv4Repr::parse(&p, RxChecksum::Verify) else {
            return;
        };
        self.seen.ip = eth.payload()[..p.total_len() as usize].to_vec();
        if ip.protocol == IpProtocol::Tcp && !ip.is_fragment() {
            if let Ok(t) = TcpPacket::new_checked(p.payload())
                .and_then(|t| TcpRepr::parse(&t, ip.src_addr, ip.dst_addr, RxChecksum::Verify))
            {
                self.seen.tcp = Some((ip.dst_addr, t));
            }
        }
    }

    fn arp(&mut self, inp: &mut Input<'_>) {
        let op = [
            ArpOperation::Request,
            ArpOperation::Reply,
            ArpOperation::Unknown(7),
        ][usize::from(inp.u8() % 3)];
        let repr = ArpRepr {
            operation: op,
            source_hardware_addr: EthernetAddress(if inp.bool() {
                PEER_MAC
            } else {
                [inp.u8(), 0, 0, 0, 0, 9]
            }),
            source_protocol_addr: inp.pick(&ADDRS),
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: if inp.bool() { ADDR } else { inp.pick(&ADDRS) },
        };
        let mut p = [0u8; 28];
        let _ = repr.emit(&mut p);
        let dst = if inp.bool() { [0xff; 6] } else { MAC };
        self.send_frame(dst, EtherType::Arp, &p);
    }

    fn ip_header(&self, inp: &mut Input<'_>, proto: IpProtocol, len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: if inp.u8() & 3 == 0 {
                inp.pick(&ADDRS)
            } else {
                ADDRS[0]
            },
            dst_addr: if inp.u8() & 3 == 0 {
                inp.pick(&ADDRS)
            } else {
                ADDR
            },
            protocol: proto,
            payload_len: len,
            ttl: 64,
            dscp_ecn: 0,
            ident: u16::from(inp.u8() % 4),
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
        }
    }

    fn ip_raw(&mut self, inp: &mut Input<'_>) {
        let any = inp.u8();
        let proto = IpProtocol::from(inp.pick(&[1u8, 6, 17, 132, any]));
        let n = usize::from(inp.u16()) % 1480;
        let payload = inp.bytes(n).to_vec();
        let mut ip = self.ip_header(inp, proto, payload.len());
        ip.more_frags = inp.bool();
        ip.frag_offset = (inp.u16() % 8192) * 8 % 65528;
        if inp.bool() {
            ip.frag_offset = u16::from(inp.u8() % 4) * 8;
        }
        self.send_ip(&ip, &payload);
    }

    fn udp_in(&mut self, inp: &mut Input<'_>) {
        let n = usize::from(inp.u16()) % 1472;
        let data = inp.bytes(n).to_vec();
        let repr = UdpRepr {
            src_port: inp.pick(&PORTS),
            dst_port: inp.pick(&PORTS),
        };
        let ip = self.ip_header(inp, IpProtocol::Udp, 8 + data.len());
        let mut u = vec![0u8; 8 + data.len()];
        u[8..].copy_from_slice(&data);
        let _ = repr.emit(
            &mut u,
            ip.src_addr,
            ip.dst_addr,
            data.len(),
            TxChecksum::Compute,
        );
        self.send_ip(&ip, &u);
    }

    fn tcp_in(&mut self, inp: &mut Input<'_>) {
        let any = inp.u8();
        let flags = TcpFlags(inp.pick(&[0x02, 0x10, 0x12, 0x11, 0x14, 0x04, 0x18, 0x01, any]));
        let len = usize::from(inp.u16()) % 1400;
        let data = vec![0x3cu8; len];
        let options = TcpOptions {
            mss: inp.bool().then(|| inp.u16()),
            window_scale: inp.bool().then(|| inp.u8() % 16),
            sack_permitted: inp.bool(),
            timestamps: inp.bool().then(|| (inp.u32(), inp.u32())),
            ..TcpOptions::default()
        };
        // Aim at the live connection (the last segment the stack sent) or anywhere.
        let mut repr = TcpRepr {
            src_port: inp.pick(&PORTS),
            dst_port: inp.pick(&PORTS),
            seq: SeqNumber(inp.u32()),
            ack: SeqNumber(inp.u32()),
            flags,
            window: inp.u16(),
            urgent: 0,
            options,
        };
        let mut src = ADDRS[0];
        if let (true, Some((to, last))) = (inp.bool(), self.seen.tcp) {
            src = to;
            repr.src_port = last.dst_port;
            repr.dst_port = last.src_port;
            repr.seq = last.ack + usize::from(inp.u8()) * 100;
            repr.ack = last.seq + last.segment_len(0) + usize::from(inp.u8()) * 100;
            if inp.u8() & 3 == 0 {
                // A cookie-style third step: ACK exactly our SYN-ACK.
                repr.flags = TcpFlags::ACK;
                repr.ack = last.seq + 1;
            }
        }
        let mut ip = self.ip_header(inp, IpProtocol::Tcp, repr.header_len() + data.len());
        ip.src_addr = src;
        let mut b = vec![0u8; repr.header_len() + data.len()];
        let hl = repr.header_len();
        b[hl..].copy_from_slice(&data);
        if repr
            .emit(
                &mut b,
                ip.src_addr,
                ip.dst_addr,
                data.len(),
                TxChecksum::Compute,
            )
            .is_ok()
        {
            self.send_ip(&ip, &b);
        }
    }

    fn icmp_in(&mut self, inp: &mut Input<'_>) {
        let quote: Vec<u8> = if inp.bool() && !self.seen.ip.is_empty() {
            let cut = usize::from(inp.u8());
            self.seen.ip[..self.seen.ip.len().min(28 + cut)].to_vec()
        } else {
            let n = usize::from(inp.u8());
            inp.bytes(n).to_vec()
        };
        let repr = match inp.u8() % 4 {
            0 => Icmpv4Repr::DstUnreachable {
                code: UnreachableCode(inp.u8() % 16),
                next_hop_mtu: inp.u16(),
                invoking: &quote,
            },
            1 => Icmpv4Repr::DstUnreachable {
                code: UnreachableCode::FRAG_NEEDED,
                next_hop_mtu: inp.u16(),
                invoking: &quote,
            },
            2 => Icmpv4Repr::TimeExceeded {
                code: TimeExceededCode(inp.u8() % 2),
                invoking: &quote,
            },
            _ => Icmpv4Repr::EchoRequest {
                ident: inp.u16(),
                seq_no: inp.u16(),
                data: &quote,
            },
        };
        let mut b = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut b).is_ok() {
            let ip = self.ip_header(inp, IpProtocol::Icmp, b.len());
            self.send_ip(&ip, &b);
        }
    }

    fn app(&mut self, inp: &mut Input<'_>) {
        match inp.u8() % 8 {
            0 => {
                let remote = SocketAddrV4::new(inp.pick(&ADDRS), inp.pick(&PORTS));
                if let Ok(id) = self.s.tcp_connect(self.now, remote) {
                    self.conns.push(id);
                }
            }
            1 => {
                if let Some(id) = self.s.tcp_accept(self.listener) {
                    self.conns.push(id);
                }
            }
            2..=5 if !self.conns.is_empty() => {
                let i = usize::from(inp.u8()) % self.conns.len();
                let id = self.conns[i];
                let op = inp.u8() % 6;
                if op == 5 {
                    self.s.tcp_release(id);
                    self.conns.swap_remove(i);
                    return;
                }
                let Some(c) = self.s.tcp(id) else { return };
                match op {
                    0 => drop(c.send(&vec![0x42; usize::from(inp.u16())])),
                    1 => drop(c.recv(&mut [0u8; 4096])),
                    2 => c.shutdown_write(),
                    3 => c.close(),
                    _ => c.abort(),
                }
            }
            6 => {
                let mut b = [0u8; 2048];
                let _ = self.s.udp_recv_from(self.udp, &mut b);
            }
            _ => {
                let _ = self.s.tcp_connections();
                let _ = self.s.stats();
            }
        }
    }

    fn send_ip(&mut self, ip: &Ipv4Repr, payload: &[u8]) {
        let mut p = vec![0u8; 20 + payload.len()];
        if ip.emit(&mut p).is_err() {
            return;
        }
        p[20..].copy_from_slice(payload);
        self.send_frame(MAC, EtherType::Ipv4, &p);
    }

    /// An IPv6 packet of a kind picked by the input (neighbour discovery,
    /// echo, errors quoting what the stack sent, TCP, UDP, extension
    /// headers, fragments), checksums right, to us or our groups.
    fn ipv6_in(&mut self, inp: &mut Input<'_>) {
        use outboard_wire::icmpv6::{Icmpv6Repr, NdiscOption, PrefixInfo};
        use outboard_wire::ipv6::Ipv6Repr;
        let src = inp.pick(&ADDRS6);
        let dst = if inp.bool() { ADDR6 } else { inp.pick(&ADDRS6) };
        let hop_limit = if inp.bool() { 255 } else { inp.u8() };
        let mut opts = vec![0u8; 48];
        let _ = NdiscOption::SourceLla(EthernetAddress(PEER_MAC)).emit(&mut opts[..8]);
        let _ = NdiscOption::Mtu(u32::from(inp.u16())).emit(&mut opts[8..16]);
        let p = PrefixInfo { prefix_len: inp.u8() % 129, flags: inp.u8(), valid_lifetime: inp.u32(), preferred_lifetime: inp.u32(), prefix: inp.pick(&ADDRS6) };
        let _ = NdiscOption::PrefixInfo(p).emit(&mut opts[16..]);
        let quote = self.seen.ip6.clone();
        let n = usize::from(inp.u8());
        let data = inp.bytes(n).to_vec();
        let target = inp.pick(&ADDRS6);
        let (next, payload) = match inp.u8() % 10 {
            k @ 0..=5 => {
                let icmp = match k {
                    0 => Icmpv6Repr::NeighborSolicit { target, options: &opts[..8 * usize::from(inp.u8() % 2)] },
                    1 => Icmpv6Repr::NeighborAdvert { flags: inp.u8(), target, options: &opts[..8] },
                    2 => Icmpv6Repr::RouterAdvert { hop_limit: inp.u8(), flags: 0, router_lifetime: inp.u16(), reachable_time: 0, retrans_timer: 0, options: &opts },
                    3 => Icmpv6Repr::EchoRequest { ident: 1, seq_no: inp.u16(), data: &data },
                    4 => Icmpv6Repr::PacketTooBig { mtu: u32::from(inp.u16()), invoking: &quote },
                    _ => Icmpv6Repr::DstUnreachable { code: outboard_wire::icmpv6::UnreachableCode(inp.u8() % 8), invoking: &quote },
                };
                let mut b = vec![0u8; icmp.buffer_len()];
                if icmp.emit(src, dst, &mut b).is_err() {
                    return;
                }
                (58u8, b)
            }
            6 => {
                let repr = TcpRepr {
                    src_port: inp.pick(&PORTS),
                    dst_port: inp.pick(&PORTS),
                    seq: SeqNumber(inp.u32()),
                    ack: SeqNumber(inp.u32()),
                    flags: TcpFlags(inp.u8() & 0x3f),
                    window: inp.u16(),
                    urgent: 0,
                    options: TcpOptions { mss: Some(inp.u16()), ..TcpOptions::default() },
                };
                let mut b = vec![0u8; repr.buffer_len(data.len())];
                let hl = repr.header_len();
                b[hl..].copy_from_slice(&data);
                let _ = repr.emit(&mut b, src, dst, data.len(), TxChecksum::Compute);
                (6, b)
            }
            7 => {
                let repr = UdpRepr { src_port: inp.pick(&PORTS), dst_port: inp.pick(&PORTS) };
                let mut b = vec![0u8; 8 + data.len()];
                b[8..].copy_from_slice(&data);
                let _ = repr.emit(&mut b, src, dst, data.len(), TxChecksum::Compute);
                (17, b)
            }
            // Extension headers and fragments: raw, as the input says.
            _ => (inp.pick(&[0u8, 43, 44, 60, 59, 200]), data.clone()),
        };
        let ip = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: next, payload_len: payload.len(), hop_limit, traffic_class: 0, flow_label: 0 };
        let mut pkt = vec![0u8; 40 + payload.len()];
        if ip.emit(&mut pkt).is_err() {
            return;
        }
        pkt[40..].copy_from_slice(&payload);
        let mac = if dst.is_multicast() { outboard_wire::icmpv6::multicast_mac(dst).0 } else { MAC };
        self.send_frame(mac, EtherType::Ipv6, &pkt);
    }

    fn send_frame(&mut self, dst: [u8; 6], ty: EtherType, payload: &[u8]) {
        let mut f = vec![0u8; 14 + payload.len()];
        let eth = EthernetRepr {
            src_addr: EthernetAddress(PEER_MAC),
            dst_addr: EthernetAddress(dst),
            ethertype: ty,
        };
        let _ = eth.emit(&mut f);
        f[14..].copy_from_slice(payload);
        self.s.receive_frame(self.now, &f);
    }
}
