//! TCP options: parsing (RFC 9293 §3.2, RFC 7323, RFC 2018) and emission.
//!
//! # Emitted layout
//!
//! `emit` writes options in Linux's order, each group padded with leading
//! NOPs to a 4-byte boundary, so no trailing padding is ever needed:
//!
//! | option                    | bytes | layout                          |
//! |---------------------------|-------|---------------------------------|
//! | MSS                       | 4     | `2 4 mss`                       |
//! | SACK-permitted+timestamps | 12    | `4 2 8 10 TSval TSecr`          |
//! | timestamps alone          | 12    | `1 1 8 10 TSval TSecr`          |
//! | SACK-permitted alone      | 4     | `1 1 4 2`                       |
//! | window scale              | 4     | `1 3 3 shift`                   |
//! | SACK blocks               | 4+8n  | `1 1 5 2+8n blocks…`            |
//! | Fast Open cookie (SYNs)   | 4+4k  | `34 2+n cookie… [1 1]`          |
//!
//! The Fast Open option goes last, padded with trailing NOPs as Linux pads
//! it; it is emitted only in the kind-34 form (RFC 7413), while the
//! experimental form (kind 254, magic 0xF989, RFC 6994) is accepted on input
//! as Linux accepts it. Everything but SACK blocks and the cookie totals at most 20 bytes, so only SACK blocks
//! can fail to fit in the 40-byte option space (RFC 9293 §3.1). When they
//! don't, the **last SACK blocks are dropped first**: RFC 2018 §4 puts the most
//! recently changed block first, and it is the one the sender needs. With
//! timestamps that leaves 3 blocks on a data segment (RFC 2018 §3), without
//! them 4. [`TcpOptions::fitted`] tells what `emit` will send.

use crate::seq::SeqNumber;
use crate::tcp::{SackBlocks, TcpOptions};
use crate::{Error, Result};

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
    /// TCP Fast Open cookie (RFC 7413 §4.1.1).
    pub const FAST_OPEN: u8 = 34;
    /// Experimental option (RFC 6994); Fast Open's pre-RFC form carries magic 0xF989.
    pub const EXPERIMENTAL: u8 = 254;
}

/// The experiment id of Fast Open's experimental form (RFC 7413 §7.2).
const FAST_OPEN_MAGIC: u16 = 0xF989;

