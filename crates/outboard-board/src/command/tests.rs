use super::*;
use proptest::prelude::*;

const B: Bounds = Bounds { endpoints: 256, syncs: 64 };

fn ka(b: u64, c: u64, d: u64, e: u64) -> Command {
    Command { op: op::SET_OPTION, a: opt::KEEPALIVE, b, c, d, e, ..Default::default() }
}

fn option_of(c: &Command) -> StreamOption {
    match decode(c, B) {
        Ok(BoardCommand::SetOption { option, .. }) => option,
        other => panic!("{other:?}"),
    }
}

#[test]
fn keepalive_values_are_checked_before_use() {
    assert_eq!(option_of(&ka(0, 0, 0, 0)), StreamOption::KeepAlive(None));
    let k = |i, v, p| StreamOption::KeepAlive(Some(KeepAlive { idle: i, interval: v, probes: p }));
    assert_eq!(option_of(&ka(1, 7_200_000, 75_000, 9)), k(Duration::from_secs(7200), Duration::from_secs(75), 9));
    assert_eq!(option_of(&ka(1, 1 << 31, 1, 127)), k(Duration::from_millis(1 << 31), Duration::from_millis(1), 127));
    for bad in [
        ka(2, 1000, 1000, 3),
        ka(1, 0, 1000, 3),
        ka(1, 1000, 0, 3),
        ka(1, (1 << 31) + 1, 1000, 3),
        ka(1, 1000, u64::MAX, 3),
        ka(1, 1000, 1000, 0),
        ka(1, 1000, 1000, 128),
        ka(u64::MAX, 1000, 1000, 3),
    ] {
        assert_eq!(option_of(&bad), StreamOption::Invalid, "{bad:?}");
    }
    let unknown = Command { op: op::SET_OPTION, a: 99, b: 1, ..Default::default() };
    assert_eq!(option_of(&unknown), StreamOption::Invalid);
}

#[test]
fn ids_past_the_board_are_violations() {
    let push = Command { op: op::PUSH, endpoint: 256, a: 1, ..Default::default() };
    assert_eq!(decode(&push, B), Err(CommandViolation::BadEndpoint("push")));
    let listen = Command { op: op::LISTEN, sync: 64, a: 80, ..Default::default() };
    assert_eq!(decode(&listen, B), Err(CommandViolation::BadSync));
    assert_eq!(decode(&Command { op: 0, ..Default::default() }, B), Err(CommandViolation::UnknownOp(0)));
    let bind = Command { op: op::UDP_BIND, a: 70_000, ..Default::default() };
    assert_eq!(decode(&bind, B), Err(CommandViolation::BadField("bind port")));
}

#[test]
fn listen_keeps_its_einval_cases_as_values() {
    for a in [0, 70_000] {
        let c = Command { op: op::LISTEN, a, b: 0, ..Default::default() };
        assert_eq!(decode(&c, B), Ok(BoardCommand::Listen { sync: SyncSlot(0), port: None, backlog: 1, flags: ListenFlags::default() }));
    }
}

#[test]
fn listen_families_and_addresses_decode_or_are_violations() {
    let v6: std::net::IpAddr = "fd77::2".parse().unwrap();
    for family in [ListenFamily::Both, ListenFamily::Ipv4, ListenFamily::Ipv6, ListenFamily::Addr(v6)] {
        let l = BoardCommand::Listen { sync: SyncSlot(1), port: Some(80), backlog: 8, flags: ListenFlags { family, ..Default::default() } };
        assert_eq!(decode(&l.encode(), B), Ok(l));
    }
    // No family bit: both families (`ListenFlags::default()`).
    let plain = Command { op: op::LISTEN, a: 80, b: 8, ..Default::default() };
    assert!(matches!(decode(&plain, B), Ok(BoardCommand::Listen { flags: ListenFlags { family: ListenFamily::Both, .. }, .. })));
    let both = Command { flags: listen::IPV4_ONLY | listen::IPV6_ONLY, ..plain };
    assert_eq!(decode(&both, B), Err(CommandViolation::BadField("listen family")));
    // ADDR with a record that is no address.
    let garbage = Command { flags: listen::ADDR, c: 7, ..plain };
    assert!(matches!(decode(&garbage, B), Err(CommandViolation::BadAddress("listen", _))));
}

