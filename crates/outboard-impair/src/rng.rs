//! The simulator's only source of randomness: a small seeded PRNG.
//!
//! xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64, written
//! here so the stream never changes under us with a dependency update: a seed
//! printed by a failing run must replay the same run years later.

/// splitmix64: expands one `u64` seed into well-mixed words (used for seeding).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256**: fast, 256 bits of state, passes BigCrush. Not cryptographic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Seeds all four state words from splitmix64, as the authors recommend
    /// (never all zero: splitmix64 outputs are a bijection of distinct states).
    pub fn new(seed: u64) -> Rng {
        let mut sm = SplitMix64::new(seed);
        Rng {
            s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()],
        }
    }

    /// An independent generator for a named purpose, so adding draws in one
    /// place (say a new fault knob) does not shift the stream of another.
    pub fn derive(seed: u64, stream: u64) -> Rng {
        let mut sm = SplitMix64::new(seed ^ stream.wrapping_mul(0xd605_bbb5_8c8a_bbb7));
        Rng::new(sm.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1), 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (clamped to [0, 1]). Draws nothing when `p <= 0`,
    /// so a disabled knob leaves the stream of the others untouched.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.next_f64() < p
    }

    /// Uniform in [0, n); 0 when n is 0. Lemire's multiply-shift with rejection (unbiased).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in [lo, hi]; `lo` when the range is empty.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }

    pub fn fill_bytes(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = self.next_u64().to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
    }
}

/// An endless pseudo-random byte stream that can be read in pieces of any size
/// and gives the same bytes however it is cut: the sender generates the data
/// with one, the receiver regenerates the expected bytes with a twin and
/// compares slices (no per-byte work beyond memcmp).
#[derive(Debug, Clone)]
pub struct ByteStream {
    rng: Rng,
    word: [u8; 8],
    /// Bytes of `word` already handed out (8 = none left).
    used: usize,
    position: u64,
}

impl ByteStream {
    pub fn new(seed: u64) -> ByteStream {
        ByteStream {
            rng: Rng::new(seed),
            word: [0; 8],
            used: 8,
            position: 0,
        }
    }

    /// Offset of the next byte in the stream.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Writes the next `buf.len()` bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.position += buf.len() as u64;
        // Finish the partly used word first, then whole words, then start a new one.
        let head = (8 - self.used).min(buf.len());
        buf[..head].copy_from_slice(&self.word[self.used..self.used + head]);
        self.used += head;
        let rest = &mut buf[head..];
        let mut chunks = rest.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.rng.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            self.word = self.rng.next_u64().to_le_bytes();
            tail.copy_from_slice(&self.word[..tail.len()]);
            self.used = tail.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_reference_vector() {
        // First outputs for seed 1234567 from the reference C implementation.
        let mut sm = SplitMix64::new(1234567);
        assert_eq!(sm.next_u64(), 6457827717110365317);
        assert_eq!(sm.next_u64(), 3203168211198807973);
    }

    #[test]
    fn xoshiro256starstar_matches_reference_vector() {
        // State [1, 2, 3, 4] gives 11520, 0, 1509978240, 1215971899390074240 in the reference code.
        let mut r = Rng { s: [1, 2, 3, 4] };
        assert_eq!(r.next_u64(), 11520);
        assert_eq!(r.next_u64(), 0);
        assert_eq!(r.next_u64(), 1509978240);
        assert_eq!(r.next_u64(), 1215971899390074240);
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(8);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(Rng::derive(7, 1), Rng::derive(7, 2));
    }

    #[test]
    fn below_stays_in_range_and_hits_every_value() {
        let mut r = Rng::new(1);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = r.below(7);
            assert!(v < 7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range_inclusive(5, 5), 5);
        assert!(r.range_inclusive(3, 9) >= 3);
    }

    #[test]
    fn chance_frequency_is_close_to_p() {
        let mut r = Rng::new(99);
        let hits = (0..100_000).filter(|_| r.chance(0.01)).count();
        assert!(
            (800..1200).contains(&hits),
            "1% of 100000 draws gave {hits}"
        );
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }

    #[test]
    fn byte_stream_is_the_same_however_it_is_cut() {
        let mut whole = vec![0u8; 1000];
        ByteStream::new(5).fill(&mut whole);
        let mut pieces = vec![0u8; 1000];
        let mut s = ByteStream::new(5);
        let mut at = 0;
        for len in [1usize, 7, 8, 3, 0, 13, 64, 5, 899] {
            let end = (at + len).min(1000);
            s.fill(&mut pieces[at..end]);
            at = end;
        }
        assert_eq!(at, 1000);
        assert_eq!(s.position(), 1000);
        assert_eq!(whole, pieces);
    }
}
