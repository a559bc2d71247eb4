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

use std::time::{Duration, Instant};
use support::cases::{run_lines, CasesRig, Nft};
use support::netns::skip_unless_root;

const BASE: u16 = 30000;

#[test]
fn shim_error_cases_match_linux() {
    if skip_unless_root("shim_error_cases_match_linux") {
        return;
    }
    let rig = CasesRig::start("errno", BASE, Duration::from_secs(40));
    let lab = &rig.lab;
    let kernel_cmd = |extra: &[&str]| rig.kernel_cmd(extra);
    let shim_cmd = |extra: &[&str]| rig.shim_cmd(extra);

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
    drop(nft);
    drop(rig);
}
