//! The IPv6 receive path (RFC 8200): header and destination checks, the
//! extension-header walk with its Parameter Problem answers, fragment
//! reassembly (RFC 8200 §4.5, overlaps dropped as RFC 5722 requires), then
//! ICMPv6, TCP or UDP. Every drop increments a named counter.

use crate::input::{Ip6Meta, Net};
use crate::reassembly::{FragKey, Fragment};
use crate::Stack;
use outboard_time::Instant;
use outboard_wire::icmpv6::Icmpv6Repr;
use outboard_wire::ipv6::{
    next_header, param_problem, walk_extensions, ExtError, Ipv6Packet, Ipv6Repr, FRAGMENT_HEADER_LEN, HEADER_LEN,
};

impl Stack {
    pub(crate) fn ipv6_input(&mut self, now: Instant, bytes: &[u8]) {
        let Some(st) = self.ip6.as_ref() else { return };
        let Ok(pkt) = Ipv6Packet::new_checked(bytes) else {
            self.stats.drops_malformed += 1;
            return;
        };
        let Ok(repr) = Ipv6Repr::parse(&pkt) else {
            self.stats.drops_malformed += 1;
            return;
        };
        self.stats.ipv6_packets_in += 1;
        if !st.accepts(repr.dst_addr) {
            self.stats.drops_not_for_us += 1;
            return;
        }
        // The unspecified source is allowed for duplicate-address probes only (icmp6 checks).
        if !(repr.src_addr.is_unspecified() || st.valid_source(repr.src_addr)) {
            self.stats.drops_bad_source += 1;
            return;
        }
        let packet = &bytes[..HEADER_LEN + usize::from(pkt.payload_len())];
        let meta = Ip6Meta {
            src: repr.src_addr,
            dst: repr.dst_addr,
            multicast: repr.dst_addr.is_multicast(),
            tclass: repr.traffic_class,
            packet,
        };
        let payload = pkt.payload();
        let walk = match walk_extensions(repr.next_header, payload) {
            Ok(w) => w,
            Err(ExtError::Truncated) => {
                self.stats.drops_malformed += 1;
                return;
            }
            Err(ExtError::Discard) => {
                self.stats.drops_ipv6_extension_header += 1;
                return;
            }
            Err(ExtError::ParamProblem { code, pointer, only_if_unicast }) => {
                self.stats.drops_ipv6_extension_header += 1;
                // RFC 4443 §2.4(e): to a multicast destination only for an
                // unrecognized option whose action bits are 10.
                if !meta.multicast || (code == param_problem::UNRECOGNIZED_OPTION && !only_if_unicast) {
                    self.send_param_problem(now, meta, code, pointer);
                }
                return;
            }
        };
        match walk.fragment {
            Some((fh, at)) if !fh.is_atomic() => {
                self.stats.fragments_in += 1;
                let data = &payload[at + FRAGMENT_HEADER_LEN..];
                // RFC 8200 §4.5: a fragment other than the last must be a
                // multiple of 8 bytes long; Parameter Problem pointing at the Payload Length.
                if fh.more && (data.is_empty() || data.len() % 8 != 0) {
                    self.stats.reassembly_bad_fragments += 1;
                    self.send_param_problem(now, meta, param_problem::ERRONEOUS_HEADER_FIELD, 4);
                    return;
                }
                let key = FragKey {
                    src: repr.src_addr.into(),
                    dst: repr.dst_addr.into(),
                    protocol: fh.next_header,
                    ident: fh.ident,
                };
                let frag = Fragment {
                    offset: usize::from(fh.offset),
                    more_fragments: fh.more,
                    data,
                    header: &bytes[..HEADER_LEN + at + FRAGMENT_HEADER_LEN],
                };
                if let Some(done) = self.reasm.add(now, key, frag, &mut self.stats) {
                    // The reassembled fragmentable part starts with the
                    // headers after the Fragment header.
                    match walk_extensions(fh.next_header, &done.payload) {
                        Ok(w) => {
                            let meta = Ip6Meta { packet: &done.header, ..meta };
                            self.ipv6_deliver(now, meta, w.upper, w.upper_ptr, &done.payload[w.upper_offset..]);
                        }
                        Err(_) => self.stats.drops_ipv6_extension_header += 1,
                    }
                }
            }
            _ => self.ipv6_deliver(now, meta, walk.upper, walk.upper_ptr, &payload[walk.upper_offset..]),
        }
    }

    /// One whole packet for us: hand it to its upper layer.
    fn ipv6_deliver(&mut self, now: Instant, meta: Ip6Meta<'_>, upper: u8, upper_ptr: u32, data: &[u8]) {
        match upper {
            next_header::ICMPV6 => self.icmpv6_input(now, meta, data),
            next_header::TCP => self.tcp_segment_input(now, Net::V6(meta), data),
            next_header::UDP => self.udp_input(now, Net::V6(meta), data),
            next_header::NO_NEXT => {}
            _ => {
                self.stats.drops_unknown_protocol += 1;
                // RFC 8200 §4: an unrecognized Next Header is a Parameter Problem, code 1.
                if !meta.multicast {
                    self.send_param_problem(now, meta, param_problem::UNRECOGNIZED_NEXT_HEADER, upper_ptr);
                }
            }
        }
    }

    /// Whether an ICMPv6 message in `data` is an error (never answered with another).
    pub(crate) fn is_icmpv6_error(data: &[u8]) -> bool {
        data.first().is_some_and(|t| *t < 128)
    }

    fn send_param_problem(&mut self, now: Instant, meta: Ip6Meta<'_>, code: u8, pointer: u32) {
        let quote = self.icmpv6_quote(meta.packet);
        let repr = Icmpv6Repr::ParamProblem { code, pointer, invoking: &quote };
        self.send_icmpv6_error(now, meta, &repr);
    }
}
