//! TCP header (RFC 9293 §3.1) and options (RFC 9293 §3.2, RFC 7323, RFC 2018).
//!
//! [`TcpPacket`] is the view; [`TcpRepr`] the parsed header. Option parsing
//! and the emitted option layout (and which options are dropped when they
//! don't fit: SACK blocks, from the last) are in [`options`].
//!
//! One-copy transmit: `let hl = repr.header_len();` copy the payload to
//! `seg[hl..]` with [`checksum::copy_and_checksum`],
//! then `repr.emit(seg, src, dst, payload_len, TxChecksum::Payload(sum))`.

use crate::pseudo::PseudoAddr;

use crate::checksum::{self, Accumulator, RxChecksum, TxChecksum};
use crate::seq::SeqNumber;
use crate::{Error, Result};

pub mod options;
mod packet;

pub use options::MAX_OPTIONS_LEN;
pub use packet::{TcpPacket, HEADER_LEN};
use packet::{field, PROTO_TCP};

/// The TCP control bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: TcpFlags = TcpFlags(0x01);
    pub const SYN: TcpFlags = TcpFlags(0x02);
    pub const RST: TcpFlags = TcpFlags(0x04);
    pub const PSH: TcpFlags = TcpFlags(0x08);
    pub const ACK: TcpFlags = TcpFlags(0x10);
    pub const URG: TcpFlags = TcpFlags(0x20);
    pub const ECE: TcpFlags = TcpFlags(0x40);
    pub const CWR: TcpFlags = TcpFlags(0x80);
    pub const NONE: TcpFlags = TcpFlags(0);

    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
    pub fn fin(self) -> bool { self.contains(Self::FIN) }
    pub fn syn(self) -> bool { self.contains(Self::SYN) }
    pub fn rst(self) -> bool { self.contains(Self::RST) }
    pub fn psh(self) -> bool { self.contains(Self::PSH) }
    pub fn ack(self) -> bool { self.contains(Self::ACK) }
    pub fn urg(self) -> bool { self.contains(Self::URG) }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl core::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// Up to four SACK blocks `[left, right)` (RFC 2018 §3); fixed size, no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SackBlocks {
    blocks: [(SeqNumber, SeqNumber); 4],
    len: u8,
}

impl SackBlocks {
    pub const MAX: usize = 4;

    pub const fn new() -> SackBlocks {
        SackBlocks { blocks: [(SeqNumber(0), SeqNumber(0)); 4], len: 0 }
    }
    /// Appends a block; returns false (and ignores it) when four are held.
    pub fn push(&mut self, left: SeqNumber, right: SeqNumber) -> bool {
        if (self.len as usize) < Self::MAX {
            self.blocks[self.len as usize] = (left, right);
            self.len += 1;
            true
        } else {
            false
        }
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_slice(&self) -> &[(SeqNumber, SeqNumber)] {
        &self.blocks[..self.len as usize]
    }
    pub fn iter(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        self.as_slice().iter().copied()
    }
    /// Keeps at most `n` blocks (option space is shared with timestamps).
    pub fn truncate(&mut self, n: usize) {
        let keep = (self.len as usize).min(n);
        // Slots past `len` stay zero, so the derived `PartialEq` compares only held blocks.
        for b in &mut self.blocks[keep..] {
            *b = (SeqNumber(0), SeqNumber(0));
        }
        self.len = keep as u8;
    }
}

/// The TCP options Outboard understands. Unknown options are skipped by
/// length when parsing and never emitted.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2), SYN only.
    pub mss: Option<u16>,
    /// Window scale shift (kind 3, RFC 7323 §2), SYN only. Values above 14 are kept as
    /// received; the receiver clamps them to 14 (RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4), SYN only.
    pub sack_permitted: bool,
    /// SACK blocks (kind 5).
    pub sack: SackBlocks,
    /// Timestamps (kind 8, RFC 7323 §3): (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// TCP Fast Open (kind 34, RFC 7413 §4.1.1), SYN and SYN-ACK only: an
    /// empty cookie is a cookie request.
    pub fast_open: Option<FastOpenCookie>,
}

/// A TCP Fast Open cookie (RFC 7413 §4.1.1): 4 to 16 bytes, an even count
/// (as Linux's `tcp_parse_fastopen_option` takes them), or empty (a request).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Vec<u8>", into = "Vec<u8>")]
pub struct FastOpenCookie {
    len: u8,
    bytes: [u8; 16],
}

/// A cookie in a saved record (a live upgrade's): its bytes, checked as on the wire.
impl TryFrom<Vec<u8>> for FastOpenCookie {
    type Error = &'static str;
    fn try_from(bytes: Vec<u8>) -> core::result::Result<FastOpenCookie, &'static str> {
        FastOpenCookie::new(&bytes).ok_or("a Fast Open cookie is empty or 4 to 16 bytes of an even count")
    }
}

impl From<FastOpenCookie> for Vec<u8> {
    fn from(c: FastOpenCookie) -> Vec<u8> {
        c.as_bytes().to_vec()
    }
}

