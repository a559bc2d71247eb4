//! The receive copy with the checksum fused into it (DESIGN.md §7), through
//! the stack: a segment's payload is summed while it moves into the receive
//! ring, and reaches the connection only once the sum verifies. Also the
//! copy counters, and rings in lent storage end to end.
mod common;

use common::*;
use outboard_stack::{ConnId, RxCsum, RxMeta, Stack, StackStats};
use outboard_tcp::{ConnStats, FourTuple, RingStorage, State};
use outboard_time::Duration;
use outboard_wire::tcp::TcpPacket;
use outboard_wire::{RxChecksum, SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddrV4;

const PEER_PORT: u16 = 5555;
const PEER_ISN: u32 = 100;

fn lent(n: usize) -> Box<dyn RingStorage> {
    Box::new(vec![0u8; n])
}

fn peer_seg(flags: TcpFlags, seq: u32, ack: u32) -> TcpRepr {
    TcpRepr {
        src_port: PEER_PORT,
        dst_port: 80,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 65535,
        urgent: 0,
        options: TcpOptions::default(),
    }
}

/// B's stack with one accepted connection from a scripted peer.
struct Scripted {
    s: Stack,
    id: ConnId,
    /// B's ISN + 1: what the peer acknowledges.
    ack: u32,
}

impl Scripted {
    fn new() -> Scripted {
        let mut s = Stack::new(cfg(MAC_B, IP_B, 2), t(0));
        let l = s.tcp_listen(80, 4).unwrap();
        teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
        let mut syn = peer_seg(TcpFlags::SYN, PEER_ISN, 0);
        syn.options.mss = Some(1460);
        s.receive_frame(t(1), &tcp_frame(IP_PEER, IP_B, &syn, b"", MAC_B, MAC_PEER));
        let synack = drain(&mut s, t(1))
            .iter()
            .find_map(|f| {
                let (_, tcp) = ip_of(f)?;
                let p = TcpPacket::new_checked(&tcp[..]).ok()?;
                TcpRepr::parse(&p, IP_B, IP_PEER, RxChecksum::Verify).ok()
            })
            .expect("a SYN-ACK");
        let ack = synack.seq.0.wrapping_add(1);
        let a = peer_seg(TcpFlags::ACK, PEER_ISN + 1, ack);
        s.receive_frame(t(2), &tcp_frame(IP_PEER, IP_B, &a, b"", MAC_B, MAC_PEER));
        let id = s.tcp_accept(l).expect("established");
        drain(&mut s, t(2));
        Scripted { s, id, ack }
    }

    /// A data frame at `off` bytes into the peer's stream.
    fn data(&self, off: u32, payload: &[u8]) -> Vec<u8> {
        let repr = peer_seg(TcpFlags::ACK, PEER_ISN + 1 + off, self.ack);
        tcp_frame(IP_PEER, IP_B, &repr, payload, MAC_B, MAC_PEER)
    }

    fn conns(&self) -> Vec<(ConnId, FourTuple, State, ConnStats)> {
        self.s.tcp_connections()
    }

    fn readable(&mut self) -> Vec<u8> {
        let (a, b) = self.s.tcp(self.id).unwrap().recv_slices();
        [a, b].concat()
    }
}

/// The frame with its last payload byte flipped: the TCP checksum fails.
fn corrupt(mut frame: Vec<u8>) -> Vec<u8> {
    *frame.last_mut().unwrap() ^= 0x40;
    frame
}

fn rx(s: &StackStats) -> (u64, u64, u64, u64) {
    (
        s.tcp_rx_fused_segments,
        s.tcp_rx_unfused_segments,
        s.tcp_rx_payload_copied,
        s.drops_checksum,
    )
}

#[test]
fn good_segments_are_summed_during_their_one_copy() {
    let mut p = Scripted::new();
    p.s.tcp(p.id)
        .unwrap()
        .attach_storage(lent(256 * 1024), lent(256 * 1024));
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
    for (i, chunk) in data.chunks(1000).enumerate() {
        let f = p.data(1000 * i as u32, chunk);
        p.s.receive_frame(t(3), &f);
    }
    assert_eq!(rx(p.s.stats()), (3, 0, 3000, 0));
    assert_eq!(p.readable(), data);
    // Board memory is not the stack's heap.
    assert_eq!(p.s.tcp(p.id).unwrap().buffer_bytes(), (0, 0));
    assert!(p.s.memory_in_use() < 16 * 1024, "{}", p.s.memory_in_use());
}

#[test]
fn a_bad_checksum_on_the_fused_path_changes_nothing() {
    let mut p = Scripted::new();
    p.s.tcp(p.id)
        .unwrap()
        .attach_storage(lent(256 * 1024), lent(256 * 1024));
    p.s.receive_frame(t(3), &p.data(0, b"abc"));
    p.s.receive_frame(t(3), &p.data(5, b"xyz"));
    drain(&mut p.s, t(3));
    assert_eq!(rx(p.s.stats()), (2, 0, 6, 0));
    let before = (p.conns(), p.readable());
    // In the hole, clear of the parked bytes: copied (and counted), then dropped.
    p.s.receive_frame(t(4), &corrupt(p.data(3, b"QQ")));
    assert_eq!(rx(p.s.stats()), (2, 0, 8, 1));
    assert!(
        drain(&mut p.s, t(4)).is_empty(),
        "no ACK: the connection never saw it"
    );
    assert_eq!((p.conns(), p.readable()), before);
    // Over the parked bytes: verified first, so nothing is written.
    p.s.receive_frame(t(4), &corrupt(p.data(3, b"QQQQ")));
    assert_eq!(rx(p.s.stats()), (2, 0, 8, 2));
    assert_eq!((p.conns(), p.readable()), before);
    // A good segment over the parked bytes takes the ordinary way.
    p.s.receive_frame(t(5), &p.data(3, b"dexy"));
    assert_eq!(rx(p.s.stats()), (2, 1, 12, 2));
    assert_eq!(p.readable(), b"abcdexyz");
}

#[test]
fn an_owned_ring_fuses_once_it_has_storage() {
    let mut p = Scripted::new();
    p.s.receive_frame(t(3), &p.data(0, b"first"));
    p.s.receive_frame(t(3), &p.data(5, b"second"));
    p.s.receive_frame(t(3), &corrupt(p.data(11, b"third")));
    assert_eq!(
        rx(p.s.stats()),
        (1, 1, 16, 1),
        "the first segment allocates: verified first"
    );
    // Past the storage the ring has so far: verified first, so no growth.
    let m = p.s.tcp(p.id).unwrap().memory_in_use();
    p.s.receive_frame(t(3), &corrupt(p.data(11, &[7; 5000])));
    assert_eq!(rx(p.s.stats()), (1, 1, 16, 2));
    assert_eq!(
        p.s.tcp(p.id).unwrap().memory_in_use(),
        m,
        "no growth for an unverified segment"
    );
    assert_eq!(p.readable(), b"firstsecond");
}

#[test]
fn links_that_vouch_for_checksums_are_not_summed() {
    let mut p = Scripted::new();
    let meta = RxMeta {
        csum: RxCsum::Verified,
    };
    p.s.receive_frame_offloaded(t(3), &corrupt(p.data(0, b"trusted")), meta);
    assert_eq!(rx(p.s.stats()), (0, 0, 7, 0));
    assert_eq!(p.readable(), b"truste$", "taken as the link vouched for it");
}

#[test]
fn a_corrupt_header_still_counts_as_a_checksum_drop() {
    let mut p = Scripted::new();
    let mut f = p.data(0, b"abc");
    f[14 + 20..14 + 20 + 2].copy_from_slice(&[0, 0]); // source port 0: unparsable
    p.s.receive_frame(t(3), &f);
    assert_eq!(p.s.stats().drops_checksum, 1);
    assert_eq!(p.s.stats().drops_malformed, 0);
}

/// A sends to B through lent storage on both sides: the application writes
/// into A's send ring and reads B's receive ring in place. Every payload
/// byte is copied once each way: ring to frame, frame to ring.
#[test]
fn zero_copy_transfer_copies_each_byte_once_each_way() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    let cb = cb.unwrap();
    let buf = 256 * 1024;
    p.a.tcp(ca).unwrap().attach_storage(lent(buf), lent(buf));
    p.b.tcp(cb).unwrap().attach_storage(lent(buf), lent(buf));
    let len = 1_500_000;
    let stream = |k: usize| (k * 31 % 251) as u8;
    let (mut sent, mut got) = (0usize, 0usize);
    assert!(p.run_until(Duration::from_secs(60), |p| {
        let c = p.a.tcp(ca).unwrap();
        let (x, y) = c.send_space_mut();
        let n = (x.len() + y.len()).min(len - sent);
        for (i, b) in x.iter_mut().chain(y.iter_mut()).take(n).enumerate() {
            *b = stream(sent + i);
        }
        sent += c.send_in_place(n).unwrap_or(0);
        let c = p.b.tcp(cb).unwrap();
        let (x, y) = c.recv_slices();
        for (i, &b) in x.iter().chain(y).enumerate() {
            assert_eq!(b, stream(got + i), "byte {}", got + i);
        }
        let n = x.len() + y.len();
        got += c.recv_consume(n);
        got == len
    }));
    let (a, b) = (p.a.stats(), p.b.stats());
    assert_eq!(
        a.tcp_tx_payload_copied, len as u64,
        "no retransmission on a clean wire"
    );
    assert_eq!(b.tcp_rx_payload_copied, len as u64);
    assert_eq!(b.tcp_rx_unfused_segments, 0);
    assert!(b.tcp_rx_fused_segments >= (len / 1460) as u64);
}

