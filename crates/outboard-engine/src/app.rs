//! The seam: everything that runs on a shard is a [`ShardApp`].
//!
//! Built-in services, the board sessions of attached applications (`Host`),
//! client fetches — and the next kinds (message-protocol endpoints,
//! handlers) — implement this one small trait. The shard drives them all the
//! same way each turn and keeps **one table** ([`Owners`]) from connection to
//! owner: the app that claimed it and a tag the app chose (a session and
//! endpoint, an index). The shard's loop never names a kind.
//!
//! Call order per turn (the shard's, after the link's receive burst and the
//! stack's timers):
//! 1. `poll` on every app, in order: new work of its own (accepts, commands
//!    from a board, datagrams).
//! 2. `on_ready(conn, tag)` for every connection the stack reports with
//!    events, on the app that claimed it. A connection no app claims (one
//!    released and closing) is left to the stack.
//! 3. `flush` on every app: publish what the turn produced (events to
//!    boards, wake-ups).
//!
//! Sleeping: before the shard sleeps it asks every app `prepare_sleep` (an
//! app that finds work meanwhile vetoes the sleep), gathers `wake_sources`
//! (descriptors and futex words to sleep on besides the link), and calls
//! `after_sleep` when it wakes.
//!
//! To add a kind: implement `ShardApp` in a module of its own, claim the
//! connections it opens or accepts with [`AppCx::claim`], and add it to the
//! shard with `Shard::add_app` (the engine does this for the built-in kinds
//! in `engine.rs`).

use crate::stat::Snapshot;
use outboard_stack::{ConnId, Stack};
use outboard_time::Instant;
use std::any::Any;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU32;

/// An app's index on its shard.
pub type AppId = usize;

/// The shard's one table from connection to owner: (app, the app's tag).
/// Looked up for every connection event: the flow hash, not SipHash (the
/// keys are the stack's own connection ids).
#[derive(Debug, Default)]
pub struct Owners {
    map: outboard_stack::flowhash::FlowMap<ConnId, (AppId, u64)>,
}

