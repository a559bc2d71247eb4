//! Built-in services, so an engine can be exercised from outside before
//! applications can attach: echo (RFC 862), discard (RFC 863), chargen
//! (RFC 864) over TCP and UDP, and a bulk `source`/`sink` pair for
//! benchmarks. Pure logic over a [`Stack`]: no I/O, time passed in.
//!
//! The services are one `ShardApp` like any other: they listen, accept
//! (claiming each connection in the shard's owner table), and are told
//! which of their connections have events. Backpressure is the TCP kind: echo reads only as
//! much as it can send back right away (so a client that does not read
//! stops being read), source and chargen fill the send buffer only when it
//! has room.

use crate::app::{AppCx, ShardApp};
use outboard_stack::{ConnId, ListenerId, Stack, StackError, UdpId};
use outboard_tcp::Event;
use outboard_time::Instant;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// What a service does with a connection or datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    /// Sends back every byte (TCP and UDP port 7).
    Echo,
    /// Reads and drops everything (TCP and UDP port 9).
    Discard,
    /// Sends the RFC 864 rotating 72-character lines until the peer closes (TCP and UDP port 19).
    Chargen,
    /// Bulk sender for benchmarks: a repeating pattern as fast as TCP takes it (TCP port 5002).
    Source,
    /// Bulk receiver for benchmarks: reads and counts (TCP port 5001).
    Sink,
}

impl ServiceKind {
    pub const ALL: [ServiceKind; 5] = [
        ServiceKind::Echo,
        ServiceKind::Discard,
        ServiceKind::Chargen,
        ServiceKind::Source,
        ServiceKind::Sink,
    ];

    pub fn default_port(self) -> u16 {
        match self {
            ServiceKind::Echo => 7,
            ServiceKind::Discard => 9,
            ServiceKind::Chargen => 19,
            ServiceKind::Sink => 5001,
            ServiceKind::Source => 5002,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Echo => "echo",
            ServiceKind::Discard => "discard",
            ServiceKind::Chargen => "chargen",
            ServiceKind::Source => "source",
            ServiceKind::Sink => "sink",
        }
    }

    /// Whether the service also answers on UDP.
    pub fn has_udp(self) -> bool {
        matches!(self, ServiceKind::Echo | ServiceKind::Discard | ServiceKind::Chargen)
    }
}

/// One service on one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServiceSpec {
    pub kind: ServiceKind,
    pub port: u16,
}

impl fmt::Display for ServiceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.port)
    }
}

/// Parses `--services`: a comma-separated list of `NAME[:PORT]`, `all`, or `none`.
pub fn parse_services(s: &str) -> Result<Vec<ServiceSpec>, String> {
    let s = s.trim();
    if s == "none" || s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<ServiceSpec> = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item == "all" {
            for k in ServiceKind::ALL {
                out.push(ServiceSpec { kind: k, port: k.default_port() });
            }
            continue;
        }
        let (name, port) = match item.split_once(':') {
            Some((n, p)) => (
                n,
                Some(p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                    format!("{item:?}: {p:?} is not a port (1-65535)")
                })?),
            ),
            None => (item, None),
        };
        let kind = ServiceKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                format!("{name:?} is not a service (echo, discard, chargen, source, sink, all, none)")
            })?;
        out.push(ServiceSpec { kind, port: port.unwrap_or(kind.default_port()) });
    }
    for (i, a) in out.iter().enumerate() {
        if out[..i].iter().any(|b| b.port == a.port) {
            return Err(format!("port {} is given to two services", a.port));
        }
    }
    Ok(out)
}

/// Counters of one service.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServiceCounters {
    pub service: String,
    pub port: u16,
    pub tcp_accepted: u64,
    pub tcp_closed: u64,
    pub tcp_reset: u64,
    pub tcp_active: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub udp_datagrams_in: u64,
    pub udp_datagrams_out: u64,
}

