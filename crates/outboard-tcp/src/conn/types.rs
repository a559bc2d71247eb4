//! The connection's public value types: addresses, states, events, errors,
//! what `poll_transmit` hands out, and the counters of `stats()`.

use outboard_wire::TcpRepr;
use std::net::SocketAddr;

/// The connection's addresses, from our side. Both ends are of one family:
/// a tuple mixing IPv4 and IPv6 is a programming error (`new` checks it in
/// debug builds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FourTuple {
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

impl FourTuple {
    pub fn new(local: SocketAddr, remote: SocketAddr) -> FourTuple {
        debug_assert_eq!(local.is_ipv4(), remote.is_ipv4(), "tuple mixes address families: {local} {remote}");
        FourTuple { local, remote }
    }

    /// The MSS that fits an MTU: minus the fixed IP header (IPv4 20 bytes,
    /// IPv6 40) and TCP header (20), RFC 9293 §3.7.1.
    pub fn mss_for_mtu(&self, mtu: u16) -> usize {
        let ip_header = if self.local.is_ipv4() { 20 } else { 40 };
        usize::from(mtu).saturating_sub(ip_header + 20)
    }
}

/// RFC 9293 §3.3.2 states (LISTEN lives in `table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum State {
    Closed,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

/// What the application should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// New bytes can be read.
    Readable,
    /// Send buffer space opened up.
    Writable,
    /// The peer sent FIN: reads return end-of-stream once drained.
    PeerClosed,
    /// Both directions closed normally (the connection may still sit in TIME-WAIT).
    Closed,
    /// The peer reset the connection (ECONNRESET, or ECONNREFUSED in SYN-SENT).
    Reset,
    /// Retransmissions or keepalives exhausted (ETIMEDOUT).
    TimedOut,
}

/// ICMP errors that concern a connection (RFC 1122 §4.2.3.9, RFC 1191).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum IcmpError {
    /// Fragmentation needed with the next-hop MTU: lowers the MSS.
    FragmentationNeeded { mtu: u16 },
    /// Destination unreachable (soft error unless in SYN-SENT with a hard code).
    Unreachable { code: u8 },
    TimeExceeded,
}

/// A segment to send: header plus payload borrowed from the send queue in at
/// most two pieces, so the caller copies it once into the frame with the checksum.
#[derive(Debug)]
pub struct Transmit<'a> {
    pub repr: TcpRepr,
    pub payload: [&'a [u8]; 2],
    /// A TSO segment (payload longer than one segment, see
    /// `Config::tso_max_bytes`): the payload bytes each piece the link cuts
    /// it into carries (the send MSS less this segment's options). 0 for an
    /// ordinary segment.
    pub gso_size: usize,
    /// Send with ECT(0) in the IP header (RFC 3168: new data on an ECN connection).
    pub ect: bool,
}

impl Transmit<'_> {
    pub fn payload_len(&self) -> usize {
        self.payload[0].len() + self.payload[1].len()
    }
}

/// Counters readable from outside (`outboard stat`, TCP_INFO).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ConnStats {
    pub segments_in: u64,
    pub segments_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub retransmits: u64,
    pub retransmitted_bytes: u64,
    pub rto_events: u64,
    pub fast_retransmits: u64,
    pub srtt_us: u64,
    pub rttvar_us: u64,
    pub rto_us: u64,
    pub cwnd: usize,
    pub ssthresh: usize,
    pub sacked_bytes: usize,
    pub bytes_in_flight: usize,
    pub send_mss: usize,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub send_queue: usize,
    pub recv_queue: usize,
    pub ooo_ranges: usize,
    pub dup_segments_in: u64,
    pub dropped_segments: u64,
    pub challenge_acks: u64,
    /// Segments sent as TSO segments (longer than one MSS, cut by the link).
    pub tso_segments_out: u64,
    /// Retransmissions proven unnecessary: by RFC 3522 Eifel (the ACK for a
    /// fast-retransmitted segment echoes the original's TSval) or by an RFC
    /// 2883 D-SACK of a retransmitted range.
    pub spurious_retransmits: u64,
    /// Congestion-window reductions undone after a spurious fast retransmit (RFC 4015 §3.2).
    pub undo_events: u64,
    /// The current duplicate threshold in segments (3, raised by observed
    /// reordering; Linux's `tcpi_reordering`).
    pub reordering: u32,
    /// Bytes the connection holds now (`Connection::memory_in_use`), like `ss -m`.
    pub memory: usize,
    /// Payload bytes copied into the receive ring: by `handle_segment`, or
    /// earlier by `prefill_payload` for `handle_segment_prefilled` (each copy
    /// counted, so a segment copied twice counts twice).
    pub rx_copied_bytes: u64,
    /// RFC 3168 ECN negotiated, and the window reductions made for ECE.
    pub ecn: bool,
    pub ecn_reductions: u64,
    /// RFC 8985 §7 tail loss probes sent.
    pub tlp_probes: u64,
    /// Probes that repaired a loss (RFC 8985 §7.4.2; the window was reduced).
    pub tlp_recoveries: u64,
    /// Times RACK (RFC 8985 §6.2) marked more segments lost.
    pub rack_losses: u64,
    /// Times repeated timeouts lowered the segment size (RFC 4821 black hole).
    pub blackhole_events: u64,
    /// Segments taken by header prediction, the receive fast path (`predict`;
    /// Linux's `TCPHPHits`).
    #[serde(default)]
    pub predicted_segments: u64,
}

/// Errors from the application-side calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Error {
    /// Nothing to read / no room to write right now.
    WouldBlock,
    /// Writing after shutdown_write/close (EPIPE).
    Closed,
    /// The connection was reset (ECONNRESET / ECONNREFUSED).
    Reset,
    TimedOut,
    /// Not yet established.
    NotConnected,
}

#[cfg(test)]
mod tests {
    use super::FourTuple;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

    #[test]
    fn rfc9293_mss_for_mtu_subtracts_the_family_ip_header() {
        let v4 = FourTuple::new(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 1), SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 2));
        let v6 = FourTuple::new(SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 1), SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 2));
        assert_eq!(v4.mss_for_mtu(1500), 1460);
        assert_eq!(v6.mss_for_mtu(1500), 1440);
        assert_eq!(v6.mss_for_mtu(50), 0);
    }
}
