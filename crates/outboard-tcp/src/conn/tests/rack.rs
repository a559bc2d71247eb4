//! RFC 8985 RACK-TLP: time-based loss detection and tail loss probes. The
//! path here has a 50 ms RTT (the SYN-ACK and every ACK come 50 ms later).

use super::*;

const MSS: u32 = 1460;
const RTT: Duration = Duration::from_millis(50);

fn seg_start(i: u32) -> u32 {
    ISS + 1 + i * MSS
}

fn ack_with_sack(ack: u32, blocks: &[(u32, u32)]) -> TcpRepr {
    let mut a = seg(ACK, PEER_ISS + 1, ack);
    a.options.sack = sack(blocks);
    a
}

fn cfg() -> Config {
    Config { sack: true, ..plain_cfg() }
}

/// ESTABLISHED with SACK over a 50 ms path: SRTT = min_rtt = 50 ms.
fn established(cfg: &Config) -> Harness {
    let mut h = Harness::connect(cfg);
    assert_eq!(h.recv_one().flags(), SYN);
    h.now += RTT;
    let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
    sa.options = TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() };
    h.send(&sa, b"");
    h.recv_one();
    h.events();
    assert_eq!(h.c.rtt.min_rtt(), Some(RTT));
    h
}

/// Queues `queued` segments; `sent` go out now (cwnd), one RTT passes.
fn send_then_wait_rtt(h: &mut Harness, queued: u32, sent: usize) {
    h.c.send(&vec![1u8; (queued * MSS) as usize]).unwrap();
    assert_eq!(h.recv().len(), sent);
    h.advance(RTT);
}

#[test]
fn rfc8985_7_tlp_probes_a_lost_tail_after_two_srtt_instead_of_the_rto() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 10, 10);
    // Segments 0..8 arrive; 8 and 9 (the tail) are lost: no dup ACK ever comes.
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(8)), b"");
    h.recv_nothing();
    let rto_at = h.c.timers.get(Timer::Retransmit).unwrap();
    // §7.2: PTO = 2 * SRTT (two segments outstanding), ahead of the RTO.
    assert_eq!(h.fire_next_timer(), 2 * RTT);
    assert!(h.now < rto_at);
    let probe = h.recv_one();
    assert_eq!((probe.seq(), probe.len()), (seg_start(9), MSS as usize), "§7.3: the last segment again");
    assert_eq!(h.c.stats().tlp_probes, 1);
    // The probe's ACK SACKs it: RACK (§6.2) finds segment 8, sent before the
    // probe and outstanding longer than RTT + reo_wnd, lost at once.
    h.advance(RTT);
    h.send(&ack_with_sack(seg_start(8), &[(seg_start(9), seg_start(10))]), b"");
    let r = h.recv();
    assert_eq!(r.first().map(Out::seq), Some(seg_start(8)), "fast recovery, not the RTO: {r:?}");
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
    let st = h.c.stats();
    assert_eq!((st.rto_events, st.fast_retransmits), (0, 1));
    assert!(!h.c.rec.in_recovery);
}

#[test]
fn rfc8985_7_3_tlp_probe_sends_new_data_when_the_window_allows() {
    let mut h = established(&cfg());
    // Ten segments in flight (cwnd), five more queued; the whole flight is lost.
    send_then_wait_rtt(&mut h, 15, 10);
    h.advance(Duration::from_millis(50));
    let probe = h.recv_one();
    assert_eq!(probe.seq(), seg_start(10), "a new segment, cwnd notwithstanding");
    assert_eq!(h.c.stats().tlp_probes, 1);
    assert_eq!(h.c.stats().rto_events, 0);
}

#[test]
fn rfc8985_7_2_no_probe_while_sacked_data_is_outstanding() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 10, 10);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    assert_eq!(h.c.timers.get(Timer::LossProbe), None);
}

