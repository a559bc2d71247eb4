//! Listeners shared between boards: one stack listener per port, and the
//! board endpoints that take its connections.
//!
//! Multi-process servers hold one listening socket in several processes:
//! inherited across `fork` (nginx's master and its workers, pre-forking
//! servers), or opened by each with `SO_REUSEPORT`. Linux gives such
//! processes one accept queue (inherited) or spreads connections among the
//! sockets (reuseport). Here a port has one stack listener and a **group**
//! of members — (session, endpoint) pairs, each on its own board — and the
//! shard hands each accepted connection to the next member in turn that
//! takes connections (round robin), so every process that accepts gets a
//! share and none gets another's.
//!
//! - **Joining.** `LISTEN` on a port that has a group joins it when both
//!   the new endpoint and the group asked for `REUSEPORT` and the users are
//!   the same (Linux's rule for SO_REUSEPORT); otherwise EADDRINUSE.
//!   `INHERIT` joins the group of the listener (key, endpoint) names, where
//!   the key is the parent board's inherit key (`header::INHERIT_KEY`):
//!   only a process that mapped the parent's board can know it, which is
//!   what inheriting the socket means. The engine compares with its own
//!   copy of each key, never with what a board says.
//! - **Taking connections.** A member opened `ON_DEMAND` takes none until
//!   its application says `ACCEPT_ON` (the socket shim does at the first
//!   `accept`, or read interest in poll, select or epoll): nginx's master
//!   holds the listening sockets and never accepts, so it must not be
//!   given connections. Other members take connections from the start.
//! - **Leaving.** Closing a member removes it; the last one out closes the
//!   stack listener. A board that dies (or detaches) after forking (its
//!   `FORKS` application counter is non-zero) leaves its listeners
//!   **lingering** for [`LINGER`]: a child it forked may be joining right
//!   now (a daemon's parent exits right after `fork`), and the child's
//!   `INHERIT` names the dead parent's key. Connections that arrive
//!   meanwhile wait in the listener's accept queue; a lingering listener
//!   nobody joins is closed (its queued connections reset).

use outboard_board::command::{ListenFamily, ListenFlags};
use outboard_stack::{Families, ListenerId, Stack, StackError};
use std::net::IpAddr;

/// What a listener's family asks of the stack. IPv6 on an engine without it
/// is EAFNOSUPPORT (Linux without IPv6 refuses the AF_INET6 socket); an
/// address that is not the engine's is EADDRNOTAVAIL, as Linux's bind.
pub fn families_of(stack: &Stack, family: ListenFamily) -> Result<Families, i64> {
    let no_v6 = stack.ipv6_config().is_none();
    Ok(match family {
        ListenFamily::Both => Families::Both,
        ListenFamily::Ipv4 => Families::Ipv4,
        ListenFamily::Ipv6 if no_v6 => return Err(-i64::from(libc::EAFNOSUPPORT)),
        ListenFamily::Ipv6 => Families::Ipv6,
        ListenFamily::Addr(a) if a.is_unspecified() => match a {
            IpAddr::V4(_) => Families::Ipv4,
            IpAddr::V6(_) if no_v6 => return Err(-i64::from(libc::EAFNOSUPPORT)),
            IpAddr::V6(_) => Families::Ipv6,
        },
        ListenFamily::Addr(IpAddr::V4(a)) if a == stack.config().addr => Families::Addr(a.into()),
        ListenFamily::Addr(IpAddr::V6(_)) if no_v6 => return Err(-i64::from(libc::EAFNOSUPPORT)),
        ListenFamily::Addr(IpAddr::V6(a)) if stack.ipv6_addresses().iter().any(|x| x.addr == a) => Families::Addr(a.into()),
        ListenFamily::Addr(_) => return Err(-i64::from(libc::EADDRNOTAVAIL)),
    })
}
use outboard_time::{Duration, Instant};

/// How long a listener of a board that died after forking waits for a child to join.
pub const LINGER: Duration = Duration::from_secs(2);

/// One board endpoint on a shared listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub session: u64,
    pub ep: u32,
    /// Takes connections (not `ON_DEMAND`, or `ACCEPT_ON` seen).
    pub armed: bool,
}

#[derive(Debug)]
struct Group {
    lid: ListenerId,
    port: u16,
    reuseport: bool,
    uid: u32,
    families: Families,
    members: Vec<Member>,
    /// (inherit key, endpoint) of every member, and of members gone while
    /// the listener lingers: what an `INHERIT` may name.
    names: Vec<(u64, u32, u64)>,
    /// Next member to get a connection.
    cursor: usize,
    /// Set while nobody is a member: closed at this time unless someone joins.
    linger_until: Option<Instant>,
}

/// Who is joining: its session, user, board key and new endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Joiner {
    pub session: u64,
    pub uid: u32,
    pub key: u64,
    pub ep: u32,
    pub on_demand: bool,
}

/// Counters of shared listeners, for `outboard stat`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct ListenerCounters {
    /// Endpoints that joined a listener another endpoint held (reuseport or inherited).
    pub joined: u64,
    /// INHERIT commands that named no listener (wrong key or endpoint).
    pub inherit_refused: u64,
    /// Listeners that lingered after their last board died, and those closed by it.
    pub lingered: u64,
    pub linger_expired: u64,
}

