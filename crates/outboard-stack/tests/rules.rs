//! Rules of the protocol core that live in the stack rather than in one
//! connection, one test per rule, named after it (the map from rule to test is
//! docs/TESTS.md): the LISTEN transitions of RFC 9293 §3.3.2 (the listener is
//! the table's), RFC 6528 ISNs as the stack picks them, and ICMP hard errors
//! delivered to the connection they concern.
mod common;

use common::*;
use outboard_stack::Stack;
use outboard_tcp::{Event, State};
use outboard_wire::icmpv4::{Icmpv4Repr, UnreachableCode};
use outboard_wire::ipv4::IpProtocol;
use outboard_wire::{RxChecksum, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
use std::net::SocketAddrV4;

const PEER_PORT: u16 = 40000;
const PEER_ISS: u32 = 7000;

fn stack() -> Stack {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    s
}

/// A segment from the peer to our port 80.
fn from_peer(flags: TcpFlags, seq: u32, ack: u32) -> TcpRepr {
    TcpRepr {
        src_port: PEER_PORT,
        dst_port: 80,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
    }
}

fn deliver(s: &mut Stack, ms: u64, repr: &TcpRepr) {
    s.receive_frame(t(ms), &tcp_frame(IP_PEER, IP_A, repr, &[], MAC_A, MAC_PEER));
}

/// The TCP segments among the frames (with their TCP bytes).
fn tcp_out(frames: &[Vec<u8>]) -> Vec<(TcpRepr, Vec<u8>)> {
    frames
        .iter()
        .filter_map(|f| {
            let (ip, payload) = ip_of(f)?;
            if ip.protocol != IpProtocol::Tcp {
                return None;
            }
            let p = TcpPacket::new_checked(&payload[..]).ok()?;
            let r = TcpRepr::parse(&p, ip.src_addr, ip.dst_addr, RxChecksum::Verify).ok()?;
            Some((r, payload))
        })
        .collect()
}

/// RFC 9293 §3.3.2 CLOSED → LISTEN (passive OPEN): before `tcp_listen` a SYN
/// to the port is refused with RST (§3.10.7.1); after it, the SYN is answered
/// with SYN-ACK (§3.10.7.2).
#[test]
fn closed_passive_open_to_listen_answers_syn_with_syn_ack() {
    let mut s = stack();
    deliver(&mut s, 1, &from_peer(TcpFlags::SYN, PEER_ISS, 0));
    let out = tcp_out(&drain(&mut s, t(1)));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(out[0].0.ack, SeqNumber(PEER_ISS + 1));

    let l = s.tcp_listen(80, 4).unwrap();
    deliver(&mut s, 2, &from_peer(TcpFlags::SYN, PEER_ISS, 0));
    let out = tcp_out(&drain(&mut s, t(2)));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(out[0].0.ack, SeqNumber(PEER_ISS + 1));
    assert_eq!(
        s.tcp_accept(l),
        None,
        "not accepted before the handshake completes"
    );
}

/// RFC 9293 §3.10.7.4 second, SYN-RECEIVED: "If this connection was initiated
/// with a passive OPEN (i.e., came from the LISTEN state), then return this
/// connection to LISTEN state": the embryo is dropped, nothing is accepted,
/// the listener keeps answering SYNs.
#[test]
fn syn_received_rcv_rst_returns_to_listen() {
    let mut s = stack();
    let l = s.tcp_listen(80, 4).unwrap();
    deliver(&mut s, 1, &from_peer(TcpFlags::SYN, PEER_ISS, 0));
    let out = tcp_out(&drain(&mut s, t(1)));
    assert_eq!(out[0].0.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(s.tcp_connections().len(), 1, "one embryonic connection");
    assert_eq!(s.tcp_connections()[0].2, State::SynReceived);

    deliver(&mut s, 2, &from_peer(TcpFlags::RST, PEER_ISS + 1, 0));
    drain(&mut s, t(2));
    s.handle_timeout(t(3));
    assert!(
        s.tcp_connections().iter().all(|c| c.2 == State::Closed),
        "{:?}",
        s.tcp_connections()
    );
    assert_eq!(s.tcp_accept(l), None, "a reset embryo is never accepted");

    // The listener is still there: a new SYN from the same peer gets a SYN-ACK.
    deliver(&mut s, 4, &from_peer(TcpFlags::SYN, PEER_ISS + 100_000, 0));
    let out = tcp_out(&drain(&mut s, t(4)));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(out[0].0.ack, SeqNumber(PEER_ISS + 100_001));
    // And it completes into an accepted connection.
    let iss = out[0].0.seq;
    deliver(
        &mut s,
        5,
        &from_peer(TcpFlags::ACK, PEER_ISS + 100_001, (iss + 1).0),
    );
    assert!(s.tcp_accept(l).is_some());
}

/// RFC 6528 §3, as the stack uses it: each connection's ISN comes from a
/// keyed hash of its 4-tuple plus a clock, so different tuples get unrelated
/// ISNs and two stacks with different secrets pick different ISNs.
#[test]
fn rfc6528_stack_picks_isns_per_tuple_and_per_secret() {
    let mut isns = Vec::new();
    for secret in [1u8, 2] {
        let mut s = Stack::new(cfg(MAC_A, IP_A, secret), t(0));
        teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
        for port in [80u16, 81, 82] {
            s.tcp_connect_from(t(1), 5555, SocketAddrV4::new(IP_PEER, port))
                .unwrap();
            let out = tcp_out(&drain(&mut s, t(1)));
            assert_eq!(out.len(), 1);
            assert!(out[0].0.flags.syn());
            isns.push(out[0].0.seq.0);
        }
    }
    let mut distinct = isns.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), isns.len(), "ISNs {isns:?}");
    // Not a shared counter: consecutive connections are far apart.
    for w in isns[..3].windows(2) {
        assert!(
            w[1].wrapping_sub(w[0]) > 1 << 16 || w[0].wrapping_sub(w[1]) > 1 << 16,
            "{isns:?}"
        );
    }
}

