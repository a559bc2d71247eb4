//! `empty`: does nothing but answer a request with an empty response, so
//! that its cost is the engine's invocation overhead (a benchmark's
//! baseline). Datagrams and messages are ignored.

#![no_std]

use outboard_handler_sdk as ob;

/// One message arrived: a request gets an empty reply, anything else
/// nothing.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, _len: i32) -> i32 {
    if kind == ob::Kind::Request as i32 {
        return ob::ret(&ob::reply(&[]));
    }
    0
}
