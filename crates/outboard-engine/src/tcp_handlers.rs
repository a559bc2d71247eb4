//! TCP-listener handlers (docs/HANDLERS.md): a WebAssembly module serves a
//! TCP port entirely on the engine. Every shard listens on the port and runs
//! an instance of its own (a connection stays on the shard its 4-tuple
//! hashes to), so a handler's memory and key-value store are per shard.
//!
//! Each accepted connection gets a number (`conn`, unique on its shard while
//! it lives): `ob_tcp_open(conn)`, then `ob_tcp_data(conn, len)` for what
//! arrives (at most what the connection's send buffer has room for, so a
//! handler that answers each request is held back by a slow reader instead
//! of overflowing), then `ob_tcp_close(conn)` once the peer has closed (or the
//! connection was reset), after which the engine closes its side. A non-zero
//! `ob_tcp_open`, a negative `ob_tcp_data` or a fault resets the connection.

use crate::app::{AppCx, ShardApp};
use crate::log::{self, Level};
use outboard_handler::{Addr, Attach, Handler, HandlerInfo, HostIo, Input, Limits, Outcome, Runtime};
use outboard_stack::{ConnId, ListenerId, Stack};
use outboard_tcp::Event;
use outboard_time::Instant;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// `--handler NAME=FILE.wasm:tcp=PORT`.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpHandlerSettings {
    pub name: String,
    pub source: String,
    pub wasm: Arc<Vec<u8>>,
    pub port: u16,
    pub limits: Limits,
}

/// Accept backlog of a handler's listener.
const BACKLOG: usize = 1024;
/// Bytes handed to a handler per invocation at most.
const CHUNK: usize = 16 << 10;

/// What `outboard stat` shows of one TCP handler on one shard.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct TcpHandlerRow {
    #[serde(flatten)]
    pub info: HandlerInfo,
    pub shard: u32,
    pub accepted: u64,
    pub active: u64,
    /// Connections reset for the handler's refusal or fault.
    pub reset: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

struct One {
    /// The handler's name (kept apart so an invocation can lend it).
    name: String,
    port: u16,
    source: String,
    listener: ListenerId,
    handler: Handler,
    /// The handler's connection numbers.
    conns: HashMap<u32, ConnId>,
    numbers: HashMap<ConnId, u32>,
    next: u32,
    row: TcpHandlerRow,
}

/// A shard's TCP handlers (a `ShardApp`).
pub struct TcpHandlers {
    list: Vec<One>,
    scratch: Vec<u8>,
    shard: u32,
}

/// The engine's side of a TCP handler's host calls, for one invocation.
struct TcpIo<'a> {
    stack: &'a mut Stack,
    conns: &'a HashMap<u32, ConnId>,
    now: Instant,
    name: &'a str,
    written: u64,
}

impl HostIo for TcpIo<'_> {
    fn reply(&mut self, _data: &[u8]) -> Result<(), i32> {
        Err(libc::EINVAL)
    }
    fn send(&mut self, _to: Addr, _data: &[u8], _reliable: bool) -> Result<(), i32> {
        Err(libc::ENOTCONN)
    }
    fn enqueue(&mut self, _mailbox: u32, _data: &[u8]) -> Result<(), i32> {
        Err(libc::ENOTCONN)
    }
    fn tcp_write(&mut self, conn: u32, data: &[u8]) -> Result<usize, i32> {
        let id = *self.conns.get(&conn).ok_or(libc::ENOTCONN)?;
        let c = self.stack.tcp(id).ok_or(libc::ENOTCONN)?;
        let n = c.send(data).map_err(|_| libc::EPIPE)?;
        self.written += n as u64;
        Ok(n)
    }
    fn tcp_close(&mut self, conn: u32) -> Result<(), i32> {
        let id = *self.conns.get(&conn).ok_or(libc::ENOTCONN)?;
        self.stack.tcp(id).ok_or(libc::ENOTCONN)?.close();
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        self.now.as_nanos()
    }
    fn log(&mut self, line: &str) {
        log::event(Level::Info, "handler_log", &[("handler", &self.name), ("line", &line)]);
    }
}

impl TcpHandlers {
    /// Listens on each handler's port on `stack` and loads its module.
    pub fn start(stack: &mut Stack, now: Instant, shard: u32, set: &[TcpHandlerSettings]) -> Result<TcpHandlers, String> {
        let mut list = Vec::new();
        for h in set {
            let rt = Runtime::shared()?;
            let listener = stack.tcp_listen(h.port, BACKLOG).map_err(|e| format!("handler {}: TCP port {}: {e:?}", h.name, h.port))?;
            let empty = HashMap::new();
            let mut io = TcpIo { stack, conns: &empty, now, name: &h.name, written: 0 };
            let handler = Handler::load(&rt, &h.name, &h.wasm, Attach::Tcp, h.limits, &mut io)
                .map_err(|e| format!("handler {} ({}): {e}", h.name, h.source))?;
            if shard == 0 {
                log::event(Level::Info, "handler_loaded", &[("handler", &h.name), ("tcp", &h.port), ("module", &h.source)]);
            }
            list.push(One { name: h.name.clone(), port: h.port, source: h.source.clone(), listener, handler, conns: HashMap::new(), numbers: HashMap::new(), next: 1, row: TcpHandlerRow { shard, ..Default::default() } });
        }
        Ok(TcpHandlers { list, scratch: vec![0; CHUNK], shard })
    }

