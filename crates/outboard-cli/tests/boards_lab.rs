#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! Native-API applications against Linux across the lab's veth (root):
//! an echo server on the engine serves a Linux client, and a client on the
//! engine downloads from a Linux server — `OUTBOARD_INTEROP_BYTES` each
//! (default 1 GiB), SHA-256 compared, for the Rust examples
//! (`crates/outboard-api/examples`) and the C examples (`examples/c`).
//! The applications run outside the namespaces: they reach the engine
//! through its board socket in the run directory, not the network.

mod support;

use outboard_lab::LabConfig;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::engine::EngineProc;
use support::netns::{lab, lab_name, ns_command, skip_unless_root};
use support::{example, json_line, output_within, script, OUTBOARD};

/// One application: a program, and whether it takes the server as `IP PORT`
/// (the C examples) rather than `IP:PORT` (the Rust ones).
struct AppCmd {
    program: PathBuf,
    split_addr: bool,
}

/// `{"bytes": N, "sha256": "…"}` (Rust examples) or `bytes=N sha256=HEX` (C examples).
fn result_of(out: &str) -> (u64, String) {
    if let Some(line) = out.lines().rev().find(|l| l.starts_with("bytes=")) {
        let mut it = line.split_whitespace();
        let n = it.next().and_then(|w| w.strip_prefix("bytes=")).and_then(|v| v.parse().ok()).expect("bytes=");
        let h = it.next().and_then(|w| w.strip_prefix("sha256=")).expect("sha256=").to_string();
        return (n, h);
    }
    let v = json_line(out);
    (v["bytes"].as_u64().expect("bytes"), v["sha256"].as_str().expect("sha256").to_string())
}

/// A lab and its engine, dual-stack when `ipv6` (the engine fd77::2/64,
/// ready once its IPv6 addresses passed duplicate-address detection).
fn lab_and_engine(name: &str, ipv6: bool) -> (outboard_lab::Lab, EngineProc) {
    let lab = lab(&LabConfig { ipv6, ..LabConfig::new(name) });
    let extra: &[&str] = if ipv6 { &["--addr", "fd77::2/64"] } else { &[] };
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_xdp", extra);
    if ipv6 {
        let (st, ready) = e.poll_stat(Duration::from_secs(10), Duration::from_millis(100), |s| {
            s["ipv6"]["addresses"].as_array().is_some_and(|a| !a.is_empty() && a.iter().all(|x| x.as_str().unwrap_or("").contains("preferred")))
        });
        assert!(ready.is_some(), "IPv6 addresses never became preferred: {}", st["ipv6"]);
    }
    (lab, e)
}

/// Echo server on the engine; Linux's client sends `n` bytes and checks the
/// echo, over IPv6 when `ipv6` (the server's listener takes both families).
fn serve_linux_client(tag: &str, server: AppCmd, ipv6: bool) {
    let name = lab_name(tag);
    let (lab, e) = lab_and_engine(&name, ipv6);
    let target = if ipv6 { lab.engine_addr6().expect("IPv6 lab").to_string() } else { lab.engine_addr().to_string() };
    let n = if ipv6 { support::interop_bytes().min(256 << 20) } else { support::interop_bytes() };
    let limit = Duration::from_secs(60 + n / (8 << 20));
    let mut srv = Command::new(&server.program);
    // `cargo test` puts target dirs on LD_LIBRARY_PATH; the C examples use their rpath.
    srv.args([&e.name, "7100", "1"]).env("OUTBOARD_RUN_DIR", support::run_dir()).env_remove("LD_LIBRARY_PATH");
    let srv = std::thread::spawn(move || output_within(srv, limit, Duration::ZERO));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let o = ns_command(lab.linux_ns(), limit, 5, &["python3"])
        .args([&script("interop_echo_client.py"), &target, "7100", &n.to_string(), &limit.as_secs().to_string()])
        .output()
        .expect("client");
    let secs = t0.elapsed().as_secs_f64();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "Linux echo client: {out} {}", String::from_utf8_lossy(&o.stderr));
    let r = json_line(&out);
    assert_eq!(r["sent"].as_u64(), Some(n), "{r}");
    assert_eq!(r["received"].as_u64(), Some(n), "{r}");
    assert_eq!(r["sha256_sent"], r["sha256_received"], "echo differs: {r}");
    assert_eq!(r["ok"], true, "{r}");
    let (ok, sout, serr) = srv.join().expect("server thread");
    assert!(ok, "native-API echo server: {sout} {serr}");
    eprintln!("{tag}: {} MiB echoed through a native-API server in {secs:.1} s ({:.0} Mbit/s each way)", n >> 20, n as f64 * 8.0 / secs / 1e6);
    drop(e);
}

