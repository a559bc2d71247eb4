#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! Unmodified programs over the engine through the socket shim
//! (`liboutboard_shim.so`, started with `outboard run`).
//!
//! Without root: `outboard run` itself — the exit codes and messages for a
//! missing engine, a missing shim, a bad name and a missing program, and the
//! environment it gives the program (LD_PRELOAD first, OUTBOARD_ENGINE,
//! OUTBOARD_RUN_DIR).
//!
//! As root, each test builds its own lab (ob-NAME-eng / ob-NAME-lnx, veth)
//! and starts an engine daemon (`--services none`, af_xdp) on the eng side,
//! which has no kernel address; programs on the eng side run as
//! `ip netns exec ob-NAME-eng outboard run --name ENGINE -- PROGRAM …`,
//! Linux's side as `ip netns exec ob-NAME-lnx PROGRAM …`:
//!
//! - curl under the shim downloads `OUTBOARD_SHIM_BYTES` (default 100 MiB) of
//!   random bytes from Linux's `python3 -m http.server`; SHA-256 compared.
//! - `python3 -m http.server` under the shim serves Linux's curl (8 MiB,
//!   SHA-256 compared) and wrk (no socket errors, no non-2xx).
//! - nginx (`master_process off`) under the shim: the same, with wrk -c16.
//! - redis-server under the shim: redis-benchmark SET/GET from Linux, then
//!   redis-cli SET/GET of a short and a 1 MiB value read back exactly.
//! - iperf3 both ways (JSON: no error, bytes received > 0).
//! - sockperf TCP ping-pong both ways, and UDP both ways.
//!
//! A program the test needs and cannot find fails the test (as root), with the
//! package to install (`scripts/test.sh` installs them all). Every process is
//! bounded by `timeout` and killed on drop; the lab goes down on drop.
//!
//! The lab harness (`Rig`, `Bg`, `output`, …) is `support/rig.rs`, shared with
//! `shim_runtimes.rs` (node, Java).

mod support;
#[path = "../src/bench/tools.rs"]
#[allow(dead_code)] // the PostgreSQL helpers are shim_multiprocess.rs's
mod tools;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::engine::FakeEngine;
use support::netns::{need_all, skip_unless_root};
use support::rig::{must, output, random_file, sha256, AppRig, InlineRig, Rig, STEP};
use support::{python3, size_from_env, OUTBOARD};

// ------------------------------------------------------------ `outboard run` (no root)

fn outboard_run(run_dir: &Path, args: &[&str]) -> Output {
    Command::new(OUTBOARD)
        .arg("run")
        .args(args)
        .env("OUTBOARD_RUN_DIR", run_dir)
        .env_remove("OUTBOARD_SHIM")
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run outboard")
}

fn dummy_shim(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("ob-dummy-shim-{tag}-{}.so", std::process::id()));
    std::fs::write(&p, b"not a library").unwrap();
    p
}

