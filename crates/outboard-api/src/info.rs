//! What a socket layer over the API needs beyond reading and writing:
//! keep-alives, `TCP_INFO`, which destinations the engine serves, and the
//! application's own counters (shown per board by `outboard stat`).

use crate::{Board, Error, Result, Stream};
use outboard_board::layout::{header, status, tcp_info};
use outboard_board::command::{Endpoint, KeepAlive, StreamOption};
use outboard_board::proto::opt;
use outboard_board::BoardCommand;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use outboard_board::layout::app_counter;

/// A stream's `TCP_INFO`, as the engine last published it (fields named and
/// numbered as Linux's `struct tcp_info`: `state` 1 = ESTABLISHED …,
/// `options` `TCPI_OPT_*` bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub state: u8,
    /// 0 open, 1 disorder, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// Consecutive retransmission timeouts without progress.
    pub retransmits: u8,
    /// RTO backoff exponent.
    pub backoff: u8,
    /// `TCPI_OPT_TIMESTAMPS` (1), `TCPI_OPT_SACK` (2), `TCPI_OPT_WSCALE` (4),
    /// `TCPI_OPT_ECN` (8), `TCPI_OPT_ECN_SEEN` (16), `TCPI_OPT_SYN_DATA` (32).
    pub options: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    /// The congestion controller: `proto::opt::CC_RENO` (0) or `CC_CUBIC` (1).
    pub cc: u8,
    pub rto_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Smoothed RTT (0 before the first sample) and its variation.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// In segments; 0x7fff_ffff while unset.
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    /// Retransmitted segments, ever.
    pub total_retrans: u32,
    /// Stream bytes the peer acknowledged / bytes received in order.
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    /// Retransmitted payload bytes, ever.
    pub bytes_retrans: u64,
    /// Delivery rate, bytes per second, and whether its sample was app-limited.
    pub delivery_rate: u64,
    pub delivery_rate_app_limited: bool,
    /// Linux's interactive delayed-ACK mode: the stream's ACKs wait for its
    /// replies to carry them (getsockopt TCP_QUICKACK reads its negation).
    pub interactive: bool,
    /// Segments delivered, and delivered with ECE.
    pub delivered: u32,
    pub delivered_ce: u32,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    pub dsack_dups: u32,
    /// Reordering events seen, and DupThresh in segments.
    pub reord_seen: u32,
    pub reordering: u32,
    /// Segments received out of order.
    pub rcv_ooopack: u32,
    /// The peer's window and ours as last advertised, bytes.
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    /// Retransmission timeouts, timeout episodes (each saturating at 65535),
    /// and milliseconds spent in finished episodes.
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
    /// Bytes the engine's connection holds and has not sent yet.
    pub notsent: u32,
    /// Bytes sent and not yet acknowledged.
    pub in_flight: u32,
    /// Lowest RTT seen, microseconds (0 before a sample).
    pub min_rtt_us: u32,
}

pub const TCPI_OPT_TIMESTAMPS: u8 = tcp_info::OPT_TIMESTAMPS;
pub const TCPI_OPT_SACK: u8 = tcp_info::OPT_SACK;
pub const TCPI_OPT_WSCALE: u8 = tcp_info::OPT_WSCALE;
pub const TCPI_OPT_ECN: u8 = tcp_info::OPT_ECN;
pub const TCPI_OPT_ECN_SEEN: u8 = tcp_info::OPT_ECN_SEEN;
pub const TCPI_OPT_SYN_DATA: u8 = tcp_info::OPT_SYN_DATA;

/// Whole milliseconds for a keep-alive time, rounded up (1 ms ..= 2^31 ms).
fn keepalive_ms(d: Duration) -> Result<u64> {
    let ms = d.as_nanos().div_ceil(1_000_000);
    match u64::try_from(ms) {
        Ok(ms) if (1..=opt::KEEPALIVE_MAX_MS).contains(&ms) => Ok(ms),
        _ => Err(Error::Invalid("keep-alive time must be 1 ms ..= 2^31 ms")),
    }
}

