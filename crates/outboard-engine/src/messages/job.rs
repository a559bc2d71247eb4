//! The message service as a client (`outboard msg call|send`, the bench):
//! calls to a mailbox, checking every response, or a stream of reliable
//! messages to the `sink`, checked against the digest the sink reports.

use outboard_impair::{ByteStream, Rng};
use outboard_msg::{CallId, Endpoint, Event, LookupId, MailboxAddr, SendError};
use outboard_time::Instant;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;

/// The mailbox a job talks to: by number, or by a name the engine there is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Number(u32),
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// `count` calls of `size`-byte requests, `outstanding` at a time; each
    /// response must equal its request (the `echo` mailbox).
    Calls { count: u64, size: usize, outstanding: usize },
    /// `bytes` of a seeded stream in reliable messages of `size` bytes, then
    /// a call for the receiver's digest (the `sink` mailbox).
    Messages { bytes: u64, size: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPlan {
    pub host: SocketAddr,
    pub target: Target,
    pub kind: JobKind,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Resolving,
    Running,
    Verifying,
    Done,
    Failed,
}

/// The outcome, for `outboard msg --json`.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    pub target: String,
    pub state: JobState,
    pub error: Option<String>,
    /// Calls answered, or messages acknowledged.
    pub done: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// Calls a second, or bytes a second.
    pub rate: f64,
    /// Call round trips (calls only), microseconds.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Every response equal to its request / the sink's digest equal to what was sent.
    pub verified: bool,
}

#[derive(Debug)]
pub(crate) struct Job {
    plan: JobPlan,
    state: JobState,
    error: Option<String>,
    from: u32,
    to: Option<MailboxAddr>,
    lookup: Option<LookupId>,
    started: Instant,
    finished: Option<Instant>,
    // calls
    issued: u64,
    completed: u64,
    in_flight: HashMap<CallId, (u64, Instant)>,
    latencies_ns: Vec<u64>,
    // messages
    stream: ByteStream,
    pending: Option<Vec<u8>>,
    sent: Sha256,
    sent_bytes: u64,
    messages_sent: u64,
    acked: u64,
    /// The call that starts our count at the sink afresh, before any message.
    reset_call: Option<CallId>,
    reset_done: bool,
    digest_call: Option<CallId>,
}

/// Request `i` of a calls job: its index, then seeded bytes.
fn request(seed: u64, i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    let head = size.min(8);
    v[..head].copy_from_slice(&i.to_be_bytes()[..head]);
    if size > 8 {
        Rng::derive(seed, i).fill_bytes(&mut v[8..]);
    }
    v
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e3
}

impl Job {
    pub fn start(ep: &mut Endpoint, now: Instant, plan: JobPlan) -> Job {
        let mut job = Job {
            state: JobState::Resolving,
            error: None,
            from: 0,
            to: None,
            lookup: None,
            started: now,
            finished: None,
            issued: 0,
            completed: 0,
            in_flight: HashMap::new(),
            latencies_ns: Vec::new(),
            stream: ByteStream::new(plan.seed),
            pending: None,
            sent: Sha256::new(),
            sent_bytes: 0,
            messages_sent: 0,
            acked: 0,
            reset_call: None,
            reset_done: false,
            digest_call: None,
            plan,
        };
        match ep.bind(None, None) {
            Ok(n) => job.from = n,
            Err(e) => job.fail(now, format!("bind: {e}")),
        }
        match &job.plan.target {
            Target::Number(n) => {
                job.to = Some(MailboxAddr::new(job.plan.host, *n));
                job.state = JobState::Running;
            }
            Target::Name(name) => match ep.lookup(now, job.plan.host, name) {
                Ok(l) => job.lookup = Some(l),
                Err(e) => job.fail(now, format!("lookup {name:?}: {e}")),
            },
        }
        job
    }

    fn fail(&mut self, now: Instant, why: String) {
        if self.state != JobState::Failed {
            self.state = JobState::Failed;
            self.error = Some(why);
            self.finished = Some(now);
        }
    }

