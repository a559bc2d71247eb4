//! What a transfer run reports. Everything here is derived from virtual time
//! and seeded state only — no wall clock — so two runs of one seed compare equal.

use crate::fault::FaultStats;
use crate::network::NetStats;
use outboard_stack::Stack;
use outboard_tcp::ConnStats;
use serde::Serialize;

/// The outcome of `run_transfer`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferReport {
    /// Every direction delivered all bytes, byte-exact, with end of stream, in
    /// time, and then both ends closed cleanly.
    pub ok: bool,
    /// Why not, when `ok` is false.
    pub reason: Option<String>,
    pub seed: u64,
    pub cc: String,
    pub direction: String,
    /// Bytes to send in each direction.
    pub bytes: u64,
    /// Bytes received, all directions together.
    pub bytes_delivered: u64,
    /// SHA-256 of what was sent equals that of what was received, in every direction.
    pub sha256_match: bool,
    /// The earliest offset (in any direction) where received data differs from
    /// what was sent, or where bytes arrived beyond the end of the stream.
    pub first_bad_offset: Option<u64>,
    /// Virtual time from the connect call to the last end of stream (or to the stop).
    pub virtual_seconds: f64,
    /// When both ends had finished the close handshake (TIME-WAIT or CLOSED);
    /// None if the run failed before or during the close.
    pub closed_at_s: Option<f64>,
    /// Bytes delivered (all directions) · 8 / virtual_seconds, in Mbit/s.
    pub goodput_mbit: f64,
    /// Segments retransmitted, both connections' ends together.
    pub retransmits: u64,
    /// Fault counters summed over all links.
    pub faults: FaultStats,
    pub directions: Vec<DirectionReport>,
    pub hosts: Vec<HostReport>,
    pub net: NetStats,
}

/// One direction of the transfer ("a->b" or "b->a").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionReport {
    pub name: String,
    /// Bytes the sending stack accepted.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub end_of_stream: bool,
    pub first_bad_offset: Option<u64>,
    pub sent_sha256: String,
    pub received_sha256: String,
    pub sha256_match: bool,
    /// Virtual time at which end of stream arrived after all bytes.
    pub completed_at_s: Option<f64>,
    /// This direction's bytes · 8 / its completion time (or the stop time), in Mbit/s.
    pub goodput_mbit: f64,
    /// The sending end's TCP (cwnd, RTT, recovery counters).
    pub sender: ConnSummary,
    /// The receiving end's TCP (duplicates, drops, out-of-order ranges).
    pub receiver: ConnSummary,
    /// What the link from sender to receiver did.
    pub link: FaultStats,
}

/// A serialisable copy of a connection's counters, plus peaks seen during the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ConnSummary {
    pub segments_in: u64,
    pub segments_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub retransmits: u64,
    pub retransmitted_bytes: u64,
    pub rto_events: u64,
    pub fast_retransmits: u64,
    pub srtt_us: u64,
    pub rttvar_us: u64,
    pub rto_us: u64,
    /// cwnd at the end of the run.
    pub cwnd: usize,
    pub max_cwnd: usize,
    pub ssthresh: usize,
    pub max_sacked_bytes: usize,
    pub send_mss: usize,
    pub dup_segments_in: u64,
    pub dropped_segments: u64,
    pub challenge_acks: u64,
}

impl ConnSummary {
    /// Takes the latest counters and keeps the peaks.
    pub fn update(&mut self, s: &ConnStats) {
        let (max_cwnd, max_sacked) = (
            self.max_cwnd.max(s.cwnd),
            self.max_sacked_bytes.max(s.sacked_bytes),
        );
        *self = ConnSummary {
            segments_in: s.segments_in,
            segments_out: s.segments_out,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            retransmits: s.retransmits,
            retransmitted_bytes: s.retransmitted_bytes,
            rto_events: s.rto_events,
            fast_retransmits: s.fast_retransmits,
            srtt_us: s.srtt_us,
            rttvar_us: s.rttvar_us,
            rto_us: s.rto_us,
            cwnd: s.cwnd,
            max_cwnd,
            ssthresh: s.ssthresh,
            max_sacked_bytes: max_sacked,
            send_mss: s.send_mss,
            dup_segments_in: s.dup_segments_in,
            dropped_segments: s.dropped_segments,
            challenge_acks: s.challenge_acks,
        };
    }
}

/// One host's stack counters and connections at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostReport {
    pub frames_in: u64,
    pub frames_out: u64,
    pub drops_malformed: u64,
    pub drops_checksum: u64,
    pub drops_not_for_us: u64,
    pub memory_in_use: usize,
    /// Every connection the stack still holds, for post-mortems of failed runs.
    pub connections: Vec<ConnState>,
}

/// A connection as the stack sees it at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnState {
    pub local: String,
    pub remote: String,
    pub state: String,
    pub send_queue: usize,
    pub recv_queue: usize,
    pub bytes_in_flight: usize,
    pub ooo_ranges: usize,
    pub rto_us: u64,
}

impl HostReport {
    pub fn new(stack: &Stack) -> HostReport {
        let s = stack.stats();
        HostReport {
            frames_in: s.frames_in,
            frames_out: s.frames_out,
            drops_malformed: s.drops_malformed,
            drops_checksum: s.drops_checksum,
            drops_not_for_us: s.drops_not_for_us,
            memory_in_use: stack.memory_in_use(),
            connections: stack
                .tcp_connections()
                .into_iter()
                .map(|(_, tuple, state, st)| ConnState {
                    local: tuple.local.to_string(),
                    remote: tuple.remote.to_string(),
                    state: format!("{state:?}"),
                    send_queue: st.send_queue,
                    recv_queue: st.recv_queue,
                    bytes_in_flight: st.bytes_in_flight,
                    ooo_ranges: st.ooo_ranges,
                    rto_us: st.rto_us,
                })
                .collect(),
        }
    }
}

/// Handed to the progress hook every `progress_interval_ms` of virtual time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub virtual_seconds: f64,
    /// Bytes to send in each direction.
    pub bytes: u64,
    /// Bytes received so far: [a->b, b->a] (b->a stays 0 for a one-way transfer).
    pub received: [u64; 2],
    pub retransmits: u64,
    /// Sender cwnd per direction.
    pub cwnd: [usize; 2],
}

impl TransferReport {
    /// One line for logs and test failures: enough to reproduce the run.
    pub fn summary(&self) -> String {
        format!(
            "ok={} seed={} cc={} dir={} bytes={} delivered={} sha_match={} first_bad={:?} t={:.3}s goodput={:.2}Mbit/s rtx={} faults={:?} reason={:?}",
            self.ok,
            self.seed,
            self.cc,
            self.direction,
            self.bytes,
            self.bytes_delivered,
            self.sha256_match,
            self.first_bad_offset,
            self.virtual_seconds,
            self.goodput_mbit,
            self.retransmits,
            self.faults,
            self.reason
        )
    }
}
