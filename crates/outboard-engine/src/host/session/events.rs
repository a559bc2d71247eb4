//! A session's event queue: events posted during a turn go to the board's
//! event ring of the session's shard; when that ring is full they wait here
//! (bounded), and `flush` publishes them and wakes the application.

use super::{Session, Violation};
use outboard_board::layout::header;
use outboard_board::proto::ev;
use outboard_board::Event;
use std::sync::atomic::Ordering;

impl Session {
    /// Posts an event. When the ring is full (the application is slow, or
    /// asleep in a debugger) events wait here: those that carry a value (a
    /// new endpoint, a sync slot, a buffer) in order, in a queue bounded by
    /// what the board can produce; the rest, mere hints about an endpoint,
    /// are merged per endpoint. A slow application thus costs bounded
    /// memory and is never disconnected for being slow.
    pub(super) fn post(&mut self, endpoint: u32, kind: u32, value: u64) {
        let e = Event { endpoint, kind, value };
        self.counters.events += 1;
        self.posted = true;
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
    pub fn flush(&mut self) -> Result<(), Violation> {
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
        if self.posted {
            self.posted = false;
            if self.cond.signal() {
                self.counters.signals += 1;
            }
            self.ring_wake();
        }
        Ok(())
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
