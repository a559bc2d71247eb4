use super::{SynCookies, MSS_TABLE};
use outboard_time::{Duration, Instant};
use outboard_wire::SeqNumber;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

const KEY: [u8; 16] = *b"cookie-secret-16";

fn local() -> SocketAddr {
    SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 80).into()
}
fn remote() -> SocketAddr {
    SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 7), 51_000).into()
}
fn local6() -> SocketAddr {
    SocketAddr::new(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(), 80)
}
fn remote6() -> SocketAddr {
    SocketAddr::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7).into(), 51_000)
}
/// `a` with its IPv4 address in IPv4-mapped IPv6 form: the same hashed address bytes, other family.
fn mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        v6 => v6,
    }
}

const ISN: SeqNumber = SeqNumber(0xdead_beef);

fn t(secs: u64) -> Instant {
    Instant::from_millis(secs * 1000)
}

#[test]
fn rfc4987_cookie_round_trips_with_mss() {
    let c = SynCookies::new(KEY);
    let now = t(1_000);
    let cookie = c.encode(now, local(), remote(), ISN, 1460);
    let p = c.decode(now, local(), remote(), ISN, cookie).expect("valid cookie");
    assert_eq!(p.mss, 1460);
    // Still valid a little later, and across the period boundary.
    assert!(c.decode(now + Duration::from_secs(50), local(), remote(), ISN, cookie).is_some());
}

#[test]
fn rfc4987_cookie_valid_in_the_first_period_too() {
    let c = SynCookies::new(KEY);
    let cookie = c.encode(Instant::ZERO, local(), remote(), ISN, 536);
    assert_eq!(c.decode(t(10), local(), remote(), ISN, cookie).map(|p| p.mss), Some(536));
}

#[test]
fn mss_is_rounded_down_to_the_table() {
    let c = SynCookies::new(KEY);
    let now = t(77);
    let cases = [(1459, 1452), (1460, 1460), (9000, 8960), (1300, 1300), (600, 536), (100, 536), (u16::MAX, 8960)];
    for (offered, want) in cases {
        let cookie = c.encode(now, local(), remote(), ISN, offered);
        assert_eq!(c.decode(now, local(), remote(), ISN, cookie).map(|p| p.mss), Some(want), "offered {offered}");
    }
    for &m in &MSS_TABLE {
        let cookie = c.encode(now, local(), remote(), ISN, m);
        assert_eq!(c.decode(now, local(), remote(), ISN, cookie).map(|p| p.mss), Some(m));
    }
}

#[test]
fn rfc4987_stale_cookie_is_rejected() {
    let c = SynCookies::new(KEY);
    let now = t(6_400); // the start of a period
    let cookie = c.encode(now, local(), remote(), ISN, 1460);
    assert!(c.decode(now + Duration::from_secs(127), local(), remote(), ISN, cookie).is_some());
    assert!(c.decode(now + Duration::from_secs(128), local(), remote(), ISN, cookie).is_none());
    // Issued at the end of a period: only the next period is left.
    let late = c.encode(now + Duration::from_secs(63), local(), remote(), ISN, 1460);
    assert!(c.decode(now + Duration::from_secs(127), local(), remote(), ISN, late).is_some());
    assert!(c.decode(now + Duration::from_secs(128), local(), remote(), ISN, late).is_none());
    // The 5-bit counter wraps every 32 periods: a cookie 32 periods old is still stale.
    assert!(c.decode(now + Duration::from_secs(64 * 32), local(), remote(), ISN, cookie).is_none());
}

#[test]
fn rfc4987_cookie_from_the_future_is_rejected() {
    let c = SynCookies::new(KEY);
    let cookie = c.encode(t(6_400 + 64), local(), remote(), ISN, 1460);
    assert!(c.decode(t(6_400), local(), remote(), ISN, cookie).is_none());
}

