//! A key-value store served over the engine's request-response protocol
//! (docs/MESSAGES.md, "The key-value example"): binds the mailbox `kv`,
//! answers each request in place (the response written over the request in
//! its own board buffer), serves REQUESTS requests and exits (0 = forever).
//!
//! Requests: `P key \0 value` → `+`; `G key` → `+value` or `-`; `D key` →
//! `+` or `-`; anything else → `?`.
//!
//! usage: msg_kv_server ENGINE_NAME [REQUESTS]
//! prints: {"mailbox": "HOST:PORT/N"} when ready, then {"requests": N, "keys": N}

mod common;
use common::*;
use outboard_api::MessageKind;
use std::collections::HashMap;
use std::io::Write;

/// One request's answer (None: the request is malformed).
pub fn serve(store: &mut HashMap<Vec<u8>, Vec<u8>>, req: &[u8]) -> Vec<u8> {
    let (op, rest) = match req.split_first() {
        Some((op, rest)) => (*op, rest),
        None => return b"?".to_vec(),
    };
    match op {
        b'P' => match rest.iter().position(|b| *b == 0) {
            Some(z) => {
                store.insert(rest[..z].to_vec(), rest[z + 1..].to_vec());
                b"+".to_vec()
            }
            None => b"?".to_vec(),
        },
        b'G' => match store.get(rest) {
            Some(v) => [b"+", &v[..]].concat(),
            None => b"-".to_vec(),
        },
        b'D' => if store.remove(rest).is_some() { b"+".to_vec() } else { b"-".to_vec() },
        _ => b"?".to_vec(),
    }
}

fn main() {
    let usage = "msg_kv_server ENGINE_NAME [REQUESTS]";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let limit = std::env::args().nth(2).map_or(0, |c| num(&c));
    let mut mb = board.bind_mailbox(None, Some("kv")).unwrap_or_else(|e| fail("bind kv", e));
    println!("{{\"mailbox\": \"{}\"}}", mb.addr());
    let _ = std::io::stdout().flush();
    let mut store = HashMap::new();
    let mut served = 0u64;
    while limit == 0 || served < limit {
        let m = mb.begin_get().unwrap_or_else(|e| fail("receive", e));
        if m.kind != MessageKind::Request {
            mb.end_get().unwrap_or_else(|e| fail("release", e));
            continue;
        }
        let answer = serve(&mut store, m.data);
        // In place: the request's own buffer carries the response (answers
        // never outgrow the largest request's buffer: a value came in one).
        let room = mb.reply_buffer().unwrap_or_else(|e| fail("reply buffer", e));
        if answer.len() <= room.len() {
            room[..answer.len()].copy_from_slice(&answer);
            mb.reply_in_place(answer.len()).unwrap_or_else(|e| fail("reply", e));
        } else {
            mb.reply(&answer).unwrap_or_else(|e| fail("reply", e));
        }
        served += 1;
    }
    println!("{{\"requests\": {served}, \"keys\": {}}}", store.len());
}
