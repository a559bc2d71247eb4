//! IPv6 between two stacks on virtual time (RFC 8200, RFC 4861, RFC 4862,
//! RFC 4443): duplicate-address detection, neighbour discovery, ping6, UDP
//! (fragmented too), TCP, errors, router advertisements and the
//! extension-header rules; both stacks dual-stack, IPv4 still working.
mod common;

use common::*;
use outboard_stack::{AddrOrigin, AddrState, Ipv6Config, Stack, StackConfig, StackError};
use outboard_tcp::State;
use outboard_time::Duration;
use outboard_wire::ethernet::EtherType;
use outboard_wire::icmpv6::{prefix_flags, Icmpv6Repr, NdiscOption, PrefixInfo};
use outboard_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use outboard_wire::RxChecksum;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};

const V6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xa);
const V6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xb);

fn v6cfg(mac: [u8; 6], ip4: std::net::Ipv4Addr, v6: Ipv6Addr, secret: u8) -> StackConfig {
    let mut c = cfg(mac, ip4, secret);
    c.ipv6 = Some(Ipv6Config { addr: Some((v6, 64)), ..Ipv6Config::default() });
    c
}

fn v6pair() -> Pair {
    let mut p = Pair::with(v6cfg(MAC_A, IP_A, V6_A, 1), v6cfg(MAC_B, IP_B, V6_B, 2));
    // RFC 4862 §5.4: both finish duplicate-address detection (1 s) before using their addresses.
    assert!(p.run_until(Duration::from_secs(3), |p| usable(&p.a, V6_A) && usable(&p.b, V6_B)));
    p
}

fn usable(s: &Stack, a: Ipv6Addr) -> bool {
    s.ipv6_addresses().iter().any(|x| x.addr == a && x.state == AddrState::Preferred)
}

/// A connects to B port 80 over IPv6; both ends once established.
fn connected(p: &mut Pair) -> (outboard_stack::ConnId, outboard_stack::ConnId) {
    let l = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    (ca, cb.expect("accepted"))
}

fn sa(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddrV6::new(ip, port, 0, 0).into()
}

#[test]
fn rfc4862_both_stacks_form_link_local_addresses_and_pass_dad() {
    let mut p = v6pair();
    p.run_until(Duration::from_millis(10), |_| false);
    let addrs = p.a.ipv6_addresses();
    assert_eq!(addrs[0].origin, AddrOrigin::LinkLocal);
    assert_eq!(addrs[0].addr, "fe80::ff:fe00:a".parse::<Ipv6Addr>().unwrap());
    // One probe per address, and router solicitations once the link-local address was usable.
    assert!(p.a.stats().ndisc_solicits_out >= 2);
    assert!(p.a.stats().ndisc_router_solicits_out >= 1);
    assert_eq!(p.a.stats().ipv6_dad_failures, 0);
}

#[test]
fn rfc4862_s5_4_a_second_node_with_the_same_address_fails_dad() {
    let mut p = Pair::with(v6cfg(MAC_A, IP_A, V6_A, 1), v6cfg(MAC_B, IP_B, V6_A, 2));
    // Both probe at once: each sees the other's probe for its tentative address.
    p.run_until(Duration::from_secs(3), |_| false);
    assert!(!usable(&p.a, V6_A) && !usable(&p.b, V6_A));
    assert_eq!(p.a.stats().ipv6_dad_failures, 1);
    assert!(p.a.ipv6_addresses().iter().any(|x| x.addr == V6_A && x.state == AddrState::Duplicate));
    // The link-local addresses differ and are usable.
    assert_eq!(p.a.ipv6_addresses()[0].state, AddrState::Preferred);
}

#[test]
fn rfc4861_neighbor_discovery_then_ping6() {
    let mut p = v6pair();
    p.a.icmp_echo_request(p.now, V6_B, 7, 1, b"hello six").unwrap();
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.stats().icmp_echo_replies_in == 1));
    let r = p.a.poll_echo_reply().unwrap();
    assert_eq!((r.from, r.ident, r.seq_no, r.data_len), (V6_B.into(), 7, 1, 9));
    assert!(p.b.stats().ndisc_adverts_out >= 1);
    // IPv4 keeps working beside it.
    p.a.icmp_echo_request(p.now, IP_B, 7, 2, b"hello four").unwrap();
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.stats().icmp_echo_replies_in == 2));
}

