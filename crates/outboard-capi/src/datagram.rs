//! UDP sockets: copying and zero-copy datagrams.

use crate::{addr_from_c, addr_to_c, bytes, bytes_mut, ffi, free, handle, handle_ref, ob_addr_t, put_opt, sockaddr, write_v4};
use crate::{EINVAL, OB_NO_ENDPOINT};
use libc::{c_int, c_void, ssize_t};
use outboard_api::Datagram;

/// A UDP socket through the engine (from `ob_bind_udp`; free with
/// `ob_dgram_close`). Received datagrams wait in the socket's mailbox in the
/// board; datagrams to send are written into a board buffer.
pub struct ob_dgram_t {
    pub(crate) dgram: Datagram,
}

/// Sends `buf[0..len]` as one datagram to `ipv4:port` (host byte order).
/// Returns the count sent, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_send_to(d: *mut ob_dgram_t, buf: *const c_void, len: usize, ipv4: u32, port: u16) -> ssize_t {
    ffi(-1, || {
        let d = handle(d)?;
        let n = d.dgram.send_to(bytes(buf, len)?, sockaddr(ipv4, port))?;
        Ok(n as ssize_t)
    })
}

/// Sends `buf[0..len]` as one datagram to `*to` (either family). Returns the
/// count sent, or -1 with errno (EAFNOSUPPORT for an `ob_addr_t.family`
/// that is neither `OB_AF_INET` nor `OB_AF_INET6`; EINVAL for NULL).
#[no_mangle]
pub unsafe extern "C" fn ob_send_to_addr(d: *mut ob_dgram_t, buf: *const c_void, len: usize, to: *const ob_addr_t) -> ssize_t {
    ffi(-1, || {
        let d = handle(d)?;
        let to = addr_from_c(to)?;
        let n = d.dgram.send_to(bytes(buf, len)?, to)?;
        Ok(n as ssize_t)
    })
}

/// Copies the next datagram into `buf` (at most `len` bytes) and its source
/// into `*from_ipv4` (host byte order) and `*from_port` (each may be NULL).
/// Returns its length, or -1 with errno (EAGAIN when non-blocking and none;
/// EAFNOSUPPORT when its source is IPv6 and a source pointer was given: the
/// datagram is consumed — use `ob_recv_from_addr`).
#[no_mangle]
pub unsafe extern "C" fn ob_recv_from(
    d: *mut ob_dgram_t,
    buf: *mut c_void,
    len: usize,
    from_ipv4: *mut u32,
    from_port: *mut u16,
) -> ssize_t {
    ffi(-1, || {
        let d = handle(d)?;
        let (n, from) = d.dgram.recv_from(bytes_mut(buf, len)?)?;
        write_v4(from, from_ipv4, from_port)?;
        Ok(n as ssize_t)
    })
}

/// Copies the next datagram into `buf` (at most `len` bytes) and its source,
/// of either family, into `*from` (may be NULL). Returns its length, or -1
/// with errno (EAGAIN when non-blocking and none).
#[no_mangle]
pub unsafe extern "C" fn ob_recv_from_addr(d: *mut ob_dgram_t, buf: *mut c_void, len: usize, from: *mut ob_addr_t) -> ssize_t {
    ffi(-1, || {
        let d = handle(d)?;
        let (n, src) = d.dgram.recv_from(bytes_mut(buf, len)?)?;
        put_opt(from, addr_to_c(src));
        Ok(n as ssize_t)
    })
}

/// Zero-copy send, step 1: sets `*buf`, `*len` to a board buffer for one
/// datagram. Write it there, then call `ob_dgram_end_put_to`. Returns 0, or
/// -1 with errno (ENOBUFS, EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_begin_put(d: *mut ob_dgram_t, buf: *mut *mut c_void, len: *mut usize) -> c_int {
    ffi(-1, || {
        let d = handle(d)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let room = d.dgram.begin_put()?;
        buf.write(room.as_mut_ptr().cast());
        len.write(room.len());
        Ok(0)
    })
}

