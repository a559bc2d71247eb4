#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The C API of the engine in this process (`liboutboard_embedded`,
//! `include/outboard_embedded.h`):
//!
//! - a C program that names every function of `outboard.h` and
//!   `outboard_embedded.h` links against `liboutboard_embedded.so` alone and
//!   runs an embedded engine (start, attach, the engine's address, detach, stop);
//! - live: `echo_server` (C, on a daemon engine A) echoes 8 concurrent
//!   connections of a client on an embedded engine that drives the C API's
//!   functions from Rust.
//!
//! The harness (C examples, child processes, two engine daemons on a
//! fabric) is `outboard-capi`'s `tests/support`.

#[path = "../../outboard-capi/tests/support/mod.rs"]
mod support;

use std::ffi::CString;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{built, pattern, root, shared_lib, sweep_stale, Lab};

/// The functions a header declares (cbindgen puts each declaration at the
/// start of a line; comments, macros and continuation lines do not start there).
fn declared_functions(header: &str) -> Vec<String> {
    header
        .lines()
        .filter(|l| !l.starts_with([' ', '/', '#', '}']) && l.contains('('))
        .filter_map(|l| {
            let name = l[..l.find('(')?].rsplit([' ', '*']).next()?;
            name.starts_with("ob_").then(|| name.to_string())
        })
        .collect()
}

