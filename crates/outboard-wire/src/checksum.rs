//! The Internet checksum: RFC 1071 sums, RFC 1624 incremental update, and the
//! data path's fused copy-and-checksum.
//!
//! # Data path API
//!
//! The engine moves every payload byte exactly once, and sums it while it moves
//! it (DESIGN.md §7). The pieces:
//!
//! * [`copy_and_checksum`] copies `src` into `dst` and returns the
//!   [`PartialSum`] of the bytes: a folded but not complemented ones-complement
//!   sum that remembers whether it covered an odd number of bytes.
//! * [`Accumulator`] adds slices of any length (odd pieces included), partial
//!   sums and the IPv4 pseudo-header in any order of pieces, and produces the
//!   final complemented checksum.
//! * The UDP and TCP `emit` functions take a [`TxChecksum`]: `Payload(sum)`
//!   tells them the payload was summed during the copy, so they only sum the
//!   header and the pseudo-header. On receive, the packet views offer
//!   `verify_checksum_with(src, dst, payload_sum)` for the same trick.
//!
//! Transmit: write the headers, `let s = copy_and_checksum(payload_area, app_bytes)`,
//! then `TcpRepr::emit(.., TxChecksum::Payload(s))`. Receive: parse with
//! [`RxChecksum::Skip`], `let s = copy_and_checksum(app_buf, packet.payload())`,
//! then `packet.verify_checksum_with(src, dst, s)`.
//!
//! # How the fast sum works
//!
//! Ones-complement addition is commutative and byte-order independent
//! (RFC 1071 §2(B)): summing native-endian words and swapping the bytes of the
//! folded result gives the big-endian sum. The kernels add 16-bit words into
//! many independent 32-bit lanes (no carries lost, no data-dependent
//! branches) and fold once at the end. The CPU's features are detected on the
//! first call and cached (one byte read per call after that):
//!
//! * x86-64 with AVX-512 BW/VL/VNNI (Zen 4, Ice Lake and later), copy only:
//!   `vpdpwssd` over 32-byte vectors, eight accumulators, a masked tail;
//! * x86-64 with AVX2: `vpmaddwd` over 32-byte vectors with four accumulators,
//!   the tail as one more (overlapping, masked) vector; copy and sum share
//!   each load;
//! * elsewhere, plain array arithmetic over 64-byte chunks that LLVM
//!   vectorises for the default target, and fixed-size pieces for the tail.
//!
//! No kernel calls `memcpy` or loops byte by byte: at frame sizes such calls,
//! not the arithmetic, were what made the fused copy slow (0.4-0.55x of
//! `memcpy` at 1500 B before). Measured with `outboard bench checksum` on a
//! 2-vCPU AMD EPYC (Zen 4), buffers in cache: `copy_and_checksum` runs at
//! about 0.9x of `copy_from_slice` at 1500 B and at or above it from 9000 B
//! up (docs/PERFORMANCE.md).

use std::net::Ipv4Addr;

/// A ones-complement sum of some bytes, folded to 16 bits but not complemented.
///
/// `odd` records that the bytes had odd length, so that a later piece starts at
/// an odd offset and must be byte-swapped when added (RFC 1071 §2(B)).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct PartialSum {
    sum: u16,
    odd: bool,
}

impl PartialSum {
    /// The sum of zero bytes.
    pub const ZERO: PartialSum = PartialSum { sum: 0, odd: false };

    /// A partial sum from its parts: `sum` as big-endian 16-bit words, `odd`
    /// whether the summed bytes had odd length.
    pub const fn new(sum: u16, odd: bool) -> PartialSum {
        PartialSum { sum, odd }
    }
    /// The folded, uncomplemented sum, as if the bytes started at an even offset.
    pub const fn sum(self) -> u16 {
        self.sum
    }
    /// Whether the summed bytes had odd length.
    pub const fn is_odd(self) -> bool {
        self.odd
    }
}

/// Sums pieces of a checksummed region in order; pieces may have any length.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct Accumulator {
    // Sum of folded 16-bit pieces; at most one u16 per call, so no overflow in practice,
    // and `add_folded` folds when it grows large anyway.
    sum: u64,
    // True when an odd number of bytes has been added: the next byte is a low byte.
    odd: bool,
}

impl Accumulator {
    pub const fn new() -> Accumulator {
        Accumulator { sum: 0, odd: false }
    }

    /// Adds the next `data` bytes of the region.
    #[inline]
    pub fn add(&mut self, data: &[u8]) -> &mut Self {
        let s = PartialSum { sum: sum_be(data), odd: data.len() % 2 == 1 };
        self.add_partial(s)
    }

