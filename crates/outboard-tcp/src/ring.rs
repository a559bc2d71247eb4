//! A fixed-capacity byte ring used for the send and receive queues.
//! STUB: signatures are the contract; bodies are being written.

#[derive(Debug, Clone)]
pub struct RingBuffer {
    _todo: (),
}

impl RingBuffer {
    pub fn new(capacity: usize) -> Self {
        let _ = capacity;
        todo!()
    }
    pub fn capacity(&self) -> usize {
        todo!()
    }
    /// Bytes queued (readable from the front).
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    pub fn free(&self) -> usize {
        todo!()
    }
    /// Appends as much of `data` as fits; returns the count.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let _ = data;
        todo!()
    }
    /// Copies up to `out.len()` bytes from the front and removes them.
    pub fn pop(&mut self, out: &mut [u8]) -> usize {
        let _ = out;
        todo!()
    }
    /// Drops `n` bytes from the front (n <= len).
    pub fn consume(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
    /// The queued bytes `[offset, offset + len)` counted from the front, as at
    /// most two slices (the second empty unless the range wraps). Clamped to what is queued.
    pub fn peek(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        let _ = (offset, len);
        todo!()
    }
    /// Writes `data` at `offset` past the end of the queued bytes without
    /// queueing it (out-of-order receive); clamped to free space. Returns bytes written.
    pub fn write_unqueued(&mut self, offset: usize, data: &[u8]) -> usize {
        let _ = (offset, data);
        todo!()
    }
    /// Marks `n` bytes after the queued ones (written with `write_unqueued`) as queued.
    pub fn enqueue_unqueued(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
}
