//! The socket shim's error cases against Linux's, across the lab's veth
//! (root): `tests/shim/errno_cases.c` runs once on the kernel's stack (in
//! the Linux namespace) and once under the shim (in the engine's namespace,
//! through `outboard run`), both against the same kernel peer
//! (`tests/shim/errno_peer.c`); every line (an errno, a SIGPIPE count, a
//! poll result) must be the same. The keepalive case makes the peer go
//! silent with an nftables rule after the connection is up: both must end
//! in ETIMEDOUT.
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use outboard_lab::LabConfig;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::cases::{compile, run_lines, Nft};
use support::engine::{ChildGuard, EngineProc};
use support::netns::{lab, lab_name, ns_command, skip_unless_root};
use support::{run_dir, shim_lib, OUTBOARD};

const BASE: u16 = 30000;

#[test]
fn shim_error_cases_match_linux() {
    if skip_unless_root("shim_error_cases_match_linux") {
        return;
    }
    let shim = shim_lib();
    let dir = std::env::temp_dir().join(format!("ob-shim-errno-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = compile("errno_cases.c", &dir);
    let peer_bin = compile("errno_peer.c", &dir);

    let name = lab_name("errno");
    let lab = lab(&LabConfig::new(&name));
    let engine = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_xdp", &["--services", "none"]);
    let lip = lab.linux_addr().to_string();

    // Killed (and reaped) when the test ends, even by a panic.
    let mut peer = ChildGuard::new(
        Command::new("ip")
            .args(["netns", "exec", lab.linux_ns()])
            .arg(&peer_bin)
            .args([&lip, &BASE.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("peer"),
        Duration::ZERO,
    );
    let mut first = String::new();
    BufReader::new(peer.child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "listening");

    let kernel_cmd = |extra: &[&str]| {
        let mut c = ns_command(lab.linux_ns(), Duration::from_secs(40), 2, &[]);
        c.arg(&cases).args([&lip, &BASE.to_string()]).args(extra);
        c
    };
    let shim_cmd = |extra: &[&str]| {
        let mut c = ns_command(lab.engine_ns(), Duration::from_secs(40), 2, &[OUTBOARD, "run", "--name", &engine.name, "--shim"]);
        c
            .arg(&shim)
            .arg("--")
            .arg(&cases)
            .args([&lip, &BASE.to_string()])
            .args(extra)
            .env("OUTBOARD_RUN_DIR", run_dir());
        c
    };

    let t0 = Instant::now();
    let kernel = run_lines(kernel_cmd(&[]), || {});
    let shimmed = run_lines(shim_cmd(&[]), || {});
    eprintln!("kernel:\n  {}\nshim:\n  {}", kernel.join("\n  "), shimmed.join("\n  "));
    assert_eq!(kernel.len(), shimmed.len(), "both runs print every case");
    for (k, s) in kernel.iter().zip(&shimmed) {
        assert_eq!(k, s, "the shim's result differs from Linux's");
    }
    // Both agreeing is not enough: they must agree on the right answers.
    for want in [
        "connect_refused ECONNREFUSED",
        "nonblocking_connect_refused EINPROGRESS poll=1 out=1 err=1 so_error=ECONNREFUSED",
        "reset recv=ECONNRESET then=0",
        "nonblocking_recv EAGAIN",
        "nonblocking_accept EAGAIN",
        "bind_in_use EADDRINUSE",
        "send_after_shutdown EPIPE sigpipes=1 nosignal=EPIPE sigpipes=1",
        "recv_interrupted EINTR alarms=1",
        "recv_timeout EAGAIN",
        "connect_connected EISCONN",
        "recv_closed EBADF",
        "accept_interrupted EINTR alarms=1",
    ] {
        assert!(shimmed.iter().any(|l| l == want), "expected line {want:?}");
    }

    // ETIMEDOUT: keepalive (1 s idle, 1 s interval, 2 probes) against a peer gone silent.
    let nft = Nft { ns: lab.linux_ns(), table: "obshimerr" };
    for (what, cmd) in [("kernel", kernel_cmd(&["keepalive"])), ("shim", shim_cmd(&["keepalive"]))] {
        let t = Instant::now();
        let lines = run_lines(cmd, || nft.drop_from_port(BASE + 3));
        nft.clear();
        assert_eq!(lines, vec!["keepalive_timeout ETIMEDOUT".to_string()], "{what}");
        assert!(t.elapsed() < Duration::from_secs(20), "{what}: keepalive took {:?}", t.elapsed());
    }
    eprintln!("error cases took {:?}", t0.elapsed());
    drop(peer);
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}
