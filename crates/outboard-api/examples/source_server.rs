//! Accepts one connection and sends BYTES of the seeded pattern, written in
//! place into the transmit region (`begin_put` / `end_put`), then closes.
//!
//! usage: source_server ENGINE_NAME PORT BYTES
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;

fn main() {
    let usage = "source_server ENGINE_NAME PORT BYTES";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut l = board.listen(num(&arg(2, usage)) as u16, 16).unwrap_or_else(|e| fail("listen", e));
    let total = num(&arg(3, usage));
    let mut s = l.accept().unwrap_or_else(|e| fail("accept", e));
    let (sent, h) = write_pattern_in_place(&mut s, total);
    report(sent, h);
}
