#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! The application's wake eventfd (CLAN's tripwire): the engine writes it
//! while a thread is announced in the pollers word, and not otherwise; a
//! descriptor that is not an eventfd is refused without harm.

mod common;

use common::engine;
use outboard_api::{AttachOptions, Mode};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

fn eventfd() -> RawFd {
    // SAFETY: plain eventfd creation.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    fd
}

/// Waits up to `ms` for `fd` to be readable.
fn readable(fd: RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

fn drain(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

#[test]
fn the_engine_writes_the_wake_eventfd_only_while_a_poller_is_announced() {
    let fabric = format!("fabric:wake-{}", std::process::id());
    let a = engine(&fabric, "wake-a", 1);
    let b = engine(&fabric, "wake-b", 2);
    let efd = eventfd();
    let board_a = a.attach(&AttachOptions { mode: Mode::NonBlocking, wake_fd: Some(efd), ..Default::default() }).expect("attach a");
    let mut l = board_a.listen(7100, 4).expect("listen");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let news = board_a.news();

    // Not announced: a connection arriving posts events but leaves the eventfd alone.
    let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7100)).expect("connect");
    let mut s = accept(&mut l);
    assert!(!readable(efd, 50), "eventfd written with no poller announced");

    // Announced: bytes from the peer wake the eventfd.
    let seen = news.current();
    news.poller_enter();
    assert_eq!(news.current(), seen, "nothing happened in between");
    c.send_all(b"ping").expect("send");
    assert!(readable(efd, 2000), "the engine did not write the wake eventfd");
    assert_eq!(news.poller_exit(), 0);
    drain(efd);
    let mut buf = [0u8; 8];
    let t0 = Instant::now();
    let n = loop {
        match s.recv(&mut buf) {
            Ok(n) => break n,
            Err(outboard_api::Error::WouldBlock) if t0.elapsed() < Duration::from_secs(2) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("recv: {e}"),
        }
    };
    assert_eq!(&buf[..n], b"ping");

    // Left: more bytes, no write.
    c.send_all(b"pong").expect("send");
    assert!(!readable(efd, 100), "eventfd written after the poller left");
    // SAFETY: closing our eventfd (the engine keeps its own copy).
    unsafe { libc::close(efd) };
}

#[test]
fn a_wake_descriptor_that_is_not_an_eventfd_is_ignored() {
    let fabric = format!("fabric:wakep-{}", std::process::id());
    let a = engine(&fabric, "wakep-a", 1);
    let b = engine(&fabric, "wakep-b", 2);
    let mut p = [0; 2];
    // SAFETY: a pipe pair into a live array.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // A pipe could fill and block the engine: it must not be used.
    let board_a = a.attach(&AttachOptions { wake_fd: Some(p[1]), ..Default::default() }).expect("attach a");
    let mut l = board_a.listen(7101, 4).expect("listen");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    board_a.news().poller_enter();
    let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7101)).expect("connect");
    let mut s = l.accept().expect("accept");
    c.send_all(b"data").expect("send");
    let mut buf = [0u8; 4];
    assert_eq!(s.recv(&mut buf).expect("recv"), 4);
    assert!(!readable(p[0], 50), "the engine wrote into a pipe given as the wake descriptor");
    // SAFETY: closing our pipe ends.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
    }
}

fn accept(l: &mut outboard_api::Listener) -> outboard_api::Stream {
    let t0 = Instant::now();
    loop {
        match l.accept() {
            Ok(s) => return s,
            Err(outboard_api::Error::WouldBlock) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "no connection");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn recv_exact(s: &mut outboard_api::Stream, want: &[u8]) {
    let mut buf = vec![0u8; want.len()];
    let mut got = 0;
    let t0 = Instant::now();
    while got < want.len() {
        match s.recv(&mut buf[got..]) {
            Ok(n) => got += n,
            Err(outboard_api::Error::WouldBlock) if t0.elapsed() < Duration::from_secs(2) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("recv: {e}"),
        }
    }
    assert_eq!(buf, want);
}

/// Wake groups (`op::WAKE_GROUP`): a thread asleep in group 1 is woken for
/// its endpoints' events and for endpoints in no group, never for group 2's
/// — the kernel's epoll wakes only the instance a ready descriptor is in,
/// and a program with an epoll set per thread (memcached's workers) must
/// not wake every thread for every packet.
#[test]
fn a_wake_groups_eventfd_is_written_for_its_own_endpoints_and_those_in_no_group_only() {
    let fabric = format!("fabric:wakeg-{}", std::process::id());
    let a = engine(&fabric, "wakeg-a", 1);
    let b = engine(&fabric, "wakeg-b", 2);
    let (efd, g1, g2) = (eventfd(), eventfd(), eventfd());
    let opts = AttachOptions { mode: Mode::NonBlocking, wake_fd: Some(efd), wake_group_fds: vec![g1, g2], ..Default::default() };
    let board_a = a.attach(&opts).expect("attach a");
    let mut l = board_a.listen(7102, 4).expect("listen");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let to = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7102);
    let mut c1 = board_b.connect(to).expect("connect 1");
    let mut s1 = accept(&mut l);
    let mut c2 = board_b.connect(to).expect("connect 2");
    let mut s2 = accept(&mut l);
    board_a.set_wake_group(s1.id(), 1).expect("group 1");
    board_a.set_wake_group(s2.id(), 2).expect("group 2");
    assert!(board_a.set_wake_group(s2.id(), 8).is_err(), "a group out of range is refused");
    for fd in [efd, g1, g2] {
        drain(fd);
    }
    let news = board_a.news();
    news.poller_enter_slot(1);
    // A command answered after them (the engine took them in order). Its
    // completion is an event of no endpoint: it wakes every group with a
    // sleeper — and is waited for here, since the answer can be read
    // before the engine's turn ends and writes the eventfd.
    let _ = s2.tcp_info();
    assert!(readable(g1, 2000), "a completion did not wake group 1");
    drain(g1);

    // Group 2's bytes: nobody sleeps in slot 0 or 2, and group 1 is not theirs.
    c2.send_all(b"two").expect("send 2");
    recv_exact(&mut s2, b"two");
    assert!(!readable(g1, 100), "group 1 woken for group 2's endpoint");
    assert!(!readable(efd, 0) && !readable(g2, 0), "eventfds written with no sleeper in their slot");

    // Its own endpoint's bytes wake group 1 (and only it).
    c1.send_all(b"one").expect("send 1");
    assert!(readable(g1, 2000), "group 1 not woken for its endpoint");
    recv_exact(&mut s1, b"one");
    assert!(!readable(efd, 0) && !readable(g2, 0));
    drain(g1);

    // An endpoint in no group (the listener: a new connection) wakes every group with a sleeper.
    let _c3 = board_b.connect(to).expect("connect 3");
    assert!(readable(g1, 2000), "group 1 not woken for an endpoint in no group");
    assert_eq!(news.poller_exit_slot(1), 0);
    drain(g1);
    c1.send_all(b"left").expect("send");
    recv_exact(&mut s1, b"left");
    assert!(!readable(g1, 100), "group 1 written after its sleeper left");
    for fd in [efd, g1, g2] {
        // SAFETY: closing our eventfds (the engine keeps its own copies).
        unsafe { libc::close(fd) };
    }
}
