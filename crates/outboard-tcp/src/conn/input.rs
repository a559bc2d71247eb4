//! Segment arrival, RFC 9293 §3.10.7.3 (SYN-SENT) and §3.10.7.4 (the other
//! states), with RFC 5961 RST/SYN handling, RFC 7323 PAWS, receive-side data
//! placement (in order and out of order) and FIN processing.

use super::recovery::seq_sub;
use super::{Connection, Error, Event, IcmpError, State, Timer};
use crate::reset::reset_for;
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

impl Connection {
    pub(super) fn on_segment(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        match self.state {
            // RFC 9293 §3.10.7.1 CLOSED: anything but a RST is answered with
            // one (<SEQ=SEG.ACK><CTL=RST>, or <SEQ=0><ACK=SEG.SEQ+SEG.LEN>
            // <CTL=RST,ACK> without ACK), as Linux answers for a socket closed
            // and unhashed — e.g. a SYN-ACK after close() in SYN-SENT. The
            // table does the same once the connection is freed.
            State::Closed => {
                self.stats.dropped_segments += 1;
                self.pending_rst = reset_for(repr, payload.len());
            }
            State::SynSent => self.on_segment_syn_sent(now, repr, payload),
            _ => self.on_segment_synchronized(now, repr, payload),
        }
    }

    /// RFC 9293 §3.10.7.3.
    fn on_segment_syn_sent(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        let f = repr.flags;
        let mut ack_ok = false;
        if f.ack() {
            // First: an ACK that does not cover exactly our SYN is answered with RST.
            if repr.ack <= self.iss || repr.ack > self.snd_max {
                self.stats.dropped_segments += 1;
                self.pending_rst = reset_for(repr, payload.len());
                return;
            }
            ack_ok = true;
        }
        if f.rst() {
            // Second: RST is acceptable only if it acknowledges our SYN (RFC 5961 §3.2).
            if ack_ok {
                self.fail(Error::Reset);
            } else {
                self.stats.dropped_segments += 1;
            }
            return;
        }
        if !f.syn() {
            self.stats.dropped_segments += 1;
            return;
        }
        // Fourth: SYN.
        self.on_peer_syn(now, repr);
        if ack_ok {
            let rest = TcpRepr { seq: repr.seq + 1, flags: TcpFlags(f.0 & !TcpFlags::SYN.0), ..*repr };
            // The SYN-ACK's window is unscaled (RFC 7323 §2.2): on_peer_syn took it.
            self.snd_wl2 = repr.ack;
            self.on_new_ack_syn(now, repr);
            self.fast_open_on_synack(repr);
            self.establish(now);
            self.ack_now = true;
            if !payload.is_empty() || f.fin() {
                self.process_text(now, &rest, payload);
            }
        } else {
            // Simultaneous open: SYN-RECEIVED, resend our SYN as a SYN-ACK.
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
        }
    }

    /// SYN-SENT: the SYN-ACK acknowledged our SYN.
    fn on_new_ack_syn(&mut self, now: Instant, repr: &TcpRepr) {
        if let Some((end, sent)) = self.rtt_timing.take() {
            if repr.ack >= end {
                self.rtt.on_sample(now.saturating_duration_since(sent));
            }
        }
        // RFC 6298 §5.7: a SYN that timed out (and so gave no sample, Karn)
        // leaves data transmission to start from a 3 s RTO.
        if self.rto_count > 0 && self.rtt.srtt().is_none() {
            self.rtt.reinit_after_syn_timeout();
        }
        self.snd_una = repr.ack;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        self.rto_count = 0;
        self.timers.stop(Timer::Retransmit);
    }

    /// The handshake completed (from SYN-SENT or SYN-RECEIVED).
    fn establish(&mut self, now: Instant) {
        self.state = if self.fin_queued { State::FinWait1 } else { State::Established };
        self.push_event(Event::Connected);
        self.arm_keepalive(now);
    }