/// RFC 1122 §4.2.3.9 / RFC 9293 §3.9: a hard ICMP error (port unreachable)
/// about our SYN reaches that connection, which fails with "refused" at once
/// instead of retransmitting its SYN.
#[test]
fn rfc1122_icmp_port_unreachable_aborts_the_connection_in_syn_sent() {
    let mut s = stack();
    let id = s.tcp_connect(t(1), SocketAddrV4::new(IP_PEER, 80)).unwrap();
    let frames = drain(&mut s, t(1));
    assert_eq!(tcp_out(&frames).len(), 1);
    // The ICMP error quotes our IPv4 header and the SYN (the frame minus Ethernet).
    let quoted = frames[0][14..].to_vec();
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code: UnreachableCode::PORT,
        next_hop_mtu: 0,
        invoking: &quoted,
    });
    s.receive_frame(
        t(2),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
    assert_eq!(s.stats().icmp_errors_delivered, 1);
    let c = s.tcp(id).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.poll_event(), Some(Event::Reset));
    assert!(
        tcp_out(&drain(&mut s, t(2))).is_empty(),
        "no SYN retransmission"
    );
}

/// A segment with a malformed option (a timestamp of length 3) is not
/// dropped: the option is ignored and the data taken, as Linux's
/// `tcp_parse_options` does (RFC 9293 §3.2 leaves what to do open).
#[test]
fn a_malformed_option_is_ignored_and_the_data_taken_as_linux_does() {
    let mut s = stack();
    let l = s.tcp_listen(80, 4).unwrap();
    deliver(&mut s, 1, &from_peer(TcpFlags::SYN, PEER_ISS, 0));
    let out = tcp_out(&drain(&mut s, t(1)));
    let iss = out[0].0.seq.0;
    deliver(&mut s, 2, &from_peer(TcpFlags::ACK, PEER_ISS + 1, iss.wrapping_add(1)));
    let id = s.tcp_accept(l).expect("established and queued");
    let mut repr = from_peer(TcpFlags::ACK | TcpFlags::PSH, PEER_ISS + 1, iss.wrapping_add(1));
    // Timestamps emit as NOP NOP 8 10 TSval TSecr; all-0x01 values read as NOPs once
    // the option's length says 3 instead of 10.
    repr.options = TcpOptions { timestamps: Some((0x0101_0101, 0x0101_0101)), ..TcpOptions::default() };
    let mut seg = tcp_bytes(IP_PEER, IP_A, &repr, b"hello");
    assert_eq!(&seg[20..24], &[1, 1, 8, 10]);
    seg[23] = 3;
    seg[16..18].copy_from_slice(&[0, 0]);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&IP_PEER.octets());
    pseudo.extend_from_slice(&IP_A.octets());
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(&seg);
    let sum = outboard_wire::checksum::checksum(&pseudo);
    seg[16..18].copy_from_slice(&sum.to_be_bytes());
    let frame = ip_frame(MAC_A, MAC_PEER, &ip_repr(IP_PEER, IP_A, IpProtocol::Tcp, seg.len()), &seg);
    s.receive_frame(t(3), &frame);
    let out = tcp_out(&drain(&mut s, t(3)));
    let mut buf = [0u8; 16];
    let n = s.tcp(id).unwrap().recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello", "the data was taken");
    let out = if out.is_empty() { tcp_out(&drain(&mut s, t(300))) } else { out };
    assert!(out.iter().any(|(r, _)| r.ack == SeqNumber(PEER_ISS + 6)), "and acknowledged: {out:?}");
}

