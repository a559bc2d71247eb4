//! The transmit path: framing, next-hop resolution through ARP, the bounded
//! transmit queue for control and UDP frames, IPv4 fragmentation of large
//! UDP datagrams, and TCP segments built straight into the caller's buffer.
//!
//! Order of service in `poll_transmit`: ARP requests, then queued frames,
//! then TCP connections round-robin. A TCP segment's payload is copied once,
//! from the connection's send queue into the frame, with its checksum summed
//! during that copy (DESIGN.md §7); only when the next hop is still resolving
//! is the finished frame copied again into the ARP wait queue.

use crate::arp::QueueOutcome;
use crate::tcp_table::remote_ipv4;
use crate::{Stack, StackError, TxMeta};
use outboard_tcp::Transmit;
use outboard_time::Instant;
use outboard_wire::arp::{ArpOperation, ArpRepr};
use outboard_wire::checksum::{copy_and_checksum, Accumulator};
use outboard_wire::ethernet::{EtherType, EthernetAddress, EthernetRepr, HEADER_LEN as ETH_LEN};
use outboard_wire::ipv4::{IpProtocol, Ipv4Repr, HEADER_LEN as IP_LEN};
use outboard_wire::udp::{UdpRepr, HEADER_LEN as UDP_LEN};
use outboard_wire::{TcpRepr, TxChecksum};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Frames held in the transmit queue at most.
pub(crate) const TXQ_CAP: usize = 1024;
/// RFC 1122 §3.2.1.7: TTL for datagrams we originate (Linux's default).
pub(crate) const DEFAULT_TTL: u8 = 64;
/// The largest UDP payload an IPv4 datagram can carry.
pub const UDP_MAX_PAYLOAD: usize = 65535 - IP_LEN - UDP_LEN;

impl Stack {
    pub(crate) fn next_frame(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.next_frame_meta(now, buf, &mut TxMeta::default())
    }

    /// The next frame; `meta` is set when it is a TSO segment (only when
    /// `self.tx_offload` allows one).
    pub(crate) fn next_frame_meta(&mut self, now: Instant, buf: &mut [u8], meta: &mut TxMeta) -> Option<usize> {
        if let Some(n) = self.next_arp_request(buf) {
            return Some(n);
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
        self.next_arp_request(buf)
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
        self.arp_wait(now, hop, frame)
    }

    fn arp_wait(&mut self, now: Instant, hop: Ipv4Addr, frame: Vec<u8>) -> bool {
        match self.arp.queue(now, hop, frame, &mut self.stats) {
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
        dst: SocketAddrV4,
        data: &[u8],
    ) -> Result<(), StackError> {
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

    /// Sends a TCP control segment that belongs to no connection (RST, cookie SYN-ACK).
    pub(crate) fn send_tcp_control(&mut self, now: Instant, remote: Ipv4Addr, repr: &TcpRepr) {
        let len = repr.header_len();
        let mut frame = self.ip_frame(remote, IpProtocol::Tcp, len, true);
        let at = ETH_LEN + IP_LEN;
        if repr
            .emit(
                &mut frame[at..],
                self.cfg.addr,
                remote,
                0,
                TxChecksum::Compute,
            )
            .is_err()
        {
            return;
        }
        if repr.flags.rst() {
            self.stats.tcp_resets_out += 1;
        }
        self.stats.tcp_segments_out += 1;
        self.route_frame(now, remote, frame);
    }

    /// Serves the ready connections until one yields a frame for `buf`.
    fn tcp_next_frame(&mut self, now: Instant, buf: &mut [u8], meta: &mut TxMeta) -> Option<usize> {
        // TSO only where the link takes it and the frame goes out now (a
        // frame waiting for ARP is sent later without its meta).
        let tso_room = buf.len().saturating_sub(ETH_LEN + IP_LEN + TCP_MAX_HEADER);
        let tso_max = if self.tx_offload { self.cfg.offloads.tso_max.min(tso_room) } else { 0 };
        while let Some(id) = self.tcp.next_ready() {
            // Invariant: next_ready only returns ids present in the table.
            let entry = self
                .tcp
                .conns
                .get_mut(&id)
                .expect("ready connection exists");
            let Some(remote) = remote_ipv4(&entry.conn.tuple()) else {
                // Unreachable by construction (`v4_tuple`); IPv4 output can't carry it.
                self.stats.drops_tcp_not_ipv4 += 1;
                if self.tcp.done_ready(id).is_some() {
                    self.stats.tcp_connections_freed += 1;
                }
                continue;
            };
            let hop = self.route.next_hop(remote);
            let mac = hop.and_then(|h| self.arp.lookup(now, h));
            entry.conn.set_tso_max(if mac.is_some() { tso_max } else { 0 });
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
                src_ip: self.cfg.addr,
                dst_ip: remote,
                ident,
            };
            let Some(hop) = hop else {
                self.stats.drops_no_route += 1;
                continue;
            };
            match mac {
                Some(mac) => match emit_tcp_frame(buf, &hdr, mac, &tx, meta) {
                    Some(n) => {
                        self.stats.tcp_tx_payload_copied += tx.payload_len() as u64;
                        self.tcp.rotate_ready();
                        return Some(n);
                    }
                    None => self.stats.drops_tx_buffer_too_small += 1,
                },
                None => {
                    let mut frame =
                        vec![0u8; ETH_LEN + IP_LEN + tx.repr.buffer_len(tx.payload_len())];
                    let built =
                        emit_tcp_frame(&mut frame, &hdr, [0; 6], &tx, &mut TxMeta::default());
                    if built.is_some() {
                        self.stats.tcp_tx_payload_copied += tx.payload_len() as u64;
                    }
                    let queued = built.is_some() && self.arp_wait(now, hop, frame);
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
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    ident: u16,
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
    let total = ETH_LEN + IP_LEN + tcp_len;
    let buf = buf.get_mut(..total)?;
    let eth = EthernetRepr {
        src_addr: EthernetAddress(h.src_mac),
        dst_addr: EthernetAddress(dst_mac),
        ethertype: EtherType::Ipv4,
    };
    eth.emit(buf).ok()?;
    let ip = Ipv4Repr {
        src_addr: h.src_ip,
        dst_addr: h.dst_ip,
        protocol: IpProtocol::Tcp,
        payload_len: tcp_len,
        ttl: DEFAULT_TTL,
        dscp_ecn: 0,
        ident: h.ident,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    ip.emit(&mut buf[ETH_LEN..]).ok()?;
    let seg = &mut buf[ETH_LEN + IP_LEN..];
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
        acc.add_ipv4_pseudo_header(h.src_ip, h.dst_ip, 6, u16::try_from(tcp_len).ok()?);
        let pseudo = !acc.finish();
        seg[TCP_CHECKSUM_AT..TCP_CHECKSUM_AT + 2].copy_from_slice(&pseudo.to_be_bytes());
        *meta = TxMeta {
            gso_size: u16::try_from(tx.gso_size).ok()?,
            hdr_len: (ETH_LEN + IP_LEN + hl) as u16,
            csum: Some(((ETH_LEN + IP_LEN) as u16, TCP_CHECKSUM_AT as u16)),
        };
        return Some(total);
    }
    let mut acc = Accumulator::new();
    acc.add_partial(copy_and_checksum(&mut seg[hl..hl + a.len()], a));
    acc.add_partial(copy_and_checksum(&mut seg[hl + a.len()..hl + plen], b));
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
