//! Outboard's native API for C: `liboutboard.so` / `liboutboard.a` and the
//! header `include/outboard.h` (generated from this crate by cbindgen; see
//! `tests/header.rs`).
//!
//! Every `ob_*` function is a thin wrapper over the same call of the Rust
//! API (`outboard-api`). The library links no engine: `ob_attach` reaches a
//! daemon. The engine in this process (`ob_embedded_*`) is in
//! `liboutboard_embedded` (`crates/outboard-embedded`), which builds on this
//! crate's helpers (public, `#[doc(hidden)]`, for it only). The rules, which
//! the header repeats for C readers:
//!
//! - Handles (`ob_board_t`, `ob_stream_t`, ...) are opaque; each is made by
//!   one `ob_*` call and freed by exactly one close/free call.
//! - A NULL handle or out-pointer gives -1 (or NULL) with `errno = EINVAL`;
//!   it never crashes. A dangling or already-freed handle is undefined
//!   behaviour, as with `free`.
//! - Errors return -1 (or NULL) and set `errno` (`Error::errno` in Rust).
//! - A panic inside the library is caught: -1 (or NULL) with `errno = EIO`.
//! - A board and every handle made from it are used from one thread at a
//!   time (the Rust board is `!Send`); attach one board per thread.

// The C contract (valid handles, buffers of the stated length) is written
// once in the header's preamble and on each function, not in `# Safety`
// sections that C readers would not see.
#![allow(clippy::missing_safety_doc)]
// C names: `ob_stream_t` etc.
#![allow(non_camel_case_types)]

// In this order in the header.
mod addr;
mod board;
mod listener;
mod stream;
mod options;
mod datagram;
mod events;
mod mailbox;
mod handler;

pub use addr::*;
pub use board::*;
pub use datagram::*;
pub use events::*;
pub use listener::*;
pub use mailbox::*;
pub use options::*;
pub use stream::*;

use libc::{c_char, c_int};
use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Calls that cannot complete now wait: spin briefly, then sleep until the engine posts news (the default).
pub const OB_MODE_BLOCKING: c_int = 0;
/// Calls that cannot complete now fail with `errno = EAGAIN`.
pub const OB_MODE_NONBLOCKING: c_int = 1;
/// Calls that cannot complete now spin (never sleep): lowest latency, one core busy while waiting.
pub const OB_MODE_POLLING: c_int = 2;

/// Returned by the `*_id` functions for a NULL handle (with `errno = EINVAL`).
pub const OB_NO_ENDPOINT: u32 = u32::MAX;

/// An errno value on its way out to C.
#[doc(hidden)]
pub struct Errno(pub c_int);

impl From<outboard_api::Error> for Errno {
    fn from(e: outboard_api::Error) -> Errno {
        Errno(e.errno())
    }
}

#[doc(hidden)]
pub const EINVAL: Errno = Errno(libc::EINVAL);

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno.
    unsafe { *libc::__errno_location() = e }
}

/// Runs `f`, turning an error into `fail` + errno and a panic into `fail` + EIO.
#[doc(hidden)]
pub fn ffi<T>(fail: T, f: impl FnOnce() -> Result<T, Errno>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(Errno(e))) => {
            set_errno(e);
            fail
        }
        Err(_) => {
            set_errno(libc::EIO);
            fail
        }
    }
}

/// `&mut *p`, or EINVAL for NULL.
pub(crate) unsafe fn handle<'a, T>(p: *mut T) -> Result<&'a mut T, Errno> {
    p.as_mut().ok_or(EINVAL)
}

/// `&*p`, or EINVAL for NULL.
#[doc(hidden)]
pub unsafe fn handle_ref<'a, T>(p: *const T) -> Result<&'a T, Errno> {
    p.as_ref().ok_or(EINVAL)
}

/// Frees a handle made by `Box::into_raw` (dropping what it holds), or EINVAL for NULL.
pub(crate) unsafe fn free<T>(p: *mut T) -> c_int {
    ffi(-1, || {
        if p.is_null() {
            return Err(EINVAL);
        }
        drop(Box::from_raw(p));
        Ok(0)
    })
}

/// A NUL-terminated UTF-8 string, or EINVAL for NULL or bad UTF-8.
#[doc(hidden)]
pub unsafe fn c_str<'a>(p: *const c_char) -> Result<&'a str, Errno> {
    if p.is_null() {
        return Err(EINVAL);
    }
    CStr::from_ptr(p).to_str().map_err(|_| EINVAL)
}

