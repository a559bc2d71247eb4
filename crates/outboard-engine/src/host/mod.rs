//! The host interface: applications attached through boards (DESIGN.md
//! items 6, 7 and 10). `Host` is the shard's `ShardApp` for boards: its
//! `poll` takes new applications, dead ones, commands, accepts and
//! datagrams; `on_ready` updates the stream a connection belongs to (the
//! tag in the shard's owner table is the session and endpoint); `flush`
//! publishes events and wakes sleeping applications.
//!
//! Trust: a board is hostile input. A session that writes garbage is
//! disconnected (`violations`), never trusted for an offset or a length; its
//! connections are reset and everything it held is freed, as when an
//! application dies (its socket hangs up; see `attach`).

mod attach;
#[cfg(test)]
mod session_tests;
pub mod handover;
#[doc(hidden)]
pub mod hostile;
pub mod listeners;
mod owed;
mod region;
mod session;
pub mod takeover;

pub use attach::{board_socket_path, ring_eventfd, TakenAttach, AttachError, AttachInbox, AttachServer, BoardLimits, Ipv6Facts, LocalAttacher, NewSession};
pub use owed::OwedWakes;
pub use session::{EndpointRecord, SessionCounters, SessionRecord, Violation};

use crate::app::{AppCx, ShardApp, WakeSources};
use crate::log::{self, Level};
use outboard_stack::ConnId;
use session::Session;
use std::collections::BTreeMap;
use outboard_board::layout::{app_counter, SLEEP_EVENTFD, SLEEP_FUTEX};
use std::sync::atomic::Ordering;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct HostCounters {
    pub attached: u64,
    /// Applications gone, for any reason (detach, death, violation).
    pub detached: u64,
    /// Applications that died (their socket hung up without a DETACH) while attached.
    pub died: u64,
    /// Applications disconnected for breaking the board's rules.
    pub violations: u64,
    /// Stream bytes delivered through boards, ever: read by applications
    /// (rx) and acknowledged by peers (tx). The stack's `tcp_*_payload_copied`
    /// over these is the copies per delivered byte (when only boards move TCP data).
    pub rx_delivered: u64,
    pub tx_delivered: u64,
    /// Shared listeners: joins, refused INHERITs, lingering after a forked board went.
    #[serde(default)]
    pub listeners: listeners::ListenerCounters,
    /// Streams handed from a parent process to its child (RELEASE, ADOPT).
    #[serde(default)]
    pub handover: handover::HandoverCounters,
}

impl HostCounters {
    /// Adds another shard's counters.
    pub fn add(&mut self, o: &HostCounters) {
        self.listeners.add(&o.listeners);
        self.handover.add(&o.handover);
        self.attached += o.attached;
        self.detached += o.detached;
        self.died += o.died;
        self.violations += o.violations;
        self.rx_delivered += o.rx_delivered;
        self.tx_delivered += o.tx_delivered;
    }
}

/// One attached application, for `outboard stat`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BoardRow {
    pub session: u64,
    pub pid: u32,
    pub board_bytes: usize,
    pub endpoints: usize,
    pub commands: u64,
    pub events: u64,
    pub signals: u64,
    /// Events posted without a wake-up of their own (`session::BATCH_WAIT`).
    #[serde(default)]
    pub batched: u64,
    pub accepts: u64,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    /// SET_OPTION commands refused (unknown option or value out of range).
    #[serde(default)]
    pub bad_options: u64,
    /// Shadow listeners a shard could not open (the port taken there by another board).
    #[serde(default)]
    pub shadows_refused: u64,
    /// The application's own counters (`layout::app_counter`, by name),
    /// non-zero ones only: what a socket shim did and could not do. Written
    /// by the application: shown, never trusted.
    #[serde(default)]
    pub app: BTreeMap<String, u64>,
    /// Its message mailboxes' counters (all zero without any).
    #[serde(default)]
    pub mailboxes: session::MailboxCounters,
}

