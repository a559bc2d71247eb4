//! Attaches, then keeps making non-blocking calls (every 10 ms) until one
//! says the engine is gone; prints how many calls it made. The engine-death
//! test kills the engine and times how long this takes to notice.
//!
//! usage: engine_watch ENGINE_NAME PORT
//! prints: ready (once attached), then {"engine_gone": true, "calls": N}

mod common;
use common::*;
use outboard_api::{Error, Mode};
use std::io::Write;

fn main() {
    let usage = "engine_watch ENGINE_NAME PORT";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut l = board.listen(num(&arg(2, usage)) as u16, 4).unwrap_or_else(|e| fail("listen", e));
    l.set_mode(Mode::NonBlocking);
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut calls = 0u64;
    loop {
        calls += 1;
        match l.accept() {
            Err(Error::WouldBlock) | Ok(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(Error::EngineGone) => break,
            Err(e) => fail("accept", e),
        }
    }
    println!("{{\"engine_gone\": true, \"calls\": {calls}}}");
}
