//! Hosts that run the message protocols: the real stack, a UDP socket on the
//! message port, and an `outboard_msg::Endpoint` on it, stepped by the
//! network like any other host. What the engine's shard does with the same
//! pieces (UDP payloads in, UDP payloads out, one timer), on virtual time.

use crate::network::{host_addr, stacks, Endpoint as NetEndpoint, Network, StackNetConfig, Step};
use crate::rng::Rng;
use outboard_msg::{Config as MsgConfig, Endpoint, Event, LookupError, MailboxAddr};
use outboard_stack::{Stack, UdpId};
use outboard_time::{Duration, Instant};
use outboard_wire::msg::DEFAULT_PORT;
use std::net::{SocketAddr, SocketAddrV4};

pub struct MsgHost {
    pub stack: Stack,
    udp: UdpId,
    port: u16,
    pub ep: Endpoint,
    buf: Vec<u8>,
    /// UDP payloads the stack refused to send (its queue was full, or ARP
    /// was still resolving): the protocol's loss to recover.
    pub send_refused: u64,
}

impl MsgHost {
    /// `ep` on `port` of `stack` (panics if the port is taken: a test setup error).
    pub fn new(mut stack: Stack, port: u16, ep: Endpoint) -> MsgHost {
        let udp = stack.udp_bind(port).expect("message port free on a new stack");
        let buf = vec![0; ep.config().mtu + 64];
        MsgHost { stack, udp, port, ep, buf, send_refused: 0 }
    }

    /// This host's message endpoint address (IPv4).
    pub fn addr(&self) -> SocketAddr {
        SocketAddrV4::new(self.stack.config().addr, self.port).into()
    }

    /// Hands what arrived on the port to the endpoint and what the endpoint
    /// wants sent to the stack. Call after driving the endpoint from outside.
    pub fn pump(&mut self, now: Instant) {
        loop {
            let mut got = false;
            while let Ok((n, src)) = self.stack.udp_recv_from(self.udp, &mut self.buf) {
                got = true;
                self.ep.handle_datagram(now, src, &self.buf[..n]);
            }
            while let Some((dst, n)) = self.ep.poll_transmit(&mut self.buf) {
                if self.stack.udp_send_to(now, self.udp, dst, &self.buf[..n]).is_err() {
                    self.send_refused += 1;
                }
            }
            if !got {
                break;
            }
        }
    }

    /// Replaces the endpoint (an engine restart: a new session, nothing bound).
    pub fn restart(&mut self, ep: Endpoint) {
        self.ep = ep;
    }
}

impl NetEndpoint for MsgHost {
    fn mac(&self) -> [u8; 6] {
        self.stack.config().mac
    }
    fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        self.stack.receive_frame(now, frame);
        self.pump(now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.stack.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match (self.stack.poll_timeout(), self.ep.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.stack.poll_timeout().is_some_and(|t| t <= now) {
            self.stack.handle_timeout(now);
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        self.pump(now);
    }
}

/// A network of message hosts on [`DEFAULT_PORT`]: host `i` at
/// `host_addr(i)`, each endpoint with `msg` and a session drawn from the seed.
pub fn of_msg_hosts(cfg: &StackNetConfig, msg: &MsgConfig) -> Network<MsgHost> {
    let mut sessions = Rng::derive(cfg.seed, 1);
    let hosts = stacks(cfg)
        .into_iter()
        .map(|s| MsgHost::new(s, DEFAULT_PORT, Endpoint::new(msg.clone(), sessions.next_u64() as u32)))
        .collect();
    Network::new(hosts, &cfg.link, cfg.seed, cfg.mtu + 14, Instant::ZERO)
}

/// Host `i`'s message endpoint address.
pub fn msg_addr(i: usize) -> SocketAddr {
    SocketAddrV4::new(host_addr(i), DEFAULT_PORT).into()
}

/// Host `i`'s message endpoint address over IPv6 (a network built with `ipv6`).
pub fn msg_addr6(i: usize) -> SocketAddr {
    std::net::SocketAddrV6::new(crate::network::host_addr6(i), DEFAULT_PORT, 0, 0).into()
}

/// How often [`drive`] calls the applications when nothing else happens.
pub const APP_TICK: Duration = Duration::from_millis(1);

/// Steps the network, calling `app` after every step (and at least every
/// [`APP_TICK`] of virtual time) and then moving what the applications did
/// onto the wire, until `app` says it is done. Err after `limit` of virtual
/// time, or when the network livelocks at one instant.
pub fn drive(
    net: &mut Network<MsgHost>,
    limit: Duration,
    mut app: impl FnMut(&mut Network<MsgHost>, Instant) -> Result<bool, String>,
) -> Result<(), String> {
    let end = net.now() + limit;
    loop {
        let now = net.now();
        let done = app(net, now)?;
        for h in net.hosts_mut() {
            h.pump(now);
        }
        net.flush();
        if done {
            return Ok(());
        }
        if now >= end {
            return Err(format!("not finished after {} s of virtual time", limit.as_secs_f64()));
        }
        match net.advance(now + APP_TICK) {
            Step::Idle => {
                net.idle_until(now + APP_TICK);
            }
            Step::Stalled => return Err("the network stalled (a livelock at one instant)".into()),
            Step::Advanced | Step::Limit => {}
        }
    }
}

/// Host `from` looks up `name` at host `to` and waits for the answer (at
/// most a second): on a clean link this also fills both ARP caches, since a
/// stack holds only a few datagrams while it resolves (as Linux's unres_qlen).
pub fn look_up(net: &mut Network<MsgHost>, from: usize, to: usize, name: &str) -> Result<Result<MailboxAddr, LookupError>, String> {
    let now = net.now();
    let lookup = net.host_mut(from).ep.lookup(now, msg_addr(to), name).map_err(|e| e.to_string())?;
    let mut found = None;
    drive(net, Duration::from_secs(1), |net, _| {
        while let Some(e) = net.host_mut(from).ep.poll_event() {
            if let Event::LookupDone { lookup: l, result } = e {
                if l == lookup {
                    found = Some(result);
                }
            }
        }
        Ok(found.is_some())
    })?;
    found.ok_or_else(|| format!("no answer to the lookup of {name:?}"))
}