impl BoardRow {
    /// Adds the same board's row from another shard (the application's own
    /// counters and the board's size are the board's: kept, not summed).
    pub fn add(&mut self, o: &BoardRow) {
        self.endpoints += o.endpoints;
        self.commands += o.commands;
        self.events += o.events;
        self.signals += o.signals;
        self.batched += o.batched;
        self.accepts += o.accepts;
        self.datagrams_in += o.datagrams_in;
        self.datagrams_out += o.datagrams_out;
        self.bad_options += o.bad_options;
        self.shadows_refused += o.shadows_refused;
        self.mailboxes.add(&o.mailboxes);
    }
}

/// The owner-table tag of a board connection: its session and endpoint.
fn tag(session: u64, ep: u32) -> u64 {
    (session << 32) | u64::from(ep)
}

fn untag(tag: u64) -> (u64, u32) {
    (tag >> 32, tag as u32)
}

#[derive(Default)]
pub struct Host {
    /// The shard this host serves (its boards' rings).
    shard: u32,
    inbox: Option<AttachInbox>,
    sessions: Vec<Session>,
    next_id: u64,
    /// Each board's doorbell value when the shard went to sleep.
    doorbells: Vec<u32>,
    /// Listeners and the board endpoints that take their connections.
    pub listeners: listeners::Listeners,
    /// Streams released by a parent process, waiting for its child.
    pub handover: handover::Handover,
    pub counters: HostCounters,
    /// The message service, on the shard that runs it (board mailboxes).
    messages: Option<crate::messages::SharedMessages>,
    /// The turns' wake-ups are queued in `owed` for the turn's runner to
    /// issue once it lets the engine go (`owed`'s module), not issued in the turn.
    defer_wakes: bool,
    owed: OwedWakes,
}

impl Host {
    pub fn new(shard: u32, inbox: Option<AttachInbox>) -> Host {
        Host { shard, inbox, ..Default::default() }
    }

    /// From now on, the wake-ups of each turn's events wait in
    /// [`Host::take_owed_wakes`] (see `owed`'s module for why).
    pub fn defer_wakes(&mut self) {
        self.defer_wakes = true;
    }

    /// Moves the wake-ups the turns owe into `into`.
    pub fn take_owed_wakes(&mut self, into: &mut OwedWakes) {
        into.append(&mut self.owed);
    }

    /// Serves board mailboxes through `messages` (the shard that runs the message service).
    pub fn set_messages(&mut self, messages: Option<crate::messages::SharedMessages>) {
        self.messages = messages;
    }

    /// Takes an application attached by other means than the attach thread
    /// (in-process tests and the fuzz target).
    pub(crate) fn adopt(&mut self, n: NewSession) {
        self.next_id += 1;
        self.sessions.push(Session::new(self.next_id, self.shard, n));
        self.counters.attached += 1;
    }

    /// The counters, with the delivered bytes of live sessions added in.
    pub fn totals(&self) -> HostCounters {
        let mut c = self.counters.clone();
        c.listeners = self.listeners.counters;
        c.handover = self.handover.counters;
        for s in &self.sessions {
            c.rx_delivered += s.counters.rx_delivered;
            c.tx_delivered += s.counters.tx_delivered;
        }
        c
    }

    pub fn board_bytes(&self) -> usize {
        self.sessions.iter().map(|s| s.board_bytes()).sum()
    }

    pub fn rows(&self) -> Vec<BoardRow> {
        self.sessions
            .iter()
            .map(|s| BoardRow {
                session: s.id,
                pid: s.pid,
                board_bytes: s.board_bytes(),
                endpoints: s.endpoints_open(),
                commands: s.counters.commands,
                events: s.counters.events,
                signals: s.counters.signals,
                batched: s.counters.batched,
                accepts: s.counters.accepts,
                datagrams_in: s.counters.datagrams_in,
                datagrams_out: s.counters.datagrams_out,
                bad_options: s.counters.bad_options,
                shadows_refused: s.counters.shadows_refused,
                mailboxes: s.mailbox_counters.clone(),
                app: s
                    .app_counters()
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0)
                    .map(|(k, v)| (app_counter::name(k).into_owned(), *v))
                    .collect(),
            })
            .collect()
    }

}

