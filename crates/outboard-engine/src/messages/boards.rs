//! The message service's side of board mailboxes: which board endpoint owns
//! which mailbox, call, reliable message and lookup, and the notes (call
//! results, completions, lookups) waiting for each board. The board side
//! (`host::session::mailboxes`) moves the bytes between the board and the
//! endpoint; this side never touches board memory.
//!
//! Everything here is keyed by the owning session, so a board that goes
//! (`forget`) leaves nothing behind: its mailboxes are unbound, its calls'
//! and messages' results are dropped when they come.

use super::MessageService;
use outboard_msg::{BindError, CallError, CallId, CallToken, Event, LookupError, LookupId, MailboxAddr, MessageError, MessageId, SendError};
use outboard_time::{Duration, Instant};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// A board endpoint: the session (the board's number) and the endpoint id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BoardRef {
    pub session: u64,
    pub ep: u32,
}

/// Who sends (a board endpoint and its mailbox), to whom, and the
/// application's tag for the completion.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub owner: BoardRef,
    pub from: u32,
    pub to: MailboxAddr,
    pub tag: u32,
}

/// What the service has for a board.
#[derive(Debug)]
pub enum BoardNote {
    /// A reliable message or a write completed (errno 0), or failed; or a call failed.
    Completion { ep: u32, tag: u32, errno: u32 },
    /// A call's response.
    Response { ep: u32, tag: u32, from: MailboxAddr, data: Vec<u8> },
    /// A lookup's result for sync `sync`: the mailbox number or -errno.
    Lookup { sync: u32, result: i64 },
}

/// The routing tables.
#[derive(Default)]
pub struct BoardRoutes {
    mailboxes: HashMap<u32, BoardRef>,
    calls: HashMap<CallId, (BoardRef, u32, MailboxAddr)>,
    messages: HashMap<MessageId, (BoardRef, u32)>,
    lookups: HashMap<LookupId, (u64, u32)>,
    notes: HashMap<u64, VecDeque<BoardNote>>,
}

/// The errno a board sees for each failure (Linux's nearest meaning).
pub fn send_errno(e: SendError) -> u32 {
    (match e {
        SendError::NoMailbox => libc::EBADF,
        SendError::TooBig => libc::EMSGSIZE,
        SendError::QueueFull => libc::ENOBUFS,
        SendError::UnknownCall => libc::ENOENT,
    }) as u32
}

pub fn message_errno(e: MessageError) -> u32 {
    (match e {
        MessageError::TimedOut => libc::ETIMEDOUT,
        MessageError::NoMailbox => libc::ECONNREFUSED,
        MessageError::PeerRestarted => libc::ECONNRESET,
    }) as u32
}

pub fn call_errno(e: CallError) -> u32 {
    (match e {
        CallError::TimedOut => libc::ETIMEDOUT,
        CallError::NoMailbox => libc::ECONNREFUSED,
        CallError::ServerRestarted => libc::ECONNRESET,
        CallError::Failed => libc::EREMOTEIO,
    }) as u32
}

pub fn bind_errno(e: &BindError) -> i64 {
    -i64::from(match e {
        BindError::NumberInUse(_) | BindError::NameInUse(_) => libc::EADDRINUSE,
        BindError::BadName => libc::EINVAL,
        BindError::NoNumbers => libc::EMFILE,
    })
}

impl MessageService {
    /// The engine's message address (its address and port).
    pub fn local_host(&self) -> SocketAddr {
        self.local
    }

    /// Binds a mailbox for a board endpoint.
    pub fn board_bind(&mut self, owner: BoardRef, number: Option<u32>, name: Option<&str>, capacity: Option<usize>) -> Result<u32, BindError> {
        let cap = capacity.unwrap_or(self.ep.config().mailbox_capacity);
        let n = self.ep.bind_with_capacity(number, name, cap)?;
        self.routes.mailboxes.insert(n, owner);
        Ok(n)
    }

    /// Unbinds a board's mailbox (what waits in it is dropped).
    pub fn board_unbind(&mut self, number: u32) {
        self.routes.mailboxes.remove(&number);
        self.ep.unbind(number);
    }

    pub fn board_recv(&mut self, now: Instant, number: u32) -> Option<outboard_msg::Delivery> {
        self.ep.recv(now, number)
    }

