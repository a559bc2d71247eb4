//! The message protocols on an engine: an `outboard_msg::Endpoint` on a UDP
//! port of shard 0's stack (the port is bound there only, so steering brings
//! every frame of it to shard 0), as a [`ShardApp`].
//!
//! Each turn it hands the endpoint what arrived on the port, fires its
//! timers, serves the built-in mailboxes, drives the client job (the
//! `outboard msg` command's calls or messages) and sends what the endpoint
//! produced. The built-in mailboxes, bound when the service starts:
//!
//! - `echo` (mailbox 1): answers every call with the request's bytes, and
//!   drops datagrams and messages after counting them;
//! - `sink` (mailbox 2): takes reliable messages and datagrams, hashing each
//!   sender's messages in order (SHA-256), and answers a call with that
//!   sender's count and digest so far (8 bytes big-endian count, then 32), so
//!   a sender can check that every byte arrived once and in order; a call
//!   whose request is `reset` starts that sender's count and digest afresh
//!   (a new sender may have the address and mailbox number of an old one).

mod boards;
pub mod handlers;
mod job;

pub use boards::{bind_errno, BoardNote, BoardRef, Route};
pub use job::{JobKind, JobPlan, JobReport, JobState, Target};

use crate::app::{AppCx, ShardApp};
use crate::stat::Snapshot;
use outboard_msg::{Config, DeliveryKind, Endpoint, Event, MailboxAddr, MailboxInfo, Stats};
use outboard_stack::{ConnId, Stack, StackError, UdpId};
use outboard_time::Instant;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The built-in mailboxes.
pub const ECHO_MAILBOX: u32 = 1;
pub const SINK_MAILBOX: u32 = 2;
/// The request that starts a sender's count and digest at the sink afresh.
pub const SINK_RESET: &[u8] = b"reset";

/// `--messages`: which port, and the protocol's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageSettings {
    pub port: u16,
    pub config: Config,
    /// Mailbox handlers loaded at start (`--handler`).
    pub handlers: Vec<handlers::HandlerSettings>,
}

impl MessageSettings {
    /// The protocol's defaults on `port`, no handlers.
    pub fn new(port: u16) -> MessageSettings {
        MessageSettings { port, config: Config::default(), handlers: Vec::new() }
    }
}

/// One handler as `outboard stat` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct HandlerRow {
    #[serde(flatten)]
    pub info: outboard_handler::HandlerInfo,
    /// Requests it did not answer, answered as failed.
    pub failed_answers: u64,
}

/// What `outboard stat` shows of the message service.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MessageSnapshot {
    pub port: u16,
    pub session: u32,
    pub stats: Stats,
    pub mailboxes: Vec<MailboxInfo>,
    /// Calls answered by `echo`; bytes and messages taken by `sink`.
    pub echo_calls: u64,
    pub sink_messages: u64,
    pub sink_bytes: u64,
    pub udp_send_refused: u64,
    pub handlers: Vec<HandlerRow>,
}

pub struct MessageService {
    ep: Endpoint,
    udp: UdpId,
    port: u16,
    buf: Vec<u8>,
    /// The sink's running digest per sender.
    sink: HashMap<MailboxAddr, (u64, Sha256)>,
    echo_calls: u64,
    sink_messages: u64,
    sink_bytes: u64,
    udp_send_refused: u64,
    job: Option<job::Job>,
    /// Board mailboxes, calls, messages and lookups, and the notes for boards.
    routes: boards::BoardRoutes,
    /// The engine's message address.
    local: std::net::SocketAddr,
    handlers: handlers::Handlers,
}

/// The service as shard 0's apps share it: the `MessageApp` drives the
/// protocol, the board host (`host::Host`) serves board mailboxes through
/// it. One thread uses both, so the lock is never contended.
pub type SharedMessages = Arc<Mutex<MessageService>>;

/// The message service's `ShardApp`.
pub struct MessageApp(pub SharedMessages);

impl MessageApp {
    pub fn lock(&self) -> MutexGuard<'_, MessageService> {
        // A panic while holding it would have ended the engine.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl MessageService {
    /// Binds `set.port` on `stack` and the built-in mailboxes. `session`
    /// must differ from the last run's (the engine draws it from its secret
    /// and the start time).
    pub fn start(stack: &mut Stack, set: &MessageSettings, session: u32) -> Result<MessageService, StackError> {
        let udp = stack.udp_bind(set.port)?;
        let mut ep = Endpoint::new(set.config.clone(), session);
        for (n, name) in [(ECHO_MAILBOX, "echo"), (SINK_MAILBOX, "sink")] {
            ep.bind(Some(n), Some(name)).expect("a fresh endpoint has every number free");
        }
        Ok(MessageService {
            buf: vec![0; set.config.mtu + 64],
            ep,
            udp,
            port: set.port,
            sink: HashMap::new(),
            echo_calls: 0,
            sink_messages: 0,
            sink_bytes: 0,
            udp_send_refused: 0,
            job: None,
            routes: boards::BoardRoutes::default(),
            local: std::net::SocketAddr::new(stack.config().addr.into(), set.port),
            handlers: handlers::Handlers::default(),
        })
    }

    /// Loads (or replaces, by name) a mailbox handler; the mailbox's number.
    /// `owner`: the board session loading it, None for the operator.
    pub fn load_handler(&mut self, now: Instant, set: &handlers::HandlerSettings, owner: Option<u64>) -> Result<u32, handlers::Refused> {
        self.handlers.load(&mut self.ep, self.local, now, set, owner)
    }

