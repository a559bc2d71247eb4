//! Accepts one connection and sends BYTES of the seeded pattern, written in
//! place into the transmit region (`begin_put` / `end_put`), then closes.
//!
//! usage: source_server ENGINE_NAME PORT BYTES
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;
use sha2::{Digest, Sha256};

fn main() {
    let usage = "source_server ENGINE_NAME PORT BYTES";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut l = board.listen(num(&arg(2, usage)) as u16, 16).unwrap_or_else(|e| fail("listen", e));
    let total = num(&arg(3, usage));
    let mut s = l.accept().unwrap_or_else(|e| fail("accept", e));
    let (mut h, mut sent) = (Sha256::new(), 0u64);
    while sent < total {
        let buf = s.begin_put().unwrap_or_else(|e| fail("send", e));
        let n = buf.len().min((total - sent) as usize);
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern(sent + k as u64);
        }
        h.update(&buf[..n]);
        s.end_put(n).unwrap_or_else(|e| fail("send", e));
        sent += n as u64;
    }
    s.shutdown().unwrap_or_else(|e| fail("shutdown", e));
    // Linger until the peer closes: every byte is then acknowledged.
    let mut tail = [0u8; 64];
    while s.recv(&mut tail).unwrap_or(0) > 0 {}
    report(sent, h);
}
