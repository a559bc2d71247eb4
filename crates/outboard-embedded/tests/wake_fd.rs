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
    let t0 = Instant::now();
    let mut s = loop {
        match l.accept() {
            Ok(s) => break s,
            Err(outboard_api::Error::WouldBlock) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "no connection");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
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
