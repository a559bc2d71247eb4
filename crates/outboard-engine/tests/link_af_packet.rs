//! AF_PACKET link against a real kernel peer, inside a throwaway namespace:
//! a veth pair `obt-k` (kernel, 10.201.0.1/24) <-> `obt-s` (ours, no IP).
//! We answer the kernel's ARP and ping by hand through the link; the
//! kernel's ping must succeed.

#[path = "support/answer.rs"]
mod answer;
#[path = "support/netns.rs"]
mod netns;

use answer::{ping_from, serve, Answerer};
use netns::{have, skip_unless_root, sysctl_in, Netns};
use outboard_engine::link::af_packet::AfPacketLink;
use outboard_engine::link::{Link, LinkError, LinkOptions};
use std::net::Ipv4Addr;
use std::time::Duration;

fn opts(mtu: Option<usize>) -> LinkOptions {
    LinkOptions { mtu, addr: Ipv4Addr::new(10, 201, 0, 2), fabric_faults: None }
}

#[test]
fn answers_kernel_arp_and_ping() {
    if skip_unless_root("link_af_packet::answers_kernel_arp_and_ping") {
        return;
    }
    let ns = Netns::new("afp");
    ns.ip(&["link", "add", "name", "obt-k", "type", "veth", "peer", "name", "obt-s"]);
    sysctl_in(&ns, "ipv6/conf/obt-k/disable_ipv6", "1");
    sysctl_in(&ns, "ipv6/conf/obt-s/disable_ipv6", "1");
    ns.ip(&["addr", "add", "10.201.0.1/24", "dev", "obt-k"]);
    ns.ip(&["link", "set", "obt-k", "up"]);
    if have("ethtool") {
        let o = ns.exec(&["ethtool", "-K", "obt-k", "tx", "off"]);
        assert!(o.status.success(), "ethtool: {}", String::from_utf8_lossy(&o.stderr));
    } else {
        eprintln!("NOTE: no ethtool: the kernel peer keeps TX checksum offload (ICMP is checksummed in software anyway)");
    }

    let (ans, counters, ping_ok, ping_out, info) = ns.run_in(|| {
        // The link brings obt-s up itself.
        let mut link = AfPacketLink::open("obt-s", &opts(None)).expect("open af_packet:obt-s");
        let info = link.info();
        let mut ans = Answerer::new(link.mac(), Ipv4Addr::new(10, 201, 0, 2));
        let pinger = ping_from(&ns, Ipv4Addr::new(10, 201, 0, 2));
        serve(&mut link, &mut ans, Duration::from_secs(15), &|| pinger.is_finished());
        let (ok, out) = pinger.join().expect("pinger thread");
        (ans, link.counters(), ok, out, info)
    });
    eprintln!("{info:?}\n{ans:?}\n{counters:?}\n{ping_out}");

    assert_eq!(info.kind, "af_packet");
    assert_eq!(info.mtu, 1500);
    assert!(info.mode.starts_with("tpacket_v2 mmap rx 256x2048 tx 256x2048"), "{}", info.mode);
    assert!(ping_ok, "kernel ping through our hand-built replies failed: {ping_out}");
    assert!(ans.arp_requests >= 1, "the kernel's ARP request never arrived: {ans:?}");
    assert!(ans.echo_requests >= 3, "expected 3 echo requests: {ans:?}");
    assert_eq!(ans.own_frames, 0, "PACKET_IGNORE_OUTGOING: we must not see our own frames");
    assert!(counters.rx_frames as usize >= ans.arp_requests + ans.echo_requests);
    assert!(counters.tx_frames as usize >= ans.arp_requests + ans.echo_requests);
    assert_eq!(counters.tx_errors, 0);
    assert_eq!(counters.rx_oversize, 0);

    // The kernel really learnt our MAC from the hand-built ARP reply.
    let neigh = ns.ip(&["neigh", "show", "10.201.0.2", "dev", "obt-k"]);
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_lowercase();
    let mac = info.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    assert!(neigh.contains(&mac), "neighbour entry {neigh:?} lacks our MAC {mac}");
}

#[test]
fn mtu_option_is_checked_and_used() {
    if skip_unless_root("link_af_packet::mtu_option_is_checked_and_used") {
        return;
    }
    let ns = Netns::new("afpm");
    ns.ip(&["link", "add", "name", "obt-k", "type", "veth", "peer", "name", "obt-s"]);
    ns.ip(&["link", "set", "obt-s", "mtu", "9000"]);
    ns.run_in(|| {
        let l = AfPacketLink::open("obt-s", &opts(Some(9000))).expect("open with MTU 9000");
        assert_eq!(l.mtu(), 9000);
        assert!(l.info().mode.contains("256x16384"), "{}", l.info().mode);
        drop(l);
        let l = AfPacketLink::open("obt-s", &opts(Some(1400))).expect("open with MTU 1400");
        assert_eq!(l.mtu(), 1400);
        match AfPacketLink::open("obt-s", &opts(Some(9500))) {
            Err(LinkError::BadSpec(m)) => assert!(m.contains("9500"), "{m}"),
            other => panic!("MTU above the interface's must be refused, got {:?}", other.map(|l| l.info())),
        }
    });
}

#[test]
fn missing_interface_is_no_such_interface() {
    // Needs no privilege: the name is looked up before any socket is made.
    match AfPacketLink::open("obt-nosuch9", &opts(None)) {
        Err(LinkError::NoSuchInterface(n)) => assert_eq!(n, "obt-nosuch9"),
        other => panic!("expected NoSuchInterface, got {:?}", other.map(|l| l.info())),
    }
    assert!(matches!(AfPacketLink::open("", &opts(None)), Err(LinkError::BadSpec(_))));
}
