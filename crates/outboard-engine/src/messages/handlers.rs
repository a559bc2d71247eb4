//! Mailbox handlers: WebAssembly modules (docs/HANDLERS.md) run as the
//! reader upcall of a mailbox of the message service, on shard 0, inside its
//! turn. Each message taken from the mailbox runs the handler once; a
//! request it did not answer (it returned an error, trapped or ran past its
//! deadline) is answered as failed, so the caller's call ends at once and
//! ran at most once. A disabled handler takes nothing from its mailbox:
//! messages and requests wait there, and the mailbox's budget holds senders
//! back, until it is replaced, enabled or unloaded.

use crate::log::{self, Level};
use outboard_handler::{Addr, Attach, Handler, HandlerInfo, HostIo, Input, Limits, LoadError, MessageKind, Outcome, Runtime};
use outboard_msg::{CallToken, DeliveryKind, Endpoint, MailboxAddr, SendError};
use outboard_time::Instant;
use std::net::SocketAddr;

/// Mailbox handlers one engine may hold.
pub const MAX_HANDLERS: usize = 32;
/// Messages one handler takes per turn: the rest wait for the next turn, so
/// a busy handler cannot keep the shard from its other work.
const BATCH: usize = 64;

/// Where `--handler NAME=FILE:mailbox=M` attaches a module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MailboxSpec {
    Number(u32),
    Name(String),
}

/// One handler to load when the engine starts (or at runtime).
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerSettings {
    pub name: String,
    /// Where the module came from (for `stat` and messages).
    pub source: String,
    pub wasm: std::sync::Arc<Vec<u8>>,
    pub mailbox: MailboxSpec,
    pub limits: Limits,
}

/// Why a load or unload was refused: the errno a board gets and the reason
/// the shell and the log get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub errno: i32,
    pub why: String,
}

impl Refused {
    fn new(errno: i32, why: String) -> Refused {
        Refused { errno, why }
    }
}

/// A loaded mailbox handler.
struct Loaded {
    /// The board session that loaded it (None: the operator, by flag, file or shell).
    owner: Option<u64>,
    /// The handler's name (kept apart so an invocation can lend it).
    name: String,
    mailbox: u32,
    handler: Handler,
    source: String,
    /// Requests answered as failed.
    failed_answers: u64,
    /// Faults logged (the first few and each disabling).
    faults_logged: u64,
}

/// The service's handlers and their runtime (made at the first load).
#[derive(Default)]
pub struct Handlers {
    runtime: Option<std::sync::Arc<Runtime>>,
    loaded: Vec<Loaded>,
}

/// The engine's side of a handler's host calls, for one invocation.
struct Io<'a> {
    ep: &'a mut Endpoint,
    now: Instant,
    token: Option<CallToken>,
    /// The handler's mailbox, as seen from the network.
    me: MailboxAddr,
    name: &'a str,
}

fn send_errno(e: SendError) -> i32 {
    match e {
        SendError::TooBig => libc::EMSGSIZE,
        SendError::QueueFull => libc::EAGAIN,
        SendError::NoMailbox => libc::ENOENT,
        SendError::UnknownCall => libc::EINVAL,
    }
}

impl HostIo for Io<'_> {
    fn reply(&mut self, data: &[u8]) -> Result<(), i32> {
        let t = self.token.as_ref().ok_or(libc::EINVAL)?;
        self.ep.reply(self.now, t, data).map_err(send_errno)
    }
    fn send(&mut self, to: Addr, data: &[u8], reliable: bool) -> Result<(), i32> {
        let to = MailboxAddr::new(to.host, to.mailbox);
        if reliable {
            self.ep.send_message(self.now, self.me.mailbox, to, data).map(|_| ()).map_err(send_errno)
        } else {
            self.ep.send_datagram(self.now, self.me.mailbox, to, data).map_err(send_errno)
        }
    }
    fn enqueue(&mut self, mailbox: u32, data: &[u8]) -> Result<(), i32> {
        self.ep.enqueue_local(self.me, mailbox, data).map_err(|e| match e {
            SendError::QueueFull => libc::ENOSPC,
            e => send_errno(e),
        })
    }
    fn tcp_write(&mut self, _conn: u32, _data: &[u8]) -> Result<usize, i32> {
        Err(libc::ENOTCONN)
    }
    fn tcp_close(&mut self, _conn: u32) -> Result<(), i32> {
        Err(libc::ENOTCONN)
    }
    fn now_ns(&self) -> u64 {
        self.now.as_nanos()
    }
    fn log(&mut self, line: &str) {
        log::event(Level::Info, "handler_log", &[("handler", &self.name), ("line", &line)]);
    }
}

