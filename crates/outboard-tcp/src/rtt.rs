//! RFC 6298 retransmission timer computation.
//! STUB: signatures are the contract; bodies are being written.
use outboard_time::Duration;

#[derive(Debug, Clone)]
pub struct RttEstimator {
    _todo: (),
}

impl RttEstimator {
    /// `initial_rto` is used until the first sample (RFC 6298 §2.1, 1 s).
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let _ = (initial_rto, min_rto, max_rto);
        todo!()
    }
    /// A new RTT measurement (never from a retransmitted segment: Karn's rule is the caller's).
    /// Updates SRTT/RTTVAR (RFC 6298 §2.2/2.3), recomputes RTO, and clears any backoff.
    pub fn on_sample(&mut self, rtt: Duration) {
        let _ = rtt;
        todo!()
    }
    /// The current RTO including exponential backoff, clamped to [min_rto, max_rto].
    pub fn rto(&self) -> Duration {
        todo!()
    }
    /// Doubles the RTO after a timeout (RFC 6298 §5.5).
    pub fn backoff(&mut self) {
        todo!()
    }
    pub fn backoff_count(&self) -> u32 {
        todo!()
    }
    pub fn srtt(&self) -> Option<Duration> {
        todo!()
    }
    pub fn rttvar(&self) -> Duration {
        todo!()
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        todo!()
    }
}
