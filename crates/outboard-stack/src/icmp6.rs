//! ICMPv6 (RFC 4443) and neighbour discovery (RFC 4861, RFC 4862): echo
//! replies, errors we send (rate limited with ICMPv4's) and errors we receive
//! (to the TCP connection or UDP socket whose packet they quote; Packet Too
//! Big lowers the connection's MSS), neighbour solicitations and
//! advertisements (resolution and duplicate-address detection), and router
//! advertisements (handed to `ipv6`).

use crate::input::{Ip6Meta, Net};
use crate::ipv6::{Conflict, NdOut};
use crate::{Stack, StackError};
use outboard_tcp::{FourTuple, IcmpError};
use outboard_time::Instant;
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetRepr, HEADER_LEN as ETH_LEN};
use outboard_wire::icmpv4::UnreachableCode as V4Code;
use outboard_wire::icmpv6::{
    multicast_mac, na_flags, solicited_node, Icmpv6Packet, Icmpv6Repr, NdiscOption, UnreachableCode, MAX_ERROR_LEN,
    NDISC_HOP_LIMIT,
};
use outboard_wire::ipv6::{next_header, walk_extensions, Ipv6Repr, HEADER_LEN as IP6_LEN, MIN_MTU};
use outboard_wire::{Error, RxChecksum, SeqNumber};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// The all-nodes and all-routers link-local groups (RFC 4291 §2.7.1).
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// An ICMPv6 error's code mapped to the ICMPv4 code with the same meaning,
/// which is what a connection's `IcmpError::Unreachable` carries (Linux's
/// `icmpv6_err_convert` gives the same errnos: port → ECONNREFUSED,
/// prohibited → EACCES, the rest soft EHOSTUNREACH/ENETUNREACH).
fn as_v4_code(code: UnreachableCode) -> u8 {
    match code {
        UnreachableCode::NO_ROUTE => V4Code::NET.0,
        UnreachableCode::PORT => V4Code::PORT.0,
        UnreachableCode::ADMIN_PROHIBITED | UnreachableCode::POLICY_FAILED | UnreachableCode::REJECT_ROUTE => {
            V4Code::ADMIN_PROHIBITED.0
        }
        _ => V4Code::HOST.0,
    }
}

