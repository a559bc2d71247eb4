//! Live upgrade: a new engine binary takes over from a running engine of the
//! same name through its control socket (`outboard engine --upgrade NAME`).
//!
//! # The exchange, on one connection to `RUN_DIR/NAME.sock`
//!
//! 1. New → old: `upgrade V1,V2…\n`, the record versions the new binary reads.
//! 2. The old engine's control thread passes the request to every shard;
//!    each finishes its turn, flushes what it queued on the link and stops
//!    there (quiesced: frames wait in the link's ring, applications'
//!    commands in their boards). The shards meet at a [`Gate`] once all have
//!    stopped reading their links, take in what the others forwarded to them,
//!    check that what they hold can be handed over, and offer their
//!    [`Record`] — or say why not, and all go on serving.
//! 3. Old → new: one message with an 8-byte length and the descriptors
//!    (`SCM_RIGHTS`: each shard's, in the order its `Record::fds` names them
//!    — its link socket (AF_PACKET, TAP queue or XSK), the interface's claim
//!    socket, af_xdp's UMEM memfd, XSK map, program and BPF link, the
//!    kernel's TAP queue and claim in network-device mode, each attached
//!    application's board memory, socket and wake eventfds — then the control
//!    socket's and the board socket's listening sockets), then the offer as
//!    JSON (`{"records": [shard 0's, …], "more_fds": […], "fds_after": N}` or
//!    `{"error": "…"}`). Descriptors past the first message's `SCM_MAX_FD`
//!    (253) follow in N more, one byte each.
//! 4. The new engine builds everything from the records and the descriptors
//!    (settings from the old engine's command line, the same link sockets
//!    and rings at the same slots, the same listening sockets, the same
//!    secret, ARP entries and TCP connections), and only then — before it
//!    reads a frame — writes `confirm\n`. The old engine answers `ok\n` and
//!    exits 0 without a word to anyone (no RST, no "engine gone": the sockets
//!    it leaves behind are the new engine's now).
//! 5. Anything else (`abort …\n`, the connection closed — the new process
//!    died — or no word within [`CONFIRM_WAIT`]) is a rollback: the old
//!    engine resumes where it stopped, and the new one exits non-zero with
//!    the reason. The new engine touches the links only after `confirm`, so
//!    the old one finds its rings as it left them.
//!
//! # What is handed over, and what is not (yet)
//!
//! Handed over: the links (af_packet: each shard's socket, mapped rings and
//! ring positions; tap: each queue's descriptor; af_xdp: each shard's XSK,
//! its UMEM's memfd and the chunks no ring holds, `link::af_xdp::XdpState`,
//! and the interface's XDP program, XSK map and BPF link), the kernel's TAP
//! in network-device mode, the interface's claim (never released in between: no
//! other engine can slip in), the control and board listening sockets (a
//! client or an application connecting during the pause waits in the
//! backlog and is served by the new engine), the syncookie/ISN secret (a SYN
//! cookie the old engine issued is valid at the new one), the settings, the
//! resolved ARP entries, and every TCP connection past its handshake with
//! its whole state (`outboard_tcp::Connection` is serde) and its holder: a
//! built-in service, or nobody (closing, TIME-WAIT).
//!
//! Attached applications (version 4): every board's session and listener
//! groups, each board's memfd, socket and wake eventfd and the doorbell
//! (`crate::host::takeover`); their streams' connections are in `tcp`, held
//! by `Holder::Board`, their rings where they were (`TcpRecord::lent`);
//! their datagram sockets as port, families and mailbox position (the new
//! engine binds the same ports again).
//!
//! Refused, with the reason, the old engine serving on: fabric links,
//! message mailboxes of boards and
//! handlers they loaded, and connections of other holders (fetches). A
//! connection in its handshake or an accept queue, or a datagram socket
//! with datagrams the stack still queues for it, is "busy": the new engine
//! asks again.

use crate::control::Request;
use crate::link::HandOver;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::OnceLock;
use std::time::Duration;

/// The version of [`Record`] this binary writes: 2 added `tcp` (open
/// connections), 3 one record per shard (`records`, with `shard`), 4 the
/// attached applications (`boards`, `Holder::Board`, `TcpRecord::lent`).
pub const RECORD_VERSION: u32 = 4;
/// The record versions this binary reads (1 is 2 without connections, 2 is
/// 3 with one shard, 3 is 4 without boards).
pub const READS: &[u32] = &[1, 2, 3, 4];
/// How long a quiesced engine waits for the new one's `confirm`.
pub const CONFIRM_WAIT: Duration = Duration::from_secs(10);
/// Largest offer accepted (the record is a few hundred bytes today).
const MAX_OFFER: u64 = 16 << 20;

