//! logfmt lines on stderr, at the level `OUTBOARD_LOG` sets (default warn).

use std::sync::atomic::{AtomicU8, Ordering};

const UNSET: u8 = 255;
static LEVEL: AtomicU8 = AtomicU8::new(UNSET);

fn level() -> u8 {
    let l = LEVEL.load(Ordering::Relaxed);
    if l != UNSET {
        return l;
    }
    let l = match std::env::var("OUTBOARD_LOG").as_deref() {
        Ok("error") => 0,
        Ok("info") => 2,
        Ok("debug") => 3,
        _ => 1,
    };
    LEVEL.store(l, Ordering::Relaxed);
    l
}

/// Reads `OUTBOARD_LOG` now (at load: programs may clear their environment).
pub fn prime() {
    let _ = level();
}

fn emit(lvl: u8, name: &str, msg: &str) {
    if lvl > level() {
        return;
    }
    let line = format!("outboard-shim level={name} pid={} msg={msg:?}\n", std::process::id());
    // SAFETY: writes our own buffer to stderr (straight to libc: we are inside the shim).
    unsafe { crate::real::write(2, line.as_ptr().cast(), line.len()) };
}

pub fn error(msg: &str) {
    emit(0, "error", msg);
}
pub fn warn(msg: &str) {
    emit(1, "warn", msg);
}
pub fn info(msg: &str) {
    emit(2, "info", msg);
}
pub fn debug_enabled() -> bool {
    level() >= 3
}
pub fn debug(msg: &str) {
    emit(3, "debug", msg);
}

/// A call the shim refused for an engine socket: counted, and named at debug level.
pub fn unsupported(call: &str, what: &str, errno: i32) {
    crate::state::count(crate::state::Count::Unsupported);
    if debug_enabled() {
        debug(&format!("unsupported call={call} what={what} errno={}", std::io::Error::from_raw_os_error(errno)));
    }
}