impl Stream {
    /// RFC 1122 §4.2.3.6 keep-alives (SO_KEEPALIVE with TCP_KEEPIDLE,
    /// TCP_KEEPINTVL, TCP_KEEPCNT): `Some((idle, interval, probes))` probes
    /// the peer after `idle` without a segment, every `interval`, and times
    /// the stream out (`Error::TimedOut`, ETIMEDOUT) after `probes`
    /// unanswered probes; `None` turns them off. `Error::Invalid` for times
    /// outside 1 ms ..= 2^31 ms (sub-millisecond times round up) or probes
    /// outside 1..=127.
    pub fn set_keepalive(&mut self, ka: Option<(Duration, Duration, u32)>) -> Result<()> {
        let option = StreamOption::KeepAlive(match ka {
            None => None,
            Some((idle, interval, probes)) => {
                if !(1..=opt::KEEPALIVE_MAX_PROBES).contains(&u64::from(probes)) {
                    return Err(Error::Invalid("keep-alive probes must be 1..=127"));
                }
                // Whole milliseconds, rounded up here: the record carries milliseconds.
                let idle = Duration::from_millis(keepalive_ms(idle)?);
                let interval = Duration::from_millis(keepalive_ms(interval)?);
                Some(KeepAlive { idle, interval, probes })
            }
        });
        let mut i = self.board.inner.borrow_mut();
        i.command(BoardCommand::SetOption { ep: Endpoint(self.id), option })
    }

    /// The stream's `TCP_INFO` as the engine last published it (each word
    /// read on its own: the fields may come from neighbouring updates).
    ///
    /// The engine publishes a stream's TCP_INFO only once its application
    /// asked (most never do, and it costs the engine on every update): the
    /// first call asks (`op::INFO`) and waits for the engine's answer; the
    /// calls after it read the status record as it changes, with no
    /// command (but the first after a `set_quickack`, which asks again so
    /// it reads the mode just set). Should the engine be gone, the words
    /// are as they were.
    pub fn tcp_info(&self) -> TcpInfo {
        if self.info_stale.replace(false) || self.info_bytes() == 0 {
            let ep = Endpoint(self.id);
            let _ = self.board.request_value(|sync| BoardCommand::Info { sync, ep }, None);
        }
        let i = self.board.inner.borrow();
        let base = i.layout.endpoint_status(self.id);
        let w32 = |off: usize| i.map.atomic_u32(base + off).load(Ordering::Acquire);
        let w64 = |off: usize| i.map.atomic_u64(base + off).load(Ordering::Acquire);
        let b = tcp_info::unpack(w64(status::INFO_BYTES));
        TcpInfo {
            state: b[tcp_info::STATE],
            ca_state: b[tcp_info::CA_STATE],
            retransmits: b[tcp_info::RETRANSMITS],
            backoff: b[tcp_info::BACKOFF],
            options: b[tcp_info::OPTIONS],
            snd_wscale: b[tcp_info::SND_WSCALE],
            rcv_wscale: b[tcp_info::RCV_WSCALE],
            cc: b[tcp_info::CC] & !(tcp_info::CC_APP_LIMITED | tcp_info::CC_INTERACTIVE),
            rto_us: w32(status::RTO_US),
            snd_mss: w32(status::SND_MSS),
            rcv_mss: w32(status::RCV_MSS),
            unacked: w32(status::UNACKED),
            rtt_us: w32(status::RTT_US),
            rttvar_us: w32(status::RTTVAR_US),
            snd_ssthresh: w32(status::SND_SSTHRESH),
            snd_cwnd: w32(status::SND_CWND),
            total_retrans: w32(status::TOTAL_RETRANS),
            bytes_acked: w64(status::TX_ACKED),
            bytes_received: w64(status::RX_TOTAL),
            segs_out: w32(status::SEGS_OUT),
            segs_in: w32(status::SEGS_IN),
            bytes_retrans: w64(status::RETRANS_BYTES),
            delivery_rate: w64(status::DELIVERY_RATE),
            delivery_rate_app_limited: b[tcp_info::CC] & tcp_info::CC_APP_LIMITED != 0,
            interactive: b[tcp_info::CC] & tcp_info::CC_INTERACTIVE != 0,
            delivered: w32(status::DELIVERED),
            delivered_ce: w32(status::DELIVERED_CE),
            bytes_sent: w64(status::BYTES_SENT),
            dsack_dups: w32(status::DSACK_DUPS),
            reord_seen: w32(status::REORD_SEEN),
            reordering: w32(status::REORDERING),
            rcv_ooopack: w32(status::RCV_OOOPACK),
            snd_wnd: w32(status::SND_WND),
            rcv_wnd: w32(status::RCV_WND),
            total_rto: w32(status::TOTAL_RTOS) as u16,
            total_rto_recoveries: (w32(status::TOTAL_RTOS) >> 16) as u16,
            total_rto_time: w32(status::TOTAL_RTO_TIME),
            notsent: w32(status::NOTSENT),
            in_flight: w32(status::IN_FLIGHT),
            min_rtt_us: w32(status::MIN_RTT_US),
        }
    }

