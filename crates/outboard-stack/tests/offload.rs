//! Link offloads through the stack: `poll_transmit_meta` hands out TSO
//! segments with a partial checksum, `receive_frame_offloaded` takes
//! GRO-sized frames and skips checksums the link vouches for. The wire
//! between the two stacks plays the kernel: it either delivers a TSO frame
//! whole (as GRO would) or cuts it as `tcp_gso_segment` does.
mod common;

use common::*;
use outboard_stack::{ConnId, LinkOffloads, RxCsum, RxMeta, Stack, TxMeta};
use outboard_tcp::State;
use outboard_time::{Duration, Instant};
use outboard_wire::checksum::{checksum, Accumulator};
use std::net::SocketAddrV4;

/// How the wire treats TSO frames from A.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// Deliver whole with `RxCsum::Partial` (a GRO'd / local-only frame).
    Whole,
    /// Cut into MSS pieces with full checksums, delivered without meta.
    Segment,
}

/// Cuts a TSO frame as the kernel's GSO does, checking the meta and the
/// pseudo-header sum the stack left in the checksum field.
fn segment(frame: &[u8], m: &TxMeta) -> Vec<Vec<u8>> {
    let hl = usize::from(m.hdr_len);
    let (cs, co) = m.csum.expect("a TSO frame has a partial checksum");
    let (cs, co) = (usize::from(cs), usize::from(co));
    assert_eq!((cs, co), (34, 16), "checksum start at the TCP header, offset 16");
    let tcp = &frame[34..];
    let thl = usize::from(tcp[12] >> 4) * 4;
    assert_eq!(hl, 34 + thl);
    let src = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&frame[26..30]).unwrap());
    let dst = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&frame[30..34]).unwrap());
    let mut pseudo = Accumulator::new();
    pseudo.add_ipv4_pseudo_header(src, dst, 6, tcp.len() as u16);
    assert_eq!(
        u16::from_be_bytes([frame[cs + co], frame[cs + co + 1]]),
        !pseudo.finish(),
        "CHECKSUM_PARTIAL holds the folded pseudo-header sum"
    );
    let payload = &frame[hl..];
    let gso = usize::from(m.gso_size);
    assert!(payload.len() > gso);
    let seq0 = u32::from_be_bytes(frame[38..42].try_into().unwrap());
    let flags0 = frame[47];
    let id0 = u16::from_be_bytes([frame[18], frame[19]]);
    let pieces: Vec<&[u8]> = payload.chunks(gso).collect();
    let n = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut f = frame[..hl].to_vec();
            f.extend_from_slice(piece);
            let ip_len = (f.len() - 14) as u16;
            f[16..18].copy_from_slice(&ip_len.to_be_bytes());
            f[18..20].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            f[24..26].copy_from_slice(&[0, 0]);
            let c = checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            f[38..42].copy_from_slice(&seq0.wrapping_add((i * gso) as u32).to_be_bytes());
            // FIN and PSH only on the last piece (tcp_gso_segment).
            f[47] = if i + 1 == n { flags0 } else { flags0 & !0x09 };
            f[50..52].copy_from_slice(&[0, 0]);
            let mut acc = Accumulator::new();
            acc.add_ipv4_pseudo_header(src, dst, 6, (f.len() - 34) as u16).add(&f[34..]);
            let c = acc.finish();
            f[50..52].copy_from_slice(&c.to_be_bytes());
            f
        })
        .collect()
}

struct Link {
    a: Stack,
    b: Stack,
    now: Instant,
    wire: Wire,
    tso_frames: u64,
    max_frame: usize,
}

impl Link {
    fn new(wire: Wire) -> Link {
        let now = t(1000);
        let mut ca = cfg(MAC_A, IP_A, 1);
        ca.offloads = LinkOffloads { tso_max: 65536 };
        Link {
            a: Stack::new(ca, now),
            b: Stack::new(cfg(MAC_B, IP_B, 2), now),
            now,
            wire,
            tso_frames: 0,
            max_frame: 0,
        }
    }

    fn step(&mut self) {
        let mut buf = vec![0u8; 65536 + 256];
        let mut to_b = Vec::new();
        while let Some((n, m)) = self.a.poll_transmit_meta(self.now, &mut buf) {
            self.max_frame = self.max_frame.max(n);
            if m.gso_size == 0 {
                assert!(n <= 1514, "a frame without GSO meta over the MTU: {n}");
                assert_eq!(m, TxMeta::default());
                to_b.push((buf[..n].to_vec(), RxCsum::None));
                continue;
            }
            self.tso_frames += 1;
            match self.wire {
                Wire::Whole => {
                    let mut f = buf[..n].to_vec();
                    // The field is only the pseudo-header sum: a verifying
                    // receiver would drop it; Partial must skip the check.
                    f[50] ^= 0x5a;
                    to_b.push((f, RxCsum::Partial));
                }
                Wire::Segment => {
                    for f in segment(&buf[..n], &m) {
                        assert!(f.len() <= 1514);
                        to_b.push((f, RxCsum::None));
                    }
                }
            }
        }
        let from_b = drain(&mut self.b, self.now);
        self.now += Duration::from_micros(50);
        for (f, csum) in to_b {
            self.b.receive_frame_offloaded(self.now, &f, RxMeta { csum });
        }
        for f in from_b {
            self.a.receive_frame(self.now, &f);
        }
        for s in [&mut self.a, &mut self.b] {
            if s.poll_timeout().is_some_and(|d| d <= self.now) {
                s.handle_timeout(self.now);
            }
        }
    }
}

