//! Socket addresses between C and Rust, checked: a short or foreign address
//! is an error, never a read past what the program gave.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// An address as the engine sees it: an IPv4-mapped IPv6 address (what a
/// dual-stack AF_INET6 socket passes for an IPv4 peer) is IPv4; other IPv6
/// addresses, `::` included, stay IPv6.
pub fn unmap(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddr::V4(SocketAddrV4::new(ip, v6.port())),
            None => a,
        },
        v4 => v4,
    }
}

/// The unspecified address of a socket's family (`::` for AF_INET6).
pub fn unspecified(v6: bool, port: u16) -> SocketAddr {
    if v6 {
        SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)
    } else {
        SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port)
    }
}

/// Reads an AF_INET or AF_INET6 address ([`unmap`]ped: IPv4-mapped ones as
/// IPv4). `Err(errno)` for a bad pointer or length; `Ok(None)` for another
/// family (the kernel's business).
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be null).
pub unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: libc::socklen_t) -> Result<Option<SocketAddr>, i32> {
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: at least the family field is readable (checked above).
    let family = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) };
    match i32::from(family) {
        libc::AF_INET => {
            if (len as usize) < std::mem::size_of::<libc::sockaddr_in>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: len covers a sockaddr_in.
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            Ok(Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port)))))
        }
        libc::AF_INET6 => {
            if (len as usize) < std::mem::size_of::<libc::sockaddr_in6>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: len covers a sockaddr_in6.
            let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let a = SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), 0, sin6.sin6_scope_id);
            Ok(Some(unmap(SocketAddr::V6(a))))
        }
        _ => Ok(None),
    }
}

/// True for `AF_UNSPEC` (connect's "dissolve the association").
///
/// # Safety
/// As `read_sockaddr`.
pub unsafe fn is_unspec(addr: *const libc::sockaddr, len: libc::socklen_t) -> bool {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return false;
    }
    // SAFETY: the family field is readable.
    i32::from(unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) }) == libc::AF_UNSPEC
}

/// Writes `a` as the kernel does for the socket's family (the thread's
/// [`with_family`]): a sockaddr_in for AF_INET; for AF_INET6 a
/// sockaddr_in6, IPv4 addresses IPv4-mapped (`::` for 0.0.0.0). Truncated
/// to the buffer's size, `*len` set to the full size. Null pointers write
/// nothing.
///
/// # Safety
/// `addr` must point to `*len` writable bytes; `len` must be valid (or both null).
pub unsafe fn write_sockaddr(a: SocketAddr, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let v6 = V6_CONTEXT.with(|c| c.get());
    match (a, v6) {
        (SocketAddr::V4(a), false) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: forwarded contract.
            unsafe { copy_out(&sin, addr, len) }
        }
        (a, _) => {
            let (ip, port, scope) = match a {
                SocketAddr::V4(v4) if v4.ip().is_unspecified() => (Ipv6Addr::UNSPECIFIED, v4.port(), 0),
                SocketAddr::V4(v4) => (v4.ip().to_ipv6_mapped(), v4.port(), 0),
                SocketAddr::V6(v6) => (*v6.ip(), v6.port(), v6.scope_id()),
            };
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: port.to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: ip.octets() },
                sin6_scope_id: scope,
            };
            // SAFETY: forwarded contract.
            unsafe { copy_out(&sin6, addr, len) }
        }
    }
}

thread_local! {
    /// Set while an AF_INET6 socket's address is written back.
    pub static V6_CONTEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Copies `v` into the caller's buffer, truncated to `*len`, and sets `*len` to its full size.
///
/// # Safety
/// As `write_sockaddr`, both pointers non-null.
unsafe fn copy_out<T>(v: &T, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    let full = std::mem::size_of::<T>();
    // SAFETY: `len` is valid per the contract.
    let room = unsafe { *len } as usize;
    let n = room.min(full);
    // SAFETY: copies n ≤ room bytes into the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), addr.cast::<u8>(), n);
        *len = full as libc::socklen_t;
    }
}