#[test]
fn rfc4987_forged_cookie_is_rejected() {
    let c = SynCookies::new(KEY);
    let now = t(5_000);
    let cookie = c.encode(now, local(), remote(), ISN, 1460);
    for bit in 0..32 {
        let forged = SeqNumber(cookie.0 ^ (1 << bit));
        assert!(c.decode(now, local(), remote(), ISN, forged).is_none(), "bit {bit} flip accepted");
    }
    // Another secret's cookie is not ours.
    let other = SynCookies::new(*b"another-secret!!").encode(now, local(), remote(), ISN, 1460);
    assert!(c.decode(now, local(), remote(), ISN, other).is_none());
}

#[test]
fn rfc4987_cookie_for_another_tuple_or_isn_is_rejected() {
    let c = SynCookies::new(KEY);
    let now = t(5_000);
    let cookie = c.encode(now, local(), remote(), ISN, 1460);
    let other_port = SocketAddr::new(remote().ip(), 51_001);
    let other_ip = SocketAddr::new(Ipv4Addr::new(198, 51, 100, 8).into(), 51_000);
    assert!(c.decode(now, local(), other_port, ISN, cookie).is_none());
    assert!(c.decode(now, local(), other_ip, ISN, cookie).is_none());
    assert!(c.decode(now, remote(), local(), ISN, cookie).is_none());
    assert!(c.decode(now, local(), remote(), ISN + 1, cookie).is_none());
}

#[test]
fn rfc4987_cookie_round_trips_with_an_ipv6_tuple() {
    let c = SynCookies::new(KEY);
    let now = t(1_000);
    let cookie = c.encode(now, local6(), remote6(), ISN, 1220);
    assert_eq!(c.decode(now, local6(), remote6(), ISN, cookie).map(|p| p.mss), Some(1220));
    assert!(c.decode(now + Duration::from_secs(64), local6(), remote6(), ISN, cookie).is_some());
    assert!(c.decode(now, remote6(), local6(), ISN, cookie).is_none());
    assert!(c.decode(now, local6(), SocketAddr::new(remote6().ip(), 51_001), ISN, cookie).is_none());
    assert!(c.decode(now + Duration::from_secs(128), local6(), remote6(), ISN, cookie).is_none());
}

#[test]
fn cookie_keeps_ipv4_and_ipv4_mapped_ipv6_tuples_apart() {
    let c = SynCookies::new(KEY);
    let now = t(1_000);
    let (l6, r6) = (mapped(local()), mapped(remote()));
    let v4 = c.encode(now, local(), remote(), ISN, 1460);
    let v6 = c.encode(now, l6, r6, ISN, 1460);
    assert_ne!(v4, v6);
    assert!(c.decode(now, l6, r6, ISN, v4).is_none());
    assert!(c.decode(now, local(), remote(), ISN, v6).is_none());
}

proptest::proptest! {
    #[test]
    fn rfc4987_any_cookie_round_trips_within_a_period_and_expires_after_two(
        key in proptest::array::uniform16(proptest::num::u8::ANY),
        l in proptest::num::u32::ANY, lp in proptest::num::u16::ANY,
        r in proptest::num::u32::ANY, rp in proptest::num::u16::ANY,
        isn in proptest::num::u32::ANY, mss in proptest::num::u16::ANY,
        issued_ms in 0u64..10_000_000_000, age_ms in 0u64..64_000,
    ) {
        let c = SynCookies::new(key);
        let (l, r) = (SocketAddr::new(Ipv4Addr::from(l).into(), lp), SocketAddr::new(Ipv4Addr::from(r).into(), rp));
        let at = Instant::from_millis(issued_ms);
        let cookie = c.encode(at, l, r, SeqNumber(isn), mss);
        let got = c.decode(at + Duration::from_millis(age_ms), l, r, SeqNumber(isn), cookie);
        proptest::prop_assert_eq!(got.map(|p| p.mss), Some(MSS_TABLE[super::mss_index(mss)]));
        proptest::prop_assert!(got.unwrap().mss <= mss.max(536));
        let stale = c.decode(at + Duration::from_millis(128_000 + age_ms), l, r, SeqNumber(isn), cookie);
        proptest::prop_assert_eq!(stale, None);
    }
}
