//! The exported C functions that LD_PRELOAD puts in front of libc's. Each
//! first checks, without a lock, whether the descriptor is one the shim
//! tracks; every other descriptor (files, pipes, AF_UNIX, kernel sockets)
//! goes straight to libc, untouched.
//!
//! `fcntl` and `ioctl` are variadic in C; on x86-64 and AArch64 Linux a
//! variadic argument travels in the same register as a fixed one, so they
//! are declared with one fixed trailing argument (the only one these
//! commands take).
#![allow(clippy::missing_safety_doc)]

use crate::ops::{self, Connect};
use crate::poll::set_errno;
use crate::real;
use crate::sock::SResult;
use crate::state::{in_shim, mark, Reentry, MARK_EPOLL, MARK_INTERNAL, MARK_SOCK};
use libc::{c_int, c_uint, c_ulong, c_void, size_t, sockaddr, socklen_t, ssize_t};
use std::net::SocketAddr;
use std::time::Duration;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the shim's variadic fcntl/ioctl rely on the x86-64 or AArch64 Linux calling convention");

fn ret_int(r: SResult<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// Ends a send: EPIPE raises SIGPIPE unless MSG_NOSIGNAL (outside the shim,
/// so a handler may use sockets).
fn ret_sent(r: SResult<usize>, flags: c_int) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => {
            if e == libc::EPIPE && flags & libc::MSG_NOSIGNAL == 0 {
                // SAFETY: raising a signal in this thread, as the kernel would.
                unsafe { libc::raise(libc::SIGPIPE) };
            }
            set_errno(e);
            -1
        }
    }
}

fn ret_len(r: SResult<usize>) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

fn ours(fd: c_int) -> bool {
    !in_shim() && mark(fd) == MARK_SOCK
}

/// Builds slices over an iovec array (null or zero-length entries are empty).
///
/// # Safety
/// `iov` points to `n` iovecs whose buffers are valid for their lengths.
unsafe fn iov_mut<'a>(iov: *const libc::iovec, n: c_int) -> Result<Vec<&'a mut [u8]>, i32> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `n` entries (caller, and not NULL), 1..=UIO_MAXIOV of them.
    let entries = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    let mut room = MAX_RW_COUNT;
    let mut v = Vec::with_capacity(entries.len());
    for e in entries {
        let len = iov_len(e, &mut room)?;
        if len > 0 {
            // SAFETY: the caller's buffer, at least `len` long (`iov_len` cuts, never extends).
            v.push(unsafe { std::slice::from_raw_parts_mut(e.iov_base.cast::<u8>(), len) });
        }
    }
    Ok(v)
}

/// A msghdr's iovecs: more than `UIO_MAXIOV` of them is EMSGSIZE (Linux's
/// `__copy_msghdr`, before `import_iovec`), and a count past `c_int` is not
/// cut down to a smaller one.
///
/// # Safety
/// As [`iov_mut`], for `m.msg_iov` and `m.msg_iovlen`.
unsafe fn msg_iov<'a>(m: &libc::msghdr) -> Result<Vec<&'a mut [u8]>, i32> {
    if m.msg_iovlen > libc::UIO_MAXIOV as usize {
        return Err(libc::EMSGSIZE);
    }
    // SAFETY: the caller's (the count fits a c_int now).
    unsafe { iov_mut(m.msg_iov, m.msg_iovlen as c_int) }
}

/// The most bytes one read or write moves (Linux's `MAX_RW_COUNT`,
/// `INT_MAX & PAGE_MASK`): a longer iovec is cut there, as the kernel cuts it.
const MAX_RW_COUNT: usize = 0x7fff_f000;

/// How much of iovec entry `e` a call uses, `room` being what is left of
/// the call's [`MAX_RW_COUNT`], as Linux's `import_iovec` has it: an entry
/// longer than `SSIZE_MAX` is EINVAL, the total is cut at `MAX_RW_COUNT`
/// (so the lengths never add up past what a count can say), and an entry
/// that keeps any length needs a base (EFAULT).
fn iov_len(e: &libc::iovec, room: &mut usize) -> Result<usize, i32> {
    if e.iov_len > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    let len = e.iov_len.min(*room);
    if len > 0 && e.iov_base.is_null() {
        return Err(libc::EFAULT);
    }
    *room -= len;
    Ok(len)
}

unsafe fn buf_mut<'a>(p: *mut c_void, n: size_t) -> Result<&'a mut [u8], i32> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer of n bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
}

unsafe fn buf<'a>(p: *const c_void, n: size_t) -> Result<&'a [u8], i32> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer of n bytes.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
}

fn do_recv(fd: c_int, bufs: &mut [&mut [u8]], flags: c_int, from: &mut Option<SocketAddr>) -> SResult<usize> {
    let _r = Reentry::enter();
    ops::recv(fd, bufs, flags, from)
}

fn do_send(fd: c_int, bufs: &[&[u8]], flags: c_int, to: Option<SocketAddr>) -> SResult<usize> {
    let _r = Reentry::enter();
    ops::send(fd, bufs, flags, to)
}

