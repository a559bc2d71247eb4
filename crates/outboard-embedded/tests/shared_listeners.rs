#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Listeners shared between boards, as multi-process servers use them:
//! SO_REUSEPORT (two boards of one user on one port, connections spread
//! between them), inherited across fork (a child's board joins with the
//! parent board's inherit key; `on_demand` members get connections only
//! after `accept_on`), and a listener whose board died after forking
//! lingering until a child joins; a stream released by a parent taken over
//! by its child with the bytes queued both ways.

use outboard_api::{app_counter, AttachOptions, Board, Error, Listener, ListenFlags, Mode, Stream};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

struct Lab {
    server: EmbeddedEngine,
    client: EmbeddedEngine,
}

fn lab(tag: &str) -> Lab {
    let dir = std::env::temp_dir().join(format!("ob-shared-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fabric = format!("fabric:shared-{tag}-{}", std::process::id());
    let start = |name: String, last: u8| {
        let link: LinkSpec = fabric.parse().expect("link spec");
        let mut s = EngineSettings::new(&name, link, Ipv4Addr::new(10, 0, 0, last), 24);
        s.control = false;
        s.boards = outboard_engine::engine::BoardAttach::Embedded;
        EmbeddedEngine::start(s).expect("engine starts")
    };
    let server = start(format!("shared-{tag}-s-{}", std::process::id()), 1);
    let client = start(format!("shared-{tag}-c-{}", std::process::id()), 2);
    Lab { server, client }
}

fn attach(e: &EmbeddedEngine) -> Board {
    e.attach(&AttachOptions::default()).expect("attach")
}

/// Connects `n` times to `port` and keeps the streams open.
fn connect_n(client: &Board, port: u16, n: usize) -> Vec<Stream> {
    (0..n).map(|_| client.connect(SocketAddrV4::new(SERVER, port)).expect("connect")).collect()
}

/// Accepts without waiting until `want` connections came to these
/// listeners in all (at most 5 s); returns how many each got.
fn drain(listeners: &mut [&mut Listener], want: usize) -> Vec<usize> {
    let mut got = vec![0; listeners.len()];
    let t0 = Instant::now();
    while got.iter().sum::<usize>() < want && t0.elapsed() < Duration::from_secs(5) {
        for (i, l) in listeners.iter_mut().enumerate() {
            l.set_mode(Mode::NonBlocking);
            while let Ok(s) = l.accept() {
                got[i] += 1;
                drop(s);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

#[test]
fn reuseport_listeners_of_two_boards_share_a_port() {
    let lab = lab("rp");
    let (a, b, other) = (attach(&lab.server), attach(&lab.server), attach(&lab.server));
    let share = ListenFlags { reuseport: true, on_demand: false, fastopen_qlen: 0 };
    let mut la = a.listen_with(7400, 64, share).expect("first reuseport listener");
    let mut lb = b.listen_with(7400, 64, share).expect("second reuseport listener joins");
    // Without SO_REUSEPORT the port is taken, as on Linux.
    assert!(matches!(other.listen(7400, 8), Err(Error::AddrInUse)));
    let client = attach(&lab.client);
    let _streams = connect_n(&client, 7400, 16);
    let got = drain(&mut [&mut la, &mut lb], 16);
    assert_eq!(got.iter().sum::<usize>(), 16, "every connection accepted once: {got:?}");
    assert!(got.iter().all(|g| *g >= 4), "both boards take a share (round robin): {got:?}");
    // One member closes: the other keeps the port.
    drop(la);
    let _more = connect_n(&client, 7400, 4);
    assert_eq!(drain(&mut [&mut lb], 4), vec![4]);
}

#[test]
fn an_inherited_listener_takes_connections_once_it_says_so() {
    let lab = lab("inh");
    let (parent, child) = (attach(&lab.server), attach(&lab.server));
    let mut lp = parent.listen(7401, 64).expect("listen");
    // A wrong key or endpoint names nothing.
    let on_demand = ListenFlags { reuseport: false, on_demand: true, fastopen_qlen: 0 };
    assert!(matches!(child.inherit_listener(parent.inherit_key() ^ 1, lp.id(), on_demand), Err(Error::Errno(libc::EBADF))));
    assert!(matches!(child.inherit_listener(parent.inherit_key(), lp.id() + 1, on_demand), Err(Error::Errno(libc::EBADF))));
    let mut lc = child.inherit_listener(parent.inherit_key(), lp.id(), on_demand).expect("the child joins");
    assert_eq!(lc.local_port(), 7401);
    let client = attach(&lab.client);
    // The child has not said it accepts: everything goes to the parent.
    let _s1 = connect_n(&client, 7401, 6);
    assert_eq!(drain(&mut [&mut lp, &mut lc], 6), vec![6, 0]);
    // The parent stops accepting (closes); the child accepts from now on.
    lc.accept_on().expect("accept on");
    drop(lp);
    let _s2 = connect_n(&client, 7401, 6);
    assert_eq!(drain(&mut [&mut lc], 6), vec![6]);
}

#[test]
fn a_listener_of_a_board_that_died_after_forking_lingers_for_its_child() {
    let lab = lab("linger");
    let parent = attach(&lab.server);
    let lp = parent.listen(7402, 64).expect("listen");
    let (key, ep) = (parent.inherit_key(), lp.id());
    parent.app_counter_add(app_counter::FORKS, 1);
    // The parent dies (its socket hangs up; no CLOSE, no DETACH).
    // SAFETY: shuts down our own attach socket's descriptor.
    unsafe { libc::shutdown(parent.attach_socket_fd(), libc::SHUT_RDWR) };
    std::thread::sleep(Duration::from_millis(300));
    let child = attach(&lab.server);
    let mut lc = child
        .inherit_listener(key, ep, ListenFlags { reuseport: false, on_demand: true, fastopen_qlen: 0 })
        .expect("the child joins the lingering listener");
    lc.accept_on().expect("accept on");
    let client = attach(&lab.client);
    let _s = connect_n(&client, 7402, 3);
    assert_eq!(drain(&mut [&mut lc], 3), vec![3]);

    // Without a child, a lingering listener closes after the linger.
    let lonely = attach(&lab.server);
    let ll = lonely.listen(7403, 8).expect("listen");
    lonely.app_counter_add(app_counter::FORKS, 1);
    // SAFETY: as above.
    unsafe { libc::shutdown(lonely.attach_socket_fd(), libc::SHUT_RDWR) };
    std::thread::sleep(Duration::from_millis(2600));
    assert!(matches!(client.connect(SocketAddrV4::new(SERVER, 7403)), Err(Error::ConnectionRefused)));
    drop(ll);
}

#[test]
fn a_released_stream_is_taken_over_by_the_child_with_its_queued_bytes() {
    let lab = lab("adopt");
    let (parent, child) = (attach(&lab.server), attach(&lab.server));
    let mut l = parent.listen(7404, 8).expect("listen");
    let client = attach(&lab.client);
    let mut c = client.connect(SocketAddrV4::new(SERVER, 7404)).expect("connect");
    let s = l.accept().expect("accept");
    let (ep, shard) = (s.id(), s.shard());
    // Bytes queued both ways at the hand-over: the client's request sits in
    // the parent's receive region; the parent's greeting is in flight or queued.
    c.send_all(b"request-before-handover").expect("send");
    let mut s = s;
    s.send_all(b"greeting-from-parent;").expect("parent sends");
    std::thread::sleep(Duration::from_millis(50));
    child.child_of(parent.inherit_key()).expect("child of");
    // Before the parent releases it, the child may not take it.
    let key = parent.inherit_key();
    let t0 = Instant::now();
    assert!(matches!(child.adopt_stream(key, ep, shard), Err(Error::Errno(libc::EBUSY))));
    assert!(t0.elapsed() >= Duration::from_millis(900), "an ADOPT waits for the release");
    s.release();
    let mut a = child.adopt_stream(key, ep, shard).expect("the child takes it over");
    let mut got = vec![0u8; 23];
    let mut n = 0;
    while n < got.len() {
        n += a.recv(&mut got[n..]).expect("recv in the child");
    }
    assert_eq!(&got, b"request-before-handover", "the bytes queued in the parent's board moved");
    a.send_all(b"reply-from-child").expect("child sends");
    let want = b"greeting-from-parent;reply-from-child".to_vec();
    let mut back = vec![0u8; want.len()];
    let mut n = 0;
    while n < back.len() {
        n += c.recv(&mut back[n..]).expect("client recv");
    }
    assert_eq!(back, want);
    // A second adopt of the same stream names nothing.
    assert!(matches!(child.adopt_stream(key, ep, shard), Err(Error::Errno(libc::EBADF))));
}
