//! The stack's counters: one per event of interest and one per drop reason
//! (FreeBSD style), so `outboard stat` can say why every dropped frame died.

/// Defines the counters struct and a name/value iterator over it from one list,
/// so a new counter can't be forgotten by `outboard stat`.
macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident, )*) => {
        /// Counters, one per event and one per drop reason.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct StackStats {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl StackStats {
            /// Every counter as (name, value), in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($name), self.$name), )*].into_iter()
            }
        }
    };
}

counters! {
    // --- link ---
    frames_in,
    frames_out,
    /// Any frame or packet whose headers did not parse or were inconsistent.
    drops_malformed,
    /// IPv4 header, ICMP, UDP or TCP checksum mismatch.
    drops_checksum,
    /// Frame or packet addressed to another host (MAC or IP).
    drops_not_for_us,
    /// Ethertype other than IPv4 and ARP.
    drops_unknown_ethertype,
    /// A frame the caller's buffer could not hold (poll_transmit with a short buffer).
    drops_tx_buffer_too_small,
    /// Control/UDP frames dropped because the transmit queue was full.
    drops_tx_queue_full,

    // --- ARP ---
    arp_requests_in,
    arp_replies_in,
    arp_requests_out,
    arp_replies_out,
    /// Entries dropped to make room (cache at its cap).
    arp_evictions,
    /// Next hops given up on after the last request went unanswered.
    arp_resolution_failures,
    /// Frames dropped because their next hop did not resolve.
    drops_arp_unresolved,
    /// Frames dropped because the per-next-hop pending queue was full.
    drops_arp_pending_full,

    // --- IPv4 ---
    ip_packets_in,
    ip_packets_out,
    /// IP options are accepted and skipped; counted for visibility.
    ip_options_seen,
    /// Protocol other than ICMP, UDP and TCP (answered with protocol unreachable).
    drops_unknown_protocol,
    /// Source address that can't be a host (broadcast, multicast, ours, zero).
    drops_bad_source,
    /// No route: off-link destination and no gateway.
    drops_no_route,
    fragments_in,
    fragments_out,
    reassembled,
    /// Datagrams dropped because two fragments overlapped (RFC 5722-style policy).
    reassembly_overlaps,
    /// Exact duplicate fragments ignored.
    reassembly_duplicates,
    /// Datagrams dropped incomplete when their timer ran out (RFC 791).
    reassembly_timeouts,
    /// Datagrams evicted to keep reassembly under its memory cap.
    reassembly_evictions,
    /// Fragments with inconsistent lengths (beyond 64 KiB, beyond the known end, odd sizes).
    reassembly_bad_fragments,

    // --- IPv6 ---
    ipv6_packets_in,
    ipv6_packets_out,
    /// An extension header to discard (RFC 8200 §4: an option or header we
    /// must not skip, a Routing header with segments left, a Hop-by-Hop out of place).
    drops_ipv6_extension_header,
    icmpv6_in,
    icmpv6_out,
    icmpv6_packet_too_big_in,
    icmpv6_param_problem_in,
    icmpv6_errors_out,
    ndisc_solicits_in,
    ndisc_solicits_out,
    ndisc_adverts_in,
    ndisc_adverts_out,
    ndisc_router_adverts_in,
    ndisc_router_solicits_out,
    /// Neighbours that never answered our solicitations (IPv6's ARP failures).
    ndisc_resolution_failures,
    /// One of our addresses was found in use by another node during
    /// duplicate-address detection (RFC 4862 §5.4.5): it is not used.
    ipv6_dad_failures,
    /// Another node advertised an address we already use.
    ipv6_address_conflicts,

    // --- ICMP ---
    icmp_in,
    icmp_out,
    icmp_echo_requests_in,
    icmp_echo_replies_out,
    icmp_echo_replies_in,
    icmp_dest_unreachable_in,
    icmp_dest_unreachable_out,
    icmp_time_exceeded_in,
    icmp_time_exceeded_out,
    /// ICMP errors whose quoted packet matched a connection or socket.
    icmp_errors_delivered,
    /// ICMP errors quoting a packet we can't attribute, or a TCP sequence number
    /// the connection has not in flight (RFC 5927 §4.1; Linux's OutOfWindowIcmps),
    /// or too little of the TCP header to check it.
    icmp_errors_unmatched,
    /// ICMP errors not sent because of the rate limit (RFC 1812 §4.3.2.8).
    icmp_rate_limited,
    /// ICMP types we do not handle.
    icmp_ignored,

    // --- UDP ---
    udp_datagrams_in,
    udp_datagrams_out,
    /// Datagrams to a port with no socket (answered with port unreachable).
    udp_no_port,
    /// Datagrams dropped because the socket's receive queue was full.
    drops_udp_queue_full,

    // --- TCP ---
    tcp_segments_in,
    tcp_segments_out,
    /// RSTs sent for segments matching no connection or listener (RFC 9293 §3.10.7.1).
    tcp_resets_out,
    /// Segments that matched nothing and got no answer (they were RSTs themselves).
    tcp_no_match,
    tcp_connections_opened,
    tcp_connections_accepted,
    tcp_connections_freed,
    /// Embryonic connections created from SYNs while the SYN queue had room.
    tcp_syn_queue_adds,
    tcp_syncookies_sent,
    tcp_syncookies_accepted,
    /// ACKs to a listener carrying a cookie that did not verify.
    tcp_syncookies_failed,
    /// RFC 7413 server: SYNs whose data was accepted with a valid Fast Open
    /// cookie (Linux's TCPFastOpenPassive).
    tcp_fastopen_passive,
    /// Server: SYNs with an invalid Fast Open cookie; their data was dropped
    /// (Linux's TCPFastOpenPassiveFail).
    tcp_fastopen_passive_fail,
    /// Server: SYNs asking for a Fast Open cookie (Linux's TCPFastOpenCookieReqd).
    tcp_fastopen_cookie_requests,
    /// Server: Fast Open SYNs treated as ordinary ones because the listener's
    /// Fast Open queue was full (Linux's TCPFastOpenListenOverflow).
    tcp_fastopen_listen_overflow,
    /// Client: SYN data acknowledged by the SYN-ACK (Linux's TCPFastOpenActive).
    tcp_fastopen_active,
    /// Client: SYN data the SYN-ACK did not acknowledge, resent after the
    /// handshake (Linux's TCPFastOpenActiveFail).
    tcp_fastopen_active_fail,
    /// Client: cookies received in SYN-ACKs and cached.
    tcp_fastopen_cookies_learned,
    /// Client: SYNs with data presumed lost (timed out, then a SYN-ACK without
    /// cookie or data acknowledgment); twice in a row turns Fast Open off
    /// for the destination for a while (RFC 7413 §4.1.3).
    tcp_fastopen_syn_loss,
    /// Client: Fast Open connects sent as plain SYNs because the destination
    /// is marked as losing SYNs with data.
    tcp_fastopen_disabled,
    /// Handshake-completing segments dropped because the accept queue was full.
    drops_tcp_accept_queue_full,
    /// Segments dropped at the listener (e.g. a bare ACK while no cookies were out,
    /// a SYN with ACK, a SYN for a broadcast address, a SYN+FIN, a RST, no flags at all).
    drops_tcp_listener,
    /// TCP segments that arrived marked "congestion experienced" (RFC 3168).
    tcp_ce_marks_in,
    /// Payload bytes copied into connections' receive rings (each copy; a
    /// fused copy of a segment that then failed its checksum included).
    tcp_rx_payload_copied,
    /// Segments with payload whose checksum was summed while the payload was
    /// copied into the receive ring (one pass; DESIGN.md §7).
    tcp_rx_fused_segments,
    /// Segments with payload verified in a pass of their own before being
    /// copied (out of order over parked bytes, trimmed, not for an
    /// established connection with room). Links that vouch for checksums
    /// count in neither.
    tcp_rx_unfused_segments,
    /// Payload bytes copied from send rings into frames, retransmissions
    /// included (a frame parked while ARP resolves is copied once more,
    /// whole, when it leaves the queue: not counted).
    tcp_tx_payload_copied,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iter_names_every_counter_once() {
        let s = StackStats {
            drops_checksum: 7,
            ..StackStats::default()
        };
        let all: Vec<_> = s.iter().collect();
        assert!(all.len() > 50, "{} counters", all.len());
        assert!(all.contains(&("drops_checksum", 7)));
        let mut names: Vec<_> = all.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
