//! Where everything sits in a board. Both sides compute the same layout from
//! the same [`BoardParams`]; the engine keeps its own copy and never reads
//! offsets or sizes back from the board.
//!
//! ```text
//! 0        header (4 KiB): magic, version, params, engine_state, the event
//!          condition (the application sleeps on it), application counters
//!          per shard s (0..shards):
//!            shard control (128 B): engine_sleeping, engine_doorbell (own cache lines)
//!            command ring   (Command × command_capacity)   application → shard s
//!            event ring     (Event × event_capacity)       shard s → application
//!          endpoints      (status record + datagram mailbox) × endpoints
//!          syncs          (u64 × syncs)
//! arena    class 0: datagram receive buffers (the engine fills them)
//!          class 1: datagram send buffers (the application fills them)
//!          class 2: stream regions (one per direction per stream)
//! ```
//!
//! Shards: every shard of the engine has its own command and event ring and
//! its own sleeping/doorbell words, so no two engine threads ever produce
//! into or consume from one ring. An endpoint belongs to one shard for its
//! whole life (its status record says which); its commands go to that
//! shard's ring. Endpoint ids are partitioned: shard `s` opens only ids with
//! `id % shards == s`. Commands that create an endpoint go to the shard the
//! application chooses (shard 0 with one shard); DETACH goes to every shard.

use crate::addr::NetAddr;
use crate::arena::{ArenaLayout, ClassSpec};
use crate::mailbox::Descriptor;
use crate::proto::{Command, Event};
use crate::ring::ring_bytes;
use crate::shm::Pod;

pub const MAGIC: u64 = u64::from_le_bytes(*b"OBBOARD1");
/// 2: `AttachReply` carries the engine's prefix and gateway, status records
/// are 256 bytes (TCP_INFO words), the header holds application counters.
/// 3: family-neutral addresses (`NetAddr` in commands, status records,
/// datagram buffers and the attach reply); one command ring, event ring and
/// sleeping/doorbell pair per shard; endpoints record their shard.
/// 4: CONNECT carries an MSS (TCP_MAXSEG before connect); SET_OPTION takes
/// CORK, USER_TIMEOUT and CONGESTION; `tcp_info::CC` says a stream's
/// congestion control (a version-3 engine would ignore them silently).
/// 5: the attach reply carries the engine's IPv6 facts (on or off, static
/// address and prefix, default router); LISTEN's flags say which family or
/// address a listener takes (`listen::IPV4_ONLY`, `IPV6_ONLY`, `ADDR`).
/// 5: the status record carries more of TCP_INFO (delivery rate, delivered,
/// D-SACK, reordering, windows, RTO totals, min RTT) and the stream's unsent
/// bytes (`notsent`) and bytes in flight (`in_flight`, for
/// TCP_NOTSENT_LOWAT and SIOCOUTQNSD).
/// 6: LISTEN carries TCP_MAXSEG (word f), IP_TOS (flags bits 8..16) and
/// IPV6_TCLASS (word f bits 16..24) for the accepted connections; CONNECT
/// carries the TOS for its SYN (flags bits 8..16) and SO_RCVBUF's window
/// clamp (word e; LISTEN word f bits 32..64); SET_OPTION takes MAXSEG and
/// TCLASS on a listener and RCV_CLAMP; UDP_BIND says the socket's family
/// (LISTEN's family bits and words c..e) (a version-5 engine would ignore
/// them silently).
/// 7: message mailboxes (`op::MSG_*`, endpoint kind `MAILBOX`, events
/// `COMPLETION`, `REMOTE_WRITE`, `TRIPWIRE`; a version-6 engine would
/// answer them as unknown commands).
/// 8: handlers through the board (`op::HANDLER_STAGE`, `HANDLER_LOAD`, `HANDLER_UNLOAD`).
/// 9: a stream's TCP_INFO words are published on request (`op::INFO`);
/// a version-8 application would read zeros for them.
pub const VERSION: u32 = 9;
/// Most shards a board can serve.
pub const MAX_SHARDS: u32 = 64;
/// Wake slots of a board (`header::APP_POLLERS`): the shared eventfd and
/// `WAKE_SLOTS - 1` wake groups, each an eventfd the application gives at
/// attach after the shared one.
pub const WAKE_SLOTS: usize = 8;
/// Bytes before a received datagram's payload in its buffer: its source address.
pub const DGRAM_HEADER: usize = 32;
const _: () = assert!(std::mem::size_of::<NetAddr>() <= DGRAM_HEADER);
pub const HEADER_BYTES: usize = 4096;

