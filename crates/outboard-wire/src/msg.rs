//! The native message protocol's header (docs/MESSAGES.md has the byte table).
//!
//! The datagram, reliable-message and request-response services between
//! mailboxes with network-wide addresses, carried in UDP so they cross ordinary
//! IP networks (default port [`DEFAULT_PORT`]). Every frame is one fixed
//! 64-byte header followed by at most one fragment of one message; the
//! header's `header_len` lets a later version append fields that this version
//! skips. The checksum is the UDP checksum around it (fused into the data
//! path's one copy, as for TCP), so the header has none of its own.
//!
//! All fields are big-endian. Which fields mean what depends on the kind; the
//! [`MsgKind`] docs say so, and fields a kind does not use are sent as zero
//! and ignored on receipt.

use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = 3;
    pub const FLAGS: Range<usize> = 4..6;
    pub const HEADER_LEN: Range<usize> = 6..8;
    pub const SRC_MAILBOX: Range<usize> = 8..12;
    pub const DST_MAILBOX: Range<usize> = 12..16;
    pub const SRC_SESSION: Range<usize> = 16..20;
    pub const DST_SESSION: Range<usize> = 20..24;
    pub const ID: Range<usize> = 24..32;
    pub const ACK: Range<usize> = 32..40;
    pub const SACK: Range<usize> = 40..48;
    pub const CREDIT: Range<usize> = 48..52;
    pub const OFFSET: Range<usize> = 52..56;
    pub const TOTAL_LEN: Range<usize> = 56..60;
    pub const STATUS: Range<usize> = 60..64;
}

/// Bytes of the version-1 header.
pub const HEADER_LEN: usize = field::STATUS.end;
/// "OB".
pub const MAGIC: u16 = 0x4f42;
/// The version this crate writes and reads.
pub const VERSION: u8 = 1;
/// The UDP port engines use for the message protocol unless configured otherwise.
pub const DEFAULT_PORT: u16 = 7373;
/// The largest message the protocol carries (its fragments' `total_len`).
pub const MAX_MESSAGE_LEN: u32 = 16 << 20;
/// Mailbox 0 is the engine's own control mailbox (name lookups arrive there).
pub const CONTROL_MAILBOX: u32 = 0;
/// The longest mailbox name a lookup carries.
pub const MAX_NAME_LEN: usize = 255;

/// What a frame is. The field use per kind (fields not named are zero):
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MsgKind {
    /// Unreliable message, whole or not at all. `id`: the sender's datagram
    /// number (fragments of one datagram share it); `offset`/`total_len`.
    Datagram = 1,
    /// A fragment of a reliable message. `id`: the frame's sequence number in its
    /// flow (from 1); `ack`: the flow's incarnation; `offset`/`total_len`.
    Message = 2,
    /// Receiver to sender on a reliable flow. `id`: the flow's incarnation;
    /// `ack`: every frame below it arrived; `sack`: bit i set when frame
    /// `ack + 1 + i` arrived; `credit`: frames the sender may send at and above `ack`.
    MessageAck = 3,
    /// A fragment of an RPC request. `id`: the call id (unique per client
    /// session); `ack`: every call id below it is finished at the client;
    /// `credit`: on a re-sent request, the bytes of the response the client
    /// already holds from its start (the server re-sends only the rest).
    Request = 4,
    /// A fragment of an RPC response. `id`: the call id.
    Response = 5,
    /// Client to server: the response to call `id` arrived; the server may drop it.
    ResponseAck = 6,
    /// Server to client about call `id`: `credit` is the bytes of the request
    /// it holds from the start; all of them: it is being served, stop re-sending.
    RequestAck = 7,
    /// Name lookup to mailbox 0. `id`: the lookup's number; payload: the name.
    Lookup = 8,
    /// The answer to lookup `id`: `src_mailbox` is the mailbox that has the name.
    LookupReply = 9,
    /// A refusal of one frame: `id` and `ack` are the refused frame's id and
    /// kind byte; `status` is a [`MsgStatus`]. Never answered with an error.
    Error = 10,
    /// Sender to receiver on a reliable flow with no credit: "tell me your
    /// ack and credit". `id`: the flow's incarnation.
    Probe = 11,
}

