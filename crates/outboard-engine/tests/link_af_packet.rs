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
    LinkOptions {
        mtu,
        addr: Ipv4Addr::new(10, 201, 0, 2),
        fabric_faults: None,
        offloads: false,
        ipv6: false,
    }
}

#[test]
fn answers_kernel_arp_and_ping() {
    if skip_unless_root("link_af_packet::answers_kernel_arp_and_ping") {
        return;
    }
    let ns = Netns::new("afp");
    ns.ip(&[
        "link", "add", "name", "obt-k", "type", "veth", "peer", "name", "obt-s",
    ]);
    sysctl_in(&ns, "ipv6/conf/obt-k/disable_ipv6", "1");
    sysctl_in(&ns, "ipv6/conf/obt-s/disable_ipv6", "1");
    ns.ip(&["addr", "add", "10.201.0.1/24", "dev", "obt-k"]);
    ns.ip(&["link", "set", "obt-k", "up"]);
    if have("ethtool") {
        let o = ns.exec(&["ethtool", "-K", "obt-k", "tx", "off"]);
        assert!(
            o.status.success(),
            "ethtool: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    } else {
        eprintln!("NOTE: no ethtool: the kernel peer keeps TX checksum offload (ICMP is checksummed in software anyway)");
    }

    let (ans, counters, ping_ok, ping_out, info) = ns.run_in(|| {
        // The link brings obt-s up itself.
        let mut link = AfPacketLink::open("obt-s", &opts(None)).expect("open af_packet:obt-s");
        let info = link.info();
        let mut ans = Answerer::new(link.mac(), Ipv4Addr::new(10, 201, 0, 2));
        let pinger = ping_from(&ns, Ipv4Addr::new(10, 201, 0, 2));
        serve(&mut link, &mut ans, Duration::from_secs(15), &|| {
            pinger.is_finished()
        });
        let (ok, out) = pinger.join().expect("pinger thread");
        (ans, link.counters(), ok, out, info)
    });
    eprintln!("{info:?}\n{ans:?}\n{counters:?}\n{ping_out}");

    assert_eq!(info.kind, "af_packet");
    assert_eq!(info.mtu, 1500);
    assert!(
        info.mode
            .starts_with("tpacket_v2 mmap rx 1024x2048 tx 1024x2048"),
        "{}",
        info.mode
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
    assert_eq!(
        ans.own_frames, 0,
        "PACKET_IGNORE_OUTGOING: we must not see our own frames"
    );
    assert!(counters.rx_frames as usize >= ans.arp_requests + ans.echo_requests);
    assert!(counters.tx_frames as usize >= ans.arp_requests + ans.echo_requests);
    assert_eq!(counters.tx_errors, 0);
    assert_eq!(counters.rx_oversize, 0);

    // The kernel really learnt our MAC from the hand-built ARP reply.
    let neigh = ns.ip(&["neigh", "show", "10.201.0.2", "dev", "obt-k"]);
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_lowercase();
    let mac = info
        .mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert!(
        neigh.contains(&mac),
        "neighbour entry {neigh:?} lacks our MAC {mac}"
    );
}

#[test]
fn mtu_option_is_checked_and_used() {
    if skip_unless_root("link_af_packet::mtu_option_is_checked_and_used") {
        return;
    }
    let ns = Netns::new("afpm");
    ns.ip(&[
        "link", "add", "name", "obt-k", "type", "veth", "peer", "name", "obt-s",
    ]);
    ns.ip(&["link", "set", "obt-s", "mtu", "9000"]);
    ns.run_in(|| {
        let l = AfPacketLink::open("obt-s", &opts(Some(9000))).expect("open with MTU 9000");
        assert_eq!(l.mtu(), 9000);
        assert!(l.info().mode.contains("1024x16384"), "{}", l.info().mode);
        drop(l);
        let l = AfPacketLink::open("obt-s", &opts(Some(1400))).expect("open with MTU 1400");
        assert_eq!(l.mtu(), 1400);
        match AfPacketLink::open("obt-s", &opts(Some(9500))) {
            Err(LinkError::BadSpec(m)) => assert!(m.contains("9500"), "{m}"),
            other => panic!(
                "MTU above the interface's must be refused, got {:?}",
                other.map(|l| l.info())
            ),
        }
    });
}

#[test]
fn missing_interface_is_no_such_interface() {
    // Needs no privilege: the name is looked up before any socket is made.
    match AfPacketLink::open("obt-nosuch9", &opts(None)) {
        Err(LinkError::NoSuchInterface(n)) => assert_eq!(n, "obt-nosuch9"),
        other => panic!(
            "expected NoSuchInterface, got {:?}",
            other.map(|l| l.info())
        ),
    }
    assert!(matches!(
        AfPacketLink::open("", &opts(None)),
        Err(LinkError::BadSpec(_))
    ));
}

/// Builds an Ethernet/IPv4/UDP frame `src -> dst:port` carrying `seq`, into `buf`.
fn udp_frame(buf: &mut [u8], src_mac: [u8; 6], dst_mac: [u8; 6], seq: u32, port: u16) -> usize {
    use outboard_wire::{
        EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Repr, TxChecksum, UdpRepr,
    };
    let (src, dst) = (Ipv4Addr::new(10, 201, 0, 2), Ipv4Addr::new(10, 201, 0, 1));
    let payload = [seq.to_be_bytes(), [0xab; 4], [0xcd; 4], [0xef; 4]].concat();
    let total = 14 + 20 + 8 + payload.len();
    EthernetRepr {
        src_addr: EthernetAddress(src_mac),
        dst_addr: EthernetAddress(dst_mac),
        ethertype: EtherType::Ipv4,
    }
    .emit(buf)
    .unwrap();
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::Udp,
        payload_len: 8 + payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: seq as u16,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut buf[14..])
    .unwrap();
    buf[42..total].copy_from_slice(&payload);
    UdpRepr {
        src_port: 40000,
        dst_port: port,
    }
    .emit(&mut buf[34..], src, dst, payload.len(), TxChecksum::Compute)
    .unwrap();
    total
}

fn big_rcvbuf(sock: &std::net::UdpSocket) {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = 8 << 20;
    // SAFETY: a valid int option on a valid socket.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Both rings wrap several times; a full TX ring says Full (without calling
/// the callback) and every queued frame reaches the kernel on flush; every
/// frame the kernel sends us is either received or counted as a kernel drop.
#[test]
fn rings_wrap_full_is_reported_and_nothing_is_lost() {
    if skip_unless_root("link_af_packet::rings_wrap_full_is_reported_and_nothing_is_lost") {
        return;
    }
    let ns = Netns::new("afpw");
    ns.ip(&[
        "link", "add", "name", "obt-k", "type", "veth", "peer", "name", "obt-s",
    ]);
    sysctl_in(&ns, "ipv6/conf/obt-k/disable_ipv6", "1");
    sysctl_in(&ns, "ipv6/conf/obt-s/disable_ipv6", "1");
    ns.ip(&["addr", "add", "10.201.0.1/24", "dev", "obt-k"]);
    ns.ip(&["link", "set", "obt-k", "up"]);

    ns.run_in(|| {
        use outboard_engine::link::{TxMeta, TxStatus};
        let mut link = AfPacketLink::open("obt-s", &opts(None)).expect("open");
        let mac = link.mac();
        let kmac = outboard_engine::link::sys::if_mac("obt-k").expect("kernel-side MAC");
        let mac_s = mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        ns.ip(&[
            "neigh",
            "replace",
            "10.201.0.2",
            "lladdr",
            &mac_s,
            "dev",
            "obt-k",
            "nud",
            "permanent",
        ]);

        // --- us -> kernel: 1100 frames without a flush: 1024 queued, then Full.
        let rx_sock = std::net::UdpSocket::bind("10.201.0.1:7001").expect("bind kernel UDP");
        big_rcvbuf(&rx_sock);
        rx_sock.set_nonblocking(true).unwrap();
        let (mut queued, mut full, mut called) = (0u32, 0u32, 0u32);
        for _ in 0..1100 {
            let seq = queued;
            match link
                .transmit(&mut |buf| {
                    called += 1;
                    Some((udp_frame(buf, mac, kmac, seq, 7001), TxMeta::default()))
                })
                .expect("transmit")
            {
                TxStatus::Queued => queued += 1,
                TxStatus::Full => full += 1,
                TxStatus::Idle => unreachable!(),
            }
        }
        assert_eq!(
            (queued, full, called),
            (1024, 76, 1024),
            "ring of 1024: then Full, callback not called"
        );
        assert_eq!(link.counters().tx_full, 76);
        link.flush().expect("flush");
        // Then 1000 more in batches of 50, flushing each batch (the ring wraps).
        let mut got = std::collections::BTreeSet::new();
        let drain = |got: &mut std::collections::BTreeSet<u32>| {
            let mut b = [0u8; 2048];
            while let Ok(n) = rx_sock.recv(&mut b) {
                assert_eq!(n, 16);
                got.insert(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            }
        };
        let mut seq = 1024u32;
        for _ in 0..20 {
            for _ in 0..50 {
                let s = seq;
                assert_eq!(
                    link.transmit(&mut |buf| Some((udp_frame(buf, mac, kmac, s, 7001), TxMeta::default())))
                        .unwrap(),
                    TxStatus::Queued
                );
                seq += 1;
            }
            link.flush().expect("flush");
            std::thread::sleep(Duration::from_millis(2));
            drain(&mut got);
        }
        for _ in 0..100 {
            if got.len() == 2024 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            drain(&mut got);
        }
        assert_eq!(
            got.len(),
            2024,
            "the kernel must receive every frame we queued (missing {:?}...)",
            (0..2024)
                .filter(|s| !got.contains(s))
                .take(10)
                .collect::<Vec<_>>()
        );
        let c = link.counters();
        assert_eq!((c.tx_frames, c.tx_errors), (2024, 0));

        // --- kernel -> us: 2000 datagrams in batches of 100, drained in between.
        let tx_sock = std::net::UdpSocket::bind("10.201.0.1:0").unwrap();
        let mut seen = 0u64;
        for batch in 0..20u32 {
            for i in 0..100u32 {
                tx_sock
                    .send_to(&(batch * 100 + i).to_be_bytes(), "10.201.0.2:7002")
                    .unwrap();
            }
            let is_ours = |f: &[u8]| {
                f.len() >= 42
                    && f[12..14] == [8, 0]
                    && f[23] == 17
                    && f[36..38] == 7002u16.to_be_bytes()
            };
            for _ in 0..50 {
                link.receive(512, &mut |f, _| seen += u64::from(is_ours(f)))
                    .unwrap();
                if seen >= u64::from((batch + 1) * 100) {
                    break;
                }
                link.wait(Duration::from_millis(2), &[], &[]).unwrap();
            }
        }
        let c = link.counters();
        eprintln!("{c:?}, seen {seen}");
        assert_eq!(
            seen + c.rx_kernel_drops,
            2000,
            "every frame received or counted as dropped"
        );
        assert!(seen >= 1900, "too many drops with a drained ring: {c:?}");

        // --- overflow: 1500 datagrams while nobody reads: the ring keeps 1024,
        // the kernel counts the rest as drops (PACKET_STATISTICS).
        let before = link.counters().rx_kernel_drops;
        for i in 0..1500u32 {
            tx_sock
                .send_to(&i.to_be_bytes(), "10.201.0.2:7002")
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut seen2 = 0u64;
        for _ in 0..10 {
            link.receive(2048, &mut |f, _| {
                seen2 += u64::from(f.len() >= 42 && f[36..38] == 7002u16.to_be_bytes())
            })
            .unwrap();
        }
        let drops = link.counters().rx_kernel_drops - before;
        eprintln!("overflow: received {seen2}, kernel drops {drops}");
        assert_eq!(seen2, 1024, "a full ring holds exactly its 1024 frames");
        assert_eq!(seen2 + drops, 1500, "the rest are reported as kernel drops");
    });
}
