//! N hosts joined by faulty links, stepped on virtual time.
//!
//! Topology: a full mesh of point-to-point links, one per *ordered* pair of
//! hosts, each with its own `FaultInjector` (so A→B and B→A have independent
//! loss, queues and delay). A host puts a frame on the wire; the network
//! reads its destination MAC, as a switch would, and offers it to the link
//! towards that host. Broadcast and multicast frames (ARP requests) go on
//! every link out of the sender. A frame to an unknown MAC is counted and
//! dropped. Routing happens *before* the link's faults, so a frame whose
//! destination MAC is then corrupted still reaches the intended host, which
//! must reject it itself (address mismatch).
//!
//! The loop: `advance` moves the clock to the earliest event — a frame
//! arrival or a host's `poll_timeout` — delivers every frame due by then (in
//! scheduling order), fires due host timers (in host order), and drains every
//! host's `poll_transmit`. The caller does application work between steps and
//! calls `flush` afterwards so what it queued goes out. Everything is ordered
//! by (time, sequence number, host index): the same seed gives the same run.

use crate::clock::{EventQueue, VirtualClock};
use crate::fault::{FaultConfig, FaultInjector, FaultStats};
use crate::rng::Rng;
use outboard_stack::{Stack, StackConfig};
use outboard_time::Instant;
use std::net::Ipv4Addr;

/// What the network needs from a host: a sans-IO frame endpoint.
pub trait Endpoint {
    fn mac(&self) -> [u8; 6];
    fn receive_frame(&mut self, now: Instant, frame: &[u8]);
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
}

impl Endpoint for Stack {
    fn mac(&self) -> [u8; 6] {
        self.config().mac
    }
    fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        Stack::receive_frame(self, now, frame)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        Stack::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Stack::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Stack::handle_timeout(self, now)
    }
}

/// The address plan: host `i` (from 0) is 10.0.0.(i+1)/24 with MAC 02:00:00:00:00:(i+1).
/// Host `i`'s IPv6 address (fd00::i+1/64) when the network runs IPv6.
pub fn host_addr6(i: usize) -> std::net::Ipv6Addr {
    std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16 + 1)
}

pub fn host_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, (i + 1) as u8)
}
pub fn host_mac(i: usize) -> [u8; 6] {
    [
        0x02,
        0,
        0,
        0,
        (((i + 1) >> 8) & 0xff) as u8,
        ((i + 1) & 0xff) as u8,
    ]
}
/// Most hosts one /24 holds (.1 to .253, leaving .254 and the broadcast address).
pub const MAX_HOSTS: usize = 253;

/// Why `advance` did not step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// One instant's events were processed.
    Advanced,
    /// Nothing is scheduled: no frame in flight, no host timer.
    Idle,
    /// The next event lies after the limit; the clock now stands at the limit.
    Limit,
    /// Too many steps without the clock moving: some host keeps asking for a
    /// timeout in the past, or endpoints ping-pong at zero delay forever.
    Stalled,
}

/// Default steps allowed at one instant before the network calls it a livelock.
pub const DEFAULT_STALL_STEPS: u64 = 10_000_000;

/// Frames taken from one host in one `flush`.
const MAX_FRAMES_PER_FLUSH: usize = 1 << 20;

/// Most spare frame buffers kept.
const SPARE_FRAMES: usize = 4096;

/// Network counters beyond the links' own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetStats {
    pub frames_sent: u64,
    pub frames_received: u64,
    pub unroutable: u64,
    pub timer_fires: u64,
    pub steps: u64,
}

struct Delivery {
    from: usize,
    to: usize,
    frame: Vec<u8>,
}

/// Hosts plus links plus the clock. `H` is the host type (the real stack, or a fake in tests).
pub struct Network<H: Endpoint = Stack> {
    clock: VirtualClock,
    hosts: Vec<H>,
    macs: Vec<[u8; 6]>,
    /// links[from * n + to]; the diagonal is unused.
    links: Vec<FaultInjector>,
    queue: EventQueue<Delivery>,
    frame_cap: usize,
    tx_buf: Vec<u8>,
    /// Frame buffers returned after delivery, reused to spare the allocator.
    spare: Vec<Vec<u8>>,
    stats: NetStats,
    steps_at_instant: u64,
    stall_steps: u64,
    tap: Option<Box<Tap>>,
    tx_tap: Option<Box<TxTap>>,
}

/// Sees every frame a host puts on the wire, before any link fault: (time, from host, frame).
pub type TxTap = dyn FnMut(Instant, usize, &[u8]) + Send;