#[test]
fn run_without_the_engine_exits_3_and_says_how_to_start_it() {
    let dir = std::env::temp_dir().join(format!("ob-run-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dummy_shim("none");
    let o = outboard_run(
        &dir,
        &[
            "--name",
            "nobody",
            "--shim",
            shim.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "stderr: {err}");
    assert!(err.contains("no engine named \"nobody\""), "stderr: {err}");
    assert!(
        err.contains("outboard engine --name nobody"),
        "stderr: {err}"
    );
    assert!(err.contains("OUTBOARD_RUN_DIR"), "stderr: {err}");
    let _ = std::fs::remove_file(shim);
}

#[test]
fn run_without_the_shim_exits_16_and_says_how_to_build_it() {
    let fake = FakeEngine::new("noshim", "e1");
    let missing = fake.dir.join("no-such-liboutboard_shim.so");
    let o = outboard_run(
        &fake.dir,
        &[
            "--name",
            "e1",
            "--shim",
            missing.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(16), "stderr: {err}");
    assert!(
        err.contains("liboutboard_shim.so was not found"),
        "stderr: {err}"
    );
    assert!(
        err.contains("cargo build -p outboard-shim"),
        "stderr: {err}"
    );
    assert!(err.contains("--shim"), "stderr: {err}");
    // OUTBOARD_SHIM is the second place looked at.
    let o = Command::new(OUTBOARD)
        .args(["run", "--name", "e1", "--", "true"])
        .env("OUTBOARD_RUN_DIR", &fake.dir)
        .env("OUTBOARD_SHIM", &missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(16), "stderr: {err}");
    assert!(err.contains("$OUTBOARD_SHIM"), "stderr: {err}");
}

#[test]
fn run_rejects_a_bad_name_and_a_missing_command_with_2() {
    let dir = std::env::temp_dir();
    let o = outboard_run(&dir, &["--name", "a/b", "--", "true"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = outboard_run(&dir, &["--name", "x"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn run_of_a_missing_program_exits_127() {
    let fake = FakeEngine::new("noprog", "e2");
    let shim = dummy_shim("noprog");
    let o = outboard_run(
        &fake.dir,
        &[
            "--name",
            "e2",
            "--shim",
            shim.to_str().unwrap(),
            "--",
            "/nonexistent/prog-xyz",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(127), "stderr: {err}");
    assert!(err.contains("/nonexistent/prog-xyz"), "stderr: {err}");
    let _ = std::fs::remove_file(shim);
}

#[test]
fn run_puts_the_shim_first_in_ld_preload_and_names_the_engine() {
    let fake = FakeEngine::new("env", "e3");
    let shim = dummy_shim("env");
    let shim_abs = std::fs::canonicalize(&shim).unwrap();
    let o = Command::new(OUTBOARD)
        .args([
            "run",
            "--name",
            "e3",
            "--shim",
            shim.to_str().unwrap(),
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo \"$LD_PRELOAD|$OUTBOARD_ENGINE|$OUTBOARD_RUN_DIR\"; exit 7",
        ])
        .env("OUTBOARD_RUN_DIR", &fake.dir)
        .env("LD_PRELOAD", "/other/libx.so")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    // The program's exit status is the command's (exec, not spawn).
    assert_eq!(
        o.status.code(),
        Some(7),
        "stdout: {out} stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        out.trim(),
        format!(
            "{}:/other/libx.so|e3|{}",
            shim_abs.display(),
            fake.dir.display()
        ),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_file(shim);
}

// ------------------------------------------------------------ the lab (root)

/// Linux's curl fetches `/blob` from the server under the shim on `port` of `rig`
/// (it must equal `src`, and the engine must have carried it), then
/// Linux's wrk runs `conns` connections on `/small` for 3 s with no
/// error. `log` adds the server's own log to a failure.
/// What the python case needs (program, package).
const PY_HTTP_NEEDS: &[(&str, &str)] = &[
    ("curl", "curl"),
    ("wrk", "wrk"),
    ("python3", "python3"),
    ("sha256sum", "coreutils"),
];

/// What the nginx case needs (program, package).
const NGINX_NEEDS: &[(&str, &str)] = &[
    ("nginx", "nginx-light"),
    ("curl", "curl"),
    ("wrk", "wrk"),
    ("sha256sum", "coreutils"),
];

/// What the redis case needs (program, package).
const REDIS_NEEDS: &[(&str, &str)] = &[
    ("redis-server", "redis-server"),
    ("redis-benchmark", "redis-tools"),
    ("redis-cli", "redis-tools"),
];

fn serve_linux_curl_and_wrk(
    rig: &impl AppRig,
    what: &str,
    port: u16,
    src: &Path,
    conns: u32,
    log: impl Fn() -> String,
) -> tools::Wrk {
    let dst = rig.tmp().join("got");
    let url = |name: &str| format!("http://{}:{port}/{name}", rig.eip());
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &["curl", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &url("blob")],
    ));
    assert!(ok, "Linux curl from {what} failed: {out}\n{err}{}", log());
    assert_eq!(sha256(&dst), sha256(src), "what Linux's curl got from {what} differs from the file");
    let (attached, _, tx) = rig.through_engine();
    assert!(
        attached >= 1 && tx > 0,
        "the engine did not carry the file: {attached} attached, {tx} bytes sent through boards"
    );
    let c = format!("-c{conns}");
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["wrk", "-t2", &c, "-d3s", &url("small")]));
    assert!(ok, "wrk failed: {out}\n{err}{}", log());
    tools::wrk(&out, &err).unwrap_or_else(|e| panic!("{e}{}", log()))
}

/// What the curl case needs (program, package).
const CURL_NEEDS: &[(&str, &str)] = &[("curl", "curl"), ("python3", "python3"), ("sha256sum", "coreutils")];

#[test]
fn shim_curl_downloads_from_a_linux_http_server() {
    if skip_unless_root("shim_curl_downloads_from_a_linux_http_server") {
        return;
    }
    need_all(CURL_NEEDS);
    curl_downloads_from_a_linux_http_server(&Rig::up("scurl"));
}

#[test]
fn inline_curl_downloads_from_a_linux_http_server() {
    if skip_unless_root("inline_curl_downloads_from_a_linux_http_server") {
        return;
    }
    need_all(CURL_NEEDS);
    curl_downloads_from_a_linux_http_server(&InlineRig::up("icurl"));
}

fn curl_downloads_from_a_linux_http_server(rig: &impl AppRig) {
    let n = size_from_env("OUTBOARD_SHIM_BYTES", 100 << 20);
    let www = rig.tmp().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, n, 11);
    let limit = STEP + Duration::from_secs(n / (4 << 20));
    let py = python3();
    let mut srv = rig.bg(
        "linux-http",
        rig.linux_cmd(
            limit * 2,
            &[
                py,
                "-u",
                "-m",
                "http.server",
                "--bind",
                &rig.lip(),
                "8000",
                "--directory",
                www.to_str().unwrap(),
            ],
        ),
    );
    rig.wait_tcp(&rig.lip(), 8000, &mut srv);
    let dst = rig.tmp().join("got");
    let t0 = Instant::now();
    let (ok, out, err) = output(rig.shim_cmd(
        limit,
        &[
            "curl",
            "-sS",
            "--fail",
            "--max-time",
            &limit.as_secs().to_string(),
            "-o",
            dst.to_str().unwrap(),
            "-w",
            "%{size_download}",
            &format!("http://{}:8000/blob", rig.lip()),
        ],
    ));
    let secs = t0.elapsed().as_secs_f64();
    assert!(ok, "curl under the shim failed: {out}\n{err}");
    assert_eq!(
        std::fs::metadata(&dst).map(|m| m.len()).unwrap_or(0),
        n,
        "curl wrote a different size: {out}\n{err}"
    );
    assert_eq!(
        sha256(&dst),
        sha256(&src),
        "the download differs from the file served"
    );
    // (An in-process engine ended with curl; the lab's engine side has no
    // kernel address, so the download could only have gone through it.)
    if rig.engine_outlives_programs() {
        let (attached, rx, _) = rig.through_engine();
        assert!(attached >= 1 && rx >= n, "the engine did not carry the download: {attached} attached, {rx} bytes read through boards");
    }
    eprintln!(
        "shim curl: {} MiB in {secs:.1} s ({:.0} Mbit/s)",
        n >> 20,
        n as f64 * 8.0 / secs / 1e6
    );
}

#[test]
fn shim_python_http_server_serves_linux_curl_and_wrk() {
    if skip_unless_root("shim_python_http_server_serves_linux_curl_and_wrk") {
        return;
    }
    need_all(PY_HTTP_NEEDS);
    python_http_serves_linux_curl_and_wrk(&Rig::up("spy"));
}

#[test]
fn inline_python_http_server_serves_linux_curl_and_wrk() {
    if skip_unless_root("inline_python_http_server_serves_linux_curl_and_wrk") {
        return;
    }
    need_all(PY_HTTP_NEEDS);
    python_http_serves_linux_curl_and_wrk(&InlineRig::up("ipy"));
}

fn python_http_serves_linux_curl_and_wrk(rig: &impl AppRig) {
    let src = rig.random_file("blob", 8 << 20, 12);
    rig.random_file("small", 4096, 13);
    let py = python3();
    let mut srv = rig.bg(
        "shim-http",
        rig.shim_cmd(
            STEP * 2,
            &[
                py,
                "-u",
                "-m",
                "http.server",
                "--bind",
                "0.0.0.0",
                "8000",
                "--directory",
                rig.tmp().to_str().unwrap(),
            ],
        ),
    );
    rig.wait_tcp(&rig.eip(), 8000, &mut srv);
    let w = serve_linux_curl_and_wrk(rig, "the shim's http.server", 8000, &src, 8, String::new);
    srv.assert_running();
    eprintln!(
        "shim python http.server: 8 MiB byte-exact; wrk {} requests, {:.0}/s",
        w.requests, w.per_s
    );
}

#[test]
fn shim_nginx_serves_linux_curl_and_wrk() {
    if skip_unless_root("shim_nginx_serves_linux_curl_and_wrk") {
        return;
    }
    need_all(NGINX_NEEDS);
    nginx_serves_linux_curl_and_wrk(&Rig::up("sngx"));
}

#[test]
fn inline_nginx_serves_linux_curl_and_wrk() {
    if skip_unless_root("inline_nginx_serves_linux_curl_and_wrk") {
        return;
    }
    need_all(NGINX_NEEDS);
    nginx_serves_linux_curl_and_wrk(&InlineRig::up("ingx"));
}

fn nginx_serves_linux_curl_and_wrk(rig: &impl AppRig) {
    let www = rig.tmp().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, 8 << 20, 14);
    random_file(&www.join("small"), 4096, 15);
    let conf = must(tools::nginx_conf(rig.tmp(), 8080));
    let mut srv = rig.bg(
        "shim-nginx",
        rig.shim_cmd(
            STEP * 2,
            &[
                "nginx",
                "-p",
                rig.tmp().to_str().unwrap(),
                "-c",
                conf.to_str().unwrap(),
                "-g",
                "daemon off; master_process off;",
            ],
        ),
    );
    rig.wait_tcp(&rig.eip(), 8080, &mut srv);
    let errlog = || {
        let log = std::fs::read_to_string(rig.tmp().join("error.log")).unwrap_or_default();
        format!("\nnginx error.log:\n{log}")
    };
    let w = serve_linux_curl_and_wrk(rig, "nginx under the shim", 8080, &src, 16, errlog);
    srv.assert_running();
    eprintln!("shim nginx: 8 MiB byte-exact; wrk {} requests, {:.0}/s", w.requests, w.per_s);
}

#[test]
fn shim_redis_server_serves_linux_benchmark_and_cli() {
    if skip_unless_root("shim_redis_server_serves_linux_benchmark_and_cli") {
        return;
    }
    need_all(REDIS_NEEDS);
    redis_serves_linux_benchmark_and_cli(&Rig::up("sred"));
}

#[test]
fn inline_redis_server_serves_linux_benchmark_and_cli() {
    if skip_unless_root("inline_redis_server_serves_linux_benchmark_and_cli") {
        return;
    }
    need_all(REDIS_NEEDS);
    redis_serves_linux_benchmark_and_cli(&InlineRig::up("ired"));
}

fn redis_serves_linux_benchmark_and_cli(rig: &impl AppRig) {
    let cmd = tools::redis_server_cmd(6379, rig.tmp());
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut srv = rig.bg("shim-redis", rig.shim_cmd(STEP * 3, &cmd));
    srv.wait_log("Ready to accept connections");
    rig.wait_tcp(&rig.eip(), 6379, &mut srv);
    let eip = rig.eip();
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &[
            "redis-benchmark",
            "-h",
            &eip,
            "-p",
            "6379",
            "-c",
            "50",
            "-n",
            "20000",
            "-t",
            "set,get",
            "-q",
        ],
    ));
    assert!(ok, "redis-benchmark failed: {out}\n{err}");
    let rps = ["SET", "GET"].map(|t| must(tools::redis_benchmark(&out, &err, t)));
    let cli = |args: &[&str]| {
        let mut v = vec!["redis-cli", "-h", &eip, "-p", "6379"];
        v.extend_from_slice(args);
        let (ok, out, err) = output(rig.linux_cmd(STEP, &v));
        assert!(ok, "redis-cli {args:?}: {out}\n{err}");
        out
    };
    assert_eq!(cli(&["SET", "k", "v"]).trim(), "OK");
    assert_eq!(cli(&["GET", "k"]).trim_end_matches('\n'), "v");
    // A 1 MiB value (printable, so redis-cli prints it as is) there and back.
    let big: String = {
        let p = rig.random_file("big.bin", 768 << 10, 16);
        let o = Command::new("base64")
            .args(["-w0"])
            .arg(&p)
            .output()
            .expect("base64");
        let mut s = String::from_utf8(o.stdout).unwrap();
        s.truncate(1 << 20);
        s
    };
    assert_eq!(big.len(), 1 << 20);
    let bigf = rig.tmp().join("big.txt");
    std::fs::write(&bigf, &big).unwrap();
    let mut c = rig.linux_cmd(
        STEP,
        &["redis-cli", "-h", &eip, "-p", "6379", "-x", "SET", "big"],
    );
    c.stdin(File::open(&bigf).unwrap());
    let (ok, out, err) = output(c);
    assert!(
        ok && out.trim() == "OK",
        "redis-cli -x SET big (1 MiB): {out}\n{err}"
    );
    assert_eq!(cli(&["STRLEN", "big"]).trim(), (1u64 << 20).to_string());
    let back = cli(&["GET", "big"]);
    assert!(
        back.trim_end_matches('\n') == big,
        "the 1 MiB value read back differs ({} bytes back)",
        back.len()
    );
    srv.assert_running();
    eprintln!(
        "shim redis: SET {:.0}/s, GET {:.0}/s; short and 1 MiB values read back",
        rps[0], rps[1]
    );
}

#[test]
fn shim_iperf3_both_ways() {
    if skip_unless_root("shim_iperf3_both_ways") {
        return;
    }
    need_all(&[("iperf3", "iperf3")]);
    iperf3_both_ways(&Rig::up("sipf"));
}

#[test]
fn inline_iperf3_both_ways() {
    if skip_unless_root("inline_iperf3_both_ways") {
        return;
    }
    need_all(&[("iperf3", "iperf3")]);
    iperf3_both_ways(&InlineRig::up("iipf"));
}

fn iperf3_both_ways(rig: &impl AppRig) {
    // Linux client -> iperf3 server under the shim, on its default dual-stack
    // listener ([::], IPv4-mapped connections go to the engine).
    let mut srv = rig.bg(
        "shim-iperf3-server",
        rig.shim_cmd(STEP, &["iperf3", "-s", "-1", "-p", "5201", "--forceflush"]),
    );
    srv.wait_log("Server listening");
    let (_, out, err) = output(rig.linux_cmd(
        STEP,
        &["iperf3", "-c", &rig.eip(), "-p", "5201", "-t", "3", "-J"],
    ));
    let to_shim = must(tools::iperf3(&out, &err));
    let (ok, log) = srv.wait(STEP);
    assert!(ok, "iperf3 server under the shim: {log}");
    // iperf3 client under the shim -> Linux server.
    let mut srv = rig.bg(
        "linux-iperf3-server",
        rig.linux_cmd(
            STEP,
            &[
                "iperf3",
                "-s",
                "-1",
                "-B",
                &rig.lip(),
                "-p",
                "5202",
                "--forceflush",
            ],
        ),
    );
    srv.wait_log("Server listening");
    let (_, out, err) = output(rig.shim_cmd(
        STEP,
        &["iperf3", "-c", &rig.lip(), "-p", "5202", "-t", "3", "-J"],
    ));
    let from_shim = must(tools::iperf3(&out, &err));
    let (ok, log) = srv.wait(STEP);
    assert!(ok, "Linux iperf3 server: {log}");
    eprintln!(
        "shim iperf3: to the shim {} MiB ({:.2} Gbit/s); from the shim {} MiB ({:.2} Gbit/s)",
        to_shim.bytes >> 20,
        to_shim.bits_per_s / 1e9,
        from_shim.bytes >> 20,
        from_shim.bits_per_s / 1e9
    );
}

/// sockperf ping-pong both ways; `tcp` or UDP (sockperf's default).
fn sockperf_both_ways(rig: &impl AppRig, tcp: bool) {
    let proto: &[&str] = if tcp { &["--tcp"] } else { &[] };
    let mut results = Vec::new();
    for (server_on_shim, port) in [(true, "11111"), (false, "11112")] {
        let ip = if server_on_shim { rig.eip() } else { rig.lip() };
        let mut sargs = vec!["sockperf", "server"];
        sargs.extend_from_slice(proto);
        sargs.extend_from_slice(&["-i", &ip, "-p", port]);
        let mut cargs = vec!["sockperf", "ping-pong"];
        cargs.extend_from_slice(proto);
        cargs.extend_from_slice(&["-i", &ip, "-p", port, "-t", "2"]);
        let (what, sc) = if server_on_shim {
            ("shim-sockperf-server", rig.shim_cmd(STEP, &sargs))
        } else {
            ("linux-sockperf-server", rig.linux_cmd(STEP, &sargs))
        };
        let mut srv = rig.bg(what, sc);
        if tcp {
            rig.wait_tcp(&ip, port.parse().unwrap(), &mut srv);
        } else {
            std::thread::sleep(Duration::from_millis(1500));
            srv.assert_running();
        }
        let cc = if server_on_shim {
            rig.linux_cmd(STEP, &cargs)
        } else {
            rig.shim_cmd(STEP, &cargs)
        };
        let (ok, out, err) = output(cc);
        let side = if server_on_shim {
            "Linux client -> shim server"
        } else {
            "shim client -> Linux server"
        };
        assert!(ok, "sockperf {side} failed: {out}\n{err}");
        let r = must(tools::sockperf(&out, &err));
        srv.assert_running();
        results.push((side, r));
    }
    for (side, r) in results {
        eprintln!(
            "shim sockperf {} {side}: {} round trips, avg {:.1} us, p50 {:.1} us, p99 {:.1} us",
            if tcp { "TCP" } else { "UDP" },
            r.observations,
            r.avg_us,
            r.p50_us,
            r.p99_us
        );
    }
}

#[test]
fn shim_sockperf_tcp_both_ways() {
    if skip_unless_root("shim_sockperf_tcp_both_ways") {
        return;
    }
    need_all(&[("sockperf", "sockperf")]);
    sockperf_both_ways(&Rig::up("sspt"), true);
}

#[test]
fn inline_sockperf_tcp_both_ways() {
    if skip_unless_root("inline_sockperf_tcp_both_ways") {
        return;
    }
    need_all(&[("sockperf", "sockperf")]);
    sockperf_both_ways(&InlineRig::up("ispt"), true);
}

#[test]
fn shim_sockperf_udp_both_ways() {
    if skip_unless_root("shim_sockperf_udp_both_ways") {
        return;
    }
    need_all(&[("sockperf", "sockperf")]);
    sockperf_both_ways(&Rig::up("sspu"), false);
}

#[test]
fn inline_sockperf_udp_both_ways() {
    if skip_unless_root("inline_sockperf_udp_both_ways") {
        return;
    }
    need_all(&[("sockperf", "sockperf")]);
    sockperf_both_ways(&InlineRig::up("ispu"), false);
}

/// The engine's TCP under the shim through every impairment the relay has
/// (loss, duplication, reordering, corruption, each way): nginx under the
/// shim serves Linux's curl, and curl under the shim downloads from Linux's
/// http.server; both byte-exact.
#[test]
fn shim_nginx_and_curl_through_an_impaired_path() {
    if skip_unless_root("shim_nginx_and_curl_through_an_impaired_path") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("curl", "curl"), ("python3", "python3"), ("sha256sum", "coreutils")]);
    let imp = outboard_lab::Impairment {
        loss: 0.01,
        duplicate: 0.01,
        corrupt: 0.001,
        reorder: 0.05,
        reorder_delay_ms: 2.0,
        ..Default::default()
    };
    let rig = Rig::up_with("simp", imp);
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, 32 << 20, 21);
    let conf = must(tools::nginx_conf(&rig.tmp, 8080));
    let mut ngx = rig.bg(
        "shim-nginx",
        rig.shim_cmd(STEP * 3, &["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap(), "-g", "daemon off; master_process off;"]),
    );
    rig.wait_tcp(&rig.eip(), 8080, &mut ngx);
    let dst = rig.tmp.join("got-from-nginx");
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &["curl", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &format!("http://{}:8080/blob", rig.eip())],
    ));
    assert!(ok, "Linux curl from nginx under the shim, impaired path: {out}\n{err}");
    assert_eq!(sha256(&dst), sha256(&src), "nginx → Linux curl through the impairments");

    let py = python3();
    let mut srv = rig.bg(
        "linux-http",
        rig.linux_cmd(STEP * 2, &[py, "-u", "-m", "http.server", "--bind", &rig.lip(), "8000", "--directory", www.to_str().unwrap()]),
    );
    rig.wait_tcp(&rig.lip(), 8000, &mut srv);
    let dst2 = rig.tmp.join("got-from-linux");
    let (ok, out, err) = output(rig.shim_cmd(
        STEP,
        &["curl", "-sS", "--fail", "--max-time", "50", "-o", dst2.to_str().unwrap(), &format!("http://{}:8000/blob", rig.lip())],
    ));
    assert!(ok, "curl under the shim from Linux, impaired path: {out}\n{err}");
    assert_eq!(sha256(&dst2), sha256(&src), "Linux http.server → curl under the shim through the impairments");
    let (seg_in, seg_out) = (rig.engine.counter("tcp_segments_in"), rig.engine.counter("tcp_segments_out"));
    eprintln!("impaired path: 32 MiB each way byte-exact; engine TCP segments in {seg_in}, out {seg_out}");
}


