//! Message mailboxes on the board (docs/MESSAGES.md, "On a board"): the
//! engine's datagram, reliable-message and request-response services to
//! network-wide mailbox addresses, read and written in place.
//!
//! - Sending: `begin_put` lends a send buffer of the board; `end_put_send`
//!   (or `end_put_call`) hands the first bytes of it to the engine, which
//!   copies them into the protocol and gives the buffer back.
//! - Receiving: `begin_get` returns the next message where the engine put
//!   it (after a small header naming the sender); `end_get` gives the buffer
//!   back. A request is answered with `reply` (a copy) or `reply_in_place`
//!   (the response written over the request in the same buffer).
//! - Calls: `call` blocks for the response; `call_start`, `poll_call` and
//!   `wait_call` are the same in steps, many at once.
//! - Completions (reliable messages acknowledged or failed, failed calls,
//!   writes): `poll_completion` / `wait_completion`, by the tag each send
//!   returned. All of it also wakes the board's [`crate::EventQueue`].
//! - One-sided writes (CLAN): `register` lends a board buffer as a region
//!   peers write into by cookie and offset; `write` writes into a peer's
//!   region; tripwires and per-write notes say when bytes landed.
//!
//! [`QueuePair`] and [`CompletionQueue`] (the `qp` module) are VIA's layer
//! on top: posted receive buffers and one queue of completions for many pairs.

use crate::board::{Board, Mode};
use crate::{EndpointId, Error, Result};
use outboard_board::command::{Endpoint, MsgName};
use outboard_board::layout::{status, CLASS_DGRAM_TX};
use outboard_board::proto::msg;
use outboard_board::{BoardCommand, BufRef, Descriptor, MailboxConsumer, NetAddr};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// A mailbox anywhere: an engine's message address (its address and
/// message port) and the mailbox's number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MailboxAddr {
    pub host: SocketAddr,
    pub mailbox: u32,
}

impl MailboxAddr {
    pub fn new(host: SocketAddr, mailbox: u32) -> MailboxAddr {
        MailboxAddr { host, mailbox }
    }
}

impl fmt::Display for MailboxAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.mailbox)
    }
}

impl std::str::FromStr for MailboxAddr {
    type Err = String;
    /// `HOST:PORT/NUMBER`, e.g. `10.0.0.2:7373/5`.
    fn from_str(s: &str) -> std::result::Result<MailboxAddr, String> {
        let (h, n) = s.rsplit_once('/').ok_or_else(|| format!("{s:?} is not HOST:PORT/MAILBOX"))?;
        Ok(MailboxAddr {
            host: h.parse().map_err(|_| format!("{h:?} is not an address and port"))?,
            mailbox: n.parse().map_err(|_| format!("{n:?} is not a mailbox number"))?,
        })
    }
}

/// How to bind a mailbox.
#[derive(Debug, Clone, Default)]
pub struct MailboxOptions {
    /// The number (None: the engine picks one).
    pub number: Option<u32>,
    /// A name peers can look up (at most 24 bytes through the board).
    pub name: Option<String>,
    /// The mailbox's byte budget in the engine (None: the engine's default).
    pub capacity: Option<u32>,
    /// Messages land only in buffers posted with `post_recv` (a queue pair's receive queue).
    pub posted: bool,
}

/// What a received message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Datagram,
    Message,
    /// A request: answer it with `reply` or `reply_in_place`.
    Request,
    /// A message in a buffer posted with `post_recv` (`tag` is the post's).
    Posted,
    /// A posted buffer too small for the message that came (dropped by the
    /// engine; `data` is empty, `len` says how long it was).
    PostedTooSmall,
}

/// A message in place in the board, until `end_get`.
#[derive(Debug)]
pub struct Message<'a> {
    pub kind: MessageKind,
    pub from: MailboxAddr,
    pub data: &'a [u8],
    /// The post's tag for posted messages (else 0; a request's token is internal).
    pub tag: u32,
    /// The message's length (`data.len()`, except for `PostedTooSmall`).
    pub len: usize,
}

