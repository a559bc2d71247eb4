//! An echo server over one event queue: the listener and every connection
//! are endpoints of the queue; received bytes are relayed from the receive
//! region straight into the transmit region (`begin_get_put`: one copy, in
//! the board). Serves CONNECTIONS connections, then prints totals and exits
//! (0 = forever).
//!
//! When the engine dies, the server waits up to 60 s for an engine of the
//! same name to come back (`Board::reattach`), listens again on its port
//! and carries on (connections of the dead engine are gone with it).
//!
//! usage: echo_server ENGINE_NAME PORT [CONNECTIONS]
//! prints: {"connections": N, "bytes": N}

mod common;
use common::*;
use outboard_api::{Interest, Mode, Stream};
use std::collections::HashMap;

fn main() {
    let usage = "echo_server ENGINE_NAME PORT [CONNECTIONS]";
    let mut board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let port = num(&arg(2, usage)) as u16;
    let limit = std::env::args().nth(3).map_or(0, |c| num(&c));
    let listen = |board: &outboard_api::Board| {
        let mut l = board.listen(port, 128).unwrap_or_else(|e| fail("listen", e));
        l.set_mode(Mode::NonBlocking);
        let mut q = board.event_queue();
        q.add(l.id(), u64::MAX, Interest::READABLE).unwrap_or_else(|e| fail("event queue", e));
        (l, q)
    };
    let (mut l, mut q) = listen(&board);
    let mut conns: HashMap<u64, Stream> = HashMap::new();
    let (mut served, mut bytes, mut ready) = (0u64, 0u64, Vec::new());
    while limit == 0 || served < limit || !conns.is_empty() {
        match q.wait(&mut ready, None) {
            Ok(_) => {}
            Err(outboard_api::Error::EngineGone) => {
                eprintln!("echo_server: the engine is gone; waiting for it to come back");
                board = board.reattach(std::time::Duration::from_secs(60)).unwrap_or_else(|e| fail("reattach", e));
                conns.clear();
                (l, q) = listen(&board);
                eprintln!("echo_server: re-attached; listening on {port} again");
                continue;
            }
            Err(e) => fail("wait", e),
        }
        for r in ready.clone() {
            if r.token == u64::MAX {
                while let Ok(mut s) = l.accept() {
                    s.set_mode(Mode::NonBlocking);
                    q.add(s.id(), u64::from(s.id()), Interest::READABLE).unwrap_or_else(|e| fail("event queue", e));
                    conns.insert(u64::from(s.id()), s);
                }
                continue;
            }
            let Some(s) = conns.get_mut(&r.token) else { continue };
            let mut done = r.error;
            let mut blocked = false;
            while !done {
                let (n, rx_empty) = match s.begin_get_put() {
                    Ok((rx, tx)) => {
                        let n = rx.len().min(tx.len());
                        tx[..n].copy_from_slice(&rx[..n]);
                        (n, rx.is_empty())
                    }
                    Err(_) => {
                        done = true;
                        break;
                    }
                };
                if n > 0 {
                    s.end_put(n).unwrap_or_else(|e| fail("end_put", e));
                    s.end_get(n).unwrap_or_else(|e| fail("end_get", e));
                    bytes += n as u64;
                } else if rx_empty && s.at_eof() {
                    let _ = s.shutdown();
                    done = true;
                } else {
                    // Nothing to read, or no room: wait for what is missing.
                    blocked = !rx_empty;
                    break;
                }
            }
            if done {
                let id = r.token;
                let _ = q.remove(id as u32);
                conns.remove(&id);
                served += 1;
            } else {
                let want = if blocked { Interest::WRITABLE } else { Interest::READABLE };
                let _ = q.modify(r.token as u32, r.token, want);
            }
        }
    }
    println!("{{\"connections\": {served}, \"bytes\": {bytes}}}");
}
