use super::{Cubic, ALPHA, BETA, C};
use crate::cc::{CcKind, CongestionControl, Controller};
use outboard_time::{Duration, Instant};

const MSS: usize = 1000;

/// A CUBIC sender that has just left recovery after a loss at a window of
/// `w` segments with a full flight: cwnd = ssthresh = 0.7 w.
fn after_loss_at(w: usize, now: Instant) -> Cubic {
    let mut c = Cubic::new(MSS);
    c.cwnd = (w * MSS) as f64;
    c.on_congestion_event(now, w * MSS);
    c.on_recovery_end(now);
    c
}

/// Acknowledges one window, as ACKs of `chunk` bytes spread evenly over one
/// `rtt` starting at `*now`; advances `*now` by `rtt`.
fn one_rtt(c: &mut impl CongestionControl, now: &mut Instant, rtt: Duration, chunk: usize) {
    let w = c.cwnd();
    let acks = w.div_ceil(chunk);
    for i in 0..acks {
        let at = *now + rtt * (i as u32) / (acks as u32);
        let n = chunk.min(w - i * chunk);
        c.on_ack(at, n, Some(rtt), w);
    }
    *now += rtt;
}

fn segs(c: &impl CongestionControl) -> f64 {
    c.cwnd() as f64 / MSS as f64
}

#[test]
fn rfc9438_4_6_loss_reduces_by_beta_0_7() {
    let c = after_loss_at(100, Instant::ZERO);
    assert_eq!(c.ssthresh(), 70 * MSS);
    assert_eq!(c.cwnd(), 70 * MSS);
    assert_eq!(c.w_max, (100 * MSS) as f64);
}

#[test]
fn rfc9438_4_7_fast_convergence_lowers_w_max_when_window_shrank() {
    let mut c = after_loss_at(1000, Instant::ZERO);
    assert_eq!(c.w_max, 1_000_000.0);
    // A second loss below the previous W_max: W_max = cwnd * (1 + beta) / 2.
    c.cwnd = 800_000.0;
    c.on_congestion_event(Instant::from_millis(1000), 800_000);
    assert!((c.w_max - 800_000.0 * (1.0 + BETA) / 2.0).abs() < 1e-6);
    assert_eq!(c.ssthresh(), 560_000);
}

#[test]
fn rfc9438_4_2_k_is_cube_root_of_w_max_minus_cwnd_over_c() {
    let mut c = after_loss_at(1000, Instant::ZERO);
    let e = c.start_epoch(Instant::ZERO);
    let want = (300.0f64 / C).cbrt(); // (1000 - 700) segments
    assert!((e.k - want).abs() < 1e-9, "K = {} want {want}", e.k);
    assert!((c.w_cubic(&e, e.k) - 1_000_000.0).abs() < 1e-6);
}

#[test]
fn rfc9438_4_2_cwnd_reaches_w_max_at_k() {
    // 1000-segment window, 100 ms RTT: deep in the CUBIC region (W_est stays far below).
    let rtt = Duration::from_millis(100);
    let mut now = Instant::ZERO;
    let mut c = after_loss_at(1000, now);
    let k = (300.0f64 / C).cbrt();
    while now.as_secs_f64() < k {
        one_rtt(&mut c, &mut now, rtt, 10 * MSS);
    }
    let w = segs(&c);
    assert!((w - 1000.0).abs() < 10.0, "cwnd at K = {w} segments, want ~1000");
}

#[test]
fn rfc9438_4_4_4_5_growth_is_concave_below_w_max_then_convex_above() {
    let rtt = Duration::from_millis(100);
    let mut now = Instant::ZERO;
    let mut c = after_loss_at(1000, now);
    let k = (300.0f64 / C).cbrt(); // ~9.1 s, ~91 RTTs
    let mut w = vec![segs(&c)];
    for _ in 0..180 {
        one_rtt(&mut c, &mut now, rtt, 10 * MSS);
        w.push(segs(&c));
    }
    let growth = |from_s: f64| {
        let i = (from_s * 10.0) as usize;
        w[i + 10] - w[i]
    };
    // Concave: fast at first, slowing towards the plateau.
    assert!(growth(0.5) > growth(4.0));
    assert!(growth(4.0) > growth(k - 0.5));
    // Convex: speeding up again past K.
    assert!(growth(k + 3.0) > growth(k + 0.5));
    assert!(growth(k + 6.0) > growth(k + 3.0));
    // Never shrinks without a loss.
    assert!(w.windows(2).all(|p| p[1] >= p[0]));
    // Plateau near W_max around K.
    assert!(growth(k - 0.5) < 5.0, "growth around K: {}", growth(k - 0.5));
}

#[test]
fn rfc9438_4_3_reno_friendly_region_follows_w_est() {
    // Small window, short RTT: W_cubic grows slower than Reno would, so cwnd = W_est.
    let rtt = Duration::from_millis(10);
    let mut now = Instant::ZERO;
    let mut c = after_loss_at(100, now);
    for _ in 0..20 {
        one_rtt(&mut c, &mut now, rtt, MSS);
    }
    let w = segs(&c);
    // W_est grows alpha_cubic (~0.53) segments per RTT from 70.
    let want = 70.0 + 20.0 * ALPHA;
    assert!((w - want).abs() < 1.0, "cwnd {w} segments, want ~{want}");
    let e = c.epoch.expect("in congestion avoidance");
    let t = now.as_secs_f64();
    assert!(c.w_cubic(&e, t) < e.w_est, "W_cubic must be below W_est here");
}

