//! One message-protocol endpoint: the mailboxes bound on it and the three
//! services' state, fed UDP payloads and time, giving back UDP payloads,
//! events and one deadline.

use crate::addr::MailboxAddr;
use crate::assembly::{Added, Assembly};
use crate::error::{BindError, MessageError, SendError};
use crate::io::io;
use crate::lookup::{self, Lookups};
use crate::mailbox::{cost, Delivery, DeliveryKind, Mailbox, MailboxInfo};
use crate::outbox::{Outbox, Payload};
use crate::peers::Peers;
use crate::reliable::recv::{FrameFate, RecvFlow};
use crate::reliable::send::SendFlow;
use crate::rpc::client::Client;
use crate::rpc::server::{RequestOutcome, Server};
use crate::{CallId, CallToken, Config, Event, LookupId, MessageId, Stats};
use outboard_time::{Duration, Instant};
use outboard_wire::msg::{flags, response_status, MsgKind, MsgPacket, MsgRepr, MsgStatus, CONTROL_MAILBOX, MAX_NAME_LEN};
use outboard_wire::Error as WireError;
use std::cell::Cell;
use outboard_wire::flowhash::FlowMap;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

/// Numbers `bind` hands out when asked for none.
const AUTO_MAILBOXES: u32 = 0x8000_0000;

/// A flow that sent nothing for this long gives back its unused credit
/// when another flow into the same mailbox is short of it.
const RECLAIM_IDLE: Duration = Duration::from_millis(50);

/// (sender's endpoint, sender's mailbox, our mailbox).
type RecvKey = (SocketAddr, u32, u32);
/// (sender's endpoint, its session, sender's mailbox, our mailbox, datagram id).
type DatagramKey = (SocketAddr, u32, u32, u32, u64);

#[derive(Debug)]
pub struct Endpoint {
    cfg: Config,
    session: u32,
    frame_cost: usize,
    mailboxes: FlowMap<u32, Mailbox>,
    names: FlowMap<String, u32>,
    next_auto: u32,
    send_flows: FlowMap<(u32, MailboxAddr), SendFlow>,
    next_incarnation: u64,
    next_message: u64,
    recv_flows: FlowMap<RecvKey, RecvFlow>,
    datagrams: FlowMap<DatagramKey, Assembly>,
    datagram_memory: usize,
    next_datagram: u64,
    client: Client,
    server: Server,
    lookups: Lookups,
    peers: Peers,
    out: Outbox,
    events: VecDeque<Event>,
    stats: Stats,
    /// (second, errors sent in it).
    error_window: (u64, u32),
    /// When to look for idle flows' credit (some flow is short of it).
    reclaim_at: Option<Instant>,
    /// `poll_timeout`'s answer, until something changes.
    deadline: Cell<Option<Option<Instant>>>,
}

