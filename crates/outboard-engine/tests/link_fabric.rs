//! The fabric link: an Ethernet switch in shared memory between engine
//! processes. Needs no root: every test uses its own directory under the
//! temp dir and a fabric name with the pid in it.

use outboard_engine::clock;
use outboard_engine::link::fabric::{layout, port_mac, FabricLink};
use outboard_engine::link::{Link, LinkError, LinkOptions, LinkSpec, TxMeta, TxStatus};
use outboard_impair::{FaultConfig, FaultStats};
use outboard_stack::steer::{shard_for, FlowTuple};
use outboard_time::{Duration, Instant};
use std::collections::{HashSet, VecDeque};
use std::fs::OpenOptions;
use std::net::Ipv4Addr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const DATA: u16 = 0x88b5;
const HELLO: u16 = 0x88b6;
const STOP: u16 = 0x88b7;
const BROADCAST: [u8; 6] = [0xff; 6];
const CHILD_ENV: &str = "OBT_FABRIC_CHILD";

/// A directory of our own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("obt-fabric-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opts() -> LinkOptions {
    LinkOptions { mtu: None, addr: std::net::Ipv4Addr::new(10, 0, 0, 1), fabric_faults: None, offloads: false, ipv6: false }
}

fn name(tag: &str) -> String {
    format!("t{}-{tag}", std::process::id())
}

fn open(dir: &TempDir, tag: &str) -> FabricLink {
    FabricLink::open_in(&dir.0, &name(tag), &opts()).expect("open fabric port")
}

fn frame_len(seq: u32) -> usize {
    60 + (seq as usize * 7) % (1514 - 60 + 1)
}

/// dst, src, EtherType, then seq (big-endian) and bytes (seq + i) as u8.
fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, seq: u32) -> Vec<u8> {
    let len = frame_len(seq);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((18..len).map(|i| (seq as usize + i) as u8));
    f
}

fn ethertype(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[12], f[13]])
}

/// The seq of a DATA frame whose length and pattern are intact.
fn check(f: &[u8]) -> u32 {
    assert!(f.len() >= 18, "short frame");
    let seq = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
    assert_eq!(f.len(), frame_len(seq), "length of frame {seq}");
    assert!(f[18..].iter().enumerate().all(|(i, &b)| b == (seq as usize + 18 + i) as u8), "pattern of frame {seq}");
    seq
}

fn send(link: &mut FabricLink, f: &[u8]) -> TxStatus {
    link.transmit(&mut |buf: &mut [u8]| {
        buf[..f.len()].copy_from_slice(f);
        Some((f.len(), TxMeta::default()))
    })
    .expect("transmit")
}

fn recv(link: &mut FabricLink, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    link.receive(max, &mut |f: &[u8], _| out.push(f.to_vec())).expect("receive");
    out
}

/// Receives until `count` frames came or `timeout` passed.
fn recv_n(link: &mut FabricLink, count: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = clock::now() + timeout;
    let mut out = Vec::new();
    while out.len() < count && clock::now() < deadline {
        let got = recv(link, count - out.len());
        if got.is_empty() {
            link.wait(Duration::from_millis(20), &[], &[]).expect("wait");
        }
        out.extend(got);
    }
    out
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn write_u32(path: &Path, off: usize, v: u32) {
    let f = OpenOptions::new().read(true).write(true).open(path).expect("open fabric file");
    f.write_all_at(&v.to_le_bytes(), off as u64).expect("write fabric file");
}

fn read_u32(path: &Path, off: usize) -> u32 {
    let f = OpenOptions::new().read(true).open(path).expect("open fabric file");
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, off as u64).expect("read fabric file");
    u32::from_le_bytes(b)
}

#[test]
fn two_ports_exchange_frames_both_ways() {
    let dir = TempDir::new("both");
    let mut a = open(&dir, "both");
    let mut b = open(&dir, "both");
    assert_eq!((a.port(), b.port()), (0, 1));
    assert_eq!(a.mac(), [0x02, 0x0f, 0xab, 0, 0, 0]);
    assert_eq!(b.mac(), [0x02, 0x0f, 0xab, 0, 0, 1]);
    const N: u32 = 3000;
    // Each side sends N frames to the other and expects N back, in order.
    let run = |link: &mut FabricLink, peer: [u8; 6]| {
        let deadline = clock::now() + Duration::from_secs(20);
        let (mut next, mut got) = (0u32, 0u32);
        while (next < N || got < N) && clock::now() < deadline {
            let mut progress = false;
            if next < N {
                match send(link, &frame(peer, link.mac(), DATA, next)) {
                    TxStatus::Queued => {
                        next += 1;
                        progress = true;
                    }
                    TxStatus::Full => {}
                    TxStatus::Idle => unreachable!(),
                }
            }
            for f in recv(link, 64) {
                assert_eq!(&f[6..12], &peer, "source MAC");
                assert_eq!(check(&f), got, "frames arrive in order");
                got += 1;
                progress = true;
            }
            if !progress {
                link.wait(Duration::from_millis(5), &[], &[]).expect("wait");
            }
        }
        (next, got)
    };
    let (amac, bmac) = (a.mac(), b.mac());
    let (ra, rb) = std::thread::scope(|s| {
        let tb = s.spawn(|| run(&mut b, amac));
        let ra = run(&mut a, bmac);
        (ra, tb.join().expect("thread b"))
    });
    assert_eq!(ra, (N, N));
    assert_eq!(rb, (N, N));
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!((ca.tx_frames, ca.rx_frames, cb.tx_frames, cb.rx_frames), (N as u64, N as u64, N as u64, N as u64));
    assert_eq!(ca.tx_bytes, cb.rx_bytes);
    assert_eq!(a.fabric_stats().ring_full_drops + b.fabric_stats().ring_full_drops, 0);
    assert_eq!(ca.rx_kernel_drops + cb.rx_kernel_drops, 0);
}

