//! The sending side of a reliable flow.

use super::{DUPTHRESH, INITIAL_CREDIT, SACK_BITS};
use crate::addr::MailboxAddr;
use crate::config::Config;
use crate::error::MessageError;
use crate::outbox::{Outbox, Payload, RETRANSMIT};
use crate::MessageId;
use outboard_tcp::cc::{Controller, CongestionControl};
use outboard_tcp::rtt::RttEstimator;
use outboard_time::{Duration, Instant};
use outboard_wire::msg::{flags, MsgKind, MsgRepr};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug)]
struct OutMsg {
    id: MessageId,
    data: Arc<[u8]>,
    first_seq: u64,
    frames: u64,
}

#[derive(Debug, Clone, Copy)]
struct SentFrame {
    sent_at: Instant,
    len: usize,
    retransmitted: bool,
    sacked: bool,
    lost: bool,
}

/// What an acknowledgement did.
#[derive(Debug, Default)]
pub(crate) struct AckOutcome {
    pub delivered: Vec<MessageId>,
    /// The peer's session differs from the one this flow learnt: it restarted.
    pub peer_restarted: bool,
}

#[derive(Debug)]
pub(crate) struct SendFlow {
    pub incarnation: u64,
    pub src_mailbox: u32,
    pub dst: MailboxAddr,
    pub peer_session: u32,
    msgs: VecDeque<OutMsg>,
    pub queued_bytes: usize,
    next_assign: u64,
    snd_una: u64,
    snd_nxt: u64,
    credit_end: u64,
    /// Frames `snd_una..snd_nxt`.
    sent: VecDeque<SentFrame>,
    in_flight: usize,
    cc: Controller,
    rtt: RttEstimator,
    rto_at: Option<Instant>,
    probe_at: Option<Instant>,
    probe_backoff: u32,
    recover: Option<u64>,
    highest_sacked: u64,
    last_progress: Instant,
    /// `send_message` was refused for a full queue: say when there is room.
    pub space_wanted: bool,
    pub retransmitted_frames: u64,
    pub probes_sent: u64,
}

impl SendFlow {
    pub fn new(cfg: &Config, incarnation: u64, src_mailbox: u32, dst: MailboxAddr, peer_session: u32, now: Instant) -> SendFlow {
        SendFlow {
            incarnation,
            src_mailbox,
            dst,
            peer_session,
            msgs: VecDeque::new(),
            queued_bytes: 0,
            next_assign: 1,
            snd_una: 1,
            snd_nxt: 1,
            credit_end: 1 + INITIAL_CREDIT,
            sent: VecDeque::new(),
            in_flight: 0,
            cc: Controller::new(cfg.cc, cfg.frame_payload()),
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            rto_at: None,
            probe_at: None,
            probe_backoff: 0,
            recover: None,
            highest_sacked: 0,
            last_progress: now,
            space_wanted: false,
            retransmitted_frames: 0,
            probes_sent: 0,
        }
    }

    pub fn is_idle(&self) -> bool {
        self.msgs.is_empty()
    }

    pub fn enqueue(&mut self, id: MessageId, data: Arc<[u8]>, frame_payload: usize, now: Instant) {
        let frames = data.len().div_ceil(frame_payload).max(1) as u64;
        if self.msgs.is_empty() {
            // Time spent idle is not time without progress.
            self.last_progress = now;
        }
        self.queued_bytes += data.len();
        self.msgs.push_back(OutMsg { id, data, first_seq: self.next_assign, frames });
        self.next_assign += frames;
    }

    /// (message index, offset, length) of frame `seq`.
    fn locate(&self, seq: u64, frame_payload: usize) -> (usize, usize, usize) {
        let i = self.msgs.partition_point(|m| m.first_seq + m.frames <= seq);
        let m = &self.msgs[i];
        let offset = (seq - m.first_seq) as usize * frame_payload;
        (i, offset, (m.data.len() - offset).min(frame_payload))
    }