impl Endpoint {
    /// An endpoint with `cfg` (validate it first) and this incarnation's
    /// session number (nonzero; 0 is taken as 1).
    pub fn new(cfg: Config, session: u32) -> Endpoint {
        let frame_cost = cost(cfg.frame_payload());
        Endpoint {
            cfg,
            session: session.max(1),
            frame_cost,
            mailboxes: FlowMap::default(),
            names: FlowMap::default(),
            next_auto: AUTO_MAILBOXES,
            send_flows: FlowMap::default(),
            next_incarnation: 1,
            next_message: 1,
            recv_flows: FlowMap::default(),
            datagrams: FlowMap::default(),
            datagram_memory: 0,
            next_datagram: 1,
            client: Client::default(),
            server: Server::default(),
            lookups: Lookups::default(),
            peers: Peers::default(),
            out: Outbox::default(),
            events: VecDeque::new(),
            stats: Stats::default(),
            error_window: (0, 0),
            reclaim_at: None,
            deadline: Cell::new(None),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn session(&self) -> u32 {
        self.session
    }

    /// Counters, with the services' own folded in.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.calls_completed = self.client.completed;
        s.calls_failed = self.client.failed;
        s.requests_retransmitted = self.client.retransmitted;
        s.drop_stray += self.client.stray_responses;
        s.requests_executed = self.server.executed;
        s.replies_resent = self.server.replies_resent;
        s.duplicate_requests = self.server.duplicates;
        s.stale_requests = self.server.stale;
        s.requests_abandoned = self.server.abandoned;
        s.message_frames_retransmitted += self.send_flows.values().map(|f| f.retransmitted_frames).sum::<u64>();
        s.probes_sent += self.send_flows.values().map(|f| f.probes_sent).sum::<u64>();
        s.bad_fragments += self.recv_flows.values().map(|f| f.bad_fragments).sum::<u64>();
        s
    }

    fn touch(&self) {
        self.deadline.set(None);
    }

    // --- mailboxes ---

    /// Binds a mailbox: `number` (or the next free automatic one, from
    /// 0x80000000), optionally with a `name` peers can look up. Returns its number.
    pub fn bind(&mut self, number: Option<u32>, name: Option<&str>) -> Result<u32, BindError> {
        self.bind_with_capacity(number, name, self.cfg.mailbox_capacity)
    }

    /// [`bind`](Self::bind) with a byte budget of its own.
    pub fn bind_with_capacity(&mut self, number: Option<u32>, name: Option<&str>, capacity: usize) -> Result<u32, BindError> {
        if let Some(n) = name {
            if n.is_empty() || n.len() > MAX_NAME_LEN {
                return Err(BindError::BadName);
            }
            if self.names.contains_key(n) {
                return Err(BindError::NameInUse(n.to_string()));
            }
        }
        let number = match number {
            Some(n) if n == CONTROL_MAILBOX || self.mailboxes.contains_key(&n) => return Err(BindError::NumberInUse(n)),
            Some(n) => n,
            None => {
                let start = self.next_auto;
                loop {
                    let n = self.next_auto;
                    self.next_auto = self.next_auto.checked_add(1).unwrap_or(AUTO_MAILBOXES);
                    if !self.mailboxes.contains_key(&n) {
                        break n;
                    }
                    if self.next_auto == start {
                        return Err(BindError::NoNumbers);
                    }
                }
            }
        };
        let capacity = capacity.max(2 * self.frame_cost);
        self.mailboxes.insert(number, Mailbox::new(number, name.map(str::to_string), capacity));
        if let Some(n) = name {
            self.names.insert(n.to_string(), number);
        }
        Ok(number)
    }

    /// Unbinds a mailbox: what waits in it is dropped, flows into it forgotten
    /// (their senders are told "no mailbox"), flows out of it failed.
    pub fn unbind(&mut self, number: u32) -> bool {
        self.touch();
        let Some(mb) = self.mailboxes.remove(&number) else { return false };
        if let Some(n) = mb.name {
            self.names.remove(&n);
        }
        self.recv_flows.retain(|k, _| k.2 != number);
        let keys: Vec<_> = self.send_flows.keys().filter(|k| k.0 == number).copied().collect();
        for k in keys {
            self.fail_flow(k, MessageError::NoMailbox);
        }
        true
    }

    pub fn mailbox(&self, number: u32) -> Option<MailboxInfo> {
        self.mailboxes.get(&number).map(Mailbox::info)
    }

    /// Every mailbox, by number.
    pub fn mailboxes(&self) -> Vec<MailboxInfo> {
        let mut v: Vec<_> = self.mailboxes.values().map(Mailbox::info).collect();
        v.sort_by_key(|m| m.number);
        v
    }

    /// The next message waiting in `mailbox`. Taking it frees its room, and
    /// senders held back for want of credit are given more.
    pub fn recv(&mut self, now: Instant, mailbox: u32) -> Option<Delivery> {
        self.touch();
        let mb = self.mailboxes.get_mut(&mailbox)?;
        let d = mb.pop()?;
        if mb.starved {
            mb.starved = false;
            for (key, flow) in self.recv_flows.iter_mut().filter(|(k, f)| k.2 == mailbox && f.starved) {
                if flow.grant(mb, self.cfg.flow_window, self.frame_cost) {
                    send_ack(now, flow, key, self.session, &mut self.out, &mut self.stats);
                }
            }
        }
        Some(d)
    }

    /// Puts `data` into mailbox `to` of this endpoint as a datagram from
    /// `from` (an engine-local hand-over, e.g. a handler forwarding to an
    /// application's mailbox: no frame, no network). `NoMailbox` when `to` is
    /// not bound, `QueueFull` when it has no room (counted as a full drop there).
    pub fn enqueue_local(&mut self, from: MailboxAddr, to: u32, data: &[u8]) -> Result<(), SendError> {
        self.touch();
        if data.len() > self.cfg.max_message {
            return Err(SendError::TooBig);
        }
        let mb = self.mailboxes.get_mut(&to).ok_or(SendError::NoMailbox)?;
        if !mb.admit(cost(data.len())) {
            return Err(SendError::QueueFull);
        }
        if mb.push(Delivery { from, kind: DeliveryKind::Datagram, data: data.to_vec() }) {
            self.events.push_back(Event::Readable { mailbox: to });
        }
        Ok(())
    }

    // --- the services ---

    fn check_send(&self, from: u32, len: usize) -> Result<(), SendError> {
        if !self.mailboxes.contains_key(&from) {
            return Err(SendError::NoMailbox);
        }
        if len > self.cfg.max_message {
            return Err(SendError::TooBig);
        }
        Ok(())
    }

    /// Sends `data` as one datagram (fragments and all, or nothing arrives).
    pub fn send_datagram(&mut self, _now: Instant, from: u32, to: MailboxAddr, data: &[u8]) -> Result<(), SendError> {
        self.touch();
        self.check_send(from, data.len())?;
        let repr = MsgRepr {
            src_mailbox: from,
            dst_mailbox: to.mailbox,
            src_session: self.session,
            id: self.next_datagram,
            ..MsgRepr::new(MsgKind::Datagram)
        };
        self.next_datagram += 1;
        self.out.push_fragments(to.host, repr, &Arc::from(data), self.cfg.frame_payload());
        self.stats.datagrams_sent += 1;
        Ok(())
    }

    /// Queues a reliable message from mailbox `from` to `to`.
    /// [`Event::MessageAcked`] or [`Event::MessageFailed`] follows.
    pub fn send_message(&mut self, now: Instant, from: u32, to: MailboxAddr, data: &[u8]) -> Result<MessageId, SendError> {
        self.touch();
        self.check_send(from, data.len())?;
        let flow = match self.send_flows.entry((from, to)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let inc = self.next_incarnation;
                self.next_incarnation += 1;
                let peer_session = self.peers.get(to.host, &self.cfg).session;
                e.insert(SendFlow::new(&self.cfg, inc, from, to, peer_session, now))
            }
        };
        if flow.queued_bytes > 0 && flow.queued_bytes + data.len() > self.cfg.send_queue {
            flow.space_wanted = true;
            return Err(SendError::QueueFull);
        }
        let id = MessageId(self.next_message);
        self.next_message += 1;
        flow.enqueue(id, Arc::from(data), self.cfg.frame_payload(), now);
        flow.fill(now, &self.cfg, self.session, &mut self.out);
        self.stats.messages_sent += 1;
        Ok(id)
    }

