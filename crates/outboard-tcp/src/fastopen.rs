//! RFC 7413 §4.1.2 server cookies: a MAC of the client's (and our) IP
//! address under a secret key, so only a client that got the cookie from us
//! at that address can send data in its SYN.
//!
//! As Linux's `tcp_fastopen_cookie_gen_cipher`: SipHash-2-4 over both
//! addresses, 8 bytes. The key is derived from the engine's injected secret
//! (the one ISNs and SYN cookies come from), so cookies stay valid across
//! connections for as long as the engine runs, and no two engines share them.
use crate::siphash::siphash24;
use outboard_wire::FastOpenCookie;
use std::net::IpAddr;

/// Bytes in the cookies we issue (Linux's `TCP_FASTOPEN_COOKIE_SIZE`).
pub const COOKIE_LEN: usize = 8;

#[derive(Debug, Clone)]
pub struct FastOpenKey {
    key: [u8; 16],
}

/// An address as 17 bytes: a family tag, then the address in its IPv6 form.
fn addr_bytes(ip: IpAddr) -> [u8; 17] {
    let (tag, v6) = match ip {
        IpAddr::V4(a) => (4, a.to_ipv6_mapped()),
        IpAddr::V6(a) => (6, a),
    };
    let mut b = [0u8; 17];
    b[0] = tag;
    b[1..].copy_from_slice(&v6.octets());
    b
}

impl FastOpenKey {
    /// The key for `secret` (the engine's ISN / SYN-cookie secret): its own
    /// derivation, so a cookie reveals nothing about ISNs.
    pub fn new(secret: [u8; 16]) -> FastOpenKey {
        let lo = siphash24(&secret, b"outboard tcp fast open key 0");
        let hi = siphash24(&secret, b"outboard tcp fast open key 1");
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&lo.to_le_bytes());
        key[8..].copy_from_slice(&hi.to_le_bytes());
        FastOpenKey { key }
    }

    /// The cookie for a client at `client` reaching us at `local`.
    pub fn cookie(&self, local: IpAddr, client: IpAddr) -> FastOpenCookie {
        let mut input = [0u8; 34];
        input[..17].copy_from_slice(&addr_bytes(client));
        input[17..].copy_from_slice(&addr_bytes(local));
        let mac = siphash24(&self.key, &input).to_le_bytes();
        // Invariant: 8 bytes is a valid cookie length.
        FastOpenCookie::new(&mac[..COOKIE_LEN]).expect("8-byte cookie")
    }

    /// Whether `cookie` is the one we give `client` (compared in full; a
    /// cookie of another length never is).
    pub fn valid(&self, local: IpAddr, client: IpAddr, cookie: &FastOpenCookie) -> bool {
        self.cookie(local, client) == *cookie
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    const C: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));

    #[test]
    fn rfc7413_4_1_2_cookie_is_bound_to_the_client_address_and_the_secret() {
        let k = FastOpenKey::new([7; 16]);
        let c = k.cookie(A, B);
        assert_eq!(c.as_bytes().len(), COOKIE_LEN);
        assert!(k.valid(A, B, &c));
        assert!(!k.valid(A, C, &c), "another client's address");
        assert!(!FastOpenKey::new([8; 16]).valid(A, B, &c), "another secret");
        assert_eq!(FastOpenKey::new([7; 16]).cookie(A, B), c, "stable for one secret");
        let mut forged = *c.as_bytes().first_chunk::<8>().unwrap();
        forged[0] ^= 1;
        assert!(!k.valid(A, B, &FastOpenCookie::new(&forged).unwrap()));
        assert!(!k.valid(A, B, &FastOpenCookie::new(&c.as_bytes()[..4]).unwrap()), "a prefix");
    }
}
