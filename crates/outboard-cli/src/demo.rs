//! `outboard demo`: two engine processes on a shared-memory fabric, no root.
//!
//! The demo starts an engine with the echo service on `fabric:demo-PID`, then
//! a second engine process (`outboard fetch`) that connects to it, sends a
//! seeded byte stream and checks that what comes back is byte-identical
//! (SHA-256). Both engines impair what they send through the fabric's
//! seeded fault injector (loss, duplication, reordering, corruption, delay),
//! so TCP's recovery is exercised between two real processes.

use crate::args::parse_size;
use clap::Args;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Bytes to send (and receive back).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub bytes: u64,
    /// Seed of the fabric's faults (the server uses SEED, the client SEED+1).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Congestion controller: newreno or cubic.
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// Fault knobs of both engines' transmit paths.
    #[arg(long, default_value = "1%")]
    pub loss: String,
    #[arg(long, default_value = "2%")]
    pub reorder: String,
    #[arg(long, default_value = "0.5%")]
    pub duplicate: String,
    #[arg(long, default_value = "0.1%")]
    pub corrupt: String,
    #[arg(long, default_value = "0.5")]
    pub delay_ms: String,
}

pub fn demo(a: &DemoArgs) -> ExitCode {
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
        a.loss, a.reorder, a.duplicate, a.corrupt, a.delay_ms, a.seed, a.seed + 1
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
        .args(faults(a.seed + 1))
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