    fn emit(&self, out: &mut Outbox, session: u32, seq: u64, frame_payload: usize, retransmit: bool) -> usize {
        let (i, offset, len) = self.locate(seq, frame_payload);
        let m = &self.msgs[i];
        let repr = MsgRepr {
            flags: if retransmit { RETRANSMIT } else { 0 },
            src_mailbox: self.src_mailbox,
            dst_mailbox: self.dst.mailbox,
            src_session: session,
            dst_session: self.peer_session,
            id: seq,
            ack: self.incarnation,
            offset: offset as u32,
            total_len: m.data.len() as u32,
            ..MsgRepr::new(MsgKind::Message)
        };
        out.push(self.dst.host, repr, Payload::Slice(m.data.clone(), offset, len));
        len
    }

    fn window_full(&self, len: usize) -> bool {
        self.in_flight > 0 && self.in_flight + len > self.cc.cwnd()
    }

    /// Sends what the congestion window and the credit allow: lost frames
    /// first, then new ones. The last frame sent asks for an ack at once.
    pub fn fill(&mut self, now: Instant, cfg: &Config, session: u32, out: &mut Outbox) {
        let fp = cfg.frame_payload();
        let before = out.len();
        for i in 0..self.sent.len() {
            let f = self.sent[i];
            let seq = self.snd_una + i as u64;
            // A frame above credit taken back waits for new credit.
            if !f.lost || f.sacked || seq >= self.credit_end {
                continue;
            }
            if self.window_full(f.len) {
                break;
            }
            self.emit(out, session, seq, fp, true);
            self.sent[i] = SentFrame { sent_at: now, retransmitted: true, lost: false, ..f };
            self.in_flight += f.len;
            self.retransmitted_frames += 1;
        }
        while self.snd_nxt < self.next_assign && self.snd_nxt < self.credit_end {
            let (_, _, len) = self.locate(self.snd_nxt, fp);
            if self.window_full(len) {
                break;
            }
            self.emit(out, session, self.snd_nxt, fp, false);
            self.sent.push_back(SentFrame { sent_at: now, len, retransmitted: false, sacked: false, lost: false });
            self.in_flight += len;
            self.snd_nxt += 1;
        }
        // Ask for an ack at once only when this burst ends the data or the
        // credit; otherwise every second frame brings one.
        if out.len() > before && (self.snd_nxt == self.next_assign || self.snd_nxt >= self.credit_end) {
            out.flag_last(flags::ACK_NOW);
        }
        let outstanding = self.snd_una < self.snd_nxt;
        if outstanding && self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        // Data waits for credit with nothing in flight to bring an ack: probe.
        if !outstanding && self.snd_nxt < self.next_assign && self.snd_nxt >= self.credit_end {
            if self.probe_at.is_none() {
                self.probe_at = Some(now + self.probe_interval());
            }
        } else {
            self.probe_at = None;
            self.probe_backoff = 0;
        }
    }

    fn probe_interval(&self) -> Duration {
        let base = self.rtt.base_rto();
        base.saturating_mul(1 << self.probe_backoff.min(16)).min(Duration::from_secs(1).max(base))
    }