impl ListenerCounters {
    /// Adds another shard's counters.
    pub fn add(&mut self, o: &ListenerCounters) {
        self.joined += o.joined;
        self.inherit_refused += o.inherit_refused;
        self.lingered += o.lingered;
        self.linger_expired += o.linger_expired;
    }
}

#[derive(Debug, Default)]
pub struct Listeners {
    groups: Vec<Group>,
    pub counters: ListenerCounters,
}

impl Listeners {
    fn by_lid(&mut self, lid: ListenerId) -> Option<&mut Group> {
        self.groups.iter_mut().find(|g| g.lid == lid)
    }

    /// `LISTEN`: a new listener on `port`, or a place in its group. Err(-errno).
    pub fn listen(
        &mut self,
        stack: &mut Stack,
        port: u16,
        backlog: u32,
        flags: ListenFlags,
        j: Joiner,
    ) -> Result<ListenerId, i64> {
        let families = families_of(stack, flags.family)?;
        let reuseport = flags.reuseport;
        // Listeners of families that do not overlap (an AF_INET one on
        // 0.0.0.0 and an IPV6_V6ONLY one on `::`) are separate, as on Linux.
        if let Some(g) = self.groups.iter_mut().find(|g| g.port == port && g.families.overlaps(&families)) {
            // Linux: every socket on the port set SO_REUSEPORT, one user owns
            // them all, and they are bound alike.
            if !(reuseport && g.reuseport && g.uid == j.uid && g.families == families) {
                return Err(-i64::from(libc::EADDRINUSE));
            }
            g.join(j);
            self.counters.joined += 1;
            return Ok(g.lid);
        }
        // A SYN of another family (or to another address) finds no listener: RST, as on Linux.
        let lid = stack.tcp_listen_for(port, backlog as usize, families).map_err(|e| match e {
            StackError::AddrInUse => -i64::from(libc::EADDRINUSE),
            _ => -i64::from(libc::EINVAL),
        })?;
        let mut g = Group {
            lid,
            port,
            reuseport,
            uid: j.uid,
            families,
            members: Vec::new(),
            names: Vec::new(),
            cursor: 0,
            linger_until: None,
        };
        g.join(j);
        self.groups.push(g);
        Ok(lid)
    }

    /// `INHERIT`: a place in the group of the listener that (key, endpoint)
    /// names. Err(-EBADF) when nothing matches.
    pub fn inherit(&mut self, parent_key: u64, parent_ep: u32, j: Joiner) -> Result<(ListenerId, u16), i64> {
        let found = self.groups.iter_mut().find(|g| g.names.iter().any(|(k, e, _)| *k == parent_key && *e == parent_ep));
        match found {
            Some(g) => {
                g.join(j);
                self.counters.joined += 1;
                Ok((g.lid, g.port))
            }
            None => {
                self.counters.inherit_refused += 1;
                Err(-i64::from(libc::EBADF))
            }
        }
    }

    /// `ACCEPT_ON`: the member takes connections from now on.
    pub fn arm(&mut self, lid: ListenerId, session: u64, ep: u32) {
        if let Some(m) = self.by_lid(lid).and_then(|g| g.members.iter_mut().find(|m| m.session == session && m.ep == ep)) {
            m.armed = true;
        }
    }

    /// A member leaves (its endpoint closed, or its board went away). The
    /// last one out closes the listener, or leaves it lingering until
    /// `linger_until` (a board that forked).
    pub fn leave(&mut self, stack: &mut Stack, lid: ListenerId, session: u64, ep: u32, linger_until: Option<Instant>) {
        let Some(i) = self.groups.iter().position(|g| g.lid == lid) else { return };
        let g = &mut self.groups[i];
        g.members.retain(|m| !(m.session == session && m.ep == ep));
        if linger_until.is_none() {
            g.names.retain(|(_, e, s)| !(*s == session && *e == ep));
        }
        if !g.members.is_empty() {
            return;
        }
        match linger_until {
            Some(t) => {
                g.linger_until = Some(t);
                self.counters.lingered += 1;
            }
            None => {
                stack.tcp_unlisten(lid);
                self.groups.swap_remove(i);
            }
        }
    }

    /// Closes lingering listeners whose time is up.
    pub fn expire(&mut self, stack: &mut Stack, now: Instant) {
        let mut i = 0;
        while i < self.groups.len() {
            if self.groups[i].linger_until.is_some_and(|t| t <= now) {
                stack.tcp_unlisten(self.groups[i].lid);
                self.groups.swap_remove(i);
                self.counters.linger_expired += 1;
            } else {
                i += 1;
            }
        }
    }