/// Header field offsets.
pub mod header {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    /// u32: `ENGINE_RUNNING`, or `ENGINE_GONE` once the engine dropped this board.
    pub const ENGINE_STATE: usize = 128;
    /// The condition the application sleeps on; every shard signals it after
    /// posting events or completing syncs.
    pub const EVENT_CONDITION: usize = 192;
    /// `BoardParams` copied here for the application's information.
    pub const PARAMS: usize = 256;
    /// `[u32; WAKE_SLOTS]`: how many of the application's threads sleep in
    /// poll/epoll on each of its wake eventfds (the ones it gave at attach).
    /// Slot 0, the shared eventfd: while non-zero, the engine writes it
    /// whenever it signals `EVENT_CONDITION` (CLAN's tripwire: a
    /// kernel-pollable wake-up beside the futex). Slot g ≥ 1, a wake group
    /// (`op::WAKE_GROUP`): its eventfd is written only for events of the
    /// endpoints placed in group g, and of endpoints in no group.
    pub const APP_POLLERS: usize = 320;
    /// u64 written by the engine at attach: the key a process forked from
    /// the application presents (`op::INHERIT`) to join listeners it
    /// inherited. Only processes that map this board can read it; the
    /// engine compares against its own copy, never this word.
    pub const INHERIT_KEY: usize = 384;
    /// `[u64; APP_COUNTERS_LEN]`: counters written only by the application
    /// (`app_counter::*` slots). The engine reads them (Relaxed) for
    /// `outboard stat` and trusts them for nothing else.
    pub const APP_COUNTERS: usize = 1024;
    pub const APP_COUNTERS_LEN: usize = 16;
}
const _: () = assert!(header::APP_COUNTERS + 8 * header::APP_COUNTERS_LEN <= HEADER_BYTES);
// Past the condition and the params (nothing else lives there), on a cache line of its own.
const _: () = assert!(header::APP_COUNTERS >= header::PARAMS + std::mem::size_of::<BoardParams>());
const _: () = assert!(header::APP_COUNTERS >= header::EVENT_CONDITION + crate::condition::CONDITION_BYTES);
const _: () = assert!(header::APP_POLLERS >= header::PARAMS + std::mem::size_of::<BoardParams>());
const _: () = assert!(header::APP_COUNTERS >= header::APP_POLLERS + 4 * WAKE_SLOTS);
const _: () = assert!(header::INHERIT_KEY >= header::APP_POLLERS + 4 * WAKE_SLOTS && header::INHERIT_KEY + 8 <= header::APP_COUNTERS);
const _: () = assert!(header::APP_COUNTERS.is_multiple_of(64));

