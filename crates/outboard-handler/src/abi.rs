//! The handler ABI, version 1 (docs/HANDLERS.md "The module's side"): the
//! exports the engine calls, the errno values its imports return, and the
//! 24-byte mailbox address a handler reads and writes.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// The ABI version `ob_abi` must return.
pub const VERSION: i32 = 1;
/// The module the engine's functions are imported from.
pub const IMPORT_MODULE: &str = "outboard";

/// Export names.
pub mod export {
    pub const MEMORY: &str = "memory";
    pub const ABI: &str = "ob_abi";
    pub const INIT: &str = "ob_init";
    pub const MESSAGE: &str = "ob_message";
    pub const TCP_OPEN: &str = "ob_tcp_open";
    pub const TCP_DATA: &str = "ob_tcp_data";
    pub const TCP_CLOSE: &str = "ob_tcp_close";
}

/// Negative errno values the imports return (Linux's numbers).
pub mod errno {
    pub const ENOENT: i32 = 2;
    pub const EAGAIN: i32 = 11;
    pub const EFAULT: i32 = 14;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const EMSGSIZE: i32 = 90;
    pub const ENOTCONN: i32 = 107;
    pub const EALREADY: i32 = 114;
}

/// What arrived at a mailbox handler (`ob_message`'s `kind`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MessageKind {
    Datagram = 1,
    Message = 2,
    Request = 3,
}

/// A mailbox anywhere: the engine's message endpoint and the mailbox number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Addr {
    pub host: SocketAddr,
    pub mailbox: u32,
}

/// The address's size in a handler's memory.
pub const ADDR_LEN: usize = 24;

impl Addr {
    /// 16 bytes of IPv6 address (IPv4 mapped), port LE, family LE (4 or 6), mailbox LE.
    pub fn encode(&self) -> [u8; ADDR_LEN] {
        let mut b = [0u8; ADDR_LEN];
        let (ip6, family) = match self.host.ip() {
            IpAddr::V4(a) => (a.to_ipv6_mapped(), 4u16),
            IpAddr::V6(a) => (a, 6u16),
        };
        b[..16].copy_from_slice(&ip6.octets());
        b[16..18].copy_from_slice(&self.host.port().to_le_bytes());
        b[18..20].copy_from_slice(&family.to_le_bytes());
        b[20..24].copy_from_slice(&self.mailbox.to_le_bytes());
        b
    }

    /// None for a family other than 4 or 6, or family 4 with an address that is not IPv4-mapped.
    pub fn decode(b: &[u8; ADDR_LEN]) -> Option<Addr> {
        let ip6 = Ipv6Addr::from(<[u8; 16]>::try_from(&b[..16]).ok()?);
        let port = u16::from_le_bytes([b[16], b[17]]);
        let ip = match u16::from_le_bytes([b[18], b[19]]) {
            4 => IpAddr::V4(ip6.to_ipv4_mapped()?),
            6 => IpAddr::V6(ip6),
            _ => return None,
        };
        Some(Addr { host: SocketAddr::new(ip, port), mailbox: u32::from_le_bytes([b[20], b[21], b[22], b[23]]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_bad_ones_are_refused() {
        for host in ["10.1.2.3:7373", "[fd00::2]:9"] {
            let a = Addr { host: host.parse().unwrap(), mailbox: 0xdead_beef };
            assert_eq!(Addr::decode(&a.encode()), Some(a));
        }
        let mut b = Addr { host: "10.1.2.3:1".parse().unwrap(), mailbox: 1 }.encode();
        b[18] = 5;
        assert_eq!(Addr::decode(&b), None);
        let mut b = Addr { host: "[fd00::2]:1".parse().unwrap(), mailbox: 1 }.encode();
        b[18] = 4;
        assert_eq!(Addr::decode(&b), None, "family 4 with a non-mapped address");
    }
}