impl Host {
    /// Hands each connection waiting on a listener to the next member (in
    /// turn) that takes connections and has room for it.
    fn accept(&mut self, cx: &mut AppCx<'_>) -> bool {
        let mut work = false;
        for lid in self.listeners.pending(cx.stack) {
            'conns: while cx.stack.tcp_accept_pending(lid) {
                for m in self.listeners.rotation(lid) {
                    let Some(s) = self.sessions.iter_mut().find(|s| s.id == m.session) else { continue };
                    match run_session(s, cx, (&mut self.listeners, &mut self.handover, None), |s, sc| s.accept_one(sc, m.ep, lid)) {
                        Ok(true) => {
                            self.listeners.advance(lid, m);
                            work = true;
                            continue 'conns;
                        }
                        Ok(false) => {}
                        // Found again (and torn down) by the next poll.
                        Err(_) => s.dead.store(true, Ordering::Release),
                    }
                }
                // Nobody has room: the connection waits in the accept queue.
                break;
            }
        }
        work
    }
}

impl Host {
    /// Gives released streams to the children adopting them, answers
    /// ADOPTs that cannot be, and closes (or resets) orphans nobody took.
    fn hand_over(&mut self, cx: &mut AppCx<'_>) -> bool {
        if self.handover.adopts.is_empty() && self.handover.orphans.is_empty() {
            return false;
        }
        let now = cx.now;
        let mut work = false;
        for a in std::mem::take(&mut self.handover.adopts) {
            let Some(ci) = self.sessions.iter().position(|s| s.id == a.session) else { continue };
            let result = if let Some(o) = self.handover.take_orphan(a.key, a.ep) {
                let r = run_session(&mut self.sessions[ci], cx, (&mut self.listeners, &mut self.handover, None), |s, sc| s.adopt(sc, o.conn, a.sync));
                match r {
                    Ok(true) => {
                        self.handover.counters.adopted += 1;
                        None
                    }
                    // No room in the child's board: the orphan waits on.
                    Ok(false) => {
                        self.handover.orphans.push(o);
                        Some(-i64::from(libc::ENOBUFS))
                    }
                    Err(_) => {
                        self.sessions[ci].dead.store(true, Ordering::Release);
                        self.handover.orphans.push(o);
                        continue;
                    }
                }
            } else if now < a.until && self.sessions.iter().any(|s| s.key == a.key && s.has_stream(a.ep)) {
                // The parent has not released it yet: ask again next turn.
                self.handover.adopts.push(a);
                continue;
            } else {
                self.handover.counters.refused += 1;
                let parent_holds = self.sessions.iter().any(|s| s.key == a.key && s.has_stream(a.ep));
                Some(-i64::from(if parent_holds { libc::EBUSY } else { libc::EBADF }))
            };
            work = true;
            if let Some(errno) = result {
                if self.sessions[ci].complete_sync(a.sync, errno).is_err() {
                    self.sessions[ci].dead.store(true, Ordering::Release);
                }
            }
        }
        for o in self.handover.expired(now) {
            work = true;
            if let Some(c) = cx.stack.tcp(o.conn) {
                if o.abort {
                    c.abort();
                } else {
                    c.close();
                }
            }
            cx.stack.tcp_release(o.conn);
        }
        work
    }
}

impl ShardApp for Host {

