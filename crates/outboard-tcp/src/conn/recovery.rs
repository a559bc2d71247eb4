//! Loss recovery: RFC 5681 fast retransmit, RFC 6582 NewReno partial ACKs for
//! peers without SACK, RFC 6675 SACK-based recovery (DupThresh, pipe, NextSeg,
//! RecoveryPoint), and the RFC 6298 §5 retransmission timeout with go-back-N.

use super::options::ts_clock;
use super::{Connection, Error, Event, State, Timer};
use crate::cc::{CongestionControl, Controller};
use crate::sack::Scoreboard;
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpRepr};

/// RFC 5681 §3.2 / RFC 6675 §2: duplicate ACKs that signal a loss (the
/// starting value; reordering raises the connection's threshold).
pub(super) const DUP_THRESH: u32 = 3;
/// Cap on the adaptive duplicate threshold, in segments (Linux's
/// `tcp_max_reordering` default).
pub(super) const MAX_REORDERING: u32 = 300;

/// What undoing a fast recovery needs (RFC 3522 / RFC 2883 detection, RFC
/// 4015 §3.2 response), kept from the congestion event until the next one
/// or an RTO.
#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Undo {
    /// The controller before the reduction: cwnd, ssthresh and CUBIC's W_max.
    cc: Controller,
    /// The segment resent first (SND.UNA at the congestion event).
    seq: SeqNumber,
    /// RecoveryPoint of the episode: D-SACKs in [seq, point) are ours.
    point: SeqNumber,
    /// Highest SACKed sequence when recovery began (reordering distance).
    high_sacked: Option<SeqNumber>,
    /// Our timestamp clock at the congestion event, at or before the first
    /// retransmission's TSval; `None` without timestamps or once the first
    /// ACK covering `seq` was checked.
    ts: Option<u32>,
    /// `stats.retransmits` at the congestion event.
    rexmits_before: u64,
    /// Retransmissions of this episode that a D-SACK reported as duplicates.
    dsacked: u64,
}

/// Recovery bookkeeping. The congestion controller only decides cwnd and
/// ssthresh; which bytes to resend and when is decided here.
#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
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
    /// RFC 8985 §6.2: a retransmission RACK found lost again, to be resent
    /// (alone, not moving HighRxt) as soon as the window allows.
    pub(super) rack_rexmit: Option<SeqNumber>,
    /// The last retransmission of the segment at SND.UNA in SACK recovery:
    /// (its sequence number, SND.MAX when it was sent).
    pub(super) una_rexmit: Option<(SeqNumber, SeqNumber)>,
    /// Bytes the latest cumulative ACK advanced SND.UNA by.
    pub(super) last_advance: usize,
    /// The adaptive DupThresh in segments: 3, raised by observed reordering
    /// (RFC 4653 §3 spirit, Linux `tp->reordering`), at most `MAX_REORDERING`.
    pub(super) reordering: u32,
    /// The last fast recovery, while it may still be undone.
    pub(super) undo: Option<Undo>,
    /// RFC 6937 PRR state of the current SACK recovery (`prr.rs`).
    pub(super) prr: super::prr::Prr,
    /// RFC 8985 RACK-TLP state (`rack.rs`).
    pub(super) rack: super::rack::Rack,
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
            rack_rexmit: None,
            una_rexmit: None,
            last_advance: 0,
            reordering: DUP_THRESH,
            undo: None,
            prr: super::prr::Prr::default(),
            rack: super::rack::Rack::new(iss),
        }
    }
}

impl Connection {
    /// Bytes the network holds for us: RFC 6675 pipe in SACK recovery, else
    /// everything between SND.UNA and SND.NXT.
    pub(super) fn bytes_in_flight(&self) -> usize {
        if self.rec.in_recovery && !self.sack_ok {
            // Linux's Reno emulation: each duplicate ACK took a segment out.
            let gone = self.rec.prr.reno_sacked * self.data_mss();
            return seq_sub(self.snd_nxt, self.snd_una).saturating_sub(gone);
        }
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
        if self.rec.in_recovery {
            // RFC 6937: in recovery PRR decides how much may go (`prr.rs`).
            return self.prr_allowance();
        }
        let mut cwnd = self.cc.cwnd().max(self.data_mss());
        if self.rec.in_recovery {
            cwnd += self.rec.inflate;
        }
        let allowance = cwnd.saturating_sub(self.bytes_in_flight());
        if self.rec.in_recovery || self.rec.dupacks == 0 || self.rec.rto_recover.is_some() {
            return allowance;
        }
        self.limited_transmit(allowance)
    }

