//! The RFC 9293 connection state machine.
//!
//! Call order (quinn style): feed inputs with `handle_segment`, `handle_timeout`,
//! `handle_icmp`, `send`/`recv`/`shutdown_write`/`close`/`abort`; then drain
//! `poll_transmit` until `None`, read `poll_event` until `None`, and arm a
//! timer for `poll_timeout`.
//!
//! The work is split by concern: `input` (segment arrival, RFC 9293 §3.10.7),
//! `ack` (acknowledgment processing, RTT, window update), `recovery` (RFC 5681
//! fast retransmit, RFC 3042 limited transmit, RFC 6582 NewReno, RFC 6675 SACK
//! recovery), `prr` (RFC 6937 sending rate in SACK recovery), `rack` (RFC 8985
//! RACK-TLP loss detection and tail loss probes), `blackhole` (RFC 4821
//! black-hole detection), `delack` (how long an ACK may wait, as Linux
//! times it), `output` (what to send next), `options` (SYN negotiation,
//! timestamps, SACK blocks), `timers` (the timer table and what each
//! expiry does), `memory` (what the connection costs, and freeing ring
//! storage it can no longer use),
//! `in_place` (rings in lent storage, in-place send and receive, and the
//! fused receive checksum), `predict` (header prediction: the fast path for
//! a bulk receiver's in-order segments, exact to the full one).

mod ack;
mod blackhole;
mod delack;
mod ecn;
mod fastopen;
mod in_place;
mod input;
mod memory;
mod options;
mod output;
mod predict;
mod prr;
mod rack;
mod rate;
mod recovery;
mod sockopt;
mod timers;
mod types;
#[cfg(test)]
mod tests;

pub use blackhole::MtuProbing;
pub use ecn::EcnMode;
pub use fastopen::FastOpenReport;
pub use in_place::Prefilled;
pub use types::{ConnStats, Error, Event, FourTuple, IcmpError, State, Transmit};

use crate::assembler::Assembler;
use crate::cc::{CongestionControl, Controller};
use crate::config::Config;
use crate::ring::RingBuffer;
use crate::rtt::RttEstimator;
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpRepr};
use std::collections::VecDeque;
use timers::{Timer, TimerTable};

/// RFC 9293 §3.7.1: the send MSS when the peer sends no MSS option.
const DEFAULT_MSS: usize = 536;
/// Segments acknowledged at once at the start of a connection (quick-ACK) so
/// the peer's slow start is not slowed by delayed ACKs.
const QUICKACK_SEGMENTS: u32 = 16;

/// Congestion-avoidance state, numbered as Linux's `tcpi_ca_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum CaState {
    #[default]
    Open = 0,
    /// Duplicate ACKs or SACKed data seen, no recovery yet.
    Disorder = 1,
    /// Fast recovery (RFC 6675 / RFC 6582).
    Recovery = 3,
    /// After a retransmission timeout, until the data then in flight is acknowledged.
    Loss = 4,
}

