//! Connects to IP:PORT and reads until the server closes, in place,
//! hashing what arrives.
//!
//! usage: fetch ENGINE_NAME IP:PORT
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;
use sha2::{Digest, Sha256};

fn main() {
    let usage = "fetch ENGINE_NAME IP:PORT";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let to: std::net::SocketAddrV4 = arg(2, usage).parse().unwrap_or_else(|e| fail("address", e));
    let mut s = board.connect(to).unwrap_or_else(|e| fail("connect", e));
    let (mut h, mut total) = (Sha256::new(), 0u64);
    loop {
        let buf = s.begin_get().unwrap_or_else(|e| fail("receive", e));
        if buf.is_empty() {
            break;
        }
        h.update(buf);
        let n = buf.len();
        total += n as u64;
        s.end_get(n).unwrap_or_else(|e| fail("receive", e));
    }
    report(total, h);
}
