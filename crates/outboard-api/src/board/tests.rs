//! The attach reply's version check, and the board's per-shard rings
//! against a fake engine (a socket pair and a memfd this test writes as the
//! engine would: no engine runs).

use super::*;
use outboard_board::attach::ATTACH_MAGIC;

fn reply(status: i32, version: u32) -> AttachReply {
    AttachReply {
        magic: ATTACH_MAGIC,
        status: status as u32,
        board_bytes: 0,
        params: BoardParams::default(),
        prefix_len: 24,
        _pad: [0; 3],
        version,
        engine_addr: NetAddr::NONE,
        gateway: NetAddr::NONE,
        ipv6_flags: 0,
        prefix_len6: 0,
        _pad6: [0; 6],
        engine_addr6: NetAddr::NONE,
        gateway6: NetAddr::NONE,
    }
}
const FULL: usize = std::mem::size_of::<AttachReply>();

#[test]
fn an_engine_of_our_version_is_no_mismatch() {
    assert_eq!(version_mismatch(&reply(0, VERSION), FULL), None);
    // A refusal for another reason is the engine's to explain.
    assert_eq!(version_mismatch(&reply(libc::ENOMEM, VERSION), FULL), None);
}

#[test]
fn refusals_and_replies_of_other_versions_name_both_versions() {
    // A version-2 engine: 72 bytes, EPROTO, its IPv4 address where the version is now.
    let v2 = reply(libc::EPROTO, u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    let m = version_mismatch(&v2, 72).expect("mismatch");
    assert_eq!(m, version_refusal(2, VERSION));
    assert!(m.contains("version 2") && m.contains(&format!("version {VERSION}")), "{m}");
    // A later engine refuses us by its version.
    let m = version_mismatch(&reply(libc::EPROTONOSUPPORT, VERSION + 1), FULL).expect("mismatch");
    assert_eq!(m, version_refusal(VERSION + 1, VERSION));
    // Whatever the status, a reply of another version is not ours to use.
    let m = version_mismatch(&reply(0, VERSION + 1), FULL).expect("mismatch");
    assert!(m.contains(&format!("version {}", VERSION + 1)), "{m}");
    // EPROTO even with our version number: refused for the version.
    assert!(version_mismatch(&reply(libc::EPROTO, VERSION), FULL).is_some());
}

#[test]
fn short_or_versionless_replies_are_an_earlier_version() {
    for (r, got) in [(reply(libc::EPROTO, 0), 56), (reply(libc::EPROTO, 0), 59), (reply(libc::EPROTO, 0), FULL), (reply(0, 0), FULL)] {
        let m = version_mismatch(&r, got).expect("mismatch");
        assert!(m.contains("earlier board layout version (2 or older)"), "{m}");
        assert!(m.contains(&format!("version {VERSION}")), "{m}");
    }
    // A reply of our version cut short after the version word: not one to use.
    assert!(version_mismatch(&reply(0, VERSION), 80).is_some_and(|m| m.contains("cut short")));
}

// ---- the per-shard rings, against a fake engine ----

use outboard_board::command::{decode, Bounds};
use outboard_board::layout::{CLASS_DGRAM_RX, ENGINE_RUNNING, SLEEP_EVENTFD};
use outboard_board::{ArenaLayout, Descriptor, MailboxProducer};
use std::os::fd::{FromRawFd, RawFd};

/// What the fake engine holds: its side of the socket and board, and the doorbell eventfd.
struct FakeEngine {
    _sock: UnixStream,
    map: Arc<Mapping>,
    layout: BoardLayout,
    doorbell: OwnedFd,
    cmds: Vec<Consumer<Command>>,
    events: Vec<Producer<Event>>,
}

impl FakeEngine {
    /// Every command waiting in shard `s`'s ring, decoded.
    fn commands(&mut self, s: usize) -> Vec<BoardCommand> {
        let p = self.layout.params;
        let bounds = Bounds { endpoints: p.endpoints, syncs: p.syncs };
        std::iter::from_fn(|| self.cmds[s].get().expect("ring")).map(|c| decode(&c, bounds).expect("a command")).collect()
    }
    fn doorbell_count(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
        let n = unsafe { libc::read(self.doorbell.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v
        } else {
            0
        }
    }
    /// Publishes endpoint `ep` as the engine does: its status record (shard,
    /// addresses) before the id.
    fn open(&self, ep: u32, shard: u32, local: SocketAddr, remote: Option<SocketAddr>) {
        let base = self.layout.endpoint_status(ep);
        self.map.atomic_u32(base + status::SHARD).store(shard, Ordering::Release);
        self.map.write(base + status::LOCAL, NetAddr::from(local));
        self.map.write(base + status::REMOTE, NetAddr::from(remote));
    }
}

/// A board attached to a fake engine with `shards` shards at 10.0.0.1/24.
fn attach_fake(shards: u32) -> (Board, FakeEngine) {
    let (app, eng) = UnixStream::pair().unwrap();
    let params = BoardParams { shards, endpoints: 16, syncs: 8, dgram_buffers: 8, stream_buffers: 0, ..Default::default() };
    let layout = BoardLayout::new(params).unwrap();
    let (map, memfd) = Mapping::create_memfd("outboard-api-test", layout.total).unwrap();
    let map = Arc::new(map);
    map.write(header::MAGIC, MAGIC);
    map.write(header::VERSION, VERSION);
    map.write(header::PARAMS, params);
    map.atomic_u32(header::ENGINE_STATE).store(ENGINE_RUNNING, Ordering::Release);
    // SAFETY: a plain eventfd; we own the descriptor it returns.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(efd >= 0);
    // SAFETY: just made, ours alone.
    let doorbell = unsafe { OwnedFd::from_raw_fd(efd) };
    let reply = AttachReply {
        magic: ATTACH_MAGIC,
        status: 0,
        board_bytes: layout.total as u64,
        params,
        version: VERSION,
        prefix_len: 24,
        _pad: [0; 3],
        engine_addr: NetAddr::from(SocketAddr::from(([10, 0, 0, 1], 0))),
        gateway: NetAddr::NONE,
        ipv6_flags: outboard_board::attach::ipv6::ON,
        prefix_len6: 64,
        _pad6: [0; 6],
        engine_addr6: NetAddr::from("[fd77::2]:0".parse::<SocketAddr>().unwrap()),
        gateway6: NetAddr::NONE,
    };
    // The reply waits in the socket until the handshake reads it.
    let fds: [RawFd; 2] = [memfd.as_raw_fd(), doorbell.as_raw_fd()];
    send_record(&eng, &reply, &fds).unwrap();
    let board = Board::handshake(app, &AttachOptions::default(), None).expect("attach");
    let p = layout.params;
    let cmds = layout.shards.iter().map(|s| Consumer::new(map.clone(), s.command_ring, p.command_capacity)).collect();
    let events = layout.shards.iter().map(|s| Producer::new(map.clone(), s.event_ring, p.event_capacity)).collect();
    (board, FakeEngine { _sock: eng, map, layout, doorbell, cmds, events })
}

#[test]
fn commands_go_to_their_endpoints_shard_and_creating_ones_where_placed() {
    let (board, mut eng) = attach_fake(2);
    assert_eq!(board.engine_addr(), IpAddr::from([10, 0, 0, 1]));
    assert_eq!(board.engine_net().gateway, None);
    // The reply's IPv6 facts: a dual-stack engine serves its IPv6 prefix.
    let v6net = board.engine_net().ipv6.expect("the engine runs IPv6");
    assert_eq!(v6net.addr, Some(("fd77::2".parse().unwrap(), 64)));
    assert!(board.engine_net().serves("fd77::1".parse::<IpAddr>().unwrap()));
    // A connect (either family) goes to the shard the board places it on
    // (by default the calling core's; here chosen).
    board.place_on(Some(0));
    let v6: SocketAddr = "[2001:db8::1]:80".parse().unwrap();
    let mut pending = board.connect_start(v6).expect("connect_start");
    let got = eng.commands(0);
    let [BoardCommand::Connect { sync, to, .. }] = got[..] else { panic!("{got:?}") };
    assert_eq!(to, v6);
    assert!(eng.commands(1).is_empty());
    // The engine's shard 1 makes endpoint 5 and answers.
    let local: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    eng.open(5, 1, local, Some(v6));
    board.inner.borrow().syncs.complete(sync.0, 5).unwrap();
    let mut s = pending.poll().expect("done").expect("a stream");
    assert_eq!((s.local_addr(), s.peer_addr()), (local, v6));
    // Its commands go to shard 1's ring.
    s.set_nodelay(true).unwrap();
    s.shutdown().unwrap();
    assert!(eng.commands(0).is_empty());
    let ep = Endpoint(5);
    assert_eq!(
        eng.commands(1),
        [BoardCommand::SetOption { ep, option: outboard_board::command::StreamOption::NoDelay(true) }, BoardCommand::Shutdown { ep }]
    );
    drop(s);
    assert_eq!(eng.commands(1), [BoardCommand::Close { ep }]);
    // DETACH goes to every shard.
    drop(pending);
    drop(board);
    assert_eq!(eng.commands(0), [BoardCommand::Detach]);
    assert_eq!(eng.commands(1), [BoardCommand::Detach]);
}

#[test]
fn each_shard_is_woken_as_it_sleeps() {
    let (board, mut eng) = attach_fake(2);
    eng.open(3, 1, "10.0.0.1:80".parse().unwrap(), None);
    board.inner.borrow_mut().open_ep(3);
    let word = |s: u32, f: usize| eng.map.atomic_u32(eng.layout.shard_control(s, f));
    let push = |n: u64| board.inner.borrow_mut().command(BoardCommand::Push { ep: Endpoint(3), written: n }).unwrap();
    // Awake: no doorbell.
    push(1);
    assert_eq!((eng.doorbell_count(), word(1, shard_control::ENGINE_DOORBELL).load(Ordering::SeqCst)), (0, 0));
    // Shard 1 sleeps on its futex word: that word moves, not shard 0's.
    word(1, shard_control::ENGINE_SLEEPING).store(SLEEP_FUTEX, Ordering::SeqCst);
    push(2);
    assert_eq!(word(1, shard_control::ENGINE_DOORBELL).load(Ordering::SeqCst), 1);
    assert_eq!(word(0, shard_control::ENGINE_DOORBELL).load(Ordering::SeqCst), 0);
    assert_eq!(eng.doorbell_count(), 0);
    // Shard 0 sleeps on the eventfd: a command for it writes it.
    word(0, shard_control::ENGINE_SLEEPING).store(SLEEP_EVENTFD, Ordering::SeqCst);
    board.place_on(Some(0));
    let _ = board.connect_start(SocketAddr::from(([10, 0, 0, 2], 80))).unwrap();
    assert_eq!(eng.doorbell_count(), 1);
    assert_eq!(word(1, shard_control::ENGINE_DOORBELL).load(Ordering::SeqCst), 1);
    assert_eq!(eng.commands(1).len(), 2);
}

#[test]
fn events_come_from_every_shard() {
    let (board, mut eng) = attach_fake(3);
    for (shard, ep) in [(0u32, 3u32), (1, 4), (2, 5)] {
        eng.open(ep, shard, "10.0.0.1:80".parse().unwrap(), None);
        board.inner.borrow_mut().open_ep(ep);
        assert_eq!(board.inner.borrow().ep_shard(ep), shard);
    }
    eng.events[2].put(Event { endpoint: 5, kind: ev::READABLE, value: 0 }).unwrap();
    eng.events[1].put(Event { endpoint: 4, kind: ev::WRITABLE, value: 0 }).unwrap();
    eng.events[0].put(Event { endpoint: 3, kind: ev::READABLE, value: 0 }).unwrap();
    board.pump().unwrap();
    let mut changed = Vec::new();
    board.take_changed(&mut changed);
    changed.sort_unstable();
    assert_eq!(changed, [3, 4, 5]);
    assert_eq!(board.edges(5).readable, 1);
    assert_eq!(board.edges(4).writable, 1);
}

#[test]
fn one_shard_behaves_as_the_single_ring_did() {
    let (board, mut eng) = attach_fake(1);
    eng.open(7, 0, "10.0.0.1:80".parse().unwrap(), None);
    board.inner.borrow_mut().open_ep(7);
    board.inner.borrow_mut().command(BoardCommand::Abort { ep: Endpoint(7) }).unwrap();
    eng.map.atomic_u32(eng.layout.shard_control(0, shard_control::ENGINE_SLEEPING)).store(SLEEP_EVENTFD, Ordering::SeqCst);
    let _ = board.connect_start(SocketAddr::from(([10, 0, 0, 2], 80))).unwrap();
    assert_eq!(eng.doorbell_count(), 1);
    let got = eng.commands(0);
    assert!(matches!(got[..], [BoardCommand::Abort { ep: Endpoint(7) }, BoardCommand::Connect { .. }]), "{got:?}");
    // A raw record (the hostile tests' way) goes to its endpoint's shard too.
    board.__raw_command_for_tests(Command { op: outboard_board::proto::op::CLOSE, endpoint: 7, ..Default::default() }).unwrap();
    assert_eq!(eng.commands(0), [BoardCommand::Close { ep: Endpoint(7) }]);
}

#[test]
fn a_received_datagram_carries_its_source_before_its_payload() {
    let (board, mut eng) = attach_fake(2);
    let id = 6; // shard 0's (6 % 2)
    eng.open(id, 0, "10.0.0.1:9000".parse().unwrap(), None);
    {
        let mut i = board.inner.borrow_mut();
        i.open_ep(id);
        let (off, cap, map) = (i.layout.endpoint_mailbox(id), i.layout.params.mailbox_capacity, i.map.clone());
        i.eps[id as usize].mailbox = Some(MailboxConsumer::new(map, off, cap));
    }
    let mut d = crate::Datagram { board: board.clone(), id };
    d.set_mode(Mode::NonBlocking);
    assert!(matches!(d.begin_get(), Err(Error::WouldBlock)));
    let arena: Arc<ArenaLayout> = Arc::new(eng.layout.arena.clone());
    let buf = arena.offset_of(BufRef { class: CLASS_DGRAM_RX, index: 2 });
    let mut mb = MailboxProducer::new(eng.map.clone(), eng.layout.endpoint_mailbox(id), eng.layout.params.mailbox_capacity, arena.clone());
    for (src, payload) in [("10.0.0.2:5353", &b"hello"[..]), ("[2001:db8::2]:53", &b"v6!"[..])] {
        let src: SocketAddr = src.parse().unwrap();
        eng.map.write(buf, NetAddr::from(src));
        eng.map.copy_in(buf + outboard_board::layout::DGRAM_HEADER, payload);
        assert!(mb.put(Descriptor { offset: buf as u32, len: payload.len() as u32, tag: 0, aux: 0 }).unwrap());
        let mut out = [0u8; 64];
        let (n, from) = d.recv_from(&mut out).expect("a datagram");
        assert_eq!((&out[..n], from), (payload, src));
        // The buffer goes back by its start, to the socket's shard.
        assert_eq!(eng.commands(0), [BoardCommand::UdpRelease { offset: buf as u64 }]);
        assert!(eng.commands(1).is_empty());
    }
    // A descriptor whose payload runs past its buffer is refused.
    let size = arena.size_of(BufRef { class: CLASS_DGRAM_RX, index: 2 });
    let long = (size - outboard_board::layout::DGRAM_HEADER + 1) as u32;
    assert!(mb.put(Descriptor { offset: buf as u32, len: long, tag: 0, aux: 0 }).unwrap());
    assert!(matches!(d.begin_get(), Err(Error::Invalid(_))));
}

#[test]
fn keepalive_times_reach_the_engine_in_whole_milliseconds_rounded_up() {
    use outboard_board::command::{KeepAlive, StreamOption};
    let (board, mut eng) = attach_fake(2);
    eng.open(3, 1, "10.0.0.1:80".parse().unwrap(), None);
    board.inner.borrow_mut().open_ep(3);
    let mut s = crate::Stream::new(board.clone(), 3);
    s.set_keepalive(Some((Duration::from_micros(1), Duration::from_micros(1_500_001), 3))).unwrap();
    s.set_keepalive(None).unwrap();
    assert!(s.set_keepalive(Some((Duration::ZERO, Duration::from_secs(1), 3))).is_err(), "refused here, not sent");
    let ka = KeepAlive { idle: Duration::from_millis(1), interval: Duration::from_millis(1501), probes: 3 };
    let ep = Endpoint(3);
    assert_eq!(
        eng.commands(1),
        [BoardCommand::SetOption { ep, option: StreamOption::KeepAlive(Some(ka)) }, BoardCommand::SetOption { ep, option: StreamOption::KeepAlive(None) }]
    );
}
