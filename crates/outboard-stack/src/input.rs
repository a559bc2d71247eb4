//! The receive path: Ethernet, ARP and IPv4 checks, fragment reassembly, then
//! demultiplexing by protocol (IPv6 in `input6`). Every drop increments a
//! named counter.

use crate::reassembly::{FragKey, Fragment};
use crate::Stack;
use outboard_time::Instant;
use outboard_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame};
use outboard_wire::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use outboard_wire::{Error, RxChecksum};
use std::net::{IpAddr, Ipv6Addr};

/// The bits of an IPv4 header the upper layers need, with the raw header
/// kept for quoting in ICMP errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpMeta<'a> {
    pub repr: Ipv4Repr,
    /// Sent to a broadcast address: never answered with an error (RFC 1122 §3.2.2).
    pub broadcast: bool,
    /// The header as received (of the first fragment, for a reassembled datagram).
    pub header: &'a [u8],
}

/// What the transport layer needs of the IPv6 header of a packet for us.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ip6Meta<'a> {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// Sent to a multicast group: never answered with most errors (RFC 4443 §2.4(e)).
    pub multicast: bool,
    /// The traffic class (DSCP and ECN bits).
    pub tclass: u8,
    /// The packet from its IPv6 header on (of the first fragment, for a
    /// reassembled one), for quoting in ICMPv6 errors.
    pub packet: &'a [u8],
}

/// The network-layer facts of a received transport packet, either family.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Net<'a> {
    V4(IpMeta<'a>),
    V6(Ip6Meta<'a>),
}

impl Net<'_> {
    pub(crate) fn src(&self) -> IpAddr {
        match self {
            Net::V4(m) => m.repr.src_addr.into(),
            Net::V6(m) => m.src.into(),
        }
    }
    pub(crate) fn dst(&self) -> IpAddr {
        match self {
            Net::V4(m) => m.repr.dst_addr.into(),
            Net::V6(m) => m.dst.into(),
        }
    }
    /// The IP header's ECN field says "congestion experienced" (RFC 3168 §5: 11).
    pub(crate) fn ce(&self) -> bool {
        let tos = match self {
            Net::V4(m) => m.repr.dscp_ecn,
            Net::V6(m) => m.tclass,
        };
        tos & 0b11 == 0b11
    }

    /// Sent to a broadcast or multicast address (TCP takes none of these).
    pub(crate) fn is_to_group(&self) -> bool {
        match self {
            Net::V4(m) => m.broadcast,
            Net::V6(m) => m.multicast,
        }
    }
}

