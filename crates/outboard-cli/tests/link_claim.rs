//! One engine per interface, and none on an interface the kernel answers on
//! (root; each test makes its own pair of namespaces joined by a veth, gone
//! on drop even when the test fails):
//!
//! - a second `outboard engine` on the same veth (af_packet beside
//!   af_packet, af_xdp beside af_packet, af_packet beside af_xdp, tap beside
//!   tap) exits 14 naming the interface and the holder's pid, and the first
//!   keeps answering ping; after the first is SIGKILLed a new one starts (no
//!   stale lock);
//! - an interface with a kernel IPv4 address is exit 14 with the
//!   `ip addr flush dev IFACE` hint, and starts with `--allow-kernel-address`
//!   (or `allow_kernel_address = true` in the config file), with a warning.

mod support;

use std::process::{Output, Stdio};
use std::time::Duration;
use support::engine::EngineProc;
use support::netns::{in_ns, lab_name, need, ns_command, skip_unless_root, NsGuard};
use support::{run_dir, text, OUTBOARD};

/// Two namespaces, `eng` and `peer`, joined by a one-queue veth: `eng_if`
/// (no address, IPv6 off) and `peer_if` with 10.213.0.1/24.
struct Pair {
    eng: NsGuard,
    peer: NsGuard,
    eng_if: String,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        let n = lab_name(tag);
        let eng = NsGuard::new(&format!("ob-{n}-e"));
        let peer = NsGuard::new(&format!("ob-{n}-p"));
        let eng_if = format!("{n}e");
        let peer_if = format!("{n}p");
        let ok = |o: Output, what: &str| assert!(o.status.success(), "{what}: {}", text(&o));
        ok(
            in_ns(
                &eng.0,
                &[
                    "ip",
                    "link",
                    "add",
                    &eng_if,
                    "numrxqueues",
                    "1",
                    "numtxqueues",
                    "1",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &peer_if,
                    "numrxqueues",
                    "1",
                    "numtxqueues",
                    "1",
                    "netns",
                    &peer.0,
                ],
            ),
            "veth",
        );
        ok(
            in_ns(
                &eng.0,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{eng_if}.disable_ipv6=1"),
                ],
            ),
            "ipv6 off",
        );
        ok(
            in_ns(&eng.0, &["ip", "link", "set", &eng_if, "up"]),
            "eng up",
        );
        ok(
            in_ns(
                &peer.0,
                &["ip", "addr", "add", "10.213.0.1/24", "dev", &peer_if],
            ),
            "peer addr",
        );
        ok(
            in_ns(&peer.0, &["ip", "link", "set", &peer_if, "up"]),
            "peer up",
        );
        Pair { eng, peer, eng_if }
    }

    /// `outboard engine --name NAME ARGS --run-for-s 2` in `eng`, to its end.
    fn engine_run(&self, name: &str, args: &[&str]) -> Output {
        ns_command(
            &self.eng.0,
            Duration::from_secs(20),
            5,
            &[
                &[OUTBOARD, "engine", "--name", name],
                args,
                &["--run-for-s", "2"],
            ]
            .concat(),
        )
        .env("OUTBOARD_RUN_DIR", run_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run outboard engine")
    }

    fn assert_ping(&self, addr: &str, what: &str) {
        let o = in_ns(
            &self.peer.0,
            &["ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", addr],
        );
        let out = text(&o);
        assert!(o.status.success(), "{what}: ping {addr}: {out}");
        assert!(!out.contains("DUP!"), "{what}: duplicate replies: {out}");
    }
}

fn assert_busy(o: &Output, iface: &str, holder: u32, what: &str) {
    let out = text(o);
    assert_eq!(o.status.code(), Some(14), "{what}: expected exit 14: {out}");
    assert!(
        out.contains(iface),
        "{what}: the message names {iface}: {out}"
    );
    assert!(
        out.contains(&format!("pid {holder}")),
        "{what}: the message names pid {holder}: {out}"
    );
    assert!(out.contains("hint:"), "{what}: says what to do: {out}");
}

