//! Reordering tolerance: the adaptive duplicate threshold (RFC 4653 §3, RFC
//! 8985 §6.2 reordering detection, Linux `tp->reordering`), spurious fast
//! retransmission detection (RFC 3522 Eifel with timestamps, RFC 2883 / 3708
//! D-SACK) and the RFC 4015 §3.2 undo, and D-SACK generation (RFC 2883 §4).

use super::*;
use crate::sack::Scoreboard;

/// Payload per segment: MSS 1460 (no timestamps) or 1448 (with them).
fn mss(ts: bool) -> u32 {
    if ts { 1448 } else { 1460 }
}

fn cfg(ts: bool) -> Config {
    Config { sack: true, timestamps: ts, ..plain_cfg() }
}

/// An ESTABLISHED SACK connection, with timestamps when `ts` (the peer's TSval starts at 100).
fn established(ts: bool) -> Harness {
    let opts = TcpOptions {
        mss: Some(1460),
        sack_permitted: true,
        timestamps: ts.then_some((100, 0)),
        ..TcpOptions::default()
    };
    Harness::established_with(&cfg(ts), opts)
}

fn start(ts: bool, i: u32) -> u32 {
    ISS + 1 + i * mss(ts)
}

/// An ACK from the peer with SACK blocks and, when `tsecr` is given, timestamps (TSval 100).
fn ack(a: u32, blocks: &[(u32, u32)], tsecr: Option<u32>) -> TcpRepr {
    let mut r = seg(ACK, PEER_ISS + 1, a);
    r.options.sack = sack(blocks);
    r.options.timestamps = tsecr.map(|e| (100, e));
    r
}

/// Queues `n` full segments and drains the first flight (the initial window).
fn send_flight(h: &mut Harness, ts: bool, n: u32) -> Vec<Out> {
    h.c.send(&vec![3u8; (n * mss(ts)) as usize]).unwrap();
    h.recv()
}

/// Three dup ACKs SACKing segments 1, 1-2, 1-3 (segment 0 missing): the third
/// starts fast recovery and resends segment 0. Returns cwnd before the reduction.
fn fast_retransmit_segment_0(h: &mut Harness, ts: bool, tsecr: Option<u32>) -> usize {
    let before = h.c.stats().cwnd;
    h.send(&ack(start(ts, 0), &[(start(ts, 1), start(ts, 2))], tsecr), b"");
    h.send(&ack(start(ts, 0), &[(start(ts, 1), start(ts, 3))], tsecr), b"");
    let _limited_transmit = h.recv();
    h.send(&ack(start(ts, 0), &[(start(ts, 1), start(ts, 4))], tsecr), b"");
    let out = h.recv();
    assert_eq!(out[0].seq(), start(ts, 0), "fast retransmit of the hole: {out:?}");
    assert_eq!(h.c.stats().fast_retransmits, 1);
    assert!(h.c.stats().cwnd < before, "RFC 6675 §5: cwnd reduced");
    before
}

#[test]
fn rfc6675_islost_uses_the_adaptive_dupthresh() {
    let mss = 1000;
    let mut b = Scoreboard::new();
    // Four segments SACKed above a hole at 0.
    b.on_ack(SeqNumber(0), SeqNumber(10_000), &[(SeqNumber(1000), SeqNumber(5000))]);
    assert!(b.is_lost(SeqNumber(0), mss), "DupThresh 3: more than 2 segments above");
    b.set_dup_thresh(6);
    assert!(!b.is_lost(SeqNumber(0), mss), "DupThresh 6 needs more than 5 segments above");
    assert_eq!(b.lost_boundary(mss), None);
    b.on_ack(SeqNumber(0), SeqNumber(10_000), &[(SeqNumber(1000), SeqNumber(7000))]);
    assert!(b.is_lost(SeqNumber(0), mss));
    b.set_dup_thresh(1);
    assert_eq!(b.dup_thresh(), 3, "never below 3");
}

