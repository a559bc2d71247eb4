//! The ACK field of an arriving segment (RFC 9293 §3.10.7.4 "fifth"): RFC 5961
//! §5 ACK validation, SND.UNA advance, RTT samples (RFC 6298 with Karn's rule,
//! RFC 7323 §4 RTTM), the send window update (SND.WL1/WL2), and hand-off to recovery.

use super::options::ts_clock;
use super::recovery::seq_sub;
use super::{Connection, Event, Timer};
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpRepr};

impl Connection {
    /// Processes the ACK of a segment that passed the acceptability test.
    /// Returns false when the segment must be dropped.
    pub(super) fn process_ack(&mut self, now: Instant, repr: &TcpRepr, payload_len: usize) -> bool {
        if !self.ack_acceptable(now, repr) {
            return false;
        }
        let ack = repr.ack;
        if ack < self.snd_una {
            // RFC 9293 §3.10.7.4: "If the ACK is a duplicate (SEG.ACK <
            // SND.UNA), it can be ignored." A reordered old ACK carries stale
            // SACK blocks and window: it must neither count as a duplicate
            // ACK nor feed the scoreboard, the undo checks or PRR, and the
            // window update below needs SEG.ACK >= SND.UNA anyway.
            return true;
        }
        let wnd = usize::from(repr.window) << self.snd_wscale;
        if ack == self.snd_una && self.snd_max == self.snd_una && repr.options.sack.is_empty() && self.nothing_to_recover() {
            // The ACK on every segment a receiver that is not sending takes
            // in: nothing in flight, so nothing for the duplicate-ACK count,
            // SACK, RACK, TLP, PRR or the rate sample to look at (the path
            // below would find the same); only the window may move.
            self.take_window(repr, wnd);
            return true;
        }
        let prior_high = self.rec.scoreboard.high_sacked();
        let prior_una = self.snd_una;
        let prior_sacked = if self.sack_ok { self.rec.scoreboard.sacked_bytes() } else { 0 };
        let blocks = repr.options.sack;
        let blocks = blocks.as_slice();
        let dsack = dsack_block(ack, blocks);
        let was_in_recovery = self.rec.in_recovery;
        let mut dup_ack = false;
        let newly_sacked = if self.sack_ok {
            self.detect_reordering(ack, blocks);
            self.dsack_check(now, ack, blocks);
            self.rec.scoreboard.on_ack(self.snd_una.max(ack), self.snd_max, blocks)
        } else {
            0
        };
        if ack > self.snd_una {
            if self.ts_ok {
                self.eifel_check(now, repr, prior_high);
            }
            self.on_new_ack(now, repr);
        } else if ack == self.snd_una
            && self.snd_nxt > self.snd_una
            && !repr.flags.syn()
            && !repr.flags.fin()
        {
            // RFC 5681 §2 duplicate ACK: no data, same window. With SACK,
            // RFC 6675 §2 counts every ACK that SACKs new data, data-carrying
            // or not — when both sides send, the dup ACKs ride on data.
            let dup = if self.sack_ok && !repr.options.sack.is_empty() {
                newly_sacked > 0
            } else {
                payload_len == 0 && wnd == self.snd_wnd
            };
            if dup {
                dup_ack = true;
                self.recovery_on_dup_ack(now);
            }
        }
        if !self.sack_ok && self.rec.in_recovery {
            // RFC 6937 §3 without SACK: the ACK that starts recovery delivered
            // one segment; later ones as `prr_reno_delivered` estimates.
            let delivered = if was_in_recovery {
                self.prr_reno_delivered(seq_sub(self.snd_una, prior_una), dup_ack)
            } else {
                self.data_mss()
            };
            self.prr_on_ack(delivered, self.snd_una > prior_una);
        }
        if let Some((l, r)) = dsack {
            self.rate.dsack_dups += seq_sub(r, l).div_ceil(self.data_mss().max(1)) as u64;
        }
        if self.sack_ok {
            // RFC 8985 §6.2: RACK, then §7.4 TLP loss detection; a loss RACK
            // finds at SND.UNA starts fast recovery without DupThresh.
            self.rack_on_ack(now, blocks, dsack);
            self.tlp_on_ack(now, dsack, self.snd_una > prior_una);
            if self.rack_detect_loss(now) && !self.rec.in_recovery && self.rec.rto_recover.is_none() {
                self.enter_recovery(now);
            }
            if self.snd_una > prior_una {
                self.tlp_schedule(now);
            } else if !self.rec.scoreboard.is_empty() {
                // RFC 8985 §7.2: no probe while SACKed data is outstanding.
                self.timers.stop(Timer::LossProbe);
            }
            self.detect_lost_retransmission();
            if self.rec.in_recovery {
                // RFC 6937 DeliveredData: the change in SND.UNA plus the change
                // in SACKed bytes (negative when the cumulative ACK swallowed
                // SACKed data).
                let sacked = self.rec.scoreboard.sacked_bytes();
                let delivered = (seq_sub(self.snd_una, prior_una) + sacked).saturating_sub(prior_sacked);
                self.prr_on_ack(delivered, self.snd_una > prior_una);
            }
        }
        let ece = self.ecn.ok && repr.flags.contains(outboard_wire::TcpFlags::ECE);
        self.rate_on_ack(now, seq_sub(self.snd_una, prior_una) + newly_sacked, ece);
        if ack > prior_una {
            // The ACK moved SND.UNA: its window is the one the peer offers
            // now, even from a segment older than SND.WL1 (Linux's
            // `tcp_may_update_window`). A peer's retransmission that fills
            // a hole is such a segment, with its newest ACK and window. The
            // usable window is SND.UNA + SND.WND - SND.NXT: a window left
            // behind while SND.UNA moves on slides the right edge past the
            // peer's, and what we send there it drops without a SACK
            // (Linux's BeyondWindow), repaired only by our RTO.
            self.set_window(repr, wnd);
        } else if ack >= self.snd_una {
            self.take_window(repr, wnd);
        }
        true
    }