impl MsgKind {
    pub fn from_u8(b: u8) -> Option<MsgKind> {
        Some(match b {
            1 => MsgKind::Datagram,
            2 => MsgKind::Message,
            3 => MsgKind::MessageAck,
            4 => MsgKind::Request,
            5 => MsgKind::Response,
            6 => MsgKind::ResponseAck,
            7 => MsgKind::RequestAck,
            8 => MsgKind::Lookup,
            9 => MsgKind::LookupReply,
            10 => MsgKind::Error,
            11 => MsgKind::Probe,
            _ => return None,
        })
    }
    /// Kinds whose payload is a fragment of a message (`offset`/`total_len` in use).
    pub fn carries_fragment(self) -> bool {
        matches!(self, MsgKind::Datagram | MsgKind::Message | MsgKind::Request | MsgKind::Response)
    }
    pub fn name(self) -> &'static str {
        match self {
            MsgKind::Datagram => "datagram",
            MsgKind::Message => "message",
            MsgKind::MessageAck => "message-ack",
            MsgKind::Request => "request",
            MsgKind::Response => "response",
            MsgKind::ResponseAck => "response-ack",
            MsgKind::RequestAck => "request-ack",
            MsgKind::Lookup => "lookup",
            MsgKind::LookupReply => "lookup-reply",
            MsgKind::Error => "error",
            MsgKind::Probe => "probe",
        }
    }
}

/// Why a frame was refused (the `status` of an [`MsgKind::Error`] frame).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MsgStatus {
    /// No mailbox of that number is bound at the receiver.
    NoMailbox = 1,
    /// No mailbox of that name (a lookup's answer).
    NoName = 2,
    /// The frame named a receiver session that is not the receiver's: it restarted.
    StaleSession = 3,
    /// The server keeps too many unfinished calls of this client; try later.
    Busy = 4,
}

impl MsgStatus {
    pub fn from_u32(v: u32) -> Option<MsgStatus> {
        Some(match v {
            1 => MsgStatus::NoMailbox,
            2 => MsgStatus::NoName,
            3 => MsgStatus::StaleSession,
            4 => MsgStatus::Busy,
            _ => return None,
        })
    }
}

/// The `status` of a [`MsgKind::Response`]: the server answered, or the
/// server took the request and failed on it (ran at most once; a handler that
/// trapped or refused it). A failed response carries no payload.
pub mod response_status {
    pub const OK: u32 = 0;
    pub const FAILED: u32 = 1;
}

/// Flag bits.
pub mod flags {
    /// The sender asks for an acknowledgement at once (the last frame it can send now).
    pub const ACK_NOW: u16 = 0x0001;
    /// This frame is a retransmission (informative; for captures).
    pub const RETRANSMIT: u16 = 0x0002;
    /// Flags this version defines; others are ignored on receipt and sent as zero.
    pub const KNOWN: u16 = ACK_NOW | RETRANSMIT;
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A view of one message-protocol frame (a UDP payload). After `check_len`:
/// the magic matches, the header of `header_len` bytes (at least
/// [`HEADER_LEN`]) is within the buffer; no accessor panics then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MsgPacket<T> {
    pub const fn new_unchecked(buffer: T) -> MsgPacket<T> {
        MsgPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<MsgPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if be16(&b[field::MAGIC]) != MAGIC {
            return Err(Error::Malformed);
        }
        let hl = usize::from(self.header_len());
        if hl < HEADER_LEN || hl % 4 != 0 {
            return Err(Error::Malformed);
        }
        if hl > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn kind_byte(&self) -> u8 {
        self.buffer.as_ref()[field::KIND]
    }
    pub fn flags(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FLAGS])
    }
    pub fn header_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::HEADER_LEN])
    }
    pub fn src_mailbox(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SRC_MAILBOX])
    }
    pub fn dst_mailbox(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::DST_MAILBOX])
    }
    pub fn src_session(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SRC_SESSION])
    }
    pub fn dst_session(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::DST_SESSION])
    }
    pub fn id(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::ID])
    }
    pub fn ack(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::ACK])
    }
    pub fn sack(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::SACK])
    }
    pub fn credit(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::CREDIT])
    }
    pub fn offset(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::OFFSET])
    }
    pub fn total_len(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::TOTAL_LEN])
    }
    pub fn status(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::STATUS])
    }
    /// The bytes after the header (and after any header extension).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }
}

/// A parsed header; the payload travels separately.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MsgRepr {
    pub kind: MsgKind,
    /// Known flag bits only (see [`flags`]).
    pub flags: u16,
    pub src_mailbox: u32,
    pub dst_mailbox: u32,
    pub src_session: u32,
    pub dst_session: u32,
    pub id: u64,
    pub ack: u64,
    pub sack: u64,
    pub credit: u32,
    pub offset: u32,
    pub total_len: u32,
    pub status: u32,
}

