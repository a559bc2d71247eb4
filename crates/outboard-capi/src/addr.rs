//! Family-neutral socket addresses for C (`ob_addr_t`), and the IPv4 form
//! (`uint32_t` in host byte order and a port) the older calls keep.

use crate::{put_opt, Errno, EINVAL};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// `ob_addr_t.family` of an IPv4 address (Linux's `AF_INET`).
pub const OB_AF_INET: u16 = 2;
/// `ob_addr_t.family` of an IPv6 address (Linux's `AF_INET6`).
pub const OB_AF_INET6: u16 = 10;

/// A socket address of either family, as the family-neutral calls
/// (`ob_connect_addr`, `ob_send_to_addr`, `ob_recv_from_addr`,
/// `ob_stream_local`, ...) take and give it. `family` is `OB_AF_INET` (2)
/// or `OB_AF_INET6` (10); `port` is in host byte order; `addr` holds the
/// address bytes in network order (IPv4: the first 4, the rest ignored on
/// input and zero on output); `scope_id` is an IPv6 link-local address's
/// interface (0 otherwise).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ob_addr_t {
    pub family: u16,
    pub port: u16,
    pub scope_id: u32,
    pub addr: [u8; 16],
}

/// The Rust address of a C one: EINVAL for NULL, EAFNOSUPPORT for another family.
pub(crate) unsafe fn addr_from_c(a: *const ob_addr_t) -> Result<SocketAddr, Errno> {
    from_c(a.as_ref().ok_or(EINVAL)?)
}

fn from_c(a: &ob_addr_t) -> Result<SocketAddr, Errno> {
    match a.family {
        OB_AF_INET => {
            let ip = Ipv4Addr::new(a.addr[0], a.addr[1], a.addr[2], a.addr[3]);
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, a.port)))
        }
        OB_AF_INET6 => Ok(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(a.addr), a.port, 0, a.scope_id))),
        _ => Err(Errno(libc::EAFNOSUPPORT)),
    }
}

/// The C form of an address.
pub(crate) fn addr_to_c(a: SocketAddr) -> ob_addr_t {
    match a {
        SocketAddr::V4(v4) => {
            let mut addr = [0; 16];
            addr[..4].copy_from_slice(&v4.ip().octets());
            ob_addr_t { family: OB_AF_INET, port: v4.port(), scope_id: 0, addr }
        }
        SocketAddr::V6(v6) => ob_addr_t { family: OB_AF_INET6, port: v6.port(), scope_id: v6.scope_id(), addr: v6.ip().octets() },
    }
}

/// The C form of an IP address (port 0).
pub(crate) fn ip_to_c(ip: IpAddr) -> ob_addr_t {
    addr_to_c(SocketAddr::new(ip, 0))
}

/// `ipv4:port` of the IPv4 calls (host byte order).
pub(crate) fn sockaddr(ipv4: u32, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ipv4), port))
}

/// Stores `a` through the IPv4 calls' out-pointers (each may be NULL).
/// An IPv6 address fails with EAFNOSUPPORT (and stores nothing) unless
/// both pointers are NULL.
pub(crate) unsafe fn write_v4(a: SocketAddr, ipv4: *mut u32, port: *mut u16) -> Result<(), Errno> {
    match a {
        SocketAddr::V4(v4) => {
            put_opt(ipv4, u32::from(*v4.ip()));
            put_opt(port, v4.port());
            Ok(())
        }
        SocketAddr::V6(_) if ipv4.is_null() && port.is_null() => Ok(()),
        SocketAddr::V6(_) => Err(Errno(libc::EAFNOSUPPORT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_round_trip() {
        for a in ["10.0.0.1:7000", "[2001:db8::1]:443", "[fe80::1%3]:80", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(from_c(&addr_to_c(a)).ok(), Some(a), "{a}");
        }
        let c = addr_to_c("10.0.0.1:7000".parse().unwrap());
        assert_eq!((c.family, c.port, c.scope_id), (OB_AF_INET, 7000, 0));
        assert_eq!(c.addr, [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "network order, the rest zero");
        let c6 = addr_to_c("[fe80::1%3]:80".parse().unwrap());
        assert_eq!((c6.family, c6.scope_id, c6.addr[0], c6.addr[15]), (OB_AF_INET6, 3, 0xfe, 1));
        assert_eq!(ip_to_c(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))).port, 0);
    }

    #[test]
    fn bad_input_is_an_errno() {
        let e = |r: Result<SocketAddr, Errno>| r.err().map(|Errno(e)| e);
        assert_eq!(e(from_c(&ob_addr_t { family: 0, ..Default::default() })), Some(libc::EAFNOSUPPORT));
        assert_eq!(e(from_c(&ob_addr_t { family: 1, ..Default::default() })), Some(libc::EAFNOSUPPORT));
        assert_eq!(e(unsafe { addr_from_c(std::ptr::null()) }), Some(libc::EINVAL));
        // IPv4: bytes past the fourth and the scope are ignored on input.
        let junk = ob_addr_t { family: OB_AF_INET, port: 1, scope_id: 9, addr: [10, 0, 0, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7] };
        assert_eq!(from_c(&junk).ok(), Some("10.0.0.1:1".parse().unwrap()));
    }

    #[test]
    fn the_ipv4_form_is_host_order_and_refuses_ipv6() {
        assert_eq!(sockaddr(0x0a00_0001, 7), "10.0.0.1:7".parse::<SocketAddr>().unwrap());
        let (mut ip, mut port) = (0u32, 0u16);
        unsafe {
            assert!(write_v4("10.0.0.1:7".parse().unwrap(), &mut ip, &mut port).is_ok());
            assert_eq!((ip, port), (0x0a00_0001, 7));
            let v6: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
            let r = write_v4(v6, &mut ip, &mut port);
            assert_eq!(r.err().map(|Errno(e)| e), Some(libc::EAFNOSUPPORT));
            assert_eq!((ip, port), (0x0a00_0001, 7), "nothing stored");
            let r = write_v4(v6, &mut ip, std::ptr::null_mut());
            assert_eq!(r.err().map(|Errno(e)| e), Some(libc::EAFNOSUPPORT));
            assert!(write_v4(v6, std::ptr::null_mut(), std::ptr::null_mut()).is_ok(), "nothing asked, nothing refused");
            assert!(write_v4("10.0.0.2:8".parse().unwrap(), std::ptr::null_mut(), &mut port).is_ok());
            assert_eq!(port, 8);
        }
    }
}
