//! Where a ring's bytes live: its own growable `Vec`, or memory it was lent.

/// Memory for a ring that the ring does not own (shared memory of a board).
///
/// `bytes` and `bytes_mut` must return the same length every time: that
/// length is the ring's capacity, and the ring keeps byte `k` of its stream
/// (counted from the attach) at index `k % len` (see `RingBuffer::attach`).
pub trait RingStorage: Send + std::fmt::Debug {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// A plain heap buffer lent as storage (tests, or an application without boards).
impl RingStorage for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl RingStorage for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[derive(Debug)]
pub(super) enum Storage {
    /// Grows lazily up to the capacity; freed by `release`.
    Owned(Vec<u8>),
    /// Fixed size: its length is the capacity.
    External(Box<dyn RingStorage>),
}

impl Storage {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes(),
        }
    }
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes_mut(),
        }
    }
}