/// A registered region: peers write into it by `cookie` and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub cookie: u64,
    offset: usize,
    pub len: usize,
}

/// A message mailbox through the engine.
pub struct Mailbox {
    pub(crate) board: Board,
    pub(crate) id: EndpointId,
    number: u32,
    host: SocketAddr,
    inbox: VecDeque<Descriptor>,
    responses: HashMap<u32, Descriptor>,
    held: Option<Descriptor>,
    put_buf: Option<BufRef>,
    next_tag: u32,
    regions: Vec<Region>,
    /// Calls started and not yet taken by `wait_call`/`poll_call`, and the
    /// failures of those that failed (kept apart from other completions).
    calls: std::collections::HashSet<Tag>,
    failed_calls: HashMap<Tag, u32>,
}

/// A call's tag (`call_start`), or a send's (`send_message`, `write`).
pub type Tag = u32;

impl Board {
    /// Binds a mailbox: `number` (None: any) and a `name` peers can look up.
    pub fn bind_mailbox(&self, number: Option<u32>, name: Option<&str>) -> Result<Mailbox> {
        self.bind_mailbox_with(&MailboxOptions { number, name: name.map(str::to_string), ..Default::default() })
    }

    pub fn bind_mailbox_with(&self, o: &MailboxOptions) -> Result<Mailbox> {
        let name = match &o.name {
            Some(n) => MsgName::new(n).filter(|_| !n.is_empty()).ok_or(Error::Invalid("mailbox names through the board are 1 to 24 bytes"))?,
            None => MsgName::default(),
        };
        let ep = self.request_value(
            |sync| BoardCommand::MsgBind { sync, number: o.number.filter(|n| *n != 0), capacity: o.capacity.unwrap_or(0), name, posted: o.posted },
            None,
        )?;
        let id = u32::try_from(ep).ok().filter(|e| *e < self.inner.borrow().layout.params.endpoints).ok_or(Error::Invalid("the engine returned an endpoint out of range"))?;
        self.inner.borrow_mut().open_ep(id);
        let (number, host) = {
            let mut b = self.inner.borrow_mut();
            let off = b.layout.endpoint_mailbox(id);
            let cap = b.layout.params.mailbox_capacity;
            let map = b.map.clone();
            b.eps[id as usize].mailbox = Some(MailboxConsumer::new(map, off, cap));
            let base = b.layout.endpoint_status(id);
            let number = b.map.read::<u64>(base + status::RX_TOTAL) as u32;
            (number, b.addr(id, status::LOCAL).ok_or(Error::Invalid("the engine gave the mailbox no address"))?)
        };
        Ok(Mailbox {
            board: self.clone(),
            id,
            number,
            host,
            inbox: VecDeque::new(),
            responses: HashMap::new(),
            held: None,
            put_buf: None,
            next_tag: 0,
            regions: Vec::new(),
            calls: Default::default(),
            failed_calls: HashMap::new(),
        })
    }

    /// Which mailbox is called `name` at the engine `host` (its message address).
    pub fn lookup(&self, host: SocketAddr, name: &str) -> Result<MailboxAddr> {
        let n = MsgName::new(name).filter(|_| !name.is_empty()).ok_or(Error::Invalid("mailbox names through the board are 1 to 24 bytes"))?;
        let number = self.request_value(|sync| BoardCommand::MsgLookup { sync, host, name: n }, None)?;
        Ok(MailboxAddr { host, mailbox: number as u32 })
    }
}

impl Mailbox {
    pub fn id(&self) -> EndpointId {
        self.id
    }
    pub fn number(&self) -> u32 {
        self.number
    }
    /// This mailbox's network-wide address.
    pub fn addr(&self) -> MailboxAddr {
        MailboxAddr { host: self.host, mailbox: self.number }
    }
    /// Tells the board how many messages this mailbox holds for its caller
    /// (taken off the ring, not yet handed out), for the event queue's readiness.
    fn note_queued(&self) {
        let n = self.inbox.len() + self.responses.len();
        self.board.inner.borrow_mut().eps[self.id as usize].msg_queued = n;
    }
    fn mode(&self) -> Mode {
        let b = self.board.inner.borrow();
        b.eps[self.id as usize].mode.unwrap_or(b.mode)
    }
    pub fn set_mode(&mut self, mode: Mode) {
        self.board.inner.borrow_mut().eps[self.id as usize].mode = Some(mode);
    }
    /// The next tag (never 0: C's `ob_mailbox_send` returns 0 for a datagram).
    fn tag(&mut self) -> Tag {
        self.next_tag = self.next_tag.checked_add(1).unwrap_or(1);
        self.next_tag
    }

