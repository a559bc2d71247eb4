//! A token bucket on injected time, for ICMP errors (RFC 1812 §4.3.2.8,
//! RFC 1122 §3.2.2: a host SHOULD limit the rate of the errors it sends, so a
//! scan or flood can't turn it into an amplifier).

#[cfg(test)]
use outboard_time::Duration;
use outboard_time::Instant;

#[derive(Debug, Clone)]
pub(crate) struct RateLimiter {
    /// Credit in nanoseconds of refill time; one token costs `cost`.
    credit: u64,
    cost: u64,
    cap: u64,
    last: Instant,
}

impl RateLimiter {
    /// `per_sec` tokens a second, up to `burst` at once; starts full.
    pub(crate) fn new(per_sec: u32, burst: u32, now: Instant) -> RateLimiter {
        let cost = 1_000_000_000 / u64::from(per_sec.max(1));
        let cap = cost * u64::from(burst.max(1));
        RateLimiter {
            credit: cap,
            cost,
            cap,
            last: now,
        }
    }

    /// Takes a token if one is available.
    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        let add = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.credit = self.credit.saturating_add(add).min(self.cap);
        if self.credit >= self.cost {
            self.credit -= self.cost;
            true
        } else {
            false
        }
    }

    /// Time for one token to accumulate.
    #[cfg(test)]
    pub(crate) fn interval(&self) -> Duration {
        Duration::from_nanos(self.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let t0 = Instant::from_millis(1000);
        let mut r = RateLimiter::new(10, 3, t0);
        assert!(r.allow(t0) && r.allow(t0) && r.allow(t0));
        assert!(!r.allow(t0), "burst of 3 spent");
        assert!(!r.allow(t0 + r.interval() - Duration::from_nanos(1)));
        assert!(r.allow(t0 + r.interval()));
        // A long idle refills only up to the burst.
        let later = t0 + Duration::from_secs(100);
        assert_eq!((0..10).filter(|_| r.allow(later)).count(), 3);
    }

    #[test]
    fn time_going_backwards_grants_nothing() {
        let t0 = Instant::from_millis(1000);
        let mut r = RateLimiter::new(1, 1, t0);
        assert!(r.allow(t0));
        assert!(!r.allow(Instant::from_millis(10)));
        assert!(!r.allow(t0));
    }
}
