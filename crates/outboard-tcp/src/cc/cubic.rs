//! CUBIC (RFC 9438), with cwnd counted in bytes.
//!
//! The window curve is computed in f64 segments of the current SMSS (RFC 9438
//! states it in segments); cwnd is kept as f64 bytes so that the small
//! per-ACK increments of a large window are not lost to rounding, and read out
//! as whole bytes. Time is `now - epoch_start`, never a clock.
//! The initial slow start uses HyStart++ (RFC 9406, `hystart.rs`). Not
//! implemented: spurious-congestion undo (RFC 9438 §4.9) inside the
//! controller (the connection undoes a reduction by restoring the whole
//! controller).
use super::hystart::{Growth, HyStart};
use super::{initial_window, is_cwnd_limited, CongestionControl, ABC_LIMIT_SEGMENTS};
use outboard_time::{Duration, Instant};

/// RFC 9438 §5.1: C = 0.4 (segments / s^3).
const C: f64 = 0.4;
/// RFC 9438 §4.6: beta_cubic = 0.7.
const BETA: f64 = 0.7;
/// RFC 9438 §4.3: alpha_cubic = 3 * (1 - beta) / (1 + beta) until W_est reaches cwnd_prior.
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// One congestion-avoidance stage (RFC 9438 §4.2: it starts at the first ACK
/// in congestion avoidance after slow start or recovery).
#[derive(Debug, Clone, Copy)]
#[derive(serde::Serialize, serde::Deserialize)]
struct Epoch {
    start: Instant,
    /// K in seconds: when the curve reaches its plateau.
    k: f64,
    /// The plateau the curve is centred on, bytes (W_max, or cwnd_epoch when K = 0).
    origin: f64,
    /// The Reno-equivalent window W_est, bytes (RFC 9438 §4.3).
    w_est: f64,
}

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Cubic {
    mss: usize,
    /// Bytes; never below one SMSS.
    cwnd: f64,
    ssthresh: usize,
    /// RFC 9438 §4.6/4.7: the window just before the last reduction (after fast convergence), bytes.
    w_max: f64,
    /// RFC 9438 §4.6: cwnd at the last congestion event, bytes (switches alpha to 1 in §4.3).
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    /// RFC 9438 §4.8: the first CA stage after an RTO uses K = 0 and W_max = cwnd_epoch.
    after_rto: bool,
    /// Stands in for the RTT on ACKs that carry no sample.
    min_rtt: Option<Duration>,
    /// When the last ACK arrived, to freeze the curve while application-limited.
    last_ack: Option<Instant>,
    /// RFC 9406 HyStart++ for the initial slow start (RFC 9438 §4.10 allows it).
    hystart: HyStart,
}

impl Cubic {
    pub fn new(mss: usize) -> Self {
        let mss = mss.max(1);
        Cubic {
            mss,
            cwnd: initial_window(mss) as f64,
            ssthresh: usize::MAX,
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch: None,
            after_rto: false,
            min_rtt: None,
            last_ack: None,
            hystart: HyStart::new(),
        }
    }

    fn mss_f(&self) -> f64 {
        self.mss as f64
    }

    /// RFC 9438 §4.2 eq. 1: W_cubic(t) = C * (t - K)^3 + W_max, in bytes.
    fn w_cubic(&self, e: &Epoch, t: f64) -> f64 {
        let d = t - e.k;
        C * d * d * d * self.mss_f() + e.origin
    }

    /// RFC 9438 §4.2 eq. 2: K = cbrt((W_max - cwnd_epoch) / C), in seconds.
    fn start_epoch(&mut self, now: Instant) -> Epoch {
        let cwnd_epoch = self.cwnd;
        let (k, origin) = if self.after_rto || self.w_max <= cwnd_epoch {
            // After an RTO (§4.8), or above the old plateau (e.g. slow start
            // ended without loss): the curve starts convex from here.
            (0.0, cwnd_epoch)
        } else {
            (((self.w_max - cwnd_epoch) / self.mss_f() / C).cbrt(), self.w_max)
        };
        self.after_rto = false;
        Epoch { start: now, k, origin, w_est: cwnd_epoch }
    }

