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
use outboard_board::layout::header;
use outboard_board::proto::ev;
use outboard_board::Event;
use outboard_time::{Duration, Instant};
use std::sync::atomic::Ordering;

/// The longest a batched post waits for its wake-up while the shard stays
/// busy (a shard that goes idle wakes it when it sleeps, `SPIN` later at
/// most): the worst a peer that never sets PSH adds to a reader's wait.
pub const BATCH_WAIT: Duration = Duration::from_micros(100);

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
    pub fn flush(&mut self, now: Instant) -> Result<(), Violation> {
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
            self.wake_now();
        }
        Ok(())
    }

    /// Wakes the application for what was posted (batched posts included).
    fn wake_now(&mut self) {
        self.posted = false;
        self.batched_since = None;
        if self.cond.signal() {
            self.counters.signals += 1;
        }
        self.ring_wake();
    }

    /// The shard is about to sleep: batched posts wake the application now.
    pub fn wake_batched(&mut self) {
        if self.batched_since.is_some() {
            self.wake_now();
        }
    }

    /// Writes the application's wake eventfd if any of its threads sleeps
    /// in poll/epoll on it (after the condition's bump: SeqCst pairs with the
    /// application announcing itself and then re-reading the word).
    pub(super) fn ring_wake(&self) {
        if let Some(fd) = &self.wake {
            if self.map.atomic_u32(header::APP_POLLERS).load(Ordering::SeqCst) != 0 {
                crate::host::ring_eventfd(std::os::fd::AsRawFd::as_raw_fd(fd));
            }
        }
    }

}