// ---------------------------------------------------------------- sockets

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
    // SAFETY: passes the program's arguments on.
    let fd = unsafe { real::socket(domain, ty, proto) };
    if fd < 0 || in_shim() || (domain != libc::AF_INET && domain != libc::AF_INET6) {
        return fd;
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let stream = base == libc::SOCK_STREAM && (proto == 0 || proto == libc::IPPROTO_TCP);
    let dgram = base == libc::SOCK_DGRAM && (proto == 0 || proto == libc::IPPROTO_UDP);
    if stream || dgram {
        let _r = Reentry::enter();
        ops::new_socket(fd, stream, domain == libc::AF_INET6, ty & libc::SOCK_NONBLOCK != 0);
    }
    fd
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::bind(fd, addr, len) };
    }
    let _r = Reentry::enter();
    // SAFETY: the program's address argument.
    let a = match unsafe { ops::read_addr(addr, len) } {
        Ok(a) => a,
        Err(e) => return ret_int(Err(e)),
    };
    match ops::bind(fd, a) {
        Ok(true) => 0,
        // SAFETY: passes the program's arguments on.
        Ok(false) => unsafe { real::bind(fd, addr, len) },
        Err(e) => ret_int(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::listen(fd, backlog) };
    }
    let _r = Reentry::enter();
    match ops::listen(fd, backlog) {
        Ok(true) => 0,
        // SAFETY: passes the program's arguments on.
        Ok(false) => unsafe { real::listen(fd, backlog) },
        Err(e) => ret_int(Err(e)),
    }
}

