//! Rings in lent storage and the calls that let data be copied once each way.
//!
//! An engine that shares memory ("boards") with the application moves both
//! rings into it (`attach_storage`). The application then reads received
//! bytes where they lie and says how many it took (`recv_consume`), and
//! writes bytes to send straight into the send ring's free space and says
//! how many (`send_in_place`). Positions are fixed: after the attach, byte
//! `k` of each stream — counted from the first unread receive byte or the
//! first unacknowledged send byte at attach time — sits at storage index
//! `k % capacity` (the ring's head only advances), so the application finds
//! bytes by counting, without asking.
//!
//! The receive copy is also where the TCP checksum is summed (the fused
//! receive path, DESIGN.md §7): `prefill_payload` copies a segment's payload
//! into free ring space at its sequence offset while summing it, changing
//! no connection state; the caller finishes the checksum and, only if it
//! verifies, hands the segment over with `handle_segment_prefilled`, which
//! processes it normally but does not copy the payload again. A segment
//! that fails the checksum left bytes only in space that was free and held
//! nothing (no queued or parked byte), so it changed nothing.

use super::{Connection, Error, State};
use crate::ring::RingStorage;
use outboard_wire::checksum::{copy_and_checksum, Accumulator, PartialSum};
use outboard_wire::{SeqNumber, TcpRepr};
use std::iter::once;

/// A payload `prefill_payload` wrote into the receive ring, with its sum.
/// Only `prefill_payload` makes one; `handle_segment_prefilled` takes it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefilled {
    seq: SeqNumber,
    len: usize,
    /// RCV.NXT when written: the payload sits at ring offset `seq - rcv_nxt`.
    rcv_nxt: SeqNumber,
    epoch: u32,
    sum: PartialSum,
}

impl Prefilled {
    /// The ones-complement sum of the payload, summed during the copy: add
    /// the pseudo-header and TCP header to verify the segment
    /// (`TcpPacket::verify_checksum_with`).
    pub fn sum(&self) -> PartialSum {
        self.sum
    }
    /// Payload bytes copied into the ring.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Connection {
    /// Moves both rings into external storage (a board's shared memory),
    /// copying the bytes queued now — and out-of-order receive bytes parked
    /// past them — so that the first queued byte of each sits at index 0.
    /// From then on byte `k` of each stream, counted from that first byte
    /// (receive: first unread; send: first unacknowledged), lives at index
    /// `k % capacity` for good. The storages' lengths become the
    /// capacities. Returns the bytes copied.
    ///
    /// Requirement: each storage is at least as large as the ring's
    /// capacity now (the configured buffer sizes before any attach). A
    /// smaller receive ring could not hold the window already advertised,
    /// which may not shrink (RFC 9293 §3.8.6.2.2, RFC 7323 §2.4); checked in
    /// debug builds, while the queued and parked bytes must fit always.
    /// Whether rings of `send` and `recv` bytes can take this connection's
    /// (what `attach_storage` requires): at least each buffer's capacity,
    /// and room for every queued and parked byte.
    pub fn storage_fits(&self, send: usize, recv: usize) -> bool {
        let parked_end = self.assembler.ranges().last().map_or(0, |(_, e)| e);
        send >= self.send_buf.capacity() && recv >= self.recv_buf.capacity() && self.recv_buf.len() + parked_end <= recv
    }

    /// Whether either ring lives in lent storage (a board's region): then a
    /// record of this connection carries the rings' positions and the
    /// storages' lengths, not their bytes (live upgrade).
    pub fn in_lent_storage(&self) -> bool {
        self.send_buf.is_external() || self.recv_buf.is_external()
    }

    /// Live upgrade: a connection read back from a record whose rings were
    /// in lent storage (`in_lent_storage` when recorded) gets the same
    /// memory again — the board regions the old engine had attached
    /// (`attach_storage`), mapped by this process. Nothing is copied: the
    /// bytes never left the shared memory, and the positions are the
    /// record's. Then `check_restored`. An error (the connection unusable)
    /// if its rings were not lent or a storage's length is not the recorded one.
    pub fn rebind_storage(&mut self, send: Box<dyn RingStorage>, recv: Box<dyn RingStorage>) -> Result<(), String> {
        self.rebind_lent(Some(send), Some(recv))
    }