    /// Adds a piece summed elsewhere (e.g. by [`copy_and_checksum`]).
    #[inline]
    pub fn add_partial(&mut self, piece: PartialSum) -> &mut Self {
        // A piece starting at an odd offset has its bytes in swapped lanes (RFC 1071 §2(B)).
        let s = if self.odd { piece.sum.swap_bytes() } else { piece.sum };
        self.add_folded(s);
        self.odd ^= piece.odd;
        self
    }

    /// Adds a big-endian 16-bit field as the next two bytes.
    pub fn add_u16(&mut self, v: u16) -> &mut Self {
        self.add(&v.to_be_bytes())
    }

    /// Adds a big-endian 32-bit field as the next four bytes.
    pub fn add_u32(&mut self, v: u32) -> &mut Self {
        self.add(&v.to_be_bytes())
    }

    /// Adds the IPv4 pseudo-header for TCP and UDP (RFC 9293 §3.1, RFC 768):
    /// source, destination, zero, protocol, and the TCP/UDP length.
    #[inline]
    pub fn add_ipv4_pseudo_header(&mut self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> &mut Self {
        // The six big-endian words of the 12 bytes, added as numbers (this
        // runs for every segment; summing a built array cost three times as much).
        let (s, d) = (src.to_bits(), dst.to_bits());
        let words = u64::from(s >> 16) + u64::from(s & 0xffff) + u64::from(d >> 16) + u64::from(d & 0xffff);
        let sum = fold(words + u64::from(protocol) + u64::from(len));
        self.add_partial(PartialSum { sum, odd: false })
    }

    /// Everything added so far as one piece.
    pub fn partial(&self) -> PartialSum {
        PartialSum { sum: fold(self.sum), odd: self.odd }
    }

    /// The checksum field value: the complement of the sum (RFC 1071 §1).
    /// A region that already holds a correct checksum finishes to 0.
    #[inline]
    pub fn finish(&self) -> u16 {
        !fold(self.sum)
    }

    #[inline]
    fn add_folded(&mut self, s: u16) {
        self.sum += u64::from(s);
        if self.sum >= 1 << 48 {
            self.sum = u64::from(fold(self.sum));
        }
    }
}

/// The Internet checksum of `data` (RFC 1071): the value to store in a
/// checksum field that was zero while summing. Summing a region that contains
/// a correct checksum gives 0.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum_be(data)
}

/// The folded, uncomplemented sum of `data` as big-endian 16-bit words (a
/// trailing odd byte is padded with zero).
#[inline]
pub fn sum(data: &[u8]) -> PartialSum {
    PartialSum { sum: sum_be(data), odd: data.len() % 2 == 1 }
}

/// Copies `src` into `dst` and returns the sum of the copied bytes, reading
/// each byte once. This is the data path's one copy (DESIGN.md §7).
///
/// # Panics
///
/// If `dst.len() != src.len()`, like `<[u8]>::copy_from_slice`: the caller
/// sizes both buffers; lengths from the network are checked before this.
pub fn copy_and_checksum(dst: &mut [u8], src: &[u8]) -> PartialSum {
    assert_eq!(dst.len(), src.len(), "copy_and_checksum: length mismatch");
    let odd = src.len() % 2 == 1;
    if src.len() <= BLOCK {
        // The common case: one kernel call, no block loop.
        return PartialSum { sum: native_to_be(fold(copy_sum_native(dst, src))), odd };
    }
    PartialSum { sum: copy_sum_blocks(dst, src), odd }
}

/// [`copy_and_checksum`] beyond one [`BLOCK`], out of line so that the frame-sized
/// path stays a short function.
#[inline(never)]
fn copy_sum_blocks(dst: &mut [u8], src: &[u8]) -> u16 {
    let mut total = 0u64;
    for (d, s) in dst.chunks_mut(BLOCK).zip(src.chunks(BLOCK)) {
        total += u64::from(fold(copy_sum_native(d, s)));
    }
    native_to_be(fold(total))
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered
/// region changes from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
///
/// The result is congruent to a full recomputation; the two can differ only
/// in the representation of zero (0x0000 vs 0xFFFF), and only when the whole
/// region sums to zero, which no IPv4/TCP/UDP header does.
pub fn update(hc: u16, old: u16, new: u16) -> u16 {
    let s = u64::from(!hc) + u64::from(!old) + u64::from(new);
    !fold(s)
}

/// [`update`] for a 32-bit field (an IPv4 address, a sequence number): two
/// word updates.
pub fn update_u32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = update(hc, (old >> 16) as u16, (new >> 16) as u16);
    update(hc, old as u16, new as u16)
}