/// A connection's `TCP_INFO`-style facts (`Connection::info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnInfo {
    pub ca_state: CaState,
    /// Consecutive retransmission timeouts without progress (Linux `tcpi_retransmits`).
    pub rto_count: u32,
    /// Current RTO backoff exponent (Linux `tcpi_backoff`).
    pub backoff: u32,
    pub rto_us: u32,
    /// 0 before the first RTT sample.
    pub srtt_us: u32,
    pub rttvar_us: u32,
    /// Payload bytes per full segment we send (options excluded).
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub cwnd_segs: u32,
    /// 0x7fff_ffff while unset (Linux's TCP_INFINITE_SSTHRESH).
    pub ssthresh_segs: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked_segs: u32,
    /// Negotiated options: RFC 7323 timestamps and window scaling, RFC 2018 SACK.
    pub timestamps: bool,
    pub sack: bool,
    pub wscale: bool,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub retransmits: u64,
    pub retransmitted_bytes: u64,
    pub segments_in: u64,
    pub segments_out: u64,
    /// RFC 3168 ECN negotiated (Linux's TCPI_OPT_ECN), and a CE mark
    /// received on it (TCPI_OPT_ECN_SEEN).
    pub ecn: bool,
    pub ecn_seen: bool,
    /// The adaptive DupThresh in segments (Linux `tcpi_reordering`).
    pub reordering: u32,
    /// Whether reordering was seen (RFC 8985 RACK.reordering_seen; Linux `tcpi_reord_seen` > 0).
    pub reord_seen: bool,
    /// RACK's reordering window outside recovery (RFC 8985 §6.2 step 4:
    /// reo_wnd_mult * min_rtt / 4, at most SRTT), microseconds; 0 without SACK.
    pub rack_reo_wnd_us: u32,
    /// RFC 8985 §7 tail loss probes sent.
    pub tlp_probes: u64,
    /// The congestion controller is CUBIC (else NewReno).
    pub cubic: bool,
    /// Our SYN carried data that the SYN-ACK acknowledged (RFC 7413; Linux's TCPI_OPT_SYN_DATA).
    pub syn_data: bool,
    /// Delivery rate in bytes per second (Linux `tcpi_delivery_rate`, from
    /// `tcp_rate.c`'s estimate; 0 before a sample and without SACK), and
    /// whether that sample was app-limited (`tcpi_delivery_rate_app_limited`).
    pub delivery_rate: u64,
    pub delivery_rate_app_limited: bool,
    /// Linux's interactive delayed-ACK mode (`icsk_ack.pingpong`): ACKs wait
    /// for replies to carry them. TCP_QUICKACK reads its negation.
    pub interactive: bool,
    /// Segments delivered, and those acknowledged with ECE (`tcpi_delivered`, `tcpi_delivered_ce`).
    pub delivered: u64,
    pub delivered_ce: u64,
    /// Payload bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// D-SACKed segments (`tcpi_dsack_dups`), reordering events
    /// (`tcpi_reord_seen`), segments received out of order (`tcpi_rcv_ooopack`).
    pub dsack_dups: u64,
    pub reord_events: u64,
    pub rcv_ooopack: u64,
    /// The peer's window and the window we last advertised, bytes (`tcpi_snd_wnd`, `tcpi_rcv_wnd`).
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    /// Retransmission timeouts, timeout episodes, and milliseconds spent in
    /// finished episodes (`tcpi_total_rto`, `_rto_recoveries`, `_rto_time`).
    pub total_rto: u64,
    pub total_rto_recoveries: u64,
    pub total_rto_time_ms: u32,
    /// Bytes queued and not yet sent (`tcpi_notsent_bytes`, SIOCOUTQNSD).
    pub notsent: u32,
    /// Bytes of the send queue sent and not yet acknowledged.
    pub in_flight: u32,
    /// Lowest RTT seen, microseconds (`tcpi_min_rtt`; 0 before a sample).
    pub min_rtt_us: u32,
}