impl Stack {
    pub(crate) fn icmpv6_input(&mut self, now: Instant, ip: Ip6Meta<'_>, data: &[u8]) {
        self.stats.icmpv6_in += 1;
        let repr = match Icmpv6Packet::new_checked(data)
            .and_then(|p| Icmpv6Repr::parse(&p, ip.src, ip.dst, RxChecksum::Verify))
        {
            Ok(r) => r,
            Err(Error::Checksum) => {
                self.stats.drops_checksum += 1;
                return;
            }
            Err(Error::Unsupported) => {
                self.stats.icmp_ignored += 1;
                return;
            }
            Err(_) => {
                self.stats.drops_malformed += 1;
                return;
            }
        };
        let ndisc = matches!(
            repr,
            Icmpv6Repr::RouterSolicit { .. }
                | Icmpv6Repr::RouterAdvert { .. }
                | Icmpv6Repr::NeighborSolicit { .. }
                | Icmpv6Repr::NeighborAdvert { .. }
        );
        // RFC 4861 §6.1, §7.1: neighbour discovery only from on the link.
        let hop_limit = ip.packet.get(7).copied().unwrap_or(0);
        if ndisc && hop_limit != NDISC_HOP_LIMIT {
            self.stats.drops_bad_source += 1;
            return;
        }
        if ip.src.is_unspecified() && !matches!(repr, Icmpv6Repr::NeighborSolicit { .. }) {
            self.stats.drops_bad_source += 1;
            return;
        }
        match repr {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => {
                self.stats.icmp_echo_requests_in += 1;
                let Some(src) = self.ip6.as_ref().and_then(|s| if ip.multicast { s.source_for(ip.src) } else { Some(ip.dst) })
                else {
                    return;
                };
                let reply = Icmpv6Repr::EchoReply { ident, seq_no, data };
                if self.send_icmpv6(now, src, ip.src, &reply) {
                    self.stats.icmp_echo_replies_out += 1;
                }
            }
            Icmpv6Repr::EchoReply { ident, seq_no, data } => {
                self.stats.icmp_echo_replies_in += 1;
                self.keep_echo_reply(ip.src.into(), ident, seq_no, data.len());
            }
            Icmpv6Repr::DstUnreachable { code, .. } => {
                self.stats.icmp_dest_unreachable_in += 1;
                self.icmpv6_error_input(now, &repr, IcmpError::Unreachable { code: as_v4_code(code) });
            }
            Icmpv6Repr::PacketTooBig { mtu, .. } => {
                self.stats.icmpv6_packet_too_big_in += 1;
                // RFC 8201 §4: never below the IPv6 minimum MTU.
                let mtu = mtu.clamp(MIN_MTU as u32, u32::from(u16::MAX)) as u16;
                self.icmpv6_error_input(now, &repr, IcmpError::FragmentationNeeded { mtu });
            }
            Icmpv6Repr::TimeExceeded { .. } => {
                self.stats.icmp_time_exceeded_in += 1;
                self.icmpv6_error_input(now, &repr, IcmpError::TimeExceeded);
            }
            Icmpv6Repr::ParamProblem { .. } => {
                self.stats.icmpv6_param_problem_in += 1;
                // Linux: EPROTO, a hard error; as ICMPv4's protocol unreachable.
                self.icmpv6_error_input(now, &repr, IcmpError::Unreachable { code: V4Code::PROTOCOL.0 });
            }
            Icmpv6Repr::NeighborSolicit { target, .. } => self.neighbor_solicit_input(now, ip, target, repr.source_lla()),
            Icmpv6Repr::NeighborAdvert { flags, target, .. } => {
                self.neighbor_advert_input(now, ip, flags, target, repr.target_lla())
            }
            Icmpv6Repr::RouterAdvert { hop_limit, router_lifetime, .. } => {
                self.stats.ndisc_router_adverts_in += 1;
                // RFC 4861 §6.1.2: from a link-local address only.
                if ip.src.segments()[0] & 0xffc0 != 0xfe80 {
                    self.stats.drops_bad_source += 1;
                    return;
                }
                let prefixes = repr.options().into_iter().flatten().filter_map(|o| match o {
                    NdiscOption::PrefixInfo(p) => Some(p),
                    _ => None,
                });
                let mtu = repr.mtu();
                if let Some(s) = self.ip6.as_mut() {
                    s.router_advert(now, ip.src, hop_limit, router_lifetime, mtu, prefixes);
                }
                if let Some(mac) = repr.source_lla() {
                    self.ndisc_learn(now, ip.src, mac, true);
                }
            }
            // Hosts do not answer router solicitations (RFC 4861 §6.2.6 is for routers).
            Icmpv6Repr::RouterSolicit { .. } => self.stats.icmp_ignored += 1,
        }
    }