/// The state a running engine hands to the engine that upgrades it:
/// versioned ([`RECORD_VERSION`]), JSON on the wire.
///
/// Generic over the connection type only so the old engine can write its
/// connections where they are (`Record<&Connection>`); the new engine
/// reads a `Record` (owned connections).
#[derive(Debug, Serialize, Deserialize)]
pub struct Record<C = outboard_tcp::Connection> {
    pub version: u32,
    /// Which shard's record this is, of how many (every shard writes one).
    #[serde(default)]
    pub shard: u32,
    #[serde(default = "one")]
    pub shards: u32,
    /// The old engine's pid (it exits once the new one confirms).
    pub pid: u32,
    /// The command line the old engine's settings came from (the program,
    /// `engine`, its flags): the new engine takes the same settings.
    pub args: Vec<String>,
    /// CLOCK_MONOTONIC (the same in both processes) when the old engine
    /// stopped, in nanoseconds: the start of the blackout.
    pub quiesced_ns: u64,
    /// The secret behind ISNs and SYN cookies.
    pub secret: [u8; 16],
    /// The link's kind, interface and ring positions.
    pub link: HandOver,
    /// TCP and UDP ports the old engine listened on (its services): the
    /// new one must listen on the same.
    pub tcp_ports: Vec<u16>,
    pub udp_ports: Vec<u16>,
    /// What each descriptor sent with the record is, in order.
    pub fds: Vec<String>,
    /// The resolved ARP entries (IPv4 address, MAC).
    #[serde(default)]
    pub arp: Vec<(std::net::Ipv4Addr, [u8; 6])>,
    /// Every TCP connection past its handshake: its full state, and who holds it.
    #[serde(default = "Vec::new")]
    pub tcp: Vec<TcpRecord<C>>,
    /// The attached applications' boards: sessions and listener groups
    /// (their descriptors are among `fds`).
    #[serde(default)]
    pub boards: crate::host::takeover::BoardsRecord,
}

/// One TCP connection in the record.
#[derive(Debug, Serialize, Deserialize)]
pub struct TcpRecord<C = outboard_tcp::Connection> {
    /// Everything the connection is: RFC 9293 variables, options, SACK
    /// scoreboard, RTT and congestion state, timers as absolute
    /// CLOCK_MONOTONIC deadlines, and the bytes in its buffers.
    pub conn: C,
    pub holder: Holder,
    /// Where its rings' lent storage is (a board's number and the region's
    /// offset): the connection's record carries their positions, not their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lent: Option<LentPlaces>,
}

/// The places of a connection's rings in lent storage (`RingStorage::place`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LentPlaces {
    pub send: Option<(u64, u64)>,
    pub recv: Option<(u64, u64)>,
}

/// Who holds a handed-over connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// A built-in service.
    Service(ServiceConnRecord),
    /// Nobody: released by its application, closing or in TIME-WAIT.
    Released,
    /// An application's stream: the board (session) and its endpoint.
    Board { session: u64, ep: u32 },
}

/// What a built-in service keeps about one of its connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceConnRecord {
    pub port: u16,
    /// Position in the chargen/source pattern.
    pub offset: usize,
    /// The service has shut its sending side.
    pub shut: bool,
}

fn one() -> u32 {
    1
}

/// The offer, as the new engine reads it: `{"records": [shard 0's, …],
/// "more_fds": […]}` (version 2 had one `record`) or `{"error": "…"}` (the
/// old engine writes it from the shards' JSON).
#[derive(Debug, Deserialize)]
struct Offer {
    #[serde(default)]
    record: Option<Record>,
    #[serde(default)]
    records: Vec<Record>,
    /// Names of the control thread's descriptors, sent after the record's.
    #[serde(default)]
    more_fds: Vec<String>,
    /// How many of the descriptors come in the messages after the offer's
    /// (those past the first message's `MAX_FDS`; an engine before these
    /// sent every one with the offer, and says nothing).
    #[serde(default)]
    fds_after: usize,
    #[serde(default)]
    error: Option<String>,
}

fn error_json(e: &str) -> String {
    serde_json::json!({ "error": e }).to_string()
}