    /// RFC 9438 §4.6 (also used on RTO, §4.8): W_max with fast convergence (§4.7),
    /// cwnd_prior, and ssthresh = max(flight_size * beta, 2*SMSS).
    fn reduce(&mut self, in_flight: usize) {
        self.w_max = if self.cwnd < self.w_max { self.cwnd * (1.0 + BETA) / 2.0 } else { self.cwnd };
        self.cwnd_prior = self.cwnd;
        self.ssthresh = ((in_flight as f64 * BETA) as usize).max(2 * self.mss);
        self.epoch = None;
    }

    fn congestion_avoidance(&mut self, now: Instant, bytes_acked: usize, rtt: Duration) {
        let e = match self.epoch {
            Some(e) => e,
            None => self.start_epoch(now),
        };
        let t = now.saturating_duration_since(e.start).as_secs_f64();
        let acked = bytes_acked as f64;
        let mss = self.mss_f();

        // §4.3: W_est += alpha * segments_acked / cwnd (segments), alpha = 1
        // once W_est has reached cwnd_prior.
        let alpha = if e.w_est >= self.cwnd_prior { 1.0 } else { ALPHA };
        let w_est = e.w_est + alpha * acked * mss / self.cwnd;
        self.epoch = Some(Epoch { w_est, ..e });

        if self.w_cubic(&e, t) < w_est {
            // §4.3 Reno-friendly region.
            self.cwnd = w_est;
        } else {
            // §4.4/4.5 concave and convex regions: aim at W_cubic one RTT ahead,
            // bounded to [cwnd, 1.5 cwnd], closing (target - cwnd)/cwnd per segment.
            let target = self.w_cubic(&e, t + rtt.as_secs_f64()).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd += (target - self.cwnd) * acked / self.cwnd;
        }
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        // f64 -> usize saturates; cwnd is kept >= mss.
        self.cwnd as usize
    }
    fn ssthresh(&self) -> usize {
        self.ssthresh
    }
    fn on_ack(&mut self, now: Instant, bytes_acked: usize, rtt: Option<Duration>, in_flight: usize) {
        if let Some(r) = rtt {
            self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        }
        if bytes_acked == 0 {
            return;
        }
        let prev_ack = self.last_ack.replace(now);
        if !is_cwnd_limited(self.cwnd(), bytes_acked, in_flight) {
            // RFC 9438 §5.8: no growth while application-limited, and the
            // curve's clock stops too (Linux shifts the epoch the same way), so
            // cwnd does not leap to W_cubic(t) once the flow is busy again.
            if let (Some(e), Some(p)) = (self.epoch.as_mut(), prev_ack) {
                e.start = (e.start + now.saturating_duration_since(p)).min(now);
            }
            return;
        }
        if self.cwnd() < self.ssthresh {
            // RFC 9438 §4.10: slow start (RFC 5681 with RFC 3465 ABC), with
            // HyStart++ (RFC 9406) while ssthresh is unset.
            let mut inc = bytes_acked.min(ABC_LIMIT_SEGMENTS * self.mss);
            if self.ssthresh == usize::MAX {
                let g = self.hystart.on_ack(bytes_acked, rtt, in_flight);
                if g == Growth::Exit {
                    self.ssthresh = self.cwnd();
                    return;
                }
                inc = HyStart::scale(g, inc);
            }
            self.cwnd += inc as f64;
            return;
        }
        let rtt = rtt.or(self.min_rtt).unwrap_or(Duration::ZERO);
        self.congestion_avoidance(now, bytes_acked, rtt);
    }
    fn on_congestion_event(&mut self, _now: Instant, in_flight: usize) {
        self.reduce(in_flight);
        self.cwnd = (self.ssthresh as f64).max(self.mss_f());
        self.after_rto = false;
    }
    fn on_recovery_end(&mut self, _now: Instant) {
        // The next ACK starts a fresh congestion-avoidance epoch from ssthresh.
        self.cwnd = (self.ssthresh as f64).max(self.mss_f());
        self.epoch = None;
    }
    fn on_rto(&mut self, _now: Instant, in_flight: usize) {
        // RFC 9438 §4.8: ssthresh as in §4.6, cwnd as Reno (1 SMSS).
        self.reduce(in_flight);
        self.cwnd = self.mss_f();
        self.after_rto = true;
    }
    fn set_mss(&mut self, mss: usize) {
        self.mss = mss.max(1);
        self.cwnd = self.cwnd.max(self.mss_f());
        if self.ssthresh != usize::MAX {
            self.ssthresh = self.ssthresh.max(2 * self.mss);
        }
        // K is in segments of the old size: start a new epoch.
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests;
