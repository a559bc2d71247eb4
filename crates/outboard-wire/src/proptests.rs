//! Property tests over every format: parsers are total on arbitrary bytes,
//! whatever parses re-emits to the same repr, and parse(emit(repr)) == repr.

use std::net::Ipv4Addr;

use proptest::prelude::*;

use crate::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::checksum::{copy_and_checksum, RxChecksum, TxChecksum};
use crate::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use crate::icmpv4::{Icmpv4Packet, Icmpv4Repr, TimeExceededCode, UnreachableCode};
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::tcp::{TcpPacket, MAX_OPTIONS_LEN};
use crate::udp::{UdpPacket, UdpRepr};
use crate::{SackBlocks, SeqNumber, TcpFlags, TcpOptions, TcpRepr};

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn ip() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

fn ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (ip(), ip(), any::<u8>(), 0usize..=65515, any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>(), any::<bool>(), 0u16..8192)
        .prop_map(|(src_addr, dst_addr, p, payload_len, ttl, dscp_ecn, ident, dont_frag, more_frags, off)| Ipv4Repr {
            src_addr,
            dst_addr,
            protocol: IpProtocol::from(p),
            payload_len,
            ttl,
            dscp_ecn,
            ident,
            dont_frag,
            more_frags,
            frag_offset: off * 8,
        })
}

fn tcp_options() -> impl Strategy<Value = TcpOptions> {
    (
        any::<Option<u16>>(),
        any::<Option<u8>>(),
        any::<bool>(),
        prop::collection::vec(any::<(u32, u32)>(), 0..=4),
        any::<Option<(u32, u32)>>(),
        // RFC 7413 cookies: none, a request, or 4..=16 bytes of an even count.
        prop::option::of((0usize..=8).prop_flat_map(|half| {
            prop::collection::vec(any::<u8>(), if half == 1 { 0 } else { 2 * half })
        })),
    )
        .prop_map(|(mss, window_scale, sack_permitted, blocks, timestamps, cookie)| {
            let mut sack = SackBlocks::new();
            for (l, r) in blocks {
                sack.push(SeqNumber(l), SeqNumber(r));
            }
            let fast_open = cookie.and_then(|c| crate::tcp::FastOpenCookie::new(&c));
            TcpOptions { mss, window_scale, sack_permitted, sack, timestamps, fast_open }
        })
}

fn tcp_repr() -> impl Strategy<Value = TcpRepr> {
    (1u16.., 1u16.., any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(), any::<u16>(), tcp_options()).prop_map(
        |(src_port, dst_port, seq, ack, flags, window, urgent, options)| TcpRepr {
            src_port,
            dst_port,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags: TcpFlags(flags),
            window,
            urgent,
            options,
        },
    )
}

/// A quoted datagram: an IPv4 header (payload length at least the quoted bytes) and 8..64 bytes.
fn quoted() -> impl Strategy<Value = Vec<u8>> {
    (ipv4_repr(), prop::collection::vec(any::<u8>(), 8..64)).prop_map(|(mut r, data)| {
        r.payload_len = r.payload_len.max(data.len());
        let mut b = vec![0u8; 20];
        r.emit(&mut b).unwrap(); // 20 bytes always fit; payload_len <= 65515 and offset aligned.
        b.extend_from_slice(&data);
        b
    })
}

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);

