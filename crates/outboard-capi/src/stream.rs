//! TCP streams: copying and zero-copy send and receive.

use crate::{addr_to_c, bytes, bytes_mut, ffi, free, handle, handle_ref, ob_addr_t, write_v4, Errno, EINVAL, OB_NO_ENDPOINT};
use libc::{c_int, c_void, ssize_t};
use outboard_api::Stream;

/// A TCP stream through the engine (from `ob_connect` or `ob_accept`; free
/// with `ob_close`). Its bytes live in the board: received bytes in one
/// region (read them in place with `ob_begin_get`/`ob_end_get` or copy them
/// out with `ob_recv`), bytes to send in another (fill it in place with
/// `ob_begin_put`/`ob_end_put` or copy in with `ob_send`).
pub struct ob_stream_t {
    pub(crate) stream: Stream,
}

/// Copies up to `len` bytes of `buf` into the stream: as many as fit now, at
/// least 1 unless the stream is non-blocking. Returns the count, or -1 with
/// errno (EAGAIN, EPIPE after `ob_shutdown`, ECONNRESET, ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_send(s: *mut ob_stream_t, buf: *const c_void, len: usize) -> ssize_t {
    ffi(-1, || {
        let s = handle(s)?;
        let n = s.stream.send(bytes(buf, len)?)?;
        Ok(n as ssize_t)
    })
}

/// Sends all `len` bytes of `buf`, waiting for room as the mode allows.
/// Returns 0, or -1 with errno (a non-blocking stream gives EAGAIN after a
/// partial send of unknown length: use `ob_send` there).
#[no_mangle]
pub unsafe extern "C" fn ob_send_all(s: *mut ob_stream_t, buf: *const c_void, len: usize) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        s.stream.send_all(bytes(buf, len)?)?;
        Ok(0)
    })
}

/// Copies the `iovcnt` pieces at `iov`, in order, into the stream (a
/// `writev`): as many bytes as fit now, at least 1 unless the stream is
/// non-blocking, told to the engine with one push, so small pieces leave in
/// one segment with TCP_NODELAY. Returns the count, or -1 with errno as
/// `ob_send` (and EINVAL for a count outside 0..=1024 or a piece longer
/// than SSIZE_MAX, EFAULT for a NULL `iov` or a NULL piece with a length).
#[no_mangle]
pub unsafe extern "C" fn ob_sendv(s: *mut ob_stream_t, iov: *const libc::iovec, iovcnt: c_int) -> ssize_t {
    ffi(-1, || {
        let s = handle(s)?;
        let pieces: Vec<&[u8]> = iovecs(iov, iovcnt)?.iter().map(|e| bytes(e.iov_base, e.iov_len)).collect::<Result<_, _>>()?;
        Ok(s.stream.send_vectored(&pieces)? as ssize_t)
    })
}

/// Fills the `iovcnt` pieces at `iov`, each before the next, with received
/// bytes (a `readv`), and tells the engine with one `CONSUMED`. Returns the
/// count, 0 at end of stream, or -1 with errno as `ob_recv` (and the
/// vector's errors as `ob_sendv`).
#[no_mangle]
pub unsafe extern "C" fn ob_recvv(s: *mut ob_stream_t, iov: *const libc::iovec, iovcnt: c_int) -> ssize_t {
    ffi(-1, || {
        let s = handle(s)?;
        let mut pieces: Vec<&mut [u8]> = iovecs(iov, iovcnt)?.iter().map(|e| bytes_mut(e.iov_base, e.iov_len)).collect::<Result<_, _>>()?;
        Ok(s.stream.recv_vectored(&mut pieces)? as ssize_t)
    })
}

/// The `iovcnt` entries at `iov`, checked as `readv`/`writev` check them:
/// a count outside 0..=`UIO_MAXIOV` or an entry longer than `SSIZE_MAX` is
/// EINVAL, a NULL vector or a NULL piece with a length EFAULT.
unsafe fn iovecs<'a>(iov: *const libc::iovec, iovcnt: c_int) -> Result<&'a [libc::iovec], Errno> {
    if !(0..=libc::UIO_MAXIOV).contains(&iovcnt) {
        return Err(EINVAL);
    }
    if iovcnt == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    let entries = std::slice::from_raw_parts(iov, iovcnt as usize);
    for e in entries {
        if e.iov_len > isize::MAX as usize {
            return Err(EINVAL);
        }
        if e.iov_len > 0 && e.iov_base.is_null() {
            return Err(Errno(libc::EFAULT));
        }
    }
    Ok(entries)
}

