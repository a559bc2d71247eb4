//! Endpoint-wide counters: one per drop reason and per protocol event.

/// What an endpoint counted. Every frame dropped is in exactly one `drop_*` counter.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Stats {
    pub frames_in: u64,
    pub frames_out: u64,
    /// Not a frame of this protocol at all, or a field that does not fit (parser errors).
    pub drop_malformed: u64,
    /// Another version of the protocol, or a kind this version does not know.
    pub drop_unsupported: u64,
    /// To a mailbox not bound here (answered with an error, except datagrams).
    pub drop_no_mailbox: u64,
    /// Named a session of ours that is not this one (answered with an error).
    pub drop_stale_session: u64,
    /// A message longer than this endpoint's largest.
    pub drop_too_big: u64,
    /// Datagram fragments refused for the reassembly memory bound.
    pub drop_reassembly_memory: u64,
    /// Partial datagrams that timed out.
    pub drop_reassembly_timeout: u64,
    /// Datagrams refused by a full mailbox.
    pub drop_mailbox_full: u64,
    /// Reliable frames seen before (acknowledged again).
    pub drop_duplicate: u64,
    /// Reliable frames above the credit given.
    pub drop_beyond_credit: u64,
    /// Reliable frames of an older incarnation or session of the flow.
    pub drop_stale_flow: u64,
    /// New reliable flows refused because the flow table is full.
    pub drop_flow_table_full: u64,
    /// Acks, responses and errors that match nothing outstanding here.
    pub drop_stray: u64,

    pub datagrams_sent: u64,
    pub messages_sent: u64,
    pub messages_acked: u64,
    pub messages_failed: u64,
    pub message_frames_retransmitted: u64,
    pub bad_fragments: u64,
    pub acks_sent: u64,
    pub probes_sent: u64,

    pub calls_started: u64,
    pub calls_completed: u64,
    pub calls_failed: u64,
    pub requests_retransmitted: u64,
    /// Requests handed to a mailbox: each call id at most once.
    pub requests_executed: u64,
    pub replies_resent: u64,
    pub duplicate_requests: u64,
    pub stale_requests: u64,
    pub requests_abandoned: u64,

    pub lookups_answered: u64,
    pub errors_sent: u64,
    /// Errors not sent for the rate limit.
    pub errors_suppressed: u64,
}
