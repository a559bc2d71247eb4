//! TCP segment demultiplexing: to the connection owning the 4-tuple, else to
//! a listener on the port, else an RST (RFC 9293 §3.10.7.1).

use crate::stats::StackStats;
use crate::ConnId;
use crate::tcp_table::{Entry, Owner, TcpTable};
use outboard_tcp::{FourTuple, IcmpError, Prefilled, State};
use outboard_time::Instant;
use outboard_wire::{PartialSum, SeqNumber, TcpRepr};

pub(crate) use outboard_tcp::reset::reset_for;

impl TcpTable {
    /// A segment whose checksum the link did not vouch for, through the
    /// fused receive path (DESIGN.md §7): the connection owning `tuple`
    /// copies the payload into its receive ring while summing it, if it can
    /// take it there as it is (`Connection::prefill_payload`); `verify` then
    /// checks the segment with that sum (or, with None, sums it alone), and
    /// only a segment that passes goes further. One lookup of the 4-tuple
    /// and one of the connection: the entry found serves the whole segment
    /// when it is an ordinary one for an ordinary connection, else
    /// `segment_input` takes over. `ce`: the IP header carried CE.
    pub(crate) fn fused_input(
        &mut self,
        now: Instant,
        tuple: &FourTuple,
        (repr, payload): (&TcpRepr, &[u8]),
        ce: bool,
        verify: impl FnOnce(Option<PartialSum>) -> bool,
        stats: &mut StackStats,
    ) -> Option<TcpRepr> {
        let id = self.by_tuple.get(tuple).copied();
        let mut entry = id.and_then(|id| self.conns.get_mut(&id));
        let prefilled = entry.as_mut().and_then(|e| e.conn.prefill_payload(repr, payload));
        if !verify(prefilled.map(|p| p.sum())) {
            if prefilled.is_some() {
                // Copied, and wasted: the bytes sit in free ring space unused.
                stats.tcp_rx_payload_copied += payload.len() as u64;
            }
            stats.drops_checksum += 1;
            return None;
        }
        if !payload.is_empty() {
            if prefilled.is_some() {
                stats.tcp_rx_fused_segments += 1;
            } else {
                stats.tcp_rx_unfused_segments += 1;
            }
        }
        stats.tcp_segments_in += 1;
        if ce {
            ce_mark(entry.as_deref_mut(), stats);
        }
        if let (Some(id), Some(e)) = (id, entry) {
            let state = e.conn.state();
            let plain = matches!(e.owner, Owner::App | Owner::Queued(_) | Owner::Released)
                && !matches!(state, State::SynSent | State::TimeWait);
            if plain {
                // What `segment_input` does for such a one, without looking it up again.
                take_segment(e, now, (repr, payload), prefilled, stats);
                if self.sched.settle_changed(id, e, now) && self.remove(id).is_some() {
                    stats.tcp_connections_freed += 1;
                }
                return None;
            }
        }
        self.segment_input(now, tuple, (repr, payload), (id, prefilled), stats)
    }

    /// RFC 3168 §6.1.3: a segment for `tuple` arrived with CE; its
    /// connection echoes it (if it negotiated ECN).
    pub(crate) fn ce_input(&mut self, tuple: &FourTuple, stats: &mut StackStats) {
        ce_mark(self.by_tuple.get(tuple).and_then(|id| self.conns.get_mut(id)), stats);
    }