impl Owners {
    pub fn get(&self, conn: ConnId) -> Option<(AppId, u64)> {
        self.map.get(&conn).copied()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What an app may touch while the shard runs it: the stack, the time, and
/// its own entries of the owner table.
pub struct AppCx<'a> {
    pub stack: &'a mut Stack,
    pub now: Instant,
    app: AppId,
    owners: &'a mut Owners,
    admission: &'a mut Admission,
}

impl<'a> AppCx<'a> {
    pub(crate) fn new(stack: &'a mut Stack, now: Instant, app: AppId, owners: &'a mut Owners, admission: &'a mut Admission) -> Self {
        AppCx { stack, now, app, owners, admission }
    }
    /// `conn` is this app's from now on; its events come to `on_ready` with `tag`.
    pub fn claim(&mut self, conn: ConnId, tag: u64) {
        self.owners.map.insert(conn, (self.app, tag));
    }
    /// This app gave `conn` up (released to the stack to close, or reset).
    pub fn release(&mut self, conn: ConnId) {
        if self.owners.map.get(&conn).is_some_and(|(a, _)| *a == self.app) {
            self.owners.map.remove(&conn);
        }
    }
    /// Whether a waiting connection may be accepted now: false while the
    /// stack's memory is over the engine's cap (counted per turn).
    pub fn may_accept(&mut self) -> bool {
        self.admission.may_accept(self.stack)
    }
    /// The stack, the time and the accept check apart, for code that takes them separately.
    pub fn parts(&mut self) -> (&mut Stack, Instant, &mut Admission) {
        (self.stack, self.now, self.admission)
    }
}

/// The engine's memory cap, applied to accepts.
#[derive(Debug)]
pub struct Admission {
    pub memory_cap: usize,
    /// Turns in which some accept was deferred (over the cap).
    pub paused_turns: u64,
    paused_this_turn: bool,
}

impl Admission {
    pub fn new(memory_cap: usize) -> Admission {
        Admission { memory_cap, paused_turns: 0, paused_this_turn: false }
    }
    /// A new turn begins.
    pub(crate) fn next_turn(&mut self) {
        self.paused_this_turn = false;
    }
    pub fn may_accept(&mut self, stack: &Stack) -> bool {
        // O(connections): asked only when someone waits to be accepted.
        let ok = stack.memory_in_use() < self.memory_cap;
        if !ok && !self.paused_this_turn {
            self.paused_this_turn = true;
            self.paused_turns += 1;
        }
        ok
    }
}

/// What a sleeping shard waits on besides its link.
#[derive(Default)]
pub struct WakeSources<'a> {
    pub fds: Vec<RawFd>,
    /// Futex words and the value each had when the shard decided to sleep.
    pub futexes: Vec<(&'a AtomicU32, u32)>,
}

/// Something that runs on a shard. See the module doc for the call order.
pub trait ShardApp: Any + Send {
    /// New work of its own. True if it did any.
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool;
    /// A connection this app claimed has events.
    fn on_ready(&mut self, cx: &mut AppCx<'_>, conn: ConnId, tag: u64);
    /// End of the turn at `now`: publish what it produced.
    fn flush(&mut self, _now: Instant) {}
    /// Who owns a connection it claimed with `tag`, for `outboard stat`.
    fn owner_label(&self, tag: u64) -> String;
    /// Its part of the stat snapshot.
    fn report(&self, _snap: &mut Snapshot) {}
    /// When it must run next even if nothing arrives (timers of its own,
    /// beside the stack's).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// Before sleeping: `futex` says whether the link sleeps on futexes.
    /// True when work arrived meanwhile (the shard then does not sleep).
    fn prepare_sleep(&mut self, _futex: bool) -> bool {
        false
    }
    fn wake_sources<'a>(&'a self, _out: &mut WakeSources<'a>) {}
    /// After a sleep (or a sleep skipped): true when it took a wake-up
    /// that may have been another shard's (a doorbell every shard shares).
    fn after_sleep(&mut self) -> bool {
        false
    }
    /// The engine stops: let go of everything (tell applications at once).
    fn shutdown(&mut self, _cx: &mut AppCx<'_>) {}
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A shard's apps and their owner table.
pub struct Apps {
    list: Vec<Box<dyn ShardApp>>,
    owners: Owners,
    pub admission: Admission,
}

impl Apps {
    pub fn new(memory_cap: usize) -> Apps {
        Apps { list: Vec::new(), owners: Owners::default(), admission: Admission::new(memory_cap) }
    }

    pub fn add(&mut self, app: Box<dyn ShardApp>) -> AppId {
        self.list.push(app);
        self.list.len() - 1
    }

    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// The first app of type `A`.
    pub fn get<A: ShardApp>(&self) -> Option<&A> {
        self.list.iter().find_map(|a| a.as_any().downcast_ref::<A>())
    }

    /// The first app of type `A`, to change.
    pub fn get_mut<A: ShardApp>(&mut self) -> Option<&mut A> {
        self.list.iter_mut().find_map(|a| a.as_any_mut().downcast_mut::<A>())
    }

    /// Runs `f` on the first app of type `A` with its context.
    pub fn with<A: ShardApp, R>(&mut self, stack: &mut Stack, now: Instant, f: impl FnOnce(&mut A, &mut AppCx<'_>) -> R) -> Option<R> {
        let (id, app) = self.list.iter_mut().enumerate().find_map(|(i, a)| Some((i, a.as_any_mut().downcast_mut::<A>()?)))?;
        let mut cx = AppCx::new(stack, now, id, &mut self.owners, &mut self.admission);
        Some(f(app, &mut cx))
    }

    /// One turn's applications: `poll` each, hand out ready connections, `flush` each.
    pub fn turn(&mut self, stack: &mut Stack, now: Instant) -> bool {
        self.admission.next_turn();
        let mut work = false;
        for (id, app) in self.list.iter_mut().enumerate() {
            let mut cx = AppCx::new(stack, now, id, &mut self.owners, &mut self.admission);
            work |= app.poll(&mut cx);
        }
        while let Some(conn) = stack.tcp_poll_ready() {
            work = true;
            if let Some((id, tag)) = self.owners.get(conn) {
                let mut cx = AppCx::new(stack, now, id, &mut self.owners, &mut self.admission);
                self.list[id].on_ready(&mut cx, conn, tag);
            }
        }
        for app in &mut self.list {
            app.flush(now);
        }
        work
    }

    /// Who owns `conn`, for stat ("" when nobody does).
    pub fn owner_label(&self, conn: ConnId) -> String {
        self.owners.get(conn).map_or_else(String::new, |(id, tag)| self.list[id].owner_label(tag))
    }

    pub fn report(&self, snap: &mut Snapshot) {
        for a in &self.list {
            a.report(snap);
        }
    }

    /// The earliest of the apps' own deadlines.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.list.iter().filter_map(|a| a.poll_timeout()).min()
    }

    pub fn prepare_sleep(&mut self, futex: bool) -> bool {
        let mut veto = false;
        for a in &mut self.list {
            veto |= a.prepare_sleep(futex);
        }
        veto
    }

    pub fn wake_sources(&self) -> WakeSources<'_> {
        let mut w = WakeSources::default();
        for a in &self.list {
            a.wake_sources(&mut w);
        }
        w
    }

    /// True when an app took a wake-up that may have been another shard's.
    pub fn after_sleep(&mut self) -> bool {
        let mut others = false;
        for a in &mut self.list {
            others |= a.after_sleep();
        }
        others
    }

    pub fn shutdown(&mut self, stack: &mut Stack, now: Instant) {
        for (id, app) in self.list.iter_mut().enumerate() {
            let mut cx = AppCx::new(stack, now, id, &mut self.owners, &mut self.admission);
            app.shutdown(&mut cx);
        }
    }
}
