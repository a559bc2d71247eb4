//! Multi-shard engines on the fabric (no root): connections opened from
//! either end land on the shard the Toeplitz hash names and stay there, a
//! listener accepts on every shard, ARP learned by shard 0 reaches the
//! others, and a shard's failure stops the engine with a clear error.
//!
//! The fabric steers frames for a port group like a NIC with RSS, so on
//! the fabric no TCP frame needs forwarding between shards: the test checks
//! that too.

use outboard_engine::client::{FetchPlan, FetchState};
use outboard_engine::engine::{BoardAttach, Engine, EngineSettings};
use outboard_engine::link::LinkSpec;
use outboard_engine::services::parse_services;
use outboard_engine::stat::Snapshot;
use outboard_stack::steer::{shard_for, FlowTuple};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 61, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 61, 0, 2);

fn fabric(tag: &str) -> LinkSpec {
    LinkSpec::Fabric { name: format!("shards-{tag}-{}", std::process::id()) }
}

fn settings(link: &LinkSpec, addr: Ipv4Addr, shards: usize, services: &str) -> EngineSettings {
    let mut s = EngineSettings::new("shards-test", link.clone(), addr, 24);
    s.services = parse_services(services).unwrap();
    s.control = false;
    s.boards = BoardAttach::Off;
    s.shards = shards;
    s.tcp.send_buffer = 64 << 10;
    s.tcp.recv_buffer = 64 << 10;
    s.memory_cap = 64 << 20;
    s
}

/// A server engine running `run` (its shards in threads) until dropped;
/// `finish` returns one snapshot per shard.
struct Server {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Snapshot>>,
}

impl Server {
    fn start(set: EngineSettings) -> Server {
        let mut e = Engine::start(&set).expect("server engine starts");
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            e.run(&s2, |_| false).expect("server runs");
            let now = outboard_engine::clock::now();
            e.shards.iter_mut().map(|s| s.snapshot(now)).collect()
        });
        Server { stop, handle }
    }
    fn finish(self) -> Vec<Snapshot> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("server thread")
    }
}

/// Drives `e` from this thread until every fetch of every shard finished (at most 30 s).
fn drive_until_fetched(e: &mut Engine) {
    let deadline = outboard_engine::clock::now() + std::time::Duration::from_secs(30);
    loop {
        e.turn().expect("turn");
        let done = (0..e.shards.len()).all(|s| e.fetches_on(s).iter().all(|f| f.is_finished()));
        if done {
            return;
        }
        assert!(outboard_engine::clock::now() < deadline, "fetches did not finish in 30 s");
        e.idle(std::time::Duration::from_millis(1)).expect("idle");
    }
}

fn echo_plan(to: Ipv4Addr, seed: u64) -> FetchPlan {
    FetchPlan { remote: SocketAddrV4::new(to, 7).into(), send_bytes: 48 << 10, seed, recv_limit: Some(48 << 10) }
}

fn assert_echoed(e: &Engine, shard: usize) -> usize {
    let now = outboard_engine::clock::now();
    for f in e.fetches_on(shard) {
        let r = f.report(now);
        assert_eq!(r.state, FetchState::Done, "shard {shard}: {r:?}");
        assert_eq!(r.bytes_received, r.bytes_sent, "shard {shard}: {r:?}");
        assert_eq!(r.sha256_received, r.sha256_sent, "shard {shard}: echo differs");
    }
    e.fetches_on(shard).len()
}

#[test]
fn connections_to_a_four_shard_engine_land_on_the_shard_their_hash_names() {
    let link = fabric("in");
    let server = Server::start(settings(&link, SERVER, 4, "echo"));
    let mut client = Engine::start(&settings(&link, CLIENT, 1, "none")).expect("client starts");
    let ports: Vec<u16> = (0..32).map(|i| 41000 + i * 7).collect();
    for (i, p) in ports.iter().enumerate() {
        client.fetch_on(0, echo_plan(SERVER, i as u64), *p);
    }
    drive_until_fetched(&mut client);
    assert_eq!(assert_echoed(&client, 0), 32);
    let snaps = server.finish();
    let mut expected = [0u64; 4];
    for p in &ports {
        let t = FlowTuple { src_ip: CLIENT, dst_ip: SERVER, src_port: *p, dst_port: 7 };
        expected[usize::from(shard_for(&t, 4))] += 1;
    }
    let accepted: Vec<u64> = snaps.iter().map(|s| s.services[0].tcp_accepted).collect();
    assert_eq!(accepted, expected.to_vec(), "each shard accepted the connections its hash names");
    assert!(accepted.iter().all(|a| *a > 0), "a listener accepts on every shard: {accepted:?}");
    for (i, s) in snaps.iter().enumerate() {
        let c = &s.shards[0].counters;
        // The fabric steers like RSS: no TCP frame went to the wrong shard.
        assert_eq!((c.forwarded_out, c.forward_drops), (0, 0), "shard {i}: {c:?}");
        assert_eq!(s.stack.get("tcp_resets_out").copied().unwrap_or(0), 0, "shard {i} reset a stray segment");
    }
}