#[test]
fn rfc8985_6_2_rack_detects_a_loss_after_reo_wnd_with_one_dup_ack() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 10, 10);
    // One SACK only (below DupThresh): segment 0 was sent before segment 1.
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    h.recv_nothing();
    assert_eq!(h.c.rec.dupacks, 1);
    // §6.2 step 4: reo_wnd = min_rtt / 4 before any reordering was seen.
    assert_eq!(h.c.rack_reo_wnd(), RTT / 4);
    assert_eq!(h.fire_next_timer(), RTT / 4, "the RACK reorder timer");
    let r = h.recv();
    assert_eq!(r.first().map(|o| (o.seq(), o.len())), Some((seg_start(0), MSS as usize)));
    let st = h.c.stats();
    assert_eq!((st.fast_retransmits, st.rack_losses, st.rto_events), (1, 1, 0));
    assert!(h.c.rec.in_recovery);
}

#[test]
fn rfc8985_6_2_reordering_within_the_window_causes_no_retransmission() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 10, 10);
    h.send(&ack_with_sack(ISS + 1, &[(seg_start(1), seg_start(2))]), b"");
    h.recv_nothing();
    // Segment 0 was only late: it arrives within reo_wnd.
    h.advance(Duration::from_millis(5));
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
    h.advance(Duration::from_millis(500));
    h.recv_nothing();
    let st = h.c.stats();
    assert_eq!((st.retransmits, st.fast_retransmits, st.rack_losses), (0, 0, 0));
}

#[test]
fn rfc8985_6_2_dsack_widens_the_reordering_window() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 20, 10);
    h.send(&ack_with_sack(seg_start(2), &[]), b"");
    h.recv();
    // A D-SACK (below the cumulative ACK): reo_wnd_mult 1 -> 2.
    h.send(&ack_with_sack(seg_start(2), &[(seg_start(0), seg_start(1))]), b"");
    assert!(h.c.rec.rack.reordering_seen);
    assert_eq!(h.c.rack_reo_wnd(), RTT / 2);
    let info = h.c.info();
    assert!(info.reord_seen);
    assert_eq!(info.rack_reo_wnd_us, 25_000);
}

#[test]
fn rfc8985_7_4_probe_that_repaired_a_loss_reduces_cwnd() {
    // A lone lost segment: PTO = 2 * SRTT + the delayed-ACK allowance.
    let c = Config { delayed_ack: Duration::from_millis(40), ..cfg() };
    let mut h = established(&c);
    send_then_wait_rtt(&mut h, 10, 10);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(9)), b"");
    h.recv();
    assert_eq!(h.fire_next_timer(), 2 * RTT + Duration::from_millis(40));
    assert_eq!(h.recv_one().seq(), seg_start(9));
    let cwnd = h.c.stats().cwnd;
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
    // New data acknowledged beyond TLP.end_seq with no D-SACK of the probe:
    // the probe repaired a loss (§7.4.2).
    h.c.send(&[1u8; 100]).unwrap();
    h.recv_one();
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10) + 100), b"");
    let st = h.c.stats();
    assert_eq!(st.tlp_recoveries, 1);
    assert!(st.cwnd < cwnd, "cwnd {} not reduced from {cwnd}", st.cwnd);
    assert_eq!(st.rto_events, 0);
}

#[test]
fn rfc8985_7_4_dsack_of_the_probe_means_no_loss() {
    let c = Config { delayed_ack: Duration::from_millis(40), ..cfg() };
    let mut h = established(&c);
    send_then_wait_rtt(&mut h, 10, 10);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(9)), b"");
    h.recv();
    h.fire_next_timer();
    assert_eq!(h.recv_one().seq(), seg_start(9));
    let cwnd = h.c.stats().cwnd;
    h.advance(RTT);
    // The original arrived (late), then the probe: its D-SACK.
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10)), b"");
    h.send(&ack_with_sack(seg_start(10), &[(seg_start(9), seg_start(10))]), b"");
    h.c.send(&[1u8; 100]).unwrap();
    h.recv_one();
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(10) + 100), b"");
    let st = h.c.stats();
    assert_eq!(st.tlp_recoveries, 0);
    assert!(st.cwnd >= cwnd);
}