    /// Unloads a handler after running it on what waits in its mailbox (errno ENOENT, EPERM).
    pub fn unload_handler(&mut self, now: Instant, name: &str, owner: Option<u64>) -> Result<(), i32> {
        self.handlers.unload(&mut self.ep, self.local, now, name, owner)
    }

    /// Unloads the handlers board session `owner` loaded.
    /// Whether board session `owner` has handlers loaded.
    pub fn has_handlers_of(&self, owner: u64) -> bool {
        self.handlers.owned_by(owner)
    }

    pub fn unload_handlers_of(&mut self, now: Instant, owner: u64) {
        self.handlers.unload_owned_by(&mut self.ep, self.local, now, owner)
    }

    /// Enables a handler that repeated faults disabled.
    pub fn enable_handler(&mut self, name: &str) -> bool {
        self.handlers.enable(name)
    }

    pub fn handler_rows(&self) -> Vec<HandlerRow> {
        self.handlers.infos().into_iter().map(|(info, failed_answers)| HandlerRow { info, failed_answers }).collect()
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Starts the client job (replacing any earlier one).
    pub fn start_job(&mut self, now: Instant, plan: JobPlan) {
        self.job = Some(job::Job::start(&mut self.ep, now, plan));
    }

    /// No job, or the job has ended (done or failed).
    pub fn job_finished(&self) -> bool {
        self.job.as_ref().is_none_or(job::Job::is_finished)
    }

    pub fn job_report(&self, now: Instant) -> Option<JobReport> {
        self.job.as_ref().map(|j| j.report(now))
    }

    pub fn snapshot(&self) -> MessageSnapshot {
        MessageSnapshot {
            port: self.port,
            session: self.ep.session(),
            stats: self.ep.stats(),
            mailboxes: self.ep.mailboxes(),
            echo_calls: self.echo_calls,
            sink_messages: self.sink_messages,
            sink_bytes: self.sink_bytes,
            udp_send_refused: self.udp_send_refused,
            handlers: self.handler_rows(),
        }
    }

    /// The built-in mailboxes and the handlers; true when a handler ran.
    fn serve_builtins(&mut self, now: Instant) -> bool {
        while let Some(d) = self.ep.recv(now, ECHO_MAILBOX) {
            if let DeliveryKind::Request(token) = d.kind {
                self.echo_calls += 1;
                let _ = self.ep.reply(now, &token, &d.data);
            }
        }
        while let Some(d) = self.ep.recv(now, SINK_MAILBOX) {
            match d.kind {
                DeliveryKind::Request(token) if d.data == SINK_RESET => {
                    self.sink.remove(&d.from);
                    let _ = self.ep.reply(now, &token, &[]);
                }
                DeliveryKind::Request(token) => {
                    let (count, digest) = self.sink.get(&d.from).map_or((0, Sha256::new().finalize()), |(n, h)| (*n, h.clone().finalize()));
                    let mut answer = count.to_be_bytes().to_vec();
                    answer.extend_from_slice(&digest);
                    let _ = self.ep.reply(now, &token, &answer);
                }
                DeliveryKind::Message | DeliveryKind::Datagram => {
                    self.sink_messages += 1;
                    self.sink_bytes += d.data.len() as u64;
                    let e = self.sink.entry(d.from).or_insert_with(|| (0, Sha256::new()));
                    e.0 += d.data.len() as u64;
                    e.1.update(&d.data);
                }
            }
        }
        self.handlers.serve(&mut self.ep, self.local, now)
    }
}

impl MessageService {
    /// One turn: what arrived on the port, timers, the built-in mailboxes,
    /// events (boards' to their notes, the rest to the job), then what to send.
    fn turn(&mut self, cx: &mut AppCx<'_>) -> bool {
        let now = cx.now;
        let mut work = false;
        while let Ok((n, src)) = cx.stack.udp_recv_from(self.udp, &mut self.buf) {
            self.ep.handle_datagram(now, src, &self.buf[..n]);
            work = true;
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
            work = true;
        }
        work |= self.serve_builtins(now);
        while let Some(e) = self.ep.poll_event() {
            if self.route(&e) {
                work = true;
                continue;
            }
            if let Some(j) = self.job.as_mut() {
                j.on_event(now, &e);
            }
            if let Event::Readable { .. } = e {
                work = true;
            }
        }
        if let Some(j) = self.job.as_mut() {
            work |= j.drive(&mut self.ep, now);
        }
        work |= self.serve_builtins(now);
        work | self.transmit(cx.stack, now)
    }

    /// Sends what the endpoint produced (the board host calls it too, so a
    /// board's message leaves in the turn it was sent).
    pub fn transmit(&mut self, stack: &mut Stack, now: Instant) -> bool {
        let mut work = false;
        while let Some((dst, n)) = self.ep.poll_transmit(&mut self.buf) {
            work = true;
            if stack.udp_send_to(now, self.udp, dst, &self.buf[..n]).is_err() {
                // The stack's queue is full (or ARP still resolving): the protocol recovers it as loss.
                self.udp_send_refused += 1;
            }
        }
        work
    }
}

impl ShardApp for MessageApp {
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool {
        self.lock().turn(cx)
    }
    fn on_ready(&mut self, _cx: &mut AppCx<'_>, _conn: ConnId, _tag: u64) {}
    fn owner_label(&self, _tag: u64) -> String {
        String::new()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.lock().ep.poll_timeout()
    }
    fn report(&self, snap: &mut Snapshot) {
        snap.messages = Some(self.lock().snapshot());
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