    /// The record's TCP_INFO byte word: 0 until the engine publishes it
    /// (no TCP state is numbered 0).
    fn info_bytes(&self) -> u64 {
        let i = self.board.inner.borrow();
        let base = i.layout.endpoint_status(self.id);
        i.map.atomic_u64(base + status::INFO_BYTES).load(Ordering::Acquire)
    }
}

/// The engine's place on its network, from the attach reply: its IPv4
/// address, subnet and gateway, and its IPv6 when it runs IPv6 beside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineNet {
    pub addr: IpAddr,
    /// 0..=32 for an IPv4 engine (0..=128 for IPv6).
    pub prefix_len: u8,
    pub gateway: Option<IpAddr>,
    /// `Some` when the engine runs IPv6 (dual-stack).
    pub ipv6: Option<EngineNet6>,
}

/// A dual-stack engine's IPv6, as told at attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineNet6 {
    /// Its static address and prefix length (`--addr fd77::2/64`); `None`
    /// when it has only its link-local address (and what SLAAC forms later).
    pub addr: Option<(Ipv6Addr, u8)>,
    /// Its static default router: IPv6 destinations off the prefix are
    /// served only through it.
    pub gateway: Option<Ipv6Addr>,
}

impl EngineNet6 {
    /// Whether a connection or datagram to `dst` goes through the engine:
    /// a unicast address on its prefix or link-local (fe80::/10, on every
    /// link), or any other global unicast address when it has a default
    /// router. Never `::`, loopback, multicast or IPv4-mapped (the caller
    /// unwraps those to IPv4 first).
    pub fn serves(&self, dst: Ipv6Addr) -> bool {
        if dst.is_unspecified() || dst.is_loopback() || dst.is_multicast() || dst.to_ipv4_mapped().is_some() {
            return false;
        }
        if dst.segments()[0] & 0xffc0 == 0xfe80 {
            return true;
        }
        let on_prefix = self.addr.is_some_and(|(a, p)| {
            let m = match p.min(128) {
                0 => 0,
                p => u128::MAX << (128 - u32::from(p)),
            };
            u128::from(dst) & m == u128::from(a) & m
        });
        on_prefix || self.gateway.is_some()
    }

    /// Whether `a` is the engine's static IPv6 address.
    pub fn is_local(&self, a: Ipv6Addr) -> bool {
        self.addr.is_some_and(|(x, _)| x == a)
    }
}