#[test]
fn broadcast_and_multicast_reach_every_other_port() {
    let dir = TempDir::new("bcast");
    let mut links: Vec<FabricLink> = (0..4).map(|_| open(&dir, "bcast")).collect();
    let src = links[0].mac();
    assert_eq!(send(&mut links[0], &frame(BROADCAST, src, DATA, 1)), TxStatus::Queued);
    assert_eq!(send(&mut links[0], &frame([0x01, 0x00, 0x5e, 0, 0, 1], src, DATA, 2)), TxStatus::Queued);
    for l in &mut links[1..] {
        let got = recv_n(l, 2, Duration::from_secs(2));
        assert_eq!(got.len(), 2, "port {} gets both", l.port());
        assert_eq!((check(&got[0]), check(&got[1])), (1, 2));
        assert_eq!(&got[0][..6], &BROADCAST);
    }
    assert!(recv(&mut links[0], 64).is_empty(), "the sender does not hear itself");
    for l in &mut links[1..] {
        assert!(recv(l, 64).is_empty(), "exactly one copy each");
    }
}

#[test]
fn unknown_unicast_is_dropped_and_counted() {
    let dir = TempDir::new("unknown");
    let mut a = open(&dir, "unknown");
    let mut b = open(&dir, "unknown");
    let src = a.mac();
    for dst in [port_mac(5), [0x02, 0, 0, 0, 0, 1], port_mac(0), port_mac(200)] {
        assert_eq!(send(&mut a, &frame(dst, src, DATA, 7)), TxStatus::Queued);
    }
    assert_eq!(a.fabric_stats().unknown_unicast, 4);
    assert_eq!(a.counters().tx_errors, 4);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(recv(&mut b, 64).is_empty() && recv(&mut a, 64).is_empty(), "nobody gets them");
    // A known destination still works.
    assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, 8)), TxStatus::Queued);
    let got = recv_n(&mut b, 1, Duration::from_secs(2));
    assert_eq!(got.len(), 1);
    assert_eq!(check(&got[0]), 8);
}

#[test]
fn ninth_opener_gets_fabric_taken() {
    let dir = TempDir::new("nine");
    let mut links: Vec<FabricLink> = (0..8).map(|_| open(&dir, "nine")).collect();
    let ports: Vec<usize> = links.iter().map(|l| l.port()).collect();
    assert_eq!(ports, (0..8).collect::<Vec<_>>());
    match FabricLink::open_in(&dir.0, &name("nine"), &opts()) {
        Err(LinkError::FabricTaken(msg)) => assert!(msg.contains("has all 8 ports in use"), "{msg}"),
        Err(e) => panic!("expected FabricTaken, got {e}"),
        Ok(l) => panic!("a 9th port opened: {}", l.port()),
    }
    links.remove(5); // closing frees port 5 for the next opener
    let again = open(&dir, "nine");
    assert_eq!(again.port(), 5);
}

#[test]
fn port_of_a_dead_pid_is_reclaimed() {
    let dir = TempDir::new("dead");
    let mut links: Vec<Option<FabricLink>> = (0..8).map(|_| Some(open(&dir, "dead"))).collect();
    let path = links[0].as_ref().unwrap().path().to_path_buf();
    let owner3 = layout::port_offset(3) + layout::P_OWNER;
    // A frame port 3 never reads: the next owner of port 3 must not get it.
    {
        let l0 = links[0].as_mut().unwrap();
        let src = l0.mac();
        assert_eq!(send(l0, &frame(port_mac(3), src, DATA, 33)), TxStatus::Queued);
    }
    links[3] = None;
    assert_eq!(read_u32(&path, owner3), 0, "close frees the port");
    // Held by a live pid (ours): no port left.
    write_u32(&path, owner3, std::process::id());
    assert!(matches!(FabricLink::open_in(&dir.0, &name("dead"), &opts()), Err(LinkError::FabricTaken(_))));
    // Held by a pid that has exited: reclaimed.
    let mut t = Command::new("true").spawn().expect("spawn true");
    let dead = t.id();
    t.wait().expect("wait for true");
    write_u32(&path, owner3, dead);
    let mut l3 = FabricLink::open_in(&dir.0, &name("dead"), &opts()).expect("reclaim");
    assert_eq!(l3.port(), 3);
    assert_eq!(read_u32(&path, owner3), std::process::id());
    assert!(recv(&mut l3, 64).is_empty(), "the stale frame for the dead owner is discarded");
    let l0 = links[0].as_mut().unwrap();
    let src = l0.mac();
    assert_eq!(send(l0, &frame(port_mac(3), src, DATA, 34)), TxStatus::Queued);
    let got = recv_n(&mut l3, 1, Duration::from_secs(2));
    assert_eq!(got.len(), 1);
    assert_eq!(check(&got[0]), 34);
}

#[test]
fn simultaneous_openers_share_one_file_and_last_out_removes_it() {
    let dir = TempDir::new("race");
    let nm = name("race");
    let path = dir.0.join(format!("outboard-fabric-{nm}"));
    for round in 0..10u32 {
        let barrier = std::sync::Barrier::new(8);
        let mut links: Vec<FabricLink> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        FabricLink::open_in(&dir.0, &nm, &opts()).expect("open")
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("opener")).collect()
        });
        let mut ports: Vec<usize> = links.iter().map(|l| l.port()).collect();
        ports.sort_unstable();
        assert_eq!(ports, (0..8).collect::<Vec<_>>(), "round {round}");
        // One fabric: a broadcast from one reaches the seven others.
        let src = links[0].mac();
        assert_eq!(send(&mut links[0], &frame(BROADCAST, src, DATA, round)), TxStatus::Queued);
        for l in &mut links[1..] {
            let got = recv_n(l, 1, Duration::from_secs(2));
            assert_eq!(got.len(), 1, "round {round} port {}", l.port());
        }
        assert!(path.exists());
        drop(links);
        assert!(!path.exists(), "the last port to close removes the file (round {round})");
    }
}

