//! RFC 6298 retransmission timer computation.
//!
//! Arithmetic is in integer nanoseconds (u128 intermediates, so no sample can
//! overflow it): alpha = 1/8, beta = 1/4, K = 4, and a clock granularity G of
//! 1 ms, the coarsest clock an engine is expected to run on.
use outboard_time::Duration;

/// RFC 6298 §2: K.
const K: u128 = 4;
/// RFC 6298 §2: G, the clock granularity.
const GRANULARITY: Duration = Duration::from_millis(1);
/// Past this many doublings the RTO is at `max_rto` for any sane configuration.
const MAX_BACKOFF_SHIFT: u32 = 31;

/// RFC 6298 §5.7: the RTO data transmission starts with after a SYN timeout.
const SYN_TIMEOUT_RTO: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RttEstimator {
    initial_rto: Duration,
    min_rto: Duration,
    max_rto: Duration,
    /// (SRTT, RTTVAR) in ns once a sample has been taken.
    smoothed: Option<(u64, u64)>,
    min_rtt: Option<Duration>,
    backoff: u32,
}

fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

fn from_nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

impl RttEstimator {
    /// `initial_rto` is used until the first sample (RFC 6298 §2.1, 1 s).
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator { initial_rto, min_rto, max_rto: max_rto.max(min_rto), smoothed: None, min_rtt: None, backoff: 0 }
    }
    /// A new RTT measurement (never from a retransmitted segment: Karn's rule is the caller's).
    /// Updates SRTT/RTTVAR (RFC 6298 §2.2/2.3), recomputes RTO, and clears any backoff.
    pub fn on_sample(&mut self, rtt: Duration) {
        let r = nanos(rtt);
        let (srtt, rttvar) = match self.smoothed {
            // §2.2: SRTT <- R, RTTVAR <- R/2.
            None => (r, r / 2),
            // §2.3: RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'| (with the old SRTT),
            //       SRTT <- (1 - alpha) * SRTT + alpha * R'.
            Some((srtt, rttvar)) => {
                let (srtt, rttvar) = (srtt as u128, rttvar as u128);
                let rttvar = (3 * rttvar + srtt.abs_diff(r)) / 4;
                let srtt = (7 * srtt + r) / 8;
                (srtt, rttvar)
            }
        };
        let clamp = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
        self.smoothed = Some((clamp(srtt), clamp(rttvar)));
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        // §2.3 recomputes RTO from the new estimate, discarding the backed-off
        // value (Karn's algorithm, §3: keep the backoff until a sample from a
        // segment that was not retransmitted arrives, which this is).
        self.backoff = 0;
    }
    /// The RTO without backoff: RFC 6298 §2.2/2.3 `SRTT + max(G, K*RTTVAR)`,
    /// or the initial RTO before any sample (§2.1), clamped to [min_rto, max_rto] (§2.4, §2.5).
    pub fn base_rto(&self) -> Duration {
        let raw = match self.smoothed {
            None => self.initial_rto,
            Some((srtt, rttvar)) => {
                from_nanos(srtt as u128 + (K * rttvar as u128).max(nanos(GRANULARITY)))
            }
        };
        raw.clamp(self.min_rto, self.max_rto)
    }
    /// The current RTO including exponential backoff, clamped to [min_rto, max_rto].
    pub fn rto(&self) -> Duration {
        let shift = self.backoff.min(MAX_BACKOFF_SHIFT);
        from_nanos(nanos(self.base_rto()) << shift).clamp(self.min_rto, self.max_rto)
    }
    /// Doubles the RTO after a timeout (RFC 6298 §5.5).
    pub fn backoff(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
    /// RFC 6298 §5.7: the SYN (or SYN-ACK) timed out and the handshake gave no
    /// RTT sample, so data transmission starts with a 3 s RTO (unless the
    /// configured initial RTO is already larger) and no backoff.
    pub fn reinit_after_syn_timeout(&mut self) {
        if self.smoothed.is_none() {
            self.initial_rto = self.initial_rto.max(SYN_TIMEOUT_RTO);
        }
        self.backoff = 0;
    }
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|(s, _)| Duration::from_nanos(s))
    }
    pub fn rttvar(&self) -> Duration {
        self.smoothed.map_or(Duration::ZERO, |(_, v)| Duration::from_nanos(v))
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn est() -> RttEstimator {
        RttEstimator::new(ms(1000), ms(200), ms(60_000))
    }

    #[test]
    fn rfc6298_2_1_initial_rto_before_any_sample() {
        let e = est();
        assert_eq!(e.rto(), ms(1000));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
        assert_eq!(e.min_rtt(), None);
    }

    #[test]
    fn rfc6298_2_2_first_sample_sets_srtt_r_and_rttvar_half_r() {
        let mut e = est();
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        // RTO = 100 + max(G, 4 * 50) = 300 ms.
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn rfc6298_2_3_later_samples_use_alpha_eighth_beta_quarter() {
        let mut e = est();
        e.on_sample(ms(100));
        e.on_sample(ms(180));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 180| = 37.5 + 20 = 57.5 ms
        // SRTT   = 7/8 * 100 + 1/8 * 180 = 110 ms
        assert_eq!(e.rttvar(), Duration::from_micros(57_500));
        assert_eq!(e.srtt(), Some(ms(110)));
        assert_eq!(e.rto(), ms(110 + 230));
    }

    #[test]
    fn rfc6298_2_3_granularity_floors_the_variance_term() {
        let mut e = RttEstimator::new(ms(1000), Duration::ZERO, ms(60_000));
        for _ in 0..200 {
            e.on_sample(ms(10));
        }
        // RTTVAR has decayed to ~0; the G term (1 ms) keeps RTO above SRTT.
        assert_eq!(e.srtt(), Some(ms(10)));
        assert!(e.rttvar() < Duration::from_micros(1));
        assert_eq!(e.rto(), ms(11));
    }

    #[test]
    fn rfc6298_2_4_rto_is_clamped_to_min() {
        let mut e = est();
        e.on_sample(ms(1));
        assert_eq!(e.rto(), ms(200));
    }

    #[test]
    fn rfc6298_2_5_rto_is_clamped_to_max() {
        let mut e = est();
        e.on_sample(ms(50_000));
        assert_eq!(e.rto(), ms(60_000));
    }

    #[test]
    fn rfc6298_5_5_backoff_doubles_and_caps_at_max() {
        let mut e = est();
        e.on_sample(ms(100)); // RTO 300 ms
        e.backoff();
        assert_eq!(e.backoff_count(), 1);
        assert_eq!(e.rto(), ms(600));
        e.backoff();
        assert_eq!(e.rto(), ms(1200));
        for _ in 0..100 {
            e.backoff();
        }
        assert_eq!(e.rto(), ms(60_000));
        assert_eq!(e.backoff_count(), 102);
    }

    #[test]
    fn rfc6298_5_5_backoff_applies_to_initial_rto() {
        let mut e = est();
        e.backoff();
        assert_eq!(e.rto(), ms(2000));
    }

    #[test]
    fn rfc6298_3_karn_new_sample_clears_backoff() {
        let mut e = est();
        e.on_sample(ms(100));
        e.backoff();
        e.backoff();
        e.on_sample(ms(100));
        assert_eq!(e.backoff_count(), 0);
        assert!(e.rto() < ms(600));
    }

    #[test]
    fn min_rtt_tracks_smallest_sample() {
        let mut e = est();
        e.on_sample(ms(40));
        e.on_sample(ms(20));
        e.on_sample(ms(90));
        assert_eq!(e.min_rtt(), Some(ms(20)));
    }

    proptest::proptest! {
        #[test]
        fn rto_always_within_bounds_and_srtt_within_samples(
            samples in proptest::collection::vec((0u64..10_000_000, 0u32..4), 1..100),
        ) {
            let (lo, hi) = (ms(200), ms(60_000));
            let mut e = RttEstimator::new(ms(1000), lo, hi);
            let (mut min_s, mut max_s) = (Duration::MAX, Duration::ZERO);
            for (us, backoffs) in samples {
                let r = Duration::from_micros(us);
                e.on_sample(r);
                min_s = min_s.min(r);
                max_s = max_s.max(r);
                for _ in 0..backoffs {
                    e.backoff();
                }
                let rto = e.rto();
                proptest::prop_assert!(lo <= rto && rto <= hi);
                let srtt = e.srtt().unwrap();
                // Integer division may round one nanosecond below the smallest sample.
                proptest::prop_assert!(srtt + Duration::from_nanos(8) >= min_s && srtt <= max_s);
                proptest::prop_assert_eq!(e.min_rtt(), Some(min_s));
            }
        }
    }

    #[test]
    fn absurd_samples_do_not_overflow() {
        let mut e = est();
        e.on_sample(Duration::MAX);
        e.on_sample(Duration::MAX);
        e.on_sample(Duration::ZERO);
        assert_eq!(e.rto(), ms(60_000));
    }
}