#[test]
fn rfc8985_6_2_a_lost_retransmission_in_fast_recovery_is_resent_before_the_rto() {
    let mut h = established(&cfg());
    send_then_wait_rtt(&mut h, 20, 10);
    // Segment 0 is lost, 1..4 SACKed: RACK marks it lost and recovery resends it.
    h.send(&ack_with_sack(seg_start(0), &[(seg_start(1), seg_start(4))]), b"");
    let r = h.recv();
    assert_eq!(r[0].seq(), seg_start(0), "fast retransmission: {r:?}");
    let rexmit_at = h.now;
    let rto_at = h.c.timers.get(Timer::Retransmit).unwrap();
    // More SACKs: PRR lets new data out after the retransmission.
    let mut after = None;
    for k in 5..=8 {
        h.now += Duration::from_millis(1);
        h.send(&ack_with_sack(seg_start(0), &[(seg_start(1), seg_start(k))]), b"");
        for s in h.recv() {
            assert_ne!(s.seq(), seg_start(0));
            if s.seq() >= seg_start(10) && after.is_none() {
                after = Some(s.seq());
            }
        }
    }
    let new_seq = after.expect("PRR sent new data after the retransmission");
    assert!(new_seq < seg_start(12), "so the RFC 6675-style detector (DupThresh beyond) stays quiet");
    // One RTT after the retransmission, that new segment is SACKed but the
    // retransmission is not acknowledged: RACK judges it lost (it was sent
    // before a delivered segment, RACK.rtt ago) and resends it, before the RTO.
    h.now = rexmit_at + RTT + Duration::from_millis(5);
    let losses = h.c.stats().rack_losses;
    h.send(&ack_with_sack(seg_start(0), &[(seg_start(1), seg_start(8)), (new_seq, new_seq + MSS)]), b"");
    let r = h.recv();
    assert!(r.iter().any(|s| s.seq() == seg_start(0)), "the lost retransmission again: {r:?}");
    assert!(h.now < rto_at);
    assert!(h.c.stats().rack_losses > losses);
    assert_eq!(h.c.stats().rto_events, 0);
}

#[test]
fn rfc8985_6_2_rack_judges_retransmissions_during_rto_recovery() {
    let mut h = established(&cfg());
    h.c.send(&vec![1u8; (6 * MSS) as usize]).unwrap();
    assert_eq!(h.recv().len(), 6);
    // Everything is lost (the tail loss probe too): the RTO resends segment 0
    // (cwnd one segment).
    let mut r = Vec::new();
    for _ in 0..3 {
        h.fire_next_timer();
        r = h.recv();
        if h.c.stats().rto_events == 1 {
            break;
        }
    }
    assert_eq!((r.len(), r[0].seq()), (1, seg_start(0)));
    assert_eq!(h.c.stats().rto_events, 1);
    // Its ACK opens cwnd to two: segments 1 and 2 go again.
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
    let r = h.recv();
    assert_eq!(r.iter().map(Out::seq).collect::<Vec<_>>(), [seg_start(1), seg_start(2)]);
    let rto_at = h.c.timers.get(Timer::Retransmit).unwrap();
    // Segment 1's retransmission is lost, segment 2's arrives: one RTT later
    // RACK finds segment 1 lost again and resends it, without a second RTO.
    h.advance(RTT);
    h.send(&ack_with_sack(seg_start(1), &[(seg_start(2), seg_start(3))]), b"");
    let r = h.recv();
    assert!(r.iter().any(|s| s.seq() == seg_start(1)), "segment 1 again: {r:?}");
    assert!(h.now < rto_at);
    assert_eq!(h.c.stats().rto_events, 1);
}
