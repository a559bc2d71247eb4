//! What to send next. One segment per `poll_transmit`, in this order:
//! a pending RST; SYN / SYN-ACK; retransmissions (fast retransmit, NewReno
//! partial ACK, RFC 6675 NextSeg rule 1); data from SND.NXT (go-back-N after an
//! RTO, then new data under cwnd, the peer's window, Nagle and SWS avoidance)
//! with FIN; RFC 6675 rescue retransmissions; a zero-window probe; a keepalive;
//! a pure ACK or window update.

use super::recovery::seq_sub;
use super::{Connection, State, Timer, Transmit};
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

/// The largest TSO payload: 65535 less the IPv4 header and a TCP header with
/// the most options (20 + 60).
const TSO_MAX_PAYLOAD: usize = 65535 - 20 - 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegKind {
    /// Data and/or FIN, new or retransmitted: runs the retransmission timer.
    Data,
    /// A zero-window probe: one byte beyond the window, no retransmission timer (RFC 9293 §3.8.6.1).
    Probe,
    /// A pure ACK, window update or keepalive.
    Ack,
}

impl Connection {
    pub(super) fn transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        if let Some(mut rst) = self.pending_rst.take() {
            // Only our own (active) RSTs carry timestamps (`make_rst`): TSval is now.
            if let Some((_, ecr)) = rst.options.timestamps {
                rst.options.timestamps = Some((super::options::ts_clock(now), ecr));
            }
            self.stats.segments_out += 1;
            return Some(Transmit { repr: rst, payload: [&[], &[]], gso_size: 0, ect: false });
        }
        match self.state {
            State::Closed => return None,
            State::SynSent => return (self.snd_nxt == self.iss && !self.syn_deferred()).then(|| self.emit_syn(now)),
            State::SynReceived => {
                return (self.snd_nxt == self.iss || self.ack_now).then(|| self.emit_syn(now));
            }
            State::FinWait2 | State::TimeWait => {
                return self.ack_now.then(|| self.emit(now, self.ack_seq(), 0, false, SegKind::Ack));
            }
            _ => {}
        }
        if let Some((seq, len, fin)) = self.next_probe(now) {
            return Some(self.emit(now, seq, len, fin, SegKind::Data));
        }
        if let Some((seq, len, fin)) = self.next_retransmission() {
            return Some(self.emit(now, seq, len, fin, SegKind::Data));
        }
        if let Some((seq, len, fin)) = self.next_from_nxt(now) {
            self.snd_nxt = seq + len + usize::from(fin);
            return Some(self.emit(now, seq, len, fin, SegKind::Data));
        }
        if let Some((seq, len, fin)) = self.next_rescue() {
            return Some(self.emit(now, seq, len, fin, SegKind::Data));
        }
        if self.probe_pending {
            self.probe_pending = false;
            let unsent = seq_sub(self.snd_buf_seq + self.send_buf.len(), self.snd_nxt);
            if unsent > 0 {
                return Some(self.emit(now, self.snd_nxt, 1, false, SegKind::Probe));
            }
        }
        if self.keepalive_pending {
            self.keepalive_pending = false;
            // RFC 1122 §4.2.3.6: an old sequence number makes the peer answer with an ACK.
            return Some(self.emit(now, self.snd_una - 1, 0, false, SegKind::Ack));
        }
        if self.ack_now {
            return Some(self.emit(now, self.ack_seq(), 0, false, SegKind::Ack));
        }
        None
    }

    /// The sequence number of a pure ACK. After an RTO, SND.NXT falls back to
    /// SND.UNA while the peer may hold everything up to SND.MAX: an ACK at
    /// SND.NXT would be unacceptable there and its ACK field lost (two sides
    /// both in go-back-N then trade unacceptable ACKs forever). Like BSD, use
    /// SND.MAX, but never beyond the peer's window (a zero-window probe byte
    /// is not in it; Linux's `tcp_acceptable_seq`).
    pub(super) fn ack_seq(&self) -> SeqNumber {
        self.snd_max.min(self.snd_una + self.snd_wnd).max(self.snd_nxt)
    }

    /// Payload bytes that fit in one segment with the options it will carry.
    pub(super) fn payload_cap(&self) -> usize {
        let mut cap = self.data_mss();
        if self.sack_ok && (self.dsack.is_some() || !self.assembler.is_empty()) {
            let blocks = self.assembler.range_count() + usize::from(self.dsack.is_some());
            let n = blocks.min(if self.ts_ok { 3 } else { 4 });
            cap = cap.saturating_sub(4 + 8 * n);
        }
        cap.max(1)
    }

    /// The largest new-data segment: `tso_max_bytes` rounded down to whole
    /// `mss` pieces, at least one MSS, and within an IPv4 datagram's 65535
    /// bytes with the headers.
    pub(super) fn tso_cap(&self, mss: usize) -> usize {
        let max = self.cfg.tso_max_bytes.min(TSO_MAX_PAYLOAD);
        if max <= mss {
            return mss;
        }
        max - max % mss
    }

    /// Our FIN's sequence number once it may be sent (the handshake is over).
    pub(super) fn fin_due(&self) -> Option<SeqNumber> {
        match self.state {
            State::FinWait1 | State::Closing | State::LastAck => self.fin_seq(),
            _ => None,
        }
    }

    /// The segment starting at `seq`, no longer than one MSS and within what was sent.
    pub(super) fn sent_segment_at(&self, seq: SeqNumber) -> (usize, bool) {
        let data_end = self.snd_buf_seq + self.send_buf.len();
        let len = seq_sub(self.snd_max.min(data_end), seq).min(self.payload_cap());
        let fin = self.fin_due().is_some_and(|f| seq + len == f && self.snd_max > f);
        (len, fin)
    }

    /// Fast retransmit / partial ACK, then RFC 6675 NextSeg rule (1).
    fn next_retransmission(&mut self) -> Option<(SeqNumber, usize, bool)> {
        if let Some(seq) = self.rec.rack_rexmit {
            if seq < self.snd_una || seq >= self.snd_max {
                self.rec.rack_rexmit = None;
            } else if self.cwnd_allowance() >= self.payload_cap() {
                self.rec.rack_rexmit = None;
                let (full, fin) = self.sent_segment_at(seq);
                let len = if self.sack_ok { full.min(self.unsacked_run(seq)) } else { full };
                let fin = fin && len == full;
                if len > 0 || fin {
                    return Some((seq, len, fin));
                }
            }
        }
        if self.rec.rexmit_una {
            self.rec.rexmit_una = false;
            if self.snd_una < self.snd_max {
                let seq = self.snd_una;
                let (len, fin) = self.sent_segment_at(seq);
                if len > 0 || fin {
                    let end = seq + len + usize::from(fin);
                    self.rec.high_rxt = self.rec.high_rxt.max(end);
                    return Some((seq, len, fin));
                }
            }
        }
        if self.rec.in_recovery && self.sack_ok && self.cwnd_allowance() >= self.payload_cap() {
            let mss = self.payload_cap();
            if let Some((seq, _)) = self.rec.scoreboard.next_lost(self.snd_una, self.rec.high_rxt, mss) {
                let seq = seq.max(self.snd_una);
                let (full, fin) = self.sent_segment_at(seq);
                let len = full.min(self.unsacked_run(seq));
                let fin = fin && len == full;
                if len > 0 || fin {
                    self.rec.high_rxt = self.rec.high_rxt.max(seq + len + usize::from(fin));
                    return Some((seq, len, fin));
                }
            }
        }
        None
    }

    /// RFC 6675 NextSeg rule (3): resend unSACKed, not-yet-lost data when nothing new can go.
    fn next_rescue(&mut self) -> Option<(SeqNumber, usize, bool)> {
        if !(self.rec.in_recovery && self.sack_ok) || self.cwnd_allowance() < self.payload_cap() {
            return None;
        }
        let mss = self.payload_cap();
        let (seq, _) = self.rec.scoreboard.next_rescue(self.snd_una, self.snd_max, self.rec.high_rxt, mss)?;
        let seq = seq.max(self.snd_una);
        let (full, fin) = self.sent_segment_at(seq);
        let len = full.min(self.unsacked_run(seq));
        let fin = fin && len == full;
        if len == 0 && !fin {
            return None;
        }
        self.rec.high_rxt = self.rec.high_rxt.max(seq + len + usize::from(fin));
        Some((seq, len, fin))
    }

    /// Bytes from `seq` up to the next SACKed range (or unbounded).
    fn unsacked_run(&self, seq: SeqNumber) -> usize {
        self.rec
            .scoreboard
            .ranges()
            .find(|&(l, _)| l > seq)
            .map_or(usize::MAX, |(l, _)| seq_sub(l, seq))
    }

    /// Data (and FIN) from SND.NXT: go-back-N after an RTO, then new data.
    fn next_from_nxt(&mut self, now: Instant) -> Option<(SeqNumber, usize, bool)> {
        if !matches!(
            self.state,
            State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
        ) {
            return None;
        }
        if self.sack_ok {
            // After an RTO, skip what the receiver already holds.
            while self.snd_nxt < self.snd_max {
                let at = self.snd_nxt;
                match self.rec.scoreboard.ranges().find(|&(l, r)| at >= l && at < r) {
                    Some((_, r)) => self.snd_nxt = r.min(self.snd_max),
                    None => break,
                }
            }
        }
        let data_end = self.snd_buf_seq + self.send_buf.len();
        let fin_pending = self.fin_due().filter(|&f| self.snd_nxt <= f);
        let unsent = seq_sub(data_end, self.snd_nxt);
        if unsent == 0 {
            // A FIN needs neither window nor cwnd room.
            return fin_pending.filter(|&f| f == self.snd_nxt).map(|f| (f, 0, true));
        }
        let retransmitting = self.snd_nxt < self.snd_max;
        let mss = self.payload_cap();
        let wnd_avail = seq_sub(self.snd_una + self.snd_wnd, self.snd_nxt);
        if let Some(size) = self.blackhole_probe_size(unsent, wnd_avail) {
            // RFC 4821 / Linux's `tcp_mtu_probe`: one larger segment, sent whole.
            self.blackhole.sending_probe = true;
            self.push_burst_end = false;
            return Some((self.snd_nxt, size, false));
        }
        // TSO: new data may go in one segment of several MSS-sized pieces
        // (the link cuts it); data sent before goes again one MSS at a time,
        // as Linux splits a TSO skb it retransmits.
        let cap = if retransmitting { mss } else { self.tso_cap(mss) };
        let mut limit = unsent.min(cap);
        if retransmitting && self.sack_ok {
            limit = limit.min(self.unsacked_run(self.snd_nxt));
        }
        let allowance = self.cwnd_allowance();
        let mut len = limit.min(wnd_avail).min(allowance);
        let idle = self.snd_nxt == self.snd_una;
        if len > mss {
            // A TSO segment ends on a piece boundary unless its tail may go
            // now anyway (what Nagle allows for the last bytes queued).
            let tail_ok = len == unsent && (fin_pending.is_some() || ((self.cfg.nodelay || idle) && !self.cork_holds(now)));
            if !tail_ok {
                len -= len % mss;
            }
        }
        if len == 0 {
            if wnd_avail == 0 && idle {
                // RFC 9293 §3.8.6.1: a zero window with data waiting arms the persist timer.
                let at = now + self.persist_interval();
                self.timers.set_if_idle(Timer::Persist, || at);
            }
            return None;
        }
        // Sender SWS avoidance (RFC 9293 §3.8.6.2.1) and Nagle (RFC 1122 §4.2.3.4)
        // hold back small *new* data. Data already sent once goes again at once,
        // even when the window trims it: an RTO must never expire with nothing resent.
        let ok = len >= mss
            || retransmitting
            || (len == unsent && (fin_pending.is_some() || ((self.cfg.nodelay || idle) && !self.cork_holds(now))))
            || (self.max_snd_wnd > 0 && len >= self.max_snd_wnd / 2)
            || self.persist_override;
        if !ok {
            if idle {
                // The override timeout: send what fits if nothing changes.
                let at = now + self.persist_interval();
                self.timers.set_if_idle(Timer::Persist, || at);
            }
            return None;
        }
        self.persist_override = false;
        let seq = self.snd_nxt;
        let fin = fin_pending.is_some_and(|f| seq + len == f);
        // PSH on the last segment of a burst of new data that the congestion
        // window or the peer's window stops with data still queued: after
        // this one, no further segment (or only a short one) fits. Data
        // resent after an RTO is no new burst (Linux resends a segment with
        // the flags it first had).
        let rest = unsent - len;
        let room = wnd_avail.min(allowance).saturating_sub(len);
        self.push_burst_end = !retransmitting && rest > 0 && room < rest.min(mss);
        Some((seq, len, fin))
    }

    /// Persist timer: the RTO with its own exponential backoff, capped at max RTO.
    pub(super) fn persist_interval(&self) -> Duration {
        let base = self.rtt.rto();
        let shift = self.persist_backoff.min(16);
        base.saturating_mul(1 << shift).min(self.cfg.max_rto).max(self.cfg.min_rto)
    }

    /// The SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED).
    fn emit_syn(&mut self, now: Instant) -> Transmit<'_> {
        let synack = self.state == State::SynReceived;
        let first = self.snd_max == self.iss;
        if !first {
            self.stats.retransmits += 1;
            self.rtt_timing = None;
        } else {
            self.rtt_timing = Some((self.iss + 1, now));
        }
        // RFC 7413: a Fast Open cookie (or request), and on a client's first SYN data.
        let (fast_open, data_len) = self.fast_open_syn(first);
        self.snd_nxt = self.iss + 1 + data_len;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.timers.set_if_idle(Timer::Retransmit, || now + self.rtt.rto());
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        let window = self.rcv_room().min(usize::from(u16::MAX));
        if synack {
            self.rcv_adv = self.rcv_adv.max(self.rcv_nxt + window);
            self.on_ack_sent();
        }
        let flags = if synack { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::SYN } | self.ecn_syn_flags();
        let repr = TcpRepr {
            src_port: self.tuple.local.port(),
            dst_port: self.tuple.remote.port(),
            seq: self.iss,
            ack: if synack { self.rcv_nxt } else { SeqNumber(0) },
            flags,
            window: window as u16,
            urgent: 0,
            options: TcpOptions { fast_open, ..self.syn_options(now) },
        };
        self.stats.segments_out += 1;
        if data_len > 0 {
            self.stats.bytes_out += data_len as u64;
            let (a, b) = self.send_buf.peek(0, data_len);
            return Transmit { repr, payload: [a, b], gso_size: 0, ect: false };
        }
        Transmit { repr, payload: [&[], &[]], gso_size: 0, ect: false }
    }

    /// Builds a segment from the send queue and does the bookkeeping of sending it.
    fn emit(&mut self, now: Instant, seq: SeqNumber, len: usize, fin: bool, kind: SegKind) -> Transmit<'_> {
        let end = seq + len + usize::from(fin);
        let new_data = kind == SegKind::Data && len > 0 && seq + len > self.snd_max;
        match kind {
            SegKind::Data => {
                if self.rec.in_recovery {
                    self.prr_on_send(end - seq);
                }
                if seq < self.snd_max {
                    if seq == self.snd_una && self.rec.in_recovery && self.sack_ok {
                        self.rec.una_rexmit = Some((seq, self.snd_max));
                    }
                    self.rexmit_ts = Some(super::options::ts_clock(now));
                    self.stats.retransmits += 1;
                    self.stats.retransmitted_bytes += len as u64;
                    // Karn: a timed segment that is resent gives no sample.
                    if self.rtt_timing.is_some_and(|(e, _)| e > seq) {
                        self.rtt_timing = None;
                    }
                } else if self.rtt_timing.is_none() {
                    self.rtt_timing = Some((end, now));
                }
                let new_data = end > self.snd_max;
                if new_data {
                    self.snd_max = end;
                }
                self.timers.set_if_idle(Timer::Retransmit, || now + self.rtt.rto());
                self.rack_on_send(now, seq, end);
                if new_data && self.tlp_burst != Some(now) {
                    // RFC 8985 §7.2: new data (re)arms the probe timeout.
                    self.tlp_schedule(now);
                    if seq_sub(self.snd_max, self.snd_una) > self.data_mss() {
                        self.tlp_burst = Some(now);
                    }
                } else if new_data && cfg!(debug_assertions) {
                    // What `tlp_burst` relies on, checked by every test.
                    let armed = self.timers.get(Timer::LossProbe);
                    self.tlp_schedule(now);
                    debug_assert_eq!(armed, self.timers.get(Timer::LossProbe), "probe timeout armed once per burst");
                }
            }
            SegKind::Probe => {
                if end > self.snd_max {
                    self.snd_max = end;
                }
            }
            SegKind::Ack => {}
        }
        if len > 0 {
            self.delack_on_data_sent(now);
        }
        let window = self.window_field();
        let options: TcpOptions = self.segment_options(now);
        self.on_ack_sent();
        self.stats.segments_out += 1;
        self.stats.bytes_out += len as u64;
        let (ecn_flags, ect) = self.ecn_segment_flags(new_data);
        let mut flags = TcpFlags::ACK | ecn_flags;
        if fin {
            flags |= TcpFlags::FIN;
        }
        // PSH (RFC 9293 §3.9.1 leaves when to the sender) as Linux marks it
        // (`tcp_push`/`tcp_mark_push`, `forced_push`): on the segment that
        // empties the send queue; on the last segment of a burst that stops,
        // cwnd- or rwnd-limited, with data still queued (`next_from_nxt`);
        // and on new data that ends more than half the peer's largest window
        // past the last push (`forced_push`: write_seq > pushed_seq +
        // max_window / 2), so a long stream into a big window is still handed
        // to the receiving application regularly.
        let data_end = self.snd_buf_seq + self.send_buf.len();
        let burst_end = std::mem::take(&mut self.push_burst_end);
        let forced = new_data && seq_sub(seq + len, self.pushed_seq) > self.max_snd_wnd / 2;
        if len > 0 && (seq + len == data_end || burst_end || forced) {
            flags |= TcpFlags::PSH;
            self.pushed_seq = self.pushed_seq.max(seq + len);
        }
        let repr = TcpRepr {
            src_port: self.tuple.local.port(),
            dst_port: self.tuple.remote.port(),
            seq,
            ack: self.rcv_nxt,
            flags,
            window,
            urgent: 0,
            options,
        };
        let payload = if len > 0 {
            let (a, b) = self.send_buf.peek(seq_sub(seq, self.snd_buf_seq), len);
            [a, b]
        } else {
            [&[][..], &[][..]]
        };
        let mut seg = self.payload_cap();
        if self.blackhole.sending_probe {
            // The probe goes whole: no TSO cut.
            self.blackhole.sending_probe = false;
            if new_data {
                self.blackhole.probe = Some((seq, len));
                seg = len;
            }
        }
        // The D-SACK block went out in this segment (RFC 2883 §4: reported once).
        self.dsack = None;
        let gso_size = if len > seg { seg } else { 0 };
        if gso_size > 0 {
            self.stats.tso_segments_out += 1;
        }
        Transmit { repr, payload, gso_size, ect }
    }

    /// An ACK goes out: the delayed-ACK state is cleared.
    fn on_ack_sent(&mut self) {
        self.ack_now = false;
        self.unacked_rx_bytes = 0;
        self.timers.stop(Timer::DelayedAck);
        self.last_ack_sent = self.rcv_nxt;
        self.delack_on_ack_sent();
    }

    /// The window field for a non-SYN segment. The right edge moves right only
    /// by a worthwhile amount (receiver SWS avoidance, RFC 9293 §3.8.6.2.2) and
    /// never moves left by a scale unit or more (RFC 9293 §3.8.6.2.2, RFC 7323
    /// §2.4): a shrinking buffer only shrinks the window from the left. `wnd`
    /// is capped at `u16::MAX << shift`, so the field fits. The scaled value is
    /// rounded up only while the receive ring has room for all of it: the
    /// edge we advertise must never pass what the ring can hold. (Rounding up
    /// unconditionally let each ACK add up to a scale unit of window the ring
    /// did not have — after 185 ACKs into a ring its reader had not emptied,
    /// 16 KiB of it: the peer sent into it, the excess was dropped, and it
    /// took an RTO and a delayed ACK, 400 ms, to recover.) Rounded down, the
    /// peer may see the edge move left by less than a unit; the ring still
    /// holds everything up to the edge it saw before.
    fn window_field(&mut self) -> u16 {
        let shift = self.rcv_wscale;
        let max = usize::from(u16::MAX) << shift;
        let room = self.rcv_room();
        let cand = self.rcv_nxt + room.min(max);
        let cur = self.rcv_adv.max(self.rcv_nxt);
        let threshold = (self.recv_buf.capacity() / 2).min(self.rcv_mss).max(1);
        self.rcv_adv = if cand > cur && seq_sub(cand, cur) >= threshold { cand } else { cur };
        let wnd = seq_sub(self.rcv_adv, self.rcv_nxt).min(max);
        let unit = 1usize << shift;
        let up = wnd.div_ceil(unit);
        let field = if up << shift <= room { up } else { wnd >> shift };
        self.rcv_adv = self.rcv_adv.max(self.rcv_nxt + (field << shift));
        field as u16
    }

    /// After the application read: is an ACK worth sending now? (Linux's
    /// `tcp_cleanup_rbuf`.) A delayed ACK that waits for more than a
    /// segment's worth (the FIN counts one) goes, in any state: an
    /// interactive connection delays the ACK of a FIN that came with the
    /// last data, and the reader's next read sends it rather than the timer.
    /// So does one of short segments when the read empties the buffer
    /// (`delack_due_at_read`). And a window update, when the right edge can
    /// move by two segments or half the buffer.
    pub(super) fn on_app_read(&mut self) {
        if self.delack_due_at_read() {
            self.ack_now = true;
        }
        if !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            return;
        }
        let max = usize::from(u16::MAX) << self.rcv_wscale;
        let cand = self.rcv_nxt + self.rcv_room().min(max);
        let cur = self.rcv_adv.max(self.rcv_nxt);
        if cand > cur {
            let grow = seq_sub(cand, cur);
            if grow >= 2 * self.rcv_mss || grow >= self.recv_buf.capacity() / 2 {
                self.ack_now = true;
            }
        }
    }
}