/// Copies up to `len` received bytes into `buf`. Returns the count, 0 at end
/// of stream, or -1 with errno (EAGAIN when non-blocking and nothing is there).
#[no_mangle]
pub unsafe extern "C" fn ob_recv(s: *mut ob_stream_t, buf: *mut c_void, len: usize) -> ssize_t {
    ffi(-1, || {
        let s = handle(s)?;
        let n = s.stream.recv(bytes_mut(buf, len)?)?;
        Ok(n as ssize_t)
    })
}

/// Zero-copy send, step 1: sets `*buf`, `*len` to writable room in the
/// stream's transmit region (contiguous, at least 1 byte; waits as the mode
/// allows). Write the bytes there, then call `ob_end_put`. The room stays
/// valid until `ob_end_put` or any other call on this stream. Returns 0, or
/// -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_begin_put(s: *mut ob_stream_t, buf: *mut *mut c_void, len: *mut usize) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let room = s.stream.begin_put()?;
        buf.write(room.as_mut_ptr().cast());
        len.write(room.len());
        Ok(0)
    })
}

/// Zero-copy send, step 2: publishes the first `n` bytes of the room
/// `ob_begin_put` gave (0 publishes nothing). Returns 0, or -1 with errno
/// (EINVAL if `n` is more than the room).
#[no_mangle]
pub unsafe extern "C" fn ob_end_put(s: *mut ob_stream_t, n: usize) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.end_put(n)?;
        Ok(0)
    })
}

/// Zero-copy receive, step 1: sets `*buf`, `*len` to received bytes in place
/// in the board (contiguous; waits as the mode allows). `*len == 0` means end
/// of stream. Read them, then call `ob_end_get`. The bytes stay valid until
/// `ob_end_get` or any other call on this stream. Returns 0, or -1 with errno
/// (EAGAIN when non-blocking and nothing is there).
#[no_mangle]
pub unsafe extern "C" fn ob_begin_get(s: *mut ob_stream_t, buf: *mut *const c_void, len: *mut usize) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let data = s.stream.begin_get()?;
        buf.write(data.as_ptr().cast());
        len.write(data.len());
        Ok(0)
    })
}

/// Zero-copy receive, step 2: releases the first `n` bytes `ob_begin_get`
/// gave, making room for the peer. Returns 0, or -1 with errno (EINVAL if `n`
/// is more than it gave).
#[no_mangle]
pub unsafe extern "C" fn ob_end_get(s: *mut ob_stream_t, n: usize) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.end_get(n)?;
        Ok(0)
    })
}

/// Zero-copy relay: what `ob_begin_get` and `ob_begin_put` would give, both
/// at once and without waiting (either length may be 0): received bytes in
/// `*in_buf`, `*in_len` and room to send in `*out_buf`, `*out_len`, for moving bytes
/// straight from the receive region into the transmit region (an echo that
/// copies once). End each side with `ob_end_get` / `ob_end_put`. A 0
/// `*in_len` is no data now or end of stream: `ob_at_eof` tells which.
/// Returns 0, or -1 with errno (the stream failed).
#[no_mangle]
pub unsafe extern "C" fn ob_begin_get_put(
    s: *mut ob_stream_t,
    in_buf: *mut *const c_void,
    in_len: *mut usize,
    out_buf: *mut *mut c_void,
    out_len: *mut usize,
) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        if in_buf.is_null() || in_len.is_null() || out_buf.is_null() || out_len.is_null() {
            return Err(EINVAL);
        }
        let (rx, tx) = s.stream.begin_get_put()?;
        in_buf.write(rx.as_ptr().cast());
        in_len.write(rx.len());
        out_buf.write(tx.as_mut_ptr().cast());
        out_len.write(tx.len());
        Ok(0)
    })
}

/// 1 once the peer has sent FIN and every byte before it was consumed, 0
/// before, -1 (EINVAL) for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_at_eof(s: *const ob_stream_t) -> c_int {
    ffi(-1, || Ok(c_int::from(handle_ref(s)?.stream.at_eof())))
}

/// No more data from us: FIN after what is queued (reading goes on).
/// Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_shutdown(s: *mut ob_stream_t) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.shutdown()?;
        Ok(0)
    })
}