unsafe fn accept_common(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    let r = {
        let _r = Reentry::enter();
        ops::accept(fd, flags)
    };
    match r {
        Ok((nfd, peer, v6)) => {
            // SAFETY: the program's address buffer.
            crate::addr::with_family(v6, || unsafe { crate::addr::write_sockaddr(peer, addr, len) });
            nfd
        }
        Err(e) => {
            if e == libc::EINTR {
                crate::state::count(crate::state::Count::Eintr);
            }
            ret_int(Err(e))
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::accept(fd, addr, len) };
    }
    // SAFETY: forwarded.
    unsafe { accept_common(fd, addr, len, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::accept4(fd, addr, len, flags) };
    }
    // SAFETY: forwarded.
    unsafe { accept_common(fd, addr, len, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::connect(fd, addr, len) };
    }
    let r = {
        let _r = Reentry::enter();
        // SAFETY: the program's address argument.
        let unspec = unsafe { crate::addr::is_unspec(addr, len) };
        // SAFETY: as above.
        match unsafe { ops::read_addr(addr, len) } {
            Ok(a) => ops::connect(fd, a, unspec),
            Err(e) => Connect::Engine(Err(e)),
        }
    };
    match r {
        Connect::Engine(r) => ret_int(r),
        // SAFETY: passes the program's arguments on.
        Connect::Kernel => unsafe { real::connect(fd, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::shutdown(fd, how) };
    }
    let _r = Reentry::enter();
    ret_int(ops::shutdown(fd, how))
}

unsafe fn name_common(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, peer: bool) -> c_int {
    let r = {
        let _r = Reentry::enter();
        ops::sockname(fd, peer)
    };
    match r {
        Ok(Some((a, v6))) => {
            if addr.is_null() || len.is_null() {
                return ret_int(Err(libc::EFAULT));
            }
            // SAFETY: the program's buffer.
            crate::addr::with_family(v6, || unsafe { crate::addr::write_sockaddr(a, addr, len) });
            0
        }
        // Undecided: the placeholder answers.
        Ok(None) => unsafe {
            // SAFETY: passes the program's arguments on.
            if peer {
                real::getpeername(fd, addr, len)
            } else {
                real::getsockname(fd, addr, len)
            }
        },
        Err(e) => ret_int(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::getsockname(fd, addr, len) };
    }
    // SAFETY: forwarded.
    unsafe { name_common(fd, addr, len, false) }
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::getpeername(fd, addr, len) };
    }
    // SAFETY: forwarded.
    unsafe { name_common(fd, addr, len, true) }
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int {
    if ours(fd) {
        let r = {
            let _r = Reentry::enter();
            ops::setsockopt(fd, level, name, val, len)
        };
        if let Some(r) = r {
            return ret_int(r);
        }
    }
    // SAFETY: passes the program's arguments on.
    unsafe { real::setsockopt(fd, level, name, val, len) }
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int {
    if ours(fd) {
        let r = {
            let _r = Reentry::enter();
            // SAFETY: the program's buffers.
            unsafe { ops::getsockopt(fd, level, name, val, len) }
        };
        if let Some(r) = r {
            return ret_int(r);
        }
    }
    // SAFETY: passes the program's arguments on.
    unsafe { real::getsockopt(fd, level, name, val, len) }
}

// ---------------------------------------------------------------- data

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::read(fd, b, n) };
    }
    // SAFETY: the program's buffer.
    match unsafe { buf_mut(b, n) } {
        Ok(s) => ret_len(do_recv(fd, &mut [s], 0, &mut None)),
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
    if n > buflen {
        // SAFETY: what glibc's own check does: abort.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded.
    unsafe { read(fd, b, n) }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::write(fd, b, n) };
    }
    // SAFETY: the program's buffer.
    match unsafe { buf(b, n) } {
        Ok(s) => ret_sent(do_send(fd, &[s], 0, None), 0),
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::readv(fd, iov, n) };
    }
    // SAFETY: the program's iovecs.
    match unsafe { iov_mut(iov, n) } {
        Ok(mut v) => ret_len(do_recv(fd, &mut v, 0, &mut None)),
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::writev(fd, iov, n) };
    }
    // SAFETY: the program's iovecs (read only).
    match unsafe { iov_mut(iov, n) } {
        Ok(v) => {
            let v: Vec<&[u8]> = v.into_iter().map(|s| &*s).collect();
            ret_sent(do_send(fd, &v, 0, None), 0)
        }
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, b: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::recv(fd, b, n, flags) };
    }
    // SAFETY: the program's buffer.
    match unsafe { buf_mut(b, n) } {
        Ok(s) => ret_len(do_recv(fd, &mut [s], flags, &mut None)),
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t {
    if n > buflen {
        // SAFETY: what glibc's own check does: abort.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded.
    unsafe { recv(fd, b, n, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(fd: c_int, b: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::recvfrom(fd, b, n, flags, addr, len) };
    }
    let mut from = None;
    // SAFETY: the program's buffer.
    let r = match unsafe { buf_mut(b, n) } {
        Ok(s) => do_recv(fd, &mut [s], flags, &mut from),
        Err(e) => Err(e),
    };
    if r.is_ok() && from.is_none() && !len.is_null() {
        // A stream has no source address to give (Linux sets the length to 0).
        // SAFETY: the program's length word.
        unsafe { *len = 0 };
    }
    if let (Ok(_), Some(a)) = (&r, from) {
        let v6 = {
            let _r = Reentry::enter();
            ops::is_v6(fd)
        };
        // SAFETY: the program's address buffer.
        crate::addr::with_family(v6, || unsafe { crate::addr::write_sockaddr(a, addr, len) });
    }
    ret_len(r)
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: what glibc's own check does: abort.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded.
    unsafe { recvfrom(fd, b, n, flags, addr, len) }
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::recvmsg(fd, msg, flags) };
    }
    if msg.is_null() {
        return ret_len(Err(libc::EFAULT));
    }
    // SAFETY: the program's msghdr.
    let m = unsafe { &mut *msg };
    // SAFETY: its iovecs.
    let mut v = match unsafe { msg_iov(m) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    let mut from = None;
    let r = do_recv(fd, &mut v, flags, &mut from);
    if r.is_ok() {
        let inq = {
            let _r = Reentry::enter();
            ops::inq_hint(fd)
        };
        m.msg_flags = 0;
        match inq {
            // SAFETY: the program's control buffer of msg_controllen bytes.
            Some(n) => unsafe { put_inq_cmsg(m, n) },
            None => m.msg_controllen = 0,
        }
        match from {
            Some(a) if !m.msg_name.is_null() => {
                let mut l = m.msg_namelen;
                let v6 = {
                    let _r = Reentry::enter();
                    ops::is_v6(fd)
                };
                // SAFETY: the program's name buffer of msg_namelen bytes.
                crate::addr::with_family(v6, || unsafe { crate::addr::write_sockaddr(a, m.msg_name.cast(), &mut l) });
                m.msg_namelen = l;
            }
            _ => m.msg_namelen = 0,
        }
    }
    ret_len(r)
}

/// Puts Linux's TCP_CM_INQ control message (an int) as `put_cmsg` does:
/// no room for a header sets MSG_CTRUNC; too little for the value truncates.
///
/// # Safety
/// `m.msg_control` is null or points to `m.msg_controllen` writable bytes.
#[allow(clippy::unnecessary_cast)] // msg_controllen is a socklen_t on some C libraries
unsafe fn put_inq_cmsg(m: &mut libc::msghdr, n: c_int) {
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    // SAFETY: CMSG_* are arithmetic.
    let (want, space) = unsafe { (libc::CMSG_LEN(4) as usize, libc::CMSG_SPACE(4) as usize) };
    if m.msg_control.is_null() || (m.msg_controllen as usize) < hdr {
        m.msg_flags |= libc::MSG_CTRUNC;
        m.msg_controllen = 0;
        return;
    }
    let room = m.msg_controllen as usize;
    let put = if room < want {
        m.msg_flags |= libc::MSG_CTRUNC;
        room
    } else {
        want
    };
    let mut bytes = [0u8; 64];
    let c = libc::cmsghdr { cmsg_len: put as _, cmsg_level: libc::SOL_TCP, cmsg_type: libc::TCP_INQ };
    // SAFETY: plain data into a local buffer large enough for both.
    unsafe {
        std::ptr::copy_nonoverlapping((&c as *const libc::cmsghdr).cast::<u8>(), bytes.as_mut_ptr(), hdr);
        std::ptr::copy_nonoverlapping((&n as *const c_int).cast::<u8>(), bytes.as_mut_ptr().add(hdr), 4);
    }
    // SAFETY: `put` ≤ msg_controllen bytes of the program's buffer.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.msg_control.cast::<u8>(), put) };
    m.msg_controllen = space.min(room) as _;
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, b: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::send(fd, b, n, flags) };
    }
    // SAFETY: the program's buffer.
    match unsafe { buf(b, n) } {
        Ok(s) => ret_sent(do_send(fd, &[s], flags, None), flags),
        Err(e) => ret_len(Err(e)),
    }
}