/// Sees every frame as it is delivered: (time, from host, to host, frame).
pub type Tap = dyn FnMut(Instant, usize, usize, &[u8]) + Send;

impl<H: Endpoint> core::fmt::Debug for Network<H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Network")
            .field("now", &self.clock.now())
            .field("hosts", &self.hosts.len())
            .field("in_flight", &self.queue.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<H: Endpoint> Network<H> {
    /// Joins `hosts` with links configured by `link`; each link draws from its
    /// own RNG derived from `seed`. `max_frame` bounds a frame (mtu + 14).
    pub fn new(
        hosts: Vec<H>,
        link: &FaultConfig,
        seed: u64,
        max_frame: usize,
        start: Instant,
    ) -> Network<H> {
        let n = hosts.len();
        let links = (0..n * n)
            .map(|i| FaultInjector::new(link.clone(), Rng::derive(seed, 1 + i as u64).next_u64()))
            .collect();
        let macs = hosts.iter().map(|h| h.mac()).collect();
        Network {
            clock: VirtualClock::new(start),
            hosts,
            macs,
            links,
            queue: EventQueue::new(),
            frame_cap: max_frame,
            tx_buf: vec![0; max_frame],
            spare: Vec::new(),
            stats: NetStats::default(),
            steps_at_instant: 0,
            stall_steps: DEFAULT_STALL_STEPS,
            tap: None,
            tx_tap: None,
        }
    }

    /// Calls `tap` with every frame delivered from now on (after the link's
    /// faults: what the receiver sees), e.g. to write a pcap with `PcapBuf`.
    pub fn set_tap(&mut self, tap: Box<Tap>) {
        self.tap = Some(tap);
    }

    /// Calls `tap` with every frame a host transmits from now on, before the
    /// link decides its fate (so lost frames are seen too).
    pub fn set_tx_tap(&mut self, tap: Box<TxTap>) {
        self.tx_tap = Some(tap);
    }

    /// Steps at one instant before `advance` reports `Step::Stalled`.
    pub fn set_stall_steps(&mut self, steps: u64) {
        self.stall_steps = steps;
    }
    pub fn now(&self) -> Instant {
        self.clock.now()
    }
    pub fn len(&self) -> usize {
        self.hosts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
    pub fn host(&self, i: usize) -> &H {
        &self.hosts[i]
    }
    pub fn host_mut(&mut self, i: usize) -> &mut H {
        &mut self.hosts[i]
    }
    pub fn hosts_mut(&mut self) -> &mut [H] {
        &mut self.hosts
    }
    /// The link carrying frames from host `from` to host `to`.
    pub fn link(&self, from: usize, to: usize) -> &FaultInjector {
        &self.links[from * self.hosts.len() + to]
    }
    pub fn link_mut(&mut self, from: usize, to: usize) -> &mut FaultInjector {
        let n = self.hosts.len();
        &mut self.links[from * n + to]
    }
    /// Fault counters summed over every link.
    pub fn fault_totals(&self) -> FaultStats {
        let mut t = FaultStats::default();
        for l in &self.links {
            t.add(l.stats());
        }
        t
    }
    pub fn stats(&self) -> &NetStats {
        &self.stats
    }
    /// Frames on the wire (scheduled, not yet delivered).
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// The next instant at which something happens.
    pub fn next_event(&self) -> Option<Instant> {
        let timers = self.hosts.iter().filter_map(|h| h.poll_timeout()).min();
        match (self.queue.peek_time(), timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Drains every host's transmit queue onto the links.
    pub fn flush(&mut self) {
        for i in 0..self.hosts.len() {
            self.flush_host(i);
        }
    }

    fn flush_host(&mut self, from: usize) {
        let now = self.clock.now();
        // A host that never stops transmitting must not hang the simulator:
        // the rest is drained at the next flush (and `Stalled` catches a livelock).
        for _ in 0..MAX_FRAMES_PER_FLUSH {
            let Some(len) = self.hosts[from].poll_transmit(now, &mut self.tx_buf) else {
                break;
            };
            let len = len.min(self.frame_cap);
            self.stats.frames_sent += 1;
            let frame = &self.tx_buf[..len];
            if let Some(tap) = &mut self.tx_tap {
                tap(now, from, frame);
            }
            let spare = &mut self.spare;
            let mut copy = || {
                let mut v = spare.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(frame);
                v
            };
            let dst: [u8; 6] = match frame.get(..6).and_then(|d| d.try_into().ok()) {
                Some(d) => d,
                None => {
                    self.stats.unroutable += 1;
                    continue;
                }
            };
            let n = self.hosts.len();
            if dst[0] & 1 == 1 {
                // Broadcast or multicast: every other host.
                for to in (0..n).filter(|&to| to != from) {
                    Self::offer(
                        &mut self.links[from * n + to],
                        &mut self.queue,
                        now,
                        (from, to),
                        copy(),
                    );
                }
            } else if let Some(to) = self
                .macs
                .iter()
                .position(|m| *m == dst)
                .filter(|&to| to != from)
            {
                Self::offer(
                    &mut self.links[from * n + to],
                    &mut self.queue,
                    now,
                    (from, to),
                    copy(),
                );
            } else {
                self.stats.unroutable += 1;
            }
        }
    }

    fn offer(
        link: &mut FaultInjector,
        queue: &mut EventQueue<Delivery>,
        now: Instant,
        (from, to): (usize, usize),
        frame: Vec<u8>,
    ) {
        link.send(now, frame, &mut |at, frame| {
            queue.push(at, Delivery { from, to, frame })
        });
    }

    /// Moves the clock to `t` if nothing is scheduled before then (an
    /// application waiting on its own timer); false, with the clock unmoved,
    /// if an event is due earlier.
    pub fn idle_until(&mut self, t: Instant) -> bool {
        if self.next_event().is_some_and(|e| e < t) {
            return false;
        }
        self.clock.advance_to(t);
        true
    }

    /// Moves to the next event if it is at or before `limit` and processes
    /// everything due then; otherwise reports why not.
    pub fn advance(&mut self, limit: Instant) -> Step {
        let Some(next) = self.next_event() else {
            return Step::Idle;
        };
        if next > limit {
            self.clock.advance_to(limit);
            return Step::Limit;
        }
        if next > self.clock.now() {
            self.steps_at_instant = 0;
        } else {
            self.steps_at_instant += 1;
            if self.steps_at_instant > self.stall_steps {
                return Step::Stalled;
            }
        }
        self.clock.advance_to(next);
        let now = self.clock.now();
        self.stats.steps += 1;
        while let Some((_, d)) = self.queue.pop_due(now) {
            self.stats.frames_received += 1;
            if let Some(tap) = &mut self.tap {
                tap(now, d.from, d.to, &d.frame);
            }
            self.hosts[d.to].receive_frame(now, &d.frame);
            if self.spare.len() < SPARE_FRAMES {
                self.spare.push(d.frame);
            }
        }
        for h in &mut self.hosts {
            if h.poll_timeout().is_some_and(|t| t <= now) {
                self.stats.timer_fires += 1;
                h.handle_timeout(now);
            }
        }
        self.flush();
        Step::Advanced
    }
}

/// Settings for a network of real stacks.
#[derive(Debug, Clone)]
pub struct StackNetConfig {
    pub hosts: usize,
    /// IP MTU of every link.
    pub mtu: usize,
    /// TCP template of every host.
    pub tcp: outboard_tcp::Config,
    /// Initial knobs of every link.
    pub link: FaultConfig,
    pub seed: u64,
    /// Dual stack: every host also has `host_addr6(i)`. Hosts use it at once
    /// (no duplicate-address detection: every address is unique by
    /// construction, and transfers start at time zero).
    pub ipv6: bool,
}

impl Network<Stack> {
    /// `cfg.hosts` stacks on 10.0.0.0/24 (see `host_addr`, `host_mac`), each with
    /// an ISN/cookie secret drawn from the seed.
    pub fn of_stacks(cfg: &StackNetConfig) -> Network<Stack> {
        Network::new(stacks(cfg), &cfg.link, cfg.seed, cfg.mtu + 14, Instant::ZERO)
    }
}

/// The stacks of `cfg`'s hosts, at time zero, with secrets drawn from its seed.
pub fn stacks(cfg: &StackNetConfig) -> Vec<Stack> {
    let n = cfg.hosts.min(MAX_HOSTS);
    let mut secrets = Rng::derive(cfg.seed, 0);
    (0..n)
        .map(|i| {
            let mut sc = StackConfig::new(host_mac(i), host_addr(i), 24);
            sc.mtu = cfg.mtu;
            sc.tcp = cfg.tcp.clone();
            secrets.fill_bytes(&mut sc.secret);
            if cfg.ipv6 {
                sc.ipv6 = Some(outboard_stack::Ipv6Config {
                    addr: Some((host_addr6(i), 64)),
                    accept_ra: false,
                    dad_transmits: 0,
                    ..outboard_stack::Ipv6Config::default()
                });
            }
            Stack::new(sc, Instant::ZERO)
        })
        .collect()
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
