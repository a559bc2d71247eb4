use std::net::Ipv6Addr;
use super::*;
use proptest::prelude::*;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().expect("test literal is an address")
}

/// Microsoft, "Verifying the RSS hash calculation" (IPv4 table): source,
/// destination, IPv4-only hash, IPv4-with-TCP hash.
const MS_VECTORS: [(&str, u16, &str, u16, u32, u32); 5] = [
    (
        "66.9.149.187",
        2794,
        "161.142.100.80",
        1766,
        0x323e_8fc2,
        0x51cc_c178,
    ),
    (
        "199.92.111.2",
        14230,
        "65.69.140.83",
        4739,
        0xd718_262a,
        0xc626_b0ea,
    ),
    (
        "24.19.198.95",
        12898,
        "12.22.207.184",
        38024,
        0xd2d0_a5de,
        0x5c2b_394a,
    ),
    (
        "38.27.205.30",
        48228,
        "209.142.163.6",
        2217,
        0x8298_9176,
        0xafc7_327f,
    ),
    (
        "153.39.163.191",
        44251,
        "202.188.127.2",
        1303,
        0x5d18_09c5,
        0x10e8_28a2,
    ),
];

fn tuple(src: &str, sport: u16, dst: &str, dport: u16) -> FlowTuple {
    FlowTuple {
        src_ip: ip(src),
        dst_ip: ip(dst),
        src_port: sport,
        dst_port: dport,
    }
}

#[test]
fn toeplitz_matches_microsoft_ipv4_tcp_vectors() {
    for (src, sport, dst, dport, _, want) in MS_VECTORS {
        let got = rss_hash_ipv4_tcp(&MICROSOFT_RSS_KEY, &tuple(src, sport, dst, dport));
        assert_eq!(got, want, "{src}:{sport} -> {dst}:{dport}");
    }
}

#[test]
fn toeplitz_matches_microsoft_ipv4_only_vectors() {
    for (src, _, dst, _, want, _) in MS_VECTORS {
        assert_eq!(
            rss_hash_ipv4(&MICROSOFT_RSS_KEY, ip(src), ip(dst)),
            want,
            "{src} -> {dst}"
        );
    }
}

/// The definition, bit by bit, as the specification's pseudocode states it.
fn toeplitz_reference(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| (key[i / 8] >> (7 - i % 8)) & 1;
    let mut result = 0u32;
    for i in 0..input.len() * 8 {
        if (input[i / 8] >> (7 - i % 8)) & 1 == 1 {
            let mut window = 0u32;
            for j in 0..32 {
                window = (window << 1) | u32::from(key_bit(i + j));
            }
            result ^= window;
        }
    }
    result
}

proptest! {
    #[test]
    fn toeplitz_equals_bitwise_definition(input in proptest::collection::vec(any::<u8>(), 0..=36)) {
        prop_assert_eq!(toeplitz_hash(&MICROSOFT_RSS_KEY, &input), toeplitz_reference(&MICROSOFT_RSS_KEY, &input));
    }

    #[test]
    fn toeplitz_is_linear_over_xor(a in any::<[u8; 12]>(), b in any::<[u8; 12]>()) {
        // Linearity is what makes port search cheap: the port's bits flip the
        // hash independently of the addresses.
        let x: Vec<u8> = a.iter().zip(b.iter()).map(|(p, q)| p ^ q).collect();
        let k = &MICROSOFT_RSS_KEY;
        prop_assert_eq!(toeplitz_hash(k, &x), toeplitz_hash(k, &a) ^ toeplitz_hash(k, &b));
    }

    #[test]
    fn picked_port_hashes_to_callers_shard(
        local in any::<u32>(), rip in any::<u32>(), rport in any::<u16>(), nshards in 1u16..=16, pick in any::<u16>(),
    ) {
        let shard = pick % nshards;
        let (local, rip) = (Ipv4Addr::from(local), Ipv4Addr::from(rip));
        let port = pick_source_port(local, (rip, rport), shard, nshards, 49152..=65535, |_| true)
            .expect("16384 ports always include one per shard");
        prop_assert!((49152..=65535).contains(&port));
        let t = FlowTuple { src_ip: rip, dst_ip: local, src_port: rport, dst_port: port };
        prop_assert_eq!(shard_for(&t, nshards), shard);
    }
}

