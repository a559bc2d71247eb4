//! Addressing and routing for the one interface a stack has: which
//! addresses are ours, which are on-link, which can't be a source, and the
//! next hop for a destination (on-link directly, else the gateway).

use std::net::Ipv4Addr;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub addr: Ipv4Addr,
    mask: u32,
    pub gateway: Option<Ipv4Addr>,
}

impl Route {
    pub(crate) fn new(addr: Ipv4Addr, prefix_len: u8, gateway: Option<Ipv4Addr>) -> Route {
        let p = u32::from(prefix_len.min(32));
        let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
        Route {
            addr,
            mask,
            gateway,
        }
    }

    pub(crate) fn on_link(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask == u32::from(self.addr) & self.mask
    }

    /// The subnet's directed broadcast address (none for /31 and /32, RFC 3021).
    fn directed_broadcast(&self) -> Option<Ipv4Addr> {
        (self.mask < 0xffff_fffe).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask))
    }

    /// Limited or directed broadcast.
    pub(crate) fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast() || self.directed_broadcast() == Some(ip)
    }

    /// Addresses whose packets we accept: ours and the broadcasts. None for
    /// another's; else whether `dst` is a broadcast.
    pub(crate) fn accepts(&self, dst: Ipv4Addr) -> Option<bool> {
        let broadcast = self.is_broadcast(dst);
        (dst == self.addr || broadcast).then_some(broadcast)
    }

    /// RFC 1122 §3.2.1.3 / RFC 1812 §5.3.7: a source address must name one
    /// host: not zero, not a broadcast, not multicast or reserved, not
    /// loopback, not ourselves (a looped-back or spoofed packet).
    pub(crate) fn valid_source(&self, src: Ipv4Addr) -> bool {
        // As numbers, on every packet: 224/4 multicast and 240/4 reserved
        // (the limited broadcast among them) are one comparison.
        let s = u32::from(src);
        let directed = self.mask < 0xffff_fffe && s == u32::from(self.addr) | !self.mask;
        !(s == 0 || s >= 0xe000_0000 || s >> 24 == 127 || src == self.addr || directed)
    }

    /// Where to send a packet for `dst`: itself when on-link, else the
    /// gateway. None when there is no route.
    pub(crate) fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Route {
        Route::new(
            Ipv4Addr::new(10, 0, 0, 1),
            24,
            Some(Ipv4Addr::new(10, 0, 0, 254)),
        )
    }

    #[test]
    fn next_hop_is_direct_on_link_and_gateway_off_link() {
        assert_eq!(
            r().next_hop(Ipv4Addr::new(10, 0, 0, 7)),
            Some(Ipv4Addr::new(10, 0, 0, 7))
        );
        assert_eq!(
            r().next_hop(Ipv4Addr::new(8, 8, 8, 8)),
            Some(Ipv4Addr::new(10, 0, 0, 254))
        );
        let no_gw = Route::new(Ipv4Addr::new(10, 0, 0, 1), 24, None);
        assert_eq!(no_gw.next_hop(Ipv4Addr::new(8, 8, 8, 8)), None);
    }

    #[test]
    fn rfc1122_invalid_sources_are_refused() {
        let r = r();
        for bad in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 0, 0, 255],
            [224, 0, 0, 1],
            [127, 0, 0, 1],
            [240, 0, 0, 1],
            [10, 0, 0, 1],
        ] {
            assert!(!r.valid_source(Ipv4Addr::from(bad)), "{bad:?}");
        }
        assert!(r.valid_source(Ipv4Addr::new(10, 0, 0, 2)));
        assert!(r.valid_source(Ipv4Addr::new(192, 168, 1, 1)));
    }

    #[test]
    fn broadcasts_are_accepted_and_recognised() {
        let r = r();
        assert_eq!(r.accepts(Ipv4Addr::new(10, 0, 0, 255)), Some(true));
        assert_eq!(r.accepts(Ipv4Addr::BROADCAST), Some(true));
        assert_eq!(r.accepts(Ipv4Addr::new(10, 0, 0, 2)), None);
        assert_eq!(r.accepts(Ipv4Addr::new(10, 0, 0, 1)), Some(false), "ours");
        let p2p = Route::new(Ipv4Addr::new(10, 0, 0, 1), 31, None);
        assert!(
            !p2p.is_broadcast(Ipv4Addr::new(10, 0, 0, 1)),
            "RFC 3021: no broadcast on /31"
        );
    }
}
