//! Mailboxes: SPSC rings of descriptors into the arena (Nectar's mailbox
//! operations). A message is a buffer plus a descriptor saying which bytes
//! of it hold the message; handing the descriptor over hands the buffer over.
//!
//! - `begin_put` takes a buffer from the producer's free list and returns
//!   where to write; `end_put` publishes the message's descriptor.
//! - `begin_get` returns (a copy of) the next descriptor, the message stays
//!   in place in the arena; `end_get` releases it and returns the descriptor
//!   so the consumer can give the buffer back (to its free list, or to the
//!   other side).
//! - `enqueue` moves the next message of one mailbox to another without
//!   touching its bytes.
//! - `adjust` trims a prefix and/or a suffix of a message in place.
//!
//! The consumer must check a descriptor it did not produce itself
//! (`ArenaLayout::locate`, the owner table) before using it.

use crate::arena::{ArenaLayout, BufRef, FreeList};
use crate::ring::{Consumer, Producer, RingError};
use crate::shm::{Mapping, Pod};
use std::sync::Arc;

/// One message: `len` bytes at board offset `offset`; `tag` and `aux` are
/// the user's (e.g. a datagram's source port and address).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    pub offset: u32,
    pub len: u32,
    pub tag: u32,
    pub aux: u32,
}
const _: () = assert!(std::mem::size_of::<Descriptor>() == 16);
// SAFETY: four u32s, repr(C), no padding.
unsafe impl Pod for Descriptor {}

/// A buffer taken by `begin_put`, to be filled and published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutBuffer {
    pub buf: BufRef,
    pub offset: usize,
    pub size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustError {
    /// The trims add up to more than the message holds.
    TooLong,
}

pub struct MailboxProducer {
    ring: Producer<Descriptor>,
    arena: Arc<ArenaLayout>,
    /// Taken by `begin_put`, not yet published.
    open: Option<PutBuffer>,
}

pub struct MailboxConsumer {
    ring: Consumer<Descriptor>,
    /// The copy `begin_get` returned: `end_get` hands back exactly what the
    /// caller checked, whatever the other side wrote into the slot since.
    open: Option<Descriptor>,
}

impl MailboxProducer {
    pub fn new(map: Arc<Mapping>, offset: usize, capacity: u32, arena: Arc<ArenaLayout>) -> Self {
        MailboxProducer { ring: Producer::new(map, offset, capacity), arena, open: None }
    }
    /// As `new`, continuing from ring index `position` (another producer's
    /// `position()`: a live upgrade takes over the mailbox as it is; the
    /// board is not written).
    pub fn with_start(map: Arc<Mapping>, offset: usize, capacity: u32, arena: Arc<ArenaLayout>, position: u32) -> Self {
        MailboxProducer { ring: Producer::with_start(map, offset, capacity, position), arena, open: None }
    }
    /// The ring index of the next message this producer publishes.
    pub fn position(&self) -> u32 {
        self.ring.position()
    }
    /// The buffer `begin_put` took and `end_put` has not published yet.
    pub fn open(&self) -> Option<PutBuffer> {
        self.open
    }
    /// A buffer from `stock` to write a message into; None if the mailbox
    /// or the stock is empty (nothing is taken then).
    ///
    /// Calling it again before `end_put` returns the same open buffer.
    pub fn begin_put(&mut self, stock: &mut FreeList) -> Result<Option<PutBuffer>, RingError> {
        if let Some(open) = self.open {
            return Ok(Some(open));
        }
        if self.ring.free()? == 0 {
            return Ok(None);
        }
        let Some(buf) = stock.alloc() else {
            return Ok(None);
        };
        let open = PutBuffer { buf, offset: self.arena.offset_of(buf), size: self.arena.size_of(buf) };
        self.open = Some(open);
        Ok(Some(open))
    }
    /// Publishes the message `begin_put` opened: its first `len` bytes
    /// (clamped to the buffer), with `tag` and `aux`.
    ///
    /// Panics if no message is open (a caller bug). `Corrupt` if the slot
    /// `begin_put` saw free is gone: only the consumer's head moving
    /// backwards can do that.
    pub fn end_put(&mut self, len: usize, tag: u32, aux: u32) -> Result<Descriptor, RingError> {
        let open = self.open.take().expect("MailboxProducer::end_put without begin_put");
        let d = Descriptor {
            // Boards are at most 4 GiB (`layout::MAX_BOARD`), so offsets fit.
            offset: u32::try_from(open.offset).expect("arena offset beyond 4 GiB"),
            len: len.min(open.size) as u32,
            tag,
            aux,
        };
        match self.ring.put(d)? {
            true => Ok(d),
            false => Err(RingError::Corrupt),
        }
    }
    /// Publishes an existing message (a descriptor whose buffer the caller holds).
    /// Ok(false) if the mailbox is full (counting room kept for an open `begin_put`).
    pub fn put(&mut self, d: Descriptor) -> Result<bool, RingError> {
        let keep = u32::from(self.open.is_some());
        if self.ring.free()? <= keep {
            return Ok(false);
        }
        self.ring.put(d)
    }
    pub fn free(&self) -> Result<u32, RingError> {
        self.ring.free()
    }
    pub fn arena(&self) -> &ArenaLayout {
        &self.arena
    }
}

impl MailboxConsumer {
    pub fn new(map: Arc<Mapping>, offset: usize, capacity: u32) -> Self {
        MailboxConsumer { ring: Consumer::new(map, offset, capacity), open: None }
    }
    /// The next message's descriptor (the bytes stay in the arena).
    pub fn begin_get(&mut self) -> Result<Option<Descriptor>, RingError> {
        if let Some(d) = self.open {
            return Ok(Some(d));
        }
        self.open = self.ring.begin_get()?;
        Ok(self.open)
    }
    /// Releases the message `begin_get` returned; returns its descriptor so
    /// the caller can give the buffer back. None if no message was open.
    pub fn end_get(&mut self) -> Option<Descriptor> {
        let d = self.open.take()?;
        self.ring.end_get();
        Some(d)
    }
    /// Moves the next message to `to` without copying it. Ok(false) if this
    /// mailbox is empty or `to` is full (nothing moves then).
    pub fn enqueue(&mut self, to: &mut MailboxProducer) -> Result<bool, RingError> {
        let was_open = self.open.is_some();
        let Some(d) = self.begin_get()? else {
            return Ok(false);
        };
        if !to.put(d)? {
            // Nothing moves: a message we opened only for this goes back to
            // being unread (one the caller had open stays open).
            if !was_open {
                self.open = None;
                self.ring.cancel_get();
            }
            return Ok(false);
        }
        self.end_get();
        Ok(true)
    }
    pub fn available(&self) -> Result<u32, RingError> {
        self.ring.available()
    }
}

/// Trims `front` bytes from the start and `back` bytes from the end of a
/// message, in place (only the descriptor changes).
/// A descriptor whose `offset + len` overflows u32 (garbage from the other
/// side) is `TooLong` too: it does not hold what it claims.
pub fn adjust(d: &mut Descriptor, front: u32, back: u32) -> Result<(), AdjustError> {
    let trim = front.checked_add(back).ok_or(AdjustError::TooLong)?;
    let len = d.len.checked_sub(trim).ok_or(AdjustError::TooLong)?;
    d.offset.checked_add(d.len).ok_or(AdjustError::TooLong)?;
    d.offset += front;
    d.len = len;
    Ok(())
}

#[cfg(test)]
mod tests;