#[test]
fn idle_wait_sleeps_without_spinning() {
    let dir = TempDir::new("idle");
    let mut a = open(&dir, "idle");
    let mut b = open(&dir, "idle");
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (r, w) = (fds[0], fds[1]);
    for also in [&[][..], &[r][..]] {
        let (t0, c0) = (clock::now(), thread_cpu());
        a.wait(Duration::from_millis(200), also, &[]).expect("wait");
        let (el, cpu) = (clock::now() - t0, thread_cpu() - c0);
        eprintln!("idle wait (also {also:?}): {el:?} elapsed, {cpu:?} CPU");
        assert!(el >= Duration::from_millis(195) && el < Duration::from_millis(1000), "{el:?}");
        assert!(cpu < Duration::from_millis(20), "{cpu:?} of CPU in a 200 ms idle wait");
    }
    // A frame wakes a long wait at once.
    let bmac = b.mac();
    let (el, got) = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let src = bmac;
            assert_eq!(send(&mut b, &frame(port_mac(0), src, DATA, 5)), TxStatus::Queued);
        });
        let t0 = clock::now();
        let mut got = Vec::new();
        while got.is_empty() && clock::now() - t0 < Duration::from_secs(5) {
            a.wait(Duration::from_secs(5), &[], &[]).expect("wait");
            got = recv(&mut a, 8);
        }
        (clock::now() - t0, got)
    });
    eprintln!("woken by a frame after {el:?}");
    assert_eq!(got.len(), 1);
    assert!(el < Duration::from_millis(1000), "{el:?}");
    // A readable `also` fd ends a long wait within the 10 ms polling slice.
    // SAFETY: writing one byte from a valid buffer to our own pipe.
    assert_eq!(unsafe { libc::write(w, b"x".as_ptr().cast(), 1) }, 1);
    let t0 = clock::now();
    a.wait(Duration::from_secs(5), &[r], &[]).expect("wait");
    let el = clock::now() - t0;
    assert!(el < Duration::from_millis(500), "{el:?}");
    // SAFETY: closing the two pipe fds we opened, once.
    unsafe {
        libc::close(r);
        libc::close(w);
    }
}

#[test]
fn hostile_slot_lengths_and_indices_are_dropped_and_counted() {
    let dir = TempDir::new("hostile");
    let mut a = open(&dir, "hostile");
    let mut b = open(&dir, "hostile");
    let path = a.path().to_path_buf();
    let head_at = layout::ring_offset(1, 0) + layout::R_HEAD;
    let forge = |len: u32| {
        let head = read_u32(&path, head_at);
        write_u32(&path, layout::slot_offset(1, 0, head), len);
        write_u32(&path, head_at, head.wrapping_add(1));
    };
    forge(0xFFFF_FFFF);
    assert_eq!(recv(&mut a, 64).len(), 0);
    assert_eq!(a.counters().rx_oversize, 1);
    assert_eq!(a.fabric_stats().rx_bad_slots, 1);
    forge(1515);
    forge(3);
    assert_eq!(recv(&mut a, 64).len(), 0);
    assert_eq!(a.fabric_stats().rx_bad_slots, 3);
    assert_eq!(a.counters().rx_oversize, 2);
    assert_eq!(a.counters().rx_kernel_drops, 1);
    // Head far beyond tail: resynchronised, not read.
    let head = read_u32(&path, head_at);
    write_u32(&path, head_at, head.wrapping_add(5000));
    assert_eq!(recv(&mut a, 64).len(), 0);
    assert_eq!(a.fabric_stats().rx_bad_rings, 1);
    // The ring still works afterwards.
    let src = b.mac();
    assert_eq!(send(&mut b, &frame(a.mac(), src, DATA, 77)), TxStatus::Queued);
    let got = recv_n(&mut a, 1, Duration::from_secs(2));
    assert_eq!(got.len(), 1);
    assert_eq!(check(&got[0]), 77);
}

#[test]
fn full_ring_reports_full_or_drops_per_destination() {
    let dir = TempDir::new("full");
    let mut a = open(&dir, "full");
    let mut b = open(&dir, "full");
    let src = a.mac();
    for i in 0..layout::SLOTS {
        assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, i)), TxStatus::Queued, "frame {i}");
    }
    // With one peer and its ring full: Full, and the callback is not called.
    let mut called = false;
    let st = a.transmit(&mut |_| {
        called = true;
        None
    });
    assert_eq!(st.expect("transmit"), TxStatus::Full);
    assert!(!called);
    assert_eq!(a.counters().tx_full, 1);
    // A third port with room: the frame to the full port is dropped and counted on both sides.
    let mut c = open(&dir, "full");
    assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, 999)), TxStatus::Queued);
    assert_eq!(a.fabric_stats().ring_full_drops, 1);
    assert_eq!(b.counters().rx_kernel_drops, 1);
    let got = recv_n(&mut b, layout::SLOTS as usize, Duration::from_secs(2));
    let seqs: Vec<u32> = got.iter().map(|f| check(f)).collect();
    assert_eq!(seqs, (0..layout::SLOTS).collect::<Vec<_>>());
    assert_eq!(send(&mut a, &frame(c.mac(), src, DATA, 1000)), TxStatus::Queued);
    assert_eq!(recv_n(&mut c, 1, Duration::from_secs(2)).len(), 1);
}

/// The sender keeps the tail it last read of each ring and reads the
/// shared one again only when that says full: a ring filled, drained and
/// filled again, round after round, loses nothing and reports no drop.
#[test]
fn a_ring_filled_and_drained_round_after_round_loses_nothing() {
    let dir = TempDir::new("refill");
    let mut a = open(&dir, "refill");
    let mut b = open(&dir, "refill");
    let src = a.mac();
    for round in 0..4u32 {
        // Part of a ring first, so the rounds do not line up with the slots.
        let n = if round == 0 { 100 } else { layout::SLOTS };
        for i in 0..n {
            assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, round * 1000 + i)), TxStatus::Queued, "round {round}, frame {i}");
        }
        let got = recv_n(&mut b, n as usize, Duration::from_secs(2));
        let seqs: Vec<u32> = got.iter().map(|f| check(f)).collect();
        assert_eq!(seqs, (0..n).map(|i| round * 1000 + i).collect::<Vec<_>>(), "round {round}");
    }
    assert_eq!(a.fabric_stats().ring_full_drops, 0);
    assert_eq!(b.counters().rx_kernel_drops, 0);
}