impl EngineNet {
    fn mask_v4(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            p => u32::MAX << (32 - u32::from(p.min(32))),
        }
    }

    /// Whether `dst` is on the engine's subnet (of the same family as the engine's address).
    pub fn on_link(&self, dst: impl Into<IpAddr>) -> bool {
        match (self.addr, dst.into()) {
            (IpAddr::V4(a), IpAddr::V4(d)) => {
                let m = self.mask_v4();
                u32::from(d) & m == u32::from(a) & m
            }
            (IpAddr::V6(a), IpAddr::V6(d)) => {
                let m = match self.prefix_len.min(128) {
                    0 => 0,
                    p => u128::MAX << (128 - u32::from(p)),
                };
                u128::from(d) & m == u128::from(a) & m
            }
            _ => false,
        }
    }

    /// Whether a connection or datagram to `dst` goes through the engine:
    /// a unicast address on its subnet, or any other routable unicast
    /// address when it has a gateway. Never 0.0.0.0, broadcast (limited,
    /// or the subnet's own), loopback or multicast; never a link-local
    /// address off the subnet (RFC 3927 §2.6.2: routers do not forward them).
    /// IPv6 destinations: as [`EngineNet6::serves`] when the engine runs
    /// IPv6, never otherwise (an IPv4-mapped one is for the caller to
    /// unwrap first).
    pub fn serves(&self, dst: impl Into<IpAddr>) -> bool {
        let dst = dst.into();
        if let IpAddr::V6(d) = dst {
            return self.ipv6.is_some_and(|n| n.serves(d));
        }
        let (IpAddr::V4(dst), IpAddr::V4(_)) = (dst, self.addr) else { return false };
        if dst.is_unspecified() || dst.is_broadcast() || dst.is_loopback() || dst.is_multicast() {
            return false;
        }
        if self.on_link(dst) {
            // The subnet's directed broadcast (RFC 919), where the subnet has one (RFC 3021: /31 has none).
            let m = self.mask_v4();
            return self.prefix_len >= 31 || u32::from(dst) | m != u32::MAX;
        }
        // 240.0.0.0/4 is reserved (RFC 1112 §4): nothing routes it.
        let reserved = u32::from(dst) >> 28 == 0xf;
        self.gateway.is_some() && !dst.is_link_local() && !reserved
    }
}

impl Board {
    /// The engine's address, subnet and gateway: which destinations it serves.
    pub fn engine_net(&self) -> EngineNet {
        let i = self.inner.borrow();
        EngineNet { addr: i.engine_addr, prefix_len: i.net_prefix, gateway: i.net_gateway, ipv6: i.net6 }
    }

    /// Adds `n` to the application counter `slot` (`app_counter::*`; slots
    /// 0..16, others ignored). The engine shows them in `outboard stat`.
    pub fn app_counter_add(&self, slot: usize, n: u64) {
        if slot < header::APP_COUNTERS_LEN {
            let i = self.inner.borrow();
            i.map.atomic_u64(header::APP_COUNTERS + 8 * slot).fetch_add(n, Ordering::Relaxed);
        }
    }