#[test]
fn toeplitz_with_short_key_is_zero_not_panic() {
    assert_eq!(toeplitz_hash(&[1, 2, 3], &[0xff; 12]), 0);
    // Input longer than the key allows uses only the prefix.
    assert_eq!(
        toeplitz_hash(&MICROSOFT_RSS_KEY, &[0xff; 50]),
        toeplitz_hash(&MICROSOFT_RSS_KEY, &[0xff; 36])
    );
}

#[test]
fn shard_for_uses_low_seven_bits_round_robin() {
    for (src, sport, dst, dport, _, hash) in MS_VECTORS {
        let t = tuple(src, sport, dst, dport);
        for n in 1..=12u16 {
            assert_eq!(shard_for(&t, n), ((hash % 128) as u16) % n);
        }
        assert_eq!(shard_for(&t, 0), 0, "zero shards behaves as one");
    }
}

#[test]
fn steering_default_table_agrees_with_shard_for() {
    for n in 1..=8u16 {
        let s = Steering::default_for(n);
        for (src, sport, dst, dport, _, _) in MS_VECTORS {
            let t = tuple(src, sport, dst, dport);
            assert_eq!(s.shard_for(&t), shard_for(&t, n));
        }
    }
}

#[test]
fn steering_custom_table_maps_low_bits() {
    // 4-entry table sending everything to queue 7 except index 0.
    let s = Steering::new(&MICROSOFT_RSS_KEY, vec![1, 7, 7, 7]).expect("valid");
    for (src, sport, dst, dport, _, hash) in MS_VECTORS {
        let want = if hash & 3 == 0 { 1 } else { 7 };
        assert_eq!(s.shard_for(&tuple(src, sport, dst, dport)), want);
    }
    assert_eq!(
        Steering::new(&MICROSOFT_RSS_KEY, vec![0, 1, 2]),
        Err(SteeringError::BadRetaSize)
    );
    assert_eq!(
        Steering::new(&MICROSOFT_RSS_KEY, vec![]),
        Err(SteeringError::BadRetaSize)
    );
    assert_eq!(
        Steering::new(&[0; 8], vec![0]),
        Err(SteeringError::KeyTooShort)
    );
}

#[test]
fn pick_source_port_skips_ports_in_use() {
    let (local, remote) = (ip("10.0.0.1"), (ip("10.0.0.2"), 80));
    let first = pick_source_port(local, remote, 1, 4, 40000..=40999, |_| true).expect("some port");
    let second =
        pick_source_port(local, remote, 1, 4, 40000..=40999, |p| p != first).expect("another port");
    assert!(second > first);
    let t = FlowTuple {
        src_ip: remote.0,
        dst_ip: local,
        src_port: remote.1,
        dst_port: second,
    };
    assert_eq!(shard_for(&t, 4), 1);
}

