//! The sender's SACK scoreboard (RFC 2018, RFC 6675).
//! STUB: signatures are the contract; bodies are being written.
use outboard_wire::SeqNumber;

/// SACKed ranges above SND.UNA, sorted and merged, with a bounded count
/// (the oldest information is dropped first when the cap is hit).
#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    _todo: (),
}

impl Scoreboard {
    pub fn new() -> Self {
        todo!()
    }
    pub fn clear(&mut self) {
        todo!()
    }
    /// Applies a cumulative ACK (`snd_una`) and SACK blocks. Blocks not inside
    /// (snd_una, snd_nxt] are ignored (RFC 2018 §4, D-SACK below snd_una).
    /// Returns the number of bytes newly SACKed.
    pub fn on_ack(&mut self, snd_una: SeqNumber, snd_nxt: SeqNumber, blocks: &[(SeqNumber, SeqNumber)]) -> usize {
        let _ = (snd_una, snd_nxt, blocks);
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    /// Total SACKed bytes above snd_una.
    pub fn sacked_bytes(&self) -> usize {
        todo!()
    }
    pub fn is_sacked(&self, seq: SeqNumber) -> bool {
        let _ = seq;
        todo!()
    }
    /// Highest SACKed sequence number + 1, if any.
    pub fn high_sacked(&self) -> Option<SeqNumber> {
        todo!()
    }
    /// RFC 6675 §4 IsLost(seq): DupThresh (3) discontiguous SACKed segments,
    /// or more than (DupThresh - 1) * mss SACKed bytes, above `seq`.
    pub fn is_lost(&self, seq: SeqNumber, mss: usize) -> bool {
        let _ = (seq, mss);
        todo!()
    }
    /// RFC 6675 §4 SetPipe: bytes estimated in flight.
    pub fn pipe(&self, snd_una: SeqNumber, snd_nxt: SeqNumber, high_rxt: SeqNumber, mss: usize) -> usize {
        let _ = (snd_una, snd_nxt, high_rxt, mss);
        todo!()
    }
    /// RFC 6675 §4 NextSeg rule (1): the first unSACKed range at or above
    /// `max(high_rxt, snd_una)` that IsLost, as (start, length <= mss).
    pub fn next_lost(&self, snd_una: SeqNumber, high_rxt: SeqNumber, mss: usize) -> Option<(SeqNumber, usize)> {
        let _ = (snd_una, high_rxt, mss);
        todo!()
    }
    /// RFC 6675 §4 NextSeg rule (3): the first unSACKed range at or above
    /// `max(high_rxt, snd_una)` below `snd_nxt` that is not lost, when some SACKed data lies above it.
    pub fn next_rescue(&self, snd_una: SeqNumber, snd_nxt: SeqNumber, high_rxt: SeqNumber, mss: usize) -> Option<(SeqNumber, usize)> {
        let _ = (snd_una, snd_nxt, high_rxt, mss);
        todo!()
    }
    /// The SACKed ranges, lowest first.
    pub fn ranges(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        core::iter::empty()
    }
}
