//! Message mailboxes on a board (`op::MSG_*`; docs/MESSAGES.md, "On a
//! board"): the board side of the message service. Commands name buffers
//! the application holds; the engine copies their bytes into the protocol
//! at once (a send buffer goes back with `BUF_RETURN`, a received buffer
//! forwarded or answered in place returns to the engine's pool).
//! Deliveries go into a received-datagram buffer of the engine's (or, for
//! a mailbox bound `POSTED`, into the next buffer the application posted)
//! after a `msg::HEADER` saying who sent it and what it is, and their
//! descriptor into the endpoint's mailbox ring.
//!
//! Backpressure: a message is taken from the protocol only when the ring
//! has room and a buffer is free, so a slow application holds reliable
//! messages back through the protocol's credit, never drops them.
//!
//! One-sided writes (CLAN): a registered region is a hidden mailbox of the
//! service; a write is a reliable message to it carrying the region's
//! secret and the offset. The engine checks both against the registration
//! before it copies a byte; a write that fails the check is counted
//! (`writes_refused`) and dropped.

use super::{EpKind, Session, Violation};
use crate::host::SessionCx;
use crate::messages::{BoardNote, BoardRef, MessageService, Route};
use outboard_board::arena::Side;
use outboard_board::command::{BoardCommand, Endpoint, MsgName, SyncSlot};
use outboard_board::layout::{status, CLASS_DGRAM_RX, CLASS_DGRAM_TX};
use outboard_board::mailbox::Descriptor;
use outboard_board::proto::{ev, kind, msg};
use outboard_board::{BufRef, MailboxProducer, NetAddr};
use outboard_msg::{CallToken, Delivery, DeliveryKind, MailboxAddr};
use outboard_time::{Duration, Instant};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Requests waiting for a reply, per board; the oldest are forgotten past
/// this (its client times out, as when a server never answers).
const MAX_TOKENS: usize = 65536;
/// Messages delivered to one mailbox per turn.
const DELIVERIES_PER_TURN: usize = 64;
/// Events waiting in a full event ring past which notes and writes wait in
/// the protocol instead (backpressure, not a growing queue).
const NOTE_ROOM: usize = 1024;
/// A write's header on the wire: the region's secret and the offset (LE u32s).
const WRITE_HEADER: usize = 8;

/// A registered region.
pub(in crate::host) struct Region {
    number: u32,
    secret: u32,
    buf: BufRef,
    offset: u64,
    len: u64,
    tripwire: Option<u64>,
    notify: bool,
}

/// Region mailboxes take automatic numbers, which all have this bit
/// (`outboard_msg::Endpoint::bind`); a cookie leaves it out.
const AUTO_BIT: u32 = 0x8000_0000;
/// Random bits of a cookie (it must fit a sync result's 61 bits beside the 31 of the number).
const SECRET_BITS: u32 = 30;

impl Region {
    /// The number without its automatic bit, then the secret: 61 bits.
    fn cookie(&self) -> u64 {
        u64::from(self.number & !AUTO_BIT) << SECRET_BITS | u64::from(self.secret)
    }
}

/// The region mailbox and secret a cookie names.
fn uncookie(cookie: u64) -> (u32, u32) {
    ((cookie >> SECRET_BITS) as u32 | AUTO_BIT, (cookie & ((1 << SECRET_BITS) - 1)) as u32)
}

pub(in crate::host) struct MailboxEp {
    number: u32,
    ring: MailboxProducer,
    posted_mode: bool,
    /// Buffers posted (`MSG_POST_RECV`): the buffer, the span, the tag.
    posted: VecDeque<(BufRef, u64, u64, u32)>,
    regions: Vec<Region>,
}

/// The board's counters for its mailboxes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MailboxCounters {
    pub messages_in: u64,
    pub messages_out: u64,
    /// Messages larger than a board buffer (or than a posted one): dropped.
    pub too_big: u64,
    pub writes_in: u64,
    pub writes_refused: u64,
    /// Replies to tokens the engine does not hold (answered twice, or forgotten).
    pub stale_replies: u64,
}

