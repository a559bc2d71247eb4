//! RFC 8985 RACK-TLP loss detection, for SACK connections, in the compact
//! form of gVisor's `rack.go` and Linux's `tcp_recovery.c`.
//!
//! RACK: every data segment's transmit time is logged; when an ACK delivers
//! (cumulatively or by SACK) a segment, an unSACKed segment sent before it
//! is lost once it has been outstanding for RACK.rtt + RACK.reo_wnd. Loss
//! is time-based, so one SACK can be enough and reordering within the window
//! causes no retransmission. RACK's verdict is handed to the RFC 6675
//! machinery as a lost boundary in the scoreboard: NextSeg, pipe and PRR
//! treat the holes below it as lost, as if DupThresh had been reached.
//!
//! TLP: when new data or an ACK leaves data outstanding and nothing is being
//! recovered, a probe timeout (PTO, about two SRTTs) is armed ahead of the
//! RTO; when it fires, one segment goes out (new data if the peer's window
//! allows, else the last segment again) so that the ACK for it starts fast
//! recovery (via RACK) instead of an RTO.

use super::recovery::seq_sub;
use super::{Connection, State, Timer};
use crate::cc::CongestionControl;
use outboard_time::{Duration, Instant};
use outboard_wire::SeqNumber;
use std::collections::VecDeque;

/// Floor on the PTO (Linux: `TCP_TIMEOUT_MIN`-ish, and no probe sooner than
/// a timer can usefully be armed).
const PTO_MIN: Duration = Duration::from_millis(10);
/// RFC 8985 §7.2: the PTO without an RTT sample.
const PTO_NO_SRTT: Duration = Duration::from_secs(1);
/// RFC 8985 §6.2 step 4: how many recoveries a D-SACK-widened reordering
/// window persists for.
const REO_WND_PERSIST: u32 = 16;

/// One transmission of a segment.
#[derive(Debug, Clone, Copy)]
#[derive(serde::Serialize, serde::Deserialize)]
struct Sent {
    start: SeqNumber,
    end: SeqNumber,
    /// RFC 8985 Segment.xmit_ts: when it was (last) sent.
    at: Instant,
    /// Segment.retransmitted.
    rexmit: bool,
    /// Already counted as delivered by a SACK.
    sacked: bool,
    /// For the delivery-rate sample (`rate`).
    tx: super::rate::TxRate,
}

/// RACK and TLP state (RFC 8985 §5.2, §7).
#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Rack {
    /// Transmit log of [SND.UNA, SND.MAX), ordered by sequence number.
    log: VecDeque<Sent>,
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent segment that has
    /// been delivered.
    xmit_ts: Option<Instant>,
    end_seq: SeqNumber,
    /// RACK.rtt: the RTT of that segment.
    rtt: Duration,
    /// RACK.reordering_seen.
    pub(super) reordering_seen: bool,
    /// RACK.reo_wnd_mult (in min_rtt/4 steps), RACK.reo_wnd_persist, RACK.dsack_round.
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    dsack_round: Option<SeqNumber>,
    /// One past the highest segment RACK marked lost (the scoreboard's view).
    pub(super) lost_to: Option<SeqNumber>,
    /// RFC 8985 §7.3 TLP.end_seq and whether the probe was a retransmission.
    tlp_end: Option<SeqNumber>,
    tlp_rexmit: bool,
    /// The PTO fired: `poll_transmit` sends the probe.
    pub(super) probe_due: bool,
}

impl Rack {
    /// No segment logged as in flight and no loss probe outstanding.
    #[inline]
    pub(super) fn idle(&self) -> bool {
        self.tlp_end.is_none() && self.log.is_empty()
    }

    pub(super) fn new(iss: SeqNumber) -> Rack {
        Rack {
            log: VecDeque::new(),
            xmit_ts: None,
            end_seq: iss,
            rtt: Duration::ZERO,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            lost_to: None,
            tlp_end: None,
            tlp_rexmit: false,
            probe_due: false,
        }
    }

    /// Heap bytes the transmit log holds.
    pub(super) fn allocated_bytes(&self) -> usize {
        self.log.capacity() * core::mem::size_of::<Sent>()
    }

    /// Frees the transmit log's storage when `idle` (it is empty, or its
    /// records can matter no more).
    pub(super) fn release_log(&mut self, idle: bool) {
        if idle && self.log.capacity() > 0 {
            self.log = VecDeque::new();
        }
    }

    /// Index of the first record that ends after `seq`.
    fn index_after(&self, seq: SeqNumber) -> usize {
        self.log.partition_point(|s| s.end <= seq)
    }