proptest! {
    // --- arbitrary bytes: total parsers, and parse -> emit -> parse is stable ---

    #[test]
    fn ethernet_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(r) = EthernetFrame::new_checked(&b[..]).and_then(|f| EthernetRepr::parse(&f)) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..], &b[..14]);
        }
    }

    #[test]
    fn arp_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..40), valid in any::<bool>()) {
        let mut b = b;
        if valid && b.len() >= 8 {
            b[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        }
        if let Ok(r) = ArpPacket::new_checked(&b[..]).and_then(|p| ArpRepr::parse(&p)) {
            let mut out = [0u8; 28];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..], &b[..28]);
        }
    }

    #[test]
    fn ipv4_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..100), fix in any::<bool>()) {
        let mut b = b;
        if fix && b.len() >= 20 {
            // Steer towards valid headers: version 4, IHL 5..=15 within the buffer, fitting length.
            let ihl = (b[0] & 0x0f).clamp(5, (b.len() / 4).min(15) as u8);
            b[0] = 0x40 | ihl;
            let total = (b.len() as u16).to_be_bytes();
            b[2..4].copy_from_slice(&total);
        }
        let _ = Ipv4Repr::parse_quoted(&b);
        if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
            let _ = (p.options(), p.payload(), p.verify_checksum());
            if let Ok(r) = Ipv4Repr::parse(&p, RxChecksum::Skip) {
                let mut out = vec![0u8; 20 + r.payload_len];
                r.emit(&mut out).unwrap();
                let back = Ipv4Repr::parse(&Ipv4Packet::new_checked(&out[..]).unwrap(), RxChecksum::Verify).unwrap();
                prop_assert_eq!(back, r);
            }
        }
    }

    #[test]
    fn icmp_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..120), q in quoted(), ty in prop::sample::select(vec![0u8, 3, 8, 11, 5])) {
        // Half the time, make it an error message with a valid quote.
        let mut b = b;
        if b.len() >= 8 && b[4] & 1 == 1 {
            b.truncate(8);
            b[0] = ty;
            b.extend_from_slice(&q);
        }
        if let Ok(p) = Icmpv4Packet::new_checked(&b[..]) {
            if let Ok(r) = Icmpv4Repr::parse(&p, RxChecksum::Skip) {
                let _ = r.quoted();
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(&mut out).unwrap();
                let back = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap(), RxChecksum::Verify).unwrap();
                prop_assert_eq!(back, r);
            }
        }
    }

    #[test]
    fn udp_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(p) = UdpPacket::new_checked(&b[..]) {
            let _ = p.verify_checksum(SRC, DST);
            if let Ok(r) = UdpRepr::parse(&p, SRC, DST, RxChecksum::Skip) {
                let mut out = vec![0u8; r.buffer_len(p.payload().len())];
                out[8..].copy_from_slice(p.payload());
                r.emit(&mut out, SRC, DST, p.payload().len(), TxChecksum::Compute).unwrap();
                let q = UdpPacket::new_checked(&out[..]).unwrap();
                prop_assert_eq!(UdpRepr::parse(&q, SRC, DST, RxChecksum::Verify).unwrap(), r);
            }
        }
    }

    #[test]
    fn tcp_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..100), doff in 5u8..16) {
        let mut b = b;
        if b.len() >= 20 && b[13] & 1 == 1 {
            b[12] = doff << 4; // steer towards headers with options
        }
        let _ = TcpOptions::parse(&b);
        if let Ok(p) = TcpPacket::new_checked(&b[..]) {
            let _ = (p.payload(), p.verify_checksum(SRC, DST));
            if let Ok(r) = TcpRepr::parse(&p, SRC, DST, RxChecksum::Skip) {
                let mut out = vec![0u8; r.buffer_len(p.payload().len())];
                let hl = r.header_len();
                out[hl..].copy_from_slice(p.payload());
                r.emit(&mut out, SRC, DST, p.payload().len(), TxChecksum::Compute).unwrap();
                let q = TcpPacket::new_checked(&out[..]).unwrap();
                let back = TcpRepr::parse(&q, SRC, DST, RxChecksum::Verify).unwrap();
                prop_assert_eq!(back, TcpRepr { options: r.options.fitted(), ..r });
                prop_assert_eq!(q.payload(), p.payload());
            }
        }
    }

    // --- arbitrary reprs: parse(emit(repr)) == repr ---

    #[test]
    fn ethernet_repr_round_trips(src_addr in mac(), dst_addr in mac(), t in any::<u16>()) {
        let r = EthernetRepr { src_addr, dst_addr, ethertype: EtherType::from(t) };
        let mut b = [0u8; 14];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn arp_repr_round_trips(op in any::<u16>(), sha in mac(), spa in ip(), tha in mac(), tpa in ip()) {
        let r = ArpRepr {
            operation: ArpOperation::from(op),
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        };
        let mut b = [0u8; 28];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_repr_round_trips(r in ipv4_repr()) {
        let mut b = vec![0u8; 20 + r.payload_len];
        prop_assert_eq!(r.emit(&mut b), Ok(20));
        prop_assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_checked(&b[..]).unwrap(), RxChecksum::Verify).unwrap(), r);
    }

    #[test]
    fn icmp_repr_round_trips(kind in 0u8..4, a in any::<u16>(), c in any::<u8>(), data in prop::collection::vec(any::<u8>(), 0..64), q in quoted()) {
        let r = match kind {
            0 => Icmpv4Repr::EchoRequest { ident: a, seq_no: u16::from(c), data: &data },
            1 => Icmpv4Repr::EchoReply { ident: a, seq_no: u16::from(c), data: &data },
            2 => {
                let code = UnreachableCode(c);
                let next_hop_mtu = if code == UnreachableCode::FRAG_NEEDED { a } else { 0 };
                Icmpv4Repr::DstUnreachable { code, next_hop_mtu, invoking: &q }
            }
            _ => Icmpv4Repr::TimeExceeded { code: TimeExceededCode(c), invoking: &q },
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap(), RxChecksum::Verify).unwrap(), r);
    }

    #[test]
    fn udp_repr_round_trips_and_fused_emit_matches(src_port in any::<u16>(), dst_port in 1u16.., src in ip(), dst in ip(), payload in prop::collection::vec(any::<u8>(), 0..300)) {
        let r = UdpRepr { src_port, dst_port };
        let mut a = vec![0u8; r.buffer_len(payload.len())];
        a[8..].copy_from_slice(&payload);
        r.emit(&mut a, src, dst, payload.len(), TxChecksum::Compute).unwrap();
        let mut b = vec![0u8; a.len()];
        let sum = copy_and_checksum(&mut b[8..], &payload);
        r.emit(&mut b, src, dst, payload.len(), TxChecksum::Payload(sum)).unwrap();
        prop_assert_eq!(&a, &b);
        let p = UdpPacket::new_checked(&a[..]).unwrap();
        prop_assert_eq!(UdpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap(), r);
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn tcp_repr_round_trips_and_fused_emit_matches(r in tcp_repr(), src in ip(), dst in ip(), payload in prop::collection::vec(any::<u8>(), 0..300)) {
        let hl = r.header_len();
        prop_assert!(hl & 3 == 0 && hl - 20 <= MAX_OPTIONS_LEN);
        let mut a = vec![0u8; r.buffer_len(payload.len())];
        a[hl..].copy_from_slice(&payload);
        prop_assert_eq!(r.emit(&mut a, src, dst, payload.len(), TxChecksum::Compute), Ok(hl));
        let mut b = vec![0u8; a.len()];
        let sum = copy_and_checksum(&mut b[hl..], &payload);
        r.emit(&mut b, src, dst, payload.len(), TxChecksum::Payload(sum)).unwrap();
        prop_assert_eq!(&a, &b);
        let p = TcpPacket::new_checked(&a[..]).unwrap();
        let back = TcpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
        prop_assert_eq!(back, TcpRepr { options: r.options.fitted(), ..r });
        prop_assert_eq!(p.payload(), &payload[..]);
    }
}