    /// One received segment for `tuple` (from our side), its checksum
    /// verified; `prefilled` when `fused_input` already placed its payload,
    /// and `found`, the connection `fused_input` found for the tuple (looked
    /// up here when None: nothing changes the table between the two).
    /// Returns a control segment to send in reply when no connection owns
    /// the segment.
    pub(crate) fn segment_input(
        &mut self,
        now: Instant,
        tuple: &FourTuple,
        (repr, payload): (&TcpRepr, &[u8]),
        (found, prefilled): (Option<ConnId>, Option<Prefilled>),
        stats: &mut StackStats,
    ) -> Option<TcpRepr> {
        if let Some(id) = found.or_else(|| self.by_tuple.get(tuple).copied()) {
            // Invariant: by_tuple and conns change together.
            let e = self
                .conns
                .get_mut(&id)
                .expect("tuple map points at a connection");
            let state = e.conn.state();
            let new_syn = repr.flags.syn() && !repr.flags.ack();
            if state == State::TimeWait
                && new_syn
                && matches!(e.owner, Owner::Released)
                && self.listener_by_port.contains_key(&tuple.local.port())
            {
                // RFC 9293 §3.10.7.4 / RFC 6191: a new SYN may reopen a
                // connection in TIME-WAIT; the old one is done with.
                self.evict(id);
                stats.tcp_connections_freed += 1;
            } else {
                if let Owner::Embryonic(lid) = e.owner {
                    let full = self
                        .listeners
                        .get(&lid)
                        .is_some_and(|l| l.accept_queue_full());
                    if full
                        && state == State::SynReceived
                        && repr.flags.ack()
                        && !repr.flags.rst()
                        && !repr.flags.syn()
                    {
                        // The ACK would complete a handshake nobody has room to
                        // accept: drop it, our SYN-ACK retransmission asks again.
                        stats.drops_tcp_accept_queue_full += 1;
                        return None;
                    }
                }
                take_segment(e, now, (repr, payload), prefilled, stats);
                // (A connection in SYN-SENT is ours, never embryonic: learning
                // its Fast Open cookie below does not change this.)
                let embryonic_done = matches!(e.owner, Owner::Embryonic(_))
                    && !matches!(e.conn.state(), State::SynReceived | State::Closed);
                let freed = if state == State::SynSent || embryonic_done {
                    if state == State::SynSent {
                        // RFC 7413: the SYN-ACK's cookie and what became of our SYN's data.
                        self.fast_open_learn(now, id, stats);
                    }
                    if embryonic_done {
                        self.promote(id);
                        stats.tcp_connections_accepted += 1;
                    }
                    self.ready_and_settle(id).is_some()
                } else {
                    // The common case: settled on the entry in hand, no second lookup.
                    self.sched.settle_changed(id, e, now) && self.remove(id).is_some()
                };
                if freed {
                    stats.tcp_connections_freed += 1;
                }
                return None;
            }
        }
        if let Some(lid) = self.listener_for(tuple) {
            let reply = self.listener_input(now, lid, *tuple, repr, payload, stats);
            if let Some(id) = self.by_tuple.get(tuple).copied() {
                if self
                    .conns
                    .get(&id)
                    .is_some_and(|e| matches!(e.owner, Owner::Queued(_)))
                {
                    // A cookie handshake completed: the connection is established.
                    stats.tcp_connections_accepted += 1;
                }
            }
            return reply;
        }
        let reply = reset_for(repr, payload.len());
        if reply.is_none() {
            stats.tcp_no_match += 1;
        }
        reply
    }

    /// An ICMP error quoting a segment we sent on `tuple` (RFC 1122 §4.2.3.9)
    /// whose quoted sequence number is `seq`. True if a connection took it:
    /// one must own the tuple, and RFC 5927 §4.1 wants `seq` to be data it
    /// has in flight (`Connection::handle_icmp_quoting`).
    pub(crate) fn icmp_input(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        seq: SeqNumber,
        err: IcmpError,
    ) -> bool {
        let Some(&id) = self.by_tuple.get(&tuple) else {
            return false;
        };
        let Some(e) = self.conns.get_mut(&id) else {
            return false;
        };
        if !e.conn.handle_icmp_quoting(now, seq, err) {
            return false;
        }
        self.mark_ready(id);
        self.settle(id);
        true
    }
}

/// The connection of `e` takes a segment (`prefilled`: its payload is in
/// the ring already); the stack counts what it copied.
fn take_segment(
    e: &mut Entry,
    now: Instant,
    (repr, payload): (&TcpRepr, &[u8]),
    prefilled: Option<Prefilled>,
    stats: &mut StackStats,
) {
    let copied = e.conn.rx_copied_bytes();
    match prefilled {
        Some(p) => e.conn.handle_segment_prefilled(now, repr, payload, p),
        None => e.conn.handle_segment(now, repr, payload),
    }
    stats.tcp_rx_payload_copied += e.conn.rx_copied_bytes() - copied;
}

/// A segment arrived with CE: counted, and noted by its connection `e`, if any.
fn ce_mark(e: Option<&mut Entry>, stats: &mut StackStats) {
    stats.tcp_ce_marks_in += 1;
    if let Some(e) = e {
        e.conn.note_ce();
    }
}
