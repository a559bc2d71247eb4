//! STUB: being written.
use super::CongestionControl;
use outboard_time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct NewReno {
    _todo: (),
}

impl NewReno {
    pub fn new(mss: usize) -> Self {
        let _ = mss;
        todo!()
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize { todo!() }
    fn ssthresh(&self) -> usize { todo!() }
    fn on_ack(&mut self, _now: Instant, _bytes_acked: usize, _rtt: Option<Duration>, _in_flight: usize) { todo!() }
    fn on_congestion_event(&mut self, _now: Instant, _in_flight: usize) { todo!() }
    fn on_recovery_end(&mut self, _now: Instant) { todo!() }
    fn on_rto(&mut self, _now: Instant, _in_flight: usize) { todo!() }
    fn set_mss(&mut self, _mss: usize) { todo!() }
}