/// An ICMP error about our SYN, quoting it (IPv4 header and TCP header).
fn icmp_about(s: &mut Stack, ms: u64, code: UnreachableCode, quoted: &[u8]) {
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code,
        next_hop_mtu: 0,
        invoking: quoted,
    });
    s.receive_frame(
        t(ms),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
}

/// RFC 5461 / RFC 1122 §4.2.3.9 as Linux's `tcp_v4_err` applies them: host
/// unreachable about our SYN fails the connect at once too (Linux sets
/// `sk_err` = EHOSTUNREACH and `tcp_done`s a SYN-SENT socket for any
/// unreachable code); the connection's `soft_error` names the ICMP error.
/// RFC 5927 §4.1: an error quoting a sequence number we did not send is
/// ignored.
#[test]
fn rfc5461_icmp_host_unreachable_fails_the_connect_and_a_foreign_seq_is_ignored() {
    let mut s = stack();
    let id = s.tcp_connect(t(1), SocketAddrV4::new(IP_PEER, 80)).unwrap();
    let frames = drain(&mut s, t(1));
    let mut quoted = frames[0][14..].to_vec();
    let seq = u32::from_be_bytes([quoted[24], quoted[25], quoted[26], quoted[27]]);
    quoted[24..28].copy_from_slice(&seq.wrapping_add(100_000).to_be_bytes());
    icmp_about(&mut s, 2, UnreachableCode::HOST, &quoted);
    assert_eq!(s.tcp(id).unwrap().state(), State::SynSent, "foreign seq");
    assert_eq!((s.stats().icmp_errors_unmatched, s.stats().icmp_errors_delivered), (1, 0));
    quoted[24..28].copy_from_slice(&seq.to_be_bytes());
    icmp_about(&mut s, 3, UnreachableCode::HOST, &quoted);
    assert_eq!((s.stats().icmp_errors_unmatched, s.stats().icmp_errors_delivered), (1, 1));
    let c = s.tcp(id).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.poll_event(), Some(Event::Reset));
    assert_eq!(
        c.soft_error(),
        Some(outboard_tcp::IcmpError::Unreachable { code: 1 })
    );
    assert!(tcp_out(&drain(&mut s, t(3))).is_empty(), "no SYN retransmission");
}

