//! A session's event queue: events posted during a turn go to the board's
//! event ring of the session's shard; when that ring is full they wait here
//! (bounded), and `flush` publishes them and wakes the application.
//!
//! Batched wake-ups (interrupt coalescing for a reader). A stream's bytes
//! are published (`RX_TOTAL`) and their event posted in the turn they
//! arrive, but bytes the peer has not pushed yet — a full-sized segment in
//! the middle of a burst, without PSH — wake nobody by themselves: a
//! conforming sender sets PSH on the segment that empties or stalls its
//! queue (RFC 9293 §3.9.1; Linux and ours also every half window), so more
//! is on its way. The sleeping reader is woken by the next pushed segment,
//! a receive buffer half full (`Connection::take_push`), any other event
//! for the board, [`BATCH_WAIT`] after the first batched post, or the
//! shard's going to sleep — whichever comes first; a reader that spins or
//! polls sees the bytes at once either way. A bulk transfer thus wakes its
//! reader about once per write of the sender's instead of once per turn
//! (`outboard bench throughput`), and a request, pushed, wakes it at once.
//! Likewise for a writer: ACKs that leave more than half the transmit
//! region unacknowledged are batched, as a blocked writer waits for half of
//! it (`Stream::wait_writable`; Linux wakes one at a third).

use super::{Session, Violation};
use outboard_board::layout::{header, WAKE_SLOTS};
use outboard_board::proto::ev;
use outboard_board::Event;
use outboard_time::{Duration, Instant};
use crate::host::OwedWakes;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The longest a batched post waits for its wake-up while the shard stays
/// busy (a shard that goes idle wakes it when it sleeps, `SPIN` later at
/// most): the worst a peer that never sets PSH adds to a reader's wait.
///
/// Long enough that a bulk reader is woken by its receive buffer's
/// filling half, not by this timer: at 100 µs a reader of a 20 Gbit/s
/// stream was woken every 256 KiB, twice per half of the default 1 MiB
/// buffer. Each wake-up is the reader's CPU: about 1.5 µs from an engine on
/// the reader's own CPU, 18 µs from one on another CPU of the 2-vCPU VM
/// measured (docs/PERFORMANCE.md, "The 64 KiB efficiency ratio is
/// placement"). At 500 µs the reader's wake-ups halved and its CPU per GB
/// fell by a quarter to a third there. Pushed data (Linux pushes the end
/// of every write) and a half-full buffer still wake at once.
pub const BATCH_WAIT: Duration = Duration::from_micros(500);

impl Session {
    /// Posts an event that needs no wake-up of its own (see the module
    /// doc): it is published with the turn's others, and the application
    /// is woken for it by the first of the triggers there.
    pub(super) fn post_batched(&mut self, endpoint: u32, kind: u32) {
        self.enqueue(Event { endpoint, kind, value: 0 });
        self.counters.batched += 1;
        self.batched_new = true;
    }

    /// Posts an event. When the ring is full (the application is slow, or
    /// asleep in a debugger) events wait here: those that carry a value (a
    /// new endpoint, a sync slot, a buffer) in order, in a queue bounded by
    /// what the board can produce; the rest, mere hints about an endpoint,
    /// are merged per endpoint. A slow application thus costs bounded
    /// memory and is never disconnected for being slow.
    pub(super) fn post(&mut self, endpoint: u32, kind: u32, value: u64) {
        self.posted = true;
        self.enqueue(Event { endpoint, kind, value });
    }

    /// Puts an event on the ring (or in the overflow) without asking for a
    /// wake-up: `post` asks for one, `post_batched` leaves it to the batch.
    fn enqueue(&mut self, e: Event) {
        let (endpoint, kind) = (e.endpoint, e.kind);
        self.counters.events += 1;
        self.groups.note(endpoint);
        let carries_value = kind & (ev::ACCEPT | ev::SYNC | ev::BUF_RETURN | ev::COMPLETION | ev::REMOTE_WRITE | ev::TRIPWIRE) != 0;
        if self.overflow.is_empty() && self.hinted.is_empty() {
            if let Ok(true) = self.events.begin_put(e) {
                return;
            }
        }
        match self.hints.get_mut(endpoint as usize) {
            Some(bits) if !carries_value => {
                if *bits == 0 {
                    self.hinted.push(endpoint);
                }
                *bits |= kind;
            }
            _ => self.overflow.push_back(e),
        }
    }

    /// Publishes posted events and wakes the application if it sleeps.
    /// Err when the event ring's head is garbage, or more value-carrying
    /// events wait than a well-behaved board can cause.
    /// With `owed`, the wake-ups are queued there instead (`owed`'s module
    /// says why); the events are published either way.
    pub fn flush(&mut self, now: Instant, owed: Option<&mut OwedWakes>) -> Result<(), Violation> {
        let mut full = false;
        while let Some(e) = self.overflow.front().copied() {
            match self.events.begin_put(e) {
                Ok(true) => {
                    self.overflow.pop_front();
                }
                Ok(false) => {
                    full = true;
                    break;
                }
                Err(_) => return Err(Violation::Corrupt("event ring head")),
            }
        }
        while !full {
            let Some(&ep) = self.hinted.last() else { break };
            let kind = self.hints[ep as usize];
            match self.events.begin_put(Event { endpoint: ep, kind, value: 0 }) {
                Ok(true) => {
                    self.hints[ep as usize] = 0;
                    self.hinted.pop();
                }
                Ok(false) => full = true,
                Err(_) => return Err(Violation::Corrupt("event ring head")),
            }
        }
        let p = &self.layout.params;
        let bound = p.endpoints as usize + p.syncs as usize + 2 * p.dgram_buffers as usize + 1024;
        if self.overflow.len() > bound {
            return Err(Violation::Corrupt("more events than the board can cause"));
        }
        self.events.end_put();
        if std::mem::take(&mut self.batched_new) && self.batched_since.is_none() {
            self.batched_since = Some(now);
        }
        let batch_due = self.batched_since.is_some_and(|t| now.saturating_duration_since(t) >= BATCH_WAIT);
        if self.posted || batch_due {
            self.wake_now(owed);
        }
        Ok(())
    }