#[test]
fn pick_source_port_none_when_nothing_free_or_bad_shard() {
    let (local, remote) = (ip("10.0.0.1"), (ip("10.0.0.2"), 80));
    assert_eq!(
        pick_source_port(local, remote, 0, 2, 40000..=40100, |_| false),
        None
    );
    assert_eq!(
        pick_source_port(local, remote, 2, 2, 40000..=40100, |_| true),
        None,
        "shard out of range"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let empty = 5000..=4000;
    assert_eq!(pick_source_port(local, remote, 0, 1, empty, |_| true), None);
}

#[test]
fn pick_source_port_from_wraps_around_the_range() {
    let (local, remote) = (ip("192.168.1.10"), (ip("192.168.1.20"), 443));
    let range = 50000..=50063;
    let all: Vec<u16> = range
        .clone()
        .filter(|&p| {
            let t = FlowTuple {
                src_ip: remote.0,
                dst_ip: local,
                src_port: remote.1,
                dst_port: p,
            };
            shard_for(&t, 2) == 0
        })
        .collect();
    assert!(all.len() >= 2, "64 ports give both shards several");
    let last = *all.last().expect("non-empty");
    // Starting after the last matching port wraps to the first one.
    let got = pick_source_port_from(
        local,
        remote,
        0,
        2,
        range.clone(),
        last.saturating_add(1),
        |_| true,
    );
    assert_eq!(got, Some(all[0]));
    assert_eq!(
        pick_source_port_from(local, remote, 0, 2, range, last, |_| true),
        Some(last)
    );
}

#[test]
fn one_shard_takes_first_free_port() {
    let (local, remote) = (ip("10.0.0.1"), (ip("10.0.0.2"), 80));
    assert_eq!(
        pick_source_port(local, remote, 0, 1, 49152..=65535, |p| p >= 50000),
        Some(50000)
    );
}

/// An Ethernet + IPv4 frame with `proto` and the first four L4 bytes (ports).
fn frame(src: &str, dst: &str, proto: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_ = &mut f[14..34];
    ip_[0] = 0x45;
    ip_[6..8].copy_from_slice(&frag.to_be_bytes());
    ip_[9] = proto;
    ip_[12..16].copy_from_slice(&ip(src).octets());
    ip_[16..20].copy_from_slice(&ip(dst).octets());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn frames_go_to_the_shard_their_flow_hashes_to_unless_a_port_is_bound_elsewhere() {
    let none = |_: Transport, _: u16| 0u64;
    for sport in 40000..40064u16 {
        let t = FlowTuple { src_ip: ip("10.0.0.2"), dst_ip: ip("10.0.0.1"), src_port: sport, dst_port: 80 };
        let want = shard_for(&t, 4);
        assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 6, sport, 80, 0), 4, none), FrameOwner::Shard(want));
        assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 17, sport, 80, 0), 4, none), FrameOwner::Shard(want));
        // Port 80 listened on shard 2 only: every frame to it goes there.
        let only2 = |t: Transport, p: u16| if t == Transport::Tcp && p == 80 { 1 << 2 } else { 0 };
        assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 6, sport, 80, 0), 4, only2), FrameOwner::Shard(2));
        // Bound on every shard: the hash decides.
        let all = |_: Transport, _: u16| 0b1111u64;
        assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 6, sport, 80, 0), 4, all), FrameOwner::Shard(want));
    }
    // Fragments, echo, other protocols, ARP, garbage.
    assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 17, 5, 6, 0x2000), 4, none), FrameOwner::Shard(0));
    assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 17, 5, 6, 0x0010), 4, none), FrameOwner::Shard(0));
    assert_eq!(frame_owner(&frame("10.0.0.2", "10.0.0.1", 47, 5, 6, 0), 4, none), FrameOwner::Shard(0));
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(frame_owner(&arp, 4, none), FrameOwner::Arp);
    assert_eq!(frame_owner(&arp, 1, none), FrameOwner::Shard(0));
    assert_eq!(frame_owner(&[0u8; 5], 4, none), FrameOwner::Shard(0));
}

