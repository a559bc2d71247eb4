//! The lab's only unsafe code: AF_PACKET sockets for the relay, `ppoll`,
//! signal handlers, `kill`, the effective uid and the monotonic clock. Each
//! function is a thin, checked wrapper; errors come back as `io::Error`.

use outboard_time::{Duration, Instant};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Now, on CLOCK_MONOTONIC (the same clock as `outboard_engine::clock::now`).
pub fn now() -> Instant {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return Instant::ZERO;
    }
    Instant::from_nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Sends `sig` to every process of the group `pgid` (0 checks that one is left).
pub fn kill_group(pgid: i32, sig: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    signal(-pgid, sig)
}

/// Sends `sig` to `pid`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    signal(pid, sig)
}

/// kill(2) for a target the callers checked: one process (> 0) or one group (< -1).
fn signal(target: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers; the callers never pass 0, -1 or 1-as-a-group.
    let rc = unsafe { libc::kill(target, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGTERM, SIGINT and SIGHUP set a flag (read with [`stop_requested`])
/// instead of killing the process. No SA_RESTART: a blocked `ppoll` returns EINTR.
pub fn install_stop_handler() -> io::Result<()> {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid starting value (empty mask, no flags).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
        // SAFETY: `sa.sa_mask` is a valid sigset_t owned by us.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: `sa` is fully initialised; the handler only stores to an atomic.
        let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// True once SIGTERM/SIGINT/SIGHUP arrived (after [`install_stop_handler`]).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Asks for a stop as if a signal had arrived (tests, embedding).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Waits until one of `fds` is readable (or, for those with `want_out`,
/// writable), `timeout` passes, or a signal arrives. EINTR is not an error.
pub fn wait(fds: &[(RawFd, bool)], timeout: Duration) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, want_out)| libc::pollfd {
            fd,
            events: libc::POLLIN | if want_out { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds; `ts` a valid timespec; null sigmask.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(());
        }
        return Err(e);
    }
    Ok(())
}

/// An AF_PACKET SOCK_RAW socket bound to one interface, promiscuous,
/// nonblocking, not seeing its own transmissions.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifname: String,
    drops: u64,
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and we pass its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Names the failing step in the error while keeping its kind and errno.
fn ctx(what: &str, ifname: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} on {ifname}: {e}"))
}

impl PacketSocket {
    /// Opens and binds the socket. Fails with NotFound when `ifname` does not exist.
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        let cname = CString::new(ifname).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL byte")
        })?;
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no such interface: {ifname}"),
            ));
        }
        // Protocol 0 on the socket: nothing is queued before bind names the interface.
        // SAFETY: plain socket(2) call; the result is checked below.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(ctx("socket(AF_PACKET)", ifname, io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = PacketSocket {
            fd,
            ifname: ifname.to_string(),
            drops: 0,
        };
        let fdn = s.fd.as_raw_fd();
        // Large buffers absorb bursts while the relay sleeps; FORCE needs CAP_NET_ADMIN.
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if setsockopt_int(fdn, libc::SOL_SOCKET, force, 8 << 20).is_err() {
                let _ = setsockopt_int(fdn, libc::SOL_SOCKET, plain, 8 << 20);
            }
        }
        setsockopt_int(fdn, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
            .map_err(|e| ctx("PACKET_IGNORE_OUTGOING", ifname, e))?;
        // SAFETY: a zeroed sockaddr_ll is valid; we fill the fields bind needs.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and we pass its exact size.
        let rc = unsafe {
            libc::bind(
                fdn,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(ctx("bind", ifname, io::Error::last_os_error()));
        }
        // SAFETY: a zeroed packet_mreq is valid; we fill the fields the kernel reads.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: `mreq` is a valid packet_mreq and we pass its exact size.
        let rc = unsafe {
            libc::setsockopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq as *const libc::packet_mreq as *const libc::c_void,
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(ctx(
                "PACKET_ADD_MEMBERSHIP promisc",
                ifname,
                io::Error::last_os_error(),
            ));
        }
        Ok(s)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Receives one frame into `buf`: its full length (which may exceed
    /// `buf.len()`: the frame was truncated), or WouldBlock.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Sends one whole frame out of the bound interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else if n as usize != frame.len() {
            Err(io::Error::new(io::ErrorKind::WriteZero, "short send"))
        } else {
            Ok(())
        }
    }

    /// Frames the kernel dropped on this socket's receive queue since open
    /// (PACKET_STATISTICS resets on read, so we keep the sum).
    pub fn kernel_drops(&mut self) -> u64 {
        // SAFETY: a zeroed tpacket_stats is valid.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes and `len` is a valid in/out length.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 {
            self.drops += u64::from(st.tp_drops);
        }
        self.drops
    }
}
