//! The client side of calls.

use crate::addr::MailboxAddr;
use crate::assembly::{Added, Assembly};
use crate::error::CallError;
use crate::io::Io;
use crate::outbox::{Outbox, Payload, RETRANSMIT};
use crate::{CallId, Config, Event};
use outboard_time::{Duration, Instant};

use outboard_wire::msg::{flags, response_status, MsgKind, MsgRepr, MsgStatus};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug)]
struct Call {
    from: u32,
    to: MailboxAddr,
    /// The server's session when the call was first sent (0: not known yet).
    peer_session: u32,
    request: Arc<[u8]>,
    sent_at: Instant,
    retx_at: Instant,
    deadline: Instant,
    tries: u32,
    response: Option<Assembly>,
    /// Request bytes the server holds from the start (its `request-ack`s say).
    req_held: usize,
    /// Request bytes sent so far.
    req_sent: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Client {
    calls: BTreeMap<u64, Call>,
    next_id: u64,
    pub retransmitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub stray_responses: u64,
}

impl Client {
    pub fn outstanding(&self) -> usize {
        self.calls.len()
    }

    /// Every call below this is finished here.
    /// Call numbers from the oldest unfinished call to the next one.
    pub fn span(&self) -> u64 {
        self.next_id.max(1) - self.watermark()
    }

    fn watermark(&self) -> u64 {
        self.calls.keys().next().copied().unwrap_or(self.next_id.max(1))
    }

    pub fn start(&mut self, io: &mut Io, now: Instant, from: u32, to: MailboxAddr, request: Arc<[u8]>, timeout: Duration) -> CallId {
        self.next_id = self.next_id.max(1);
        let id = self.next_id;
        self.next_id += 1;
        let peer = io.peers.get(to.host, io.cfg);
        let call = Call {
            from,
            to,
            peer_session: peer.session,
            request,
            sent_at: now,
            retx_at: now + peer.rtt.rto(),
            deadline: now + timeout,
            tries: 0,
            response: None,
            req_held: 0,
            req_sent: 0,
        };
        self.calls.insert(id, call);
        self.send_request(id, io.cfg, io.session, io.out, false);
        CallId(id)
    }

    /// Sends the request's next window from what the server holds, or, once
    /// it holds all of it, its last fragment alone: a nudge that says how much
    /// of the response is here, so the server sends the rest.
    fn send_request(&mut self, id: u64, cfg: &Config, session: u32, out: &mut Outbox, retransmit: bool) {
        let watermark = self.watermark();
        let Some(c) = self.calls.get_mut(&id) else { return };
        let fp = cfg.frame_payload();
        let repr = MsgRepr {
            flags: if retransmit { RETRANSMIT } else { 0 },
            src_mailbox: c.from,
            dst_mailbox: c.to.mailbox,
            src_session: session,
            dst_session: c.peer_session,
            id,
            ack: watermark,
            credit: c.response.as_ref().map_or(0, Assembly::prefix),
            ..MsgRepr::new(MsgKind::Request)
        };
        let total = c.request.len();
        if total > 0 && c.req_held >= total {
            out.push_window(c.to.host, repr, &c.request, fp, total - 1, 1);
        } else {
            c.req_sent = out.push_window(c.to.host, repr, &c.request, fp, c.req_held, super::WINDOW);
        }
    }

    fn finish(&mut self, id: u64, result: Result<Vec<u8>, CallError>, events: &mut VecDeque<Event>) {
        self.calls.remove(&id);
        match result {
            Ok(_) => self.completed += 1,
            Err(_) => self.failed += 1,
        }
        events.push_back(Event::CallDone { call: CallId(id), result });
    }