    /// Calls the server mailbox `to` with `request`; [`Event::CallDone`]
    /// follows, within `timeout` (the configured call timeout when `None`).
    pub fn call(&mut self, now: Instant, from: u32, to: MailboxAddr, request: &[u8], timeout: Option<Duration>) -> Result<CallId, SendError> {
        self.touch();
        self.check_send(from, request.len())?;
        // Nor more than a server remembers past the oldest unfinished call:
        // a server keeps every finished call above the watermark, so a call
        // lost early would otherwise find the server's table full of later
        // ones and be refused as busy until it timed out.
        if self.client.outstanding() >= self.cfg.max_outstanding_calls || self.client.span() >= self.cfg.max_server_calls_per_client as u64 {
            return Err(SendError::QueueFull);
        }
        self.stats.calls_started += 1;
        let timeout = timeout.unwrap_or(self.cfg.call_timeout);
        Ok(self.client.start(&mut io!(self), now, from, to, Arc::from(request), timeout))
    }

    /// Answers the request `token` came with.
    pub fn reply(&mut self, now: Instant, token: &CallToken, response: &[u8]) -> Result<(), SendError> {
        self.touch();
        if response.len() > self.cfg.max_message {
            return Err(SendError::TooBig);
        }
        if self.server.reply(&mut io!(self), now, token, Arc::from(response), response_status::OK) {
            Ok(())
        } else {
            Err(SendError::UnknownCall)
        }
    }