/// The shard's end of an upgrade request: it sends its record (and the
/// descriptors it holds, borrowed) or why not, then learns whether the new
/// engine confirmed (true: stop for good) or not (false: resume).
/// Where every shard of the engine being upgraded meets once it has stopped
/// reading its link: past it, nothing is forwarded between shards any more,
/// so each drains what others forwarded to it before writing its record.
pub struct Gate {
    arrived: std::sync::Mutex<usize>,
    all: std::sync::Condvar,
    parties: usize,
}

impl Gate {
    pub fn new(parties: usize) -> Gate {
        Gate { arrived: std::sync::Mutex::new(0), all: std::sync::Condvar::new(), parties }
    }

    /// Arrives and waits for the others, at most `limit`: false if they did not all come.
    pub fn arrive_and_wait(&self, limit: Duration) -> bool {
        let mut n = self.arrived.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        self.all.notify_all();
        let (n, timeout) = self
            .all
            .wait_timeout_while(n, limit, |n| *n < self.parties)
            .unwrap_or_else(|p| p.into_inner());
        !timeout.timed_out() || *n >= self.parties
    }
}

pub struct ShardSide {
    /// Shared by every shard's request.
    pub gate: std::sync::Arc<Gate>,
    /// The record as JSON, and the descriptors `Record::fds` names.
    pub offer: Sender<Result<(String, Vec<RawFd>), String>>,
    pub outcome: Receiver<bool>,
}

static COMMAND_LINE: OnceLock<Vec<String>> = OnceLock::new();

/// Records the command line this process's engine settings came from (the
/// `outboard engine` command sets it); an engine without one (embedded,
/// tests) cannot be upgraded.
pub fn set_command_line(args: Vec<String>) {
    let _ = COMMAND_LINE.set(args);
}

pub fn command_line() -> Option<&'static [String]> {
    COMMAND_LINE.get().map(|v| v.as_slice())
}

/// The record versions to ask for: [`READS`], or for tests of the refusal,
/// the comma list in `OUTBOARD_UPGRADE_READS`.
pub fn reads() -> Vec<u32> {
    match std::env::var("OUTBOARD_UPGRADE_READS") {
        Ok(s) => s.split(',').filter_map(|v| v.trim().parse().ok()).collect(),
        Err(_) => READS.to_vec(),
    }
}

// ---------------------------------------------------------------- old side

/// The old engine's control thread: serves one `upgrade` request on
/// `stream`. `extra` are the control thread's own descriptors to hand over
/// (the control socket, the board socket). True once the new engine
/// confirmed: the caller stops accepting, everything is the new engine's.
pub fn serve(
    stream: &UnixStream,
    line: &str,
    shards: &[(Sender<Request>, UnixStream)],
    extra: &[RawFd],
) -> io::Result<bool> {
    let reads: Vec<u32> = line
        .trim_start_matches("upgrade")
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if !reads.contains(&RECORD_VERSION) {
        let e = format!(
            "incompatible upgrade record: the running engine writes version {RECORD_VERSION}, the new binary reads {}",
            if reads.is_empty() { "none".to_string() } else { reads.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",") }
        );
        send_offer(stream, &error_json(&e), &[])?;
        return Ok(false);
    }
    // Every shard stops at its next turn boundary and offers its part.
    let mut waiting = Vec::new();
    let gate = std::sync::Arc::new(Gate::new(shards.len()));
    for (tx, bell) in shards {
        let (offer_tx, offer_rx) = mpsc::channel();
        let (outcome_tx, outcome_rx) = mpsc::channel();
        let (reply, _unused) = mpsc::channel();
        let req = Request { line: line.to_string(), reply, upgrade: Some(ShardSide { gate: gate.clone(), offer: offer_tx, outcome: outcome_rx }) };
        if tx.send(req).is_err() {
            break;
        }
        let _ = (&*bell).write(&[1]);
        waiting.push((offer_rx, outcome_tx));
    }
    let mut offered = Vec::new();
    let mut failure = (waiting.len() != shards.len()).then(|| "a shard of the engine has stopped".to_string());
    for (i, (offer_rx, outcome_tx)) in waiting.into_iter().enumerate() {
        match offer_rx.recv_timeout(Duration::from_secs(8)) {
            Ok(Ok(part)) => offered.push((part, outcome_tx)),
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(_) => {
                failure.get_or_insert(format!("shard {i} of the engine did not answer within 8 s"));
            }
        }
    }
    if let Some(e) = failure {
        // The shards that offered resume.
        for (_, outcome_tx) in offered {
            let _ = outcome_tx.send(false);
        }
        send_offer(stream, &error_json(&e), &[])?;
        return Ok(false);
    }
    // From here the shards wait for the outcome: every way out says it.
    let confirmed = (|| -> io::Result<bool> {
        let mut fds: Vec<RawFd> = offered.iter().flat_map(|((_, f), _)| f.iter().copied()).collect();
        let records: Vec<&str> = offered.iter().map(|((json, _), _)| json.as_str()).collect();
        let mut more = vec!["control socket"];
        fds.push(extra[0]);
        if let Some(&board) = extra.get(1) {
            more.push("board socket");
            fds.push(board);
        }
        let after = fds.len().saturating_sub(MAX_FDS);
        let json = format!("{{\"records\":[{}],\"more_fds\":{},\"fds_after\":{after}}}", records.join(","), serde_json::json!(more));
        send_offer(stream, &json, &fds)?;
        stream.set_read_timeout(Some(CONFIRM_WAIT))?;
        let answer = read_line(stream)?;
        Ok(answer == "confirm")
    })()
    .unwrap_or(false);
    for (_, outcome_tx) in offered {
        let _ = outcome_tx.send(confirmed);
    }
    if confirmed {
        let _ = (&*stream).write_all(b"ok\n");
    }
    Ok(confirmed)
}