const PROGRAM: &str = r#"
#include "outboard_embedded.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef void (*any_fn)(void);
static const any_fn every[] = { EVERY };

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ob_embedded_options_t bad;
    memset(&bad, 0, sizeof bad);
    bad.link = "nonsense";
    bad.addr = "10.0.0.1/24";
    if (ob_embedded_start(&bad) != NULL || errno != EINVAL) { puts("bad options accepted"); return 1; }
    if (ob_attach("no-such-engine", NULL) != NULL || errno != ECONNREFUSED) { puts("attached to nothing"); return 1; }
    ob_embedded_options_t o;
    memset(&o, 0, sizeof o);
    o.name = "c-embedded";
    o.link = argv[1];
    o.addr = "10.0.0.1/24";
    ob_engine_t *e = ob_embedded_start(&o);
    if (!e) { printf("ob_embedded_start: errno %d\n", errno); return 1; }
    ob_attach_options_t ao = ob_attach_options_default();
    ob_board_t *b = ob_embedded_attach(e, &ao);
    if (!b) { printf("ob_embedded_attach: errno %d\n", errno); return 1; }
    if (ob_engine_addr(b) != OB_IPV4(10, 0, 0, 1) || ob_engine_alive(b) != 1) { puts("wrong engine"); return 1; }
    ob_listener_t *l = ob_listen(b, 7000, 4);
    if (!l || ob_listener_close(l) != 0) { printf("ob_listen: errno %d\n", errno); return 1; }
    /* IPv6 through the header: this engine runs none, and says so. */
    ob_addr_t a6;
    uint8_t plen = 0;
    if (ob_engine_address6(b, &a6, &plen) != -1 || errno != EAFNOSUPPORT) { puts("ob_engine_address6 on an IPv4 engine"); return 1; }
    ob_addr_t any6;
    memset(&any6, 0, sizeof any6);
    any6.family = OB_AF_INET6;
    any6.port = 7001;
    if (ob_listen_addr(b, &any6, 4, OB_LISTEN_IPV6_ONLY) != NULL || errno != EAFNOSUPPORT) { puts("an IPv6-only listener on an IPv4 engine"); return 1; }
    if (ob_listen_addr(b, &any6, 4, OB_LISTEN_IPV4_ONLY | OB_LISTEN_IPV6_ONLY) != NULL || errno != EINVAL) { puts("both family flags accepted"); return 1; }
    l = ob_listen_addr(b, &any6, 4, 0);
    if (!l || ob_listener_close(l) != 0) { printf("ob_listen_addr [::]: errno %d\n", errno); return 1; }
    /* A second engine on the fabric, and a stream between the two: its TCP
       options and TCP_INFO through the header. */
    ob_embedded_options_t o2 = o;
    o2.name = "c-embedded-2";
    o2.addr = "10.0.0.2/24";
    ob_engine_t *e2 = ob_embedded_start(&o2);
    ob_board_t *b2 = e2 ? ob_embedded_attach(e2, &ao) : NULL;
    if (!b2) { printf("second engine: errno %d\n", errno); return 1; }
    l = ob_listen(b, 7002, 4);
    ob_stream_t *c = l ? ob_connect(b2, OB_IPV4(10, 0, 0, 1), 7002) : NULL;
    ob_stream_t *s = c ? ob_accept(l) : NULL;
    if (!s) { printf("connect/accept: errno %d\n", errno); return 1; }
    ob_tcp_info_t ti;
    if (ob_tcp_info(c, NULL) != -1 || errno != EINVAL) { puts("ob_tcp_info took NULL"); return 1; }
    if (ob_tcp_info(c, &ti) != 0 || ti.state != 1 || ti.snd_mss == 0 || !(ti.options & OB_TCPI_OPT_SACK)) {
        printf("tcp_info: state %u mss %u options %u\n", ti.state, ti.snd_mss, ti.options); return 1;
    }
    if (ob_set_quickack(c, 0) != 0 || ob_tcp_info(c, &ti) != 0 || ti.interactive != 1) { puts("TCP_QUICKACK 0 did not make it interactive"); return 1; }
    if (ob_set_quickack(c, 1) != 0 || ob_tcp_info(c, &ti) != 0 || ti.interactive != 0) { puts("TCP_QUICKACK 1 left it interactive"); return 1; }
    if (ob_set_keepalive(c, 1, 0, 1000, 3) != -1 || errno != EINVAL) { puts("keep-alive idle 0 accepted"); return 1; }
    if (ob_set_keepalive(c, 1, 1000, 1000, 128) != -1 || errno != EINVAL) { puts("128 keep-alive probes accepted"); return 1; }
    if (ob_set_keepalive(c, 1, 60000, 1000, 5) != 0 || ob_set_keepalive(c, 0, 0, 0, 0) != 0) { printf("keep-alive: errno %d\n", errno); return 1; }
    if (ob_set_congestion(c, "bbr") != -1 || errno != ENOENT) { puts("an unknown congestion control accepted"); return 1; }
    if (ob_set_congestion(NULL, "reno") != -1 || errno != EINVAL) { puts("a NULL stream accepted"); return 1; }
    if (ob_set_tos(c, 256) != -1 || errno != EINVAL) { puts("TOS 256 accepted"); return 1; }
    if (ob_set_congestion(c, "reno") != 0 || ob_set_tos(c, 0x10) != 0 || ob_set_user_timeout(c, 5000) != 0) { printf("options: errno %d\n", errno); return 1; }
    /* Corked, 10 bytes wait; uncorked, they leave. */
    char got[16];
    if (ob_set_cork(c, 1) != 0 || ob_send_all(c, "0123456789", 10) != 0 || ob_set_cork(c, 0) != 0) { printf("cork: errno %d\n", errno); return 1; }
    size_t n = 0;
    while (n < 10) {
        ssize_t r = ob_recv(s, got + n, sizeof got - n);
        if (r <= 0) { printf("recv: %zd errno %d\n", r, errno); return 1; }
        n += (size_t)r;
    }
    if (n != 10 || memcmp(got, "0123456789", 10) != 0) { puts("wrong bytes"); return 1; }
    if (ob_tcp_info(s, &ti) != 0 || ti.bytes_received != 10 || ti.state != 1) { printf("server tcp_info: received %llu\n", (unsigned long long)ti.bytes_received); return 1; }
    /* The sender's figures move with the ACK (delayed, up to 200 ms). */
    for (int i = 0; i < 300 && ob_tcp_info(c, &ti) == 0 && ti.bytes_acked < 10; i++) usleep(10000);
    if (ob_tcp_info(c, &ti) != 0 || ti.cc != 0 || ti.bytes_sent != 10 || ti.bytes_acked != 10) {
        printf("client tcp_info: cc %u sent %llu acked %llu\n", ti.cc, (unsigned long long)ti.bytes_sent, (unsigned long long)ti.bytes_acked); return 1;
    }
    /* A gathered write: its pieces in order (an empty NULL one among them); bad vectors refused. */
    struct iovec v[3] = { { (void *)"ab", 2 }, { NULL, 0 }, { (void *)"cdef", 4 } };
    if (ob_sendv(c, v, 3) != 6) { printf("ob_sendv: errno %d\n", errno); return 1; }
    if (ob_sendv(c, v, -1) != -1 || errno != EINVAL) { puts("ob_sendv took a count of -1"); return 1; }
    if (ob_sendv(c, NULL, 1) != -1 || errno != EFAULT) { puts("ob_sendv took a NULL vector"); return 1; }
    struct iovec null_piece = { NULL, 3 };
    if (ob_sendv(c, &null_piece, 1) != -1 || errno != EFAULT) { puts("ob_sendv took a NULL piece of 3 bytes"); return 1; }
    if (ob_sendv(c, v, 0) != 0) { puts("ob_sendv of nothing"); return 1; }
    /* Read back scattered: 1 byte, nothing, the rest. */
    memset(got, 0, sizeof got);
    n = 0;
    while (n < 6) {
        struct iovec into[3] = { { got + n, n == 0 ? 1 : 0 }, { NULL, 0 }, { got + n + (n == 0), 6 - n - (n == 0) } };
        ssize_t r = ob_recvv(s, into, 3);
        if (r <= 0) { printf("ob_recvv after ob_sendv: %zd errno %d\n", r, errno); return 1; }
        n += (size_t)r;
    }
    if (n != 6 || memcmp(got, "abcdef", 6) != 0) { puts("wrong bytes from ob_sendv/ob_recvv"); return 1; }
    if (ob_recvv(s, NULL, 1) != -1 || errno != EFAULT) { puts("ob_recvv took a NULL vector"); return 1; }
    if (ob_close(s) != 0 || ob_close(c) != 0 || ob_listener_close(l) != 0 || ob_detach(b2) != 0 || ob_embedded_stop(e2) != 0) { puts("second teardown failed"); return 1; }
    if (ob_detach(b) != 0 || ob_embedded_stop(e) != 0) { puts("teardown failed"); return 1; }
    printf("ok functions=%zu\n", sizeof every / sizeof every[0]);
    return 0;
}
"#;

