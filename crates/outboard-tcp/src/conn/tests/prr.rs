//! RFC 6937 Proportional Rate Reduction in SACK fast recovery.

use super::*;

const MSS: u32 = 1460;

fn seg_start(i: u32) -> u32 {
    ISS + 1 + i * MSS
}

fn sack_established(cc: CcKind) -> Harness {
    let cfg = Config { sack: true, cc, ..plain_cfg() };
    Harness::established_with(&cfg, TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() })
}

fn ack_with_sack(ack: u32, blocks: &[(u32, u32)]) -> TcpRepr {
    let mut a = seg(ACK, PEER_ISS + 1, ack);
    a.options.sack = sack(blocks);
    a
}

/// Slow start grows cwnd to 20 segments (segments 0..10 ACKed one by one),
/// segments 10..30 are in flight; segment 10 is lost and segments 11.. are
/// SACKed one per ACK: two limited-transmit ACKs, the one that starts
/// recovery, then `more` ACKs in recovery. Returns the segments each ACK
/// in recovery let out, and the pipe after each.
fn sends_per_ack(cc: CcKind, more: u32) -> (Harness, Vec<usize>, Vec<usize>) {
    let mut h = sack_established(cc);
    h.c.send(&vec![1u8; 44 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    for i in 1..=10 {
        h.send(&ack_with_sack(seg_start(i), &[]), b"");
        assert_eq!(h.recv().len(), 2, "slow start");
    }
    assert_eq!(h.c.stats().cwnd, 20 * MSS as usize);
    let (mut per_ack, mut pipe) = (Vec::new(), Vec::new());
    for k in 12..=14 + more {
        h.send(&ack_with_sack(seg_start(10), &[(seg_start(11), seg_start(k))]), b"");
        let n = h.recv().len();
        if h.c.rec.in_recovery {
            per_ack.push(n);
            pipe.push(h.c.bytes_in_flight());
        } else {
            assert_eq!(n, 1, "RFC 3042: one new segment per duplicate ACK");
        }
    }
    (h, per_ack, pipe)
}

#[test]
fn rfc6937_newreno_sends_one_segment_per_two_delivered() {
    let (h, per_ack, pipe) = sends_per_ack(CcKind::NewReno, 7);
    let p = h.c.rec.prr;
    // RecoverFS: the 22 segments in flight (twenty plus two limited-transmit
    // ones); ssthresh = FlightSize / 2 = 11 segments.
    assert_eq!(p.recover_fs, 22 * MSS as usize);
    let ssthresh = h.c.stats().ssthresh;
    assert_eq!(ssthresh, 11 * MSS as usize);
    assert!(pipe.iter().all(|&b| b > ssthresh), "proportional part throughout: {pipe:?}");
    // RFC 6937 §3.1: prr_out = CEIL(prr_delivered * ssthresh / RecoverFS),
    // one segment per two delivered, the first being the fast retransmission.
    assert_eq!(per_ack, vec![1, 0, 1, 0, 1, 0, 1, 0]);
    assert_eq!(p.delivered, 8 * MSS as usize);
    assert_eq!(p.out, 4 * MSS as usize);
}

#[test]
fn rfc6937_cubic_sends_seven_segments_per_ten_delivered() {
    let (h, per_ack, pipe) = sends_per_ack(CcKind::Cubic, 7);
    let p = h.c.rec.prr;
    let ssthresh = h.c.stats().ssthresh;
    // CUBIC's beta: ssthresh / RecoverFS = 0.7.
    assert!((ssthresh as f64 / p.recover_fs as f64 - 0.7).abs() < 0.01);
    assert!(pipe.iter().all(|&b| b > ssthresh), "proportional part throughout: {pipe:?}");
    // CEIL(0.7 * d) for d = 1..8: 1 2 3 3 4 5 5 6.
    assert_eq!(per_ack, vec![1, 1, 1, 0, 1, 1, 0, 1]);
    let out: usize = per_ack.iter().sum();
    assert_eq!(out, (p.delivered * ssthresh).div_ceil(p.recover_fs).div_ceil(MSS as usize));
}

#[test]
fn rfc6937_ssrb_catches_up_when_pipe_falls_below_ssthresh() {
    // Many segments SACKed at once (an ACK burst was lost): pipe drops far
    // below ssthresh, and PRR-SSRB lets out at most DeliveredData + 1 MSS on
    // an ACK that advanced SND.UNA, never more than ssthresh - pipe.
    let mut h = sack_established(CcKind::NewReno);
    h.c.send(&vec![1u8; 40 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    // One ACK SACKs 1..10: recovery starts with 9 delivered.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(10))]), b"");
    assert!(h.c.rec.in_recovery);
    let ssthresh = h.c.stats().ssthresh;
    let out = h.recv();
    assert_eq!(out[0].seq(), seg_start(0), "the fast retransmission first");
    let sent: usize = out.iter().map(Out::len).sum();
    // pipe (1 lost, 9 SACKed: 0) < ssthresh: the SSRB bound lets the
    // retransmission and new data out, but never more than ssthresh in flight.
    assert!(h.c.bytes_in_flight() <= ssthresh, "pipe {} > ssthresh {ssthresh}", h.c.bytes_in_flight());
    assert!(sent <= ssthresh, "sent {sent}");
}

#[test]
fn rfc6937_recovery_exit_sets_cwnd_to_ssthresh() {
    let (mut h, _, _) = sends_per_ack(CcKind::Cubic, 3);
    let point = h.c.rec.point;
    h.send(&ack_with_sack(point.0, &[]), b"");
    assert!(!h.c.rec.in_recovery);
    let st = h.c.stats();
    assert_eq!(st.cwnd, st.ssthresh);
}

/// `sends_per_ack` without SACK: plain duplicate ACKs.
fn reno_sends_per_ack(cc: CcKind, more: u32) -> (Harness, Vec<usize>, Vec<usize>) {
    let cfg = Config { cc, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.send(&vec![1u8; 44 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    for i in 1..=10 {
        h.send(&seg(ACK, PEER_ISS + 1, seg_start(i)), b"");
        assert_eq!(h.recv().len(), 2, "slow start");
    }
    let (mut per_ack, mut pipe) = (Vec::new(), Vec::new());
    for _ in 12..=14 + more {
        h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
        let n = h.recv().len();
        if h.c.rec.in_recovery {
            per_ack.push(n);
            pipe.push(h.c.bytes_in_flight());
        } else {
            assert_eq!(n, 1, "RFC 3042: one new segment per duplicate ACK");
        }
    }
    (h, per_ack, pipe)
}

#[test]
fn rfc6937_3_without_sack_a_duplicate_ack_delivers_one_mss() {
    let (h, per_ack, pipe) = reno_sends_per_ack(CcKind::NewReno, 7);
    let p = h.c.rec.prr;
    assert_eq!(p.recover_fs, 22 * MSS as usize);
    let ssthresh = h.c.stats().ssthresh;
    assert_eq!(ssthresh, 11 * MSS as usize);
    assert!(pipe.iter().all(|&b| b > ssthresh), "proportional part throughout: {pipe:?}");
    // The same schedule as with SACK: one segment per two delivered, the
    // fast retransmission first (RFC 5681's window inflation sent none until
    // half the window's duplicate ACKs had come, then one per ACK).
    assert_eq!(per_ack, vec![1, 0, 1, 0, 1, 0, 1, 0]);
    assert_eq!(p.delivered, 8 * MSS as usize);
    // The pipe falls by a segment per duplicate ACK and rises by each one sent.
    assert_eq!(pipe[1] + MSS as usize, pipe[0]);
}

#[test]
fn rfc6937_3_without_sack_a_partial_ack_delivers_the_acked_less_the_dup_acks() {
    let (mut h, _, _) = reno_sends_per_ack(CcKind::NewReno, 7);
    // Ten duplicate ACKs stood for segments 11..21 having arrived. A partial
    // ACK up to segment 15 (10 and its successors 11..14 acknowledged: five
    // segments) delivers max(5 - 10, 1) = 1 new segment; four duplicate-ACK
    // credits are used up (Linux's `tcp_remove_reno_sacks`).
    let before = h.c.rec.prr;
    assert_eq!(before.reno_sacked, 10);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(15)), b"");
    let after = h.c.rec.prr;
    assert_eq!(after.delivered - before.delivered, MSS as usize);
    assert_eq!(after.reno_sacked, 6);
    // RFC 6582: the next hole goes out at once; PRR-SSRB's extra MSS lets it.
    let r = h.recv();
    assert_eq!(r[0].seq(), seg_start(15), "{r:?}");
    assert!(h.c.rec.in_recovery);
}
