#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Keep-alives, TCP_INFO and the engine's routing facts, through two
//! embedded engines on one shared-memory fabric (no root).

use outboard_api::{AttachOptions, Error, Mode, TCPI_OPT_SACK, TCPI_OPT_TIMESTAMPS, TCPI_OPT_WSCALE};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

fn settings(fabric: &str, name: &str, last: u8) -> EngineSettings {
    let link: LinkSpec = fabric.parse().expect("link spec");
    let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
    s.control = false;
    s
}

#[test]
fn tcp_info_after_a_transfer_shows_the_negotiated_connection() {
    let fabric = format!("fabric:info-{}", std::process::id());
    let a = EmbeddedEngine::start(settings(&fabric, "info-a", 1)).expect("engine a");
    // Engine b outlives the client's board (held here too), so the close it
    // sends on leaving is carried out, not cut short by the engine stopping.
    let b = std::sync::Arc::new(EmbeddedEngine::start(settings(&fabric, "info-b", 2)).expect("engine b"));
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7100, 4).expect("listen");
    let b2 = b.clone();
    let total: u64 = 4 << 20;
    // The client keeps its connection open until the server took its own
    // TCP_INFO, so the server's reads ESTABLISHED, not the close that follows.
    let (server_read, client_may_close) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let board_b = b2.attach(&AttachOptions::default()).expect("attach b");
        let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7100)).expect("connect");
        let chunk = vec![0x5au8; 64 << 10];
        for _ in 0..total / chunk.len() as u64 {
            c.send_all(&chunk).expect("send");
        }
        // The reply comes once everything arrived, so all of it is acknowledged soon.
        let mut four = [0u8; 4];
        let mut n = 0;
        while n < 4 {
            n += c.recv(&mut four[n..]).expect("reply");
        }
        let t0 = Instant::now();
        loop {
            let i = c.tcp_info();
            if i.bytes_acked == total || t0.elapsed() > Duration::from_secs(5) {
                let _ = client_may_close.recv_timeout(Duration::from_secs(10));
                return i;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let mut s = l.accept().expect("accept");
    let mut buf = vec![0u8; 64 << 10];
    let mut got = 0u64;
    while got < total {
        got += s.recv(&mut buf).expect("recv") as u64;
    }
    s.send_all(b"done").expect("reply");
    let r = s.tcp_info();
    server_read.send(()).expect("client waits");
    let info = client.join().expect("client");
    assert_eq!(info.state, 1, "ESTABLISHED: {info:?}");
    assert_eq!(info.bytes_acked, total, "{info:?}");
    assert_eq!(info.bytes_received, 4, "{info:?}");
    assert!(info.rtt_us > 0 && info.rto_us > 0, "{info:?}");
    assert!(info.snd_cwnd > 0 && info.snd_mss > 0 && info.rcv_mss > 0, "{info:?}");
    // The engines' defaults offer all three (RFC 7323, RFC 2018); both ends take them.
    assert_eq!(info.options, TCPI_OPT_TIMESTAMPS | TCPI_OPT_SACK | TCPI_OPT_WSCALE, "{info:?}");
    assert!(info.rcv_wscale > 0 && info.snd_wscale > 0, "{info:?}");
    assert!(info.segs_out > 0 && info.segs_in > 0, "{info:?}");
    assert_eq!(r.state, 1, "{r:?}");
    assert_eq!(r.bytes_received, total, "{r:?}");
    assert_eq!(r.options, info.options, "{r:?}");
    assert!(r.snd_mss > 0 && r.rcv_mss > 0, "{r:?}");
    // The client detached (a graceful close): CLOSE_WAIT (8) here until we close.
    let t0 = Instant::now();
    loop {
        if s.recv(&mut buf).expect("eof") == 0 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    let t0 = Instant::now();
    while s.tcp_info().state != 8 {
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", s.tcp_info());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn engine_net_tells_which_destinations_the_engine_serves() {
    let fabric = format!("fabric:net-{}", std::process::id());
    let mut set = settings(&fabric, "net-a", 1);
    set.gateway = Some(Ipv4Addr::new(10, 0, 0, 254));
    let a = EmbeddedEngine::start(set).expect("engine a");
    let b = EmbeddedEngine::start(settings(&fabric, "net-b", 2)).expect("engine b");
    let na = a.attach(&AttachOptions::default()).expect("attach a").engine_net();
    let nb = b.attach(&AttachOptions::default()).expect("attach b").engine_net();
    assert_eq!(na.addr, std::net::IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(na.prefix_len, 24);
    assert_eq!(na.gateway, Some(Ipv4Addr::new(10, 0, 0, 254).into()));
    assert_eq!(nb.gateway, None);
    assert!(na.serves(Ipv4Addr::new(93, 184, 216, 34)));
    assert!(!nb.serves(Ipv4Addr::new(93, 184, 216, 34)));
    assert!(nb.serves(Ipv4Addr::new(10, 0, 0, 1)));
    assert!(!nb.serves(Ipv4Addr::new(127, 0, 0, 1)));
    assert!(!nb.serves(Ipv4Addr::new(10, 0, 0, 255)));
    // IPv6: not until the engine runs it.
    assert!(!na.serves("2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap()));
}

#[test]
fn keepalive_keeps_a_live_peer_and_times_out_a_silent_one() {
    let fabric = format!("fabric:ka-{}", std::process::id());
    // Engine a goes silent (its link drops all it sends) 3 s from now.
    let now = outboard_engine::clock::now();
    let silent_at = Instant::now() + Duration::from_secs(3);
    let mut sa = settings(&fabric, "ka-a", 1);
    // (A perfect fabric link but for one outage; the types come from the settings.)
    sa.fabric_faults = Some((Default::default(), 1));
    if let Some((faults, _)) = sa.fabric_faults.as_mut() {
        faults.outages = vec![(now + Duration::from_secs(3), now + Duration::from_secs(600))];
    }
    let a = EmbeddedEngine::start(sa).expect("engine a");
    let b = EmbeddedEngine::start(settings(&fabric, "ka-b", 2)).expect("engine b");
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let mut l = board_a.listen(7200, 4).expect("listen");
    let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7200)).expect("connect");
    let mut s = l.accept().expect("accept");
    let bad = Some((Duration::ZERO, Duration::from_millis(50), 3));
    assert!(matches!(c.set_keepalive(bad), Err(Error::Invalid(_))));
    assert!(matches!(
        c.set_keepalive(Some((Duration::from_millis(100), Duration::from_millis(50), 0))),
        Err(Error::Invalid(_))
    ));
    // Idle 600 ms, then a probe every 600 ms; 2 unanswered probes time it
    // out. (A peer answers a probe, an out-of-window segment, at most every
    // 500 ms: RFC 5961 §7 rate limiting, as Linux's tcp_invalid_ratelimit.)
    let ms = Duration::from_millis;
    c.set_keepalive(Some((ms(600), ms(600), 2))).expect("keepalive");
    // An accepted stream takes its own options (nothing comes from the listener).
    s.set_keepalive(Some((ms(600), ms(600), 2))).expect("keepalive on the accepted stream");
    // The peer answers the probes: idle periods pass and the stream lives.
    std::thread::sleep(ms(1700));
    let mut buf = [0u8; 16];
    c.set_mode(Mode::NonBlocking);
    if Instant::now() + Duration::from_millis(100) < silent_at {
        let r = c.recv(&mut buf);
        assert!(matches!(r, Err(Error::WouldBlock)), "the stream died with a live peer: {r:?} {:?}", c.tcp_info());
    }
    // Then the peer falls silent: the probes go unanswered.
    c.set_mode(Mode::Blocking);
    let t0 = Instant::now();
    let r = c.recv(&mut buf);
    assert!(matches!(r, Err(Error::TimedOut)), "{r:?}");
    assert!(Instant::now() >= silent_at, "timed out before the peer fell silent");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(c.tcp_info().state, 7, "CLOSE after the timeout");
    // The silent side's probes are lost too: it times out as well, unless the
    // RST the other side sends when its keepalive gives up (as Linux's
    // tcp_keepalive_timer does) reaches it first: ETIMEDOUT or ECONNRESET, as on Linux.
    let r = s.recv(&mut buf);
    assert!(matches!(r, Err(Error::TimedOut | Error::ConnectionReset)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(10));
}