/// What a send with MSG_FASTOPEN does first.
enum FastOpen {
    /// Send with these flags (MSG_FASTOPEN done with or absent).
    Send(c_int),
    /// The connect failed (EINPROGRESS: no cookie yet, non-blocking; as Linux).
    Failed(i32),
    /// The kernel took the socket: give it the call as it is.
    Kernel,
}

/// MSG_FASTOPEN on a stream socket (RFC 7413, Linux's `tcp_sendmsg_fastopen`):
/// connect to `addr` with Fast Open, then the data is sent as usual (in the
/// SYN when the engine holds a cookie for the destination).
///
/// # Safety
/// `addr` is null or `len` readable bytes.
unsafe fn fast_open(fd: c_int, flags: c_int, addr: *const sockaddr, len: socklen_t) -> FastOpen {
    if flags & libc::MSG_FASTOPEN == 0 {
        return FastOpen::Send(flags);
    }
    let _r = Reentry::enter();
    if !ops::s_is_stream(fd) {
        // Linux ignores MSG_FASTOPEN on datagram sockets.
        return FastOpen::Send(flags & !libc::MSG_FASTOPEN);
    }
    // SAFETY: forwarded contract.
    let a = match unsafe { ops::read_addr(addr, len) } {
        Ok(Some(a)) => a,
        Ok(None) => return FastOpen::Failed(libc::EAFNOSUPPORT),
        Err(e) => return FastOpen::Failed(e),
    };
    match ops::connect_fast_open(fd, a) {
        Connect::Engine(Ok(())) => FastOpen::Send(flags & !libc::MSG_FASTOPEN),
        Connect::Engine(Err(e)) => FastOpen::Failed(e),
        Connect::Kernel => FastOpen::Kernel,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendto(fd: c_int, b: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::sendto(fd, b, n, flags, addr, len) };
    }
    // SAFETY: the program's address.
    let flags = match unsafe { fast_open(fd, flags, addr, len) } {
        FastOpen::Send(flags) => flags,
        FastOpen::Failed(e) => return ret_len(Err(e)),
        // SAFETY: passes the program's arguments on.
        FastOpen::Kernel => return unsafe { real::sendto(fd, b, n, flags, addr, len) },
    };
    let to = {
        let _r = Reentry::enter();
        // SAFETY: the program's address.
        match unsafe { ops::destination(fd, addr, len) } {
            Ok(Some(to)) => to,
            // SAFETY: passes the program's arguments on.
            Ok(None) => return unsafe { real::sendto(fd, b, n, flags, addr, len) },
            Err(e) => return ret_len(Err(e)),
        }
    };
    // SAFETY: the program's buffer.
    match unsafe { buf(b, n) } {
        Ok(s) => ret_sent(do_send(fd, &[s], flags, to), flags),
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::sendmsg(fd, msg, flags) };
    }
    if msg.is_null() {
        return ret_len(Err(libc::EFAULT));
    }
    // SAFETY: the program's msghdr.
    let m = unsafe { &*msg };
    if m.msg_controllen > 0 {
        let _r = Reentry::enter();
        crate::log::unsupported("sendmsg", "control messages", libc::EOPNOTSUPP);
        return ret_len(Err(libc::EOPNOTSUPP));
    }
    let (name, namelen) = if m.msg_namelen > 0 { (m.msg_name as *const sockaddr, m.msg_namelen) } else { (std::ptr::null(), 0) };
    // SAFETY: the program's name of msg_namelen bytes.
    let flags = match unsafe { fast_open(fd, flags, name, namelen) } {
        FastOpen::Send(flags) => flags,
        FastOpen::Failed(e) => return ret_len(Err(e)),
        // SAFETY: passes the program's arguments on.
        FastOpen::Kernel => return unsafe { real::sendmsg(fd, msg, flags) },
    };
    let to = {
        let _r = Reentry::enter();
        let (name, namelen) = if m.msg_namelen > 0 { (m.msg_name as *const sockaddr, m.msg_namelen) } else { (std::ptr::null(), 0) };
        // SAFETY: the program's name of msg_namelen bytes.
        match unsafe { ops::destination(fd, name, namelen) } {
            Ok(Some(to)) => to,
            // SAFETY: passes the program's arguments on.
            Ok(None) => return unsafe { real::sendmsg(fd, msg, flags) },
            Err(e) => return ret_len(Err(e)),
        }
    };
    // SAFETY: its iovecs (read only).
    match unsafe { msg_iov(m) } {
        Ok(v) => {
            let v: Vec<&[u8]> = v.into_iter().map(|s| &*s).collect();
            ret_sent(do_send(fd, &v, flags, to), flags)
        }
        Err(e) => ret_len(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, flags: c_int, ts: *mut libc::timespec) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::recvmmsg(fd, v, n, flags, ts) };
    }
    if v.is_null() {
        return ret_int(Err(libc::EFAULT));
    }
    // The first message waits as the socket says; the rest only if already there.
    let mut got = 0;
    for i in 0..n as usize {
        let f = if i == 0 { flags & !libc::MSG_WAITFORONE } else { flags | libc::MSG_DONTWAIT };
        // SAFETY: entry i of the program's array.
        let r = unsafe { recvmsg(fd, &mut (*v.add(i)).msg_hdr, f) };
        if r < 0 {
            break;
        }
        // SAFETY: as above.
        unsafe { (*v.add(i)).msg_len = r as c_uint };
        got += 1;
    }
    if got == 0 {
        -1
    } else {
        got
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, flags: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::sendmmsg(fd, v, n, flags) };
    }
    if v.is_null() {
        return ret_int(Err(libc::EFAULT));
    }
    let mut sent = 0;
    for i in 0..n as usize {
        // SAFETY: entry i of the program's array.
        let r = unsafe { sendmsg(fd, &(*v.add(i)).msg_hdr, flags) };
        if r < 0 {
            break;
        }
        // SAFETY: as above.
        unsafe { (*v.add(i)).msg_len = r as c_uint };
        sent += 1;
    }
    if sent == 0 {
        -1
    } else {
        sent
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
    if !ours(out) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::sendfile(out, inp, off, n) };
    }
    let r = {
        let _r = Reentry::enter();
        // SAFETY: the program's offset pointer (or null).
        unsafe { ops::sendfile(out, inp, off, n) }
    };
    ret_sent(r, 0)
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
    // SAFETY: forwarded (off_t is 64-bit on the targets we build for).
    unsafe { sendfile(out, inp, off, n) }
}

