//! Multi-shard hosts: an engine with N shards as the simulator sees it.
//!
//! A [`ShardedHost`] is N real `Stack`s sharing one MAC and one address,
//! each configured as shard i of N (so `tcp_connect` picks source ports that
//! hash back to it, and only shard 0 answers ARP), behind the engine's
//! steering function (`outboard_stack::steer::frame_owner`, the very one the
//! engine's shards apply): a received frame goes to the shard the Toeplitz
//! hash of its flow names, unless its port is bound on some shards only; an
//! ARP frame goes to shard 0 and, as a copy to learn from, to every other.
//! It models an engine whose NIC steers with our hash (the fabric's port
//! groups, or a NIC with RSS and the default indirection table), so no frame
//! is forwarded between shards here; the engine's forwarding rings are
//! tested on real links (`cli/tests/shards_lab.rs`).
//!
//! Deterministic like the rest of the simulator: shards transmit in a fixed
//! round robin and fire their timers in index order.

use crate::network::Endpoint;
use crate::rng::Rng;
use outboard_stack::steer::{frame_owner, FrameOwner, Transport};
use outboard_stack::{Stack, StackConfig};
use outboard_time::Instant;

pub struct ShardedHost {
    shards: Vec<Stack>,
    /// The shard whose frames `poll_transmit` asks for first.
    next_tx: usize,
    /// Frames delivered to each shard, by the steering function.
    pub delivered: Vec<u64>,
}

impl ShardedHost {
    /// `n` shards (1 to 64) of one host configured by `cfg` (shard fields and
    /// `arp_replies` are set here); every shard gets the same secret (the
    /// engine's shards share one: ISNs and SYN cookies agree).
    pub fn new(cfg: &StackConfig, n: usize, start: Instant) -> ShardedHost {
        let n = n.clamp(1, 64);
        let shards = (0..n)
            .map(|i| {
                let mut c = cfg.clone();
                c.shard_index = i as u16;
                c.shard_count = n as u16;
                c.arp_replies = i == 0;
                Stack::new(c, start)
            })
            .collect();
        ShardedHost { shards, next_tx: 0, delivered: vec![0; n] }
    }

    /// Like `new`, with the secret drawn from `rng`.
    pub fn with_secret(mut cfg: StackConfig, n: usize, start: Instant, rng: &mut Rng) -> ShardedHost {
        rng.fill_bytes(&mut cfg.secret);
        ShardedHost::new(&cfg, n, start)
    }

    pub fn len(&self) -> usize {
        self.shards.len()
    }
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
    pub fn shard(&mut self, i: usize) -> &mut Stack {
        &mut self.shards[i]
    }
    pub fn shards(&mut self) -> &mut [Stack] {
        &mut self.shards
    }

    /// Which shards have `port` bound (a bit each).
    fn bound(&self, t: Transport, port: u16) -> u64 {
        self.shards.iter().enumerate().filter(|(_, s)| s.is_bound(t, port)).fold(0, |m, (i, _)| m | 1 << i)
    }
}

impl Endpoint for ShardedHost {
    fn mac(&self) -> [u8; 6] {
        self.shards[0].config().mac
    }

    fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        let n = self.shards.len() as u16;
        match frame_owner(frame, n, |t, p| self.bound(t, p)) {
            FrameOwner::Shard(s) => {
                let s = usize::from(s);
                self.delivered[s] += 1;
                self.shards[s].receive_frame(now, frame);
            }
            FrameOwner::Arp => {
                for (i, s) in self.shards.iter_mut().enumerate() {
                    self.delivered[i] += 1;
                    s.receive_frame(now, frame);
                }
            }
        }
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let n = self.shards.len();
        for k in 0..n {
            let i = (self.next_tx + k) % n;
            if let Some(len) = self.shards[i].poll_transmit(now, buf) {
                self.next_tx = (i + 1) % n;
                return Some(len);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.shards.iter().filter_map(Stack::poll_timeout).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for s in &mut self.shards {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
    }
}
