//! Congestion control behind one trait (FreeBSD-style event hooks), selectable
//! per connection. Recovery bookkeeping (pipe, dup-ACK counting, partial ACKs)
//! lives in the connection; a controller only decides cwnd and ssthresh.
//!
//! Both controllers count bytes, not segments: slow start uses Appropriate
//! Byte Counting with L = 2*SMSS (RFC 3465 §2.2), and cwnd never drops below
//! one SMSS.

use outboard_time::{Duration, Instant};

/// Which congestion controller a connection uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum CcKind {
    #[default]
    NewReno,
    Cubic,
}

impl core::str::FromStr for CcKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "newreno" | "reno" => Ok(CcKind::NewReno),
            "cubic" => Ok(CcKind::Cubic),
            other => Err(format!("unknown congestion controller {other:?} (expected newreno or cubic)")),
        }
    }
}

/// The events a controller reacts to. All sizes in bytes.
pub trait CongestionControl: core::fmt::Debug {
    fn cwnd(&self) -> usize;
    fn ssthresh(&self) -> usize;
    /// New data cumulatively acknowledged while not in loss recovery
    /// (slow start / congestion avoidance, RFC 5681 §3.1). `rtt` is this ACK's
    /// RTT sample if it gave one; `bytes_in_flight` is the flight size (before
    /// or after this ACK): a flow using under half its cwnd is application-limited
    /// and does not grow it (RFC 7661 §4 spirit).
    fn on_ack(&mut self, now: Instant, bytes_acked: usize, rtt: Option<Duration>, bytes_in_flight: usize);
    /// Loss detected by duplicate ACKs or SACK: entering recovery
    /// (RFC 5681 §3.2 step 2, RFC 6675 §5, RFC 9438 §4.6).
    fn on_congestion_event(&mut self, now: Instant, bytes_in_flight: usize);
    /// Recovery ended with a full ACK (RFC 6582 §3.2 step 3).
    fn on_recovery_end(&mut self, now: Instant);
    /// Retransmission timeout (RFC 5681 §3.1 eq. 4: ssthresh from flight size, cwnd = 1 MSS).
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize);
    /// The sender MSS changed (e.g. after ICMP fragmentation-needed).
    fn set_mss(&mut self, mss: usize);
}

/// A controller of either kind, without allocation.
#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Controller {
    NewReno(newreno::NewReno),
    Cubic(cubic::Cubic),
}

impl Controller {
    /// Initial window per RFC 5681 §3.1 / RFC 6928 policy chosen in the body.
    pub fn new(kind: CcKind, mss: usize) -> Controller {
        match kind {
            CcKind::NewReno => Controller::NewReno(newreno::NewReno::new(mss)),
            CcKind::Cubic => Controller::Cubic(cubic::Cubic::new(mss)),
        }
    }
    pub fn kind(&self) -> CcKind {
        match self {
            Controller::NewReno(_) => CcKind::NewReno,
            Controller::Cubic(_) => CcKind::Cubic,
        }
    }
    fn inner(&self) -> &dyn CongestionControl {
        match self {
            Controller::NewReno(c) => c,
            Controller::Cubic(c) => c,
        }
    }
    fn inner_mut(&mut self) -> &mut dyn CongestionControl {
        match self {
            Controller::NewReno(c) => c,
            Controller::Cubic(c) => c,
        }
    }
}

impl CongestionControl for Controller {
    fn cwnd(&self) -> usize {
        self.inner().cwnd()
    }
    fn ssthresh(&self) -> usize {
        self.inner().ssthresh()
    }
    fn on_ack(&mut self, now: Instant, bytes_acked: usize, rtt: Option<Duration>, in_flight: usize) {
        self.inner_mut().on_ack(now, bytes_acked, rtt, in_flight)
    }
    fn on_congestion_event(&mut self, now: Instant, in_flight: usize) {
        self.inner_mut().on_congestion_event(now, in_flight)
    }
    fn on_recovery_end(&mut self, now: Instant) {
        self.inner_mut().on_recovery_end(now)
    }
    fn on_rto(&mut self, now: Instant, in_flight: usize) {
        self.inner_mut().on_rto(now, in_flight)
    }
    fn set_mss(&mut self, mss: usize) {
        self.inner_mut().set_mss(mss)
    }
}

/// RFC 6928 §2 initial window: `min(10*MSS, max(2*MSS, 14600))`.
///
/// We take RFC 6928's ten-segment IW (what Linux and the other stacks we
/// interoperate with use) rather than RFC 5681's 2-4 segments. The 14600-byte
/// cap (ten Ethernet segments) keeps a jumbo MSS from meaning a huge first
/// burst, but never below two segments.
pub fn initial_window(mss: usize) -> usize {
    let mss = mss.max(1);
    (10 * mss).min((2 * mss).max(14_600))
}

/// RFC 3465 §2.2: the slow-start increase per ACK is capped at L = 2*SMSS.
pub(crate) const ABC_LIMIT_SEGMENTS: usize = 2;

/// RFC 7661 spirit / Linux `tcp_is_cwnd_limited`: grow cwnd only when the
/// sender is actually using it. `bytes_in_flight` may be taken before or
/// after this ACK; we add `bytes_acked` back so either reading works, and call
/// the flow application-limited only when it used less than half the window.
pub(crate) fn is_cwnd_limited(cwnd: usize, bytes_acked: usize, bytes_in_flight: usize) -> bool {
    bytes_in_flight.saturating_add(bytes_acked).saturating_mul(2) >= cwnd
}

pub mod cubic;
pub mod hystart;
pub mod newreno;

#[cfg(test)]
mod tests;
