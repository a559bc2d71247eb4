//! VIA-style queue pairs across two engines: `pong` binds a queue pair,
//! prints its address and answers each message with its counter plus one;
//! `ping` connects to it and runs ROUNDS round trips through a completion
//! queue (posted receive buffers, reposted after each completion), checking
//! every counter.
//!
//! usage: qp_pingpong ENGINE_NAME pong ROUNDS
//!        qp_pingpong ENGINE_NAME ping PONG_ADDR ROUNDS
//! prints: pong: {"qp": "HOST:PORT/N"} when ready, then {"rounds": N};
//!         ping: {"rounds": N, "p50_us": F, "p99_us": F}

#![allow(clippy::disallowed_methods)] // an application measures wall-clock round trips

mod common;
use common::*;
use outboard_api::{CompletionQueue, QueuePair, WorkOp};
use std::io::Write;
use std::time::{Duration, Instant};

const POSTED: u32 = 8;
const WAIT: Option<Duration> = Some(Duration::from_secs(10));

fn counter(cq: &mut CompletionQueue, q: usize) -> u64 {
    let d = cq.data(q).unwrap_or_else(|e| fail("data", e));
    u64::from_le_bytes(d.try_into().unwrap_or_else(|_| fail("message", "not 8 bytes")))
}

fn main() {
    let usage = "qp_pingpong ENGINE_NAME pong ROUNDS | qp_pingpong ENGINE_NAME ping PONG_ADDR ROUNDS";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let role = arg(2, usage);
    let mut cq = CompletionQueue::new();
    let q = cq.add(QueuePair::bind(&board, None).unwrap_or_else(|e| fail("queue pair", e)));
    for w in 0..POSTED {
        cq.post_recv(q, w).unwrap_or_else(|e| fail("post_recv", e));
    }
    match role.as_str() {
        "pong" => {
            let rounds = num(&arg(3, usage));
            println!("{{\"qp\": \"{}\"}}", cq.qp(q).addr());
            let _ = std::io::stdout().flush();
            let mut n = 0;
            while n < rounds {
                let c = cq.wait(None).unwrap_or_else(|e| fail("wait", e));
                if c.op == WorkOp::Send {
                    c.result.unwrap_or_else(|e| fail("send", e));
                    continue;
                }
                c.result.unwrap_or_else(|e| fail("receive", e));
                if n == 0 {
                    cq.qp(q).connect(c.from.expect("a receive has a sender"));
                }
                let v = counter(&mut cq, q);
                cq.repost(q, c.wr_id).unwrap_or_else(|e| fail("repost", e));
                cq.post_send(q, &(v + 1).to_le_bytes(), v as u32).unwrap_or_else(|e| fail("post_send", e));
                n += 1;
            }
            // The last answers' completions: the peer has them.
            let mut left = 1;
            while left > 0 {
                match cq.wait(WAIT) {
                    Ok(c) if c.op == WorkOp::Send => left -= 1,
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            println!("{{\"rounds\": {n}}}");
        }
        "ping" => {
            let peer = arg(3, usage).parse().unwrap_or_else(|e: String| fail("pong address", e));
            let rounds = num(&arg(4, usage));
            cq.qp(q).connect(peer);
            let mut lat = Vec::with_capacity(rounds as usize);
            for i in 0..rounds {
                let t = Instant::now();
                cq.post_send(q, &(2 * i).to_le_bytes(), i as u32).unwrap_or_else(|e| fail("post_send", e));
                loop {
                    let c = cq.wait(WAIT).unwrap_or_else(|e| fail("wait", e));
                    if c.op == WorkOp::Send {
                        c.result.unwrap_or_else(|e| fail("send", e));
                        continue;
                    }
                    c.result.unwrap_or_else(|e| fail("receive", e));
                    let v = counter(&mut cq, q);
                    cq.repost(q, c.wr_id).unwrap_or_else(|e| fail("repost", e));
                    if v != 2 * i + 1 {
                        fail("round", format!("{i}: got {v}, not {}", 2 * i + 1));
                    }
                    break;
                }
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
            lat.sort_by(f64::total_cmp);
            let p = |x: f64| lat.get(((lat.len() as f64 * x) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0.0);
            println!("{{\"rounds\": {rounds}, \"p50_us\": {:.1}, \"p99_us\": {:.1}}}", p(0.5), p(0.99));
        }
        _ => fail("role", usage),
    }
}