    /// RFC 4861 §7.2.3, RFC 4862 §5.4.3.
    fn neighbor_solicit_input(&mut self, now: Instant, ip: Ip6Meta<'_>, target: Ipv6Addr, slla: Option<EthernetAddress>) {
        self.stats.ndisc_solicits_in += 1;
        let dad_probe = ip.src.is_unspecified();
        // §7.1.1: a probe goes to the solicited-node group and carries no source address option.
        if dad_probe && (ip.dst != solicited_node(target) || slla.is_some()) {
            self.stats.drops_malformed += 1;
            return;
        }
        let Some(st) = self.ip6.as_mut() else { return };
        match st.target_seen(target, dad_probe, false) {
            Conflict::DadFailed => {
                self.stats.ipv6_dad_failures += 1;
                return;
            }
            Conflict::InUse | Conflict::None => {}
        }
        if !st.is_ours(target) {
            self.stats.icmp_ignored += 1;
            return;
        }
        if let Some(mac) = slla.filter(|m| m.is_unicast()) {
            self.ndisc_learn(now, ip.src, mac, true);
        }
        // Shards other than 0 learn only; shard 0 answers (as for ARP).
        if !self.cfg.arp_replies {
            return;
        }
        let (dst, flags) = if dad_probe {
            (ALL_NODES, na_flags::OVERRIDE)
        } else {
            (ip.src, na_flags::SOLICITED | na_flags::OVERRIDE)
        };
        let mut opt = [0u8; 8];
        let _ = NdiscOption::TargetLla(EthernetAddress(self.cfg.mac)).emit(&mut opt);
        let na = Icmpv6Repr::NeighborAdvert { flags, target, options: &opt };
        if self.send_ndisc(now, target, dst, &na) {
            self.stats.ndisc_adverts_out += 1;
        }
    }

    /// RFC 4861 §7.2.5, RFC 4862 §5.4.4.
    fn neighbor_advert_input(
        &mut self,
        now: Instant,
        ip: Ip6Meta<'_>,
        flags: u8,
        target: Ipv6Addr,
        tlla: Option<EthernetAddress>,
    ) {
        self.stats.ndisc_adverts_in += 1;
        // §7.1.2: a solicited advertisement is never multicast.
        if ip.multicast && flags & na_flags::SOLICITED != 0 {
            self.stats.drops_malformed += 1;
            return;
        }
        let Some(st) = self.ip6.as_mut() else { return };
        match st.target_seen(target, false, true) {
            Conflict::DadFailed => {
                self.stats.ipv6_dad_failures += 1;
                return;
            }
            Conflict::InUse => {
                self.stats.ipv6_address_conflicts += 1;
                return;
            }
            Conflict::None => {}
        }
        if let Some(mac) = tlla.filter(|m| m.is_unicast()) {
            // §7.2.5: an advertisement creates no entry; it completes or updates one.
            self.ndisc_learn(now, target, mac, false);
        }
    }

    /// Learns a neighbour's MAC and sends what waited for it.
    fn ndisc_learn(&mut self, now: Instant, ip: Ipv6Addr, mac: EthernetAddress, create: bool) {
        let Some(st) = self.ip6.as_mut() else { return };
        let flushed = st.neighbors.learn(now, ip, mac.0, create, &mut self.stats);
        if !flushed.is_empty() {
            let st = self.ip6.as_ref();
            self.tcp.mark_ready_via(|remote| match (remote, st) {
                (IpAddr::V6(r), Some(s)) => s.next_hop(r) == Some(ip),
                _ => false,
            });
        }
        for frame in flushed {
            self.push_frame(frame);
        }
    }

    /// Finds the connection or socket that sent the quoted packet.
    fn icmpv6_error_input(&mut self, now: Instant, repr: &Icmpv6Repr<'_>, err: IcmpError) {
        let Some((quoted, rest)) = repr.quoted() else {
            self.stats.drops_malformed += 1;
            return;
        };
        let ours = self.ip6.as_ref().is_some_and(|s| s.is_ours(quoted.src_addr));
        let walk = walk_extensions(quoted.next_header, rest).ok();
        let l4 = walk.filter(|w| w.fragment.is_none_or(|(f, _)| f.offset == 0)).and_then(|w| {
            let l4 = rest.get(w.upper_offset..)?;
            (l4.len() >= 4).then_some((w.upper, l4))
        });
        let (Some((upper, l4)), true) = (l4, ours) else {
            self.stats.icmp_errors_unmatched += 1;
            return;
        };
        let sport = u16::from_be_bytes([l4[0], l4[1]]);
        let dport = u16::from_be_bytes([l4[2], l4[3]]);
        let tuple = FourTuple::new(
            SocketAddr::new(quoted.src_addr.into(), sport),
            SocketAddr::new(quoted.dst_addr.into(), dport),
        );
        let delivered = match upper {
            // As for ICMPv4: an error quoting too little to check the sequence
            // number (RFC 5927 §4.1) is not believed.
            next_header::TCP => match l4.get(4..8) {
                Some(b) => self.tcp.icmp_input(now, tuple, SeqNumber(u32::from_be_bytes([b[0], b[1], b[2], b[3]])), err),
                None => false,
            },
            next_header::UDP => match err {
                IcmpError::Unreachable { code } if V4Code(code).is_hard() => self.udp.set_error(tuple.local, StackError::Refused),
                _ => false,
            },
            _ => false,
        };
        if delivered {
            self.stats.icmp_errors_delivered += 1;
        } else {
            self.stats.icmp_errors_unmatched += 1;
        }
    }

