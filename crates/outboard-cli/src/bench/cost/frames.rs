//! The in-memory wire between the two stacks of a `bench cost` world: frames
//! in fixed buffers taken from and given back to a pool, so that neither stack
//! pays for the harness's allocations, and both pay the same for its queues.

use std::collections::VecDeque;

/// Room for one Ethernet frame of a 1500-byte MTU, and then some.
pub const FRAME_CAP: usize = 2048;

pub struct Frame {
    pub buf: Box<[u8; FRAME_CAP]>,
    pub len: usize,
}

impl Frame {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Spare frame buffers.
#[derive(Default)]
pub struct Pool(Vec<Frame>);

impl Pool {
    pub fn take(&mut self) -> Frame {
        self.0.pop().unwrap_or_else(|| Frame { buf: Box::new([0; FRAME_CAP]), len: 0 })
    }

    pub fn give(&mut self, f: Frame) {
        self.0.push(f);
    }
}

/// Frames on their way from one stack to the other.
pub type Queue = VecDeque<Frame>;

/// Moves every frame of `from` to the back of `to`; returns how many of
/// them carried TCP payload (data segments).
pub fn carry(from: &mut Queue, to: &mut Queue) -> u64 {
    let mut data = 0;
    while let Some(f) = from.pop_front() {
        if tcp_payload_len(f.bytes()) > 0 {
            data += 1;
        }
        to.push_back(f);
    }
    data
}

/// Bytes of TCP payload in an Ethernet frame carrying IPv4; 0 for anything else.
pub fn tcp_payload_len(f: &[u8]) -> usize {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return 0;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let Some(&off) = f.get(14 + ihl + 12) else { return 0 };
    total.saturating_sub(ihl + usize::from(off >> 4) * 4)
}

/// The byte stream both worlds send: position `i` holds `pattern_byte(i)`.
/// Its period is prime, so no write or read size lines up with it.
pub const PERIOD: usize = 65_521;

pub fn pattern_byte(i: u64) -> u8 {
    ((i % PERIOD as u64) * 31 % 251) as u8
}

/// Two periods of the pattern, so that a write of up to one period can start
/// anywhere in the first.
pub fn pattern() -> Vec<u8> {
    (0..2 * PERIOD as u64).map(pattern_byte).collect()
}

/// The receiving application's buffer: what the receive phase read since the
/// last check, and where in the stream that starts.
pub struct AppBuffer {
    buf: Vec<u8>,
    len: usize,
    received: u64,
}

impl AppBuffer {
    /// Bigger than either stack's receive buffer: a phase reads everything.
    pub fn new() -> AppBuffer {
        AppBuffer { buf: vec![0; 1 << 20], len: 0, received: 0 }
    }

    /// Where the next read goes; empty when full.
    pub fn room(&mut self) -> &mut [u8] {
        &mut self.buf[self.len..]
    }

    pub fn filled(&mut self, n: usize) {
        self.len += n;
    }

    /// Checks what was read against the pattern and empties the buffer; returns its length.
    pub fn check(&mut self) -> Result<u64, String> {
        let n = self.len;
        verify(&self.buf[..n], self.received)?;
        self.received += n as u64;
        self.len = 0;
        Ok(n as u64)
    }
}

/// Checks that `got` is the stream's bytes from position `at`.
pub fn verify(got: &[u8], at: u64) -> Result<(), String> {
    match got.iter().enumerate().find(|&(i, &b)| b != pattern_byte(at + i as u64)) {
        None => Ok(()),
        Some((i, &b)) => Err(format!(
            "byte {} of the stream is {b:#04x}, not {:#04x}",
            at + i as u64,
            pattern_byte(at + i as u64)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_length_of_a_tcp_frame_and_of_others() {
        let mut f = vec![0u8; 14 + 20 + 32 + 100];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + 32 + 100) as u16).to_be_bytes());
        f[23] = 6;
        f[14 + 20 + 12] = 8 << 4;
        assert_eq!(tcp_payload_len(&f), 100);
        f[23] = 17;
        assert_eq!(tcp_payload_len(&f), 0, "UDP");
        f[23] = 6;
        f[12] = 0x86;
        assert_eq!(tcp_payload_len(&f), 0, "not IPv4");
        assert_eq!(tcp_payload_len(&f[..20]), 0, "short");
    }

    #[test]
    fn the_pattern_verifies_at_its_own_offsets_only() {
        let p = pattern();
        assert!(verify(&p[100..5000], 100).is_ok());
        assert!(verify(&p[100..5000], 101).is_err());
        assert!(verify(&p[PERIOD..PERIOD + 10], 0).is_ok(), "periodic");
    }
}