#[test]
fn udp_over_ipv6_with_a_fragmented_datagram_and_port_unreachable() {
    let mut p = v6pair();
    let ua = p.a.udp_bind(0).unwrap();
    let ub = p.b.udp_bind(53).unwrap();
    let pa = p.a.udp_local_port(ua).unwrap();
    let big: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    p.a.udp_send_to(p.now, ua, sa(V6_B, 53), b"small").unwrap();
    p.a.udp_send_to(p.now, ua, sa(V6_B, 53), &big).unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(1), |p| {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = p.b.udp_recv_from(ub, &mut buf) {
            assert_eq!(from, sa(V6_A, pa));
            got.push(buf[..n].to_vec());
        }
        got.len() == 2
    }));
    assert_eq!((got[0].as_slice(), &got[1]), (&b"small"[..], &big));
    assert!(p.a.stats().fragments_out >= 14, "{}", p.a.stats().fragments_out);
    // RFC 4443 §3.1: port unreachable comes back as ECONNREFUSED.
    p.a.udp_send_to(p.now, ua, sa(V6_B, 9), b"anyone?").unwrap();
    let mut buf = [0u8; 16];
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.udp_recv_from(ua, &mut buf) == Err(StackError::Refused)));
}

#[test]
fn tcp_over_ipv6_transfers_and_closes_with_an_ipv6_mss() {
    let mut p = v6pair();
    let (ca, cb) = connected(&mut p);
    // RFC 8200 §8.3: MSS = MTU - 60 = 1440; less the 12 bytes of timestamps per segment.
    assert_eq!(p.a.tcp(ca).unwrap().info().snd_mss, 1428);
    assert_eq!(p.b.tcp(cb).unwrap().tuple().remote.ip(), std::net::IpAddr::V6(V6_A));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31) as u8).collect();
    let (mut sent, mut got, mut closed) = (0, Vec::new(), false);
    assert!(p.run_until(Duration::from_secs(60), |p| {
        let c = p.a.tcp(ca).unwrap();
        if sent < data.len() {
            sent += c.send(&data[sent..]).unwrap_or(0);
        } else if !closed {
            c.close();
            closed = true;
        }
        let mut buf = [0u8; 8192];
        let c = p.b.tcp(cb).unwrap();
        loop {
            match c.recv(&mut buf) {
                Ok(0) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => return false,
            }
        }
    }));
    assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    // A connection to a port nobody listens on is reset.
    let c2 = p.a.tcp_connect(p.now, sa(V6_B, 81)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c2).unwrap().state() == State::Closed));
    assert!(p.b.stats().tcp_resets_out >= 1);
}

/// An IPv6 frame from a router (fe80::1, MAC_PEER) to `dst`.
fn from_router(dst_mac: [u8; 6], dst: Ipv6Addr, hop_limit: u8, icmp: &Icmpv6Repr<'_>) -> Vec<u8> {
    let src: Ipv6Addr = "fe80::1".parse().unwrap();
    let len = icmp.buffer_len();
    let mut pkt = vec![0u8; 40 + len];
    let ip = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: 58, payload_len: len, hop_limit, traffic_class: 0, flow_label: 0 };
    ip.emit(&mut pkt).unwrap();
    icmp.emit(src, dst, &mut pkt[40..]).unwrap();
    eth(dst_mac, MAC_PEER, EtherType::Ipv6, &pkt)
}

