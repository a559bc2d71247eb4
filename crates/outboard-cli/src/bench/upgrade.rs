//! `outboard bench upgrade`: the blackout a Linux peer sees when the engine
//! is upgraded in place under load (root).
//!
//! A lab (veth between namespaces), the engine on af_packet (or `--link
//! af_xdp`) with the echo
//! service, and from the Linux side two connections at once: a `--bytes`
//! echo transfer (seeded bytes, checked as they come back) and a 64-byte
//! request/response loop. Two phases on the same engine and path: a
//! baseline without upgrade, then the same load with `outboard engine
//! --upgrade` run `--upgrades` times in its middle. Each phase reports the
//! longest gap between two reads of the transfer and the slowest round trip
//! of the loop; the upgrade phase also the engine's own pause and how many
//! connections each upgrade handed over. Exit 1 when a byte differs, a
//! connection fails or an upgrade does not happen.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::lab_engine::EngineProc;
use clap::Args;
use outboard_lab::{sys, Lab, LabConfig};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct UpgradeArgs {
    /// Bytes echoed through each phase (at least 1 MiB).
    #[arg(long, default_value = "1GiB", value_parser = crate::args::parse_size)]
    pub bytes: u64,
    /// Upgrades in the upgrade phase, spread over it (1 to 10).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub upgrades: u32,
    /// The engine's link kind on the lab's veth.
    #[arg(long, default_value = "af_packet", value_parser = ["af_packet", "af_xdp"])]
    pub link: String,
    /// Lab name (default: `bu` and this process's id).
    #[arg(long)]
    pub lab_name: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct Phase {
    pub upgrades: usize,
    pub bytes: u64,
    pub seconds: f64,
    /// Longest wait between two reads of the echo transfer.
    pub transfer_max_gap_ms: f64,
    pub requests: u64,
    pub rr_max_ms: f64,
    /// The engine's pause at each upgrade (old engine stopped → new engine's first turn).
    pub pause_ms: Vec<f64>,
    /// Connections each upgrade handed over.
    pub handed_over: Vec<u64>,
    /// Frames the kernel dropped for a full receive ring during the phase
    /// (the ring fills while the engine pauses).
    pub rx_kernel_drops: u64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub machine: String,
    pub link: String,
    pub baseline: Phase,
    pub upgrade: Phase,
}

pub fn main(a: &UpgradeArgs) -> ExitCode {
    if a.bytes < 1 << 20 {
        eprintln!("outboard bench upgrade: --bytes {}: must be at least 1 MiB", a.bytes);
        return ExitCode::from(2);
    }
    if sys::euid() != 0 {
        eprintln!("outboard bench upgrade: needs root (network namespaces, the engine's link)");
        return ExitCode::from(10);
    }
    let name = a.lab_name.clone().unwrap_or_else(|| super::lab_name("bu"));
    if let Err(e) = outboard_lab::validate_name(&name) {
        eprintln!("outboard bench upgrade: {e}");
        return ExitCode::from(2);
    }
    let _ = sys::install_stop_handler();
    let lab = match Lab::up(&LabConfig::new(&name)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("outboard bench upgrade: lab {name}: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let tmp = std::env::temp_dir().join(format!("outboard-bench-upgrade-{}", std::process::id()));
    let result = std::fs::create_dir_all(&tmp)
        .map_err(|e| format!("create {}: {e}", tmp.display()))
        .and_then(|_| run(&lab, a, &tmp));
    let _ = std::fs::remove_dir_all(&tmp);
    let down = lab.teardown();
    super::finish("upgrade", &name, result, down, a.json, print_table)
}

fn run(lab: &Lab, a: &UpgradeArgs, tmp: &Path) -> Result<Report, String> {
    let engine_name = format!("{}-e", lab.name());
    let link = format!("{}:{}", a.link, lab.engine_iface());
    let cidr = format!("{}/{}", lab.engine_addr(), lab.engine_prefix());
    let mut engine = EngineProc::start(lab.engine_ns(), &link, &cidr, "echo", engine_name.clone(), tmp, tmp.join("engine.log"), &[])?;
    let server = SocketAddr::new(lab.engine_addr().into(), 7);
    let mut baseline = phase(lab, server, a.bytes, &mut |_| Ok(()))?;
    let d0 = kernel_drops(&engine)?;
    baseline.rx_kernel_drops = d0;
    let mut drops = 0u64;
    let mut first = true;
    let every = 1.0 / f64::from(a.upgrades + 1);
    let mut n = 0u32;
    let mut pauses = Vec::new();
    let mut handed = Vec::new();
    let upgrade = phase(lab, server, a.bytes, &mut |progress| {
        if n < a.upgrades && progress >= every * f64::from(n + 1) {
            n += 1;
            // Counted per engine process: the old one's before it goes.
            drops += kernel_drops(&engine)?.saturating_sub(if first { d0 } else { 0 });
            first = false;
            let (new, pause, conns) = upgrade_once(lab, &engine_name, tmp, n)?;
            let old = std::mem::replace(&mut engine, new);
            old.wait_gone(Duration::from_secs(10))?;
            pauses.push(pause);
            handed.push(conns);
        }
        Ok(())
    })?;
    if n < a.upgrades {
        return Err(format!("only {n} of {} upgrades ran before the transfer ended (give more --bytes)", a.upgrades));
    }
    drops += kernel_drops(&engine)?.saturating_sub(if first { d0 } else { 0 });
    engine.stop();
    Ok(Report {
        machine: machine(),
        link,
        baseline,
        upgrade: Phase { upgrades: pauses.len(), pause_ms: pauses, handed_over: handed, rx_kernel_drops: drops, ..upgrade },
    })
}

/// `outboard engine --upgrade NAME` in the engine's namespace: the new
/// engine, its pause and the connections it took, once its log says so.
fn upgrade_once(lab: &Lab, name: &str, run_dir: &Path, n: u32) -> Result<(EngineProc, f64, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
    let log = run_dir.join(format!("engine-up{n}.log"));
    let f = std::fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let f2 = f.try_clone().map_err(|e| format!("dup log: {e}"))?;
    let child = Command::new("ip")
        .args(["netns", "exec", lab.engine_ns()])
        .arg(exe)
        .args(["engine", "--upgrade", name])
        .env("OUTBOARD_RUN_DIR", run_dir)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .map_err(|e| format!("start the upgrade: {e}"))?;
    let mut e = EngineProc::adopt(child, name.to_string(), run_dir, log);
    let t0 = Instant::now();
    loop {
        let text = e.log_text();
        if let Some(line) = text.lines().find(|l| l.contains("engine_upgraded")) {
            let field = |k: &str| line.split_whitespace().find_map(|kv| kv.strip_prefix(k).map(|v| v.trim_matches('"').to_string()));
            let pause = field("pause_ms=").and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
            let conns = field("connections=").and_then(|v| v.parse().ok()).unwrap_or(0);
            return Ok((e, pause, conns));
        }
        if let Some(st) = e.exited() {
            return Err(format!("upgrade {n} exited ({st}): {}", text.trim_end()));
        }
        if t0.elapsed() > Duration::from_secs(20) || sys::stop_requested() {
            return Err(format!("upgrade {n}: no engine_upgraded line in 20 s: {}", text.trim_end()));
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `f` in a thread that has entered network namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> Result<T, String> + Send + 'static) -> thread::JoinHandle<Result<T, String>> {
    let path = format!("/var/run/netns/{ns}");
    thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
        // SAFETY: setns(2) on an fd we own; it changes only this thread's namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        f()
    })
}

/// The seeded byte at stream offset `o`.
fn byte_at(o: u64) -> u8 {
    (o.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// One phase: the echo transfer and the loop from the Linux side, `tick`
/// called with the transfer's progress (0..1) every few milliseconds.
fn phase(lab: &Lab, server: SocketAddr, bytes: u64, tick: &mut dyn FnMut(f64) -> Result<(), String>) -> Result<Phase, String> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let got = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let (g, d) = (got.clone(), done.clone());
    let transfer = in_netns(lab.linux_ns(), move || {
        let s = TcpStream::connect_timeout(&server, Duration::from_secs(5)).map_err(|e| format!("connect {server}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        let mut w = s.try_clone().map_err(|e| e.to_string())?;
        let writer = thread::spawn(move || -> Result<(), String> {
            let mut buf = vec![0u8; 256 << 10];
            let mut o = 0u64;
            while o < bytes {
                let n = (bytes - o).min(buf.len() as u64) as usize;
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = byte_at(o + i as u64);
                }
                w.write_all(&buf[..n]).map_err(|e| format!("send at {o}: {e}"))?;
                o += n as u64;
            }
            w.shutdown(Shutdown::Write).map_err(|e| e.to_string())
        });
        let mut r = &s;
        let mut buf = vec![0u8; 1 << 20];
        let (mut o, mut gap, mut last) = (0u64, Duration::ZERO, Instant::now());
        loop {
            let n = r.read(&mut buf).map_err(|e| format!("echo read at {o}: {e}"))?;
            let now = Instant::now();
            if n == 0 {
                break;
            }
            gap = gap.max(now - last);
            last = now;
            if let Some(i) = buf[..n].iter().enumerate().position(|(i, b)| *b != byte_at(o + i as u64)) {
                return Err(format!("the echo differs at byte {}", o + i as u64));
            }
            o += n as u64;
            g.store(o, Ordering::Relaxed);
        }
        d.store(true, Ordering::Relaxed);
        writer.join().map_err(|_| "the writer panicked".to_string())??;
        if o != bytes {
            return Err(format!("{o} of {bytes} bytes came back"));
        }
        Ok(gap)
    });
    let d = done.clone();
    let rr = in_netns(lab.linux_ns(), move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5)).map_err(|e| format!("connect {server}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        let (mut n, mut worst) = (0u64, Duration::ZERO);
        let mut back = [0u8; 64];
        while !d.load(Ordering::Relaxed) {
            let req = [(n % 251) as u8; 64];
            let a = Instant::now();
            s.write_all(&req).map_err(|e| format!("request {n}: {e}"))?;
            s.read_exact(&mut back).map_err(|e| format!("answer {n}: {e}"))?;
            worst = worst.max(a.elapsed());
            if back != req {
                return Err(format!("answer {n} differs"));
            }
            n += 1;
        }
        Ok((n, worst))
    });
    while !transfer.is_finished() {
        if sys::stop_requested() {
            return Err("interrupted".into());
        }
        tick(got.load(Ordering::Relaxed) as f64 / bytes as f64)?;
        thread::sleep(Duration::from_millis(2));
    }
    let gap = transfer.join().map_err(|_| "the transfer thread panicked".to_string())??;
    done.store(true, Ordering::Relaxed);
    let (requests, worst) = rr.join().map_err(|_| "the loop thread panicked".to_string())??;
    Ok(Phase {
        upgrades: 0,
        bytes,
        seconds: t0.elapsed().as_secs_f64(),
        transfer_max_gap_ms: gap.as_secs_f64() * 1e3,
        requests,
        rr_max_ms: worst.as_secs_f64() * 1e3,
        pause_ms: Vec::new(),
        handed_over: Vec::new(),
        rx_kernel_drops: 0,
    })
}

/// The engine's count of frames the kernel dropped for a full ring.
fn kernel_drops(e: &EngineProc) -> Result<u64, String> {
    Ok(e.stat()?.link.counters.get("rx_kernel_drops").copied().unwrap_or(0))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    format!("{cpu}, {} CPUs", thread::available_parallelism().map_or(0, |n| n.get()))
}

fn print_table(r: &Report) {
    println!("outboard bench upgrade — {} ({}), echo service, Linux TCP client", r.link, r.machine);
    println!(
        "{:<10} {:>9} {:>8} {:>16} {:>10} {:>12} {:>11}  upgrades: pause ms (connections)",
        "phase", "MiB", "s", "transfer gap ms", "requests", "slowest ms", "ring drops"
    );
    for (what, p) in [("baseline", &r.baseline), ("upgrade", &r.upgrade)] {
        let ups: Vec<String> = p.pause_ms.iter().zip(&p.handed_over).map(|(ms, c)| format!("{ms:.2} ({c})")).collect();
        println!(
            "{what:<10} {:>9} {:>8.2} {:>16.2} {:>10} {:>12.2} {:>11}  {}",
            p.bytes >> 20,
            p.seconds,
            p.transfer_max_gap_ms,
            p.requests,
            p.rr_max_ms,
            p.rx_kernel_drops,
            if ups.is_empty() { "-".to_string() } else { ups.join(", ") }
        );
    }
}
