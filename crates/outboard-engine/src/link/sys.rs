//! Small safe wrappers over the interface syscalls several links share.
//!
//! What: interface lookups by name (`ifindex`, `if_mac`, `if_mtu`), the two
//! changes a link may make to an interface (`set_if_up`, `set_if_mtu`),
//! `poll_readable` for every link's `wait`, socket option helpers, an owned
//! fd (std's [`OwnedFd`]) and an [`Mmap`] RAII wrapper for rings.
//!
//! How: the interface calls are `ioctl(SIOCGIF*/SIOCSIF*)` on a throwaway
//! `AF_INET` datagram socket. A socket belongs to the network namespace of
//! the thread that creates it, so each call acts in the calling *thread's*
//! namespace (a test thread that `setns`-ed into a namespace sees that
//! namespace's interfaces).
//!
//! Errors: every function returns [`LinkError`], never panics. `ENODEV` and
//! `ENXIO` become [`LinkError::NoSuchInterface`] (with the name), `EBUSY`
//! [`LinkError::Busy`], `EPERM`/`EACCES` [`LinkError::NeedsPrivilege`]
//! (see [`if_err`]); a name that cannot be an interface name (empty, longer
//! than 15 bytes, containing NUL) is [`LinkError::BadSpec`].
//!
//! Not done: netlink, beyond reading the kernel's addresses on an interface
//! (`if_addresses`, through `getifaddrs`). The ioctls cover what the links
//! need (no address changes, routes or link creation: tests do those with `ip`).

use super::LinkError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::Duration;

/// Maps an OS error of `call` on interface `name` to the right [`LinkError`]:
/// `ENODEV`/`ENXIO` → `NoSuchInterface(name)`, `EBUSY` → `Busy(name)`,
/// `EPERM`/`EACCES` → `NeedsPrivilege`, anything else → `Io`.
pub fn if_err(call: &'static str, name: &str, err: io::Error) -> LinkError {
    match err.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => LinkError::NoSuchInterface(name.to_string()),
        Some(libc::EBUSY) => LinkError::Busy(format!("{name}: {call}: {err}")),
        _ => LinkError::io(call, err),
    }
}

/// An `ifreq` with `ifr_name` set to `name` and the rest zeroed.
/// `BadSpec` when `name` is empty, longer than 15 bytes or contains NUL.
pub fn ifreq(name: &str) -> Result<libc::ifreq, LinkError> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return Err(LinkError::BadSpec(format!(
            "{name:?} is not an interface name (1 to 15 bytes, no NUL)"
        )));
    }
    // SAFETY: ifreq is plain old data (arrays, integers, a union of those and
    // raw pointers); all-zero bytes are a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(b) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// The interface index of `name` in the calling thread's network namespace.
/// `NoSuchInterface(name)` when there is none.
pub fn ifindex(name: &str) -> Result<u32, LinkError> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(name, libc::SIOCGIFINDEX, "ioctl(SIOCGIFINDEX)", &mut req)?;
    // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
    let idx = unsafe { req.ifr_ifru.ifru_ifindex };
    u32::try_from(idx).map_err(|_| LinkError::NoSuchInterface(name.to_string()))
}

/// The kernel's own addresses on `name` (calling thread's namespace), as
/// `ADDR/PREFIX`: every IPv4 address, and IPv6 ones other than link-local
/// (`fe80::/10`, which every interface with IPv6 on has and which answers
/// nothing for our IPv4 address). From `getifaddrs` (netlink underneath).
pub fn if_addresses(name: &str) -> Result<Vec<String>, LinkError> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } < 0 {
        return Err(LinkError::last("getifaddrs"));
    }
    let prefix = |mask: &[u8]| mask.iter().map(|b| b.count_ones()).sum::<u32>();
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let n = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of its family;
        // ifa_netmask, when non-null, to one of the same family.
        unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                    let p = if ifa.ifa_netmask.is_null() {
                        32
                    } else {
                        let m = &*(ifa.ifa_netmask as *const libc::sockaddr_in);
                        prefix(&m.sin_addr.s_addr.to_ne_bytes())
                    };
                    out.push(format!("{ip}/{p}"));
                }
                libc::AF_INET6 => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
                    if ip.segments()[0] & 0xffc0 == 0xfe80 {
                        continue;
                    }
                    let p = if ifa.ifa_netmask.is_null() {
                        128
                    } else {
                        let m = &*(ifa.ifa_netmask as *const libc::sockaddr_in6);
                        prefix(&m.sin6_addr.s6_addr)
                    };
                    out.push(format!("{ip}/{p}"));
                }
                _ => {}
            }
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no node is used after.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The hardware (MAC) address of `name`.
pub fn if_mac(name: &str) -> Result<[u8; 6], LinkError> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(name, libc::SIOCGIFHWADDR, "ioctl(SIOCGIFHWADDR)", &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member (a sockaddr) of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, &src) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *dst = src as u8;
    }
    Ok(mac)
}

