//! Two embedded engines on one shared-memory fabric, an application on
//! each: the native API end to end, no root.

use outboard_api::{AttachOptions, Board, EmbeddedEngine, Mode};
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, SocketAddrV4};

fn engine(fabric: &str, name: &str, last: u8) -> EmbeddedEngine {
    let link: LinkSpec = fabric.parse().expect("link spec");
    let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
    s.control = false;
    EmbeddedEngine::start(s).expect("engine starts")
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 7) as u8
}

#[test]
fn stream_through_two_embedded_engines_zero_copy_both_ends() {
    let fabric = format!("fabric:api-{}", std::process::id());
    let a = engine(&fabric, "api-a", 1);
    let b = engine(&fabric, "api-b", 2);
    let total: u64 = 64 << 20;
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7000, 16).expect("listen");
    let server = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions::default()).expect("attach b");
        let mut s = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000)).expect("connect");
        let mut sent = 0u64;
        while sent < total {
            let buf = s.begin_put().expect("begin_put");
            let n = buf.len().min((total - sent) as usize);
            for (k, x) in buf[..n].iter_mut().enumerate() {
                *x = pattern(sent + k as u64);
            }
            s.end_put(n).expect("end_put");
            sent += n as u64;
        }
        s.shutdown().expect("shutdown");
        // Wait for the peer's close so everything was acknowledged.
        let mut sink = [0u8; 16];
        assert_eq!(s.recv(&mut sink).expect("eof"), 0);
        drop(s);
        drop(board_b);
    });
    let mut s = l.accept().expect("accept");
    let mut got = 0u64;
    loop {
        let buf = s.begin_get().expect("begin_get");
        if buf.is_empty() {
            break;
        }
        for (k, x) in buf.iter().enumerate() {
            assert_eq!(*x, pattern(got + k as u64), "byte {}", got + k as u64);
        }
        let n = buf.len();
        got += n as u64;
        s.end_get(n).expect("end_get");
    }
    assert_eq!(got, total);
    assert_eq!(board_a.copy_counters().recv_copied, 0);
    drop(s);
    server.join().expect("client thread");
    let _ = Mode::Blocking;
}