impl MailboxCounters {
    pub fn add(&mut self, o: &MailboxCounters) {
        self.messages_in += o.messages_in;
        self.messages_out += o.messages_out;
        self.too_big += o.too_big;
        self.writes_in += o.writes_in;
        self.writes_refused += o.writes_refused;
        self.stale_replies += o.stale_replies;
    }
}

/// Requests delivered and not answered yet, by token.
#[derive(Default)]
pub(super) struct Tokens {
    map: HashMap<u32, CallToken>,
    order: VecDeque<u32>,
    next: u32,
}

impl Tokens {
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    fn insert(&mut self, t: CallToken) -> u32 {
        while self.map.len() >= MAX_TOKENS {
            let Some(old) = self.order.pop_front() else { break };
            self.map.remove(&old);
        }
        loop {
            self.next = self.next.wrapping_add(1);
            if self.next != 0 && !self.map.contains_key(&self.next) {
                break;
            }
        }
        self.map.insert(self.next, t);
        self.order.push_back(self.next);
        if self.order.len() > 2 * MAX_TOKENS {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
        self.next
    }
    fn take(&mut self, token: u32) -> Option<CallToken> {
        self.map.remove(&token)
    }
}

fn random_secret() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let v = if n == 4 { u32::from_le_bytes(b) } else { (std::process::id() ^ 0x5bd1_e995).rotate_left(13) };
    v & ((1 << SECRET_BITS) - 1)
}

