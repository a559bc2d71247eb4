#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The C examples (`examples/c/`) against `include/outboard.h` and
//! `liboutboard.so`:
//!
//! - always: every example compiles with `cc -Wall -Wextra -Werror -O2`, and
//!   `examples/c/sha256.h` agrees with the `sha2` crate;
//! - live runs against engine daemons on a shared-memory fabric (no root):
//!   `sink_server` on engine A receives 64 MiB from `source` on engine B;
//!   `fetch` on B reads from `source` listening on A. (`echo_server` against
//!   a client on an embedded engine is in `outboard-embedded`'s tests: this
//!   crate links no engine.)
//! - live message mailboxes, with engines that run the message service
//!   (`--messages`): `msg_kv_client` on B calls `msg_kv_server` on A (RPC
//!   answered in place); `qp_pingpong` bounces a counter between queue
//!   pairs on A and B.
//!
//! The harness (building, child processes, the two engines) is `support/`.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::{built, pattern, root, sha256_hex, Lab, EXAMPLES};

#[test]
fn c_examples_compile_with_warnings_as_errors() {
    let b = built();
    for name in EXAMPLES {
        assert!(b.bin.join(name).exists(), "{name} was not built");
    }
}

/// `examples/c/sha256.h` against the `sha2` crate, on lengths around the
/// padding boundaries, fed in uneven pieces.
#[test]
fn sha256_h_matches_sha2() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sha256-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = r#"
#include "sha256.h"
int main(void) {
    static uint8_t data[100003];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 131 + (i >> 9));
    size_t lens[] = {0, 1, 3, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 100003};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        sha256_t h;
        sha256_init(&h);
        for (size_t at = 0, step = 1; at < lens[k]; at += step, step = step * 3 % 97 + 1)
            sha256_update(&h, data + at, at + step > lens[k] ? lens[k] - at : step);
        char hex[65];
        sha256_final_hex(&h, hex);
        printf("%zu %s\n", lens[k], hex);
    }
    return 0;
}
"#;
    std::fs::write(dir.join("check.c"), prog).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(root().join("examples/c"))
        .arg("-o")
        .arg(dir.join("check"))
        .arg(dir.join("check.c"))
        .status()
        .expect("run cc");
    assert!(st.success(), "the sha256.h check did not compile");
    let out = Command::new(dir.join("check")).output().unwrap();
    let data: Vec<u8> = (0..100003usize).map(|i| (i * 131 + (i >> 9)) as u8).collect();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 14, "{text}");
    for line in text.lines() {
        let (len, hex) = line.split_once(' ').unwrap();
        let len: usize = len.parse().unwrap();
        assert_eq!(hex, sha256_hex(&data[..len]), "sha256.h is wrong for {len} bytes");
    }
}

/// Live: `sink_server` attached to engine A receives 64 MiB that `source`
/// attached to engine B sends through the fabric; both SHA-256 agree with
/// the pattern's.
#[test]
fn live_source_to_sink_server_64mib() {
    let _ = built();
    let lab = Lab::start("ss");
    let mut sink = lab.run("sink_server", &[&lab.a, "5001"]);
    sink.line("listening on 5001", Duration::from_secs(20));
    let n = 64usize << 20;
    let mut src = lab.run("source", &[&lab.b, "connect", "10.0.0.1", "5001", &n.to_string(), "7"]);
    let (sent, sent_sha) = src.result(Duration::from_secs(240));
    let (got, got_sha) = sink.result(Duration::from_secs(30));
    let want = sha256_hex(&pattern(7, n));
    assert_eq!((sent, sent_sha.as_str()), (n as u64, want.as_str()), "source sent something else");
    assert_eq!((got, got_sha.as_str()), (n as u64, want.as_str()), "sink_server received something else");
}

/// Live: `fetch` on engine B reads to end of stream from `source` listening on engine A.
#[test]
fn live_fetch_from_listening_source() {
    let _ = built();
    let lab = Lab::start("fs");
    let n = (3usize << 20) + 12345;
    let mut src = lab.run("source", &[&lab.a, "listen", "5002", &n.to_string(), "3"]);
    src.line("listening on 5002", Duration::from_secs(20));
    let mut fetch = lab.run("fetch", &[&lab.b, "10.0.0.1", "5002"]);
    let (got, got_sha) = fetch.result(Duration::from_secs(120));
    let (sent, sent_sha) = src.result(Duration::from_secs(30));
    let want = sha256_hex(&pattern(3, n));
    assert_eq!((sent, sent_sha.as_str()), (n as u64, want.as_str()));
    assert_eq!((got, got_sha.as_str()), (n as u64, want.as_str()));
}

/// Live over IPv6: `fetch` on engine B (`ob_engine_address6`, then
/// `ob_connect_addr` to `fd00::1`) reads to end of stream from `source`
/// listening with `ob_listen` (both families) on engine A; byte-exact.
#[test]
fn live_fetch_from_listening_source_over_ipv6() {
    let _ = built();
    let lab = Lab::start_with("f6", true);
    let n = (3usize << 20) + 777;
    let mut src = lab.run("source", &[&lab.a, "listen", "5003", &n.to_string(), "4"]);
    src.line("listening on 5003", Duration::from_secs(20));
    let mut fetch = lab.run("fetch", &[&lab.b, "fd00::1", "5003"]);
    fetch.line("engine6=fd00::2/64", Duration::from_secs(20));
    let (got, got_sha) = fetch.result(Duration::from_secs(120));
    let (sent, sent_sha) = src.result(Duration::from_secs(30));
    let want = sha256_hex(&pattern(4, n));
    assert_eq!((sent, sent_sha.as_str()), (n as u64, want.as_str()));
    assert_eq!((got, got_sha.as_str()), (n as u64, want.as_str()));
}