    /// [`rebind_storage`](Self::rebind_storage) for each ring on its own: a
    /// ring that gave its lent storage back before it was recorded (the
    /// send ring of a closing stream, every byte acknowledged) gets None,
    /// and must not be waiting for storage.
    pub fn rebind_lent(&mut self, send: Option<Box<dyn RingStorage>>, recv: Option<Box<dyn RingStorage>>) -> Result<(), String> {
        for (ring, storage, what) in [(&mut self.send_buf, send, "send buffer"), (&mut self.recv_buf, recv, "receive buffer")] {
            match storage {
                Some(s) => ring.rebind(s).map_err(|e| format!("{what}: {e}"))?,
                None if ring.is_unbound() => return Err(format!("{what}: recorded in lent storage, and none given")),
                None => {}
            }
        }
        self.recv_epoch = self.recv_epoch.wrapping_add(1);
        Ok(())
    }

    /// Where each ring's lent storage is (send, receive), for the record
    /// of a live upgrade (`RingStorage::place`).
    pub fn lent_places(&self) -> (Option<crate::ring::Place>, Option<crate::ring::Place>) {
        (self.send_buf.lent_place(), self.recv_buf.lent_place())
    }

    pub fn attach_storage(&mut self, send: Box<dyn RingStorage>, recv: Box<dyn RingStorage>) -> usize {
        debug_assert!(
            send.bytes().len() >= self.send_buf.capacity(),
            "send storage {} < send buffer {}",
            send.bytes().len(),
            self.send_buf.capacity()
        );
        debug_assert!(
            recv.bytes().len() >= self.recv_buf.capacity(),
            "receive storage {} < receive buffer {}",
            recv.bytes().len(),
            self.recv_buf.capacity()
        );
        let sent = self.send_buf.len();
        let mut moved = self.send_buf.attach(send, once((0, sent)));
        // Parked bytes sit at their offset from RCV.NXT, past the queued ones.
        let queued = self.recv_buf.len();
        let parked_end = self.assembler.ranges().last().map_or(0, |(_, e)| e);
        assert!(
            queued + parked_end <= recv.bytes().len(),
            "attach_storage: {queued} queued and {parked_end} parked bytes do not fit in {}",
            recv.bytes().len()
        );
        let parked = self.assembler.ranges().map(|(s, e)| (queued + s, queued + e));
        moved += self.recv_buf.attach(recv, once((0, queued)).chain(parked));
        self.recv_epoch = self.recv_epoch.wrapping_add(1);
        moved
    }

    /// `send` for bytes the application already wrote into the send ring's
    /// free space, right after the queued bytes (with external storage at
    /// index `(first unacknowledged + send_queued) % capacity`; see
    /// `send_space_mut` otherwise): queues up to `n` of them, as many as
    /// fit. Same errors, `Writable` request and sending (Nagle) as `send`.
    pub fn send_in_place(&mut self, n: usize) -> Result<usize, Error> {
        self.check_sendable()?;
        if n == 0 {
            return Ok(0);
        }
        self.rate_check_app_limited();
        let queued = n.min(self.send_buf.free());
        self.send_buf.enqueue_unqueued(queued);
        self.sent_short(queued, n)
    }

    /// `recv` without the copy: the application read up to `n` bytes in
    /// place (`recv_slices`, or its board) and they are dropped from the
    /// receive ring. Returns how many; the window opens as after `recv`.
    pub fn recv_consume(&mut self, n: usize) -> usize {
        let n = n.min(self.recv_buf.len());
        if n == 0 {
            return 0;
        }
        self.recv_buf.consume(n);
        self.on_app_read();
        self.release_idle_buffers();
        n
    }

    /// Bytes in the send ring: sent but unacknowledged, plus not yet sent.
    pub fn send_queued(&self) -> usize {
        self.send_buf.len()
    }

    /// The bytes ready to read, in place, as at most two slices (the second
    /// non-empty when they wrap); `recv_consume` drops them.
    pub fn recv_slices(&self) -> (&[u8], &[u8]) {
        self.recv_buf.peek(0, self.recv_buf.len())
    }

    /// The queued send bytes `[offset, offset + len)` (clamped to what is
    /// queued), as at most two slices: for looking at what was just queued.
    pub fn send_peek(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        self.send_buf.peek(offset, len)
    }

    /// The send ring's free space after the queued bytes (`send_capacity`
    /// bytes; none once sending is over), as at most two writable slices
    /// to fill before `send_in_place`. An owned ring allocates its whole
    /// storage for this.
    pub fn send_space_mut(&mut self) -> (&mut [u8], &mut [u8]) {
        let room = self.send_capacity();
        self.send_buf.unqueued_mut(0, room)
    }

    /// Storage indices of the first unacknowledged send byte and the first
    /// unread receive byte. With external storage: the bytes acknowledged
    /// (consumed) since the attach, modulo the capacity.
    pub fn ring_heads(&self) -> (usize, usize) {
        (self.send_buf.head(), self.recv_buf.head())
    }