    /// The next linger deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.groups.iter().filter_map(|g| g.linger_until).min()
    }

    /// Listeners with connections waiting to be handed out, for `accept`.
    pub fn pending(&self, stack: &Stack) -> Vec<ListenerId> {
        self.groups
            .iter()
            .filter(|g| g.members.iter().any(|m| m.armed) && stack.tcp_accept_pending(g.lid))
            .map(|g| g.lid)
            .collect()
    }

    /// The armed members of `lid` in the order they get connections, from
    /// the cursor on (round robin across calls: `advance` moves it).
    pub fn rotation(&self, lid: ListenerId) -> Vec<Member> {
        let Some(g) = self.groups.iter().find(|g| g.lid == lid) else { return Vec::new() };
        let n = g.members.len();
        (0..n).map(|k| g.members[(g.cursor + k) % n]).filter(|m| m.armed).collect()
    }

    /// `member` got a connection: the next one goes to the member after it.
    pub fn advance(&mut self, lid: ListenerId, member: Member) {
        if let Some(g) = self.by_lid(lid) {
            if let Some(i) = g.members.iter().position(|m| m.session == member.session && m.ep == member.ep) {
                g.cursor = (i + 1) % g.members.len();
            }
        }
    }
}

impl Group {
    fn join(&mut self, j: Joiner) {
        self.members.push(Member { session: j.session, ep: j.ep, armed: !j.on_demand });
        self.names.push((j.key, j.ep, j.session));
        self.linger_until = None;
    }
}

/// A listener group across a live upgrade: the stack listener's settings
/// and the board endpoints that share it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GroupRecord {
    pub port: u16,
    pub backlog: usize,
    pub families: FamiliesRecord,
    pub fastopen_qlen: usize,
    pub user_mss: u16,
    pub tos: u8,
    pub tclass: u8,
    pub rcv_clamp: usize,
    pub reuseport: bool,
    pub uid: u32,
    /// (session, endpoint, armed).
    pub members: Vec<(u64, u32, bool)>,
    /// (inherit key, endpoint, session).
    pub names: Vec<(u64, u32, u64)>,
    pub cursor: usize,
}

/// `Families` as the record writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FamiliesRecord {
    Both,
    Ipv4,
    Ipv6,
    Addr(IpAddr),
}

impl From<Families> for FamiliesRecord {
    fn from(f: Families) -> Self {
        match f {
            Families::Both => FamiliesRecord::Both,
            Families::Ipv4 => FamiliesRecord::Ipv4,
            Families::Ipv6 => FamiliesRecord::Ipv6,
            Families::Addr(a) => FamiliesRecord::Addr(a),
        }
    }
}

impl From<FamiliesRecord> for Families {
    fn from(f: FamiliesRecord) -> Self {
        match f {
            FamiliesRecord::Both => Families::Both,
            FamiliesRecord::Ipv4 => Families::Ipv4,
            FamiliesRecord::Ipv6 => Families::Ipv6,
            FamiliesRecord::Addr(a) => Families::Addr(a),
        }
    }
}

impl Listeners {
    /// The groups' records, in order (a session's listener endpoint names
    /// its group's index), or why not now.
    pub fn export(&self, stack: &Stack) -> Result<Vec<(ListenerId, GroupRecord)>, String> {
        let mut out = Vec::new();
        for g in &self.groups {
            if g.linger_until.is_some() {
                return Err(format!("busy: the listener on port {} waits for a forked process to join it; try again", g.port));
            }
            let s = stack
                .tcp_listener_settings(g.lid)
                .ok_or_else(|| format!("the listener group on port {} has no listener in the stack", g.port))?;
            out.push((
                g.lid,
                GroupRecord {
                    port: g.port,
                    backlog: s.backlog,
                    families: s.families.into(),
                    fastopen_qlen: s.fastopen_qlen,
                    user_mss: s.user_mss,
                    tos: s.tos,
                    tclass: s.tclass,
                    rcv_clamp: s.rcv_clamp,
                    reuseport: g.reuseport,
                    uid: g.uid,
                    members: g.members.iter().map(|m| (m.session, m.ep, m.armed)).collect(),
                    names: g.names.clone(),
                    cursor: g.cursor,
                },
            ));
        }
        Ok(out)
    }

    /// Opens the recorded groups' listeners in `stack` again; their ids, in record order.
    pub fn import(&mut self, stack: &mut Stack, groups: &[GroupRecord]) -> Result<Vec<ListenerId>, String> {
        let mut lids = Vec::new();
        for r in groups {
            let settings = outboard_stack::ListenerSettings {
                port: r.port,
                backlog: r.backlog,
                families: r.families.into(),
                fastopen_qlen: r.fastopen_qlen,
                user_mss: r.user_mss,
                tos: r.tos,
                tclass: r.tclass,
                rcv_clamp: r.rcv_clamp,
            };
            let lid = stack
                .tcp_listen_settings(&settings)
                .map_err(|e| format!("listening on port {} again: {e:?}", r.port))?;
            let members: Vec<Member> = r.members.iter().map(|&(session, ep, armed)| Member { session, ep, armed }).collect();
            let cursor = if members.is_empty() { 0 } else { r.cursor % members.len() };
            self.groups.push(Group {
                lid,
                port: r.port,
                reuseport: r.reuseport,
                uid: r.uid,
                families: settings.families,
                members,
                names: r.names.clone(),
                cursor,
                linger_until: None,
            });
            lids.push(lid);
        }
        Ok(lids)
    }
}
