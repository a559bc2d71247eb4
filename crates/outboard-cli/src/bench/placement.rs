//! Where a two-engine bench's processes run: `--pin` of `bench latency` and
//! `bench throughput`, and what the scheduler chose when nothing was pinned.
//!
//! Both benches run two engines (A with the server application, B with the
//! client) and two applications. On a machine with few CPUs each
//! application shares a CPU with an engine, and which one decides much:
//! beside its own engine, the engine's writes into the board are in the
//! application's cache and its wake-ups come from the same CPU; beside the
//! other side's engine, every line the application touches crosses cores and
//! every wake-up is an interrupt to the other CPU (docs/PERFORMANCE.md,
//! "The daemon's two blocking modes are two placements" and "The 64 KiB
//! efficiency ratio is placement"). Left to itself the scheduler settles in
//! one or the other for the whole run, so unpinned runs report which one
//! they were in ([`Observed`]).

use clap::ValueEnum;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Pin {
    None,
    Beside,
    Crosswise,
}

impl Pin {
    pub fn name(self) -> &'static str {
        match self {
            Pin::None => "none",
            Pin::Beside => "beside",
            Pin::Crosswise => "crosswise",
        }
    }
}

/// The CPUs of `--pin`: engines A and B (their one shard each), the server
/// application (attached to A: `bench latency`'s echo, `bench
/// throughput`'s sink) and the client (attached to B: the ping, the source).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Placement {
    pub engine_a: usize,
    pub engine_b: usize,
    pub server: usize,
    pub client: usize,
}

/// `--pin`'s CPUs among the ones this process may run on (`allowed`, in
/// order): None for `none`; an error with fewer than two.
pub fn placement(pin: Pin, allowed: &[usize]) -> Result<Option<Placement>, String> {
    if pin == Pin::None {
        return Ok(None);
    }
    let (&c0, &c1) = match allowed {
        [a, b, ..] => (a, b),
        _ => return Err(format!("--pin {} needs two CPUs this process may run on; it has {}", pin.name(), allowed.len())),
    };
    let (server, client) = if pin == Pin::Beside { (c0, c1) } else { (c1, c0) };
    Ok(Some(Placement { engine_a: c0, engine_b: c1, server, client }))
}

/// A peer's `--cpu N` arguments (none without a CPU).
pub fn cpu_flag(cpu: Option<usize>) -> Vec<String> {
    cpu.map_or(Vec::new(), |c| vec!["--cpu".to_string(), c.to_string()])
}

/// Where the processes ran during a point, pinned or not: the CPU each
/// engine's busiest thread was seen on most ([`CpuWatch`]) and the one each
/// application was (it samples its own every 64 KiB it moves), with how
/// often the application moved. `None` where the kernel did not say.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Observed {
    /// "beside", "crosswise", "engines on one CPU", "applications on one
    /// CPU" or "other" (see [`Observed::kind`]); with no engines (Linux's
    /// side) "applications on one CPU" or "apart"; "unknown" where a CPU
    /// is missing.
    pub kind: &'static str,
    pub engine_a: Option<usize>,
    pub engine_b: Option<usize>,
    pub server: Option<usize>,
    pub client: Option<usize>,
    pub server_migrations: Option<u64>,
    pub client_migrations: Option<u64>,
}

impl Observed {
    pub fn new(
        engines: [Option<usize>; 2],
        server: (Option<usize>, Option<u64>),
        client: (Option<usize>, Option<u64>),
    ) -> Observed {
        let mut o = Observed {
            kind: "",
            engine_a: engines[0],
            engine_b: engines[1],
            server: server.0,
            client: client.0,
            server_migrations: server.1,
            client_migrations: client.1,
        };
        o.kind = o.kind();
        o
    }

    /// The same applications' CPUs with the engines' (named again).
    pub fn with_engines(self, engines: [Option<usize>; 2]) -> Observed {
        Observed::new(engines, (self.server, self.server_migrations), (self.client, self.client_migrations))
    }

    /// The placement these CPUs make: each application with its own
    /// engine ("beside"), each with the other side's ("crosswise"), or
    /// neither.
    pub fn kind(&self) -> &'static str {
        if let (None, None, Some(s), Some(c)) = (self.engine_a, self.engine_b, self.server, self.client) {
            return if s == c { "applications on one CPU" } else { "apart" };
        }
        let (Some(a), Some(b), Some(s), Some(c)) = (self.engine_a, self.engine_b, self.server, self.client) else {
            return "unknown";
        };
        if a == b {
            "engines on one CPU"
        } else if s == c {
            "applications on one CPU"
        } else if (s, c) == (a, b) {
            "beside"
        } else if (s, c) == (b, a) {
            "crosswise"
        } else {
            "other"
        }
    }
}

/// Watches where processes' busiest threads (engines' shards) run while a
/// point runs: every 5 ms, the CPU of each one that ran since the last look;
/// [`CpuWatch::finish`] gives the CPU each was seen on most. (An engine's
/// CPU after the point says little: idle, it sleeps and may wake anywhere.)
pub struct CpuWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Option<usize>>>>,
}

