//! What a connection costs in memory, and giving ring storage back when it
//! can no longer be used.
//!
//! The send and receive rings allocate their storage on first write (see
//! `ring`), so a connection that has moved no data — a SYN-RECEIVED entry of
//! a listener's SYN queue, a SYN-SENT connect — holds only its struct and the
//! small range tables. The protocol never looks at the storage, only at the
//! configured capacity: the window offered in SYN and SYN-ACK and every later
//! window come from `recv_buf.free()`, which lazy allocation does not change.
//!
//! Storage is released once it can never hold a byte again:
//! - send ring: when it is empty and nothing more can be queued (our FIN is
//!   queued, the application closed, or the state accepts no `send`), which
//!   covers FIN-WAIT-2, CLOSING, TIME-WAIT and LAST-ACK once all is acknowledged;
//!   in CLOSED at once, unsent bytes included — RFC 9293 §3.10.7.4 flushes the
//!   segment queues on reset, and nothing is ever sent from CLOSED.
//! - receive ring: when the application has read everything and no more data
//!   can arrive (the peer's FIN is consumed, or CLOSED). Unread bytes always
//!   stay readable.
//!
//! So thousands of TIME-WAIT connections cost a struct each, not two buffers.
//!
//! Rings in external storage (`attach_storage`: a board's shared memory)
//! count nothing here: that memory belongs to the board, not the heap.

use super::{Connection, Event, State};
use std::mem::size_of;

impl Connection {
    /// Bytes this connection holds: the struct itself plus its heap — ring
    /// storage actually allocated, the out-of-order and SACK range tables and
    /// the event queue. What the table owning it adds (map slots) is not
    /// included, nor external ring storage (board memory, not heap).
    pub fn memory_in_use(&self) -> usize {
        size_of::<Connection>()
            + self.send_buf.allocated_bytes()
            + self.recv_buf.allocated_bytes()
            + self.range_tables_bytes()
            + self.events.capacity() * size_of::<Event>()
    }

    /// Ring storage allocated now (send, receive), without the fixed costs.
    pub fn buffer_bytes(&self) -> (usize, usize) {
        (self.send_buf.allocated_bytes(), self.recv_buf.allocated_bytes())
    }

    /// The out-of-order and SACK range tables and RACK's transmit log, as
    /// each reports its own allocation.
    fn range_tables_bytes(&self) -> usize {
        self.assembler.allocated_bytes() + self.rec.scoreboard.allocated_bytes() + self.rec.rack.allocated_bytes()
    }

    /// Frees ring storage that can never be used again (see the module docs).
    /// Called at the end of every input that may change state or drain a ring;
    /// it changes no sequence number, window or queue length.
    ///
    /// External storage (`attach_storage`, a board region) is given back the
    /// same way, under the same rules: dropping it returns the region to its
    /// board, so a board's TIME-WAIT connections hold no regions.
    #[inline]
    pub(super) fn release_idle_buffers(&mut self) {
        // The common case, on every segment: open both ways, nothing to free.
        if self.state != State::Closed && !self.fin_received && self.may_queue_more() {
            return;
        }
        self.release_idle_buffers_closing();
    }

    /// `release_idle_buffers` once a direction is closed.
    #[cold]
    fn release_idle_buffers_closing(&mut self) {
        let closed = self.state == State::Closed;
        if closed || self.snd_una == self.snd_max {
            // Nothing outstanding: RACK's transmit log is empty; free it in CLOSED
            // (and wherever no more data can go).
            self.rec.rack.release_log(closed || !self.may_queue_more());
        }
        let send_held = self.send_buf.allocated_bytes() > 0 || self.send_buf.is_external() || !self.send_buf.is_empty();
        if send_held && (closed || (self.send_buf.is_empty() && !self.may_queue_more())) {
            self.send_buf.release();
        }
        let recv_held = self.recv_buf.allocated_bytes() > 0 || self.recv_buf.is_external();
        if recv_held && self.recv_buf.is_empty() && (closed || self.fin_received) {
            self.recv_buf.release();
            self.recv_epoch = self.recv_epoch.wrapping_add(1);
        }
    }

    /// Whether `send` could still queue bytes (mirrors its checks).
    fn may_queue_more(&self) -> bool {
        self.error.is_none()
            && !self.fin_queued
            && !self.app_closed
            && matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait)
    }
}