/// Bytes summed per kernel call before folding. The vector kernels keep their
/// partial sums in `i32` lanes: each 32-byte vector moves a lane by at most
/// 65536, and a call sees at most `BLOCK / 32 + 1` = 2049 vectors, so even
/// the sum of all lanes of all the accumulators stays below 2^31. Longer
/// slices are summed in 64 KiB blocks (even lengths, so every block but the
/// last starts at an even offset); one extra call per 64 KiB costs nothing
/// measurable.
const BLOCK: usize = 1 << 16;

/// Ones-complement fold of a 64-bit sum to 16 bits: add the halves with
/// end-around carry, 64 to 32 to 16 bits. When the carry comes round, the sum
/// without it is at most 2^n - 2, so adding it back cannot overflow again.
/// A nonzero multiple of 0xFFFF folds to 0xFFFF, as in RFC 1071's loop.
const fn fold(x: u64) -> u16 {
    let (s, c) = (x as u32).overflowing_add((x >> 32) as u32);
    let s = s + c as u32;
    let (r, c) = (s as u16).overflowing_add((s >> 16) as u16);
    r + c as u16
}

/// A folded sum of native-endian 16-bit words, as the sum of big-endian words.
const fn native_to_be(s: u16) -> u16 {
    if cfg!(target_endian = "little") {
        s.swap_bytes()
    } else {
        s
    }
}

#[inline]
fn sum_be(data: &[u8]) -> u16 {
    if data.len() <= BLOCK {
        return native_to_be(fold(sum_native(data)));
    }
    sum_blocks(data)
}

/// [`sum_be`] beyond one [`BLOCK`], out of line like [`copy_sum_blocks`].
#[inline(never)]
fn sum_blocks(data: &[u8]) -> u16 {
    let mut total = 0u64;
    for block in data.chunks(BLOCK) {
        total += u64::from(fold(sum_native(block)));
    }
    native_to_be(fold(total))
}

/// The best kernels the CPU can run, found on the first call and cached.
///
/// On x86-64 the dispatchers below read one byte per call and tail-call the
/// kernel: no function pointer, and no feature test per call (std's
/// `is_x86_feature_detected!` is cheap too, but three of them, each with its
/// own cold path, cost the frame-sized call a prologue saving five registers).
#[cfg(target_arch = "x86_64")]
mod level {
    use std::sync::atomic::{AtomicU8, Ordering};

    /// Not detected yet.
    pub const UNKNOWN: u8 = 0;
    /// Neither of the below: the portable kernels (SSE2, which every x86-64 has).
    pub const PORTABLE: u8 = 1;
    /// AVX2: the AVX2 kernels.
    pub const AVX2: u8 = 2;
    /// AVX2 and AVX-512 BW, VL and VNNI: the VNNI copy kernel, the AVX2 sum.
    pub const VNNI: u8 = 3;

    static LEVEL: AtomicU8 = AtomicU8::new(UNKNOWN);

    #[inline(always)]
    pub fn get() -> u8 {
        LEVEL.load(Ordering::Relaxed)
    }

    /// Detects and caches the level (racing callers store the same value).
    #[cold]
    #[inline(never)]
    pub fn detect() -> u8 {
        let l = if !std::is_x86_feature_detected!("avx2") {
            PORTABLE
        } else if std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
        {
            VNNI
        } else {
            AVX2
        };
        LEVEL.store(l, Ordering::Relaxed);
        l
    }
}

/// Sum of `data` (at most [`BLOCK`] bytes) as native-endian 16-bit words,
/// unfolded, the odd last byte zero-padded. Uses AVX2 where the CPU has it.
#[inline]
fn sum_native(data: &[u8]) -> u64 {
    if data.len() <= SMALL {
        return small_sum(data);
    }
    #[cfg(target_arch = "x86_64")]
    {
        match level::get() {
            level::AVX2 | level::VNNI => {
                #[allow(unsafe_code)]
                // SAFETY: the level is AVX2 or above only where the CPU
                // supports AVX2 (`level::detect`), the only requirement for
                // calling an `#[target_feature(enable = "avx2")]` function.
                return unsafe { avx2::sum(data) };
            }
            level::UNKNOWN => return sum_native_first(data),
            _ => {}
        }
    }
    portable_sum(data)
}

/// Up to this many bytes, [`sum_native`] adds 32-bit words in a plain loop:
/// headers, pseudo-headers and single fields. A vector kernel's setup, masked
/// tail and reduction cost more than the whole sum there (`outboard bench
/// cost`: 90 instructions fewer per TCP segment sent, 20 per segment received).
const SMALL: usize = 64;

