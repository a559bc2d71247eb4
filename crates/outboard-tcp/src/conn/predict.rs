//! Header prediction: the receive fast path (Van Jacobson's, as Linux's
//! `tcp_rcv_established` keeps it).
//!
//! Most segments a bulk receiver takes are the next in-order data of an
//! ESTABLISHED connection that is not sending: flags ACK (and perhaps PSH),
//! SEG.SEQ = RCV.NXT, SEG.ACK = SND.UNA with nothing in flight, the window
//! unchanged or not, no SACK blocks, a timestamp that passes PAWS, and a
//! payload the fused path (`prefill_payload`) already copied into the
//! receive ring. For such a segment every test of RFC 9293 §3.10.7.4 has a
//! known answer, so [`Connection::take_predicted`] does only what the full
//! path (`on_segment_synchronized` → `ack_step` → `process_text` →
//! `place_data`) would change, in the same order, and skips the rest.
//!
//! Exactness is the rule: for a predicted segment the connection ends in
//! the same state, to the byte of its record, as by the full path. The
//! `predict` tests check this by running every step of generated exchanges
//! through both paths side by side (`set_prediction_off` turns the fast path
//! off on the test's thread); everything else about the segment (which
//! state, flags, sequence numbers, options) goes the full way.

use super::{Connection, Event, Prefilled, State};
use outboard_time::Instant;
use outboard_wire::{TcpFlags, TcpRepr};

#[cfg(test)]
thread_local! {
    static PREDICTION_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests only: sends every segment on this thread the full way.
#[cfg(test)]
pub(super) fn set_prediction_off(off: bool) {
    PREDICTION_OFF.with(|c| c.set(off));
}

impl Connection {
    /// Whether `repr`, whose payload of `len` bytes `placed` prefilled, is
    /// the segment header prediction expects (see the module docs).
    pub(super) fn predicted(&self, now: Instant, repr: &TcpRepr, len: usize, placed: &Prefilled) -> bool {
        #[cfg(test)]
        if PREDICTION_OFF.with(|c| c.get()) {
            return false;
        }
        // `placed` is from `prefill_payload` at this RCV.NXT and ring: it
        // already found the payload non-empty, inside the window, and the
        // application not closed.
        self.state == State::Established
            && repr.flags.0 & !TcpFlags::PSH.0 == TcpFlags::ACK.0
            && repr.seq == self.rcv_nxt
            && self.prefilled_here(placed, repr.seq, len)
            && repr.ack == self.snd_una
            && self.snd_max == self.snd_una
            && repr.options.sack.is_empty()
            && self.assembler.is_empty()
            && self.peer_fin.is_none()
            && self.nothing_to_recover()
            && !self.paws_rejects(now, repr)
    }

    /// The full path's effects for a segment `predicted` accepted, whose
    /// payload (`payload`, for debug checks only) is in the ring already.
    pub(super) fn take_predicted(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        let len = payload.len();
        // handle_segment
        self.stats.segments_in += 1;
        self.stats.bytes_in += len as u64;
        self.stats.predicted_segments += 1;
        self.tlp_burst = None;
        // on_segment_synchronized: acceptable in sequence and ACK, no RST or SYN.
        self.update_ts_recent(now, repr);
        self.last_rx = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);
        self.ecn_on_segment(repr);
        // ack_step: an ACK of nothing with nothing in flight (`process_ack`'s
        // first case); no FIN of ours in ESTABLISHED.
        self.take_window(repr, usize::from(repr.window) << self.snd_wscale);
        self.ecn_on_ack(now, repr);
        // process_text and place_data: in order, untrimmed, prefilled, no holes.
        debug_assert!(self.prefilled_bytes_match(0, payload));
        self.rcv_mss = self.rcv_mss.max(len).min(usize::from(self.cfg.mss).max(536));
        self.delack_on_data(now, len);
        self.recv_buf.enqueue_unqueued(len);
        self.rcv_nxt += len;
        self.unacked_rx_bytes += len;
        self.push_event(Event::Readable);
        self.ack_or_delay(now);
        if repr.flags.psh() {
            self.rcv_pushed = true;
        }
        // handle_segment's close.
        self.ecn_drop_note();
        self.note_unacked(now);
        self.release_idle_buffers();
    }
}
