use super::NewReno;
use crate::cc::{initial_window, CcKind, CongestionControl, Controller};
use outboard_time::{Duration, Instant};

const MSS: usize = 1000;

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// One RTT in which the whole window is acknowledged in `per_ack`-byte ACKs,
/// with the sender refilling the window each time (cwnd-limited).
fn ack_one_window(cc: &mut impl CongestionControl, now: Instant, per_ack: usize) {
    let w = cc.cwnd();
    let mut acked = 0;
    while acked < w {
        let n = per_ack.min(w - acked);
        cc.on_ack(now, n, Some(Duration::from_millis(100)), w);
        acked += n;
    }
}

#[test]
fn rfc6928_initial_window_is_min_10mss_max_2mss_14600() {
    assert_eq!(initial_window(1460), 14_600);
    assert_eq!(initial_window(1000), 10_000);
    assert_eq!(initial_window(536), 5_360);
    assert_eq!(initial_window(8960), 17_920);
    assert_eq!(NewReno::new(1460).cwnd(), 14_600);
    assert_eq!(NewReno::new(1460).ssthresh(), usize::MAX);
}

#[test]
fn rfc5681_slow_start_doubles_cwnd_per_rtt() {
    let mut cc = NewReno::new(MSS);
    let mut w = cc.cwnd();
    for rtt in 0..5 {
        ack_one_window(&mut cc, t(rtt * 100), MSS);
        assert_eq!(cc.cwnd(), 2 * w);
        w = cc.cwnd();
    }
}

#[test]
fn rfc3465_slow_start_with_delayed_acks_still_doubles_thanks_to_l_2mss() {
    let mut cc = NewReno::new(MSS);
    let w = cc.cwnd();
    ack_one_window(&mut cc, t(0), 2 * MSS);
    assert_eq!(cc.cwnd(), 2 * w);
}

#[test]
fn rfc3465_slow_start_increase_per_ack_is_capped_at_2mss() {
    let mut cc = NewReno::new(MSS);
    let w = cc.cwnd();
    cc.on_ack(t(0), 8 * MSS, None, w);
    assert_eq!(cc.cwnd(), w + 2 * MSS);
}

#[test]
fn rfc5681_congestion_avoidance_grows_one_mss_per_rtt() {
    let mut cc = NewReno::new(MSS);
    cc.on_congestion_event(t(0), 40 * MSS); // ssthresh = cwnd = 20 MSS
    assert_eq!(cc.cwnd(), 20 * MSS);
    cc.on_recovery_end(t(100));
    for rtt in 1..=10u64 {
        ack_one_window(&mut cc, t(100 + rtt * 100), MSS);
        assert_eq!(cc.cwnd(), (20 + rtt as usize) * MSS);
    }
    // Delayed ACKs (2 MSS each) grow it the same.
    let w = cc.cwnd();
    ack_one_window(&mut cc, t(5000), 2 * MSS);
    assert_eq!(cc.cwnd(), w + MSS);
}

#[test]
fn rfc5681_congestion_event_halves_flight_size() {
    let mut cc = NewReno::new(MSS);
    cc.on_congestion_event(t(0), 30 * MSS);
    assert_eq!(cc.ssthresh(), 15 * MSS);
    assert_eq!(cc.cwnd(), 15 * MSS);
    cc.on_recovery_end(t(1));
    assert_eq!(cc.cwnd(), 15 * MSS);
}

#[test]
fn rfc5681_ssthresh_floor_is_two_mss() {
    let mut cc = NewReno::new(MSS);
    cc.on_congestion_event(t(0), MSS);
    assert_eq!(cc.ssthresh(), 2 * MSS);
    assert_eq!(cc.cwnd(), 2 * MSS);
}

#[test]
fn rfc5681_rto_sets_loss_window_of_one_mss() {
    let mut cc = NewReno::new(MSS);
    cc.on_rto(t(0), 24 * MSS);
    assert_eq!(cc.ssthresh(), 12 * MSS);
    assert_eq!(cc.cwnd(), MSS);
    // Slow start again up to ssthresh.
    ack_one_window(&mut cc, t(100), MSS);
    assert_eq!(cc.cwnd(), 2 * MSS);
}

#[test]
fn application_limited_flow_does_not_grow_cwnd() {
    let mut cc = NewReno::new(MSS);
    let w = cc.cwnd();
    // One 1-MSS request/response at a time: flight never near cwnd.
    for i in 0..100 {
        cc.on_ack(t(i), MSS, None, 0);
    }
    assert_eq!(cc.cwnd(), w);
}

#[test]
fn set_mss_keeps_cwnd_at_least_one_mss() {
    let mut cc = NewReno::new(MSS);
    cc.on_rto(t(0), 0);
    cc.set_mss(9000);
    assert_eq!(cc.cwnd(), 9000);
    assert_eq!(cc.ssthresh(), 18_000);
}

#[test]
fn controller_dispatches_to_newreno() {
    let mut c = Controller::new(CcKind::NewReno, MSS);
    assert_eq!(c.kind(), CcKind::NewReno);
    c.on_congestion_event(t(0), 10 * MSS);
    assert_eq!(c.cwnd(), 5 * MSS);
    assert_eq!("reno".parse::<CcKind>(), Ok(CcKind::NewReno));
    assert_eq!("cubic".parse::<CcKind>(), Ok(CcKind::Cubic));
    assert!("bbr".parse::<CcKind>().is_err());
}
