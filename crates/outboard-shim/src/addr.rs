//! Socket addresses between C and Rust, checked: a short or foreign address
//! is an error, never a read past what the program gave.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// An address the API gave (family-neutral) as the shim's IPv4 form: IPv4,
/// or IPv4-mapped IPv6; `None` for any other IPv6 address (the engine
/// serves the shim's sockets over IPv4 only, so none arrives today).
pub fn v4_of(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(v4) => Some(v4),
        SocketAddr::V6(v6) => v6.ip().to_ipv4_mapped().map(|ip| SocketAddrV4::new(ip, v6.port())),
    }
}

/// A stream's address as the shim shows it: `v4_of`, or `0.0.0.0` with the
/// port for an address it cannot show as IPv4.
pub fn v4_or_unspecified(a: SocketAddr) -> SocketAddrV4 {
    v4_of(a).unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, a.port()))
}

/// Reads an AF_INET address (or an IPv4-mapped AF_INET6 one, as dual-stack
/// programs pass). `Err(errno)` for a bad pointer or length; `Ok(None)` for
/// another family (the kernel's business).
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be null).
pub unsafe fn read_v4(addr: *const libc::sockaddr, len: libc::socklen_t) -> Result<Option<SocketAddrV4>, i32> {
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
            Ok(Some(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            if (len as usize) < std::mem::size_of::<libc::sockaddr_in6>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: len covers a sockaddr_in6.
            let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            // `::` (a dual-stack wildcard) and IPv4-mapped addresses are IPv4
            // to the engine; other IPv6 addresses are the kernel's.
            if ip.is_unspecified() {
                return Ok(Some(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)));
            }
            Ok(ip.to_ipv4_mapped().map(|v4| SocketAddrV4::new(v4, port)))
        }
        _ => Ok(None),
    }
}

/// True for `AF_UNSPEC` (connect's "dissolve the association").
///
/// # Safety
/// As `read_v4`.
pub unsafe fn is_unspec(addr: *const libc::sockaddr, len: libc::socklen_t) -> bool {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return false;
    }
    // SAFETY: the family field is readable.
    i32::from(unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) }) == libc::AF_UNSPEC
}

/// Writes `a` as a sockaddr_in the way the kernel does: truncated to the
/// buffer's size, `*len` set to the full size. Null pointers write nothing.
///
/// # Safety
/// `addr` must point to `*len` writable bytes; `len` must be valid (or both null).
pub unsafe fn write_v4(a: SocketAddrV4, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    if crate::addr::V6_CONTEXT.with(|c| c.get()) {
        // SAFETY: forwarded contract.
        return unsafe { write_v6(a, addr, len) };
    }
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    };
    let full = std::mem::size_of::<libc::sockaddr_in>();
    // SAFETY: `len` is valid per the contract.
    let room = unsafe { *len } as usize;
    let n = room.min(full);
    // SAFETY: copies n ≤ room bytes into the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping((&sin as *const libc::sockaddr_in).cast::<u8>(), addr.cast::<u8>(), n);
        *len = full as libc::socklen_t;
    }
}

thread_local! {
    /// Set while an IPv6 socket's address is written back (dual-stack sockets see IPv4-mapped addresses).
    pub static V6_CONTEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Writes `a` for a dual-stack AF_INET6 socket: `::` for 0.0.0.0, else `::ffff:a.b.c.d`.
///
/// # Safety
/// As `write_v4`.
pub unsafe fn write_v6(a: SocketAddrV4, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    let ip = if a.ip().is_unspecified() { std::net::Ipv6Addr::UNSPECIFIED } else { a.ip().to_ipv6_mapped() };
    let sin6 = libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: a.port().to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr { s6_addr: ip.octets() },
        sin6_scope_id: 0,
    };
    let full = std::mem::size_of::<libc::sockaddr_in6>();
    // SAFETY: `len` is valid per the contract.
    let room = unsafe { *len } as usize;
    let n = room.min(full);
    // SAFETY: copies n ≤ room bytes into the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping((&sin6 as *const libc::sockaddr_in6).cast::<u8>(), addr.cast::<u8>(), n);
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

    #[test]
    fn api_addresses_show_as_before() {
        let v4: SocketAddr = "10.0.0.2:80".parse().unwrap();
        assert_eq!(v4_of(v4), Some("10.0.0.2:80".parse().unwrap()));
        let mapped: SocketAddr = "[::ffff:10.0.0.2]:80".parse().unwrap();
        assert_eq!(v4_of(mapped), Some("10.0.0.2:80".parse().unwrap()));
        let v6: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
        assert_eq!(v4_of(v6), None);
        assert_eq!(v4_or_unspecified(v6), "0.0.0.0:80".parse().unwrap());
        assert_eq!(v4_or_unspecified(v4), "10.0.0.2:80".parse().unwrap());
    }

    #[test]
    fn getsockname_forms_are_unchanged_for_both_socket_families() {
        let a: SocketAddrV4 = "10.0.0.1:7000".parse().unwrap();
        // AF_INET: a sockaddr_in.
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        unsafe { write_v4(a, (&mut sin as *mut libc::sockaddr_in).cast(), &mut len) };
        assert_eq!(i32::from(sin.sin_family), libc::AF_INET);
        assert_eq!((u32::from_be(sin.sin_addr.s_addr), u16::from_be(sin.sin_port)), (0x0a00_0001, 7000));
        // A dual-stack AF_INET6 socket: IPv4-mapped, and `::` for 0.0.0.0.
        for (a, want) in [(a, "::ffff:10.0.0.1"), ("0.0.0.0:7000".parse().unwrap(), "::")] {
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            with_family(true, || unsafe { write_v4(a, (&mut sin6 as *mut libc::sockaddr_in6).cast(), &mut len) });
            assert_eq!(i32::from(sin6.sin6_family), libc::AF_INET6);
            assert_eq!(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr), want.parse::<std::net::Ipv6Addr>().unwrap());
            assert_eq!(u16::from_be(sin6.sin6_port), 7000);
        }
    }
}
