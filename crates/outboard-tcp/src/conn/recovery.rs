//! Loss recovery: RFC 5681 fast retransmit, RFC 6582 NewReno partial ACKs for
//! peers without SACK, RFC 6675 SACK-based recovery (DupThresh, pipe, NextSeg,
//! RecoveryPoint), and the RFC 6298 §5 retransmission timeout with go-back-N.

use super::{Connection, Error, Event, State, Timer};
use crate::cc::CongestionControl;
use crate::sack::Scoreboard;
use outboard_time::{Duration, Instant};
use outboard_wire::SeqNumber;

/// RFC 5681 §3.2 / RFC 6675 §2: duplicate ACKs that signal a loss.
pub(super) const DUP_THRESH: u32 = 3;

/// Recovery bookkeeping. The congestion controller only decides cwnd and
/// ssthresh; which bytes to resend and when is decided here.
#[derive(Debug, Clone)]
pub(super) struct Recovery {
    pub(super) scoreboard: Scoreboard,
    pub(super) dupacks: u32,
    /// In fast recovery until SND.UNA reaches `point`.
    pub(super) in_recovery: bool,
    /// RFC 6675 RecoveryPoint / RFC 6582 `recover`: SND.MAX when recovery began.
    pub(super) point: SeqNumber,
    /// RFC 6675 HighRxt: one past the highest byte retransmitted in this recovery.
    pub(super) high_rxt: SeqNumber,
    /// RFC 6582 §3.2: NewReno's artificial cwnd inflation (bytes) in fast recovery.
    pub(super) inflate: usize,
    /// RFC 6582 §4 after an RTO: duplicate ACKs below this start no fast retransmit.
    pub(super) rto_recover: Option<SeqNumber>,
    /// Resend the segment at SND.UNA on the next `poll_transmit`, ignoring cwnd
    /// (fast retransmit, NewReno partial ACK, path MTU drop).
    pub(super) rexmit_una: bool,
    /// The last retransmission of the segment at SND.UNA in SACK recovery:
    /// (its sequence number, SND.MAX when it was sent).
    pub(super) una_rexmit: Option<(SeqNumber, SeqNumber)>,
    /// Bytes the latest cumulative ACK advanced SND.UNA by.
    pub(super) last_advance: usize,
}

impl Recovery {
    pub(super) fn new(iss: SeqNumber) -> Recovery {
        Recovery {
            scoreboard: Scoreboard::new(),
            dupacks: 0,
            in_recovery: false,
            point: iss,
            high_rxt: iss,
            inflate: 0,
            rto_recover: None,
            rexmit_una: false,
            una_rexmit: None,
            last_advance: 0,
        }
    }
}

impl Connection {
    /// Bytes the network holds for us: RFC 6675 pipe in SACK recovery, else
    /// everything between SND.UNA and SND.NXT.
    pub(super) fn bytes_in_flight(&self) -> usize {
        if self.rec.in_recovery && self.sack_ok {
            // Bytes between SND.NXT and SND.MAX were given up by an RTO: not in the network.
            self.rec.scoreboard.pipe(self.snd_una, self.snd_nxt, self.rec.high_rxt, self.data_mss())
        } else if self.sack_ok {
            // SACKed bytes below SND.NXT have left the network (after an RTO,
            // go-back-N skips them).
            let sacked: usize = self
                .rec
                .scoreboard
                .ranges()
                .filter(|&(l, _)| l < self.snd_nxt)
                .map(|(l, r)| seq_sub(r.min(self.snd_nxt), l))
                .sum();
            seq_sub(self.snd_nxt, self.snd_una).saturating_sub(sacked)
        } else {
            seq_sub(self.snd_nxt, self.snd_una)
        }
    }

    /// Bytes the congestion window lets us put in flight now.
    pub(super) fn cwnd_allowance(&self) -> usize {
        let mut cwnd = self.cc.cwnd().max(self.data_mss());
        if self.rec.in_recovery && !self.sack_ok {
            cwnd += self.rec.inflate;
        } else if !self.rec.in_recovery {
            // RFC 3042 limited transmit: each of the first two duplicate ACKs
            // lets one new segment out, so a small window still gets three.
            cwnd += self.rec.dupacks.min(DUP_THRESH - 1) as usize * self.data_mss();
        }
        cwnd.saturating_sub(self.bytes_in_flight())
    }

    /// A cumulative ACK advanced SND.UNA by `acked` bytes.
    pub(super) fn recovery_on_new_ack(&mut self, now: Instant, acked: usize, rtt: Option<Duration>, flight: usize) {
        self.rec.last_advance = acked;
        if self.rec.high_rxt < self.snd_una {
            self.rec.high_rxt = self.snd_una;
        }
        if let Some(r) = self.rec.rto_recover {
            if self.snd_una >= r {
                self.rec.rto_recover = None;
            }
        }
        if self.rec.in_recovery {
            if self.snd_una >= self.rec.point {
                // Full ACK: recovery is over (RFC 6582 §3.2 step 3, RFC 6675 §5).
                self.rec.in_recovery = false;
                self.rec.inflate = 0;
                self.rec.dupacks = 0;
                self.cc.on_recovery_end(now);
            } else if !self.sack_ok {
                // RFC 6582 §3.2 step 4: partial ACK. Resend the next hole and
                // deflate by what was acked, adding back one MSS.
                let mss = self.data_mss();
                self.rec.rexmit_una = true;
                self.rec.inflate = self.rec.inflate.saturating_sub(acked);
                if acked >= mss {
                    self.rec.inflate += mss;
                }
            }
            return;
        }
        self.rec.dupacks = 0;
        self.cc.on_ack(now, acked, rtt, flight);
    }

