//! Family-neutral socket addresses as the board carries them: a family tag,
//! a port and 16 bytes of address, so IPv6 needs no new layout. Every record
//! of the board that names an address (CONNECT and UDP_SEND commands, the
//! status record's local and remote addresses, a received datagram's source,
//! the attach reply's engine address and gateway) uses [`NetAddr`].
//!
//! Decoding is total: [`NetAddr::to_socket_addr`] gives an address or
//! [`AddrError`] for every bit pattern (an unknown family, or an IPv4 record
//! with bytes past its fourth); the engine acts only on the decoded value.

use crate::shm::Pod;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// No address (a record not yet written, a gateway that is not set).
pub const FAMILY_NONE: u16 = 0;
/// IPv4: `addr[..4]` in network order, the rest zero. Linux's `AF_INET`.
pub const FAMILY_INET: u16 = 2;
/// IPv6: all 16 bytes in network order, with `scope_id` for link-local
/// addresses. Linux's `AF_INET6`.
pub const FAMILY_INET6: u16 = 10;

/// One socket address, 24 bytes. Ports are in host order (the board is
/// shared by processes of one machine); address bytes in network order.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct NetAddr {
    pub family: u16,
    pub port: u16,
    /// IPv6 scope (interface index) for link-local addresses; 0 otherwise.
    pub scope_id: u32,
    pub addr: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<NetAddr>() == 24);
// SAFETY: repr(C), u16 u16 u32 and a byte array: no padding (2+2+4+16 = 24).
unsafe impl Pod for NetAddr {}

/// Why a [`NetAddr`] read from a board is not an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrError {
    /// The family tag is neither `FAMILY_INET` nor `FAMILY_INET6` (`FAMILY_NONE` included).
    UnknownFamily(u16),
    /// An IPv4 record with non-zero bytes past its fourth, or an IPv4 scope.
    Malformed,
}

impl std::fmt::Display for AddrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddrError::UnknownFamily(x) => write!(f, "unknown address family {x}"),
            AddrError::Malformed => write!(f, "malformed IPv4 address record"),
        }
    }
}

impl NetAddr {
    /// The empty record (`FAMILY_NONE`).
    pub const NONE: NetAddr = NetAddr { family: FAMILY_NONE, port: 0, scope_id: 0, addr: [0; 16] };

    pub fn to_socket_addr(&self) -> Result<SocketAddr, AddrError> {
        match self.family {
            FAMILY_INET => {
                if self.scope_id != 0 || self.addr[4..].iter().any(|b| *b != 0) {
                    return Err(AddrError::Malformed);
                }
                let a = Ipv4Addr::new(self.addr[0], self.addr[1], self.addr[2], self.addr[3]);
                Ok(SocketAddr::V4(SocketAddrV4::new(a, self.port)))
            }
            FAMILY_INET6 => {
                Ok(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(self.addr), self.port, 0, self.scope_id)))
            }
            other => Err(AddrError::UnknownFamily(other)),
        }
    }

    /// `None` for `FAMILY_NONE`, else as `to_socket_addr`.
    pub fn to_option(&self) -> Result<Option<SocketAddr>, AddrError> {
        if self.family == FAMILY_NONE {
            return Ok(None);
        }
        self.to_socket_addr().map(Some)
    }

    /// The record as three little-endian words (how commands carry it).
    pub fn to_words(&self) -> [u64; 3] {
        let mut b = [0u8; 24];
        b[0..2].copy_from_slice(&self.family.to_le_bytes());
        b[2..4].copy_from_slice(&self.port.to_le_bytes());
        b[4..8].copy_from_slice(&self.scope_id.to_le_bytes());
        b[8..24].copy_from_slice(&self.addr);
        let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        [w(0), w(8), w(16)]
    }

    pub fn from_words(w: [u64; 3]) -> NetAddr {
        let mut b = [0u8; 24];
        for (i, x) in w.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
        }
        let mut addr = [0u8; 16];
        addr.copy_from_slice(&b[8..24]);
        NetAddr {
            family: u16::from_le_bytes([b[0], b[1]]),
            port: u16::from_le_bytes([b[2], b[3]]),
            scope_id: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            addr,
        }
    }
}

impl From<SocketAddr> for NetAddr {
    fn from(a: SocketAddr) -> NetAddr {
        match a {
            SocketAddr::V4(v4) => {
                let mut addr = [0u8; 16];
                addr[..4].copy_from_slice(&v4.ip().octets());
                NetAddr { family: FAMILY_INET, port: v4.port(), scope_id: 0, addr }
            }
            SocketAddr::V6(v6) => {
                NetAddr { family: FAMILY_INET6, port: v6.port(), scope_id: v6.scope_id(), addr: v6.ip().octets() }
            }
        }
    }
}

impl From<SocketAddrV4> for NetAddr {
    fn from(a: SocketAddrV4) -> NetAddr {
        NetAddr::from(SocketAddr::V4(a))
    }
}

impl From<Option<SocketAddr>> for NetAddr {
    fn from(a: Option<SocketAddr>) -> NetAddr {
        a.map_or(NetAddr::NONE, NetAddr::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn both_families_round_trip_through_records_and_words() {
        let v4: SocketAddr = "10.0.0.1:5555".parse().unwrap();
        let v6: SocketAddr = "[fe80::1%3]:443".parse().unwrap();
        for a in [v4, v6] {
            let r = NetAddr::from(a);
            assert_eq!(r.to_socket_addr(), Ok(a));
            assert_eq!(NetAddr::from_words(r.to_words()), r);
        }
        assert_eq!(NetAddr::from(v4).family, FAMILY_INET);
        assert_eq!(NetAddr::from(v6).family, FAMILY_INET6);
        assert_eq!(NetAddr::NONE.to_option(), Ok(None));
    }

    #[test]
    fn bad_records_are_typed_errors() {
        assert_eq!(NetAddr::NONE.to_socket_addr(), Err(AddrError::UnknownFamily(0)));
        let mut r = NetAddr::from("10.0.0.1:1".parse::<SocketAddr>().unwrap());
        r.addr[9] = 1;
        assert_eq!(r.to_socket_addr(), Err(AddrError::Malformed));
        assert_eq!(NetAddr { family: 7, ..NetAddr::NONE }.to_socket_addr(), Err(AddrError::UnknownFamily(7)));
    }

    proptest! {
        /// Any 24 bytes decode to an address or an error, and an address re-encodes to the same record.
        #[test]
        fn decoding_is_total(w0: u64, w1: u64, w2: u64) {
            let r = NetAddr::from_words([w0, w1, w2]);
            prop_assert_eq!(r.to_words(), [w0, w1, w2]);
            if let Ok(a) = r.to_socket_addr() {
                prop_assert_eq!(NetAddr::from(a), r);
            }
        }
    }
}
