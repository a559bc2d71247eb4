//! TCP Fast Open (RFC 7413) in one connection: data in the SYN.
//!
//! The cookies themselves (the server's MAC of the client address, the
//! client's per-destination cache, the listener's limit of pending Fast Open
//! requests) live in `outboard-stack`, which holds the secret and the cache;
//! a connection only carries what it was given and reports what it learned.
//!
//! Client (`set_fast_open`): with no cookie the SYN carries a cookie request
//! and goes at once; with one the SYN waits for the first data (Linux's
//! `TCP_FASTOPEN_CONNECT` / `MSG_FASTOPEN` defer) and carries the cookie and
//! as much of the queued data as fits. Data the SYN-ACK does not acknowledge
//! goes again after the handshake (RFC 7413 §4.2.2). A retransmitted SYN is a
//! plain SYN, without data or cookie (RFC 7413 §4.1.3). The outcome
//! (`take_fast_open_report`) lets the stack cache the cookie and mark a
//! destination whose SYNs with data are lost.
//!
//! Server (`accept_fast_open`): the stack validated the cookie; the data of
//! the SYN is queued for the application at once and the SYN-ACK
//! acknowledges it (RFC 7413 §4.2.2). The SYN-ACK carries a cookie when the
//! stack gives one (a request, or an invalid cookie).

use super::Connection;
use outboard_time::Instant;
use outboard_wire::tcp::MAX_OPTIONS_LEN;
use outboard_wire::{FastOpenCookie, SeqNumber, TcpRepr};

/// What a connection knows of Fast Open.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct FastOpen {
    /// Client: the cookie for our SYN (empty: a request); None: not used.
    client: Option<FastOpenCookie>,
    /// Client: the SYN waits for data (a cookie is known).
    defer: bool,
    /// Client: payload bytes our first SYN carried.
    syn_data: usize,
    /// Client: the SYN went more than once.
    syn_retransmitted: bool,
    /// Client: the SYN-ACK acknowledged our SYN's data (Linux's `syn_data_acked`).
    pub(super) syn_data_acked: bool,
    /// Client: the SYN-ACK's outcome, until the stack takes it.
    report: Option<FastOpenReport>,
    /// Server: the cookie our SYN-ACK carries.
    synack_cookie: Option<FastOpenCookie>,
    /// Server: the SYN's data was accepted (a passive Fast Open).
    pub(super) passive: bool,
}

/// What the SYN-ACK told an active Fast Open (`Connection::take_fast_open_report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FastOpenReport {
    /// The cookie the SYN-ACK carried (non-empty), to cache for the destination.
    pub cookie: Option<FastOpenCookie>,
    /// Our SYN carried data and the SYN-ACK acknowledged it.
    pub data_acked: bool,
    /// Our SYN carried data that the SYN-ACK did not acknowledge.
    pub data_not_acked: bool,
    /// The SYN with data timed out, and the SYN-ACK neither acknowledged the
    /// data nor carried a cookie: the path presumably drops SYNs with data
    /// (Linux's `syn_drop` in `tcp_rcv_fastopen_synack`).
    pub syn_loss: bool,
}

impl Connection {
    /// Active open with Fast Open: call right after `connect`, before the
    /// first `poll_transmit`. `cookie` is the destination's cached cookie:
    /// None sends a cookie request in the SYN now; a cookie holds the SYN
    /// back until data is queued (or the sending side is shut), then sends
    /// it with the cookie and the data that fits.
    pub fn set_fast_open(&mut self, cookie: Option<FastOpenCookie>) {
        if self.state != super::State::SynSent || self.snd_max != self.iss {
            return;
        }
        self.tfo.client = Some(cookie.unwrap_or_else(FastOpenCookie::request));
        self.tfo.defer = cookie.is_some_and(|c| !c.is_request());
    }