fn router_advert(hop_limit: u8) -> Vec<u8> {
    let mut opts = vec![0u8; 48];
    NdiscOption::SourceLla(outboard_wire::EthernetAddress(MAC_PEER)).emit(&mut opts[..8]).unwrap();
    NdiscOption::Mtu(1400).emit(&mut opts[8..16]).unwrap();
    let p = PrefixInfo {
        prefix_len: 64,
        flags: prefix_flags::ON_LINK | prefix_flags::AUTONOMOUS,
        valid_lifetime: 86400,
        preferred_lifetime: 14400,
        prefix: "2001:db8:7::".parse().unwrap(),
    };
    NdiscOption::PrefixInfo(p).emit(&mut opts[16..]).unwrap();
    let ra = Icmpv6Repr::RouterAdvert {
        hop_limit: 61,
        flags: 0,
        router_lifetime: 1800,
        reachable_time: 0,
        retrans_timer: 0,
        options: &opts,
    };
    from_router([0x33, 0x33, 0, 0, 0, 1], "ff02::1".parse().unwrap(), hop_limit, &ra)
}

#[test]
fn rfc4861_router_advertisement_gives_slaac_address_default_router_and_mtu() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.ipv6 = Some(Ipv6Config::default());
    let mut s = Stack::new(c, t(0));
    // Off-link destinations have no route before a router speaks.
    assert_eq!(s.tcp_connect(t(0), sa("2001:db8:9::1".parse().unwrap(), 80)).err(), Some(StackError::NoRoute));
    // RFC 4861 §6.1.2: an advertisement with a hop limit below 255 came from off the link.
    s.receive_frame(t(10), &router_advert(64));
    assert_eq!(s.ipv6_default_router(), None);
    s.receive_frame(t(10), &router_advert(255));
    assert_eq!(s.ipv6_default_router(), Some("fe80::1".parse().unwrap()));
    assert_eq!(s.ipv6_mtu(), Some(1400));
    let slaac: Ipv6Addr = "2001:db8:7::ff:fe00:a".parse().unwrap();
    assert!(s.ipv6_addresses().iter().any(|a| a.addr == slaac && matches!(a.origin, AddrOrigin::Autoconf { .. })));
    // DAD for it, then it is usable; a connect off-link now goes via the router with the advertised MTU's MSS.
    for ms in [1000, 2000, 3000] {
        drain(&mut s, t(ms));
        s.handle_timeout(t(ms));
    }
    assert!(usable(&s, slaac));
    let id = s.tcp_connect(t(3000), sa("2001:db8:9::1".parse().unwrap(), 80)).unwrap();
    let frames = drain(&mut s, t(3000));
    // The router's MAC was learned from the advertisement: the SYN goes straight to it.
    let syn = frames.iter().find(|f| f[12..14] == [0x86, 0xdd] && f[20] == 6).expect("a SYN");
    assert_eq!(syn[..6], MAC_PEER);
    let ip = Ipv6Packet::new_checked(&syn[14..]).unwrap();
    assert_eq!((ip.src_addr(), ip.hop_limit()), (slaac, 61));
    assert_eq!(s.tcp(id).unwrap().tuple().local.ip(), std::net::IpAddr::V6(slaac));
}

