//! Multi-shard engines in the simulator: a 4-shard host (N real stacks
//! behind the engine's steering function, `ShardedHost`) and a 1-shard peer
//! exchange data on connections opened from both ends, over each of the
//! fault cases of the matrix and several seeds. Every byte arrives (SHA-256
//! of each flow), every connection the 4-shard host accepted sits on the
//! shard the Toeplitz hash names, every connection it opened came home to
//! its shard (else its handshake could not complete), and a run replays
//! identically from its seed.

use outboard_sim::network::{host_addr, host_mac, Network, Step};
use outboard_sim::transfer::{stream_seed, Sink, Source};
use outboard_sim::{FaultConfig, FaultStats, NetStats, Rng, ShardedHost};
use outboard_stack::steer::{shard_for, FlowTuple};
use outboard_stack::{ConnId, StackConfig};
use outboard_time::{Duration, Instant};
use std::net::{SocketAddr, SocketAddrV4};

const SHARDS: usize = 4;
const BYTES: u64 = 200_000;
/// Connections from the peer to the sharded host, and from each shard to the peer.
const INBOUND: usize = 12;
const PORT_IN: u16 = 7000;
const PORT_OUT: u16 = 7100;

/// One flow: (host, shard) of the sender and of the receiver.
struct Flow {
    from: (usize, usize),
    to: (usize, usize),
    client: ConnId,
    /// The client's source port (how an accepted connection finds its flow).
    client_port: u16,
    server: Option<ConnId>,
    source: Source,
    sink: Sink,
}

#[derive(Debug, PartialEq)]
struct Trace {
    end: Instant,
    faults: FaultStats,
    net: NetStats,
    delivered: Vec<u64>,
    accepted_on: Vec<usize>,
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(v) => v,
        SocketAddr::V6(v) => panic!("an IPv6 address in an IPv4 run: {v}"),
    }
}

fn host(i: usize, shards: usize, rng: &mut Rng) -> ShardedHost {
    ShardedHost::with_secret(StackConfig::new(host_mac(i), host_addr(i), 24), shards, Instant::ZERO, rng)
}