/// Zero-copy send, step 2: sends the first `n` bytes of the
/// `ob_dgram_begin_put` buffer to `ipv4:port` (host byte order). Returns 0,
/// or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_end_put_to(d: *mut ob_dgram_t, n: usize, ipv4: u32, port: u16) -> c_int {
    ffi(-1, || {
        handle(d)?.dgram.end_put_to(n, sockaddr(ipv4, port))?;
        Ok(0)
    })
}

/// Zero-copy send, step 2: sends the first `n` bytes of the
/// `ob_dgram_begin_put` buffer to `*to` (either family). Returns 0, or -1
/// with errno (EAFNOSUPPORT for an unknown `ob_addr_t.family`, EINVAL for
/// NULL; the buffer stays taken: retry, or give it back with `n` = 0 and a
/// valid address).
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_end_put_to_addr(d: *mut ob_dgram_t, n: usize, to: *const ob_addr_t) -> c_int {
    ffi(-1, || {
        let d = handle(d)?;
        let to = addr_from_c(to)?;
        d.dgram.end_put_to(n, to)?;
        Ok(0)
    })
}

/// Zero-copy receive, step 1: sets `*buf`, `*len` to the next datagram in
/// place and `*from_ipv4`, `*from_port` to its source (these two may be
/// NULL). It stays valid until `ob_dgram_end_get`. Returns 0, or -1 with
/// errno (EAGAIN when non-blocking and none; EAFNOSUPPORT when its source
/// is IPv6 and a source pointer was given: the datagram is given back to the
/// engine — use `ob_dgram_begin_get_addr`).
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_begin_get(
    d: *mut ob_dgram_t,
    buf: *mut *const c_void,
    len: *mut usize,
    from_ipv4: *mut u32,
    from_port: *mut u16,
) -> c_int {
    ffi(-1, || {
        let d = handle(d)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let (data, from) = d.dgram.begin_get()?;
        let (at, n) = (data.as_ptr(), data.len());
        if let Err(e) = write_v4(from, from_ipv4, from_port) {
            let _ = d.dgram.end_get();
            return Err(e);
        }
        buf.write(at.cast());
        len.write(n);
        Ok(0)
    })
}

/// Zero-copy receive, step 1, either family: as `ob_dgram_begin_get`, with
/// the source into `*from` (may be NULL). Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_begin_get_addr(
    d: *mut ob_dgram_t,
    buf: *mut *const c_void,
    len: *mut usize,
    from: *mut ob_addr_t,
) -> c_int {
    ffi(-1, || {
        let d = handle(d)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let (data, src) = d.dgram.begin_get()?;
        buf.write(data.as_ptr().cast());
        len.write(data.len());
        put_opt(from, addr_to_c(src));
        Ok(0)
    })
}

/// Zero-copy receive, step 2: gives the datagram `ob_dgram_begin_get`
/// returned back to the engine. Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_end_get(d: *mut ob_dgram_t) -> c_int {
    ffi(-1, || {
        handle(d)?.dgram.end_get()?;
        Ok(0)
    })
}

/// Closes the socket and frees the handle. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_close(d: *mut ob_dgram_t) -> c_int {
    free(d)
}

/// Sets how this socket's calls wait (`OB_MODE_*`). Returns 0, or -1 with EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_set_mode(d: *mut ob_dgram_t, mode: c_int) -> c_int {
    ffi(-1, || {
        let d = handle(d)?;
        d.dgram.set_mode(crate::mode(mode)?);
        Ok(0)
    })
}

/// The local UDP port, or -1 (EINVAL) for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_local_port(d: *const ob_dgram_t) -> c_int {
    ffi(-1, || Ok(c_int::from(handle_ref(d)?.dgram.local_port())))
}

/// The socket's endpoint id (for `ob_eq_add`); `OB_NO_ENDPOINT` for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_dgram_id(d: *const ob_dgram_t) -> u32 {
    ffi(OB_NO_ENDPOINT, || Ok(handle_ref(d)?.dgram.id()))
}
