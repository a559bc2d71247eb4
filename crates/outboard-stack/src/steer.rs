//! Flow steering: which shard owns a flow.
//!
//! NICs steer received packets with the Toeplitz RSS hash over the IPv4
//! 4-tuple and an indirection table (RETA) that maps the hash's low bits to a
//! queue. A connection must live on one shard for its whole life, so the
//! stack computes the same function in software: to pick, at
//! `Stack::tcp_connect`, a source port whose *returning* packets the NIC
//! will deliver to the calling shard (DESIGN.md item 5), and for an engine
//! to steer from a software stage.
//!
//! The hash input is the tuple as the NIC sees it on receive: source is the
//! remote peer, destination is us.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::ops::RangeInclusive;

/// The 40-byte key from Microsoft's RSS specification; the default of most
/// NIC drivers and the key of the published verification vectors.
pub const MICROSOFT_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Entries in the default indirection table. Linux fills a NIC's RETA with
/// `i % nqueues` (`ethtool_rxfh_indir_default`), and 128 entries is the
/// common size, so `shard_for` with this table agrees with the NIC's queue.
pub const DEFAULT_RETA_SIZE: usize = 128;

/// An IPv4 flow as seen on receive: `src` is the sender of the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowTuple {
    /// The RSS input for IPv4 with TCP: source address, destination address,
    /// source port, destination port, in network byte order.
    pub fn rss_input(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.src_ip.octets());
        b[4..8].copy_from_slice(&self.dst_ip.octets());
        b[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        b[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        b
    }
}

/// An IPv6 flow as seen on receive: `src` is the sender of the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowTuple6 {
    pub src_ip: Ipv6Addr,
    pub dst_ip: Ipv6Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowTuple6 {
    /// The RSS input for IPv6 with TCP (Microsoft's RSS specification,
    /// "IPv6 with TCP"): source address, destination address, source port,
    /// destination port: 36 bytes, exactly what a 40-byte key covers.
    pub fn rss_input(&self) -> [u8; 36] {
        let mut b = [0u8; 36];
        b[0..16].copy_from_slice(&self.src_ip.octets());
        b[16..32].copy_from_slice(&self.dst_ip.octets());
        b[32..34].copy_from_slice(&self.src_port.to_be_bytes());
        b[34..36].copy_from_slice(&self.dst_port.to_be_bytes());
        b
    }
}

/// The Toeplitz hash of `input` under `key`: for every set input bit, from
/// the most significant bit of `input[0]` on, XOR in the 32 key bits that
/// start at that bit position. Inputs longer than the key allows
/// (`key.len() - 4` bytes, 36 for a 40-byte key) use only that prefix.
pub fn toeplitz_hash(key: &[u8], input: &[u8]) -> u32 {
    if key.len() < 4 {
        return 0;
    }
    let usable = input.len().min(key.len() - 4);
    // `window` holds the 32 key bits at the current bit position in its high
    // half and the next 32 bits below, so each input byte needs one refill.
    let mut window: u64 = u64::from(u32::from_be_bytes([key[0], key[1], key[2], key[3]])) << 32;
    let mut result = 0u32;
    for (i, &byte) in input[..usable].iter().enumerate() {
        // Key byte i + 4 exists because i < key.len() - 4.
        window |= u64::from(key[i + 4]) << 24;
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= (window >> 32) as u32;
            }
            window <<= 1;
        }
    }
    result
}

/// RSS hash for IPv4 with TCP (or UDP, where the NIC is set to hash ports;
/// many NICs hash UDP by addresses only unless told otherwise, and then
/// [`rss_hash_ipv4`] is the matching function).
pub fn rss_hash_ipv4_tcp(key: &[u8], tuple: &FlowTuple) -> u32 {
    toeplitz_hash(key, &tuple.rss_input())
}