    /// As much of an offending packet as fits a minimum-MTU error (RFC 4443 §2.4(c)).
    pub(crate) fn icmpv6_quote(&self, packet: &[u8]) -> Vec<u8> {
        packet[..packet.len().min(MAX_ERROR_LEN - 8)].to_vec()
    }

    /// Sends an error about a packet we received, unless RFC 4443 §2.4(e)
    /// forbids it (about an ICMPv6 error, or from an address that names no
    /// single host) or the rate limit says no.
    pub(crate) fn send_icmpv6_error(&mut self, now: Instant, ip: Ip6Meta<'_>, repr: &Icmpv6Repr<'_>) {
        if ip.src.is_unspecified() || ip.src.is_multicast() {
            return;
        }
        if let Ok((q, rest)) = Ipv6Repr::parse_quoted(ip.packet) {
            let about_error = walk_extensions(q.next_header, rest).is_ok_and(|w| {
                w.upper == next_header::ICMPV6 && Self::is_icmpv6_error(rest.get(w.upper_offset..).unwrap_or(&[]))
            });
            if about_error {
                return;
            }
        }
        if !self.icmp_limit.allow(now) {
            self.stats.icmp_rate_limited += 1;
            return;
        }
        let src = if ip.multicast { self.ip6.as_ref().and_then(|s| s.source_for(ip.src)) } else { Some(ip.dst) };
        let Some(src) = src else { return };
        if self.send_icmpv6(now, src, ip.src, repr) {
            self.stats.icmpv6_errors_out += 1;
        }
    }

    /// Port unreachable (UDP to a port nobody has, RFC 4443 §3.1 code 4).
    pub(crate) fn send_port_unreachable6(&mut self, now: Instant, ip: Ip6Meta<'_>) {
        if ip.multicast {
            return;
        }
        let quote = self.icmpv6_quote(ip.packet);
        let repr = Icmpv6Repr::DstUnreachable { code: UnreachableCode::PORT, invoking: &quote };
        self.send_icmpv6_error(now, ip, &repr);
    }