/// Closes the stream (FIN after what is queued) and frees the handle.
/// Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_close(s: *mut ob_stream_t) -> c_int {
    free(s)
}

/// Resets the stream now (RST, instead of `ob_close`'s graceful FIN) and
/// frees the handle. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_abort(s: *mut ob_stream_t) -> c_int {
    ffi(-1, || {
        if s.is_null() {
            return Err(EINVAL);
        }
        Box::from_raw(s).stream.abort();
        Ok(0)
    })
}

/// Closes this process's copy of a stream that a process it forked may
/// take over (`ob_adopt_stream` there), and frees the handle: the
/// connection waits for that child for a moment, then closes as
/// `ob_close` would. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_stream_release(s: *mut ob_stream_t) -> c_int {
    ffi(-1, || {
        if s.is_null() {
            return Err(EINVAL);
        }
        Box::from_raw(s).stream.release();
        Ok(0)
    })
}

/// The engine shard that serves the stream (for `ob_adopt_stream`), or
/// `OB_NO_ENDPOINT` for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_stream_shard(s: *const ob_stream_t) -> u32 {
    ffi(OB_NO_ENDPOINT, || Ok(handle_ref(s)?.stream.shard()))
}

/// Sets how this stream's calls wait: `OB_MODE_BLOCKING`,
/// `OB_MODE_NONBLOCKING` or `OB_MODE_POLLING`. Returns 0, or -1 with EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ob_set_mode(s: *mut ob_stream_t, mode: c_int) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        s.stream.set_mode(crate::mode(mode)?);
        Ok(0)
    })
}

/// Turns Nagle's algorithm off (`on` non-zero: send small segments at once)
/// or back on. Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_set_nodelay(s: *mut ob_stream_t, on: c_int) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.set_nodelay(on != 0)?;
        Ok(0)
    })
}

/// The stream's endpoint id (for `ob_eq_add`); `OB_NO_ENDPOINT` for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_stream_id(s: *const ob_stream_t) -> u32 {
    ffi(OB_NO_ENDPOINT, || Ok(handle_ref(s)?.stream.id()))
}

/// Bytes that can be read now without waiting, or -1 (EINVAL) for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_readable_bytes(s: *const ob_stream_t) -> ssize_t {
    ffi(-1, || Ok(handle_ref(s)?.stream.readable_bytes() as ssize_t))
}

/// The stream's local address: `*ipv4` (host byte order) and `*port`, each
/// pointer may be NULL. Returns 0, or -1 with EINVAL for a NULL stream,
/// EAFNOSUPPORT for an IPv6 stream (use `ob_stream_local`).
#[no_mangle]
pub unsafe extern "C" fn ob_stream_local_addr(s: *const ob_stream_t, ipv4: *mut u32, port: *mut u16) -> c_int {
    ffi(-1, || {
        write_v4(handle_ref(s)?.stream.local_addr(), ipv4, port)?;
        Ok(0)
    })
}

/// The peer's address: `*ipv4` (host byte order) and `*port`, each pointer
/// may be NULL. Returns 0, or -1 with EINVAL for a NULL stream,
/// EAFNOSUPPORT for an IPv6 stream (use `ob_stream_peer`).
#[no_mangle]
pub unsafe extern "C" fn ob_stream_peer_addr(s: *const ob_stream_t, ipv4: *mut u32, port: *mut u16) -> c_int {
    ffi(-1, || {
        write_v4(handle_ref(s)?.stream.peer_addr(), ipv4, port)?;
        Ok(0)
    })
}

/// The stream's local address, of either family, into `*out`. Returns 0, or
/// -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_stream_local(s: *const ob_stream_t, out: *mut ob_addr_t) -> c_int {
    ffi(-1, || {
        let a = handle_ref(s)?.stream.local_addr();
        out.as_mut().ok_or(EINVAL)?.clone_from(&addr_to_c(a));
        Ok(0)
    })
}

/// The peer's address, of either family, into `*out`. Returns 0, or -1 with
/// EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_stream_peer(s: *const ob_stream_t, out: *mut ob_addr_t) -> c_int {
    ffi(-1, || {
        let a = handle_ref(s)?.stream.peer_addr();
        out.as_mut().ok_or(EINVAL)?.clone_from(&addr_to_c(a));
        Ok(0)
    })
}
