//! ICMPv4 (RFC 792, RFC 1122 §3.2.2): echo replies, errors we send (port
//! and protocol unreachable, reassembly time exceeded; rate limited), and
//! errors we receive, delivered to the TCP connection or UDP socket whose
//! packet they quote.

use crate::input::IpMeta;
use crate::{Stack, StackError};
use outboard_tcp::{FourTuple, IcmpError};
use outboard_time::Instant;
use outboard_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr, TimeExceededCode, UnreachableCode};
use outboard_wire::ipv4::IpProtocol;
use outboard_wire::{Error, RxChecksum, SeqNumber};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

/// ICMP errors sent per second at most, and the burst allowed.
pub(crate) const ERROR_RATE_PER_SEC: u32 = 1000;
pub(crate) const ERROR_BURST: u32 = 50;
/// RFC 1812 §4.3.2.3: quote as much of the datagram as keeps the error within 576 bytes.
const MAX_QUOTE: usize = 576 - 20 - 8;
/// Echo replies kept for `poll_echo_reply`.
const ECHO_REPLIES_KEPT: usize = 64;
/// Lowest path MTU we believe. RFC 1191 allows 68, but an unauthenticated
/// ICMP message could then shrink a connection to 28-byte segments (RFC 5927
/// §7.3), so like Linux (min_pmtu) we take nothing below 552. A router that
/// predates RFC 1191 sends 0, which lands here too.
const MIN_PMTU: u16 = 552;

/// An echo reply that came back (see `Stack::icmp_echo_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    pub from: IpAddr,
    pub ident: u16,
    pub seq_no: u16,
    pub data_len: usize,
}

/// The errors this stack originates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Unreachable(UnreachableCode),
    ReassemblyTimeExceeded,
}

impl Stack {
    pub(crate) fn icmp_input(&mut self, now: Instant, ip: IpMeta<'_>, payload: &[u8]) {
        self.stats.icmp_in += 1;
        let repr = match Icmpv4Packet::new_checked(payload)
            .and_then(|p| Icmpv4Repr::parse(&p, RxChecksum::Verify))
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
        let src = ip.repr.src_addr;
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                self.stats.icmp_echo_requests_in += 1;
                if ip.broadcast {
                    // RFC 1122 §3.2.2.6 allows ignoring broadcast echo; doing
                    // so keeps us out of smurf amplification.
                    self.stats.icmp_ignored += 1;
                    return;
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if self.send_icmp(now, src, &reply) {
                    self.stats.icmp_echo_replies_out += 1;
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.stats.icmp_echo_replies_in += 1;
                self.keep_echo_reply(src.into(), ident, seq_no, data.len());
            }
            Icmpv4Repr::DstUnreachable {
                code, next_hop_mtu, ..
            } => {
                self.stats.icmp_dest_unreachable_in += 1;
                let err = if code == UnreachableCode::FRAG_NEEDED {
                    IcmpError::FragmentationNeeded {
                        mtu: next_hop_mtu.max(MIN_PMTU),
                    }
                } else {
                    IcmpError::Unreachable { code: code.0 }
                };
                self.icmp_error_input(now, &repr, err);
            }
            Icmpv4Repr::TimeExceeded { .. } => {
                self.stats.icmp_time_exceeded_in += 1;
                self.icmp_error_input(now, &repr, IcmpError::TimeExceeded);
            }
        }
    }

    /// Keeps an echo reply for `poll_echo_reply` (the latest ones only).
    pub(crate) fn keep_echo_reply(&mut self, from: IpAddr, ident: u16, seq_no: u16, data_len: usize) {
        if self.echo_replies.len() >= ECHO_REPLIES_KEPT {
            self.echo_replies.pop_front();
        }
        self.echo_replies.push_back(EchoReply { from, ident, seq_no, data_len });
    }