/// One TCP connection: the RFC 9293 transmission control block plus the
/// RFC 7323 / 2018 / 6675 / 6298 state, buffers and timers. See the module
/// docs for the call order. The buffers take memory only while they can hold
/// data (`memory_in_use`; the `memory` module says when they are freed).
#[derive(Debug)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Connection {
    cfg: Config,
    tuple: FourTuple,
    state: State,
    /// Opened by `connect` (SYN-RECEIVED then means a simultaneous open, a
    /// full socket in Linux's terms, not a listener's request).
    active_open: bool,

    // Send sequence space (RFC 9293 §3.3.1). `snd_max` is the highest
    // sequence number ever sent: `snd_nxt` falls back below it after an RTO
    // (go-back-N) and ACKs are validated against `snd_max`.
    iss: SeqNumber,
    snd_una: SeqNumber,
    snd_nxt: SeqNumber,
    snd_max: SeqNumber,
    /// Peer's window in bytes (already scaled).
    snd_wnd: usize,
    /// Largest window the peer ever offered (RFC 5961 §5.2 MAX.SND.WND, SWS §3.8.6.2.1).
    max_snd_wnd: usize,
    snd_wl1: SeqNumber,
    snd_wl2: SeqNumber,
    /// Sequence number of the first byte in `send_buf`.
    snd_buf_seq: SeqNumber,
    send_buf: RingBuffer,
    /// The application closed its sending side: a FIN follows the queued data.
    fin_queued: bool,

    // Receive sequence space.
    irs: SeqNumber,
    rcv_nxt: SeqNumber,
    /// Right edge of the window we advertised; never moves left (RFC 7323 §2.4).
    rcv_adv: SeqNumber,
    /// In-order unread bytes, followed by out-of-order bytes at their offsets.
    recv_buf: RingBuffer,
    assembler: Assembler,
    /// Sequence number of the peer's FIN once seen (possibly still out of order).
    peer_fin: Option<SeqNumber>,
    /// The peer's FIN has been consumed (RCV.NXT is past it).
    fin_received: bool,
    /// Sequence numbers of the latest out-of-order arrivals, newest first: the
    /// SACK blocks containing them go first (RFC 2018 §4).
    sack_recent: [Option<SeqNumber>; 4],
    /// RFC 2883 D-SACK: the range of a duplicate segment, reported first in
    /// the SACK option of the next segment we send.
    dsack: Option<(SeqNumber, SeqNumber)>,

    // Options.
    /// Sender MSS from the peer's MSS option (payload + options excluded).
    send_mss: usize,
    /// Largest segment seen from the peer (delayed-ACK accounting).
    rcv_mss: usize,
    /// Both SYNs carried window scale (RFC 7323 §2.2).
    wscale_ok: bool,
    snd_wscale: u8,
    rcv_wscale: u8,
    sack_ok: bool,
    ts_ok: bool,
    ts_recent: u32,
    ts_recent_at: Instant,
    last_ack_sent: SeqNumber,

    rtt: RttEstimator,
    /// Karn-timed segment: (end sequence number, time sent); cleared on retransmission.
    rtt_timing: Option<(SeqNumber, Instant)>,
    /// Our timestamp clock at the latest retransmission: older echoes give no RTT sample.
    rexmit_ts: Option<u32>,
    cc: Controller,
    rec: recovery::Recovery,

    timers: TimerTable,
    /// Consecutive retransmission timeouts without progress.
    rto_count: u32,
    persist_backoff: u32,
    probe_pending: bool,
    /// The persist timer fired with a nonzero window: send what fits even if
    /// small (RFC 9293 §3.8.6.2.1 override timeout).
    persist_override: bool,
    keepalive_pending: bool,
    keepalive_sent: u32,
    last_rx: Instant,

    /// The segment `next_from_nxt` just chose ends a burst that the
    /// congestion window or the peer's window stops: `emit` sets PSH on it.
    push_burst_end: bool,
    /// End of the last new data sent with PSH (Linux's `pushed_seq`): new
    /// data more than half the peer's largest window past it is pushed.
    pushed_seq: SeqNumber,
    /// In-order data arrived that the peer pushed (PSH), or that a
    /// retransmission made contiguous, since `take_push` last looked: the
    /// receiving application should be told now rather than with the next
    /// batch (RFC 9293 §3.9.1: a receiver delivers pushed data promptly).
    #[serde(default)]
    rcv_pushed: bool,
    /// An ACK must go out on the next `poll_transmit`.
    ack_now: bool,
    /// Bytes received since the last ACK we sent (delayed-ACK accounting).
    unacked_rx_bytes: usize,
    /// Segments still to be acknowledged at once (quick-ACK at connection
    /// start and after an idle longer than the RTO, `delack`).
    quickacks: u32,
    /// The delayed-ACK timeout's estimate (`delack`).
    #[serde(default)]
    delack: delack::DelAck,
    /// Challenge-ACK rate limit (RFC 5961 §7): window start and count in it.
    challenge_window: (Instant, u32),
    /// When we last answered an out-of-window pure ACK.
    last_oow_ack: Option<Instant>,

    pending_rst: Option<TcpRepr>,
    events: VecDeque<Event>,
    error: Option<Error>,
    soft_error: Option<IcmpError>,
    /// `close()` was called: the application reads no more (RFC 9293 §3.10.4).
    app_closed: bool,
    /// A `send` came up short: report `Writable` once space opens.
    want_writable: bool,
    /// During `handle_segment_prefilled` only: the payload that
    /// `prefill_payload` already wrote into the receive ring.
    #[serde(skip)]
    rx_prefilled: Option<Prefilled>,
    /// The probe timeout was armed at this instant for a flight of more than
    /// one segment, and nothing but sending has happened since: later new
    /// data sent at the same instant would arm it to the same deadline, so it
    /// is armed once per burst (as Linux's `tcp_schedule_loss_probe`, called
    /// once after `tcp_write_xmit`'s loop). Cleared by every input.
    #[serde(skip)]
    tlp_burst: Option<Instant>,
    /// Bumped whenever the receive ring's storage is replaced or freed, so
    /// a `Prefilled` from before never vouches for bytes that are gone.
    recv_epoch: u32,
    /// RFC 3168 state (`ecn`).
    ecn: ecn::Ecn,
    /// TCP_CORK, TCP_USER_TIMEOUT (`sockopt`).
    sockopt: sockopt::SockOpts,
    /// RFC 7413 Fast Open (`fastopen`).
    tfo: fastopen::FastOpen,
    /// RFC 4821 black-hole detection (`blackhole`).
    blackhole: blackhole::BlackHole,
    /// Delivery rate and TCP_INFO counters (`rate`).
    rate: rate::Rate,
    stats: ConnStats,
}