/// Slots of the header's application counters (what a socket shim did and
/// could not do); `NAMES` gives each its `outboard stat` name.
pub mod app_counter {
    /// Sockets the shim gave to the engine.
    pub const ENGINE_SOCKETS: usize = 0;
    /// Sockets passed through to the kernel.
    pub const KERNEL_SOCKETS: usize = 1;
    /// Calls refused with a documented errno.
    pub const UNSUPPORTED: usize = 2;
    /// Socket options refused.
    pub const UNSUPPORTED_OPTIONS: usize = 3;
    /// Calls on engine sockets inherited across fork.
    pub const FORK_INHERITED: usize = 4;
    /// poll/select/epoll waits that slept.
    pub const POLL_WAITS: usize = 5;
    /// Blocking socket calls that slept.
    pub const BLOCKING_SLEEPS: usize = 6;
    /// Calls interrupted by signals.
    pub const EINTR: usize = 7;
    /// Connects to addresses the engine does not serve (given to the kernel).
    pub const KERNEL_FALLBACK_CONNECTS: usize = 8;
    /// Times the application forked holding engine listeners or streams:
    /// each child attaches and says `CHILD_OF` (it may join the listeners
    /// and take the streams over; the engine lets them linger when the
    /// application dies before all its children said so).
    pub const FORKS: usize = 9;
    /// Listeners joined after fork (inherited) and SO_REUSEPORT listeners
    /// that joined another process's port.
    pub const SHARED_LISTENERS: usize = 10;
    /// Streams taken over from the process this one was forked from.
    pub const ADOPTED_STREAMS: usize = 11;
    pub const NAMES: [&str; 12] = [
        "engine_sockets",
        "kernel_sockets",
        "unsupported",
        "unsupported_options",
        "fork_inherited",
        "poll_waits",
        "blocking_sleeps",
        "eintr",
        "kernel_fallback_connects",
        "forks",
        "shared_listeners",
        "adopted_streams",
    ];
    /// The stat name of `slot` (`slot_N` for slots without a name yet).
    pub fn name(slot: usize) -> std::borrow::Cow<'static, str> {
        match NAMES.get(slot) {
            Some(n) => std::borrow::Cow::Borrowed(n),
            None => std::borrow::Cow::Owned(format!("slot_{slot}")),
        }
    }
}
/// Offsets inside a shard's control block (`BoardLayout::shard_control`).
pub mod shard_control {
    /// u32: non-zero while the shard sleeps, saying how to wake it:
    /// `SLEEP_EVENTFD` (write the doorbell eventfd) or `SLEEP_FUTEX` (bump
    /// `ENGINE_DOORBELL` and wake it).
    pub const ENGINE_SLEEPING: usize = 0;
    /// u32: the futex a sleeping shard waits on (with its link) when `ENGINE_SLEEPING == SLEEP_FUTEX`.
    pub const ENGINE_DOORBELL: usize = 64;
    pub const BYTES: usize = 128;
}
pub const SLEEP_EVENTFD: u32 = 1;
pub const SLEEP_FUTEX: u32 = 2;
pub const ENGINE_RUNNING: u32 = 1;
pub const ENGINE_GONE: u32 = 2;

/// Sizes chosen when the board is made.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoardParams {
    pub command_capacity: u32,
    pub event_capacity: u32,
    pub endpoints: u32,
    pub mailbox_capacity: u32,
    pub syncs: u32,
    pub dgram_buffers: u32,
    pub dgram_size: u32,
    pub stream_buffer: u32,
    pub stream_buffers: u32,
    /// Shards serving the board: the engine's, whatever the application asked.
    pub shards: u32,
}
const _: () = assert!(std::mem::size_of::<BoardParams>() == 40);
// SAFETY: repr(C), u32s only.
unsafe impl Pod for BoardParams {}

impl Default for BoardParams {
    fn default() -> Self {
        BoardParams {
            command_capacity: 1024,
            event_capacity: 4096,
            endpoints: 256,
            mailbox_capacity: 64,
            syncs: 256,
            dgram_buffers: 256,
            dgram_size: 2048,
            stream_buffer: 1024 * 1024,
            stream_buffers: 32,
            shards: 1,
        }
    }
}