/// The engine is killed (SIGKILL) under redis, nginx and Python's
/// http.server, all under the shim: for the next 5 s none of them uses more
/// than 5 % of a CPU and none writes more than a few log lines (each
/// listening socket fails once with ENETDOWN, then goes quiet). An engine of
/// the same name is started again: without being restarted themselves, all
/// three serve Linux's clients again (the shim re-attaches and re-creates
/// their listening sockets).
#[test]
fn engine_killed_under_redis_nginx_and_python_they_stay_quiet_then_serve_again() {
    if skip_unless_root("engine_killed_under_redis_nginx_and_python_they_stay_quiet_then_serve_again") {
        return;
    }
    need_all(&[
        ("redis-server", "redis-server"),
        ("redis-cli", "redis-tools"),
        ("nginx", "nginx-light"),
        ("curl", "curl"),
        ("python3", "python3"),
    ]);
    let mut rig = Rig::up("sdie");
    let eip = rig.eip();
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("small"), "served\n").unwrap();

    let redis_cmd = tools::redis_server_cmd(6379, &rig.tmp);
    let redis_cmd: Vec<&str> = redis_cmd.iter().map(String::as_str).collect();
    let mut redis = rig.bg("shim-redis", rig.shim_cmd(STEP * 3, &redis_cmd));
    redis.wait_log("Ready to accept connections");
    let conf = must(tools::nginx_conf(&rig.tmp, 8080));
    let nginx_cmd = ["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap(), "-g", "daemon off; master_process off;"];
    let mut nginx = rig.bg("shim-nginx", rig.shim_cmd(STEP * 3, &nginx_cmd));
    let www_s = www.to_str().unwrap().to_string();
    let py_cmd = [python3(), "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", &www_s];
    let mut py = rig.bg("shim-python", rig.shim_cmd(STEP * 3, &py_cmd));
    rig.wait_tcp(&eip, 6379, &mut redis);
    rig.wait_tcp(&eip, 8080, &mut nginx);
    rig.wait_tcp(&eip, 8000, &mut py);

    // One probe per server, from Linux's side: true when it answered right.
    let probe = |rig: &Rig, which: usize| -> bool {
        let (cmd, want): (Vec<String>, &str) = match which {
            0 => (["redis-cli", "-h", &eip, "-p", "6379", "PING"].map(String::from).to_vec(), "PONG"),
            1 => (["curl", "-sS", "--max-time", "3", &format!("http://{eip}:8080/small")].map(String::from).to_vec(), "served"),
            _ => (["curl", "-sS", "--max-time", "3", &format!("http://{eip}:8000/small")].map(String::from).to_vec(), "served"),
        };
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let (ok, out, _) = output(rig.linux_cmd(Duration::from_secs(10), &cmd));
        ok && out.trim() == want
    };
    let names = ["redis", "nginx", "python http.server"];
    for (i, name) in names.iter().enumerate() {
        assert!(probe(&rig, i), "{name} did not serve before the engine was killed");
    }
    let pids = [redis.program_pid(), nginx.program_pid(), py.program_pid()];
    let error_log = rig.tmp.join("error.log");
    let nginx_lines = || std::fs::read_to_string(&error_log).unwrap_or_default().lines().count();
    let logs_before = [redis.text().lines().count(), nginx_lines(), py.text().lines().count()];

    rig.kill_engine();
    // Give each a moment to find out (the shim watches the engine every 250 ms).
    std::thread::sleep(Duration::from_secs(1));
    let cpu = |pid: u32| support::proc_stat(Path::new(&format!("/proc/{pid}/stat"))).map(|(_, t)| t);
    let cpu0 = pids.map(cpu);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let cpu1 = pids.map(cpu);
    let wall = t0.elapsed().as_secs_f64();
    for (bg, _) in [(&mut redis, 0), (&mut nginx, 1), (&mut py, 2)] {
        bg.assert_running();
    }
    let logs_after = [redis.text().lines().count(), nginx_lines(), py.text().lines().count()];
    for i in 0..3 {
        let (Some(a), Some(b)) = (cpu0[i], cpu1[i]) else { panic!("{} (pid {}) is gone", names[i], pids[i]) };
        let share = (b - a) as f64 / support::clk_tck() / wall;
        let lines = logs_after[i] - logs_before[i];
        eprintln!("{} after the engine died: {:.2} % CPU over {wall:.1} s, {lines} new log lines", names[i], 100.0 * share);
        assert!(share <= 0.05, "{} used {:.2} % CPU after the engine died (limit 5 %)", names[i], 100.0 * share);
        assert!(lines <= 5, "{} wrote {lines} log lines after the engine died (a few at most)", names[i]);
    }

    rig.restart_engine();
    for (i, name) in names.iter().enumerate() {
        let t0 = Instant::now();
        while !probe(&rig, i) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{name} does not serve on the restarted engine; nginx error.log:\n{}",
                std::fs::read_to_string(&error_log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        eprintln!("{name} serves again {:.2} s after the restart was probed", t0.elapsed().as_secs_f64());
    }
    for (i, bg) in [&mut redis, &mut nginx, &mut py].into_iter().enumerate() {
        bg.assert_running();
        assert_eq!(bg.program_pid(), pids[i], "{} was not restarted", names[i]);
    }
}

/// Linux's side of the privilege-drop tests: `python3 -c MEMCACHE_CHECK HOST
/// PORT` sets 200 keys (values of 1 B to 512 KiB, seeded), reads each back
/// and prints `ok N BYTES` only if every value came back byte-exact.
const MEMCACHE_CHECK: &str = r#"
import random, socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=20)
f = s.makefile("rb")
rng = random.Random(20)
vals = {}
for i in range(200):
    n = rng.choice([1, 100, 4096, 65536, 512 * 1024]) if i % 20 == 0 else rng.randrange(1, 3000)
    v = bytes(rng.getrandbits(8) for _ in range(n)) if n < 70000 else rng.randbytes(n)
    k = "key%d" % i
    s.sendall(b"set %s 0 0 %d\r\n" % (k.encode(), n) + v + b"\r\n")
    line = f.readline()
    assert line == b"STORED\r\n", (k, line)
    vals[k] = v