    /// Splits the record holding `seq` (strictly inside it) in two.
    fn split_at(&mut self, seq: SeqNumber) {
        let i = self.index_after(seq);
        if let Some(&s) = self.log.get(i) {
            if s.start < seq && seq < s.end {
                self.log[i].end = seq;
                self.log.insert(i + 1, Sent { start: seq, ..s });
            }
        }
    }

    /// RFC 8985 §6.2 RACK_sent_after(t1, seq1, t2, seq2).
    fn sent_after(t1: Instant, seq1: SeqNumber, t2: Instant, seq2: SeqNumber) -> bool {
        t1 > t2 || (t1 == t2 && seq1 > seq2)
    }
}

impl Connection {
    /// A data segment `[seq, end)` went out at `now` (RFC 8985 §6.1: record
    /// Segment.xmit_ts and whether it is a retransmission).
    pub(super) fn rack_on_send(&mut self, now: Instant, seq: SeqNumber, end: SeqNumber) {
        if !self.sack_ok || end <= seq {
            return;
        }
        let tx = self.rate_on_send(now, self.rec.rack.log.is_empty());
        let r = &mut self.rec.rack;
        let log_end = r.log.back().map_or(seq, |s| s.end);
        if seq < log_end {
            let to = end.min(log_end);
            r.split_at(seq);
            r.split_at(to);
            let from = r.index_after(seq);
            for s in r.log.iter_mut().skip(from) {
                if s.start >= to {
                    break;
                }
                s.at = now;
                s.rexmit = true;
                s.sacked = false;
                s.tx = tx;
            }
        }
        let new_from = seq.max(log_end);
        if end > new_from {
            r.log.push_back(Sent { start: new_from, end, at: now, rexmit: false, sacked: false, tx });
        }
    }