// ---------------------------------------------------------------- new side

/// The new engine's end: the old engine's record and descriptors, and the
/// connection on which it confirms or aborts.
pub struct Incoming {
    /// One record per shard of the old engine, in shard order.
    pub records: Vec<Record>,
    /// Each record's descriptors, by the names it gives them.
    pub shard_fds: Vec<Vec<(String, OwnedFd)>>,
    /// The control thread's descriptors (control socket, board socket).
    pub more_fds: Vec<(String, OwnedFd)>,
    stream: UnixStream,
    /// When the offer came: the old engine waits [`CONFIRM_WAIT`] from about then.
    received: std::time::Instant,
}

/// Asks the engine `name` to hand over. An error says why (the old engine
/// goes on serving).
pub fn request(name: &str) -> Result<Incoming, String> {
    let path = crate::control::socket_path(name);
    let stream = UnixStream::connect(&path).map_err(|e| {
        format!("no engine named {name:?} is running ({}: {e})", path.display())
    })?;
    let io = |e: io::Error| format!("the hand-over from engine {name:?} failed: {e}");
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io)?;
    stream.set_write_timeout(Some(Duration::from_secs(5))).map_err(io)?;
    let reads = reads();
    let line = format!("upgrade {}\n", reads.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","));
    (&stream).write_all(line.as_bytes()).map_err(io)?;
    let (offer, fds) = recv_offer(&stream).map_err(io)?;
    if let Some(e) = offer.error {
        return Err(e);
    }
    let mut records = offer.records;
    records.extend(offer.record);
    if records.is_empty() {
        return Err("the running engine sent neither a record nor an error".to_string());
    }
    // The descriptors: each record's, in order, then the control thread's.
    let mut fds = fds.into_iter();
    let expected: usize = records.iter().map(|r| r.fds.len()).sum::<usize>() + offer.more_fds.len();
    let count = fds.len();
    let shard_fds: Vec<Vec<(String, OwnedFd)>> =
        records.iter().map(|r| r.fds.iter().cloned().zip(fds.by_ref()).collect()).collect();
    let more_fds: Vec<(String, OwnedFd)> = offer.more_fds.into_iter().zip(fds.by_ref()).collect();
    #[allow(clippy::disallowed_methods)] // a deadline against the other process's wait, not protocol time
    let received = std::time::Instant::now();
    let incoming = Incoming { records, shard_fds, more_fds, stream, received };
    if let Some(r) = incoming.records.iter().find(|r| !reads.contains(&r.version)) {
        let why = format!("incompatible upgrade record: version {}, this binary reads {:?}", r.version, reads);
        incoming.abort(&why);
        return Err(why);
    }
    if count != expected {
        let why = format!("the running engine sent {count} descriptors for the {expected} its records name");
        incoming.abort(&why);
        return Err(why);
    }
    let n = incoming.records.len();
    if incoming.records.iter().enumerate().any(|(i, r)| r.shard as usize != i || r.shards as usize != n) {
        let why = format!("the running engine's {n} shard records are not shards 0 to {}", n - 1);
        incoming.abort(&why);
        return Err(why);
    }
    Ok(incoming)
}

