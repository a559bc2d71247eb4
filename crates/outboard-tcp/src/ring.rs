//! A fixed-capacity byte ring used for the send and receive queues.
//!
//! Bytes between `head` and `head + len` (modulo capacity) are *queued*; the
//! space after them is free, and the receiver may park out-of-order bytes
//! there with `write_unqueued` before they become contiguous
//! (`enqueue_unqueued`).
//!
//! The storage is one of two kinds:
//! - *owned* (`new`): a `Vec` allocated lazily by the first write
//!   (`push`, `write_unqueued`, `enqueue_unqueued`), starting small
//!   (`MIN_STORAGE`) and doubling, up to the capacity, only when bytes need
//!   the room; `release` gives it back. A connection therefore holds no ring
//!   memory until bytes actually move, and an RPC connection that moves
//!   small messages holds a few KiB, not its configured buffers: a
//!   SYN-RECEIVED connection costs its struct, and a connection in TIME-WAIT
//!   can drop its storage (see `Connection::memory_in_use`). Growing copies
//!   the ring once into the larger storage (linearised, head at 0), keeping
//!   queued and parked bytes at their offsets.
//! - *external* (`attach`): memory the ring does not own — a board shared
//!   with the application, which reads received bytes and writes bytes to
//!   send in place. Its length is the capacity; it never grows, moves or is
//!   freed, and `head` only ever advances (modulo the capacity), so byte `k`
//!   of the stream counted from the attach lives at index `k % capacity`
//!   for good: the application can find every byte without asking.

mod storage;

pub use storage::{Place, RingStorage};
use storage::Storage;

#[derive(Debug)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RingBuffer {
    /// Owned: empty until the first write, then between `MIN_STORAGE` and
    /// `cap` bytes. External: exactly `cap` bytes.
    store: Storage,
    cap: usize,
    /// Index of the first queued byte; always `< capacity` (or 0 when capacity is 0).
    head: usize,
    /// Number of queued bytes; always `<= capacity`.
    len: usize,
}

/// Storage a ring starts with on its first write.
pub const MIN_STORAGE: usize = 4096;