    /// RFC 9293 §3.10.7.4, all states from SYN-RECEIVED on.
    fn on_segment_synchronized(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        if self.state == State::SynReceived
            && repr.flags.syn()
            && repr.flags.ack()
            && repr.seq + 1 == self.rcv_nxt
            && repr.ack > self.snd_una
            && repr.ack <= self.snd_max
        {
            // Simultaneous open (RFC 9293 §3.5 figure 8): the peer's SYN-ACK
            // repeats its SYN; what is new in it is the ACK of ours.
            let rest = TcpRepr { seq: repr.seq + 1, flags: TcpFlags(repr.flags.0 & !TcpFlags::SYN.0), ..*repr };
            return self.on_segment_synchronized(now, &rest, payload);
        }
        let f = repr.flags;
        let seg_len = repr.segment_len(payload.len());
        // RFC 7323 §5.3: PAWS before anything else.
        if self.paws_rejects(now, repr) {
            self.stats.dropped_segments += 1;
            self.stats.dup_segments_in += 1;
            if seg_len > 0 || !self.oow_ack_limited(now) {
                self.ack_now = true;
            }
            return;
        }
        // First: sequence number acceptability (the §3.10.7.4 table).
        if !self.seq_acceptable(repr.seq, seg_len) {
            self.stats.dropped_segments += 1;
            if f.rst() {
                return;
            }
            if self.ack_field_usable(repr, seg_len) {
                // §3.10.7.4: "special allowance should be made to accept valid
                // ACKs". Two ends that have filled each other's windows send
                // pure ACKs at the right edge and retransmissions ending at
                // RCV.NXT; dropping their ACK fields deadlocks both (Linux's
                // `tcp_sequence` accepts the same range).
                if !self.ack_step(now, repr, payload.len()) {
                    return;
                }
            }
            if repr.seq + seg_len <= self.rcv_nxt {
                self.stats.dup_segments_in += 1;
                // RFC 2883 §4 (1): report the duplicate in a D-SACK block.
                if !payload.is_empty() && repr.seq + payload.len() <= self.rcv_nxt {
                    self.note_dsack(repr.seq, repr.seq + payload.len());
                }
            }
            if self.state == State::TimeWait && f.fin() {
                // §3.10.7.4 eighth: a retransmitted FIN restarts the 2·MSL wait.
                self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
            }
            if seg_len == 0 && self.oow_ack_limited(now) {
                return;
            }
            self.ack_now = true;
            return;
        }
        // Nothing about the peer (TS.Recent, liveness) is remembered until the
        // segment has passed every check below: a blind segment dropped for its
        // ACK, or answered with a challenge ACK, changes no state.
        // Second: RST (RFC 5961 §3.2: exact match resets, in-window gets a challenge ACK).
        if f.rst() {
            if repr.seq == self.rcv_nxt {
                match self.state {
                    State::Closing | State::LastAck | State::TimeWait => self.enter_closed(),
                    _ => self.fail(Error::Reset),
                }
            } else {
                self.challenge_ack(now);
            }
            return;
        }
        // Fourth: any SYN in a synchronized state gets a challenge ACK (RFC 5961 §4).
        if f.syn() {
            self.stats.dropped_segments += 1;
            self.challenge_ack(now);
            return;
        }
        // Fifth: ACK.
        if !f.ack() {
            self.stats.dropped_segments += 1;
            return;
        }
        if self.state == State::SynReceived {
            if repr.ack > self.snd_una && repr.ack <= self.snd_max {
                self.establish(now);
            } else {
                // §3.10.7.4 fifth, SYN-RECEIVED: <SEQ=SEG.ACK><CTL=RST>.
                self.stats.dropped_segments += 1;
                self.pending_rst = reset_for(repr, payload.len());
                return;
            }
        }
        // RFC 5961 §5.2: an ACK of data never sent, or older than the largest
        // window, drops the segment (with a challenge ACK).
        if !self.ack_acceptable(now, repr) {
            return;
        }
        // The segment is acceptable: only now may it update TS.Recent (RFC 7323
        // §4.3) and count as a sign of life (keepalive; Linux's `rcv_tstamp`).
        self.update_ts_recent(now, repr);
        self.last_rx = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);
        self.ecn_on_segment(repr);
        if !self.ack_step(now, repr, payload.len()) {
            return;
        }
        self.ecn_on_ack(now, repr);
        // Sixth (URG) is ignored; seventh and eighth: text and FIN.
        self.process_text(now, repr, payload);
    }

    /// An unacceptable segment whose ACK field still tells the truth: not a
    /// SYN or RST, synchronized past SYN-RECEIVED, starting no later than our
    /// right edge and ending no earlier than RCV.NXT.
    fn ack_field_usable(&self, repr: &TcpRepr, seg_len: usize) -> bool {
        let f = repr.flags;
        let edge = self.rcv_adv.max(self.rcv_nxt);
        f.ack()
            && !f.syn()
            && self.state != State::SynReceived
            && repr.seq <= edge
            && repr.seq + seg_len >= self.rcv_nxt
    }

    /// The fifth step's ACK processing and the state changes a newly
    /// acknowledged FIN causes. Returns false when the segment is finished with.
    fn ack_step(&mut self, now: Instant, repr: &TcpRepr, payload_len: usize) -> bool {
        if !self.process_ack(now, repr, payload_len) {
            return false;
        }
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    if self.app_closed {
                        // Nobody will read: do not wait forever for the peer's FIN
                        // (RFC 9293 §3.10.7.4 leaves this to the implementation).
                        self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
                    }
                }
                State::Closing => {
                    self.enter_time_wait(now);
                    return false;
                }
                State::LastAck => {
                    self.push_event(Event::Closed);
                    self.enter_closed();
                    return false;
                }
                _ => {}
            }
        }
        true
    }

    /// Pure ACKs outside the window are answered at most once per
    /// `OOW_ACK_INTERVAL`: two confused ends must not trade ACKs forever
    /// (Linux's `tcp_invalid_ratelimit`). Data and FIN are always answered.
    fn oow_ack_limited(&mut self, now: Instant) -> bool {
        if self.last_oow_ack.is_some_and(|t| now.saturating_duration_since(t) < OOW_ACK_INTERVAL) {
            return true;
        }
        self.last_oow_ack = Some(now);
        false
    }

    /// The §3.10.7.4 acceptability test against the window we advertised.
    /// A zero window still admits a segment at RCV.NXT so its ACK and RST
    /// are processed ("special allowance"); its data is trimmed away later.
    fn seq_acceptable(&self, seq: SeqNumber, seg_len: usize) -> bool {
        let wnd = seq_sub(self.rcv_adv, self.rcv_nxt);
        let end = self.rcv_nxt + wnd;
        match (seg_len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            (0, _) => seq.in_range(self.rcv_nxt, end),
            (_, 0) => seq == self.rcv_nxt,
            _ => seq.in_range(self.rcv_nxt, end) || (seq + (seg_len - 1)).in_range(self.rcv_nxt, end),
        }
    }

    /// Seventh and eighth steps: place payload bytes and process FIN.
    pub(super) fn process_text(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        let receiving = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        if !receiving {
            return;
        }
        let fin_seq = repr.seq + payload.len();
        if !payload.is_empty() && self.app_closed && fin_seq > self.rcv_nxt {
            // RFC 9293 §3.10.4 / RFC 1122 §4.2.2.13: nobody will read new data.
            // The RST answers this segment (§3.10.7.1: <SEQ=SEG.ACK><CTL=RST>),
            // as Linux's `tcp_reset` + `tcp_v4_send_reset` do.
            self.pending_rst = reset_for(repr, payload.len());
            self.enter_closed();
            return;
        }
        // Trim to [RCV.NXT, right edge).
        let edge = self.rcv_adv.max(self.rcv_nxt);
        let mut seq = repr.seq;
        let mut data = payload;
        if seq < self.rcv_nxt {
            let skip = seq_sub(self.rcv_nxt, seq).min(data.len());
            // RFC 2883 §4 (1): the part we already had is reported as D-SACK.
            self.note_dsack(seq, seq + skip);
            data = &data[skip..];
            seq += skip;
        }
        let room = seq_sub(edge, seq);
        if data.len() > room {
            data = &data[..room];
        }
        if repr.flags.fin() && fin_seq >= self.rcv_nxt && (fin_seq <= edge || fin_seq == self.rcv_nxt) {
            self.peer_fin = Some(fin_seq);
        }
        if !data.is_empty() && seq >= self.rcv_nxt {
            let before = self.rcv_nxt;
            self.place_data(now, seq, data);
            // Pushed: the PSH bit on data now in order, or a hole filled
            // (whatever was pushed beyond it is in order now too).
            let advanced = seq_sub(self.rcv_nxt, before);
            if advanced > 0 && (repr.flags.psh() || advanced > data.len()) {
                self.rcv_pushed = true;
            }
        } else if !payload.is_empty() {
            // Nothing new (duplicate or beyond the window): tell the peer where we are.
            self.stats.dup_segments_in += u64::from(data.is_empty() && seq_sub(self.rcv_nxt, repr.seq) > 0);
            self.ack_now = true;
            self.delack_leave_pingpong();
        }
        if self.peer_fin == Some(self.rcv_nxt) && !self.fin_received {
            self.on_peer_fin(now);
        }
    }

    /// Writes payload at its offset in the receive ring and advances RCV.NXT
    /// over whatever became contiguous.
    pub(super) fn place_data(&mut self, now: Instant, seq: SeqNumber, data: &[u8]) {
        let offset = seq_sub(seq, self.rcv_nxt);
        let written = if self.is_prefilled(seq, data.len()) {
            // `prefill_payload` already copied exactly these bytes to exactly
            // this offset (and checked they fit): the fused receive path.
            debug_assert!(self.prefilled_bytes_match(offset, data));
            data.len()
        } else {
            let n = self.recv_buf.write_unqueued(offset, data);
            self.stats.rx_copied_bytes += n as u64;
            n
        };
        if written == 0 {
            self.stats.dropped_segments += 1;
            self.ack_now = true;
            return;
        }
        self.rcv_mss = self.rcv_mss.max(data.len()).min(usize::from(self.cfg.mss).max(536));
        let had_holes = !self.assembler.is_empty();
        let mut advanced = 0;
        if offset == 0 {
            // In order: needs no range of its own, so it is always taken and
            // nothing SACKed is ever reneged on.
            self.assembler.advance(written);
            advanced = written;
            self.delack_on_data(now, written);
        } else if self.assembler.add(offset, written).is_err() {
            // Out-of-order state is full: drop; the sender will resend.
            self.stats.dropped_segments += 1;
            self.ack_now = true;
            return;
        } else {
            self.rate.rcv_ooopack += 1;
        }
        advanced += self.assembler.pop_front();
        if advanced > 0 {
            self.recv_buf.enqueue_unqueued(advanced);
            self.rcv_nxt += advanced;
            self.unacked_rx_bytes += advanced;
            self.push_event(Event::Readable);
        }
        if offset > 0 {
            // RFC 5681 §4.2: out-of-order data is acknowledged at once (dup ACK + SACK).
            self.note_sack_arrival(seq);
            self.ack_now = true;
        } else if had_holes {
            // RFC 5681 §4.2: so is data that fills a gap.
            self.ack_now = true;
        } else {
            self.ack_or_delay(now);
        }
    }

    /// Eighth step: the peer's FIN is next in sequence.
    fn on_peer_fin(&mut self, now: Instant) {
        self.rcv_nxt += 1;
        self.fin_received = true;
        self.push_event(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => {
                self.state = State::CloseWait;
                self.delack_on_fin(now);
            }
            State::FinWait1 => {
                self.ack_now = true;
                self.state = State::Closing;
            }
            State::FinWait2 => {
                self.ack_now = true;
                self.enter_time_wait(now);
            }
            _ => self.ack_now = true,
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.stop_all();
        self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
        self.push_event(Event::Closed);
    }

    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.timers.stop_all();
        self.ack_now = false;
        self.probe_pending = false;
        self.keepalive_pending = false;
    }

    /// The RST of `abort` (RFC 9293 §3.10.5), as Linux's
    /// `tcp_send_active_reset`: RST+ACK at an acceptable sequence number
    /// (`ack_seq`, Linux's `tcp_acceptable_seq`) and, when timestamps were
    /// negotiated, the TS option echoing TS.Recent (RFC 7323 §4.2;
    /// `transmit` fills in TSval when it goes out).
    pub(super) fn make_rst(&self) -> TcpRepr {
        TcpRepr {
            src_port: self.tuple.local.port(),
            dst_port: self.tuple.remote.port(),
            seq: self.ack_seq(),
            ack: self.rcv_nxt,
            flags: TcpFlags::RST | TcpFlags::ACK,
            window: 0,
            urgent: 0,
            options: TcpOptions { timestamps: self.ts_ok.then_some((0, self.ts_recent)), ..TcpOptions::default() },
        }
    }

    /// RFC 1122 §4.2.3.9 and RFC 1191.
    pub(super) fn on_icmp(&mut self, _now: Instant, err: IcmpError) {
        match err {
            IcmpError::FragmentationNeeded { mtu } => {
                // IP and TCP headers without options (RFC 1191 §3; RFC 8201 for IPv6).
                let mss = self.tuple.mss_for_mtu(mtu);
                if mss >= MIN_PMTU_MSS && mss < self.send_mss {
                    self.set_send_mss(mss);
                    if self.snd_max > self.snd_una && self.state != State::SynSent {
                        // The segment that hit the small link is gone: resend now.
                        self.rec.rexmit_una = true;
                    }
                }
            }
            // Linux ignores unreachable codes it does not know (> NR_ICMP_UNREACH).
            IcmpError::Unreachable { code } if code > MAX_UNREACH_CODE => {}
            // RFC 1122 §4.2.3.9 lets only protocol/port unreachable be hard
            // errors, but Linux's `tcp_v4_err` ends a connection attempt
            // (SYN-SENT, or SYN-RECEIVED after a simultaneous open) at once
            // on any unreachable or time exceeded, with the errno
            // `icmp_err_convert` gives (ENETUNREACH, EHOSTUNREACH,
            // ECONNREFUSED...): RFC 5461 §4 describes and allows it. The
            // error event is `Reset`; `soft_error` names the ICMP error.
            _ if self.state == State::SynSent || (self.state == State::SynReceived && self.active_open) => {
                self.soft_error = Some(err);
                self.fail(Error::Reset);
            }
            // A listener's half-open connection (Linux's request socket,
            // `tcp_req_err`): net/host unreachable and time exceeded about
            // its SYN-ACK drop it quietly (nobody accepted it yet); other
            // codes change nothing.
            IcmpError::Unreachable { code: 0 | 1 } | IcmpError::TimeExceeded if self.state == State::SynReceived => {
                self.enter_closed();
            }
            _ if self.state == State::SynReceived => {}
            // Synchronized: a soft error, reported if the connection then
            // times out (Linux's `sk_err_soft`).
            _ => self.soft_error = Some(err),
        }
    }
}

/// RFC 1191 §3 allows 68-byte MTUs; below this MSS the header overhead makes
/// the connection useless, and a forged ICMP could otherwise shrink it to nothing.
const MIN_PMTU_MSS: usize = 64;
/// Minimum spacing of ACKs answering out-of-window pure ACKs.
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);
/// The highest destination-unreachable code (Linux's `NR_ICMP_UNREACH`).
const MAX_UNREACH_CODE: u8 = 15;