    /// An acknowledgement of this flow's incarnation from the receiver.
    pub fn on_ack(&mut self, now: Instant, repr: &MsgRepr) -> AckOutcome {
        let mut outcome = AckOutcome::default();
        if self.peer_session == 0 {
            self.peer_session = repr.src_session;
        } else if self.peer_session != repr.src_session {
            outcome.peer_restarted = true;
            return outcome;
        }
        // Any answer shows the receiver alive: a full mailbox is backpressure, not failure.
        self.last_progress = now;
        let ack_before = self.snd_una;
        let ack = repr.ack.clamp(self.snd_una, self.snd_nxt);
        let mut acked_bytes = 0;
        let mut sample: Option<Duration> = None;
        while self.snd_una < ack {
            let f = self.sent.pop_front().expect("a frame for every seq below snd_nxt");
            if !f.sacked && !f.lost {
                self.in_flight -= f.len;
            }
            if !f.sacked {
                acked_bytes += f.len;
                if !f.retransmitted {
                    sample = Some(now.saturating_duration_since(f.sent_at));
                }
            }
            self.snd_una += 1;
        }
        while let Some(m) = self.msgs.front() {
            if m.first_seq + m.frames > self.snd_una {
                break;
            }
            let m = self.msgs.pop_front().expect("front exists");
            self.queued_bytes -= m.data.len();
            outcome.delivered.push(m.id);
        }
        // SACK: bit i is frame ack + 1 + i.
        for i in 0..SACK_BITS {
            if repr.sack & (1 << i) == 0 {
                continue;
            }
            let seq = repr.ack.saturating_add(1 + i);
            if seq >= self.snd_nxt {
                break;
            }
            if seq < self.snd_una {
                continue;
            }
            let f = &mut self.sent[(seq - self.snd_una) as usize];
            if !f.sacked {
                f.sacked = true;
                if !f.lost {
                    self.in_flight -= f.len;
                }
                if !f.retransmitted {
                    sample = Some(now.saturating_duration_since(f.sent_at));
                }
                self.highest_sacked = self.highest_sacked.max(seq);
            }
        }
        if let Some(rtt) = sample {
            self.rtt.on_sample(rtt);
        }
        // RFC 6675 §5 in frames: a hole DupThresh below the highest SACKed frame is lost.
        let mut newly_lost = false;
        for (i, f) in self.sent.iter_mut().enumerate() {
            let seq = self.snd_una + i as u64;
            if seq + DUPTHRESH > self.highest_sacked {
                break;
            }
            if !f.sacked && !f.lost && !f.retransmitted {
                f.lost = true;
                self.in_flight -= f.len;
                newly_lost = true;
            }
        }
        if let Some(r) = self.recover {
            if self.snd_una >= r {
                self.cc.on_recovery_end(now);
                self.recover = None;
            }
        }
        if newly_lost && self.recover.is_none() {
            self.cc.on_congestion_event(now, self.in_flight);
            self.recover = Some(self.snd_nxt);
        } else if acked_bytes > 0 && self.recover.is_none() {
            self.cc.on_ack(now, acked_bytes, sample, self.in_flight);
        }
        // The newest ack's credit holds, even when smaller: a receiver takes
        // back credit an idle flow left unused when another flow needs room.
        if repr.ack >= ack_before {
            self.credit_end = repr.ack.saturating_add(u64::from(repr.credit));
        }
        self.rto_at = (self.snd_una < self.snd_nxt).then(|| now + self.rtt.rto());
        if repr.credit > 0 {
            self.probe_backoff = 0;
        }
        outcome
    }

    pub fn deadline(&self) -> Option<Instant> {
        match (self.rto_at, self.probe_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires due timers. Err: the flow failed (no answer within the timeout).
    pub fn on_timeout(&mut self, now: Instant, cfg: &Config, session: u32, out: &mut Outbox) -> Result<(), MessageError> {
        let waiting = !self.msgs.is_empty();
        if waiting && now.saturating_duration_since(self.last_progress) >= cfg.message_timeout {
            return Err(MessageError::TimedOut);
        }
        if self.rto_at.is_some_and(|t| now >= t) {
            self.rto_at = None;
            let flight = self.in_flight;
            for f in self.sent.iter_mut() {
                if !f.sacked {
                    f.lost = true;
                }
            }
            self.in_flight = 0;
            self.cc.on_rto(now, flight);
            self.rtt.backoff();
            self.recover = None;
            let before = out.len();
            self.fill(now, cfg, session, out);
            if out.len() == before {
                // Nothing may go (the receiver took credit back): ask for its credit.
                self.send_probe(out, session);
            }
        }
        if self.probe_at.is_some_and(|t| now >= t) {
            self.probe_backoff += 1;
            self.probe_at = Some(now + self.probe_interval());
            self.send_probe(out, session);
        }
        Ok(())
    }

    fn send_probe(&mut self, out: &mut Outbox, session: u32) {
        self.probes_sent += 1;
        let repr = MsgRepr {
            flags: flags::ACK_NOW,
            src_mailbox: self.src_mailbox,
            dst_mailbox: self.dst.mailbox,
            src_session: session,
            dst_session: self.peer_session,
            id: self.incarnation,
            ..MsgRepr::new(MsgKind::Probe)
        };
        out.push(self.dst.host, repr, Payload::None);
    }

    /// The messages not yet acknowledged, for failing them.
    pub fn take_unacked(&mut self) -> Vec<MessageId> {
        self.queued_bytes = 0;
        self.msgs.drain(..).map(|m| m.id).collect()
    }

    /// Whether frame `seq` (of a refusal) belongs to what this flow has sent.
    pub fn sent_seq(&self, seq: u64) -> bool {
        seq < self.snd_nxt
    }

    pub fn cwnd(&self) -> usize {
        self.cc.cwnd()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
}
