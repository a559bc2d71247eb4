//! `filter`: a mailbox filter. Every datagram or message arriving at its
//! mailbox is forwarded (`enqueue`, as a datagram) to mailbox 100 of the
//! same engine, except that:
//!
//! - a message starting with `DROP` is dropped;
//! - a message starting with `lower:` is forwarded without that prefix and
//!   with the rest upper-cased (ASCII).
//!
//! Requests are answered `?`. A message that cannot be forwarded (mailbox
//! 100 missing or full, or the message larger than the handler's memory)
//! is lost, and the invocation returns the error.

#![no_std]

use ob::Kind;
use outboard_handler_sdk as ob;

/// Where messages go.
const TARGET_MAILBOX: u32 = 100;

/// One message arrived: filter and forward it.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, len: i32) -> i32 {
    if Kind::from_i32(kind) == Some(Kind::Request) {
        return ob::ret(&ob::reply(b"?"));
    }
    let r = ob::with_input(len, |msg| {
        if msg.starts_with(b"DROP") {
            Ok(())
        } else if let Some(rest) = msg.strip_prefix(b"lower:") {
            // `rest` borrows `msg`; upper-case it in place.
            let start = msg.len() - rest.len();
            let rest = &mut msg[start..];
            rest.make_ascii_uppercase();
            ob::enqueue(TARGET_MAILBOX, rest)
        } else {
            ob::enqueue(TARGET_MAILBOX, msg)
        }
    });
    ob::ret(&r.and_then(|r| r))
}
