//! Listeners (RFC 9293 §3.10.7.2, LISTEN): a bounded SYN queue of embryonic
//! connections, SYN cookies once it is full (RFC 4987 §3.6), and an accept
//! queue bounded by the backlog.

use crate::stats::StackStats;
use crate::tcp_table::{Owner, TcpTable};
use crate::ConnId;
use outboard_tcp::{Connection, FourTuple};
use outboard_time::{Duration, Instant};
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::collections::VecDeque;

/// How long after the last cookie we sent an ACK is still checked as a
/// cookie. Outside it a bare ACK to a listener is just answered with RST, so
/// an attacker can't probe cookies while the listener isn't under a flood.
const COOKIE_WINDOW: Duration = Duration::from_secs(180);
/// RFC 9293 §3.7.1: the MSS assumed when a SYN carries none.
const DEFAULT_MSS: u16 = 536;

#[derive(Debug)]
pub(crate) struct Listener {
    pub backlog: usize,
    /// Embryonic (SYN-RECEIVED) connections of this listener.
    pub syn_queue_len: usize,
    /// Established connections waiting for `tcp_accept`.
    pub accept_queue: VecDeque<ConnId>,
    pub cookies_sent_at: Option<Instant>,
    /// Which address families it takes connections of.
    pub families: Families,
    /// RFC 7413: the most Fast Open connections pending (in SYN-RECEIVED)
    /// at once; 0: Fast Open off (Linux's `TCP_FASTOPEN` queue length).
    pub fastopen_qlen: usize,
    /// The Fast Open connections that may still be pending (`fastopen`).
    pub tfo_pending: Vec<ConnId>,
    /// TCP_MAXSEG set on the listener (0: none): its SYN-ACKs advertise at
    /// most this and its connections never send larger segments (Linux's
    /// accepted socket inherits `user_mss`).
    pub user_mss: u16,
    /// IP_TOS set on the listener: the DSCP of its IPv4 SYN-ACKs and of
    /// the IPv4 connections it accepts (Linux's child inherits `inet->tos`).
    pub tos: u8,
    /// IPV6_TCLASS set on the listener: the same for IPv6 (`np->tclass`).
    pub tclass: u8,
    /// SO_RCVBUF set on the listener, as a window clamp (`Config::rcv_clamp`;
    /// 0: none): its connections' SYN-ACK window and scale come from it.
    pub rcv_clamp: usize,
}

/// A listener's settings, without its queues: what a live upgrade records
/// of an application's listener and `Stack::tcp_listen_settings` opens
/// again in the new engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerSettings {
    pub port: u16,
    pub backlog: usize,
    pub families: Families,
    pub fastopen_qlen: usize,
    pub user_mss: u16,
    pub tos: u8,
    pub tclass: u8,
    pub rcv_clamp: usize,
}

/// The address families a listener takes (a segment of another family finds
/// no listener: RST, as for a closed port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Families {
    /// IPv4 and IPv6 (the engine's services; Linux's dual-stack `::` listener).
    #[default]
    Both,
    /// IPv4 only (an AF_INET listener).
    Ipv4,
    /// IPv6 only (an AF_INET6 listener with IPV6_V6ONLY).
    Ipv6,
    /// Connections to this one local address only (a listener bound to it).
    Addr(std::net::IpAddr),
}

impl Families {
    /// Whether a connection could be for both (Linux's bind conflict for
    /// sockets on one port: same family and wildcard or same address).
    pub fn overlaps(&self, other: &Families) -> bool {
        use Families::*;
        match (self, other) {
            (Both, _) | (_, Both) => true,
            (Ipv4, Ipv4) | (Ipv6, Ipv6) => true,
            (Ipv4, Ipv6) | (Ipv6, Ipv4) => false,
            (Ipv4, Addr(a)) | (Addr(a), Ipv4) => a.is_ipv4(),
            (Ipv6, Addr(a)) | (Addr(a), Ipv6) => a.is_ipv6(),
            (Addr(a), Addr(b)) => a == b,
        }
    }

    pub(crate) fn takes(&self, tuple: &FourTuple) -> bool {
        self.takes_addr(tuple.local.ip())
    }