impl Connection {
    /// A connection read back from a record (live upgrade, serde): checks
    /// what the accessors rely on, so a damaged record is an error here and
    /// never a panic later.
    pub fn check_restored(&self) -> Result<(), String> {
        self.send_buf.check().map_err(|e| format!("send buffer: {e}"))?;
        self.recv_buf.check().map_err(|e| format!("receive buffer: {e}"))?;
        if self.send_mss == 0 {
            return Err("send MSS 0".into());
        }
        if self.snd_wscale > 14 || self.rcv_wscale > 14 {
            return Err(format!("window scales {} / {} over 14 (RFC 7323 §2.3)", self.snd_wscale, self.rcv_wscale));
        }
        Ok(())
    }

    fn new(cfg: &Config, tuple: FourTuple, state: State, iss: SeqNumber, now: Instant) -> Connection {
        let mss = usize::from(cfg.mss.max(64));
        let cfg = cfg.clone();
        Connection {
            tuple,
            state,
            active_open: false,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            snd_buf_seq: iss + 1,
            send_buf: RingBuffer::new(cfg.send_buffer.max(1)),
            fin_queued: false,
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            recv_buf: RingBuffer::new(cfg.recv_buffer.max(1)),
            assembler: Assembler::new(cfg.max_ooo_ranges.max(1)),
            peer_fin: None,
            fin_received: false,
            sack_recent: [None; 4],
            dsack: None,
            send_mss: DEFAULT_MSS.min(mss),
            rcv_mss: DEFAULT_MSS.min(mss),
            wscale_ok: false,
            snd_wscale: 0,
            rcv_wscale: 0,
            sack_ok: false,
            ts_ok: false,
            ts_recent: 0,
            ts_recent_at: now,
            last_ack_sent: SeqNumber(0),
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            rtt_timing: None,
            rexmit_ts: None,
            cc: Controller::new(cfg.cc, DEFAULT_MSS.min(mss)),
            rec: recovery::Recovery::new(iss),
            timers: TimerTable::default(),
            rto_count: 0,
            persist_backoff: 0,
            probe_pending: false,
            persist_override: false,
            keepalive_pending: false,
            keepalive_sent: 0,
            last_rx: now,
            push_burst_end: false,
            pushed_seq: iss + 1,
            rcv_pushed: false,
            ack_now: false,
            unacked_rx_bytes: 0,
            quickacks: QUICKACK_SEGMENTS,
            delack: delack::DelAck::default(),
            challenge_window: (now, 0),
            last_oow_ack: None,
            pending_rst: None,
            events: VecDeque::new(),
            error: None,
            soft_error: None,
            app_closed: false,
            want_writable: false,
            rx_prefilled: None,
            tlp_burst: None,
            recv_epoch: 0,
            ecn: ecn::Ecn::default(),
            sockopt: sockopt::SockOpts::default(),
            tfo: fastopen::FastOpen::default(),
            blackhole: blackhole::BlackHole::default(),
            rate: rate::Rate::default(),
            stats: ConnStats::default(),
            cfg,
        }
    }

    /// Active open: SYN-SENT; the first `poll_transmit` yields the SYN.
    pub fn connect(cfg: &Config, tuple: FourTuple, iss: SeqNumber, now: Instant) -> Connection {
        let mut c = Connection::new(cfg, tuple, State::SynSent, iss, now);
        // Our shift goes in the SYN; it only takes effect if the peer's SYN-ACK carries one too.
        c.rcv_wscale = options::offered_wscale(cfg);
        c.active_open = true;
        c
    }