impl ServiceCounters {
    /// Adds the same service's counters from another shard.
    pub fn add(&mut self, o: &ServiceCounters) {
        self.tcp_accepted += o.tcp_accepted;
        self.tcp_closed += o.tcp_closed;
        self.tcp_reset += o.tcp_reset;
        self.tcp_active += o.tcp_active;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.udp_datagrams_in += o.udp_datagrams_in;
        self.udp_datagrams_out += o.udp_datagrams_out;
    }
}

#[derive(Debug)]
struct ServiceConn {
    service: usize,
    /// Position in the chargen/source pattern.
    offset: usize,
    /// We have shut down our side.
    shut: bool,
}

/// The running services of one shard.
#[derive(Debug)]
pub struct Services {
    specs: Vec<ServiceSpec>,
    listeners: Vec<(ListenerId, usize)>,
    udp: Vec<(UdpId, usize)>,
    conns: HashMap<ConnId, ServiceConn>,
    counters: Vec<ServiceCounters>,
    scratch: Vec<u8>,
    /// Source pattern and chargen text, precomputed.
    source_pattern: Vec<u8>,
    chargen_pattern: Vec<u8>,
}

/// Accept backlog of each service listener.
const BACKLOG: usize = 1024;
/// Bytes moved per connection per call, so one fast connection cannot starve the rest.
const CHUNK: usize = 64 * 1024;

impl Services {
    /// Binds every service's TCP listener and UDP socket.
    pub fn start(stack: &mut Stack, specs: &[ServiceSpec]) -> Result<Services, String> {
        let mut s = Services {
            specs: specs.to_vec(),
            listeners: Vec::new(),
            udp: Vec::new(),
            conns: HashMap::new(),
            counters: specs
                .iter()
                .map(|sp| ServiceCounters {
                    service: sp.kind.name().to_string(),
                    port: sp.port,
                    ..Default::default()
                })
                .collect(),
            scratch: vec![0; CHUNK],
            source_pattern: (0..CHUNK + 256).map(|i| (i % 251) as u8).collect(),
            chargen_pattern: chargen_text(),
        };
        for (i, sp) in specs.iter().enumerate() {
            let l = stack
                .tcp_listen(sp.port, BACKLOG)
                .map_err(|e| format!("service {sp}: TCP port {}: {e:?}", sp.port))?;
            s.listeners.push((l, i));
            if sp.kind.has_udp() {
                let u = stack
                    .udp_bind(sp.port)
                    .map_err(|e| format!("service {sp}: UDP port {}: {e:?}", sp.port))?;
                s.udp.push((u, i));
            }
        }
        Ok(s)
    }

    pub fn specs(&self) -> &[ServiceSpec] {
        &self.specs
    }

    /// Live upgrade: what the service keeps about connection `id` (its
    /// port, the chargen/source position, whether it shut its side).
    pub fn export(&self, id: ConnId) -> Option<crate::upgrade::ServiceConnRecord> {
        let sc = self.conns.get(&id)?;
        Some(crate::upgrade::ServiceConnRecord { port: self.specs[sc.service].port, offset: sc.offset, shut: sc.shut })
    }

    /// Live upgrade: serves connection `id` (just taken over by the stack)
    /// as the old engine's service on the same port did, from where it was.
    pub fn adopt(&mut self, cx: &mut AppCx<'_>, id: ConnId, r: &crate::upgrade::ServiceConnRecord) -> Result<(), String> {
        let svc = self
            .specs
            .iter()
            .position(|sp| sp.port == r.port)
            .ok_or_else(|| format!("no service on port {} here for a handed-over connection", r.port))?;
        let period = match self.specs[svc].kind {
            ServiceKind::Chargen => CHARGEN_PERIOD,
            _ => 251,
        };
        if r.offset >= period {
            return Err(format!("a handed-over connection's pattern position {} is past {period}", r.offset));
        }
        self.counters[svc].tcp_active += 1;
        self.conns.insert(id, ServiceConn { service: svc, offset: r.offset, shut: r.shut });
        cx.claim(id, svc as u64);
        self.serve(cx, id);
        Ok(())
    }