    /// Sends a datagram or a reliable message; a reliable one's completion comes as a note.
    pub fn board_send(&mut self, now: Instant, r: Route, data: &[u8], reliable: bool) -> Result<(), u32> {
        if reliable {
            let id = self.ep.send_message(now, r.from, r.to, data).map_err(send_errno)?;
            self.routes.messages.insert(id, (r.owner, r.tag));
        } else {
            self.ep.send_datagram(now, r.from, r.to, data).map_err(send_errno)?;
        }
        Ok(())
    }

    /// Starts a call; its response or failure comes as a note.
    pub fn board_call(&mut self, now: Instant, r: Route, data: &[u8], timeout: Option<Duration>) -> Result<(), u32> {
        let id = self.ep.call(now, r.from, r.to, data, timeout).map_err(send_errno)?;
        self.routes.calls.insert(id, (r.owner, r.tag, r.to));
        Ok(())
    }

    pub fn board_reply(&mut self, now: Instant, token: &CallToken, data: &[u8]) -> Result<(), u32> {
        self.ep.reply(now, token, data).map_err(send_errno)
    }

    pub fn board_lookup(&mut self, now: Instant, session: u64, sync: u32, host: SocketAddr, name: &str) -> Result<(), u32> {
        let id = self.ep.lookup(now, host, name).map_err(|_| libc::EINVAL as u32)?;
        self.routes.lookups.insert(id, (session, sync));
        Ok(())
    }

    /// The notes waiting for `session` (taken).
    pub fn take_notes(&mut self, session: u64) -> Option<VecDeque<BoardNote>> {
        self.routes.notes.remove(&session)
    }

    /// Puts back what a board could not take yet (no buffer free), ahead of newer notes.
    pub fn return_notes(&mut self, session: u64, mut notes: VecDeque<BoardNote>) {
        if notes.is_empty() {
            return;
        }
        if let Some(newer) = self.routes.notes.remove(&session) {
            notes.extend(newer);
        }
        self.routes.notes.insert(session, notes);
    }

    /// Whether any board has notes waiting.
    pub fn has_notes(&self) -> bool {
        !self.routes.notes.is_empty()
    }

    /// A board went: its mailboxes are unbound and its results forgotten.
    pub fn forget(&mut self, session: u64) {
        let mine: Vec<u32> = self.routes.mailboxes.iter().filter(|(_, o)| o.session == session).map(|(n, _)| *n).collect();
        for n in mine {
            self.board_unbind(n);
        }
        self.routes.calls.retain(|_, (o, _, _)| o.session != session);
        self.routes.messages.retain(|_, (o, _)| o.session != session);
        self.routes.lookups.retain(|_, (s, _)| *s != session);
        self.routes.notes.remove(&session);
    }

    /// An endpoint event for a board, if it is one's (else the caller's).
    pub(super) fn route(&mut self, e: &Event) -> bool {
        let r = &mut self.routes;
        let (session, note) = match e {
            Event::MessageAcked { message } => match r.messages.remove(message) {
                Some((o, tag)) => (o.session, BoardNote::Completion { ep: o.ep, tag, errno: 0 }),
                None => return false,
            },
            Event::MessageFailed { message, error } => match r.messages.remove(message) {
                Some((o, tag)) => (o.session, BoardNote::Completion { ep: o.ep, tag, errno: message_errno(*error) }),
                None => return false,
            },
            Event::CallDone { call, result } => match r.calls.remove(call) {
                Some((o, tag, from)) => (
                    o.session,
                    match result {
                        Ok(data) => BoardNote::Response { ep: o.ep, tag, from, data: data.clone() },
                        Err(e) => BoardNote::Completion { ep: o.ep, tag, errno: call_errno(*e) },
                    },
                ),
                None => return false,
            },
            Event::LookupDone { lookup, result } => match r.lookups.remove(lookup) {
                Some((session, sync)) => (
                    session,
                    BoardNote::Lookup {
                        sync,
                        result: match result {
                            Ok(a) => i64::from(a.mailbox),
                            Err(LookupError::NoName) => -i64::from(libc::ENOENT),
                            Err(LookupError::TimedOut) => -i64::from(libc::ETIMEDOUT),
                        },
                    },
                ),
                None => return false,
            },
            Event::Readable { mailbox } => return r.mailboxes.contains_key(mailbox),
            Event::SendSpace { from, .. } => return r.mailboxes.contains_key(from),
        };
        r.notes.entry(session).or_default().push_back(note);
        true
    }

    /// The board mailboxes, for stat.
    pub fn board_mailboxes(&self) -> usize {
        self.routes.mailboxes.len()
    }
}
