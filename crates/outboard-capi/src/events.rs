//! One event queue over many endpoints of a board.

use crate::{ffi, free, handle, Errno, EINVAL};
use libc::c_int;
use outboard_api::{EventQueue, Interest, Ready};
use std::collections::VecDeque;
use std::time::Duration;

/// Interest and readiness bit: data to read, a connection to accept, or end of stream.
pub const OB_READABLE: u32 = 1;
/// Interest and readiness bit: room to send.
pub const OB_WRITABLE: u32 = 2;
/// Readiness bit: the endpoint failed (the next call on it returns the error).
pub const OB_ERROR: u32 = 4;
/// Readiness bit: the peer closed its side.
pub const OB_HUP: u32 = 8;

/// One ready endpoint, as `ob_eq_wait` reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ob_ready_t {
    /// The token given to `ob_eq_add` / `ob_eq_modify`.
    pub token: u64,
    /// The endpoint id.
    pub endpoint: u32,
    /// `OB_READABLE | OB_WRITABLE | OB_ERROR | OB_HUP` bits.
    pub events: u32,
}

/// An event queue (from `ob_event_queue`; free with `ob_eq_free`): the
/// engine posts one event per endpoint that changed, so a wait costs O(1)
/// per ready endpoint, not O(endpoints). Level-triggered: an endpoint stays
/// reported while it is ready.
pub struct ob_event_queue_t {
    eq: EventQueue,
    /// What the last Rust `wait` gave.
    got: Vec<Ready>,
    /// Ready endpoints a short `out` array had no room for: handed out first next time.
    pending: VecDeque<Ready>,
}

impl ob_event_queue_t {
    pub(crate) fn new(eq: EventQueue) -> ob_event_queue_t {
        ob_event_queue_t { eq, got: Vec::new(), pending: VecDeque::new() }
    }
}

fn to_interest(bits: u32) -> Result<Interest, Errno> {
    if bits & !(OB_READABLE | OB_WRITABLE) != 0 {
        return Err(EINVAL);
    }
    Ok(Interest { readable: bits & OB_READABLE != 0, writable: bits & OB_WRITABLE != 0 })
}

fn events(r: &Ready) -> u32 {
    let bit = |on: bool, b: u32| if on { b } else { 0 };
    bit(r.readable, OB_READABLE) | bit(r.writable, OB_WRITABLE) | bit(r.error, OB_ERROR) | bit(r.hup, OB_HUP)
}

/// Registers endpoint `endpoint` (an `ob_*_id` of this board) with `token`
/// (returned in its events) and `interest` (`OB_READABLE | OB_WRITABLE`).
/// Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_eq_add(eq: *mut ob_event_queue_t, endpoint: u32, token: u64, interest: u32) -> c_int {
    ffi(-1, || {
        let q = handle(eq)?;
        q.eq.add(endpoint, token, to_interest(interest)?)?;
        Ok(0)
    })
}

/// Changes the token and interest of a registered endpoint. Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_eq_modify(eq: *mut ob_event_queue_t, endpoint: u32, token: u64, interest: u32) -> c_int {
    ffi(-1, || {
        let q = handle(eq)?;
        let want = to_interest(interest)?;
        q.eq.modify(endpoint, token, want)?;
        // Events held back for a short `out` array follow the new registration.
        let mask = interest | OB_ERROR | OB_HUP;
        q.pending.retain_mut(|r| {
            if r.endpoint == endpoint {
                r.token = token;
                r.readable &= want.readable;
                r.writable &= want.writable;
            }
            r.endpoint != endpoint || events(r) & mask != 0
        });
        Ok(0)
    })
}

/// Unregisters an endpoint (do it before closing the endpoint). Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_eq_remove(eq: *mut ob_event_queue_t, endpoint: u32) -> c_int {
    ffi(-1, || {
        let q = handle(eq)?;
        q.eq.remove(endpoint)?;
        q.pending.retain(|r| r.endpoint != endpoint);
        Ok(0)
    })
}

/// Waits for ready endpoints and writes up to `max` of them to `out`,
/// waiting up to `timeout_ms` milliseconds (-1: forever, 0: just look) in
/// the board's mode. Returns how many it wrote (0 on timeout), or -1 with
/// errno (ESHUTDOWN once the engine is gone). Endpoints beyond `max` are
/// returned by the next call before it waits again, and may no longer be
/// ready by then: handle them with non-blocking calls (or `ob_begin_get_put`).
#[no_mangle]
pub unsafe extern "C" fn ob_eq_wait(eq: *mut ob_event_queue_t, out: *mut ob_ready_t, max: usize, timeout_ms: c_int) -> c_int {
    ffi(-1, || {
        let q = handle(eq)?;
        if out.is_null() || max == 0 {
            return Err(EINVAL);
        }
        if q.pending.is_empty() {
            let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
            q.eq.wait(&mut q.got, timeout)?;
            q.pending.extend(q.got.drain(..));
        }
        let n = q.pending.len().min(max).min(c_int::MAX as usize);
        for (i, r) in q.pending.drain(..n).enumerate() {
            out.add(i).write(ob_ready_t { token: r.token, endpoint: r.endpoint, events: events(&r) });
        }
        Ok(n as c_int)
    })
}

/// Frees the event queue. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_eq_free(eq: *mut ob_event_queue_t) -> c_int {
    free(eq)
}