impl MsgRepr {
    /// A header of `kind` with every other field zero.
    pub const fn new(kind: MsgKind) -> MsgRepr {
        MsgRepr {
            kind,
            flags: 0,
            src_mailbox: 0,
            dst_mailbox: 0,
            src_session: 0,
            dst_session: 0,
            id: 0,
            ack: 0,
            sack: 0,
            credit: 0,
            offset: 0,
            total_len: 0,
            status: 0,
        }
    }

    /// Parses a checked frame. Errors: another version or an unknown kind is
    /// [`Error::Unsupported`]; a fragment that does not fit its message
    /// (`offset + payload > total_len`, `total_len` over [`MAX_MESSAGE_LEN`], an
    /// empty fragment of a non-empty message), a payload on a kind that carries
    /// none, a lookup name that is empty or too long, or an error frame
    /// without a known status, or a response whose status is not 0 or 1 (or
    /// 1, failed, with bytes), is [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>>(p: &MsgPacket<T>) -> Result<MsgRepr> {
        p.check_len()?;
        if p.version() != VERSION {
            return Err(Error::Unsupported);
        }
        let kind = MsgKind::from_u8(p.kind_byte()).ok_or(Error::Unsupported)?;
        let payload = p.payload().len();
        let repr = MsgRepr {
            kind,
            flags: p.flags() & flags::KNOWN,
            src_mailbox: p.src_mailbox(),
            dst_mailbox: p.dst_mailbox(),
            src_session: p.src_session(),
            dst_session: p.dst_session(),
            id: p.id(),
            ack: p.ack(),
            sack: p.sack(),
            credit: p.credit(),
            offset: p.offset(),
            total_len: p.total_len(),
            status: p.status(),
        };
        match kind {
            k if k.carries_fragment() => {
                if repr.total_len > MAX_MESSAGE_LEN {
                    return Err(Error::Malformed);
                }
                let end = u64::from(repr.offset) + payload as u64;
                if end > u64::from(repr.total_len) || (payload == 0 && repr.total_len != 0) {
                    return Err(Error::Malformed);
                }
                // A response says whether the server failed on the request (then with no bytes).
                if kind == MsgKind::Response
                    && (repr.status > response_status::FAILED || (repr.status == response_status::FAILED && repr.total_len != 0))
                {
                    return Err(Error::Malformed);
                }
            }
            MsgKind::Lookup => {
                if payload == 0 || payload > MAX_NAME_LEN {
                    return Err(Error::Malformed);
                }
            }
            MsgKind::Error => {
                if MsgStatus::from_u32(repr.status).is_none() || payload != 0 {
                    return Err(Error::Malformed);
                }
            }
            _ => {
                if payload != 0 {
                    return Err(Error::Malformed);
                }
            }
        }
        Ok(repr)
    }

    /// The status of an error frame (`None` for other kinds or unknown codes).
    pub fn error_status(&self) -> Option<MsgStatus> {
        (self.kind == MsgKind::Error).then(|| MsgStatus::from_u32(self.status)).flatten()
    }

    /// Header bytes `emit` writes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header into the start of `buf` (the payload, if any, goes at
    /// `buf[HEADER_LEN..]`, written by the caller before or after). Returns the
    /// header length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        buf[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        buf[field::VERSION] = VERSION;
        buf[field::KIND] = self.kind as u8;
        buf[field::FLAGS].copy_from_slice(&(self.flags & flags::KNOWN).to_be_bytes());
        buf[field::HEADER_LEN].copy_from_slice(&(HEADER_LEN as u16).to_be_bytes());
        buf[field::SRC_MAILBOX].copy_from_slice(&self.src_mailbox.to_be_bytes());
        buf[field::DST_MAILBOX].copy_from_slice(&self.dst_mailbox.to_be_bytes());
        buf[field::SRC_SESSION].copy_from_slice(&self.src_session.to_be_bytes());
        buf[field::DST_SESSION].copy_from_slice(&self.dst_session.to_be_bytes());
        buf[field::ID].copy_from_slice(&self.id.to_be_bytes());
        buf[field::ACK].copy_from_slice(&self.ack.to_be_bytes());
        buf[field::SACK].copy_from_slice(&self.sack.to_be_bytes());
        buf[field::CREDIT].copy_from_slice(&self.credit.to_be_bytes());
        buf[field::OFFSET].copy_from_slice(&self.offset.to_be_bytes());
        buf[field::TOTAL_LEN].copy_from_slice(&self.total_len.to_be_bytes());
        buf[field::STATUS].copy_from_slice(&self.status.to_be_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests;