#[test]
fn rfc4653_late_segment_below_highest_sack_raises_dupthresh() {
    let mut h = established(false);
    send_flight(&mut h, false, 10);
    assert_eq!(h.c.stats().reordering, 3);
    // Segment 0 is late: 1 and 2 are SACKed first (two dup ACKs, below DupThresh)...
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 2))], None), b"");
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 3))], None), b"");
    // ...then it arrives: the cumulative ACK newly covers never-retransmitted
    // data three segments below the highest SACKed byte.
    h.send(&ack(start(false, 3), &[], None), b"");
    let st = h.c.stats();
    assert_eq!(st.reordering, 4, "distance 3 segments + 1");
    assert_eq!((st.fast_retransmits, st.retransmits), (0, 0));
}

#[test]
fn rfc4653_late_sacked_segment_raises_dupthresh() {
    let mut h = established(false);
    send_flight(&mut h, false, 10);
    // Segment 3 arrives first, then segment 1 (newly SACKed, never
    // retransmitted, three segments below the highest SACKed byte).
    h.send(&ack(start(false, 0), &[(start(false, 3), start(false, 4))], None), b"");
    assert_eq!(h.c.stats().reordering, 3);
    let blocks = [(start(false, 1), start(false, 2)), (start(false, 3), start(false, 4))];
    h.send(&ack(start(false, 0), &blocks, None), b"");
    let st = h.c.stats();
    assert_eq!(st.reordering, 4, "distance 3 segments + 1");
    assert_eq!((st.fast_retransmits, st.retransmits), (0, 0));
}

#[test]
fn rfc4653_raised_dupthresh_delays_fast_retransmit() {
    let mut h = established(false);
    send_flight(&mut h, false, 40);
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 2))], None), b"");
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 3))], None), b"");
    h.send(&ack(start(false, 3), &[], None), b"");
    h.recv();
    assert_eq!(h.c.stats().reordering, 4);
    // Segment 3 missing; three dup ACKs no longer start recovery (DupThresh 4).
    for k in 5..8 {
        h.send(&ack(start(false, 3), &[(start(false, 4), start(false, k))], None), b"");
    }
    let out = h.recv();
    assert!(out.iter().all(|o| o.seq() >= start(false, 10)), "new data only: {out:?}");
    assert_eq!(h.c.stats().fast_retransmits, 0);
    // The fourth does.
    h.send(&ack(start(false, 3), &[(start(false, 4), start(false, 8))], None), b"");
    let out = h.recv();
    assert_eq!(out[0].seq(), start(false, 3));
    assert_eq!(h.c.stats().fast_retransmits, 1);
}

#[test]
fn rfc3522_eifel_timestamp_undoes_spurious_fast_retransmit() {
    let mut h = established(true);
    let t0 = h.now.as_millis() as u32 + 1; // our TSval for the first flight
    let flight = send_flight(&mut h, true, 20);
    assert_eq!(flight[0].repr.options.timestamps.unwrap().0, t0);
    h.advance(Duration::from_millis(5));
    let cwnd = fast_retransmit_segment_0(&mut h, true, Some(t0));
    let ssthresh_reduced = h.c.stats().ssthresh;
    // The original segment 0 fills the hole: the receiver echoes its TSval
    // (older than the retransmission's): the retransmission was spurious.
    h.send(&ack(start(true, 4), &[], Some(t0)), b"");
    let st = h.c.stats();
    assert_eq!((st.spurious_retransmits, st.undo_events), (1, 1));
    assert!(st.cwnd >= cwnd, "RFC 4015: cwnd restored ({} < {cwnd})", st.cwnd);
    assert!(st.ssthresh > ssthresh_reduced, "RFC 4015: ssthresh restored");
    assert_eq!(st.reordering, 5, "distance 4 segments + 1");
}

#[test]
fn rfc3522_eifel_echo_of_the_retransmission_keeps_the_reduction() {
    let mut h = established(true);
    let t0 = h.now.as_millis() as u32 + 1;
    send_flight(&mut h, true, 20);
    h.advance(Duration::from_millis(5));
    fast_retransmit_segment_0(&mut h, true, Some(t0));
    let cwnd = h.c.stats().cwnd;
    // The retransmission filled the hole: its TSval is echoed: a real loss.
    h.send(&ack(start(true, 4), &[], Some(t0 + 5)), b"");
    let st = h.c.stats();
    assert_eq!((st.spurious_retransmits, st.undo_events), (0, 0));
    assert!(st.cwnd <= cwnd, "still in recovery, no undo");
    assert_eq!(st.reordering, 3);
}