impl CpuWatch {
    pub fn start(pids: Vec<u32>) -> CpuWatch {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-cpu-watch".into())
            .spawn(move || {
                let mut last: Vec<Option<u64>> = vec![None; pids.len()];
                let mut seen: Vec<std::collections::BTreeMap<usize, u32>> = vec![Default::default(); pids.len()];
                while !halt.load(Ordering::Relaxed) {
                    for (k, &pid) in pids.iter().enumerate() {
                        if let Some((time, cpu)) = busiest_thread(pid) {
                            if last[k].is_some_and(|t| time > t) {
                                *seen[k].entry(cpu).or_default() += 1;
                            }
                            last[k] = Some(time);
                        }
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                seen.iter().map(|m| m.iter().max_by_key(|(_, n)| **n).map(|(c, _)| *c)).collect()
            })
            .ok();
        CpuWatch { stop, thread }
    }

    /// The CPU each process's busiest thread ran on most, in `start`'s order.
    pub fn finish(mut self) -> Vec<Option<usize>> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for CpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The run time (ns) and the last CPU of process `pid`'s busiest thread
/// (most run time: an engine's shard), from `/proc/PID/task/*/schedstat`
/// (nanoseconds; `stat`'s ticks are too coarse for a 5 ms look) and
/// `/proc/PID/task/*/stat`.
fn busiest_thread(pid: u32) -> Option<(u64, usize)> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut best: Option<(u64, usize)> = None;
    for e in dir.flatten() {
        let ran = std::fs::read_to_string(e.path().join("schedstat")).ok().and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        let cpu = std::fs::read_to_string(e.path().join("stat")).ok().and_then(|s| stat_cpu(&s));
        let (Some(ran), Some(cpu)) = (ran, cpu) else { continue };
        if best.is_none_or(|(t, _)| ran > t) {
            best = Some((ran, cpu));
        }
    }
    best
}

/// The last CPU (field 39) of one `stat` line. The command name (field 2)
/// may hold spaces and parentheses: fields are counted from after its last ')'.
fn stat_cpu(stat: &str) -> Option<usize> {
    // The field after the name is field 3 (state).
    stat.get(stat.rfind(')')? + 1..)?.split_whitespace().nth(39 - 3)?.parse().ok()
}

/// The calling thread's CPU now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes nothing and returns the CPU or -1.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// How often the calling thread has moved between CPUs
/// (`se.nr_migrations` of `/proc/thread-self/sched`; None where the kernel
/// does not show it).
pub fn migrations() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    s.lines()
        .find(|l| l.trim_start().starts_with("se.nr_migrations"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    // A benchmark is the imperative shell: its test reads the wall clock.
    #![allow(clippy::disallowed_methods)]

    use super::*;

    #[test]
    fn pin_places_each_application_beside_its_engine_or_the_other() {
        assert_eq!(placement(Pin::None, &[0, 1]), Ok(None));
        assert_eq!(
            placement(Pin::Beside, &[2, 5, 7]),
            Ok(Some(Placement { engine_a: 2, engine_b: 5, server: 2, client: 5 })),
            "the server attaches to A, the client to B"
        );
        assert_eq!(placement(Pin::Crosswise, &[2, 5]), Ok(Some(Placement { engine_a: 2, engine_b: 5, server: 5, client: 2 })));
    }

    #[test]
    fn pin_on_fewer_than_two_cpus_is_refused_with_the_count() {
        let e = placement(Pin::Beside, &[3]).unwrap_err();
        assert!(e.contains("--pin beside needs two CPUs") && e.contains("it has 1"), "{e}");
        assert!(placement(Pin::None, &[3]).is_ok(), "no pinning asked: one CPU will do");
    }

    #[test]
    fn observed_cpus_name_their_placement() {
        let k = |a, b, s, c| Observed::new([Some(a), Some(b)], (Some(s), Some(0)), (Some(c), None)).kind;
        assert_eq!(k(0, 1, 0, 1), "beside");
        assert_eq!(k(0, 1, 1, 0), "crosswise");
        assert_eq!(k(1, 1, 0, 1), "engines on one CPU");
        assert_eq!(k(0, 1, 1, 1), "applications on one CPU");
        assert_eq!(k(0, 1, 2, 3), "other");
        assert_eq!(Observed::new([None, Some(1)], (Some(0), None), (Some(1), None)).kind, "unknown");
        let linux = |s, c| Observed::new([None, None], (Some(s), None), (Some(c), None)).kind;
        assert_eq!((linux(0, 1), linux(1, 1)), ("apart", "applications on one CPU"));
    }

    #[test]
    fn a_stat_line_gives_its_cpu_whatever_the_name() {
        // A name with spaces and a ')' of its own; processor (field 39) 3.
        let mut f: Vec<String> = (3..=52).map(|n| (n * 10).to_string()).collect();
        f[39 - 3] = "3".into();
        let line = format!("4242 (a b) c) {}", f.join(" "));
        assert_eq!(stat_cpu(&line), Some(3));
        assert_eq!(stat_cpu("4242 (short) S 1"), None, "a cut line is no answer");
        let own = std::fs::read_to_string("/proc/thread-self/stat").expect("own stat");
        assert!(stat_cpu(&own).is_some(), "{own}");
    }

    #[test]
    fn this_thread_says_where_it_runs_and_how_often_it_moved() {
        let cpu = current_cpu().expect("sched_getcpu");
        assert!(outboard_engine::cpu::allowed().contains(&cpu));
        // Linux shows se.nr_migrations with CONFIG_SCHED_DEBUG (Debian's and Ubuntu's kernels do).
        if std::path::Path::new("/proc/thread-self/sched").exists() {
            assert!(migrations().is_some(), "{:?}", std::fs::read_to_string("/proc/thread-self/sched"));
        }
        assert!(busiest_thread(std::process::id()).is_some());
    }

    #[test]
    fn the_watch_sees_a_busy_process_on_a_cpu_it_may_use() {
        // This test process, busy for 100 ms in its busiest thread (this one).
        let watch = CpuWatch::start(vec![std::process::id()]);
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        let mut x = 0u64;
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let cpus = watch.finish();
        assert_eq!(cpus.len(), 1);
        let cpu = cpus[0].expect("seen running");
        assert!(outboard_engine::cpu::allowed().contains(&cpu), "{cpu}");
    }
}
