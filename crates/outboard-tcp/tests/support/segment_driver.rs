//! "Arbitrary segments into a live connection": a byte-driven driver shared by
//! the proptest in `tests/arbitrary_segments.rs` and the cargo-fuzz target
//! `fuzz/fuzz_targets/tcp_connection.rs` (which includes this file by path).
//!
//! It opens a client/server `Connection` pair through the public API, brings
//! it to ESTABLISHED, then lets the input bytes choose steps: inject a
//! made-up segment (sequence numbers near or far from the live ones, any
//! flags and options, any payload length), relay, drop, duplicate or corrupt
//! real segments, advance time, and make application calls. It asserts that
//! nothing panics, that `poll_transmit`/`poll_event` always run dry, and a
//! few invariants any output must satisfy. Input bytes past the end read as
//! zero, so every byte string is a valid program.

use outboard_tcp::{Config, Connection, Event, FourTuple, IcmpError, State};
use outboard_time::{Duration, Instant};
use outboard_wire::{SackBlocks, SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

/// Upper bound on the steps one input may drive.
const MAX_STEPS: usize = 4_000;
/// A connection that yields more segments than this in one drain is spinning.
const MAX_DRAIN: usize = 20_000;
/// Segments the simulated network holds per direction before it drops the oldest.
const MAX_QUEUED: usize = 512;

/// Reads the fuzz input; zero past the end.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
}

pub type Segment = (TcpRepr, Vec<u8>);

/// The events that end or half-end a connection, as seen so far.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub reset: bool,
    pub timed_out: bool,
    pub peer_closed: bool,
    pub closed: bool,
}

/// One end and what the driver has learnt about its sequence space from its output.
pub struct Peer {
    pub conn: Connection,
    /// Segments it sent, in flight towards the other end.
    pub outbox: VecDeque<Segment>,
    pub seen: Seen,
    /// The highest SEQ + LEN it has sent: about its SND.NXT.
    snd_hint: SeqNumber,
    /// The last ACK it sent: about its RCV.NXT.
    rcv_hint: SeqNumber,
    /// Its last TSval, to echo plausibly.
    ts_hint: u32,
    cfg: Config,
}

impl Peer {
    fn new(conn: Connection, cfg: Config, iss: SeqNumber) -> Peer {
        Peer { conn, outbox: VecDeque::new(), seen: Seen::default(), snd_hint: iss, rcv_hint: SeqNumber(0), ts_hint: 0, cfg }
    }

    /// Pulls every pending segment and event, checking what must hold for any output.
    pub fn drain(&mut self, now: Instant) {
        let tuple = self.conn.tuple();
        let mut n = 0;
        while let Some(t) = self.conn.poll_transmit(now) {
            n += 1;
            assert!(n <= MAX_DRAIN, "poll_transmit never returned None");
            let repr = t.repr;
            assert_eq!(repr.src_port, tuple.local.port(), "segment from the wrong port");
            assert_eq!(repr.dst_port, tuple.remote.port(), "segment to the wrong port");
            let mut payload = Vec::with_capacity(t.payload_len());
            payload.extend_from_slice(t.payload[0]);
            payload.extend_from_slice(t.payload[1]);
            let end = repr.seq + repr.segment_len(payload.len());
            if end > self.snd_hint || repr.flags.syn() {
                self.snd_hint = end;
            }
            if repr.flags.ack() {
                self.rcv_hint = repr.ack;
            }
            if let Some((tsval, _)) = repr.options.timestamps {
                self.ts_hint = tsval;
            }
            if self.outbox.len() >= MAX_QUEUED {
                self.outbox.pop_front();
            }
            self.outbox.push_back((repr, payload));
        }
        let mut n = 0;
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Reset => self.seen.reset = true,
                Event::TimedOut => self.seen.timed_out = true,
                Event::PeerClosed => self.seen.peer_closed = true,
                Event::Closed => self.seen.closed = true,
                _ => {}
            }
            n += 1;
            assert!(n <= MAX_DRAIN, "poll_event never returned None");
        }
        assert!(self.conn.recv_available() <= self.cfg.recv_buffer, "more readable than the receive buffer");
        assert!(self.conn.send_capacity() <= self.cfg.send_buffer, "more send space than the send buffer");
        if let Some(at) = self.conn.poll_timeout() {
            // A deadline far in the past would make an event loop spin.
            assert!(at + Duration::from_secs(3600) >= now, "timer deadline an hour in the past");
        }
    }

    /// Calls `handle_timeout` as an event loop would: again while a deadline is due.
    pub fn timeout_if_due(&mut self, now: Instant) {
        for _ in 0..64 {
            match self.conn.poll_timeout() {
                Some(t) if t <= now => self.conn.handle_timeout(now),
                _ => return,
            }
        }
        panic!("handle_timeout leaves a due deadline behind: {:?} at {now:?}", self.conn.poll_timeout());
    }
}

