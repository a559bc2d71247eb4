//! Congestion control behind one trait (FreeBSD-style event hooks), selectable
//! per connection. Recovery bookkeeping (pipe, dup-ACK counting, partial ACKs)
//! lives in the connection; a controller only decides cwnd and ssthresh.
//! STUB: signatures are the contract; bodies are being written.

use outboard_time::{Duration, Instant};

/// Which congestion controller a connection uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
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
    /// (slow start / congestion avoidance, RFC 5681 §3.1).
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

pub mod cubic;
pub mod newreno;