    /// Passive open of a SYN that the stack's listener took for Fast Open:
    /// as `accept`, and with `accept_data` the SYN's payload is queued for
    /// the application at once and the SYN-ACK acknowledges it (RFC 7413
    /// §4.2.2). `synack_cookie` goes in the SYN-ACK (the answer to a cookie
    /// request or to an invalid cookie).
    #[allow(clippy::too_many_arguments)]
    pub fn accept_fast_open(
        cfg: &crate::Config,
        tuple: super::FourTuple,
        syn: &TcpRepr,
        payload: &[u8],
        iss: SeqNumber,
        now: Instant,
        accept_data: bool,
        synack_cookie: Option<FastOpenCookie>,
    ) -> Connection {
        let mut c = Connection::accept(cfg, tuple, syn, iss, now);
        c.tfo.synack_cookie = synack_cookie;
        if accept_data && !payload.is_empty() {
            c.tfo.passive = true;
            c.stats.segments_in += 1;
            c.stats.bytes_in += payload.len() as u64;
            let room = c.recv_buf.free().min(usize::from(u16::MAX));
            let data = &payload[..payload.len().min(room)];
            if !data.is_empty() {
                c.place_data(now, syn.seq + 1, data);
                // The SYN's data is a whole request: deliver it at once.
                c.rcv_pushed = true;
            }
        }
        c
    }

    /// Whether this connection was opened by a SYN whose data was accepted
    /// (a passive Fast Open; the listener counts those still in SYN-RECEIVED).
    pub fn is_passive_fast_open(&self) -> bool {
        self.tfo.passive
    }

    /// The SYN-ACK's outcome for an active Fast Open, once: the stack caches
    /// the cookie and counts the result.
    pub fn take_fast_open_report(&mut self) -> Option<FastOpenReport> {
        self.tfo.report.take()
    }

    /// Whether the SYN is held back for data (a cookie is known, nothing queued yet).
    pub(super) fn syn_deferred(&self) -> bool {
        self.tfo.defer && self.snd_max == self.iss && self.send_buf.is_empty() && !self.fin_queued
    }

    /// The Fast Open option and payload length of the SYN about to go:
    /// the first SYN only (a retransmission is a plain SYN, RFC 7413 §4.1.3).
    pub(super) fn fast_open_syn(&mut self, first: bool) -> (Option<FastOpenCookie>, usize) {
        let synack = self.state == super::State::SynReceived;
        if synack {
            return (if self.active_open { None } else { self.tfo.synack_cookie }, 0);
        }
        let Some(cookie) = self.tfo.client else { return (None, 0) };
        if !first {
            self.tfo.syn_retransmitted = true;
            return (None, 0);
        }
        let len = if cookie.is_request() {
            0
        } else {
            // As Linux's `tcp_send_syn_data`: an MSS less the largest option space.
            let room = usize::from(self.cfg.mss).saturating_sub(MAX_OPTIONS_LEN).max(1);
            self.send_buf.len().min(room)
        };
        self.tfo.syn_data = len;
        (Some(cookie), len)
    }

    /// SYN-SENT: the SYN-ACK `repr` acknowledged our SYN. Data our SYN
    /// carried and the SYN-ACK did not acknowledge becomes unsent again, to
    /// go after the handshake (RFC 7413 §4.2.2; Linux marks it lost and
    /// resends it at once, which is what sending it as new data does here).
    pub(super) fn fast_open_on_synack(&mut self, repr: &TcpRepr) {
        let Some(_) = self.tfo.client else { return };
        let sent = self.tfo.syn_data;
        let acked = sent > 0 && repr.ack == self.iss + 1 + sent;
        let cookie = repr.options.fast_open.filter(|c| !c.is_request());
        if acked {
            self.send_buf.consume(sent);
            self.snd_buf_seq += sent;
        } else if sent > 0 {
            // Only the SYN was taken: the data goes again as new data.
            self.snd_max = self.snd_una;
            self.snd_nxt = self.snd_una;
        }
        self.tfo.syn_data_acked = acked;
        self.tfo.report = Some(FastOpenReport {
            cookie,
            data_acked: acked,
            data_not_acked: sent > 0 && !acked,
            syn_loss: self.tfo.syn_retransmitted && sent > 0 && !acked && cookie.is_none(),
        });
    }
}