    // ---- sending ----

    /// A board send buffer to write one message into (at most
    /// `dgram_size` bytes; the board's `BoardParams` sets it).
    pub fn begin_put(&mut self) -> Result<&mut [u8]> {
        if self.put_buf.is_none() {
            self.put_buf = Some(self.take_send_buffer()?);
        }
        let b = self.put_buf.expect("just taken");
        Ok(self.buffer_mut(b, 0))
    }

    fn take_send_buffer(&mut self) -> Result<BufRef> {
        let mut got = None;
        self.board.wait(self.mode(), None, |i| {
            got = i.dgram_tx.alloc();
            got.is_some()
        })?;
        got.ok_or(Error::WouldBlock)
    }

    /// The bytes of buffer `b` from `skip` on.
    fn buffer_mut(&mut self, b: BufRef, skip: usize) -> &mut [u8] {
        let i = self.board.inner.borrow();
        let (off, size) = (i.layout.arena.offset_of(b), i.layout.arena.size_of(b));
        let map = i.map.clone();
        drop(i);
        // SAFETY: a buffer this mailbox holds (a send buffer from our free
        // list, or a received one lent to us until we give it back), inside
        // the mapping the board keeps alive; callers take `&mut self`, so
        // this is the only slice of it.
        unsafe { std::slice::from_raw_parts_mut(map.as_ptr().add(off + skip), size - skip) }
    }

    fn take_put(&mut self, n: usize) -> Result<(u64, u64)> {
        let b = self.put_buf.take().ok_or(Error::Invalid("end_put without begin_put"))?;
        let i = self.board.inner.borrow();
        let (off, size) = (i.layout.arena.offset_of(b), i.layout.arena.size_of(b));
        drop(i);
        if n > size {
            self.board.inner.borrow_mut().dgram_tx.free(b);
            return Err(Error::Errno(libc::EMSGSIZE));
        }
        Ok((off as u64, n as u64))
    }

    /// Sends the first `n` bytes of the `begin_put` buffer to `to`: a
    /// reliable message (its completion comes by the returned tag) or a datagram.
    pub fn end_put_send(&mut self, n: usize, to: MailboxAddr, reliable: bool) -> Result<Tag> {
        let (offset, len) = self.take_put(n)?;
        let tag = self.tag();
        self.command(BoardCommand::MsgSend { ep: Endpoint(self.id), offset, len, to: to.host, mailbox: to.mailbox, tag, reliable })?;
        Ok(tag)
    }

    fn put_copy(&mut self, data: &[u8]) -> Result<()> {
        let buf = self.begin_put()?;
        if data.len() > buf.len() {
            let b = self.put_buf.take().expect("taken by begin_put");
            self.board.inner.borrow_mut().dgram_tx.free(b);
            return Err(Error::Errno(libc::EMSGSIZE));
        }
        buf[..data.len()].copy_from_slice(data);
        self.board.inner.borrow_mut().copies.send_copied += data.len() as u64;
        Ok(())
    }

    /// Sends a datagram (whole or not at all; no completion).
    pub fn send_datagram(&mut self, to: MailboxAddr, data: &[u8]) -> Result<()> {
        self.put_copy(data)?;
        self.end_put_send(data.len(), to, false).map(|_| ())
    }

    /// Sends a reliable message: exactly once, in order per (this mailbox,
    /// `to`); its completion comes by the returned tag.
    pub fn send_message(&mut self, to: MailboxAddr, data: &[u8]) -> Result<Tag> {
        self.put_copy(data)?;
        self.end_put_send(data.len(), to, true)
    }

