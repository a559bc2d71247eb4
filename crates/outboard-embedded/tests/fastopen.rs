#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! TCP Fast Open (RFC 7413) through the native API, between two embedded
//! engines on one shared-memory fabric (no root): a listener given a Fast
//! Open queue length after `listen` (`Listener::set_fast_open`), a client
//! using `Board::connect_fast_open`. The first connection gets a cookie; the
//! next ones send their request in the SYN (TCP_INFO's TCPI_OPT_SYN_DATA),
//! and every reply comes back byte-exact.

use outboard_api::{AttachOptions, TCPI_OPT_SYN_DATA};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, SocketAddrV4};

fn settings(fabric: &str, name: &str, last: u8) -> EngineSettings {
    let link: LinkSpec = fabric.parse().expect("link spec");
    let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
    s.control = false;
    s
}

#[test]
fn rfc7413_native_api_client_and_listener() {
    let fabric = format!("fabric:tfo-{}", std::process::id());
    let a = EmbeddedEngine::start(settings(&fabric, "tfo-a", 1)).expect("engine a");
    let b = std::sync::Arc::new(EmbeddedEngine::start(settings(&fabric, "tfo-b", 2)).expect("engine b"));
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7300, 8).expect("listen");
    l.set_fast_open(8).expect("TCP_FASTOPEN");
    let b2 = b.clone();
    let client = std::thread::spawn(move || {
        let board_b = b2.attach(&AttachOptions::default()).expect("attach b");
        let mut syn_data = Vec::new();
        for i in 0..3u8 {
            let mut c = board_b.connect_fast_open(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7300)).expect("connect");
            let req: Vec<u8> = (0..600u32).map(|k| (k as u8).wrapping_mul(i + 3)).collect();
            c.send_all(&req).expect("send");
            let mut back = vec![0u8; req.len()];
            let mut n = 0;
            while n < back.len() {
                let k = c.recv(&mut back[n..]).expect("reply");
                assert!(k > 0, "early end of stream");
                n += k;
            }
            assert_eq!(back, req.iter().map(|b| !b).collect::<Vec<u8>>(), "byte-exact reply");
            syn_data.push(c.tcp_info().options & TCPI_OPT_SYN_DATA != 0);
        }
        syn_data
    });
    for _ in 0..3 {
        let mut s = l.accept().expect("accept");
        let mut req = vec![0u8; 600];
        let mut n = 0;
        while n < req.len() {
            let k = s.recv(&mut req[n..]).expect("recv");
            assert!(k > 0, "early end of stream");
            n += k;
        }
        let reply: Vec<u8> = req.iter().map(|b| !b).collect();
        s.send_all(&reply).expect("reply");
    }
    let syn_data = client.join().expect("client");
    assert_eq!(syn_data, [false, true, true], "the first connection asks for the cookie, the others use it");
}
