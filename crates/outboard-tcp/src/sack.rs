//! The sender's SACK scoreboard (RFC 2018, RFC 6675).
//!
//! Range-based, not per-byte or per-segment: the board holds at most
//! [`Scoreboard::MAX_RANGES`] sorted, disjoint, non-adjacent `[start, end)`
//! ranges above SND.UNA. Every query is a walk over those few ranges.
//!
//! Segment boundaries are not known here, so RFC 6675's "DupThresh
//! discontiguous SACKed sequences" is counted as SACKed *ranges*; with
//! full-sized segments the byte rule (more than (DupThresh - 1) * SMSS bytes)
//! gives the same answer as a per-segment scoreboard.
use outboard_wire::SeqNumber;

/// RFC 6675 §2: DupThresh, the starting value of [`Scoreboard::dup_thresh`].
pub const DUP_THRESH: usize = 3;

/// SACKed ranges above SND.UNA, sorted and merged, with a bounded count.
/// When an ACK would push the count past [`Scoreboard::MAX_RANGES`], the
/// highest ranges are dropped: the low holes are the ones loss recovery
/// repairs first, and a receiver repeats its SACK blocks, so forgotten high
/// ranges come back (at worst some of their data is resent needlessly).
#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Scoreboard {
    ranges: Vec<(SeqNumber, SeqNumber)>,
    /// DupThresh for IsLost (RFC 6675 §4): 3, or more once the connection
    /// has seen reordering (RFC 4653 §3 / Linux `tp->reordering`).
    dup_thresh: usize,
    /// RFC 8985 RACK: every unSACKed octet below this is lost, whatever
    /// DupThresh says (set by the connection's RACK loss detection).
    rack_lost: Option<SeqNumber>,
}

impl Default for Scoreboard {
    fn default() -> Self {
        Scoreboard::new()
    }
}

impl Scoreboard {
    /// Cap on held ranges: far more than the 3-4 blocks an ACK can carry.
    pub const MAX_RANGES: usize = 32;

