//! Frames waiting to go out, written into the caller's buffer by
//! `Endpoint::poll_transmit`. A frame's payload is a slice of the message
//! it belongs to (shared, so a retransmission copies nothing beforehand):
//! the only copy is the one into the transmit buffer.

use outboard_wire::msg::{flags, MsgRepr, HEADER_LEN};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub(crate) enum Payload {
    None,
    /// `len` bytes at `start` of a message.
    Slice(Arc<[u8]>, usize, usize),
    Name(Arc<str>),
}

impl Payload {
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::None => &[],
            Payload::Slice(d, start, len) => &d[*start..*start + *len],
            Payload::Name(n) => n.as_bytes(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct OutFrame {
    pub dst: SocketAddr,
    pub repr: MsgRepr,
    pub payload: Payload,
}

#[derive(Default, Debug)]
pub(crate) struct Outbox {
    frames: VecDeque<OutFrame>,
}

impl Outbox {
    pub fn push(&mut self, dst: SocketAddr, repr: MsgRepr, payload: Payload) {
        self.frames.push_back(OutFrame { dst, repr, payload });
    }

    /// Queues every fragment of `data` (one empty frame for an empty message),
    /// `frame_payload` bytes each, with `repr`'s fields and each fragment's
    /// offset and the total length filled in.
    pub fn push_fragments(&mut self, dst: SocketAddr, repr: MsgRepr, data: &Arc<[u8]>, frame_payload: usize) {
        let total = data.len();
        let mut offset = 0;
        loop {
            let len = (total - offset).min(frame_payload);
            let r = MsgRepr { offset: offset as u32, total_len: total as u32, ..repr };
            self.push(dst, r, Payload::Slice(data.clone(), offset, len));
            offset += len;
            if offset >= total {
                break;
            }
        }
    }

    /// At most `frames` fragments of `data`, from the one holding byte `start`
    /// on; the last is marked `ACK_NOW` when the message has more than one
    /// fragment (the receiver then says how much it holds). Returns the offset
    /// after the last fragment queued.
    pub fn push_window(&mut self, dst: SocketAddr, repr: MsgRepr, data: &Arc<[u8]>, frame_payload: usize, start: usize, frames: usize) -> usize {
        let total = data.len();
        let mut offset = start.min(total.saturating_sub(1)) / frame_payload * frame_payload;
        for _ in 0..frames.max(1) {
            let len = (total - offset).min(frame_payload);
            let r = MsgRepr { offset: offset as u32, total_len: total as u32, ..repr };
            self.push(dst, r, Payload::Slice(data.clone(), offset, len));
            offset += len;
            if offset >= total {
                break;
            }
        }
        if total > frame_payload {
            self.flag_last(flags::ACK_NOW);
        }
        offset
    }

    /// Sets `flag` on the frame queued last.
    pub fn flag_last(&mut self, flag: u16) {
        if let Some(f) = self.frames.back_mut() {
            f.repr.flags |= flag;
        }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Writes the next frame into `buf`: (destination, length). A frame that
    /// does not fit `buf` is dropped and reported as `Err(needed)`.
    pub fn pop_into(&mut self, buf: &mut [u8]) -> Option<Result<(SocketAddr, usize), usize>> {
        let f = self.frames.pop_front()?;
        let p = f.payload.bytes();
        let n = HEADER_LEN + p.len();
        if buf.len() < n {
            return Some(Err(n));
        }
        let _ = f.repr.emit(&mut buf[..HEADER_LEN]);
        buf[HEADER_LEN..n].copy_from_slice(p);
        Some(Ok((f.dst, n)))
    }
}

/// Marks a retransmitted frame (informative, for captures).
pub(crate) const RETRANSMIT: u16 = flags::RETRANSMIT;