    /// No loss being repaired or looked for and no rate sample pending: the
    /// recovery machinery has nothing to do on an ACK that acknowledges nothing.
    #[inline(always)]
    pub(super) fn nothing_to_recover(&self) -> bool {
        !self.rec.in_recovery
            && self.rec.rto_recover.is_none()
            && self.rec.scoreboard.is_empty()
            && self.rec.rack.idle()
            && !self.rate.sample_pending()
    }

    /// RFC 9293 §3.10.7.4, SND.UNA =< SEG.ACK: take the window `wnd` only from
    /// a newer segment (SND.WL1/WL2).
    #[inline]
    pub(super) fn take_window(&mut self, repr: &TcpRepr, wnd: usize) {
        if self.snd_wl1 < repr.seq || (self.snd_wl1 == repr.seq && self.snd_wl2 <= repr.ack) {
            self.set_window(repr, wnd);
        }
    }

    /// Takes the segment's window: SND.WND, SND.WL1/WL2, and a window
    /// that opened stops the persist timer.
    #[inline]
    fn set_window(&mut self, repr: &TcpRepr, wnd: usize) {
        let opened = self.snd_wnd == 0 && wnd > 0;
        self.snd_wnd = wnd;
        self.snd_wl1 = repr.seq;
        self.snd_wl2 = repr.ack;
        self.max_snd_wnd = self.max_snd_wnd.max(wnd);
        if opened {
            self.timers.stop(Timer::Persist);
            self.persist_backoff = 0;
            self.probe_pending = false;
        }
    }

    /// RFC 5961 §5.2: SEG.ACK is acceptable only within [SND.UNA - MAX.SND.WND,
    /// SND.NXT]. Otherwise the segment is dropped and answered with a
    /// challenge ACK (rate-limited by RFC 5961 §7); nothing else changes.
    pub(super) fn ack_acceptable(&mut self, now: Instant, repr: &TcpRepr) -> bool {
        if repr.ack > self.snd_max || repr.ack < self.snd_una - self.max_snd_wnd {
            self.stats.dropped_segments += 1;
            self.challenge_ack(now);
            return false;
        }
        true
    }

