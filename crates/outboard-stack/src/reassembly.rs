//! IPv4 and IPv6 fragment reassembly (RFC 791 §3.2, RFC 8200 §4.5, RFC 815
//! hole tracking), bounded in memory and time.
//!
//! Policy:
//! - A datagram is keyed by (source, destination, protocol, identification).
//! - Fragments are kept as separate pieces sorted by offset; memory is charged
//!   for their bytes plus a fixed overhead per piece and per datagram, so a
//!   flood of tiny fragments costs what it really costs.
//! - Overlap: an exact duplicate (same offset, length and bytes) is ignored, as
//!   the network may duplicate packets; any other overlap drops the whole
//!   datagram and the fragment (the RFC 5722 rule for IPv6, applied to IPv4 as
//!   Linux does since 2018), because overlapping fragments are only ever made
//!   by attackers trying to slip data past filters.
//! - Inconsistent lengths (end beyond 64 KiB, beyond a known last fragment, two
//!   different last fragments, a non-final fragment not a multiple of 8 bytes)
//!   drop the fragment, and the datagram if it contradicts what is held.
//! - Memory cap: a new fragment that would exceed the cap evicts the oldest
//!   other datagrams first; a fragment that can't fit at all is dropped.
//! - Timeout: a datagram incomplete `timeout` after its first fragment is
//!   dropped; if its first fragment had arrived the caller gets the quote for
//!   an ICMP Time Exceeded, code 1 (RFC 792, RFC 1122 §3.3.2).

use crate::stats::StackStats;
use outboard_time::{Duration, Instant};
use crate::flowhash::FlowMap;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Bytes charged per datagram being reassembled.
pub(crate) const DATAGRAM_OVERHEAD: usize = 128;
/// Bytes charged per fragment held.
pub(crate) const FRAGMENT_OVERHEAD: usize = 48;
/// The largest IPv4 payload: total length 65535 minus a minimal header.
pub(crate) const MAX_PAYLOAD: usize = 65535 - 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FragKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4's protocol; for IPv6 the fragment header's Next Header.
    pub protocol: u8,
    /// IPv4's 16-bit or IPv6's 32-bit identification.
    pub ident: u32,
}

/// One received fragment, borrowed from the frame.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fragment<'a> {
    /// Byte offset of `data` in the datagram's payload.
    pub offset: usize,
    pub more_fragments: bool,
    pub data: &'a [u8],
    /// This fragment's IP header, kept from the first fragment for ICMP quotes.
    pub header: &'a [u8],
}

/// A completed datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reassembled {
    /// The first fragment's IP header, as received.
    pub header: Vec<u8>,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
struct Piece {
    offset: usize,
    data: Vec<u8>,
}

impl Piece {
    fn end(&self) -> usize {
        self.offset + self.data.len()
    }
}

#[derive(Debug)]
struct Datagram {
    pieces: Vec<Piece>,
    received: usize,
    /// Known once the last fragment (MF = 0) arrived.
    total: Option<usize>,
    first_header: Option<Vec<u8>>,
    /// Key into the expiry index.
    expiry: (Instant, u64),
    memory: usize,
}

#[derive(Debug)]
pub(crate) struct Reassembler {
    datagrams: FlowMap<FragKey, Datagram>,
    /// (deadline, serial) -> key, oldest first: for timeouts and eviction.
    expiry: BTreeMap<(Instant, u64), FragKey>,
    serial: u64,
    memory: usize,
    cap: usize,
    timeout: Duration,
}

impl Reassembler {
    pub(crate) fn new(cap: usize, timeout: Duration) -> Reassembler {
        Reassembler {
            datagrams: FlowMap::default(),
            expiry: BTreeMap::new(),
            serial: 0,
            memory: 0,
            cap,
            timeout,
        }
    }

