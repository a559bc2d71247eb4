#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! Language runtimes over the engine through the socket shim, beside the C
//! programs and Python of `shim_apps.rs`, on the same lab
//! (`support::rig::Rig`: an engine daemon on the eng side of a veth pair,
//! programs under the shim there, Linux's tools on the other side). As root:
//!
//! - node (libuv: non-blocking sockets in epoll): an `http` server under the
//!   shim serves Linux's curl 5 MiB byte-exact and 200 small requests, each
//!   on a connection of its own; node's `http` client under the shim fetches
//!   5 MiB from Linux's `python3 -m http.server` byte-exact.
//! - Java (OpenJDK; NIO: a selector on epoll, threads): the JDK's
//!   `com.sun.net.httpserver.HttpServer` under the shim serves Linux's curl
//!   5 MiB byte-exact and 100 small requests; `java.net.http.HttpClient`
//!   under the shim fetches 5 MiB from Linux's http.server byte-exact. The
//!   programs are single source files run as `java File.java`; the JVM's
//!   sockets are IPv6 (dual-stack) unless told otherwise, and they are left so.
//!
//! Each server test also checks, with the engine's counters, that the engine
//! carried the bytes. A runtime the test needs and cannot find fails the test
//! (as root), naming the package (`scripts/test.sh` installs it). Every
//! process is bounded by `timeout` and stopped on drop; the lab goes down on
//! drop.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::netns::{need_all, skip_unless_root};
use support::rig::{output, random_file, sha256, Bg, AppRig, Rig, STEP};
use support::python3;

// Each test's lab tag differs in its first 5 characters (`lab_name` keeps 5):
// the tests run in parallel, each in a lab of its own.

/// Bytes of the big body each way.
const BIG: u64 = 5 << 20;

/// The small body the servers serve at `/small` (the test checks every copy).
fn small_body() -> String {
    (0..40).map(|i| format!("small body line {i:02} of outboard\n")).collect()
}

/// Linux's `python3 -m http.server` on LIP:8000 serving `www`, up.
fn linux_http_server(rig: &Rig, www: &Path) -> Bg {
    let mut srv = rig.bg(
        "linux-http",
        rig.linux_cmd(
            STEP * 2,
            &[python3(), "-u", "-m", "http.server", "--bind", &rig.lip(), "8000", "--directory", www.to_str().unwrap()],
        ),
    );
    rig.wait_tcp(&rig.lip(), 8000, &mut srv);
    srv
}

/// The server under the shim on EIP:`port`, `what`: Linux's curl gets
/// `/blob` equal to `src` (and the engine carried it: it acknowledged at
/// least that many bytes sent through a board), then `n` sequential curls
/// of `/small`, each its own connection, each the small body. Returns
/// (seconds for the big body, seconds for the small ones).
fn serve_linux_curl(rig: &Rig, srv: &mut Bg, what: &str, port: u16, src: &Path, n: usize) -> (f64, f64) {
    let eip = rig.eip();
    let dst = rig.tmp.join("got");
    let t0 = Instant::now();
    let (ok, out, err) = output(rig.linux_cmd(
        STEP,
        &["curl", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &format!("http://{eip}:{port}/blob")],
    ));
    let big_s = t0.elapsed().as_secs_f64();
    assert!(ok, "Linux curl of 5 MiB from {what} failed: {out}\n{err}\n{}", srv.text());
    assert_eq!(
        std::fs::metadata(&dst).map(|m| m.len()).unwrap_or(0),
        BIG,
        "Linux curl got a different size from {what}"
    );
    assert_eq!(sha256(&dst), sha256(src), "what Linux's curl got from {what} differs from the file");
    let (attached, _, tx) = rig.through_engine();
    assert!(
        attached >= 1 && tx >= BIG,
        "the engine did not carry the 5 MiB from {what}: {attached} attached, {tx} bytes sent through boards acknowledged"
    );
    // `n` curls one after another, each a new connection to the server.
    let script = format!(
        "for i in $(seq 1 {n}); do curl -sS --fail --max-time 10 http://{eip}:{port}/small || {{ echo \"request $i failed\" >&2; exit 1; }}; done"
    );
    let t0 = Instant::now();
    let (ok, out, err) = output(rig.linux_cmd(STEP * 2, &["bash", "-c", &script]));
    let small_s = t0.elapsed().as_secs_f64();
    assert!(ok, "{n} small requests to {what}: {err}\n{}", srv.text());
    let want = small_body().repeat(n);
    assert!(
        out == want,
        "{n} small requests to {what}: {} bytes back, {} expected (bodies differ)",
        out.len(),
        want.len()
    );
    srv.assert_running();
    (big_s, small_s)
}