impl Handlers {
    fn runtime(&mut self) -> Result<&Runtime, String> {
        if self.runtime.is_none() {
            self.runtime = Some(Runtime::shared()?);
        }
        Ok(self.runtime.as_ref().expect("made above"))
    }

    /// Loads `set` on a mailbox of `ep` (bound for it: a number, or a name
    /// with a free number), or replaces the handler of that name (keeping its
    /// mailbox and key-value store; messages waiting stay queued for the new one).
    /// `owner`: the board session loading it (it may replace only its own
    /// handlers), or None for the operator (who may replace any).
    pub fn load(&mut self, ep: &mut Endpoint, local: SocketAddr, now: Instant, set: &HandlerSettings, owner: Option<u64>) -> Result<u32, Refused> {
        let refuse = |e: LoadError| Refused::new(libc::EINVAL, format!("handler {} ({}): {e}", set.name, set.source));
        if let Some(i) = self.loaded.iter().position(|l| l.handler.name() == set.name) {
            if owner.is_some() && self.loaded[i].owner != owner {
                return Err(Refused::new(libc::EPERM, format!("handler {}: loaded by another board or the operator", set.name)));
            }
            let mailbox = self.loaded[i].mailbox;
            self.runtime().map_err(|e| Refused::new(libc::ENOMEM, e))?;
            let rt = self.runtime.as_ref().expect("made above");
            let old = &mut self.loaded[i];
            let mut io = Io { ep, now, token: None, me: MailboxAddr::new(local, mailbox), name: &set.name };
            let new = Handler::replace(rt, &mut old.handler, &set.wasm, set.limits, &mut io).map_err(refuse)?;
            old.handler = new;
            old.source = set.source.clone();
            log::event(Level::Info, "handler_replaced", &[("handler", &set.name), ("mailbox", &mailbox), ("module", &set.source)]);
            return Ok(mailbox);
        }
        if self.loaded.len() >= MAX_HANDLERS {
            return Err(Refused::new(libc::ENOSPC, format!("handler {}: this engine holds at most {MAX_HANDLERS} handlers", set.name)));
        }
        let (number, name) = match &set.mailbox {
            MailboxSpec::Number(n) => (Some(*n), None),
            MailboxSpec::Name(s) => (None, Some(s.as_str())),
        };
        let mailbox = ep
            .bind(number, name)
            .map_err(|e| Refused::new(libc::EADDRINUSE, format!("handler {}: mailbox {:?}: {e}", set.name, set.mailbox)))?;
        let rt = match self.runtime() {
            Ok(rt) => rt,
            Err(e) => {
                ep.unbind(mailbox);
                return Err(Refused::new(libc::ENOMEM, e));
            }
        };
        let mut io = Io { ep, now, token: None, me: MailboxAddr::new(local, mailbox), name: &set.name };
        match Handler::load(rt, &set.name, &set.wasm, Attach::Mailbox, set.limits, &mut io) {
            Ok(handler) => {
                self.loaded.push(Loaded { owner, name: set.name.clone(), mailbox, handler, source: set.source.clone(), failed_answers: 0, faults_logged: 0 });
                log::event(Level::Info, "handler_loaded", &[("handler", &set.name), ("mailbox", &mailbox), ("module", &set.source)]);
                Ok(mailbox)
            }
            Err(e) => {
                ep.unbind(mailbox);
                Err(refuse(e))
            }
        }
    }

    /// Unloads handler `name`: what already waits in its mailbox is run
    /// through it first (a message acknowledged to its sender is not lost),
    /// then the mailbox is unbound. False when there is no such handler.
    /// `owner` as for [`Handlers::load`]: ENOENT or EPERM.
    pub fn unload(&mut self, ep: &mut Endpoint, local: SocketAddr, now: Instant, name: &str, owner: Option<u64>) -> Result<(), i32> {
        let i = self.loaded.iter().position(|l| l.handler.name() == name).ok_or(libc::ENOENT)?;
        if owner.is_some() && self.loaded[i].owner != owner {
            return Err(libc::EPERM);
        }
        let mut l = self.loaded.remove(i);
        l.handler.enable();
        while serve_one(&mut l, ep, local, now) {}
        ep.unbind(l.mailbox);
        log::event(Level::Info, "handler_unloaded", &[("handler", &name), ("mailbox", &l.mailbox)]);
        Ok(())
    }

    /// Whether board session `owner` loaded a handler that is still loaded.
    pub fn owned_by(&self, owner: u64) -> bool {
        self.loaded.iter().any(|l| l.owner == Some(owner))
    }

    /// Unloads every handler board session `owner` loaded (it detached or died).
    pub fn unload_owned_by(&mut self, ep: &mut Endpoint, local: SocketAddr, now: Instant, owner: u64) {
        let names: Vec<String> = self.loaded.iter().filter(|l| l.owner == Some(owner)).map(|l| l.handler.name().to_string()).collect();
        for n in names {
            let _ = self.unload(ep, local, now, &n, Some(owner));
        }
    }

