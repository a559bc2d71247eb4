//! The server side of calls: each request queued to its mailbox once.

use crate::addr::MailboxAddr;
use crate::assembly::{Added, Assembly};
use crate::mailbox::{cost, CallToken, Delivery, DeliveryKind, Mailbox};
use crate::io::Io;
use crate::outbox::{Payload, RETRANSMIT};
use crate::Config;
use outboard_time::{Duration, Instant};
use super::WINDOW;
use outboard_wire::msg::{flags, MsgKind, MsgRepr, MsgStatus};
use outboard_wire::flowhash::FlowMap;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// How often the server looks for expired replies and abandoned requests.
const SWEEP: Duration = Duration::from_millis(100);

#[derive(Debug)]
enum Served {
    /// Fragments arriving; `cost(total)` of the mailbox's budget is held for it.
    Assembling { mailbox: u32, client_mailbox: u32, assembly: Assembly },
    /// Queued to the mailbox or taken by the application: waiting for `reply`.
    Running { client_mailbox: u32 },
    Replied { mailbox: u32, client_mailbox: u32, response: Arc<[u8]>, status: u32, at: Instant },
    /// Replied and acknowledged (or the reply expired): never run again.
    Done,
}

#[derive(Debug, Default)]
struct ClientCalls {
    watermark: u64,
    calls: BTreeMap<u64, Served>,
    last_active: Option<Instant>,
}

/// What the endpoint must do about a request frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RequestOutcome {
    Handled,
    /// Answer with an error of this status.
    Refuse(MsgStatus),
}

#[derive(Debug, Default)]
pub(crate) struct Server {
    clients: FlowMap<(SocketAddr, u32), ClientCalls>,
    /// Calls remembered, over all clients.
    calls: usize,
    next_sweep: Option<Instant>,
    pub executed: u64,
    pub replies_resent: u64,
    pub duplicates: u64,
    pub stale: u64,
    pub abandoned: u64,
}

/// Clients (address and session) a server remembers at once.
const MAX_CLIENTS: usize = 65536;
/// Calls (of all clients) a server remembers at once.
const MAX_CALLS: usize = 1 << 20;

fn release(mailboxes: &mut FlowMap<u32, Mailbox>, s: &Served) {
    if let Served::Assembling { mailbox, assembly, .. } = s {
        if let Some(mb) = mailboxes.get_mut(mailbox) {
            mb.held = mb.held.saturating_sub(cost(assembly.footprint()));
        }
    }
}

impl Server {
    pub fn on_request(&mut self, io: &mut Io, mailboxes: &mut FlowMap<u32, Mailbox>, now: Instant, src: SocketAddr, repr: &MsgRepr, payload: &[u8]) -> RequestOutcome {
        let (cfg, session) = (io.cfg, io.session);
        if !mailboxes.contains_key(&repr.dst_mailbox) {
            return RequestOutcome::Refuse(MsgStatus::NoMailbox);
        }
        if repr.total_len as usize > cfg.max_message {
            return RequestOutcome::Handled;
        }
        let key = (src, repr.src_session);
        if !self.clients.contains_key(&key) && self.clients.len() >= MAX_CLIENTS {
            return RequestOutcome::Refuse(MsgStatus::Busy);
        }
        let cc = self.clients.entry(key).or_default();
        cc.last_active = Some(now);
        if repr.ack > cc.watermark {
            cc.watermark = repr.ack;
            let keep = cc.calls.split_off(&repr.ack);
            let gone = std::mem::replace(&mut cc.calls, keep);
            self.calls -= gone.len();
            for s in gone.values() {
                release(mailboxes, s);
            }
        }
        if repr.id < cc.watermark {
            self.stale += 1;
            return RequestOutcome::Handled;
        }
        if !cc.calls.contains_key(&repr.id) {
            if cc.calls.len() >= cfg.max_server_calls_per_client || self.calls >= MAX_CALLS {
                return RequestOutcome::Refuse(MsgStatus::Busy);
            }
            let mb = mailboxes.get_mut(&repr.dst_mailbox).expect("checked above");
            if !mb.admit(cost(repr.total_len as usize)) {
                // No room: the client sends the request again.
                return RequestOutcome::Handled;
            }
            let assembly = Assembly::new(repr.total_len, now + cfg.reassembly_timeout);
            cc.calls.insert(repr.id, Served::Assembling { mailbox: repr.dst_mailbox, client_mailbox: repr.src_mailbox, assembly });
            self.calls += 1;
            self.next_sweep.get_or_insert(now + SWEEP);
        }
        let entry = cc.calls.get_mut(&repr.id).expect("present");
        let window_end = repr.flags & flags::ACK_NOW != 0;
        let held = |held: u32| MsgRepr {
            src_mailbox: repr.dst_mailbox,
            dst_mailbox: repr.src_mailbox,
            src_session: session,
            dst_session: repr.src_session,
            id: repr.id,
            credit: held,
            ..MsgRepr::new(MsgKind::RequestAck)
        };
        match entry {
            Served::Assembling { assembly, mailbox, client_mailbox } => {
                let added = assembly.add(repr.total_len, repr.offset, payload);
                if added == Added::Partial {
                    // Progress keeps a large request alive.
                    assembly.deadline = now + cfg.reassembly_timeout;
                }
                if added != Added::Complete {
                    if window_end {
                        io.out.push(src, held(assembly.prefix()), Payload::None);
                    }
                    return RequestOutcome::Handled;
                }
                if window_end {
                    io.out.push(src, held(repr.total_len), Payload::None);
                }
                let (mailbox, client_mailbox) = (*mailbox, *client_mailbox);
                let Served::Assembling { assembly, .. } = std::mem::replace(entry, Served::Running { client_mailbox }) else {
                    unreachable!("matched above")
                };
                let token = CallToken { client: src, session: repr.src_session, call: repr.id, mailbox };
                let d = Delivery {
                    from: MailboxAddr::new(src, client_mailbox),
                    kind: DeliveryKind::Request(token),
                    data: assembly.into_bytes(),
                };
                self.executed += 1;
                let mb = mailboxes.get_mut(&mailbox).expect("checked above");
                if mb.push(d) {
                    io.events.push_back(crate::Event::Readable { mailbox });
                }
            }
            Served::Running { .. } => {
                self.duplicates += 1;
                io.out.push(src, held(repr.total_len), Payload::None);
            }
            Served::Replied { mailbox, client_mailbox, response, status, .. } => {
                self.replies_resent += 1;
                let r = response_repr(session, *mailbox, *client_mailbox, repr.src_session, repr.id, true, *status);
                // The next window from what the client holds.
                io.out.push_window(src, r, response, cfg.frame_payload(), repr.credit as usize, WINDOW);
            }
            Served::Done => self.duplicates += 1,
        }
        RequestOutcome::Handled
    }

