//! `hog` (a hostile handler, for tests): every message grows the linear
//! memory one page at a time until `memory.grow` fails (the engine's
//! `memory_mb` cap), then answers a request with the page count reached, 4
//! bytes little-endian. Datagrams and messages get no answer; the pages
//! stay allocated until the instance is discarded.

#![no_std]

use core::arch::wasm32::{memory_grow, memory_size};
use outboard_handler_sdk as ob;

/// One message arrived: grow until refused, answer a request with the size.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, _len: i32) -> i32 {
    while memory_grow(0, 1) != usize::MAX {}
    let pages = memory_size(0) as u32;
    if ob::Kind::from_i32(kind) == Some(ob::Kind::Request) {
        return ob::ret(&ob::reply(&pages.to_le_bytes()));
    }
    0
}