/// Live, message mailboxes: `msg_kv_server` binds "kv" on engine A;
/// `msg_kv_client` on engine B looks it up by name and makes 3N+2 calls
/// (N puts, N gets, a missing key, a short buffer; then N gets with 32
/// outstanding), checking every answer; the server, which answers each in
/// place, exits after exactly that many.
#[test]
fn live_msg_kv_client_and_server() {
    let _ = built();
    let lab = Lab::start_messages("kv");
    const N: usize = 1000;
    let calls = 3 * N + 2;
    let mut server = lab.run("msg_kv_server", &[&lab.a, &calls.to_string()]);
    let at = server.line("kv at ", Duration::from_secs(20));
    assert!(at.starts_with("kv at 10.0.0.1:7373/"), "the server's mailbox: {at:?}");
    let mut client = lab.run("msg_kv_client", &[&lab.b, "10.0.0.1:7373", &N.to_string()]);
    let summary = client.line("kv ok ", Duration::from_secs(120));
    let st = client.exit(Duration::from_secs(10));
    assert!(st.success(), "msg_kv_client exited with {st}; stderr:\n{}", client.stderr());
    assert!(summary.starts_with(&format!("kv ok calls={calls} puts={N} gets={N} async={N} ")), "{summary}");
    let served = server.line("served=", Duration::from_secs(20));
    let st = server.exit(Duration::from_secs(10));
    assert!(st.success(), "msg_kv_server exited with {st}; stderr:\n{}", server.stderr());
    assert_eq!(served, format!("served={calls} puts={N} gets={} keys={N} others=0", 2 * N + 2));
    eprintln!("{summary}");
}

/// Live, queue pairs: `qp_pingpong pong` on engine A, `ping` on engine B
/// with pong's address; 1000 round trips of a counter both sides check, each
/// side's sends all completed before it exits.
#[test]
fn live_qp_pingpong() {
    let _ = built();
    let lab = Lab::start_messages("qp");
    let rounds = "1000";
    let mut pong = lab.run("qp_pingpong", &["pong", &lab.a, rounds]);
    let addr = pong.line("qp ", Duration::from_secs(20))["qp ".len()..].to_string();
    assert!(addr.starts_with("10.0.0.1:7373/"), "pong's queue pair: {addr:?}");
    let mut ping = lab.run("qp_pingpong", &["ping", &lab.b, rounds, &addr]);
    let mine = ping.line("qp ", Duration::from_secs(20));
    assert!(mine.starts_with("qp 10.0.0.2:7373/"), "ping's queue pair: {mine:?}");
    let summary = ping.line("ping rounds=", Duration::from_secs(120));
    assert!(summary.starts_with(&format!("ping rounds={rounds} median_us=")), "{summary}");
    let st = ping.exit(Duration::from_secs(10));
    assert!(st.success(), "ping exited with {st}; stderr:\n{}", ping.stderr());
    assert_eq!(pong.line("pong rounds=", Duration::from_secs(20)), format!("pong rounds={rounds}"));
    let st = pong.exit(Duration::from_secs(10));
    assert!(st.success(), "pong exited with {st}; stderr:\n{}", pong.stderr());
    eprintln!("{summary}");
}

/// The SDK's key-value handler module, built by `sdk/build.sh`.
fn kv_handler_module() -> std::path::PathBuf {
    let out = built().bin.join("handlers");
    let o = Command::new(root().join("sdk/build.sh")).arg(&out).output().expect("run sdk/build.sh");
    assert!(o.status.success(), "sdk/build.sh failed:\n{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    out.join("kv.wasm")
}

/// Live, a handler through the C API: `handler_load` loads the SDK's `kv`
/// handler onto engine A (`ob_handler_load`); the unchanged `msg_kv_client`
/// on engine B finds mailbox "kv" and makes its 3N+2 calls, every answer
/// right, served by the handler with no application process on A; SIGTERM
/// makes `handler_load` unload it (`ob_handler_unload`), and a second
/// client's lookup then fails.
#[test]
fn live_handler_load_serves_msg_kv_client() {
    let _ = built();
    let module = kv_handler_module();
    let lab = Lab::start_messages("hl");
    const N: usize = 500;
    let mut loader = lab.run("handler_load", &[&lab.a, module.to_str().unwrap(), "kv"]);
    let loaded = loader.line("handler kv mailbox ", Duration::from_secs(20));
    assert!(loaded["handler kv mailbox ".len()..].parse::<u32>().is_ok(), "{loaded}");
    let mut client = lab.run("msg_kv_client", &[&lab.b, "10.0.0.1:7373", &N.to_string()]);
    let summary = client.line("kv ok ", Duration::from_secs(120));
    let st = client.exit(Duration::from_secs(10));
    assert!(st.success(), "msg_kv_client exited with {st}; stderr:\n{}", client.stderr());
    assert!(summary.starts_with(&format!("kv ok calls={} ", 3 * N + 2)), "{summary}");
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(loader.pid() as i32, libc::SIGTERM) }, 0);
    assert_eq!(loader.line("unloaded ", Duration::from_secs(20)), "unloaded kv");
    let st = loader.exit(Duration::from_secs(10));
    assert!(st.success(), "handler_load exited with {st}; stderr:\n{}", loader.stderr());
    let mut again = lab.run("msg_kv_client", &[&lab.b, "10.0.0.1:7373", "1"]);
    let st = again.exit(Duration::from_secs(30));
    assert!(!st.success(), "a client found the unloaded handler's mailbox");
    eprintln!("kv handler loaded through the C API: {summary}");
}