impl Session {
    /// Acts on a message command (`op::MSG_*`). `svc`: the message service,
    /// when this shard runs it.
    pub(super) fn act_message(&mut self, svc: Option<&mut MessageService>, now: Instant, cmd: BoardCommand) -> Result<(), Violation> {
        let Some(svc) = svc else {
            return self.refuse_message(cmd);
        };
        match cmd {
            BoardCommand::MsgBind { sync, number, capacity, name, posted } => self.msg_bind(svc, sync, number, capacity, name.as_str(), posted),
            BoardCommand::MsgLookup { sync, host, name } => {
                let r = match name.as_str() {
                    Some(n) => svc.board_lookup(now, self.id, sync.0, host, n).map_err(|e| -i64::from(e)),
                    None => Err(-i64::from(libc::EINVAL)),
                };
                if let Err(errno) = r {
                    self.sync_result(sync.0, errno)?;
                }
                Ok(())
            }
            BoardCommand::MsgSend { ep, offset, len, to, mailbox, tag, reliable } => {
                let from = self.mailbox_number(ep, "message send")?;
                let route = Route { owner: BoardRef { session: self.id, ep: ep.0 }, from, to: MailboxAddr::new(to, mailbox), tag };
                let r = self.with_app_bytes(ep, offset, len, |data| svc.board_send(now, route, data, reliable))?;
                self.sent(ep, tag, r);
                Ok(())
            }
            BoardCommand::MsgCall { ep, offset, len, to, mailbox, tag, timeout_ms } => {
                let from = self.mailbox_number(ep, "call")?;
                let route = Route { owner: BoardRef { session: self.id, ep: ep.0 }, from, to: MailboxAddr::new(to, mailbox), tag };
                let timeout = (timeout_ms != 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
                let r = self.with_app_bytes(ep, offset, len, |data| svc.board_call(now, route, data, timeout))?;
                self.sent(ep, tag, r);
                Ok(())
            }
            BoardCommand::MsgReply { ep, offset, len, token } => {
                self.mailbox_number(ep, "reply")?;
                let t = self.tokens.take(token);
                let r = self.with_app_bytes(ep, offset, len, |data| match t {
                    Some(t) => svc.board_reply(now, &t, data),
                    None => Err(libc::ENOENT as u32),
                })?;
                match r {
                    Ok(()) => self.mailbox_counters.messages_out += 1,
                    Err(_) => self.mailbox_counters.stale_replies += 1,
                }
                Ok(())
            }
            BoardCommand::MsgWrite { ep, offset, len, to, cookie, at, tag } => {
                let from = self.mailbox_number(ep, "write")?;
                let (number, secret) = uncookie(cookie);
                let route = Route { owner: BoardRef { session: self.id, ep: ep.0 }, from, to: MailboxAddr::new(to, number), tag };
                let r = self.with_app_bytes(ep, offset, len, |data| {
                    let mut m = Vec::with_capacity(WRITE_HEADER + data.len());
                    m.extend_from_slice(&secret.to_le_bytes());
                    m.extend_from_slice(&at.to_le_bytes());
                    m.extend_from_slice(data);
                    svc.board_send(now, route, &m, true)
                })?;
                self.sent(ep, tag, r);
                Ok(())
            }
            BoardCommand::MsgPostRecv { ep, offset, len, tag } => {
                let buf = self.take_app_buffer(offset, len)?;
                let m = self.mailbox_mut(ep, "post receive")?;
                m.posted.push_back((buf, offset, len, tag));
                Ok(())
            }
            BoardCommand::MsgRegister { sync, ep, offset, len, tripwire, notify } => {
                self.mailbox_number(ep, "register")?;
                let buf = self.take_app_buffer(offset, len)?;
                let owner = BoardRef { session: self.id, ep: ep.0 };
                match svc.board_bind(owner, None, None, None) {
                    Ok(number) if number & AUTO_BIT == 0 => {
                        // Never: automatic numbers have the bit.
                        svc.board_unbind(number);
                        self.give_back(buf, ep.0, offset);
                        self.sync_result(sync.0, -i64::from(libc::EMFILE))?;
                    }
                    Ok(number) => {
                        let r = Region { number, secret: random_secret(), buf, offset, len, tripwire: tripwire.filter(|t| *t < len), notify };
                        let cookie = r.cookie();
                        self.mailbox_mut(ep, "register")?.regions.push(r);
                        if !self.sync_result(sync.0, cookie as i64)? {
                            self.unregister(svc, ep.0, cookie);
                        }
                    }
                    Err(e) => {
                        self.give_back(buf, ep.0, offset);
                        self.sync_result(sync.0, crate::messages::bind_errno(&e))?;
                    }
                }
                Ok(())
            }
            BoardCommand::MsgUnregister { ep, cookie } => {
                self.mailbox_number(ep, "unregister")?;
                self.unregister(svc, ep.0, cookie);
                Ok(())
            }
            BoardCommand::HandlerStage { offset, len } => self.stage_handler(offset, len),
            BoardCommand::HandlerLoad { sync, name, mailbox, memory, kv, deadline_ms, max_faults } => {
                let r = self.load_handler(svc, now, name, mailbox, memory, kv, deadline_ms, max_faults);
                self.sync_result(sync.0, r.map_or_else(|e| -i64::from(e), i64::from)).map(|_| ())
            }
            BoardCommand::HandlerUnload { sync, name } => {
                let r = match name.as_str() {
                    Some(n) => svc.unload_handler(now, n, Some(self.id)).map_or_else(|e| -i64::from(e), |()| 0),
                    None => -i64::from(libc::EINVAL),
                };
                self.sync_result(sync.0, r).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Appends a buffer's bytes to the staged handler module (its buffer
    /// comes back at once; past the limit the module is marked too big).
    fn stage_handler(&mut self, offset: u64, len: u64) -> Result<(), Violation> {
        let (mut staged, mut over) = (std::mem::take(&mut self.staged), self.staged_over);
        self.with_app_bytes(Endpoint(0), offset, len, |b| {
            if staged.len() + b.len() > outboard_board::proto::handler::MAX_MODULE {
                over = true;
            } else if !over {
                staged.extend_from_slice(b);
            }
        })?;
        (self.staged, self.staged_over) = (staged, over);
        Ok(())
    }

    /// Loads the staged module (consumed either way): the mailbox number, or an errno.
    #[allow(clippy::too_many_arguments)]
    fn load_handler(&mut self, svc: &mut MessageService, now: Instant, name: MsgName, mailbox: u32, memory: u64, kv: u64, deadline_ms: u32, max_faults: u32) -> Result<u32, i32> {
        let (wasm, over) = (std::mem::take(&mut self.staged), std::mem::replace(&mut self.staged_over, false));
        let name = name.as_str().ok_or(libc::EINVAL)?.to_string();
        if over {
            return Err(libc::E2BIG);
        }
        let d = outboard_handler::Limits::default();
        let limits = outboard_handler::Limits {
            memory: if memory == 0 { d.memory } else { usize::try_from(memory).map_err(|_| libc::EINVAL)? },
            kv_bytes: if kv == 0 { d.kv_bytes } else { usize::try_from(kv).map_err(|_| libc::EINVAL)? },
            deadline: if deadline_ms == 0 { d.deadline } else { std::time::Duration::from_millis(u64::from(deadline_ms)) },
            max_faults: match max_faults {
                0 => d.max_faults,
                u32::MAX => 0,
                n => n,
            },
        };
        let set = crate::messages::handlers::HandlerSettings {
            source: format!("board of pid {}", self.pid),
            wasm: Arc::new(wasm),
            mailbox: if mailbox == 0 { crate::messages::handlers::MailboxSpec::Name(name.clone()) } else { crate::messages::handlers::MailboxSpec::Number(mailbox) },
            name,
            limits,
        };
        svc.load_handler(now, &set, Some(self.id)).map_err(|e| {
            crate::log::event(crate::log::Level::Warn, "handler_refused", &[("handler", &set.name), ("pid", &self.pid), ("why", &e.why)]);
            e.errno
        })
    }

    /// The engine runs no message service here: binds and lookups fail with
    /// EPROTONOSUPPORT; nothing else can name a mailbox endpoint.
    fn refuse_message(&mut self, cmd: BoardCommand) -> Result<(), Violation> {
        match cmd {
            BoardCommand::MsgBind { sync, .. }
            | BoardCommand::MsgLookup { sync, .. }
            | BoardCommand::HandlerLoad { sync, .. }
            | BoardCommand::HandlerUnload { sync, .. } => self.sync_result(sync.0, -i64::from(libc::EPROTONOSUPPORT)).map(|_| ()),
            // The buffer comes back; the bytes go nowhere.
            BoardCommand::HandlerStage { offset, len } => self.with_app_bytes(Endpoint(0), offset, len, |_| ()),
            _ => Err(Violation::BadEndpoint("message command")),
        }
    }

    fn msg_bind(&mut self, svc: &mut MessageService, sync: SyncSlot, number: Option<u32>, capacity: u32, name: Option<&str>, posted: bool) -> Result<(), Violation> {
        if self.free_eps.is_empty() {
            return self.sync_result(sync.0, -i64::from(libc::EMFILE)).map(|_| ());
        }
        let ep = *self.free_eps.last().expect("checked non-empty");
        let owner = BoardRef { session: self.id, ep };
        let number = match svc.board_bind(owner, number, name, (capacity != 0).then_some(capacity as usize)) {
            Ok(n) => n,
            Err(e) => return self.sync_result(sync.0, crate::messages::bind_errno(&e)).map(|_| ()),
        };
        let ep = self.open_ep(kind::MAILBOX).expect("checked non-empty");
        let base = self.layout.endpoint_status(ep);
        self.map.write(base + status::LOCAL, NetAddr::from(svc.local_host()));
        self.map.write(base + status::RX_TOTAL, u64::from(number));
        let ring = MailboxProducer::new(self.map.clone(), self.layout.endpoint_mailbox(ep), self.layout.params.mailbox_capacity, Arc::new(self.layout.arena.clone()));
        outboard_board::ring::reset(&self.map, self.layout.endpoint_mailbox(ep));
        self.eps[ep as usize] = Some(EpKind::Mailbox(Box::new(MailboxEp { number, ring, posted_mode: posted, posted: VecDeque::new(), regions: Vec::new() })));
        self.polled.push(ep);
        if !self.sync_result(sync.0, i64::from(ep))? {
            self.close_mailbox(Some(svc), ep);
        }
        Ok(())
    }

    /// An operation refused at once: its completion says why.
    fn sent(&mut self, ep: Endpoint, tag: u32, r: Result<(), u32>) {
        match r {
            Ok(()) => self.mailbox_counters.messages_out += 1,
            Err(errno) => self.post(ep.0, ev::COMPLETION, u64::from(tag) << 32 | u64::from(errno)),
        }
    }

    fn mailbox_mut(&mut self, ep: Endpoint, what: &'static str) -> Result<&mut MailboxEp, Violation> {
        match self.eps.get_mut(ep.0 as usize) {
            Some(Some(EpKind::Mailbox(m))) => Ok(m),
            _ => Err(Violation::BadEndpoint(what)),
        }
    }

    fn mailbox_number(&mut self, ep: Endpoint, what: &'static str) -> Result<u32, Violation> {
        self.mailbox_mut(ep, what).map(|m| m.number)
    }

    /// Runs `f` on the bytes [offset, offset + len) of a buffer the
    /// application holds, then takes the buffer back: a send buffer with
    /// `BUF_RETURN`, a received one into the engine's pool.
    fn with_app_bytes<R>(&mut self, ep: Endpoint, offset: u64, len: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, Violation> {
        let buf = self.layout.arena.locate(offset, len).ok_or(Violation::BadBuffer)?;
        if self.owners.owner(buf) != Some(Side::App) || !matches!(buf.class, CLASS_DGRAM_RX | CLASS_DGRAM_TX) {
            return Err(Violation::BadBuffer);
        }
        // SAFETY: `locate` checked [offset, offset + len) lies inside one
        // arena buffer inside the mapping; the engine holds no other slice of
        // it. The application may change the bytes meanwhile: payload only.
        let r = f(unsafe { self.map.bytes(offset as usize, len as usize) });
        self.give_back(buf, ep.0, offset);
        Ok(r)
    }

    /// A buffer the application held is the engine's again: a received
    /// one to the pool, a send buffer back to the application (`BUF_RETURN`).
    fn give_back(&mut self, buf: BufRef, ep: u32, offset: u64) {
        if buf.class == CLASS_DGRAM_RX {
            if self.owners.transfer(buf, Side::App, Side::Engine).is_ok() {
                self.dgram_rx.free(buf);
            }
        } else {
            let _ = self.owners.transfer(buf, Side::Engine, Side::App);
            self.post(ep, ev::BUF_RETURN, offset);
        }
    }

    /// A send buffer the application hands to the engine to keep (a posted
    /// receive, a registered region).
    fn take_app_buffer(&mut self, offset: u64, len: u64) -> Result<BufRef, Violation> {
        let buf = self.layout.arena.locate(offset, len).ok_or(Violation::BadBuffer)?;
        if buf.class != CLASS_DGRAM_TX || len == 0 {
            return Err(Violation::BadBuffer);
        }
        self.owners.transfer(buf, Side::App, Side::Engine).map_err(|_| Violation::BadBuffer)?;
        Ok(buf)
    }

    fn unregister(&mut self, svc: &mut MessageService, ep: u32, cookie: u64) {
        let Some(Some(EpKind::Mailbox(m))) = self.eps.get_mut(ep as usize) else { return };
        let Some(i) = m.regions.iter().position(|r| r.cookie() == cookie) else { return };
        let r = m.regions.swap_remove(i);
        svc.board_unbind(r.number);
        self.give_back(r.buf, ep, r.offset);
    }

    /// Closes a mailbox endpoint: its mailbox and regions unbound, its
    /// posted buffers and regions given back.
    pub(super) fn close_mailbox(&mut self, svc: Option<&mut MessageService>, ep: u32) {
        let Some(Some(EpKind::Mailbox(m))) = self.eps.get_mut(ep as usize) else { return };
        let (number, posted, regions) = (m.number, std::mem::take(&mut m.posted), std::mem::take(&mut m.regions));
        if let Some(svc) = svc {
            svc.board_unbind(number);
            for r in &regions {
                svc.board_unbind(r.number);
            }
        }
        for (buf, off, _, _) in posted {
            self.give_back(buf, ep, off);
        }
        for r in regions {
            self.give_back(r.buf, ep, r.offset);
        }
        self.close_ep(ep);
    }

    /// Delivers what waits for this board: notes (completions, responses,
    /// lookups), messages into its mailboxes, writes into its regions.
    pub(super) fn poll_mailboxes(&mut self, sc: &mut SessionCx<'_>) -> Result<bool, Violation> {
        let Some(svc) = sc.messages.as_deref_mut() else { return Ok(false) };
        let now = sc.now;
        let mut work = false;
        if let Some(mut notes) = svc.take_notes(self.id) {
            while self.overflow.len() < NOTE_ROOM {
                let Some(n) = notes.pop_front() else { break };
                if let Some(back) = self.note(n)? {
                    notes.push_front(back);
                    break;
                }
                work = true;
            }
            svc.return_notes(self.id, notes);
        }
        for i in 0..self.polled.len() {
            let Some(&ep) = self.polled.get(i) else { break };
            if !matches!(self.eps[ep as usize], Some(EpKind::Mailbox(_))) {
                continue;
            }
            work |= self.deliver_messages(svc, now, ep);
            work |= self.land_writes(svc, now, ep);
        }
        Ok(work)
    }

    /// One note; `Some` gives it back when the board has no room for it yet.
    fn note(&mut self, n: BoardNote) -> Result<Option<BoardNote>, Violation> {
        match n {
            BoardNote::Completion { ep, tag, errno } => {
                if matches!(self.eps.get(ep as usize), Some(Some(EpKind::Mailbox(_)))) {
                    self.post(ep, ev::COMPLETION, u64::from(tag) << 32 | u64::from(errno));
                }
            }
            BoardNote::Lookup { sync, result } => {
                self.sync_result(sync, result)?;
            }
            BoardNote::Response { ep, tag, from, data } => {
                if !matches!(self.eps.get(ep as usize), Some(Some(EpKind::Mailbox(_)))) {
                    return Ok(None);
                }
                let d = Delivery { from, kind: DeliveryKind::Message, data };
                if !self.place(ep, &d, msg::RESPONSE, tag, false) {
                    return Ok(Some(BoardNote::Response { ep, tag, from, data: d.data }));
                }
            }
        }
        Ok(None)
    }

    fn deliver_messages(&mut self, svc: &mut MessageService, now: Instant, ep: u32) -> bool {
        let mut got = 0;
        for _ in 0..DELIVERIES_PER_TURN {
            let Some(Some(EpKind::Mailbox(m))) = self.eps.get(ep as usize) else { break };
            let room = m.ring.free().is_ok_and(|f| f > 0) && if m.posted_mode { !m.posted.is_empty() } else { !self.dgram_rx.is_empty() };
            if !room {
                break;
            }
            let number = m.number;
            let Some(d) = svc.board_recv(now, number) else { break };
            let (kind_code, tag) = match d.kind {
                DeliveryKind::Datagram => (msg::DATAGRAM, 0),
                DeliveryKind::Message => (msg::MESSAGE, 0),
                DeliveryKind::Request(t) => (msg::REQUEST, self.tokens.insert(t)),
            };
            if self.place(ep, &d, kind_code, tag, true) {
                got += 1;
            }
        }
        if got > 0 {
            self.mailbox_counters.messages_in += got;
        }
        got > 0
    }

    /// Writes one message into a buffer and its descriptor into the ring
    /// (false: no room now). `posted`: into the next posted buffer when the
    /// mailbox takes messages that way. Too big for the buffer: dropped and counted (true).
    fn place(&mut self, ep: u32, d: &Delivery, kind_code: u32, tag: u32, posted: bool) -> bool {
        let Some(Some(EpKind::Mailbox(m))) = self.eps.get_mut(ep as usize) else { return true };
        if !m.ring.free().is_ok_and(|f| f > 0) {
            return false;
        }
        let from_posted = posted && m.posted_mode;
        let (buf, start, size, tag, kind_code) = if from_posted {
            let Some((buf, off, len, ptag)) = m.posted.pop_front() else { return false };
            let k = if d.data.len() + msg::HEADER > len as usize { msg::POSTED_TOO_SMALL } else { msg::POSTED_MESSAGE };
            (buf, off as usize, len as usize, ptag, k)
        } else {
            let Some(buf) = self.dgram_rx.alloc() else { return false };
            (buf, self.layout.arena.offset_of(buf), self.layout.arena.size_of(buf), tag, kind_code)
        };
        let fits = d.data.len() + msg::HEADER <= size;
        if !fits && !from_posted {
            self.dgram_rx.free(buf);
            self.mailbox_counters.too_big += 1;
            return true;
        }
        if fits {
            self.map.write(start, NetAddr::from(d.from.host));
            self.map.write(start + msg::HDR_MAILBOX, d.from.mailbox);
            self.map.write(start + msg::HDR_KIND, kind_code);
            self.map.write(start + msg::HDR_TAG, tag);
            // SAFETY: the buffer is the engine's (its pool, or posted to it), the span inside the mapping.
            unsafe { self.map.bytes_mut(start + msg::HEADER, d.data.len()) }.copy_from_slice(&d.data);
        } else {
            self.mailbox_counters.too_big += 1;
        }
        let len = if fits { d.data.len() } else { d.data.len().min(u32::MAX as usize) };
        let desc = Descriptor { offset: start as u32, len: len as u32, tag, aux: kind_code };
        let Some(Some(EpKind::Mailbox(m))) = self.eps.get_mut(ep as usize) else { return true };
        if m.ring.put(desc).unwrap_or(false) {
            let _ = self.owners.transfer(buf, Side::Engine, Side::App);
            self.post(ep, ev::READABLE, 0);
        } else if from_posted {
            m.posted.push_front((buf, start as u64, size as u64, tag));
            return false;
        } else {
            self.dgram_rx.free(buf);
            return false;
        }
        true
    }

    /// Writes that arrived for this mailbox's regions: checked, copied, announced.
    fn land_writes(&mut self, svc: &mut MessageService, now: Instant, ep: u32) -> bool {
        let Some(Some(EpKind::Mailbox(m))) = self.eps.get(ep as usize) else { return false };
        let numbers: Vec<u32> = m.regions.iter().map(|r| r.number).collect();
        let mut work = false;
        for number in numbers {
            for _ in 0..DELIVERIES_PER_TURN {
                if self.overflow.len() >= NOTE_ROOM {
                    return work;
                }
                let Some(d) = svc.board_recv(now, number) else { break };
                work = true;
                let Some(Some(EpKind::Mailbox(m))) = self.eps.get(ep as usize) else { return work };
                let Some(r) = m.regions.iter().find(|r| r.number == number) else { break };
                let ok = d.kind == DeliveryKind::Message && d.data.len() >= WRITE_HEADER;
                let secret = ok.then(|| u32::from_le_bytes(d.data[..4].try_into().expect("4 bytes")));
                let at = if ok { u64::from(u32::from_le_bytes(d.data[4..8].try_into().expect("4 bytes"))) } else { 0 };
                let body = if ok { &d.data[WRITE_HEADER..] } else { &[][..] };
                if secret != Some(r.secret) || at + body.len() as u64 > r.len {
                    self.mailbox_counters.writes_refused += 1;
                    continue;
                }
                let (start, notify, tripwire, cookie) = (r.offset + at, r.notify, r.tripwire, r.cookie());
                // SAFETY: inside the registered span (checked above against the
                // registration, which `locate` checked lies in one buffer the engine holds).
                unsafe { self.map.bytes_mut(start as usize, body.len()) }.copy_from_slice(body);
                self.mailbox_counters.writes_in += 1;
                if notify {
                    self.post(ep, ev::REMOTE_WRITE, at << 32 | body.len() as u64);
                }
                if tripwire.is_some_and(|t| t >= at && t < at + body.len() as u64) {
                    self.post(ep, ev::TRIPWIRE, cookie);
                }
            }
        }
        work
    }
}