    /// The application's reply to the call `token` names. False when that
    /// call is not waiting for a reply (already replied, or forgotten).
    /// `status` is a `response_status` (a failed response has no bytes).
    pub fn reply(&mut self, io: &mut Io, now: Instant, token: &CallToken, response: Arc<[u8]>, status: u32) -> bool {
        let Some(cc) = self.clients.get_mut(&(token.client, token.session)) else { return false };
        let Some(entry) = cc.calls.get_mut(&token.call) else { return false };
        let Served::Running { client_mailbox } = *entry else { return false };
        let r = response_repr(io.session, token.mailbox, client_mailbox, token.session, token.call, false, status);
        io.out.push_window(token.client, r, &response, io.cfg.frame_payload(), 0, WINDOW);
        *entry = Served::Replied { mailbox: token.mailbox, client_mailbox, response, status, at: now };
        self.next_sweep.get_or_insert(now + SWEEP);
        true
    }

    pub fn on_response_ack(&mut self, src: SocketAddr, repr: &MsgRepr) {
        if let Some(cc) = self.clients.get_mut(&(src, repr.src_session)) {
            if let Some(e @ Served::Replied { .. }) = cc.calls.get_mut(&repr.id) {
                *e = Served::Done;
            }
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Drops abandoned partial requests, and expired replies (keeping the call
    /// as done), and clients with nothing left but finished calls that have
    /// been quiet for ten reply lifetimes.
    pub fn on_timeout(&mut self, now: Instant, cfg: &Config, mailboxes: &mut FlowMap<u32, Mailbox>) {
        if self.next_sweep.is_none_or(|t| now < t) {
            return;
        }
        let mut busy = false;
        let mut abandoned = 0;
        let mut forgotten = 0;
        let forget_after = cfg.reply_keep.saturating_mul(10);
        self.clients.retain(|_, cc| {
            cc.calls.retain(|_, s| match s {
                // Never run: forget it, so a re-sent request is taken afresh.
                Served::Assembling { assembly, .. } if now >= assembly.deadline => {
                    release(mailboxes, s);
                    abandoned += 1;
                    false
                }
                Served::Replied { at, .. } if now.saturating_duration_since(*at) >= cfg.reply_keep => {
                    *s = Served::Done;
                    true
                }
                _ => true,
            });
            let open = cc.calls.values().any(|s| !matches!(s, Served::Done));
            busy |= open;
            let keep = open || cc.last_active.is_some_and(|t| now.saturating_duration_since(t) < forget_after);
            if !keep {
                forgotten += cc.calls.len();
            }
            keep
        });
        self.abandoned += abandoned;
        self.calls -= abandoned as usize + forgotten;
        self.next_sweep = (busy || !self.clients.is_empty()).then_some(now + SWEEP);
    }
}

fn response_repr(session: u32, mailbox: u32, client_mailbox: u32, client_session: u32, id: u64, retransmit: bool, status: u32) -> MsgRepr {
    MsgRepr {
        status,
        flags: if retransmit { RETRANSMIT } else { 0 },
        src_mailbox: mailbox,
        dst_mailbox: client_mailbox,
        src_session: session,
        dst_session: client_session,
        id,
        ..MsgRepr::new(MsgKind::Response)
    }
}
