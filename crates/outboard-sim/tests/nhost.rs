//! Four hosts on one /24, every host connected to every other (12
//! connections at once, each sending seeded data), all over faulty links.
//! Run twice with one seed, the whole trace must be the same: with several
//! connections per stack, any dependence on hash-map iteration order or other
//! hidden state would show up here.

use outboard_sim::network::{host_addr, Network, StackNetConfig, Step};
use outboard_sim::transfer::{stream_seed, Sink, Source};
use outboard_sim::{FaultConfig, FaultStats, NetStats};
use outboard_stack::ConnId;
use outboard_time::{Duration, Instant};
use std::net::SocketAddrV4;

const HOSTS: usize = 4;
const BYTES: u64 = 300_000;
const PORT: u16 = 7000;

struct Flow {
    from: usize,
    to: usize,
    client: ConnId,
    server: Option<ConnId>,
    source: Source,
    sink: Sink,
    done_at: Option<Instant>,
}

/// What a run leaves behind, for comparing two runs.
#[derive(Debug, PartialEq)]
struct Trace {
    end: Instant,
    done_at: Vec<Option<Instant>>,
    faults: FaultStats,
    net: NetStats,
    retransmits: Vec<u64>,
}

fn all_pairs(seed: u64) -> Trace {
    let link = FaultConfig {
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.02,
        corrupt: 0.001,
        delay: Duration::from_micros(500),
        jitter: Duration::from_micros(100),
        bandwidth_bps: 100_000_000,
        ..FaultConfig::default()
    };
    let mut net = Network::of_stacks(&StackNetConfig {
        hosts: HOSTS,
        mtu: 1500,
        tcp: Default::default(),
        link,
        seed,
        ipv6: false,
    });
    let listeners: Vec<_> = (0..HOSTS)
        .map(|h| net.host_mut(h).tcp_listen(PORT, 16).expect("listen"))
        .collect();
    let mut flows = Vec::new();
    for from in 0..HOSTS {
        for to in (0..HOSTS).filter(|&t| t != from) {
            let now = net.now();
            let client = net
                .host_mut(from)
                .tcp_connect(now, SocketAddrV4::new(host_addr(to), PORT))
                .expect("connect");
            let data = stream_seed(seed, from * HOSTS + to);
            flows.push(Flow {
                from,
                to,
                client,
                server: None,
                source: Source::new(data, BYTES),
                sink: Sink::new(data, BYTES),
                done_at: None,
            });
        }
    }
    let limit = Instant::from_millis(60_000);
    let mut buf = vec![0u8; 65536];
    loop {
        // One flow per ordered pair: an accepted connection belongs to the flow from its remote host.
        for (to, &listener) in listeners.iter().enumerate() {
            while let Some(id) = net.host_mut(to).tcp_accept(listener) {
                let remote = net.host_mut(to).tcp(id).expect("accepted").tuple().remote;
                let f = flows
                    .iter_mut()
                    .find(|f| f.to == to && remote.ip() == host_addr(f.from) && f.server.is_none())
                    .expect("a flow for every accepted connection");
                f.server = Some(id);
            }
        }
        let now = net.now();
        for f in &mut flows {
            let c = net
                .host_mut(f.from)
                .tcp(f.client)
                .expect("client connection");
            f.source.pump(|d| c.send(d).ok());
            if f.source.all_sent() && !f.source.finished {
                f.source.finished = true;
                c.shutdown_write();
            }
            if let Some(id) = f.server {
                let s = net.host_mut(f.to).tcp(id).expect("server connection");
                while !f.sink.end_of_stream {
                    match s.recv(&mut buf) {
                        Ok(0) => f.sink.end_of_stream = true,
                        Ok(n) => f.sink.accept(&buf[..n]),
                        Err(_) => break,
                    }
                }
                assert_eq!(
                    f.sink.first_bad, None,
                    "flow {}->{} got a wrong byte",
                    f.from, f.to
                );
                if f.sink.complete() && f.done_at.is_none() {
                    f.done_at = Some(now);
                }
            }
        }
        net.flush();
        if flows.iter().all(|f| f.sink.complete()) {
            break;
        }
        let step = net.advance(limit);
        assert_eq!(
            step,
            Step::Advanced,
            "at {:?}: {} of {} flows done",
            net.now(),
            flows.iter().filter(|f| f.sink.complete()).count(),
            flows.len()
        );
    }
    for f in &flows {
        assert_eq!(
            f.source.sha256_hex(),
            f.sink.sha256_hex(),
            "flow {}->{}",
            f.from,
            f.to
        );
    }
    let retransmits = flows
        .iter()
        .map(|f| {
            net.host_mut(f.from)
                .tcp(f.client)
                .map_or(0, |c| c.stats().retransmits)
        })
        .collect();
    Trace {
        end: net.now(),
        done_at: flows.iter().map(|f| f.done_at).collect(),
        faults: net.fault_totals(),
        net: *net.stats(),
        retransmits,
    }
}

#[test]
fn four_hosts_all_pairs_transfer_concurrently_over_faulty_links() {
    let t = all_pairs(3);
    assert_eq!(t.done_at.len(), HOSTS * (HOSTS - 1));
    assert!(
        t.faults.dropped > 0 && t.faults.duplicated > 0,
        "{:?}",
        t.faults
    );
}

#[test]
fn many_connections_per_host_replay_identically_from_the_seed() {
    assert_eq!(all_pairs(11), all_pairs(11));
}
