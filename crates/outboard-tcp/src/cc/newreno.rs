//! NewReno's window arithmetic (RFC 5681 §3.1-3.2; the RFC 6582 recovery
//! bookkeeping lives in the connection, which calls `on_congestion_event` on
//! entry and `on_recovery_end` on exit).
use super::hystart::{Growth, HyStart};
use super::{initial_window, is_cwnd_limited, CongestionControl, ABC_LIMIT_SEGMENTS};
use outboard_time::{Duration, Instant};

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct NewReno {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// Bytes acknowledged in congestion avoidance since cwnd last grew
    /// (RFC 5681 §3.1 byte counting: +1 SMSS per cwnd of ACKed bytes).
    ca_acked: usize,
    /// RFC 9406 HyStart++ for the initial slow start.
    hystart: HyStart,
}

impl NewReno {
    pub fn new(mss: usize) -> Self {
        let mss = mss.max(1);
        // RFC 5681 §3.1: ssthresh starts "arbitrarily high".
        NewReno { mss, cwnd: initial_window(mss), ssthresh: usize::MAX, ca_acked: 0, hystart: HyStart::new() }
    }

    /// RFC 5681 §3.1 eq. 4: ssthresh = max(FlightSize / 2, 2*SMSS).
    fn halved(&self, in_flight: usize) -> usize {
        (in_flight / 2).max(2 * self.mss)
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.ssthresh
    }
    fn on_ack(&mut self, _now: Instant, bytes_acked: usize, rtt: Option<Duration>, in_flight: usize) {
        if bytes_acked == 0 || !is_cwnd_limited(self.cwnd, bytes_acked, in_flight) {
            return;
        }
        if self.cwnd < self.ssthresh {
            // Slow start, RFC 3465 §2.2: cwnd += min(N, L), L = 2*SMSS.
            let mut inc = bytes_acked.min(ABC_LIMIT_SEGMENTS * self.mss);
            if self.ssthresh == usize::MAX {
                // RFC 9406 §4.2: HyStart++ in the initial slow start.
                let g = self.hystart.on_ack(bytes_acked, rtt, in_flight);
                if g == Growth::Exit {
                    self.ssthresh = self.cwnd;
                    return;
                }
                inc = HyStart::scale(g, inc);
            }
            self.cwnd = self.cwnd.saturating_add(inc);
            self.ca_acked = 0;
        } else {
            // Congestion avoidance, RFC 5681 §3.1 (byte counting, RFC 3465 §2.1):
            // one SMSS per cwnd's worth of ACKed bytes, i.e. SMSS*SMSS/cwnd per
            // SMSS acknowledged, whatever the ACK pattern (delayed ACKs included).
            self.ca_acked = self.ca_acked.saturating_add(bytes_acked);
            if self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.mss);
            }
        }
    }
    fn on_congestion_event(&mut self, _now: Instant, in_flight: usize) {
        // RFC 5681 §3.2 step 2 with RFC 6675's pipe-based recovery: no window
        // inflation, cwnd = ssthresh.
        self.ssthresh = self.halved(in_flight);
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }
    fn on_recovery_end(&mut self, _now: Instant) {
        // RFC 6582 §3.2 step 3: deflate to ssthresh.
        self.cwnd = self.ssthresh.max(self.mss);
        self.ca_acked = 0;
    }
    fn on_rto(&mut self, _now: Instant, in_flight: usize) {
        // RFC 5681 §3.1 eq. 4, and cwnd = loss window (1 SMSS).
        self.ssthresh = self.halved(in_flight);
        self.cwnd = self.mss;
        self.ca_acked = 0;
    }
    fn set_mss(&mut self, mss: usize) {
        // cwnd stays in bytes (as FreeBSD keeps it); only the floors move.
        self.mss = mss.max(1);
        self.cwnd = self.cwnd.max(self.mss);
        if self.ssthresh != usize::MAX {
            self.ssthresh = self.ssthresh.max(2 * self.mss);
        }
    }
}

#[cfg(test)]
mod tests;