total = 0
for k, v in vals.items():
    s.sendall(b"get %s\r\n" % k.encode())
    head = f.readline().split()
    assert head[0] == b"VALUE" and int(head[3]) == len(v), (k, head)
    got = f.read(len(v) + 2)
    assert got[:-2] == v, k
    assert f.readline() == b"END\r\n"
    total += len(v)
print("ok", len(vals), total, flush=True)
"#;

/// memcached started the usual way — as root with `-u nobody`, so it makes
/// its sockets after dropping to nobody — under the shim, on an engine that
/// admits nobody (`--allow-user nobody`): Linux's client sets and gets 200
/// values (up to 512 KiB) byte-exact, and the engine carried them.
#[test]
fn shim_memcached_dropping_to_nobody_serves_linux_byte_exact() {
    if skip_unless_root("shim_memcached_dropping_to_nobody_serves_linux_byte_exact") {
        return;
    }
    need_all(&[("memcached", "memcached"), ("python3", "python3")]);
    memcached_dropping_to_nobody_serves_linux_byte_exact(&Rig::up_engine_with("smc", &["--allow-user", "nobody"]));
}

/// The same with the engine inside memcached (`outboard run --inline`): its
/// `setgroups`/`setgid`/`setuid` start the engine first, while the process
/// may still open the AF_XDP socket and its control socket (started after
/// the drop, it could open neither and every socket stayed with the kernel).
#[test]
fn inline_memcached_dropping_to_nobody_serves_linux_byte_exact() {
    if skip_unless_root("inline_memcached_dropping_to_nobody_serves_linux_byte_exact") {
        return;
    }
    need_all(&[("memcached", "memcached"), ("python3", "python3")]);
    memcached_dropping_to_nobody_serves_linux_byte_exact(&InlineRig::up("imc"));
}

