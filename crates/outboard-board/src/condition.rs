//! Conditions: a sequence word that `signal` increments, and a count of
//! sleepers. `wait(seen)` spins a little while the word still reads `seen`,
//! then announces itself in `waiters` and sleeps on the word's futex;
//! `signal` bumps the word and calls the kernel only when `waiters` is non-zero.
//!
//! No lost wake-up: the waiter increments `waiters` and then re-reads the
//! word (SeqCst) before sleeping; the signaller bumps the word and then
//! reads `waiters` (SeqCst). Either the waiter sees the new word, or the
//! signaller sees the waiter — and the futex itself re-checks the word.
//!
//! Shared layout at `offset`: `seq: AtomicU32` at +0, `waiters: AtomicU32` at +4 (8 bytes).

use crate::futex::{self, FutexWait};
use crate::shm::Mapping;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const CONDITION_BYTES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The word moved past `seen` (or a spurious wake: re-check your predicate).
    Signalled,
    TimedOut,
    /// A signal handler ran during the sleep.
    Interrupted,
}

#[derive(Clone)]
pub struct Condition {
    map: Arc<Mapping>,
    offset: usize,
}

impl Condition {
    pub fn new(map: Arc<Mapping>, offset: usize) -> Condition {
        // Fail here, not at the first signal, if the words are out of place.
        map.atomic_u32(offset);
        map.atomic_u32(offset + 4);
        Condition { map, offset }
    }
    #[inline]
    fn seq(&self) -> &AtomicU32 {
        self.map.atomic_u32(self.offset)
    }
    fn waiters_word(&self) -> &AtomicU32 {
        self.map.atomic_u32(self.offset + 4)
    }
    /// The current sequence value; read it before checking your predicate.
    #[inline]
    pub fn current(&self) -> u32 {
        self.seq().load(Ordering::SeqCst)
    }
    /// Wakes every sleeper (a futex call only if someone sleeps). Returns
    /// whether the kernel was called.
    pub fn signal(&self) -> bool {
        let sleepers = self.bump();
        if sleepers {
            self.wake_sleepers();
        }
        sleepers
    }
    /// `signal`'s first half: moves the word (a waiter that has not slept
    /// yet sees it and does not sleep) and says whether a sleeper is
    /// announced, which `wake_sleepers` must then wake. The engine shared
    /// with the program's threads wakes them only after it lets the engine
    /// go (`outboard-embedded`'s `shared`): a thread woken while the engine
    /// is held often preempts the holder on its core and then finds the
    /// engine taken.
    pub fn bump(&self) -> bool {
        self.seq().fetch_add(1, Ordering::SeqCst);
        // SeqCst pairs with the waiter's increment + fence: either it sees
        // the new seq, or we see it announced.
        self.waiters_word().load(Ordering::SeqCst) != 0
    }
    /// Wakes every thread asleep on the word (after `bump` said one is).
    pub fn wake_sleepers(&self) {
        futex::wake(self.seq(), u32::MAX);
    }
    /// Waits until the word differs from `seen`: spins `spin` first, then
    /// sleeps, at most `timeout` in all.
    #[allow(clippy::disallowed_methods)] // A blocking wait is bounded by the real clock.
    pub fn wait(&self, seen: u32, spin: Duration, timeout: Duration) -> WaitOutcome {
        let start = Instant::now();
        let seq = self.seq();
        let spin = spin.min(timeout);
        let mut polls = 0u32;
        while !spin.is_zero() && seq.load(Ordering::Acquire) == seen {
            polls = polls.wrapping_add(1);
            // Reading the clock costs more than a poll: look every 64 polls.
            if polls.is_multiple_of(64) && start.elapsed() >= spin {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            if seq.load(Ordering::Acquire) != seen {
                return WaitOutcome::Signalled;
            }
            let Some(left) = timeout.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else {
                return WaitOutcome::TimedOut;
            };
            let waiters = self.waiters_word();
            waiters.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let r = if seq.load(Ordering::SeqCst) != seen {
                FutexWait::Changed
            } else {
                futex::wait(seq, seen, Some(left))
            };
            waiters.fetch_sub(1, Ordering::SeqCst);
            match r {
                FutexWait::Changed => return WaitOutcome::Signalled,
                FutexWait::Interrupted => return WaitOutcome::Interrupted,
                // Woken or timed out: the loop re-checks the word and the clock.
                FutexWait::Woken | FutexWait::TimedOut => {}
            }
        }
    }
    /// As `wait`, with no time limit: sleeps until the word moves or a
    /// signal handler runs. Without a timeout the kernel restarts the futex
    /// after a handler installed with SA_RESTART and returns EINTR after one
    /// without: exactly what a blocking socket call does, so the socket shim
    /// inherits Linux's restart rules.
    pub fn wait_untimed(&self, seen: u32, spin: Duration) -> WaitOutcome {
        let seq = self.seq();
        if !spin.is_zero() && self.wait(seen, spin, spin) == WaitOutcome::Signalled {
            return WaitOutcome::Signalled;
        }
        loop {
            if seq.load(Ordering::Acquire) != seen {
                return WaitOutcome::Signalled;
            }
            let waiters = self.waiters_word();
            waiters.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let r = if seq.load(Ordering::SeqCst) != seen { FutexWait::Changed } else { futex::wait(seq, seen, None) };
            waiters.fetch_sub(1, Ordering::SeqCst);
            match r {
                FutexWait::Changed => return WaitOutcome::Signalled,
                FutexWait::Interrupted => return WaitOutcome::Interrupted,
                FutexWait::Woken | FutexWait::TimedOut => {}
            }
        }
    }
    /// Sleepers announced now (for tests and stat).
    pub fn waiters(&self) -> u32 {
        self.waiters_word().load(Ordering::SeqCst)
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
}

#[cfg(test)]
mod tests;
