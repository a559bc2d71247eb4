//! Link offloads end to end against the kernel's TCP, each inside a
//! throwaway namespace: an engine (echo + sink services) on a TAP device —
//! and on AF_PACKET over a veth pair — with virtio-net headers on; a
//! `std::net` client in the same namespace pushes 64 MiB through the echo
//! and checks the SHA-256 of what comes back. The link counters must show
//! TSO frames going out (larger than the MTU) and GSO/GRO or
//! checksum-offloaded frames coming in. `offload_throughput_tap` measures
//! client → sink with offloads on and off (figures on stderr).

#[path = "support/netns.rs"]
mod netns;

use netns::{skip_unless_root, sysctl_in, Netns};
use outboard_engine::engine::{Engine, EngineSettings};
use outboard_engine::link::{LinkCounters, LinkInfo, LinkSpec};
use outboard_engine::services::parse_services;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use outboard_engine::clock;
use std::time::Duration;

const ECHO_BYTES: usize = 64 << 20;

/// An engine running on its own thread inside `ns`; `finish` stops it and
/// returns its link's info and counters.
struct Running {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(LinkInfo, LinkCounters)>,
}

impl Running {
    fn start(ns: &Netns, link: LinkSpec, addr: Ipv4Addr, offloads: bool) -> Running {
        Running::start_shards(ns, link, addr, offloads, 1)
    }

    fn start_shards(ns: &Netns, link: LinkSpec, addr: Ipv4Addr, offloads: bool, shards: usize) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let s2 = stop.clone();
        let handle = ns.spawn_in(move || {
            let mut set = EngineSettings::new("offload-test", link, addr, 24);
            set.services = parse_services("echo,sink").unwrap();
            set.control = false;
            set.offloads = offloads;
            set.tcp.send_buffer = 1 << 20;
            set.tcp.recv_buffer = 1 << 20;
            set.shards = shards;
            let mut e = match Engine::start(&set) {
                Ok(e) => e,
                Err(err) => {
                    let _ = tx.send(Err(err.to_string()));
                    panic!("engine start: {err}");
                }
            };
            let _ = tx.send(Ok(()));
            e.run(&s2, |_| false).expect("engine run");
            (e.shard().link().info(), e.shard().link().counters())
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("engine thread answers")
            .expect("engine starts");
        Running { stop, handle }
    }

    fn finish(self) -> (LinkInfo, LinkCounters) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("engine thread")
    }
}