    /// Passive open from a listener that accepted `syn`: SYN-RECEIVED; the first `poll_transmit` yields the SYN-ACK.
    pub fn accept(cfg: &Config, tuple: FourTuple, syn: &TcpRepr, iss: SeqNumber, now: Instant) -> Connection {
        let mut c = Connection::new(cfg, tuple, State::SynReceived, iss, now);
        c.rcv_wscale = options::offered_wscale(cfg);
        c.on_peer_syn(now, syn);
        c
    }

    /// A connection rebuilt from a valid SYN-cookie ACK: ESTABLISHED at once.
    /// `iss` is our cookie ISN, `irs` the peer's ISN, `mss` the MSS the cookie carried.
    /// The ACK itself (which may carry data) must then be fed with `handle_segment`.
    ///
    /// A cookie cannot remember window scaling or SACK-permitted, so both are
    /// off (the cookie SYN-ACK must not offer them); timestamps are on when the ACK carries them.
    pub fn from_cookie(
        cfg: &Config,
        tuple: FourTuple,
        iss: SeqNumber,
        irs: SeqNumber,
        mss: u16,
        ack: &TcpRepr,
        now: Instant,
    ) -> Connection {
        let mut c = Connection::new(cfg, tuple, State::Established, iss, now);
        c.irs = irs;
        c.rcv_nxt = irs + 1;
        // The cookie SYN-ACK offered an unscaled window of the free buffer.
        c.rcv_adv = c.rcv_nxt + c.rcv_room().min(usize::from(u16::MAX));
        c.last_ack_sent = c.rcv_nxt;
        c.snd_una = iss + 1;
        c.snd_nxt = iss + 1;
        c.snd_max = iss + 1;
        c.snd_buf_seq = iss + 1;
        c.snd_wl1 = irs;
        c.snd_wl2 = iss + 1;
        c.set_send_mss(usize::from(mss.clamp(64, cfg.mss.max(64))));
        if cfg.timestamps {
            if let Some((tsval, _)) = ack.options.timestamps {
                c.ts_ok = true;
                c.ts_recent = tsval;
                c.ts_recent_at = now;
            }
        }
        c.cc = Controller::new(cfg.cc, c.data_mss());
        c.push_event(Event::Connected);
        c.arm_keepalive(now);
        c
    }

    /// Queues an event unless the same one is already waiting: the queue stays
    /// bounded (at most one of each kind) however rarely the application polls.
    #[inline]
    fn push_event(&mut self, e: Event) {
        // The last one queued first: a stream of segments pushes Readable again and again.
        if self.events.back() != Some(&e) && !self.events.contains(&e) {
            self.events.push_back(e);
        }
    }

    pub fn handle_segment(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        self.stats.segments_in += 1;
        self.stats.bytes_in += payload.len() as u64;
        self.tlp_burst = None;
        self.on_segment(now, repr, payload);
        // A CE note is for this segment only, whatever became of it.
        self.ecn_drop_note();
        self.note_unacked(now);
        self.release_idle_buffers();
    }

    /// An ICMP error about this connection (RFC 1122 §4.2.3.9, RFC 5461,
    /// RFC 1191), handled as Linux's `tcp_v4_err` does: see `on_icmp`.
    /// Prefer `handle_icmp_quoting` when the quoted sequence number is known.
    pub fn handle_icmp(&mut self, now: Instant, err: IcmpError) {
        self.tlp_burst = None;
        self.on_icmp(now, err);
        self.release_idle_buffers();
    }

    /// `handle_icmp` for an error that quotes the sequence number of the
    /// segment it concerns (ICMP quotes at least the first 8 bytes of our TCP
    /// header). RFC 5927 §4.1, as Linux's `tcp_v4_err`: an error about a
    /// sequence number outside [SND.UNA, SND.NXT] concerns nothing we have in
    /// flight and is ignored, so a blind attacker cannot abort a connection;
    /// a listener's half-open connection has sent only its SYN-ACK, and takes
    /// an error quoting exactly its ISS (Linux's `tcp_req_err`). Returns false
    /// when the error was ignored, for its sequence number or because the
    /// connection is in TIME-WAIT or CLOSED (the caller counts it).
    pub fn handle_icmp_quoting(&mut self, now: Instant, seq: SeqNumber, err: IcmpError) -> bool {
        if matches!(self.state, State::TimeWait | State::Closed) {
            // Nothing left to tell (Linux drops an ICMP error for a TIME-WAIT socket).
            return false;
        }
        let hi = if self.state == State::SynReceived && !self.active_open { self.iss } else { self.snd_max };
        if seq < self.snd_una || seq > hi {
            return false;
        }
        self.handle_icmp(now, err);
        true
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.tlp_burst = None;
        if !self.check_user_timeout(now) {
            self.on_timeout(now);
        }
        self.release_idle_buffers();
    }

