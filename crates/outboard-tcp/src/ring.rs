//! A fixed-capacity byte ring used for the send and receive queues.
//!
//! The capacity is fixed in `new`, but the storage is allocated lazily by
//! the first write (`push`, `write_unqueued`, `enqueue_unqueued`), starts
//! small (`MIN_STORAGE`) and doubles, up to the capacity, only when bytes
//! need the room; `release` gives it back. A connection therefore holds no
//! ring memory until bytes actually move, and an RPC connection that moves
//! small messages holds a few KiB, not its configured buffers: a
//! SYN-RECEIVED connection costs its struct, and a connection in TIME-WAIT
//! can drop its storage (see `Connection::memory_in_use`). Growing copies
//! the ring once into the larger storage (linearised, head at 0), keeping
//! queued and parked bytes at their offsets. Bytes between
//! `head` and `head + len` (modulo capacity) are *queued*; the space after them
//! is free, and the receiver may park out-of-order bytes there with
//! `write_unqueued` before they become contiguous (`enqueue_unqueued`).

#[derive(Debug, Clone)]
pub struct RingBuffer {
    /// Empty until the first write; then between `MIN_STORAGE` and `cap` bytes.
    buf: Vec<u8>,
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
        RingBuffer { buf: Vec::new(), cap: capacity, head: 0, len: 0 }
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Heap bytes the ring holds now: 0 before the first write and after
    /// `release`, else its storage (at most the capacity).
    pub fn allocated_bytes(&self) -> usize {
        self.buf.capacity()
    }
    /// Discards every byte (queued, and parked by `write_unqueued`) and frees
    /// the storage. The capacity stays; the next write allocates again.
    pub fn release(&mut self) {
        self.buf = Vec::new();
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
        // by `write_unqueued` must stay where they are.
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
        let room = self.free().saturating_sub(offset);
        let n = data.len().min(room);
        if n == 0 {
            return 0;
        }
        self.reserve(self.len + offset + n);
        let start = self.wrap(self.head + self.len + offset);
        let first = n.min(self.buf.len() - start);
        self.buf[start..start + first].copy_from_slice(&data[..first]);
        self.buf[..n - first].copy_from_slice(&data[first..n]);
        n
    }
    /// Marks `n` bytes after the queued ones (written with `write_unqueued`) as queued.
    /// Clamped to the free space.
    pub fn enqueue_unqueued(&mut self, n: usize) {
        debug_assert!(n <= self.free(), "enqueue {n} with {} free", self.free());
        let n = n.min(self.free());
        if n > 0 {
            // Queued bytes must have storage behind them (zeros if never written).
            self.reserve(self.len + n);
        }
        self.len += n;
    }

    /// Makes the storage hold at least `end` bytes from `head` (`end <=
    /// capacity`): allocates on first use, doubles when short. New storage is
    /// zero-filled so that bytes marked queued without being written read as
    /// zeros; growing copies the old storage in ring order, so every byte
    /// keeps its offset from `head`.
    fn reserve(&mut self, end: usize) {
        let have = self.buf.len();
        if end <= have {
            return;
        }
        let want = end.max(MIN_STORAGE).next_power_of_two().max(have * 2).min(self.cap);
        let mut grown = vec![0; want];
        if have > 0 {
            let (a, b) = self.buf.split_at(self.head);
            grown[..b.len()].copy_from_slice(b);
            grown[b.len()..have].copy_from_slice(a);
        }
        self.buf = grown;
        self.head = 0;
    }

    /// The raw storage range `[offset, offset + len)` from `head`, which the
    /// caller has already clamped to lie within capacity.
    fn slices(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        if len == 0 {
            return (&[], &[]);
        }
        let start = self.wrap(self.head + offset);
        let first = len.min(self.buf.len() - start);
        (&self.buf[start..start + first], &self.buf[..len - first])
    }

    /// Reduces an index in `[0, 2 * storage)` into the storage.
    fn wrap(&self, i: usize) -> usize {
        let size = self.buf.len();
        if i >= size {
            i - size
        } else {
            i
        }
    }
}

#[cfg(test)]
mod tests;
