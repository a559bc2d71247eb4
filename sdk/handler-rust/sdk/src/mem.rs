//! Memory without an allocator: state in statics ([`StaticCell`]) and a
//! scratch region grown with `memory.grow` ([`with_scratch`]).
//!
//! A handler instance runs one invocation at a time on one thread, and its
//! memory lives across invocations (until a trap discards the instance), so
//! a static is the natural home for a handler's state. Keep statics
//! all-zero when they are created (for example `false`/`0` for "unused"),
//! so that the linker leaves them out of the module's data: a zero static
//! costs memory, not module size.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

#[cfg(target_arch = "wasm32")]
use crate::Errno;

/// A `static` that one piece of code at a time may change: [`with`]
/// lends `&mut T` to a closure and refuses a nested borrow.
///
/// ```ignore
/// static COUNT: StaticCell<u64> = StaticCell::new(0);
/// COUNT.with(|c| *c += 1);
/// ```
///
/// [`with`]: StaticCell::with
pub struct StaticCell<T> {
    busy: AtomicBool,
    cell: UnsafeCell<T>,
}

// The busy flag makes every access exclusive, so sharing the cell between
// threads (there is one on wasm32-unknown-unknown) is sound for a `Send` T.
unsafe impl<T: Send> Sync for StaticCell<T> {}

impl<T> StaticCell<T> {
    /// A cell holding `value`.
    pub const fn new(value: T) -> Self {
        StaticCell {
            busy: AtomicBool::new(false),
            cell: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with the value; `None` (and `f` not run) when the value is
    /// already lent (a call from inside another `with` on the same cell).
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if self.busy.swap(true, Ordering::Acquire) {
            return None;
        }
        let _release = Release(&self.busy);
        // SAFETY: the busy flag, set above and cleared when `_release`
        // drops, makes this the only reference to the value.
        Some(f(unsafe { &mut *self.cell.get() }))
    }
}

/// Clears a busy flag when dropped.
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The size of a WebAssembly page (64 KiB).
pub const PAGE_SIZE: usize = 65536;

#[cfg(target_arch = "wasm32")]
mod scratch {
    use core::sync::atomic::{AtomicBool, AtomicUsize};

    /// Start of the scratch region (0: none yet).
    pub static BASE: AtomicUsize = AtomicUsize::new(0);
    /// Its size in bytes (whole pages).
    pub static SIZE: AtomicUsize = AtomicUsize::new(0);
    /// Whether it is lent.
    pub static BUSY: AtomicBool = AtomicBool::new(false);
}

/// Runs `f` with `len` bytes of scratch memory: a region at the end of the
/// linear memory, grown with `memory.grow` as needed and kept for the next
/// call (its bytes are what the last user left there). The region is
/// bounded only by the handler's memory cap; growing past it fails with
/// [`Errno::ENOSPC`]. A nested call (from inside `f`) fails with
/// [`Errno::EAGAIN`].
#[cfg(target_arch = "wasm32")]
pub fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, Errno> {
    use core::arch::wasm32::{memory_grow, memory_size};
    if len == 0 {
        return Ok(f(&mut []));
    }
    if scratch::BUSY.swap(true, Ordering::Acquire) {
        return Err(Errno::EAGAIN);
    }
    let _release = Release(&scratch::BUSY);
    let mut base = scratch::BASE.load(Ordering::Relaxed);
    let mut size = scratch::SIZE.load(Ordering::Relaxed);
    if size < len {
        let end = memory_size(0).checked_mul(PAGE_SIZE).ok_or(Errno::ENOSPC)?;
        // Extend the region if it still ends the memory; otherwise (first
        // use, or something else grew the memory since) start a new one.
        if size == 0 || base.checked_add(size) != Some(end) {
            base = end;
            size = 0;
        }
        let pages = (len - size).div_ceil(PAGE_SIZE);
        if memory_grow(0, pages) == usize::MAX {
            return Err(Errno::ENOSPC);
        }
        size += pages * PAGE_SIZE;
        scratch::BASE.store(base, Ordering::Relaxed);
        scratch::SIZE.store(size, Ordering::Relaxed);
    }
    // SAFETY: `base..base+size` is memory this function grew and nothing
    // else refers to (the busy flag makes this the only borrow of it); wasm
    // memory is always initialised.
    let buf = unsafe { core::slice::from_raw_parts_mut(base as *mut u8, len) };
    Ok(f(buf))
}
