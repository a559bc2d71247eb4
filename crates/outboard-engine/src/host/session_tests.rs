//! A board session end to end in one thread: the session on a real stack,
//! connected to a second real stack that plays the peer, with the PSH bit
//! taken off the peer's segments where a test says so. What an application
//! would see is the board itself: its condition word (it moves exactly when
//! sleepers are woken), the stream's status record, the sync slots.
//! - Batched wake-ups (`session::events`).
//! - TCP_INFO published from the application's request on (`op::INFO`).

use super::attach::NewSession;
use super::session::BATCH_WAIT;
use super::Host;
use crate::app::Apps;
use outboard_board::command::{BoardCommand, Endpoint, SyncSlot};
use outboard_board::layout::{header, status, tcp_info, BoardParams, ENGINE_RUNNING, MAGIC, VERSION};
use outboard_board::{BoardLayout, Command, Condition, Mapping, Producer, SyncTable};
use outboard_stack::{ConnId, Stack, StackConfig};
use outboard_time::{Duration, Instant};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Offsets in an untagged IPv4 frame with a 20-byte IP header.
const TCP: usize = 14 + 20;
const PSH: u8 = 0x08;

/// Takes PSH off a TCP segment, fixing its checksum (RFC 1624).
fn strip_psh(f: &mut [u8]) {
    if f.len() < TCP + 20 || f[23] != 6 || f[TCP + 13] & PSH == 0 {
        return;
    }
    let old = u16::from_be_bytes([f[TCP + 12], f[TCP + 13]]);
    f[TCP + 13] &= !PSH;
    let new = u16::from_be_bytes([f[TCP + 12], f[TCP + 13]]);
    let sum = u16::from_be_bytes([f[TCP + 16], f[TCP + 17]]);
    let mut x = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    f[TCP + 16..TCP + 18].copy_from_slice(&(!(x as u16)).to_be_bytes());
}

struct Rig {
    engine: Stack,
    peer: Stack,
    apps: Apps,
    now: Instant,
    cond: Condition,
    map: Arc<Mapping>,
    layout: BoardLayout,
    _app_sock: UnixStream,
    cmds: Producer<Command>,
    syncs: SyncTable,
    /// The board's stream endpoint and the peer's end of the connection.
    ep: u32,
    conn: Option<ConnId>,
}

impl Rig {
    /// A board that connected to the peer (10.9.0.2:5000); the connection is established.
    fn connected() -> Rig {
        Rig::connected_with(None, Vec::new())
    }

    /// `connected`, the application having given the wake eventfd `wake` and the wake groups' `groups`.
    fn connected_with(wake: Option<OwnedFd>, groups: Vec<OwnedFd>) -> Rig {
        let layout = BoardLayout::new(BoardParams::small()).expect("layout");
        let map = Arc::new(Mapping::anonymous_shared(layout.total).expect("board"));
        map.write(header::MAGIC, MAGIC);
        map.write(header::VERSION, VERSION);
        map.atomic_u32(header::ENGINE_STATE).store(ENGINE_RUNNING, Ordering::Release);
        let (app_sock, engine_sock) = UnixStream::pair().expect("socket pair");
        let dead = Arc::new(AtomicBool::new(false));
        let session = NewSession { map: map.clone(), layout: layout.clone(), sock: engine_sock, pid: 1, uid: 0, key: 1, dead, wake, wake_groups: Arc::new(groups), board: 1, regions: NewSession::all_regions(&layout), memory: None };
        let now = Instant::from_nanos(1_000_000_000);
        let config = |mac: u8, ip: u8| {
            let mut c = StackConfig::new([2, 0, 0, 0, 0, mac], Ipv4Addr::new(10, 9, 0, ip), 24);
            c.secret = [mac; 16];
            c.tcp.send_buffer = BoardParams::small().stream_buffer as usize;
            c.tcp.recv_buffer = BoardParams::small().stream_buffer as usize;
            c
        };
        let engine = Stack::new(config(1, 1), now);
        let mut peer = Stack::new(config(2, 2), now);
        let listener = peer.tcp_listen(5000, 4).expect("listen");
        let mut host = Host::new(0, None);
        host.adopt(session);
        let mut apps = Apps::new(64 << 20);
        apps.add(Box::new(host));
        let rings = layout.shards[0];
        let mut cmds: Producer<Command> = Producer::new(map.clone(), rings.command_ring, layout.params.command_capacity);
        let syncs = SyncTable::new(map.clone(), layout.syncs, layout.params.syncs);
        syncs.arm(0);
        let to = SocketAddr::from((Ipv4Addr::new(10, 9, 0, 2), 5000));
        cmds.put(BoardCommand::Connect { sync: SyncSlot(0), to, mss: 0, fast_open: false, tos: 0, rcv_clamp: 0 }.encode()).expect("command");
        let cond = Condition::new(map.clone(), header::EVENT_CONDITION);
        let mut rig = Rig { engine, peer, apps, now, cond, map, layout, _app_sock: app_sock, cmds, syncs, ep: 0, conn: None };
        for _ in 0..20 {
            rig.turn(true);
            if let Some(conn) = rig.peer.tcp_accept(listener) {
                rig.conn = Some(conn);
                break;
            }
        }
        let ep = rig.syncs.take(0).expect("the connect completed");
        assert!(ep >= 0, "connect failed: {ep}");
        rig.ep = ep as u32;
        rig.turn(true);
        rig
    }