    /// A duplicate ACK (RFC 5681 §2), or for SACK peers an ACK that SACKed new data (RFC 6675 §5).
    pub(super) fn recovery_on_dup_ack(&mut self, now: Instant) {
        if self.rec.in_recovery {
            if !self.sack_ok {
                // RFC 5681 §3.2 step 4: each further dup ACK means a segment left the network.
                self.rec.inflate += self.data_mss();
            }
            return;
        }
        self.rec.dupacks += 1;
        let lost = self.sack_ok && self.rec.scoreboard.is_lost(self.snd_una, self.data_mss());
        if self.rec.dupacks < DUP_THRESH && !lost {
            return;
        }
        // RFC 6582 §4: no new recovery for dup ACKs of data sent before an
        // RTO: go-back-N resends data the receiver holds, and those duplicates
        // make dup ACKs. With SACK such duplicates SACK nothing new and do not
        // count as dup ACKs (RFC 6675 §5), so the guard is only for NewReno.
        // RFC 6582 §4.2 ACK heuristic: when the last cumulative ACK advanced
        // by little, the receiver held no large out-of-order block that
        // go-back-N could duplicate, so these dup ACKs do signal a new loss.
        if let Some(r) = self.rec.rto_recover {
            let small_advance = self.rec.last_advance <= 4 * self.data_mss();
            if self.snd_una < r && !self.sack_ok && !small_advance {
                return;
            }
        }
        self.enter_recovery(now);
    }

    /// Lost-retransmission detection in SACK recovery: once the receiver
    /// SACKs data we sent `DUP_THRESH` segments after resending the first
    /// hole, and that hole is still open, the retransmission itself was lost.
    /// Resend it now instead of waiting for the RTO (RFC 6675 has no rule for
    /// this; Linux's pre-RACK lost-retransmit detection does the same).
    pub(super) fn detect_lost_retransmission(&mut self) {
        let Some((seq, marker)) = self.rec.una_rexmit else { return };
        if !self.rec.in_recovery || self.snd_una != seq {
            self.rec.una_rexmit = None;
            return;
        }
        let beyond = marker + DUP_THRESH as usize * self.data_mss();
        if self.rec.scoreboard.high_sacked().is_some_and(|h| h > beyond) {
            self.rec.una_rexmit = None;
            self.rec.rexmit_una = true;
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        // RFC 5681 eq. 4 FlightSize; while go-back-N after an RTO is still
        // under way only what was resent since is outstanding.
        let flight = if self.rec.rto_recover.is_some() {
            self.bytes_in_flight()
        } else {
            seq_sub(self.snd_max, self.snd_una)
        };
        self.rec.in_recovery = true;
        self.rec.point = self.snd_max;
        self.rec.high_rxt = self.snd_una;
        self.cc.on_congestion_event(now, flight);
        self.stats.fast_retransmits += 1;
        // RFC 5681 §3.2 step 2-3 / RFC 6675 §5 (C): resend the first hole at once.
        self.rec.rexmit_una = true;
        if !self.sack_ok {
            self.rec.inflate = DUP_THRESH as usize * self.data_mss();
        }
        self.rtt_timing = None;
    }

    /// RFC 6298 §5.4-5.7: the retransmission timer expired.
    pub(super) fn on_rto(&mut self, now: Instant) {
        let syn_phase = matches!(self.state, State::SynSent | State::SynReceived);
        if self.snd_una == self.snd_max && !syn_phase {
            return;
        }
        // A peer that keeps answering with a zero window is alive: its window,
        // not the network, holds our data back (Linux's "dastardly shrinks
        // window" case). Time out only once it has been silent for max RTO.
        let peer_alive = self.snd_wnd == 0 && now.saturating_duration_since(self.last_rx) < self.cfg.max_rto;
        if !peer_alive || syn_phase {
            self.rto_count += 1;
        }
        let limit = if syn_phase { self.cfg.max_syn_retransmits } else { self.cfg.max_retransmits };
        if self.rto_count > limit {
            self.fail(Error::TimedOut);
            return;
        }
        self.stats.rto_events += 1;
        let flight = seq_sub(self.snd_max, self.snd_una);
        if !syn_phase {
            self.cc.on_rto(now, flight);
        }
        self.rtt.backoff();
        self.rec.in_recovery = false;
        self.rec.inflate = 0;
        self.rec.dupacks = 0;
        self.rec.rexmit_una = false;
        self.rec.una_rexmit = None;
        self.rec.rto_recover = Some(self.snd_max);
        self.rec.high_rxt = self.snd_una;
        if self.rto_count > 1 {
            // RFC 2018 §8: the receiver may have reneged; stop trusting old SACKs.
            self.rec.scoreboard.clear();
        }
        // Go-back-N: everything from SND.UNA is resent, paced by slow start.
        self.snd_nxt = self.snd_una;
        self.rtt_timing = None;
        self.timers.set(Timer::Retransmit, now + self.rtt.rto());
    }

    /// Closes the connection with an error the application will see.
    pub(super) fn fail(&mut self, err: Error) {
        self.error = Some(err);
        self.push_event(match err {
            Error::TimedOut => Event::TimedOut,
            _ => Event::Reset,
        });
        self.enter_closed();
    }
}

/// `a - b` in sequence space, zero when `a` is not after `b`.
pub(super) fn seq_sub(a: SeqNumber, b: SeqNumber) -> usize {
    a.diff(b).max(0) as usize
}