/// The TCP option space: data offset 15 words minus the 5-word header.
pub const MAX_OPTIONS_LEN: usize = 40;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl TcpOptions {
    /// Parses the option bytes of a TCP header (after the 20 fixed bytes).
    ///
    /// As Linux does (`tcp_parse_options`), a malformed option never costs
    /// the segment: End-of-list stops parsing; NOP is skipped; unknown kinds,
    /// and known kinds with the wrong length (a timestamp of length 3), are
    /// skipped by their length (RFC 9293 §3.2: "must be prepared to handle an
    /// illegal option length"); a missing length byte, a length below 2 or
    /// one running past the header ends parsing, keeping what came before. A
    /// repeated option replaces the earlier one. Total: every byte string
    /// gives options.
    pub fn parse(bytes: &[u8]) -> TcpOptions {
        // The layout nearly every segment of a connection with timestamps
        // carries (RFC 7323 Appendix A: NOP, NOP, TS), read without the walk,
        // as Linux's `tcp_parse_aligned_timestamp` does: the walk below gives
        // the same options for these bytes.
        if let [kind::NOP, kind::NOP, kind::TIMESTAMPS, 10, ts @ ..] = bytes {
            if ts.len() == 8 {
                return TcpOptions { timestamps: Some((be32(&ts[..4]), be32(&ts[4..]))), ..TcpOptions::default() };
            }
        }
        Self::walk(bytes)
    }

    /// [`TcpOptions::parse`] option by option.
    fn walk(bytes: &[u8]) -> TcpOptions {
        let mut opts = TcpOptions::default();
        let mut i = 0;
        while let Some(&k) = bytes.get(i) {
            match k {
                kind::END => break,
                kind::NOP => {
                    i += 1;
                    continue;
                }
                _ => {}
            }
            let Some(&len) = bytes.get(i + 1) else { break };
            let len = usize::from(len);
            if len < 2 || i + len > bytes.len() {
                break; // "silly" or partial: stop, as Linux does
            }
            let data = &bytes[i + 2..i + len];
            match k {
                kind::MSS if len == 4 => opts.mss = Some(be16(data)),
                kind::WINDOW_SCALE if len == 3 => opts.window_scale = Some(data[0]),
                kind::SACK_PERMITTED if len == 2 => opts.sack_permitted = true,
                // RFC 2018 §3: 2 + 8n bytes, n >= 1; the option space bounds n at 4.
                kind::SACK if len >= 10 && (len - 2) % 8 == 0 => {
                    let mut blocks = SackBlocks::new();
                    for b in data.chunks_exact(8) {
                        blocks.push(SeqNumber(be32(&b[..4])), SeqNumber(be32(&b[4..])));
                    }
                    opts.sack = blocks;
                }
                kind::TIMESTAMPS if len == 10 => opts.timestamps = Some((be32(&data[..4]), be32(&data[4..]))),
                // RFC 7413 §4.1.1; a cookie of a length Linux would not take is ignored.
                kind::FAST_OPEN => {
                    if let Some(c) = crate::tcp::FastOpenCookie::new(data) {
                        opts.fast_open = Some(c);
                    }
                }
                kind::EXPERIMENTAL if len >= 4 && be16(data) == FAST_OPEN_MAGIC => {
                    if let Some(c) = crate::tcp::FastOpenCookie::new(&data[2..]) {
                        opts.fast_open = Some(c);
                    }
                }
                // Unknown, or a known kind of the wrong length: skipped by length.
                _ => {}
            }
            i += len;
        }
        opts
    }

    /// Bytes of everything but SACK blocks, as emitted.
    fn fixed_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamps.is_some() {
            n += 12; // carries SACK-permitted too when both are set
        } else if self.sack_permitted {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4;
        }
        if let Some(c) = &self.fast_open {
            n += (2 + c.as_bytes().len()).div_ceil(4) * 4;
        }
        n
    }

    /// SACK blocks that fit after the fixed options.
    fn sack_fit(&self) -> usize {
        let room = MAX_OPTIONS_LEN - self.fixed_len();
        let fit = room.saturating_sub(4) / 8;
        self.sack.len().min(fit)
    }

    /// The options `emit` actually sends: these, with the SACK blocks that do
    /// not fit in 40 bytes dropped from the end.
    pub fn fitted(&self) -> TcpOptions {
        let mut o = *self;
        o.sack.truncate(self.sack_fit());
        o
    }

    /// The options of almost every data segment and ACK without SACK
    /// blocks: timestamps alone (`NOP NOP TS`). Their length and bytes are
    /// written directly; the general walk costs about a hundred instructions
    /// more per segment (`outboard bench cost`).
    #[inline]
    fn timestamps_only(&self) -> Option<(u32, u32)> {
        if self.mss.is_none()
            && self.window_scale.is_none()
            && !self.sack_permitted
            && self.sack.is_empty()
            && self.fast_open.is_none()
        {
            self.timestamps
        } else {
            None
        }
    }

    /// Bytes `emit` writes: a multiple of 4, at most 40.
    pub fn buffer_len(&self) -> usize {
        if self.timestamps_only().is_some() {
            return 12;
        }
        let n = self.sack_fit();
        self.fixed_len() + if n > 0 { 4 + 8 * n } else { 0 }
    }

    /// Writes the options into `buf`, which must hold [`buffer_len`](Self::buffer_len) bytes.
    pub(crate) fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if let Some((val, ecr)) = self.timestamps_only() {
            let b: &mut [u8; 12] = buf.get_mut(..12).and_then(|b| b.try_into().ok()).ok_or(Error::Truncated)?;
            b[..4].copy_from_slice(&[kind::NOP, kind::NOP, kind::TIMESTAMPS, 10]);
            b[4..8].copy_from_slice(&val.to_be_bytes());
            b[8..].copy_from_slice(&ecr.to_be_bytes());
            return Ok(12);
        }
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut w = Writer { b, at: 0 };
        if let Some(mss) = self.mss {
            w.put(&[kind::MSS, 4]);
            w.put(&mss.to_be_bytes());
        }
        match (self.timestamps, self.sack_permitted) {
            (Some((val, ecr)), sack_perm) => {
                if sack_perm {
                    w.put(&[kind::SACK_PERMITTED, 2]);
                } else {
                    w.put(&[kind::NOP, kind::NOP]);
                }
                w.put(&[kind::TIMESTAMPS, 10]);
                w.put(&val.to_be_bytes());
                w.put(&ecr.to_be_bytes());
            }
            (None, true) => w.put(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]),
            (None, false) => {}
        }
        if let Some(shift) = self.window_scale {
            w.put(&[kind::NOP, kind::WINDOW_SCALE, 3, shift]);
        }
        let n = self.sack_fit();
        if n > 0 {
            // n <= 4, so the length fits a byte.
            w.put(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * n) as u8]);
            for (l, r) in self.sack.iter().take(n) {
                w.put(&l.0.to_be_bytes());
                w.put(&r.0.to_be_bytes());
            }
        }
        if let Some(c) = &self.fast_open {
            let cookie = c.as_bytes();
            // At most 16 bytes, so the length fits a byte.
            w.put(&[kind::FAST_OPEN, (2 + cookie.len()) as u8]);
            w.put(cookie);
            if cookie.len() % 4 != 2 {
                w.put(&[kind::NOP, kind::NOP]);
            }
        }
        Ok(w.at)
    }
}