/// [`sum_native`] for at most [`SMALL`] bytes: native-endian 32-bit words into
/// a 64-bit sum (2^16 ≡ 1 modulo 0xFFFF, so a 32-bit word adds what its two
/// 16-bit halves would), read eight bytes at a time (a 32-byte TCP header is
/// four loads, not eight); then a last 4-, 2- and 1-byte piece, each at an
/// even offset, so a 16-bit piece adds as a word and a lone byte as the
/// low byte of a zero-padded one.
///
/// The two commonest header sizes are summed without a loop: 20 bytes (an
/// IPv4 header without options, a TCP header without them) and 32 (a TCP
/// header with timestamps). The loop below, vectorised by the compiler,
/// spent its setup on them (about 50 instructions for a 32-byte header).
#[inline]
fn small_sum(data: &[u8]) -> u64 {
    if let Ok(h) = <&[u8; 20]>::try_from(data) {
        return fixed_sum(h);
    }
    if let Ok(h) = <&[u8; 32]>::try_from(data) {
        return fixed_sum(h);
    }
    any_small_sum(data)
}

/// [`small_sum`] of exactly `N` bytes (a multiple of 4), unrolled.
#[inline(always)]
fn fixed_sum<const N: usize>(h: &[u8; N]) -> u64 {
    let mut s = 0u64;
    let mut i = 0;
    while i + 8 <= N {
        let v = u64::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3], h[i + 4], h[i + 5], h[i + 6], h[i + 7]]);
        s += (v & 0xffff_ffff) + (v >> 32);
        i += 8;
    }
    if i + 4 <= N {
        s += u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    }
    s
}

/// [`small_sum`] of any length up to [`SMALL`].
#[inline]
fn any_small_sum(mut data: &[u8]) -> u64 {
    let mut s = 0u64;
    while let Some((w, rest)) = data.split_first_chunk::<8>() {
        let v = u64::from_ne_bytes(*w);
        s += (v & 0xffff_ffff) + (v >> 32);
        data = rest;
    }
    if let Some((w, rest)) = data.split_first_chunk::<4>() {
        s += u64::from(u32::from_ne_bytes(*w));
        data = rest;
    }
    if let Some((w, rest)) = data.split_first_chunk::<2>() {
        s += u64::from(u16::from_ne_bytes(*w));
        data = rest;
    }
    if let [a] = data {
        s += u64::from(u16::from_ne_bytes([*a, 0]));
    }
    s
}

/// [`sum_native`]'s first call: detect the CPU's features, then sum.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn sum_native_first(data: &[u8]) -> u64 {
    level::detect();
    sum_native(data)
}

/// [`sum_native`] while copying `src` into `dst` (same length, at most [`BLOCK`]).
#[inline]
fn copy_sum_native(dst: &mut [u8], src: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        match level::get() {
            level::VNNI => {
                #[allow(unsafe_code)]
                // SAFETY: the level is VNNI only where the CPU supports every
                // feature `vnni::copy_sum` enables (`level::detect`).
                return unsafe { vnni::copy_sum(dst, src) };
            }
            level::AVX2 => {
                #[allow(unsafe_code)]
                // SAFETY: as in `sum_native`: the CPU supports AVX2.
                return unsafe { avx2::copy_sum(dst, src) };
            }
            level::UNKNOWN => return copy_sum_native_first(dst, src),
            _ => {}
        }
    }
    portable_copy_sum(dst, src)
}

/// [`copy_sum_native`]'s first call: detect the CPU's features, then copy.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn copy_sum_native_first(dst: &mut [u8], src: &[u8]) -> u64 {
    level::detect();
    copy_sum_native(dst, src)
}

/// The portable kernel: adds each 16-bit word of a 64-byte chunk into its own
/// `u32` lane (32 independent lanes, no carries to track), which LLVM turns
/// into zero-extending vector loads and vector adds with whatever SIMD the
/// target has by default (SSE2 on x86-64, NEON on AArch64). Kept out of line
/// so that the dispatchers above stay small enough to inline.
#[inline(never)]
fn portable_sum(data: &[u8]) -> u64 {
    let mut lanes = [0u32; 32];
    let mut chunks = data.chunks_exact(64);
    for c in &mut chunks {
        add_chunk(&mut lanes, c);
    }
    lanes.iter().map(|&l| u64::from(l)).sum::<u64>() + sum_short(chunks.remainder())
}

#[inline(never)]
fn portable_copy_sum(dst: &mut [u8], src: &[u8]) -> u64 {
    let mut lanes = [0u32; 32];
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (dc, sc) in (&mut d).zip(&mut s) {
        dc.copy_from_slice(sc);
        add_chunk(&mut lanes, sc);
    }
    lanes.iter().map(|&l| u64::from(l)).sum::<u64>() + copy_sum_short(d.into_remainder(), s.remainder())
}

