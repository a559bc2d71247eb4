//! Mailboxes: where messages wait for their application, and the byte budget
//! that reliable senders' credit is drawn from.
//!
//! Accounting, in bytes of [`cost`]: `queued` (whole messages waiting),
//! `held` (in-order bytes of reliable messages not yet complete, and requests
//! being served) and `reserved` (credit promised to reliable senders for frames
//! not yet arrived). Credit is granted only while `queued + held + reserved`
//! stays within the capacity, and a frame that arrives turns at most its own
//! reservation into `held`, so a mailbox never holds more than its capacity
//! and a reliable message within credit is never dropped for want of room.

use crate::addr::MailboxAddr;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Bytes a message (or a frame's reservation) counts beyond its payload.
pub const OVERHEAD: usize = 64;

/// The budget cost of a message or a fragment of `len` bytes.
pub const fn cost(len: usize) -> usize {
    len + OVERHEAD
}

/// Identifies one call at the server, for [`crate::Endpoint::reply`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CallToken {
    pub(crate) client: SocketAddr,
    pub(crate) session: u32,
    pub(crate) call: u64,
    /// The server mailbox the request came to.
    pub(crate) mailbox: u32,
}

impl CallToken {
    /// The client's call number (unique per client session).
    pub fn call_id(&self) -> u64 {
        self.call
    }
}

/// What kind of message waits in a mailbox.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DeliveryKind {
    Datagram,
    Message,
    /// An RPC request: answer it with `reply(token, ...)`.
    Request(CallToken),
}

/// A whole message taken from a mailbox.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Delivery {
    pub from: MailboxAddr,
    pub kind: DeliveryKind,
    pub data: Vec<u8>,
}

/// Per-mailbox counters (`outboard stat` lists them).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MailboxStats {
    pub datagrams: u64,
    pub messages: u64,
    pub requests: u64,
    pub bytes: u64,
    /// Datagrams and requests refused because the mailbox was full (the
    /// client re-sends a request; a datagram is gone, as its service says).
    pub dropped_full: u64,
    /// Times a reliable flow was left without credit (backpressure).
    pub credit_stalls: u64,
}

#[derive(Debug)]
pub struct Mailbox {
    pub(crate) number: u32,
    pub(crate) name: Option<String>,
    pub(crate) capacity: usize,
    pub(crate) queue: VecDeque<Delivery>,
    pub(crate) queued: usize,
    pub(crate) held: usize,
    pub(crate) reserved: usize,
    /// Some flow asked for credit this mailbox could not give.
    pub(crate) starved: bool,
    pub(crate) stats: MailboxStats,
}

/// A snapshot for listings.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub struct MailboxInfo {
    pub number: u32,
    pub name: Option<String>,
    pub capacity: usize,
    pub queued_messages: usize,
    pub queued_bytes: usize,
    pub held_bytes: usize,
    pub reserved_bytes: usize,
    pub stats: MailboxStats,
}

impl Mailbox {
    pub(crate) fn new(number: u32, name: Option<String>, capacity: usize) -> Mailbox {
        Mailbox {
            number,
            name,
            capacity,
            queue: VecDeque::new(),
            queued: 0,
            held: 0,
            reserved: 0,
            starved: false,
            stats: MailboxStats::default(),
        }
    }

    pub(crate) fn used(&self) -> usize {
        self.queued + self.held + self.reserved
    }

    pub(crate) fn free(&self) -> usize {
        self.capacity.saturating_sub(self.used())
    }

    /// Takes `bytes` of the budget for something outside credit (a datagram,
    /// a request); false when it does not fit.
    pub(crate) fn admit(&mut self, bytes: usize) -> bool {
        if self.free() >= bytes {
            self.held += bytes;
            true
        } else {
            self.stats.dropped_full += 1;
            false
        }
    }

    /// Queues a whole message whose `cost` is already counted in `held`.
    /// Returns true when the mailbox was empty before (it became readable).
    pub(crate) fn push(&mut self, d: Delivery) -> bool {
        let c = cost(d.data.len());
        self.held = self.held.saturating_sub(c);
        self.queued += c;
        match d.kind {
            DeliveryKind::Datagram => self.stats.datagrams += 1,
            DeliveryKind::Message => self.stats.messages += 1,
            DeliveryKind::Request(_) => self.stats.requests += 1,
        }
        self.stats.bytes += d.data.len() as u64;
        let was_empty = self.queue.is_empty();
        self.queue.push_back(d);
        was_empty
    }

    pub(crate) fn pop(&mut self) -> Option<Delivery> {
        let d = self.queue.pop_front()?;
        self.queued = self.queued.saturating_sub(cost(d.data.len()));
        Some(d)
    }

    pub(crate) fn info(&self) -> MailboxInfo {
        MailboxInfo {
            number: self.number,
            name: self.name.clone(),
            capacity: self.capacity,
            queued_messages: self.queue.len(),
            queued_bytes: self.queue.iter().map(|d| d.data.len()).sum(),
            held_bytes: self.held,
            reserved_bytes: self.reserved,
            stats: self.stats,
        }
    }
}