#[no_mangle]
pub unsafe extern "C" fn splice(i: c_int, ioff: *mut libc::loff_t, o: c_int, ooff: *mut libc::loff_t, n: size_t, flags: c_uint) -> ssize_t {
    if ours(i) || ours(o) {
        let r = {
            let _r = Reentry::enter();
            // SAFETY: the program's offset pointers (or null).
            unsafe { ops::splice(i, ioff, o, ooff, n, flags) }
        };
        match r {
            // Undecided sockets: the kernel placeholder's splice.
            None => {}
            // A send that fails with EPIPE raises SIGPIPE, as Linux's splice does.
            Some(r) => return ret_sent(r, if ours(o) { 0 } else { libc::MSG_NOSIGNAL }),
        }
    }
    // SAFETY: passes the program's arguments on.
    unsafe { real::splice(i, ioff, o, ooff, n, flags) }
}

// ---------------------------------------------------------------- descriptors

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if in_shim() {
        // SAFETY: passes the arguments on.
        return unsafe { real::close(fd) };
    }
    match mark(fd) {
        // The shim's own descriptor: the program does not own it.
        MARK_INTERNAL => return 0,
        MARK_SOCK | MARK_EPOLL => {
            let _r = Reentry::enter();
            ops::forget(fd);
        }
        _ => {}
    }
    // SAFETY: passes the program's argument on.
    unsafe { real::close(fd) }
}

/// glibc's stdio reads and writes a FILE's descriptor through internal
/// calls the shim cannot see; so `fdopen` on an engine socket gives a FILE
/// whose I/O goes through the shim's `read`/`write`/`close` (`fopencookie`).
/// Its `fileno()` is -1 (documented in SHIM.md).
#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const libc::c_char) -> *mut libc::FILE {
    if !ours(fd) {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::fdopen(fd, mode) };
    }
    let io = CookieIo { read: Some(cookie_read), write: Some(cookie_write), seek: None, close: Some(cookie_close) };
    // SAFETY: the cookie is the descriptor number; the functions match glibc's cookie_io_functions_t.
    unsafe { fopencookie(fd as isize as *mut c_void, mode, io) }
}

/// glibc's `cookie_io_functions_t`.
#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut libc::c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const libc::c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const libc::c_char, io: CookieIo) -> *mut libc::FILE;
}

unsafe extern "C" fn cookie_read(c: *mut c_void, buf: *mut libc::c_char, n: size_t) -> ssize_t {
    // SAFETY: stdio's buffer of n bytes.
    unsafe { read(c as isize as c_int, buf.cast(), n) }
}

unsafe extern "C" fn cookie_write(c: *mut c_void, buf: *const libc::c_char, n: size_t) -> ssize_t {
    // SAFETY: stdio's buffer of n bytes. A cookie writer reports an error as 0.
    unsafe { write(c as isize as c_int, buf.cast(), n).max(0) }
}

unsafe extern "C" fn cookie_close(c: *mut c_void) -> c_int {
    // SAFETY: closes the descriptor the FILE was opened on.
    unsafe { close(c as isize as c_int) }
}