#[test]
fn an_icmp_error_goes_to_the_owner_of_the_flow_it_quotes() {
    let none = |_: Transport, _: u16| 0u64;
    for lport in 33000..33032u16 {
        // We (10.0.0.1:lport) sent to 10.0.0.9:443; the router says unreachable.
        let quoted = frame("10.0.0.1", "10.0.0.9", 6, lport, 443, 0);
        let mut f = frame("10.0.0.254", "10.0.0.1", 1, 0, 0, 0);
        f.truncate(34);
        f.extend_from_slice(&[3, 1, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&quoted[14..]);
        let t = FlowTuple { src_ip: ip("10.0.0.9"), dst_ip: ip("10.0.0.1"), src_port: 443, dst_port: lport };
        assert_eq!(frame_owner(&f, 4, none), FrameOwner::Shard(shard_for(&t, 4)));
    }
}

/// An Ethernet frame carrying IPv6 from `src` to `dst` with `next` and `l4`.
fn frame6(src: &str, dst: &str, next: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    f[20] = next;
    f[21] = 64;
    f[22..38].copy_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
    f[38..54].copy_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(l4);
    f
}

/// Microsoft, "Verifying the RSS hash calculation" (IPv6 table).
#[test]
fn toeplitz_matches_the_published_ipv6_vectors() {
    for (dst, dport, src, sport, with_tcp) in [
        ("3ffe:2501:200:3::1", 1766u16, "3ffe:2501:200:1fff::7", 2794u16, 0x4020_7d3du32),
        ("ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0xdde5_1bbf),
        ("fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x02d1_feef),
    ] {
        let t = FlowTuple6 { src_ip: src.parse().unwrap(), dst_ip: dst.parse().unwrap(), src_port: sport, dst_port: dport };
        assert_eq!(toeplitz_hash(&MICROSOFT_RSS_KEY, &t.rss_input()), with_tcp, "{src} -> {dst}");
    }
}

#[test]
fn ipv6_flows_steer_by_the_ipv6_rss_hash_and_neighbour_discovery_goes_to_every_shard() {
    let none = |_: Transport, _: u16| 0u64;
    let (peer, us): (Ipv6Addr, Ipv6Addr) = ("2001:db8::9".parse().unwrap(), "2001:db8::1".parse().unwrap());
    let mut seen = [0u32; 4];
    for sport in 40000..40064u16 {
        let mut tcp = [0u8; 20];
        tcp[0..2].copy_from_slice(&sport.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        let f = frame6("2001:db8::9", "2001:db8::1", 6, &tcp);
        let want = shard_for_v6(&FlowTuple6 { src_ip: peer, dst_ip: us, src_port: sport, dst_port: 80 }, 4);
        assert_eq!(frame_owner(&f, 4, none), FrameOwner::Shard(want));
        seen[usize::from(want)] += 1;
    }
    assert!(seen.iter().all(|&n| n > 0), "64 flows spread over 4 shards: {seen:?}");
    let port = pick_source_port(us, (peer, 443), 3, 4, 33000..=34000, |_| true).unwrap();
    let mut back = [0u8; 20];
    back[0..2].copy_from_slice(&443u16.to_be_bytes());
    back[2..4].copy_from_slice(&port.to_be_bytes());
    assert_eq!(frame_owner(&frame6("2001:db8::9", "2001:db8::1", 6, &back), 4, none), FrameOwner::Shard(3));
    // Neighbour discovery (NS 135) is copied to every shard; echo goes to shard 0.
    let mut ns = [0u8; 24];
    ns[0] = 135;
    assert_eq!(frame_owner(&frame6("fe80::9", "ff02::1:ff00:1", 58, &ns), 4, none), FrameOwner::Arp);
    let echo = [128u8, 0, 0, 0, 0, 1, 0, 1];
    assert_eq!(frame_owner(&frame6("2001:db8::9", "2001:db8::1", 58, &echo), 4, none), FrameOwner::Shard(0));
    // A Packet Too Big quoting what we sent goes to that flow's owner.
    let mut quoted = frame6("2001:db8::1", "2001:db8::9", 6, &{
        let mut t = [0u8; 20];
        t[0..2].copy_from_slice(&port.to_be_bytes());
        t[2..4].copy_from_slice(&443u16.to_be_bytes());
        t
    });
    quoted.drain(..14);
    let mut ptb = vec![2u8, 0, 0, 0, 0, 0, 5, 0];
    ptb.extend_from_slice(&quoted);
    assert_eq!(frame_owner(&frame6("2001:db8::fe", "2001:db8::1", 58, &ptb), 4, none), FrameOwner::Shard(3));
}

proptest! {
    #[test]
    fn frame_owner_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..128), n in 1u16..64) {
        match frame_owner(&bytes, n, |_, p| u64::from(p)) {
            FrameOwner::Shard(s) => prop_assert!(s < n),
            FrameOwner::Arp => prop_assert!(n > 1),
        }
    }
}
