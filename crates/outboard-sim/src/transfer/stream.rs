//! The two ends of one direction's data: a `Source` that feeds the seeded byte
//! stream into a connection, and a `Sink` that checks what arrives against a
//! twin of that stream (slice compare per chunk) and hashes both sides.

use crate::rng::ByteStream;
use sha2::{Digest, Sha256};

/// Bytes generated or checked per step.
const CHUNK: usize = 64 * 1024;

/// Stream seed of direction `dir` (0 = a->b, 1 = b->a) of the run seeded `seed`.
pub fn stream_seed(seed: u64, dir: usize) -> u64 {
    crate::rng::Rng::derive(seed, 0x5eed_0000 + dir as u64).next_u64()
}

#[derive(Debug)]
pub struct Source {
    stream: ByteStream,
    total: u64,
    /// Bytes the stack has accepted.
    pub sent: u64,
    staged: Vec<u8>,
    staged_pos: usize,
    sha: Sha256,
    /// FIN requested (shutdown_write called).
    pub finished: bool,
}

impl Source {
    pub fn new(seed: u64, total: u64) -> Source {
        Source {
            stream: ByteStream::new(seed),
            total,
            sent: 0,
            staged: Vec::with_capacity(CHUNK),
            staged_pos: 0,
            sha: Sha256::new(),
            finished: false,
        }
    }

    pub fn all_sent(&self) -> bool {
        self.sent == self.total
    }

    /// Offers data to `send` (which returns how much it took, or None to stop)
    /// until it takes nothing or the stream is exhausted.
    pub fn pump(&mut self, mut send: impl FnMut(&[u8]) -> Option<usize>) {
        while self.sent < self.total {
            if self.staged_pos == self.staged.len() {
                let n = (self.total - self.stream.position()).min(CHUNK as u64) as usize;
                self.staged.resize(n, 0);
                self.stream.fill(&mut self.staged);
                self.staged_pos = 0;
            }
            let Some(took) = send(&self.staged[self.staged_pos..]) else {
                return;
            };
            let took = took.min(self.staged.len() - self.staged_pos);
            if took == 0 {
                return;
            }
            self.sha
                .update(&self.staged[self.staged_pos..self.staged_pos + took]);
            self.staged_pos += took;
            self.sent += took as u64;
        }
    }

    pub fn sha256_hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

#[derive(Debug)]
pub struct Sink {
    expected: ByteStream,
    total: u64,
    pub received: u64,
    pub first_bad: Option<u64>,
    pub end_of_stream: bool,
    scratch: Vec<u8>,
    sha: Sha256,
}

impl Sink {
    pub fn new(seed: u64, total: u64) -> Sink {
        Sink {
            expected: ByteStream::new(seed),
            total,
            received: 0,
            first_bad: None,
            end_of_stream: false,
            scratch: vec![0; CHUNK],
            sha: Sha256::new(),
        }
    }

    /// Bytes expected in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// All bytes arrived intact and the stream ended.
    pub fn complete(&self) -> bool {
        self.end_of_stream && self.received == self.total && self.first_bad.is_none()
    }

    /// Checks the next received bytes.
    pub fn accept(&mut self, data: &[u8]) {
        self.sha.update(data);
        let offset = self.received;
        self.received += data.len() as u64;
        if self.first_bad.is_some() {
            return;
        }
        let in_range = (self.total.saturating_sub(offset)).min(data.len() as u64) as usize;
        let mut done = 0;
        while done < in_range {
            let n = (in_range - done).min(self.scratch.len());
            self.expected.fill(&mut self.scratch[..n]);
            let got = &data[done..done + n];
            if got != &self.scratch[..n] {
                let i = got
                    .iter()
                    .zip(&self.scratch[..n])
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                self.first_bad = Some(offset + (done + i) as u64);
                return;
            }
            done += n;
        }
        if in_range < data.len() {
            // Bytes past the end of what was sent.
            self.first_bad = Some(self.total);
        }
    }

    pub fn sha256_hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pumped(total: u64, max_take: usize) -> Vec<u8> {
        let mut src = Source::new(9, total);
        let mut out = Vec::new();
        while !src.all_sent() {
            src.pump(|d| {
                let n = d.len().min(max_take);
                out.extend_from_slice(&d[..n]);
                Some(n)
            });
        }
        out
    }

    #[test]
    fn sink_accepts_the_source_stream_cut_anywhere() {
        let data = pumped(200_000, 1000);
        assert_eq!(data.len(), 200_000);
        let mut sink = Sink::new(9, 200_000);
        for piece in data.chunks(777) {
            sink.accept(piece);
        }
        sink.end_of_stream = true;
        assert!(sink.complete());
        let mut src = Source::new(9, 200_000);
        src.pump(|d| Some(d.len()));
        assert_eq!(src.sha256_hex(), sink.sha256_hex());
    }

    #[test]
    fn sink_reports_the_first_wrong_offset() {
        let mut data = pumped(10_000, usize::MAX);
        data[4321] ^= 0x10;
        data[9000] ^= 0x01;
        let mut sink = Sink::new(9, 10_000);
        for piece in data.chunks(1000) {
            sink.accept(piece);
        }
        assert_eq!(sink.first_bad, Some(4321));
        assert!(!sink.complete());
    }

    #[test]
    fn bytes_past_the_end_are_an_error_at_the_end_offset() {
        let data = pumped(100, usize::MAX);
        let mut sink = Sink::new(9, 100);
        sink.accept(&data);
        sink.accept(&[0, 0]);
        assert_eq!(sink.first_bad, Some(100));
    }

    #[test]
    fn source_stops_when_send_takes_nothing() {
        let mut src = Source::new(1, 1000);
        src.pump(|_| Some(0));
        assert_eq!(src.sent, 0);
        src.pump(|_| None);
        assert_eq!(src.sent, 0);
        src.pump(|d| Some(d.len().min(300)));
        assert_eq!(src.sent, 1000);
    }
}