    /// Answers the request `token` came with as failed: the caller's call
    /// ends with [`CallError::Failed`](crate::CallError::Failed) (a handler
    /// that trapped or refused it; the request ran at most once).
    pub fn reply_failed(&mut self, now: Instant, token: &CallToken) -> Result<(), SendError> {
        self.touch();
        if self.server.reply(&mut io!(self), now, token, Arc::from(&[][..]), response_status::FAILED) {
            Ok(())
        } else {
            Err(SendError::UnknownCall)
        }
    }

    /// Asks the engine at `host` which mailbox is called `name`;
    /// [`Event::LookupDone`] follows.
    pub fn lookup(&mut self, now: Instant, host: SocketAddr, name: &str) -> Result<LookupId, BindError> {
        self.touch();
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(BindError::BadName);
        }
        Ok(self.lookups.start(&mut io!(self), now, host, name))
    }

    // --- inputs ---

    /// One UDP payload that arrived on this endpoint's port from `src`.
    pub fn handle_datagram(&mut self, now: Instant, src: SocketAddr, bytes: &[u8]) {
        self.touch();
        self.stats.frames_in += 1;
        let parsed = MsgPacket::new_checked(bytes).and_then(|p| MsgRepr::parse(&p).map(|r| (r, p)));
        let (repr, packet) = match parsed {
            Ok(v) => v,
            Err(WireError::Unsupported) => return self.stats.drop_unsupported += 1,
            Err(_) => return self.stats.drop_malformed += 1,
        };
        let payload = packet.payload();
        if repr.dst_session != 0 && repr.dst_session != self.session {
            self.stats.drop_stale_session += 1;
            if matches!(repr.kind, MsgKind::Message | MsgKind::Request | MsgKind::Probe) {
                self.send_error(now, src, &repr, MsgStatus::StaleSession);
            }
            return;
        }
        match repr.kind {
            MsgKind::Datagram => self.on_datagram(now, src, &repr, payload),
            MsgKind::Message => self.on_message(now, src, &repr, payload),
            MsgKind::Probe => self.on_probe(now, src, &repr),
            MsgKind::MessageAck => self.on_message_ack(now, src, &repr),
            MsgKind::Request => {
                let outcome = self.server.on_request(&mut io!(self), &mut self.mailboxes, now, src, &repr, payload);
                if let RequestOutcome::Refuse(status) = outcome {
                    if status == MsgStatus::NoMailbox {
                        self.stats.drop_no_mailbox += 1;
                    }
                    self.send_error(now, src, &repr, status);
                }
            }
            MsgKind::Response => self.client.on_response(&mut io!(self), now, src, &repr, payload),
            MsgKind::ResponseAck => self.server.on_response_ack(src, &repr),
            MsgKind::RequestAck => self.client.on_request_ack(&mut io!(self), now, src, repr.id, repr.credit as usize),
            MsgKind::Lookup => match lookup::answer(&self.names, self.session, &repr, payload) {
                Ok(r) => {
                    self.stats.lookups_answered += 1;
                    self.out.push(src, r, Payload::None);
                }
                Err(status) => self.send_error(now, src, &repr, status),
            },
            MsgKind::LookupReply => self.lookups.on_answer(src, &repr, &mut self.events),
            MsgKind::Error => self.on_error(now, src, &repr),
        }
    }

    fn on_datagram(&mut self, now: Instant, src: SocketAddr, repr: &MsgRepr, payload: &[u8]) {
        let Some(mb) = self.mailboxes.get_mut(&repr.dst_mailbox) else {
            // Datagrams are not answered (as UDP's port unreachable is not a datagram's business here).
            return self.stats.drop_no_mailbox += 1;
        };
        let total = repr.total_len as usize;
        if total > self.cfg.max_message {
            return self.stats.drop_too_big += 1;
        }
        let from = MailboxAddr::new(src, repr.src_mailbox);
        let data = if repr.offset == 0 && payload.len() == total {
            payload.to_vec()
        } else {
            let key = (src, repr.src_session, repr.src_mailbox, repr.dst_mailbox, repr.id);
            let a = match self.datagrams.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    if self.datagram_memory + total > self.cfg.reassembly_memory {
                        return self.stats.drop_reassembly_memory += 1;
                    }
                    self.datagram_memory += total;
                    e.insert(Assembly::new(repr.total_len, now + self.cfg.reassembly_timeout))
                }
            };
            match a.add(repr.total_len, repr.offset, payload) {
                Added::Complete => {}
                Added::Partial => return,
                Added::Duplicate | Added::Mismatch => return self.stats.bad_fragments += 1,
            }
            let a = self.datagrams.remove(&key).expect("just completed");
            self.datagram_memory -= a.footprint();
            a.into_bytes()
        };
        if !mb.admit(cost(data.len())) {
            return self.stats.drop_mailbox_full += 1;
        }
        if mb.push(Delivery { from, kind: DeliveryKind::Datagram, data }) {
            self.events.push_back(Event::Readable { mailbox: repr.dst_mailbox });
        }
    }

    /// Makes sure the receive flow for a frame of (session, incarnation)
    /// exists, made anew when the frame starts a newer one; false (counted)
    /// when the frame is stale or no flow can be kept.
    fn ensure_recv_flow(&mut self, now: Instant, key: RecvKey, session: u32, incarnation: u64) -> bool {
        let Some(mb) = self.mailboxes.get_mut(&key.2) else { return false };
        let fresh = match self.recv_flows.get_mut(&key) {
            Some(f) if f.src_session == session && f.incarnation == incarnation => false,
            Some(f) if f.src_session == session && f.incarnation > incarnation => {
                self.stats.drop_stale_flow += 1;
                return false;
            }
            Some(f) => {
                f.release(mb, self.frame_cost);
                true
            }
            None => {
                if self.recv_flows.len() >= self.cfg.max_recv_flows && !evict_idle(&mut self.recv_flows, &mut self.mailboxes, now, &self.cfg, self.frame_cost) {
                    self.stats.drop_flow_table_full += 1;
                    return false;
                }
                true
            }
        };
        if fresh {
            let Some(mb) = self.mailboxes.get_mut(&key.2) else { return false };
            let mut f = RecvFlow::new(session, incarnation, now);
            f.grant(mb, self.cfg.flow_window, self.frame_cost);
            self.recv_flows.insert(key, f);
        }
        true
    }

    fn on_message(&mut self, now: Instant, src: SocketAddr, repr: &MsgRepr, payload: &[u8]) {
        if !self.mailboxes.contains_key(&repr.dst_mailbox) {
            self.stats.drop_no_mailbox += 1;
            return self.send_error(now, src, repr, MsgStatus::NoMailbox);
        }
        // A frame over our own frame size would hold more than the credit
        // reserved for it: peers must run the same MTU (or a smaller one).
        if repr.total_len as usize > self.cfg.max_message || payload.len() > self.cfg.frame_payload() {
            return self.stats.drop_too_big += 1;
        }
        let key = (src, repr.src_mailbox, repr.dst_mailbox);
        let (session, frame_cost, ack_delay) = (self.session, self.frame_cost, self.cfg.ack_delay);
        if !self.ensure_recv_flow(now, key, repr.src_session, repr.ack) {
            return;
        }
        let flow = self.recv_flows.get_mut(&key).expect("ensured");
        let mb = self.mailboxes.get_mut(&repr.dst_mailbox).expect("checked above");
        let (fate, _, readable) = flow.on_frame(repr, payload, mb, MailboxAddr::new(src, repr.src_mailbox), frame_cost);
        flow.last_active = now;
        if readable {
            self.events.push_back(Event::Readable { mailbox: repr.dst_mailbox });
        }
        let now_ack = match fate {
            FrameFate::InOrder => repr.flags & flags::ACK_NOW != 0 || flow.unacked >= 2,
            FrameFate::OutOfOrder => true,
            FrameFate::Duplicate => {
                self.stats.drop_duplicate += 1;
                true
            }
            FrameFate::BeyondCredit => {
                self.stats.drop_beyond_credit += 1;
                true
            }
        };
        if now_ack {
            flow.grant(mb, self.cfg.flow_window, frame_cost);
            send_ack(now, flow, &key, session, &mut self.out, &mut self.stats);
        } else if flow.ack_due.is_none() {
            flow.ack_due = Some(now + ack_delay);
        }
        if flow.starved {
            self.reclaim_at.get_or_insert(now + RECLAIM_IDLE);
        }
    }

    fn on_probe(&mut self, now: Instant, src: SocketAddr, repr: &MsgRepr) {
        if !self.mailboxes.contains_key(&repr.dst_mailbox) {
            self.stats.drop_no_mailbox += 1;
            return self.send_error(now, src, repr, MsgStatus::NoMailbox);
        }
        let key = (src, repr.src_mailbox, repr.dst_mailbox);
        let (session, window, frame_cost) = (self.session, self.cfg.flow_window, self.frame_cost);
        if !self.ensure_recv_flow(now, key, repr.src_session, repr.id) {
            return;
        }
        let flow = self.recv_flows.get_mut(&key).expect("ensured");
        let mb = self.mailboxes.get_mut(&repr.dst_mailbox).expect("checked above");
        flow.grant(mb, window, frame_cost);
        send_ack(now, flow, &key, session, &mut self.out, &mut self.stats);
        if flow.starved {
            self.reclaim_at.get_or_insert(now + RECLAIM_IDLE);
        }
    }

    /// Takes back the unused credit of flows idle for `RECLAIM_IDLE` in
    /// mailboxes where some flow is short of it, and gives it to those flows.
    fn reclaim_credit(&mut self, now: Instant) {
        self.reclaim_at = None;
        let mut still_starved = false;
        for (key, flow) in self.recv_flows.iter_mut() {
            let Some(mb) = self.mailboxes.get_mut(&key.2) else { continue };
            if mb.starved && !flow.starved && now.saturating_duration_since(flow.last_active) >= RECLAIM_IDLE && flow.reclaim(mb, self.frame_cost) {
                send_ack(now, flow, key, self.session, &mut self.out, &mut self.stats);
            }
        }
        for (key, flow) in self.recv_flows.iter_mut().filter(|(_, f)| f.starved) {
            let Some(mb) = self.mailboxes.get_mut(&key.2) else { continue };
            if flow.grant(mb, self.cfg.flow_window, self.frame_cost) {
                send_ack(now, flow, key, self.session, &mut self.out, &mut self.stats);
            }
            still_starved |= flow.starved;
        }
        if still_starved {
            self.reclaim_at = Some(now + RECLAIM_IDLE);
        }
    }

    fn on_message_ack(&mut self, now: Instant, src: SocketAddr, repr: &MsgRepr) {
        let key = (repr.dst_mailbox, MailboxAddr::new(src, repr.src_mailbox));
        let Some(flow) = self.send_flows.get_mut(&key).filter(|f| f.incarnation == repr.id) else {
            return self.stats.drop_stray += 1;
        };
        let outcome = flow.on_ack(now, repr);
        if outcome.peer_restarted {
            self.peers.get(src, &self.cfg).session = repr.src_session;
            return self.fail_flow(key, MessageError::PeerRestarted);
        }
        self.peers.get(src, &self.cfg).session = repr.src_session;
        self.stats.messages_acked += outcome.delivered.len() as u64;
        self.events.extend(outcome.delivered.into_iter().map(|message| Event::MessageAcked { message }));
        flow.fill(now, &self.cfg, self.session, &mut self.out);
        if flow.space_wanted && flow.queued_bytes < self.cfg.send_queue {
            flow.space_wanted = false;
            self.events.push_back(Event::SendSpace { from: key.0, to: key.1 });
        }
    }

    fn on_error(&mut self, now: Instant, src: SocketAddr, repr: &MsgRepr) {
        let Some(status) = repr.error_status() else { return };
        if status == MsgStatus::StaleSession {
            self.peers.get(src, &self.cfg).session = 0;
        }
        let refused = u8::try_from(repr.ack).ok().and_then(MsgKind::from_u8);
        match refused {
            Some(k @ (MsgKind::Message | MsgKind::Probe)) => {
                let key = (repr.dst_mailbox, MailboxAddr::new(src, repr.src_mailbox));
                let ours = self.send_flows.get(&key).is_some_and(|f| match k {
                    MsgKind::Message => f.sent_seq(repr.id),
                    _ => f.incarnation == repr.id,
                });
                if !ours {
                    return self.stats.drop_stray += 1;
                }
                let error = match status {
                    MsgStatus::StaleSession => MessageError::PeerRestarted,
                    _ => MessageError::NoMailbox,
                };
                self.fail_flow(key, error);
            }
            Some(MsgKind::Request) => self.client.on_error(&mut io!(self), now, src, repr),
            Some(MsgKind::Lookup) => self.lookups.on_answer(src, repr, &mut self.events),
            _ => self.stats.drop_stray += 1,
        }
    }

    fn fail_flow(&mut self, key: (u32, MailboxAddr), error: MessageError) {
        let Some(mut flow) = self.send_flows.remove(&key) else { return };
        self.stats.message_frames_retransmitted += flow.retransmitted_frames;
        self.stats.probes_sent += flow.probes_sent;
        for message in flow.take_unacked() {
            self.stats.messages_failed += 1;
            self.events.push_back(Event::MessageFailed { message, error });
        }
    }

    /// Answers a refused frame, at most `errors_per_sec` a second; an error is never answered.
    fn send_error(&mut self, now: Instant, dst: SocketAddr, refused: &MsgRepr, status: MsgStatus) {
        let second = now.as_nanos() / 1_000_000_000;
        if self.error_window.0 != second {
            self.error_window = (second, 0);
        }
        if self.error_window.1 >= self.cfg.errors_per_sec {
            self.stats.errors_suppressed += 1;
            return;
        }
        self.error_window.1 += 1;
        self.stats.errors_sent += 1;
        let r = MsgRepr {
            src_mailbox: refused.dst_mailbox,
            dst_mailbox: refused.src_mailbox,
            src_session: self.session,
            dst_session: refused.src_session,
            id: refused.id,
            ack: refused.kind as u64,
            status: status as u32,
            ..MsgRepr::new(MsgKind::Error)
        };
        self.out.push(dst, r, Payload::None);
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.touch();
        if self.reclaim_at.is_some_and(|t| now >= t) {
            self.reclaim_credit(now);
        }
        for (key, flow) in self.recv_flows.iter_mut() {
            if flow.ack_due.is_some_and(|t| now >= t) {
                if let Some(mb) = self.mailboxes.get_mut(&key.2) {
                    flow.grant(mb, self.cfg.flow_window, self.frame_cost);
                }
                send_ack(now, flow, key, self.session, &mut self.out, &mut self.stats);
            }
        }
        let mut failed = Vec::new();
        for (key, flow) in self.send_flows.iter_mut() {
            if flow.deadline().is_some_and(|t| now >= t) || !flow.is_idle() {
                if let Err(e) = flow.on_timeout(now, &self.cfg, self.session, &mut self.out) {
                    failed.push((*key, e));
                }
            }
        }
        for (key, e) in failed {
            self.fail_flow(key, e);
        }
        self.client.on_timeout(&mut io!(self), now);
        self.lookups.on_timeout(&mut io!(self), now);
        self.server.on_timeout(now, &self.cfg, &mut self.mailboxes);
        let mut freed = 0;
        let mut expired = 0;
        self.datagrams.retain(|_, a| {
            let keep = now < a.deadline;
            if !keep {
                freed += a.footprint();
                expired += 1;
            }
            keep
        });
        self.datagram_memory -= freed;
        self.stats.drop_reassembly_timeout += expired;
    }

    /// When `handle_timeout` is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if let Some(d) = self.deadline.get() {
            return d;
        }
        let d = self
            .recv_flows
            .values()
            .filter_map(|f| f.ack_due)
            .chain(self.send_flows.values().filter_map(SendFlow::deadline))
            .chain(self.client.deadline())
            .chain(self.lookups.deadline())
            .chain(self.server.deadline())
            .chain(self.datagrams.values().map(|a| a.deadline))
            .chain(self.reclaim_at)
            .min();
        self.deadline.set(Some(d));
        d
    }

    // --- outputs ---

    /// The next UDP payload to send: writes it into `buf` and returns its
    /// destination and length. `buf` should hold `mtu` bytes.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        loop {
            match self.out.pop_into(buf)? {
                Ok(v) => {
                    self.stats.frames_out += 1;
                    return Some(v);
                }
                Err(_) => self.stats.drop_too_big += 1,
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Outstanding calls of this endpoint as a client.
    pub fn outstanding_calls(&self) -> usize {
        self.client.outstanding()
    }

    /// (congestion window in bytes, smoothed RTT) of the flow `from` → `to`.
    pub fn flow_info(&self, from: u32, to: MailboxAddr) -> Option<(usize, Option<Duration>)> {
        self.send_flows.get(&(from, to)).map(|f| (f.cwnd(), f.srtt()))
    }
}

fn send_ack(_now: Instant, flow: &mut RecvFlow, key: &RecvKey, session: u32, out: &mut Outbox, stats: &mut Stats) {
    let repr = flow.ack_repr(session, key.2, key.1);
    out.push(key.0, repr, Payload::None);
    flow.unacked = 0;
    flow.ack_due = None;
    stats.acks_sent += 1;
}

/// Forgets one receive flow that holds nothing and has been quiet for twice
/// the message timeout (its sender has given up or finished long ago).
fn evict_idle(flows: &mut FlowMap<RecvKey, RecvFlow>, mailboxes: &mut FlowMap<u32, Mailbox>, now: Instant, cfg: &Config, frame_cost: usize) -> bool {
    let idle = cfg.message_timeout.saturating_mul(2);
    let victim = flows
        .iter()
        .filter(|(_, f)| f.is_quiet() && now.saturating_duration_since(f.last_active) >= idle)
        .min_by_key(|(_, f)| f.last_active)
        .map(|(k, _)| *k);
    let Some(k) = victim else { return false };
    let mut f = flows.remove(&k).expect("found");
    if let Some(mb) = mailboxes.get_mut(&k.2) {
        f.release(mb, frame_cost);
    }
    true
}
