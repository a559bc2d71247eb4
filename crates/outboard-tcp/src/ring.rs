//! A fixed-capacity byte ring used for the send and receive queues.
//!
//! The capacity is fixed in `new`, but the storage is allocated lazily, in
//! full, by the first write (`push`, `write_unqueued`, `enqueue_unqueued`),
//! and `release` gives it back. A connection therefore holds no ring memory
//! until bytes actually move: a SYN-RECEIVED connection in a listener's SYN
//! queue costs its struct, not two configured buffers, and a connection in
//! TIME-WAIT can drop its storage (see `Connection::memory_in_use`). Once
//! allocated the storage never grows or moves. Bytes between
//! `head` and `head + len` (modulo capacity) are *queued*; the space after them
//! is free, and the receiver may park out-of-order bytes there with
//! `write_unqueued` before they become contiguous (`enqueue_unqueued`).

#[derive(Debug, Clone)]
pub struct RingBuffer {
    /// Empty until the first write; then exactly `cap` bytes.
    buf: Vec<u8>,
    cap: usize,
    /// Index of the first queued byte; always `< capacity` (or 0 when capacity is 0).
    head: usize,
    /// Number of queued bytes; always `<= capacity`.
    len: usize,
}

impl RingBuffer {
    /// A ring that will hold up to `capacity` bytes; allocates nothing yet.
    pub fn new(capacity: usize) -> Self {
        RingBuffer { buf: Vec::new(), cap: capacity, head: 0, len: 0 }
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Heap bytes the ring holds now: 0 before the first write and after
    /// `release`, else the capacity.
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
        self.allocate();
        let start = self.wrap(self.head + self.len + offset);
        let first = n.min(self.capacity() - start);
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
            self.allocate();
        }
        self.len += n;
    }

    /// Allocates the storage on first use, zero-filled so that bytes marked
    /// queued without being written read as zeros.
    fn allocate(&mut self) {
        if self.buf.len() != self.cap {
            self.buf = vec![0; self.cap];
        }
    }

    /// The raw storage range `[offset, offset + len)` from `head`, which the
    /// caller has already clamped to lie within capacity.
    fn slices(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        if len == 0 {
            return (&[], &[]);
        }
        let start = self.wrap(self.head + offset);
        let first = len.min(self.capacity() - start);
        (&self.buf[start..start + first], &self.buf[..len - first])
    }

    /// Reduces an index in `[0, 2 * capacity)` into the storage.
    fn wrap(&self, i: usize) -> usize {
        if i >= self.capacity() {
            i - self.capacity()
        } else {
            i
        }
    }
}

#[cfg(test)]
mod tests;