    pub fn counters(&self) -> &[ServiceCounters] {
        &self.counters
    }

    /// Accepts new connections (when the shard's memory cap allows: asked
    /// only when a connection is waiting, at most once per call) and serves UDP.
    fn accept_and_serve_udp(&mut self, cx: &mut AppCx<'_>) -> bool {
        let mut work = false;
        let mut accept: Option<bool> = None;
        for li in 0..self.listeners.len() {
            let (l, svc) = self.listeners[li];
            if !cx.stack.tcp_accept_pending(l) || !*accept.get_or_insert_with(|| cx.may_accept()) {
                continue;
            }
            while let Some(id) = cx.stack.tcp_accept(l) {
                work = true;
                self.counters[svc].tcp_accepted += 1;
                self.counters[svc].tcp_active += 1;
                self.conns.insert(id, ServiceConn { service: svc, offset: 0, shut: false });
                cx.claim(id, svc as u64);
                self.serve(cx, id);
            }
        }
        for ui in 0..self.udp.len() {
            let (u, svc) = self.udp[ui];
            work |= self.serve_udp(cx.stack, cx.now, u, svc);
        }
        work
    }

    fn serve(&mut self, cx: &mut AppCx<'_>, id: ConnId) {
        let Some(sc) = self.conns.get_mut(&id) else { return };
        let svc = sc.service;
        let kind = self.specs[svc].kind;
        let ctr = &mut self.counters[svc];
        let Some(conn) = cx.stack.tcp(id) else {
            self.conns.remove(&id);
            cx.release(id);
            return;
        };
        let mut finished = false;
        let mut peer_closed = false;
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::PeerClosed => peer_closed = true,
                Event::Closed => finished = true,
                Event::Reset | Event::TimedOut => {
                    ctr.tcp_reset += 1;
                    finished = true;
                }
                Event::Connected | Event::Readable | Event::Writable => {}
            }
        }
        if !finished {
            match kind {
                ServiceKind::Echo => loop {
                    let room = conn.send_capacity().min(self.scratch.len());
                    if room == 0 {
                        // Full: resume reading when ACKs free room.
                        conn.request_writable();
                        break;
                    }
                    match conn.recv(&mut self.scratch[..room]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            ctr.bytes_in += n as u64;
                            let sent = conn.send(&self.scratch[..n]).unwrap_or(0);
                            ctr.bytes_out += sent as u64;
                            debug_assert_eq!(sent, n, "echo sends only what fits");
                        }
                    }
                },
                ServiceKind::Discard | ServiceKind::Sink | ServiceKind::Chargen | ServiceKind::Source => {
                    while let Ok(n) = conn.recv(&mut self.scratch) {
                        if n == 0 {
                            break;
                        }
                        ctr.bytes_in += n as u64;
                    }
                }
            }
            if matches!(kind, ServiceKind::Chargen | ServiceKind::Source) && !sc.shut {
                let pattern = if kind == ServiceKind::Chargen {
                    &self.chargen_pattern
                } else {
                    &self.source_pattern
                };
                let period = if kind == ServiceKind::Chargen { CHARGEN_PERIOD } else { 251 };
                let mut budget = CHUNK;
                while budget > 0 {
                    let room = conn.send_capacity().min(budget).min(pattern.len() - period);
                    if room == 0 {
                        break;
                    }
                    let n = conn.send(&pattern[sc.offset..sc.offset + room]).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    ctr.bytes_out += n as u64;
                    budget -= n;
                    sc.offset = (sc.offset + n) % period;
                }
                // More when the next ACKs free room (or the budget ran out).
                conn.request_writable();
            }
            // The peer finished sending and everything it sent is consumed (echo:
            // and answered): finish our side too.
            let drained = conn.recv_available() == 0;
            if (peer_closed || conn_peer_done(conn.state())) && drained && !sc.shut {
                sc.shut = true;
                conn.close();
            }
        }
        if finished {
            ctr.tcp_closed += 1;
            ctr.tcp_active = ctr.tcp_active.saturating_sub(1);
            self.conns.remove(&id);
            cx.stack.tcp_release(id);
            cx.release(id);
        }
    }

    fn serve_udp(&mut self, stack: &mut Stack, now: Instant, u: UdpId, svc: usize) -> bool {
        let kind = self.specs[svc].kind;
        let mut work = false;
        for _ in 0..64 {
            let (n, from) = match stack.udp_recv_from(u, &mut self.scratch) {
                Ok(x) => x,
                Err(StackError::WouldBlock) => break,
                // A port unreachable for a reply we sent: nothing to do.
                Err(_) => continue,
            };
            work = true;
            let ctr = &mut self.counters[svc];
            ctr.udp_datagrams_in += 1;
            ctr.bytes_in += n as u64;
            let reply: Option<&[u8]> = match kind {
                ServiceKind::Echo => Some(&self.scratch[..n]),
                // RFC 864: a datagram of 0 to 512 characters.
                ServiceKind::Chargen => Some(&self.chargen_pattern[..CHARGEN_LINE * 7]),
                _ => None,
            };
            if let Some(r) = reply {
                if stack.udp_send_to(now, u, from, r).is_ok() {
                    ctr.udp_datagrams_out += 1;
                    ctr.bytes_out += r.len() as u64;
                }
            }
        }
        work
    }
}

