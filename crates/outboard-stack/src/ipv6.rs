//! IPv6 addressing and neighbour discovery state for the one interface a
//! stack has (RFC 4861, RFC 4862): our addresses and their duplicate-address
//! detection, the on-link prefixes and default router learned from router
//! advertisements (or configured), the link MTU and hop limit they set, and
//! the neighbour cache (the ARP cache's bookkeeping keyed by IPv6 address).
//!
//! Pure bookkeeping, like `arp`: the stack parses and builds the ICMPv6
//! messages (`icmp6`) and asks this module what to send (`poll_out`) and
//! when (`poll_timeout`).
//!
//! Simplifications, each what a host on a LAN needs and no more: one default
//! router (the latest advertised); neighbour reachability is confirmed by
//! re-resolving an entry that expired while in use (the cache's refresh),
//! not by the full REACHABLE/STALE/DELAY/PROBE machine; no random delays
//! before the first solicitations (RFC 4862 §5.4.2 asks for up to 1 s; an
//! engine starts long after its link is up).

use crate::arp::ArpCache;
use outboard_time::{Duration, Instant};
use outboard_wire::ethernet::EthernetAddress;
use outboard_wire::icmpv6::{address_from_prefix, solicited_node, PrefixInfo, prefix_flags};
use std::collections::VecDeque;
use std::net::Ipv6Addr;

/// RFC 4861 §10: RetransTimer, between solicitations (and after the last DAD probe).
pub(crate) const RETRANS_TIMER: Duration = Duration::from_secs(1);
/// RFC 4861 §10: MAX_RTR_SOLICITATIONS and RTR_SOLICITATION_INTERVAL.
const MAX_RTR_SOLICITATIONS: u32 = 3;
const RTR_SOLICITATION_INTERVAL: Duration = Duration::from_secs(4);
/// Hop limit for packets we originate until a router says otherwise (Linux's default).
pub(crate) const DEFAULT_HOP_LIMIT: u8 = 64;
/// Prefixes and addresses kept from router advertisements at most.
const MAX_PREFIXES: usize = 16;

/// IPv6 settings of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Config {
    /// A static address and its prefix length, besides the link-local
    /// address every interface has (fe80::/64 from the MAC, RFC 4862 §5.3).
    pub addr: Option<(Ipv6Addr, u8)>,
    /// A static default router (usually a link-local address).
    pub gateway: Option<Ipv6Addr>,
    /// Take the default router, hop limit, MTU and on-link prefixes from
    /// router advertisements (Linux's `accept_ra`, on by default).
    pub accept_ra: bool,
    /// Form addresses from advertised autonomous /64 prefixes (RFC 4862
    /// SLAAC; Linux's `autoconf`, on by default).
    pub slaac: bool,
    /// Neighbour solicitations sent to check that an address is unique
    /// before using it (RFC 4862 §5.1 DupAddrDetectTransmits; Linux's
    /// default 1). 0 uses addresses at once.
    pub dad_transmits: u32,
}

impl Default for Ipv6Config {
    fn default() -> Ipv6Config {
        Ipv6Config { addr: None, gateway: None, accept_ra: true, slaac: true, dad_transmits: 1 }
    }
}

/// Where an address stands (RFC 4862 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Duplicate-address detection is running: `probes_left` more
    /// solicitations, the next (or the verdict) at `next`.
    Tentative { probes_left: u32, next: Instant },
    Preferred,
    /// Another node has it: never used (Linux logs "duplicate address detected").
    Duplicate,
}

/// How an address came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrOrigin {
    LinkLocal,
    Static,
    /// SLAAC from a router's prefix, valid until then.
    Autoconf { valid_until: Instant },
}

/// One of our addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr6 {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
    pub state: AddrState,
    pub origin: AddrOrigin,
}

/// A neighbour discovery message the stack should send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NdOut {
    /// A duplicate-address-detection probe: a solicitation for `target` from
    /// the unspecified address to its solicited-node group (RFC 4862 §5.4.2).
    DadProbe { target: Ipv6Addr },
    /// A router solicitation to all routers (RFC 4861 §6.3.7).
    RouterSolicit,
}

/// What a received advertisement or solicitation meant for our addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflict {
    None,
    /// A tentative address is someone else's: it became `Duplicate`.
    DadFailed,
    /// Another node advertises an address we already use.
    InUse,
}

