//! TCP segment demultiplexing: to the connection owning the 4-tuple, else to
//! a listener on the port, else an RST (RFC 9293 §3.10.7.1).

use crate::stats::StackStats;
use crate::ConnId;
use crate::tcp_table::{Owner, TcpTable};
use outboard_tcp::{FourTuple, IcmpError, Prefilled, State};
use outboard_time::Instant;
use outboard_wire::{SeqNumber, TcpRepr};

pub(crate) use outboard_tcp::reset::reset_for;

impl TcpTable {
    /// The fused receive path's first half (DESIGN.md §7): the connection
    /// owning `tuple` copies the payload into its receive ring while
    /// summing it, if it can take it there as it is (`Connection::prefill_payload`).
    /// Also returns the connection found, for `segment_input` (one lookup of
    /// the 4-tuple per segment, not two). No `Prefilled`, with nothing
    /// written, when the segment must be verified first.
    pub(crate) fn prefill(
        &mut self,
        tuple: &FourTuple,
        repr: &TcpRepr,
        payload: &[u8],
    ) -> (Option<ConnId>, Option<Prefilled>) {
        let Some(&id) = self.by_tuple.get(tuple) else { return (None, None) };
        let prefilled = self.conns.get_mut(&id).and_then(|e| e.conn.prefill_payload(repr, payload));
        (Some(id), prefilled)
    }

    /// One received segment for `tuple` (from our side), its checksum
    /// verified; `prefilled` when `prefill` already placed its payload, and
    /// `found`, the connection `prefill` found for the tuple (looked up here
    /// when None: nothing changes the table between the two).
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
                let copied = e.conn.rx_copied_bytes();
                match prefilled {
                    Some(p) => e.conn.handle_segment_prefilled(now, repr, payload, p),
                    None => e.conn.handle_segment(now, repr, payload),
                }
                stats.tcp_rx_payload_copied += e.conn.rx_copied_bytes() - copied;
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
                    self.sched.settle(id, e, true) && self.free(id).is_some()
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