/// memcached as a daemon with the engine inside it (`outboard run --inline --
/// memcached -d -u nobody`): it drops to nobody, then forks, and its parent
/// exits. The link and control socket are opened as root just before the
/// drop, and the engine starts in the daemon child at its first socket
/// (before, the engine started before the drop stayed in the parent that
/// exited, and the daemon's sockets stayed with the kernel). Linux's client
/// sets and gets 200 values byte-exact; `outboard stat` answers from the
/// daemon, which runs as nobody.
#[test]
fn inline_memcached_daemonized_as_nobody_serves_linux_byte_exact() {
    if skip_unless_root("inline_memcached_daemonized_as_nobody_serves_linux_byte_exact") {
        return;
    }
    need_all(&[("memcached", "memcached"), ("python3", "python3")]);
    let rig = InlineRig::up("imd");
    let _reap = support::netns::Reaper::new(rig.lab.engine_ns());
    let daemon = &["memcached", "-d", "-u", "nobody", "-l", "0.0.0.0", "-p", "11211", "-t", "2", "-m", "64", "-U", "0"];
    let (ok, out, err) = output(rig.shim_cmd(STEP, daemon));
    assert!(ok, "memcached -d: its parent should exit 0 once the daemon forked: {out}\n{err}");
    let pid = support::netns::wait_for_pids(rig.lab.engine_ns(), STEP)[0];
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("").to_string();
    assert!(uid.split_whitespace().nth(2) == Some("65534"), "the daemon {pid} should run as nobody: {uid}");
    let eip = rig.eip();
    let t0 = Instant::now();
    let (ok, out, err) = loop {
        let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", MEMCACHE_CHECK, &eip, "11211"]));
        if ok || t0.elapsed() > Duration::from_secs(20) {
            break (ok, out, err);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(ok && out.starts_with("ok 200 "), "memcached -d under the shim: {out}\n{err}");
    let st = support::engine::stat_in(&support::run_dir(), &rig.name).expect("the daemon's engine answers stat");
    assert_eq!(st["pid"].as_u64(), Some(u64::from(pid)), "the engine runs in the daemon: {st}");
    let (attached, rx, tx) = rig.through_engine();
    assert!(attached >= 1 && rx > 0 && tx > 0, "the engine did not carry it: {attached} attached, {rx}/{tx} bytes");
    eprintln!("inline memcached -d -u nobody (pid {pid}): {}", out.trim());
}

/// A program that drops to nobody and then forks, both processes making
/// sockets (`outboard run --inline`): the engine opened before the drop
/// runs in one of them only. The child asks first and serves Linux on it;
/// the parent, asking after, is told the engine was started by another
/// process, and its socket stays with the kernel.
#[test]
fn inline_engine_opened_before_a_drop_runs_in_one_process_of_those_forked() {
    if skip_unless_root("inline_engine_opened_before_a_drop_runs_in_one_process_of_those_forked") {
        return;
    }
    need_all(&[("python3", "python3")]);
    let rig = InlineRig::up("iprep");
    let _reap = support::netns::Reaper::new(rig.lab.engine_ns());
    let program = r#"
import os, pwd, socket, sys
nobody = pwd.getpwnam("nobody")
os.setgroups([]); os.setgid(nobody.pw_gid); os.setuid(nobody.pw_uid)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", 7000)); l.listen(1)
    print("child listening", flush=True); os.write(w, b"x")
    c, _ = l.accept(); c.sendall(c.recv(100).upper()); c.close()
    sys.exit(0)  # exit(3), not _exit: the engine delivers the answer before the process ends
os.read(r, 1)
s = socket.socket(); s.bind(("0.0.0.0", 0))
print("parent bound", flush=True)
_, status = os.waitpid(pid, 0)
print("child exited", status, flush=True)
"#;
    let mut srv = rig.bg("inline-prep-fork", rig.shim_cmd(STEP, &[python3(), "-u", "-c", program]));
    srv.wait_log("parent bound");
    let client = "import socket,sys; s=socket.create_connection((sys.argv[1], 7000), timeout=20); s.sendall(b'hello'); print(s.recv(100).decode())";
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", client, &rig.eip()]));
    assert!(ok && out.trim() == "HELLO", "the child on the engine: {out}\n{err}\n{}", srv.text());
    let (ok, text) = srv.wait(STEP);
    assert!(ok && text.contains("child exited 0"), "{text}");
    assert!(text.contains("was started by another process"), "the parent was not told why: {text}");
    assert_eq!(text.matches("not on the engine").count(), 1, "the child is on the engine, the parent not: {text}");
}

fn memcached_dropping_to_nobody_serves_linux_byte_exact(rig: &impl AppRig) {
    let mut srv = rig.bg(
        "shim-memcached",
        rig.shim_cmd(STEP * 2, &["memcached", "-u", "nobody", "-l", "0.0.0.0", "-p", "11211", "-t", "2", "-m", "256", "-I", "1m", "-U", "0"]),
    );
    let eip = rig.eip();
    rig.wait_tcp(&eip, 11211, &mut srv);
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", MEMCACHE_CHECK, &eip, "11211"]));
    assert!(ok && out.starts_with("ok 200 "), "memcached under the shim: {out}\n{err}\n{}", srv.text());
    let (attached, rx, tx) = rig.through_engine();
    assert!(attached >= 1 && rx > 0 && tx > 0, "the engine did not carry it: {attached} attached, {rx}/{tx} bytes");
    for refusal in ["does not admit", "not on the engine"] {
        assert!(!srv.text().contains(refusal), "{}", srv.text());
    }
    srv.assert_running();
    eprintln!("shim memcached -u nobody: {}", out.trim());
}

/// A Python server that binds and listens as root, then drops to nobody
/// (`setgroups`, `setgid`, `setuid`) before it accepts: its engine sockets
/// survive the drop (the board was attached as root), and it echoes 4 MiB
/// from Linux byte-exact — no `--allow-user` needed.
#[test]
fn shim_python_server_dropping_privileges_after_bind_serves_linux() {
    if skip_unless_root("shim_python_server_dropping_privileges_after_bind_serves_linux") {
        return;
    }
    need_all(&[("python3", "python3")]);
    let rig = Rig::up("spdrop");
    let server = r#"
import os, pwd, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7400))
s.listen(8)
nobody = pwd.getpwnam("nobody")
os.setgroups([])
os.setgid(nobody.pw_gid)
os.setuid(nobody.pw_uid)
print("dropped to uid", os.getuid(), flush=True)
while True:
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
"#;
    let mut srv = rig.bg("shim-py-drop", rig.shim_cmd(STEP * 2, &[python3(), "-u", "-c", server]));
    srv.wait_log("dropped to uid");
    let client = r#"
import hashlib, random, socket, sys, threading
data = random.Random(7).randbytes(4 << 20)
s = socket.create_connection((sys.argv[1], 7400), timeout=20)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=send).start()
got = bytearray()
while True:
    b = s.recv(1 << 16)
    if not b:
        break
    got += b