/// Sets the hardware (MAC) address of `name` (the device must be down or allow it).
pub fn set_if_mac(name: &str, mac: [u8; 6]) -> Result<(), LinkError> {
    let mut req = ifreq(name)?;
    // SAFETY: writing the hwaddr member (a plain sockaddr) of the union.
    unsafe {
        req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
        for (dst, &src) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac.iter()) {
            *dst = src as libc::c_char;
        }
    }
    ioctl_ifreq(name, libc::SIOCSIFHWADDR, "ioctl(SIOCSIFHWADDR)", &mut req)
}

/// The IP MTU of `name`.
pub fn if_mtu(name: &str) -> Result<usize, LinkError> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(name, libc::SIOCGIFMTU, "ioctl(SIOCGIFMTU)", &mut req)?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| {
        LinkError::io(
            "ioctl(SIOCGIFMTU)",
            io::Error::from(io::ErrorKind::InvalidData),
        )
    })
}

/// Whether the device has TCP segmentation offload turned on (`ethtool -k`
/// "tcp-segmentation-offload"): if not, the kernel refuses GSO frames from
/// AF_PACKET, so the link must not send them.
pub fn if_tso_enabled(name: &str) -> Result<bool, LinkError> {
    /// `struct ethtool_value`.
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    const ETHTOOL_GTSO: u32 = 0x1e;
    let mut val = EthtoolValue { cmd: ETHTOOL_GTSO, data: 0 };
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_data = (&mut val as *mut EthtoolValue).cast();
    ioctl_ifreq(name, libc::SIOCETHTOOL, "ioctl(SIOCETHTOOL, ETHTOOL_GTSO)", &mut req)?;
    Ok(val.data != 0)
}

/// Whether `name` is administratively up (IFF_UP).
pub fn if_is_up(name: &str) -> Result<bool, LinkError> {
    Ok(if_flags(name)? & libc::IFF_UP as libc::c_short != 0)
}

/// Brings `name` up (sets IFF_UP; a no-op when it already is). Needs CAP_NET_ADMIN
/// unless already up.
pub fn set_if_up(name: &str) -> Result<(), LinkError> {
    let flags = if_flags(name)?;
    if flags & libc::IFF_UP as libc::c_short != 0 {
        return Ok(());
    }
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ioctl_ifreq(name, libc::SIOCSIFFLAGS, "ioctl(SIOCSIFFLAGS)", &mut req)
}

/// Sets the IP MTU of `name`. Needs CAP_NET_ADMIN; the driver may refuse a
/// value outside its range (`Io` with EINVAL).
pub fn set_if_mtu(name: &str, mtu: usize) -> Result<(), LinkError> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu).map_err(|_| {
        LinkError::io(
            "ioctl(SIOCSIFMTU)",
            io::Error::from_raw_os_error(libc::EINVAL),
        )
    })?;
    ioctl_ifreq(name, libc::SIOCSIFMTU, "ioctl(SIOCSIFMTU)", &mut req)
}

fn if_flags(name: &str) -> Result<libc::c_short, LinkError> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(name, libc::SIOCGIFFLAGS, "ioctl(SIOCGIFFLAGS)", &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// Runs one interface ioctl on a throwaway AF_INET socket (in the calling
/// thread's network namespace). Errors are mapped by [`if_err`].
pub fn ioctl_ifreq(
    name: &str,
    request: libc::Ioctl,
    call: &'static str,
    req: &mut libc::ifreq,
) -> Result<(), LinkError> {
    let sock = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    // SAFETY: `sock` is an open socket; `req` is a valid, writable ifreq that
    // outlives the call; every SIOC*IF* request reads/writes only an ifreq.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request, req as *mut libc::ifreq) };
    if rc < 0 {
        return Err(if_err(call, name, io::Error::last_os_error()));
    }
    Ok(())
}

/// `socket(domain, ty | SOCK_CLOEXEC, protocol)` as an owned fd.
pub fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> Result<OwnedFd, LinkError> {
    // SAFETY: socket(2) takes only integers.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(LinkError::last("socket"));
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &val)` for a plain-data `val` (an int, a
/// ring request struct, ...). Errors carry `call`.
pub fn setsockopt<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
    call: &'static str,
) -> Result<(), LinkError> {
    // SAFETY: `val` points to size_of::<T>() readable bytes for the call's
    // duration; the kernel copies them and validates the length itself.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(LinkError::last(call));
    }
    Ok(())
}

/// `getsockopt(fd, level, name)` into a plain-data `T` (an int, a C stats
/// struct), starting from `init` (what is left where the kernel writes
/// less). Errors carry `call`.
pub fn getsockopt<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    init: T,
    call: &'static str,
) -> Result<T, LinkError> {
    let mut val = init;
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a writable T of `len` bytes; the kernel writes at most
    // `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut val as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if rc < 0 {
        return Err(LinkError::last(call));
    }
    Ok(val)
}