    /// All 16 application counters.
    pub fn app_counters(&self) -> [u64; header::APP_COUNTERS_LEN] {
        let i = self.inner.borrow();
        std::array::from_fn(|k| i.map.atomic_u64(header::APP_COUNTERS + 8 * k).load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn net(prefix_len: u8, gateway: Option<[u8; 4]>) -> EngineNet {
        EngineNet {
            addr: Ipv4Addr::new(10, 0, 0, 1).into(),
            prefix_len,
            gateway: gateway.map(|g| Ipv4Addr::from(g).into()),
            ipv6: None,
        }
    }

    #[test]
    fn serves_the_subnet_and_through_a_gateway_the_rest() {
        let n = net(24, None);
        assert!(n.serves(Ipv4Addr::new(10, 0, 0, 2)));
        assert!(n.serves(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(!n.serves(Ipv4Addr::new(10, 0, 0, 255)), "directed broadcast");
        assert!(!n.serves(Ipv4Addr::new(10, 0, 1, 2)), "off the subnet, no gateway");
        assert!(!n.serves(Ipv4Addr::new(8, 8, 8, 8)));
        for never in [[0, 0, 0, 0], [255, 255, 255, 255], [127, 0, 0, 1], [224, 0, 0, 1], [239, 1, 2, 3]] {
            assert!(!n.serves(Ipv4Addr::from(never)), "{never:?}");
            assert!(!net(24, Some([10, 0, 0, 254])).serves(Ipv4Addr::from(never)), "{never:?}");
        }
        let g = net(24, Some([10, 0, 0, 254]));
        assert!(g.serves(Ipv4Addr::new(8, 8, 8, 8)));
        assert!(g.serves(Ipv4Addr::new(10, 0, 1, 2)));
        assert!(!g.serves(Ipv4Addr::new(169, 254, 1, 1)), "link-local is not routed");
        assert!(!g.serves(Ipv4Addr::new(240, 0, 0, 1)), "reserved");
        // /31 and /32: no directed broadcast to exclude.
        assert!(net(31, None).serves(Ipv4Addr::new(10, 0, 0, 0)));
        assert!(net(32, None).serves(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(!net(32, None).serves(Ipv4Addr::new(10, 0, 0, 2)));
        // /0 with no gateway: everything is on link.
        assert!(net(0, None).serves(Ipv4Addr::new(8, 8, 8, 8)));
    }

    #[test]
    fn ipv6_destinations_are_not_served_by_an_engine_without_ipv6() {
        let g = net(0, Some([10, 0, 0, 254]));
        for v6 in ["2001:db8::1", "::ffff:10.0.0.2", "::1", "fe80::1"] {
            let d: std::net::Ipv6Addr = v6.parse().unwrap();
            assert!(!g.serves(d), "{v6}");
            assert!(!g.serves(IpAddr::V6(d)), "{v6}");
            assert!(!g.on_link(d), "{v6}");
        }
        // Family-neutral callers pass `IpAddr`; IPv4 ones still pass `Ipv4Addr`.
        assert!(g.serves(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8))));
        // An IPv6 engine's subnet (for when it runs IPv6): on-link by prefix.
        let v6 = EngineNet { addr: "2001:db8::1".parse::<IpAddr>().unwrap(), prefix_len: 64, gateway: None, ipv6: None };
        assert!(v6.on_link("2001:db8::2".parse::<IpAddr>().unwrap()));
        assert!(!v6.on_link("2001:db9::2".parse::<IpAddr>().unwrap()));
        assert!(!v6.on_link(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(!v6.serves(Ipv4Addr::new(10, 0, 0, 1)), "an IPv6 engine does not serve IPv4");
    }

    #[test]
    fn a_dual_stack_engine_serves_its_prefix_link_local_and_through_its_router_the_rest() {
        let ip6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
        let mut n = net(24, None);
        n.ipv6 = Some(EngineNet6 { addr: Some((ip6("fd77::2"), 64)), gateway: None });
        assert!(n.serves(ip6("fd77::1")));
        assert!(n.serves(IpAddr::V6(ip6("fd77::1"))));
        assert!(n.serves(ip6("fe80::1")), "link-local is on every link");
        assert!(!n.serves(ip6("2001:db8::1")), "off the prefix, no router");
        for never in ["::", "::1", "ff02::1", "::ffff:10.0.0.2"] {
            assert!(!n.serves(ip6(never)), "{never}");
        }
        assert!(n.serves(Ipv4Addr::new(10, 0, 0, 2)), "IPv4 as before");
        n.ipv6 = Some(EngineNet6 { addr: Some((ip6("fd77::2"), 64)), gateway: Some(ip6("fe80::1")) });
        assert!(n.serves(ip6("2001:db8::1")));
        let v6 = n.ipv6.unwrap();
        assert!(v6.is_local(ip6("fd77::2")) && !v6.is_local(ip6("fd77::1")));
    }

    #[test]
    fn keepalive_times_round_up_and_are_bounded() {
        assert_eq!(keepalive_ms(Duration::from_micros(1)).unwrap(), 1);
        assert_eq!(keepalive_ms(Duration::from_millis(1500)).unwrap(), 1500);
        assert_eq!(keepalive_ms(Duration::from_millis(1 << 31)).unwrap(), 1 << 31);
        assert!(keepalive_ms(Duration::ZERO).is_err());
        assert!(keepalive_ms(Duration::from_millis((1 << 31) + 1)).is_err());
        assert!(keepalive_ms(Duration::MAX).is_err());
    }
}