    fn command(&mut self, c: BoardCommand) -> Result<()> {
        self.board.inner.borrow_mut().command(c)
    }

    // ---- calls ----

    /// Calls mailbox `to` with the first `n` bytes of the `begin_put`
    /// buffer; the response comes by the returned tag (`poll_call`, `wait_call`).
    pub fn end_put_call(&mut self, n: usize, to: MailboxAddr, timeout: Option<Duration>) -> Result<Tag> {
        let (offset, len) = self.take_put(n)?;
        let tag = self.tag();
        let timeout_ms = timeout.map_or(0, |t| t.as_millis().clamp(1, u128::from(u32::MAX)) as u32);
        self.command(BoardCommand::MsgCall { ep: Endpoint(self.id), offset, len, to: to.host, mailbox: to.mailbox, tag, timeout_ms })?;
        self.calls.insert(tag);
        Ok(tag)
    }

    /// Starts a call (many may be outstanding); `timeout` None: the engine's.
    pub fn call_start(&mut self, to: MailboxAddr, request: &[u8], timeout: Option<Duration>) -> Result<Tag> {
        self.put_copy(request)?;
        self.end_put_call(request.len(), to, timeout)
    }

    /// Calls and waits for the response (at most-once at the server; a
    /// clear error — `TimedOut`, `ConnectionRefused` for no such mailbox,
    /// `ConnectionReset` for a restarted server — when there is none).
    pub fn call(&mut self, to: MailboxAddr, request: &[u8]) -> Result<Vec<u8>> {
        let tag = self.call_start(to, request, None)?;
        self.wait_call(tag, None)
    }

    /// The call's response if it came (copied out; its buffer given back).
    pub fn poll_call(&mut self, tag: Tag) -> Option<Result<Vec<u8>>> {
        match self.wait_call_mode(tag, Mode::NonBlocking, None) {
            Err(Error::WouldBlock) => None,
            r => Some(r),
        }
    }

    /// Waits for the call's response (at most `timeout` more, besides the call's own).
    pub fn wait_call(&mut self, tag: Tag, timeout: Option<Duration>) -> Result<Vec<u8>> {
        let mode = self.mode();
        self.wait_call_mode(tag, mode, timeout)
    }

    fn wait_call_mode(&mut self, tag: Tag, mode: Mode, timeout: Option<Duration>) -> Result<Vec<u8>> {
        if !self.calls.contains(&tag) {
            return Err(Error::Invalid("no such call outstanding (its result was taken, or it never started)"));
        }
        let id = self.id;
        let Mailbox { board, inbox, responses, calls, failed_calls, .. } = self;
        board.wait(mode, timeout, |i| {
            drain(i, id, inbox, responses);
            sort_completions(&mut i.eps[id as usize].completions, calls, failed_calls);
            responses.contains_key(&tag) || failed_calls.contains_key(&tag)
        })?;
        self.calls.remove(&tag);
        if let Some(errno) = self.failed_calls.remove(&tag) {
            return Err(Error::from_errno(errno as i32));
        }
        let d = self.responses.remove(&tag).ok_or(Error::WouldBlock)?;
        self.note_queued();
        let data = self.payload(&d)?.to_vec();
        self.board.inner.borrow_mut().copies.recv_copied += data.len() as u64;
        self.release(d)?;
        Ok(data)
    }

    // ---- receiving ----