    /// New and dead applications, commands, accepts, datagrams.
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool {
        let mut work = false;
        if let Some(inbox) = self.inbox.as_mut() {
            while let Some(n) = inbox.try_next() {
                // The board's number: its session id on every shard.
                let id = n.board;
                if self.shard == 0 {
                    log::event(Level::Info, "app_attached", &[("session", &id), ("pid", &n.pid), ("board_bytes", &n.layout.total)]);
                }
                self.sessions.push(Session::new(id, self.shard, n));
                // A board is counted once, by shard 0 (it has a session on every shard).
                if self.shard == 0 {
                    self.counters.attached += 1;
                }
                work = true;
            }
        }
        // Boards with a child attached: their released streams wait for it.
        // (Refilled in place: this runs every turn.)
        self.handover.parents.clear();
        self.handover.parents.extend(self.sessions.iter().filter(|s| !s.dead.load(Ordering::Acquire)).filter_map(|s| s.parent_key));
        let mut i = 0;
        let ls = &mut self.listeners;
        let hand = &mut self.handover;
        let shared = self.messages.clone();
        let mut svc = shared.as_ref().map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        while i < self.sessions.len() {
            let s = &mut self.sessions[i];
            let outcome = if s.dead.load(Ordering::Acquire) {
                // Its last commands may hold a DETACH sent just before the hang-up.
                let _ = run_session(s, cx, (ls, hand, svc.as_deref_mut()), |s, sc| s.run_commands(sc));
                Err(None)
            } else {
                // Most sessions have no datagram socket and no mailbox: no
                // second session context for them.
                let poll = s.polls_endpoints(svc.is_some());
                run_session(s, cx, (ls, hand, svc.as_deref_mut()), |s, sc| s.run_commands(sc))
                    .and_then(|w| match poll {
                        true => Ok(w | run_session(s, cx, (ls, hand, svc.as_deref_mut()), |s, sc| s.poll_endpoints(sc))?),
                        false => Ok(w),
                    })
                    .map_err(Some)
            };
            // A child's first `CHILD_OF` counts in its parent, another session.
            if let Some(key) = self.sessions[i].new_parent.take() {
                if let Some(p) = self.sessions.iter_mut().find(|p| p.key == key) {
                    p.children += 1;
                }
            }
            match outcome {
                Ok(w) => {
                    work |= w;
                    i += 1;
                }
                Err(why) => {
                    work = true;
                    let mut s = self.sessions.swap_remove(i);
                    let _ = run_session(&mut s, cx, (ls, hand, svc.as_deref_mut()), |s, sc| {
                        s.teardown(sc);
                        Ok(false)
                    });
                    self.counters.rx_delivered += s.counters.rx_delivered;
                    self.counters.tx_delivered += s.counters.tx_delivered;
                    let first = self.shard == 0;
                    match why {
                        None if s.detached => {
                            if first {
                                log::event(Level::Info, "app_detached", &[("session", &s.id), ("pid", &s.pid)]);
                            }
                        }
                        None => {
                            if first {
                                self.counters.died += 1;
                                log::event(Level::Info, "app_died", &[("session", &s.id), ("pid", &s.pid)]);
                            }
                        }
                        Some(v) => {
                            self.counters.violations += 1;
                            log::event(Level::Warn, "app_violation", &[("session", &s.id), ("pid", &s.pid), ("violation", &v), ("shard", &self.shard)]);
                            // The board's sessions on the other shards go too.
                            s.dead.store(true, Ordering::Release);
                        }
                    }
                    if first {
                        self.counters.detached += 1;
                    }
                }
            }
        }
        if let Some(svc) = svc.as_deref_mut() {
            // What the boards sent leaves in this turn.
            work |= svc.transmit(cx.stack, cx.now);
        }
        drop(svc);
        self.listeners.expire(cx.stack, cx.now);
        work |= self.accept(cx);
        work |= self.hand_over(cx);
        work
    }

    /// A board connection has events: bring its stream's status up to date.
    fn on_ready(&mut self, cx: &mut AppCx<'_>, _conn: ConnId, tag: u64) {
        let (sid, ep) = untag(tag);
        if let Some(s) = self.sessions.iter_mut().find(|s| s.id == sid) {
            if s.update_stream(cx.stack, ep).is_err() {
                // A bad sync slot named by a connect: found on the next poll as well.
                s.dead.store(true, Ordering::Release);
            }
        }
    }

    /// Publishes the turn's events and wakes sleeping applications.
    fn flush(&mut self, now: outboard_time::Instant) {
        let mut owed = self.defer_wakes.then_some(&mut self.owed);
        for s in &mut self.sessions {
            if s.flush(now, owed.as_deref_mut()).is_err() {
                s.dead.store(true, Ordering::Release);
            }
        }
    }

    fn owner_label(&self, tag: u64) -> String {
        format!("board:{}", untag(tag).0)
    }