impl BoardParams {
    /// The smallest useful board: 16 endpoints, 8 stream regions of 16 KiB
    /// (an engine raises them to its TCP buffer size), 8 datagram buffers.
    /// For probes (`outboard run --require-engine`) and tests.
    pub fn small() -> BoardParams {
        BoardParams {
            command_capacity: 64,
            event_capacity: 64,
            endpoints: 16,
            mailbox_capacity: 8,
            syncs: 16,
            dgram_buffers: 8,
            dgram_size: 2048,
            stream_buffer: 16 * 1024,
            stream_buffers: 8,
            shards: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A count or size is zero, not a power of two where it must be, or the board would exceed `MAX_BOARD`.
    Invalid(&'static str),
}

/// Largest board we make (4 GiB).
pub const MAX_BOARD: usize = 4 << 30;

/// Endpoint status record (written by the engine only). Hot counters are
/// read as atomics at the `status::*` offsets.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointStatus {
    /// Bumped each time the slot is reused.
    pub generation: u32,
    /// `proto::kind::*`.
    pub kind: u32,
    /// TCP state number (0 closed … see outboard_tcp::State order), for stat.
    /// `info_bytes` has the Linux-numbered one.
    pub state: u32,
    /// Positive errno once the endpoint failed, else 0.
    pub error: u32,
    /// `flags::*`.
    pub flags: u32,
    /// The shard that owns the endpoint (its commands go to that shard's ring).
    pub shard: u32,
    /// Bytes placed in order in the receive region since the stream opened (Release after the bytes).
    pub rx_total: u64,
    /// Bytes of the transmit stream acknowledged and given back.
    pub tx_acked: u64,
    pub rx_offset: u64,
    pub rx_size: u64,
    pub tx_offset: u64,
    pub tx_size: u64,
    /// Bytes already queued in the transmit region when the endpoint opened
    /// (a stream adopted from a parent process; 0 otherwise): the
    /// application's write position starts here.
    pub tx_base: u64,
    /// Bytes the application queued that have not been sent yet (Linux's
    /// `tcpi_notsent_bytes`, SIOCOUTQNSD).
    pub notsent: u32,
    /// Lowest RTT seen, microseconds (`tcpi_min_rtt`; 0 before a sample).
    pub min_rtt_us: u32,
    // TCP_INFO (streams; a listener has only its state): written by the
    // engine whenever it publishes the stream's status, read word by word.
    /// Bytes `tcp_info::*` (a little-endian u64; byte 7 is 0).
    pub info_bytes: u64,
    pub rto_us: u32,
    /// Payload bytes per full segment sent.
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Smoothed RTT (0 before the first sample) and its variation.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Segments; 0x7fff_ffff while unset.
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    /// Retransmitted segments, ever.
    pub total_retrans: u32,
    pub segs_out: u32,
    pub segs_in: u32,
    /// Bytes sent and not yet acknowledged: the application's unacknowledged
    /// bytes less these are not sent yet (SIOCOUTQNSD, TCP_NOTSENT_LOWAT).
    pub in_flight: u32,
    pub retrans_bytes: u64,
    /// The endpoint's addresses (listeners and datagram sockets: local
    /// only), written before the endpoint's id is published.
    pub local: NetAddr,
    pub remote: NetAddr,
    /// Delivery rate, bytes per second (`tcpi_delivery_rate`; its
    /// app-limited bit is `tcp_info::CC_APP_LIMITED` in the CC byte).
    pub delivery_rate: u64,
    /// Segments delivered, and delivered with ECE (`tcpi_delivered`, `_ce`).
    pub delivered: u32,
    pub delivered_ce: u32,
    /// Payload bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// `tcpi_dsack_dups`, `tcpi_reord_seen`, `tcpi_rcv_ooopack`.
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    /// The peer's window and ours as last advertised, bytes (`tcpi_snd_wnd`, `tcpi_rcv_wnd`).
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    /// DupThresh in segments (`tcpi_reordering`).
    pub reordering: u32,
    /// `tcpi_total_rto` (low 16 bits) and `tcpi_total_rto_recoveries` (high 16), each saturating.
    pub total_rtos: u32,
    /// `tcpi_total_rto_time`, milliseconds.
    pub total_rto_time: u32,
}
const _: () = assert!(std::mem::size_of::<EndpointStatus>() == 256);
// SAFETY: repr(C), integers only, no padding.
unsafe impl Pod for EndpointStatus {}

/// Offsets inside an `EndpointStatus`.
pub mod status {
    pub const GENERATION: usize = 0;
    pub const KIND: usize = 4;
    pub const STATE: usize = 8;
    pub const ERROR: usize = 12;
    pub const FLAGS: usize = 16;
    pub const SHARD: usize = 20;
    pub const RX_TOTAL: usize = 24;
    pub const TX_ACKED: usize = 32;
    pub const RX_OFFSET: usize = 40;
    pub const RX_SIZE: usize = 48;
    pub const TX_OFFSET: usize = 56;
    pub const TX_SIZE: usize = 64;
    pub const TX_BASE: usize = 72;
    pub const INFO_BYTES: usize = 88;
    pub const RTO_US: usize = 96;
    pub const SND_MSS: usize = 100;
    pub const RCV_MSS: usize = 104;
    pub const UNACKED: usize = 108;
    pub const RTT_US: usize = 112;
    pub const RTTVAR_US: usize = 116;
    pub const SND_SSTHRESH: usize = 120;
    pub const SND_CWND: usize = 124;
    pub const TOTAL_RETRANS: usize = 128;
    pub const SEGS_OUT: usize = 132;
    pub const SEGS_IN: usize = 136;
    pub const RETRANS_BYTES: usize = 144;
    pub const LOCAL: usize = 152;
    pub const REMOTE: usize = 176;
    pub const IN_FLIGHT: usize = 140;
    pub const NOTSENT: usize = 80;
    pub const MIN_RTT_US: usize = 84;
    pub const DELIVERY_RATE: usize = 200;
    pub const DELIVERED: usize = 208;
    pub const DELIVERED_CE: usize = 212;
    pub const BYTES_SENT: usize = 216;
    pub const DSACK_DUPS: usize = 224;
    pub const REORD_SEEN: usize = 228;
    pub const RCV_OOOPACK: usize = 232;
    pub const SND_WND: usize = 236;
    pub const RCV_WND: usize = 240;
    pub const REORDERING: usize = 244;
    pub const TOTAL_RTOS: usize = 248;
    pub const TOTAL_RTO_TIME: usize = 252;
}

/// Byte indexes inside `EndpointStatus::info_bytes`, and their values
/// (numbered as Linux's `struct tcp_info`, so a shim copies them as they are).
pub mod tcp_info {
    pub const STATE: usize = 0;
    pub const CA_STATE: usize = 1;
    /// Consecutive retransmission timeouts without progress (saturating at 255).
    pub const RETRANSMITS: usize = 2;
    /// RTO backoff exponent (saturating at 255).
    pub const BACKOFF: usize = 3;
    /// `OPT_*` bits.
    pub const OPTIONS: usize = 4;
    pub const SND_WSCALE: usize = 5;
    pub const RCV_WSCALE: usize = 6;
    /// The stream's congestion control (`proto::opt::CC_*`, low 6 bits),
    /// `CC_APP_LIMITED` and `CC_INTERACTIVE`.
    pub const CC: usize = 7;
    /// In the CC byte: the delivery-rate sample was app-limited
    /// (`tcpi_delivery_rate_app_limited`).
    pub const CC_APP_LIMITED: u8 = 0x80;
    /// In the CC byte: the connection is in Linux's interactive
    /// delayed-ACK mode (getsockopt TCP_QUICKACK reads 0).
    pub const CC_INTERACTIVE: u8 = 0x40;

    pub const TCP_ESTABLISHED: u8 = 1;
    pub const TCP_SYN_SENT: u8 = 2;
    pub const TCP_SYN_RECV: u8 = 3;
    pub const TCP_FIN_WAIT1: u8 = 4;
    pub const TCP_FIN_WAIT2: u8 = 5;
    pub const TCP_TIME_WAIT: u8 = 6;
    pub const TCP_CLOSE: u8 = 7;
    pub const TCP_CLOSE_WAIT: u8 = 8;
    pub const TCP_LAST_ACK: u8 = 9;
    pub const TCP_LISTEN: u8 = 10;
    pub const TCP_CLOSING: u8 = 11;

    pub const OPT_TIMESTAMPS: u8 = 1;
    pub const OPT_SACK: u8 = 2;
    pub const OPT_WSCALE: u8 = 4;
    /// RFC 3168 ECN negotiated, and a CE mark received (Linux's TCPI_OPT_ECN, _ECN_SEEN).
    pub const OPT_ECN: u8 = 8;
    pub const OPT_ECN_SEEN: u8 = 16;
    /// Our SYN's data was acknowledged (RFC 7413; Linux's TCPI_OPT_SYN_DATA).
    pub const OPT_SYN_DATA: u8 = 32;

    /// The `info_bytes` word from its bytes.
    pub fn pack(b: [u8; 8]) -> u64 {
        u64::from_le_bytes(b)
    }
    pub fn unpack(w: u64) -> [u8; 8] {
        w.to_le_bytes()
    }
}
// The offsets above are the record's fields: keep them tied at compile time.
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(EndpointStatus, generation) == status::GENERATION);
    assert!(offset_of!(EndpointStatus, kind) == status::KIND);
    assert!(offset_of!(EndpointStatus, state) == status::STATE);
    assert!(offset_of!(EndpointStatus, error) == status::ERROR);
    assert!(offset_of!(EndpointStatus, flags) == status::FLAGS);
    assert!(offset_of!(EndpointStatus, shard) == status::SHARD);
    assert!(offset_of!(EndpointStatus, rx_total) == status::RX_TOTAL);
    assert!(offset_of!(EndpointStatus, tx_acked) == status::TX_ACKED);
    assert!(offset_of!(EndpointStatus, rx_offset) == status::RX_OFFSET);
    assert!(offset_of!(EndpointStatus, rx_size) == status::RX_SIZE);
    assert!(offset_of!(EndpointStatus, tx_offset) == status::TX_OFFSET);
    assert!(offset_of!(EndpointStatus, tx_size) == status::TX_SIZE);
    assert!(offset_of!(EndpointStatus, local) == status::LOCAL);
    assert!(offset_of!(EndpointStatus, remote) == status::REMOTE);
    assert!(offset_of!(EndpointStatus, info_bytes) == status::INFO_BYTES);
    assert!(offset_of!(EndpointStatus, rto_us) == status::RTO_US);
    assert!(offset_of!(EndpointStatus, snd_mss) == status::SND_MSS);
    assert!(offset_of!(EndpointStatus, rcv_mss) == status::RCV_MSS);
    assert!(offset_of!(EndpointStatus, unacked) == status::UNACKED);
    assert!(offset_of!(EndpointStatus, rtt_us) == status::RTT_US);
    assert!(offset_of!(EndpointStatus, rttvar_us) == status::RTTVAR_US);
    assert!(offset_of!(EndpointStatus, snd_ssthresh) == status::SND_SSTHRESH);
    assert!(offset_of!(EndpointStatus, snd_cwnd) == status::SND_CWND);
    assert!(offset_of!(EndpointStatus, total_retrans) == status::TOTAL_RETRANS);
    assert!(offset_of!(EndpointStatus, segs_out) == status::SEGS_OUT);
    assert!(offset_of!(EndpointStatus, segs_in) == status::SEGS_IN);
    assert!(offset_of!(EndpointStatus, retrans_bytes) == status::RETRANS_BYTES);
    assert!(offset_of!(EndpointStatus, notsent) == status::NOTSENT);
    assert!(offset_of!(EndpointStatus, in_flight) == status::IN_FLIGHT);
    assert!(offset_of!(EndpointStatus, min_rtt_us) == status::MIN_RTT_US);
    assert!(offset_of!(EndpointStatus, delivery_rate) == status::DELIVERY_RATE);
    assert!(offset_of!(EndpointStatus, delivered) == status::DELIVERED);
    assert!(offset_of!(EndpointStatus, delivered_ce) == status::DELIVERED_CE);
    assert!(offset_of!(EndpointStatus, bytes_sent) == status::BYTES_SENT);
    assert!(offset_of!(EndpointStatus, dsack_dups) == status::DSACK_DUPS);
    assert!(offset_of!(EndpointStatus, reord_seen) == status::REORD_SEEN);
    assert!(offset_of!(EndpointStatus, rcv_ooopack) == status::RCV_OOOPACK);
    assert!(offset_of!(EndpointStatus, snd_wnd) == status::SND_WND);
    assert!(offset_of!(EndpointStatus, rcv_wnd) == status::RCV_WND);
    assert!(offset_of!(EndpointStatus, reordering) == status::REORDERING);
    assert!(offset_of!(EndpointStatus, total_rtos) == status::TOTAL_RTOS);
    assert!(offset_of!(EndpointStatus, total_rto_time) == status::TOTAL_RTO_TIME);
};

