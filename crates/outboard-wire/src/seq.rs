//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A sequence number. Comparison is wrapping: `a < b` iff `(b - a) as i32 > 0`.
/// Valid only for numbers less than 2^31 apart, which the window rules ensure.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self > other { self } else { other }
    }
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self < other { self } else { other }
    }
    /// Signed distance `self - other` as i32 (wrapping).
    pub fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// True if `start <= self < end` in sequence space.
    pub fn in_range(self, start: SeqNumber, end: SeqNumber) -> bool {
        self.0.wrapping_sub(start.0) < end.0.wrapping_sub(start.0)
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Wrapping order. Not a total order over all of u32, but consistent for
/// numbers within 2^31 of each other, which is all TCP ever compares.
impl Ord for SeqNumber {
    fn cmp(&self, other: &SeqNumber) -> Ordering {
        self.diff(*other).cmp(&0)
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl Sub<usize> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}

impl Sub<SeqNumber> for SeqNumber {
    type Output = usize;
    /// Distance from `rhs` up to `self`. Panics in debug builds if `rhs > self`:
    /// callers compare first (protocol code must never subtract blindly).
    fn sub(self, rhs: SeqNumber) -> usize {
        let d = self.diff(rhs);
        debug_assert!(d >= 0, "sequence subtraction underflow: {} - {}", self.0, rhs.0);
        d.max(0) as usize
    }
}

impl fmt::Debug for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_wraps() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert!(a < b);
        assert_eq!(b - a, 20);
        assert!(SeqNumber(5).in_range(a, b));
        assert!(!b.in_range(a, b));
        assert_eq!(a.max(b), b);
    }
}
