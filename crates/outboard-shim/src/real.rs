//! The real libc functions, found with `dlsym(RTLD_NEXT, …)` once and cached.
//! Every call the shim passes through to the kernel goes through here.

use libc::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Looks `name` up in the libraries after ours (glibc), once.
pub fn lookup(cache: &AtomicUsize, name: &'static [u8]) -> usize {
    let p = cache.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: `name` is a NUL-terminated literal; dlsym has no other preconditions.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) } as usize;
    if f == 0 {
        // No such function below us: nothing sensible to call. Abort loudly
        // rather than jump to address 0.
        let msg = b"outboard-shim: libc function missing (dlsym RTLD_NEXT failed)\n";
        // SAFETY: writes a static buffer to stderr.
        unsafe {
            libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
            libc::abort();
        }
    }
    cache.store(f, Ordering::Relaxed);
    f
}

/// Declares `pub unsafe fn NAME(args) -> ret` calling the next `NAME` in the link chain.
macro_rules! real_fns {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ;)*) => {
        $(
            #[allow(clippy::missing_safety_doc)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static CACHE: AtomicUsize = AtomicUsize::new(0);
                let f = lookup(&CACHE, concat!(stringify!($name), "\0").as_bytes());
                // SAFETY: `f` is libc's function of this name and C signature.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(f) };
                unsafe { f($($arg),*) }
            }
        )*
    };
}

real_fns! {
    setuid(uid: libc::uid_t) -> c_int;
    setgid(gid: libc::gid_t) -> c_int;
    setreuid(r: libc::uid_t, e: libc::uid_t) -> c_int;
    setregid(r: libc::gid_t, e: libc::gid_t) -> c_int;
    setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t) -> c_int;
    setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t) -> c_int;
    setgroups(n: usize, list: *const libc::gid_t) -> c_int;
    initgroups(user: *const c_char, group: libc::gid_t) -> c_int;
    execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
    socket(domain: c_int, ty: c_int, proto: c_int) -> c_int;
    bind(fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int;
    listen(fd: c_int, backlog: c_int) -> c_int;
    accept(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int;
    accept4(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t, flags: c_int) -> c_int;
    connect(fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int;
    read(fd: c_int, buf: *mut c_void, n: usize) -> isize;
    write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize;
    writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize;
    send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize;
    sendto(fd: c_int, buf: *const c_void, n: usize, flags: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> isize;
    sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize;
    recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize;
    recvfrom(fd: c_int, buf: *mut c_void, n: usize, flags: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> isize;
    recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize;
    close(fd: c_int) -> c_int;
    shutdown(fd: c_int, how: c_int) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(fd: c_int, to: c_int) -> c_int;
    dup3(fd: c_int, to: c_int, flags: c_int) -> c_int;
    fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int;
    ioctl(fd: c_int, req: libc::c_ulong, arg: *mut c_void) -> c_int;
    setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: libc::socklen_t) -> c_int;
    getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut libc::socklen_t) -> c_int;
    getsockname(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int;
    getpeername(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int;
    ppoll(fds: *mut libc::pollfd, n: libc::nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    epoll_create1(flags: c_int) -> c_int;
    epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int;
    epoll_pwait(epfd: c_int, evs: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int;
    sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: usize) -> isize;
    pread(fd: c_int, buf: *mut c_void, n: usize, off: libc::off_t) -> isize;
    lseek(fd: c_int, off: libc::off_t, whence: c_int) -> libc::off_t;
    recvmmsg(fd: c_int, v: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int, ts: *mut libc::timespec) -> c_int;
    sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int;
    close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int;
    splice(i: c_int, ioff: *mut libc::loff_t, o: c_int, ooff: *mut libc::loff_t, n: usize, flags: libc::c_uint) -> isize;
    fclose(f: *mut libc::FILE) -> c_int;
    fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE;
}