#[test]
fn a_crashed_peer_with_a_full_ring_does_not_wedge_the_sender() {
    let dir = TempDir::new("crash");
    let mut a = open(&dir, "crash");
    let b = open(&dir, "crash");
    let src = a.mac();
    for i in 0..layout::SLOTS {
        assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, i)), TxStatus::Queued);
    }
    assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, 0)), TxStatus::Full);
    // Port 1's owner "dies" (a pid that has exited) without draining its ring.
    let owner1 = layout::port_offset(1) + layout::P_OWNER;
    let mut t = Command::new("true").spawn().expect("spawn true");
    let dead = t.id();
    t.wait().expect("wait for true");
    write_u32(a.path(), owner1, dead);
    assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, 0)), TxStatus::Queued);
    assert_eq!(a.fabric_stats().ring_full_drops, 1);
    write_u32(a.path(), owner1, std::process::id()); // let b close normally
}

#[test]
fn delay_fault_holds_frames_until_due() {
    let dir = TempDir::new("delay");
    let cfg = FaultConfig { delay: Duration::from_millis(40), ..FaultConfig::default() };
    let o = LinkOptions { fabric_faults: Some((cfg, 7)), ..opts() };
    let mut a = FabricLink::open_in(&dir.0, &name("delay"), &o).expect("open");
    let mut b = open(&dir, "delay");
    let src = a.mac();
    let t0 = clock::now();
    assert_eq!(send(&mut a, &frame(b.mac(), src, DATA, 1)), TxStatus::Queued);
    assert!(recv(&mut b, 8).is_empty(), "not due yet");
    assert_eq!(b.reorder_len(), 1);
    let c0 = thread_cpu();
    let got = recv_n(&mut b, 1, Duration::from_secs(2));
    let (el, cpu) = (clock::now() - t0, thread_cpu() - c0);
    eprintln!("delayed frame after {el:?}, {cpu:?} CPU while waiting");
    assert_eq!(got.len(), 1);
    assert!(el >= Duration::from_millis(40) && el < Duration::from_millis(500), "{el:?}");
    assert!(cpu < Duration::from_millis(15), "waiting for a due time must sleep: {cpu:?}");
    assert_eq!(a.fault_stats().map(|s| s.frames_delivered), Some(1));
}

#[test]
fn options_info_and_stale_files() {
    let dir = TempDir::new("opts");
    let too_big = LinkOptions { mtu: Some(9000), ..opts() };
    assert!(matches!(FabricLink::open_in(&dir.0, &name("opts"), &too_big), Err(LinkError::BadSpec(_))));
    assert!(matches!(FabricLink::open_in(&dir.0, "../etc", &opts()), Err(LinkError::BadSpec(_))));
    let small = LinkOptions { mtu: Some(1400), ..opts() };
    let l = FabricLink::open_in(&dir.0, &name("opts"), &small).expect("open");
    assert_eq!(l.mtu(), 1400);
    let info = l.info();
    let path = l.path().to_path_buf();
    assert_eq!((info.kind.as_str(), info.name.as_str(), info.mtu), ("fabric", name("opts").as_str(), 1400));
    assert_eq!(info.mode, format!("port 0 of 8, shm {}", path.display()));
    assert_eq!(info.mac, port_mac(0));
    // A layout we do not speak: refused, with advice.
    write_u32(&path, layout::H_VERSION, 99);
    match FabricLink::open_in(&dir.0, &name("opts"), &opts()) {
        Err(LinkError::FabricTaken(msg)) => assert!(msg.contains("version 99") && msg.contains("remove"), "{msg}"),
        other => panic!("expected FabricTaken, got {:?}", other.err()),
    }
    drop(l);
    assert!(!path.exists());
    // A stale file of the wrong size.
    std::fs::write(&path, b"not a fabric").expect("write");
    let mut perm = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
    std::fs::set_permissions(&path, perm).expect("chmod");
    match FabricLink::open_in(&dir.0, &name("opts"), &opts()) {
        Err(LinkError::FabricTaken(msg)) => assert!(msg.contains("rm "), "{msg}"),
        other => panic!("expected FabricTaken, got {:?}", other.err()),
    }
}