#[test]
fn rfc8200_s4_unknown_next_header_and_options_get_parameter_problems() {
    let mut p = v6pair();
    // Resolve B's MAC at A and A's at B first (a ping).
    p.a.icmp_echo_request(p.now, V6_B, 1, 1, b"x").unwrap();
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.stats().icmp_echo_replies_in == 1));
    let send = |p: &mut Pair, next: u8, payload: &[u8]| {
        let ip = Ipv6Repr { src_addr: V6_A, dst_addr: V6_B, next_header: next, payload_len: payload.len(), hop_limit: 64, traffic_class: 0, flow_label: 0 };
        let mut pkt = vec![0u8; 40 + payload.len()];
        ip.emit(&mut pkt).unwrap();
        pkt[40..].copy_from_slice(payload);
        let f = eth(MAC_B, MAC_A, EtherType::Ipv6, &pkt);
        p.b.receive_frame(p.now, &f);
        drain(&mut p.b, p.now)
    };
    let problem = |frames: Vec<Vec<u8>>| -> Option<(u8, u32)> {
        frames.iter().find_map(|f| {
            let ip = Ipv6Packet::new_checked(&f[14..]).ok()?;
            let icmp = outboard_wire::Icmpv6Packet::new_checked(ip.payload()).ok()?;
            match Icmpv6Repr::parse(&icmp, ip.src_addr(), ip.dst_addr(), RxChecksum::Verify).ok()? {
                Icmpv6Repr::ParamProblem { code, pointer, .. } => Some((code, pointer)),
                _ => None,
            }
        })
    };
    // Protocol 200: code 1, pointing at the fixed header's Next Header.
    assert_eq!(problem(send(&mut p, 200, &[0; 8])), Some((1, 6)));
    // A Destination Options header with an option of action 10: code 2 at the option.
    p.now += Duration::from_secs(1);
    assert_eq!(problem(send(&mut p, 60, &[59, 0, 0x9e, 2, 0, 0, 0, 0])), Some((2, 42)));
    // Action 01: discarded silently.
    p.now += Duration::from_secs(1);
    assert_eq!(problem(send(&mut p, 60, &[59, 0, 0x5e, 2, 0, 0, 0, 0])), None);
    assert_eq!(p.b.stats().drops_ipv6_extension_header, 2);
}

#[test]
fn rfc8201_packet_too_big_lowers_the_connections_segment_size() {
    let mut p = v6pair();
    let (ca, _) = connected(&mut p);
    // A full segment from A, as a router on the path would quote it.
    p.a.tcp(ca).unwrap().send(&[7u8; 4000]).unwrap();
    let frames = drain(&mut p.a, p.now);
    let seg = frames.iter().find(|f| f.len() > 1400 && f[12..14] == [0x86, 0xdd]).expect("a full-size segment");
    let quote = &seg[14..14 + 1232];
    let ptb = Icmpv6Repr::PacketTooBig { mtu: 1280, invoking: quote };
    let router: Ipv6Addr = "2001:db8::fe".parse().unwrap();
    let mut icmp = vec![0u8; ptb.buffer_len()];
    ptb.emit(router, V6_A, &mut icmp).unwrap();
    let ip = Ipv6Repr { src_addr: router, dst_addr: V6_A, next_header: 58, payload_len: icmp.len(), hop_limit: 64, traffic_class: 0, flow_label: 0 };
    let mut pkt = vec![0u8; 40];
    ip.emit(&mut pkt).unwrap();
    pkt.extend_from_slice(&icmp);
    p.a.receive_frame(p.now, &eth(MAC_A, MAC_B, EtherType::Ipv6, &pkt));
    assert_eq!(p.a.stats().icmpv6_packet_too_big_in, 1);
    assert_eq!(p.a.stats().icmp_errors_delivered, 1);
    // RFC 8201 §4: 1280 - 40 - 20, less 12 bytes of timestamps.
    assert_eq!(p.a.tcp(ca).unwrap().info().snd_mss, 1208);
    // A claim below the IPv6 minimum is taken as 1280 (RFC 8201 §4).
    let ptb = Icmpv6Repr::PacketTooBig { mtu: 600, invoking: quote };
    ptb.emit(router, V6_A, &mut pkt[40..]).unwrap();
    p.a.receive_frame(p.now, &eth(MAC_A, MAC_B, EtherType::Ipv6, &pkt));
    assert_eq!(p.a.tcp(ca).unwrap().info().snd_mss, 1208);
}

#[test]
fn an_ipv4_only_listener_answers_ipv6_syns_with_rst_and_takes_ipv4() {
    let mut p = v6pair();
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_families(l, outboard_stack::Families::Ipv4);
    let c6 = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c6).unwrap().state() == State::Closed));
    assert!(p.b.tcp_accept(l).is_none());
    let c4 = p.a.tcp_connect(p.now, std::net::SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c4).unwrap().state() == State::Established));
    assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l)));
}