// --- IPv6 and ICMPv6 ---

const SRC6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);

proptest! {
    #[test]
    fn ipv6_parse_and_walk_are_total_and_round_trip(b in prop::collection::vec(any::<u8>(), 0..160), fix in any::<bool>(), nh in prop::sample::select(vec![0u8, 6, 17, 43, 44, 58, 59, 60])) {
        let mut b = b;
        if fix && b.len() >= 40 {
            // Make the header valid half the time so the walk sees real chains.
            b[0] = 0x60 | (b[0] & 0x0f);
            let len = (b.len() - 40) as u16;
            b[4..6].copy_from_slice(&len.to_be_bytes());
            b[6] = nh;
        }
        let _ = crate::ipv6::Ipv6Repr::parse_quoted(&b);
        let _ = crate::ipv6::walk_extensions(nh, &b);
        if let Ok(p) = crate::ipv6::Ipv6Packet::new_checked(&b[..]) {
            if let Ok(w) = crate::ipv6::walk_extensions(p.next_header(), p.payload()) {
                prop_assert!(w.upper_offset <= p.payload().len());
            }
            if let Ok(r) = crate::ipv6::Ipv6Repr::parse(&p) {
                let mut out = vec![0u8; r.buffer_len() + r.payload_len];
                r.emit(&mut out).unwrap();
                prop_assert_eq!(crate::ipv6::Ipv6Repr::parse(&crate::ipv6::Ipv6Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            }
        }
    }

    #[test]
    fn icmpv6_parse_is_total_and_round_trips(b in prop::collection::vec(any::<u8>(), 0..160), ty in prop::sample::select(vec![1u8, 2, 3, 4, 128, 129, 133, 134, 135, 136, 137])) {
        let mut b = b;
        if b.len() >= 8 && b[4] & 1 == 1 {
            b[0] = ty;
            b[1] = 0;
        }
        if let Ok(p) = crate::icmpv6::Icmpv6Packet::new_checked(&b[..]) {
            let _ = p.verify_checksum(SRC6, DST6);
            if let Ok(r) = crate::icmpv6::Icmpv6Repr::parse(&p, SRC6, DST6, RxChecksum::Skip) {
                let _ = (r.quoted(), r.source_lla(), r.target_lla(), r.mtu(), r.options().map(|o| o.count()));
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(SRC6, DST6, &mut out).unwrap();
                let back = crate::icmpv6::Icmpv6Repr::parse(&crate::icmpv6::Icmpv6Packet::new_checked(&out[..]).unwrap(), SRC6, DST6, RxChecksum::Verify).unwrap();
                prop_assert_eq!(back, r);
            }
        }
    }
}