fn connect(to: SocketAddrV4) -> TcpStream {
    let deadline = clock::now() + outboard_time::Duration::from_secs(10);
    loop {
        match TcpStream::connect_timeout(&to.into(), Duration::from_secs(2)) {
            Ok(s) => return s,
            Err(e) if clock::now() < deadline => {
                eprintln!("connect {to}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("connect {to}: {e}"),
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends `ECHO_BYTES` through the echo service from inside `ns`; returns the
/// SHA-256 of what was sent and of what came back.
fn echo_through(ns: &Netns, to: SocketAddrV4) -> ([u8; 32], [u8; 32]) {
    ns.run_in(move || {
        let data = pattern(ECHO_BYTES);
        let sent = Sha256::digest(&data).into();
        let s = connect(to);
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut r = s.try_clone().unwrap();
        let reader = std::thread::spawn(move || {
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0usize;
            while got < ECHO_BYTES {
                let n = r.read(&mut buf).expect("read echo");
                assert!(n > 0, "echo closed after {got} bytes");
                h.update(&buf[..n]);
                got += n;
            }
            h.finalize().into()
        });
        let mut w = s;
        w.write_all(&data).expect("write to echo");
        let back: [u8; 32] = reader.join().expect("reader");
        let _ = w.shutdown(Shutdown::Both);
        (sent, back)
    })
}

/// Client → sink: seconds to push `bytes` (kernel send to engine receive).
fn sink_throughput(ns: &Netns, to: SocketAddrV4, bytes: usize) -> f64 {
    ns.run_in(move || {
        let chunk = pattern(1 << 20);
        let mut s = connect(to);
        let t0 = clock::now();
        let mut sent = 0;
        while sent < bytes {
            s.write_all(&chunk).expect("write to sink");
            sent += chunk.len();
        }
        s.shutdown(Shutdown::Write).unwrap();
        // The sink closes after reading everything: wait for its FIN.
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut b = [0u8; 64];
        while s.read(&mut b).map(|n| n > 0).unwrap_or(false) {}
        clock::now().saturating_duration_since(t0).as_secs_f64()
    })
}

/// Brings up the kernel end of the TAP the engine made.
fn tap_kernel_end(ns: &Netns, dev: &str, cidr: &str) {
    sysctl_in(ns, &format!("ipv6/conf/{dev}/disable_ipv6"), "1");
    ns.ip(&["addr", "add", cidr, "dev", dev]);
}

#[test]
fn tap_echo_64mib_with_tso_and_rx_offload() {
    if skip_unless_root("offload_tap::tap_echo_64mib_with_tso_and_rx_offload") {
        return;
    }
    let ns = Netns::new("otap");
    let eng = Running::start(
        &ns,
        LinkSpec::Tap { name: "obt-otap0".into() },
        Ipv4Addr::new(10, 203, 0, 2),
        true,
    );
    tap_kernel_end(&ns, "obt-otap0", "10.203.0.1/24");
    let (sent, back) = echo_through(&ns, SocketAddrV4::new(Ipv4Addr::new(10, 203, 0, 2), 7));
    let (info, c) = eng.finish();
    eprintln!("{info:?}\n{c:?}");
    assert_eq!(sent, back, "echo must return the same 64 MiB");
    assert_eq!(info.offloads, ["vnet_hdr", "tso4", "rx-csum"]);
    assert!(c.tx_gso_frames > 0, "TSO used: {c:?}");
    assert!(
        c.tx_bytes / c.tx_frames.max(1) > 1514,
        "average TX frame larger than the MTU: {c:?}"
    );
    assert!(c.rx_gro_frames > 0 || c.rx_csum_offloaded > 0, "RX offload used: {c:?}");
    assert_eq!((c.tx_errors, c.rx_oversize), (0, 0));
}

#[test]
fn af_packet_echo_64mib_with_tso_and_rx_offload() {
    if skip_unless_root("offload_tap::af_packet_echo_64mib_with_tso_and_rx_offload") {
        return;
    }
    let ns = Netns::new("oafp");
    ns.ip(&["link", "add", "obt-ok", "type", "veth", "peer", "name", "obt-oe"]);
    sysctl_in(&ns, "ipv6/conf/obt-oe/disable_ipv6", "1");
    sysctl_in(&ns, "ipv6/conf/obt-ok/disable_ipv6", "1");
    ns.ip(&["addr", "add", "10.204.0.1/24", "dev", "obt-ok"]);
    ns.ip(&["link", "set", "obt-ok", "up"]);
    ns.ip(&["link", "set", "obt-oe", "up"]);
    let eng = Running::start(
        &ns,
        LinkSpec::AfPacket { iface: "obt-oe".into() },
        Ipv4Addr::new(10, 204, 0, 2),
        true,
    );
    let (sent, back) = echo_through(&ns, SocketAddrV4::new(Ipv4Addr::new(10, 204, 0, 2), 7));
    let (info, c) = eng.finish();
    eprintln!("{info:?}\n{c:?}");
    assert_eq!(sent, back, "echo must return the same 64 MiB");
    assert_eq!(info.offloads, ["vnet_hdr", "tso4", "rx-csum"]);
    assert!(c.tx_gso_frames > 0, "TSO used: {c:?}");
    assert!(c.tx_bytes / c.tx_frames.max(1) > 1514, "average TX frame over the MTU: {c:?}");
    assert!(c.rx_gro_frames > 0 || c.rx_csum_offloaded > 0, "RX offload used: {c:?}");
    assert_eq!(c.tx_errors, 0);
}

#[test]
fn offload_throughput_tap() {
    if skip_unless_root("offload_tap::offload_throughput_tap") {
        return;
    }
    let bytes: usize = std::env::var("OFFLOAD_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
        << 20;
    let mut figures = Vec::new();
    for offloads in [true, false] {
        let ns = Netns::new(if offloads { "obon" } else { "oboff" });
        let eng = Running::start(
            &ns,
            LinkSpec::Tap { name: "obt-bench0".into() },
            Ipv4Addr::new(10, 205, 0, 2),
            offloads,
        );
        tap_kernel_end(&ns, "obt-bench0", "10.205.0.1/24");
        let secs = sink_throughput(&ns, SocketAddrV4::new(Ipv4Addr::new(10, 205, 0, 2), 5001), bytes);
        let (_, c) = eng.finish();
        let gbps = bytes as f64 * 8.0 / secs / 1e9;
        eprintln!(
            "OFFLOAD BENCH tap offloads={} : {} MiB in {secs:.2} s = {gbps:.2} Gbit/s; rx_frames={} rx_gro={} rx_csum={} tx_frames={} tx_gso={}",
            if offloads { "on" } else { "off" },
            bytes >> 20,
            c.rx_frames,
            c.rx_gro_frames,
            c.rx_csum_offloaded,
            c.tx_frames,
            c.tx_gso_frames
        );
        figures.push(gbps);
        assert!(gbps > 0.0);
    }
}

#[test]
fn two_shards_on_a_multi_queue_tap_echo_many_kernel_connections() {
    if skip_unless_root("offload_tap::two_shards_on_a_multi_queue_tap_echo_many_kernel_connections") {
        return;
    }
    let ns = Netns::new("mqtap");
    let eng = Running::start_shards(&ns, LinkSpec::Tap { name: "obt-mq0".into() }, Ipv4Addr::new(10, 205, 0, 2), true, 2);
    tap_kernel_end(&ns, "obt-mq0", "10.205.0.1/24");
    let to = SocketAddrV4::new(Ipv4Addr::new(10, 205, 0, 2), 7);
    // Many connections (each on the shard its hash names; the kernel picks
    // the TAP queue by its own hash, so some are forwarded between shards).
    ns.run_in(move || {
        for i in 0..24u32 {
            let mut s = connect(to);
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let msg = format!("connection {i} through a multi-queue TAP").into_bytes();
            s.write_all(&msg).expect("write");
            let mut got = vec![0u8; msg.len()];
            s.read_exact(&mut got).expect("echo");
            assert_eq!(got, msg);
        }
    });
    let (sent, back) = echo_through(&ns, to);
    let (info, c) = eng.finish();
    eprintln!("{info:?}\n{c:?}");
    assert_eq!(sent, back, "echo must return the same 64 MiB");
    assert_eq!((c.tx_errors, c.rx_oversize), (0, 0));
}