impl Incoming {
    /// Shard 0's record: what every shard's record has alike (pid, command
    /// line, secret, ports).
    pub fn record(&self) -> &Record {
        &self.records[0]
    }

    /// Takes the descriptor shard `shard`'s record names `what`, or with
    /// `None` the control thread's.
    pub fn take_fd(&mut self, shard: Option<usize>, what: &str) -> Option<OwnedFd> {
        let list = match shard {
            Some(i) => self.shard_fds.get_mut(i)?,
            None => &mut self.more_fds,
        };
        let i = list.iter().position(|(name, _)| name == what)?;
        Some(list.remove(i).1)
    }

    /// Everything is built: the old engine may go. After this there is no
    /// rollback. Waits (briefly) for its `ok`. Refused (and aborted) when
    /// building took so long that the old engine may have given up waiting.
    pub fn confirm(&self) -> Result<(), String> {
        let took = self.received.elapsed();
        if took + Duration::from_secs(2) > CONFIRM_WAIT {
            let why = format!("taking over took {:.1} s, too close to the running engine's {} s wait", took.as_secs_f64(), CONFIRM_WAIT.as_secs());
            self.abort(&why);
            return Err(why);
        }
        (&self.stream).write_all(b"confirm\n").map_err(|e| format!("confirming the upgrade: {e}"))?;
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(5)));
        match read_line(&self.stream) {
            Ok(l) if l == "ok" => Ok(()),
            Ok(l) => Err(format!("the old engine answered {l:?} to the confirmation")),
            Err(e) => Err(format!("no answer to the confirmation: {e}")),
        }
    }

    /// Gives up: the old engine resumes.
    pub fn abort(&self, why: &str) {
        let why = why.replace('\n', " ");
        let _ = (&self.stream).write_all(format!("abort {why}\n").as_bytes());
    }
}

// ---------------------------------------------------------------- wire

fn read_line(stream: &UnixStream) -> io::Result<String> {
    let mut bytes = Vec::new();
    let mut b = [0u8; 1];
    while bytes.len() < 4096 {
        if (&*stream).read(&mut b)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the other engine closed the connection"));
        }
        if b[0] == b'\n' {
            break;
        }
        bytes.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// The offer: its length and the first descriptors (as many as one
/// message carries), the JSON (whose `fds_after` says how many more come),
/// then the rest of the descriptors in messages of one byte each.
fn send_offer(stream: &UnixStream, json: &str, fds: &[RawFd]) -> io::Result<()> {
    let len = (json.len() as u64).to_le_bytes();
    let (first, rest) = fds.split_at(fds.len().min(MAX_FDS));
    send_with_fds(stream, &len, first)?;
    (&*stream).write_all(json.as_bytes())?;
    for more in rest.chunks(MAX_FDS) {
        send_with_fds(stream, &[0], more)?;
    }
    Ok(())
}

/// The offer and its descriptors: the first message's, then the
/// `fds_after` its JSON announces.
fn recv_offer(stream: &UnixStream) -> io::Result<(Offer, Vec<OwnedFd>)> {
    let mut len = [0u8; 8];
    let mut fds = recv_with_fds(stream, &mut len)?;
    let n = u64::from_le_bytes(len);
    if n > MAX_OFFER {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an offer of {n} bytes")));
    }
    let mut json = vec![0u8; n as usize];
    (&*stream).read_exact(&mut json)?;
    let offer: Offer = serde_json::from_slice(&json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("the offer: {e}")))?;
    if offer.fds_after > MAX_OFFER_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an offer of {} more descriptors", offer.fds_after)));
    }
    let want = fds.len() + offer.fds_after;
    while fds.len() < want {
        let got = recv_with_fds(stream, &mut [0])?;
        if got.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a descriptor message without descriptors"));
        }
        fds.extend(got);
    }
    Ok((offer, fds))
}

/// Most descriptors an offer may name: a bound against a damaged offer,
/// far above what an engine holds (each shard's link, then ten per
/// application: board memory, socket, wake eventfd, seven wake groups).
const MAX_OFFER_FDS: usize = 1 << 16;

use outboard_board::attach::{send_with_fds, MAX_FDS};