    /// Finds the connection or socket that sent the quoted packet.
    fn icmp_error_input(&mut self, now: Instant, repr: &Icmpv4Repr<'_>, err: IcmpError) {
        let Some((quoted, l4)) = repr.quoted() else {
            self.stats.drops_malformed += 1;
            return;
        };
        // Only packets we sent, and only a first fragment carries the ports.
        if quoted.src_addr != self.cfg.addr || quoted.frag_offset != 0 || l4.len() < 4 {
            self.stats.icmp_errors_unmatched += 1;
            return;
        }
        // The ports are the first four bytes of both TCP and UDP headers.
        let sport = u16::from_be_bytes([l4[0], l4[1]]);
        let dport = u16::from_be_bytes([l4[2], l4[3]]);
        let tuple = FourTuple::new(
            SocketAddr::V4(SocketAddrV4::new(quoted.src_addr, sport)),
            SocketAddr::V4(SocketAddrV4::new(quoted.dst_addr, dport)),
        );
        let delivered = match quoted.protocol {
            // Bytes 4..8 of the quoted TCP header: the sequence number, which
            // RFC 5927 §4.1 checks (RFC 792 quotes at least 8 bytes; an error
            // quoting fewer cannot be checked and is not believed, as Linux's
            // `icmp_unreach` drops it).
            IpProtocol::Tcp => match l4.get(4..8) {
                Some(b) => {
                    let seq = SeqNumber(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    self.tcp.icmp_input(now, tuple, seq, err)
                }
                None => false,
            },
            // RFC 1122 §4.1.3.3: UDP passes port/protocol unreachable up
            // (ECONNREFUSED); the soft errors are not reported.
            IpProtocol::Udp => match err {
                IcmpError::Unreachable { code } if UnreachableCode(code).is_hard() => {
                    self.udp.set_error(tuple.local, StackError::Refused)
                }
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

    /// Destination unreachable for a datagram we received, unless RFC 1122
    /// §3.2.2 forbids it or the rate limit says no.
    pub(crate) fn send_unreachable(
        &mut self,
        now: Instant,
        ip: IpMeta<'_>,
        payload: &[u8],
        code: UnreachableCode,
    ) {
        // Never about an ICMP error (RFC 1122 §3.2.2): only echo types may be answered.
        if ip.repr.protocol == IpProtocol::Icmp {
            let is_query = payload
                .first()
                .is_some_and(|t| matches!(*t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18));
            if !is_query {
                return;
            }
        }
        if ip.broadcast || ip.repr.frag_offset != 0 {
            return;
        }
        let mut quote = Vec::with_capacity(MAX_QUOTE);
        quote.extend_from_slice(&ip.header[..ip.header.len().min(MAX_QUOTE)]);
        let room = MAX_QUOTE - quote.len();
        quote.extend_from_slice(&payload[..payload.len().min(room)]);
        self.send_icmp_error(now, ip.repr.src_addr, ErrorKind::Unreachable(code), &quote);
    }

    /// Sends an error quoting `quote` (the offending header and payload start).
    pub(crate) fn send_icmp_error(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        kind: ErrorKind,
        quote: &[u8],
    ) {
        if !self.route.valid_source(dst) {
            return;
        }
        if !self.icmp_limit.allow(now) {
            self.stats.icmp_rate_limited += 1;
            return;
        }
        let repr = match kind {
            ErrorKind::Unreachable(code) => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: 0,
                invoking: quote,
            },
            ErrorKind::ReassemblyTimeExceeded => Icmpv4Repr::TimeExceeded {
                code: TimeExceededCode::REASSEMBLY,
                invoking: quote,
            },
        };
        if self.send_icmp(now, dst, &repr) {
            match kind {
                ErrorKind::Unreachable(_) => self.stats.icmp_dest_unreachable_out += 1,
                ErrorKind::ReassemblyTimeExceeded => self.stats.icmp_time_exceeded_out += 1,
            }
        }
    }

    /// Builds and routes one ICMP message. False if it could not be queued.
    fn send_icmp(&mut self, now: Instant, dst: Ipv4Addr, repr: &Icmpv4Repr<'_>) -> bool {
        let len = repr.buffer_len();
        let mut frame = self.ip_frame(dst, IpProtocol::Icmp, len, false);
        let at = frame.len() - len;
        if repr.emit(&mut frame[at..]).is_err() {
            return false;
        }
        self.stats.icmp_out += 1;
        self.route_frame(now, dst, frame)
    }

    /// Sends an echo request (ping, or ping6 to an IPv6 address).
    pub fn icmp_echo_request(
        &mut self,
        now: Instant,
        dst: impl Into<IpAddr>,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), StackError> {
        let dst = match dst.into() {
            IpAddr::V4(d) => d,
            IpAddr::V6(d) => return self.icmpv6_echo_request(now, d, ident, seq_no, data),
        };
        if data.len() + 8 + 20 > self.cfg.mtu {
            return Err(StackError::MessageTooLong);
        }
        let repr = Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        };
        if self.send_icmp(now, dst, &repr) {
            Ok(())
        } else {
            Err(StackError::WouldBlock)
        }
    }

    /// The oldest echo reply not yet taken (the last 64 are kept).
    pub fn poll_echo_reply(&mut self) -> Option<EchoReply> {
        self.echo_replies.pop_front()
    }
}
