//! Loss recovery: RFC 5681 fast retransmit, RFC 6582 NewReno, RFC 6675 SACK
//! recovery, RFC 6298 RTO (backoff, Karn's rule) and go-back-N.

use super::*;

const MSS: u32 = 1460;

/// Queues and sends `n` full segments; returns them.
fn send_segments(h: &mut Harness, n: usize) -> Vec<Out> {
    h.c.send(&vec![7u8; n * MSS as usize]).unwrap();
    let out = h.recv();
    assert_eq!(out.len(), n.min(10), "initial window is ten segments");
    out
}

fn seg_start(i: u32) -> u32 {
    ISS + 1 + i * MSS
}

fn sack_cfg() -> Config {
    Config { sack: true, ..plain_cfg() }
}

fn sack_established() -> Harness {
    Harness::established_with(&sack_cfg(), TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() })
}

fn ack_with_sack(ack: u32, blocks: &[(u32, u32)]) -> TcpRepr {
    let mut a = seg(ACK, PEER_ISS + 1, ack);
    a.options.sack = sack(blocks);
    a
}

#[test]
fn rfc5681_three_dup_acks_trigger_fast_retransmit() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    for _ in 0..2 {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
        h.recv_nothing();
    }
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    let r = h.recv_one();
    assert_eq!((r.seq(), r.len()), (ISS + 1, MSS as usize));
    let st = h.c.stats();
    assert_eq!((st.fast_retransmits, st.retransmits), (1, 1));
    assert_eq!(st.ssthresh, 5 * MSS as usize, "RFC 5681 eq. 4: FlightSize / 2");
}

#[test]
fn rfc5681_dup_ack_with_window_change_is_not_a_dup_ack() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    for w in [60_000, 50_000, 40_000] {
        let mut a = seg(ACK, PEER_ISS + 1, ISS + 1);
        a.window = w;
        h.send(&a, b"");
    }
    h.recv_nothing();
    assert_eq!(h.c.stats().fast_retransmits, 0);
}

#[test]
fn rfc5681_further_dup_acks_inflate_the_window_for_new_data() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    for _ in 0..3 {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    }
    assert_eq!(h.recv().len(), 1, "the fast retransmission only");
    let mut new = Vec::new();
    for _ in 0..6 {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
        new.extend(h.recv());
    }
    assert!(!new.is_empty() && new.iter().all(|s| s.seq() >= seg_start(10)), "new data beyond the old flight: {new:?}");
}

#[test]
fn rfc6582_partial_ack_retransmits_the_next_hole() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    for _ in 0..3 {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    }
    h.recv_one();
    // Segments 0-1 arrive, 2 was lost too: a partial ACK.
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(2)), b"");
    let r = h.recv();
    assert_eq!(r[0].seq(), seg_start(2));
    assert!(h.c.rec.in_recovery, "still in recovery until the recovery point");
    assert_eq!(h.c.stats().fast_retransmits, 1, "one recovery episode");
}

#[test]
fn rfc6582_full_ack_ends_recovery_with_cwnd_at_ssthresh() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    for _ in 0..3 {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    }
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
    assert!(!h.c.rec.in_recovery);
    let st = h.c.stats();
    assert_eq!(st.cwnd, st.ssthresh);
    assert_eq!(st.bytes_in_flight, 0);
}

#[test]
fn rfc6675_sack_loss_detection_retransmits_the_hole() {
    let mut h = sack_established();
    send_segments(&mut h, 10);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(3))]), b"");
    h.recv_nothing();
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(4))]), b"");
    let r = h.recv();
    assert_eq!(r[0].seq(), ISS + 1);
    assert_eq!(r.len(), 1);
    assert_eq!(h.c.stats().sacked_bytes, 3 * MSS as usize);
}

