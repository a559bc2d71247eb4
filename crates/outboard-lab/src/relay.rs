//! The seeded impairment relay: forwards every Ethernet frame between two
//! interfaces (the lab's `imp-e` and `imp-l`), each direction through its own
//! [`FaultInjector`] (seeds S and S+1), with a time-ordered delay queue so
//! delay, jitter, bandwidth and reordering all work.
//!
//! How: one AF_PACKET SOCK_RAW socket per interface (promiscuous, ignoring
//! its own transmissions, nonblocking), plain `recv`/`send`, and `ppoll`
//! with a timeout equal to the next due frame. The decision logic is
//! [`RelayCore`], pure over (time, frame), so its choices are unit-tested
//! without sockets; the loop around it in [`run`] only moves bytes.
//!
//! On SIGTERM/SIGINT/SIGHUP the relay writes a JSON [`RelayReport`] (per
//! direction: the injector's `FaultStats` and what was really forwarded) and
//! returns. Given the same frames at the same times, the same seed makes the
//! same decisions; with live traffic the times differ from run to run, so
//! only the decisions per frame sequence are reproducible, not the traffic.
//!
//! Not done: TPACKET rings or batching syscalls (`recvmmsg`): plain
//! recv/send moves a few hundred thousand frames a second on one core, which
//! is more than the lab's veth path needs; frames larger than 64 KiB (GSO) are
//! counted and dropped — the lab turns TX offloads off so none arrive.

use crate::sys::{self, PacketSocket};
use crate::{Impairment, LabError};
use outboard_impair::{FaultConfig, FaultInjector, FaultStats};
use outboard_time::{Duration, Instant};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::path::PathBuf;

/// Which way a frame goes: from interface a to b, or back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB = 0,
    BtoA = 1,
}

/// Most frames one direction's delay queue holds; more are counted as
/// `queue_overflow` and dropped (a memory bound for long delays at high rates).
pub const MAX_QUEUED_FRAMES: usize = 200_000;

/// A frame that fails to send (the kernel's queue full) for this long is dropped.
pub const SEND_GIVE_UP: Duration = Duration::from_secs(1);

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    due: Instant,
    seq: u64,
    frame: Vec<u8>,
}

/// What one direction really did, beside the injector's decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirCounters {
    /// Frames handed to the kernel on the far interface.
    pub frames_forwarded: u64,
    pub bytes_forwarded: u64,
    /// Frames the kernel refused to send (or kept refusing for [`SEND_GIVE_UP`]).
    pub send_errors: u64,
    /// Frames dropped because the delay queue held [`MAX_QUEUED_FRAMES`].
    pub queue_overflow: u64,
    /// Frames larger than the receive buffer (not forwarded).
    pub truncated: u64,
    /// Frames the kernel dropped before the relay read them (PACKET_STATISTICS).
    pub rx_kernel_drops: u64,
}

#[derive(Debug)]
struct DirState {
    inj: FaultInjector,
    queue: BinaryHeap<Reverse<Pending>>,
    counters: DirCounters,
}

/// The relay's decisions: two injectors and their delay queues. Pure logic
/// over (time, frame): no clock, no I/O.
#[derive(Debug)]
pub struct RelayCore {
    dirs: [DirState; 2],
    seq: u64,
}

impl RelayCore {
    /// Direction a→b uses `seed`, b→a `seed + 1`.
    pub fn new(cfg: FaultConfig, seed: u64) -> RelayCore {
        let dir = |s: u64| DirState {
            inj: FaultInjector::new(cfg.clone(), s),
            queue: BinaryHeap::new(),
            counters: DirCounters::default(),
        };
        RelayCore {
            dirs: [dir(seed), dir(seed.wrapping_add(1))],
            seq: 0,
        }
    }

    /// A frame arrived at `now` going `dir`: the injector decides its fate,
    /// surviving copies join the delay queue.
    pub fn offer(&mut self, dir: Dir, now: Instant, frame: Vec<u8>) {
        let DirState {
            inj,
            queue,
            counters,
        } = &mut self.dirs[dir as usize];
        let seq = &mut self.seq;
        inj.send(now, frame, &mut |due, f| {
            if queue.len() >= MAX_QUEUED_FRAMES {
                counters.queue_overflow += 1;
                return;
            }
            *seq += 1;
            queue.push(Reverse(Pending {
                due,
                seq: *seq,
                frame: f,
            }));
        });
    }

