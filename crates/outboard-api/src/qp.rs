//! VIA's queue pairs and completion queues, as a thin layer over mailboxes
//! (CLAN built VIA the same way over its one low-level interface).
//!
//! A [`QueuePair`] is a mailbox bound `posted` (messages land only in the
//! buffers its receive queue holds) and the peer mailbox its sends go to.
//! A [`CompletionQueue`] holds many pairs: `post_send` and `post_recv` name
//! a pair and a work-request id; `poll` and `wait` return completions from
//! all of them, in the order they are found. Sends are reliable messages (a
//! send completes when the peer's engine has it); a receive completes when
//! a message filled its buffer, which stays the application's to read
//! (`data`) until `repost` (posted again) or `release`.
//!
//! With no receive posted, messages wait in the engine (the protocol's
//! credit holds the sender back): VIA's "receive not posted" error becomes
//! backpressure. A message larger than the posted buffer completes that
//! receive with `EMSGSIZE` (the message is dropped, as VIA's length error).

use crate::board::{Board, Mode};
use crate::mailbox::{Mailbox, MailboxAddr, MailboxOptions, MessageKind, Tag};
use crate::{Error, Result};
use std::collections::HashMap;
use std::time::Duration;

/// One end of a VIA-style connection: a posted-receive mailbox and its peer.
pub struct QueuePair {
    mb: Mailbox,
    peer: Option<MailboxAddr>,
    /// Send tags → work-request ids.
    sends: HashMap<Tag, u32>,
    /// A received message read by `data` until `repost`/`release`.
    holding: bool,
}

impl QueuePair {
    /// A queue pair on mailbox `number` (None: any).
    pub fn bind(board: &Board, number: Option<u32>) -> Result<QueuePair> {
        let mb = board.bind_mailbox_with(&MailboxOptions { number, posted: true, ..Default::default() })?;
        Ok(QueuePair { mb, peer: None, sends: HashMap::new(), holding: false })
    }
    /// Its address (give it to the peer).
    pub fn addr(&self) -> MailboxAddr {
        self.mb.addr()
    }
    /// Where its sends go.
    pub fn connect(&mut self, peer: MailboxAddr) {
        self.peer = Some(peer);
    }
}

/// What a completion is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkOp {
    Send,
    Recv,
}

/// One completion: the pair (its index in the queue), the operation, the
/// work-request id, and the result (a receive's length).
#[derive(Debug)]
pub struct Completion {
    pub qp: usize,
    pub op: WorkOp,
    pub wr_id: u32,
    pub result: Result<usize>,
    /// A receive's sender (a pair's peer learns where to answer from it).
    pub from: Option<MailboxAddr>,
}

/// Completions of many queue pairs.
#[derive(Default)]
pub struct CompletionQueue {
    qps: Vec<QueuePair>,
    next: usize,
}

impl CompletionQueue {
    pub fn new() -> CompletionQueue {
        CompletionQueue::default()
    }
    /// Adds a pair; its index names it from now on.
    pub fn add(&mut self, qp: QueuePair) -> usize {
        self.qps.push(qp);
        self.qps.len() - 1
    }
    pub fn qp(&mut self, qp: usize) -> &mut QueuePair {
        &mut self.qps[qp]
    }

    fn pair(&mut self, qp: usize) -> Result<&mut QueuePair> {
        self.qps.get_mut(qp).ok_or(Error::Invalid("no such queue pair"))
    }

    /// Sends `data` to the pair's peer; completes with `wr_id`.
    pub fn post_send(&mut self, qp: usize, data: &[u8], wr_id: u32) -> Result<()> {
        let q = self.pair(qp)?;
        let peer = q.peer.ok_or(Error::Invalid("queue pair not connected"))?;
        let tag = q.mb.send_message(peer, data)?;
        q.sends.insert(tag, wr_id);
        Ok(())
    }

    /// Posts a receive buffer (a board send buffer) that completes with `wr_id`.
    pub fn post_recv(&mut self, qp: usize, wr_id: u32) -> Result<()> {
        self.pair(qp)?.mb.post_recv(wr_id)
    }

    /// The message of the pair's last receive completion, in place.
    pub fn data(&mut self, qp: usize) -> Result<&[u8]> {
        let q = self.pair(qp)?;
        if !q.holding {
            return Err(Error::Invalid("no receive completion held"));
        }
        q.mb.set_mode(Mode::NonBlocking);
        Ok(q.mb.begin_get()?.data)
    }

    /// Posts the buffer of the pair's last receive completion again, as `wr_id`.
    pub fn repost(&mut self, qp: usize, wr_id: u32) -> Result<()> {
        let q = self.pair(qp)?;
        if !std::mem::take(&mut q.holding) {
            return Err(Error::Invalid("no receive completion held"));
        }
        let b = q.mb.take_held_posted().ok_or(Error::Invalid("no posted buffer held"))?;
        q.mb.post_buffer(b, wr_id)
    }

    /// Frees the buffer of the pair's last receive completion.
    pub fn release(&mut self, qp: usize) -> Result<()> {
        let q = self.pair(qp)?;
        if std::mem::take(&mut q.holding) {
            q.mb.end_get()?;
        }
        Ok(())
    }

    /// The next completion of any pair, if one is there.
    pub fn poll(&mut self) -> Option<Completion> {
        let n = self.qps.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(c) = Self::poll_one(&mut self.qps[i], i) {
                self.next = (i + 1) % n;
                return Some(c);
            }
        }
        None
    }

    fn poll_one(q: &mut QueuePair, i: usize) -> Option<Completion> {
        if let Some((tag, r)) = q.mb.poll_completion() {
            let wr_id = q.sends.remove(&tag).unwrap_or(tag);
            return Some(Completion { qp: i, op: WorkOp::Send, wr_id, result: r.map(|_| 0), from: None });
        }
        if q.holding {
            return None;
        }
        q.mb.set_mode(Mode::NonBlocking);
        let (kind, wr_id, len, from) = match q.mb.begin_get() {
            Ok(m) => (m.kind, m.tag, m.len, m.from),
            Err(_) => return None,
        };
        q.holding = true;
        let result = match kind {
            MessageKind::Posted => Ok(len),
            _ => Err(Error::Errno(libc::EMSGSIZE)),
        };
        Some(Completion { qp: i, op: WorkOp::Recv, wr_id, result, from: Some(from) })
    }

    /// Waits for the next completion of any pair (at most `timeout`).
    #[allow(clippy::disallowed_methods)] // the caller's timeout is wall-clock time
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Completion> {
        let start = std::time::Instant::now();
        loop {
            if let Some(c) = self.poll() {
                return Ok(c);
            }
            let Some(first) = self.qps.first() else { return Err(Error::Invalid("no queue pairs")) };
            let board = first.mb.board.clone();
            let left = match timeout {
                Some(t) => Some(t.checked_sub(start.elapsed()).ok_or(Error::WouldBlock)?),
                None => None,
            };
            let ids: Vec<u32> = self.qps.iter().map(|q| q.mb.id()).collect();
            let mode = match board.inner.borrow().mode {
                Mode::Polling => Mode::Polling,
                _ => Mode::Blocking,
            };
            board.wait(mode, left, |i| {
                ids.iter().any(|&id| {
                    let e = &mut i.eps[id as usize];
                    !e.completions.is_empty() || e.mailbox.as_mut().is_some_and(|m| matches!(m.begin_get(), Ok(Some(_))))
                })
            })?;
        }
    }
}
