//! The transmit path: framing, next-hop resolution through ARP, the bounded
//! transmit queue for control and UDP frames, IPv4 fragmentation of large
//! UDP datagrams, and TCP segments built straight into the caller's buffer.
//!
//! Order of service in `poll_transmit`: ARP requests, then queued frames,
//! then TCP connections round-robin. A TCP segment's payload is copied once,
//! from the connection's send queue into the frame, with its checksum summed
//! during that copy (DESIGN.md §7); only when the next hop is still resolving
//! is the finished frame copied again into the ARP wait queue.
//!
//! IPv6 (RFC 8200) takes the same paths: `ip6_frame` and `route_frame6`
//! (neighbour discovery in place of ARP, multicast MACs for groups), TCP
//! segments built by family, and UDP fragmented with a Fragment header
//! (§4.5; the source fragments, routers never do). TSO is used for IPv4 only.

use crate::arp::QueueOutcome;
use crate::{Stack, StackError, TxMeta};
use outboard_tcp::Transmit;
use outboard_time::Instant;
use outboard_wire::arp::{ArpOperation, ArpRepr};
use outboard_wire::checksum::{copy_and_checksum, Accumulator};
use outboard_wire::icmpv6::multicast_mac;
use outboard_wire::ipv6::{next_header, FragmentHeader, Ipv6Repr, FRAGMENT_HEADER_LEN, HEADER_LEN as IP6_LEN};
use outboard_wire::PseudoAddr;
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetRepr, HEADER_LEN as ETH_LEN};
use outboard_wire::ipv4::{IpProtocol, Ipv4Repr, HEADER_LEN as IP_LEN};
use outboard_wire::udp::{UdpRepr, HEADER_LEN as UDP_LEN};
use outboard_wire::{TcpRepr, TxChecksum};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

/// Frames held in the transmit queue at most.
pub(crate) const TXQ_CAP: usize = 1024;
/// RFC 1122 §3.2.1.7: TTL for datagrams we originate (Linux's default).
pub(crate) const DEFAULT_TTL: u8 = 64;
/// The largest UDP payload an IPv4 datagram can carry.
pub const UDP_MAX_PAYLOAD: usize = 65535 - IP_LEN - UDP_LEN;
/// The largest UDP payload an IPv6 packet can carry without a jumbogram.
const UDP6_MAX_PAYLOAD: usize = 65535 - UDP_LEN;

impl Stack {
    pub(crate) fn next_frame(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.next_frame_meta(now, buf, &mut TxMeta::default())
    }

    /// The next frame; `meta` is set when it is a TSO segment (only when
    /// `self.tx_offload` allows one).
    pub(crate) fn next_frame_meta(&mut self, now: Instant, buf: &mut [u8], meta: &mut TxMeta) -> Option<usize> {
        if self.resolution_pending() {
            if let Some(n) = self.next_arp_request(buf).or_else(|| self.next_ndisc_request(buf)) {
                return Some(n);
            }
        }
        while let Some(frame) = self.txq.pop_front() {
            self.txq_bytes -= frame.len();
            match buf.get_mut(..frame.len()) {
                Some(dst) => {
                    dst.copy_from_slice(&frame);
                    return Some(frame.len());
                }
                None => self.stats.drops_tx_buffer_too_small += 1,
            }
        }
        if let Some(n) = self.tcp_next_frame(now, buf, meta) {
            return Some(n);
        }
        // Segments for an unresolved next hop just started a resolution.
        if !self.resolution_pending() {
            return None;
        }
        self.next_arp_request(buf).or_else(|| self.next_ndisc_request(buf))
    }

    /// An ARP request or a neighbour or router solicitation waits to go out:
    /// two loads, where asking each producer costs a call per frame.
    #[inline]
    fn resolution_pending(&self) -> bool {
        self.arp.has_requests() || self.ip6.as_ref().is_some_and(|s| s.has_output())
    }