    fn report(&self, snap: &mut crate::stat::Snapshot) {
        snap.boards = self.rows();
        snap.host = self.totals();
        snap.board_memory = self.board_bytes();
    }

    /// Tells every board the shard sleeps and how to wake it (a futex when
    /// the link sleeps on futexes, else the doorbell fd), notes each board's
    /// doorbell word, and says whether a command arrived meanwhile (then the
    /// shard does not sleep).
    fn prepare_sleep(&mut self, futex: bool) -> bool {
        let how = if futex { SLEEP_FUTEX } else { SLEEP_EVENTFD };
        self.doorbells.clear();
        for s in &mut self.sessions {
            // Nothing batched outlasts the shard's waking hours.
            s.wake_batched();
        }
        for s in &self.sessions {
            self.doorbells.push(s.engine_doorbell().load(Ordering::SeqCst));
            s.set_engine_sleeping(how);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.sessions.iter().any(|s| s.has_commands() || s.dead.load(Ordering::Acquire))
    }

    /// The attach doorbell, and every board's doorbell word with the value seen before sleeping.
    fn wake_sources<'a>(&'a self, out: &mut WakeSources<'a>) {
        // The doorbell applications ring when the shard sleeps (fd-based links).
        out.fds.extend(self.inbox.as_ref().map(|i| i.doorbell_fd()));
        out.futexes.extend(self.sessions.iter().zip(&self.doorbells).map(|(s, v)| (s.engine_doorbell(), *v)));
    }

    /// The attach doorbell is one eventfd for every shard (applications
    /// hold one descriptor): a ring drained here may have been for another
    /// shard's board rings, which then must look (true: the shard wakes the
    /// others that sleep).
    fn after_sleep(&mut self) -> bool {
        for s in &self.sessions {
            s.set_engine_sleeping(0);
        }
        self.inbox.as_ref().is_some_and(|i| i.drain_doorbell())
    }

    /// The engine stops: every application learns it at once.
    fn shutdown(&mut self, cx: &mut AppCx<'_>) {
        let (ls, hand) = (&mut self.listeners, &mut self.handover);
        let shared = self.messages.clone();
        let mut svc = shared.as_ref().map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        for mut s in self.sessions.drain(..) {
            let _ = run_session(&mut s, cx, (ls, hand, svc.as_deref_mut()), |s, sc| {
                s.teardown(sc);
                Ok(false)
            });
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// What a session works with: the stack, the time, the accept check, and
/// the connections it claimed (`Some(endpoint)`) or gave up (`None`) this
/// call, which `run_session` enters in the shard's owner table.
pub struct SessionCx<'a> {
    pub stack: &'a mut outboard_stack::Stack,
    pub now: outboard_time::Instant,
    pub admission: &'a mut crate::app::Admission,
    pub listeners: &'a mut listeners::Listeners,
    pub handover: &'a mut handover::Handover,
    /// The message service, on the shard that runs it.
    pub messages: Option<&'a mut crate::messages::MessageService>,
    claims: &'a mut Vec<(ConnId, Option<u32>)>,
}

impl SessionCx<'_> {
    pub fn owned(&mut self, conn: ConnId, ep: Option<u32>) {
        self.claims.push((conn, ep));
    }
}

/// Runs `f` on a session, then records its claims in the shard's owner table.
fn run_session(
    s: &mut Session,
    cx: &mut AppCx<'_>,
    (listeners, handover, messages): (&mut listeners::Listeners, &mut handover::Handover, Option<&mut crate::messages::MessageService>),
    f: impl FnOnce(&mut Session, &mut SessionCx<'_>) -> Result<bool, Violation>,
) -> Result<bool, Violation> {
    let sid = s.id;
    let mut claims: Vec<(ConnId, Option<u32>)> = Vec::new();
    let (stack, now, admission) = cx.parts();
    let r = f(s, &mut SessionCx { stack, now, admission, listeners, handover, messages, claims: &mut claims });
    for (c, ep) in claims {
        match ep {
            Some(ep) => cx.claim(c, tag(sid, ep)),
            None => cx.release(c),
        }
    }
    r
}
