//! One engine per interface: the claim every `af_xdp`, `af_packet` and `tap`
//! link holds on its interface for as long as it lives.
//!
//! Two engines on one interface both answer ARP for their addresses, and one
//! resets the other's connections (it sees their segments and knows nothing
//! of them). AF_PACKET never refuses a second socket, and an AF_PACKET engine
//! beside an AF_XDP one is not refused either, so the links claim the
//! interface themselves.
//!
//! # How
//!
//! A Unix stream socket bound (and listening) in the **abstract** namespace
//! under `outboard-link/<ifindex>`:
//! - abstract Unix names belong to the network namespace of the socket, the
//!   same scope as interface indexes: engines in two namespaces do not clash;
//! - the name goes away with the last fd of the socket, whatever ends the
//!   process (SIGKILL included): there is never a stale lock to clean up,
//!   unlike a pid file or `flock` on a path that outlives the namespace;
//! - `bind` fails with `EADDRINUSE` while another process holds it, atomically;
//! - a non-blocking `connect` to the name and `SO_PEERCRED` tell the
//!   holder's pid for the message (the holder never accepts; the connection
//!   waits in its backlog and goes when we close it. A full backlog or a pid
//!   in another pid namespace only leaves the pid out).
//!
//! The claim is per process: the first link of a process on an interface
//! binds the socket, later links of the same process (more AF_XDP queues, an
//! AF_PACKET link beside an AF_XDP one in a test) share it, counted in a
//! process-wide table keyed by (network namespace, ifindex); the last one to
//! go closes it.
//!
//! Not done: programs other than outboard engines are not seen (tcpdump on
//! the interface is harmless; another XDP program is refused by `af_xdp`
//! itself). A child forked without exec keeps the fd and so the claim.

use super::LinkError;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

/// The abstract socket name of the claim on `ifindex` (without the leading NUL).
pub fn claim_name(ifindex: u32) -> String {
    format!("outboard-link/{ifindex}")
}

struct Held {
    netns: u64,
    ifindex: u32,
    users: usize,
    _sock: OwnedFd,
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<Held>> {
    // Plain pushes, counts and removes: a panic elsewhere leaves it consistent.
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// Identity of the calling thread's network namespace (the scope of both
/// ifindexes and abstract socket names).
pub fn netns_id() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0)
}

/// This process's hold on one interface; the interface is free again when
/// the last `Claim` of the process on it drops.
#[derive(Debug)]
pub struct Claim {
    netns: u64,
    ifindex: u32,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut list = held();
        if let Some(i) = list
            .iter()
            .position(|h| h.netns == self.netns && h.ifindex == self.ifindex)
        {
            list[i].users -= 1;
            if list[i].users == 0 {
                list.swap_remove(i);
            }
        }
    }
}

/// `sockaddr_un` for the abstract name of `ifindex`, and its length.
fn address(ifindex: u32) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain old data; all-zero bytes are a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = claim_name(ifindex);
    // sun_path[0] stays 0: the abstract namespace. The name is short (< 30 bytes).
    for (dst, &src) in sa.sun_path[1..].iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (sa, len as libc::socklen_t)
}

fn unix_socket() -> Result<OwnedFd, LinkError> {
    super::sys::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0)
}

/// The pid of the process holding the claim on `ifindex` in the calling
/// thread's network namespace, if one holds it and it can be told.
pub fn holder(ifindex: u32) -> Option<u32> {
    let fd = unix_socket().ok()?;
    let (sa, len) = address(ifindex);
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes for the call.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if rc < 0 {
        return None;
    }
    let cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let cred = super::sys::getsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_PEERCRED,
        cred,
        "getsockopt(SO_PEERCRED)",
    )
    .ok()?;
    u32::try_from(cred.pid).ok().filter(|&p| p != 0)
}

/// The `Busy` error for `iface` (index `ifindex`) held by another engine.
pub fn busy(iface: &str, ifindex: u32) -> LinkError {
    let who = match holder(ifindex) {
        Some(pid) => format!("another outboard engine (pid {pid}) holds it"),
        None => "another outboard engine holds it".to_string(),
    };
    LinkError::Busy(format!(
        "{iface}: {who} (two engines on one interface would both answer ARP and reset \
         each other's connections)"
    ))
}