#[test]
fn link_open_dispatches_to_the_default_directory() {
    let dir = std::env::var_os("OUTBOARD_FABRIC_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
    if !dir.is_dir() {
        eprintln!("SKIPPED: no {} directory for fabric files", dir.display());
        return;
    }
    let nm = name("default");
    let path = dir.join(format!("outboard-fabric-{nm}"));
    let spec: LinkSpec = format!("fabric:{nm}").parse().expect("spec");
    let mut a = outboard_engine::link::open(&spec, &opts()).expect("open a");
    let mut b = outboard_engine::link::open(&spec, &opts()).expect("open b");
    assert!(path.exists());
    let f = frame(b.mac(), a.mac(), DATA, 3);
    let st = a.transmit(&mut |buf: &mut [u8]| {
        buf[..f.len()].copy_from_slice(&f);
        Some((f.len(), TxMeta::default()))
    });
    assert_eq!(st.expect("transmit"), TxStatus::Queued);
    a.flush().expect("flush");
    let mut got = Vec::new();
    for _ in 0..100 {
        b.receive(8, &mut |x: &[u8], _| got.push(x.to_vec())).expect("receive");
        if !got.is_empty() {
            break;
        }
        b.wait(Duration::from_millis(20), &[], &[]).expect("wait");
    }
    assert_eq!(got, vec![f]);
    drop((a, b));
    assert!(!path.exists(), "the last port to close removes {}", path.display());
}

/// Kills (by its id) and reaps the child if the test ends early.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Parent side: 20000 frames to a child process that echoes them back.
/// Returns the seqs that came back, in arrival order, the parent's link and
/// its fault statistics for the data frames (before the STOP frames).
fn echo_through_child(
    tag: &str,
    faults: Option<(FaultConfig, u64)>,
) -> (Vec<u32>, FabricLink, Option<FaultStats>) {
    const N: u32 = 20_000;
    let dir = TempDir::new(tag);
    let o = LinkOptions { fabric_faults: faults.clone(), ..opts() };
    let mut link = FabricLink::open_in(&dir.0, &name(tag), &o).expect("open parent port");
    let exe = std::env::current_exe().expect("current_exe");
    let child = Command::new(exe)
        .args(["--exact", "fabric_child_echo", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{}|{}", dir.0.display(), name(tag)))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let mut guard = ChildGuard(Some(child));
    let me = link.mac();
    // The child announces itself with broadcast HELLOs.
    let deadline = clock::now() + Duration::from_secs(30);
    let mut peer = None;
    while peer.is_none() && clock::now() < deadline {
        for f in recv(&mut link, 64) {
            if ethertype(&f) == HELLO {
                peer = Some(<[u8; 6]>::try_from(&f[6..12]).unwrap());
            }
        }
        if peer.is_none() {
            link.wait(Duration::from_millis(20), &[], &[]).expect("wait");
        }
    }
    let peer = peer.expect("child said hello");
    let (mut next, mut back) = (0u32, Vec::with_capacity(N as usize));
    let t0 = clock::now();
    let deadline = t0 + Duration::from_secs(60);
    loop {
        let expected = match link.fault_stats() {
            Some(s) if next == N => s.frames_delivered as usize,
            Some(_) => usize::MAX,
            None => N as usize,
        };
        if back.len() >= expected || clock::now() > deadline {
            break;
        }
        let mut progress = false;
        for _ in 0..64 {
            if next == N {
                break;
            }
            match send(&mut link, &frame(peer, me, DATA, next)) {
                TxStatus::Queued => {
                    next += 1;
                    progress = true;
                }
                _ => break,
            }
        }
        link.receive(256, &mut |f: &[u8], _| {
            if ethertype(f) == DATA {
                assert_eq!(&f[..6], &me);
                back.push(check(f));
                progress = true;
            }
        })
        .expect("receive");
        if !progress {
            link.wait(Duration::from_millis(2), &[], &[]).expect("wait");
        }
    }
    eprintln!("{tag}: {next} sent, {} back in {:?}", back.len(), clock::now() - t0);
    let data_faults = link.fault_stats();
    // Stop the child (STOP may be lost to the loss knob: repeat it).
    let child = guard.0.as_mut().unwrap();
    let stop_deadline = clock::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(clock::now() < stop_deadline, "child did not stop");
        let _ = send(&mut link, &frame(peer, me, STOP, 0));
        let _ = recv(&mut link, 256);
        link.wait(Duration::from_millis(20), &[], &[]).expect("wait");
    };
    let out = guard.0.take().unwrap().wait_with_output().expect("child output");
    let out = String::from_utf8_lossy(&out.stdout);
    // libtest may print "test NAME ... " on the same line before the child's output.
    let stats = out
        .lines()
        .find_map(|l| l.find("CHILD-STATS").map(|i| l[i..].to_string()))
        .unwrap_or_else(|| format!("no CHILD-STATS line in: {out}"));
    eprintln!("{tag}: {stats}");
    assert!(status.success(), "child failed: {status}\n{out}");
    assert!(stats.contains("ring_full_drops: 0"), "{stats}");
    (back, link, data_faults)
}

#[test]
fn two_processes_echo_without_faults() {
    let (back, link, _) = echo_through_child("echo", None);
    assert_eq!(back, (0..20_000).collect::<Vec<u32>>(), "all frames, in order");
    assert_eq!(link.fabric_stats().ring_full_drops, 0);
    assert_eq!(link.counters().rx_kernel_drops, 0);
}

#[test]
fn two_processes_echo_with_seeded_faults() {
    let cfg = FaultConfig {
        loss: 0.05,
        reorder: 0.2,
        delay: Duration::from_millis(1),
        ..FaultConfig::default()
    };
    let (back, link, st) = echo_through_child("faulty", Some((cfg, 42)));
    let st = st.expect("fault stats");
    eprintln!("faults on the data frames: {st:?}");
    // Every copy the injector let through came back, and nothing else.
    assert_eq!(st.frames_seen, 20_000);
    assert_eq!(back.len() as u64, st.frames_delivered);
    assert_eq!(st.frames_delivered, 20_000 - st.dropped);
    let inversions = back.windows(2).filter(|w| w[1] < w[0]).count();
    let unique: HashSet<u32> = back.iter().copied().collect();
    assert_eq!(unique.len(), back.len(), "no frame twice");
    assert!(back.iter().all(|&s| s < 20_000));
    let dropped_data = 20_000 - back.len() as u64;
    eprintln!("{} back, {dropped_data} lost, {inversions} inversions", back.len());
    assert!((600..=1400).contains(&dropped_data), "about 5% lost: {dropped_data}");
    assert!(st.reordered > 2000, "about 20% reordered: {}", st.reordered);
    assert!(inversions > 100, "order changes: {inversions} inversions");
    assert_eq!(link.fabric_stats().ring_full_drops, 0);
    assert_eq!(link.counters().rx_kernel_drops, 0);
}

/// Child role of the two-process tests (does nothing unless OBT_FABRIC_CHILD
/// is set): opens a port, says HELLO until data comes, echoes DATA frames to
/// their sender until STOP, then prints its counters.
#[test]
fn fabric_child_echo() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let (dir, nm) = spec.split_once('|').expect("DIR|NAME");
    let mut link = FabricLink::open_in(Path::new(dir), nm, &opts()).expect("child open");
    let me = link.mac();
    let deadline = clock::now() + Duration::from_secs(90);
    let mut pending: VecDeque<Vec<u8>> = VecDeque::new();
    let (mut got_data, mut stop) = (false, false);
    let mut last_hello = Instant::ZERO;
    while !stop {
        assert!(clock::now() < deadline, "child timed out");
        if !got_data && clock::now() - last_hello > Duration::from_millis(20) {
            let _ = send(&mut link, &frame(BROADCAST, me, HELLO, 0));
            last_hello = clock::now();
        }
        let n = link
            .receive(256, &mut |f: &[u8], _| match ethertype(f) {
                DATA => {
                    got_data = true;
                    let mut e = f.to_vec();
                    e.copy_within(6..12, 0);
                    e[6..12].copy_from_slice(&me);
                    pending.push_back(e);
                }
                STOP => stop = true,
                _ => {}
            })
            .expect("child receive");
        let mut sent = 0;
        while let Some(f) = pending.front() {
            if send(&mut link, f) != TxStatus::Queued {
                break;
            }
            pending.pop_front();
            sent += 1;
        }
        if n == 0 && sent == 0 {
            link.wait(Duration::from_millis(5), &[], &[]).expect("child wait");
        }
    }
    println!("CHILD-STATS {:?} {:?}", link.counters(), link.fabric_stats());
}

// ---- Groups: N ports as one NIC with N RSS queues ----

const ARP: u16 = 0x0806;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

fn open_group(dir: &TempDir, tag: &str, count: usize) -> Result<Vec<FabricLink>, LinkError> {
    FabricLink::open_group_in(&dir.0, &name(tag), &opts(), count)
}

/// The flow `(10.0.0.2:sport → 10.0.0.1:dport)` as the receiver sees it.
fn flow(sport: u16, dport: u16) -> FlowTuple {
    FlowTuple { src_ip: Ipv4Addr::new(10, 0, 0, 2), dst_ip: Ipv4Addr::new(10, 0, 0, 1), src_port: sport, dst_port: dport }
}

/// Ethernet + IPv4 (`ihl` words; `frag` is the flags/offset field) + the
/// first 8 bytes of a TCP or UDP header, then `mark` big-endian. Checksums
/// are left 0: the fabric does not look at them.
fn ip_frame(dst: [u8; 6], src: [u8; 6], proto: u8, t: &FlowTuple, frag: u16, ihl: u8, mark: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let hlen = usize::from(ihl) * 4;
    let total = (hlen + 8 + 4) as u16;
    f.push(0x40 | ihl);
    f.push(0);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1]); // id
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&t.src_ip.octets());
    f.extend_from_slice(&t.dst_ip.octets());
    f.resize(14 + hlen, 1); // options (NOPs)
    f.extend_from_slice(&t.src_port.to_be_bytes());
    f.extend_from_slice(&t.dst_port.to_be_bytes());
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(&mark.to_be_bytes());
    f.resize(f.len().max(60), 0);
    f
}

