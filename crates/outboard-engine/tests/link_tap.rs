//! TAP link against the kernel, inside a throwaway namespace: we create TAP
//! `obt-tap0`, the kernel end gets 10.202.0.1/24, and we answer the kernel's
//! ARP and ping for 10.202.0.2 by hand through the link.

#[path = "support/answer.rs"]
mod answer;
#[path = "support/netns.rs"]
mod netns;

use answer::{ping_from, serve, Answerer};
use netns::{skip_unless_root, sysctl_in, Netns};
use outboard_engine::link::tap::TapLink;
use outboard_engine::link::{sys, Link, LinkError, LinkOptions};
use std::net::Ipv4Addr;
use std::time::Duration;

fn opts(mtu: Option<usize>) -> LinkOptions {
    LinkOptions {
        mtu,
        addr: Ipv4Addr::new(10, 202, 0, 2),
        fabric_faults: None,
        offloads: false,
        ipv6: false,
    }
}

#[test]
fn answers_kernel_arp_and_ping_and_vanishes_on_close() {
    if skip_unless_root("link_tap::answers_kernel_arp_and_ping_and_vanishes_on_close") {
        return;
    }
    let ns = Netns::new("tap");
    let (ans, counters, ping_ok, ping_out, info, kernel_mac) = ns.run_in(|| {
        let mut link = TapLink::open("obt-tap0", &opts(None)).expect("open tap:obt-tap0");
        assert!(
            sys::if_is_up("obt-tap0").unwrap(),
            "open brings the kernel end up"
        );
        sysctl_in(&ns, "ipv6/conf/obt-tap0/disable_ipv6", "1");
        ns.ip(&["addr", "add", "10.202.0.1/24", "dev", "obt-tap0"]);
        let kernel_mac = sys::if_mac("obt-tap0").unwrap();
        let info = link.info();
        let mut ans = Answerer::new(link.mac(), Ipv4Addr::new(10, 202, 0, 2));
        let pinger = ping_from(&ns, Ipv4Addr::new(10, 202, 0, 2));
        serve(&mut link, &mut ans, Duration::from_secs(15), &|| {
            pinger.is_finished()
        });
        let (ok, out) = pinger.join().expect("pinger thread");
        (ans, link.counters(), ok, out, info, kernel_mac)
        // link dropped here: the TAP must disappear
    });
    eprintln!("{info:?}\n{ans:?}\n{counters:?}\n{ping_out}");
    assert_eq!(
        (info.kind.as_str(), info.mode.as_str(), info.mtu),
        ("tap", "tap", 1500)
    );
    assert_eq!(info.mac[0], 0x02, "locally administered unicast MAC");
    assert_ne!(
        info.mac, kernel_mac,
        "our MAC must differ from the kernel end's"
    );
    assert!(
        ping_ok,
        "kernel ping through our hand-built replies failed: {ping_out}"
    );
    assert!(
        ans.arp_requests >= 1,
        "the kernel's ARP request never arrived: {ans:?}"
    );
    assert!(ans.echo_requests >= 3, "expected 3 echo requests: {ans:?}");
    assert_eq!(ans.own_frames, 0);
    assert!(counters.tx_frames as usize >= ans.arp_requests + ans.echo_requests);
    assert_eq!((counters.tx_errors, counters.rx_oversize), (0, 0));
    let gone = std::process::Command::new("ip")
        .args(["-n", &ns.name, "link", "show", "obt-tap0"])
        .output()
        .unwrap();
    assert!(
        !gone.status.success(),
        "a TAP we created is not persistent: it goes when the link closes"
    );
}

#[test]
fn mtu_option_sets_the_device() {
    if skip_unless_root("link_tap::mtu_option_sets_the_device") {
        return;
    }
    let ns = Netns::new("tapm");
    ns.run_in(|| {
        let link = TapLink::open("obt-tapm", &opts(Some(9000))).expect("open");
        assert_eq!(link.mtu(), 9000);
        assert_eq!(sys::if_mtu("obt-tapm").unwrap(), 9000);
        assert!(matches!(
            TapLink::open("obt-tapx", &opts(Some(20))),
            Err(LinkError::BadSpec(_))
        ));
    });
}

#[test]
fn busy_and_not_a_tap_are_clear_errors() {
    if skip_unless_root("link_tap::busy_and_not_a_tap_are_clear_errors") {
        return;
    }
    let ns = Netns::new("tape");
    ns.ip(&[
        "link",
        "add",
        "name",
        "obt-notap",
        "type",
        "veth",
        "peer",
        "name",
        "obt-peer",
    ]);
    ns.run_in(|| {
        let _held = TapLink::open("obt-tap1", &opts(None)).expect("open");
        match TapLink::open("obt-tap1", &opts(None)) {
            Err(LinkError::Busy(m)) => assert!(m.contains("obt-tap1"), "{m}"),
            other => panic!(
                "second open of a held TAP must be Busy, got {:?}",
                other.map(|l| l.info())
            ),
        }
        match TapLink::open("obt-notap", &opts(None)) {
            Err(LinkError::NoSuchInterface(m)) => assert!(m.contains("not a TAP"), "{m}"),
            other => panic!("a veth is not a TAP, got {:?}", other.map(|l| l.info())),
        }
        assert!(matches!(
            TapLink::open("0123456789abcdef", &opts(None)),
            Err(LinkError::BadSpec(_))
        ));
    });
}