#[test]
fn connections_from_a_four_shard_engine_come_back_to_the_shard_that_opened_them() {
    let link = fabric("out");
    let server = Server::start(settings(&link, SERVER, 1, "echo"));
    let mut client = Engine::start(&settings(&link, CLIENT, 4, "none")).expect("client starts");
    for shard in 0..4 {
        for k in 0..4 {
            client.fetch_on(shard, echo_plan(SERVER, (shard * 10 + k) as u64), 0);
        }
    }
    drive_until_fetched(&mut client);
    for shard in 0..4 {
        assert_eq!(assert_echoed(&client, shard), 4);
    }
    let now = outboard_engine::clock::now();
    let snaps: Vec<Snapshot> = client.shards.iter_mut().map(|s| s.snapshot(now)).collect();
    // Shards 1-3 learned the server's MAC from the ARP copies shard 0 gave them.
    assert!(snaps[0].shards[0].counters.arp_copies >= 3, "{:?}", snaps[0].shards[0].counters);
    for (i, s) in snaps.iter().enumerate() {
        assert!(s.arp_entries >= 1, "shard {i} resolved the server");
        assert_eq!(s.shards[0].counters.forward_drops, 0);
    }
    server.finish();
}

#[test]
fn a_two_shard_engine_serves_while_running_its_shards_in_threads_and_stat_merges_them() {
    let link = fabric("two");
    let server = Server::start(settings(&link, SERVER, 2, "echo,discard"));
    let mut client = Engine::start(&settings(&link, CLIENT, 1, "none")).expect("client starts");
    for i in 0..16u16 {
        client.fetch_on(0, echo_plan(SERVER, u64::from(i)), 50000 + i);
    }
    drive_until_fetched(&mut client);
    assert_eq!(assert_echoed(&client, 0), 16);
    let snaps = server.finish();
    let merged = Snapshot::merge(snaps.clone()).expect("two snapshots");
    assert_eq!(merged.shards.len(), 2);
    assert_eq!(merged.shards.iter().map(|r| r.shard).collect::<Vec<_>>(), vec![0, 1]);
    let accepted: u64 = snaps.iter().map(|s| s.services[0].tcp_accepted).sum();
    assert_eq!(merged.services[0].tcp_accepted, accepted);
    assert_eq!(accepted, 16);
    let rx: u64 = snaps.iter().map(|s| s.link.counters["rx_frames"]).sum();
    assert_eq!(merged.link.counters["rx_frames"], rx, "link counters add up across shards");
    // Each shard's thread did its own work (both had connections).
    assert!(snaps.iter().all(|s| s.services[0].tcp_accepted > 0));
}

#[test]
fn impossible_shard_settings_are_refused() {
    let link = fabric("bad");
    let mut s = settings(&link, SERVER, 0, "none");
    assert!(Engine::start(&s).err().expect("refused").to_string().contains("shards 0"));
    s.shards = 65;
    assert!(Engine::start(&s).err().expect("refused").to_string().contains("between 1 and 64"));
    s.shards = 2;
    s.cores = Some(vec![0]);
    assert!(Engine::start(&s).err().expect("refused").to_string().contains("one core per shard"));
    s.cores = Some(vec![0, 4096]);
    assert!(Engine::start(&s).err().expect("refused").to_string().contains("core 4096"));
    // A fabric has 8 ports: a 9-shard engine cannot get a port each.
    s.cores = None;
    s.shards = 9;
    let e = Engine::start(&s).err().expect("refused");
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("1 to 8 ports"), "{e}");
}