fn tuples() -> (FourTuple, FourTuple) {
    let c = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40_000).into();
    let s = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80).into();
    (FourTuple { local: c, remote: s }, FourTuple { local: s, remote: c })
}

/// Config from one byte: which features are on, and small buffers so windows fill.
pub fn config(input: &mut Input) -> Config {
    let b = input.u8();
    Config {
        cc: if b & 1 == 0 { outboard_tcp::CcKind::NewReno } else { outboard_tcp::CcKind::Cubic },
        sack: b & 2 == 0,
        timestamps: b & 4 == 0,
        window_scaling: b & 8 == 0,
        nodelay: b & 16 != 0,
        mss: if b & 32 == 0 { 1460 } else { 536 },
        send_buffer: 16 * 1024,
        recv_buffer: 16 * 1024,
        max_ooo_ranges: 4,
        keepalive: if b & 64 == 0 { None } else { Some((Duration::from_secs(10), Duration::from_secs(1), 3)) },
        ..Config::default()
    }
}

/// Opens a connection pair and relays the handshake until both are ESTABLISHED.
pub fn establish(cfg: &Config, now: Instant) -> (Peer, Peer) {
    let (ct, st) = tuples();
    let (c_iss, s_iss) = (SeqNumber(0xffff_f000), SeqNumber(77_000));
    let mut client = Peer::new(Connection::connect(cfg, ct, c_iss, now), cfg.clone(), c_iss);
    client.drain(now);
    let (syn, _) = client.outbox.pop_front().expect("connect yields a SYN");
    assert!(syn.flags.syn() && !syn.flags.ack(), "first segment is a SYN: {syn:?}");
    let mut server = Peer::new(Connection::accept(cfg, st, &syn, s_iss, now), cfg.clone(), s_iss);
    server.drain(now);
    for _ in 0..8 {
        relay_all(&mut server, &mut client, now);
        relay_all(&mut client, &mut server, now);
        if client.conn.state() == State::Established && server.conn.state() == State::Established {
            return (client, server);
        }
    }
    panic!("handshake did not complete: client {:?}, server {:?}", client.conn.state(), server.conn.state());
}

/// Delivers everything `from` has sent to `to`.
pub fn relay_all(from: &mut Peer, to: &mut Peer, now: Instant) {
    while let Some((repr, payload)) = from.outbox.pop_front() {
        to.conn.handle_segment(now, &repr, &payload);
        to.drain(now);
    }
    from.drain(now);
}

/// A segment for `target` built from input bytes, near its live sequence numbers or not.
fn made_up_segment(input: &mut Input, target: &Peer, sender: &Peer) -> Segment {
    let tuple = target.conn.tuple();
    let near = |input: &mut Input, base: SeqNumber| -> SeqNumber {
        match input.u8() % 5 {
            0 => base,
            1 => base + usize::from(input.u16()),
            2 => base - usize::from(input.u16()),
            3 => base + usize::from(input.u8()),
            _ => SeqNumber(input.u32()),
        }
    };
    let seq = near(input, target.rcv_hint);
    let ack = near(input, target.snd_hint);
    let mut flags = TcpFlags(input.u8());
    if input.u8() & 15 != 0 {
        // Mostly plausible: ACK set, no SYN/RST, so the segment gets past the first checks.
        flags = TcpFlags((flags.0 | TcpFlags::ACK.0) & !(TcpFlags::SYN.0 | TcpFlags::RST.0));
    }
    let opt = input.u8();
    let mut options = TcpOptions::default();
    if opt & 1 != 0 {
        options.mss = Some(input.u16());
    }
    if opt & 2 != 0 {
        options.window_scale = Some(input.u8());
    }
    options.sack_permitted = opt & 4 != 0;
    if opt & 8 != 0 {
        let tsecr = if input.bool() { target.ts_hint } else { input.u32() };
        let tsval = if input.bool() { sender.ts_hint.wrapping_add(u32::from(input.u8())) } else { input.u32() };
        options.timestamps = Some((tsval, tsecr));
    }
    if opt & 16 != 0 {
        let mut sack = SackBlocks::new();
        for _ in 0..input.u8() % 5 {
            let left = near(input, target.snd_hint - 4096);
            sack.push(left, left + usize::from(input.u16() % 4096));
        }
        options.sack = sack;
    }
    let len = usize::from(input.u16() % 3000);
    let fill = input.u8();
    let payload = vec![fill; len];
    let repr = TcpRepr {
        src_port: tuple.remote.port(),
        dst_port: tuple.local.port(),
        seq,
        ack,
        flags,
        window: input.u16(),
        urgent: if flags.urg() { input.u16() } else { 0 },
        options,
    };
    (repr, payload)
}

