//! Connects to IP:PORT and sends BYTES of the seeded pattern, written in
//! place (`begin_put` / `end_put`), then closes and waits for the server to close.
//!
//! usage: upload ENGINE_NAME IP:PORT BYTES
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;

fn main() {
    let usage = "upload ENGINE_NAME IP:PORT BYTES";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let to: std::net::SocketAddrV4 = arg(2, usage).parse().unwrap_or_else(|e| fail("address", e));
    let total = num(&arg(3, usage));
    let mut s = board.connect(to).unwrap_or_else(|e| fail("connect", e));
    let (sent, h) = write_pattern_in_place(&mut s, total);
    report(sent, h);
}