fn recv_with_fds(stream: &UnixStream, buf: &mut [u8]) -> io::Result<Vec<OwnedFd>> {
    let (n, fds, truncated) = outboard_board::attach::recv_with_fds(stream, buf)?;
    if truncated {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "hand-over descriptors cut short"));
    }
    if n < buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the running engine closed the connection before its offer",
        ));
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn offers_and_descriptors_cross_a_socket_pair() {
        let (a, b) = UnixStream::pair().unwrap();
        let (x, y) = UnixStream::pair().unwrap();
        let record: Record = Record {
            version: RECORD_VERSION,
            shard: 0,
            shards: 1,
            pid: 7,
            args: vec!["outboard".into(), "engine".into()],
            quiesced_ns: 123,
            secret: [9; 16],
            link: HandOver { kind: "af_packet".into(), iface: "eng0".into(), fds: vec![], rx_idx: 3, tx_idx: 4, tx_unsent: 0, xdp: None },
            tcp_ports: vec![7],
            udp_ports: vec![],
            fds: vec!["control socket".into()],
            arp: vec![],
            tcp: vec![],
            boards: Default::default(),
        };
        let want = serde_json::to_string(&record).unwrap();
        let json = format!("{{\"record\":{want},\"more_fds\":[\"board socket\"]}}");
        send_offer(&a, &json, &[x.as_raw_fd()]).unwrap();
        let (offer, fds) = recv_offer(&b).unwrap();
        assert_eq!(serde_json::to_string(&offer.record.unwrap()).unwrap(), want);
        assert_eq!(offer.more_fds, ["board socket"]);
        assert_eq!(fds.len(), 1);
        // The descriptor is the same socket: what goes in through it comes out of `y`.
        let s = UnixStream::from(fds.into_iter().next().unwrap());
        (&s).write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        (&y).read_exact(&mut got).unwrap();
        assert_eq!(&got, b"x");
    }

    /// More descriptors than one message carries (an engine with many
    /// applications: ten each) go in the messages that follow the offer,
    /// in order.
    #[test]
    fn an_offer_of_more_descriptors_than_one_message_carries_crosses_in_order() {
        use outboard_board::wake::{new_eventfd, ring_eventfd};
        let (a, b) = UnixStream::pair().unwrap();
        let n = MAX_FDS + 47;
        let sent: Vec<OwnedFd> = (0..n).map(|_| new_eventfd().unwrap()).collect();
        for (i, fd) in sent.iter().enumerate() {
            for _ in 0..i % 5 {
                ring_eventfd(fd.as_raw_fd());
            }
        }
        let names: Vec<String> = (0..n).map(|i| format!("fd {i}")).collect();
        let json = format!("{{\"records\":[],\"more_fds\":{},\"fds_after\":{}}}", serde_json::json!(names), n - MAX_FDS);
        let raw: Vec<RawFd> = sent.iter().map(|f| f.as_raw_fd()).collect();
        let t = std::thread::spawn(move || send_offer(&a, &json, &raw).unwrap());
        let (offer, fds) = recv_offer(&b).unwrap();
        t.join().unwrap();
        assert_eq!(offer.more_fds.len(), n);
        assert_eq!(fds.len(), n, "every descriptor came");
        for (i, fd) in fds.into_iter().enumerate() {
            // An eventfd reads its counter (nothing, EAGAIN, when it is 0).
            let mut v = [0u8; 8];
            let got = std::fs::File::from(fd).read(&mut v).map_or(0, |_| u64::from_ne_bytes(v));
            assert_eq!(got, (i % 5) as u64, "descriptor {i} in its place");
        }
    }

    #[test]
    fn a_refusal_carries_its_reason_and_no_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        send_offer(&a, &error_json("no"), &[]).unwrap();
        let (offer, fds) = recv_offer(&b).unwrap();
        assert_eq!(offer.error.as_deref(), Some("no"));
        assert!(fds.is_empty());
    }

    #[test]
    fn a_truncated_or_oversized_offer_is_an_error_not_a_panic() {
        let (a, b) = UnixStream::pair().unwrap();
        send_with_fds(&a, &(MAX_OFFER + 1).to_le_bytes(), &[]).unwrap();
        assert!(recv_offer(&b).is_err());
        let (a, b) = UnixStream::pair().unwrap();
        send_with_fds(&a, &10u64.to_le_bytes(), &[]).unwrap();
        (&a).write_all(b"{\"rec").unwrap();
        drop(a);
        assert!(recv_offer(&b).is_err());
        let (a, b) = UnixStream::pair().unwrap();
        send_with_fds(&a, &5u64.to_le_bytes(), &[]).unwrap();
        (&a).write_all(b"nope!").unwrap();
        assert!(recv_offer(&b).is_err());
    }
}