    /// SEG.ACK > SND.UNA: new data (or our SYN / FIN) acknowledged.
    fn on_new_ack(&mut self, now: Instant, repr: &TcpRepr) {
        let ack = repr.ack;
        let flight = self.bytes_in_flight();
        let acked = seq_sub(ack, self.snd_una);
        let data_end = self.snd_buf_seq + self.send_buf.len();
        let data_acked = seq_sub(ack.min(data_end), self.snd_buf_seq);
        if data_acked > 0 {
            self.send_buf.consume(data_acked);
            self.snd_buf_seq += data_acked;
        }
        self.snd_una = ack;
        if self.snd_nxt < ack {
            self.snd_nxt = ack;
        }
        if self.rto_count > 0 {
            if let Some(t) = self.rate.rto_since.take() {
                self.rate.rto_time += now.saturating_duration_since(t);
            }
        }
        self.rto_count = 0;
        self.blackhole_on_progress(data_acked);
        let rtt = self.rtt_sample(now, repr);
        if let Some(d) = rtt {
            self.rtt.on_sample(d);
        }
        self.recovery_on_new_ack(now, acked, rtt, flight);
        // RFC 6298 §5.2-5.3: stop when all is acknowledged, else restart.
        if self.snd_una == self.snd_max {
            self.timers.stop(Timer::Retransmit);
        } else {
            self.timers.set(Timer::Retransmit, now + self.rtt.rto());
        }
        if data_acked > 0 && self.want_writable && self.send_buf.free() > 0 {
            self.want_writable = false;
            self.push_event(Event::Writable);
        }
    }

    /// An RTT sample for this ACK: the Karn-timed segment (RFC 6298 §3: never
    /// one that was retransmitted), else RFC 7323 §4 TSecr.
    fn rtt_sample(&mut self, now: Instant, repr: &TcpRepr) -> Option<Duration> {
        if let Some((end, sent)) = self.rtt_timing {
            if repr.ack >= end {
                self.rtt_timing = None;
                return Some(now.saturating_duration_since(sent));
            }
        }
        if self.ts_ok {
            if let Some((_, tsecr)) = repr.options.timestamps {
                // Karn's rule for timestamps: an echo of a TSval from before
                // our last retransmission may answer the original or the copy
                // (a receiver's duplicate ACKs echo an old TS.Recent, RFC 7323
                // §4.3), and would inflate SRTT by the whole backoff.
                let stale = self.rexmit_ts.is_some_and(|r| (tsecr.wrapping_sub(r) as i32) < 0);
                if tsecr != 0 && !stale {
                    let ms = ts_clock(now).wrapping_sub(tsecr);
                    // A TSecr from the future or absurdly old is no sample.
                    if (ms as i32) >= 0 && ms < 3_600_000 {
                        return Some(Duration::from_millis(u64::from(ms)));
                    }
                }
            }
        }
        None
    }

    /// RFC 5961 §7: challenge ACKs, at most `CHALLENGE_ACK_LIMIT` per second per
    /// connection so that an attacker cannot turn us into an ACK amplifier.
    pub(super) fn challenge_ack(&mut self, now: Instant) {
        if now.saturating_duration_since(self.challenge_window.0) >= Duration::from_secs(1) {
            self.challenge_window = (now, 0);
        }
        if self.challenge_window.1 < CHALLENGE_ACK_LIMIT {
            self.challenge_window.1 += 1;
            self.stats.challenge_acks += 1;
            self.ack_now = true;
        } else {
            self.stats.dropped_segments += 1;
        }
    }

    /// Sequence number of our FIN when the application closed the send side.
    pub(super) fn fin_seq(&self) -> Option<SeqNumber> {
        self.fin_queued.then(|| self.snd_buf_seq + self.send_buf.len())
    }

    /// Our FIN was sent and acknowledged.
    pub(super) fn fin_acked(&self) -> bool {
        self.fin_seq().is_some_and(|f| self.snd_una > f)
    }
}

/// RFC 2883 §4: the D-SACK block of an ACK, if any: the first block,
/// when it lies below the cumulative ACK or inside the second block.
pub(super) fn dsack_block(ack: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) -> Option<(SeqNumber, SeqNumber)> {
    let &(l, r) = blocks.first()?;
    let is_dsack = r <= ack || blocks.get(1).is_some_and(|&(l2, r2)| l >= l2 && r <= r2);
    (is_dsack && l < r).then_some((l, r))
}

/// Challenge ACKs allowed per connection per second (RFC 5961 §7 leaves the
/// number to the implementation; Linux uses a similar per-socket budget).
pub(super) const CHALLENGE_ACK_LIMIT: u32 = 10;