    /// Whether a packet to our local address `local` is for this one.
    pub(crate) fn takes_addr(&self, local: std::net::IpAddr) -> bool {
        match self {
            Families::Both => true,
            Families::Ipv4 => local.is_ipv4(),
            Families::Ipv6 => local.is_ipv6(),
            Families::Addr(a) => local == *a,
        }
    }
}

impl Listener {
    pub(crate) fn new(backlog: usize) -> Listener {
        Listener {
            backlog: backlog.max(1),
            syn_queue_len: 0,
            accept_queue: VecDeque::new(),
            cookies_sent_at: None,
            families: Families::Both,
            fastopen_qlen: 0,
            tfo_pending: Vec::new(),
            user_mss: 0,
            tos: 0,
            tclass: 0,
            rcv_clamp: 0,
        }
    }

    /// What `ListenerSettings` carries of this listener.
    pub(crate) fn settings(&self, port: u16) -> ListenerSettings {
        ListenerSettings {
            port,
            backlog: self.backlog,
            families: self.families,
            fastopen_qlen: self.fastopen_qlen,
            user_mss: self.user_mss,
            tos: self.tos,
            tclass: self.tclass,
            rcv_clamp: self.rcv_clamp,
        }
    }

    pub(crate) fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() >= self.backlog
    }

    pub(crate) fn memory(&self) -> usize {
        64 + self.accept_queue.len() * core::mem::size_of::<ConnId>()
    }
}

impl TcpTable {
    /// A segment for a listening port that matched no connection. Returns a
    /// control segment to send (RST, or a SYN-ACK carrying a cookie).
    pub(crate) fn listener_input(
        &mut self,
        now: Instant,
        lid: crate::ListenerId,
        tuple: FourTuple,
        repr: &TcpRepr,
        payload: &[u8],
        stats: &mut StackStats,
    ) -> Option<TcpRepr> {
        let flags = repr.flags;
        // RFC 9293 §3.10.7.2: first check for an RST (ignore it), then an ACK
        // (reset, unless it returns a cookie), then a SYN.
        if flags.rst() {
            stats.drops_tcp_listener += 1;
            return None;
        }
        if flags.ack() {
            if flags.syn() {
                return crate::tcp_input::reset_for(repr, payload.len());
            }
            return self.cookie_ack(now, lid, tuple, repr, payload, stats);
        }
        if !flags.syn() {
            stats.drops_tcp_listener += 1;
            return None;
        }
        if flags.fin() {
            // SYN+FIN opens nothing real (a scanner's probe or a forged
            // segment): dropped, as Linux (LISTEN: "if (th->fin) goto
            // discard") and FreeBSD (drop_synfin) do, rather than spending
            // SYN-queue state or a cookie on it.
            stats.drops_tcp_listener += 1;
            return None;
        }
        // Invariant: the caller looked the listener up by port just before.
        let l = self.listeners.get_mut(&lid).expect("listener exists");
        if l.accept_queue_full() {
            // As Linux does: no point starting handshakes nobody will accept;
            // the client retransmits its SYN.
            stats.drops_tcp_accept_queue_full += 1;
            return None;
        }
        if l.syn_queue_len < self.syn_queue_cap {
            // RFC 7413: a cookie request, a cookie, data in the SYN.
            if let Some(plan) = self.fast_open_plan(lid, &tuple, repr, payload, stats) {
                self.fast_open_accept(now, lid, tuple, (repr, payload), plan, stats);
                return None;
            }
            // Invariant: looked up above.
            let l = self.listeners.get_mut(&lid).expect("listener exists");
            l.syn_queue_len += 1;
            let iss = self.isn.isn(now, tuple.local, tuple.remote);
            let mut conn = Connection::accept(&self.listener_cfg(lid, &tuple), tuple, repr, iss, now);
            conn.set_tos(self.listener_tos(lid, &tuple));
            self.insert(conn, Owner::Embryonic(lid));
            stats.tcp_syn_queue_adds += 1;
            return None;
        }
        // SYN queue full: answer statelessly (RFC 4987 §3.6); no Fast Open
        // then, as in Linux.
        l.cookies_sent_at = Some(now);
        let mss = repr.options.mss.unwrap_or(DEFAULT_MSS);
        let cookie = self
            .cookies
            .encode(now, tuple.local, tuple.remote, repr.seq, mss);
        stats.tcp_syncookies_sent += 1;
        Some(TcpRepr {
            src_port: tuple.local.port(),
            dst_port: tuple.remote.port(),
            seq: cookie,
            ack: repr.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.cfg_for(&tuple).recv_buffer.min(usize::from(u16::MAX)) as u16,
            urgent: 0,
            // The cookie can't remember window scale, SACK or timestamps, so
            // none are offered (RFC 4987 §3.6).
            options: TcpOptions {
                mss: Some(self.listener_cfg(lid, &tuple).mss),
                ..TcpOptions::default()
            },
        })
    }