/// A stream opened on an engine socket by other means than `fdopen` (none
/// known) would be closed by libc without calling `close`: forget the socket
/// here too, or a later descriptor with the same number would be taken for it.
#[no_mangle]
pub unsafe extern "C" fn fclose(f: *mut libc::FILE) -> c_int {
    if !in_shim() && !f.is_null() {
        // SAFETY: the program's open FILE.
        let fd = unsafe { libc::fileno(f) };
        if matches!(mark(fd), MARK_SOCK | MARK_EPOLL) {
            let _r = Reentry::enter();
            ops::forget(fd);
        }
    }
    // SAFETY: passes the program's argument on.
    unsafe { real::fclose(f) }
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if !in_shim() && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        let _r = Reentry::enter();
        let hi = last.min(crate::state::MAX_FDS as c_uint - 1);
        for fd in first..=hi {
            match mark(fd as c_int) {
                MARK_SOCK | MARK_EPOLL => ops::forget(fd as c_int),
                _ => {}
            }
        }
    }
    // SAFETY: passes the program's arguments on.
    unsafe { real::close_range(first, last, flags) }
}

fn tracked(fd: c_int) -> bool {
    !in_shim() && matches!(mark(fd), MARK_SOCK | MARK_EPOLL)
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: passes the program's argument on.
    let n = unsafe { real::dup(fd) };
    if n >= 0 && tracked(fd) {
        let _r = Reentry::enter();
        ops::share(fd, n);
    }
    n
}

unsafe fn dup_onto(fd: c_int, to: c_int, f: impl FnOnce() -> c_int) -> c_int {
    if in_shim() {
        return f();
    }
    if fd != to && matches!(mark(to), MARK_SOCK | MARK_EPOLL) {
        let _r = Reentry::enter();
        ops::forget(to);
    }
    let n = f();
    if n >= 0 && fd != to && tracked(fd) {
        let _r = Reentry::enter();
        ops::share(fd, n);
    }
    n
}

#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, to: c_int) -> c_int {
    // SAFETY: passes the program's arguments on.
    unsafe { dup_onto(fd, to, || real::dup2(fd, to)) }
}

#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, to: c_int, flags: c_int) -> c_int {
    // SAFETY: passes the program's arguments on.
    unsafe { dup_onto(fd, to, || real::dup3(fd, to, flags)) }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: passes the program's arguments on (see the module note on variadics).
    let r = unsafe { real::fcntl(fd, cmd, arg) };
    if r < 0 || !tracked(fd) {
        return r;
    }
    let _r = Reentry::enter();
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => ops::share(fd, r),
        libc::F_SETFL => {
            ops::set_nonblock(fd, arg as c_int & libc::O_NONBLOCK != 0);
            if arg as c_int & libc::O_ASYNC != 0 && mark(fd) == MARK_SOCK {
                crate::log::unsupported("fcntl", "O_ASYNC (SIGIO) on an engine socket", libc::EOPNOTSUPP);
            }
        }
        _ => {}
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarded.
    unsafe { fcntl(fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if ours(fd) {
        let _r = Reentry::enter();
        if req == libc::FIONBIO {
            if arg.is_null() {
                return ret_int(Err(libc::EFAULT));
            }
            // SAFETY: FIONBIO takes an int pointer.
            let on = unsafe { *(arg as *const c_int) } != 0;
            ops::set_nonblock(fd, on);
        } else if let Some(r) = ops::ioctl_value(fd, req) {
            return match r {
                Ok(v) => {
                    if arg.is_null() {
                        return ret_int(Err(libc::EFAULT));
                    }
                    // SAFETY: these requests take an int pointer.
                    unsafe { *(arg as *mut c_int) = v };
                    0
                }
                Err(e) => ret_int(Err(e)),
            };
        }
    }
    // SAFETY: passes the program's arguments on (interface queries and the
    // like are about the host and the placeholder answers them).
    unsafe { real::ioctl(fd, req, arg) }
}

// ---------------------------------------------------------------- waiting

fn ms(timeout: c_int) -> Option<Duration> {
    (timeout >= 0).then(|| Duration::from_millis(timeout as u64))
}

unsafe fn ts(t: *const libc::timespec) -> Result<Option<Duration>, i32> {
    if t.is_null() {
        return Ok(None);
    }
    // SAFETY: the program's timespec.
    let t = unsafe { *t };
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32)))
}