    /// Payload bytes copied into the receive ring so far (`ConnStats::rx_copied_bytes`).
    pub fn rx_copied_bytes(&self) -> u64 {
        self.stats.rx_copied_bytes
    }

    /// The fused receive path, first half: if the whole payload of this
    /// segment would be placed in the receive ring as it is (a synchronized
    /// state that takes data, no trimming, free space for it that holds no
    /// parked out-of-order bytes and needs no allocation), copies it there
    /// at its sequence offset while summing it. Nothing else changes:
    /// the bytes land in free space, and a segment that then fails its
    /// checksum is simply never handed over. None (nothing written) when
    /// the payload must go the ordinary way (`handle_segment`).
    pub fn prefill_payload(&mut self, repr: &TcpRepr, payload: &[u8]) -> Option<Prefilled> {
        let f = repr.flags;
        let receiving = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        // SYN and RST segments are answered, not placed; data after close()
        // is answered with RST (RFC 9293 §3.10.4); a segment without ACK is dropped.
        if payload.is_empty() || !receiving || self.app_closed || f.syn() || f.rst() || !f.ack() {
            return None;
        }
        // Only what `process_text` would place untrimmed: inside [RCV.NXT, right edge).
        let edge = self.rcv_adv.max(self.rcv_nxt);
        if repr.seq < self.rcv_nxt || repr.seq + payload.len() > edge {
            return None;
        }
        let offset = super::recovery::seq_sub(repr.seq, self.rcv_nxt);
        let end = offset + payload.len();
        // A corrupt segment must not overwrite good parked bytes (nor may a
        // good one, whose overlap the assembler would then merge as held).
        let overlaps = self.assembler.ranges().any(|(s, e)| s < end && offset < e);
        if overlaps || !self.recv_buf.has_room_unqueued(offset, payload.len()) {
            return None;
        }
        let (a, b) = self.recv_buf.unqueued_mut(offset, payload.len());
        let mut acc = Accumulator::new();
        acc.add_partial(copy_and_checksum(a, &payload[..a.len()]));
        if !b.is_empty() {
            // Only a payload that wraps the ring's end has a second piece.
            acc.add_partial(copy_and_checksum(b, &payload[a.len()..]));
        }
        Some(Prefilled {
            seq: repr.seq,
            len: payload.len(),
            rcv_nxt: self.rcv_nxt,
            epoch: self.recv_epoch,
            sum: acc.partial(),
        })
    }

    /// The fused receive path, second half: `handle_segment` for a segment
    /// whose checksum verified with `placed.sum()`, where `placed` came from
    /// `prefill_payload(repr, payload)` on this connection with no other
    /// call in between. The payload is not copied again when it is placed
    /// where it was prefilled (checked; otherwise it is copied as usual).
    pub fn handle_segment_prefilled(
        &mut self,
        now: outboard_time::Instant,
        repr: &TcpRepr,
        payload: &[u8],
        placed: Prefilled,
    ) {
        self.stats.rx_copied_bytes += placed.len as u64;
        if self.predicted(now, repr, payload.len(), &placed) {
            return self.take_predicted(now, repr, payload);
        }
        self.rx_prefilled = Some(placed);
        self.handle_segment(now, repr, payload);
        self.rx_prefilled = None;
    }

    /// Whether the payload `[seq, seq + len)` is already in the ring where
    /// `place_data` would write it now.
    pub(super) fn is_prefilled(&self, seq: SeqNumber, len: usize) -> bool {
        self.rx_prefilled.is_some_and(|p| self.prefilled_here(&p, seq, len))
    }

    /// Whether `p` holds exactly the payload `[seq, seq + len)` where
    /// `place_data` would write it now.
    pub(super) fn prefilled_here(&self, p: &Prefilled, seq: SeqNumber, len: usize) -> bool {
        p.seq == seq && p.len == len && p.rcv_nxt == self.rcv_nxt && p.epoch == self.recv_epoch
    }

    /// Debug check of the fused path: the ring holds `data` at `offset`.
    pub(super) fn prefilled_bytes_match(&self, offset: usize, data: &[u8]) -> bool {
        let store = self.recv_buf.storage_bytes();
        if store.is_empty() {
            return data.is_empty();
        }
        let start = (self.recv_buf.head() + self.recv_buf.len() + offset) % store.len();
        let first = data.len().min(store.len() - start);
        store[start..start + first] == data[..first] && store[..data.len() - first] == data[first..]
    }
}
