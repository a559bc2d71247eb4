#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! TCP Fast Open (RFC 7413) against Linux's TCP, through the socket shim, as
//! root in a lab of its own (ob-NAME-eng with the engine, ob-NAME-lnx with
//! Linux; see `support/rig.rs`):
//!
//! - the engine as client: Python under the shim connects three times to a
//!   Linux server that set `TCP_FASTOPEN` (with `net.ipv4.tcp_fastopen = 3`
//!   in its namespace), with `MSG_FASTOPEN` twice and `TCP_FASTOPEN_CONNECT`
//!   once. The first SYN asks for a cookie; the next two carry their data,
//!   which Linux's counter `TcpExtTCPFastOpenPassive` counts; the echo comes
//!   back byte-exact and `TCP_INFO` shows `TCPI_OPT_SYN_DATA`.
//! - the engine as server: Python under the shim sets `TCP_FASTOPEN` on its
//!   listener; a Linux client (`net.ipv4.tcp_fastopen = 1`) sends with
//!   `MSG_FASTOPEN` three times. The engine's `tcp_fastopen_passive` counts
//!   the two SYNs whose data it took; Linux's `TcpExtTCPFastOpenActive`
//!   agrees; the echo is byte-exact.

mod support;

use std::time::Duration;
use support::netns::{need_all, skip_unless_root};
use support::python3;
use support::rig::{output, AppRig, Rig, STEP};

/// Echo server: TCP_FASTOPEN 16, three connections, each read to EOF and sent back.
const SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
s.listen(16)
print("qlen", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN), flush=True)
for i in range(3):
    c, _ = s.accept()
    got = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    c.sendall(got)
    c.close()
    print("served", len(got), flush=True)
"#;

/// Client: three connections with MSG_FASTOPEN (or TCP_FASTOPEN_CONNECT for
/// the third when asked), each sends a distinct payload, half-closes, reads
/// the echo; prints whether it matched and TCP_INFO's options.
const CLIENT: &str = r#"
import socket, struct, sys, time
host, port, use_connect_opt = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
TCP_FASTOPEN_CONNECT = getattr(socket, "TCP_FASTOPEN_CONNECT", 30)  # linux/tcp.h
for i in range(3):
    data = bytes((i * 31 + k * 7) % 251 for k in range(900 + i))
    s = socket.socket()
    if i == 2 and use_connect_opt:
        s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
        assert s.getsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT) == 1
        s.connect((host, port))
        s.sendall(data)
    else:
        n = s.sendto(data, socket.MSG_FASTOPEN, (host, port))
        if n < len(data):
            s.sendall(data[n:])
    s.shutdown(socket.SHUT_WR)
    back = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        back += b
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    print("conn", i, "exact" if back == data else "MISMATCH", "options", info[5], flush=True)
    s.close()
    time.sleep(0.2)
"#;

/// Linux's TcpExt counter NAME in namespace NS (nstat -az: absolute values).
fn nstat(rig: &Rig, name: &str) -> u64 {
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["nstat", "-az", name]));
    assert!(ok, "nstat: {err}");
    out.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next().and_then(|v| v.parse().ok())).flatten()
        })
        .unwrap_or_else(|| panic!("no {name} in nstat output: {out}"))
}

fn sysctl(rig: &Rig, value: &str) {
    let (ok, _, err) = output(rig.linux_cmd(STEP, &["sysctl", "-w", &format!("net.ipv4.tcp_fastopen={value}")]));
    assert!(ok, "sysctl: {err}");
}

