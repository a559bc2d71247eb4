//! Connects to IP:PORT and sends BYTES of the seeded pattern, written in
//! place (`begin_put` / `end_put`), then closes and waits for the server to close.
//!
//! usage: upload ENGINE_NAME IP:PORT BYTES
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;
use sha2::{Digest, Sha256};

fn main() {
    let usage = "upload ENGINE_NAME IP:PORT BYTES";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let to: std::net::SocketAddrV4 = arg(2, usage).parse().unwrap_or_else(|e| fail("address", e));
    let total = num(&arg(3, usage));
    let mut s = board.connect(to).unwrap_or_else(|e| fail("connect", e));
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
    let mut tail = [0u8; 64];
    while s.recv(&mut tail).unwrap_or_else(|e| fail("linger", e)) > 0 {}
    report(sent, h);
}
