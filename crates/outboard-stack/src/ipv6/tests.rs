//! Addresses, duplicate-address detection, router advertisements and
//! lifetimes (RFC 4861, RFC 4862), on virtual time.

use super::*;

const MAC: [u8; 6] = [0x02, 0xaa, 0x00, 0x28, 0x9c, 0x5a];
const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0xaa, 0xff, 0xfe28, 0x9c5a);
const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn state(cfg: Ipv6Config) -> Ipv6State {
    Ipv6State::new(cfg, MAC, 1500, ArpCache::new(64, Duration::from_secs(60), 4, t(0)), true, t(0))
}

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn prefix(p: &str, flags: u8, valid: u32) -> PrefixInfo {
    PrefixInfo { prefix_len: 64, flags, valid_lifetime: valid, preferred_lifetime: valid, prefix: a(p) }
}

#[test]
fn rfc4862_s5_4_link_local_is_tentative_until_one_probe_goes_unanswered() {
    let mut s = state(Ipv6Config::default());
    assert_eq!(s.addresses()[0].addr, LL);
    assert!(matches!(s.addresses()[0].state, AddrState::Tentative { .. }));
    assert_eq!(s.poll_out(), Some(NdOut::DadProbe { target: LL }));
    assert_eq!(s.poll_out(), None);
    // Not usable yet: no unicast to it, no source address from it; its solicited-node group is joined.
    assert!(!s.accepts(LL));
    assert!(s.accepts(solicited_node(LL)));
    assert_eq!(s.source_for(ROUTER), None);
    assert_eq!(s.poll_timeout(), Some(t(1000)));
    s.handle_timeout(t(1000));
    assert_eq!(s.addresses()[0].state, AddrState::Preferred);
    assert!(s.accepts(LL));
    // RFC 4861 §6.3.7: a router solicitation once the link-local address is usable.
    assert_eq!(s.poll_out(), Some(NdOut::RouterSolicit));
}

#[test]
fn rfc4862_s5_4_3_a_probe_for_our_tentative_address_means_duplicate() {
    let mut s = state(Ipv6Config::default());
    assert_eq!(s.target_seen(LL, true, false), Conflict::DadFailed);
    assert_eq!(s.addresses()[0].state, AddrState::Duplicate);
    s.handle_timeout(t(5000));
    assert_eq!(s.addresses()[0].state, AddrState::Duplicate);
    assert!(!s.accepts(solicited_node(LL)));
    // A solicitation from a unicast source for a tentative address is not a conflict (§5.4.3).
    let mut s = state(Ipv6Config::default());
    assert_eq!(s.target_seen(LL, false, false), Conflict::None);
    // §5.4.4: an advertisement for it is.
    assert_eq!(s.target_seen(LL, false, true), Conflict::DadFailed);
}

#[test]
fn rfc4861_s6_3_4_router_advertisement_sets_router_mtu_hop_limit_and_slaac_address() {
    let mut s = state(Ipv6Config { dad_transmits: 0, ..Ipv6Config::default() });
    assert_eq!(s.poll_out(), Some(NdOut::RouterSolicit));
    let p = prefix("2001:db8:1::", prefix_flags::ON_LINK | prefix_flags::AUTONOMOUS, 3600);
    s.router_advert(t(10), ROUTER, 63, 1800, Some(1400), [p].into_iter());
    assert_eq!(s.default_router(), Some(ROUTER));
    assert_eq!((s.mtu, s.hop_limit), (1400, 63));
    let slaac = a("2001:db8:1:0:aa:ff:fe28:9c5a");
    assert!(s.is_ours(slaac));
    assert!(s.on_link(a("2001:db8:1::77")));
    assert_eq!(s.next_hop(a("2001:db8:1::77")), Some(a("2001:db8:1::77")));
    assert_eq!(s.next_hop(a("2001:db8:9::1")), Some(ROUTER));
    // Source selection: global for global destinations, link-local for link-local ones.
    assert_eq!(s.source_for(a("2001:db8:9::1")), Some(slaac));
    assert_eq!(s.source_for(ROUTER), Some(LL));
    // An MTU beyond the link's, or below 1280, is ignored.
    s.router_advert(t(20), ROUTER, 0, 1800, Some(9000), [].into_iter());
    s.router_advert(t(20), ROUTER, 0, 1800, Some(1000), [].into_iter());
    assert_eq!((s.mtu, s.hop_limit), (1400, 63));
    // Lifetimes run out: the router after 1800 s, the prefix and address after 3600 s.
    s.handle_timeout(t(1_800_021));
    assert_eq!(s.default_router(), None);
    assert!(s.is_ours(slaac));
    s.handle_timeout(t(3_600_011));
    assert!(!s.is_ours(slaac));
    assert!(!s.on_link(a("2001:db8:1::77")));
}