    fn next_arp_request(&mut self, buf: &mut [u8]) -> Option<usize> {
        while let Some(ip) = self.arp.poll_request() {
            match self.emit_arp(buf, ArpOperation::Request, EthernetAddress::BROADCAST, ip) {
                Some(n) => {
                    self.stats.arp_requests_out += 1;
                    return Some(n);
                }
                None => self.stats.drops_tx_buffer_too_small += 1,
            }
        }
        None
    }

    /// Queues a finished frame; false (and counted) if the queue is full.
    pub(crate) fn push_frame(&mut self, frame: Vec<u8>) -> bool {
        if self.txq.len() >= TXQ_CAP {
            self.stats.drops_tx_queue_full += 1;
            return false;
        }
        self.txq_bytes += frame.len();
        self.txq.push_back(frame);
        true
    }

    fn txq_room(&self) -> usize {
        TXQ_CAP - self.txq.len()
    }

    /// Emits an ARP packet in a frame into `buf`.
    fn emit_arp(
        &self,
        buf: &mut [u8],
        op: ArpOperation,
        to_mac: EthernetAddress,
        to_ip: Ipv4Addr,
    ) -> Option<usize> {
        let eth = EthernetRepr {
            src_addr: EthernetAddress(self.cfg.mac),
            dst_addr: to_mac,
            ethertype: EtherType::Arp,
        };
        let arp = ArpRepr {
            operation: op,
            source_hardware_addr: EthernetAddress(self.cfg.mac),
            source_protocol_addr: self.cfg.addr,
            target_hardware_addr: if op == ArpOperation::Request {
                EthernetAddress::ZERO
            } else {
                to_mac
            },
            target_protocol_addr: to_ip,
        };
        let n = eth.emit(buf).ok()?;
        let m = arp.emit(buf.get_mut(n..)?).ok()?;
        Some(n + m)
    }

    pub(crate) fn send_arp(&mut self, op: ArpOperation, to_mac: EthernetAddress, to_ip: Ipv4Addr) {
        let mut frame = vec![0u8; ETH_LEN + outboard_wire::arp::PACKET_LEN];
        if self.emit_arp(&mut frame, op, to_mac, to_ip).is_some()
            && self.push_frame(frame)
            && op == ArpOperation::Reply
        {
            self.stats.arp_replies_out += 1;
        }
    }

    /// A frame with Ethernet and IPv4 headers for an IP payload of `len`
    /// bytes, which the caller writes at the end. The destination MAC is
    /// filled in by `route_frame`.
    pub(crate) fn ip_frame(
        &mut self,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        len: usize,
        dont_frag: bool,
    ) -> Vec<u8> {
        let mut frame = vec![0u8; ETH_LEN + IP_LEN + len];
        let ip = Ipv4Repr {
            src_addr: self.cfg.addr,
            dst_addr: dst,
            protocol,
            payload_len: len,
            ttl: DEFAULT_TTL,
            dscp_ecn: 0,
            ident: self.next_ident(),
            dont_frag,
            more_frags: false,
            frag_offset: 0,
        };
        self.emit_eth_ip(&mut frame, &ip);
        self.stats.ip_packets_out += 1;
        frame
    }

    fn emit_eth_ip(&self, frame: &mut [u8], ip: &Ipv4Repr) {
        let eth = EthernetRepr {
            src_addr: EthernetAddress(self.cfg.mac),
            dst_addr: EthernetAddress::ZERO,
            ethertype: EtherType::Ipv4,
        };
        // Invariant: callers size frames for both headers, and payload
        // lengths were checked against 65535 before.
        let _ = eth.emit(frame);
        let _ = ip.emit(&mut frame[ETH_LEN..]);
    }

    pub(crate) fn next_ident(&mut self) -> u16 {
        self.ip_ident = self.ip_ident.wrapping_add(1);
        self.ip_ident
    }

