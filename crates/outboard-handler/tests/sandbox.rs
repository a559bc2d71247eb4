#![allow(clippy::disallowed_methods)] // wall-clock bounds on the deadline and the invocation cost
//! The sandbox against hostile and well-behaved modules (written in the
//! WebAssembly text format here; the SDK's examples are tested by the engine).

use outboard_handler::{Addr, Attach, Fault, Handler, HostIo, Input, Limits, LoadError, MessageKind, Outcome, Runtime};
use std::time::{Duration, Instant};

#[derive(Default)]
struct TestIo {
    replies: Vec<Vec<u8>>,
    sent: Vec<(Addr, Vec<u8>, bool)>,
    enqueued: Vec<(u32, Vec<u8>)>,
    logs: Vec<String>,
    now: u64,
}

impl HostIo for TestIo {
    fn reply(&mut self, data: &[u8]) -> Result<(), i32> {
        self.replies.push(data.to_vec());
        Ok(())
    }
    fn send(&mut self, to: Addr, data: &[u8], reliable: bool) -> Result<(), i32> {
        self.sent.push((to, data.to_vec(), reliable));
        Ok(())
    }
    fn enqueue(&mut self, mailbox: u32, data: &[u8]) -> Result<(), i32> {
        if mailbox != 100 {
            return Err(2);
        }
        self.enqueued.push((mailbox, data.to_vec()));
        Ok(())
    }
    fn tcp_write(&mut self, _conn: u32, _data: &[u8]) -> Result<usize, i32> {
        Err(107)
    }
    fn tcp_close(&mut self, _conn: u32) -> Result<(), i32> {
        Err(107)
    }
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn log(&mut self, line: &str) {
        self.logs.push(line.to_string());
    }
}

const IMPORTS: &str = r#"
  (import "outboard" "input_read" (func $input_read (param i32 i32 i32) (result i32)))
  (import "outboard" "reply" (func $reply (param i32 i32) (result i32)))
  (import "outboard" "send" (func $send (param i32 i32 i32 i32) (result i32)))
  (import "outboard" "enqueue" (func $enqueue (param i32 i32 i32) (result i32)))
  (import "outboard" "kv_get" (func $kv_get (param i32 i32 i32 i32) (result i32)))
  (import "outboard" "kv_put" (func $kv_put (param i32 i32 i32 i32) (result i32)))
  (import "outboard" "log" (func $log (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "ob_abi") (result i32) i32.const 1)
"#;

/// A module of `IMPORTS` and `body` (which defines `ob_message`).
fn module(body: &str) -> Vec<u8> {
    wat::parse_str(format!("(module {IMPORTS} {body})")).expect("test module parses")
}

/// Echoes a request; `call` counts invocations in memory; a request of
/// `trap` hits unreachable.
const ECHO: &str = r#"
  (global $calls (mut i32) (i32.const 0))
  (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (drop (call $input_read (i32.const 0) (i32.const 1024) (local.get $len)))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 0x74)) (then unreachable))
    (if (i32.eq (local.get $kind) (i32.const 3))
      (then (drop (call $reply (i32.const 1024) (local.get $len)))))
    (i32.const 0))
"#;

fn from() -> Addr {
    Addr { host: "10.0.0.1:7373".parse().unwrap(), mailbox: 9 }
}

fn request(data: &[u8]) -> Input<'_> {
    Input::Message { kind: MessageKind::Request, from: from(), data }
}

fn load(rt: &Runtime, wasm: &[u8], limits: Limits, io: &mut TestIo) -> Handler {
    Handler::load(rt, "t", wasm, Attach::Mailbox, limits, io).expect("loads")
}

#[test]
fn a_request_is_echoed_and_the_instance_lives_across_invocations() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let mut h = load(&rt, &module(ECHO), Limits::default(), &mut io);
    for i in 0..100u32 {
        let msg = format!("hello {i}");
        let r = h.invoke(&mut io, request(msg.as_bytes()));
        assert_eq!(r.outcome, Outcome::Returned(0));
        assert!(r.replied);
        assert_eq!(io.replies.last().unwrap(), msg.as_bytes());
    }
    let r = h.invoke(&mut io, Input::Message { kind: MessageKind::Datagram, from: from(), data: b"d" });
    assert_eq!(r, outboard_handler::Invoked { outcome: Outcome::Returned(0), replied: false });
    assert_eq!(h.stats().instances, 1);
    assert_eq!(h.stats().invocations, 101);
}