    /// Wakes the application for what was posted (batched posts included),
    /// or queues the wake-ups in `owed`.
    fn wake_now(&mut self, mut owed: Option<&mut OwedWakes>) {
        self.posted = false;
        self.batched_since = None;
        if self.cond.bump() {
            self.counters.signals += 1;
            match owed.as_deref_mut() {
                Some(o) => o.sleepers(&self.cond),
                None => self.cond.wake_sleepers(),
            }
        }
        self.ring_wake(owed);
    }

    /// The shard is about to sleep: batched posts wake the application now.
    pub fn wake_batched(&mut self) {
        if self.batched_since.is_some() {
            self.wake_now(None);
        }
    }

    /// Writes the application's wake eventfds that threads sleep on in
    /// poll/epoll (after the condition's bump: SeqCst pairs with the
    /// application announcing itself in a slot and then re-reading the
    /// word): the shared one whenever a thread sleeps on it, a wake group's
    /// only for events of its endpoints or of endpoints in no group.
    /// With `owed`, the writes are queued there.
    pub(super) fn ring_wake(&mut self, mut owed: Option<&mut OwedWakes>) {
        let due = std::mem::take(&mut self.groups.due);
        let sleepers = |slot: usize| self.map.atomic_u32(header::APP_POLLERS + 4 * slot).load(Ordering::SeqCst);
        let groups = &self.groups.fds;
        if let Some(fd) = &self.wake {
            // A group without an eventfd here (none given, or fewer than the
            // application made) has its sleepers woken through the shared
            // one, which every set of theirs holds too.
            let shared = (0..WAKE_SLOTS).any(|s| (s == 0 || s > groups.len()) && sleepers(s) != 0);
            if shared {
                wake_or_owe(owed.as_deref_mut(), fd, |o| o.eventfd(fd));
            }
        }
        for (i, fd) in groups.iter().enumerate() {
            let g = i + 1;
            if due & (1 | 1 << g) != 0 && sleepers(g) != 0 {
                wake_or_owe(owed.as_deref_mut(), fd, |o| o.group(groups, i));
            }
        }
    }

    /// The application is gone or goes: every sleeper, whatever it waits for.
    pub(super) fn ring_wake_all(&mut self) {
        self.groups.due |= 1;
        self.ring_wake(None);
    }
}

/// Writes the eventfd `fd` now, or, when the turn's wake-ups are owed to
/// whoever runs it (`owed`), leaves it there (`owe`).
fn wake_or_owe(owed: Option<&mut OwedWakes>, fd: &OwnedFd, owe: impl FnOnce(&mut OwedWakes)) {
    match owed {
        Some(o) => owe(o),
        None => crate::host::ring_eventfd(fd.as_raw_fd()),
    }
}

/// The application's wake groups (`op::WAKE_GROUP`): which endpoints'
/// events write which of its group eventfds, and which groups are due.
/// A program with a thread per epoll set (memcached's workers, a thread
/// pool's) then wakes the thread whose set holds the endpoint, not every
/// thread asleep in epoll: the kernel's epoll wakes only the instance a
/// ready descriptor is in.
#[derive(Default)]
pub struct WakeGroups {
    /// Group g's eventfd at index g − 1 (shared by the board's sessions on every shard).
    fds: Arc<Vec<OwnedFd>>,
    /// Each endpoint's group (0: none).
    of: Vec<u8>,
    /// Groups with events posted since the last wake-up (bit g); bit 0: an
    /// event of an endpoint in no group (or of none), which wakes them all.
    due: u32,
}

impl WakeGroups {
    pub fn new(fds: Arc<Vec<OwnedFd>>, endpoints: u32) -> WakeGroups {
        WakeGroups { fds, of: vec![0; endpoints as usize], due: 0 }
    }

    fn note(&mut self, ep: u32) {
        self.due |= 1 << self.of.get(ep as usize).copied().unwrap_or(0);
    }

    /// Puts `ep` in group `g` (0: none; an endpoint leaves its group when it closes).
    pub(super) fn set(&mut self, ep: u32, g: u8) {
        if let Some(x) = self.of.get_mut(ep as usize) {
            *x = g.min(WAKE_SLOTS as u8 - 1);
        }
    }

    /// The endpoints in a group, and theirs (for a live upgrade's record).
    pub(super) fn members(&self) -> Vec<(u32, u8)> {
        self.of.iter().enumerate().filter(|(_, g)| **g != 0).map(|(ep, g)| (ep as u32, *g)).collect()
    }

    /// Its eventfds (for a live upgrade's hand-over).
    pub(super) fn fds(&self) -> &[OwnedFd] {
        &self.fds
    }
}
