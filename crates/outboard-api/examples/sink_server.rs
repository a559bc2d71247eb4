//! Accepts one connection and reads it to the end in place (`begin_get` /
//! `end_get`: no copy in the application), hashing what arrives.
//!
//! usage: sink_server ENGINE_NAME PORT
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;
use sha2::{Digest, Sha256};

fn main() {
    let usage = "sink_server ENGINE_NAME PORT";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut l = board.listen(num(&arg(2, usage)) as u16, 16).unwrap_or_else(|e| fail("listen", e));
    let mut s = l.accept().unwrap_or_else(|e| fail("accept", e));
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
