//! A session across a live upgrade: what the old engine writes of it and
//! how the new engine builds the same session again.
//!
//! What is in the board (rings' records, status records, sync slots,
//! stream bytes) stays there: the new engine maps the same memfd. What the
//! engine keeps privately is written: its ring positions (commands taken,
//! events published), the endpoint table (generations, each open
//! endpoint's kind and the engine's own view of a stream), the datagram
//! buffers in stock and the buffers the application holds. Connections are
//! in the shard's record (`upgrade::Holder::Board`), their rings' places in
//! this board with them. A datagram socket is its stack socket's settings
//! (`outboard_stack::UdpSettings`: port and families) and its mailbox's
//! producer position; the new engine binds the same port again. Datagrams
//! the stack still queues for it are not carried: the export answers
//! "busy" until the socket is drained into its mailbox (every turn does
//! that while the mailbox has room), and the upgrade asks again.

use super::{EpKind, Session, StreamEp};
use crate::host::attach::NewSession;
use crate::host::listeners::FamiliesRecord;
use outboard_board::arena::{FreeList, OwnerTable, Side};
use outboard_board::layout::{BoardParams, CLASS_DGRAM_RX, CLASS_DGRAM_TX, WAKE_SLOTS};
use outboard_board::{BoardLayout, BufRef, Consumer, MailboxProducer, Producer};
use outboard_stack::{Stack, UdpSettings};
use std::sync::Arc;
use serde::{Deserialize, Serialize};

/// One board's session on one shard, as the old engine leaves it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The board's number (its session id on every shard).
    pub id: u64,
    pub pid: u32,
    pub uid: u32,
    pub key: u64,
    pub parent_key: Option<u64>,
    /// The application's `FORKS` counter as last seen.
    pub forks: u64,
    /// Its children that said `CHILD_OF` (an engine before this was
    /// recorded: none, so its listeners linger at its end as they did).
    #[serde(default)]
    pub children: u64,
    /// The board's parameters (`BoardParams`, in field order): its layout.
    pub params: [u32; 10],
    /// Commands taken (the command ring's head) and events published (the event ring's tail).
    pub commands_head: u32,
    pub events_tail: u32,
    /// Every endpoint slot's generation.
    pub generations: Vec<u32>,
    pub endpoints: Vec<EndpointRecord>,
    /// Received-datagram buffers in the engine's stock (indices).
    pub dgram_rx_free: Vec<u32>,
    /// Buffers the application holds (class, index).
    pub app_held: Vec<(u8, u32)>,
    /// The endpoints in a wake group (`op::WAKE_GROUP`), and theirs. An
    /// engine before these were recorded named none: its boards' sleepers
    /// are all woken through the shared eventfd until their endpoints are
    /// grouped again.
    #[serde(default)]
    pub wake_groups: Vec<(u32, u8)>,
}

/// An open endpoint of the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EndpointRecord {
    /// A stream: its connection is the shard record's TCP connection held
    /// by `Holder::Board` with this session and endpoint.
    Stream {
        ep: u32,
        tx_pushed: u64,
        rx_consumed: u64,
        rx_published: u64,
        acked_published: u64,
        flags: u32,
        error: u32,
        published_flags: u32,
        published_error: u32,
        connect_sync: Option<u32>,
        /// Whether its TCP_INFO is published. A record from an engine
        /// before `op::INFO` (which published it for every stream) has
        /// none: such a stream keeps it published.
        #[serde(default = "published_before")]
        info_wanted: bool,
    },
    /// A listener: a member of the shard record's listener group `group`.
    Listener { ep: u32, group: usize, shadow: bool },
    /// A datagram socket: the stack socket bound to `port` for `families`,
    /// its mailbox continuing from ring index `mailbox_tail` (the messages
    /// published and not yet taken stay in the board).
    Datagram { ep: u32, port: u16, families: FamiliesRecord, mailbox_tail: u32 },
}

/// `info_wanted` of a stream recorded by an engine that published every
/// stream's TCP_INFO.
fn published_before() -> bool {
    true
}

pub fn params_words(p: &BoardParams) -> [u32; 10] {
    [
        p.command_capacity,
        p.event_capacity,
        p.endpoints,
        p.mailbox_capacity,
        p.syncs,
        p.dgram_buffers,
        p.dgram_size,
        p.stream_buffer,
        p.stream_buffers,
        p.shards,
    ]
}