print("ok" if bytes(got) == data else "differs", len(got), flush=True)
"#;
    let eip = rig.eip();
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", client, &eip]));
    assert!(ok && out.trim() == format!("ok {}", 4 << 20), "echo through the server that dropped privileges: {out}\n{err}\n{}", srv.text());
    let (attached, rx, _) = rig.through_engine();
    assert!(attached >= 1 && rx >= 4 << 20, "the engine did not carry it: {attached} attached, {rx} bytes");
    srv.assert_running();
}

// ------------------------------------------------------------ IPv6 (dual-stack lab)
//
// A dual-stack rig (`Rig::up_ipv6`): the engine is 10.77.0.2 and fd77::2,
// Linux 10.77.0.1 and fd77::1. Programs under the shim open AF_INET6 sockets
// with real IPv6 addresses; the engine serves them (not the kernel: the
// engine side has no kernel address, and the tests check the engine's
// counters).

/// JSON lines a background helper printed.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Linux's `interop_echo_client.py HOST PORT BYTES`: (echoed byte-exact, its output).
fn linux_echo(rig: &Rig, host: &str, port: u16, bytes: u64) -> (bool, String) {
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &[python3(), &support::script("interop_echo_client.py"), host, &port.to_string(), &bytes.to_string(), "40"],
    ));
    let exact = ok && json_lines(&out).last().is_some_and(|v| v["ok"] == true);
    (exact, format!("{out}{err}"))
}

/// Waits until the helper's log has a JSON line for which `f` holds.
fn wait_line(srv: &mut support::rig::Bg, what: &str, f: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        if let Some(v) = json_lines(&srv.text()).into_iter().find(|v| f(v)) {
            return v;
        }
        srv.assert_running();
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}: no such line in {}", srv.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An AF_INET6 server under the shim on `[::]` (IPV6_V6ONLY 0, Linux's
/// default) takes Linux's connections over IPv6 and over IPv4, echoing 4 MiB
/// byte-exact each way; getsockname/getpeername give sockaddr_in6 (IPv4
/// peers IPv4-mapped, as on Linux). With IPV6_V6ONLY 1 the same server
/// takes IPv6 only: Linux's IPv4 connect is refused.
#[test]
fn shim_ipv6_dual_stack_server_serves_linux_over_ipv6_and_ipv4() {
    if skip_unless_root("shim_ipv6_dual_stack_server_serves_linux_over_ipv6_and_ipv4") {
        return;
    }
    need_all(&[("python3", "python3")]);
    let rig = Rig::up_ipv6("s6d", outboard_lab::Impairment::default());
    let (e4, e6, l4, l6) = (rig.eip(), rig.eip6(), rig.lip(), rig.lip6());
    let server = support::script("shim_v6_server.py");
    let mut dual = rig.bg("shim-v6-dual", rig.shim_cmd(STEP * 2, &[python3(), "-u", &server, "tcp", "9000", "dual"]));
    let head = wait_line(&mut dual, "dual listening", |v| v.get("listening").is_some());
    assert_eq!((head["listening"].as_str(), head["v6only"].as_i64()), (Some("::"), Some(0)), "{head}");
    rig.wait_tcp(&e6, 9000, &mut dual);
    const N: u64 = 4 << 20;
    let (ok, out) = linux_echo(&rig, &e6, 9000, N);
    assert!(ok, "Linux → [{e6}]:9000 under the shim, over IPv6: {out}\n{}", dual.text());
    let v = wait_line(&mut dual, "the IPv6 connection", |v| v["bytes"] == N && v["peer"] == l6.as_str());
    assert_eq!(v["local"].as_str(), Some(e6.as_str()), "getsockname over IPv6: {v}");
    assert_eq!(v["accepted"].as_str(), Some(l6.as_str()), "accept's address over IPv6: {v}");
    // TCP_INFO's path MTU counts the 40-byte IPv6 header: the link's 1500, as Linux shows.
    assert_eq!(v["pmtu"].as_u64(), Some(1500), "tcpi_pmtu over IPv6: {v}");
    let (ok, out) = linux_echo(&rig, &e4, 9000, N);
    assert!(ok, "Linux → {e4}:9000 (the same [::] socket) over IPv4: {out}\n{}", dual.text());
    let mapped = |a: &str| format!("::ffff:{a}");
    let v = wait_line(&mut dual, "the IPv4 connection", |v| v["bytes"] == N && v["peer"] == mapped(&l4).as_str());
    assert_eq!(v["local"].as_str(), Some(mapped(&e4).as_str()), "getsockname of an IPv4 peer on [::]: {v}");
    assert_eq!(v["pmtu"].as_u64(), Some(1500), "tcpi_pmtu over IPv4: {v}");

    let mut only = rig.bg("shim-v6-only", rig.shim_cmd(STEP * 2, &[python3(), "-u", &server, "tcp", "9001", "v6only"]));
    let head = wait_line(&mut only, "v6only listening", |v| v.get("listening").is_some());
    assert_eq!(head["v6only"].as_i64(), Some(1), "{head}");
    rig.wait_tcp(&e6, 9001, &mut only);
    let (ok, out) = linux_echo(&rig, &e6, 9001, 1 << 20);
    assert!(ok, "IPv6 to the IPv6-only socket: {out}\n{}", only.text());
    let (ok, out) = linux_echo(&rig, &e4, 9001, 1 << 20);
    assert!(!ok && out.contains("efused"), "IPv4 to an IPV6_V6ONLY socket must be refused: {out}");
    let (attached, rx, _) = rig.through_engine();
    assert!(attached >= 2 && rx >= 2 * N, "the engine did not carry it: {attached} attached, {rx} bytes read");
    dual.assert_running();
    only.assert_running();
}

