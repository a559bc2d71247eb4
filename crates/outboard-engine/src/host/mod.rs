//! The host interface: applications attached through boards (DESIGN.md
//! items 6, 7 and 10). The shard calls `Host::poll` each turn (new
//! applications, dead ones, commands, accepts, datagrams),
//! `Host::handle_ready` for each connection the stack reports with events,
//! and `Host::flush` at the end of the turn (events out, sleepers woken).
//!
//! Trust: a board is hostile input. A session that writes garbage is
//! disconnected (`violations`), never trusted for an offset or a length; its
//! connections are reset and everything it held is freed, as when an
//! application dies (its socket hangs up; see `attach`).

mod attach;
mod region;
mod session;

pub use attach::{board_socket_path, ring_eventfd, AttachError, AttachInbox, AttachServer, BoardLimits, LocalAttacher, NewSession};
pub use session::{SessionCounters, Violation};

use crate::log::{self, Level};
use outboard_stack::{ConnId, Stack};
use outboard_time::Instant;
use session::Session;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::RawFd;
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
    pub accepts: u64,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    /// SET_OPTION commands refused (unknown option or value out of range).
    #[serde(default)]
    pub bad_options: u64,
    /// The application's own counters (`layout::app_counter`, by name),
    /// non-zero ones only: what a socket shim did and could not do. Written
    /// by the application: shown, never trusted.
    #[serde(default)]
    pub app: BTreeMap<String, u64>,
}

#[derive(Default)]
pub struct Host {
    inbox: Option<AttachInbox>,
    sessions: Vec<Session>,
    /// Which session and endpoint own each board connection.
    conns: HashMap<ConnId, (u64, u32)>,
    next_id: u64,
    /// Each board's doorbell value when the shard went to sleep.
    doorbells: Vec<u32>,
    pub counters: HostCounters,
}

impl Host {
    pub fn new(inbox: Option<AttachInbox>) -> Host {
        Host { inbox, ..Default::default() }
    }

    /// The counters, with the delivered bytes of live sessions added in.
    pub fn totals(&self) -> HostCounters {
        let mut c = self.counters.clone();
        for s in &self.sessions {
            c.rx_delivered += s.counters.rx_delivered;
            c.tx_delivered += s.counters.tx_delivered;
        }
        c
    }

    /// The board session owning a connection, if any.
    pub fn owner_of(&self, id: ConnId) -> Option<u64> {
        self.conns.get(&id).map(|(sid, _)| *sid)
    }

    /// The doorbell applications ring when the shard sleeps.
    pub fn doorbell_fd(&self) -> Option<RawFd> {
        self.inbox.as_ref().map(|i| i.doorbell_fd())
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
                accepts: s.counters.accepts,
                datagrams_in: s.counters.datagrams_in,
                datagrams_out: s.counters.datagrams_out,
                bad_options: s.counters.bad_options,
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

    /// Before sleeping: tells every board the engine sleeps and how to wake
    /// it (a futex when the link sleeps on futexes, else the doorbell fd),
    /// notes each board's doorbell word, and says whether a command arrived
    /// meanwhile (then do not sleep).
    pub fn prepare_sleep(&mut self, futex: bool) -> bool {
        let how = if futex { SLEEP_FUTEX } else { SLEEP_EVENTFD };
        self.doorbells.clear();
        for s in &self.sessions {
            self.doorbells.push(s.engine_doorbell().load(Ordering::SeqCst));
            s.set_engine_sleeping(how);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.sessions.iter().any(|s| s.has_commands() || s.dead.load(Ordering::Acquire))
    }

    /// The futex words (and the values seen before sleeping) to sleep on.
    pub fn sleep_futexes(&self) -> Vec<(&std::sync::atomic::AtomicU32, u32)> {
        self.sessions.iter().zip(&self.doorbells).map(|(s, v)| (s.engine_doorbell(), *v)).collect()
    }

    pub fn after_sleep(&mut self) {
        for s in &self.sessions {
            s.set_engine_sleeping(0);
        }
        if let Some(i) = &self.inbox {
            i.drain_doorbell();
        }
    }

    /// New and dead applications, commands, accepts, datagrams.
    pub fn poll(&mut self, stack: &mut Stack, now: Instant, may_accept: &mut dyn FnMut(&Stack) -> bool) -> bool {
        let mut work = false;
        if let Some(inbox) = self.inbox.as_mut() {
            while let Some(n) = inbox.try_next() {
                self.next_id += 1;
                log::event(Level::Info, "app_attached", &[("session", &self.next_id), ("pid", &n.pid), ("board_bytes", &n.layout.total)]);
                self.sessions.push(Session::new(self.next_id, n));
                self.counters.attached += 1;
                work = true;
            }
        }
        let conns = &mut self.conns;
        let mut i = 0;
        while i < self.sessions.len() {
            let s = &mut self.sessions[i];
            let sid = s.id;
            let mut owned = |c: ConnId, ep: Option<u32>| match ep {
                Some(ep) => {
                    conns.insert(c, (sid, ep));
                }
                None => {
                    conns.remove(&c);
                }
            };
            let outcome = if s.dead.load(Ordering::Acquire) {
                // Its last commands may hold a DETACH sent just before the hang-up.
                let _ = s.run_commands(stack, now, &mut owned);
                Err(None)
            } else {
                s.run_commands(stack, now, &mut owned)
                    .and_then(|w| Ok(w | s.poll_endpoints(stack, may_accept, &mut owned)?))
                    .map_err(Some)
            };
            match outcome {
                Ok(w) => {
                    work |= w;
                    i += 1;
                }
                Err(why) => {
                    work = true;
                    let mut s = self.sessions.swap_remove(i);
                    s.teardown(stack, &mut owned);
                    self.counters.rx_delivered += s.counters.rx_delivered;
                    self.counters.tx_delivered += s.counters.tx_delivered;
                    match why {
                        None if s.detached => {
                            log::event(Level::Info, "app_detached", &[("session", &s.id), ("pid", &s.pid)]);
                        }
                        None => {
                            self.counters.died += 1;
                            log::event(Level::Info, "app_died", &[("session", &s.id), ("pid", &s.pid)]);
                        }
                        Some(v) => {
                            self.counters.violations += 1;
                            log::event(Level::Warn, "app_violation", &[("session", &s.id), ("pid", &s.pid), ("violation", &v)]);
                        }
                    }
                    self.counters.detached += 1;
                }
            }
        }
        work
    }

    /// A connection the stack reports with events. False if no board owns it.
    pub fn handle_ready(&mut self, stack: &mut Stack, id: ConnId) -> bool {
        let Some(&(sid, ep)) = self.conns.get(&id) else { return false };
        if let Some(s) = self.sessions.iter_mut().find(|s| s.id == sid) {
            if s.update_stream(stack, ep).is_err() {
                // A bad sync slot named by a connect: found on the next poll as well.
                s.dead.store(true, Ordering::Release);
            }
        }
        true
    }

    /// Publishes the turn's events and wakes sleeping applications.
    pub fn flush(&mut self) {
        for s in &mut self.sessions {
            if s.flush().is_err() {
                s.dead.store(true, Ordering::Release);
            }
        }
    }

    /// The engine stops: every application learns it at once.
    pub fn shutdown(&mut self, stack: &mut Stack) {
        let conns = &mut self.conns;
        for mut s in self.sessions.drain(..) {
            s.teardown(stack, &mut |c, _| {
                conns.remove(&c);
            });
        }
    }
}