    /// Sends a finished IP frame towards `dst`: broadcast, resolved neighbour,
    /// or the ARP wait queue. False if it was dropped (counted).
    pub(crate) fn route_frame(&mut self, now: Instant, dst: Ipv4Addr, mut frame: Vec<u8>) -> bool {
        if self.route.is_broadcast(dst) {
            frame[..6].copy_from_slice(&[0xff; 6]);
            return self.push_frame(frame);
        }
        let Some(hop) = self.route.next_hop(dst) else {
            self.stats.drops_no_route += 1;
            return false;
        };
        if let Some(mac) = self.arp.lookup(now, hop) {
            frame[..6].copy_from_slice(&mac);
            return self.push_frame(frame);
        }
        self.neighbor_wait(now, IpAddr::V4(hop), frame)
    }

    /// A frame with Ethernet and IPv6 headers for an upper-layer packet of
    /// `len` bytes, which the caller writes at the end. The destination MAC
    /// is filled in by `route_frame6`.
    pub(crate) fn ip6_frame(&mut self, src: Ipv6Addr, dst: Ipv6Addr, next: u8, len: usize, hop_limit: u8) -> Vec<u8> {
        let mut frame = vec![0u8; ETH_LEN + IP6_LEN + len];
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: next,
            payload_len: len,
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
        };
        self.emit_eth_ip6(&mut frame, &ip);
        self.stats.ipv6_packets_out += 1;
        frame
    }

    fn emit_eth_ip6(&self, frame: &mut [u8], ip: &Ipv6Repr) {
        let eth = EthernetRepr {
            src_addr: EthernetAddress(self.cfg.mac),
            dst_addr: EthernetAddress::ZERO,
            ethertype: EtherType::Ipv6,
        };
        // Invariant: callers size frames for both headers, and payload
        // lengths were checked against 65535 before.
        let _ = eth.emit(frame);
        let _ = ip.emit(&mut frame[ETH_LEN..]);
    }

    /// Sends a finished IPv6 frame towards `dst`: a group's multicast MAC, a
    /// resolved neighbour, or the neighbour-discovery wait queue. False if
    /// it was dropped (counted).
    pub(crate) fn route_frame6(&mut self, now: Instant, dst: Ipv6Addr, mut frame: Vec<u8>) -> bool {
        if dst.is_multicast() {
            frame[..6].copy_from_slice(&multicast_mac(dst).0);
            return self.push_frame(frame);
        }
        let Some(hop) = self.ip6.as_ref().and_then(|s| s.next_hop(dst)) else {
            self.stats.drops_no_route += 1;
            return false;
        };
        if let Some(mac) = self.ip6.as_mut().and_then(|s| s.neighbors.lookup(now, hop)) {
            frame[..6].copy_from_slice(&mac);
            return self.push_frame(frame);
        }
        self.neighbor_wait(now, IpAddr::V6(hop), frame)
    }

    /// Sends a finished frame of either family towards `dst`.
    fn route_any(&mut self, now: Instant, dst: IpAddr, frame: Vec<u8>) -> bool {
        match dst {
            IpAddr::V4(d) => self.route_frame(now, d, frame),
            IpAddr::V6(d) => self.route_frame6(now, d, frame),
        }
    }

    /// Holds a frame until its next hop resolves (ARP or neighbour discovery).
    fn neighbor_wait(&mut self, now: Instant, hop: IpAddr, frame: Vec<u8>) -> bool {
        let outcome = match hop {
            IpAddr::V4(h) => self.arp.queue(now, h, frame, &mut self.stats),
            IpAddr::V6(h) => match self.ip6.as_mut() {
                Some(s) => s.neighbors.queue(now, h, frame, &mut self.stats),
                None => QueueOutcome::Unreachable,
            },
        };
        match outcome {
            QueueOutcome::Queued => true,
            QueueOutcome::PendingFull => {
                self.stats.drops_arp_pending_full += 1;
                false
            }
            QueueOutcome::Unreachable => {
                self.stats.drops_arp_unresolved += 1;
                false
            }
        }
    }

    /// One UDP datagram, fragmented to the MTU if needed (RFC 791 §3.2).
    pub(crate) fn udp_output(
        &mut self,
        now: Instant,
        src_port: u16,
        dst: SocketAddr,
        data: &[u8],
    ) -> Result<(), StackError> {
        let dst = match dst {
            SocketAddr::V4(d) => d,
            SocketAddr::V6(d) => return self.udp_output6(now, src_port, d, data),
        };
        if data.len() > UDP_MAX_PAYLOAD {
            return Err(StackError::MessageTooLong);
        }
        let udp_len = UDP_LEN + data.len();
        let max_frag = (self.cfg.mtu.saturating_sub(IP_LEN)) & !7;
        let frags = if IP_LEN + udp_len <= self.cfg.mtu {
            1
        } else {
            udp_len.div_ceil(max_frag.max(8))
        };
        if max_frag < 8 && frags > 1 {
            return Err(StackError::MessageTooLong);
        }
        if frags > self.txq_room() {
            return Err(StackError::WouldBlock);
        }
        let repr = UdpRepr {
            src_port,
            dst_port: dst.port(),
        };
        let dst_ip = *dst.ip();
        if frags == 1 {
            let mut frame = self.ip_frame(dst_ip, IpProtocol::Udp, udp_len, false);
            let at = ETH_LEN + IP_LEN;
            // The payload's one copy, summed as it moves.
            let sum = copy_and_checksum(&mut frame[at + UDP_LEN..], data);
            let _ = repr.emit(
                &mut frame[at..],
                self.cfg.addr,
                dst_ip,
                data.len(),
                TxChecksum::Payload(sum),
            );
            self.stats.udp_datagrams_out += 1;
            self.route_frame(now, dst_ip, frame);
            return Ok(());
        }
        // Fragmented: build the whole UDP datagram once, then cut it.
        let mut dgram = vec![0u8; udp_len];
        let sum = copy_and_checksum(&mut dgram[UDP_LEN..], data);
        let _ = repr.emit(
            &mut dgram,
            self.cfg.addr,
            dst_ip,
            data.len(),
            TxChecksum::Payload(sum),
        );
        let ident = self.next_ident();
        for (i, piece) in dgram.chunks(max_frag).enumerate() {
            let offset = i * max_frag;
            let ip = Ipv4Repr {
                src_addr: self.cfg.addr,
                dst_addr: dst_ip,
                protocol: IpProtocol::Udp,
                payload_len: piece.len(),
                ttl: DEFAULT_TTL,
                dscp_ecn: 0,
                ident,
                dont_frag: false,
                more_frags: offset + piece.len() < udp_len,
                // Invariant: offset < 65535 since udp_len <= 65515.
                frag_offset: offset as u16,
            };
            let mut frame = vec![0u8; ETH_LEN + IP_LEN + piece.len()];
            self.emit_eth_ip(&mut frame, &ip);
            frame[ETH_LEN + IP_LEN..].copy_from_slice(piece);
            self.stats.fragments_out += 1;
            self.stats.ip_packets_out += 1;
            self.route_frame(now, dst_ip, frame);
        }
        self.stats.udp_datagrams_out += 1;
        Ok(())
    }

    /// One UDP datagram over IPv6, fragmented by us when it exceeds the MTU
    /// (RFC 8200 §4.5: each fragment carries a Fragment header, offsets in
    /// 8-byte units).
    fn udp_output6(&mut self, now: Instant, src_port: u16, dst: SocketAddrV6, data: &[u8]) -> Result<(), StackError> {
        if data.len() > UDP6_MAX_PAYLOAD {
            return Err(StackError::MessageTooLong);
        }
        let dst_ip = *dst.ip();
        let st = self.ip6.as_ref().ok_or(StackError::NoRoute)?;
        let (src, mtu, hop_limit) = (st.source_for(dst_ip).ok_or(StackError::NoRoute)?, st.mtu, st.hop_limit);
        let udp_len = UDP_LEN + data.len();
        let max_frag = mtu.saturating_sub(IP6_LEN + FRAGMENT_HEADER_LEN) & !7;
        let frags = if IP6_LEN + udp_len <= mtu { 1 } else { udp_len.div_ceil(max_frag.max(8)) };
        if frags > self.txq_room() {
            return Err(StackError::WouldBlock);
        }
        let repr = UdpRepr { src_port, dst_port: dst.port() };
        let mut dgram = vec![0u8; udp_len];
        let sum = copy_and_checksum(&mut dgram[UDP_LEN..], data);
        let _ = repr.emit(&mut dgram, src, dst_ip, data.len(), TxChecksum::Payload(sum));
        if frags == 1 {
            let mut frame = self.ip6_frame(src, dst_ip, next_header::UDP, udp_len, hop_limit);
            frame[ETH_LEN + IP6_LEN..].copy_from_slice(&dgram);
            self.stats.udp_datagrams_out += 1;
            self.route_frame6(now, dst_ip, frame);
            return Ok(());
        }
        self.ip6_ident = self.ip6_ident.wrapping_add(1);
        let ident = self.ip6_ident;
        for (i, piece) in dgram.chunks(max_frag).enumerate() {
            let offset = i * max_frag;
            let fh = FragmentHeader {
                next_header: next_header::UDP,
                // Invariant: offset < 65536 since udp_len <= 65535.
                offset: offset as u16,
                more: offset + piece.len() < udp_len,
                ident,
            };
            let mut frame = self.ip6_frame(src, dst_ip, next_header::FRAGMENT, FRAGMENT_HEADER_LEN + piece.len(), hop_limit);
            let at = ETH_LEN + IP6_LEN;
            let _ = fh.emit(&mut frame[at..]);
            frame[at + FRAGMENT_HEADER_LEN..].copy_from_slice(piece);
            self.stats.fragments_out += 1;
            self.route_frame6(now, dst_ip, frame);
        }
        self.stats.udp_datagrams_out += 1;
        Ok(())
    }

    /// Sends a TCP control segment that belongs to no connection (RST,
    /// cookie SYN-ACK) from `local` (the address the segment it answers was
    /// sent to) to `remote`.
    pub(crate) fn send_tcp_control(&mut self, now: Instant, local: IpAddr, remote: IpAddr, repr: &TcpRepr) {
        let len = repr.header_len();
        let (mut frame, at) = match (local, remote) {
            (_, IpAddr::V4(r)) => (self.ip_frame(r, IpProtocol::Tcp, len, true), ETH_LEN + IP_LEN),
            (IpAddr::V6(l), IpAddr::V6(r)) => {
                let hop_limit = self.ip6.as_ref().map_or(64, |s| s.hop_limit);
                (self.ip6_frame(l, r, next_header::TCP, len, hop_limit), ETH_LEN + IP6_LEN)
            }
            (IpAddr::V4(_), IpAddr::V6(_)) => return,
        };
        let local = if remote.is_ipv4() { IpAddr::V4(self.cfg.addr) } else { local };
        if repr.emit(&mut frame[at..], local, remote, 0, TxChecksum::Compute).is_err() {
            return;
        }
        if repr.flags.rst() {
            self.stats.tcp_resets_out += 1;
        }
        self.stats.tcp_segments_out += 1;
        self.route_any(now, remote, frame);
    }

    /// Serves the ready connections until one yields a frame for `buf`.
    fn tcp_next_frame(&mut self, now: Instant, buf: &mut [u8], meta: &mut TxMeta) -> Option<usize> {
        // TSO only where the link takes it and the frame goes out now (a
        // frame waiting for ARP is sent later without its meta).
        let tso_room = buf.len().saturating_sub(ETH_LEN + IP_LEN + TCP_MAX_HEADER);
        let tso_max = if self.tx_offload { self.cfg.offloads.tso_max.min(tso_room) } else { 0 };
        while let Some(id) = self.tcp.ready_front() {
            let Some(entry) = self.tcp.ready_entry(id) else {
                self.tcp.drop_ready_front();
                continue;
            };
            let tuple = entry.conn.tuple();
            let (local, remote) = (tuple.local.ip(), tuple.remote.ip());
            let (hop, mac, hop_limit) = match remote {
                IpAddr::V4(r) => {
                    let hop = self.route.next_hop(r);
                    (hop.map(IpAddr::V4), hop.and_then(|h| self.arp.lookup(now, h)), DEFAULT_TTL)
                }
                IpAddr::V6(r) => match self.ip6.as_mut() {
                    Some(s) => {
                        let hop = s.next_hop(r);
                        (hop.map(IpAddr::V6), hop.and_then(|h| s.neighbors.lookup(now, h)), s.hop_limit)
                    }
                    None => (None, None, DEFAULT_TTL),
                },
            };
            entry.conn.set_tso_max(if mac.is_some() && remote.is_ipv4() { tso_max } else { 0 });
            let tos = entry.conn.tos();
            let Some(tx) = entry.conn.poll_transmit(now) else {
                if self.tcp.done_ready(id).is_some() {
                    self.stats.tcp_connections_freed += 1;
                }
                continue;
            };
            self.stats.tcp_segments_out += 1;
            self.stats.ip_packets_out += 1;
            let ident = self.ip_ident.wrapping_add(1);
            self.ip_ident = ident;
            let hdr = FrameHeader {
                src_mac: self.cfg.mac,
                src_ip: local,
                dst_ip: remote,
                ident,
                hop_limit,
                ecn: tos | if tx.ect { 0b10 } else { 0 },
            };
            let Some(hop) = hop else {
                self.stats.drops_no_route += 1;
                continue;
            };
            match mac {
                Some(mac) => match emit_tcp_frame(buf, &hdr, mac, &tx, meta) {
                    Some(n) => {
                        self.stats.tcp_tx_payload_copied += tx.payload_len() as u64;
                        // Its last segment for now: no second poll to find that out.
                        if entry.conn.nothing_to_send(now) {
                            if self.tcp.done_ready(id).is_some() {
                                self.stats.tcp_connections_freed += 1;
                            }
                        } else {
                            self.tcp.rotate_ready();
                        }
                        return Some(n);
                    }
                    None => self.stats.drops_tx_buffer_too_small += 1,
                },
                None => {
                    let mut frame =
                        vec![0u8; ETH_LEN + hdr.l3_len() + tx.repr.buffer_len(tx.payload_len())];
                    let built =
                        emit_tcp_frame(&mut frame, &hdr, [0; 6], &tx, &mut TxMeta::default());
                    if built.is_some() {
                        self.stats.tcp_tx_payload_copied += tx.payload_len() as u64;
                    }
                    let queued = built.is_some() && self.neighbor_wait(now, hop, frame);
                    if !queued {
                        // No room to wait: stop draining this connection (its
                        // retransmissions recover the rest); resolution marks it
                        // ready again.
                        if self.tcp.done_ready(id).is_some() {
                            self.stats.tcp_connections_freed += 1;
                        }
                    }
                }
            }
        }
        None
    }
}