impl Stack {
    pub(crate) fn ethernet_input(&mut self, now: Instant, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.stats.drops_malformed += 1;
            return;
        };
        let dst = eth.dst_addr();
        // Unicast to us, broadcast, or (with IPv6) the all-nodes and our
        // solicited-node groups.
        // (The group check runs only for frames not unicast to us: off the per-frame path.)
        if dst != EthernetAddress(self.cfg.mac)
            && !dst.is_broadcast()
            && !self.ip6.as_ref().is_some_and(|s| s.accepts_mac(dst))
        {
            self.stats.drops_not_for_us += 1;
            return;
        }
        match eth.ethertype() {
            EtherType::Arp => self.arp_input(now, eth.payload()),
            EtherType::Ipv4 => self.ipv4_input(now, eth.payload()),
            EtherType::Ipv6 if self.ip6.is_some() => self.ipv6_input(now, eth.payload()),
            _ => self.stats.drops_unknown_ethertype += 1,
        }
    }

    fn arp_input(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(arp) = ArpPacket::new_checked(bytes).and_then(|p| ArpRepr::parse(&p)) else {
            self.stats.drops_malformed += 1;
            return;
        };
        match arp.operation {
            ArpOperation::Request => self.stats.arp_requests_in += 1,
            ArpOperation::Reply => self.stats.arp_replies_in += 1,
            ArpOperation::Unknown(_) => {
                self.stats.drops_malformed += 1;
                return;
            }
        }
        let sha = arp.source_hardware_addr;
        let spa = arp.source_protocol_addr;
        let for_us = arp.target_protocol_addr == self.cfg.addr;
        // A group MAC can't own an address; an off-link or martian sender
        // can't be a neighbour. (A probe from 0.0.0.0, RFC 5227, teaches
        // nothing but is still answered.)
        let learnable = sha.is_unicast() && self.route.valid_source(spa) && self.route.on_link(spa);
        if !(learnable || spa.is_unspecified() && for_us) {
            self.stats.drops_bad_source += 1;
            return;
        }
        if learnable {
            // RFC 826 merge: update an existing entry; add one if we are the target.
            let flushed = self.arp.learn(now, spa, sha.0, for_us, &mut self.stats);
            if !flushed.is_empty() {
                // Connections behind this next hop may have stopped sending while it resolved.
                self.tcp
                    .mark_ready_via(|remote| match remote {
                        IpAddr::V4(r) => self.route.next_hop(r) == Some(spa),
                        IpAddr::V6(_) => false,
                    });
            }
            for frame in flushed {
                self.push_frame(frame);
            }
        }
        if arp.operation == ArpOperation::Request && for_us && self.cfg.arp_replies {
            self.send_arp(ArpOperation::Reply, sha, spa);
        }
    }

    fn ipv4_input(&mut self, now: Instant, bytes: &[u8]) {
        // `parse` checks the lengths first (a short or inconsistent header is
        // malformed, as `new_checked` would say), then the checksum.
        let pkt = Ipv4Packet::new_unchecked(bytes);
        let repr = match Ipv4Repr::parse(&pkt, RxChecksum::Verify) {
            Ok(r) => r,
            Err(Error::Checksum) => {
                self.stats.drops_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.drops_malformed += 1;
                return;
            }
        };
        self.stats.ip_packets_in += 1;
        if !pkt.options().is_empty() {
            // RFC 1122 §3.2.1.8: options we don't act on are ignored.
            self.stats.ip_options_seen += 1;
        }
        let Some(broadcast) = self.route.accepts(repr.dst_addr) else {
            self.stats.drops_not_for_us += 1;
            return;
        };
        if !self.route.valid_source(repr.src_addr) {
            self.stats.drops_bad_source += 1;
            return;
        }
        let header = &bytes[..pkt.header_len()];
        if !repr.is_fragment() {
            self.ip_deliver(
                now,
                IpMeta {
                    repr,
                    broadcast,
                    header,
                },
                pkt.payload(),
            );
            return;
        }
        self.stats.fragments_in += 1;
        let key = FragKey {
            src: repr.src_addr.into(),
            dst: repr.dst_addr.into(),
            protocol: u8::from(repr.protocol),
            ident: u32::from(repr.ident),
        };
        let frag = Fragment {
            offset: usize::from(repr.frag_offset),
            more_fragments: repr.more_frags,
            data: pkt.payload(),
            header,
        };
        if let Some(done) = self.reasm.add(now, key, frag, &mut self.stats) {
            let mut repr = repr;
            repr.payload_len = done.payload.len();
            repr.more_frags = false;
            repr.frag_offset = 0;
            self.ip_deliver(
                now,
                IpMeta {
                    repr,
                    broadcast,
                    header: &done.header,
                },
                &done.payload,
            );
        }
    }

    /// One whole datagram for us: hand it to its protocol.
    fn ip_deliver(&mut self, now: Instant, ip: IpMeta<'_>, payload: &[u8]) {
        match ip.repr.protocol {
            IpProtocol::Icmp => self.icmp_input(now, ip, payload),
            IpProtocol::Udp => self.udp_input(now, Net::V4(ip), payload),
            IpProtocol::Tcp => self.tcp_segment_input(now, Net::V4(ip), payload),
            IpProtocol::Unknown(_) => {
                self.stats.drops_unknown_protocol += 1;
                // RFC 1122 §3.2.2.1: protocol unreachable.
                self.send_unreachable(
                    now,
                    ip,
                    payload,
                    outboard_wire::icmpv4::UnreachableCode::PROTOCOL,
                );
            }
        }
    }
}