#[test]
fn an_infinite_loop_is_trapped_at_its_deadline_and_the_next_message_gets_a_fresh_instance() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let spin = r#"
      (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
        (if (i32.eq (local.get $len) (i32.const 4)) (then (loop $l (br $l))))
        (drop (call $reply (i32.const 0) (i32.const 0)))
        (i32.const 0))
    "#;
    let limits = Limits { deadline: Duration::from_millis(20), ..Limits::default() };
    let mut h = load(&rt, &module(spin), limits, &mut io);
    let t = Instant::now();
    let r = h.invoke(&mut io, request(b"spin"));
    let took = t.elapsed();
    assert_eq!(r.outcome, Outcome::Fault(Fault::Overrun));
    assert!(!r.replied);
    assert!(took >= Duration::from_millis(15) && took < Duration::from_millis(500), "trapped after {took:?}");
    let r = h.invoke(&mut io, request(b"ok"));
    assert_eq!(r.outcome, Outcome::Returned(0));
    assert!(r.replied);
    let s = h.stats();
    assert_eq!((s.overruns, s.instances), (1, 2));
}

#[test]
fn memory_growth_is_refused_at_the_cap_and_counted() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let hog = r#"
      (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
        (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
        (i32.store (i32.const 0) (memory.size))
        (drop (call $reply (i32.const 0) (i32.const 4)))
        (i32.const 0))
    "#;
    let limits = Limits { memory: 1 << 20, ..Limits::default() };
    let mut h = load(&rt, &module(hog), limits, &mut io);
    let r = h.invoke(&mut io, request(b""));
    assert_eq!(r.outcome, Outcome::Returned(0));
    assert_eq!(io.replies[0], 16u32.to_le_bytes(), "1 MiB is 16 pages");
    assert_eq!(h.stats().grow_refused, 1);
    // A module that asks for more than its cap at the start is refused at load.
    let big = wat::parse_str(r#"(module (memory (export "memory") 100) (func (export "ob_abi") (result i32) i32.const 1)
        (func (export "ob_message") (param i32 i32) (result i32) i32.const 0))"#).unwrap();
    match Handler::load(&rt, "big", &big, Attach::Mailbox, limits, &mut io) {
        Err(LoadError::Init(m)) => assert!(m.contains("no instance"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a module over its memory cap loaded"),
    }
}

#[test]
fn out_of_bounds_accesses_trap_and_bad_host_arguments_are_refused() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let oob = r#"
      (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
        (if (i32.eq (local.get $kind) (i32.const 1)) (then (drop (i32.load (i32.const 0xfffffff0)))))
        ;; a reply from beyond the memory, a send to a garbage address, an enqueue to nobody
        (i32.store (i32.const 2000) (call $reply (i32.const 65530) (i32.const 100)))
        (i32.store (i32.const 2004) (call $send (i32.const 0) (i32.const 0) (i32.const 8) (i32.const 0)))
        (i32.store (i32.const 2008) (call $enqueue (i32.const 7) (i32.const 0) (i32.const 8)))
        (i32.store (i32.const 2012) (call $input_read (i32.const 0) (i32.const -4) (i32.const 8)))
        (drop (call $reply (i32.const 2000) (i32.const 16)))
        (i32.const 0))
    "#;
    let mut h = load(&rt, &module(oob), Limits::default(), &mut io);
    let r = h.invoke(&mut io, Input::Message { kind: MessageKind::Datagram, from: from(), data: b"x" });
    assert_eq!(r.outcome, Outcome::Fault(Fault::OutOfBounds));
    let r = h.invoke(&mut io, request(b"12345678"));
    assert_eq!(r.outcome, Outcome::Returned(0));
    let codes: Vec<i32> = io.replies[0].chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(codes, vec![-14, -22, -2, -14], "EFAULT, EINVAL (address family 0), ENOENT, EFAULT");
    assert!(io.sent.is_empty());
    assert_eq!(h.stats().bad_args, 2);
}

#[test]
fn invalid_modules_and_modules_off_the_abi_are_refused_with_a_reason() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let l = Limits::default();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"\0asm\x01\0\0\0garbage".to_vec(), "not a valid module"),
        (b"hello".to_vec(), "not a valid module"),
        (wat::parse_str(r#"(module (func (export "ob_abi") (result i32) i32.const 1))"#).unwrap(), "no memory"),
        (wat::parse_str(r#"(module (memory (export "memory") 1))"#).unwrap(), "ob_abi"),
        (wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "ob_abi") (result i32) i32.const 1))"#).unwrap(), "ob_message"),
        (wat::parse_str(r#"(module (import "env" "system" (func (param i32))) (memory (export "memory") 1) (func (export "ob_abi") (result i32) i32.const 1)
            (func (export "ob_message") (param i32 i32) (result i32) i32.const 0))"#).unwrap(), "env::system"),
        (wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "ob_abi") (result i32) i32.const 2)
            (func (export "ob_message") (param i32 i32) (result i32) i32.const 0))"#).unwrap(), "ABI version 1"),
        (wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "ob_abi") (result i32) i32.const 1)
            (func (export "ob_message") (param i64) (result i32) i32.const 0))"#).unwrap(), "ob_message"),
        (wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "ob_abi") (result i32) i32.const 1)
            (func (export "ob_init") (result i32) unreachable)
            (func (export "ob_message") (param i32 i32) (result i32) i32.const 0))"#).unwrap(), "ob_init"),
    ];
    for (wasm, why) in cases {
        match Handler::load(&rt, "bad", &wasm, Attach::Mailbox, l, &mut io) {
            Ok(_) => panic!("loaded a module that should be refused for {why}"),
            Err(e) => assert!(e.to_string().contains(why), "{e} (wanted {why})"),
        }
    }
    let bad = Limits { memory: 0, ..l };
    assert!(matches!(Handler::load(&rt, "x", &module(ECHO), Attach::Mailbox, bad, &mut io), Err(LoadError::Limits(_))));
}