    /// The next message (not a response: those go to their calls) in place.
    pub fn begin_get(&mut self) -> Result<Message<'_>> {
        if self.held.is_none() {
            let id = self.id;
            let mode = self.mode();
            let Mailbox { board, inbox, responses, .. } = self;
            board.wait(mode, None, |i| {
                drain(i, id, inbox, responses);
                !inbox.is_empty()
            })?;
            self.held = self.inbox.pop_front();
            self.note_queued();
        }
        let d = self.held.ok_or(Error::WouldBlock)?;
        self.view(&d)
    }

    fn view(&self, d: &Descriptor) -> Result<Message<'_>> {
        let i = self.board.inner.borrow();
        let hdr = d.offset as usize;
        let from = i.map.read::<NetAddr>(hdr).to_socket_addr().map_err(|_| Error::Invalid("the engine posted a message without a sender"))?;
        let mailbox = i.map.read::<u32>(hdr + msg::HDR_MAILBOX);
        drop(i);
        let kind = match d.aux {
            msg::DATAGRAM => MessageKind::Datagram,
            msg::MESSAGE => MessageKind::Message,
            msg::REQUEST => MessageKind::Request,
            msg::POSTED_MESSAGE => MessageKind::Posted,
            _ => MessageKind::PostedTooSmall,
        };
        let data = if kind == MessageKind::PostedTooSmall { &[][..] } else { self.payload(d)? };
        let tag = if matches!(kind, MessageKind::Posted | MessageKind::PostedTooSmall) { d.tag } else { 0 };
        Ok(Message { kind, from: MailboxAddr { host: from, mailbox }, data, tag, len: d.len as usize })
    }

    /// The payload of a descriptor checked by `drain`.
    fn payload(&self, d: &Descriptor) -> Result<&[u8]> {
        let i = self.board.inner.borrow();
        let map = i.map.clone();
        drop(i);
        // SAFETY: `drain` checked header and payload lie in one arena buffer
        // inside the mapping, lent to us until we give it back.
        Ok(unsafe { std::slice::from_raw_parts(map.as_ptr().add(d.offset as usize + msg::HEADER), d.len as usize) })
    }

    /// Gives the message `begin_get` returned back (a posted buffer becomes a free send buffer).
    pub fn end_get(&mut self) -> Result<()> {
        let d = self.held.take().ok_or(Error::Invalid("end_get without begin_get"))?;
        self.release(d)
    }

    /// Takes the held posted buffer back as this mailbox's own, unreleased
    /// (for `post_recv_buffer`).
    pub(crate) fn take_held_posted(&mut self) -> Option<BufRef> {
        let d = self.held.filter(|d| matches!(d.aux, msg::POSTED_MESSAGE | msg::POSTED_TOO_SMALL))?;
        self.held = None;
        self.board.inner.borrow().layout.arena.locate(u64::from(d.offset), 0)
    }

    fn release(&mut self, d: Descriptor) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        let b = i.layout.arena.locate(u64::from(d.offset), 0).ok_or(Error::Invalid("descriptor outside the board"))?;
        if b.class == CLASS_DGRAM_TX {
            // A posted buffer: ours again.
            i.dgram_tx.free(b);
            Ok(())
        } else {
            i.put_command(0, BoardCommand::UdpRelease { offset: u64::from(d.offset) }.encode())
        }
    }

    /// Copies the next message out: (kind, sender, length).
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<(MessageKind, MailboxAddr, usize)> {
        let (kind, from, n) = {
            let m = self.begin_get()?;
            let n = m.data.len().min(buf.len());
            buf[..n].copy_from_slice(&m.data[..n]);
            (m.kind, m.from, n)
        };
        if kind == MessageKind::Request {
            // A request read by copy is still answered with `reply`.
            self.board.inner.borrow_mut().copies.recv_copied += n as u64;
            return Ok((kind, from, n));
        }
        self.board.inner.borrow_mut().copies.recv_copied += n as u64;
        self.end_get()?;
        Ok((kind, from, n))
    }

    /// The held request's buffer after its header: write the response
    /// here and `reply_in_place` its length.
    pub fn reply_buffer(&mut self) -> Result<&mut [u8]> {
        let d = self.held.filter(|d| d.aux == msg::REQUEST).ok_or(Error::Invalid("no request held"))?;
        let b = self.board.inner.borrow().layout.arena.locate(u64::from(d.offset), 0).ok_or(Error::Invalid("descriptor outside the board"))?;
        let skip = d.offset as usize - self.board.inner.borrow().layout.arena.offset_of(b) + msg::HEADER;
        Ok(self.buffer_mut(b, skip))
    }

    /// Answers the held request with the first `n` bytes of `reply_buffer`
    /// (the request's own buffer goes to the engine with it).
    pub fn reply_in_place(&mut self, n: usize) -> Result<()> {
        let room = self.reply_buffer()?.len();
        if n > room {
            return Err(Error::Errno(libc::EMSGSIZE));
        }
        let d = self.held.take().expect("checked by reply_buffer");
        let offset = u64::from(d.offset) + msg::HEADER as u64;
        self.command(BoardCommand::MsgReply { ep: Endpoint(self.id), offset, len: n as u64, token: d.tag })
    }

    /// Answers the held request with `response` (in place when it fits).
    pub fn reply(&mut self, response: &[u8]) -> Result<()> {
        let room = self.reply_buffer()?.len();
        if response.len() <= room {
            self.reply_buffer()?[..response.len()].copy_from_slice(response);
            self.board.inner.borrow_mut().copies.send_copied += response.len() as u64;
            return self.reply_in_place(response.len());
        }
        let d = self.held.take().expect("checked by reply_buffer");
        self.put_copy(response)?;
        let (offset, len) = self.take_put(response.len())?;
        self.command(BoardCommand::MsgReply { ep: Endpoint(self.id), offset, len, token: d.tag })?;
        self.release(d)
    }

    // ---- completions ----

    /// A completion: a reliable message or write acknowledged (`Ok`) or
    /// failed, or a send refused at once.
    pub fn poll_completion(&mut self) -> Option<(Tag, Result<()>)> {
        let mut b = self.board.inner.borrow_mut();
        let _ = b.pump();
        let c = &mut b.eps[self.id as usize].completions;
        sort_completions(c, &self.calls, &mut self.failed_calls);
        let (tag, errno) = c.pop_front()?;
        Some((tag, if errno == 0 { Ok(()) } else { Err(Error::from_errno(errno as i32)) }))
    }

    /// Waits for a completion (at most `timeout`).
    pub fn wait_completion(&mut self, timeout: Option<Duration>) -> Result<(Tag, Result<()>)> {
        let id = self.id;
        let mode = self.mode();
        let Mailbox { board, calls, failed_calls, .. } = self;
        board.wait(mode, timeout, |i| {
            let c = &mut i.eps[id as usize].completions;
            sort_completions(c, calls, failed_calls);
            !c.is_empty()
        })?;
        self.poll_completion().ok_or(Error::WouldBlock)
    }

    // ---- posted receives (queue pairs) ----

    /// Posts a receive buffer (a board send buffer, lent to the engine
    /// until a message fills it): the next message lands there.
    pub fn post_recv(&mut self, tag: Tag) -> Result<()> {
        let b = self.take_send_buffer()?;
        self.post_buffer(b, tag)
    }

    pub(crate) fn post_buffer(&mut self, b: BufRef, tag: Tag) -> Result<()> {
        let (off, size) = {
            let i = self.board.inner.borrow();
            (i.layout.arena.offset_of(b), i.layout.arena.size_of(b))
        };
        self.command(BoardCommand::MsgPostRecv { ep: Endpoint(self.id), offset: off as u64, len: size as u64, tag })
    }

    // ---- one-sided writes ----

    /// Registers a board buffer as a region peers write into by its
    /// cookie; `tripwire`: an offset whose byte, once written, posts a
    /// tripwire; `notify`: a note per write.
    pub fn register(&mut self, tripwire: Option<usize>, notify: bool) -> Result<Region> {
        let b = self.take_send_buffer()?;
        let (off, size) = {
            let i = self.board.inner.borrow();
            (i.layout.arena.offset_of(b), i.layout.arena.size_of(b))
        };
        // The engine writes it from now on: zero it first, so what a peer wrote is all that shows.
        self.buffer_mut(b, 0).fill(0);
        let ep = Endpoint(self.id);
        let r = self.board.request_value(
            |sync| BoardCommand::MsgRegister { sync, ep, offset: off as u64, len: size as u64, tripwire: tripwire.map(|t| t as u64), notify },
            None,
        );
        match r {
            Ok(cookie) => {
                let r = Region { cookie, offset: off, len: size };
                self.regions.push(r);
                Ok(r)
            }
            Err(e) => {
                // Refused before the engine took it: ours again.
                self.board.inner.borrow_mut().dgram_tx.free(b);
                Err(e)
            }
        }
    }

    /// A region's bytes as the engine wrote them (peers may write more at any time).
    pub fn region_bytes(&self, r: &Region) -> &[u8] {
        let map = self.board.inner.borrow().map.clone();
        // SAFETY: the region is a buffer of the mapping the board keeps
        // alive; the engine writes it (plain bytes), nobody frees it while registered.
        unsafe { std::slice::from_raw_parts(map.as_ptr().add(r.offset), r.len) }
    }

    /// Gives a region up (its buffer comes back as a send buffer).
    pub fn unregister(&mut self, r: Region) -> Result<()> {
        self.regions.retain(|x| x.cookie != r.cookie);
        self.command(BoardCommand::MsgUnregister { ep: Endpoint(self.id), cookie: r.cookie })
    }

    /// Writes `data` into the region `cookie` of the engine `host` at
    /// `offset` (reliable and in order from this mailbox; the completion
    /// comes by the tag once that engine has it).
    pub fn write(&mut self, host: SocketAddr, cookie: u64, offset: u32, data: &[u8]) -> Result<Tag> {
        self.put_copy(data)?;
        let (off, len) = self.take_put(data.len())?;
        let tag = self.tag();
        self.command(BoardCommand::MsgWrite { ep: Endpoint(self.id), offset: off, len, to: host, cookie, at: offset, tag })?;
        Ok(tag)
    }

    /// A write that landed in one of this mailbox's regions (offset, length),
    /// for regions registered with `notify`.
    pub fn poll_write(&mut self) -> Option<(u32, u32)> {
        let mut b = self.board.inner.borrow_mut();
        let _ = b.pump();
        b.eps[self.id as usize].writes.pop_front()
    }

    /// Waits until a write covers a region's tripwire byte; the region's cookie.
    pub fn wait_tripwire(&mut self, timeout: Option<Duration>) -> Result<u64> {
        let id = self.id;
        let mut got = None;
        self.board.wait(self.mode(), timeout, |i| {
            got = i.eps[id as usize].tripwires.pop_front();
            got.is_some()
        })?;
        got.ok_or(Error::WouldBlock)
    }
}