#[test]
fn c_program_links_liboutboard_embedded_alone() {
    let root = root();
    let mut names = Vec::new();
    for h in ["outboard.h", "outboard_embedded.h"] {
        names.extend(declared_functions(&std::fs::read_to_string(root.join("include").join(h)).unwrap()));
    }
    for must in ["ob_attach", "ob_eq_wait", "ob_embedded_start", "ob_embedded_stop"] {
        assert!(names.iter().any(|n| n == must), "{must} not found in the headers: {names:?}");
    }
    let lib = shared_lib("liboutboard_embedded.so", "outboard-embedded");
    sweep_stale();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("embedded-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A private copy: a concurrent cargo run cannot swap it under the program.
    std::fs::copy(&lib, dir.join("liboutboard_embedded.so")).unwrap();
    let every: Vec<String> = names.iter().map(|n| format!("(any_fn){n}")).collect();
    std::fs::write(dir.join("check.c"), PROGRAM.replace("EVERY", &every.join(", "))).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(root.join("include"))
        .arg("-o")
        .arg(dir.join("check"))
        .arg(dir.join("check.c"))
        .arg("-L")
        .arg(&dir)
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-loutboard_embedded")
        .output()
        .expect("run cc");
    assert!(out.status.success(), "the C check did not compile or link:\n{}", String::from_utf8_lossy(&out.stderr));
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let out = Command::new(dir.join("check"))
        .arg(format!("fabric:ce{}", std::process::id()))
        .env("OUTBOARD_RUN_DIR", &run_dir)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the C check failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("ok functions={}", names.len()));
}

/// The C API from Rust: liboutboard's functions (the crate `outboard`) and this crate's.
mod c {
    pub use outboard::*;
    pub use outboard_embedded::*;
    pub fn errno() -> i32 {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }
}