/// Sets O_NONBLOCK on `fd`.
pub fn set_nonblocking(fd: RawFd) -> Result<(), LinkError> {
    // SAFETY: fcntl(F_GETFL/F_SETFL) on an fd only reads/sets its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(LinkError::last("fcntl(F_GETFL)"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(LinkError::last("fcntl(F_SETFL)"));
    }
    Ok(())
}

/// Sleeps until one of `fds` is readable (POLLIN, or an error/hang-up on
/// it) or `timeout` passes. A signal (EINTR) returns `Ok` early: callers
/// treat every return as a possibly spurious wake-up. Negative fds are
/// ignored; an empty `fds` just sleeps. Nanosecond resolution (ppoll).
pub fn poll_readable(fds: &[RawFd], timeout: Duration) -> Result<(), LinkError> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Clamp absurd timeouts to a day: a wait loop wakes up before then anyway.
    let t = timeout.min(Duration::from_secs(86_400));
    let ts = libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds (a null-free
    // pointer even when empty); `ts` is a valid timespec; a null sigmask
    // leaves the signal mask alone.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(());
        }
        return Err(LinkError::io("ppoll", err));
    }
    Ok(())
}

/// A memory mapping, unmapped on drop. The links use it for rings the kernel
/// shares with us (AF_PACKET, AF_XDP) and for shared memory between processes.
///
/// The mapping is raw memory: whoever reads or writes it through
/// [`Mmap::as_ptr`] is responsible for the synchronisation the sharing
/// party (kernel or another process) expects.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving the owner
// to another thread is fine (access through the raw pointer is the user's
// concern, as documented).
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset`, `PROT_READ | PROT_WRITE`,
    /// `MAP_SHARED | extra_flags` (e.g. `libc::MAP_POPULATE`). Errors carry
    /// "mmap".
    pub fn shared(
        fd: RawFd,
        len: usize,
        offset: u64,
        extra_flags: libc::c_int,
    ) -> Result<Mmap, LinkError> {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| LinkError::io("mmap", io::Error::from_raw_os_error(libc::EINVAL)))?;
        Mmap::map(fd, len, off, libc::MAP_SHARED | extra_flags)
    }

    /// A zeroed, private, anonymous read-write mapping of `len` bytes.
    pub fn anonymous(len: usize) -> Result<Mmap, LinkError> {
        Mmap::map(-1, len, 0, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)
    }

    fn map(
        fd: RawFd,
        len: usize,
        offset: libc::off_t,
        flags: libc::c_int,
    ) -> Result<Mmap, LinkError> {
        if len == 0 {
            return Err(LinkError::io(
                "mmap",
                io::Error::from_raw_os_error(libc::EINVAL),
            ));
        }
        // SAFETY: a fresh mapping at an address the kernel chooses touches no
        // existing Rust memory; all arguments are plain values.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LinkError::last("mmap"));
        }
        let ptr = NonNull::new(p as *mut u8).ok_or_else(|| LinkError::last("mmap"))?;
        Ok(Mmap { ptr, len })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (a mapping is never empty); here for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned and nothing
        // borrowed from the mapping outlives `self` (borrows are tied to it).
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_on_loopback_and_missing() {
        assert_eq!(if_mac("lo").unwrap(), [0; 6]);
        assert!(ifindex("lo").unwrap() >= 1);
        assert!(if_mtu("lo").unwrap() >= 1280);
        assert!(
            matches!(ifindex("obt-nosuch0"), Err(LinkError::NoSuchInterface(n)) if n == "obt-nosuch0")
        );
        assert!(matches!(
            if_mtu("obt-nosuch0"),
            Err(LinkError::NoSuchInterface(_))
        ));
        assert!(matches!(ifindex(""), Err(LinkError::BadSpec(_))));
        assert!(matches!(
            ifindex("0123456789abcdef"),
            Err(LinkError::BadSpec(_))
        ));
    }

    #[test]
    fn poll_times_out_and_mmap_roundtrips() {
        poll_readable(&[], Duration::from_millis(1)).unwrap();
        let m = Mmap::anonymous(8192).unwrap();
        assert_eq!(m.len(), 8192);
        // SAFETY: the mapping is 8192 writable bytes owned by `m`.
        unsafe {
            *m.as_ptr().add(8191) = 7;
            assert_eq!(*m.as_ptr().add(8191), 7);
        }
    }
}