/// A Linux server sends `n` bytes; the engine-side client downloads and
/// hashes them (from Linux's IPv6 address when `ipv6`).
fn download_from_linux(tag: &str, client: AppCmd, ipv6: bool) {
    let name = lab_name(tag);
    let (lab, e) = lab_and_engine(&name, ipv6);
    let n = if ipv6 { support::interop_bytes().min(256 << 20) } else { support::interop_bytes() };
    let limit = Duration::from_secs(60 + n / (8 << 20));
    let bind = if ipv6 { "::" } else { "0.0.0.0" };
    let mut server = ns_command(lab.linux_ns(), limit, 5, &["python3"])
        .args([&script("interop_source_server.py"), bind, "7200", &n.to_string(), &limit.as_secs().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("Linux server");
    let mut first = String::new();
    let mut sout = BufReader::new(server.stdout.take().unwrap());
    sout.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "listening");
    let t0 = Instant::now();
    let mut c = Command::new(&client.program);
    c.arg(&e.name).env("OUTBOARD_RUN_DIR", support::run_dir()).env_remove("LD_LIBRARY_PATH");
    let server_ip: std::net::IpAddr = if ipv6 { lab.linux_addr6().expect("IPv6 lab").into() } else { lab.linux_addr().into() };
    if client.split_addr {
        c.args([server_ip.to_string(), "7200".to_string()]);
    } else {
        c.arg(std::net::SocketAddr::new(server_ip, 7200).to_string());
    }
    let (ok, cout, cerr) = output_within(c, limit, Duration::ZERO);
    let secs = t0.elapsed().as_secs_f64();
    assert!(ok, "native-API client: {cout} {cerr}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    let _ = server.wait();
    let (a, b) = (result_of(&rest), result_of(&cout));
    assert_eq!(a.0, n, "{rest}");
    assert_eq!(a, b, "downloaded bytes differ from what Linux sent");
    eprintln!("{tag}: {} MiB downloaded by a native-API client in {secs:.1} s ({:.0} Mbit/s)", n >> 20, n as f64 * 8.0 / secs / 1e6);
    drop(e);
}

fn rust(name: &str) -> AppCmd {
    AppCmd { program: example(name), split_addr: false }
}

/// The C example `name`, compiled against include/outboard.h and liboutboard.
fn c(name: &str) -> AppCmd {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let profile = Path::new(OUTBOARD).parent().expect("target dir").to_path_buf();
    let lib = [profile.clone(), profile.join("deps")]
        .into_iter()
        .find(|d| d.join("liboutboard.so").exists())
        .unwrap_or_else(|| panic!("liboutboard.so not found under {}: built by `cargo build --workspace`", profile.display()));
    let out = std::env::temp_dir().join(format!("ob-c-{}-{name}", std::process::id()));
    let o = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples/c").join(format!("{name}.c")))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-loutboard")
        .output()
        .expect("cc (install build-essential)");
    assert!(o.status.success(), "cc {name}.c: {}", String::from_utf8_lossy(&o.stderr));
    AppCmd { program: out, split_addr: true }
}

#[test]
fn c_native_server_serves_a_linux_client() {
    if skip_unless_root("c_native_server_serves_a_linux_client") {
        return;
    }
    serve_linux_client("bcs", c("echo_server"), false);
}

#[test]
fn c_native_client_downloads_from_a_linux_server() {
    if skip_unless_root("c_native_client_downloads_from_a_linux_server") {
        return;
    }
    download_from_linux("bcc", c("fetch"), false);
}

#[test]
fn rust_native_server_serves_a_linux_client() {
    if skip_unless_root("rust_native_server_serves_a_linux_client") {
        return;
    }
    serve_linux_client("brs", rust("echo_server"), false);
}

#[test]
fn rust_native_client_downloads_from_a_linux_server() {
    if skip_unless_root("rust_native_client_downloads_from_a_linux_server") {
        return;
    }
    download_from_linux("brc", rust("fetch"), false);
}

/// The Rust echo server (`Board::listen`: both families on a dual-stack
/// engine) serves Linux's client over IPv6.
#[test]
fn rust_native_server_serves_a_linux_client_over_ipv6() {
    if skip_unless_root("rust_native_server_serves_a_linux_client_over_ipv6") {
        return;
    }
    serve_linux_client("br6s", rust("echo_server"), true);
}

/// The Rust client (`Board::connect` to `[fd77::1]:7200`) downloads from
/// Linux's server over IPv6.
#[test]
fn rust_native_client_downloads_from_a_linux_server_over_ipv6() {
    if skip_unless_root("rust_native_client_downloads_from_a_linux_server_over_ipv6") {
        return;
    }
    download_from_linux("br6c", rust("fetch"), true);
}

/// The C client (`ob_engine_address6`, `ob_connect_addr` to `fd77::1`)
/// downloads from Linux's server over IPv6.
#[test]
fn c_native_client_downloads_from_a_linux_server_over_ipv6() {
    if skip_unless_root("c_native_client_downloads_from_a_linux_server_over_ipv6") {
        return;
    }
    download_from_linux("bc6c", c("fetch"), true);
}