#[derive(Debug, Clone, Copy)]
struct Prefix {
    prefix: Ipv6Addr,
    len: u8,
    /// None: static (from the configured address).
    valid_until: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Router {
    addr: Ipv6Addr,
    /// None: configured.
    until: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct Ipv6State {
    cfg: Ipv6Config,
    mac: EthernetAddress,
    /// The link-local address first.
    addrs: Vec<Addr6>,
    prefixes: Vec<Prefix>,
    router: Option<Router>,
    /// The link's MTU, and the one in use (lowered by an advertised MTU option).
    link_mtu: usize,
    pub mtu: usize,
    pub hop_limit: u8,
    pub neighbors: ArpCache<Ipv6Addr>,
    out: VecDeque<NdOut>,
    /// Router solicitations sent, and when the next is due (None: no more).
    rs_sent: u32,
    rs_next: Option<Instant>,
    /// Sends router solicitations (shard 0 of an engine; the others only learn).
    solicit: bool,
}

/// `a` masked to its first `len` bits.
fn masked(a: Ipv6Addr, len: u8) -> u128 {
    let len = u32::from(len.min(128));
    if len == 0 {
        0
    } else {
        u128::from(a) & (u128::MAX << (128 - len))
    }
}

fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

impl Ipv6State {
    pub(crate) fn new(
        cfg: Ipv6Config,
        mac: [u8; 6],
        mtu: usize,
        neighbors: ArpCache<Ipv6Addr>,
        solicit: bool,
        now: Instant,
    ) -> Ipv6State {
        let mac = EthernetAddress(mac);
        let mut s = Ipv6State {
            addrs: Vec::new(),
            prefixes: Vec::new(),
            router: cfg.gateway.map(|addr| Router { addr, until: None }),
            link_mtu: mtu,
            mtu,
            hop_limit: DEFAULT_HOP_LIMIT,
            neighbors,
            out: VecDeque::new(),
            rs_sent: 0,
            rs_next: None,
            solicit,
            mac,
            cfg,
        };
        let ll = address_from_prefix(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), mac);
        s.add_address(now, ll, 64, AddrOrigin::LinkLocal);
        if let Some((addr, len)) = s.cfg.addr {
            s.add_address(now, addr, len, AddrOrigin::Static);
            s.prefixes.push(Prefix { prefix: addr, len, valid_until: None });
        }
        s
    }

    pub(crate) fn config(&self) -> &Ipv6Config {
        &self.cfg
    }

    /// Our addresses, the link-local one first.
    pub(crate) fn addresses(&self) -> &[Addr6] {
        &self.addrs
    }

    /// The default router in use, if any.
    pub(crate) fn default_router(&self) -> Option<Ipv6Addr> {
        self.router.map(|r| r.addr)
    }

    fn add_address(&mut self, now: Instant, addr: Ipv6Addr, prefix_len: u8, origin: AddrOrigin) {
        let state = if self.cfg.dad_transmits == 0 {
            AddrState::Preferred
        } else {
            self.out.push_back(NdOut::DadProbe { target: addr });
            AddrState::Tentative { probes_left: self.cfg.dad_transmits - 1, next: now + RETRANS_TIMER }
        };
        self.addrs.push(Addr6 { addr, prefix_len, state, origin });
        if origin == AddrOrigin::LinkLocal && state == AddrState::Preferred {
            self.link_local_ready(now);
        }
    }

    /// RFC 4861 §6.3.7: solicit routers once the link-local address is usable.
    fn link_local_ready(&mut self, now: Instant) {
        if self.cfg.accept_ra && self.solicit && self.rs_sent == 0 {
            self.out.push_back(NdOut::RouterSolicit);
            self.rs_sent = 1;
            self.rs_next = Some(now + RTR_SOLICITATION_INTERVAL);
        }
    }

    /// The link-local address, if usable.
    pub(crate) fn link_local(&self) -> Option<Ipv6Addr> {
        self.addrs.first().filter(|a| a.state == AddrState::Preferred).map(|a| a.addr)
    }

    /// A usable (preferred) address of ours.
    pub(crate) fn is_ours(&self, a: Ipv6Addr) -> bool {
        self.addrs.iter().any(|x| x.addr == a && x.state == AddrState::Preferred)
    }

    fn find(&self, a: Ipv6Addr) -> Option<usize> {
        self.addrs.iter().position(|x| x.addr == a)
    }

    /// Destination addresses we take packets for: our usable addresses, the
    /// all-nodes group, and the solicited-node groups of all our addresses
    /// (tentative ones too: their duplicate-address probes arrive there).
    pub(crate) fn accepts(&self, dst: Ipv6Addr) -> bool {
        if dst.is_multicast() {
            return dst == Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
                || self.addrs.iter().any(|a| a.state != AddrState::Duplicate && solicited_node(a.addr) == dst);
        }
        self.is_ours(dst)
    }

    /// Ethernet multicast destinations for the groups of `accepts` (RFC 2464 §7).
    pub(crate) fn accepts_mac(&self, mac: EthernetAddress) -> bool {
        let m = mac.0;
        if m[0] != 0x33 || m[1] != 0x33 {
            return false;
        }
        m[2..] == [0, 0, 0, 1]
            || (m[2] == 0xff
                && self.addrs.iter().any(|a| {
                    let o = a.addr.octets();
                    a.state != AddrState::Duplicate && m[3..] == o[13..]
                }))
    }

    /// RFC 4291 §2.5.2, RFC 4443 / RFC 8200: a source that names one other
    /// host: not unspecified, multicast, loopback or one of ours.
    pub(crate) fn valid_source(&self, src: Ipv6Addr) -> bool {
        !(src.is_unspecified() || src.is_multicast() || src.is_loopback() || self.find(src).is_some())
    }

    /// Link-local, or inside an on-link prefix.
    pub(crate) fn on_link(&self, dst: Ipv6Addr) -> bool {
        is_link_local(dst) || self.prefixes.iter().any(|p| masked(p.prefix, p.len) == masked(dst, p.len))
    }

    /// Where to send a packet for `dst`: itself when on-link, else the
    /// default router. None when there is no route (RFC 4943: no "assume on-link").
    pub(crate) fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.router.map(|r| r.addr)
        }
    }

    /// The source address for a packet to `dst` (RFC 6724 reduced to what a
    /// host with a link-local and a few global addresses needs): link-local
    /// for link-local and link-scope multicast destinations, else a usable
    /// global address on `dst`'s prefix, else any usable global one, else
    /// the link-local address.
    pub(crate) fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let usable = || self.addrs.iter().filter(|a| a.state == AddrState::Preferred);
        let link_scope = is_link_local(dst) || (dst.is_multicast() && dst.segments()[0] & 0x000f <= 2);
        if link_scope {
            return self.link_local();
        }
        usable()
            .filter(|a| a.origin != AddrOrigin::LinkLocal)
            .find(|a| masked(a.addr, a.prefix_len) == masked(dst, a.prefix_len))
            .or_else(|| usable().find(|a| a.origin != AddrOrigin::LinkLocal))
            .map(|a| a.addr)
            .or_else(|| self.link_local())
    }

    /// A solicitation or advertisement for `target` arrived from `src`
    /// (unspecified for a duplicate-address probe). RFC 4862 §5.4.3/§5.4.4.
    pub(crate) fn target_seen(&mut self, target: Ipv6Addr, src_unspecified: bool, advert: bool) -> Conflict {
        let Some(i) = self.find(target) else { return Conflict::None };
        match self.addrs[i].state {
            // Someone else probes (or advertises) an address we are still checking.
            AddrState::Tentative { .. } if advert || src_unspecified => {
                self.addrs[i].state = AddrState::Duplicate;
                Conflict::DadFailed
            }
            AddrState::Preferred if advert => Conflict::InUse,
            _ => Conflict::None,
        }
    }

    /// Takes what a valid router advertisement from `router` says (RFC 4861
    /// §6.3.4, RFC 4862 §5.5.3). `prefixes` are its Prefix Information options.
    pub(crate) fn router_advert(
        &mut self,
        now: Instant,
        router: Ipv6Addr,
        hop_limit: u8,
        lifetime: u16,
        mtu: Option<u32>,
        prefixes: impl Iterator<Item = PrefixInfo>,
    ) {
        if !self.cfg.accept_ra {
            return;
        }
        if hop_limit != 0 {
            self.hop_limit = hop_limit;
        }
        if lifetime > 0 {
            if self.router.is_none_or(|r| r.until.is_some()) {
                self.router = Some(Router { addr: router, until: Some(now + Duration::from_secs(u64::from(lifetime))) });
            }
        } else if self.router.is_some_and(|r| r.addr == router && r.until.is_some()) {
            self.router = None;
        }
        if let Some(mtu) = mtu {
            let mtu = mtu as usize;
            // §6.3.4: only values within the link's range.
            if (outboard_wire::ipv6::MIN_MTU..=self.link_mtu).contains(&mtu) {
                self.mtu = mtu;
            }
        }
        self.rs_next = None;
        for p in prefixes {
            if is_link_local(p.prefix) || p.preferred_lifetime > p.valid_lifetime {
                continue;
            }
            let until = (p.valid_lifetime != u32::MAX).then(|| now + Duration::from_secs(u64::from(p.valid_lifetime)));
            if p.flags & prefix_flags::ON_LINK != 0 {
                self.learn_prefix(now, p.prefix, p.prefix_len, until, p.valid_lifetime);
            }
            if p.flags & prefix_flags::AUTONOMOUS != 0 && self.cfg.slaac && p.prefix_len == 64 {
                let addr = address_from_prefix(p.prefix, self.mac);
                match self.find(addr) {
                    Some(i) => {
                        if let AddrOrigin::Autoconf { .. } = self.addrs[i].origin {
                            if let Some(until) = until {
                                self.addrs[i].origin = AddrOrigin::Autoconf { valid_until: until };
                            }
                        }
                    }
                    None if p.valid_lifetime > 0 && self.addrs.len() < MAX_PREFIXES => {
                        let valid_until = until.unwrap_or(now + Duration::from_secs(u64::from(u32::MAX)));
                        self.add_address(now, addr, 64, AddrOrigin::Autoconf { valid_until });
                    }
                    None => {}
                }
            }
        }
    }

    fn learn_prefix(&mut self, _now: Instant, prefix: Ipv6Addr, len: u8, until: Option<Instant>, valid: u32) {
        let key = masked(prefix, len);
        if let Some(i) = self.prefixes.iter().position(|p| p.len == len && masked(p.prefix, len) == key) {
            if self.prefixes[i].valid_until.is_some() {
                if valid == 0 {
                    self.prefixes.remove(i);
                } else {
                    self.prefixes[i].valid_until = until;
                }
            }
        } else if valid > 0 && self.prefixes.len() < MAX_PREFIXES {
            self.prefixes.push(Prefix { prefix, len, valid_until: until });
        }
    }

    /// Whether a solicitation is waiting to go out (checked before every frame).
    #[inline]
    pub(crate) fn has_output(&self) -> bool {
        self.neighbors.has_requests() || !self.out.is_empty()
    }

    /// The next message to send.
    pub(crate) fn poll_out(&mut self) -> Option<NdOut> {
        self.out.pop_front()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let dad = self.addrs.iter().filter_map(|a| match a.state {
            AddrState::Tentative { next, .. } => Some(next),
            _ => None,
        });
        let expiries = self
            .addrs
            .iter()
            .filter_map(|a| match a.origin {
                AddrOrigin::Autoconf { valid_until } => Some(valid_until),
                _ => None,
            })
            .chain(self.prefixes.iter().filter_map(|p| p.valid_until))
            .chain(self.router.and_then(|r| r.until));
        dad.chain(expiries).chain(self.rs_next).chain(self.neighbors.poll_timeout()).min()
    }

    /// Advances duplicate-address detection, router solicitation and lifetimes.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let mut ll_ready = false;
        for i in 0..self.addrs.len() {
            if let AddrState::Tentative { probes_left, next } = self.addrs[i].state {
                if next > now {
                    continue;
                }
                if probes_left == 0 {
                    self.addrs[i].state = AddrState::Preferred;
                    ll_ready |= self.addrs[i].origin == AddrOrigin::LinkLocal;
                } else {
                    self.out.push_back(NdOut::DadProbe { target: self.addrs[i].addr });
                    self.addrs[i].state = AddrState::Tentative { probes_left: probes_left - 1, next: now + RETRANS_TIMER };
                }
            }
        }
        if ll_ready {
            self.link_local_ready(now);
        }
        if self.rs_next.is_some_and(|t| t <= now) {
            if self.rs_sent < MAX_RTR_SOLICITATIONS {
                self.out.push_back(NdOut::RouterSolicit);
                self.rs_sent += 1;
                self.rs_next = Some(now + RTR_SOLICITATION_INTERVAL);
            } else {
                self.rs_next = None;
            }
        }
        self.addrs.retain(|a| !matches!(a.origin, AddrOrigin::Autoconf { valid_until } if valid_until <= now));
        self.prefixes.retain(|p| p.valid_until.is_none_or(|t| t > now));
        if self.router.is_some_and(|r| r.until.is_some_and(|t| t <= now)) {
            self.router = None;
        }
    }

    /// Bytes held (addresses, prefixes, the neighbour cache).
    pub(crate) fn memory(&self) -> usize {
        self.addrs.len() * std::mem::size_of::<Addr6>()
            + self.prefixes.len() * std::mem::size_of::<Prefix>()
            + self.neighbors.memory()
    }
}

#[cfg(test)]
mod tests;