    /// The earliest instant at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.timers.next(), self.user_timeout_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        // The caller drains this until None: the last call sees what the
        // others sent (the user timeout's start).
        self.note_unacked(now);
        self.transmit(now)
    }

    /// Stands for a `poll_transmit` that would return None, when a few
    /// loads show that it would: an ESTABLISHED connection with every byte
    /// sent (SND.NXT at the end of the queue, so not going back after an
    /// RTO either), no ACK, RST or probe owed, no retransmission queued,
    /// not in recovery. Then it does what that call would do (note the user
    /// timeout's start) and returns true; otherwise it changes nothing and
    /// returns false, and the caller polls as before. Linux asks the same
    /// of a socket after input (`tcp_data_snd_check`, `tcp_ack_snd_check`).
    /// The stack uses it so that a request/response exchange polls nothing
    /// after a reply that needs no ACK of its own, nor again after the
    /// request's one segment.
    pub fn nothing_to_send(&mut self, now: Instant) -> bool {
        // The tests that fail most often first: a bulk sender has bytes
        // left, a bulk receiver owes every other ACK.
        let quiet = self.snd_buf_seq + self.send_buf.len() == self.snd_nxt
            && !self.ack_now
            && self.state == State::Established
            && self.pending_rst.is_none()
            && !self.probe_pending
            && !self.keepalive_pending
            && !self.rec.rack.probe_due
            && self.rec.rack_rexmit.is_none()
            && !self.rec.rexmit_una
            && !self.rec.in_recovery;
        if quiet {
            self.note_unacked(now);
        }
        quiet
    }

    /// Whether `poll_event` has something (the stack uses this to tell the
    /// application which connections to look at).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues bytes for sending; returns how many fit.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        self.check_sendable()?;
        if data.is_empty() {
            return Ok(0);
        }
        self.rate_check_app_limited();
        let n = self.send_buf.push(data);
        self.sent_short(n, data.len())
    }

    /// Whether `send` may queue bytes now, and if not the error it returns.
    fn check_sendable(&self) -> Result<(), Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.fin_queued || self.app_closed {
            return Err(Error::Closed);
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => Ok(()),
            State::Closed => Err(Error::NotConnected),
            _ => Err(Error::Closed),
        }
    }

    /// The result of queueing `n` of `wanted` (> 0) bytes: a short send asks
    /// for `Writable`, nothing queued is `WouldBlock`.
    fn sent_short(&mut self, n: usize, wanted: usize) -> Result<usize, Error> {
        if n < wanted {
            self.want_writable = true;
        }
        if n == 0 {
            return Err(Error::WouldBlock);
        }
        Ok(n)
    }

    /// Reads in-order bytes. `Ok(0)` only at end of stream (peer FIN, all read).
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if !self.recv_buf.is_empty() {
            if buf.is_empty() {
                return Ok(0);
            }
            let n = self.recv_buf.pop(buf);
            self.on_app_read();
            self.release_idle_buffers();
            return Ok(n);
        }
        if self.fin_received {
            return Ok(0);
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.state {
            State::Closed => Err(Error::NotConnected),
            _ => Err(Error::WouldBlock),
        }
    }

    /// Asks for a `Writable` event when send-buffer space next opens, as a
    /// `send` that came up short does. For applications that check
    /// `send_capacity` first and so never make a short `send`.
    pub fn request_writable(&mut self) {
        self.want_writable = true;
    }

    /// Whether the reader should be told now: in-order data arrived pushed
    /// (PSH, SYN data, or a hole filled) since the last call, which this
    /// clears, or the receive buffer is at least half full (the window we
    /// advertise is closing). A host that batches its wake-ups of a reader
    /// wakes at once then: a conforming sender pushes the segment that
    /// empties or stalls its queue, so unpushed data means more is coming.
    pub fn take_push(&mut self) -> bool {
        std::mem::take(&mut self.rcv_pushed) || self.recv_buf.len() >= self.recv_buf.capacity() / 2
    }

    /// Bytes ready to read: the receive ring's queued bytes (what
    /// `recv_consume` may consume).
    pub fn recv_available(&self) -> usize {
        self.recv_buf.len()
    }

    /// Free space in the send queue.
    pub fn send_capacity(&self) -> usize {
        if self.fin_queued || self.error.is_some() {
            0
        } else {
            self.send_buf.free()
        }
    }

    /// Half close: send FIN after the queued data.
    pub fn shutdown_write(&mut self) {
        if self.fin_queued {
            return;
        }
        match self.state {
            State::SynSent | State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
        self.release_idle_buffers();
    }

    /// Full close (RFC 9293 §3.10.4); data arriving afterwards is answered with RST.
    pub fn close(&mut self) {
        match self.state {
            // Nothing was sent to the peer that it must hear about (§3.10.4 SYN-SENT).
            State::SynSent => {
                self.app_closed = true;
                self.enter_closed();
            }
            _ if !self.recv_buf.is_empty() => {
                // Unread data is lost: tell the peer with RST rather than a FIN
                // that would pretend a clean close (RFC 2525 §2.17).
                self.abort();
            }
            _ => {
                self.app_closed = true;
                self.shutdown_write();
            }
        }
        self.release_idle_buffers();
    }

    /// Abort: send RST and go to CLOSED (RFC 9293 §3.10.5).
    pub fn abort(&mut self) {
        match self.state {
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                self.pending_rst = Some(self.make_rst());
            }
            _ => {}
        }
        self.app_closed = true;
        self.enter_closed();
        self.release_idle_buffers();
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn tuple(&self) -> FourTuple {
        self.tuple
    }

    pub fn stats(&self) -> ConnStats {
        let mut s = self.stats;
        s.srtt_us = self.rtt.srtt().map_or(0, |d| d.as_micros() as u64);
        s.rttvar_us = self.rtt.rttvar().as_micros() as u64;
        s.rto_us = self.rtt.rto().as_micros() as u64;
        s.cwnd = self.cc.cwnd();
        s.ssthresh = self.cc.ssthresh();
        s.sacked_bytes = if self.sack_ok { self.rec.scoreboard.sacked_bytes() } else { 0 };
        s.bytes_in_flight = self.bytes_in_flight();
        s.send_mss = self.send_mss;
        s.snd_wscale = self.snd_wscale;
        s.rcv_wscale = self.rcv_wscale;
        s.send_queue = self.send_buf.len();
        s.recv_queue = self.recv_buf.len();
        s.ooo_ranges = self.assembler.range_count();
        s.memory = self.memory_in_use();
        s.reordering = self.rec.reordering;
        s.ecn = self.ecn.ok;
        s.ecn_reductions = self.ecn.reductions;
        s.blackhole_events = self.blackhole.events;
        s
    }

    /// What Linux's `TCP_INFO` reports, from this connection's own state:
    /// cheap (no allocation, no scoreboard walk), for publishing often.
    pub fn info(&self) -> ConnInfo {
        let mss = self.data_mss().max(1);
        let segs = |bytes: usize| u32::try_from(bytes / mss).unwrap_or(u32::MAX);
        // Linux's TCP_INFINITE_SSTHRESH for "not set yet".
        let ssthresh = match self.cc.ssthresh() {
            s if s >= 0x7fff_ffff => 0x7fff_ffff,
            s => segs(s),
        };
        let ca_state = if self.rec.in_recovery {
            CaState::Recovery
        } else if self.rec.rto_recover.is_some() {
            CaState::Loss
        } else if self.rec.dupacks > 0 || (self.sack_ok && !self.rec.scoreboard.is_empty()) {
            CaState::Disorder
        } else {
            CaState::Open
        };
        let to_us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        ConnInfo {
            ca_state,
            rto_count: self.rto_count,
            backoff: self.rtt.backoff_count(),
            rto_us: to_us(self.rtt.rto()),
            srtt_us: self.rtt.srtt().map_or(0, to_us),
            rttvar_us: to_us(self.rtt.rttvar()),
            snd_mss: u32::try_from(mss).unwrap_or(u32::MAX),
            rcv_mss: u32::try_from(self.rcv_mss).unwrap_or(u32::MAX),
            cwnd_segs: segs(self.cc.cwnd()),
            ssthresh_segs: ssthresh,
            unacked_segs: u32::try_from(recovery::seq_sub(self.snd_max, self.snd_una).div_ceil(mss)).unwrap_or(u32::MAX),
            timestamps: self.ts_ok,
            sack: self.sack_ok,
            wscale: self.wscale_ok,
            snd_wscale: if self.wscale_ok { self.snd_wscale } else { 0 },
            rcv_wscale: if self.wscale_ok { self.rcv_wscale } else { 0 },
            retransmits: self.stats.retransmits,
            retransmitted_bytes: self.stats.retransmitted_bytes,
            segments_in: self.stats.segments_in,
            segments_out: self.stats.segments_out,
            ecn: self.ecn.ok,
            ecn_seen: self.ecn.seen,
            reordering: self.rec.reordering,
            reord_seen: self.rec.rack.reordering_seen,
            rack_reo_wnd_us: if self.sack_ok { to_us(self.rack_reo_wnd_base()) } else { 0 },
            tlp_probes: self.stats.tlp_probes,
            cubic: self.cfg.cc == crate::cc::CcKind::Cubic,
            syn_data: self.tfo.syn_data_acked,
            delivery_rate: self.rate.bytes_per_sec(),
            delivery_rate_app_limited: self.rate.rate_app_limited,
            interactive: self.in_pingpong(),
            delivered: self.rate.delivered_segs,
            delivered_ce: self.rate.delivered_ce,
            bytes_sent: self.stats.bytes_out,
            dsack_dups: self.rate.dsack_dups,
            reord_events: self.rate.reord_seen,
            rcv_ooopack: self.rate.rcv_ooopack,
            snd_wnd: u32::try_from(self.snd_wnd).unwrap_or(u32::MAX),
            rcv_wnd: u32::try_from(recovery::seq_sub(self.rcv_adv, self.rcv_nxt)).unwrap_or(u32::MAX),
            total_rto: self.stats.rto_events,
            total_rto_recoveries: self.rate.rto_recoveries,
            total_rto_time_ms: u32::try_from(self.rate.rto_time.as_millis()).unwrap_or(u32::MAX),
            notsent: u32::try_from(recovery::seq_sub(self.snd_buf_seq + self.send_buf.len(), self.snd_max.max(self.snd_buf_seq)))
                .unwrap_or(u32::MAX),
            min_rtt_us: self.rate.min_rtt.or(self.rtt.min_rtt()).map_or(0, to_us),
            in_flight: u32::try_from(recovery::seq_sub(self.snd_nxt.max(self.snd_max).min(self.snd_buf_seq + self.send_buf.len()), self.snd_buf_seq))
                .unwrap_or(u32::MAX),
        }
    }

    /// The largest segment the link takes for new data now (TSO/GSO; 0 = one
    /// MSS): `Config::tso_max_bytes` at run time.
    pub fn set_tso_max(&mut self, bytes: usize) {
        self.cfg.tso_max_bytes = bytes;
    }

    /// TCP_NODELAY at run time: `true` turns Nagle off.
    pub fn set_nodelay(&mut self, nodelay: bool) {
        self.cfg.nodelay = nodelay;
    }

    /// SO_KEEPALIVE / TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT at run time.
    pub fn set_keepalive(&mut self, now: Instant, keepalive: Option<(Duration, Duration, u32)>) {
        self.cfg.keepalive = keepalive;
        self.keepalive_sent = 0;
        self.timers.stop(Timer::Keepalive);
        self.arm_keepalive(now);
    }

    /// The last ICMP soft error seen (RFC 1122 §4.2.3.9): worth reporting
    /// (EHOSTUNREACH rather than ETIMEDOUT) when the connection then times out.
    pub fn soft_error(&self) -> Option<IcmpError> {
        self.soft_error
    }

    /// True once the connection is CLOSED and holds nothing: the table may free it.
    pub fn is_finished(&self) -> bool {
        self.state == State::Closed && self.pending_rst.is_none()
    }
}