/// curl under the shim downloads 16 MiB from Linux's http.server bound to
/// its IPv6 address (`http://[fd77::1]:8000/`), byte-exact, through the engine.
#[test]
fn shim_ipv6_curl_downloads_from_a_linux_server_over_ipv6() {
    if skip_unless_root("shim_ipv6_curl_downloads_from_a_linux_server_over_ipv6") {
        return;
    }
    need_all(&[("curl", "curl"), ("python3", "python3"), ("sha256sum", "coreutils")]);
    let rig = Rig::up_ipv6("s6c", outboard_lab::Impairment::default());
    let src = rig.random_file("blob", 16 << 20, 61);
    let l6 = rig.lip6();
    let mut srv = rig.bg(
        "linux-http6",
        rig.linux_cmd(STEP * 2, &[python3(), "-u", "-m", "http.server", "--bind", &l6, "8000", "--directory", rig.tmp.to_str().unwrap()]),
    );
    rig.wait_tcp(&l6, 8000, &mut srv);
    let dst = rig.tmp.join("got6");
    let url = format!("http://[{l6}]:8000/blob");
    let (ok, out, err) = output(rig.shim_cmd(STEP, &["curl", "-6", "-g", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &url]));
    assert!(ok, "curl under the shim from {url}: {out}\n{err}\n{}", srv.text());
    assert_eq!(sha256(&dst), sha256(&src), "what curl under the shim got over IPv6 differs");
    let (_, rx, _) = rig.through_engine();
    assert!(rx >= 16 << 20, "the engine did not carry the download: {rx} bytes read through boards");
}

/// nginx under the shim with `listen [::]:8080` (nginx sets IPV6_V6ONLY on
/// such a socket) serves Linux's `curl -6` byte-exact and wrk over IPv6;
/// Linux's IPv4 connection to the port is refused, as against nginx on Linux.
#[test]
fn shim_ipv6_nginx_listen_v6_serves_linux_curl_6() {
    if skip_unless_root("shim_ipv6_nginx_listen_v6_serves_linux_curl_6") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("curl", "curl"), ("wrk", "wrk"), ("sha256sum", "coreutils")]);
    let rig = Rig::up_ipv6("s6n", outboard_lab::Impairment::default());
    let (conf, src) = nginx_v6_site(&rig, 8 << 20, 62);
    let mut srv = rig.bg(
        "shim-nginx6",
        rig.shim_cmd(STEP * 2, &["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap(), "-g", "daemon off; master_process off;"]),
    );
    let e6 = rig.eip6();
    rig.wait_tcp(&e6, 8080, &mut srv);
    let dst = rig.tmp.join("got6");
    let url = |name: &str| format!("http://[{e6}]:8080/{name}");
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["curl", "-6", "-g", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &url("blob")]));
    assert!(ok, "Linux curl -6 from nginx under the shim: {out}\n{err}");
    assert_eq!(sha256(&dst), sha256(&src), "nginx → Linux curl -6");
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["wrk", "-t2", "-c8", "-d2s", &url("small")]));
    assert!(ok, "wrk over IPv6 failed: {out}\n{err}");
    let w = must(tools::wrk(&out, &err));
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["curl", "-4", "-sS", "--max-time", "5", &format!("http://{}:8080/small", rig.eip())]));
    assert!(!ok && err.contains("(7)"), "IPv4 to nginx's [::] (ipv6only) listener must be refused: {out}\n{err}");
    srv.assert_running();
    eprintln!("shim nginx [::]: 8 MiB over IPv6 byte-exact; wrk {} requests, {:.0}/s", w.requests, w.per_s);
}

/// nginx with both `listen 8080` and `listen [::]:8080` (Debian's default
/// site has both: an AF_INET socket on 0.0.0.0 and an IPV6_V6ONLY one on
/// `::`, one port) serves Linux's curl over IPv4 and over IPv6, each
/// byte-exact.
#[test]
fn shim_nginx_listening_on_both_families_serves_linux_over_each() {
    if skip_unless_root("shim_nginx_listening_on_both_families_serves_linux_over_each") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("curl", "curl"), ("sha256sum", "coreutils")]);
    let rig = Rig::up_ipv6("s6b", outboard_lab::Impairment::default());
    let (conf, src) = nginx_v6_site(&rig, 8 << 20, 64);
    let text = std::fs::read_to_string(&conf).unwrap().replace("listen [::]:8080;", "listen 8080; listen [::]:8080;");
    std::fs::write(&conf, text).unwrap();
    let mut srv = rig.bg(
        "shim-nginx46",
        rig.shim_cmd(STEP * 2, &["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap(), "-g", "daemon off; master_process off;"]),
    );
    let errlog = || std::fs::read_to_string(rig.tmp.join("error.log")).unwrap_or_default();
    rig.wait_tcp(&rig.eip6(), 8080, &mut srv);
    for (flag, url) in [("-6", format!("http://[{}]:8080/blob", rig.eip6())), ("-4", format!("http://{}:8080/blob", rig.eip()))] {
        let dst = rig.tmp.join(format!("got{flag}"));
        let (ok, out, err) = output(rig.linux_cmd(STEP, &["curl", flag, "-g", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &url]));
        assert!(ok, "Linux curl {flag} {url}: {out}\n{err}\nnginx error.log:\n{}", errlog());
        assert_eq!(sha256(&dst), sha256(&src), "nginx → Linux curl {flag}");
    }
    srv.assert_running();
}

/// nginx's configuration with `listen [::]:8080`, and its site: `blob` of
/// `n` random bytes (returned) and `small`.
fn nginx_v6_site(rig: &Rig, n: u64, seed: u64) -> (PathBuf, PathBuf) {
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, n, seed);
    random_file(&www.join("small"), 4096, seed + 1);
    let conf = must(tools::nginx_conf(&rig.tmp, 8080));
    let text = std::fs::read_to_string(&conf).unwrap().replace("listen 8080;", "listen [::]:8080;");
    assert!(text.contains("listen [::]:8080;"), "{text}");
    std::fs::write(&conf, text).unwrap();
    (conf, src)
}

/// A UDP server under the shim on `[::]` (dual-stack) echoes Linux's
/// datagrams (1, 512 and 1472 bytes) sent over IPv6 and over IPv4;
/// recvfrom gives the sources as sockaddr_in6 (IPv4 ones mapped).
#[test]
fn shim_ipv6_udp_server_echoes_linux_over_both_families() {
    if skip_unless_root("shim_ipv6_udp_server_echoes_linux_over_both_families") {
        return;
    }
    need_all(&[("python3", "python3")]);
    let rig = Rig::up_ipv6("s6u", outboard_lab::Impairment::default());
    let mut srv = rig.bg(
        "shim-udp6",
        rig.shim_cmd(STEP * 2, &[python3(), "-u", &support::script("shim_v6_server.py"), "udp", "9002", "dual"]),
    );
    wait_line(&mut srv, "udp listening", |v| v.get("listening").is_some());
    for (host, closed) in [(rig.eip6(), "4444"), (rig.eip(), "4445")] {
        let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), &support::script("interop_udp.py"), &host, "9002", closed]));
        let v = json_lines(&out).pop().unwrap_or_default();
        assert!(ok && v["ok"] == true, "UDP echo from the shim's [::] socket to {host}: {out}\n{err}\n{}", srv.text());
    }
    let l6 = rig.lip6();
    let mapped = format!("::ffff:{}", rig.lip());
    wait_line(&mut srv, "an IPv6 source", |v| v["from"] == l6.as_str() && v["bytes"] == 1472);
    wait_line(&mut srv, "an IPv4 source, mapped", |v| v["from"] == mapped.as_str() && v["bytes"] == 1472);
    assert!(rig.engine.counter("udp_datagrams_in") >= 6, "the engine did not carry the datagrams");

    // The other way: a client under the shim sends to Linux's echo server on [fd77::1].
    let mut lsrv = rig.bg(
        "linux-udp6",
        rig.linux_cmd(STEP * 2, &[python3(), "-u", &support::script("shim_v6_server.py"), "udp", "9003", "v6only", &l6]),
    );
    wait_line(&mut lsrv, "Linux udp listening", |v| v.get("listening").is_some());
    let before = rig.engine.counter("udp_datagrams_in");
    let client = format!(
        "import os, socket, json\n\
         s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n\
         s.settimeout(2)\n\
         ok = 0\n\
         for size in (1, 512, 1232):\n\
         \x20   p = os.urandom(size)\n\
         \x20   for _ in range(5):\n\
         \x20       s.sendto(p, ('{l6}', 9003))\n\
         \x20       try:\n\
         \x20           d, src = s.recvfrom(4096)\n\
         \x20       except socket.timeout:\n\
         \x20           continue\n\
         \x20       ok += d == p and src[0] == '{l6}'\n\
         \x20       break\n\
         print(json.dumps({{'ok': ok == 3, 'local': s.getsockname()[0]}}))\n"
    );
    let (ok, out, err) = output(rig.shim_cmd(STEP, &[python3(), "-c", &client]));
    let v = json_lines(&out).pop().unwrap_or_default();
    assert!(ok && v["ok"] == true, "UDP client under the shim to [{l6}]:9003: {out}\n{err}\n{}", lsrv.text());
    assert_eq!(v["local"].as_str(), Some("::"), "{v}");
    assert!(rig.engine.counter("udp_datagrams_in") >= before + 3, "the engine did not carry the replies");
}