/// RSS hash for IPv4 addresses only (fragments, non-TCP/UDP).
pub fn rss_hash_ipv4(key: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
    let mut b = [0u8; 8];
    b[0..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    toeplitz_hash(key, &b)
}

/// The shard owning `tuple` among `nshards`, with the Microsoft key and the
/// default 128-entry indirection table filled round-robin. `nshards == 0`
/// is treated as one shard.
pub fn shard_for(tuple: &FlowTuple, nshards: u16) -> u16 {
    let hash = rss_hash_ipv4_tcp(&MICROSOFT_RSS_KEY, tuple);
    reta_default_entry(hash, nshards)
}

/// [`shard_for`] for an IPv6 flow.
pub fn shard_for_v6(tuple: &FlowTuple6, nshards: u16) -> u16 {
    let hash = toeplitz_hash(&MICROSOFT_RSS_KEY, &tuple.rss_input());
    reta_default_entry(hash, nshards)
}

/// The shard a flow from `remote` to `local` (either family, both the same)
/// hashes to among `nshards`.
fn shard_of_flow(local: IpAddr, local_port: u16, remote: IpAddr, remote_port: u16, nshards: u16) -> u16 {
    match (local, remote) {
        (IpAddr::V4(dst_ip), IpAddr::V4(src_ip)) => {
            shard_for(&FlowTuple { src_ip, dst_ip, src_port: remote_port, dst_port: local_port }, nshards)
        }
        (IpAddr::V6(dst_ip), IpAddr::V6(src_ip)) => {
            shard_for_v6(&FlowTuple6 { src_ip, dst_ip, src_port: remote_port, dst_port: local_port }, nshards)
        }
        // A mixed pair names no flow; shard 0 takes what cannot be placed.
        _ => 0,
    }
}

fn reta_default_entry(hash: u32, nshards: u16) -> u16 {
    let index = hash as usize % DEFAULT_RETA_SIZE;
    // index < 128, so it fits in u16.
    (index as u16) % nshards.max(1)
}

/// Steering with a configured key and indirection table, for NICs whose
/// RETA was programmed differently from the default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steering {
    key: Vec<u8>,
    reta: Vec<u16>,
}

/// Why a [`Steering`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteeringError {
    /// The key must be at least 16 bytes (12 bytes of input + 4).
    KeyTooShort,
    /// The indirection table must be non-empty and a power of two long
    /// (NICs index it with the hash's low bits).
    BadRetaSize,
}

impl Steering {
    pub fn new(key: &[u8], reta: Vec<u16>) -> Result<Steering, SteeringError> {
        if key.len() < 16 {
            return Err(SteeringError::KeyTooShort);
        }
        if !reta.len().is_power_of_two() {
            return Err(SteeringError::BadRetaSize);
        }
        Ok(Steering {
            key: key.to_vec(),
            reta,
        })
    }

    /// The Microsoft key and the default table for `nshards` shards.
    pub fn default_for(nshards: u16) -> Steering {
        let n = nshards.max(1);
        let reta = (0..DEFAULT_RETA_SIZE as u16).map(|i| i % n).collect();
        Steering {
            key: MICROSOFT_RSS_KEY.to_vec(),
            reta,
        }
    }

    pub fn hash(&self, tuple: &FlowTuple) -> u32 {
        rss_hash_ipv4_tcp(&self.key, tuple)
    }

    pub fn shard_for(&self, tuple: &FlowTuple) -> u16 {
        // The table length is a power of two, so the mask picks the low bits.
        self.reta[self.hash(tuple) as usize & (self.reta.len() - 1)]
    }
}

/// A free ephemeral port in `range` such that packets from `remote` to
/// `local_ip:port` hash to `shard` of `nshards` (default key and table).
/// Ports are tried from the start of the range; `is_free` says whether the
/// stack can use a port for this remote. `None` when no port qualifies.
pub fn pick_source_port(
    local_ip: impl Into<IpAddr>,
    remote: (impl Into<IpAddr>, u16),
    shard: u16,
    nshards: u16,
    range: RangeInclusive<u16>,
    is_free: impl FnMut(u16) -> bool,
) -> Option<u16> {
    let start = *range.start();
    pick_source_port_from(local_ip, remote, shard, nshards, range, start, is_free)
}