/// What a TCP frame needs besides the segment.
struct FrameHeader {
    src_mac: [u8; 6],
    /// Both of one family (a connection's tuple).
    src_ip: IpAddr,
    dst_ip: IpAddr,
    /// IPv4 identification.
    ident: u16,
    /// TTL or hop limit.
    hop_limit: u8,
    /// The whole TOS / traffic class byte: the connection's DSCP bits
    /// (IP_TOS) and the ECN field, ECT(0) (0b10) on an ECN connection's new data.
    ecn: u8,
}

impl FrameHeader {
    fn l3_len(&self) -> usize {
        if self.dst_ip.is_ipv4() {
            IP_LEN
        } else {
            IP6_LEN
        }
    }

    /// Writes the Ethernet and IP headers for a TCP segment of `tcp_len` bytes.
    fn emit(&self, buf: &mut [u8], dst_mac: [u8; 6], tcp_len: usize) -> Option<()> {
        let ethertype = if self.dst_ip.is_ipv4() { EtherType::Ipv4 } else { EtherType::Ipv6 };
        let eth = EthernetRepr { src_addr: EthernetAddress(self.src_mac), dst_addr: EthernetAddress(dst_mac), ethertype };
        eth.emit(buf).ok()?;
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => {
                let ip = Ipv4Repr {
                    src_addr,
                    dst_addr,
                    protocol: IpProtocol::Tcp,
                    payload_len: tcp_len,
                    ttl: self.hop_limit,
                    dscp_ecn: self.ecn,
                    ident: self.ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                };
                ip.emit(&mut buf[ETH_LEN..]).ok()?;
            }
            (IpAddr::V6(src_addr), IpAddr::V6(dst_addr)) => {
                let ip = Ipv6Repr {
                    src_addr,
                    dst_addr,
                    next_header: next_header::TCP,
                    payload_len: tcp_len,
                    hop_limit: self.hop_limit,
                    traffic_class: self.ecn,
                    flow_label: 0,
                };
                ip.emit(&mut buf[ETH_LEN..]).ok()?;
            }
            _ => return None,
        }
        Some(())
    }
}