/// Adds one 64-byte chunk, 16-bit word `i` into lane `i`.
#[inline(always)]
fn add_chunk(lanes: &mut [u32; 32], c: &[u8]) {
    for (i, lane) in lanes.iter_mut().enumerate() {
        *lane += u32::from(u16::from_ne_bytes([c[2 * i], c[2 * i + 1]]));
    }
}

/// The native-endian sum of 8 bytes, split so that adding it cannot carry out.
#[inline(always)]
fn split8(b: [u8; 8]) -> u64 {
    let w = u64::from_ne_bytes(b);
    (w & 0xffff_ffff) + (w >> 32)
}

/// Sums fewer than 64 bytes (the tail the vector loops leave) as native-endian
/// words, in fixed-size pieces of 32, 16, 8, 4, 2 and 1 bytes taken in that
/// order, so each piece starts at an even offset: no loop, and no
/// variable-length copy into a padded buffer (a call to `memcpy`).
#[inline(always)]
fn sum_short(t: &[u8]) -> u64 {
    copy_sum_short_with(t, |_, _| {})
}

/// [`sum_short`] while copying `src` into `dst` piece by piece.
#[inline(always)]
fn copy_sum_short(dst: &mut [u8], src: &[u8]) -> u64 {
    debug_assert_eq!(dst.len(), src.len());
    copy_sum_short_with(src, |at, piece| dst[at..at + piece.len()].copy_from_slice(piece))
}

