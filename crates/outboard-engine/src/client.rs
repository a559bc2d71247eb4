//! The engine as a TCP client (`outboard fetch`, the bench client): connect
//! to a remote server, send a seeded byte stream of a given length, then
//! half-close and read until the server closes, hashing both directions.
//! Against an echo server the received bytes must equal the sent ones;
//! against a source the receive side alone is measured. Pure logic over a
//! [`Stack`], time passed in.

use crate::app::{AppCx, ShardApp};
use outboard_impair::ByteStream;
use outboard_stack::{ConnId, Stack, StackError};
use outboard_tcp::Event;
use outboard_time::Instant;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;

/// What to do.
#[derive(Debug, Clone)]
pub struct FetchPlan {
    pub remote: SocketAddr,
    /// Bytes to send before half-closing (0: half-close right after connecting
    /// unless `keep_open`).
    pub send_bytes: u64,
    /// Seed of the byte stream sent.
    pub seed: u64,
    /// Stop reading after this many bytes and close (None: read until the server closes).
    pub recv_limit: Option<u64>,
}

/// Where a fetch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchState {
    Connecting,
    Transferring,
    Done,
    Failed,
}

/// The outcome, for `outboard fetch --json`.
#[derive(Debug, Clone, Serialize)]
pub struct FetchReport {
    pub remote: String,
    pub state: FetchState,
    pub error: Option<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub sha256_sent: String,
    pub sha256_received: String,
    /// Seconds from the SYN to the handshake's end.
    pub connect_s: f64,
    /// Seconds from the SYN to the server's close.
    pub total_s: f64,
    pub retransmits: u64,
}

/// One client connection in progress.
#[derive(Debug)]
pub struct Fetch {
    plan: FetchPlan,
    conn: Option<ConnId>,
    state: FetchState,
    error: Option<String>,
    stream: ByteStream,
    sent: u64,
    received: u64,
    sent_hash: Sha256,
    recv_hash: Sha256,
    buf: Vec<u8>,
    started: Instant,
    connected: Option<Instant>,
    finished: Option<Instant>,
    shut: bool,
    retransmits: u64,
}

const CHUNK: usize = 64 * 1024;

impl Fetch {
    /// Opens the connection from `local_port` (0: any ephemeral port).
    pub fn start(stack: &mut Stack, now: Instant, plan: FetchPlan, local_port: u16) -> Fetch {
        let conn = if local_port == 0 {
            stack.tcp_connect(now, plan.remote)
        } else {
            stack.tcp_connect_from(now, local_port, plan.remote)
        };
        let mut f = Fetch {
            stream: ByteStream::new(plan.seed),
            plan,
            conn: None,
            state: FetchState::Connecting,
            error: None,
            sent: 0,
            received: 0,
            sent_hash: Sha256::new(),
            recv_hash: Sha256::new(),
            buf: vec![0; CHUNK],
            started: now,
            connected: None,
            finished: None,
            shut: false,
            retransmits: 0,
        };
        match conn {
            Ok(id) => f.conn = Some(id),
            Err(e) => f.fail(now, format!("connect: {e:?}")),
        }
        f
    }

    pub fn conn(&self) -> Option<ConnId> {
        self.conn
    }