#[test]
fn rfc6675_data_carrying_acks_that_sack_new_data_count_as_dup_acks() {
    // Both sides sending (an echo): the peer's dup ACKs ride on its data.
    // RFC 6675 §2 counts them; RFC 5681's "carries no data" rule would
    // leave every loss to the RTO.
    let mut h = sack_established();
    send_segments(&mut h, 10);
    for (i, upto) in [2u32, 3, 4].into_iter().enumerate() {
        let mut a = ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(upto))]);
        a.seq = SeqNumber(PEER_ISS + 1 + 100 * i as u32);
        h.send(&a, &[b'x'; 100]);
    }
    let out = h.recv();
    assert!(
        out.iter().any(|o| o.seq() == ISS + 1 && o.len() == MSS as usize),
        "the hole is fast-retransmitted without waiting for the RTO"
    );
    assert_eq!(h.c.stats().fast_retransmits, 1);
}

#[test]
fn rfc6675_retransmits_only_unsacked_lost_segments() {
    let mut h = sack_established();
    send_segments(&mut h, 10);
    // Segments 0 and 3 lost; 1-2 and 4-9 SACKed.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(3))]), b"");
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(4), seg_start(6)), (seg_start(1), seg_start(3))]), b"");
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(4), seg_start(10)), (seg_start(1), seg_start(3))]), b"");
    let r = h.recv();
    let seqs: Vec<u32> = r.iter().map(Out::seq).collect();
    assert_eq!(seqs, vec![seg_start(0), seg_start(3)]);
    assert!(r.iter().all(|s| s.len() == MSS as usize));
}

#[test]
fn rfc6675_recovery_ends_at_the_recovery_point() {
    let mut h = sack_established();
    send_segments(&mut h, 10);
    for k in 2..5 {
        h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(k))]), b"");
    }
    h.recv();
    assert!(h.c.rec.in_recovery);
    h.send(&ack_with_sack(seg_start(5), &[]), b"");
    assert!(h.c.rec.in_recovery, "partial ACK");
    h.send(&ack_with_sack(seg_start(10), &[]), b"");
    assert!(!h.c.rec.in_recovery);
}

#[test]
fn rfc6298_rto_retransmits_first_unacked_segment() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 3);
    assert_eq!(h.fire_next_timer(), Duration::from_millis(200));
    let r = h.recv();
    assert_eq!(r.len(), 1, "cwnd is one segment after an RTO");
    assert_eq!(r[0].seq(), ISS + 1);
    assert_eq!(h.c.stats().rto_events, 1);
    assert_eq!(h.c.stats().cwnd, MSS as usize);
}

#[test]
fn rfc6298_backoff_doubles_rto_up_to_max() {
    let cfg = Config { max_rto: Duration::from_millis(1000), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    send_segments(&mut h, 1);
    let mut gaps = Vec::new();
    for _ in 0..5 {
        gaps.push(h.fire_next_timer().as_millis());
        h.recv();
    }
    assert_eq!(gaps, vec![200, 400, 800, 1000, 1000]);
}

#[test]
fn rfc6298_karn_no_rtt_sample_from_retransmitted_segment() {
    let mut h = Harness::established(&plain_cfg());
    assert_eq!(h.c.stats().srtt_us, 0, "the SYN was answered at once");
    h.c.send(b"x").unwrap();
    h.recv_one();
    h.fire_next_timer();
    h.recv_one();
    h.advance(Duration::from_millis(300));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.stats().srtt_us, 0, "ambiguous ACK: no sample");
    assert_eq!(h.c.stats().rto_us, 400_000, "RFC 6298 §5.7: backed-off RTO kept");
    h.c.send(b"y").unwrap();
    h.recv_one();
    h.advance(Duration::from_millis(100));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 3), b"");
    assert_eq!(h.c.stats().srtt_us, 12_500, "1/8 of a clean 100 ms sample");
}

#[test]
fn rto_go_back_n_resends_everything_from_snd_una() {
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 3);
    h.fire_next_timer();
    assert_eq!(h.recv_one().seq(), seg_start(0));
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
    let r: Vec<u32> = h.recv().iter().map(Out::seq).collect();
    assert_eq!(r, vec![seg_start(1), seg_start(2)], "slow start: two segments");
    assert_eq!(h.c.stats().retransmits, 3);
}

#[test]
fn rto_after_sack_skips_sacked_data() {
    let mut h = sack_established();
    send_segments(&mut h, 4);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    h.fire_next_timer();
    assert_eq!(h.recv_one().seq(), seg_start(0));
    h.send(&ack_with_sack(seg_start(1), &[(seg_start(1), seg_start(2))]), b"");
    let r: Vec<u32> = h.recv().iter().map(Out::seq).collect();
    assert_eq!(r, vec![seg_start(2), seg_start(3)]);
}