/// Runs `f` with addresses written in IPv6 form when `v6`.
pub fn with_family<T>(v6: bool, f: impl FnOnce() -> T) -> T {
    V6_CONTEXT.with(|c| c.set(v6));
    let r = f();
    V6_CONTEXT.with(|c| c.set(false));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(a: &libc::sockaddr_in6) -> Option<SocketAddr> {
        let len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        unsafe { read_sockaddr((a as *const libc::sockaddr_in6).cast(), len) }.unwrap()
    }

    fn sin6(ip: &str, port: u16) -> libc::sockaddr_in6 {
        let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        s.sin6_port = port.to_be();
        s.sin6_addr.s6_addr = ip.parse::<Ipv6Addr>().unwrap().octets();
        s
    }

    #[test]
    fn ipv6_addresses_are_read_as_ipv6_and_mapped_ones_as_ipv4() {
        assert_eq!(read(&sin6("fd77::2", 80)), Some("[fd77::2]:80".parse().unwrap()));
        assert_eq!(read(&sin6("::", 80)), Some("[::]:80".parse().unwrap()));
        assert_eq!(read(&sin6("::ffff:10.0.0.2", 80)), Some("10.0.0.2:80".parse().unwrap()));
        // A short sockaddr_in6 is EINVAL, never a read past it.
        let s = sin6("fd77::2", 80);
        let r = unsafe { read_sockaddr((&s as *const libc::sockaddr_in6).cast(), 16) };
        assert_eq!(r, Err(libc::EINVAL));
    }

    fn written(a: SocketAddr, v6: bool) -> (i32, SocketAddr) {
        let mut buf: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        with_family(v6, || unsafe { write_sockaddr(a, (&mut buf as *mut libc::sockaddr_in6).cast(), &mut len) });
        let fam = i32::from(buf.sin6_family);
        if fam == libc::AF_INET {
            let sin: libc::sockaddr_in = unsafe { std::ptr::read_unaligned((&buf as *const libc::sockaddr_in6).cast()) };
            assert_eq!(len as usize, std::mem::size_of::<libc::sockaddr_in>());
            (fam, SocketAddr::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(), u16::from_be(sin.sin_port)))
        } else {
            assert_eq!(len as usize, std::mem::size_of::<libc::sockaddr_in6>());
            (fam, SocketAddr::new(Ipv6Addr::from(buf.sin6_addr.s6_addr).into(), u16::from_be(buf.sin6_port)))
        }
    }

    #[test]
    fn addresses_are_written_in_the_sockets_family() {
        let v4: SocketAddr = "10.0.0.1:7000".parse().unwrap();
        assert_eq!(written(v4, false), (libc::AF_INET, v4));
        // AF_INET6: IPv4 peers IPv4-mapped, `::` for 0.0.0.0, IPv6 as it is.
        assert_eq!(written(v4, true), (libc::AF_INET6, "[::ffff:10.0.0.1]:7000".parse().unwrap()));
        assert_eq!(written("0.0.0.0:7000".parse().unwrap(), true), (libc::AF_INET6, "[::]:7000".parse().unwrap()));
        let v6: SocketAddr = "[fd77::1]:443".parse().unwrap();
        assert_eq!(written(v6, true), (libc::AF_INET6, v6));
    }

    #[test]
    fn unmap_and_unspecified() {
        assert_eq!(unmap("[::ffff:1.2.3.4]:5".parse().unwrap()), "1.2.3.4:5".parse().unwrap());
        assert_eq!(unmap("[fd77::1]:5".parse().unwrap()), "[fd77::1]:5".parse::<SocketAddr>().unwrap());
        assert_eq!(unspecified(true, 9), "[::]:9".parse().unwrap());
        assert_eq!(unspecified(false, 9), "0.0.0.0:9".parse().unwrap());
    }
}