    fn accept(&mut self, cx: &mut AppCx<'_>) -> bool {
        let mut work = false;
        for i in 0..self.list.len() {
            let l = self.list[i].listener;
            if !cx.stack.tcp_accept_pending(l) || !cx.may_accept() {
                continue;
            }
            while let Some(id) = cx.stack.tcp_accept(l) {
                work = true;
                let one = &mut self.list[i];
                let mut num = one.next;
                while num == 0 || one.conns.contains_key(&num) {
                    num = num.wrapping_add(1);
                }
                one.next = num.wrapping_add(1);
                one.conns.insert(num, id);
                one.numbers.insert(id, num);
                one.row.accepted += 1;
                one.row.active += 1;
                cx.claim(id, i as u64);
                let r = invoke(one, cx.stack, cx.now, Input::TcpOpen { conn: num });
                if !matches!(r, Outcome::Returned(0) | Outcome::NoEntry) {
                    reset(one, cx, id);
                    continue;
                }
                self.serve(cx, i, id);
            }
        }
        work
    }

    fn serve(&mut self, cx: &mut AppCx<'_>, i: usize, id: ConnId) {
        let one = &mut self.list[i];
        let Some(&num) = one.numbers.get(&id) else { return };
        let Some(conn) = cx.stack.tcp(id) else {
            forget(one, cx, id);
            return;
        };
        let mut finished = false;
        let mut peer_closed = false;
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::PeerClosed => peer_closed = true,
                Event::Closed | Event::Reset | Event::TimedOut => finished = true,
                Event::Connected | Event::Readable | Event::Writable => {}
            }
        }
        if !finished {
            while let Some(conn) = cx.stack.tcp(id) {
                let room = conn.send_capacity().min(self.scratch.len());
                if room == 0 {
                    conn.request_writable();
                    break;
                }
                let n = match conn.recv(&mut self.scratch[..room]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                one.row.bytes_in += n as u64;
                let data = &self.scratch[..n];
                let r = invoke(one, cx.stack, cx.now, Input::TcpData { conn: num, data });
                if !matches!(r, Outcome::Returned(v) if v >= 0) {
                    reset(one, cx, id);
                    return;
                }
            }
            let Some(conn) = cx.stack.tcp(id) else { return };
            let drained = conn.recv_available() == 0;
            let done = peer_closed || matches!(conn.state(), outboard_tcp::State::CloseWait | outboard_tcp::State::LastAck | outboard_tcp::State::Closing | outboard_tcp::State::TimeWait);
            if done && drained {
                invoke(one, cx.stack, cx.now, Input::TcpClose { conn: num });
                if let Some(conn) = cx.stack.tcp(id) {
                    conn.close();
                }
                finished = true;
            }
        } else {
            invoke(one, cx.stack, cx.now, Input::TcpClose { conn: num });
        }
        if finished {
            forget(one, cx, id);
        }
    }

    pub fn rows(&self) -> Vec<TcpHandlerRow> {
        self.list
            .iter()
            .map(|o| {
                let mut r = o.row.clone();
                r.info = o.handler.info(format!("tcp={} module={}", o.port, o.source));
                r.shard = self.shard;
                r
            })
            .collect()
    }
}

/// Runs the handler on `input` with the engine's side for its connections.
fn invoke(one: &mut One, stack: &mut Stack, now: Instant, input: Input<'_>) -> Outcome {
    let name = &one.name;
    let mut io = TcpIo { stack, conns: &one.conns, now, name, written: 0 };
    let r = one.handler.invoke(&mut io, input);
    one.row.bytes_out += io.written;
    if let Outcome::Fault(f) = r.outcome {
        log::event(Level::Warn, "handler_fault", &[("handler", &name), ("fault", &f.name()), ("disabled", &one.handler.disabled().unwrap_or("no"))]);
    }
    r.outcome
}

fn reset(one: &mut One, cx: &mut AppCx<'_>, id: ConnId) {
    if let Some(c) = cx.stack.tcp(id) {
        c.abort();
    }
    one.row.reset += 1;
    forget(one, cx, id);
}

fn forget(one: &mut One, cx: &mut AppCx<'_>, id: ConnId) {
    if let Some(num) = one.numbers.remove(&id) {
        one.conns.remove(&num);
        one.row.active = one.row.active.saturating_sub(1);
    }
    cx.stack.tcp_release(id);
    cx.release(id);
}

impl ShardApp for TcpHandlers {
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool {
        self.accept(cx)
    }
    fn on_ready(&mut self, cx: &mut AppCx<'_>, conn: ConnId, tag: u64) {
        if (tag as usize) < self.list.len() {
            self.serve(cx, tag as usize, conn);
        }
    }
    fn owner_label(&self, tag: u64) -> String {
        self.list.get(tag as usize).map_or_else(String::new, |o| format!("handler:{}", o.handler.name()))
    }
    fn report(&self, snap: &mut crate::stat::Snapshot) {
        snap.tcp_handlers = self.rows();
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
