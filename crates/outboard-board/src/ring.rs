//! Single-producer single-consumer rings of fixed-size records in a board.
//!
//! Shared layout at `offset` (see `ring_bytes`): the consumer's `head`
//! (AtomicU32) alone on the first 64-byte line, the producer's `tail`
//! (AtomicU32) alone on the second, then `capacity` records of `T`
//! (`capacity` a power of two). Indices run free and wrap at 2^32; a record
//! index is `i & (capacity - 1)`; `tail - head` (wrapping) is the fill.
//!
//! Publication order: the producer writes the record (volatile), then stores
//! `tail` with Release; the consumer loads `tail` with Acquire, copies the
//! record out, then stores `head` with Release. Each side keeps its own index
//! privately and only *reads* the other's: a fill outside `0..=capacity`
//! means the other side wrote garbage → `RingError::Corrupt`, and the side
//! that checks stops trusting the ring (the engine disconnects the
//! application).

use crate::shm::{Mapping, Pod};
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes a ring of `capacity` records of `T` occupies (header + records).
pub fn ring_bytes<T: Pod>(capacity: u32) -> usize {
    128 + capacity as usize * std::mem::size_of::<T>()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// The other side's index is impossible (fill > capacity or went backwards).
    Corrupt,
}

/// Offsets inside a ring's shared header.
const HEAD: usize = 0;
const TAIL: usize = 64;
const RECORDS: usize = 128;

/// Sets both indices of the ring at `offset` back to 0, for a ring slot
/// handed to a new user (the previous one's sides are gone).
pub fn reset(map: &Mapping, offset: usize) {
    map.atomic_u32(offset + HEAD).store(0, Ordering::Release);
    map.atomic_u32(offset + TAIL).store(0, Ordering::Release);
}

/// The producing side of a ring.
pub struct Producer<T: Pod> {
    map: Arc<Mapping>,
    offset: usize,
    capacity: u32,
    /// Our next index to publish (private; the board copy is write-only for us).
    tail: u32,
    /// Slots reserved by `begin_put` and not yet published.
    reserved: u32,
    /// Slots known free at our last look at the consumer's head, less those
    /// reserved since. `begin_put` reads the head (a line the consumer
    /// writes at every release: a cache miss when it runs on another core)
    /// only when this runs out. The head only moves forward, so the count
    /// is a safe lower bound on the room.
    room: u32,
    _t: PhantomData<T>,
}

/// The consuming side of a ring.
pub struct Consumer<T: Pod> {
    map: Arc<Mapping>,
    offset: usize,
    capacity: u32,
    head: u32,
    /// `begin_get` returned a record that `end_get` has not released yet.
    held: bool,
    _t: PhantomData<T>,
}

/// Panics (a caller bug) unless the whole ring fits the mapping.
fn check_ring<T: Pod>(map: &Mapping, offset: usize, capacity: u32) {
    assert!(capacity.is_power_of_two(), "ring capacity {capacity} is not a power of two");
    let end = offset.checked_add(ring_bytes::<T>(capacity));
    assert!(
        end.is_some_and(|e| e <= map.len()),
        "ring at offset {offset} (capacity {capacity}) does not fit the {}-byte mapping",
        map.len()
    );
}

/// The fill `tail - head` if it is possible, else `Corrupt`.
fn fill(tail: u32, head: u32, capacity: u32) -> Result<u32, RingError> {
    let f = tail.wrapping_sub(head);
    if f > capacity {
        Err(RingError::Corrupt)
    } else {
        Ok(f)
    }
}

