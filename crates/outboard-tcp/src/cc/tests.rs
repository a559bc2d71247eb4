//! Properties every controller keeps, whatever the event sequence.
use super::{CcKind, CongestionControl, Controller};
use outboard_time::{Duration, Instant};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Ev {
    Ack { dt_ms: u16, bytes: usize, rtt_ms: Option<u32>, flight: usize },
    Loss { flight: usize },
    RecoveryEnd,
    Rto { flight: usize },
    Mss(usize),
}

fn ev() -> impl Strategy<Value = Ev> {
    let size = prop_oneof![0usize..200_000, Just(usize::MAX), Just(0)];
    prop_oneof![
        6 => (any::<u16>(), size.clone(), proptest::option::of(0u32..2_000_000), size.clone())
            .prop_map(|(dt_ms, bytes, rtt_ms, flight)| Ev::Ack { dt_ms, bytes, rtt_ms, flight }),
        1 => size.clone().prop_map(|flight| Ev::Loss { flight }),
        1 => Just(Ev::RecoveryEnd),
        1 => size.prop_map(|flight| Ev::Rto { flight }),
        1 => (1usize..9000).prop_map(Ev::Mss),
    ]
}

proptest! {
    #[test]
    fn cwnd_stays_at_least_one_mss_and_ssthresh_two(
        cubic in any::<bool>(),
        mss in 1usize..9000,
        evs in proptest::collection::vec(ev(), 0..200),
    ) {
        let kind = if cubic { CcKind::Cubic } else { CcKind::NewReno };
        let mut c = Controller::new(kind, mss);
        let mut mss = mss;
        let mut now = Instant::from_millis(1);
        for e in evs {
            match e {
                Ev::Ack { dt_ms, bytes, rtt_ms, flight } => {
                    now += Duration::from_millis(u64::from(dt_ms));
                    c.on_ack(now, bytes, rtt_ms.map(|r| Duration::from_micros(u64::from(r))), flight);
                }
                Ev::Loss { flight } => c.on_congestion_event(now, flight),
                Ev::RecoveryEnd => c.on_recovery_end(now),
                Ev::Rto { flight } => c.on_rto(now, flight),
                Ev::Mss(m) => {
                    c.set_mss(m);
                    mss = m;
                }
            }
            prop_assert!(c.cwnd() >= mss, "cwnd {} below mss {}", c.cwnd(), mss);
            prop_assert!(c.ssthresh() >= 2 * mss, "ssthresh {} below 2 mss", c.ssthresh());
        }
    }

    #[test]
    fn losses_never_raise_cwnd(cubic in any::<bool>(), grow in 0usize..500, flight_frac in 0usize..=100) {
        let kind = if cubic { CcKind::Cubic } else { CcKind::NewReno };
        let mss = 1000;
        let mut c = Controller::new(kind, mss);
        for i in 0..grow {
            c.on_ack(Instant::from_millis(i as u64), mss, None, c.cwnd());
        }
        let before = c.cwnd();
        let flight = before * flight_frac / 100;
        c.on_congestion_event(Instant::from_millis(grow as u64), flight);
        prop_assert!(c.cwnd() <= before.max(2 * mss));
        c.on_rto(Instant::from_millis(grow as u64 + 1), flight);
        prop_assert_eq!(c.cwnd(), mss);
    }
}