impl RingBuffer {
    /// A ring that will hold up to `capacity` bytes; allocates nothing yet.
    pub fn new(capacity: usize) -> Self {
        RingBuffer { store: Storage::Owned(Vec::new()), cap: capacity, head: 0, len: 0 }
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Heap bytes the ring holds now: 0 before the first write and after
    /// `release`, else its storage (at most the capacity). External storage
    /// is not heap the ring allocated: 0.
    pub fn allocated_bytes(&self) -> usize {
        match &self.store {
            Storage::Owned(v) => v.capacity(),
            Storage::External(_) | Storage::Unbound(_) => 0,
        }
    }
    /// Whether the ring lives in external storage (`attach`).
    pub fn is_external(&self) -> bool {
        matches!(self.store, Storage::External(_) | Storage::Unbound(_))
    }
    /// Where the ring's lent storage is (`RingStorage::place`), if it is in some.
    pub fn lent_place(&self) -> Option<storage::Place> {
        match &self.store {
            Storage::External(s) => s.place(),
            _ => None,
        }
    }
    /// Whether the ring was read back from a record in lent storage and
    /// waits for it (`rebind`).
    pub fn is_unbound(&self) -> bool {
        matches!(self.store, Storage::Unbound(_))
    }
    /// Live upgrade: gives a ring read back from a record in lent storage
    /// the same memory again (the board region the old engine had lent it,
    /// mapped by this process): nothing is copied, the positions are the
    /// record's, so byte `k` since the first attach is still at index
    /// `k % capacity`. An error if the ring was not in lent storage or the
    /// storage's length is not the one recorded.
    pub fn rebind(&mut self, storage: Box<dyn RingStorage>) -> Result<(), String> {
        let Storage::Unbound(n) = self.store else {
            return Err("the ring was not in lent storage when it was recorded".into());
        };
        let got = storage.bytes().len();
        if got != n || n != self.cap {
            return Err(format!("lent storage of {got} bytes for a ring recorded with {n} (capacity {})", self.cap));
        }
        self.store = Storage::External(storage);
        Ok(())
    }
    /// Discards every byte (queued, and parked by `write_unqueued`) and gives
    /// the storage back: owned storage is freed (the capacity stays; the next
    /// write allocates again); external storage is dropped (a board region
    /// goes back to its board) and the ring continues, if ever written again,
    /// in owned storage. Called only once the ring can never hold a byte of
    /// this stream again, so stream positions no longer matter.
    pub fn release(&mut self) {
        self.store = Storage::Owned(Vec::new());
        self.head = 0;
        self.len = 0;
    }
    /// Bytes queued (readable from the front).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn free(&self) -> usize {
        self.capacity() - self.len
    }
    /// Storage index of the first queued byte (with external storage: the
    /// count of bytes consumed since the attach, modulo the capacity).
    pub fn head(&self) -> usize {
        self.head
    }
    /// The storage as it is, queued, parked and free bytes alike (empty
    /// for owned storage not yet allocated).
    pub fn storage_bytes(&self) -> &[u8] {
        self.store.bytes()
    }
    /// Appends as much of `data` as fits; returns the count.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_unqueued(0, data);
        self.len += n;
        n
    }
    /// Copies up to `out.len()` bytes from the front and removes them.
    pub fn pop(&mut self, out: &mut [u8]) -> usize {
        let (a, b) = self.peek(0, out.len());
        let n = a.len() + b.len();
        out[..a.len()].copy_from_slice(a);
        out[a.len()..n].copy_from_slice(b);
        self.consume(n);
        n
    }
    /// Drops `n` bytes from the front (n <= len).
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len, "consume {n} of {} queued bytes", self.len);
        let n = n.min(self.len);
        self.len -= n;
        // No reset of `head` when the queue empties: bytes parked past the end
        // by `write_unqueued` must stay where they are (and external storage
        // promises fixed positions).
        self.head = self.wrap(self.head + n);
    }
    /// The queued bytes `[offset, offset + len)` counted from the front, as at
    /// most two slices (the second empty unless the range wraps). Clamped to what is queued.
    pub fn peek(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        let offset = offset.min(self.len);
        let len = len.min(self.len - offset);
        self.slices(offset, len)
    }
    /// Writes `data` at `offset` past the end of the queued bytes without
    /// queueing it (out-of-order receive); clamped to free space. Returns bytes written.
    pub fn write_unqueued(&mut self, offset: usize, data: &[u8]) -> usize {
        let (a, b) = self.unqueued_mut(offset, data.len());
        let (first, n) = (a.len(), a.len() + b.len());
        a.copy_from_slice(&data[..first]);
        b.copy_from_slice(&data[first..n]);
        n
    }
    /// The free space `[offset, offset + len)` past the end of the queued
    /// bytes, clamped to the free space, as at most two writable slices
    /// (allocating owned storage as `write_unqueued` does). For writing in
    /// place: a fused copy-and-checksum, or an application filling the send
    /// ring before `enqueue_unqueued`.
    pub fn unqueued_mut(&mut self, offset: usize, len: usize) -> (&mut [u8], &mut [u8]) {
        let room = self.free().saturating_sub(offset);
        let n = len.min(room);
        if n == 0 {
            return (&mut [], &mut []);
        }
        self.reserve(self.len + offset + n);
        let start = self.wrap(self.head + self.len + offset);
        let size = self.size();
        let first = n.min(size - start);
        let (low, high) = self.store.bytes_mut().split_at_mut(start);
        (&mut high[..first], &mut low[..n - first])
    }
    /// Whether `[offset, offset + n)` past the queued bytes is free space
    /// the storage already has: writing there allocates and moves nothing.
    pub fn has_room_unqueued(&self, offset: usize, n: usize) -> bool {
        offset.saturating_add(n) <= self.free() && self.len + offset + n <= self.size()
    }
    /// Marks `n` bytes after the queued ones (written with `write_unqueued`) as queued.
    /// Clamped to the free space.
    #[inline]
    pub fn enqueue_unqueued(&mut self, n: usize) {
        debug_assert!(n <= self.free(), "enqueue {n} with {} free", self.free());
        let n = n.min(self.free());
        if n > 0 {
            // Queued bytes must have storage behind them (zeros if never written).
            self.reserve(self.len + n);
        }
        self.len += n;
    }

    /// Moves the ring into `storage` (its length becomes the capacity),
    /// copying the bytes of `keep` — `(start, end)` offsets from the first
    /// queued byte: the queued bytes and any parked ones worth keeping — to
    /// the same offsets from index 0, where the head then sits. Returns the
    /// bytes copied. The caller makes sure the queued bytes fit (`len <=
    /// storage length`; else this panics); kept ranges are clamped to the
    /// new capacity and to the storage there is.
    pub fn attach(
        &mut self,
        mut storage: Box<dyn RingStorage>,
        keep: impl IntoIterator<Item = (usize, usize)>,
    ) -> usize {
        let cap = storage.bytes().len();
        assert!(self.len <= cap, "attach: {} queued bytes do not fit in {cap}", self.len);
        let dst = storage.bytes_mut();
        let mut moved = 0;
        for (start, end) in keep {
            // Past the storage an owned ring has so far there is only free space.
            let end = end.min(cap).min(self.size());
            if start >= end {
                continue;
            }
            let (a, b) = self.slices(start, end - start);
            dst[start..start + a.len()].copy_from_slice(a);
            dst[start + a.len()..end].copy_from_slice(b);
            moved += end - start;
        }
        self.store = Storage::External(storage);
        self.cap = cap;
        self.head = 0;
        moved
    }

    /// Makes the storage hold at least `end` bytes from `head` (`end <=
    /// capacity`): allocates on first use, doubles when short. New storage is
    /// zero-filled so that bytes marked queued without being written read as
    /// zeros; growing copies the old storage in ring order, so every byte
    /// keeps its offset from `head`. External storage is always whole.
    #[inline]
    fn reserve(&mut self, end: usize) {
        // Inline for the common case, on every segment: the storage is there.
        if matches!(&self.store, Storage::Owned(buf) if end > buf.len()) {
            self.grow(end);
        }
    }

    /// `reserve` when owned storage is short of `end`.
    #[cold]
    fn grow(&mut self, end: usize) {
        let Storage::Owned(buf) = &mut self.store else { return };
        let have = buf.len();
        let want = end.max(MIN_STORAGE).next_power_of_two().max(have * 2).min(self.cap);
        let mut grown = vec![0; want];
        if have > 0 {
            let (a, b) = buf.split_at(self.head);
            grown[..b.len()].copy_from_slice(b);
            grown[b.len()..have].copy_from_slice(a);
        }
        *buf = grown;
        self.head = 0;
    }

    /// The raw storage range `[offset, offset + len)` from `head`, which the
    /// caller has already clamped to lie within the storage.
    fn slices(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        if len == 0 {
            return (&[], &[]);
        }
        let start = self.wrap(self.head + offset);
        let first = len.min(self.size() - start);
        let buf = self.store.bytes();
        (&buf[start..start + first], &buf[..len - first])
    }

    /// A ring read back from a record: its positions fit its storage and
    /// its storage its capacity (else an accessor could index out of bounds).
    pub fn check(&self) -> Result<(), String> {
        if let Storage::Unbound(n) = self.store {
            return Err(format!("ring in lent storage of {n} bytes not bound again (rebind)"));
        }
        let size = self.size();
        if size > self.cap {
            return Err(format!("ring storage of {size} bytes over its capacity {}", self.cap));
        }
        if self.len > size || (size > 0 && self.head >= size) || (size == 0 && self.head != 0) {
            return Err(format!("ring head {} and length {} do not fit its {size} bytes", self.head, self.len));
        }
        Ok(())
    }

    /// Bytes of storage there are now (the capacity once external).
    fn size(&self) -> usize {
        match &self.store {
            Storage::Owned(v) => v.len(),
            Storage::External(_) => self.cap,
            Storage::Unbound(_) => 0,
        }
    }

    /// Reduces an index in `[0, 2 * storage)` into the storage.
    fn wrap(&self, i: usize) -> usize {
        let size = self.size();
        if i >= size {
            i - size
        } else {
            i
        }
    }
}

#[cfg(test)]
mod external_tests;
#[cfg(test)]
mod tests;