    /// RFC 3042 §2 limited transmit, on the first and second duplicate ACK
    /// (and, without SACK and with a raised DupThresh, on each duplicate ACK
    /// below it, RFC 4653 §3.3 extended limited transmit):
    //= https://www.rfc-editor.org/rfc/rfc3042#section-2
    //# a TCP SHOULD send a segment of previously unsent data in response to
    //# each of the first two duplicate acknowledgments that arrive at the
    //# sender, [...] the receiver's advertised window allows the
    //# transmission of the segment [and] the amount of outstanding data would
    //# remain less than or equal to the congestion window plus 2 segments.
    /// The congestion window itself is not changed. With SACK the SACKed
    /// bytes already left the pipe (one segment per duplicate ACK, as Linux
    /// counts `sacked_out`); the FlightSize cap keeps it at one new segment
    /// per duplicate ACK. Without SACK each duplicate ACK is credited one
    /// segment. Only new data: the caller (`next_from_nxt`) sends from
    /// SND.NXT = SND.MAX here, and the allowance is at most one MSS per
    /// duplicate ACK not yet used, so no TSO burst goes out.
    fn limited_transmit(&self, allowance: usize) -> usize {
        let mss = self.data_mss();
        let cwnd = self.cc.cwnd().max(mss);
        let flight_size = seq_sub(self.snd_max, self.snd_una);
        if !self.sack_ok {
            // The pipe is the FlightSize: credit one segment per duplicate ACK.
            let lt = self.rec.dupacks.min(self.rec.reordering - 1) as usize;
            return (cwnd + lt * mss).saturating_sub(flight_size);
        }
        if self.rec.dupacks >= DUP_THRESH {
            // Beyond RFC 3042 (raised DupThresh): the pipe alone, RFC 4653 §3.3.
            return allowance;
        }
        allowance.min((cwnd + self.rec.dupacks as usize * mss).saturating_sub(flight_size))
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
                self.rack_on_recovery_end();
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
        // RFC 6675 §5 with the adaptive DupThresh (RFC 4653 §3).
        if self.rec.dupacks < self.rec.reordering && !lost {
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
    /// SACKs data we sent DupThresh segments after resending the first
    /// hole, and that hole is still open, the retransmission itself was lost.
    /// Resend it now instead of waiting for the RTO (RFC 6675 has no rule for
    /// this; Linux's pre-RACK lost-retransmit detection does the same).
    pub(super) fn detect_lost_retransmission(&mut self) {
        let Some((seq, marker)) = self.rec.una_rexmit else { return };
        if !self.rec.in_recovery || self.snd_una != seq {
            self.rec.una_rexmit = None;
            return;
        }
        let beyond = marker + self.rec.reordering as usize * self.data_mss();
        if self.rec.scoreboard.high_sacked().is_some_and(|h| h > beyond) {
            self.rec.una_rexmit = None;
            self.rec.rexmit_una = true;
        }
    }

    pub(super) fn enter_recovery(&mut self, now: Instant) {
        // RFC 5681 eq. 4 FlightSize; while go-back-N after an RTO is still
        // under way only what was resent since is outstanding.
        let flight = if self.rec.rto_recover.is_some() {
            self.bytes_in_flight()
        } else {
            seq_sub(self.snd_max, self.snd_una)
        };
        // RFC 4015 §3.2: remember the state to restore if the retransmission
        // proves spurious (RFC 3522 timestamps, RFC 2883 D-SACK).
        self.rec.undo = Some(Undo {
            cc: self.cc.clone(),
            seq: self.snd_una,
            point: self.snd_max,
            high_sacked: self.rec.scoreboard.high_sacked(),
            ts: self.ts_ok.then(|| ts_clock(now)),
            rexmits_before: self.stats.retransmits,
            dsacked: 0,
        });
        self.blackhole_on_loss();
        self.rec.in_recovery = true;
        self.rec.point = self.snd_max;
        self.rec.high_rxt = self.snd_una;
        self.cc.on_congestion_event(now, flight);
        self.prr_start(flight);
        if !self.sack_ok {
            // The duplicate ACKs so far, this one included (Linux's Reno `sacked_out`).
            let segs = flight.div_ceil(self.data_mss());
            self.rec.prr.reno_sacked = (self.rec.dupacks as usize).min(segs.saturating_sub(1));
        }
        self.stats.fast_retransmits += 1;
        // RFC 5681 §3.2 step 2-3 / RFC 6675 §5 (C): resend the first hole at once.
        self.rec.rexmit_una = true;
        if !self.sack_ok {
            // RFC 5681 §3.2 step 3: the DupThresh segments that left the network.
            self.rec.inflate = self.rec.reordering as usize * self.data_mss();
        }
        self.rtt_timing = None;
        self.timers.stop(Timer::LossProbe);
    }

    /// RFC 4653 §3 / RFC 8985 §6.2 reordering detection, before the scoreboard
    /// takes this ACK: a cumulative ACK or SACK block that newly covers data
    /// that was never retransmitted but lies below the highest SACKed
    /// sequence means that data arrived late, not lost. The distance (in
    /// segments) from it to the highest SACKed byte raises DupThresh.
    pub(super) fn detect_reordering(&mut self, ack: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) {
        // After an RTO go-back-N resends everything and old SACKs may come
        // back after a scoreboard reset: no conclusions until it is over.
        if self.rec.rto_recover.is_some() {
            return;
        }
        let Some(high) = self.rec.scoreboard.high_sacked() else { return };
        // Below HighRxt the holes may have been retransmitted in this
        // recovery (NextSeg resends them in order); above it nothing was.
        let floor = self.rec.high_rxt.max(self.snd_una);
        let board = &self.rec.scoreboard;
        let first_new = |from: SeqNumber, to: SeqNumber| board.first_unsacked_in(from.max(floor), to.min(high));
        let mut low = if ack > self.snd_una { first_new(self.snd_una, ack) } else { None };
        for &(l, r) in blocks {
            // Only blocks inside (SND.UNA, SND.MAX] (RFC 2018 §4; D-SACKs are not new data).
            if l >= self.snd_una && l < r && r <= self.snd_max {
                if let Some(s) = first_new(l, r) {
                    low = Some(low.map_or(s, |x: SeqNumber| x.min(s)));
                }
            }
        }
        if let Some(s) = low {
            // RFC 8985 §6.2 step 3: RACK.reordering_seen.
            self.rec.rack.reordering_seen = true;
            self.rate.reord_seen += 1;
            self.note_reordering(seq_sub(high, s));
        }
    }

    /// Raises DupThresh to (reordering distance in segments + 1), at most
    /// `MAX_REORDERING`; it never falls below 3 (RFC 4653 §3.1 spirit).
    fn note_reordering(&mut self, distance: usize) {
        let segs = distance.div_ceil(self.data_mss()).min(MAX_REORDERING as usize) as u32;
        let thresh = (segs + 1).clamp(DUP_THRESH, MAX_REORDERING);
        if thresh > self.rec.reordering {
            self.rec.reordering = thresh;
            self.rec.scoreboard.set_dup_thresh(thresh as usize);
        }
    }

    /// RFC 3522 §2 Eifel detection, for an ACK that advances SND.UNA (called
    /// before SND.UNA moves): the first ACK covering the fast-retransmitted
    /// segment echoes a TSval older than the retransmission's, so the
    /// original arrived and the retransmission was spurious.
    pub(super) fn eifel_check(&mut self, now: Instant, repr: &TcpRepr, prior_high: Option<SeqNumber>) {
        let Some(u) = self.rec.undo.as_mut() else { return };
        let Some(ts) = u.ts else { return };
        if repr.ack <= u.seq {
            return;
        }
        // One check per episode: later ACKs may answer later retransmissions.
        u.ts = None;
        let Some((_, tsecr)) = repr.options.timestamps else { return };
        // RFC 7323 §4.3: a receiver echoes the TSval of the segment that
        // filled the hole; older than our retransmission means the original.
        if tsecr != 0 && (tsecr.wrapping_sub(ts) as i32) < 0 {
            let seq = u.seq;
            let high = prior_high.max(u.high_sacked);
            self.stats.spurious_retransmits += 1;
            if let Some(h) = high {
                self.note_reordering(seq_sub(h, seq));
            }
            self.undo_recovery(now);
        }
    }

    /// RFC 2883 §4 / RFC 3708 §3: a D-SACK (first SACK block below the
    /// cumulative ACK, or inside the second block) reports a duplicate. When
    /// every retransmission of the last recovery came back as a duplicate,
    /// all were spurious: undo (RFC 4015 §3.2).
    pub(super) fn dsack_check(&mut self, now: Instant, ack: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) {
        let Some(&(l, r)) = blocks.first() else { return };
        let is_dsack = r <= ack || blocks.get(1).is_some_and(|&(l2, r2)| l >= l2 && r <= r2);
        if !is_dsack || l >= r {
            return;
        }
        let Some(u) = self.rec.undo.as_mut() else { return };
        if l < u.seq || r > u.point {
            return;
        }
        u.dsacked += 1;
        let rexmits = self.stats.retransmits - u.rexmits_before;
        self.stats.spurious_retransmits += 1;
        if rexmits > 0 && u.dsacked >= rexmits {
            let seq = u.seq;
            let high = u.high_sacked;
            if let Some(h) = high {
                self.note_reordering(seq_sub(h.max(r), seq.min(l)));
            }
            self.undo_recovery(now);
        }
    }

    /// RFC 4015 §3.2 response: restore cwnd and ssthresh (the whole
    /// controller) from before the reduction, and leave fast recovery.
    fn undo_recovery(&mut self, _now: Instant) {
        let Some(u) = self.rec.undo.take() else { return };
        if u.cc.cwnd() > self.cc.cwnd() || u.cc.ssthresh() > self.cc.ssthresh() {
            self.cc = u.cc;
        }
        self.stats.undo_events += 1;
        if self.rec.in_recovery {
            self.rec.in_recovery = false;
            self.rec.inflate = 0;
            self.rec.dupacks = 0;
            self.rec.rexmit_una = false;
            self.rec.rack_rexmit = None;
            self.rec.una_rexmit = None;
        }
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
        if self.rate.rto_since.is_none() && !syn_phase {
            // Linux's `tcp_retransmit_timer`: a new timeout episode.
            self.rate.rto_recoveries += 1;
            self.rate.rto_since = Some(now);
        }
        let limit = match self.state {
            State::SynSent => self.cfg.max_syn_retransmits,
            State::SynReceived => self.cfg.max_synack_retransmits,
            _ => self.cfg.max_retransmits,
        };
        if self.rto_count > limit {
            self.fail(Error::TimedOut);
            return;
        }
        self.stats.rto_events += 1;
        let flight = seq_sub(self.snd_max, self.snd_una);
        if !syn_phase {
            self.cc.on_rto(now, flight);
        }
        if !syn_phase {
            self.blackhole_on_loss();
            self.blackhole_on_rto(now, self.rtt.rto());
        }
        // RTO recovery is not undone (F-RTO is not implemented).
        self.rec.undo = None;
        // Linux `tcp_enter_loss`: a timeout outside recovery while several
        // segments are SACKed means DupThresh was set too high; go back to 3.
        if !self.rec.in_recovery && self.rec.scoreboard.sacked_bytes() >= DUP_THRESH as usize * self.data_mss() {
            self.rec.reordering = DUP_THRESH;
            self.rec.scoreboard.set_dup_thresh(DUP_THRESH as usize);
        }
        self.rtt.backoff();
        self.rec.in_recovery = false;
        self.rec.inflate = 0;
        self.rec.dupacks = 0;
        self.rec.rexmit_una = false;
        self.rec.rack_rexmit = None;
        self.rec.una_rexmit = None;
        self.rec.rto_recover = Some(self.snd_max);
        self.rec.high_rxt = self.snd_una;
        self.rack_on_rto();
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
