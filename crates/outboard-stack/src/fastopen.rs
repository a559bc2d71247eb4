//! TCP Fast Open (RFC 7413) in the stack: the server's cookie check and its
//! per-listener limit of pending Fast Open connections, and the client's
//! per-destination cookie cache with Linux's SYN-loss back-off.
//!
//! Defaults as Linux with `net.ipv4.tcp_fastopen = 1`: a client uses Fast
//! Open only when the application asks (`Stack::tcp_fast_open`); a listener
//! only once the application sets a queue length (`TCP_FASTOPEN`,
//! `Stack::tcp_listen_fast_open`), which Linux also requires (with bit 2 of
//! the sysctl, which it does not set by default).

use crate::listener::Listener;
use crate::stats::StackStats;
use crate::tcp_table::TcpTable;
use crate::ConnId;
use outboard_tcp::{Connection, FastOpenReport, FourTuple, State};
use outboard_time::{Duration, Instant};
use outboard_wire::{FastOpenCookie, TcpRepr};
use crate::flowhash::FlowMap;
use std::net::IpAddr;

/// Destinations the client cache holds (Linux keeps Fast Open cookies in
/// its TCP metrics cache, bounded likewise); the least recently used goes first.
pub(crate) const CACHE_CAP: usize = 1024;

/// A destination's cache entry (Linux's `tcp_fastopen_metrics`).
#[derive(Debug, Clone, Copy)]
struct CacheEntry {
    cookie: Option<FastOpenCookie>,
    /// Consecutive handshakes whose SYN with data seemed lost.
    syn_loss: u32,
    last_loss: Instant,
    used: u64,
}

/// The client's cookies, per destination address.
#[derive(Debug, Default)]
pub(crate) struct CookieCache {
    map: FlowMap<IpAddr, CacheEntry>,
    clock: u64,
}

/// What a client connection to a destination does with Fast Open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientPlan {
    /// A cookie is known: the SYN waits for data and carries both.
    Cookie(FastOpenCookie),
    /// None known: the SYN asks for one.
    Request,
    /// The destination loses SYNs with data: a plain SYN for now.
    Disabled,
}

impl CookieCache {
    /// As Linux's `tcp_fastopen_cookie_check`: after two or more lost SYNs
    /// with data, Fast Open is off for the destination for 60 s << losses
    /// since the last one (RFC 7413 §4.1.3: remember paths that drop them).
    pub(crate) fn plan(&mut self, now: Instant, dst: IpAddr) -> ClientPlan {
        self.clock += 1;
        let Some(e) = self.map.get_mut(&dst) else { return ClientPlan::Request };
        e.used = self.clock;
        if e.syn_loss > 1 {
            let hold = Duration::from_secs(60).saturating_mul(1u32 << e.syn_loss.min(16));
            if now.saturating_duration_since(e.last_loss) < hold {
                return ClientPlan::Disabled;
            }
        }
        e.cookie.map_or(ClientPlan::Request, ClientPlan::Cookie)
    }