    pub fn on_response(&mut self, io: &mut Io, now: Instant, src: SocketAddr, repr: &MsgRepr, payload: &[u8]) {
        let session = io.session;
        let ack = |out: &mut Outbox| {
            let r = MsgRepr {
                src_mailbox: repr.dst_mailbox,
                dst_mailbox: repr.src_mailbox,
                src_session: session,
                dst_session: repr.src_session,
                id: repr.id,
                ..MsgRepr::new(MsgKind::ResponseAck)
            };
            out.push(src, r, Payload::None);
        };
        let Some(c) = self.calls.get_mut(&repr.id) else {
            // Finished here already: tell the server again so it can let the reply go.
            if repr.id < self.next_id {
                ack(io.out);
            }
            self.stray_responses += 1;
            return;
        };
        if c.to.host != src || c.to.mailbox != repr.src_mailbox || (c.peer_session != 0 && c.peer_session != repr.src_session) {
            self.stray_responses += 1;
            return;
        }
        let peer = io.peers.get(src, io.cfg);
        peer.session = repr.src_session;
        // A response means the server has the whole request.
        c.req_held = c.request.len();
        if c.tries == 0 && c.response.is_none() {
            peer.rtt.on_sample(now.saturating_duration_since(c.sent_at));
        }
        // The response is on its way: no re-sending the request while it flows.
        c.retx_at = now + peer.rtt.rto();
        let complete = if c.response.is_none() && repr.offset == 0 && payload.len() == repr.total_len as usize {
            Some(payload.to_vec())
        } else {
            let a = c
                .response
                .get_or_insert_with(|| Assembly::new(repr.total_len, c.deadline));
            match a.add(repr.total_len, repr.offset, payload) {
                Added::Complete => c.response.take().map(Assembly::into_bytes),
                _ => None,
            }
        };
        if let Some(data) = complete {
            ack(io.out);
            let result = if repr.status == response_status::FAILED { Err(CallError::Failed) } else { Ok(data) };
            self.finish(repr.id, result, io.events);
        } else if repr.flags & flags::ACK_NOW != 0 {
            // The end of the server's window: say how much we hold.
            self.send_request(repr.id, io.cfg, io.session, io.out, false);
        }
    }

    /// The server holds `held` bytes of the request: all of them (it is
    /// serving it: wait longer before re-sending), or a prefix (send on).
    pub fn on_request_ack(&mut self, io: &mut Io, now: Instant, src: SocketAddr, id: u64, held: usize) {
        let Some(c) = self.calls.get_mut(&id) else { return };
        if c.to.host != src {
            return;
        }
        let rto = io.peers.get(src, io.cfg).rtt.rto();
        if held >= c.request.len() {
            c.req_held = c.request.len();
            c.retx_at = now + rto * 4;
        } else if held > c.req_held {
            c.req_held = held;
            c.retx_at = now + rto;
            self.send_request(id, io.cfg, io.session, io.out, false);
        }
    }

    /// The server is busy: wait before re-sending.
    fn back_off(&mut self, io: &mut Io, now: Instant, src: SocketAddr, id: u64) {
        if let Some(c) = self.calls.get_mut(&id).filter(|c| c.to.host == src) {
            c.retx_at = now + io.peers.get(src, io.cfg).rtt.rto() * 4;
        }
    }

    pub fn on_error(&mut self, io: &mut Io, now: Instant, src: SocketAddr, repr: &MsgRepr) {
        let Some(c) = self.calls.get(&repr.id) else { return };
        if c.to.host != src {
            return;
        }
        match repr.error_status() {
            Some(MsgStatus::NoMailbox) => self.finish(repr.id, Err(CallError::NoMailbox), io.events),
            Some(MsgStatus::StaleSession) => self.finish(repr.id, Err(CallError::ServerRestarted), io.events),
            Some(MsgStatus::Busy) => self.back_off(io, now, src, repr.id),
            _ => {}
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.calls.values().map(|c| c.retx_at.min(c.deadline)).min()
    }

    pub fn on_timeout(&mut self, io: &mut Io, now: Instant) {
        let due: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| now >= c.retx_at || now >= c.deadline)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            let c = self.calls.get_mut(&id).expect("listed");
            if now >= c.deadline {
                self.finish(id, Err(CallError::TimedOut), io.events);
                continue;
            }
            c.tries += 1;
            let base = io.peers.get(c.to.host, io.cfg).rtt.rto();
            let backoff = base.saturating_mul(1 << c.tries.min(16));
            c.retx_at = now + backoff.min(io.cfg.max_rto);
            self.retransmitted += 1;
            self.send_request(id, io.cfg, io.session, io.out, true);
        }
    }
}