/// The `LEN HEX` line a client under the shim printed is the length and
/// SHA-256 of `src`, and the engine read at least that much through boards.
fn fetched_byte_exact(rig: &Rig, what: &str, ok: bool, out: &str, err: &str, src: &Path) {
    assert!(ok, "{what} failed: {out}\n{err}");
    let line = out.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    assert_eq!(
        line.trim(),
        format!("{BIG} {}", sha256(src)),
        "{what}: length and SHA-256 of what it fetched (left) differ from the file's (right)\nstderr:\n{err}"
    );
    let (attached, rx, _) = rig.through_engine();
    assert!(
        attached >= 1 && rx >= BIG,
        "the engine did not carry {what}'s download: {attached} attached, {rx} bytes read through boards"
    );
}

// ------------------------------------------------------------ node

const NODE_SERVER: &str = r#"
const http = require('http'), fs = require('fs');
const [big, small, port] = [fs.readFileSync(process.env.OB_BIG), Buffer.from(process.env.OB_SMALL), +process.env.OB_PORT];
http.createServer((req, res) => {
  const body = req.url === '/blob' ? big : req.url === '/small' ? small : null;
  if (!body) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
  res.end(body);
}).listen(port, '0.0.0.0', () => console.log('listening on ' + port));
"#;

const NODE_CLIENT: &str = r#"
const http = require('http'), crypto = require('crypto');
http.get(process.env.OB_URL, res => {
  if (res.statusCode !== 200) { console.error('status ' + res.statusCode); process.exit(1); }
  const h = crypto.createHash('sha256');
  let n = 0;
  res.on('data', c => { h.update(c); n += c.length; });
  res.on('end', () => console.log(n + ' ' + h.digest('hex')));
  res.on('error', e => { console.error(e); process.exit(1); });
}).on('error', e => { console.error(e); process.exit(1); });
"#;

fn need_node() {
    need_all(&[("node", "nodejs"), ("curl", "curl"), ("python3", "python3"), ("sha256sum", "coreutils")]);
}

#[test]
fn shim_node_http_server_serves_linux_curl() {
    if skip_unless_root("shim_node_http_server_serves_linux_curl") {
        return;
    }
    need_node();
    let rig = Rig::up("ndsrv");
    let src = rig.random_file("blob", BIG, 31);
    let mut c = rig.shim_cmd(STEP * 3, &["node", "-e", NODE_SERVER]);
    c.env("OB_BIG", &src).env("OB_SMALL", small_body()).env("OB_PORT", "8100");
    let mut srv = rig.bg("shim-node-server", c);
    srv.wait_log("listening on 8100");
    rig.wait_tcp(&rig.eip(), 8100, &mut srv);
    let (big_s, small_s) = serve_linux_curl(&rig, &mut srv, "node's http server under the shim", 8100, &src, 200);
    eprintln!("shim node http server: 5 MiB byte-exact in {big_s:.2} s; 200 small requests (one connection each) in {small_s:.2} s");
}

#[test]
fn shim_node_http_client_downloads_from_linux() {
    if skip_unless_root("shim_node_http_client_downloads_from_linux") {
        return;
    }
    need_node();
    let rig = Rig::up("ndcli");
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, BIG, 32);
    let _srv = linux_http_server(&rig, &www);
    let mut c = rig.shim_cmd(STEP, &["node", "-e", NODE_CLIENT]);
    c.env("OB_URL", format!("http://{}:8000/blob", rig.lip()));
    let t0 = Instant::now();
    let (ok, out, err) = output(c);
    let secs = t0.elapsed().as_secs_f64();
    fetched_byte_exact(&rig, "node's http client under the shim", ok, &out, &err, &src);
    eprintln!("shim node http client: 5 MiB byte-exact in {secs:.2} s (node start-up included)");
}

// ------------------------------------------------------------ Java

const JAVA_SERVER: &str = r#"
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Executors;

public class Serve {
    static void reply(HttpExchange ex, byte[] body) throws java.io.IOException {
        ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
        ex.sendResponseHeaders(200, body.length);
        try (OutputStream o = ex.getResponseBody()) {
            o.write(body);
        }
    }

    public static void main(String[] args) throws Exception {
        byte[] big = Files.readAllBytes(Path.of(args[0]));
        byte[] small = System.getenv("OB_SMALL").getBytes(StandardCharsets.UTF_8);
        int port = Integer.parseInt(args[1]);
        HttpServer s = HttpServer.create(new InetSocketAddress("0.0.0.0", port), 64);
        s.createContext("/blob", ex -> reply(ex, big));
        s.createContext("/small", ex -> reply(ex, small));
        s.setExecutor(Executors.newFixedThreadPool(4));
        s.start();
        System.out.println("listening on " + port);
    }
}
"#;