    /// One engine turn; frames each way (PSH kept on the peer's when `psh`).
    fn turn(&mut self, psh: bool) {
        let mut f = vec![0u8; 2048];
        while let Some(n) = self.peer.poll_transmit(self.now, &mut f) {
            if !psh {
                strip_psh(&mut f[..n]);
            }
            self.engine.receive_frame(self.now, &f[..n]);
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= self.now) {
            self.engine.handle_timeout(self.now);
        }
        self.apps.turn(&mut self.engine, self.now);
        while let Some(n) = self.engine.poll_transmit(self.now, &mut f) {
            self.peer.receive_frame(self.now, &f[..n]);
        }
    }

    fn peer_sends(&mut self, n: usize, psh: bool) {
        let c = self.conn.and_then(|id| self.peer.tcp(id)).expect("the peer accepted");
        c.set_nodelay(true);
        assert_eq!(c.send(&vec![7u8; n]).expect("send"), n);
        let want = self.rx_total() + n as u64;
        for _ in 0..8 {
            self.turn(psh);
            if self.rx_total() == want {
                return;
            }
        }
        panic!("the engine got {} of {want} bytes", self.rx_total());
    }

    fn rx_total(&self) -> u64 {
        self.status_u64(status::RX_TOTAL)
    }

    fn status_u64(&self, field: usize) -> u64 {
        self.map.atomic_u64(self.layout.endpoint_status(self.ep) + field).load(Ordering::Acquire)
    }

    fn status_u32(&self, field: usize) -> u32 {
        self.map.atomic_u32(self.layout.endpoint_status(self.ep) + field).load(Ordering::Acquire)
    }
}

#[test]
fn bytes_not_pushed_are_published_at_once_and_wake_the_application_later() {
    let mut r = Rig::connected();
    // Three segments, none pushed: the bytes are there, nobody is woken.
    let before = r.cond.current();
    r.peer_sends(3000, false);
    assert_eq!(r.rx_total(), 3000, "published in the turn they came");
    assert_eq!(r.cond.current(), before, "no wake-up for bytes the peer has not pushed");
    // A busy shard wakes the application BATCH_WAIT after the first batched post.
    r.now += BATCH_WAIT - Duration::from_micros(1);
    r.turn(true);
    assert_eq!(r.cond.current(), before, "not before BATCH_WAIT");
    r.now += Duration::from_micros(1);
    r.turn(true);
    assert_ne!(r.cond.current(), before, "woken at BATCH_WAIT");

    // Pushed bytes wake it in the turn they arrive.
    let before = r.cond.current();
    r.peer_sends(100, true);
    assert_eq!(r.rx_total(), 3100);
    assert_ne!(r.cond.current(), before, "pushed data wakes at once");

    // Unpushed again, then the shard goes to sleep: it wakes the application first.
    let before = r.cond.current();
    r.peer_sends(500, false);
    assert_eq!((r.rx_total(), r.cond.current()), (3600, before));
    r.apps.prepare_sleep(false);
    assert_ne!(r.cond.current(), before, "nothing batched outlasts the shard's sleep");

    // A receive region half full wakes at once, pushed or not (the window is closing).
    let half = BoardParams::small().stream_buffer as usize / 2;
    let before = r.cond.current();
    r.peer_sends(half - 3600 + 1, false);
    assert_eq!(r.rx_total(), half as u64 + 1);
    assert_ne!(r.cond.current(), before, "half the region unread wakes at once");
}

/// A stream's TCP_INFO words are computed and published only once its
/// application asked (`op::INFO`): before, they stay zero however the
/// connection moves (the rest of the record is published as ever); the
/// request writes them at once and completes its sync; every update after
/// it keeps them current.
#[test]
fn tcp_info_is_published_from_the_applications_request_on() {
    let mut r = Rig::connected();
    r.peer_sends(3000, true);
    assert_eq!(r.rx_total(), 3000);
    assert_eq!(r.status_u64(status::INFO_BYTES), 0, "no TCP_INFO nobody asked for");
    assert_eq!((r.status_u32(status::SEGS_IN), r.status_u32(status::SND_MSS)), (0, 0));

    r.syncs.arm(1);
    r.cmds.put(BoardCommand::Info { sync: SyncSlot(1), ep: Endpoint(r.ep) }.encode()).expect("command");
    r.turn(true);
    assert_eq!(r.syncs.take(1), Some(0), "the request is answered");
    let bytes = tcp_info::unpack(r.status_u64(status::INFO_BYTES));
    assert_eq!(bytes[tcp_info::STATE], tcp_info::TCP_ESTABLISHED);
    let segs = r.status_u32(status::SEGS_IN);
    assert!(segs >= 3 && r.status_u32(status::SND_MSS) > 0, "current at once: {segs} segments in");

    r.peer_sends(1000, true);
    assert!(r.status_u32(status::SEGS_IN) > segs, "kept current after the request");
}