#[test]
fn an_ipv6_only_listener_answers_ipv4_syns_with_rst_and_takes_ipv6() {
    let mut p = v6pair();
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_families(l, outboard_stack::Families::Ipv6);
    let c4 = p.a.tcp_connect(p.now, std::net::SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c4).unwrap().state() == State::Closed));
    assert!(p.b.tcp_accept(l).is_none());
    let c6 = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c6).unwrap().state() == State::Established));
    assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l)));
}

#[test]
fn a_listener_bound_to_one_address_takes_only_connections_to_it() {
    let mut p = v6pair();
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_families(l, outboard_stack::Families::Addr(V6_B.into()));
    let c4 = p.a.tcp_connect(p.now, std::net::SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c4).unwrap().state() == State::Closed));
    let c6 = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c6).unwrap().state() == State::Established));
    assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l)));
}

#[test]
fn an_ipv4_and_an_ipv6_only_listener_share_a_port_and_overlapping_ones_do_not() {
    use outboard_stack::{Families, StackError};
    let mut p = v6pair();
    let l4 = p.b.tcp_listen_for(80, 8, Families::Ipv4).unwrap();
    let l6 = p.b.tcp_listen_for(80, 8, Families::Ipv6).unwrap();
    // Linux: EADDRINUSE for a second wildcard of a family, or an address of one taken.
    assert_eq!(p.b.tcp_listen_for(80, 8, Families::Both), Err(StackError::AddrInUse));
    assert_eq!(p.b.tcp_listen_for(80, 8, Families::Addr(V6_B.into())), Err(StackError::AddrInUse));
    assert_eq!(p.b.tcp_listen(80, 8), Err(StackError::AddrInUse));
    let c4 = p.a.tcp_connect(p.now, std::net::SocketAddrV4::new(IP_B, 80)).unwrap();
    let c6 = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| [c4, c6].iter().all(|c| p.a.tcp(*c).unwrap().state() == State::Established)));
    assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l4) && p.b.tcp_accept_pending(l6)));
    let got4 = p.b.tcp_accept(l4).unwrap();
    let got6 = p.b.tcp_accept(l6).unwrap();
    assert!(p.b.tcp(got4).unwrap().tuple().local.is_ipv4(), "the IPv4 connection went to the IPv4 listener");
    assert!(p.b.tcp(got6).unwrap().tuple().local.is_ipv6(), "the IPv6 connection went to the IPv6 listener");
    // Closing one leaves the other listening.
    p.b.tcp_unlisten(l4);
    let again = p.a.tcp_connect(p.now, sa(V6_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(again).unwrap().state() == State::Established));
    let c4b = p.a.tcp_connect(p.now, std::net::SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(c4b).unwrap().state() == State::Closed));
}

#[test]
fn rfc8200_s8_1_a_udp_datagram_without_checksum_is_discarded_over_ipv6() {
    let mut p = v6pair();
    let ub = p.b.udp_bind(53).unwrap();
    // Resolve first (a ping), then hand B a UDP datagram whose checksum field is 0.
    p.a.icmp_echo_request(p.now, V6_B, 1, 1, b"x").unwrap();
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.stats().icmp_echo_replies_in == 1));
    let mut udp = vec![0u8; 8 + 5];
    udp[0..2].copy_from_slice(&4000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&53u16.to_be_bytes());
    udp[4..6].copy_from_slice(&13u16.to_be_bytes());
    udp[8..].copy_from_slice(b"hello");
    let ip = Ipv6Repr { src_addr: V6_A, dst_addr: V6_B, next_header: 17, payload_len: udp.len(), hop_limit: 64, traffic_class: 0, flow_label: 0 };
    let mut pkt = vec![0u8; 40];
    ip.emit(&mut pkt).unwrap();
    pkt.extend_from_slice(&udp);
    let before = p.b.stats().drops_checksum;
    p.b.receive_frame(p.now, &eth(MAC_B, MAC_A, EtherType::Ipv6, &pkt));
    assert_eq!(p.b.stats().drops_checksum, before + 1);
    assert_eq!(p.b.udp_recv_from(ub, &mut [0u8; 16]), Err(StackError::WouldBlock));
}
