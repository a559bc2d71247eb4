//! The stack's counters: one per event of interest and one per drop reason
//! (FreeBSD style), so `outboard stat` can say why every dropped frame died.

/// Counters, one per event and one per drop reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackStats {
    // --- link ---
    pub frames_in: u64,
    pub frames_out: u64,
    /// Any frame or packet whose headers did not parse or were inconsistent.
    pub drops_malformed: u64,
    /// IPv4 header, ICMP, UDP or TCP checksum mismatch.
    pub drops_checksum: u64,
    /// Frame or packet addressed to another host (MAC or IP).
    pub drops_not_for_us: u64,
    /// Ethertype other than IPv4 and ARP.
    pub drops_unknown_ethertype: u64,
    /// A frame the caller's buffer could not hold (poll_transmit with a short buffer).
    pub drops_tx_buffer_too_small: u64,
    /// Control/UDP frames dropped because the transmit queue was full.
    pub drops_tx_queue_full: u64,

    // --- ARP ---
    pub arp_requests_in: u64,
    pub arp_replies_in: u64,
    pub arp_requests_out: u64,
    pub arp_replies_out: u64,
    /// Entries dropped to make room (cache at its cap).
    pub arp_evictions: u64,
    /// Next hops given up on after the last request went unanswered.
    pub arp_resolution_failures: u64,
    /// Frames dropped because their next hop did not resolve.
    pub drops_arp_unresolved: u64,
    /// Frames dropped because the per-next-hop pending queue was full.
    pub drops_arp_pending_full: u64,

    // --- IPv4 ---
    pub ip_packets_in: u64,
    pub ip_packets_out: u64,
    /// IP options are accepted and skipped; counted for visibility.
    pub ip_options_seen: u64,
    /// Protocol other than ICMP, UDP and TCP (answered with protocol unreachable).
    pub drops_unknown_protocol: u64,
    /// Source address that can't be a host (broadcast, multicast, ours, zero).
    pub drops_bad_source: u64,
    /// No route: off-link destination and no gateway.
    pub drops_no_route: u64,
    pub fragments_in: u64,
    pub fragments_out: u64,
    pub reassembled: u64,
    /// Datagrams dropped because two fragments overlapped (RFC 5722-style policy).
    pub reassembly_overlaps: u64,
    /// Exact duplicate fragments ignored.
    pub reassembly_duplicates: u64,
    /// Datagrams dropped incomplete when their timer ran out (RFC 791).
    pub reassembly_timeouts: u64,
    /// Datagrams evicted to keep reassembly under its memory cap.
    pub reassembly_evictions: u64,
    /// Fragments with inconsistent lengths (beyond 64 KiB, beyond the known end, odd sizes).
    pub reassembly_bad_fragments: u64,

    // --- ICMP ---
    pub icmp_in: u64,
    pub icmp_out: u64,
    pub icmp_echo_requests_in: u64,
    pub icmp_echo_replies_out: u64,
    pub icmp_echo_replies_in: u64,
    pub icmp_dest_unreachable_in: u64,
    pub icmp_dest_unreachable_out: u64,
    pub icmp_time_exceeded_in: u64,
    pub icmp_time_exceeded_out: u64,
    /// ICMP errors whose quoted packet matched a connection or socket.
    pub icmp_errors_delivered: u64,
    /// ICMP errors quoting a packet we can't attribute (or with a bad TCP sequence).
    pub icmp_errors_unmatched: u64,
    /// ICMP errors not sent because of the rate limit (RFC 1812 §4.3.2.8).
    pub icmp_rate_limited: u64,
    /// ICMP types we do not handle.
    pub icmp_ignored: u64,

    // --- UDP ---
    pub udp_datagrams_in: u64,
    pub udp_datagrams_out: u64,
    /// Datagrams to a port with no socket (answered with port unreachable).
    pub udp_no_port: u64,
    /// Datagrams dropped because the socket's receive queue was full.
    pub drops_udp_queue_full: u64,

    // --- TCP ---
    pub tcp_segments_in: u64,
    pub tcp_segments_out: u64,
    /// RSTs sent for segments matching no connection or listener (RFC 9293 §3.10.7.1).
    pub tcp_resets_out: u64,
    /// Segments that matched nothing and got no answer (they were RSTs themselves).
    pub tcp_no_match: u64,
    pub tcp_connections_opened: u64,
    pub tcp_connections_accepted: u64,
    pub tcp_connections_freed: u64,
    /// Embryonic connections created from SYNs while the SYN queue had room.
    pub tcp_syn_queue_adds: u64,
    pub tcp_syncookies_sent: u64,
    pub tcp_syncookies_accepted: u64,
    /// ACKs to a listener carrying a cookie that did not verify.
    pub tcp_syncookies_failed: u64,
    /// Handshake-completing segments dropped because the accept queue was full.
    pub drops_tcp_accept_queue_full: u64,
    /// Segments dropped at the listener (e.g. a bare ACK while no cookies were out,
    /// a SYN with ACK, a SYN for a broadcast address).
    pub drops_tcp_listener: u64,
}