/// Waits (bounded) until the background server printed `line`.
fn wait_for_line(srv: &mut support::rig::Bg, line: &str) {
    let t0 = std::time::Instant::now();
    while !srv.text().contains(line) {
        srv.assert_running();
        assert!(t0.elapsed() < Duration::from_secs(20), "{} never printed {line:?}: {}", srv.what, srv.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check_client_lines(out: &str) {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("conn ")).collect();
    assert_eq!(lines.len(), 3, "client output: {out}");
    for l in &lines {
        assert!(l.contains(" exact "), "not byte-exact: {out}");
    }
}

#[test]
fn rfc7413_engine_client_sends_data_in_the_syn_to_linux() {
    if skip_unless_root("rfc7413_engine_client_sends_data_in_the_syn_to_linux") {
        return;
    }
    need_all(&[("python3", "python3"), ("nstat", "iproute2")]);
    let rig = Rig::up("tfoc");
    sysctl(&rig, "3");
    let passive0 = nstat(&rig, "TcpExtTCPFastOpenPassive");
    let py = python3();
    let mut srv = rig.bg("linux-tfo-server", rig.linux_cmd(STEP, &[py, "-u", "-c", SERVER, "7701"]));
    wait_for_line(&mut srv, "qlen 16");
    let (ok, out, err) = output(rig.shim_cmd(STEP, &[py, "-u", "-c", CLIENT, &rig.lip(), "7701", "1"]));
    assert!(ok, "shim client failed: {out}\n{err}\nserver: {}", srv.text());
    check_client_lines(&out);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("conn ")).collect();
    // TCPI_OPT_SYN_DATA (32) on the connections whose SYN carried acknowledged data.
    assert!(!lines[0].ends_with(&format!("options {}", 32)), "{out}");
    for l in &lines[1..] {
        let opts: u8 = l.rsplit(' ').next().unwrap().parse().unwrap();
        assert_ne!(opts & 32, 0, "no TCPI_OPT_SYN_DATA: {out}");
    }
    let passive = nstat(&rig, "TcpExtTCPFastOpenPassive") - passive0;
    assert_eq!(passive, 2, "Linux took data in {passive} SYNs; client: {out}");
    let st = rig.engine.stat();
    assert_eq!(st["stack"]["tcp_fastopen_active"].as_u64(), Some(2), "{}", st["stack"]);
    assert_eq!(st["stack"]["tcp_fastopen_cookies_learned"].as_u64().map(|n| n >= 1), Some(true), "{}", st["stack"]);
    eprintln!("engine client: 3 connections byte-exact, 2 with data in the SYN (Linux TCPFastOpenPassive +{passive})");
}

#[test]
fn rfc7413_linux_client_sends_data_in_the_syn_to_the_engine() {
    if skip_unless_root("rfc7413_linux_client_sends_data_in_the_syn_to_the_engine") {
        return;
    }
    need_all(&[("python3", "python3"), ("nstat", "iproute2")]);
    let rig = Rig::up("tfos");
    sysctl(&rig, "1");
    let active0 = nstat(&rig, "TcpExtTCPFastOpenActive");
    let py = python3();
    let mut srv = rig.bg("shim-tfo-server", rig.shim_cmd(STEP, &[py, "-u", "-c", SERVER, "7702"]));
    // TCP_FASTOPEN reads back as set; the server listens (no probe connection:
    // it takes exactly the client's three).
    wait_for_line(&mut srv, "qlen 16");
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[py, "-u", "-c", CLIENT, &rig.eip(), "7702", "0"]));
    assert!(ok, "linux client failed: {out}\n{err}\nserver: {}", srv.text());
    check_client_lines(&out);
    let st = rig.engine.stat();
    let n = |k: &str| st["stack"][k].as_u64().unwrap_or(0);
    assert_eq!(n("tcp_fastopen_cookie_requests"), 1, "{}", st["stack"]);
    assert_eq!(n("tcp_fastopen_passive"), 2, "{}", st["stack"]);
    assert_eq!(n("tcp_fastopen_passive_fail"), 0, "{}", st["stack"]);
    let active = nstat(&rig, "TcpExtTCPFastOpenActive") - active0;
    assert_eq!(active, 2, "Linux says {active} of its SYNs' data was taken; client: {out}");
    eprintln!("engine server: 3 connections byte-exact, 2 SYNs' data taken (tcp_fastopen_passive 2, Linux TCPFastOpenActive +{active})");
}