    /// A frame too large for the receive buffer arrived: counted, not offered.
    pub fn truncated(&mut self, dir: Dir) {
        self.dirs[dir as usize].counters.truncated += 1;
    }

    /// The earliest due time of any queued frame.
    pub fn next_due(&self) -> Option<Instant> {
        self.dirs
            .iter()
            .filter_map(|d| d.queue.peek().map(|p| p.0.due))
            .min()
    }

    /// The next frame of `dir` due at or before `now` (it stays queued until
    /// [`sent`](Self::sent) or [`failed`](Self::failed)), with its due time.
    pub fn front_due(&self, dir: Dir, now: Instant) -> Option<(Instant, &[u8])> {
        match self.dirs[dir as usize].queue.peek() {
            Some(Reverse(p)) if p.due <= now => Some((p.due, &p.frame)),
            _ => None,
        }
    }

    /// The front frame of `dir` left: counted as forwarded.
    pub fn sent(&mut self, dir: Dir) {
        let d = &mut self.dirs[dir as usize];
        if let Some(Reverse(p)) = d.queue.pop() {
            d.counters.frames_forwarded += 1;
            d.counters.bytes_forwarded += p.frame.len() as u64;
        }
    }

    /// The front frame of `dir` could not be sent: dropped and counted.
    pub fn failed(&mut self, dir: Dir) {
        let d = &mut self.dirs[dir as usize];
        if d.queue.pop().is_some() {
            d.counters.send_errors += 1;
        }
    }

    /// Frames waiting in `dir`'s delay queue.
    pub fn queued(&self, dir: Dir) -> usize {
        self.dirs[dir as usize].queue.len()
    }

    pub fn stats(&self, dir: Dir) -> &FaultStats {
        self.dirs[dir as usize].inj.stats()
    }

    pub fn counters(&self, dir: Dir) -> &DirCounters {
        &self.dirs[dir as usize].counters
    }

    fn counters_mut(&mut self, dir: Dir) -> &mut DirCounters {
        &mut self.dirs[dir as usize].counters
    }
}

/// What the relay is asked to do.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Interface a (the lab: `imp-e`, the engine's side).
    pub a: String,
    /// Interface b (the lab: `imp-l`, Linux's side).
    pub b: String,
    pub seed: u64,
    pub impairment: Impairment,
    /// Where the JSON report goes on exit (written atomically: temp file + rename).
    pub report: Option<PathBuf>,
    /// Created once both sockets are bound, so a starter knows the relay runs.
    pub ready_file: Option<PathBuf>,
}

/// One direction of the report.
#[derive(Debug, Clone, Serialize)]
pub struct DirReport {
    pub from: String,
    pub to: String,
    pub seed: u64,
    /// The injector's decisions.
    pub stats: FaultStats,
    #[serde(flatten)]
    pub counters: DirCounters,
    /// Frames still queued (delayed) when the relay stopped.
    pub left_queued: u64,
}

/// What the relay did, written on exit.
#[derive(Debug, Clone, Serialize)]
pub struct RelayReport {
    pub seed: u64,
    pub impairment: Impairment,
    pub seconds: f64,
    /// Both directions together.
    pub frames_forwarded: u64,
    pub a_to_b: DirReport,
    pub b_to_a: DirReport,
}

fn report_of(cfg: &RelayConfig, core: &RelayCore, seconds: f64) -> RelayReport {
    let dir = |d: Dir, from: &str, to: &str, seed: u64| DirReport {
        from: from.to_string(),
        to: to.to_string(),
        seed,
        stats: *core.stats(d),
        counters: *core.counters(d),
        left_queued: core.queued(d) as u64,
    };
    let a_to_b = dir(Dir::AtoB, &cfg.a, &cfg.b, cfg.seed);
    let b_to_a = dir(Dir::BtoA, &cfg.b, &cfg.a, cfg.seed.wrapping_add(1));
    RelayReport {
        seed: cfg.seed,
        impairment: cfg.impairment.clone(),
        seconds,
        frames_forwarded: a_to_b.counters.frames_forwarded + b_to_a.counters.frames_forwarded,
        a_to_b,
        b_to_a,
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}

fn io_err(what: String, e: io::Error) -> LabError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => LabError::NeedsRoot(format!("{what}: {e}")),
        _ => LabError::Io { what, err: e },
    }
}

