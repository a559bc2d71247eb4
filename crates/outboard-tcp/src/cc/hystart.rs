//! HyStart++ (RFC 9406): leave slow start when the RTT starts to grow,
//! before the queue overflows, through a short Conservative Slow Start (CSS)
//! that returns to slow start if the RTT rise was a false alarm.
//!
//! Shared by NewReno and CUBIC for the initial slow start (ssthresh still
//! unset; later slow starts after an RTO are plain RFC 5681, as RFC 9406
//! §4.3 allows). Rounds are counted in acknowledged bytes: a round ends when
//! the data in flight at its start has been acknowledged, which is RFC
//! 9406's "ACK beyond windowEnd" without sequence numbers.

use outboard_time::Duration;

/// RFC 9406 §4.3 constants.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: usize = 4;
const CSS_ROUNDS: u32 = 5;

/// How slow start grows on this ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Growth {
    /// Standard slow start.
    SlowStart,
    /// Conservative slow start: the increase divided by `CSS_GROWTH_DIVISOR`.
    Conservative,
    /// CSS lasted `CSS_ROUNDS` rounds: ssthresh = cwnd, congestion avoidance.
    Exit,
}

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct HyStart {
    /// Bytes acknowledged so far, and the count that ends the current round.
    acked: u64,
    round_end: u64,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    rtt_sample_count: u32,
    /// In CSS: the baseline RTT and the rounds spent there.
    css_baseline_min_rtt: Option<Duration>,
    css_rounds: u32,
    /// Stats: times slow start was left by the delay signal.
    pub exits: u32,
}

impl Default for HyStart {
    fn default() -> Self {
        HyStart::new()
    }
}

impl HyStart {
    pub fn new() -> Self {
        HyStart {
            acked: 0,
            round_end: 0,
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            rtt_sample_count: 0,
            css_baseline_min_rtt: None,
            css_rounds: 0,
            exits: 0,
        }
    }

    /// Whether Conservative Slow Start is under way.
    pub fn in_css(&self) -> bool {
        self.css_baseline_min_rtt.is_some()
    }

    /// Divides a slow-start increase as CSS requires.
    pub fn scale(growth: Growth, inc: usize) -> usize {
        match growth {
            Growth::SlowStart => inc,
            Growth::Conservative => inc / CSS_GROWTH_DIVISOR,
            Growth::Exit => 0,
        }
    }

    /// One ACK in (initial) slow start: `bytes_acked` newly acknowledged,
    /// this ACK's RTT sample if any, and the bytes in flight after it.
    pub fn on_ack(&mut self, bytes_acked: usize, rtt: Option<Duration>, in_flight: usize) -> Growth {
        self.acked = self.acked.saturating_add(bytes_acked as u64);
        if self.acked >= self.round_end {
            //= https://www.rfc-editor.org/rfc/rfc9406#section-4.2
            //# At the start of each round during standard slow start and CSS,
            //# initialize the variables used to compute the last round's and
            //# current round's minimum RTT
            self.round_end = self.acked.saturating_add(in_flight.max(1) as u64);
            self.last_round_min_rtt = self.current_round_min_rtt.take();
            self.rtt_sample_count = 0;
            if self.in_css() {
                self.css_rounds += 1;
                if self.css_rounds >= CSS_ROUNDS {
                    //# If CSS_ROUNDS rounds are complete, enter congestion avoidance
                    //# by setting the ssthresh to the current cwnd.
                    self.css_baseline_min_rtt = None;
                    self.css_rounds = 0;
                    return Growth::Exit;
                }
            }
        }
        if let Some(r) = rtt {
            self.current_round_min_rtt = Some(self.current_round_min_rtt.map_or(r, |m| m.min(r)));
            self.rtt_sample_count += 1;
        }
        if let Some(baseline) = self.css_baseline_min_rtt {
            //# If the currentRoundMinRTT is less than cssBaselineMinRtt, then
            //# [...] the sender MUST [...] resume slow start.
            if self.rtt_sample_count >= N_RTT_SAMPLE && self.current_round_min_rtt.is_some_and(|c| c < baseline) {
                self.css_baseline_min_rtt = None;
                self.css_rounds = 0;
                return Growth::SlowStart;
            }
            return Growth::Conservative;
        }
        //# For rounds where at least N_RTT_SAMPLE RTT samples have been obtained
        //# and currentRoundMinRTT and lastRoundMinRTT are valid, check to see if
        //# delay increase triggers slow start exit.
        if self.rtt_sample_count >= N_RTT_SAMPLE {
            if let (Some(cur), Some(last)) = (self.current_round_min_rtt, self.last_round_min_rtt) {
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if cur >= last.saturating_add(thresh) {
                    self.css_baseline_min_rtt = Some(cur);
                    self.css_rounds = 0;
                    self.exits += 1;
                    return Growth::Conservative;
                }
            }
        }
        Growth::SlowStart
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    /// Feeds one round of `n` ACKs of one MSS each with RTT `rtt_ms`.
    fn round(h: &mut HyStart, n: usize, rtt_ms: u64) -> Vec<Growth> {
        (0..n).map(|i| h.on_ack(MSS, Some(Duration::from_millis(rtt_ms)), (n - i) * MSS)).collect()
    }

    #[test]
    fn rfc9406_4_2_steady_rtt_stays_in_slow_start() {
        let mut h = HyStart::new();
        for _ in 0..10 {
            assert!(round(&mut h, 16, 50).iter().all(|&g| g == Growth::SlowStart));
        }
        assert_eq!(h.exits, 0);
    }

    #[test]
    fn rfc9406_4_2_rtt_rise_above_threshold_enters_css_then_congestion_avoidance() {
        let mut h = HyStart::new();
        round(&mut h, 16, 50);
        round(&mut h, 16, 50);
        // 50 ms / 8 = 6.25 ms threshold: +7 ms triggers CSS after N_RTT_SAMPLE samples.
        let g = round(&mut h, 16, 57);
        assert_eq!(g[..7], [Growth::SlowStart; 7]);
        assert_eq!(g[7], Growth::Conservative);
        assert!(h.in_css());
        let mut all = Vec::new();
        for _ in 0..CSS_ROUNDS {
            all.extend(round(&mut h, 16, 57));
        }
        assert_eq!(all.iter().filter(|&&g| g == Growth::Exit).count(), 1, "{all:?}");
        assert_eq!(HyStart::scale(Growth::Conservative, 4 * MSS), MSS);
    }

    #[test]
    fn rfc9406_4_2_rise_below_threshold_is_ignored() {
        let mut h = HyStart::new();
        round(&mut h, 16, 50);
        // +3 ms is under MIN_RTT_THRESH (4 ms, the clamp floor... 50/8 = 6.25 ms).
        assert!(round(&mut h, 16, 53).iter().all(|&g| g == Growth::SlowStart));
    }

    #[test]
    fn rfc9406_4_2_css_returns_to_slow_start_when_rtt_falls_back() {
        let mut h = HyStart::new();
        round(&mut h, 16, 20);
        round(&mut h, 16, 30);
        assert!(h.in_css());
        let g = round(&mut h, 16, 20);
        assert!(g.contains(&Growth::SlowStart));
        assert!(!h.in_css());
    }
}

#[cfg(test)]
mod controller_tests {
    use crate::cc::{CcKind, CongestionControl, Controller};
    use outboard_time::{Duration, Instant};