/// Through the seeded impairment relay (loss, duplication, reordering,
/// corruption, each way) over IPv6: nginx under the shim on `[::]` serves
/// Linux's `curl -6`, and curl under the shim downloads from Linux's
/// http.server on fd77::1; both 16 MiB byte-exact.
#[test]
fn shim_ipv6_nginx_and_curl_through_an_impaired_path() {
    if skip_unless_root("shim_ipv6_nginx_and_curl_through_an_impaired_path") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("curl", "curl"), ("python3", "python3"), ("sha256sum", "coreutils")]);
    let imp = outboard_lab::Impairment {
        loss: 0.01,
        duplicate: 0.01,
        corrupt: 0.001,
        reorder: 0.05,
        reorder_delay_ms: 2.0,
        ..Default::default()
    };
    let rig = Rig::up_ipv6("s6i", imp);
    let (conf, src) = nginx_v6_site(&rig, 16 << 20, 63);
    let mut ngx = rig.bg(
        "shim-nginx6",
        rig.shim_cmd(STEP * 3, &["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap(), "-g", "daemon off; master_process off;"]),
    );
    let (e6, l6) = (rig.eip6(), rig.lip6());
    rig.wait_tcp(&e6, 8080, &mut ngx);
    let dst = rig.tmp.join("got-from-nginx6");
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &["curl", "-6", "-g", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &format!("http://[{e6}]:8080/blob")],
    ));
    assert!(ok, "Linux curl -6 from nginx under the shim, impaired path: {out}\n{err}");
    assert_eq!(sha256(&dst), sha256(&src), "nginx → Linux curl -6 through the impairments");
    let www = rig.tmp.join("www");
    let mut srv = rig.bg(
        "linux-http6",
        rig.linux_cmd(STEP * 2, &[python3(), "-u", "-m", "http.server", "--bind", &l6, "8000", "--directory", www.to_str().unwrap()]),
    );
    rig.wait_tcp(&l6, 8000, &mut srv);
    let dst2 = rig.tmp.join("got-from-linux6");
    let (ok, out, err) = output(rig.shim_cmd(
        STEP,
        &["curl", "-6", "-g", "-sS", "--fail", "--max-time", "50", "-o", dst2.to_str().unwrap(), &format!("http://[{l6}]:8000/blob")],
    ));
    assert!(ok, "curl under the shim from Linux over IPv6, impaired path: {out}\n{err}");
    assert_eq!(sha256(&dst2), sha256(&src), "Linux http.server → curl under the shim, IPv6, through the impairments");
    let (seg_in, seg_out) = (rig.engine.counter("tcp_segments_in"), rig.engine.counter("tcp_segments_out"));
    eprintln!("impaired IPv6 path: 16 MiB each way byte-exact; engine TCP segments in {seg_in}, out {seg_out}");
}

/// iperf3 both ways over IPv6 (the server under the shim on its default
/// `[::]` listener, Linux's client to fd77::2; then the client under the
/// shim to Linux's server bound to fd77::1), 3 s each; and redis-server
/// under the shim with `--bind 0.0.0.0 ::` (an AF_INET and an IPv6-only
/// socket on one port): redis-benchmark over IPv6 clean, redis-cli
/// SET over IPv6 read back over IPv4.
#[test]
fn shim_ipv6_iperf3_both_ways_and_redis_on_both_families() {
    if skip_unless_root("shim_ipv6_iperf3_both_ways_and_redis_on_both_families") {
        return;
    }
    need_all(&[("iperf3", "iperf3"), ("redis-server", "redis-server"), ("redis-benchmark", "redis-tools"), ("redis-cli", "redis-tools")]);
    let rig = Rig::up_ipv6("s6p", outboard_lab::Impairment::default());
    let (e6, l6) = (rig.eip6(), rig.lip6());
    let mut srv = rig.bg("shim-iperf3-server6", rig.shim_cmd(STEP, &["iperf3", "-s", "-1", "-p", "5201", "--forceflush"]));
    srv.wait_log("Server listening");
    let (_, out, err) = output(rig.linux_cmd(STEP, &["iperf3", "-6", "-c", &e6, "-p", "5201", "-t", "3", "-J"]));
    let to_shim = must(tools::iperf3(&out, &err));
    let (ok, log) = srv.wait(STEP);
    assert!(ok, "iperf3 server under the shim: {log}");
    let mut srv = rig.bg("linux-iperf3-server6", rig.linux_cmd(STEP, &["iperf3", "-s", "-1", "-B", &l6, "-p", "5202", "--forceflush"]));
    srv.wait_log("Server listening");
    let (_, out, err) = output(rig.shim_cmd(STEP, &["iperf3", "-6", "-c", &l6, "-p", "5202", "-t", "3", "-J"]));
    let from_shim = must(tools::iperf3(&out, &err));
    let (ok, log) = srv.wait(STEP);
    assert!(ok, "Linux iperf3 server: {log}");

    let mut cmd = tools::redis_server_cmd(6379, &rig.tmp);
    let at = cmd.iter().position(|a| a == "0.0.0.0").expect("--bind 0.0.0.0");
    cmd.insert(at + 1, "::".to_string());
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut redis = rig.bg("shim-redis6", rig.shim_cmd(STEP * 3, &cmd));
    redis.wait_log("Ready to accept connections");
    rig.wait_tcp(&e6, 6379, &mut redis);
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["redis-benchmark", "-h", &e6, "-p", "6379", "-c", "50", "-n", "20000", "-t", "set,get", "-q"]));
    assert!(ok, "redis-benchmark over IPv6 failed: {out}\n{err}\n{}", redis.text());
    let rps = ["SET", "GET"].map(|t| must(tools::redis_benchmark(&out, &err, t)));
    let cli = |host: &str, args: &[&str]| {
        let mut v = vec!["redis-cli", "-h", host, "-p", "6379"];
        v.extend_from_slice(args);
        let (ok, out, err) = output(rig.linux_cmd(STEP, &v));
        assert!(ok, "redis-cli -h {host} {args:?}: {out}\n{err}");
        out
    };
    assert_eq!(cli(&e6, &["SET", "k6", "over-ipv6"]).trim(), "OK");
    assert_eq!(cli(&rig.eip(), &["GET", "k6"]).trim(), "over-ipv6", "redis's IPv4 socket on the same port");
    redis.assert_running();
    eprintln!(
        "shim over IPv6: iperf3 to the shim {:.2} Gbit/s, from the shim {:.2} Gbit/s; redis SET {:.0}/s GET {:.0}/s",
        to_shim.bits_per_s / 1e9,
        from_shim.bits_per_s / 1e9,
        rps[0],
        rps[1]
    );
}