#[test]
fn max_retransmits_exhausted_times_out() {
    let cfg = Config { max_retransmits: 3, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    send_segments(&mut h, 1);
    for _ in 0..3 {
        h.fire_next_timer();
        assert_eq!(h.recv().len(), 1);
    }
    h.fire_next_timer();
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::TimedOut]);
    assert_eq!(h.c.send(b"x"), Err(Error::TimedOut));
}

#[test]
fn retransmitted_fin_after_rto() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    assert_eq!(h.recv_one().flags(), FIN | ACK);
    h.fire_next_timer();
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq()), (FIN | ACK, ISS + 1));
}

#[test]
fn rfc3042_limited_transmit_sends_new_data_on_first_two_dup_acks() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.recv().iter().map(Out::seq).collect::<Vec<_>>(), vec![seg_start(10)]);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.recv().iter().map(Out::seq).collect::<Vec<_>>(), vec![seg_start(11)]);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.recv()[0].seq(), seg_start(0), "third: fast retransmit");
}

#[test]
fn rfc6675_lost_retransmission_is_resent_before_the_rto() {
    let mut h = sack_established();
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    for k in 2..5 {
        h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(k))]), b"");
    }
    assert_eq!(h.recv().iter().map(Out::seq).collect::<Vec<_>>(), vec![seg_start(0)]);
    // Everything else arrives; new data goes out after the retransmission.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(10))]), b"");
    let new: Vec<u32> = h.recv().iter().map(Out::seq).collect();
    assert_eq!(new.first(), Some(&seg_start(10)));
    // Data sent well after the retransmission is SACKed, the hole is still there.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(14))]), b"");
    let r = h.recv();
    assert_eq!(r[0].seq(), seg_start(0), "the lost retransmission is resent at once");
    assert_eq!(h.c.stats().rto_events, 0);
}

#[test]
fn rto_go_back_n_pure_ack_carries_snd_max() {
    // After an RTO SND.NXT falls back; a pure ACK at SND.NXT could be below
    // what the peer holds and be dropped there as unacceptable (the peer's
    // ACK would be lost too: both ends in go-back-N livelocked, seed 1133).
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 3);
    h.fire_next_timer();
    assert_eq!(h.recv_one().seq(), seg_start(0));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"data");
    let a = h.recv_one();
    assert_eq!((a.len(), a.seq(), a.ack()), (0, seg_start(3), PEER_ISS + 5));
}

#[test]
fn out_of_window_pure_acks_are_answered_at_most_every_500ms() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS - 100, ISS + 1), b"");
    assert_eq!(h.recv().len(), 1);
    h.send(&seg(ACK, PEER_ISS - 100, ISS + 1), b"");
    h.recv_nothing();
    h.advance(Duration::from_millis(500));
    h.send(&seg(ACK, PEER_ISS - 100, ISS + 1), b"");
    assert_eq!(h.recv().len(), 1);
    // Data is always answered.
    h.send(&seg(ACK, PEER_ISS - 100, ISS + 1), b"old");
    assert_eq!(h.recv().len(), 1);
}

#[test]
fn rfc6582_no_fast_retransmit_after_rto_when_ack_jumped() {
    // After an RTO the receiver's cumulative ACK jumps over a block it held:
    // go-back-N duplicates beyond may cause dup ACKs that signal no loss.
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    h.fire_next_timer();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(6)), b"");
    h.recv();
    for _ in 0..3 {
        h.send(&seg(ACK, PEER_ISS + 1, seg_start(6)), b"");
    }
    h.recv();
    assert_eq!(h.c.stats().fast_retransmits, 0);
}

#[test]
fn rfc6582_ack_heuristic_allows_fast_retransmit_after_rto() {
    // The ACK advanced by one segment only: the dup ACKs are a new loss.
    let mut h = Harness::established(&plain_cfg());
    send_segments(&mut h, 10);
    h.fire_next_timer();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
    h.recv();
    let mut out = Vec::new();
    for _ in 0..3 {
        h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
        out.extend(h.recv());
    }
    assert_eq!(h.c.stats().fast_retransmits, 1);
    assert!(out.iter().any(|s| s.seq() == seg_start(1)), "the hole at SND.UNA is resent: {out:?}");
}