#[inline(always)]
fn copy_sum_short_with(t: &[u8], mut put: impl FnMut(usize, &[u8])) -> u64 {
    let n = t.len();
    debug_assert!(n < 64);
    let mut acc = 0u64;
    let mut at = 0;
    if n & 32 != 0 {
        let p: &[u8; 32] = t[..32].try_into().expect("32 bytes");
        for k in 0..4 {
            acc += split8(p[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        }
        put(0, p);
        at = 32;
    }
    if n & 16 != 0 {
        let p: &[u8; 16] = t[at..at + 16].try_into().expect("16 bytes");
        acc += split8(p[..8].try_into().expect("8 bytes")) + split8(p[8..].try_into().expect("8 bytes"));
        put(at, p);
        at += 16;
    }
    if n & 8 != 0 {
        let p: &[u8; 8] = t[at..at + 8].try_into().expect("8 bytes");
        acc += split8(*p);
        put(at, p);
        at += 8;
    }
    if n & 4 != 0 {
        let p: &[u8; 4] = t[at..at + 4].try_into().expect("4 bytes");
        acc += u64::from(u32::from_ne_bytes(*p));
        put(at, p);
        at += 4;
    }
    if n & 2 != 0 {
        let p: &[u8; 2] = t[at..at + 2].try_into().expect("2 bytes");
        acc += u64::from(u16::from_ne_bytes(*p));
        put(at, p);
        at += 2;
    }
    if n & 1 != 0 {
        // Zero padding keeps the odd last byte in its big-endian high position
        // once the native sum is swapped back.
        acc += u64::from(u16::from_ne_bytes([t[at], 0]));
        put(at, &t[at..at + 1]);
    }
    acc
}

/// Whether a vector copy kernel should go from the top down: when `dst`
/// lies 1 to 256 bytes after `src` modulo 4 KiB. Going up, each load would
/// then follow a recent store whose address has the same low 12 bits, and the
/// core holds such loads back as if they depended on the store (4K
/// aliasing): at 1500 bytes the fused copy took about 1.5x as long on the
/// 2-vCPU EPYC. Going down, the recent stores are all above the loads'
/// aliases. The sum does not depend on the order of the vectors.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn backward(src: *const u8, dst: *mut u8) -> bool {
    ((dst as usize).wrapping_sub(src as usize) % 4096).wrapping_sub(1) < 256
}

/// The AVX2 kernels: `vpmaddwd` adds adjacent 16-bit words into 32-bit lanes.
///
/// `vpmaddwd` multiplies *signed* words, so each word is first biased by
/// XOR 0x8000 (x - 32768 as i16) and multiplied by 1; the bias is added back
/// once at the end (32768 per word summed). Three vector operations per 32
/// bytes, four accumulators to hide latency, unaligned loads and stores.
///
/// The tail after the last whole vector is one more vector, not a byte loop:
/// the copy moves the last 32 bytes of the slice (rewriting bytes already
/// copied is harmless), and the sum loads the 32 bytes that end at the last
/// even offset and masks off the ones already summed (so the words keep their
/// pairing), then adds a final odd byte on its own. Slices shorter than one
/// vector go to [`copy_sum_short_with`]. A call of n bytes thus costs
/// n / 32 vector steps plus a constant: no per-call setup beyond two
/// broadcast constants, and one horizontal reduction at the end.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use core::arch::x86_64::*;

    use super::{copy_sum_short, sum_short};

    /// 32 zero bytes, then 32 0xFF bytes: the 32 bytes at offset `k` (0..=32)
    /// mask a vector down to its last `k` bytes.
    static KEEP_LAST: [u8; 64] = {
        let mut t = [0u8; 64];
        let mut i = 32;
        while i < 64 {
            t[i] = 0xff;
            i += 1;
        }
        t
    };

    /// Eight `i32` lanes of (w0 - 32768) + (w1 - 32768) over adjacent word pairs.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pair_sums(v: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_xor_si256(v, _mm256_set1_epi16(i16::MIN)), _mm256_set1_epi16(1))
    }

    /// The mask that keeps the last `k` bytes of a vector, `k <= 32`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn keep_last(k: usize) -> __m256i {
        let m = &KEEP_LAST[k..k + 32];
        // SAFETY: `m` is 32 readable bytes (the slice above is bounds-checked);
        // `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_si256(m.as_ptr().cast()) }
    }

    /// Sums the accumulators and removes the bias of `vectors` vectors.
    ///
    /// With at most `BLOCK / 32 + 1` vectors per call, each `i32` lane of each
    /// accumulator is below 2^28 in magnitude and the sum of all of them below
    /// 2^31, so the whole reduction stays in 32-bit lanes; the true sum of
    /// non-negative words is non-negative, so the final cast is exact.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn reduce(a: [__m256i; 4], vectors: usize) -> u64 {
        let s = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
        let q = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let q = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
        let q = _mm_add_epi32(q, _mm_shuffle_epi32::<0b01>(q));
        let biased = i64::from(_mm_cvtsi128_si32(q));
        (biased + vectors as i64 * 16 * 32768) as u64
    }

    /// The sum of `data` (at most `BLOCK` bytes) as native-endian words.
    #[target_feature(enable = "avx2")]
    pub(super) fn sum(data: &[u8]) -> u64 {
        let n = data.len();
        if n < 32 {
            return sum_short(data);
        }
        let p = data.as_ptr();
        // SAFETY: every load reads the 32 bytes at `p + i` with `i + 32 <= n`
        // (the loop conditions, and `(n & !1) - 32` with `n >= 32`), all
        // inside `data`; `loadu` has no alignment requirement.
        let load = |i: usize| unsafe { _mm256_loadu_si256(p.add(i).cast()) };
        let mut a = [_mm256_setzero_si256(); 4];
        let mut i = 0;
        while i + 128 <= n {
            a[0] = _mm256_add_epi32(a[0], pair_sums(load(i)));
            a[1] = _mm256_add_epi32(a[1], pair_sums(load(i + 32)));
            a[2] = _mm256_add_epi32(a[2], pair_sums(load(i + 64)));
            a[3] = _mm256_add_epi32(a[3], pair_sums(load(i + 96)));
            i += 128;
        }
        // Up to three whole vectors left: straight-line code, not a loop.
        for acc in &mut a[..3] {
            if i + 32 <= n {
                *acc = _mm256_add_epi32(*acc, pair_sums(load(i)));
                i += 32;
            }
        }
        let mut vectors = i / 32;
        let even = n & !1;
        if even > i {
            let v = _mm256_and_si256(load(even - 32), keep_last(even - i));
            a[1] = _mm256_add_epi32(a[1], pair_sums(v));
            vectors += 1;
        }
        // A trailing odd byte is the first (low, on x86) byte of a zero-padded word.
        reduce(a, vectors) + u64::from(data[n - 1]) * (n as u64 & 1)
    }

    /// [`sum`] while copying `src` into `dst`.
    #[target_feature(enable = "avx2")]
    pub(super) fn copy_sum(dst: &mut [u8], src: &[u8]) -> u64 {
        let n = src.len();
        // The caller checked this; the stores below rely on it.
        assert_eq!(dst.len(), n, "copy_sum: length mismatch");
        if n < 32 {
            return copy_sum_short(dst, src);
        }
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        // SAFETY: every load reads the 32 bytes at `s + i` with `i + 32 <= n`
        // (the loop conditions; `n - 32` and `(n & !1) - 32` with `n >= 32`),
        // inside `src`; `loadu` has no alignment requirement.
        let load = |i: usize| unsafe { _mm256_loadu_si256(s.add(i).cast()) };
        // SAFETY: as for `load`, within `dst`, which has the same length and,
        // being a `&mut`, does not overlap `src`.
        let store = |i: usize, v: __m256i| unsafe { _mm256_storeu_si256(d.add(i).cast(), v) };
        let mut a = [_mm256_setzero_si256(); 4];
        // Four vectors, one per accumulator.
        let step4 = |a: &mut [__m256i; 4], i: usize| {
            let v = [load(i), load(i + 32), load(i + 64), load(i + 96)];
            for (k, v) in v.into_iter().enumerate() {
                store(i + 32 * k, v);
                a[k] = _mm256_add_epi32(a[k], pair_sums(v));
            }
        };
        // One vector, into `acc`.
        let step1 = |acc: &mut __m256i, i: usize| {
            let v = load(i);
            store(i, v);
            *acc = _mm256_add_epi32(*acc, pair_sums(v));
        };
        // The bytes after the last whole vector, if any: the copy moves the
        // last 32 bytes, the sum takes the words not yet summed.
        let full = n & !31;
        let tail = |a: &mut [__m256i; 4]| {
            if n > full {
                store(n - 32, load(n - 32));
                let even = n & !1;
                if even > full {
                    let v = _mm256_and_si256(load(even - 32), keep_last(even - full));
                    a[1] = _mm256_add_epi32(a[1], pair_sums(v));
                    return 1;
                }
            }
            0
        };
        let vectors = if super::backward(s, d) {
            let t = tail(&mut a);
            // The same vectors from the top down (see `backward`).
            let mut i = full;
            for acc in &mut a[..3] {
                if i & 127 != 0 {
                    i -= 32;
                    step1(acc, i);
                }
            }
            if i & 255 != 0 {
                i -= 128;
                step4(&mut a, i);
            }
            while i > 0 {
                i -= 256;
                step4(&mut a, i + 128);
                step4(&mut a, i);
            }
            full / 32 + t
        } else {
            // 256 bytes per iteration: the loop's own counting and branch are
            // spread over eight vectors (at 1500 bytes the front end, not the
            // arithmetic, is what limits this loop).
            let mut i = 0;
            let end = n & !255;
            while i < end {
                step4(&mut a, i);
                step4(&mut a, i + 128);
                i += 256;
            }
            if n - i >= 128 {
                step4(&mut a, i);
                i += 128;
            }
            // Up to three whole vectors left: straight-line code, not a loop
            // (LLVM turns a loop that loads and stores each vector into a
            // `memcpy` call beside the sum, which at frame sizes costs more
            // than the copy).
            for acc in &mut a[..3] {
                if i + 32 <= n {
                    step1(acc, i);
                    i += 32;
                }
            }
            full / 32 + tail(&mut a)
        };
        reduce(a, vectors) + u64::from(src[n - 1]) * (n as u64 & 1)
    }
}