/// What a run did, so tests can check the driver is not vacuous.
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    pub steps: usize,
    pub injected: usize,
    /// Bytes the applications read, both sides together.
    pub bytes_read: usize,
    pub client_state: Option<State>,
    pub server_state: Option<State>,
}

/// Runs one program. Panics only on a bug in the connection.
pub fn run(data: &[u8]) -> Summary {
    let mut summary = Summary::default();
    let mut input = Input::new(data);
    let cfg = config(&mut input);
    let mut now = Instant::from_millis(1_000);
    let (client, server) = establish(&cfg, now);
    let mut peers = [client, server];
    let mut steps = 0;
    while !input.is_empty() && steps < MAX_STEPS {
        steps += 1;
        let op = input.u8();
        // Low bit picks the side acted on; the rest picks the action.
        let [a, b] = &mut peers;
        let (target, other) = if op & 1 == 0 { (a, b) } else { (b, a) };
        match (op >> 1) % 12 {
            0..=3 => {
                let (repr, payload) = made_up_segment(&mut input, target, other);
                target.conn.handle_segment(now, &repr, &payload);
                summary.injected += 1;
            }
            4 => {
                now += Duration::from_millis(u64::from(input.u16()));
                target.timeout_if_due(now);
                other.timeout_if_due(now);
            }
            5 => {
                // The network: deliver, drop or duplicate the next few real segments.
                for _ in 0..input.u8() % 16 {
                    // Read the choice first, so the bytes a step uses don't depend on state.
                    let choice = input.u8() % 8;
                    let Some((repr, payload)) = other.outbox.pop_front() else { continue };
                    match choice {
                        0 => {}
                        1 => {
                            target.conn.handle_segment(now, &repr, &payload);
                            target.conn.handle_segment(now, &repr, &payload);
                        }
                        2 => other.outbox.push_back((repr, payload)), // reordered
                        _ => target.conn.handle_segment(now, &repr, &payload),
                    }
                }
            }
            6 => {
                let data = vec![op; usize::from(input.u16() % 20_000)];
                let _ = target.conn.send(&data);
            }
            7 => {
                let mut buf = vec![0u8; usize::from(input.u16() % 20_000)];
                if let Ok(n) = target.conn.recv(&mut buf) {
                    summary.bytes_read += n;
                }
            }
            // Endings are rare, so most programs explore a live connection.
            8 => match input.u8() {
                0 => target.conn.abort(),
                1..=4 => target.conn.close(),
                5..=12 => target.conn.shutdown_write(),
                _ => {}
            },
            9 => {
                let err = match input.u8() % 3 {
                    0 => IcmpError::FragmentationNeeded { mtu: input.u16() },
                    1 => IcmpError::Unreachable { code: input.u8() },
                    _ => IcmpError::TimeExceeded,
                };
                target.conn.handle_icmp(now, err);
            }
            10 => {
                // A real segment with one header field rewritten.
                let (field, x, y) = (input.u8() % 5, input.u32(), input.u32());
                if let Some((mut repr, payload)) = other.outbox.pop_front() {
                    match field {
                        0 => repr.seq = SeqNumber(repr.seq.0 ^ x),
                        1 => repr.ack = SeqNumber(repr.ack.0 ^ x),
                        2 => repr.flags = TcpFlags(repr.flags.0 ^ x as u8),
                        3 => repr.window = x as u16,
                        _ => repr.options.timestamps = Some((x, y)),
                    }
                    target.conn.handle_segment(now, &repr, &payload);
                }
            }
            _ => {
                // Jump to the next deadline, as an event loop would.
                let next = [target.conn.poll_timeout(), other.conn.poll_timeout()].into_iter().flatten().min();
                if let Some(at) = next {
                    now = now.max(at);
                    target.timeout_if_due(now);
                    other.timeout_if_due(now);
                }
            }
        }
        target.drain(now);
        other.drain(now);
    }
    settle(&mut peers, &mut now);
    summary.steps = steps;
    summary.client_state = Some(peers[0].conn.state());
    summary.server_state = Some(peers[1].conn.state());
    summary
}

/// After the program: run the pair over a perfect network for a while, so
/// that the states the program left behind play out (retransmissions,
/// closes, TIME-WAIT) under the same checks.
fn settle(peers: &mut [Peer; 2], now: &mut Instant) {
    for _ in 0..64 {
        let [a, b] = peers;
        relay_all(a, b, *now);
        relay_all(b, a, *now);
        let next = [a.conn.poll_timeout(), b.conn.poll_timeout()].into_iter().flatten().min();
        match next {
            Some(at) => {
                *now = (*now).max(at);
                a.timeout_if_due(*now);
                b.timeout_if_due(*now);
                a.drain(*now);
                b.drain(*now);
            }
            None if a.outbox.is_empty() && b.outbox.is_empty() => break,
            None => {}
        }
    }
}