#[test]
fn rfc3042_sack_limited_transmit_sends_one_new_segment_per_dup_ack() {
    // The first duplicate ACK SACKs one segment: one new segment, not two
    // (the SACKed segment left the pipe; no extra credit on top, §2: FlightSize
    // stays within cwnd + 2*SMSS).
    let mut h = sack_established();
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    let r = h.recv();
    assert_eq!(r.iter().map(|o| (o.seq(), o.len())).collect::<Vec<_>>(), vec![(seg_start(10), MSS as usize)]);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(3))]), b"");
    let r = h.recv();
    assert_eq!(r.iter().map(|o| (o.seq(), o.len())).collect::<Vec<_>>(), vec![(seg_start(11), MSS as usize)]);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(4))]), b"");
    assert_eq!(h.recv()[0].seq(), seg_start(0), "third: fast retransmit");
}

#[test]
fn rfc3042_limited_transmit_never_exceeds_cwnd_plus_two_segments() {
    // A dup ACK that SACKs two segments (a delayed ACK) still lets only one
    // new segment out, and TSO does not turn it into a burst.
    let cfg = Config { tso_max_bytes: 64 * 1024, ..sack_cfg() };
    let mut h =
        Harness::established_with(&cfg, TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() });
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    let first = h.recv();
    let sent: usize = first.iter().map(Out::len).sum();
    assert_eq!(sent, 10 * MSS as usize);
    let cwnd = h.c.stats().cwnd;
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(3))]), b"");
    let r = h.recv();
    assert_eq!(r.iter().map(|o| (o.seq(), o.len())).collect::<Vec<_>>(), vec![(seg_start(10), MSS as usize)]);
    let flight = h.c.snd_max - h.c.snd_una;
    assert!(flight <= cwnd + 2 * MSS as usize, "FlightSize {flight} > cwnd {cwnd} + 2 SMSS");
}

#[test]
fn rfc3042_limited_transmit_respects_the_receive_window() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    // The peer's window ends where the flight does: nothing new may go.
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 1);
    a.window = (10 * MSS) as u16;
    h.send(&a, b"");
    h.recv_nothing();
    // Same window again: a duplicate ACK, still nothing beyond the window.
    h.send(&a, b"");
    h.recv_nothing();
}

#[test]
fn rfc9293_old_ack_below_snd_una_does_not_disturb_sack_recovery() {
    // Regression: an ACK below SND.UNA (reordered by the network) arriving
    // in recovery, with the stale SACK blocks it carried, must be ignored
    // for recovery; the episode goes on and ends without an RTO.
    let mut h = sack_established();
    h.c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    for k in 2..5 {
        h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(k))]), b"");
    }
    assert_eq!(h.recv()[0].seq(), seg_start(0));
    h.send(&ack_with_sack(seg_start(5), &[(seg_start(6), seg_start(8))]), b"");
    assert!(h.c.rec.in_recovery);
    let before = (h.c.rec.dupacks, h.c.rec.point, h.c.rec.high_rxt, h.c.rec.prr, h.c.stats().sacked_bytes);
    h.recv();
    // The old ACK: SEG.ACK < SND.UNA, with blocks from before.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(4))]), b"");
    h.recv_nothing();
    let after = (h.c.rec.dupacks, h.c.rec.point, h.c.rec.high_rxt, h.c.rec.prr, h.c.stats().sacked_bytes);
    assert!(h.c.rec.in_recovery);
    assert_eq!(before.0, after.0);
    assert_eq!((before.1, before.2, before.4), (after.1, after.2, after.4));
    // The rest arrives: recovery ends by ACK, not by timeout.
    let point = h.c.rec.point;
    h.send(&ack_with_sack(point.0, &[]), b"");
    assert!(!h.c.rec.in_recovery);
    assert_eq!(h.c.stats().rto_events, 0);
    assert_eq!(h.c.stats().fast_retransmits, 1);
}