    /// Slow start over rounds of cwnd-sized flights, one ACK per MSS, with
    /// the RTT rising by 10 ms from round 4 on: returns (round, ssthresh,
    /// cwnd) at the first round that ends with ssthresh set.
    fn drive(kind: CcKind) -> Option<(u32, usize, usize)> {
        let mss = 1000;
        let mut c = Controller::new(kind, mss);
        let mut now = Instant::from_millis(0);
        for round in 0..12u32 {
            let rtt = Duration::from_millis(if round >= 4 { 60 } else { 50 });
            let flight = c.cwnd();
            for _ in 0..flight / mss {
                // A cwnd-limited sender: each ACK's room is filled at once.
                now += Duration::from_micros(100);
                let in_flight = c.cwnd();
                c.on_ack(now, mss, Some(rtt), in_flight);
            }
            if c.ssthresh() != usize::MAX {
                return Some((round, c.ssthresh(), c.cwnd()));
            }
        }
        None
    }

    #[test]
    fn rfc9406_newreno_and_cubic_leave_slow_start_on_an_rtt_rise() {
        for kind in [CcKind::NewReno, CcKind::Cubic] {
            let (round, ssthresh, cwnd) = drive(kind).expect("HyStart++ set ssthresh");
            // CSS starts in round 4 (after N_RTT_SAMPLE samples) and lasts
            // CSS_ROUNDS rounds; congestion avoidance then starts at cwnd.
            assert!((8..=10).contains(&round), "{kind:?}: exit in round {round}");
            // ssthresh = cwnd at the exit; the rest of that round is
            // congestion avoidance (a few hundred bytes more).
            assert!(ssthresh <= cwnd && cwnd < ssthresh + ssthresh / 50, "{kind:?}: {ssthresh} {cwnd}");
        }
    }

    #[test]
    fn rfc9406_steady_rtt_keeps_standard_slow_start() {
        let mss = 1000;
        let mut c = Controller::new(CcKind::Cubic, mss);
        let mut now = Instant::from_millis(0);
        for _ in 0..6 {
            let flight = c.cwnd();
            for _ in 0..flight / mss {
                now += Duration::from_micros(100);
                let in_flight = c.cwnd();
                c.on_ack(now, mss, Some(Duration::from_millis(50)), in_flight);
            }
        }
        assert_eq!(c.ssthresh(), usize::MAX);
        assert_eq!(c.cwnd(), (10 * mss) << 6, "doubling every round");
    }
}