#[test]
fn a_second_engine_on_an_interface_exits_14_and_the_first_keeps_serving() {
    if skip_unless_root("a_second_engine_on_an_interface_exits_14_and_the_first_keeps_serving") {
        return;
    }
    need("ping", "iputils-ping");
    let p = Pair::new("claim");
    let n = lab_name("claim");
    let iface = p.eng_if.clone();
    let link = |kind: &str| format!("{kind}:{iface}");

    let first = EngineProc::start(
        &p.eng.0,
        &format!("{n}-1"),
        &["--link", &link("af_packet"), "--addr", "10.213.0.2/24"],
    );
    p.assert_ping("10.213.0.2", "the first engine");
    let pid = first.child.id();

    let o = p.engine_run(
        &format!("{n}-2"),
        &["--link", &link("af_packet"), "--addr", "10.213.0.3/24"],
    );
    assert_busy(&o, &iface, pid, "af_packet beside af_packet");
    let o = p.engine_run(
        &format!("{n}-3"),
        &["--link", &link("af_xdp"), "--addr", "10.213.0.2/24"],
    );
    assert_busy(&o, &iface, pid, "af_xdp beside af_packet");
    p.assert_ping("10.213.0.2", "the first engine after the refused ones");
    assert!(
        first.stat()["link"].is_object(),
        "the first engine answers stat"
    );

    // SIGKILL: no clean-up code runs, and still nothing stale is left.
    let mut first = first;
    first.child.kill().expect("SIGKILL the first engine");
    let _ = first.child.wait();
    drop(first);

    let again = EngineProc::start(
        &p.eng.0,
        &format!("{n}-4"),
        &["--link", &link("af_xdp"), "--addr", "10.213.0.2/24"],
    );
    p.assert_ping("10.213.0.2", "a new engine after the first was killed");
    let o = p.engine_run(
        &format!("{n}-5"),
        &["--link", &link("af_packet"), "--addr", "10.213.0.3/24"],
    );
    assert_busy(&o, &iface, again.child.id(), "af_packet beside af_xdp");
    p.assert_ping("10.213.0.2", "the af_xdp engine after the refused one");
    let log = again.stop();
    assert!(log.contains("engine_started"), "{log}");
}

#[test]
fn a_second_engine_on_a_tap_exits_14() {
    if skip_unless_root("a_second_engine_on_a_tap_exits_14") {
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!(
            "SKIPPED: /dev/net/tun is missing (modprobe tun) — a_second_engine_on_a_tap_exits_14"
        );
        return;
    }
    let n = lab_name("ctap");
    let ns = NsGuard::new(&format!("ob-{n}-t"));
    let dev = format!("{n}t");
    let first = EngineProc::start(
        &ns.0,
        &format!("{n}-1"),
        &["--link", &format!("tap:{dev}"), "--addr", "10.214.0.2/24"],
    );
    let o = ns_command(
        &ns.0,
        Duration::from_secs(20),
        5,
        &[
            OUTBOARD,
            "engine",
            "--name",
            &format!("{n}-2"),
            "--link",
            &format!("tap:{dev}"),
            "--addr",
            "10.214.0.3/24",
            "--run-for-s",
            "2",
        ],
    )
    .env("OUTBOARD_RUN_DIR", run_dir())
    .stdin(Stdio::null())
    .output()
    .expect("run outboard engine");
    assert_busy(&o, &dev, first.child.id(), "tap beside tap");
    assert!(
        first.stat()["link"].is_object(),
        "the first engine answers stat"
    );
}

#[test]
fn an_interface_with_a_kernel_address_exits_14_unless_allowed() {
    if skip_unless_root("an_interface_with_a_kernel_address_exits_14_unless_allowed") {
        return;
    }
    let p = Pair::new("kaddr");
    let n = lab_name("kaddr");
    let iface = p.eng_if.clone();
    let o = in_ns(
        &p.eng.0,
        &["ip", "addr", "add", "10.213.0.9/24", "dev", &iface],
    );
    assert!(o.status.success(), "{}", text(&o));
    let base = [
        "--link".to_string(),
        format!("af_packet:{iface}"),
        "--addr".into(),
        "10.213.0.2/24".into(),
    ];
    let base: Vec<&str> = base.iter().map(String::as_str).collect();

    let o = p.engine_run(&format!("{n}-1"), &base);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(14), "expected exit 14: {out}");
    assert!(out.contains("10.213.0.9/24"), "names the address: {out}");
    assert!(
        out.contains(&format!("ip addr flush dev {iface}")),
        "says how to remove it: {out}"
    );
    assert!(out.contains("kernel would answer"), "says why: {out}");
    let xdp = format!("af_xdp:{iface}");
    let o = p.engine_run(
        &format!("{n}-2"),
        &["--link", &xdp, "--addr", "10.213.0.2/24"],
    );
    assert_eq!(o.status.code(), Some(14), "af_xdp too: {}", text(&o));

    let o = p.engine_run(
        &format!("{n}-3"),
        &[&base[..], &["--allow-kernel-address"]].concat(),
    );
    let out = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "--allow-kernel-address starts: {out}"
    );
    assert!(
        out.contains("event=kernel_address"),
        "with a warning: {out}"
    );

    let cfg = std::env::temp_dir().join(format!("outboard-test-{n}.toml"));
    std::fs::write(&cfg, "allow_kernel_address = true\n").expect("config");
    let o = p.engine_run(
        &format!("{n}-4"),
        &[&base[..], &["--config", cfg.to_str().expect("utf-8 path")]].concat(),
    );
    let _ = std::fs::remove_file(&cfg);
    assert_eq!(
        o.status.code(),
        Some(0),
        "allow_kernel_address in the config file starts: {}",
        text(&o)
    );

    // Without the address the plain start works.
    let o = in_ns(&p.eng.0, &["ip", "addr", "flush", "dev", &iface]);
    assert!(o.status.success(), "{}", text(&o));
    let o = p.engine_run(&format!("{n}-5"), &base);
    assert_eq!(
        o.status.code(),
        Some(0),
        "no address, no complaint: {}",
        text(&o)
    );
}
