//! Connects to IP:PORT (IPv4, or `[IPv6]:PORT` on a dual-stack engine) and reads until the server closes, in place,
//! hashing what arrives.
//!
//! usage: fetch ENGINE_NAME IP:PORT
//! prints: {"bytes": N, "sha256": "…"}

mod common;
use common::*;

fn main() {
    let usage = "fetch ENGINE_NAME IP:PORT";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let to: std::net::SocketAddr = arg(2, usage).parse().unwrap_or_else(|e| fail("address", e));
    let mut s = board.connect(to).unwrap_or_else(|e| fail("connect", e));
    let (total, h) = read_to_end_in_place(&mut s);
    report(total, h);
}
