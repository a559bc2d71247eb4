//! `echo`: answers each request with its own bytes (any size the handler's
//! memory cap allows); datagrams and messages are ignored. For benchmarks
//! and tests.

#![no_std]

use ob::Kind;
use outboard_handler_sdk as ob;

/// One message arrived: a request is answered with its own bytes.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, len: i32) -> i32 {
    if Kind::from_i32(kind) != Some(Kind::Request) {
        return 0;
    }
    // Read the request into scratch memory and reply with it.
    ob::ret(&ob::with_input(len, |req| ob::reply(req)).and_then(|r| r))
}