/// Like [`pick_source_port`], but the search starts at `cursor` and wraps
/// around the range, so successive connects can spread over the range
/// (RFC 6056 section 3.3 discusses why a moving start helps).
pub fn pick_source_port_from(
    local_ip: impl Into<IpAddr>,
    remote: (impl Into<IpAddr>, u16),
    shard: u16,
    nshards: u16,
    range: RangeInclusive<u16>,
    cursor: u16,
    mut is_free: impl FnMut(u16) -> bool,
) -> Option<u16> {
    let (local_ip, remote) = (local_ip.into(), (remote.0.into(), remote.1));
    let (lo, hi) = (*range.start(), *range.end());
    if lo > hi || shard >= nshards.max(1) {
        return None;
    }
    let span = u32::from(hi - lo) + 1;
    let first = if (lo..=hi).contains(&cursor) {
        u32::from(cursor - lo)
    } else {
        0
    };
    (0..span)
        .map(|k| {
            // lo + offset <= hi, so it fits in u16.
            lo + ((first + k) % span) as u16
        })
        .find(|&port| {
            // One shard owns every flow: skip the hash.
            (nshards <= 1 || shard_of_flow(local_ip, port, remote.0, remote.1, nshards) == shard) && is_free(port)
        })
}

/// The transport protocols steered by port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// Where a received frame goes among an engine's shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameOwner {
    Shard(u16),
    /// ARP: shard 0 answers; every other shard learns from a copy.
    Arp,
}

/// The owner among `nshards` of the Ethernet frame `frame` as received:
///
/// - IPv4 TCP/UDP (not a fragment): the shard [`shard_for`] names for the
///   4-tuple, unless the destination port is bound on some shards only
///   (`bound(transport, port)`: a bit per shard; 0 = none or steer by
///   hash) and not on that one: then the lowest of those;
/// - ICMP errors (types 3, 4, 11, 12): the owner of the quoted packet's
///   flow (the quote is what we sent, so its tuple is reversed);
/// - ARP: [`FrameOwner::Arp`];
/// - anything else (fragments, ICMP echo, other protocols, a short or odd
///   frame): shard 0.
///
/// Total: any byte string gives an owner.
pub fn frame_owner(frame: &[u8], nshards: u16, bound: impl Fn(Transport, u16) -> u64) -> FrameOwner {
    if nshards <= 1 || frame.len() < 14 {
        return FrameOwner::Shard(0);
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0806 => FrameOwner::Arp,
        0x0800 => FrameOwner::Shard(ipv4_owner(&frame[14..], nshards, &bound).unwrap_or(0)),
        0x86dd => ipv6_owner(&frame[14..], nshards, &bound),
        _ => FrameOwner::Shard(0),
    }
}

/// The owner of `tuple` (as received) to `transport` among `nshards`, given
/// which shards have its destination port bound (`bound`, a bit per shard).
pub fn flow_owner(tuple: &FlowTuple, nshards: u16, bound: u64) -> u16 {
    bound_or(shard_for(tuple, nshards), nshards, bound)
}

/// `hashed`, unless the port is bound on some shards only and not on it: then the lowest of those.
fn bound_or(hashed: u16, nshards: u16, bound: u64) -> u16 {
    let mask = if nshards >= 64 { u64::MAX } else { (1u64 << nshards) - 1 };
    let bound = bound & mask;
    if bound == 0 || bound & (1 << hashed) != 0 {
        hashed
    } else {
        bound.trailing_zeros() as u16
    }
}

/// The owner of an IPv6 packet: TCP/UDP by the IPv6 4-tuple's hash (as
/// [`flow_owner`] for IPv4), ICMPv6 errors by their quote, neighbour
/// discovery like ARP (shard 0 answers, every shard learns), the rest shard 0.
fn ipv6_owner(ip: &[u8], nshards: u16, bound: &impl Fn(Transport, u16) -> u64) -> FrameOwner {
    use outboard_wire::ipv6::{next_header, walk_extensions, Ipv6Packet};
    let Ok(p) = Ipv6Packet::new_checked(ip) else { return FrameOwner::Shard(0) };
    let Ok(w) = walk_extensions(p.next_header(), p.payload()) else { return FrameOwner::Shard(0) };
    if w.fragment.is_some_and(|(f, _)| !f.is_atomic()) {
        return FrameOwner::Shard(0);
    }
    let l4 = &p.payload()[w.upper_offset..];
    let owner = match w.upper {
        next_header::ICMPV6 => match l4.first() {
            Some(133..=137) => return FrameOwner::Arp,
            Some(1..=4) => icmpv6_owner(&l4[8.min(l4.len())..], nshards, bound),
            _ => None,
        },
        upper => transport(upper).and_then(|t| {
            let (src_port, dst_port) = l4_ports(l4)?;
            let tuple = FlowTuple6 { src_ip: p.src_addr(), dst_ip: p.dst_addr(), src_port, dst_port };
            Some(flow_owner_v6(&tuple, nshards, bound(t, dst_port)))
        }),
    };
    FrameOwner::Shard(owner.unwrap_or(0))
}

