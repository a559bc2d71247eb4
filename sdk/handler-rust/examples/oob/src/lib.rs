//! `oob` (a hostile handler, for tests): every message makes it read near
//! the top of the 32-bit address space, far beyond its memory; wasm's bounds
//! check turns that into a trap (out of bounds), which must discard the
//! instance and fail a request. It never replies.

#![no_std]

use outboard_handler_sdk as ob;

/// An address no handler memory reaches (4 GiB less 16 bytes).
const FAR: usize = 0xFFFF_FFF0;

/// One message arrived: read, then write, outside the memory.
#[no_mangle]
pub extern "C" fn ob_message(_kind: i32, _len: i32) -> i32 {
    // SAFETY: none; this is the point. The volatile access is compiled
    // as-is, an `i32.load` that traps.
    unsafe {
        let v = core::ptr::read_volatile(FAR as *const u32);
        core::ptr::write_volatile(FAR as *mut u32, v.wrapping_add(1));
    }
    // Not reached; were it, the request would be answered as a bug.
    ob::ret(&ob::reply(b"oob: not trapped"))
}