pub fn params_from(w: &[u32; 10]) -> BoardParams {
    BoardParams {
        command_capacity: w[0],
        event_capacity: w[1],
        endpoints: w[2],
        mailbox_capacity: w[3],
        syncs: w[4],
        dgram_buffers: w[5],
        dgram_size: w[6],
        stream_buffer: w[7],
        stream_buffers: w[8],
        shards: w[9],
    }
}

impl Session {
    /// The session's record, or why it cannot be handed over now (`busy: …`
    /// for what passes by itself: the upgrade asks again).
    /// `group_of(lid)` is the index of a listener's group in the record.
    /// A datagram socket with datagrams still queued in `stack` is "busy".
    pub fn export(&self, stack: &Stack, group_of: impl Fn(outboard_stack::ListenerId) -> Option<usize>) -> Result<SessionRecord, String> {
        let who = format!("application {} (pid {})", self.id, self.pid);
        if self.detached || self.dead.load(std::sync::atomic::Ordering::Acquire) {
            return Err(format!("busy: {who} is detaching; try again"));
        }
        if !self.overflow.is_empty() || !self.hinted.is_empty() {
            return Err(format!("busy: {who} has events waiting for room in its event ring; try again"));
        }
        if !self.tokens.is_empty() || !self.staged.is_empty() {
            return Err(format!("{who} has message requests or a handler module in flight: the message service is not handed over"));
        }
        let mut endpoints = Vec::new();
        for (ep, e) in self.eps.iter().enumerate() {
            let ep = ep as u32;
            match e {
                None => {}
                Some(EpKind::Stream(s)) => endpoints.push(EndpointRecord::Stream {
                    ep,
                    tx_pushed: s.tx_pushed,
                    rx_consumed: s.rx_consumed,
                    rx_published: s.rx_published,
                    acked_published: s.acked_published,
                    flags: s.flags,
                    error: s.error,
                    published_flags: s.published_flags,
                    published_error: s.published_error,
                    connect_sync: s.connect_sync,
                    info_wanted: s.info_wanted,
                }),
                Some(EpKind::Listener { lid, shadow }) => {
                    let group = group_of(*lid).ok_or_else(|| format!("{who}: listener endpoint {ep} has no listener group"))?;
                    endpoints.push(EndpointRecord::Listener { ep, group, shadow: *shadow });
                }
                Some(EpKind::Datagram { udp, mailbox }) => {
                    let settings = stack
                        .udp_socket_settings(*udp)
                        .ok_or_else(|| format!("{who}: datagram endpoint {ep} has no socket in the stack"))?;
                    if stack.udp_has_unread(*udp) == Some(true) {
                        return Err(format!("busy: {who}'s datagram socket on port {} has datagrams waiting for its mailbox; try again", settings.port));
                    }
                    if mailbox.open().is_some() {
                        return Err(format!("busy: {who}'s datagram endpoint {ep} has a message half written; try again"));
                    }
                    endpoints.push(EndpointRecord::Datagram {
                        ep,
                        port: settings.port,
                        families: settings.families.into(),
                        mailbox_tail: mailbox.position(),
                    });
                }
                Some(EpKind::Mailbox(_)) => {
                    return Err(format!("{who} has a message mailbox: the message service is not handed over"))
                }
            }
        }
        Ok(SessionRecord {
            id: self.id,
            pid: self.pid,
            uid: self.uid,
            key: self.key,
            parent_key: self.parent_key,
            forks: self.forks_seen.0,
            children: self.children,
            params: params_words(&self.layout.params),
            commands_head: self.cmds.position(),
            events_tail: self.events.position(),
            generations: self.generations.clone(),
            endpoints,
            dgram_rx_free: self.dgram_rx.items().iter().map(|b| b.index).collect(),
            app_held: self.owners.list(Side::App).into_iter().map(|b| (b.class, b.index)).collect(),
            wake_groups: self.groups.members(),
        })
    }