#[test]
fn rfc4862_s5_5_3_only_autonomous_64_bit_prefixes_form_addresses() {
    let mut s = state(Ipv6Config { dad_transmits: 0, ..Ipv6Config::default() });
    let mut p48 = prefix("2001:db8:2::", prefix_flags::AUTONOMOUS, 3600);
    p48.prefix_len = 48;
    let ll = prefix("fe80::", prefix_flags::AUTONOMOUS, 3600);
    let bad = PrefixInfo { preferred_lifetime: 7200, ..prefix("2001:db8:3::", prefix_flags::AUTONOMOUS, 3600) };
    let onlink_only = prefix("2001:db8:4::", prefix_flags::ON_LINK, 3600);
    s.router_advert(t(0), ROUTER, 0, 0, None, [p48, ll, bad, onlink_only].into_iter());
    assert_eq!(s.addresses().len(), 1, "{:?}", s.addresses());
    assert!(s.on_link(a("2001:db8:4::5")));
    // Router lifetime 0: not a default router.
    assert_eq!(s.default_router(), None);
    // With SLAAC off no address forms; with accept_ra off nothing is taken at all.
    let mut s = state(Ipv6Config { slaac: false, dad_transmits: 0, ..Ipv6Config::default() });
    s.router_advert(t(0), ROUTER, 0, 60, None, [prefix("2001:db8:1::", prefix_flags::AUTONOMOUS, 60)].into_iter());
    assert_eq!((s.addresses().len(), s.default_router()), (1, Some(ROUTER)));
    let mut s = state(Ipv6Config { accept_ra: false, dad_transmits: 0, ..Ipv6Config::default() });
    assert_eq!(s.poll_out(), None);
    s.router_advert(t(0), ROUTER, 9, 60, Some(1280), [].into_iter());
    assert_eq!((s.default_router(), s.mtu, s.hop_limit), (None, 1500, DEFAULT_HOP_LIMIT));
}

#[test]
fn a_static_address_and_gateway_are_used_without_advertisements() {
    let cfg = Ipv6Config {
        addr: Some((a("2001:db8::10"), 64)),
        gateway: Some(ROUTER),
        accept_ra: false,
        dad_transmits: 0,
        ..Ipv6Config::default()
    };
    let s = state(cfg);
    assert!(s.is_ours(a("2001:db8::10")));
    assert_eq!(s.next_hop(a("2001:db8::20")), Some(a("2001:db8::20")));
    assert_eq!(s.next_hop(a("2001:db9::1")), Some(ROUTER));
    assert_eq!(s.source_for(a("2001:db9::1")), Some(a("2001:db8::10")));
    // Sources that name no single other host.
    assert!(!s.valid_source(a("2001:db8::10")));
    assert!(!s.valid_source(a("ff02::1")));
    assert!(!s.valid_source(Ipv6Addr::LOCALHOST));
    assert!(s.valid_source(a("2001:db8::20")));
    // All-nodes and solicited-node MACs are ours; another group's is not.
    assert!(s.accepts_mac(EthernetAddress([0x33, 0x33, 0, 0, 0, 1])));
    assert!(s.accepts_mac(EthernetAddress([0x33, 0x33, 0xff, 0, 0, 0x10])));
    assert!(!s.accepts_mac(EthernetAddress([0x33, 0x33, 0xff, 0, 0, 0x11])));
    // No route without a router for off-link destinations.
    let s = state(Ipv6Config { dad_transmits: 0, accept_ra: false, ..Ipv6Config::default() });
    assert_eq!(s.next_hop(a("2001:db9::1")), None);
}