/// The wake eventfds of threads asleep in poll/epoll (`Session::ring_wake`).
/// One asleep in a wake group the engine has no eventfd for (the
/// application made more groups than this engine was given) is woken
/// through the shared eventfd, which each of its sets holds too; one in a
/// group the engine has is woken through that group's alone. (Before, with
/// any group eventfd given, the shared one was written only for sleepers
/// in the shared slot: a sleeper in a group beyond them was never woken.)
#[test]
fn sleepers_in_a_group_without_an_eventfd_here_are_woken_through_the_shared_one() {
    use outboard_board::wake::{drain_eventfd, new_eventfd};
    let (shared, group1) = (new_eventfd().expect("eventfd"), new_eventfd().expect("eventfd"));
    let mut r = Rig::connected_with(Some(shared.try_clone().expect("dup")), vec![group1.try_clone().expect("dup")]);
    drain_eventfd(shared.as_raw_fd());
    drain_eventfd(group1.as_raw_fd());
    let sleepers = |slot: usize| r.map.atomic_u32(header::APP_POLLERS + 4 * slot);
    sleepers(2).store(1, Ordering::SeqCst);
    r.peer_sends(100, true);
    assert!(drain_eventfd(shared.as_raw_fd()), "a sleeper in group 2, which has no eventfd here, is woken through the shared one");
    assert!(!drain_eventfd(group1.as_raw_fd()), "group 1 has no sleeper");
    let sleepers = |slot: usize| r.map.atomic_u32(header::APP_POLLERS + 4 * slot);
    sleepers(2).store(0, Ordering::SeqCst);
    sleepers(1).store(1, Ordering::SeqCst);
    r.peer_sends(100, true);
    assert!(drain_eventfd(group1.as_raw_fd()), "a sleeper in group 1 is woken through its eventfd");
    assert!(!drain_eventfd(shared.as_raw_fd()), "and not through the shared one: nobody sleeps on it alone");
}

/// With wake-ups deferred (`Host::defer_wakes`, the engine shared with the
/// program's threads), a turn publishes its events at once (the news word
/// moves, so a thread not yet asleep sees them) but writes no eventfd: the
/// wake-ups wait in the owed list until whoever ran the turn issues them,
/// with the engine let go. Nothing is lost: an owed list dropped unissued
/// issues them too.
#[test]
fn deferred_wake_ups_are_issued_by_the_turns_runner_not_in_the_turn() {
    use crate::host::OwedWakes;
    use outboard_board::wake::{drain_eventfd, new_eventfd};
    let (shared, group1) = (new_eventfd().expect("eventfd"), new_eventfd().expect("eventfd"));
    let mut r = Rig::connected_with(Some(shared.try_clone().expect("dup")), vec![group1.try_clone().expect("dup")]);
    r.apps.get_mut::<Host>().expect("host").defer_wakes();
    drain_eventfd(shared.as_raw_fd());
    drain_eventfd(group1.as_raw_fd());
    r.map.atomic_u32(header::APP_POLLERS).store(1, Ordering::SeqCst);
    r.map.atomic_u32(header::APP_POLLERS + 4).store(1, Ordering::SeqCst);
    let news = r.cond.current();
    r.peer_sends(100, true);
    assert_ne!(r.cond.current(), news, "the events are published in the turn");
    assert!(!drain_eventfd(shared.as_raw_fd()) && !drain_eventfd(group1.as_raw_fd()), "no eventfd written in the turn");
    let mut owed = OwedWakes::default();
    r.apps.get_mut::<Host>().expect("host").take_owed_wakes(&mut owed);
    assert!(!owed.is_empty());
    owed.issue();
    assert!(owed.is_empty());
    assert!(drain_eventfd(shared.as_raw_fd()), "the shared eventfd's sleeper is woken when the runner issues");
    assert!(drain_eventfd(group1.as_raw_fd()), "and group 1's");

    r.peer_sends(100, true);
    let mut owed = OwedWakes::default();
    r.apps.get_mut::<Host>().expect("host").take_owed_wakes(&mut owed);
    drop(owed);
    assert!(drain_eventfd(shared.as_raw_fd()), "an owed list dropped unissued still wakes");
}