    /// RFC 8985 §6.2 steps 1-3 for one ACK: forget what SND.UNA passed,
    /// update RACK.xmit_ts / end_seq / rtt from every segment this ACK newly
    /// delivers (cumulatively or by SACK), and step 4's D-SACK adaptation.
    /// `dsack` is the ACK's D-SACK block, if any.
    pub(super) fn rack_on_ack(
        &mut self,
        now: Instant,
        blocks: &[(SeqNumber, SeqNumber)],
        dsack: Option<(SeqNumber, SeqNumber)>,
    ) {
        if !self.sack_ok {
            return;
        }
        let min_rtt = self.rtt.min_rtt().unwrap_or(Duration::ZERO);
        let una = self.snd_una;
        let r = &mut self.rec.rack;
        let delivered = |s: &Sent, r_xmit: &mut Option<Instant>, r_end: &mut SeqNumber, r_rtt: &mut Duration| {
            let rtt = now.saturating_duration_since(s.at);
            // Step 2: a retransmitted segment ACKed sooner than min_rtt after
            // the retransmission was delivered by its original.
            if s.rexmit && rtt < min_rtt {
                return;
            }
            if r_xmit.is_none_or(|t| Rack::sent_after(s.at, s.end, t, *r_end)) {
                *r_xmit = Some(s.at);
                *r_end = s.end;
                *r_rtt = rtt;
            }
        };
        let (mut xmit, mut end_seq, mut rtt) = (r.xmit_ts, r.end_seq, r.rtt);
        // The newest transmission this ACK delivers gives the rate sample.
        let mut newest: Option<(super::rate::TxRate, Instant)> = None;
        let mut min_rtt_us: Option<Duration> = None;
        let mut note = |s: &Sent| {
            if newest.is_none_or(|(_, at)| s.at >= at) {
                newest = Some((s.tx, s.at));
            }
            if !s.rexmit {
                let rtt = now.saturating_duration_since(s.at);
                min_rtt_us = Some(min_rtt_us.map_or(rtt, |m| m.min(rtt)));
            }
        };
        while let Some(s) = r.log.front().copied() {
            if s.end > una {
                if s.start < una {
                    r.log[0].start = una;
                }
                break;
            }
            r.log.pop_front();
            if !s.sacked {
                note(&s);
                delivered(&s, &mut xmit, &mut end_seq, &mut rtt);
            }
        }
        for &(l, rr) in blocks {
            if Some((l, rr)) == dsack || l < una || rr <= l {
                continue;
            }
            let from = r.index_after(l);
            for s in r.log.iter_mut().skip(from) {
                if s.start >= rr {
                    break;
                }
                if !s.sacked && s.start >= l && s.end <= rr {
                    s.sacked = true;
                    note(s);
                    delivered(s, &mut xmit, &mut end_seq, &mut rtt);
                }
            }
        }
        (r.xmit_ts, r.end_seq, r.rtt) = (xmit, end_seq, rtt);
        if let Some(rtt) = min_rtt_us {
            self.rate.min_rtt = Some(self.rate.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        if let Some((tx, at)) = newest {
            self.rate_on_delivered(tx, at);
        }
        let r = &mut self.rec.rack;
        // Step 4: a D-SACK means the reordering window was too small; widen it
        // once per round trip, and keep it wide for 16 recoveries.
        if dsack.is_some() {
            if r.dsack_round.is_none_or(|d| una >= d) {
                r.dsack_round = Some(self.snd_max);
                r.reo_wnd_mult += 1;
                r.reordering_seen = true;
            }
            r.reo_wnd_persist = REO_WND_PERSIST;
        }
        if r.lost_to.is_some_and(|b| b <= una) {
            r.lost_to = None;
        }
    }

    /// RFC 8985 §6.2 step 4, RACK_update_reo_wnd.
    //= https://www.rfc-editor.org/rfc/rfc8985#section-6.2
    //# If RACK.reordering_seen is FALSE: If in fast or RTO recovery, return 0;
    //# else if RACK.segs_sacked >= DupThresh, return 0
    //# [...] return min(RACK.reo_wnd_mult * RACK.min_RTT / 4, SRTT)
    pub(super) fn rack_reo_wnd(&self) -> Duration {
        let r = &self.rec.rack;
        if !r.reordering_seen
            && (self.rec.in_recovery
                || self.rec.rto_recover.is_some()
                || self.rec.scoreboard.sacked_bytes() >= super::recovery::DUP_THRESH as usize * self.data_mss())
        {
            return Duration::ZERO;
        }
        self.rack_reo_wnd_base()
    }

    /// The reordering window when it is not zeroed: RACK.reo_wnd_mult *
    /// min_rtt / 4, at most SRTT (cheap: no scoreboard walk).
    pub(super) fn rack_reo_wnd_base(&self) -> Duration {
        let min_rtt = self.rtt.min_rtt().unwrap_or(Duration::ZERO);
        let wnd = (min_rtt / 4).saturating_mul(self.rec.rack.reo_wnd_mult);
        self.rtt.srtt().map_or(wnd, |s| wnd.min(s))
    }

    /// RFC 8985 §6.2 step 5, RACK_detect_loss: marks lost every unSACKed,
    /// not-retransmitted segment sent before RACK.xmit_ts that has been
    /// outstanding for RACK.rtt + reo_wnd, and arms the reorder timer for the
    /// first one not yet due. Returns whether the segment at SND.UNA is lost.
    /// Retransmissions are judged the same way (`rack_detect_lost_rexmits`),
    /// in fast recovery and in RTO recovery alike.
    pub(super) fn rack_detect_loss(&mut self, now: Instant) -> bool {
        self.timers.stop(Timer::RackReorder);
        // Everything acknowledged (a request answered, the common case of
        // an interactive exchange): no segment left to judge, and both walks
        // below would find none. About 280 instructions an ACK.
        if self.snd_una == self.snd_max {
            return false;
        }
        let Some(xmit_ts) = self.rec.rack.xmit_ts else { return false };
        // Time-based detection needs a path with a measurable RTT: with a
        // zero min_rtt every segment would be "late" the instant a later
        // one is SACKed; DupThresh alone then (RFC 8985 §6.2 needs RTT samples).
        let measured = self.rtt.min_rtt().is_some_and(|m| m > Duration::ZERO);
        if !self.sack_ok || !measured {
            return false;
        }
        let reo_wnd = self.rack_reo_wnd();
        let rexmit_timeout = self.rack_detect_lost_rexmits(now, xmit_ts, reo_wnd);
        if let Some(t) = rexmit_timeout {
            self.timers.set(Timer::RackReorder, t);
        }
        if self.rec.rto_recover.is_some() {
            // After an RTO go-back-N resends every original; only the
            // retransmissions are RACK's to judge.
            return false;
        }
        let r = &mut self.rec.rack;
        let from = r.lost_to.unwrap_or(self.snd_una).max(self.snd_una);
        let mut lost_to = r.lost_to;
        let mut timeout = None;
        for s in r.log.iter().skip(r.index_after(from)) {
            if s.sacked || s.rexmit {
                continue;
            }
            if !Rack::sent_after(xmit_ts, r.end_seq, s.at, s.end) {
                break;
            }
            let due = s.at + r.rtt + reo_wnd;
            if due <= now {
                lost_to = Some(s.end);
            } else {
                timeout = Some(due);
                break;
            }
        }
        if lost_to != r.lost_to {
            self.stats.rack_losses += 1;
            r.lost_to = lost_to;
            self.rec.scoreboard.set_rack_lost(lost_to);
        }
        if let Some(t) = timeout {
            let t = rexmit_timeout.map_or(t, |r| r.min(t));
            self.timers.set(Timer::RackReorder, t);
        }
        lost_to.is_some_and(|b| b > self.snd_una)
    }

    /// RFC 8985 §6.2 step 5 for retransmitted segments (Linux's
    /// `tcp_rack_detect_loss` walks them too): a retransmission sent before
    /// the most recently delivered segment and outstanding RACK.rtt +
    /// reo_wnd is lost again and is resent (the lowest first; one at a
    /// time, each resend re-timestamps it). Returns when the next
    /// retransmission not yet due would be, for the reorder timer.
    fn rack_detect_lost_rexmits(&mut self, now: Instant, xmit_ts: Instant, reo_wnd: Duration) -> Option<Instant> {
        let r = &self.rec.rack;
        let mut lost = None;
        let mut timeout: Option<Instant> = None;
        // In RTO recovery go-back-N resends everything from SND.NXT on anyway.
        let below = if self.rec.rto_recover.is_some() { self.snd_nxt } else { self.snd_max };
        for s in r.log.iter().skip(r.index_after(self.snd_una)) {
            if s.start >= below {
                break;
            }
            if !s.rexmit || s.sacked || !Rack::sent_after(xmit_ts, r.end_seq, s.at, s.end) {
                continue;
            }
            let due = s.at + r.rtt + reo_wnd;
            if due <= now {
                if lost.is_none() {
                    lost = Some(s.start);
                }
            } else {
                timeout = Some(timeout.map_or(due, |t| t.min(due)));
            }
        }
        if let Some(seq) = lost {
            if self.rec.rack_rexmit.is_none_or(|q| seq < q) {
                self.stats.rack_losses += 1;
                self.rec.rack_rexmit = Some(seq);
            }
        }
        timeout
    }

    /// The reorder timer fired (RFC 8985 §6.3): detect again, and start fast
    /// recovery if the first segment is now lost.
    pub(super) fn on_rack_timer(&mut self, now: Instant) {
        if self.rack_detect_loss(now) && !self.rec.in_recovery && self.rec.rto_recover.is_none() {
            self.enter_recovery(now);
        }
    }

    /// RFC 8985 §6.2 step 4: recovery ended; a widened reordering window
    /// decays back after REO_WND_PERSIST recoveries without D-SACK.
    pub(super) fn rack_on_recovery_end(&mut self) {
        let r = &mut self.rec.rack;
        r.reo_wnd_persist = r.reo_wnd_persist.saturating_sub(1);
        if r.reo_wnd_persist == 0 {
            r.reo_wnd_mult = 1;
        }
    }

    /// After an RTO everything is resent: RACK starts over.
    pub(super) fn rack_on_rto(&mut self) {
        let r = &mut self.rec.rack;
        r.lost_to = None;
        r.tlp_end = None;
        r.probe_due = false;
        self.rec.scoreboard.set_rack_lost(None);
        self.timers.stop(Timer::RackReorder);
        self.timers.stop(Timer::LossProbe);
    }

    /// RFC 8985 §7.2: arm (or re-arm) the probe timeout after new data was
    /// sent or an ACK advanced SND.UNA, unless recovery is under way, SACKed
    /// data is outstanding, or a probe is already unanswered.
    //= https://www.rfc-editor.org/rfc/rfc8985#section-7.2
    //# If SRTT is available: PTO = 2 * SRTT; If FlightSize is equal to one
    //# segment, add WCDelAckT to PTO [...] If RTO.expiration is earlier
    //# than Now() + PTO, [...] PTO = RTO.expiration - Now()
    /// Linux's `tcp_schedule_loss_probe`: the extra for a lone segment is
    /// the delayed-ACK allowance (our `Config::delayed_ack`); the PTO is at
    /// least 10 ms.
    pub(super) fn tlp_schedule(&mut self, now: Instant) {
        let eligible = self.sack_ok
            && matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
            && self.snd_max > self.snd_una
            && !self.rec.in_recovery
            && self.rec.rto_recover.is_none()
            && self.rec.scoreboard.is_empty()
            && self.rec.rack.tlp_end.is_none()
            && !self.rec.rack.probe_due;
        if !eligible {
            self.timers.stop(Timer::LossProbe);
            return;
        }
        let pto = match self.rtt.srtt() {
            Some(srtt) => {
                let mut pto = srtt.saturating_mul(2);
                if seq_sub(self.snd_max, self.snd_una) <= self.data_mss() {
                    pto = pto.saturating_add(self.cfg.delayed_ack);
                }
                pto.max(PTO_MIN)
            }
            None => PTO_NO_SRTT,
        };
        let at = now + pto;
        match self.timers.get(Timer::Retransmit) {
            // The RTO comes first: it is the probe.
            Some(rto) if rto <= at => self.timers.stop(Timer::LossProbe),
            _ => self.timers.set(Timer::LossProbe, at),
        }
    }

    /// The PTO fired (RFC 8985 §7.3): send one probe on the next `poll_transmit`.
    pub(super) fn on_loss_probe(&mut self, _now: Instant) {
        if self.snd_max > self.snd_una
            && !self.rec.in_recovery
            && self.rec.rto_recover.is_none()
            && self.rec.scoreboard.is_empty()
        {
            self.rec.rack.probe_due = true;
        }
    }

    /// RFC 8985 §7.3: the probe segment: new data if some is waiting and the
    /// peer's window takes it (cwnd notwithstanding), else the last segment
    /// sent. Returns (seq, len, fin); SND.NXT moves past new data.
    pub(super) fn next_probe(&mut self, now: Instant) -> Option<(SeqNumber, usize, bool)> {
        if !std::mem::take(&mut self.rec.rack.probe_due) || self.snd_max <= self.snd_una {
            return None;
        }
        let mss = self.payload_cap();
        let data_end = self.snd_buf_seq + self.send_buf.len();
        let wnd_end = self.snd_una + self.snd_wnd;
        let new = seq_sub(data_end, self.snd_nxt).min(mss).min(seq_sub(wnd_end, self.snd_nxt));
        let (seq, len, fin, rexmit) = if self.snd_nxt == self.snd_max && new > 0 {
            let seq = self.snd_nxt;
            let fin = self.fin_due().is_some_and(|f| seq + new == f);
            self.snd_nxt = seq + new + usize::from(fin);
            (seq, new, fin, false)
        } else {
            // The last segment: at most one MSS ending at SND.MAX.
            let end_data = self.snd_max.min(data_end);
            let seq = (end_data - seq_sub(end_data, self.snd_una).min(mss)).max(self.snd_una);
            let (len, fin) = self.sent_segment_at(seq);
            if len == 0 && !fin {
                return None;
            }
            (seq, len, fin, true)
        };
        self.stats.tlp_probes += 1;
        let r = &mut self.rec.rack;
        r.tlp_rexmit = rexmit;
        r.tlp_end = Some(self.snd_max.max(seq + len + usize::from(fin)));
        // §7.3: after the probe the RTO runs from now.
        self.timers.set(Timer::Retransmit, now + self.rtt.rto());
        Some((seq, len, fin))
    }

    /// RFC 8985 §7.4 TLP loss detection, for an ACK at or beyond TLP.end_seq:
    /// a D-SACK of the probe means the original arrived too (no loss); an
    /// ACK beyond TLP.end_seq after a retransmitted probe means the probe
    /// repaired a loss, and the congestion controller reacts as to one.
    pub(super) fn tlp_on_ack(&mut self, now: Instant, dsack: Option<(SeqNumber, SeqNumber)>, advanced: bool) {
        let Some(end) = self.rec.rack.tlp_end else { return };
        let ack = self.snd_una;
        let probe_dsacked = dsack.is_some_and(|(_, r)| r <= end);
        if ack < end && !probe_dsacked {
            return;
        }
        if !self.rec.rack.tlp_rexmit || probe_dsacked {
            self.rec.rack.tlp_end = None;
        } else if ack > end {
            // §7.4.2: the loss was repaired by the probe: reduce as for a
            // fast recovery that is already over (Linux's CWR).
            self.rec.rack.tlp_end = None;
            self.stats.tlp_recoveries += 1;
            if !self.rec.in_recovery {
                let flight = seq_sub(self.snd_max, self.snd_una);
                self.cc.on_congestion_event(now, flight);
                self.cc.on_recovery_end(now);
            }
        } else if !advanced {
            // A pure duplicate ACK at TLP.end_seq: both copies arrived.
            self.rec.rack.tlp_end = None;
        }
    }
}