    /// The session `r` describes, on the board `n` maps (the same memory,
    /// socket and wake eventfd the old engine had), with its listeners
    /// given by `listener(group)` (the new stack's listener of that group)
    /// and its datagram sockets bound again in `stack`. Streams are bound
    /// afterwards (`bind_stream`). Writes nothing to the board: until the
    /// upgrade is confirmed the old engine may resume. On an error the
    /// datagram sockets it bound stay in `stack` (the new engine gives up).
    pub fn import(
        shard: u32,
        r: &SessionRecord,
        n: NewSession,
        stack: &mut Stack,
        listener: impl Fn(usize) -> Option<outboard_stack::ListenerId>,
    ) -> Result<Session, String> {
        let mut s = Session::new(r.id, shard, n);
        let p = s.layout.params;
        if r.generations.len() != p.endpoints as usize {
            return Err(format!("{} endpoint generations for a board of {} endpoints", r.generations.len(), p.endpoints));
        }
        let rings = s.layout.shards[shard as usize];
        s.cmds = Consumer::with_start(s.map.clone(), rings.command_ring, p.command_capacity, r.commands_head);
        s.events = Producer::with_start(s.map.clone(), rings.event_ring, p.event_capacity, r.events_tail);
        s.parent_key = r.parent_key;
        s.forks_seen = (r.forks, None);
        s.children = r.children;
        s.generations = r.generations.clone();
        for e in &r.endpoints {
            let ep = match e {
                EndpointRecord::Stream { ep, .. } | EndpointRecord::Listener { ep, .. } | EndpointRecord::Datagram { ep, .. } => *ep,
            };
            if ep >= p.endpoints || s.eps[ep as usize].is_some() {
                return Err(format!("endpoint {ep} out of range or recorded twice"));
            }
            s.eps[ep as usize] = Some(match e {
                EndpointRecord::Stream {
                    tx_pushed,
                    rx_consumed,
                    rx_published,
                    acked_published,
                    flags,
                    error,
                    published_flags,
                    published_error,
                    connect_sync,
                    info_wanted,
                    ..
                } => EpKind::Stream(StreamEp {
                    // Set by `bind_stream`.
                    conn: outboard_stack::ConnId(u32::MAX),
                    tx_pushed: *tx_pushed,
                    rx_consumed: *rx_consumed,
                    rx_published: *rx_published,
                    acked_published: *acked_published,
                    flags: *flags,
                    error: *error,
                    published_flags: *published_flags,
                    published_error: *published_error,
                    connect_sync: *connect_sync,
                    info_wanted: *info_wanted,
                    // Written again at the first update.
                    published_info: None,
                }),
                EndpointRecord::Listener { group, shadow, .. } => {
                    let lid = listener(*group).ok_or_else(|| format!("endpoint {ep}: no listener group {group}"))?;
                    EpKind::Listener { lid, shadow: *shadow }
                }
                EndpointRecord::Datagram { port, families, mailbox_tail, .. } => {
                    let settings = UdpSettings { port: *port, families: (*families).into() };
                    if *port == 0 {
                        return Err(format!("endpoint {ep}: a datagram socket on port 0"));
                    }
                    let udp = stack
                        .udp_bind_settings(&settings)
                        .map_err(|e| format!("endpoint {ep}: binding UDP port {port} again: {e:?}"))?;
                    // Continues the mailbox where the old engine left it
                    // (no `ring::reset`: the board is not written).
                    let mailbox = MailboxProducer::with_start(
                        s.map.clone(),
                        s.layout.endpoint_mailbox(ep),
                        p.mailbox_capacity,
                        Arc::new(s.layout.arena.clone()),
                        *mailbox_tail,
                    );
                    s.polled.push(ep);
                    EpKind::Datagram { udp, mailbox }
                }
            });
        }
        let shards = p.shards.max(1);
        s.free_eps = (0..p.endpoints).rev().filter(|e| e % shards == shard && s.eps[*e as usize].is_none()).collect();
        let rx_count = s.layout.arena.classes[CLASS_DGRAM_RX as usize].count;
        if r.dgram_rx_free.iter().any(|&i| i >= rx_count) {
            return Err("a datagram buffer out of range".into());
        }
        s.dgram_rx = FreeList::new(r.dgram_rx_free.iter().map(|&index| BufRef { class: CLASS_DGRAM_RX, index }));
        let mut owners = OwnerTable::new(&s.layout.arena, |b| if b.class == CLASS_DGRAM_TX { Side::App } else { Side::Engine });
        // What the application holds; every other buffer is the engine's
        // (TX datagram buffers start with the application: listed if it still has them).
        for b in owners.list(Side::App) {
            owners.set(b, Side::Engine);
        }
        for &(class, index) in &r.app_held {
            if !owners.set(BufRef { class, index }, Side::App) {
                return Err(format!("buffer {class}/{index} out of range"));
            }
        }
        s.owners = owners;
        for &(ep, g) in &r.wake_groups {
            if ep >= p.endpoints || g == 0 || usize::from(g) >= WAKE_SLOTS {
                return Err(format!("endpoint {ep} in wake group {g}: out of range"));
            }
            s.groups.set(ep, g);
        }
        // The old engine may have stopped with a wake-up batched (bytes not
        // pushed yet): the first turn here wakes the application, which
        // looks again (a needless wake-up costs it one look).
        s.posted = true;
        Ok(s)
    }