fn icmpv6_owner(quote: &[u8], nshards: u16, bound: &impl Fn(Transport, u16) -> u64) -> Option<u16> {
    use outboard_wire::ipv6::{walk_extensions, Ipv6Repr};
    let (q, payload) = Ipv6Repr::parse_quoted(quote).ok()?;
    let w = walk_extensions(q.next_header, payload).ok()?;
    if w.fragment.is_some_and(|(f, _)| f.offset != 0) {
        return None;
    }
    let t = transport(w.upper)?;
    let (q_sport, q_dport) = l4_ports(payload.get(w.upper_offset..)?)?;
    let tuple = FlowTuple6 { src_ip: q.dst_addr, dst_ip: q.src_addr, src_port: q_dport, dst_port: q_sport };
    Some(flow_owner_v6(&tuple, nshards, bound(t, q_sport)))
}

/// [`flow_owner`] for an IPv6 flow.
pub fn flow_owner_v6(tuple: &FlowTuple6, nshards: u16, bound: u64) -> u16 {
    bound_or(shard_for_v6(tuple, nshards), nshards, bound)
}

/// (src, dst, protocol, header length, fragment?) of the IPv4 header at `ip`.
fn ipv4_header(ip: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, u8, usize, bool)> {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 || ip.len() < ihl {
        return None;
    }
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0; // MF or an offset
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    Some((src, dst, ip[9], ihl, fragment))
}

fn l4_ports(l4: &[u8]) -> Option<(u16, u16)> {
    (l4.len() >= 4).then(|| (u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]])))
}

fn transport(proto: u8) -> Option<Transport> {
    match proto {
        6 => Some(Transport::Tcp),
        17 => Some(Transport::Udp),
        _ => None,
    }
}

fn ipv4_owner(ip: &[u8], nshards: u16, bound: &impl Fn(Transport, u16) -> u64) -> Option<u16> {
    let (src_ip, dst_ip, proto, ihl, fragment) = ipv4_header(ip)?;
    if fragment {
        return None;
    }
    let l4 = &ip[ihl..];
    if proto == 1 {
        return icmp_owner(l4, nshards, bound);
    }
    let t = transport(proto)?;
    let (src_port, dst_port) = l4_ports(l4)?;
    let tuple = FlowTuple { src_ip, dst_ip, src_port, dst_port };
    Some(flow_owner(&tuple, nshards, bound(t, dst_port)))
}

fn icmp_owner(icmp: &[u8], nshards: u16, bound: &impl Fn(Transport, u16) -> u64) -> Option<u16> {
    if icmp.len() < 8 || !matches!(icmp[0], 3 | 4 | 11 | 12) {
        return None;
    }
    let quote = &icmp[8..];
    let (q_src, q_dst, q_proto, ihl, _) = ipv4_header(quote)?;
    // A quote of a later fragment has no ports.
    if u16::from_be_bytes([quote[6], quote[7]]) & 0x1fff != 0 {
        return None;
    }
    let t = transport(q_proto)?;
    let (q_sport, q_dport) = l4_ports(quote.get(ihl..)?)?;
    // The quote is what we sent: reversed, it is the flow as we receive it.
    let tuple = FlowTuple { src_ip: q_dst, dst_ip: q_src, src_port: q_dport, dst_port: q_sport };
    Some(flow_owner(&tuple, nshards, bound(t, q_sport)))
}

#[cfg(test)]
mod tests;
