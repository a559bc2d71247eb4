//! `kv`: a key-value store served over RPC, with the protocol of the board
//! example `msg_kv_server` (crates/outboard-api/examples/msg_kv_server.rs):
//!
//! | request           | reply                  |
//! |-------------------|------------------------|
//! | `P key \0 value`  | `+`                    |
//! | `G key`           | `+value`, or `-`       |
//! | `D key`           | `+`, or `-`            |
//! | anything else     | `?` (the empty request too) |
//!
//! The data lives in the engine's key-value store for this handler
//! (`kv_put`/`kv_get`/`kv_del`), not in the instance's memory, so it
//! survives a trap or a replacement of the instance. That store takes keys
//! of 1..=256 bytes and values up to 64 KiB: a `P` whose key is empty or
//! longer is answered `?`, and `G`/`D` of such a key `-` (it cannot be
//! there). A `P` the store has no room for fails the call (no reply).
//!
//! Only requests (kind 3) are served; datagrams and messages are ignored.
//! Requests are read into a static 64 KiB buffer: a larger one fails the
//! call.

#![no_std]

use ob::{Errno, Kind, StaticCell, MAX_KEY, MAX_VALUE};
use outboard_handler_sdk as ob;

/// The largest request served (bytes).
const MAX_REQUEST: usize = 64 * 1024;

/// The request being served, and the reply being built (`+` and a value).
/// Both start all-zero, so they cost memory, not module size.
struct Buffers {
    req: [u8; MAX_REQUEST],
    out: [u8; 1 + MAX_VALUE],
}

static BUFFERS: StaticCell<Buffers> = StaticCell::new(Buffers {
    req: [0; MAX_REQUEST],
    out: [0; 1 + MAX_VALUE],
});

/// One message arrived: a request is answered, anything else ignored.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, len: i32) -> i32 {
    if Kind::from_i32(kind) != Some(Kind::Request) {
        return 0;
    }
    match BUFFERS.with(|b| serve(len, b)) {
        Some(r) => ob::ret(&r),
        None => Errno::EAGAIN.to_ret(),
    }
}

/// Reads one request, runs it against the store and replies.
fn serve(len: i32, b: &mut Buffers) -> Result<(), Errno> {
    let req = ob::read_input(len, &mut b.req)?;
    let (op, key_and_more) = match req.split_first() {
        Some((op, rest)) => (*op, rest),
        None => return ob::reply(b"?"),
    };
    match op {
        b'P' => {
            let Some(z) = key_and_more.iter().position(|c| *c == 0) else {
                return ob::reply(b"?");
            };
            let (key, value) = (&key_and_more[..z], &key_and_more[z + 1..]);
            if !valid_key(key) || value.len() > MAX_VALUE {
                return ob::reply(b"?");
            }
            ob::kv_put(key, value)?;
            ob::reply(b"+")
        }
        b'G' => {
            if !valid_key(key_and_more) {
                return ob::reply(b"-");
            }
            match ob::kv_get(key_and_more, &mut b.out[1..]) {
                Ok(n) if n <= MAX_VALUE => {
                    b.out[0] = b'+';
                    ob::reply(&b.out[..1 + n])
                }
                // A value larger than the store allows: cannot be answered.
                Ok(_) => Err(Errno::EMSGSIZE),
                Err(Errno::ENOENT) => ob::reply(b"-"),
                Err(e) => Err(e),
            }
        }
        b'D' => {
            if !valid_key(key_and_more) {
                return ob::reply(b"-");
            }
            match ob::kv_del(key_and_more) {
                Ok(()) => ob::reply(b"+"),
                Err(Errno::ENOENT) => ob::reply(b"-"),
                Err(e) => Err(e),
            }
        }
        _ => ob::reply(b"?"),
    }
}

/// Whether the engine's store takes `key` (1..=256 bytes).
fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY
}
