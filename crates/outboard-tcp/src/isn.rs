//! RFC 6528 initial sequence numbers: ISN = M + F(4-tuple, secret), M a 4 µs clock.
//!
//! M makes successive ISNs for one 4-tuple increase (so a new incarnation's
//! segments sort after an old one's, RFC 9293 §3.4.1), and F, a keyed PRF of
//! the 4-tuple, makes the ISN space of each tuple unguessable to an off-path
//! attacker (RFC 6528 §3). F is SipHash-2-4, as in Linux.
use crate::siphash::siphash24;
use outboard_time::Instant;
use outboard_wire::SeqNumber;
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Clone)]
pub struct IsnGenerator {
    secret: [u8; 16],
}

/// Length of one end's hash input: family tag, 16-byte address, port.
const END_LEN: usize = 1 + 16 + 2;
/// Length of the 4-tuple's hash input.
pub(crate) const TUPLE_LEN: usize = 2 * END_LEN;

/// One end as hash input: a family tag (4 or 6), the address as 16 bytes
/// (IPv4 in its IPv4-mapped IPv6 form, RFC 4291 §2.5.5.2), then the port.
/// The tag keeps an IPv4 end apart from the IPv6 end `::ffff:a.b.c.d`, so a
/// v4 and a v6 tuple never share an input.
fn end_bytes(addr: SocketAddr) -> [u8; END_LEN] {
    let (tag, ip) = match addr.ip() {
        IpAddr::V4(ip) => (4, ip.to_ipv6_mapped()),
        IpAddr::V6(ip) => (6, ip),
    };
    let mut b = [0u8; END_LEN];
    b[0] = tag;
    b[1..17].copy_from_slice(&ip.octets());
    b[17..19].copy_from_slice(&addr.port().to_be_bytes());
    b
}

/// The 4-tuple as hash input: the local end, then the remote one.
pub(crate) fn tuple_bytes(local: SocketAddr, remote: SocketAddr) -> [u8; TUPLE_LEN] {
    let mut b = [0u8; TUPLE_LEN];
    b[..END_LEN].copy_from_slice(&end_bytes(local));
    b[END_LEN..].copy_from_slice(&end_bytes(remote));
    b
}

impl IsnGenerator {
    /// `secret` comes from the engine's random source at start.
    pub fn new(secret: [u8; 16]) -> Self {
        IsnGenerator { secret }
    }
    pub fn isn(&self, now: Instant, local: SocketAddr, remote: SocketAddr) -> SeqNumber {
        // RFC 6528 §3: M is a timer incremented every 4 µs (RFC 793's clock), mod 2^32.
        let m = (now.as_micros() / 4) as u32;
        let f = siphash24(&self.secret, &tuple_bytes(local, remote)) as u32;
        SeqNumber(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn addr(a: u8, port: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::new(10, 0, 0, a).into(), port)
    }
    fn addr6(a: u16, port: u16) -> SocketAddr {
        SocketAddr::new(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, a).into(), port)
    }
    /// `addr`'s IPv4 address as an IPv4-mapped IPv6 one: the same 16 hashed bytes, other family.
    fn mapped(a: u8, port: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::new(10, 0, 0, a).to_ipv6_mapped().into(), port)
    }

    const KEY: [u8; 16] = *b"0123456789abcdef";

    #[test]
    fn rfc6528_isn_advances_one_per_4_microseconds() {
        let g = IsnGenerator::new(KEY);
        let (l, r) = (addr(1, 80), addr(2, 40_000));
        let t0 = Instant::from_millis(5);
        let a = g.isn(t0, l, r);
        assert_eq!(g.isn(t0 + core::time::Duration::from_micros(4), l, r), a + 1);
        assert_eq!(g.isn(t0 + core::time::Duration::from_millis(1), l, r), a + 250);
    }

    #[test]
    fn rfc6528_isn_is_monotonic_over_time_for_one_tuple() {
        let g = IsnGenerator::new(KEY);
        let (l, r) = (addr(1, 80), addr(2, 40_000));
        let mut prev = g.isn(Instant::ZERO, l, r);
        // Steps of 37 ms over two minutes: always strictly later in sequence space.
        for i in 1..3_000u64 {
            let next = g.isn(Instant::from_millis(i * 37), l, r);
            assert!(next > prev, "ISN went backwards at step {i}");
            prev = next;
        }
    }

    #[test]
    fn rfc6528_isn_differs_across_tuples() {
        let g = IsnGenerator::new(KEY);
        let now = Instant::from_millis(1234);
        let base = g.isn(now, addr(1, 80), addr(2, 40_000));
        assert_ne!(base, g.isn(now, addr(1, 80), addr(2, 40_001)));
        assert_ne!(base, g.isn(now, addr(1, 81), addr(2, 40_000)));
        assert_ne!(base, g.isn(now, addr(3, 80), addr(2, 40_000)));
        assert_ne!(base, g.isn(now, addr(1, 80), addr(4, 40_000)));
        // Swapping the ends is a different tuple too.
        assert_ne!(base, g.isn(now, addr(2, 40_000), addr(1, 80)));
    }

    #[test]
    fn rfc6528_isn_differs_across_keys() {
        let now = Instant::from_millis(1234);
        let (l, r) = (addr(1, 80), addr(2, 40_000));
        let mut other = KEY;
        other[0] ^= 0x80;
        assert_ne!(IsnGenerator::new(KEY).isn(now, l, r), IsnGenerator::new(other).isn(now, l, r));
    }

    #[test]
    fn rfc6528_isn_for_ipv6_tuples() {
        let g = IsnGenerator::new(KEY);
        let (l, r) = (addr6(1, 80), addr6(2, 40_000));
        let t0 = Instant::from_millis(5);
        let a = g.isn(t0, l, r);
        assert_eq!(g.isn(t0 + core::time::Duration::from_millis(1), l, r), a + 250);
        assert_ne!(a, g.isn(t0, addr6(1, 80), addr6(3, 40_000)));
        assert_ne!(a, g.isn(t0, addr6(1, 80), addr6(2, 40_001)));
        assert_ne!(a, g.isn(t0, r, l));
    }

    #[test]
    fn isn_keeps_ipv4_and_ipv4_mapped_ipv6_tuples_apart() {
        let g = IsnGenerator::new(KEY);
        let now = Instant::from_millis(1234);
        // The hash inputs differ only in the two family tags: same address bytes and ports.
        let (v4, v6) = (tuple_bytes(addr(1, 80), addr(2, 443)), tuple_bytes(mapped(1, 80), mapped(2, 443)));
        let differ: Vec<usize> = (0..TUPLE_LEN).filter(|&i| v4[i] != v6[i]).collect();
        assert_eq!(differ, [0, END_LEN]);
        assert_ne!(g.isn(now, addr(1, 80), addr(2, 443)), g.isn(now, mapped(1, 80), mapped(2, 443)));
    }
}
