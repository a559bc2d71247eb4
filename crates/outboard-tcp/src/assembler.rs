//! The receiver's out-of-order tracking: which byte ranges beyond RCV.NXT are
//! held, with a hard cap on the number of ranges (the data itself sits in the
//! receive ring, so bytes are bounded by the receive window).
//!
//! Ranges are half-open `[start, end)`, sorted, and kept fully merged: no two
//! overlap or touch, so the count is the number of holes-plus-islands the
//! receiver must remember, and a sender cannot make it grow past the cap by
//! sending many tiny segments (RFC 9293 §3.10.7.4 lets a receiver drop what
//! it cannot hold).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyRanges;

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Assembler {
    /// Sorted, disjoint, non-adjacent, non-empty `(start, end)` ranges.
    ranges: Vec<(usize, usize)>,
    max_ranges: usize,
}

impl Assembler {
    pub fn new(max_ranges: usize) -> Self {
        // Allocated once; `add` never needs more than `max_ranges + 1` slots.
        Assembler { ranges: Vec::with_capacity(max_ranges.saturating_add(1).min(1024)), max_ranges }
    }
    /// Records bytes `[offset, offset + len)` (offsets relative to RCV.NXT; may
    /// overlap what is held). Fails, recording nothing, if the result would
    /// need more than `max_ranges` ranges.
    pub fn add(&mut self, offset: usize, len: usize) -> Result<(), TooManyRanges> {
        if len == 0 {
            return Ok(());
        }
        let start = offset;
        let end = offset.saturating_add(len);
        // First range that ends at or after `start` (touching counts: merge).
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        // First range that starts strictly after `end` (touching counts: merge).
        let j = self.ranges.partition_point(|&(s, _)| s <= end);
        // Ranges i..j overlap or touch [start, end) and collapse into one.
        let merged = j - i;
        if self.ranges.len() - merged + 1 > self.max_ranges {
            return Err(TooManyRanges);
        }
        if merged == 0 {
            self.ranges.insert(i, (start, end));
        } else {
            let new = (start.min(self.ranges[i].0), end.max(self.ranges[j - 1].1));
            self.ranges[i] = new;
            self.ranges.drain(i + 1..j);
        }
        Ok(())
    }
    /// Removes the range starting at offset 0, if any, returning its length, and
    /// shifts the remaining offsets down by it.
    pub fn pop_front(&mut self) -> usize {
        match self.ranges.first() {
            Some(&(0, end)) => {
                self.ranges.remove(0);
                for r in &mut self.ranges {
                    r.0 -= end;
                    r.1 -= end;
                }
                end
            }
            _ => 0,
        }
    }
    /// Shifts every range down by `n` bytes (RCV.NXT advanced by in-order data
    /// that was not held here), dropping what falls below zero.
    pub fn advance(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.ranges.retain(|&(_, e)| e > n);
        for r in &mut self.ranges {
            r.0 = r.0.saturating_sub(n);
            r.1 -= n;
        }
    }
    /// Heap bytes held by the range table.
    pub fn allocated_bytes(&self) -> usize {
        self.ranges.capacity() * core::mem::size_of::<(usize, usize)>()
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }
    pub fn max_ranges(&self) -> usize {
        self.max_ranges
    }
    /// True if the byte at `offset` is held.
    pub fn contains(&self, offset: usize) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= offset);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= offset)
    }
    /// Forgets everything held.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }
    /// Bytes held out of order.
    pub fn held_bytes(&self) -> usize {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }
    /// Held ranges as (start, end) offsets, lowest first.
    pub fn ranges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ranges.iter().copied()
    }
}

#[cfg(test)]
mod tests;
