//! Name lookups: "which mailbox on that engine is called NAME?", asked of
//! the engine's control mailbox (0) and re-asked until answered or timed out.
//! Lookups are idempotent, so the answering side keeps no state.

use crate::addr::MailboxAddr;
use crate::error::LookupError;
use crate::io::Io;
use crate::outbox::{Payload, RETRANSMIT};
use crate::{Event, LookupId};
use outboard_time::Instant;
use outboard_wire::msg::{MsgKind, MsgRepr, MsgStatus, CONTROL_MAILBOX};
use outboard_wire::flowhash::FlowMap;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug)]
struct Lookup {
    host: SocketAddr,
    name: Arc<str>,
    retx_at: Instant,
    deadline: Instant,
    tries: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Lookups {
    pending: FlowMap<u64, Lookup>,
    next_id: u64,
}

fn lookup_repr(session: u32, id: u64, retransmit: bool) -> MsgRepr {
    MsgRepr {
        flags: if retransmit { RETRANSMIT } else { 0 },
        dst_mailbox: CONTROL_MAILBOX,
        src_session: session,
        id,
        ..MsgRepr::new(MsgKind::Lookup)
    }
}

impl Lookups {
    pub fn start(&mut self, io: &mut Io, now: Instant, host: SocketAddr, name: &str) -> LookupId {
        self.next_id += 1;
        let id = self.next_id;
        let name: Arc<str> = name.into();
        io.out.push(host, lookup_repr(io.session, id, false), Payload::Name(name.clone()));
        let retx_at = now + io.peers.get(host, io.cfg).rtt.rto();
        self.pending.insert(id, Lookup { host, name, retx_at, deadline: now + io.cfg.call_timeout, tries: 0 });
        LookupId(id)
    }

    /// A reply or a refusal from `src` for lookup `id`.
    pub fn on_answer(&mut self, src: SocketAddr, repr: &MsgRepr, events: &mut VecDeque<Event>) {
        let Some(l) = self.pending.get(&repr.id) else { return };
        if l.host != src {
            return;
        }
        let result = match repr.kind {
            MsgKind::LookupReply => Ok(MailboxAddr::new(src, repr.src_mailbox)),
            _ if repr.error_status() == Some(MsgStatus::NoName) => Err(LookupError::NoName),
            _ => return,
        };
        self.pending.remove(&repr.id);
        events.push_back(Event::LookupDone { lookup: LookupId(repr.id), result });
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.pending.values().map(|l| l.retx_at.min(l.deadline)).min()
    }

    pub fn on_timeout(&mut self, io: &mut Io, now: Instant) {
        let mut done = Vec::new();
        for (&id, l) in self.pending.iter_mut() {
            if now >= l.deadline {
                done.push(id);
            } else if now >= l.retx_at {
                l.tries += 1;
                let rto = io.peers.get(l.host, io.cfg).rtt.rto().saturating_mul(1 << l.tries.min(16));
                l.retx_at = now + rto.min(io.cfg.max_rto);
                io.out.push(l.host, lookup_repr(io.session, id, true), Payload::Name(l.name.clone()));
            }
        }
        for id in done {
            self.pending.remove(&id);
            io.events.push_back(Event::LookupDone { lookup: LookupId(id), result: Err(LookupError::TimedOut) });
        }
    }
}

/// The answer to a lookup frame for `name` (the payload) from the names bound here.
pub(crate) fn answer(names: &FlowMap<String, u32>, session: u32, repr: &MsgRepr, payload: &[u8]) -> Result<MsgRepr, MsgStatus> {
    let number = std::str::from_utf8(payload).ok().and_then(|n| names.get(n)).ok_or(MsgStatus::NoName)?;
    Ok(MsgRepr {
        src_mailbox: *number,
        dst_mailbox: repr.src_mailbox,
        src_session: session,
        dst_session: repr.src_session,
        id: repr.id,
        ..MsgRepr::new(MsgKind::LookupReply)
    })
}