    /// Adds one fragment; returns the datagram when it is complete.
    pub(crate) fn add(
        &mut self,
        now: Instant,
        key: FragKey,
        frag: Fragment<'_>,
        stats: &mut StackStats,
    ) -> Option<Reassembled> {
        let len = frag.data.len();
        let end = frag.offset + len;
        // RFC 791: every fragment but the last carries a multiple of 8 bytes.
        let bad_alone = end > MAX_PAYLOAD || (frag.more_fragments && (len == 0 || len & 7 != 0));
        if bad_alone {
            stats.reassembly_bad_fragments += 1;
            return None;
        }

        let is_new = !self.datagrams.contains_key(&key);
        let need = FRAGMENT_OVERHEAD
            + len
            + if is_new { DATAGRAM_OVERHEAD } else { 0 }
            + if frag.offset == 0 {
                frag.header.len()
            } else {
                0
            };
        if need > self.cap {
            stats.reassembly_evictions += 1;
            return None;
        }
        while self.memory + need > self.cap {
            let victim = self.expiry.values().copied().find(|k| *k != key);
            match victim {
                Some(v) => {
                    self.remove(&v);
                    stats.reassembly_evictions += 1;
                }
                None => {
                    // Only this datagram is left and it can't grow: give it up.
                    self.remove(&key);
                    stats.reassembly_evictions += 1;
                    return None;
                }
            }
        }

        if !self.datagrams.contains_key(&key) {
            self.serial += 1;
            let expiry = (now + self.timeout, self.serial);
            self.expiry.insert(expiry, key);
            self.memory += DATAGRAM_OVERHEAD;
            self.datagrams.insert(
                key,
                Datagram {
                    pieces: Vec::new(),
                    received: 0,
                    total: None,
                    first_header: None,
                    expiry,
                    memory: DATAGRAM_OVERHEAD,
                },
            );
        }
        // Invariant: inserted just above if it was absent.
        let dg = self.datagrams.get_mut(&key).expect("datagram present");

        match insert_piece(dg, frag) {
            Insert::Added(charged) => {
                dg.memory += charged;
                self.memory += charged;
            }
            Insert::Duplicate => {
                stats.reassembly_duplicates += 1;
                return None;
            }
            Insert::Overlap => {
                stats.reassembly_overlaps += 1;
                self.remove(&key);
                return None;
            }
            Insert::Inconsistent => {
                stats.reassembly_bad_fragments += 1;
                self.remove(&key);
                return None;
            }
        }

        if dg.total != Some(dg.received) {
            return None;
        }
        // Complete: pieces are sorted, disjoint and within [0, total), and
        // their lengths sum to total, so they tile the payload exactly.
        let dg = self.remove(&key)?;
        let mut payload = Vec::with_capacity(dg.received);
        for p in &dg.pieces {
            payload.extend_from_slice(&p.data);
        }
        stats.reassembled += 1;
        Some(Reassembled {
            header: dg.first_header.unwrap_or_default(),
            payload,
        })
    }

    /// The next deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.expiry.keys().next().map(|(t, _)| *t)
    }

    /// Drops expired datagrams. Returns, for each that had its first fragment,
    /// the quote for an ICMP Time Exceeded: header plus the first 8 payload bytes.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        stats: &mut StackStats,
    ) -> Vec<(FragKey, Vec<u8>)> {
        let mut quotes = Vec::new();
        while let Some((&(deadline, serial), &key)) = self.expiry.iter().next() {
            if deadline > now {
                break;
            }
            self.expiry.remove(&(deadline, serial));
            let Some(dg) = self.datagrams.remove(&key) else {
                continue;
            };
            self.memory -= dg.memory;
            stats.reassembly_timeouts += 1;
            if let (Some(mut quote), Some(first)) = (dg.first_header, dg.pieces.first()) {
                if first.offset == 0 {
                    quote.extend_from_slice(&first.data[..first.data.len().min(8)]);
                    quotes.push((key, quote));
                }
            }
        }
        quotes
    }

    pub(crate) fn memory(&self) -> usize {
        self.memory
    }

    pub(crate) fn datagrams_held(&self) -> usize {
        self.datagrams.len()
    }

    fn remove(&mut self, key: &FragKey) -> Option<Datagram> {
        let dg = self.datagrams.remove(key)?;
        self.expiry.remove(&dg.expiry);
        self.memory -= dg.memory;
        Some(dg)
    }
}

enum Insert {
    /// Stored; the bytes charged.
    Added(usize),
    Duplicate,
    Overlap,
    Inconsistent,
}

fn insert_piece(dg: &mut Datagram, frag: Fragment<'_>) -> Insert {
    let end = frag.offset + frag.data.len();
    if !frag.more_fragments {
        match dg.total {
            Some(t) if t != end => return Insert::Inconsistent,
            _ => {}
        }
        if dg.pieces.last().is_some_and(|p| p.end() > end) {
            return Insert::Inconsistent;
        }
    } else if dg.total.is_some_and(|t| end > t) {
        return Insert::Inconsistent;
    }

    let idx = dg.pieces.partition_point(|p| p.offset < frag.offset);
    if let Some(p) = dg.pieces.get(idx) {
        if p.offset == frag.offset && p.data.len() == frag.data.len() {
            return if p.data == frag.data && (frag.more_fragments || dg.total == Some(end)) {
                Insert::Duplicate
            } else {
                Insert::Overlap
            };
        }
        if p.offset < end {
            return Insert::Overlap;
        }
    }
    if idx > 0 && dg.pieces[idx - 1].end() > frag.offset {
        return Insert::Overlap;
    }

    if !frag.more_fragments {
        dg.total = Some(end);
    }
    let mut charged = 0;
    if frag.offset == 0 && dg.first_header.is_none() {
        dg.first_header = Some(frag.header.to_vec());
        charged += frag.header.len();
    }
    if !frag.data.is_empty() {
        dg.pieces.insert(
            idx,
            Piece {
                offset: frag.offset,
                data: frag.data.to_vec(),
            },
        );
        dg.received += frag.data.len();
        charged += FRAGMENT_OVERHEAD + frag.data.len();
    }
    Insert::Added(charged)
}

#[cfg(test)]
mod tests;