    fn finish(&mut self, now: Instant) {
        self.state = JobState::Done;
        self.finished = Some(now);
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.state, JobState::Done | JobState::Failed)
    }

    /// Starts what the plan allows now. True if it did something.
    pub fn drive(&mut self, ep: &mut Endpoint, now: Instant) -> bool {
        let (JobState::Running, Some(to)) = (self.state, self.to) else { return false };
        let mut work = false;
        match self.plan.kind {
            JobKind::Calls { count, size, outstanding } => {
                while self.issued < count && self.in_flight.len() < outstanding {
                    match ep.call(now, self.from, to, &request(self.plan.seed, self.issued, size), None) {
                        Ok(c) => {
                            self.in_flight.insert(c, (self.issued, now));
                            self.issued += 1;
                            work = true;
                        }
                        Err(SendError::QueueFull) => break,
                        Err(e) => {
                            self.fail(now, format!("call: {e}"));
                            break;
                        }
                    }
                }
            }
            JobKind::Messages { bytes, size } => {
                if self.reset_call.is_none() {
                    match ep.call(now, self.from, to, super::SINK_RESET, None) {
                        Ok(c) => self.reset_call = Some(c),
                        Err(e) => self.fail(now, format!("reset call: {e}")),
                    }
                    return true;
                }
                if !self.reset_done {
                    return false;
                }
                while self.sent_bytes < bytes {
                    let m = self.pending.take().unwrap_or_else(|| {
                        let mut m = vec![0u8; (bytes - self.sent_bytes).min(size as u64) as usize];
                        self.stream.fill(&mut m);
                        m
                    });
                    match ep.send_message(now, self.from, to, &m) {
                        Ok(_) => {
                            self.sent.update(&m);
                            self.sent_bytes += m.len() as u64;
                            self.messages_sent += 1;
                            work = true;
                        }
                        Err(SendError::QueueFull) => {
                            self.pending = Some(m);
                            break;
                        }
                        Err(e) => {
                            self.fail(now, format!("send: {e}"));
                            break;
                        }
                    }
                }
                if self.sent_bytes == bytes && self.acked == self.messages_sent && self.digest_call.is_none() {
                    // Every message is held by the receiver, in order, ahead of this call in the sink's mailbox.
                    match ep.call(now, self.from, to, b"digest", None) {
                        Ok(c) => {
                            self.digest_call = Some(c);
                            self.state = JobState::Verifying;
                        }
                        Err(e) => self.fail(now, format!("digest call: {e}")),
                    }
                    work = true;
                }
            }
        }
        work
    }

    pub fn on_event(&mut self, now: Instant, e: &Event) {
        if self.is_finished() {
            return;
        }
        match e {
            Event::LookupDone { lookup, result } if Some(*lookup) == self.lookup => match result {
                Ok(a) => {
                    self.to = Some(*a);
                    self.state = JobState::Running;
                }
                Err(err) => self.fail(now, format!("lookup: {err}")),
            },
            Event::CallDone { call, result } if Some(*call) == self.reset_call => match result {
                Ok(_) => self.reset_done = true,
                Err(err) => self.fail(now, format!("reset call: {err}")),
            },
            Event::CallDone { call, result } if Some(*call) == self.digest_call => match result {
                Ok(r) if r.len() == 40 => {
                    let count = u64::from_be_bytes(r[..8].try_into().expect("8 bytes"));
                    if count == self.sent_bytes && r[8..] == self.sent.clone().finalize()[..] {
                        self.finish(now);
                    } else {
                        self.fail(now, format!("the sink holds {count} bytes with another digest than the {} sent", self.sent_bytes));
                    }
                }
                Ok(r) => self.fail(now, format!("the sink answered {} bytes, not a count and digest", r.len())),
                Err(err) => self.fail(now, format!("digest call: {err}")),
            },
            Event::CallDone { call, result } => {
                let Some((i, at)) = self.in_flight.remove(call) else { return };
                let JobKind::Calls { count, size, .. } = self.plan.kind else { return };
                match result {
                    Ok(r) if *r == request(self.plan.seed, i, size) => {
                        self.completed += 1;
                        self.latencies_ns.push(now.saturating_duration_since(at).as_nanos() as u64);
                        if self.completed == count {
                            self.finish(now);
                        }
                    }
                    Ok(r) => self.fail(now, format!("call {i}: the response ({} bytes) is not the request", r.len())),
                    Err(err) => self.fail(now, format!("call {i}: {err}")),
                }
            }
            Event::MessageAcked { .. } => self.acked += 1,
            Event::MessageFailed { message, error } => self.fail(now, format!("message {}: {error}", message.0)),
            _ => {}
        }
    }

    pub fn report(&self, now: Instant) -> JobReport {
        let end = self.finished.unwrap_or(now);
        let elapsed_s = end.saturating_duration_since(self.started).as_secs_f64();
        let mut lat = self.latencies_ns.clone();
        lat.sort_unstable();
        let (done, bytes) = match self.plan.kind {
            JobKind::Calls { size, .. } => (self.completed, self.completed * size as u64 * 2),
            JobKind::Messages { .. } => (self.acked, self.sent_bytes),
        };
        let rate = if elapsed_s > 0.0 {
            match self.plan.kind {
                JobKind::Calls { .. } => done as f64 / elapsed_s,
                JobKind::Messages { .. } => bytes as f64 / elapsed_s,
            }
        } else {
            0.0
        };
        let target = match &self.plan.target {
            Target::Number(n) => format!("{}/{n}", self.plan.host),
            Target::Name(name) => format!("{}/{name}", self.plan.host),
        };
        JobReport {
            target,
            state: self.state,
            error: self.error.clone(),
            done,
            bytes,
            elapsed_s,
            rate,
            p50_us: percentile(&lat, 0.5),
            p99_us: percentile(&lat, 0.99),
            max_us: lat.last().map_or(0.0, |&n| n as f64 / 1e3),
            verified: self.state == JobState::Done,
        }
    }
}
