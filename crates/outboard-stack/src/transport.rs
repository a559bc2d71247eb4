//! UDP and TCP receive: checksum, demultiplexing to a socket or the
//! connection table, and the errors or resets owed when nothing matches.

use crate::input::Net;
use crate::Stack;
use outboard_tcp::FourTuple;
use outboard_time::Instant;
use outboard_wire::checksum::copy_and_checksum;
use outboard_wire::tcp::TcpPacket;
use outboard_wire::udp::{UdpPacket, UdpRepr};
use outboard_wire::{PartialSum, RxChecksum, TcpRepr};
use std::net::SocketAddr;

impl Stack {
    pub(crate) fn udp_input(&mut self, now: Instant, ip: Net<'_>, payload: &[u8]) {
        let (src, dst) = (ip.src(), ip.dst());
        // The checksum is verified during the copy into the socket queue
        // (one pass over the payload), or on its own when there is no copy.
        let parsed = UdpPacket::new_checked(payload)
            .and_then(|p| UdpRepr::parse(&p, src, dst, RxChecksum::Skip).map(|r| (r, p)));
        let Ok((repr, pkt)) = parsed else {
            self.stats.drops_malformed += 1;
            return;
        };
        let data = pkt.payload();
        let trusted = self.rx_csum_trusted;
        // RFC 8200 §8.1: over IPv6 the UDP checksum is mandatory; a zero one
        // (IPv4's "no checksum") is discarded.
        if matches!(ip, Net::V6(_)) && pkt.checksum() == 0 && !trusted {
            self.stats.drops_checksum += 1;
            return;
        }
        match self.udp.has_room(repr.dst_port, dst, data.len()) {
            Some(true) => {
                let mut copy = vec![0u8; data.len()];
                let sum = copy_and_checksum(&mut copy, data);
                if !trusted && !pkt.verify_checksum_with(src, dst, sum) {
                    self.stats.drops_checksum += 1;
                    return;
                }
                self.stats.udp_datagrams_in += 1;
                let from = SocketAddr::new(src, repr.src_port);
                self.udp.deliver(SocketAddr::new(dst, repr.dst_port), from, copy, &mut self.stats);
            }
            room => {
                if !trusted && !pkt.verify_checksum(src, dst) {
                    self.stats.drops_checksum += 1;
                    return;
                }
                self.stats.udp_datagrams_in += 1;
                if room == Some(false) {
                    self.stats.drops_udp_queue_full += 1;
                } else {
                    self.stats.udp_no_port += 1;
                    // RFC 1122 §4.1.3.1, RFC 4443 §3.1: port unreachable
                    // (not for broadcasts or multicasts, checked there).
                    self.send_port_unreachable(now, ip, payload);
                }
            }
        }
    }

    /// A TCP segment: checksum, then the connection table. In the common
    /// case the checksum is summed while the payload is copied into its
    /// connection's receive ring (one pass over it, DESIGN.md §7), and the
    /// segment reaches the connection only once that sum verifies; else
    /// it is verified on its own first and copied afterwards.
    pub(crate) fn tcp_segment_input(&mut self, now: Instant, ip: Net<'_>, payload: &[u8]) {
        let (src, dst) = (ip.src(), ip.dst());
        if ip.is_to_group() {
            // RFC 9293 §3.10.7.2 / RFC 1122 §4.2.3.10: TCP is unicast only.
            self.stats.drops_not_for_us += 1;
            return;
        }
        // A checksum the link vouches for (receive_frame_offloaded) is not summed again.
        let trusted = self.rx_csum_trusted;
        let parsed = TcpPacket::new_checked(payload)
            .and_then(|p| TcpRepr::parse(&p, src, dst, RxChecksum::Skip).map(|r| (r, p)));
        let (repr, pkt) = match parsed {
            Ok(x) => x,
            Err(_) => {
                // A corrupted header is counted as corruption, not as malformed
                // (as `TcpRepr::parse` with `Verify` would).
                let corrupt = !trusted
                    && TcpPacket::new_checked(payload).is_ok_and(|p| !p.verify_checksum(src, dst));
                if corrupt {
                    self.stats.drops_checksum += 1;
                } else {
                    self.stats.drops_malformed += 1;
                }
                return;
            }
        };
        let tuple = FourTuple::new(SocketAddr::new(dst, repr.dst_port), SocketAddr::new(src, repr.src_port));
        let data = pkt.payload();
        let reply = if trusted {
            self.stats.tcp_segments_in += 1;
            if ip.ce() {
                self.tcp.ce_input(&tuple, &mut self.stats);
            }
            self.tcp
                .segment_input(now, &tuple, (&repr, data), (None, None), &mut self.stats)
        } else {
            // The payload summed as it is copied (when it can be), the
            // segment verified with that sum: `TcpTable::fused_input`.
            let verify = |sum: Option<PartialSum>| match sum {
                Some(sum) => pkt.verify_checksum_with(src, dst, sum),
                None => pkt.verify_checksum(src, dst),
            };
            self.tcp
                .fused_input(now, &tuple, (&repr, data), ip.ce(), verify, &mut self.stats)
        };
        if let Some(reply) = reply {
            self.send_tcp_control(now, dst, src, &reply);
        }
    }
}