fn read_all(s: &mut Stack, id: ConnId, out: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 65536];
    let Some(c) = s.tcp(id) else { return true };
    loop {
        match c.recv(&mut buf) {
            Ok(0) => return true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
    }
}

fn transfer(wire: Wire, len: usize) -> Link {
    let mut l = Link::new(wire);
    let lid = l.b.tcp_listen(80, 8).unwrap();
    let ca = l.a.tcp_connect(l.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    for _ in 0..1000 {
        l.step();
        cb = cb.or_else(|| l.b.tcp_accept(lid));
        if cb.is_some() && l.a.tcp(ca).unwrap().state() == State::Established {
            break;
        }
    }
    let cb = cb.expect("handshake");
    let data: Vec<u8> = (0..len).map(|i| (i * 31 + i / 977) as u8).collect();
    let (mut sent, mut got, mut closed) = (0, Vec::new(), false);
    for _ in 0..200_000 {
        let c = l.a.tcp(ca).unwrap();
        if sent < data.len() {
            sent += c.send(&data[sent..]).unwrap_or(0);
        } else if !closed {
            c.close();
            closed = true;
        }
        if read_all(&mut l.b, cb, &mut got) {
            break;
        }
        l.step();
    }
    assert_eq!(got.len(), data.len(), "transfer stalled");
    assert!(got == data, "bytes differ");
    l
}

#[test]
fn tso_frames_delivered_whole_with_partial_checksum_are_accepted() {
    let l = transfer(Wire::Whole, 3_000_000);
    assert!(l.tso_frames > 10, "TSO frames: {}", l.tso_frames);
    assert!(l.max_frame > 30_000, "largest frame {}", l.max_frame);
    assert_eq!(l.b.stats().drops_checksum, 0);
    assert_eq!(l.a.stats().drops_tx_buffer_too_small, 0);
}

#[test]
fn tso_frames_cut_like_the_kernel_verify_on_the_peer() {
    let l = transfer(Wire::Segment, 3_000_000);
    assert!(l.tso_frames > 10, "TSO frames: {}", l.tso_frames);
    assert_eq!(l.b.stats().drops_checksum, 0, "every piece's checksum verifies");
}

#[test]
fn plain_poll_transmit_never_uses_tso_even_when_the_link_offers_it() {
    // `drain` uses poll_transmit and asserts every frame fits the MTU.
    let mut ca = cfg(MAC_A, IP_A, 1);
    ca.offloads = LinkOffloads { tso_max: 65536 };
    let mut p = Pair::with(ca, cfg(MAC_B, IP_B, 2));
    let lid = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(lid));
        cb.is_some()
    }));
    let data = vec![7u8; 200_000];
    let mut sent = 0;
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(60), |p| {
        if sent < data.len() {
            sent += p.a.tcp(ca).unwrap().send(&data[sent..]).unwrap_or(0);
        }
        read_all(&mut p.b, cb.unwrap(), &mut got);
        got.len() == data.len()
    }));
}

#[test]
fn offloaded_receive_skips_transport_checksums_only() {
    let now = t(1000);
    let mut s = Stack::new(cfg(MAC_B, IP_B, 2), now);
    s.tcp_listen(80, 8).unwrap();
    teach_arp(&mut s, now, MAC_PEER, IP_PEER);
    let syn = |port: u16| outboard_wire::TcpRepr {
        src_port: port,
        dst_port: 80,
        seq: outboard_wire::SeqNumber(100),
        ack: outboard_wire::SeqNumber(0),
        flags: outboard_wire::TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: Default::default(),
    };
    let bad = |port: u16| {
        let mut f = tcp_frame(IP_PEER, IP_B, &syn(port), &[], MAC_B, MAC_PEER);
        f[50] ^= 0xff;
        f
    };
    s.receive_frame(now, &bad(1111));
    assert_eq!(s.stats().drops_checksum, 1, "a plain frame is verified");
    assert!(drain(&mut s, now).is_empty());
    for (port, csum) in [(2222, RxCsum::Verified), (3333, RxCsum::Partial)] {
        s.receive_frame_offloaded(now, &bad(port), RxMeta { csum });
        assert_eq!(s.stats().drops_checksum, 1, "{csum:?} is not verified again");
        assert_eq!(drain(&mut s, now).len(), 1, "SYN-ACK for {csum:?}");
    }
    // The IPv4 header checksum is still checked.
    let mut f = tcp_frame(IP_PEER, IP_B, &syn(4444), &[], MAC_B, MAC_PEER);
    f[24] ^= 0xff;
    s.receive_frame_offloaded(now, &f, RxMeta { csum: RxCsum::Verified });
    assert_eq!(s.stats().drops_checksum, 2);
    // And a later plain frame is verified again.
    s.receive_frame(now, &bad(5555));
    assert_eq!(s.stats().drops_checksum, 3);
}
