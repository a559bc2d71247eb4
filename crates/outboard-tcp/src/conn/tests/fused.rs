//! The fused receive path at the connection: `prefill_payload` copies and
//! sums a payload into free ring space and changes nothing else;
//! `handle_segment_prefilled` then takes it without a second copy, and
//! anything that does not match what was prefilled is copied as usual.

use super::*;
use outboard_wire::checksum;

fn lent(n: usize) -> Box<dyn crate::ring::RingStorage> {
    Box::new(vec![0u8; n])
}

fn data_seg(seq: u32) -> TcpRepr {
    seg(ACK, seq, ISS + 1)
}

fn readable(c: &Connection) -> Vec<u8> {
    let (a, b) = c.recv_slices();
    [a, b].concat()
}

/// What a segment could change, observed from outside and from the ring.
#[derive(Debug, PartialEq)]
struct Snapshot {
    state: State,
    rcv_nxt: SeqNumber,
    rcv_adv: SeqNumber,
    readable: Vec<u8>,
    /// The parked bytes, range by range (the holes between are free space).
    parked: Vec<u8>,
    ooo: Vec<(usize, usize)>,
    stats: ConnStats,
    memory: usize,
    timeout: Option<Instant>,
    has_events: bool,
}

fn snapshot(c: &Connection) -> Snapshot {
    let store = c.recv_buf.storage_bytes();
    let at = |i: usize| store[(c.recv_buf.head() + c.recv_buf.len() + i) % store.len()];
    let parked = c.assembler.ranges().flat_map(|(s, e)| (s..e).map(at)).collect();
    Snapshot {
        state: c.state(),
        rcv_nxt: c.rcv_nxt,
        rcv_adv: c.rcv_adv,
        readable: readable(c),
        parked,
        ooo: c.assembler.ranges().collect(),
        stats: c.stats(),
        memory: c.memory_in_use(),
        timeout: c.poll_timeout(),
        has_events: c.has_events(),
    }
}

#[test]
fn prefilled_payload_is_placed_without_a_second_copy() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    let repr = data_seg(PEER_ISS + 1);
    let p = h.c.prefill_payload(&repr, b"hello").expect("in order, with room");
    assert_eq!(p.sum(), checksum::sum(b"hello"));
    assert_eq!(p.len(), 5);
    assert_eq!(&h.c.recv_buf.storage_bytes()[..5], b"hello");
    assert!(readable(&h.c).is_empty(), "written, not queued");
    h.c.handle_segment_prefilled(h.now, &repr, b"hello", p);
    assert_eq!(readable(&h.c), b"hello");
    assert_eq!(h.c.rx_copied_bytes(), 5, "copied once");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 6);
    // The ordinary path counts its copy the same way.
    h.send(&data_seg(PEER_ISS + 6), b"world");
    assert_eq!(h.c.rx_copied_bytes(), 10);
    assert_eq!(h.c.stats().rx_copied_bytes, 10);
}

#[test]
fn prefill_works_out_of_order_and_in_an_owned_ring_with_storage() {
    let mut h = Harness::established(&plain_cfg());
    let first = data_seg(PEER_ISS + 1);
    assert_eq!(h.c.prefill_payload(&first, b"ab"), None, "an owned ring without storage would allocate");
    h.send(&first, b"ab");
    // Out of order, clear of anything parked.
    let later = data_seg(PEER_ISS + 5);
    let p = h.c.prefill_payload(&later, b"ef").expect("room, no overlap");
    h.c.handle_segment_prefilled(h.now, &later, b"ef", p);
    assert_eq!(h.c.assembler.ranges().collect::<Vec<_>>(), vec![(2, 4)]);
    // In order again, touching the parked bytes without overlapping them.
    let fill = data_seg(PEER_ISS + 3);
    let p = h.c.prefill_payload(&fill, b"cd").expect("touching is not overlapping");
    h.c.handle_segment_prefilled(h.now, &fill, b"cd", p);
    assert_eq!(readable(&h.c), b"abcdef");
    assert_eq!(h.c.rx_copied_bytes(), 6);
}