fn run(link: FaultConfig, seed: u64) -> Trace {
    let mut rng = Rng::derive(seed, 0);
    let hosts = vec![host(0, 1, &mut rng), host(1, SHARDS, &mut rng)];
    let mut net = Network::new(hosts, &link, seed, 1514, Instant::ZERO);
    // Listeners on every shard of the sharded host; one on the peer.
    let lis_in: Vec<_> = (0..SHARDS).map(|s| net.host_mut(1).shard(s).tcp_listen(PORT_IN, 64).expect("listen")).collect();
    let lis_out = net.host_mut(0).shard(0).tcp_listen(PORT_OUT, 64).expect("listen");
    let mut flows = Vec::new();
    let now = net.now();
    for k in 0..INBOUND {
        let c = net.host_mut(0).shard(0).tcp_connect(now, SocketAddrV4::new(host_addr(1), PORT_IN)).expect("connect in");
        let client_port = net.host_mut(0).shard(0).tcp(c).expect("connecting").tuple().local.port();
        let data = stream_seed(seed, k);
        flows.push(Flow { from: (0, 0), to: (1, usize::MAX), client: c, client_port, server: None, source: Source::new(data, BYTES), sink: Sink::new(data, BYTES) });
    }
    for s in 0..SHARDS {
        let c = net.host_mut(1).shard(s).tcp_connect(now, SocketAddrV4::new(host_addr(0), PORT_OUT)).expect("connect out");
        let client_port = net.host_mut(1).shard(s).tcp(c).expect("connecting").tuple().local.port();
        let data = stream_seed(seed, 100 + s);
        flows.push(Flow { from: (1, s), to: (0, 0), client: c, client_port, server: None, source: Source::new(data, BYTES), sink: Sink::new(data, BYTES) });
    }
    let mut accepted_on = Vec::new();
    let limit = Instant::from_millis(120_000);
    let mut buf = vec![0u8; 65536];
    loop {
        // Accepts: on the sharded host, from whichever shard's listener has them.
        for (s, &l) in lis_in.iter().enumerate() {
            while let Some(id) = net.host_mut(1).shard(s).tcp_accept(l) {
                let t = net.host_mut(1).shard(s).tcp(id).expect("accepted").tuple();
                let (local, remote) = (v4(t.local), v4(t.remote));
                let hashed = shard_for(&FlowTuple { src_ip: *remote.ip(), dst_ip: *local.ip(), src_port: remote.port(), dst_port: local.port() }, SHARDS as u16);
                assert_eq!(usize::from(hashed), s, "seed {seed}: {remote} -> {local} accepted on shard {s}, its hash names {hashed}");
                accepted_on.push(s);
                let f = flows
                    .iter_mut()
                    .find(|f| f.to.0 == 1 && f.server.is_none() && f.client_port == remote.port())
                    .expect("a flow for every accepted connection");
                f.server = Some(id);
                f.to.1 = s;
            }
        }
        while let Some(id) = net.host_mut(0).shard(0).tcp_accept(lis_out) {
            let remote = v4(net.host_mut(0).shard(0).tcp(id).expect("accepted").tuple().remote);
            let f = flows.iter_mut().find(|f| f.to.0 == 0 && f.server.is_none() && f.client_port == remote.port()).expect("flow");
            f.server = Some(id);
        }
        for f in &mut flows {
            let c = net.host_mut(f.from.0).shard(f.from.1).tcp(f.client).expect("client connection");
            f.source.pump(|d| c.send(d).ok());
            if f.source.all_sent() && !f.source.finished {
                f.source.finished = true;
                c.shutdown_write();
            }
            if let Some(id) = f.server {
                let s = net.host_mut(f.to.0).shard(f.to.1).tcp(id).expect("server connection");
                while !f.sink.end_of_stream {
                    match s.recv(&mut buf) {
                        Ok(0) => f.sink.end_of_stream = true,
                        Ok(n) => f.sink.accept(&buf[..n]),
                        Err(_) => break,
                    }
                }
                assert_eq!(f.sink.first_bad, None, "seed {seed}: a wrong byte");
            }
        }
        net.flush();
        if flows.iter().all(|f| f.sink.complete()) {
            break;
        }
        let step = net.advance(limit);
        assert_eq!(step, Step::Advanced, "seed {seed} at {:?}: {} of {} flows done", net.now(), flows.iter().filter(|f| f.sink.complete()).count(), flows.len());
    }
    for f in &flows {
        assert_eq!(f.source.sha256_hex(), f.sink.sha256_hex(), "seed {seed}: flow {:?} -> {:?}", f.from, f.to);
    }
    accepted_on.sort_unstable();
    Trace { end: net.now(), faults: net.fault_totals(), net: *net.stats(), delivered: net.host(1).delivered.clone(), accepted_on }
}

fn cases() -> Vec<(&'static str, FaultConfig)> {
    let base = FaultConfig { delay: Duration::from_micros(500), bandwidth_bps: 200_000_000, ..FaultConfig::default() };
    vec![
        ("clean", base.clone()),
        ("loss 2%", FaultConfig { loss: 0.02, ..base.clone() }),
        ("reorder 10%", FaultConfig { reorder: 0.1, jitter: Duration::from_micros(300), ..base.clone() }),
        ("duplicate 2%", FaultConfig { duplicate: 0.02, ..base.clone() }),
        ("corrupt 0.5%", FaultConfig { corrupt: 0.005, ..base.clone() }),
        ("all at once", FaultConfig { loss: 0.01, duplicate: 0.01, reorder: 0.05, corrupt: 0.002, jitter: Duration::from_micros(200), ..base }),
    ]
}

#[test]
fn a_four_shard_host_under_the_fault_matrix_keeps_every_flow_on_its_shard_byte_exact() {
    for (name, link) in cases() {
        for seed in [1u64, 2, 3] {
            let t = run(link.clone(), seed * 1000 + 7);
            assert_eq!(t.accepted_on.len(), INBOUND, "{name} seed {seed}");
            // The hash spreads the 12 connections over the shards.
            let mut used = t.accepted_on.clone();
            used.dedup();
            assert!(used.len() >= 3, "{name} seed {seed}: connections accepted on shards {:?}", t.accepted_on);
            assert!(t.delivered.iter().all(|d| *d > 0), "{name} seed {seed}: frames per shard {:?}", t.delivered);
        }
    }
}

#[test]
fn a_multi_shard_run_replays_identically_from_its_seed() {
    let (_, link) = cases().pop().expect("a case");
    assert_eq!(run(link.clone(), 42), run(link, 42));
}