#[test]
fn rfc9438_4_3_alpha_becomes_one_once_w_est_reaches_cwnd_prior() {
    let rtt = Duration::from_millis(10);
    let mut now = Instant::ZERO;
    let mut c = after_loss_at(20, now); // 14 -> 20 takes ~11 RTTs at alpha 0.53
    for _ in 0..12 {
        one_rtt(&mut c, &mut now, rtt, MSS);
    }
    let w0 = segs(&c);
    assert!(w0 >= 20.0, "W_est reached cwnd_prior: {w0}");
    for _ in 0..10 {
        one_rtt(&mut c, &mut now, rtt, MSS);
    }
    let per_rtt = (segs(&c) - w0) / 10.0;
    assert!((per_rtt - 1.0).abs() < 0.15, "Reno growth of ~1 segment/RTT, got {per_rtt}");
}

#[test]
fn rfc9438_4_8_rto_sets_one_mss_and_restarts_curve_with_k_zero() {
    let mut c = after_loss_at(100, Instant::ZERO);
    c.on_rto(Instant::from_millis(1000), 70 * MSS);
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 49 * MSS);
    // Slow start back to ssthresh, then the first CA epoch has K = 0 and W_max = cwnd_epoch.
    let mut now = Instant::from_millis(2000);
    let rtt = Duration::from_millis(100);
    while c.cwnd() < c.ssthresh() {
        c.on_ack(now, MSS, Some(rtt), c.cwnd());
        now += Duration::from_millis(1);
    }
    assert!(c.epoch.is_none());
    let w_epoch = c.cwnd;
    c.on_ack(now, MSS, Some(rtt), c.cwnd());
    let e = c.epoch.expect("in congestion avoidance");
    assert_eq!(e.k, 0.0);
    assert!((e.origin - w_epoch).abs() < 1e-6);
}

#[test]
fn cwnd_never_below_one_mss() {
    let mut c = Cubic::new(MSS);
    c.on_rto(Instant::ZERO, 0);
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 2 * MSS);
    c.on_congestion_event(Instant::ZERO, 0);
    assert_eq!(c.cwnd(), 2 * MSS);
    c.set_mss(4000);
    assert!(c.cwnd() >= 4000);
}

#[test]
fn missing_rtt_sample_uses_min_rtt() {
    let rtt = Duration::from_millis(100);
    let mut a = after_loss_at(500, Instant::ZERO);
    let mut b = after_loss_at(500, Instant::ZERO);
    a.on_ack(Instant::ZERO, 0, Some(rtt), 0); // b never learns an RTT sample this way
    b.on_ack(Instant::ZERO, 0, Some(rtt), 0);
    for i in 1..2000u64 {
        let now = Instant::from_millis(i * 5);
        a.on_ack(now, MSS, Some(rtt), a.cwnd());
        b.on_ack(now, MSS, None, b.cwnd());
    }
    assert_eq!(a.cwnd(), b.cwnd());
}

#[test]
fn slow_start_doubles_per_rtt_like_reno() {
    let mut c = Cubic::new(MSS);
    let mut now = Instant::ZERO;
    let w = c.cwnd();
    one_rtt(&mut c, &mut now, Duration::from_millis(50), MSS);
    assert_eq!(c.cwnd(), 2 * w);
}

#[test]
fn controller_dispatches_to_cubic() {
    let mut c = Controller::new(CcKind::Cubic, MSS);
    assert_eq!(c.kind(), CcKind::Cubic);
    c.on_congestion_event(Instant::ZERO, 100 * MSS);
    assert_eq!(c.cwnd(), 70 * MSS);
}

#[test]
fn rfc9438_5_8_application_limited_period_freezes_the_curve() {
    let rtt = Duration::from_millis(100);
    // A: busy throughout. B: busy, then 5 s application-limited, then busy again.
    let mut now_a = Instant::ZERO;
    let mut a = after_loss_at(1000, now_a);
    let mut now_b = Instant::ZERO;
    let mut b = after_loss_at(1000, now_b);
    for _ in 0..20 {
        one_rtt(&mut a, &mut now_a, rtt, 10 * MSS);
        one_rtt(&mut b, &mut now_b, rtt, 10 * MSS);
    }
    let before = b.cwnd();
    for _ in 0..50 {
        b.on_ack(now_b, MSS, Some(rtt), 0); // a trickle: far from cwnd-limited
        now_b += rtt;
    }
    assert_eq!(b.cwnd(), before, "no growth while application-limited");
    one_rtt(&mut a, &mut now_a, rtt, 10 * MSS);
    one_rtt(&mut b, &mut now_b, rtt, 10 * MSS);
    // B picks up the curve where it left it, like A did 5 s earlier.
    let (wa, wb) = (segs(&a), segs(&b));
    assert!((wa - wb).abs() / wa < 0.01, "busy {wa} vs resumed {wb} segments");
}
