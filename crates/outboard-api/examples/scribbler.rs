//! A hostile application, for the tests: attaches, opens a listener, then
//! for SECONDS either writes random bytes over its whole board or sends
//! random commands, from SEED, until the engine drops it (or time is up).
//! The engine must stay up and serve everyone else.
//!
//! usage: scribbler ENGINE_NAME SEED SECONDS bytes|commands
//! prints: {"dropped": true|false, "rounds": N}

#![allow(clippy::disallowed_methods)] // an application: it reads the wall clock

mod common;
use common::*;
use outboard_board::Command;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn main() {
    let usage = "scribbler ENGINE_NAME SEED SECONDS bytes|commands";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let mut rng = Rng(num(&arg(2, usage)) | 1);
    let until = Instant::now() + Duration::from_secs(num(&arg(3, usage)));
    let commands = arg(4, usage) == "commands";
    let _l = board.listen(40000 + (rng.next() % 1000) as u16, 4);
    let mut rounds = 0u64;
    let mut dropped = false;
    while Instant::now() < until {
        rounds += 1;
        if commands {
            let c = Command {
                op: (rng.next() % 14) as u32,
                endpoint: (rng.next() % 300) as u32,
                sync: (rng.next() % 300) as u32,
                flags: rng.next() as u32,
                a: if rng.next().is_multiple_of(2) { rng.next() } else { rng.next() % 70000 },
                b: if rng.next().is_multiple_of(2) { rng.next() } else { rng.next() % 4096 },
                c: rng.next(),
                d: rng.next() % 70000,
                e: rng.next(),
                f: rng.next(),
            };
            if board.__raw_command_for_tests(c).is_err() {
                dropped = true;
                break;
            }
        } else {
            let bytes = board.__board_bytes_for_tests();
            for _ in 0..64 {
                let at = (rng.next() as usize) % bytes.len();
                let len = ((rng.next() % 256) as usize).min(bytes.len() - at);
                for b in &mut bytes[at..at + len] {
                    *b = rng.next() as u8;
                }
            }
            // Make the engine look: a harmless-looking command on top of the garbage.
            let _ = board.__raw_command_for_tests(Command { op: 3, ..Default::default() });
        }
        if !board.engine_alive() {
            dropped = true;
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    println!("{{\"dropped\": {dropped}, \"rounds\": {rounds}}}");
}