/// Payload bits flipped on the wire: the fused sum catches every one (the
/// bytes it wrote lie in free ring space, never read), and the stream
/// arrives exact through the retransmissions.
#[test]
fn corruption_is_caught_by_the_fused_sum_and_the_stream_stays_exact() {
    let mut p = Pair::new();
    // Every 23rd frame, a bit at a varying distance from the end.
    let (mut n, mut k) = (0usize, 0usize);
    p.filter = Some(Box::new(move |to_b, f| {
        n += 1;
        k = if k == 22 { 0 } else { k + 1 };
        if to_b && k == 0 && f.len() > 200 {
            let i = f.len() - 1 - n % 100;
            f[i] ^= 0x10;
        }
        true
    }));
    let l = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    let cb = cb.unwrap();
    let data: Vec<u8> = (0..1_000_000usize).map(|i| (i * 7 % 253) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = vec![0u8; 65536];
    assert!(p.run_until(Duration::from_secs(120), |p| {
        sent += p.a.tcp(ca).unwrap().send(&data[sent..]).unwrap_or(0);
        while let Ok(k) = p.b.tcp(cb).unwrap().recv(&mut buf) {
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        got.len() == data.len()
    }));
    assert!(got == data, "bytes differ");
    let s = p.b.stats();
    assert!(s.drops_checksum > 10, "{s:#?}");
    assert!(s.tcp_rx_fused_segments > 500, "{s:#?}");
    assert!(s.tcp_rx_payload_copied >= data.len() as u64);
    assert!(
        p.a.stats().tcp_tx_payload_copied > data.len() as u64,
        "retransmissions copy again"
    );
}
