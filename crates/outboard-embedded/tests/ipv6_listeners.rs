#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! IPv6 for applications through the native API, between two dual-stack
//! embedded engines on one shared-memory fabric (no root): the attach
//! reply's IPv6 facts, and listeners that take connections by family or
//! address as Linux's sockets do (`Board::listen_on`).

use outboard_api::{AttachOptions, Board, Error, ListenFamily, ListenFlags};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

fn v6(last: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, last)
}

fn settings(fabric: &str, name: &str, last: u8, ipv6: bool) -> EngineSettings {
    let link: LinkSpec = fabric.parse().expect("link spec");
    let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
    s.control = false;
    if ipv6 {
        // No duplicate-address detection: the addresses are usable at once.
        let c = s.ipv6.insert(Default::default());
        c.addr = Some((v6(u16::from(last)), 64));
        c.dad_transmits = 0;
    }
    s
}

/// Connects from `board` to `to`: Ok, or the error (bounded: the handshake or its refusal).
fn connect(board: &Board, to: SocketAddr) -> Result<SocketAddr, Error> {
    board.connect(to).map(|s| s.local_addr())
}

/// The next connection `l` accepted (it is queued already: the client's
/// handshake completed); its peer address.
fn accepted(l: &mut outboard_api::Listener) -> SocketAddr {
    let t0 = Instant::now();
    let s = l.accept().expect("accept");
    assert!(t0.elapsed() < Duration::from_secs(5));
    s.peer_addr()
}

#[test]
fn listeners_take_connections_by_family_and_address_as_linux_sockets() {
    let fabric = format!("fabric:v6l-{}", std::process::id());
    let a = EmbeddedEngine::start(settings(&fabric, "v6l-a", 1, true)).expect("engine a");
    let b = EmbeddedEngine::start(settings(&fabric, "v6l-b", 2, true)).expect("engine b");
    let server = a.attach(&AttachOptions::default()).expect("attach a");
    let client = b.attach(&AttachOptions::default()).expect("attach b");
    // The attach reply tells the engine's IPv6.
    let net = server.engine_net();
    let n6 = net.ipv6.expect("a dual-stack engine says so");
    assert_eq!(n6.addr, Some((v6(1), 64)));
    assert!(net.serves(v6(2)) && net.serves(Ipv4Addr::new(10, 0, 0, 2)));
    let (a4, a6) = (|p| SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), p)), |p| SocketAddr::from((v6(1), p)));
    let flags = ListenFlags::default();

    // `[::]` (IPV6_V6ONLY off): both families, IPv4 peers as IPv4.
    let mut both = server.listen_on("[::]:7300".parse().unwrap(), 8, flags).expect("listen [::]");
    connect(&client, a6(7300)).expect("IPv6 to [::]");
    assert_eq!(accepted(&mut both).ip(), v6(2));
    connect(&client, a4(7300)).expect("IPv4 to [::]");
    assert!(accepted(&mut both).is_ipv4());

    // `[::]` with IPV6_V6ONLY: IPv6 only; IPv4 is refused.
    let only6 = ListenFlags { family: ListenFamily::Ipv6, ..flags };
    let mut l6 = server.listen_on("[::]:7301".parse().unwrap(), 8, only6).expect("listen [::] v6only");
    assert!(matches!(connect(&client, a4(7301)), Err(Error::ConnectionRefused)));
    connect(&client, a6(7301)).expect("IPv6 to a v6only listener");
    assert_eq!(accepted(&mut l6).ip(), v6(2));

    // `0.0.0.0`: IPv4 only.
    let mut l4 = server.listen_on("0.0.0.0:7302".parse().unwrap(), 8, flags).expect("listen 0.0.0.0");
    assert!(matches!(connect(&client, a6(7302)), Err(Error::ConnectionRefused)));
    connect(&client, a4(7302)).expect("IPv4 to 0.0.0.0");
    assert_eq!(accepted(&mut l4).ip(), Ipv4Addr::new(10, 0, 0, 2));

    // One IPv6 address: that address only.
    let mut one = server.listen_on(a6(7303), 8, flags).expect("listen on fd77::1");
    assert!(matches!(connect(&client, a4(7303)), Err(Error::ConnectionRefused)));
    connect(&client, a6(7303)).expect("IPv6 to its address");
    assert_eq!(accepted(&mut one).ip(), v6(2));

    // An address not the engine's: EADDRNOTAVAIL, as Linux's bind.
    let e = server.listen_on(SocketAddr::from((v6(9), 7304)), 8, flags).map(|_| ()).unwrap_err();
    assert_eq!(e.errno(), libc::EADDRNOTAVAIL, "{e}");
}

#[test]
fn an_engine_without_ipv6_says_so_and_refuses_ipv6_listeners() {
    let fabric = format!("fabric:v6n-{}", std::process::id());
    let a = EmbeddedEngine::start(settings(&fabric, "v6n-a", 1, false)).expect("engine a");
    let board = a.attach(&AttachOptions::default()).expect("attach");
    assert_eq!(board.engine_net().ipv6, None);
    assert!(!board.engine_net().serves(v6(2)));
    let only6 = ListenFlags { family: ListenFamily::Ipv6, ..ListenFlags::default() };
    let e = board.listen_on("[::]:7310".parse().unwrap(), 8, only6).map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::AddrFamily), "{e}");
    // A dual-stack `[::]` listener is an IPv4 one here, as before.
    board.listen_on("[::]:7311".parse().unwrap(), 8, ListenFlags::default()).expect("listen [::] on an IPv4 engine");
}