/// A TCP header with the most options.
const TCP_MAX_HEADER: usize = 60;
/// Where the checksum sits in a TCP header.
const TCP_CHECKSUM_AT: usize = 16;

/// Writes Ethernet, IPv4 (DF set: RFC 1191 path MTU discovery) and TCP
/// headers and the payload into `buf`, copying the payload once with its
/// checksum. A TSO segment (`tx.gso_size > 0`) is copied without summing:
/// its checksum field gets the pseudo-header sum and `meta` tells the link
/// to cut it and finish each piece's checksum. None if `buf` is too small.
fn emit_tcp_frame(
    buf: &mut [u8],
    h: &FrameHeader,
    dst_mac: [u8; 6],
    tx: &Transmit<'_>,
    meta: &mut TxMeta,
) -> Option<usize> {
    let plen = tx.payload_len();
    let tcp_len = tx.repr.buffer_len(plen);
    let l3 = h.l3_len();
    let total = ETH_LEN + l3 + tcp_len;
    let buf = buf.get_mut(..total)?;
    h.emit(buf, dst_mac, tcp_len)?;
    let seg = &mut buf[ETH_LEN + l3..];
    let hl = tx.repr.header_len();
    let (a, b) = (tx.payload[0], tx.payload[1]);
    if tx.gso_size > 0 {
        seg[hl..hl + a.len()].copy_from_slice(a);
        seg[hl + a.len()..hl + plen].copy_from_slice(b);
        tx.repr.emit(seg, h.src_ip, h.dst_ip, plen, TxChecksum::Omit).ok()?;
        // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum, not
        // complemented (Linux's tcp_v4_send_check); the segmenter adjusts it
        // for each piece's length.
        let mut acc = Accumulator::new();
        IpAddr::add_pseudo_header(&mut acc, h.src_ip, h.dst_ip, 6, usize::from(u16::try_from(tcp_len).ok()?));
        let pseudo = !acc.finish();
        seg[TCP_CHECKSUM_AT..TCP_CHECKSUM_AT + 2].copy_from_slice(&pseudo.to_be_bytes());
        *meta = TxMeta {
            gso_size: u16::try_from(tx.gso_size).ok()?,
            hdr_len: (ETH_LEN + l3 + hl) as u16,
            csum: Some(((ETH_LEN + l3) as u16, TCP_CHECKSUM_AT as u16)),
        };
        return Some(total);
    }
    let mut acc = Accumulator::new();
    acc.add_partial(copy_and_checksum(&mut seg[hl..hl + a.len()], a));
    if !b.is_empty() {
        // The ring wrapped inside this segment (rarely: most segments are one piece).
        acc.add_partial(copy_and_checksum(&mut seg[hl + a.len()..hl + plen], b));
    }
    tx.repr
        .emit(
            seg,
            h.src_ip,
            h.dst_ip,
            plen,
            TxChecksum::Payload(acc.partial()),
        )
        .ok()?;
    Some(total)
}