#[test]
fn addresses_of_both_families_and_garbage() {
    for to in ["10.0.0.1:80", "[2001:db8::1]:443"] {
        let to: SocketAddr = to.parse().unwrap();
        let c = BoardCommand::Connect { sync: SyncSlot(3), to, mss: 0, fast_open: false, tos: 0, rcv_clamp: 0 };
        assert_eq!(decode(&c.encode(), B), Ok(c));
        let s = BoardCommand::UdpSend { ep: Endpoint(7), offset: 4096, len: 10, to };
        assert_eq!(decode(&s.encode(), B), Ok(s));
    }
    // A CONNECT with the IPv4 word of layout version 2 (no family tag) is refused as such.
    let old = Command { op: op::CONNECT, a: u64::from(u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1))), b: 80, ..Default::default() };
    assert!(matches!(decode(&old, B), Err(CommandViolation::BadAddress("connect", _))));
}

#[test]
fn a_connect_mss_out_of_linux_range_is_none() {
    let to: SocketAddr = "10.0.0.1:80".parse().unwrap();
    for (word, want) in [(0u64, 0u16), (87, 0), (88, 88), (1000, 1000), (32767, 32767), (32768, 0), (u64::MAX, 0)] {
        let mut c = BoardCommand::Connect { sync: SyncSlot(1), to, mss: 0, fast_open: false, tos: 0, rcv_clamp: 0 }.encode();
        c.d = word;
        assert_eq!(decode(&c, B), Ok(BoardCommand::Connect { sync: SyncSlot(1), to, mss: want, fast_open: false, tos: 0, rcv_clamp: 0 }), "{word}");
    }
    // LISTEN's word f (TCP_MAXSEG on the listener) and SET_OPTION MAXSEG: the same range.
    for (word, want) in [(0u64, 0u16), (87, 0), (88, 88), (1000, 1000), (32767, 32767), (32768, 0), (0xffff, 0)] {
        let l = Command { op: op::LISTEN, a: 80, b: 8, f: word, ..Default::default() };
        let Ok(BoardCommand::Listen { flags, .. }) = decode(&l, B) else { panic!("{word}") };
        assert_eq!(flags.mss, want, "{word}");
        let o = Command { op: op::SET_OPTION, a: opt::MAXSEG, b: word, ..Default::default() };
        let o = option_of(&o);
        assert_eq!(o, if want == 0 && word != 0 { StreamOption::Invalid } else { StreamOption::MaxSeg(want) }, "{word}");
    }
    let cong = |b| Command { op: op::SET_OPTION, a: opt::CONGESTION, b, ..Default::default() };
    assert_eq!(option_of(&cong(opt::CC_CUBIC)), StreamOption::Congestion(1));
    assert_eq!(option_of(&cong(7)), StreamOption::Invalid);
    // TCP_QUICKACK: any int as set (a negative one as its 32 bits), nothing wider.
    let quick = |b| Command { op: op::SET_OPTION, a: opt::QUICKACK, b, ..Default::default() };
    assert_eq!(option_of(&quick(u64::from(u32::MAX))), StreamOption::QuickAck(u32::MAX));
    assert_eq!(option_of(&quick(1 << 32)), StreamOption::Invalid);
}

fn any_option() -> impl Strategy<Value = StreamOption> {
    prop_oneof![
        any::<bool>().prop_map(StreamOption::NoDelay),
        Just(StreamOption::KeepAlive(None)),
        (1u64..=opt::KEEPALIVE_MAX_MS, 1u64..=opt::KEEPALIVE_MAX_MS, 1u32..=127).prop_map(|(i, v, p)| {
            StreamOption::KeepAlive(Some(KeepAlive { idle: Duration::from_millis(i), interval: Duration::from_millis(v), probes: p }))
        }),
        any::<bool>().prop_map(StreamOption::Cork),
        any::<u32>().prop_map(StreamOption::UserTimeout),
        (0u8..=1).prop_map(StreamOption::Congestion),
        any::<u16>().prop_map(StreamOption::FastOpen),
        any::<u8>().prop_map(StreamOption::Tos),
        any::<u8>().prop_map(StreamOption::TrafficClass),
        (0..=opt::MAX_RCV_CLAMP).prop_map(StreamOption::RcvClamp),
        prop_oneof![Just(0u16), opt::MIN_MSS..=opt::MAX_MSS].prop_map(StreamOption::MaxSeg),
        any::<u32>().prop_map(StreamOption::QuickAck),
        Just(StreamOption::Invalid),
    ]
}