#[test]
fn rfc2883_dsack_of_the_retransmission_undoes_recovery() {
    let mut h = established(false);
    send_flight(&mut h, false, 20);
    let cwnd = fast_retransmit_segment_0(&mut h, false, None);
    // The original arrives (partial ACK), then the retransmission comes back
    // as a duplicate: RFC 2883 §4 D-SACK block below the cumulative ACK.
    h.send(&ack(start(false, 4), &[], None), b"");
    assert_eq!(h.c.stats().undo_events, 0);
    h.send(&ack(start(false, 4), &[(start(false, 0), start(false, 1))], None), b"");
    let st = h.c.stats();
    assert_eq!((st.spurious_retransmits, st.undo_events), (1, 1));
    assert_eq!(st.cwnd, cwnd, "RFC 4015 §3.2: cwnd restored");
    assert_eq!(st.reordering, 5, "distance 4 segments + 1");
}

#[test]
fn rfc2883_dsack_outside_the_recovery_is_ignored() {
    let mut h = established(false);
    send_flight(&mut h, false, 20);
    fast_retransmit_segment_0(&mut h, false, None);
    let cwnd = h.c.stats().cwnd;
    // A D-SACK inside the second block (RFC 2883 §4 case 2) but beyond the
    // recovery point is someone else's duplicate.
    let far = start(false, 30);
    h.send(&ack(start(false, 0), &[(far, far + 10), (far, far + 100)], None), b"");
    let st = h.c.stats();
    assert_eq!((st.spurious_retransmits, st.undo_events, st.cwnd), (0, 0, cwnd));
}

#[test]
fn rto_does_not_undo_and_resets_an_overestimated_dupthresh() {
    let mut h = established(false);
    send_flight(&mut h, false, 20);
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 2))], None), b"");
    h.send(&ack(start(false, 0), &[(start(false, 1), start(false, 3))], None), b"");
    h.send(&ack(start(false, 3), &[], None), b"");
    h.recv();
    assert_eq!(h.c.stats().reordering, 4);
    // Segment 3 lost with three segments SACKed above it (below DupThresh 4),
    // and nothing more comes: the RTO fires.
    h.send(&ack(start(false, 3), &[(start(false, 4), start(false, 7))], None), b"");
    h.recv();
    h.fire_next_timer();
    let st = h.c.stats();
    assert_eq!((st.rto_events, st.undo_events), (1, 0));
    assert_eq!(st.reordering, 3, "Linux tcp_enter_loss: DupThresh back to 3");
}

#[test]
fn rfc2883_receiver_reports_a_duplicate_segment_first_and_once() {
    let mut h = established(false);
    let data = [9u8; 100];
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &data);
    h.advance(Duration::from_millis(500));
    h.recv();
    // Out-of-order data, then a duplicate of the first segment.
    h.send(&seg(ACK, PEER_ISS + 201, ISS + 1), &data);
    let a = h.recv_one();
    assert_eq!(a.repr.options.sack.as_slice(), sack(&[(PEER_ISS + 201, PEER_ISS + 301)]).as_slice());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &data);
    let a = h.recv_one();
    assert_eq!(
        a.repr.options.sack.as_slice(),
        sack(&[(PEER_ISS + 1, PEER_ISS + 101), (PEER_ISS + 201, PEER_ISS + 301)]).as_slice(),
        "RFC 2883 §4: the D-SACK block first, then the SACK blocks"
    );
    // Reported once: the next ACK has the plain SACK blocks.
    h.send(&seg(ACK, PEER_ISS + 101, ISS + 1), &data);
    let a = h.recv_one();
    assert_eq!(a.ack(), PEER_ISS + 301);
    assert!(a.repr.options.sack.is_empty());
}

#[test]
fn rfc2883_receiver_reports_the_duplicate_part_of_an_overlapping_segment() {
    let mut h = established(false);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &[1u8; 100]);
    h.advance(Duration::from_millis(500));
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 51, ISS + 1), &[1u8; 100]);
    let a = h.recv_one();
    assert_eq!(a.ack(), PEER_ISS + 151);
    assert_eq!(a.repr.options.sack.as_slice(), sack(&[(PEER_ISS + 51, PEER_ISS + 101)]).as_slice());
}