    /// Enables a disabled handler again.
    pub fn enable(&mut self, name: &str) -> bool {
        match self.loaded.iter_mut().find(|l| l.handler.name() == name) {
            Some(l) => {
                l.handler.enable();
                true
            }
            None => false,
        }
    }

    /// Runs every enabled handler on what waits in its mailbox (at most
    /// [`BATCH`] each). True when any ran.
    pub fn serve(&mut self, ep: &mut Endpoint, local: SocketAddr, now: Instant) -> bool {
        let mut work = false;
        for l in &mut self.loaded {
            for _ in 0..BATCH {
                if l.handler.disabled().is_some() || !serve_one(l, ep, local, now) {
                    break;
                }
                work = true;
            }
        }
        work
    }

    pub fn infos(&self) -> Vec<(HandlerInfo, u64)> {
        self.loaded.iter().map(|l| {
            let mut i = l.handler.info(format!("mailbox={}", l.mailbox));
            i.attached = format!("mailbox={} module={}", l.mailbox, l.source);
            (i, l.failed_answers)
        }).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.loaded.is_empty()
    }
}

/// Takes one message from `l`'s mailbox and runs the handler on it. False
/// when the mailbox was empty.
fn serve_one(l: &mut Loaded, ep: &mut Endpoint, local: SocketAddr, now: Instant) -> bool {
    let Some(d) = ep.recv(now, l.mailbox) else { return false };
    let (kind, token) = match d.kind {
        DeliveryKind::Datagram => (MessageKind::Datagram, None),
        DeliveryKind::Message => (MessageKind::Message, None),
        DeliveryKind::Request(t) => (MessageKind::Request, Some(t)),
    };
    let name = &l.name;
    let mut io = Io { ep, now, token, me: MailboxAddr::new(local, l.mailbox), name };
    let from = Addr { host: d.from.host, mailbox: d.from.mailbox };
    let r = l.handler.invoke(&mut io, Input::Message { kind, from, data: &d.data });
    if let (Some(t), false) = (token, r.replied) {
        if ep.reply_failed(now, &t).is_ok() {
            l.failed_answers += 1;
        }
    }
    if let Outcome::Fault(f) = r.outcome {
        let disabled = l.handler.disabled();
        if l.faults_logged < 8 || disabled.is_some() {
            l.faults_logged += 1;
            log::event(
                Level::Warn,
                "handler_fault",
                &[("handler", &name), ("fault", &f.name()), ("disabled", &disabled.unwrap_or("no"))],
            );
        }
    }
    true
}

/// `outboard handler load`'s request: the module is read by the engine
/// from `path` (an absolute path the engine can read).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LoadRequest {
    pub name: String,
    pub path: String,
    pub mailbox: MailboxSpec,
    pub limits: Limits,
}

/// Answers a control request `handler load JSON`, `handler unload NAME`,
/// `handler enable NAME` or `handler list` (JSON, `{"error": ...}` on failure).
pub fn control(svc: &mut super::MessageService, now: Instant, request: &str) -> String {
    let err = |m: String| serde_json::json!({ "error": m }).to_string();
    let (verb, arg) = request.trim().split_once(' ').unwrap_or((request.trim(), ""));
    match verb {
        "list" => serde_json::json!({ "handlers": svc.handler_rows() }).to_string(),
        "load" => {
            let req: LoadRequest = match serde_json::from_str(arg) {
                Ok(r) => r,
                Err(e) => return err(format!("handler load: bad request: {e}")),
            };
            let wasm = match std::fs::read(&req.path) {
                Ok(w) => w,
                Err(e) => return err(format!("handler {}: the engine cannot read {}: {e}", req.name, req.path)),
            };
            let set = HandlerSettings { name: req.name.clone(), source: req.path, wasm: std::sync::Arc::new(wasm), mailbox: req.mailbox, limits: req.limits };
            match svc.load_handler(now, &set, None) {
                Ok(mailbox) => serde_json::json!({ "loaded": req.name, "mailbox": mailbox }).to_string(),
                Err(e) => err(e.why),
            }
        }
        "unload" => match svc.unload_handler(now, arg, None) {
            Ok(()) => serde_json::json!({ "unloaded": arg }).to_string(),
            Err(_) => err(format!("no handler named {arg:?} on this engine")),
        },
        "enable" if svc.enable_handler(arg) => serde_json::json!({ "enabled": arg }).to_string(),
        "enable" => err(format!("no handler named {arg:?} on this engine")),
        other => err(format!("unknown handler request {other:?}: load, unload, enable or list")),
    }
}