impl FastOpenCookie {
    /// Longest cookie (RFC 7413 §4.1.1).
    pub const MAX: usize = 16;
    /// Shortest non-empty cookie (RFC 7413 §4.1.1).
    pub const MIN: usize = 4;

    /// The empty cookie: a cookie request.
    pub const fn request() -> FastOpenCookie {
        FastOpenCookie { len: 0, bytes: [0; 16] }
    }

    /// A cookie of `bytes`; None unless empty or 4 to 16 bytes of an even count.
    pub fn new(bytes: &[u8]) -> Option<FastOpenCookie> {
        let n = bytes.len();
        if n != 0 && !(Self::MIN..=Self::MAX).contains(&n) || !n.is_multiple_of(2) {
            return None;
        }
        let mut c = FastOpenCookie { len: n as u8, bytes: [0; 16] };
        c.bytes[..n].copy_from_slice(bytes);
        Some(c)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// An empty cookie (a request).
    pub fn is_request(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Debug for FastOpenCookie {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "FastOpenCookie(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// A parsed TCP header, independent of any buffer. The payload travels separately.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: SeqNumber,
    /// Meaningful only when `flags.ack()`.
    pub ack: SeqNumber,
    pub flags: TcpFlags,
    /// The window field as sent (unscaled).
    pub window: u16,
    pub urgent: u16,
    pub options: TcpOptions,
}

impl TcpRepr {
    /// Sequence space the segment occupies: payload plus one each for SYN and FIN.
    pub fn segment_len(&self, payload_len: usize) -> usize {
        payload_len + self.flags.syn() as usize + self.flags.fin() as usize
    }
}

impl TcpRepr {
    /// Parses a checked segment. Port 0 on either side is [`Error::Malformed`]
    /// (reserved); with [`RxChecksum::Verify`] a wrong checksum is
    /// [`Error::Checksum`]. Malformed options are ignored, never an error
    /// (see [`TcpOptions::parse`]).
    pub fn parse<T: AsRef<[u8]>, A: PseudoAddr>(p: &TcpPacket<T>, src: A, dst: A, checksum: RxChecksum) -> Result<TcpRepr> {
        p.check_len()?;
        if checksum == RxChecksum::Verify && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        if p.src_port() == 0 || p.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        let options = TcpOptions::parse(p.options());
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq_number(),
            ack: p.ack_number(),
            flags: p.flags(),
            window: p.window_len(),
            urgent: p.urgent_at(),
            options,
        })
    }

    /// Header bytes `emit` writes: 20 plus the options (see [`options`]).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.buffer_len()
    }

    /// Header plus payload.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Writes the header into the start of `buf` for a payload of
    /// `payload_len` bytes at `buf[self.header_len()..]`; returns the header length.
    ///
    /// Checksum: with [`TxChecksum::Compute`] the payload must already be in
    /// `buf` and is summed here; with `Payload(sum)` it is not read (the data
    /// path summed it while copying it there); `Omit` leaves zero. SACK blocks
    /// that don't fit are dropped from the end ([`TcpOptions::fitted`]).
    /// [`Error::Truncated`] if `buf` is too short, [`Error::Malformed`] if the
    /// segment would exceed 65535 bytes.
    pub fn emit<A: PseudoAddr>(&self, buf: &mut [u8], src: A, dst: A, payload_len: usize, checksum: TxChecksum) -> Result<usize> {
        let hl = self.header_len();
        let total = hl + payload_len;
        let len = u16::try_from(total).map_err(|_| Error::Malformed)?;
        let need = if checksum == TxChecksum::Compute { total } else { hl };
        if buf.len() < need {
            return Err(Error::Truncated);
        }
        buf[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        buf[field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[field::SEQ].copy_from_slice(&self.seq.0.to_be_bytes());
        buf[field::ACK].copy_from_slice(&self.ack.0.to_be_bytes());
        // hl <= 60, so the word count fits the 4-bit field.
        buf[field::DATA_OFFSET] = ((hl / 4) as u8) << 4;
        buf[field::FLAGS] = self.flags.0;
        buf[field::WINDOW].copy_from_slice(&self.window.to_be_bytes());
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
        buf[field::URGENT].copy_from_slice(&self.urgent.to_be_bytes());
        self.options.emit(&mut buf[HEADER_LEN..hl])?;
        let payload_sum = match checksum {
            TxChecksum::Omit => return Ok(hl),
            TxChecksum::Compute => checksum::sum(&buf[hl..total]),
            TxChecksum::Payload(s) => s,
        };
        let mut acc = Accumulator::new();
        A::add_pseudo_header(&mut acc, src, dst, PROTO_TCP, usize::from(len));
        acc.add(&buf[..hl]).add_partial(payload_sum);
        buf[field::CHECKSUM].copy_from_slice(&acc.finish().to_be_bytes());
        Ok(hl)
    }
}

#[cfg(test)]
mod tests;