#[test]
fn prefill_without_handing_over_changes_nothing_and_spares_parked_bytes() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    h.send(&data_seg(PEER_ISS + 1), b"abc");
    h.send(&data_seg(PEER_ISS + 6), b"xyz");
    h.recv();
    h.events();
    let before = snapshot(&h.c);
    // A segment whose checksum will fail: copied into the hole, then dropped.
    assert!(h.c.prefill_payload(&data_seg(PEER_ISS + 4), b"QQ").is_some());
    assert_eq!(snapshot(&h.c), before);
    // Overlapping the parked bytes: refused, and nothing is written at all.
    let ring = h.c.recv_buf.storage_bytes().to_vec();
    assert_eq!(h.c.prefill_payload(&data_seg(PEER_ISS + 5), b"QQQ"), None);
    assert_eq!(h.c.prefill_payload(&data_seg(PEER_ISS + 8), b"QQQ"), None);
    assert_eq!(h.c.recv_buf.storage_bytes(), &ring[..]);
    assert_eq!(snapshot(&h.c), before);
    h.recv_nothing();
    // The real bytes arrive and the parked ones are intact.
    h.send(&data_seg(PEER_ISS + 4), b"de");
    assert_eq!(readable(&h.c), b"abcdexyz");
}

#[test]
fn prefill_declines_what_would_not_be_placed_as_it_is() {
    let cfg = Config { recv_buffer: 4096, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.attach_storage(lent(64 * 1024), lent(4096));
    h.send(&data_seg(PEER_ISS + 1), b"abc");
    let next = PEER_ISS + 4;
    let none = |h: &mut Harness, repr: TcpRepr, payload: &[u8], why: &str| {
        assert_eq!(h.c.prefill_payload(&repr, payload), None, "{why}");
    };
    none(&mut h, data_seg(next), b"", "no payload");
    none(&mut h, data_seg(next - 1), b"cd", "starts before RCV.NXT (trimmed)");
    none(&mut h, data_seg(next + 4000), &[1; 200], "ends past the right edge (trimmed)");
    none(&mut h, seg(TcpFlags::PSH, next, ISS + 1), b"d", "no ACK: dropped");
    none(&mut h, seg(RST | ACK, next, ISS + 1), b"d", "RST");
    none(&mut h, seg(SYN | ACK, next, ISS + 1), b"d", "SYN");
    assert!(h.c.prefill_payload(&data_seg(next), b"d").is_some());
    // After close() new data is answered with RST, not placed.
    h.c.shutdown_write();
    assert!(h.c.prefill_payload(&data_seg(next), b"d").is_some(), "FIN-WAIT-1 still receives");
    h.c.app_closed = true;
    none(&mut h, data_seg(next), b"d", "application closed");
    // States that do not take data.
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv();
    none(&mut h, data_seg(PEER_ISS + 1), b"d", "SYN-RECEIVED");
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.c.state(), State::CloseWait);
    none(&mut h, data_seg(PEER_ISS + 2), b"d", "CLOSE-WAIT");
}

#[test]
fn a_stale_prefill_is_not_trusted() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    // Prefilled, then another segment moved RCV.NXT: the payload is copied (trimmed).
    let a = data_seg(PEER_ISS + 1);
    let p = h.c.prefill_payload(&a, b"aaaa").unwrap();
    h.send(&data_seg(PEER_ISS + 1), b"bb");
    h.c.handle_segment_prefilled(h.now, &a, b"aaaa", p);
    assert_eq!(readable(&h.c), b"bbaa");
    // Prefilled, then the ring moved to new storage: copied again into it.
    let b = data_seg(PEER_ISS + 5);
    let p = h.c.prefill_payload(&b, b"cc").unwrap();
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    h.c.handle_segment_prefilled(h.now, &b, b"cc", p);
    assert_eq!(readable(&h.c), b"bbaacc");
}