fn any_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::from((std::net::Ipv4Addr::from(a), p))),
        (any::<u128>(), any::<u16>(), any::<u32>())
            .prop_map(|(a, p, s)| SocketAddr::V6(std::net::SocketAddrV6::new(a.into(), p, 0, s))),
    ]
}

fn any_flags() -> impl Strategy<Value = ListenFlags> {
    let family = prop_oneof![
        Just(ListenFamily::Both),
        Just(ListenFamily::Ipv4),
        Just(ListenFamily::Ipv6),
        any_addr().prop_map(|a| ListenFamily::Addr(a.ip())),
    ];
    let mss = prop_oneof![Just(0u16), opt::MIN_MSS..=opt::MAX_MSS];
    (any::<bool>(), any::<bool>(), family, any::<u16>(), mss, any::<u8>(), any::<u8>(), 0..=opt::MAX_RCV_CLAMP).prop_map(
        |(reuseport, on_demand, family, fastopen_qlen, mss, tos, tclass, rcv_clamp)| ListenFlags {
            reuseport,
            on_demand,
            family,
            fastopen_qlen,
            mss,
            tos,
            tclass,
            rcv_clamp,
        },
    )
}

fn any_command() -> impl Strategy<Value = BoardCommand> {
    let ep = (0u32..B.endpoints).prop_map(Endpoint);
    let sync = (0u32..B.syncs).prop_map(SyncSlot);
    prop_oneof![
        (sync.clone(), proptest::option::of(1u16..), 1u32..=4096, any_flags())
            .prop_map(|(sync, port, backlog, flags)| BoardCommand::Listen { sync, port, backlog, flags }),
        (sync.clone(), any::<u64>(), any::<u32>(), any_flags())
            .prop_map(|(sync, key, ep, flags)| BoardCommand::Inherit { sync, key, ep, flags }),
        ep.clone().prop_map(|ep| BoardCommand::AcceptOn { ep }),
        (ep.clone(), 1u16.., 1u32..=4096, any_flags())
            .prop_map(|(ep, port, backlog, flags)| BoardCommand::ShadowListen { ep, port, backlog, flags }),
        (ep.clone(), any::<u64>(), any::<u32>(), any_flags())
            .prop_map(|(ep, key, parent, flags)| BoardCommand::ShadowInherit { ep, key, parent, flags }),
        ep.clone().prop_map(|ep| BoardCommand::Release { ep }),
        (sync.clone(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(sync, key, ep, shard)| BoardCommand::Adopt { sync, key, ep, shard }),
        any::<u64>().prop_map(|key| BoardCommand::ChildOf { key }),
        (sync.clone(), any_addr(), (prop_oneof![Just(0u16), opt::MIN_MSS..=opt::MAX_MSS], any::<bool>(), any::<u8>(), 0..=opt::MAX_RCV_CLAMP))
            .prop_map(|(sync, to, (mss, fast_open, tos, rcv_clamp))| BoardCommand::Connect { sync, to, mss, fast_open, tos, rcv_clamp }),
        (ep.clone(), any::<u64>()).prop_map(|(ep, written)| BoardCommand::Push { ep, written }),
        (ep.clone(), any::<u64>()).prop_map(|(ep, read)| BoardCommand::Consumed { ep, read }),
        ep.clone().prop_map(|ep| BoardCommand::Shutdown { ep }),
        ep.clone().prop_map(|ep| BoardCommand::Close { ep }),
        ep.clone().prop_map(|ep| BoardCommand::Abort { ep }),
        (sync, any::<u16>(), any_flags()).prop_map(|(sync, port, f)| BoardCommand::UdpBind { sync, port, family: f.family }),
        (ep.clone(), any::<u64>(), any::<u64>(), any_addr())
            .prop_map(|(ep, offset, len, to)| BoardCommand::UdpSend { ep, offset, len, to }),
        any::<u64>().prop_map(|offset| BoardCommand::UdpRelease { offset }),
        (ep, any_option()).prop_map(|(ep, option)| BoardCommand::SetOption { ep, option }),
        Just(BoardCommand::Detach),
        any_message_command(),
    ]
}

fn any_name() -> impl Strategy<Value = MsgName> {
    "[a-z0-9.-]{0,24}".prop_map(|n| MsgName::new(&n).expect("24 ASCII bytes at most"))
}

/// The message mailboxes' commands (`op::MSG_*`).
fn any_message_command() -> impl Strategy<Value = BoardCommand> {
    let ep = (0u32..B.endpoints).prop_map(Endpoint);
    let sync = (0u32..B.syncs).prop_map(SyncSlot);
    let span = (any::<u64>(), any::<u64>());
    prop_oneof![
        (sync.clone(), proptest::option::of(1u32..), any::<u32>(), any_name(), any::<bool>())
            .prop_map(|(sync, number, capacity, name, posted)| BoardCommand::MsgBind { sync, number, capacity, name, posted }),
        (ep.clone(), span, any_addr(), any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(ep, (offset, len), to, mailbox, tag, reliable)| {
            BoardCommand::MsgSend { ep, offset, len, to, mailbox, tag, reliable }
        }),
        (ep.clone(), span, any_addr(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(ep, (offset, len), to, mailbox, tag, timeout_ms)| {
            BoardCommand::MsgCall { ep, offset, len, to, mailbox, tag, timeout_ms }
        }),
        (ep.clone(), span, any::<u32>()).prop_map(|(ep, (offset, len), token)| BoardCommand::MsgReply { ep, offset, len, token }),
        (sync.clone(), any_addr(), any_name()).prop_map(|(sync, host, name)| BoardCommand::MsgLookup { sync, host, name }),
        (ep.clone(), span, any::<u32>()).prop_map(|(ep, (offset, len), tag)| BoardCommand::MsgPostRecv { ep, offset, len, tag }),
        (sync.clone(), ep.clone(), span, proptest::option::of(0u64..u64::MAX), any::<bool>()).prop_map(|(sync, ep, (offset, len), tripwire, notify)| {
            BoardCommand::MsgRegister { sync, ep, offset, len, tripwire, notify }
        }),
        (ep.clone(), any::<u64>()).prop_map(|(ep, cookie)| BoardCommand::MsgUnregister { ep, cookie }),
        (ep.clone(), span, any_addr(), any::<u64>(), any::<u32>(), any::<u32>())
            .prop_map(|(ep, (offset, len), to, cookie, at, tag)| BoardCommand::MsgWrite { ep, offset, len, to, cookie, at, tag }),
        span.prop_map(|(offset, len)| BoardCommand::HandlerStage { offset, len }),
        (sync.clone(), any_name(), any::<u32>(), any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(
            |(sync, name, mailbox, memory, kv, deadline_ms, max_faults)| BoardCommand::HandlerLoad { sync, name, mailbox, memory, kv, deadline_ms, max_faults }
        ),
        (sync.clone(), any_name()).prop_map(|(sync, name)| BoardCommand::HandlerUnload { sync, name }),
        (sync, ep.clone()).prop_map(|(sync, ep)| BoardCommand::Info { sync, ep }),
        (ep, 0..crate::layout::WAKE_SLOTS as u8).prop_map(|(ep, group)| BoardCommand::WakeGroup { ep, group }),
    ]
}

#[test]
fn mailbox_names_are_checked() {
    assert_eq!(MsgName::new("kv").unwrap().as_str(), Some("kv"));
    assert_eq!(MsgName::default().as_str(), None);
    assert!(MsgName::new(&"x".repeat(25)).is_none());
    assert!(MsgName::new("a\0b").is_none());
    // A NUL inside the name, or bytes that are not UTF-8: a violation.
    let mut c = BoardCommand::MsgBind { sync: SyncSlot(0), number: None, capacity: 0, name: MsgName::new("kv").unwrap(), posted: false }.encode();
    c.c |= 0xff << 40;
    assert!(matches!(decode(&c, B), Err(CommandViolation::BadField("mailbox name"))));
    c.c = 0xff;
    assert!(matches!(decode(&c, B), Err(CommandViolation::BadField("mailbox name"))));
}

proptest! {
    /// Every record decodes to a command or a violation; never a panic.
    #[test]
    fn decoding_is_total(op in 0u32..34, endpoint: u32, sync: u32, flags: u32,
                         a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) {
        let rec = Command { op, endpoint, sync, flags, a, b, c, d, e, f };
        let _ = decode(&rec, B);
        let _ = decode(&rec, Bounds { endpoints: 0, syncs: 0 });
    }

    /// What an application encodes, the engine decodes to the same command.
    #[test]
    fn encode_then_decode_is_the_identity(cmd in any_command()) {
        prop_assert_eq!(decode(&cmd.encode(), B), Ok(cmd));
    }
}