    /// Builds and routes one ICMPv6 message. False if it could not be queued.
    pub(crate) fn send_icmpv6(&mut self, now: Instant, src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> bool {
        let len = repr.buffer_len();
        let hop_limit = self.ip6.as_ref().map_or(64, |s| s.hop_limit);
        let mut frame = self.ip6_frame(src, dst, next_header::ICMPV6, len, hop_limit);
        let at = frame.len() - len;
        if repr.emit(src, dst, &mut frame[at..]).is_err() {
            return false;
        }
        self.stats.icmpv6_out += 1;
        self.route_frame6(now, dst, frame)
    }

    /// A neighbour discovery message (hop limit 255) from `src` to `dst`.
    fn send_ndisc(&mut self, now: Instant, src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> bool {
        let len = repr.buffer_len();
        let mut frame = self.ip6_frame(src, dst, next_header::ICMPV6, len, NDISC_HOP_LIMIT);
        let at = frame.len() - len;
        if repr.emit(src, dst, &mut frame[at..]).is_err() {
            return false;
        }
        self.stats.icmpv6_out += 1;
        self.route_frame6(now, dst, frame)
    }

    /// Writes the next neighbour solicitation the neighbour cache or
    /// duplicate-address detection wants, or a router solicitation, into `buf`.
    pub(crate) fn next_ndisc_request(&mut self, buf: &mut [u8]) -> Option<usize> {
        let st = self.ip6.as_mut()?;
        let mac = EthernetAddress(self.cfg.mac);
        let (src, dst, target, with_slla) = if let Some(target) = st.neighbors.poll_request() {
            let src = st.source_for(target).unwrap_or(Ipv6Addr::UNSPECIFIED);
            (src, solicited_node(target), Some(target), !src.is_unspecified())
        } else {
            match st.poll_out()? {
                NdOut::DadProbe { target } => (Ipv6Addr::UNSPECIFIED, solicited_node(target), Some(target), false),
                NdOut::RouterSolicit => {
                    let src = st.link_local().unwrap_or(Ipv6Addr::UNSPECIFIED);
                    (src, ALL_ROUTERS, None, !src.is_unspecified())
                }
            }
        };
        let mut opt = [0u8; 8];
        let options: &[u8] = if with_slla {
            let _ = NdiscOption::SourceLla(mac).emit(&mut opt);
            &opt
        } else {
            &[]
        };
        let repr = match target {
            Some(target) => Icmpv6Repr::NeighborSolicit { target, options },
            None => Icmpv6Repr::RouterSolicit { options },
        };
        let len = repr.buffer_len();
        let total = ETH_LEN + IP6_LEN + len;
        let b = buf.get_mut(..total)?;
        let eth = EthernetRepr { src_addr: mac, dst_addr: multicast_mac(dst), ethertype: EtherType::Ipv6 };
        eth.emit(b).ok()?;
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: next_header::ICMPV6,
            payload_len: len,
            hop_limit: NDISC_HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
        };
        ip.emit(&mut b[ETH_LEN..]).ok()?;
        repr.emit(src, dst, &mut b[ETH_LEN + IP6_LEN..]).ok()?;
        self.stats.icmpv6_out += 1;
        self.stats.ipv6_packets_out += 1;
        if target.is_some() {
            self.stats.ndisc_solicits_out += 1;
        } else {
            self.stats.ndisc_router_solicits_out += 1;
        }
        Some(total)
    }

    /// Sends an IPv6 echo request (ping6).
    pub(crate) fn icmpv6_echo_request(
        &mut self,
        now: Instant,
        dst: Ipv6Addr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), StackError> {
        let st = self.ip6.as_ref().ok_or(StackError::NoRoute)?;
        if data.len() + 8 + IP6_LEN > st.mtu {
            return Err(StackError::MessageTooLong);
        }
        let src = st.source_for(dst).ok_or(StackError::NoRoute)?;
        let repr = Icmpv6Repr::EchoRequest { ident, seq_no, data };
        if self.send_icmpv6(now, src, dst, &repr) {
            Ok(())
        } else {
            Err(StackError::WouldBlock)
        }
    }

    /// The address a transport packet of ours to `dst` leaves from.
    pub(crate) fn local_addr_for(&self, dst: IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(_) => Some(self.cfg.addr.into()),
            IpAddr::V6(d) => self.ip6.as_ref()?.source_for(d).map(IpAddr::V6),
        }
    }

    /// Port unreachable for either family.
    pub(crate) fn send_port_unreachable(&mut self, now: Instant, net: Net<'_>, payload: &[u8]) {
        match net {
            Net::V4(ip) => self.send_unreachable(now, ip, payload, V4Code::PORT),
            Net::V6(ip) => self.send_port_unreachable6(now, ip),
        }
    }
}