/// Claims `iface` (index `ifindex`, in the calling thread's network
/// namespace) for this process. `Busy`, naming the holder's pid where it
/// can, when another process holds it.
pub fn claim(iface: &str, ifindex: u32) -> Result<Claim, LinkError> {
    let netns = netns_id();
    let mut list = held();
    if let Some(h) = list
        .iter_mut()
        .find(|h| h.netns == netns && h.ifindex == ifindex)
    {
        h.users += 1;
        return Ok(Claim { netns, ifindex });
    }
    let fd = unix_socket()?;
    let (sa, len) = address(ifindex);
    // A claim socket of our own that we closed can outlive the close for a
    // moment: a child another thread is forking holds a copy until it execs
    // (the socket is close-on-exec). Its holder is then this very process:
    // wait for it (up to a second) rather than report ourselves as "another engine".
    let mut tries = 0;
    loop {
        // SAFETY: `sa` is a valid sockaddr_un of `len` bytes for the call.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            )
        };
        if rc == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EADDRINUSE) {
            return Err(LinkError::io("bind(claim socket)", err));
        }
        tries += 1;
        if tries > 100 || holder(ifindex) != Some(std::process::id()) {
            return Err(busy(iface, ifindex));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // A backlog for `holder`'s probes, which are never accepted.
    // SAFETY: listen(2) takes an fd and an integer.
    if unsafe { libc::listen(fd.as_raw_fd(), 64) } < 0 {
        return Err(LinkError::last("listen(claim socket)"));
    }
    list.push(Held {
        netns,
        ifindex,
        users: 1,
        _sock: fd,
    });
    Ok(Claim { netns, ifindex })
}

/// The claim socket this process holds on `ifindex` (live upgrade: it goes
/// to the new engine, so the interface is never free in between).
pub fn raw_fd(ifindex: u32) -> Option<std::os::fd::RawFd> {
    let netns = netns_id();
    held()
        .iter()
        .find(|h| h.netns == netns && h.ifindex == ifindex)
        .map(|h| h._sock.as_raw_fd())
}

/// Takes over a claim socket handed over by the engine being upgraded (its
/// name stays bound throughout: the old engine's copy and this one are the
/// same socket).
pub fn adopt(ifindex: u32, sock: OwnedFd) -> Claim {
    let netns = netns_id();
    let mut list = held();
    if let Some(h) = list.iter_mut().find(|h| h.netns == netns && h.ifindex == ifindex) {
        h.users += 1;
        return Claim { netns, ifindex };
    }
    list.push(Held { netns, ifindex, users: 1, _sock: sock });
    Claim { netns, ifindex }
}

/// For tests of the claim itself: how many claims this process holds on
/// `ifindex` in the calling thread's namespace.
pub fn users(ifindex: u32) -> usize {
    let netns = netns_id();
    held()
        .iter()
        .find(|h| h.netns == netns && h.ifindex == ifindex)
        .map_or(0, |h| h.users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_of_one_process_share_and_release() {
        // An ifindex no interface has: the claim does not look at interfaces.
        let idx = 0x7fff_0000 + std::process::id() % 0xffff;
        let a = claim("test0", idx).expect("first claim");
        let b = claim("test0", idx).expect("second claim in the same process");
        assert_eq!(users(idx), 2);
        drop(a);
        assert_eq!(users(idx), 1);
        // Another socket (as another process would) cannot bind the name now.
        let fd = unix_socket().unwrap();
        let (sa, len) = address(idx);
        // SAFETY: valid sockaddr_un for the call.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                len,
            )
        };
        assert!(rc < 0, "the name must be taken");
        assert_eq!(holder(idx), Some(std::process::id()));
        drop(b);
        assert_eq!(users(idx), 0);
        assert_eq!(holder(idx), None);
        // SAFETY: valid sockaddr_un for the call.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                len,
            )
        };
        assert_eq!(rc, 0, "free again after the last claim dropped");
    }
}