impl<T: Pod> Producer<T> {
    /// The producer of the ring at `offset` with `capacity` records (a power
    /// of two), starting from index 0 (a freshly zeroed board).
    pub fn new(map: Arc<Mapping>, offset: usize, capacity: u32) -> Producer<T> {
        Self::with_start(map, offset, capacity, 0)
    }
    /// As `new`, starting from index `start` (the board's head and tail must
    /// hold `start` already): tests of index wrap-around, and a live upgrade
    /// going on from the old engine's `position`.
    pub fn with_start(map: Arc<Mapping>, offset: usize, capacity: u32, start: u32) -> Producer<T> {
        check_ring::<T>(&map, offset, capacity);
        Producer { map, offset, capacity, tail: start, reserved: 0, room: 0, _t: PhantomData }
    }
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
    /// Records that can still be reserved now (reads the consumer's head).
    pub fn free(&self) -> Result<u32, RingError> {
        // Acquire: the consumer's copies of released records happen before we overwrite them.
        let head = self.map.atomic_u32(self.offset + HEAD).load(Ordering::Acquire);
        let used = fill(self.tail, head, self.capacity)?;
        // Reservations were made while there was room; room can only shrink
        // again if the head went backwards.
        self.capacity.checked_sub(used).and_then(|r| r.checked_sub(self.reserved)).ok_or(RingError::Corrupt)
    }
    /// Reserves the next slot and writes `record` into it (not yet visible).
    /// Ok(false) when the ring is full.
    pub fn begin_put(&mut self, record: T) -> Result<bool, RingError> {
        if self.room == 0 {
            self.room = self.free()?;
            if self.room == 0 {
                return Ok(false);
            }
        }
        self.room -= 1;
        let slot = self.tail.wrapping_add(self.reserved) & (self.capacity - 1);
        self.map.write(record_offset::<T>(self.offset, slot), record);
        self.reserved += 1;
        Ok(true)
    }
    /// Publishes every reserved slot (one Release store of `tail`).
    pub fn end_put(&mut self) {
        if self.reserved == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(self.reserved);
        self.reserved = 0;
        // Release: the record writes happen before the consumer sees the new tail.
        self.map.atomic_u32(self.offset + TAIL).store(self.tail, Ordering::Release);
    }
    /// `begin_put` + `end_put`.
    pub fn put(&mut self, record: T) -> Result<bool, RingError> {
        let ok = self.begin_put(record)?;
        self.end_put();
        Ok(ok)
    }
    /// Our next index to publish (live upgrade: `with_start` goes on from it).
    pub fn position(&self) -> u32 {
        self.tail
    }
    /// Published records the consumer has not released yet.
    pub fn pending(&self) -> Result<u32, RingError> {
        let head = self.map.atomic_u32(self.offset + HEAD).load(Ordering::Acquire);
        fill(self.tail, head, self.capacity)
    }
}

impl<T: Pod> Consumer<T> {
    /// The consumer of the ring at `offset`, starting from index 0.
    pub fn new(map: Arc<Mapping>, offset: usize, capacity: u32) -> Consumer<T> {
        Self::with_start(map, offset, capacity, 0)
    }
    /// As `new`, starting from index `start` (see `Producer::with_start`).
    pub fn with_start(map: Arc<Mapping>, offset: usize, capacity: u32, start: u32) -> Consumer<T> {
        check_ring::<T>(&map, offset, capacity);
        Consumer { map, offset, capacity, head: start, held: false, _t: PhantomData }
    }
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
    /// Our next index to take (live upgrade: `with_start` goes on from it).
    pub fn position(&self) -> u32 {
        self.head
    }
    /// Records published and not yet released.
    pub fn available(&self) -> Result<u32, RingError> {
        // Acquire: pairs with the producer's Release; the records are written.
        let tail = self.map.atomic_u32(self.offset + TAIL).load(Ordering::Acquire);
        fill(tail, self.head, self.capacity)
    }
    /// Nothing published that we have not taken (one Acquire load).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.atomic_u32(self.offset + TAIL).load(Ordering::Acquire) == self.head
    }
    /// A copy of the next record, left in the ring until `end_get`. An
    /// empty ring is answered inline (one load and a compare): the engine's
    /// idle turn and the application's wait loop ask every time round. It
    /// also prefetches the slot the next record will be written to, so that
    /// when the producer's index moves the record's line is already on its
    /// way to this core (one cache miss on the poller's side, not two in
    /// series; a hint only: the record is still read after the Acquire
    /// load of the index).
    #[inline]
    pub fn begin_get(&mut self) -> Result<Option<T>, RingError> {
        if self.is_empty() {
            let slot = self.head & (self.capacity - 1);
            self.map.prefetch(record_offset::<T>(self.offset, slot), std::mem::size_of::<T>());
            return Ok(None);
        }
        self.begin_get_published()
    }
    fn begin_get_published(&mut self) -> Result<Option<T>, RingError> {
        if self.available()? == 0 {
            return Ok(None);
        }
        let slot = self.head & (self.capacity - 1);
        self.held = true;
        Ok(Some(self.map.read(record_offset::<T>(self.offset, slot))))
    }
    /// Releases the record `begin_get` returned (one Release store of `head`).
    /// Does nothing if `begin_get` returned no record since the last release.
    pub fn end_get(&mut self) {
        if !self.held {
            return;
        }
        self.held = false;
        self.head = self.head.wrapping_add(1);
        // Release: our copy of the record happens before the producer reuses the slot.
        self.map.atomic_u32(self.offset + HEAD).store(self.head, Ordering::Release);
    }
    /// Forgets the record `begin_get` returned without releasing it: the
    /// next `begin_get` returns it again.
    pub fn cancel_get(&mut self) {
        self.held = false;
    }
    /// `begin_get` + `end_get`.
    #[inline]
    pub fn get(&mut self) -> Result<Option<T>, RingError> {
        let r = self.begin_get()?;
        if r.is_some() {
            self.end_get();
        }
        Ok(r)
    }
}

fn record_offset<T: Pod>(ring: usize, slot: u32) -> usize {
    ring + RECORDS + slot as usize * std::mem::size_of::<T>()
}

#[cfg(test)]
mod tests;
