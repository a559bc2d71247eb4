//! Listening TCP ports.

use crate::{ffi, free, handle, handle_ref, ob_stream_t, OB_NO_ENDPOINT};
use libc::c_int;
use outboard_api::{ListenFamily, ListenFlags, Listener};
use std::ptr;

/// A listening TCP port on the engine's address (from `ob_listen`; free with
/// `ob_listener_close`). The engine accepts connections into the backlog by
/// itself; `ob_accept` hands them out.
pub struct ob_listener_t {
    pub(crate) listener: Listener,
}

/// `ob_listen_with` flag: share the port with other boards' listeners of
/// the same user that set it too (SO_REUSEPORT); connections go to each in turn.
pub const OB_LISTEN_REUSEPORT: u32 = 1;
/// `ob_listen_with` flag: no connections until `ob_listener_accept_on`.
pub const OB_LISTEN_ON_DEMAND: u32 = 2;

/// `ob_listen_with` flag: IPv4 connections only (an AF_INET socket).
/// Without either family flag a listener takes both families.
pub const OB_LISTEN_IPV4_ONLY: u32 = 4;
/// `ob_listen_with` / `ob_listen_addr` flag: IPv6 connections only (an
/// AF_INET6 socket with IPV6_V6ONLY).
pub const OB_LISTEN_IPV6_ONLY: u32 = 8;

/// `ob_listen_with` flags bits 16..32: the RFC 7413 Fast Open queue length
/// (`qlen << OB_LISTEN_FASTOPEN_SHIFT`, Linux's TCP_FASTOPEN); 0: off.
pub const OB_LISTEN_FASTOPEN_SHIFT: u32 = 16;

pub(crate) fn listen_flags(bits: u32) -> Result<ListenFlags, crate::Errno> {
    let all = OB_LISTEN_REUSEPORT | OB_LISTEN_ON_DEMAND | OB_LISTEN_IPV4_ONLY | OB_LISTEN_IPV6_ONLY;
    let both = OB_LISTEN_IPV4_ONLY | OB_LISTEN_IPV6_ONLY;
    let low = bits & ((1 << OB_LISTEN_FASTOPEN_SHIFT) - 1);
    if low & !all != 0 || bits & both == both {
        return Err(crate::EINVAL);
    }
    let family = if bits & OB_LISTEN_IPV4_ONLY != 0 {
        ListenFamily::Ipv4
    } else if bits & OB_LISTEN_IPV6_ONLY != 0 {
        ListenFamily::Ipv6
    } else {
        ListenFamily::Both
    };
    Ok(ListenFlags {
        reuseport: bits & OB_LISTEN_REUSEPORT != 0,
        on_demand: bits & OB_LISTEN_ON_DEMAND != 0,
        family,
        fastopen_qlen: (bits >> OB_LISTEN_FASTOPEN_SHIFT) as u16,
        ..ListenFlags::default()
    })
}

/// A listener opened with `OB_LISTEN_ON_DEMAND` takes connections from now
/// on. Returns 0, or -1 with errno (EINVAL for NULL, ESHUTDOWN when the
/// engine is gone).
#[no_mangle]
pub unsafe extern "C" fn ob_listener_accept_on(l: *mut ob_listener_t) -> c_int {
    ffi(-1, || {
        handle(l)?.listener.accept_on()?;
        Ok(0)
    })
}

/// The next connection the engine accepted, waiting for one as the mode
/// allows. Returns NULL with errno on failure (EAGAIN when non-blocking and
/// none is waiting). The stream takes the board's mode.
#[no_mangle]
pub unsafe extern "C" fn ob_accept(l: *mut ob_listener_t) -> *mut ob_stream_t {
    ffi(ptr::null_mut(), || {
        let stream = handle(l)?.listener.accept()?;
        Ok(Box::into_raw(Box::new(ob_stream_t { stream })))
    })
}

/// Stops listening (connections not yet accepted are reset) and frees the
/// handle. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_listener_close(l: *mut ob_listener_t) -> c_int {
    free(l)
}

/// The listening port, or -1 (EINVAL) for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_listener_port(l: *const ob_listener_t) -> c_int {
    ffi(-1, || Ok(c_int::from(handle_ref(l)?.listener.local_port())))
}

/// Sets how `ob_accept` waits (`OB_MODE_*`). Returns 0, or -1 with EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ob_listener_set_mode(l: *mut ob_listener_t, mode: c_int) -> c_int {
    ffi(-1, || {
        let l = handle(l)?;
        l.listener.set_mode(crate::mode(mode)?);
        Ok(0)
    })
}

/// The listener's endpoint id (for `ob_eq_add`: readable = a connection to
/// accept); `OB_NO_ENDPOINT` for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_listener_id(l: *const ob_listener_t) -> u32 {
    ffi(OB_NO_ENDPOINT, || Ok(handle_ref(l)?.listener.id()))
}