impl ShardApp for Services {
    fn poll(&mut self, cx: &mut AppCx<'_>) -> bool {
        self.accept_and_serve_udp(cx)
    }
    fn on_ready(&mut self, cx: &mut AppCx<'_>, conn: ConnId, _tag: u64) {
        self.serve(cx, conn);
    }
    /// `tag` is the service's index: its `NAME:PORT`.
    fn owner_label(&self, tag: u64) -> String {
        self.specs.get(tag as usize).map_or_else(String::new, |s| s.to_string())
    }
    fn report(&self, snap: &mut crate::stat::Snapshot) {
        snap.services = self.counters.clone();
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn conn_peer_done(s: outboard_tcp::State) -> bool {
    matches!(s, outboard_tcp::State::CloseWait | outboard_tcp::State::LastAck | outboard_tcp::State::Closing)
}

/// RFC 864: lines of 72 printable characters (codes 33..=126 rotating), CR LF.
const CHARGEN_LINE: usize = 74;
/// 95 distinct lines, then the pattern repeats.
const CHARGEN_PERIOD: usize = 95 * CHARGEN_LINE;

fn chargen_text() -> Vec<u8> {
    let printable: Vec<u8> = (32u8..127).collect();
    let mut v = Vec::with_capacity(CHARGEN_PERIOD + CHUNK);
    let mut line = 0usize;
    while v.len() < CHARGEN_PERIOD + CHUNK {
        for i in 0..72 {
            v.push(printable[(line + i) % printable.len()]);
        }
        v.extend_from_slice(b"\r\n");
        line += 1;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_lists_parse() {
        let all = parse_services("all").unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(
            parse_services("echo,sink:9000").unwrap(),
            vec![
                ServiceSpec { kind: ServiceKind::Echo, port: 7 },
                ServiceSpec { kind: ServiceKind::Sink, port: 9000 }
            ]
        );
        assert!(parse_services("none").unwrap().is_empty());
        assert!(parse_services("echo:0").is_err());
        assert!(parse_services("telnet").is_err());
        assert!(parse_services("echo,discard:7").is_err());
    }

    #[test]
    fn chargen_lines_are_rfc864() {
        let t = chargen_text();
        assert_eq!(&t[72..74], b"\r\n");
        assert_eq!(t[0], b' ');
        assert_eq!(t[CHARGEN_LINE], b'!');
        assert_eq!(&t[..CHARGEN_LINE], &t[CHARGEN_PERIOD..CHARGEN_PERIOD + CHARGEN_LINE]);
    }
}
