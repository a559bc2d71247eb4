//! `spin` (a hostile handler, for tests): every message sends it into an
//! endless loop, which the engine's CPU deadline must interrupt (an
//! `overrun` trap; a request fails). It never replies.

#![no_std]

use core::sync::atomic::{AtomicU64, Ordering};

/// Counts loop iterations, so the loop has an effect and is kept.
static SPINS: AtomicU64 = AtomicU64::new(0);

/// One message arrived: loop forever.
#[no_mangle]
pub extern "C" fn ob_message(_kind: i32, _len: i32) -> i32 {
    loop {
        SPINS.fetch_add(1, Ordering::Relaxed);
    }
}

// The SDK is linked for `ob_abi` and the panic handler.
use outboard_handler_sdk as _;