    /// Gives the imported stream `ep` its connection.
    pub fn bind_stream(&mut self, ep: u32, conn: outboard_stack::ConnId) -> Result<(), String> {
        match self.eps.get_mut(ep as usize) {
            Some(Some(EpKind::Stream(s))) if s.conn.0 == u32::MAX => {
                s.conn = conn;
                Ok(())
            }
            _ => Err(format!("connection for endpoint {ep}, which is no stream waiting for one")),
        }
    }

    /// Every stream endpoint and its connection.
    pub fn stream_conns(&self) -> Vec<(u32, outboard_stack::ConnId)> {
        self.eps
            .iter()
            .enumerate()
            .filter_map(|(ep, e)| match e {
                Some(EpKind::Stream(s)) => Some((ep as u32, s.conn)),
                _ => None,
            })
            .collect()
    }

    /// Streams still without a connection after the import (the record named none for them).
    pub fn unbound_streams(&self) -> Vec<u32> {
        self.eps
            .iter()
            .enumerate()
            .filter_map(|(ep, e)| matches!(e, Some(EpKind::Stream(s)) if s.conn.0 == u32::MAX).then_some(ep as u32))
            .collect()
    }

    /// The board's layout (the stream regions' places).
    pub fn layout(&self) -> &BoardLayout {
        &self.layout
    }

    /// The board's free stream regions (shared by its sessions on every shard).
    pub fn regions(&self) -> std::sync::Arc<std::sync::Mutex<FreeList>> {
        self.regions.clone()
    }

    /// The descriptors handed over with the record (`None`: the board has no memfd to hand on).
    pub fn handover_fds(&self) -> Option<HandoverFds> {
        use std::os::fd::AsRawFd;
        Some(HandoverFds {
            memory: self.memory.as_ref()?.as_raw_fd(),
            sock: self.sock.as_raw_fd(),
            wake: self.wake.as_ref().map(|w| w.as_raw_fd()),
            wake_groups: self.groups.fds().iter().map(|f| f.as_raw_fd()).collect(),
        })
    }
}

/// A board's descriptors, handed on by a live upgrade.
pub struct HandoverFds {
    /// The board's memfd.
    pub memory: std::os::fd::RawFd,
    /// The application's attach socket.
    pub sock: std::os::fd::RawFd,
    /// Its wake eventfd, if it gave one.
    pub wake: Option<std::os::fd::RawFd>,
    /// Its wake groups' eventfds (group g's at g − 1).
    pub wake_groups: Vec<std::os::fd::RawFd>,
}

#[cfg(test)]
mod tests {
    use super::{EndpointRecord, SessionRecord};

    /// An engine before wake groups were handed over recorded none: its
    /// record reads as a session with no endpoint in a group; a new
    /// record carries them.
    #[test]
    fn a_session_recorded_before_wake_groups_has_none_and_a_new_record_keeps_them() {
        let old = r#"{"id":1,"pid":7,"uid":0,"key":9,"parent_key":null,"forks":0,"params":[0,0,0,0,0,0,0,0,0,0],
            "commands_head":0,"events_tail":0,"generations":[],"endpoints":[],"dgram_rx_free":[],"app_held":[]}"#;
        let mut r: SessionRecord = serde_json::from_str(old).expect("an older engine's record");
        assert!(r.wake_groups.is_empty());
        r.wake_groups = vec![(3, 1), (4, 2)];
        let again: SessionRecord = serde_json::from_str(&serde_json::to_string(&r).expect("record")).expect("read back");
        assert_eq!(again.wake_groups, vec![(3, 1), (4, 2)]);
    }

    /// An engine before `op::INFO` published every stream's TCP_INFO and
    /// recorded no `info_wanted`: its streams keep theirs published.
    #[test]
    fn a_stream_recorded_before_info_requests_keeps_its_info_published() {
        let old = r#"{"kind":"stream","ep":3,"tx_pushed":10,"rx_consumed":0,"rx_published":0,
            "acked_published":10,"flags":1,"error":0,"published_flags":1,"published_error":0,"connect_sync":null}"#;
        let r: EndpointRecord = serde_json::from_str(old).expect("an older engine's record");
        assert!(matches!(r, EndpointRecord::Stream { info_wanted: true, .. }), "{r:?}");
        let new = serde_json::to_string(&r).expect("record");
        assert!(new.contains(r#""info_wanted":true"#), "{new}");
    }
}