    pub fn state(&self) -> FetchState {
        self.state
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.state, FetchState::Done | FetchState::Failed)
    }

    fn fail(&mut self, now: Instant, why: String) {
        self.state = FetchState::Failed;
        self.error = Some(why);
        self.finished = Some(now);
    }

    /// Moves data; call when the stack reports the connection ready, and
    /// once per shard turn while it is transferring (to refill the send buffer).
    pub fn poll(&mut self, stack: &mut Stack, now: Instant) {
        let Some(id) = self.conn else { return };
        if self.is_finished() {
            return;
        }
        let Some(conn) = stack.tcp(id) else {
            self.fail(now, "connection vanished".into());
            return;
        };
        self.retransmits = conn.stats().retransmits;
        let mut closed = false;
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Connected => {
                    self.connected = Some(now);
                    self.state = FetchState::Transferring;
                }
                Event::Reset => {
                    let why = if self.connected.is_none() { "connection refused" } else { "connection reset by peer" };
                    self.fail(now, why.into());
                    stack.tcp_release(id);
                    return;
                }
                Event::TimedOut => {
                    self.fail(now, "connection timed out".into());
                    stack.tcp_release(id);
                    return;
                }
                Event::Closed => closed = true,
                Event::PeerClosed | Event::Readable | Event::Writable => {}
            }
        }
        if self.state == FetchState::Connecting {
            return;
        }
        // Receive everything there is.
        loop {
            let want = match self.plan.recv_limit {
                Some(l) => (l - self.received).min(self.buf.len() as u64) as usize,
                None => self.buf.len(),
            };
            if want == 0 {
                break;
            }
            match conn.recv(&mut self.buf[..want]) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.recv_hash.update(&self.buf[..n]);
                    self.received += n as u64;
                }
            }
        }
        // Send what fits.
        while self.sent < self.plan.send_bytes {
            let room = conn.send_capacity().min(self.buf.len());
            if room == 0 {
                conn.request_writable();
                break;
            }
            let n = room.min((self.plan.send_bytes - self.sent) as usize);
            self.stream.fill(&mut self.buf[..n]);
            match conn.send(&self.buf[..n]) {
                Ok(m) => {
                    debug_assert_eq!(m, n);
                    self.sent_hash.update(&self.buf[..n]);
                    self.sent += n as u64;
                }
                Err(e) => {
                    self.fail(now, format!("send: {e:?}"));
                    return;
                }
            }
        }
        let recv_done = self.plan.recv_limit.is_some_and(|l| self.received >= l);
        // A download (`recv_limit`) keeps our side open until it has read
        // enough: services such as `source` stop when the client half-closes.
        if self.sent >= self.plan.send_bytes && !self.shut && self.plan.recv_limit.is_none() {
            self.shut = true;
            conn.shutdown_write();
        } else if recv_done && !self.shut {
            self.shut = true;
            conn.close();
        }
        // End of stream: the server's FIN arrived and everything before it was read.
        let eof = conn.recv_available() == 0 && matches!(conn.recv(&mut []), Ok(0));
        if closed || eof || (recv_done && self.shut) {
            if !closed {
                conn.close();
            }
            self.state = FetchState::Done;
            self.finished = Some(now);
            stack.tcp_release(id);
        }
    }

    pub fn report(&self, now: Instant) -> FetchReport {
        let end = self.finished.unwrap_or(now);
        FetchReport {
            remote: self.plan.remote.to_string(),
            state: self.state,
            error: self.error.clone(),
            bytes_sent: self.sent,
            bytes_received: self.received,
            sha256_sent: hex(&self.sent_hash.clone().finalize()),
            sha256_received: hex(&self.recv_hash.clone().finalize()),
            connect_s: self
                .connected
                .map_or(0.0, |c| c.saturating_duration_since(self.started).as_secs_f64()),
            total_s: end.saturating_duration_since(self.started).as_secs_f64(),
            retransmits: self.retransmits,
        }
    }
}

/// The shard's client fetches: one `ShardApp` holding every `Fetch` started
/// on the shard (tag: the fetch's index).
#[derive(Debug, Default)]
pub struct Fetches {
    list: Vec<Fetch>,
}

impl Fetches {
    /// Starts a fetch (from `local_port`, 0: any) and claims its connection.
    pub fn start(&mut self, cx: &mut AppCx<'_>, plan: FetchPlan, local_port: u16) {
        let f = Fetch::start(cx.stack, cx.now, plan, local_port);
        if let Some(c) = f.conn() {
            cx.claim(c, self.list.len() as u64);
        }
        self.list.push(f);
    }
    pub fn list(&self) -> &[Fetch] {
        &self.list
    }
    pub fn all_finished(&self) -> bool {
        self.list.iter().all(Fetch::is_finished)
    }
    fn poll_one(&mut self, cx: &mut AppCx<'_>, i: usize) {
        let f = &mut self.list[i];
        f.poll(cx.stack, cx.now);
        if f.is_finished() {
            if let Some(c) = f.conn() {
                cx.release(c);
            }
        }
    }
}

impl ShardApp for Fetches {
    /// Clients refill their send buffers as ACKs free room.
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool {
        for i in 0..self.list.len() {
            if !self.list[i].is_finished() {
                self.poll_one(cx, i);
            }
        }
        false
    }
    fn on_ready(&mut self, cx: &mut AppCx<'_>, _conn: ConnId, tag: u64) {
        if (tag as usize) < self.list.len() {
            self.poll_one(cx, tag as usize);
        }
    }
    fn owner_label(&self, _tag: u64) -> String {
        "fetch".to_string()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Lowercase hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why `StackError` would stop a fetch before it starts (for messages).
pub fn describe(e: StackError) -> &'static str {
    match e {
        StackError::AddrInUse => "address in use",
        StackError::NoEphemeralPorts => "no ephemeral ports left",
        StackError::NoSuchSocket => "no such socket",
        StackError::MessageTooLong => "message too long",
        StackError::WouldBlock => "would block",
        StackError::Refused => "connection refused",
        StackError::NoRoute => "no route to the destination",
    }
}
