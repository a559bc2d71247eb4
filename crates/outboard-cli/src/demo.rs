//! `outboard demo`: two engine processes on a shared-memory fabric, no root.
//!
//! The demo starts an engine with the echo service on `fabric:demo-PID`, then
//! a second engine process (`outboard fetch`) that connects to it, sends a
//! seeded byte stream and checks that what comes back is byte-identical
//! (SHA-256). Both engines impair what they send through the fabric's
//! seeded fault injector (loss, duplication, reordering, corruption, delay),
//! so TCP's recovery is exercised between two real processes.

use crate::args::{self, keep_text, parse_probability};
use clap::Args;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Bytes to send (and receive back; at least 1).
    #[arg(long, default_value = "64MiB", value_parser = args::nonzero_size())]
    pub bytes: u64,
    /// Seed of the fabric's faults (the server uses SEED, the client SEED+1).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Congestion controller: newreno or cubic.
    #[arg(long, default_value = "cubic", value_parser = keep_text(|s: &str| s.parse::<outboard_tcp::CcKind>()))]
    pub cc: String,
    /// Fault knobs of both engines' transmit paths: loss and corruption 0% to 25%
    /// (together too), reordering and duplication 0% to 100%, delay 0 to 1000 ms.
    #[arg(long, default_value = "1%", value_parser = keep_text(args::loss()))]
    pub loss: String,
    #[arg(long, default_value = "2%", value_parser = keep_text(args::probability()))]
    pub reorder: String,
    #[arg(long, default_value = "0.5%", value_parser = keep_text(args::probability()))]
    pub duplicate: String,
    #[arg(long, default_value = "0.1%", value_parser = keep_text(args::loss()))]
    pub corrupt: String,
    #[arg(long, default_value = "0.5", value_parser = keep_text(args::delay_ms()))]
    pub delay_ms: String,
}

pub fn demo(a: &DemoArgs) -> ExitCode {
    // Each flag was checked when parsed; their sum is checked here, before anything starts.
    let p = |s: &str| parse_probability(s).unwrap_or(1.0);
    if let Err(e) = args::check_loss(p(&a.loss), p(&a.corrupt)) {
        eprintln!("outboard: {e}");
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("outboard: cannot find my own executable: {e}");
            return ExitCode::from(1);
        }
    };
    let pid = std::process::id();
    let fabric = format!("fabric:demo-{pid}");
    let faults = |seed: u64| -> Vec<String> {
        [
            ("--loss", a.loss.clone()),
            ("--reorder", a.reorder.clone()),
            ("--duplicate", a.duplicate.clone()),
            ("--corrupt", a.corrupt.clone()),
            ("--delay-ms", a.delay_ms.clone()),
            ("--seed", seed.to_string()),
            ("--cc", a.cc.clone()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
    };
    println!("Outboard demo: two engine processes on the shared-memory fabric {fabric} (no root).");
    println!(
        "Each impairs what it sends: loss {}, reordering {}, duplication {}, corruption {}, delay {} ms (seeds {} and {}).",
        a.loss, a.reorder, a.duplicate, a.corrupt, a.delay_ms, a.seed, a.seed.wrapping_add(1)
    );
    let name = format!("demo-{pid}-server");
    let mut server = match Command::new(&exe)
        .args(["engine", "--link", &fabric, "--addr", "10.0.0.1/24", "--services", "echo", "--name", &name])
        .args(["--log-level", "warn"])
        .args(faults(a.seed))
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("outboard: cannot start the server engine: {e}");
            return ExitCode::from(1);
        }
    };
    // The server binds its fabric port before the client's first ARP; a short
    // pause is enough, and ARP retries cover a slow start.
    std::thread::sleep(Duration::from_millis(200));
    println!("engine 1 (pid {}): 10.0.0.1 on {fabric}, TCP echo on port 7", server.id());
    println!("engine 2: 10.0.0.2 connects to 10.0.0.1:7, sends {} bytes and verifies the echo\n", a.bytes);
    let status = Command::new(&exe)
        .args(["fetch", "--link", &fabric, "--addr", "10.0.0.2/24", "--connect", "10.0.0.1:7"])
        .args(["--send", &a.bytes.to_string(), "--expect-echo", "--timeout-s", "300", "--log-level", "warn"])
        .args(faults(a.seed.wrapping_add(1)))
        .stdin(Stdio::null())
        .status();
    // SAFETY-free stop: SIGTERM lets the server engine stop between turns.
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
    match status {
        Ok(s) if s.success() => {
            println!("\nDemo passed: every byte came back intact across two processes and a faulty fabric.");
            ExitCode::SUCCESS
        }
        Ok(s) => {
            eprintln!("\nDemo FAILED (client exit {s}).");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("outboard: cannot start the client engine: {e}");
            ExitCode::from(1)
        }
    }
}
