//! The hash behind every per-packet table: the stack's (connections by
//! 4-tuple and by id, listeners, UDP sockets, fragments in reassembly,
//! neighbours), the message protocols' (peers, flows, calls by client,
//! mailboxes, lookups), the engine's connection owners and the socket
//! shim's per-call tables (descriptors, endpoints, epoll inboxes, blocked
//! threads): a keyed folded multiply, in place of the standard
//! library's SipHash-1-3. Here, in the wire crate, because both the stack and
//! `outboard-msg` build on it (`outboard_stack::flowhash` re-exports it).
//!
//! SipHash is a pseudo-random function: even an attacker who sees hash
//! values cannot choose colliding keys. It cost about 1,300 instructions per
//! received segment here (`outboard bench cost`: the 4-tuple lookup, the id
//! lookups, the ready and event queues' lookups), a fifth of the receive
//! path. A folded multiply costs about 5 per word hashed. In the message
//! protocols' tables it saved about 2,500 instructions per RPC call (`outboard
//! sim messages --service rpc --count 20000` under callgrind, both endpoints:
//! 722.7 to 672.9 million instructions in all).
//!
//! Chosen-tuple collisions. The 4-tuple, fragment, peer and flow tables hold
//! keys a remote peer chooses (its address and port, a fragment's id, its
//! mailbox and call numbers), so a peer
//! that could compute the hash could fill one bucket and make every lookup
//! walk it. Each table's hasher starts from 128 secret bits (a 64-bit
//! starting state and a 64-bit odd multiplier, drawn from the standard
//! library's per-process random keys through SipHash when the table is made,
//! different for every table): every word hashed is XORed into the state
//! and the state multiplied by the secret multiplier, the 128-bit product
//! folded to 64 bits. Which tuples collide depends on both secrets, which
//! never leave the process; a peer sees no hash value, only the service it
//! gets. This is Linux's position for its established-connection table
//! (`inet_ehashfn`: jhash, a non-cryptographic hash, under a random boot-time
//! secret), not SipHash's; an attacker able to time lookups precisely over
//! very many probes might in principle learn something of a table's layout,
//! as with Linux. The tables that hold only our own keys (connection ids,
//! local ports) would need no secret, and get one anyway.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// A `HashMap` with the flow hash.
pub type FlowMap<K, V> = HashMap<K, V, FlowState>;

/// The 128-bit product of `x` and `m`, its halves XORed.
#[inline(always)]
const fn folded_mul(x: u64, m: u64) -> u64 {
    let p = (x as u128).wrapping_mul(m as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// One table's secret: the hasher's starting state and multiplier.
#[derive(Clone, Debug)]
pub struct FlowState {
    start: u64,
    mul: u64,
}

impl FlowState {
    /// A table's keys from two 64-bit secrets (the multiplier is made odd).
    pub const fn with_keys(start: u64, mul: u64) -> FlowState {
        FlowState { start, mul: mul | 1 }
    }
}

impl Default for FlowState {
    /// Fresh keys: the standard library's random hash keys (drawn from the
    /// OS once per thread, then stepped for every new `RandomState`) through
    /// SipHash, so that every table gets its own.
    fn default() -> FlowState {
        let r = RandomState::new();
        FlowState::with_keys(r.hash_one(0x6f75_7462_6f61_7264_u64), r.hash_one(0x666c_6f77_6861_7368_u64))
    }
}

impl BuildHasher for FlowState {
    type Hasher = FlowHasher;

    #[inline]
    fn build_hasher(&self) -> FlowHasher {
        FlowHasher { acc: self.start, mul: self.mul }
    }
}

/// The hasher: one folded multiply per word written.
#[derive(Clone, Copy, Debug)]
pub struct FlowHasher {
    acc: u64,
    mul: u64,
}

impl Hasher for FlowHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.acc = folded_mul(self.acc ^ x, self.mul);
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    #[inline]
    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }

    /// Eight bytes at a time; a short last word carries its length in its top
    /// byte, so that `[1]` and `[1, 0]` differ.
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.write_u64(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            w[7] = rest.len() as u8;
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    /// One more multiply, so that the last word written reaches every bit
    /// (hashbrown takes its control byte from the top seven).
    #[inline]
    fn finish(&self) -> u64 {
        folded_mul(self.acc ^ 0x9e37_79b9_7f4a_7c15, self.mul)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

    fn tuple_hash(s: &FlowState, remote_port: u16, remote: Ipv4Addr) -> u64 {
        let local = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80));
        s.hash_one((local, SocketAddr::V4(SocketAddrV4::new(remote, remote_port))))
    }

    #[test]
    fn tables_get_different_keys_and_the_hash_depends_on_them() {
        let (a, b) = (FlowState::default(), FlowState::default());
        assert!(a.start != b.start || a.mul != b.mul, "two tables, one key");
        let ip = Ipv4Addr::new(192, 0, 2, 7);
        assert_ne!(tuple_hash(&a, 5000, ip), tuple_hash(&b, 5000, ip));
        assert_eq!(tuple_hash(&a, 5000, ip), tuple_hash(&a.clone(), 5000, ip), "same keys, same hash");
    }

    #[test]
    fn every_remote_port_of_one_peer_lands_spread_over_the_buckets() {
        // The shape of a chosen-tuple attack: one address, every port. With a
        // 64K-slot table hashbrown uses the low 16 bits for the bucket and
        // the top 7 for the control byte; both must look uniform.
        let s = FlowState::default();
        let ip = Ipv4Addr::new(198, 51, 100, 1);
        let mut low = vec![0u32; 1 << 12];
        let mut top = vec![0u32; 128];
        let mut all = HashSet::new();
        for port in 0..=u16::MAX {
            let h = tuple_hash(&s, port, ip);
            low[(h & 0xfff) as usize] += 1;
            top[(h >> 57) as usize] += 1;
            all.insert(h);
        }
        assert_eq!(all.len(), 1 << 16, "no two ports collide in 64 bits");
        // 16 expected per low bucket, 512 per control byte: allow wide margins.
        assert!(low.iter().all(|&n| n < 48), "a low-bits bucket holds {}", low.iter().max().unwrap());
        assert!(top.iter().all(|&n| (384..640).contains(&n)), "control bytes {:?}", top);
    }

    #[test]
    fn byte_strings_of_different_lengths_differ() {
        let s = FlowState::with_keys(1, 2);
        let h = |b: &[u8]| {
            let mut x = s.build_hasher();
            x.write(b);
            x.finish()
        };
        assert_ne!(h(&[1]), h(&[1, 0]));
        assert_ne!(h(&[]), h(&[0]));
        assert_ne!(h(&[0; 8]), h(&[0; 9]));
    }
}