/// The copy kernel for CPUs with AVX-512 VNNI, on 256-bit vectors.
///
/// The same sum as the AVX2 kernel with two instructions fewer per 32 bytes
/// where it counts: `vpdpwssd` multiplies the biased words by 1 and adds the
/// pairs into the accumulator in one instruction (`vpmaddwd` + `vpaddd`), and
/// the tail is one masked load and one masked store (AVX-512 BW), which also
/// serves slices shorter than a vector. At 1500 bytes the AVX2 loop is limited
/// by how many instructions the core can issue, not by loads, stores or
/// arithmetic; this one runs about as fast as `memcpy` there. It stays on
/// 256-bit vectors: 512-bit ones were no faster (the stores limit) and lower
/// the clock on some Intel parts.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod vnni {
    use core::arch::x86_64::*;

    /// Sums the accumulators and removes the bias, as `avx2::reduce` (same
    /// lanes, same bounds: `vpdpwssd` adds exactly what `vpmaddwd` +
    /// `vpaddd` would, without saturation).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn reduce(a: [__m256i; 8], vectors: usize) -> u64 {
        let a = [
            _mm256_add_epi32(a[0], a[1]),
            _mm256_add_epi32(a[2], a[3]),
            _mm256_add_epi32(a[4], a[5]),
            _mm256_add_epi32(a[6], a[7]),
        ];
        let s = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
        let q = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let q = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
        let q = _mm_add_epi32(q, _mm_shuffle_epi32::<0b01>(q));
        let biased = i64::from(_mm_cvtsi128_si32(q));
        (biased + vectors as i64 * 16 * 32768) as u64
    }

    /// `avx2::copy_sum` (at most `BLOCK` bytes) with `vpdpwssd` and a masked
    /// tail. Eight accumulators (AVX-512 VL gives 32 vector registers), so
    /// that each sees one `vpdpwssd` per 256-byte iteration and the loop's
    /// chains are short: LLVM otherwise splits chained `vpdpwssd`s back into
    /// `vpmaddwd` + `vpaddd` to shorten them.
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn copy_sum(dst: &mut [u8], src: &[u8]) -> u64 {
        let n = src.len();
        // The caller checked this; the stores below rely on it.
        assert_eq!(dst.len(), n, "copy_sum: length mismatch");
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        // SAFETY: every load reads the 32 bytes at `s + i` with `i + 32 <= n`
        // (the loop conditions), inside `src`; `loadu` has no alignment requirement.
        let load = |i: usize| unsafe { _mm256_loadu_si256(s.add(i).cast()) };
        // SAFETY: as for `load`, within `dst`, which has the same length and,
        // being a `&mut`, does not overlap `src`.
        let store = |i: usize, v: __m256i| unsafe { _mm256_storeu_si256(d.add(i).cast(), v) };
        let bias = _mm256_set1_epi16(i16::MIN);
        let ones = _mm256_set1_epi16(1);
        // Adds the biased words of `v` to `acc` in adjacent pairs.
        let add = |acc: __m256i, v: __m256i| _mm256_dpwssd_epi32(acc, _mm256_xor_si256(v, bias), ones);
        let mut a = [_mm256_setzero_si256(); 8];
        // Four vectors into accumulators `first..first + 4`.
        let step4 = |a: &mut [__m256i; 8], i: usize, first: usize| {
            let v = [load(i), load(i + 32), load(i + 64), load(i + 96)];
            for (k, v) in v.into_iter().enumerate() {
                store(i + 32 * k, v);
                a[first + k] = add(a[first + k], v);
            }
        };
        // One vector, into `acc`.
        let step1 = |acc: &mut __m256i, i: usize| {
            let v = load(i);
            store(i, v);
            *acc = add(*acc, v);
        };
        // The last n - full (0..=31) bytes. Masked-off bytes load as zero (an
        // odd last byte thus becomes a zero-padded word, as RFC 1071 pads).
        let full = n & !31;
        let tail = |acc: &mut __m256i| {
            if n > full {
                let keep = (1u32 << (n - full)) - 1;
                // SAFETY: only the first n - full bytes from `s + full` and
                // `d + full` are enabled, all inside `src` and `dst`;
                // masked-off bytes are neither read nor written and cannot fault.
                let v = unsafe { _mm256_maskz_loadu_epi8(keep, s.add(full).cast()) };
                // SAFETY: as just above.
                unsafe { _mm256_mask_storeu_epi8(d.add(full).cast(), keep, v) };
                *acc = add(*acc, v);
                return 1;
            }
            0
        };
        let vectors = if super::backward(s, d) {
            let t = tail(&mut a[7]);
            // The same vectors from the top down (see `backward`).
            let mut i = full;
            for acc in &mut a[4..7] {
                if i & 127 != 0 {
                    i -= 32;
                    step1(acc, i);
                }
            }
            if i & 255 != 0 {
                i -= 128;
                step4(&mut a, i, 0);
            }
            while i > 0 {
                i -= 256;
                step4(&mut a, i + 128, 4);
                step4(&mut a, i, 0);
            }
            full / 32 + t
        } else {
            let mut i = 0;
            let end = n & !255;
            while i < end {
                step4(&mut a, i, 0);
                step4(&mut a, i + 128, 4);
                i += 256;
            }
            if n - i >= 128 {
                step4(&mut a, i, 0);
                i += 128;
            }
            // Straight-line code, not a loop, as in `avx2::copy_sum`.
            for acc in &mut a[4..7] {
                if i + 32 <= n {
                    step1(acc, i);
                    i += 32;
                }
            }
            full / 32 + tail(&mut a[7])
        };
        reduce(a, vectors)
    }
}

/// What a parser does with a checksum field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RxChecksum {
    /// Verify it; a mismatch is [`crate::Error::Checksum`].
    Verify,
    /// Don't look at it: the caller verifies later (fused with its copy,
    /// or the NIC already did).
    Skip,
}

/// How an `emit` fills a checksum field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxChecksum {
    /// Sum the header and the payload, which already sits after the header in
    /// the buffer given to `emit`.
    Compute,
    /// The payload (not yet or already in place) sums to this, e.g. from
    /// [`copy_and_checksum`]; `emit` sums only the header and pseudo-header.
    Payload(PartialSum),
    /// Leave the field zero (offload; for UDP, zero means "no checksum").
    Omit,
}

#[cfg(test)]
mod tests;