    /// A bare ACK at a listener: the third step of a cookie handshake, or junk.
    fn cookie_ack(
        &mut self,
        now: Instant,
        lid: crate::ListenerId,
        tuple: FourTuple,
        repr: &TcpRepr,
        payload: &[u8],
        stats: &mut StackStats,
    ) -> Option<TcpRepr> {
        // Invariant: the caller looked the listener up by port just before.
        let l = self.listeners.get(&lid).expect("listener exists");
        let recent = l
            .cookies_sent_at
            .is_some_and(|t| now.saturating_duration_since(t) <= COOKIE_WINDOW);
        if !recent {
            return crate::tcp_input::reset_for(repr, payload.len());
        }
        let irs = repr.seq - 1;
        let iss: SeqNumber = repr.ack - 1;
        let Some(params) = self
            .cookies
            .decode(now, tuple.local, tuple.remote, irs, iss)
        else {
            stats.tcp_syncookies_failed += 1;
            return crate::tcp_input::reset_for(repr, payload.len());
        };
        if l.accept_queue_full() {
            // Dropped silently: the client retransmits and may find room later.
            stats.drops_tcp_accept_queue_full += 1;
            return None;
        }
        let mut conn = Connection::from_cookie(&self.listener_cfg(lid, &tuple), tuple, iss, irs, params.mss, repr, now);
        conn.set_tos(self.listener_tos(lid, &tuple));
        conn.handle_segment(now, repr, payload);
        let id = self.insert(conn, Owner::Queued(lid));
        if let Some(l) = self.listeners.get_mut(&lid) {
            l.accept_queue.push_back(id);
        }
        stats.tcp_syncookies_accepted += 1;
        None
    }

    /// Moves an embryonic connection whose handshake completed to the accept queue.
    pub(crate) fn promote(&mut self, id: ConnId) {
        let Some(e) = self.conns.get_mut(&id) else {
            return;
        };
        let Owner::Embryonic(lid) = e.owner else {
            return;
        };
        e.owner = Owner::Queued(lid);
        if let Some(l) = self.listeners.get_mut(&lid) {
            l.syn_queue_len = l.syn_queue_len.saturating_sub(1);
            l.accept_queue.push_back(id);
        }
    }

    /// Closes a listener: connections it had not handed out yet are reset
    /// (as a kernel does when a listening socket closes) and freed once done.
    pub(crate) fn unlisten(&mut self, lid: crate::ListenerId) {
        let Some(_) = self.listeners.remove(&lid) else {
            return;
        };
        self.listener_by_port.retain(|_, ls| {
            ls.retain(|l| *l != lid);
            !ls.is_empty()
        });
        let orphans: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, e)| matches!(e.owner, Owner::Embryonic(l) | Owner::Queued(l) if l == lid))
            .map(|(id, _)| *id)
            .collect();
        for id in orphans {
            if let Some(e) = self.conns.get_mut(&id) {
                e.conn.abort();
                e.owner = Owner::Released;
            }
            self.mark_ready(id);
        }
    }

    /// Takes the next connection off the accept queue.
    pub(crate) fn has_pending(&self, lid: crate::ListenerId) -> bool {
        self.listeners.get(&lid).is_some_and(|l| !l.accept_queue.is_empty())
    }

    pub(crate) fn accept(&mut self, lid: crate::ListenerId) -> Option<ConnId> {
        let id = self.listeners.get_mut(&lid)?.accept_queue.pop_front()?;
        if let Some(e) = self.conns.get_mut(&id) {
            e.owner = Owner::App;
        }
        Some(id)
    }
}
