//! Accepts one connection and reads it to the end in place (`begin_get` /
//! `end_get`: no copy in the application), hashing what arrives.
//!
//! usage: sink_server ENGINE_NAME PORT
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;

fn main() {
    let usage = "sink_server ENGINE_NAME PORT";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut l = board.listen(num(&arg(2, usage)) as u16, 16).unwrap_or_else(|e| fail("listen", e));
    let mut s = l.accept().unwrap_or_else(|e| fail("accept", e));
    let (total, h) = read_to_end_in_place(&mut s);
    report(total, h);
}
