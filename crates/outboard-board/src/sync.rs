//! Syncs: one-word results, written once by the engine and read once by the
//! application, cancellable (Nectar's syncs; the status of a connect, a bind).
//!
//! Each slot is an AtomicU64 in the board:
//! `FREE (0)` → the application arms it: `PENDING (1)` and sends the command
//! naming the slot → the engine completes it with a CAS `PENDING → DONE|value`
//! → the application takes the value with a CAS `DONE|value → FREE`.
//! Cancel: the application CASes `PENDING → CANCELLED (2)`; the engine's
//! later completion fails, it undoes what it did (closes the connection it
//! made) and CASes `CANCELLED → FREE`. If the completion won the race, the
//! cancel fails and returns the value instead. A slot in `CANCELLED` is not
//! reusable until the engine has freed it.
//!
//! Values are i64 in 62 bits (`-2^61 .. 2^61`); DONE is bit 63.

use crate::shm::Mapping;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const SYNC_BYTES: usize = 8;

const FREE: u64 = 0;
const PENDING: u64 = 1;
const CANCELLED: u64 = 2;
const DONE: u64 = 1 << 63;
/// The value's 62 bits (bit 62 is always clear in a valid word).
const VALUE: u64 = (1 << 62) - 1;
/// The range of values a sync carries.
const MIN_VALUE: i64 = -(1 << 61);
const MAX_VALUE: i64 = (1 << 61) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncState {
    Free,
    Pending,
    Cancelled,
    Done(i64),
}

impl SyncState {
    /// None for a word no valid transition produces (garbage).
    pub fn decode(word: u64) -> Option<SyncState> {
        match word {
            FREE => Some(SyncState::Free),
            PENDING => Some(SyncState::Pending),
            CANCELLED => Some(SyncState::Cancelled),
            w if w & !VALUE == DONE => {
                // Sign-extend the 62-bit value.
                Some(SyncState::Done(((w << 2) as i64) >> 2))
            }
            _ => None,
        }
    }
    /// Panics if a `Done` value is outside `MIN_VALUE..=MAX_VALUE` (a caller bug).
    pub fn encode(self) -> u64 {
        match self {
            SyncState::Free => FREE,
            SyncState::Pending => PENDING,
            SyncState::Cancelled => CANCELLED,
            SyncState::Done(v) => {
                assert!((MIN_VALUE..=MAX_VALUE).contains(&v), "sync value {v} does not fit 62 bits");
                DONE | (v as u64 & VALUE)
            }
        }
    }
}

/// What the engine's completion found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompleteError {
    /// The application cancelled first: undo, then the slot is freed.
    Cancelled,
    /// The slot was not pending (free, done, garbage, or out of range): a
    /// hostile or confused application.
    NotPending,
}

/// What the application's cancel found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    Cancelled,
    /// The engine completed it first; the value was taken and the slot freed.
    AlreadyDone(i64),
    NotPending,
}

#[derive(Clone)]
pub struct SyncTable {
    map: Arc<Mapping>,
    offset: usize,
    count: u32,
}

impl SyncTable {
    pub fn new(map: Arc<Mapping>, offset: usize, count: u32) -> SyncTable {
        SyncTable { map, offset, count }
    }
    pub fn count(&self) -> u32 {
        self.count
    }
    /// The slot's word, or None if `slot` is out of range.
    fn word(&self, slot: u32) -> Option<&AtomicU64> {
        (slot < self.count).then(|| self.map.atomic_u64(self.offset + slot as usize * SYNC_BYTES))
    }
    /// CAS `from → to` (AcqRel: what the writer did before is visible to the taker).
    fn cas(w: &AtomicU64, from: u64, to: u64) -> Result<u64, u64> {
        w.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
    }
    /// Application: FREE → PENDING. False if the slot is not free (or out of range).
    pub fn arm(&self, slot: u32) -> bool {
        self.word(slot).is_some_and(|w| Self::cas(w, FREE, PENDING).is_ok())
    }
    /// Engine: PENDING → DONE(value), once.
    pub fn complete(&self, slot: u32, value: i64) -> Result<(), CompleteError> {
        let done = SyncState::Done(value).encode();
        let w = self.word(slot).ok_or(CompleteError::NotPending)?;
        match Self::cas(w, PENDING, done) {
            Ok(_) => Ok(()),
            Err(CANCELLED) => Err(CompleteError::Cancelled),
            Err(_) => Err(CompleteError::NotPending),
        }
    }
    /// Engine, after `complete` returned `Cancelled` and it undid its work.
    pub fn release_cancelled(&self, slot: u32) -> bool {
        self.word(slot).is_some_and(|w| Self::cas(w, CANCELLED, FREE).is_ok())
    }
    /// Application: DONE(v) → FREE, returning v; None if not done yet.
    pub fn take(&self, slot: u32) -> Option<i64> {
        let w = self.word(slot)?;
        let mut cur = w.load(Ordering::Acquire);
        loop {
            let SyncState::Done(v) = SyncState::decode(cur)? else {
                return None;
            };
            // Fails only if another thread of ours took it (or the word is being scribbled on).
            match Self::cas(w, cur, FREE) {
                Ok(_) => return Some(v),
                Err(now) => cur = now,
            }
        }
    }
    /// Application: PENDING → CANCELLED, or the value if it was already done.
    pub fn cancel(&self, slot: u32) -> CancelOutcome {
        let Some(w) = self.word(slot) else {
            return CancelOutcome::NotPending;
        };
        match Self::cas(w, PENDING, CANCELLED) {
            Ok(_) => CancelOutcome::Cancelled,
            // The engine won: take the value the way `take` does.
            Err(_) => match self.take(slot) {
                Some(v) => CancelOutcome::AlreadyDone(v),
                None => CancelOutcome::NotPending,
            },
        }
    }
    /// None if `slot` is out of range or its word is garbage.
    pub fn state(&self, slot: u32) -> Option<SyncState> {
        SyncState::decode(self.word(slot)?.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests;
