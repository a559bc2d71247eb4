//! One message put back together from fragments that may arrive in any order,
//! duplicated, or not at all. Used for datagrams, requests and responses;
//! reliable messages arrive in order and need none of this.

use outboard_time::Instant;
use std::collections::BTreeMap;

/// What adding a fragment did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Added {
    /// Stored; more to come.
    Partial,
    /// This was the last missing piece.
    Complete,
    /// Seen before (same offset), or overlapping another fragment: ignored.
    Duplicate,
    /// Does not belong to this message (another total length).
    Mismatch,
}

#[derive(Debug)]
pub struct Assembly {
    total: u32,
    buf: Vec<u8>,
    /// offset -> length of the fragments held.
    pieces: BTreeMap<u32, u32>,
    got: u32,
    pub(crate) deadline: Instant,
}

impl Assembly {
    pub fn new(total: u32, deadline: Instant) -> Assembly {
        Assembly { total, buf: vec![0; total as usize], pieces: BTreeMap::new(), got: 0, deadline }
    }

    /// Bytes this assembly holds in memory.
    pub fn footprint(&self) -> usize {
        self.buf.len()
    }

    /// Adds `data` at `offset` of a message of `total` bytes (the parser has
    /// checked that it fits).
    pub fn add(&mut self, total: u32, offset: u32, data: &[u8]) -> Added {
        if total != self.total {
            return Added::Mismatch;
        }
        let len = data.len() as u32;
        let end = offset + len;
        // Refuse overlaps: a well-behaved sender cuts a message the same way every time.
        if let Some((&o, &l)) = self.pieces.range(..=offset).next_back() {
            if o + l > offset || (o == offset && len == 0) {
                return Added::Duplicate;
            }
        }
        if let Some((&o, _)) = self.pieces.range(offset..).next() {
            if o < end {
                return Added::Duplicate;
            }
        }
        self.buf[offset as usize..end as usize].copy_from_slice(data);
        self.pieces.insert(offset, len);
        self.got += len;
        if self.got == self.total {
            Added::Complete
        } else {
            Added::Partial
        }
    }

    /// Bytes held without a gap from the message's start.
    pub fn prefix(&self) -> u32 {
        let mut end = 0;
        for (&o, &l) in &self.pieces {
            if o != end {
                break;
            }
            end = o + l;
        }
        end
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_in_any_order_complete_once() {
        let mut a = Assembly::new(10, Instant::ZERO);
        assert_eq!(a.add(10, 5, b"56789"), Added::Partial);
        assert_eq!(a.add(10, 5, b"56789"), Added::Duplicate);
        assert_eq!(a.add(10, 3, b"34"), Added::Partial);
        assert_eq!(a.add(10, 4, b"45"), Added::Duplicate, "overlaps 3..5");
        assert_eq!(a.add(11, 0, b"012"), Added::Mismatch);
        assert_eq!(a.add(10, 0, b"012"), Added::Complete);
        assert_eq!(a.into_bytes(), b"0123456789");
    }
}