/// RFC 5927 §4.1 needs the quoted sequence number: an ICMP error that quotes
/// less than 8 bytes of our TCP header (RFC 792 requires 8) cannot be
/// checked and is not believed (Linux's `icmp_unreach` drops it): the ICMP
/// parser counts it malformed (the TCP path checks again) and the connect goes on.
#[test]
fn rfc5927_icmp_error_quoting_too_little_of_the_tcp_header_is_ignored() {
    let mut s = stack();
    let id = s.tcp_connect(t(1), SocketAddrV4::new(IP_PEER, 80)).unwrap();
    let frames = drain(&mut s, t(1));
    // The IPv4 header (20 bytes) and only the ports of the TCP header.
    let quoted = frames[0][14..14 + 24].to_vec();
    icmp_about(&mut s, 2, UnreachableCode::PORT, &quoted);
    let c = s.tcp(id).unwrap();
    assert_eq!(c.state(), State::SynSent);
    assert_eq!(c.soft_error(), None);
    let st = s.stats();
    assert_eq!((st.drops_malformed + st.icmp_errors_unmatched, st.icmp_errors_delivered), (1, 0));
}

/// RFC 9293 §3.10.7.1 exactly, for segments that reach no connection and no
/// listener (and §3.10.7.2 for an ACK at a listener): an RST is never
/// answered; a segment with ACK gets `<SEQ=SEG.ACK><CTL=RST>`; one without
/// gets `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`, SEG.LEN counting data,
/// SYN and FIN. The reset carries no options, no data and a zero window.
#[test]
fn rfc9293_3_10_7_1_stateless_rst_is_exact_for_every_kind_of_segment() {
    let mut s = stack();
    s.tcp_listen(80, 4).unwrap();
    let only_rst = |s: &mut Stack, ms: u64, repr: &TcpRepr, data: &[u8]| -> Option<TcpRepr> {
        s.receive_frame(t(ms), &tcp_frame(IP_PEER, IP_A, repr, data, MAC_A, MAC_PEER));
        let out = tcp_out(&drain(s, t(ms)));
        assert!(out.len() <= 1, "{out:?}");
        out.into_iter().next().map(|(r, bytes)| {
            assert_eq!(bytes.len(), 20, "no options, no data: {r:?}");
            assert_eq!((r.window, r.options), (0, TcpOptions::default()));
            assert_eq!((r.src_port, r.dst_port), (repr.dst_port, repr.src_port));
            r
        })
    };
    let to = |port: u16, flags: TcpFlags, seq: u32, ack: u32| TcpRepr { dst_port: port, ..from_peer(flags, seq, ack) };
    // No listener on 81: ACK set (with data and FIN).
    let r = only_rst(&mut s, 1, &to(81, TcpFlags::ACK | TcpFlags::FIN, 100, 9_000), b"data").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST, SeqNumber(9_000), SeqNumber(0)));
    // No ACK: data, SYN and FIN all count in SEG.LEN.
    let r = only_rst(&mut s, 2, &to(81, TcpFlags::PSH, 100, 0), b"abc").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST | TcpFlags::ACK, SeqNumber(0), SeqNumber(103)));
    let r = only_rst(&mut s, 3, &to(81, TcpFlags::SYN, 100, 0), b"").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST | TcpFlags::ACK, SeqNumber(0), SeqNumber(101)));
    let r = only_rst(&mut s, 4, &to(81, TcpFlags::FIN, u32::MAX, 0), b"xy").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST | TcpFlags::ACK, SeqNumber(0), SeqNumber(2)));
    // An RST is never answered, with or without ACK.
    assert!(only_rst(&mut s, 5, &to(81, TcpFlags::RST, 100, 0), b"").is_none());
    assert!(only_rst(&mut s, 6, &to(81, TcpFlags::RST | TcpFlags::ACK, 100, 5), b"").is_none());
    // §3.10.7.2: at a listener, a SYN-ACK or a stray ACK gets <SEQ=SEG.ACK><CTL=RST>.
    let r = only_rst(&mut s, 7, &to(80, TcpFlags::SYN | TcpFlags::ACK, 100, 4_242), b"").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST, SeqNumber(4_242), SeqNumber(0)));
    let r = only_rst(&mut s, 8, &to(80, TcpFlags::ACK, 100, 777), b"").unwrap();
    assert_eq!((r.flags, r.seq, r.ack), (TcpFlags::RST, SeqNumber(777), SeqNumber(0)));
    assert_eq!(s.stats().tcp_resets_out, 6);
}