/// `buf[..len]` as a slice (empty for len 0, even when `buf` is NULL).
pub(crate) unsafe fn bytes<'a>(buf: *const libc::c_void, len: usize) -> Result<&'a [u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() || len > isize::MAX as usize {
        return Err(EINVAL);
    }
    Ok(std::slice::from_raw_parts(buf as *const u8, len))
}

/// `buf[..len]` as a mutable slice (empty for len 0, even when `buf` is NULL).
pub(crate) unsafe fn bytes_mut<'a>(buf: *mut libc::c_void, len: usize) -> Result<&'a mut [u8], Errno> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() || len > isize::MAX as usize {
        return Err(EINVAL);
    }
    Ok(std::slice::from_raw_parts_mut(buf as *mut u8, len))
}

/// Stores `v` through `p` when `p` is not NULL.
pub(crate) unsafe fn put_opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        p.write(v);
    }
}

pub(crate) fn mode(m: c_int) -> Result<outboard_api::Mode, Errno> {
    match m {
        OB_MODE_BLOCKING => Ok(outboard_api::Mode::Blocking),
        OB_MODE_NONBLOCKING => Ok(outboard_api::Mode::NonBlocking),
        OB_MODE_POLLING => Ok(outboard_api::Mode::Polling),
        _ => Err(EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn null_handles_give_einval_not_a_crash() {
        unsafe {
            set_errno(0);
            assert!(ob_attach(std::ptr::null(), std::ptr::null()).is_null());
            assert_eq!(errno(), libc::EINVAL);
            set_errno(0);
            assert_eq!(ob_send(std::ptr::null_mut(), b"x".as_ptr().cast(), 1), -1);
            assert_eq!(errno(), libc::EINVAL);
            set_errno(0);
            assert_eq!(ob_close(std::ptr::null_mut()), -1);
            assert_eq!(errno(), libc::EINVAL);
            assert_eq!(ob_stream_id(std::ptr::null()), OB_NO_ENDPOINT);
            assert_eq!(ob_eq_wait(std::ptr::null_mut(), std::ptr::null_mut(), 0, 0), -1);
            assert!(ob_listen(std::ptr::null_mut(), 80, 8).is_null());
            assert!(ob_listen_with(std::ptr::null_mut(), 80, 8, OB_LISTEN_REUSEPORT).is_null());
            assert_eq!(errno(), libc::EINVAL);
            // Unknown flags are refused before the board is looked at.
            set_errno(0);
            assert!(ob_listen_with(std::ptr::null_mut(), 80, 8, 1 << 7).is_null());
            assert_eq!(errno(), libc::EINVAL);
            assert!(ob_inherit_listener(std::ptr::null_mut(), 1, 0, OB_LISTEN_ON_DEMAND).is_null());
            assert_eq!(ob_inherit_key(std::ptr::null()), 0);
            assert_eq!(ob_listener_accept_on(std::ptr::null_mut()), -1);
            assert_eq!(ob_stream_release(std::ptr::null_mut()), -1);
            assert_eq!(ob_stream_shard(std::ptr::null()), OB_NO_ENDPOINT);
            assert_eq!(ob_child_of(std::ptr::null_mut(), 1), -1);
            assert!(ob_adopt_stream(std::ptr::null_mut(), 1, 0, 0).is_null());
            assert_eq!(ob_engine_alive(std::ptr::null()), -1);
        }
    }

    #[test]
    fn panics_become_eio() {
        set_errno(0);
        let r: c_int = ffi(-1, || panic!("boom"));
        assert_eq!(r, -1);
        assert_eq!(errno(), libc::EIO);
    }

    #[test]
    fn modes_map_and_reject_unknown_values() {
        assert_eq!(mode(OB_MODE_POLLING).ok(), Some(outboard_api::Mode::Polling));
        assert!(mode(7).is_err());
    }

    #[test]
    fn default_attach_options_mirror_the_rust_defaults() {
        let o = ob_attach_options_default();
        let r = outboard_api::AttachOptions::default();
        assert_eq!(o.mode, OB_MODE_BLOCKING);
        assert_eq!(u128::from(o.spin_us), r.spin.as_micros());
        assert_eq!(board::params_from_c(&o.params), r.params);
    }
}
