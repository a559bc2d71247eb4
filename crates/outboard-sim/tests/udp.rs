//! UDP between three simulated hosts: datagrams keep their boundaries and
//! contents, loss loses whole datagrams (never corrupts them), and a datagram
//! to a closed port comes back as ECONNREFUSED (ICMP port unreachable,
//! RFC 1122 §4.1.3.1).

use outboard_sim::network::{host_addr, Network, StackNetConfig, Step};
use outboard_sim::FaultConfig;
use outboard_stack::StackError;
use outboard_time::Duration;
use std::net::SocketAddrV4;

fn net(link: FaultConfig, seed: u64) -> Network {
    Network::of_stacks(&StackNetConfig {
        hosts: 3,
        mtu: 1500,
        tcp: Default::default(),
        link,
        seed,
        ipv6: false,
    })
}

/// Runs the network for `d` of virtual time (or until nothing is scheduled).
fn run_for(net: &mut Network, d: Duration) {
    let limit = net.now() + d;
    while net.advance(limit) == Step::Advanced {}
}

/// Datagram `i` from host `from`: its length and bytes say who sent it and which it is.
fn datagram(from: usize, i: usize) -> Vec<u8> {
    (0..(1 + i * 7 % 1400))
        .map(|k| (from * 31 + i * 7 + k) as u8)
        .collect()
}

#[test]
fn datagrams_from_two_hosts_arrive_whole_and_intact() {
    let link = FaultConfig {
        delay: Duration::from_micros(300),
        bandwidth_bps: 100_000_000,
        ..FaultConfig::default()
    };
    let mut net = net(link, 1);
    let server = net.host_mut(2).udp_bind(9000).expect("bind");
    let clients: Vec<_> = (0..2)
        .map(|h| net.host_mut(h).udp_bind(0).expect("bind"))
        .collect();
    let dst = SocketAddrV4::new(host_addr(2), 9000);
    let mut got = [0usize; 2];
    let mut buf = [0u8; 2048];
    for i in 0..100 {
        for (h, &c) in clients.iter().enumerate() {
            let now = net.now();
            net.host_mut(h)
                .udp_send_to(now, c, dst, &datagram(h, i))
                .expect("send");
        }
        net.flush();
        run_for(&mut net, Duration::from_millis(10));
        // Drain as we go so the receive queue never overflows.
        while let Ok((n, src)) = net.host_mut(2).udp_recv_from(server, &mut buf) {
            let from = (0..2)
                .find(|&h| std::net::IpAddr::from(host_addr(h)) == src.ip())
                .expect("a known sender");
            assert_eq!(
                &buf[..n],
                &datagram(from, got[from])[..],
                "datagram {} from host {from}",
                got[from]
            );
            got[from] += 1;
        }
    }
    assert_eq!(got, [100, 100]);
}

#[test]
fn loss_drops_whole_datagrams_and_corruption_never_delivers_bad_ones() {
    let mut net = net(FaultConfig::default(), 5);
    let server = net.host_mut(1).udp_bind(9000).expect("bind");
    let client = net.host_mut(0).udp_bind(0).expect("bind");
    let dst = SocketAddrV4::new(host_addr(1), 9000);
    let mut buf = [0u8; 2048];
    // Resolve ARP over a clean link first: while a lossy ARP exchange retries,
    // the stack may hold only a few datagrams (as Linux's unres_qlen), which
    // would muddle the count below.
    let now = net.now();
    net.host_mut(0)
        .udp_send_to(now, client, dst, b"warm-up")
        .expect("send");
    net.flush();
    run_for(&mut net, Duration::from_millis(10));
    assert!(net.host_mut(1).udp_recv_from(server, &mut buf).is_ok());
    let lossy = FaultConfig {
        loss: 0.1,
        corrupt: 0.1,
        ..FaultConfig::default()
    };
    net.link_mut(0, 1).set_config(lossy.clone());
    net.link_mut(1, 0).set_config(lossy);
    let mut seen = Vec::new();
    for i in 0..400 {
        let now = net.now();
        net.host_mut(0)
            .udp_send_to(now, client, dst, &datagram(0, i))
            .expect("send");
        net.flush();
        run_for(&mut net, Duration::from_millis(10));
        while let Ok((n, _)) = net.host_mut(1).udp_recv_from(server, &mut buf) {
            let i = (0..400)
                .find(|&i| datagram(0, i) == buf[..n])
                .expect("a datagram that was sent, unchanged");
            seen.push(i);
        }
    }
    // 10 % lost and ~10 % corrupted (caught by checksums, so also lost; a
    // flip in the source MAC is harmless and delivers).
    let f = *net.link(0, 1).stats();
    assert!(
        (280..380).contains(&seen.len()),
        "{} of 400 arrived: {f:?}",
        seen.len()
    );
    assert!(seen.len() as u64 >= 400 - f.dropped - f.corrupted);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "no duplicates, no reordering on this link"
    );
}

#[test]
fn datagram_to_a_closed_port_reports_refused() {
    let mut net = net(FaultConfig::default(), 2);
    let client = net.host_mut(0).udp_bind(0).expect("bind");
    let now = net.now();
    net.host_mut(0)
        .udp_send_to(
            now,
            client,
            SocketAddrV4::new(host_addr(1), 9999),
            b"anyone?",
        )
        .expect("send");
    net.flush();
    run_for(&mut net, Duration::from_millis(100));
    let mut buf = [0u8; 64];
    assert_eq!(
        net.host_mut(0).udp_recv_from(client, &mut buf),
        Err(StackError::Refused)
    );
}