unsafe fn poll_common(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: Option<Duration>, mask: *const libc::sigset_t) -> c_int {
    if n > 0 && fds.is_null() {
        return ret_int(Err(libc::EFAULT));
    }
    // SAFETY: the program's array of n pollfds.
    let slice = if n == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(fds, n as usize) } };
    let _r = Reentry::enter();
    // SAFETY: mask is the program's (or null).
    unsafe { crate::poll::poll(slice, timeout, mask) }
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    if in_shim() {
        let t = ms(timeout).map(|d| libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long });
        let tp = t.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: passes the arguments on.
        return unsafe { real::ppoll(fds, n, tp, std::ptr::null()) };
    }
    // SAFETY: forwarded.
    unsafe { poll_common(fds, n, ms(timeout), std::ptr::null()) }
}

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int, fdslen: size_t) -> c_int {
    if (fdslen / std::mem::size_of::<libc::pollfd>()) < n as usize {
        // SAFETY: what glibc's own check does: abort.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded.
    unsafe { poll(fds, n, timeout) }
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(fds: *mut libc::pollfd, n: libc::nfds_t, t: *const libc::timespec, mask: *const libc::sigset_t) -> c_int {
    if in_shim() {
        // SAFETY: passes the arguments on.
        return unsafe { real::ppoll(fds, n, t, mask) };
    }
    // SAFETY: the program's timespec.
    match unsafe { ts(t) } {
        // SAFETY: forwarded.
        Ok(d) => unsafe { poll_common(fds, n, d, mask) },
        Err(e) => ret_int(Err(e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(fds: *mut libc::pollfd, n: libc::nfds_t, t: *const libc::timespec, mask: *const libc::sigset_t, fdslen: size_t) -> c_int {
    if (fdslen / std::mem::size_of::<libc::pollfd>()) < n as usize {
        // SAFETY: what glibc's own check does: abort.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded.
    unsafe { ppoll(fds, n, t, mask) }
}

#[no_mangle]
pub unsafe extern "C" fn select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, x: *mut libc::fd_set, t: *mut libc::timeval) -> c_int {
    let timeout = if t.is_null() {
        None
    } else {
        // SAFETY: the program's timeval.
        let tv = unsafe { *t };
        if tv.tv_sec < 0 || tv.tv_usec < 0 {
            return ret_int(Err(libc::EINVAL));
        }
        Some(Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64))
    };
    let start = std::time::Instant::now();
    let _r = Reentry::enter();
    // SAFETY: the program's sets.
    let res = unsafe { crate::poll::select(n, r, w, x, timeout, std::ptr::null()) };
    if let (Some(d), false) = (timeout, t.is_null()) {
        // Linux's select writes back the time left.
        let left = d.saturating_sub(start.elapsed());
        // SAFETY: the program's timeval.
        unsafe { *t = libc::timeval { tv_sec: left.as_secs() as libc::time_t, tv_usec: left.subsec_micros() as libc::suseconds_t } };
    }
    res
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    x: *mut libc::fd_set,
    t: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the program's timespec.
    let timeout = match unsafe { ts(t) } {
        Ok(d) => d,
        Err(e) => return ret_int(Err(e)),
    };
    let _r = Reentry::enter();
    // SAFETY: the program's sets and mask.
    unsafe { crate::poll::select(n, r, w, x, timeout, mask) }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        return ret_int(Err(libc::EINVAL));
    }
    // SAFETY: forwarded.
    unsafe { epoll_create1(0) }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    // SAFETY: passes the program's argument on.
    let fd = unsafe { real::epoll_create1(flags) };
    if fd >= 0 && !in_shim() {
        let _r = Reentry::enter();
        ops::new_epoll(fd);
    }
    fd
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int {
    if ours(fd) {
        // SAFETY: the program's event (may be null for DEL).
        let e = if ev.is_null() { None } else { Some(unsafe { ev.read_unaligned() }) };
        let r = {
            let _r = Reentry::enter();
            ops::epoll_ctl(epfd, op, fd, e)
        };
        match r {
            Ok(true) => return 0,
            Ok(false) => {}
            Err(e) => return ret_int(Err(e)),
        }
    }
    // SAFETY: passes the program's arguments on.
    unsafe { real::epoll_ctl(epfd, op, fd, ev) }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, evs: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { epoll_pwait(epfd, evs, max, timeout, std::ptr::null()) }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(epfd: c_int, evs: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    if in_shim() || mark(epfd) != MARK_EPOLL {
        // SAFETY: passes the program's arguments on.
        return unsafe { real::epoll_pwait(epfd, evs, max, timeout, mask) };
    }
    let _r = Reentry::enter();
    // SAFETY: the program's array and mask.
    unsafe { crate::poll::epoll_wait(epfd, evs, max, timeout, mask) }
}

// ---------------------------------------------------------------- exec

/// Runs `exec` with the engine sockets carried (`exec.rs`); `with_env`
/// execs with an environment that names the table.
unsafe fn exec_carrying(
    plain: impl FnOnce() -> c_int,
    with_env: impl FnOnce(&crate::exec::Carry) -> c_int,
) -> c_int {
    if in_shim() {
        return plain();
    }
    let Some(carry) = crate::exec::prepare() else { return plain() };
    let r = with_env(&carry);
    // Still here: the exec failed. Keep its errno.
    let e = crate::poll::errno();
    carry.abandon();
    set_errno(e);
    r
}

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int {
    // SAFETY: the program's arguments, passed on (the environment with our variable added).
    unsafe {
        exec_carrying(
            || real::execve(path, argv, envp),
            |c| {
                let extra = c.env_entry();
                let env = crate::exec::env_with(envp, &extra);
                real::execve(path, argv, env.as_ptr())
            },
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int {
    // SAFETY: as execve.
    unsafe {
        exec_carrying(
            || real::execvpe(file, argv, envp),
            |c| {
                let extra = c.env_entry();
                let env = crate::exec::env_with(envp, &extra);
                real::execvpe(file, argv, env.as_ptr())
            },
        )
    }
}

/// execv/execvp use the process's environment: the variable is set there
/// for the exec and taken out again if it fails.
unsafe fn with_process_env(c: &crate::exec::Carry, exec: impl FnOnce() -> c_int) -> c_int {
    let name = std::ffi::CString::new(crate::exec::ENV).expect("no NUL");
    let value = std::ffi::CString::new(c.value.as_str()).expect("digits");
    // SAFETY: NUL-terminated strings; the program is about to exec.
    unsafe {
        libc::setenv(name.as_ptr(), value.as_ptr(), 1);
        let r = exec();
        let e = crate::poll::errno();
        libc::unsetenv(name.as_ptr());
        set_errno(e);
        r
    }
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const libc::c_char, argv: *const *const libc::c_char) -> c_int {
    // SAFETY: the program's arguments, passed on.
    unsafe { exec_carrying(|| real::execv(path, argv), |c| with_process_env(c, || real::execv(path, argv))) }
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const libc::c_char, argv: *const *const libc::c_char) -> c_int {
    // SAFETY: the program's arguments, passed on.
    unsafe { exec_carrying(|| real::execvp(file, argv), |c| with_process_env(c, || real::execvp(file, argv))) }
}

// ---------------------------------------------------------------- credentials

/// Declares interposers of the calls that change a process's credentials:
/// each lets the in-process engine start first (`state::before_credentials_change`).
macro_rules! credential_fns {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) ;)*) => {
        $(
            /// Interposed: see `state::before_credentials_change`.
            ///
            /// # Safety
            /// As the libc function of this name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                crate::state::before_credentials_change();
                // SAFETY: passes the program's arguments on.
                unsafe { real::$name($($arg),*) }
            }
        )*
    };
}

credential_fns! {
    setuid(uid: libc::uid_t);
    setgid(gid: libc::gid_t);
    setreuid(r: libc::uid_t, e: libc::uid_t);
    setregid(r: libc::gid_t, e: libc::gid_t);
    setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t);
    setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t);
    setgroups(n: usize, list: *const libc::gid_t);
    initgroups(user: *const libc::c_char, group: libc::gid_t);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iov(base: *mut u8, len: usize) -> libc::iovec {
        libc::iovec { iov_base: base.cast(), iov_len: len }
    }

    /// What `iov_mut` takes of each entry of a whole vector.
    fn iov_lens(entries: &[libc::iovec]) -> Result<Vec<usize>, i32> {
        let mut room = MAX_RW_COUNT;
        entries.iter().map(|e| iov_len(e, &mut room)).collect()
    }

    #[test]
    fn iovecs_are_checked_and_cut_as_linux_does() {
        let mut a = [0u8; 8];
        let (p, null) = (a.as_mut_ptr(), std::ptr::null_mut());
        assert_eq!(iov_lens(&[iov(p, 3), iov(null, 0), iov(p, 8)]), Ok(vec![3, 0, 8]));
        assert_eq!(iov_lens(&[iov(p, 3), iov(null, 2)]), Err(libc::EFAULT));
        assert_eq!(iov_lens(&[iov(p, 1), iov(p, isize::MAX as usize + 1)]), Err(libc::EINVAL));
        // Lengths that add up past MAX_RW_COUNT are cut there; an entry past
        // the cut keeps nothing (a null base there is no fault).
        assert_eq!(iov_lens(&[iov(p, MAX_RW_COUNT - 5), iov(p, 8), iov(null, 7)]), Ok(vec![MAX_RW_COUNT - 5, 5, 0]));
        assert_eq!(iov_lens(&[iov(p, usize::MAX / 4), iov(p, usize::MAX / 4)]), Ok(vec![MAX_RW_COUNT, 0]));
        // SAFETY: rejected before any entry is read.
        assert_eq!(unsafe { iov_mut(std::ptr::null(), -1) }.map(|v| v.len()), Err(libc::EINVAL));
        // SAFETY: as above.
        assert_eq!(unsafe { iov_mut(std::ptr::null(), libc::UIO_MAXIOV + 1) }.map(|v| v.len()), Err(libc::EINVAL));
        // SAFETY: no entries are read (a NULL vector of none, as writev(fd, NULL, 0) passes).
        assert_eq!(unsafe { iov_mut(std::ptr::null(), 0) }.map(|v| v.len()), Ok(0));
        // SAFETY: msghdr is plain data; all zeroes is an empty one.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iovlen = (1usize << 32) + 1;
        // SAFETY: rejected before any entry is read.
        assert_eq!(unsafe { msg_iov(&m) }.map(|v| v.len()), Err(libc::EMSGSIZE), "a count past c_int is not cut to 1");
        m.msg_iovlen = libc::UIO_MAXIOV as usize + 1;
        // SAFETY: as above.
        assert_eq!(unsafe { msg_iov(&m) }.map(|v| v.len()), Err(libc::EMSGSIZE));
        // SAFETY: both entries point into `a` within its length.
        let v = unsafe { iov_mut([iov(p, 3), iov(p.wrapping_add(4), 4)].as_ptr(), 2) }.expect("two slices");
        assert_eq!(v.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![3, 4]);
    }
}
