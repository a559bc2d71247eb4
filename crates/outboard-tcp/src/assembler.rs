//! The receiver's out-of-order tracking: which byte ranges beyond RCV.NXT are
//! held, with a hard cap on the number of ranges (the data itself sits in the
//! receive ring, so bytes are bounded by the receive window).
//! STUB: signatures are the contract; bodies are being written.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyRanges;

#[derive(Debug, Clone)]
pub struct Assembler {
    _todo: (),
}

impl Assembler {
    pub fn new(max_ranges: usize) -> Self {
        let _ = max_ranges;
        todo!()
    }
    /// Records bytes `[offset, offset + len)` (offsets relative to RCV.NXT; may
    /// overlap what is held). Fails, recording nothing, if the result would
    /// need more than `max_ranges` ranges.
    pub fn add(&mut self, offset: usize, len: usize) -> Result<(), TooManyRanges> {
        let _ = (offset, len);
        todo!()
    }
    /// Removes the range starting at offset 0, if any, returning its length, and
    /// shifts the remaining offsets down by it.
    pub fn pop_front(&mut self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    pub fn range_count(&self) -> usize {
        todo!()
    }
    /// Bytes held out of order.
    pub fn held_bytes(&self) -> usize {
        todo!()
    }
    /// Held ranges as (start, end) offsets, lowest first.
    pub fn ranges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        core::iter::empty()
    }
}
