//! Options set on a listener reach the connections it accepts, as Linux's
//! accepted sockets inherit them: TCP_MAXSEG (the SYN-ACK's MSS, RFC 9293
//! §3.7.1, and the send MSS's ceiling) and IP_TOS (the DSCP of every packet
//! from the SYN-ACK on), on the SYN-queue path and the SYN-cookie path.
mod common;

use common::*;
use outboard_tcp::State;
use outboard_time::Duration;
use outboard_wire::{RxChecksum, TcpPacket, TcpRepr};
use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::rc::Rc;

/// What B sent: (TOS byte, TCP header, payload length) of each segment.
type Seen = Rc<RefCell<Vec<(u8, TcpRepr, usize)>>>;

fn watch(p: &mut Pair) -> Seen {
    let seen: Seen = Rc::default();
    let s = seen.clone();
    p.filter = Some(Box::new(move |to_b, f: &mut Vec<u8>| {
        if let (false, Some((ip, tcp))) = (to_b, ip_of(f)) {
            let pkt = TcpPacket::new_checked(&tcp[..]).expect("a TCP segment");
            let repr = TcpRepr::parse(&pkt, ip.src_addr, ip.dst_addr, RxChecksum::Verify).expect("valid");
            s.borrow_mut().push((ip.dscp_ecn, repr, pkt.payload().len()));
        }
        true
    }));
    seen
}

/// A listener with TCP_MAXSEG 1000 and IP_TOS 0x28 (set after listen, as
/// Linux allows); `cookies`: a SYN queue of 0, so the SYN-ACK is a cookie's.
fn inherit(cookies: bool) {
    let a = cfg(MAC_A, IP_A, 1);
    let mut b = cfg(MAC_B, IP_B, 2);
    if cookies {
        b.syn_queue_cap = 0;
    }
    let mut p = Pair::with(a, b);
    let seen = watch(&mut p);
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_mss(l, 1000);
    p.b.tcp_listen_tos(l, false, 0x28 | 0b01); // the ECN bits stay the engine's
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    let cb = cb.unwrap();
    {
        let seen = seen.borrow();
        let synack = seen.iter().find(|(_, r, _)| r.flags.syn()).expect("a SYN-ACK");
        assert_eq!(synack.1.options.mss, Some(1000), "the SYN-ACK advertises the listener's MSS");
        if !cookies {
            // The stateless cookie SYN-ACK is a control segment (no connection yet).
            assert_eq!(synack.0, 0x28, "the SYN-ACK carries the listener's DSCP");
        }
    }
    assert!(p.b.tcp(cb).unwrap().info().snd_mss <= 1000);
    assert_eq!(p.b.tcp(cb).unwrap().tos(), 0x28);
    // B's data: never a segment over 1000 bytes, every one with the DSCP.
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    assert!(p.run_until(Duration::from_secs(30), |p| {
        if sent < data.len() {
            sent += p.b.tcp(cb).unwrap().send(&data[sent..]).unwrap_or(0);
        }
        let mut buf = [0u8; 16384];
        while let Ok(n) = p.a.tcp(ca).unwrap().recv(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    }));
    assert!(got == data, "bytes differ");
    let seen = seen.borrow();
    let biggest = seen.iter().map(|(_, _, n)| *n).max().unwrap();
    assert!(biggest > 0 && biggest <= 1000, "largest segment {biggest}");
    assert!(seen.iter().filter(|(_, _, n)| *n > 0).all(|(tos, _, _)| tos & !0b11 == 0x28));
}

#[test]
fn rfc9293_3_7_1_a_listeners_maxseg_and_tos_reach_its_connections() {
    inherit(false);
}

#[test]
fn rfc4987_3_6_a_cookie_connection_keeps_the_listeners_maxseg() {
    inherit(true);
}

#[test]
fn a_connection_of_a_listener_without_options_is_as_before() {
    let mut p = Pair::new();
    let seen = watch(&mut p);
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_mss(l, 1000);
    p.b.tcp_listen_mss(l, 0); // TCP_MAXSEG 0: none again
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(5), |p| p.a.tcp(ca).unwrap().state() == State::Established));
    let seen = seen.borrow();
    let synack = seen.iter().find(|(_, r, _)| r.flags.syn()).expect("a SYN-ACK");
    assert_eq!(synack.1.options.mss, Some(p.b.config().tcp.mss));
    assert_eq!(synack.0, 0);
}