    pub fn new() -> Self {
        Scoreboard { ranges: Vec::with_capacity(Self::MAX_RANGES + 1), dup_thresh: DUP_THRESH, rack_lost: None }
    }
    /// RFC 8985: RACK's verdict, one past the highest segment it marked lost.
    pub fn set_rack_lost(&mut self, to: Option<SeqNumber>) {
        self.rack_lost = to;
    }
    /// Sets DupThresh (in segments, at least 3) for IsLost and the lost boundary.
    pub fn set_dup_thresh(&mut self, n: usize) {
        self.dup_thresh = n.max(DUP_THRESH);
    }
    pub fn dup_thresh(&self) -> usize {
        self.dup_thresh
    }
    /// The first unSACKed octet in `[from, to)`, if any.
    pub fn first_unsacked_in(&self, from: SeqNumber, to: SeqNumber) -> Option<SeqNumber> {
        let (hole, _) = self.hole_at_or_above(from);
        (hole < to).then_some(hole)
    }
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.rack_lost = None;
    }
    /// Applies a cumulative ACK (`snd_una`) and SACK blocks. Blocks not inside
    /// (snd_una, snd_nxt] are ignored (RFC 2018 §4, D-SACK below snd_una).
    /// Returns the number of bytes newly SACKed.
    pub fn on_ack(&mut self, snd_una: SeqNumber, snd_nxt: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) -> usize {
        // Only the cumulative ACK releases data (RFC 2018 §8: the receiver may
        // renege on SACKed data), so ranges below it are simply forgotten.
        self.ranges.retain(|&(_, e)| e > snd_una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(snd_una);
        }
        let before = self.sacked_bytes();
        let window = snd_nxt.diff(snd_una).max(0) as u32;
        for &(left, right) in blocks {
            // Offsets from snd_una, wrapping: a block below snd_una (D-SACK,
            // RFC 2883) or beyond snd_nxt (bogus) falls outside [0, window].
            let l = left.0.wrapping_sub(snd_una.0);
            let r = right.0.wrapping_sub(snd_una.0);
            if l < r && r <= window {
                self.insert(left, right);
            }
        }
        // Drop the highest information first (see the type's documentation).
        self.ranges.truncate(Self::MAX_RANGES);
        self.sacked_bytes().saturating_sub(before)
    }
    /// Heap bytes held by the range table.
    pub fn allocated_bytes(&self) -> usize {
        self.ranges.capacity() * core::mem::size_of::<(SeqNumber, SeqNumber)>()
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// Total SACKed bytes above snd_una.
    pub fn sacked_bytes(&self) -> usize {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }
    pub fn is_sacked(&self, seq: SeqNumber) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= seq)
    }
    /// Highest SACKed sequence number + 1, if any.
    pub fn high_sacked(&self) -> Option<SeqNumber> {
        self.ranges.last().map(|&(_, e)| e)
    }
    /// RFC 6675 §4 IsLost(seq): DupThresh discontiguous SACKed segments,
    /// or more than (DupThresh - 1) * mss SACKed bytes, above `seq`.
    pub fn is_lost(&self, seq: SeqNumber, mss: usize) -> bool {
        let mut count = 0;
        let mut bytes = 0usize;
        for &(s, e) in self.ranges.iter().rev() {
            if e <= seq {
                break;
            }
            // Only the part strictly above `seq` counts.
            let from = if s > seq { s } else { seq + 1 };
            if from < e {
                count += 1;
                bytes += e - from;
            }
        }
        count >= self.dup_thresh || bytes > (self.dup_thresh - 1) * mss || self.rack_lost.is_some_and(|b| seq < b)
    }
    /// RFC 6675 §4 SetPipe: bytes estimated in flight.
    ///
    /// Per unSACKed octet in [snd_una, snd_nxt): one if it is not lost, and
    /// one more if it was retransmitted (below `high_rxt`). IsLost is
    /// monotonic (a lower octet has at least as much SACKed data above it),
    /// so the lost octets are exactly the unSACKed ones below
    /// [`Scoreboard::lost_boundary`], and the sum is a few range walks.
    pub fn pipe(&self, snd_una: SeqNumber, snd_nxt: SeqNumber, high_rxt: SeqNumber, mss: usize) -> usize {
        if snd_nxt <= snd_una {
            return 0;
        }
        let clamp = |x: SeqNumber| x.max(snd_una).min(snd_nxt);
        let unsacked_below = |x: SeqNumber| self.unsacked_between(snd_una, clamp(x));
        let outstanding = unsacked_below(snd_nxt);
        let lost = unsacked_below(self.lost_boundary(mss).unwrap_or(snd_una));
        let retransmitted = unsacked_below(high_rxt);
        outstanding - lost + retransmitted
    }
    /// RFC 6675 §4 NextSeg rule (1): the first unSACKed range at or above
    /// `max(high_rxt, snd_una)` that IsLost, as (start, length <= mss).
    pub fn next_lost(&self, snd_una: SeqNumber, high_rxt: SeqNumber, mss: usize) -> Option<(SeqNumber, usize)> {
        let boundary = self.lost_boundary(mss)?;
        let (start, hole_end) = self.hole_at_or_above(high_rxt.max(snd_una));
        // Every lost hole ends at a SACKed range, so `hole_end` is finite here.
        let end = hole_end?;
        (start < boundary).then(|| (start, (end - start).min(mss)))
    }
    /// RFC 6675 §4 NextSeg rule (3): the first unSACKed range at or above
    /// `max(high_rxt, snd_una)` below `snd_nxt` that is not lost, when some SACKed data lies above it.
    pub fn next_rescue(&self, snd_una: SeqNumber, snd_nxt: SeqNumber, high_rxt: SeqNumber, mss: usize) -> Option<(SeqNumber, usize)> {
        let mut from = high_rxt.max(snd_una);
        if let Some(b) = self.lost_boundary(mss) {
            from = from.max(b);
        }
        let (start, hole_end) = self.hole_at_or_above(from);
        // No SACKed data above the hole: rule (1.b) fails.
        let end = hole_end?.min(snd_nxt);
        (start < end).then(|| (start, (end - start).min(mss)))
    }
    /// The SACKed ranges, lowest first.
    pub fn ranges(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        self.ranges.iter().copied()
    }
    /// The start of the lowest SACKed range such that every unSACKed octet
    /// below it IsLost (RFC 6675 §4) and none above it does, or RACK's
    /// boundary when that is higher; `None` when nothing is lost.
    pub fn lost_boundary(&self, mss: usize) -> Option<SeqNumber> {
        let mut bytes = 0usize;
        let mut boundary = None;
        // An unSACKed octet just below range i has ranges i.. above it.
        for (count, &(s, e)) in self.ranges.iter().rev().enumerate() {
            bytes += e - s;
            if count + 1 >= self.dup_thresh || bytes > (self.dup_thresh - 1) * mss {
                boundary = Some(s);
                break;
            }
        }
        // RACK's lost octets (not necessarily ending at a SACKed range: the
        // callers only count unSACKed octets below the boundary).
        if let Some(b) = self.rack_lost {
            boundary = Some(boundary.map_or(b, |d: SeqNumber| d.max(b)));
        }
        boundary
    }

    /// Merges `[left, right)` into the sorted ranges.
    fn insert(&mut self, left: SeqNumber, right: SeqNumber) {
        // Ranges i..j overlap or touch [left, right).
        let i = self.ranges.partition_point(|&(_, e)| e < left);
        let j = self.ranges.partition_point(|&(s, _)| s <= right);
        if i == j {
            self.ranges.insert(i, (left, right));
        } else {
            let merged = (left.min(self.ranges[i].0), right.max(self.ranges[j - 1].1));
            self.ranges[i] = merged;
            self.ranges.drain(i + 1..j);
        }
    }
    /// UnSACKed octets in [from, to), for `from <= to`.
    fn unsacked_between(&self, from: SeqNumber, to: SeqNumber) -> usize {
        if to <= from {
            return 0;
        }
        let sacked: usize = self
            .ranges
            .iter()
            .map(|&(s, e)| {
                let (s, e) = (s.max(from), e.min(to));
                if s < e { e - s } else { 0 }
            })
            .sum();
        (to - from) - sacked
    }
    /// The first unSACKed octet at or above `seq`, and the start of the next
    /// SACKed range above it (`None` if no SACKed data lies above).
    fn hole_at_or_above(&self, seq: SeqNumber) -> (SeqNumber, Option<SeqNumber>) {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        match self.ranges.get(i) {
            // `seq` is inside range i: the hole starts at its end.
            Some(&(s, e)) if s <= seq => (e, self.ranges.get(i + 1).map(|r| r.0)),
            Some(&(s, _)) => (seq, Some(s)),
            None => (seq, None),
        }
    }
}

#[cfg(test)]
mod tests;