/// Moves failed calls' completions out of the completions (a failed call
/// belongs to `wait_call`, never to `poll_completion`).
fn sort_completions(c: &mut VecDeque<(u32, u32)>, calls: &std::collections::HashSet<Tag>, failed: &mut HashMap<Tag, u32>) {
    if calls.is_empty() {
        return;
    }
    c.retain(|(tag, errno)| {
        if calls.contains(tag) {
            failed.insert(*tag, *errno);
            false
        } else {
            true
        }
    });
}

/// Moves descriptors from the mailbox ring into the inbox (responses to
/// their calls), each checked to lie in one board buffer.
pub(crate) fn drain(i: &mut crate::board::Inner, id: EndpointId, inbox: &mut VecDeque<Descriptor>, responses: &mut HashMap<u32, Descriptor>) {
    let crate::board::Inner { layout, eps, .. } = i;
    let arena = &layout.arena;
    let Some(m) = eps[id as usize].mailbox.as_mut() else { return };
    while let Ok(Some(d)) = m.begin_get() {
        m.end_get();
        let whole = if d.aux == msg::POSTED_TOO_SMALL { msg::HEADER as u64 } else { msg::HEADER as u64 + u64::from(d.len) };
        if arena.locate(u64::from(d.offset), whole).is_none() {
            // Never from a sound engine: not ours to follow.
            continue;
        }
        if d.aux == msg::RESPONSE {
            responses.insert(d.tag, d);
        } else {
            inbox.push_back(d);
        }
    }
    eps[id as usize].msg_queued = inbox.len() + responses.len();
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        if let Ok(mut i) = self.board.inner.try_borrow_mut() {
            if let Some(b) = self.put_buf.take() {
                i.dgram_tx.free(b);
            }
            i.eps[self.id as usize].open = false;
            let _ = i.command(BoardCommand::Close { ep: Endpoint(self.id) });
        }
    }
}