pub mod flags {
    /// The peer's FIN arrived (after `rx_total` bytes).
    pub const PEER_CLOSED: u32 = 1;
    /// Established (streams).
    pub const CONNECTED: u32 = 2;
}

/// Every offset of one board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardLayout {
    pub params: BoardParams,
    /// One entry per shard (`params.shards`).
    pub shards: Vec<ShardRings>,
    pub endpoints: usize,
    /// Bytes per endpoint (status record + mailbox ring), 64-aligned.
    pub endpoint_stride: usize,
    pub syncs: usize,
    pub arena: ArenaLayout,
    pub total: usize,
}

/// Where one shard's part of the board sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRings {
    /// The shard's control block (`shard_control::*`).
    pub control: usize,
    pub command_ring: usize,
    pub event_ring: usize,
}

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

pub const CLASS_DGRAM_RX: u8 = 0;
pub const CLASS_DGRAM_TX: u8 = 1;
pub const CLASS_STREAM: u8 = 2;

impl BoardLayout {
    pub fn new(p: BoardParams) -> Result<BoardLayout, LayoutError> {
        let pow2 = |v: u32| v.is_power_of_two();
        if !pow2(p.command_capacity) || !pow2(p.event_capacity) || !pow2(p.mailbox_capacity) {
            return Err(LayoutError::Invalid("ring capacities must be powers of two"));
        }
        if p.endpoints == 0 || p.syncs == 0 || p.endpoints > 1 << 20 || p.syncs > 1 << 20 {
            return Err(LayoutError::Invalid("endpoints and syncs must be 1..=2^20"));
        }
        if p.command_capacity > 1 << 20 || p.event_capacity > 1 << 22 || p.mailbox_capacity > 1 << 16 {
            return Err(LayoutError::Invalid("ring capacity too large"));
        }
        if p.dgram_size < 64 || p.dgram_size > 65536 || !p.dgram_size.is_multiple_of(64) {
            return Err(LayoutError::Invalid("dgram_size must be a multiple of 64 in 64..=65536"));
        }
        if p.stream_buffer < 4096 || !p.stream_buffer.is_multiple_of(4096) || p.stream_buffer > 1 << 30 {
            return Err(LayoutError::Invalid("stream_buffer must be a multiple of 4096 up to 1 GiB"));
        }
        if p.shards == 0 || p.shards > MAX_SHARDS {
            return Err(LayoutError::Invalid("shards must be 1..=64"));
        }
        let mut at = HEADER_BYTES;
        let mut shards = Vec::with_capacity(p.shards as usize);
        for _ in 0..p.shards {
            let control = at;
            at += shard_control::BYTES;
            let command_ring = at;
            at = align(at + ring_bytes::<Command>(p.command_capacity), 64);
            let event_ring = at;
            at = align(at + ring_bytes::<Event>(p.event_capacity), 64);
            shards.push(ShardRings { control, command_ring, event_ring });
        }
        let endpoints = at;
        let endpoint_stride = align(
            std::mem::size_of::<EndpointStatus>() + ring_bytes::<Descriptor>(p.mailbox_capacity),
            64,
        );
        at += endpoint_stride * p.endpoints as usize;
        let syncs = align(at, 64);
        at = syncs + 8 * p.syncs as usize;
        let mut classes = Vec::new();
        for (size, count) in [
            (p.dgram_size, p.dgram_buffers),
            (p.dgram_size, p.dgram_buffers),
            (p.stream_buffer, p.stream_buffers),
        ] {
            at = align(at, 4096);
            classes.push(ClassSpec { size, count, offset: at });
            at = at
                .checked_add(size as usize * count as usize)
                .ok_or(LayoutError::Invalid("board too large"))?;
        }
        let total = align(at, 4096);
        if total > MAX_BOARD {
            return Err(LayoutError::Invalid("board larger than 4 GiB"));
        }
        Ok(BoardLayout {
            params: p,
            shards,
            endpoints,
            endpoint_stride,
            syncs,
            arena: ArenaLayout { classes },
            total,
        })
    }
    /// Board offset of endpoint `ep`'s status record (`ep < params.endpoints`).
    #[inline]
    pub fn endpoint_status(&self, ep: u32) -> usize {
        assert!(ep < self.params.endpoints);
        self.endpoints + ep as usize * self.endpoint_stride
    }
    /// Board offset of shard `shard`'s `shard_control` word at `field` (`shard < params.shards`).
    pub fn shard_control(&self, shard: u32, field: usize) -> usize {
        self.shards[shard as usize].control + field
    }
    /// The shard that may open endpoint `ep` (ids are partitioned: `ep % shards`).
    pub fn shard_of(&self, ep: u32) -> u32 {
        ep % self.params.shards
    }
    /// Board offset of endpoint `ep`'s datagram mailbox ring.
    pub fn endpoint_mailbox(&self, ep: u32) -> usize {
        self.endpoint_status(ep) + std::mem::size_of::<EndpointStatus>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_ordered_aligned_and_in_bounds() {
        let l = BoardLayout::new(BoardParams::default()).unwrap();
        let s0 = l.shards[0];
        assert!(s0.control >= HEADER_BYTES && s0.command_ring >= s0.control + shard_control::BYTES);
        assert!(s0.event_ring > s0.command_ring && l.endpoints > s0.event_ring && l.syncs > l.endpoints);
        let last = l.arena.classes.last().unwrap();
        assert!(last.offset + last.size as usize * last.count as usize <= l.total);
        for c in &l.arena.classes {
            assert_eq!(c.offset % 4096, 0);
        }
        assert_eq!(l.endpoint_stride % 64, 0);
        assert_eq!(l.endpoint_mailbox(1) % 64, 0);
    }

    #[test]
    fn every_shard_has_rings_of_its_own() {
        let l = BoardLayout::new(BoardParams { shards: 4, ..Default::default() }).unwrap();
        assert_eq!(l.shards.len(), 4);
        for w in l.shards.windows(2) {
            assert!(w[1].control >= w[0].event_ring + ring_bytes::<Event>(l.params.event_capacity));
        }
        for s in &l.shards {
            assert_eq!(s.control % 64, 0);
            assert_eq!(s.command_ring % 64, 0);
            assert_eq!(s.event_ring % 64, 0);
        }
        assert!(l.endpoints >= l.shards[3].event_ring + ring_bytes::<Event>(l.params.event_capacity));
        assert_eq!((l.shard_of(5), l.shard_of(8)), (1, 0));
        assert!(BoardLayout::new(BoardParams { shards: 0, ..Default::default() }).is_err());
        assert!(BoardLayout::new(BoardParams { shards: MAX_SHARDS + 1, ..Default::default() }).is_err());
    }

    #[test]
    fn app_counters_fit_the_header_and_every_slot_is_named() {
        assert_eq!(app_counter::NAMES.len(), app_counter::ADOPTED_STREAMS + 1);
        assert_eq!(app_counter::name(app_counter::EINTR), "eintr");
        assert_eq!(app_counter::name(app_counter::ENGINE_SOCKETS), "engine_sockets");
        assert_eq!(app_counter::name(12), "slot_12");
    }

    #[test]
    fn status_records_stay_64_aligned_and_info_bytes_round_trip() {
        let l = BoardLayout::new(BoardParams::default()).unwrap();
        assert_eq!(l.endpoint_status(1) % 64, 0);
        assert_eq!((l.endpoint_status(0) + status::RETRANS_BYTES) % 8, 0);
        let b = [tcp_info::TCP_ESTABLISHED, 3, 0, 2, tcp_info::OPT_SACK | tcp_info::OPT_WSCALE, 7, 9, 0];
        assert_eq!(tcp_info::unpack(tcp_info::pack(b)), b);
    }

    #[test]
    fn bad_params_are_refused_not_panicked() {
        let bad = [
            BoardParams { command_capacity: 1000, ..Default::default() },
            BoardParams { endpoints: 0, ..Default::default() },
            BoardParams { dgram_size: 10, ..Default::default() },
            BoardParams { stream_buffer: 1000, ..Default::default() },
            BoardParams { stream_buffer: 1 << 30, stream_buffers: 100, ..Default::default() },
        ];
        for p in bad {
            assert!(BoardLayout::new(p).is_err(), "{p:?}");
        }
    }
}