/// Live: `echo_server` on engine A echoes 8 concurrent connections from a
/// client on an embedded engine (10.0.0.3 on the same fabric) that uses the
/// C API's functions from Rust; every byte comes back in order.
#[test]
fn live_echo_server_many_connections() {
    const CONNS: usize = 8;
    const CHUNK: usize = 16 << 10;
    const ROUNDS: usize = 16;
    let _ = built();
    let lab = Lab::start("es");
    let mut server = lab.run("echo_server", &[&lab.a, "7007", &CONNS.to_string()]);
    server.line("listening on 7007", Duration::from_secs(20));

    let fabric = CString::new(format!("fabric:c{}es", std::process::id())).unwrap();
    let name = CString::new("es-client").unwrap();
    let addr = CString::new("10.0.0.3/24").unwrap();
    let opts = c::ob_embedded_options_t {
        name: name.as_ptr(),
        link: fabric.as_ptr(),
        addr: addr.as_ptr(),
        gateway: std::ptr::null(),
        services: std::ptr::null(),
        mtu: 0,
        control: 0,
    };
    outboard_engine::log::set_level(outboard_engine::log::Level::Warn); // the embedded engine's log
    let deadline = Instant::now() + Duration::from_secs(120);
    let left = || assert!(Instant::now() < deadline, "echo client timed out");
    unsafe {
        let engine = c::ob_embedded_start(&opts);
        assert!(!engine.is_null(), "ob_embedded_start: errno {}", c::errno());
        let mut ao = c::ob_attach_options_default();
        ao.mode = c::OB_MODE_NONBLOCKING; // bounded waits: the test polls with a deadline
        let board = c::ob_embedded_attach(engine, &ao);
        assert!(!board.is_null(), "ob_embedded_attach: errno {}", c::errno());
        let streams: Vec<*mut c::ob_stream_t> = (0..CONNS)
            .map(|k| {
                // Every other stream asks for Fast Open (the C server's
                // listener does not take it: the SYN asks for a cookie and
                // the connect completes with the handshake, as on Linux).
                let s = if k % 2 == 0 {
                    c::ob_connect(board, 0x0a00_0001, 7007)
                } else {
                    let mut to = c::ob_addr_t { family: c::OB_AF_INET, port: 7007, scope_id: 0, addr: [0; 16] };
                    to.addr[..4].copy_from_slice(&[10, 0, 0, 1]);
                    c::ob_connect_fast_open(board, &to)
                };
                assert!(!s.is_null(), "ob_connect {k}: errno {}", c::errno());
                s
            })
            .collect();
        let data: Vec<Vec<u8>> = (0..CONNS).map(|k| pattern(100 + k as u64, CHUNK * ROUNDS)).collect();
        let mut buf = vec![0u8; CHUNK];
        for r in 0..ROUNDS {
            for (k, &s) in streams.iter().enumerate() {
                let mut chunk = &data[k][r * CHUNK..(r + 1) * CHUNK];
                while !chunk.is_empty() {
                    let n = c::ob_send(s, chunk.as_ptr().cast(), chunk.len());
                    if n < 0 {
                        assert_eq!(c::errno(), libc::EAGAIN, "ob_send on {k}");
                        left();
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    chunk = &chunk[n as usize..];
                }
            }
            for (k, &s) in streams.iter().enumerate() {
                let mut got = 0;
                while got < CHUNK {
                    let n = c::ob_recv(s, buf[got..].as_mut_ptr().cast(), CHUNK - got);
                    if n < 0 {
                        assert_eq!(c::errno(), libc::EAGAIN, "ob_recv on {k}");
                        left();
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    assert!(n > 0, "connection {k} ended early");
                    got += n as usize;
                }
                assert!(buf == data[k][r * CHUNK..(r + 1) * CHUNK], "connection {k}, round {r}: wrong bytes echoed");
            }
        }
        // Everything came back: close our side, then see the server's end of stream.
        for (k, &s) in streams.iter().enumerate() {
            assert_eq!(c::ob_shutdown(s), 0, "ob_shutdown {k}");
            loop {
                let n = c::ob_recv(s, buf.as_mut_ptr().cast(), buf.len());
                if n == 0 || (n < 0 && c::errno() == libc::ECONNRESET) {
                    break;
                }
                assert!(n < 0 && c::errno() == libc::EAGAIN, "connection {k}: {n} more bytes after the echo, errno {}", c::errno());
                left();
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(c::ob_close(s), 0);
        }
        let served = server.line("served=", Duration::from_secs(30));
        assert_eq!(served, format!("served={CONNS} bytes={}", CONNS * CHUNK * ROUNDS));
        assert!(server.exit(Duration::from_secs(10)).success(), "echo_server failed: {}", server.stderr());
        assert_eq!(c::ob_detach(board), 0);
        assert_eq!(c::ob_embedded_stop(engine), 0);
    }
}