#[test]
fn repeated_faults_disable_the_handler_and_its_key_value_store_outlives_instances() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let kv = r#"
      (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
        (drop (call $input_read (i32.const 0) (i32.const 100) (local.get $len)))
        (if (i32.eq (i32.load8_u (i32.const 100)) (i32.const 0x74)) (then unreachable))
        ;; put "k" = input, then reply with what is stored
        (i32.store8 (i32.const 0) (i32.const 0x6b))
        (drop (call $kv_put (i32.const 0) (i32.const 1) (i32.const 100) (local.get $len)))
        (drop (call $reply (i32.const 200) (call $kv_get (i32.const 0) (i32.const 1) (i32.const 200) (i32.const 64))))
        (i32.const 0))
    "#;
    let limits = Limits { max_faults: 3, ..Limits::default() };
    let mut h = load(&rt, &module(kv), limits, &mut io);
    assert!(h.invoke(&mut io, request(b"first")).replied);
    for _ in 0..2 {
        assert_eq!(h.invoke(&mut io, request(b"trap")).outcome, Outcome::Fault(Fault::Trap));
    }
    assert!(h.invoke(&mut io, request(b"second")).replied, "two faults, then a good call: the count starts again");
    assert_eq!(io.replies.last().unwrap(), b"second");
    for _ in 0..3 {
        assert_eq!(h.invoke(&mut io, request(b"trap")).outcome, Outcome::Fault(Fault::Trap));
    }
    assert_eq!(h.invoke(&mut io, request(b"third")).outcome, Outcome::Disabled);
    let why = h.disabled().expect("disabled").to_string();
    assert!(why.contains("3 faults in a row") && why.contains("trap"), "{why}");
    assert_eq!(h.info("mailbox=5".into()).kv_keys, 1);
    h.enable();
    let r = h.invoke(&mut io, request(b"x"));
    assert!(r.replied);
    assert_eq!(io.replies.last().unwrap(), b"x");
    assert_eq!(h.stats().traps, 5);
}

#[test]
fn a_replacement_keeps_the_key_value_store_and_logs_are_rate_limited() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let logger = r#"
      (data (i32.const 0) "hello from a handler")
      (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
        (drop (call $kv_put (i32.const 0) (i32.const 5) (i32.const 0) (i32.const 5)))
        (call $log (i32.const 0) (i32.const 20)))
    "#;
    let mut h = load(&rt, &module(logger), Limits::default(), &mut io);
    let mut dropped = 0;
    for _ in 0..50 {
        if h.invoke(&mut io, Input::Message { kind: MessageKind::Datagram, from: from(), data: b"" }).outcome == Outcome::Returned(-11) {
            dropped += 1;
        }
    }
    assert_eq!((io.logs.len(), dropped), (20, 30), "a burst of 20, then none within the same instant");
    io.now = 1_000_000_000;
    h.invoke(&mut io, Input::Message { kind: MessageKind::Datagram, from: from(), data: b"" });
    assert_eq!(io.logs.len(), 21);
    let h2 = Handler::replace(&rt, &mut h, &module(ECHO), Limits::default(), &mut io).unwrap();
    assert_eq!(h2.info(String::new()).kv_keys, 1);
}

#[test]
fn invocation_is_cheap() {
    let rt = Runtime::new(8).unwrap();
    let mut io = TestIo::default();
    let empty = r#"(func (export "ob_message") (param i32 i32) (result i32) i32.const 0)"#;
    let mut h = load(&rt, &module(empty), Limits::default(), &mut io);
    let n = 200_000;
    let t = Instant::now();
    for _ in 0..n {
        h.invoke(&mut io, Input::Message { kind: MessageKind::Datagram, from: from(), data: b"" });
    }
    let per = t.elapsed() / n;
    eprintln!("empty invocation: {per:?}");
    // Not a benchmark (that is `outboard bench handlers`): a bound that catches a compile per call.
    assert!(per < Duration::from_micros(20), "{per:?} per invocation");
}