fn mark_of(f: &[u8]) -> u32 {
    let at = 14 + usize::from(f[14] & 0x0f) * 4 + 8;
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

fn src_port_of(f: &[u8]) -> u16 {
    let at = 14 + usize::from(f[14] & 0x0f) * 4;
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// What every member of `group` holds after a short wait, by queue.
fn drain_members(group: &mut [FabricLink]) -> Vec<Vec<Vec<u8>>> {
    std::thread::sleep(std::time::Duration::from_millis(20));
    group.iter_mut().map(|l| recv(l, 1024)).collect()
}

/// A source port (from 40000 on) whose flow to port 80 the hash puts on `queue` of `n`.
fn port_for_queue(queue: u16, n: u16) -> u16 {
    (40000..u16::MAX).find(|&p| shard_for(&flow(p, 80), n) == queue).expect("a source port for the queue")
}

#[test]
fn a_group_steers_flows_to_the_queue_rss_picks() {
    let dir = TempDir::new("steer");
    let mut group = open_group(&dir, "steer", 4).expect("group of 4");
    let mut single = open(&dir, "steer");
    assert_eq!(group.iter().map(|l| l.port()).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert!(group.iter().all(|l| l.group() == (0, 4) && l.mac() == port_mac(0)), "one NIC, one MAC");
    assert_eq!((single.port(), single.group(), single.mac()), (4, (4, 1), port_mac(4)));
    let gmac = port_mac(0);
    let smac = single.mac();
    // 200 TCP flows: each frame lands on the queue shard_for names, once.
    const FLOWS: u16 = 200;
    for i in 0..FLOWS {
        let f = ip_frame(gmac, smac, TCP, &flow(40000 + i, 80), 0, 5, u32::from(i));
        assert_eq!(send(&mut single, &f), TxStatus::Queued);
    }
    let got = drain_members(&mut group);
    let mut seen = HashSet::new();
    for (q, frames) in got.iter().enumerate() {
        assert!(!frames.is_empty(), "queue {q} gets some of the {FLOWS} flows");
        for f in frames {
            let sport = src_port_of(f);
            assert_eq!(usize::from(shard_for(&flow(sport, 80), 4)), q, "flow from port {sport}");
            assert!(seen.insert(mark_of(f)), "frame {} twice", mark_of(f));
        }
    }
    assert_eq!(seen.len(), usize::from(FLOWS), "every frame arrived");
    eprintln!("queues got {:?}", got.iter().map(Vec::len).collect::<Vec<_>>());
    // UDP steers the same way; so does TCP behind IPv4 options.
    let p3 = port_for_queue(3, 4);
    assert_eq!(send(&mut single, &ip_frame(gmac, smac, UDP, &flow(p3, 80), 0, 5, 1001)), TxStatus::Queued);
    let p2 = port_for_queue(2, 4);
    assert_eq!(send(&mut single, &ip_frame(gmac, smac, TCP, &flow(p2, 80), 0, 7, 1002)), TxStatus::Queued);
    let got = drain_members(&mut group);
    let marks: Vec<Vec<u32>> = got.iter().map(|fs| fs.iter().map(|f| mark_of(f)).collect()).collect();
    assert_eq!(marks, vec![vec![], vec![], vec![1002], vec![1001]]);
    // Everything not steerable goes to the base, queue 0: fragments (MF, or
    // an offset), other protocols, ARP broadcasts, frames cut short.
    let p1 = port_for_queue(1, 4);
    for (mark, proto, frag) in [(2001, TCP, 0x2000), (2002, UDP, 0x0010), (2003, ICMP, 0), (2004, TCP, 0x4000 | 0x2000)] {
        let f = ip_frame(gmac, smac, proto, &flow(p1, 80), frag, 5, mark);
        assert_eq!(send(&mut single, &f), TxStatus::Queued);
    }
    let short = ip_frame(gmac, smac, TCP, &flow(p1, 80), 0, 15, 0)[..40].to_vec(); // IHL 15: ports past the end
    assert_eq!(send(&mut single, &short), TxStatus::Queued);
    assert_eq!(send(&mut single, &frame(BROADCAST, smac, ARP, 3005)), TxStatus::Queued);
    let got = drain_members(&mut group);
    assert_eq!(got[0].len(), 6, "fragments, ICMP, a short frame and ARP reach the base");
    assert_eq!(got[0][..4].iter().map(|f| mark_of(f)).collect::<Vec<_>>(), vec![2001, 2002, 2003, 2004]);
    assert_eq!(got[0][4], short);
    assert_eq!((ethertype(&got[0][5]), check(&got[0][5])), (ARP, 3005));
    assert!(got[1..].iter().all(Vec::is_empty), "the other queues get none of them (one broadcast copy per NIC)");
    // A frame to a non-base member's own MAC is delivered as addressed.
    assert_eq!(send(&mut single, &frame(port_mac(2), smac, DATA, 7)), TxStatus::Queued);
    let got = drain_members(&mut group);
    assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), vec![0, 0, 1, 0]);
    assert_eq!(single.fabric_stats().unknown_unicast, 0);
}

#[test]
fn group_claims_are_all_or_nothing_and_close_frees_every_port() {
    let dir = TempDir::new("gclaim");
    let group = open_group(&dir, "gclaim", 4).expect("group of 4");
    let path = group[0].path().to_path_buf();
    let owner = |p: usize| read_u32(&path, layout::port_offset(p) + layout::P_OWNER);
    let word = |p: usize| read_u32(&path, layout::port_offset(p) + layout::P_GROUP);
    assert_eq!((0..4).map(word).collect::<Vec<_>>(), vec![4, 4, 4, 4], "(base 0 << 8) | 4 in each member");
    assert_eq!(group[1].info().mode, format!("port 1 of 8, queue 1 of group 0+4, shm {}", path.display()));
    assert_eq!(group[1].info().mac, port_mac(0));
    // Ports 4..8 are the only free run: a group of 5 does not fit, and
    // leaves nothing claimed behind.
    match open_group(&dir, "gclaim", 5) {
        Err(LinkError::FabricTaken(msg)) => {
            assert!(msg.contains("has no 5 consecutive free ports (8 ports, 4 in use)"), "{msg}")
        }
        Err(e) => panic!("expected FabricTaken, got {e}"),
        Ok(g) => panic!("a group of 5 opened at {:?}", g[0].group()),
    }
    assert!((4..8).all(|p| owner(p) == 0 && word(p) == 0), "no port left claimed");
    assert!(matches!(open_group(&dir, "gclaim", 0), Err(LinkError::BadSpec(_))));
    assert!(matches!(open_group(&dir, "gclaim", 9), Err(LinkError::BadSpec(_))));
    let single = open(&dir, "gclaim");
    assert_eq!(single.port(), 4);
    drop(group);
    assert!((0..4).all(|p| owner(p) == 0 && word(p) == 0), "closing a group frees all its ports");
    let again = open_group(&dir, "gclaim", 4).expect("a group of 4 again");
    assert_eq!(again[0].group(), (0, 4));
    drop((again, single));
    assert!(!path.exists(), "the last port to close removes the file");

    // The search skips busy ports: free runs {1}, {3, 4}, {6, 7}.
    let mut singles: Vec<Option<FabricLink>> = (0..8).map(|_| Some(open(&dir, "gclaim"))).collect();
    for p in [1, 3, 4, 6, 7] {
        singles[p] = None;
    }
    assert!(matches!(open_group(&dir, "gclaim", 3), Err(LinkError::FabricTaken(_))));
    let a = open_group(&dir, "gclaim", 2).expect("group of 2");
    let b = open_group(&dir, "gclaim", 2).expect("another group of 2");
    assert_eq!((a[0].group(), b[0].group()), ((3, 2), (6, 2)));
    assert_eq!((a[1].port(), a[1].mac(), b[1].mac()), (4, port_mac(3), port_mac(6)));
}

#[test]
fn a_dead_groups_record_is_ignored_and_replaced() {
    let dir = TempDir::new("gdead");
    let group = open_group(&dir, "gdead", 3).expect("group of 3");
    let mut single = open(&dir, "gdead");
    let path = single.path().to_path_buf();
    // The group's process "dies": its ports hold a pid that has exited.
    let mut t = Command::new("true").spawn().expect("spawn true");
    let dead = t.id();
    t.wait().expect("wait for true");
    for p in 0..3 {
        write_u32(&path, layout::port_offset(p) + layout::P_OWNER, dead);
    }
    drop(group); // frees nothing: the ports are no longer ours
    // A plain port reclaims port 0 and overwrites its group word; the dead
    // members' words no longer count (their owner is not the base's).
    let mut l0 = open(&dir, "gdead");
    assert_eq!((l0.port(), l0.group()), (0, (0, 1)));
    assert_eq!(read_u32(&path, layout::port_offset(0) + layout::P_GROUP), 0);
    let smac = single.mac();
    for i in 0..40u16 {
        let f = ip_frame(port_mac(0), smac, TCP, &flow(40000 + i, 80), 0, 5, u32::from(i));
        assert_eq!(send(&mut single, &f), TxStatus::Queued);
    }
    assert_eq!(recv_n(&mut l0, 40, Duration::from_secs(2)).len(), 40, "nothing steered to the dead members");
    // A broadcast from port 0 reaches the single port (and the dead ports'
    // rings, as any broadcast does).
    let src = l0.mac();
    assert_eq!(send(&mut l0, &frame(BROADCAST, src, DATA, 9)), TxStatus::Queued);
    assert_eq!(recv_n(&mut single, 1, Duration::from_secs(2)).len(), 1);
    // A new group on the dead ports' range starts clean.
    let g = open_group(&dir, "gdead", 2).expect("group of 2 over dead ports 1 and 2");
    assert_eq!(g[0].group(), (1, 2));
    assert_eq!(read_u32(&path, layout::port_offset(1) + layout::P_GROUP), (1 << 8) | 2);
}

#[test]
fn group_members_transmit_to_a_single_port() {
    let dir = TempDir::new("gtx");
    let mut group = open_group(&dir, "gtx", 3).expect("group of 3");
    let mut single = open(&dir, "gtx");
    let (gmac, smac) = (group[0].mac(), single.mac());
    const N: u32 = 2000;
    // All three queues send at once (each has its own rings: no contention),
    // while the single port receives.
    let got = std::thread::scope(|s| {
        for (q, l) in group.iter_mut().enumerate() {
            s.spawn(move || {
                let deadline = clock::now() + Duration::from_secs(20);
                let mut next = 0;
                while next < N && clock::now() < deadline {
                    match send(l, &frame(smac, gmac, DATA, q as u32 * N + next)) {
                        TxStatus::Queued => next += 1,
                        TxStatus::Full => l.wait(Duration::from_millis(5), &[], &[]).expect("wait"),
                        TxStatus::Idle => unreachable!(),
                    }
                }
                assert_eq!(next, N, "queue {q} sent all");
            });
        }
        recv_n(&mut single, 3 * N as usize, Duration::from_secs(20))
    });
    assert_eq!(got.len(), 3 * N as usize);
    let mut per_queue = vec![Vec::new(); 3];
    for f in &got {
        assert_eq!(&f[6..12], &gmac, "every queue sends with the group's MAC");
        let seq = check(f);
        per_queue[(seq / N) as usize].push(seq % N);
    }
    for (q, seqs) in per_queue.iter().enumerate() {
        assert_eq!(seqs, &(0..N).collect::<Vec<_>>(), "queue {q}'s frames, in order");
    }
    assert_eq!(single.counters().rx_kernel_drops, 0);
    // A broadcast from a member reaches the single port, not its siblings;
    // frames to our own group (base or member MAC) are "to ourselves".
    assert_eq!(send(&mut group[1], &frame(BROADCAST, gmac, DATA, 5)), TxStatus::Queued);
    assert_eq!(send(&mut group[2], &frame(gmac, gmac, DATA, 6)), TxStatus::Queued);
    assert_eq!(send(&mut group[2], &frame(port_mac(1), gmac, DATA, 7)), TxStatus::Queued);
    assert_eq!(group[2].fabric_stats().unknown_unicast, 2);
    let got = recv_n(&mut single, 1, Duration::from_secs(2));
    assert_eq!(got.iter().map(|f| check(f)).collect::<Vec<_>>(), vec![5]);
    assert!(drain_members(&mut group).iter().all(Vec::is_empty), "siblings hear nothing");
}

#[test]
fn backpressure_with_groups() {
    let dir = TempDir::new("gfull");
    let mut group = open_group(&dir, "gfull", 2).expect("group of 2");
    let mut single = open(&dir, "gfull");
    let (gmac, smac) = (group[0].mac(), single.mac());
    // A member's only destination outside its group is the single port:
    // its sibling's empty ring does not hide the full one.
    for i in 0..layout::SLOTS {
        assert_eq!(send(&mut group[1], &frame(smac, gmac, DATA, i)), TxStatus::Queued, "frame {i}");
    }
    assert_eq!(send(&mut group[1], &frame(smac, gmac, DATA, 0)), TxStatus::Full);
    assert_eq!(send(&mut group[0], &frame(smac, gmac, DATA, 0)), TxStatus::Queued, "queue 0 has its own ring");
    // Toward a group, Full needs every queue's ring full; a flow whose
    // queue is full while another has room is dropped and counted there.
    let p1 = port_for_queue(1, 2);
    for i in 0..layout::SLOTS {
        let f = ip_frame(gmac, smac, TCP, &flow(p1, 80), 0, 5, i);
        assert_eq!(send(&mut single, &f), TxStatus::Queued, "frame {i}");
    }
    assert_eq!(send(&mut single, &ip_frame(gmac, smac, TCP, &flow(p1, 80), 0, 5, 999)), TxStatus::Queued);
    assert_eq!(single.fabric_stats().ring_full_drops, 1);
    assert_eq!((group[0].counters().rx_kernel_drops, group[1].counters().rx_kernel_drops), (0, 1));
    for i in 0..layout::SLOTS {
        assert_eq!(send(&mut single, &frame(gmac, smac, ARP, i)), TxStatus::Queued, "frame {i} to queue 0");
    }
    assert_eq!(send(&mut single, &frame(gmac, smac, ARP, 0)), TxStatus::Full, "both queues full");
    assert_eq!(recv_n(&mut group[1], layout::SLOTS as usize, Duration::from_secs(2)).len(), layout::SLOTS as usize);
    assert_eq!(send(&mut single, &frame(gmac, smac, ARP, 0)), TxStatus::Queued, "room again");
}