/// Appends to a buffer sized by `buffer_len`, so indexing cannot go past it.
struct Writer<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.b[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Timestamps alone are written by the direct path: the layout RFC
        /// 7323 appendix A recommends, and they parse back.
        #[test]
        fn timestamps_alone_emit_nop_nop_ts_and_parse_back(val in any::<u32>(), ecr in any::<u32>()) {
            let o = TcpOptions { timestamps: Some((val, ecr)), ..TcpOptions::default() };
            prop_assert_eq!(o.buffer_len(), 12);
            let mut b = [0xAAu8; 13];
            prop_assert_eq!(o.emit(&mut b).unwrap(), 12);
            prop_assert_eq!(&b[..4], &[kind::NOP, kind::NOP, kind::TIMESTAMPS, 10][..]);
            prop_assert_eq!(b[12], 0xAA, "nothing written past the options");
            prop_assert_eq!(TcpOptions::parse(&b[..12]).timestamps, Some((val, ecr)));
            prop_assert_eq!(o.emit(&mut b[..11]), Err(Error::Truncated));
        }

        #[test]
        fn aligned_timestamps_parse_as_the_walk_does(tail in prop::collection::vec(any::<u8>(), 0..16), ts in any::<[u8; 8]>()) {
            // The fast path's layout, the same bytes with something after or
            // cut short, and arbitrary bytes after NOP NOP: parse == walk.
            let mut b = vec![kind::NOP, kind::NOP, kind::TIMESTAMPS, 10];
            b.extend_from_slice(&ts);
            prop_assert_eq!(TcpOptions::parse(&b), TcpOptions::walk(&b));
            prop_assert!(TcpOptions::parse(&b).timestamps.is_some());
            let mut longer = b.clone();
            longer.extend_from_slice(&tail);
            prop_assert_eq!(TcpOptions::parse(&longer), TcpOptions::walk(&longer));
            let short = &b[..b.len() - 1 - tail.len() % 4];
            prop_assert_eq!(TcpOptions::parse(short), TcpOptions::walk(short));
            let mut other = vec![kind::NOP, kind::NOP];
            other.extend_from_slice(&tail);
            prop_assert_eq!(TcpOptions::parse(&other), TcpOptions::walk(&other));
        }
    }
}