    /// The SYN-ACK's outcome for `dst` (Linux's `tcp_fastopen_cache_set`).
    pub(crate) fn learn(&mut self, now: Instant, dst: IpAddr, r: &FastOpenReport) {
        self.clock += 1;
        if !self.map.contains_key(&dst) && self.map.len() >= CACHE_CAP {
            if let Some(old) = self.map.iter().min_by_key(|(_, e)| e.used).map(|(a, _)| *a) {
                self.map.remove(&old);
            }
        }
        let e = self.map.entry(dst).or_insert(CacheEntry { cookie: None, syn_loss: 0, last_loss: now, used: 0 });
        e.used = self.clock;
        if let Some(c) = r.cookie {
            e.cookie = Some(c);
        }
        if r.syn_loss {
            e.syn_loss = e.syn_loss.saturating_add(1);
            e.last_loss = now;
        } else {
            e.syn_loss = 0;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// What the listener does with a SYN's Fast Open option.
pub(crate) struct ServerPlan {
    /// Take the SYN's data (a valid cookie, data, room in the queue).
    pub accept_data: bool,
    /// The cookie our SYN-ACK carries (a request, or an invalid cookie).
    pub synack_cookie: Option<FastOpenCookie>,
}

impl Listener {
    /// Fast Open connections of this listener still in SYN-RECEIVED (Linux's
    /// `fastopenq.qlen`): forgets those that completed or died.
    fn tfo_pending(&mut self, conns: &FlowMap<ConnId, crate::tcp_table::Entry>) -> usize {
        self.tfo_pending
            .retain(|id| conns.get(id).is_some_and(|e| e.conn.state() == State::SynReceived));
        self.tfo_pending.len()
    }
}

impl TcpTable {
    /// RFC 7413 §4.2 at a listener, as Linux's `tcp_try_fastopen`: None when
    /// the SYN opens an ordinary connection.
    pub(crate) fn fast_open_plan(
        &mut self,
        lid: crate::ListenerId,
        tuple: &FourTuple,
        repr: &TcpRepr,
        payload: &[u8],
        stats: &mut StackStats,
    ) -> Option<ServerPlan> {
        let cookie = repr.options.fast_open?;
        let l = self.listeners.get_mut(&lid)?;
        if l.fastopen_qlen == 0 {
            return None;
        }
        if l.tfo_pending(&self.conns) >= l.fastopen_qlen {
            // Linux's TCPFastOpenListenOverflow: neither data nor a cookie.
            stats.tcp_fastopen_listen_overflow += 1;
            return None;
        }
        let (local, client) = (tuple.local.ip(), tuple.remote.ip());
        if cookie.is_request() {
            stats.tcp_fastopen_cookie_requests += 1;
            return Some(ServerPlan { accept_data: false, synack_cookie: Some(self.tfo_key.cookie(local, client)) });
        }
        if !self.tfo_key.valid(local, client, &cookie) {
            // RFC 7413 §4.2.2: the data is dropped (only the SYN is
            // acknowledged) and a valid cookie goes back.
            stats.tcp_fastopen_passive_fail += 1;
            return Some(ServerPlan { accept_data: false, synack_cookie: Some(self.tfo_key.cookie(local, client)) });
        }
        Some(ServerPlan { accept_data: !payload.is_empty(), synack_cookie: None })
    }

    /// Opens a listener's connection for a SYN the `plan` covers. A passive
    /// Fast Open goes straight to the accept queue (its data is readable
    /// before the handshake completes, RFC 7413 §4.2.2, as Linux queues the
    /// child socket at once); otherwise the SYN queue as usual.
    pub(crate) fn fast_open_accept(
        &mut self,
        now: Instant,
        lid: crate::ListenerId,
        tuple: FourTuple,
        (repr, payload): (&TcpRepr, &[u8]),
        plan: ServerPlan,
        stats: &mut StackStats,
    ) {
        let iss = self.isn.isn(now, tuple.local, tuple.remote);
        let mut conn = Connection::accept_fast_open(
            &self.listener_cfg(lid, &tuple),
            tuple,
            repr,
            payload,
            iss,
            now,
            plan.accept_data,
            plan.synack_cookie,
        );
        conn.set_tos(self.listener_tos(lid, &tuple));
        if conn.is_passive_fast_open() {
            stats.tcp_fastopen_passive += 1;
            let id = self.insert(conn, crate::tcp_table::Owner::Queued(lid));
            if let Some(l) = self.listeners.get_mut(&lid) {
                l.tfo_pending.push(id);
                l.accept_queue.push_back(id);
            }
        } else {
            if let Some(l) = self.listeners.get_mut(&lid) {
                l.syn_queue_len += 1;
            }
            self.insert(conn, crate::tcp_table::Owner::Embryonic(lid));
            stats.tcp_syn_queue_adds += 1;
        }
    }

    /// A client connection's SYN-ACK outcome: cache and count it.
    pub(crate) fn fast_open_learn(&mut self, now: Instant, id: ConnId, stats: &mut StackStats) {
        let Some(e) = self.conns.get_mut(&id) else { return };
        let Some(r) = e.conn.take_fast_open_report() else { return };
        let dst = e.conn.tuple().remote.ip();
        if r.data_acked {
            stats.tcp_fastopen_active += 1;
        }
        if r.data_not_acked {
            stats.tcp_fastopen_active_fail += 1;
        }
        if r.syn_loss {
            stats.tcp_fastopen_syn_loss += 1;
        }
        if r.cookie.is_some() {
            stats.tcp_fastopen_cookies_learned += 1;
        }
        self.tfo_cache.learn(now, dst, &r);
    }
}