/// Receive buffer: larger than any frame of a 9000-byte MTU, and than most GSO frames.
const RX_BUF: usize = 65_536 + 64;
/// Frames read from one socket per loop turn before sending what is due.
const RX_BATCH: usize = 64;
/// Longest sleep: bounds how late a stop request is noticed.
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// Runs the relay until SIGTERM/SIGINT/SIGHUP (or [`sys::request_stop`]),
/// then writes and returns the report.
pub fn run(cfg: &RelayConfig) -> Result<RelayReport, LabError> {
    sys::install_stop_handler().map_err(|e| io_err("sigaction".into(), e))?;
    let mut socks = [
        PacketSocket::open(&cfg.a).map_err(|e| io_err(format!("relay socket on {}", cfg.a), e))?,
        PacketSocket::open(&cfg.b).map_err(|e| io_err(format!("relay socket on {}", cfg.b), e))?,
    ];
    let fault = cfg.impairment.fault_config();
    let mut core = RelayCore::new(fault, cfg.seed);
    if let Some(p) = &cfg.ready_file {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| io_err(format!("write {}", p.display()), e))?;
    }
    let started = sys::now();
    let mut buf = vec![0u8; RX_BUF];
    let mut fatal: Option<LabError> = None;
    while !sys::stop_requested() {
        // Receive: a bounded batch from each side.
        for (i, sock) in socks.iter().enumerate() {
            let dir = if i == 0 { Dir::AtoB } else { Dir::BtoA };
            for _ in 0..RX_BATCH {
                match sock.recv(&mut buf) {
                    Ok(n) if n > buf.len() => core.truncated(dir),
                    Ok(n) => core.offer(dir, sys::now(), buf[..n].to_vec()),
                    Err(e) if would_block(&e) => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => break,
                    Err(e) => {
                        fatal = Some(io_err(format!("recv on {}", sock.ifname()), e));
                        break;
                    }
                }
            }
        }
        if fatal.is_some() {
            break;
        }
        // Send whatever is due, in due order per direction.
        let now = sys::now();
        let mut blocked = [false, false];
        for (dir, out) in [(Dir::AtoB, 1usize), (Dir::BtoA, 0usize)] {
            while let Some((due, frame)) = core.front_due(dir, now) {
                match socks[out].send(frame) {
                    Ok(()) => core.sent(dir),
                    Err(e) if would_block(&e) => {
                        if now.saturating_duration_since(due) > SEND_GIVE_UP {
                            core.failed(dir);
                            continue;
                        }
                        blocked[out] = true;
                        break;
                    }
                    Err(_) => core.failed(dir),
                }
            }
        }
        // Sleep until the next due frame, new input, or room to send.
        let now = sys::now();
        let sleep = if blocked.iter().any(|&b| b) {
            Duration::from_micros(200)
        } else {
            match core.next_due() {
                Some(t) => t.saturating_duration_since(now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            }
        };
        if !sleep.is_zero() {
            let fds = [(socks[0].fd(), blocked[0]), (socks[1].fd(), blocked[1])];
            if let Err(e) = sys::wait(&fds, sleep) {
                fatal = Some(io_err("ppoll".into(), e));
                break;
            }
        }
    }
    core.counters_mut(Dir::AtoB).rx_kernel_drops = socks[0].kernel_drops();
    core.counters_mut(Dir::BtoA).rx_kernel_drops = socks[1].kernel_drops();
    let seconds = sys::now().saturating_duration_since(started).as_secs_f64();
    let report = report_of(cfg, &core, seconds);
    if let Some(path) = &cfg.report {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| io_err(format!("write report {}", path.display()), e))?;
    }
    match fatal {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(i: u64) -> Vec<u8> {
        let mut f = vec![0u8; 100];
        f[..8].copy_from_slice(&i.to_be_bytes());
        f
    }

    /// Feeds `n` frames each way, 100 µs apart, draining due frames as it
    /// goes; returns the delivered frame ids per direction and the core.
    fn drive(cfg: FaultConfig, seed: u64, n: u64) -> ([Vec<u64>; 2], RelayCore) {
        let mut core = RelayCore::new(cfg, seed);
        let mut out = [Vec::new(), Vec::new()];
        let mut t = Instant::from_millis(1000);
        let drain = |core: &mut RelayCore, now: Instant, out: &mut [Vec<u64>; 2]| {
            for dir in [Dir::AtoB, Dir::BtoA] {
                while let Some((due, f)) = core.front_due(dir, now) {
                    assert!(due <= now);
                    out[dir as usize].push(u64::from_be_bytes(f[..8].try_into().unwrap()));
                    core.sent(dir);
                }
            }
        };
        for i in 0..n {
            core.offer(Dir::AtoB, t, frame(i));
            core.offer(Dir::BtoA, t, frame(i));
            drain(&mut core, t, &mut out);
            t += Duration::from_micros(100);
        }
        drain(&mut core, t + Duration::from_secs(10), &mut out);
        (out, core)
    }

    #[test]
    fn no_impairment_forwards_everything_in_order() {
        let (out, core) = drive(FaultConfig::default(), 1, 500);
        for d in &out {
            assert_eq!(d, &(0..500).collect::<Vec<_>>());
        }
        assert_eq!(core.counters(Dir::AtoB).frames_forwarded, 500);
        assert_eq!(core.counters(Dir::BtoA).bytes_forwarded, 500 * 100);
        assert_eq!(core.next_due(), None);
    }

    #[test]
    fn same_seed_same_decisions_other_seed_others() {
        let cfg = FaultConfig {
            loss: 0.2,
            duplicate: 0.05,
            reorder: 0.1,
            reorder_delay: Duration::from_millis(2),
            jitter: Duration::from_micros(300),
            ..FaultConfig::default()
        };
        let (a, ca) = drive(cfg.clone(), 7, 2000);
        let (b, cb) = drive(cfg.clone(), 7, 2000);
        let (c, _) = drive(cfg, 8, 2000);
        assert_eq!(a, b);
        assert_eq!(ca.stats(Dir::AtoB), cb.stats(Dir::AtoB));
        assert_ne!(a, c);
        // The two directions use different seeds, so they differ too.
        assert_ne!(a[0], a[1]);
        let s = ca.stats(Dir::AtoB);
        assert!(s.dropped > 300 && s.dropped < 500, "20% of 2000: {s:?}");
        assert!(s.reordered > 0 && s.duplicated > 0);
        assert_eq!(s.frames_delivered, ca.counters(Dir::AtoB).frames_forwarded);
        assert_eq!(s.frames_seen, 2000);
        // Reordering really happened: the delivered ids are not sorted.
        assert!(a[0].windows(2).any(|w| w[0] > w[1]));
    }

    #[test]
    fn delay_holds_frames_until_due() {
        let cfg = FaultConfig {
            delay: Duration::from_millis(20),
            ..FaultConfig::default()
        };
        let mut core = RelayCore::new(cfg, 1);
        let t0 = Instant::from_millis(5000);
        core.offer(Dir::AtoB, t0, frame(1));
        assert!(core.front_due(Dir::AtoB, t0).is_none());
        assert!(core
            .front_due(Dir::AtoB, t0 + Duration::from_millis(19))
            .is_none());
        assert_eq!(core.next_due(), Some(t0 + Duration::from_millis(20)));
        let (due, f) = core
            .front_due(Dir::AtoB, t0 + Duration::from_millis(20))
            .unwrap();
        assert_eq!(due, t0 + Duration::from_millis(20));
        assert_eq!(f, &frame(1)[..]);
        core.sent(Dir::AtoB);
        assert_eq!(core.counters(Dir::AtoB).frames_forwarded, 1);
    }

    #[test]
    fn rate_limit_spaces_frames() {
        // 8 Mbit/s: a 100-byte frame plus 24 bytes overhead takes 124 µs.
        let cfg = FaultConfig {
            bandwidth_bps: 8_000_000,
            ..FaultConfig::default()
        };
        let mut core = RelayCore::new(cfg, 1);
        let t0 = Instant::from_millis(1);
        for i in 0..3 {
            core.offer(Dir::BtoA, t0, frame(i));
        }
        let mut dues = Vec::new();
        while let Some((due, _)) = core.front_due(Dir::BtoA, t0 + Duration::from_secs(1)) {
            dues.push(due);
            core.sent(Dir::BtoA);
        }
        assert_eq!(dues.len(), 3);
        assert_eq!(dues[1] - dues[0], Duration::from_micros(124));
        assert_eq!(dues[2] - dues[1], Duration::from_micros(124));
    }

    #[test]
    fn failed_and_truncated_frames_are_counted() {
        let mut core = RelayCore::new(FaultConfig::default(), 3);
        let t = Instant::from_millis(1);
        core.offer(Dir::AtoB, t, frame(1));
        core.truncated(Dir::AtoB);
        core.failed(Dir::AtoB);
        let c = core.counters(Dir::AtoB);
        assert_eq!((c.send_errors, c.truncated, c.frames_forwarded), (1, 1, 0));
        assert_eq!(core.queued(Dir::AtoB), 0);
    }
}