const JAVA_CLIENT: &str = r#"
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.MessageDigest;
import java.time.Duration;

public class Fetch {
    public static void main(String[] args) throws Exception {
        HttpClient c = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(20))
            .build();
        HttpRequest r = HttpRequest.newBuilder(URI.create(args[0])).timeout(Duration.ofSeconds(60)).build();
        HttpResponse<byte[]> res = c.send(r, HttpResponse.BodyHandlers.ofByteArray());
        if (res.statusCode() != 200) {
            System.err.println("status " + res.statusCode());
            System.exit(1);
        }
        byte[] b = res.body();
        StringBuilder hex = new StringBuilder();
        for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) {
            hex.append(String.format("%02x", x));
        }
        System.out.println(b.length + " " + hex);
    }
}
"#;

/// java and javac (the single-file source launcher compiles in the JVM, and
/// javac's presence says it is a JDK), version 11 or later.
fn need_java() {
    need_all(&[
        ("java", "default-jdk-headless"),
        ("javac", "default-jdk-headless"),
        ("curl", "curl"),
        ("python3", "python3"),
        ("sha256sum", "coreutils"),
    ]);
    let o = Command::new("java").arg("-version").output().expect("java -version");
    let v = String::from_utf8_lossy(&o.stderr);
    let major = v
        .split('"')
        .nth(1)
        .and_then(|s| s.split('.').next())
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(
        major >= 11,
        "java is not version 11 or later (single-file source launch, java.net.http): {v}install default-jdk-headless (OpenJDK 17)"
    );
}

/// The JVM's options for every run (through `JDK_JAVA_OPTIONS`): a bounded
/// heap and the quick JIT only, for start-up on a small machine; nothing
/// about sockets or the network.
const JVM_OPTS: &str = "-Xmx256m -XX:TieredStopAtLevel=1";

#[test]
fn shim_java_http_server_serves_linux_curl() {
    if skip_unless_root("shim_java_http_server_serves_linux_curl") {
        return;
    }
    need_java();
    let rig = Rig::up("jvsrv");
    let src = rig.random_file("blob", BIG, 41);
    let file = rig.tmp.join("Serve.java");
    std::fs::write(&file, JAVA_SERVER).unwrap();
    let mut c = rig.shim_cmd(STEP * 4, &["java", file.to_str().unwrap(), src.to_str().unwrap(), "8200"]);
    c.env("OB_SMALL", small_body()).env("JDK_JAVA_OPTIONS", JVM_OPTS);
    let t0 = Instant::now();
    let mut srv = rig.bg("shim-java-server", c);
    // JVM start-up and the in-memory compile of the source file: seconds.
    wait_log_within(&mut srv, "listening on 8200", Duration::from_secs(90));
    let up_s = t0.elapsed().as_secs_f64();
    rig.wait_tcp(&rig.eip(), 8200, &mut srv);
    let (big_s, small_s) = serve_linux_curl(&rig, &mut srv, "Java's HttpServer under the shim", 8200, &src, 100);
    eprintln!(
        "shim Java HttpServer: up in {up_s:.1} s; 5 MiB byte-exact in {big_s:.2} s; 100 small requests (one connection each) in {small_s:.2} s"
    );
}

#[test]
fn shim_java_http_client_downloads_from_linux() {
    if skip_unless_root("shim_java_http_client_downloads_from_linux") {
        return;
    }
    need_java();
    let rig = Rig::up("jvcli");
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, BIG, 42);
    let file = rig.tmp.join("Fetch.java");
    std::fs::write(&file, JAVA_CLIENT).unwrap();
    let _srv = linux_http_server(&rig, &www);
    let url = format!("http://{}:8000/blob", rig.lip());
    let mut c = rig.shim_cmd(STEP * 2, &["java", file.to_str().unwrap(), &url]);
    c.env("JDK_JAVA_OPTIONS", JVM_OPTS);
    let t0 = Instant::now();
    let (ok, out, err) = output(c);
    let secs = t0.elapsed().as_secs_f64();
    fetched_byte_exact(&rig, "Java's HttpClient under the shim", ok, &out, &err, &src);
    eprintln!("shim Java HttpClient: 5 MiB byte-exact in {secs:.1} s (JVM start-up and compile included)");
}

/// Like `Bg::wait_log`, with a limit of its own (the JVM starts slowly).
fn wait_log_within(srv: &mut Bg, pat: &str, limit: Duration) {
    let t0 = Instant::now();
    while !srv.text().contains(pat) {
        srv.assert_running();
        assert!(t0.elapsed() < limit, "{} never printed {pat:?} in {limit:?}: {}", srv.what, srv.text());
        std::thread::sleep(Duration::from_millis(100));
    }
}
