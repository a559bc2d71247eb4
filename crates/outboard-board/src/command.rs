//! Commands as typed values: the one place where a command record's bytes
//! become meaning ("parse, don't validate").
//!
//! The engine copies a [`Command`] record out of shared memory once and
//! calls [`decode`]; it then acts only on the [`BoardCommand`] it got. The
//! decode is total: every 64-byte pattern gives a command or a
//! [`CommandViolation`], never a panic. What decoding can check from the
//! record and the board's own sizes (endpoint ids and sync slots in range,
//! ports that fit, addresses of a known family, option values in range) it
//! checks here; what needs the engine's tables (is the endpoint open, is the
//! buffer the application's) the engine checks when it acts.
//!
//! Applications build their records with [`BoardCommand::encode`], so both
//! sides share one definition of every field (a property test checks that
//! `decode(encode(c)) == c`).

use crate::addr::{AddrError, NetAddr};
use crate::proto::{connect, listen, msg, op, opt, Command};
use std::net::SocketAddr;
use std::time::Duration;

/// An endpoint id below the board's endpoint count (not necessarily open).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint(pub u32);

/// A sync slot below the board's sync count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SyncSlot(pub u32);

/// RFC 1122 §4.2.3.6 keep-alive settings (Linux's SO_KEEPALIVE, TCP_KEEPIDLE,
/// TCP_KEEPINTVL, TCP_KEEPCNT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    pub idle: Duration,
    pub interval: Duration,
    pub probes: u32,
}

/// A stream option (`op::SET_OPTION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOption {
    NoDelay(bool),
    /// `None` turns keep-alives off.
    KeepAlive(Option<KeepAlive>),
    /// TCP_CORK (and MSG_MORE): hold partial segments while on (sent at
    /// once when turned off, or after 200 ms).
    Cork(bool),
    /// TCP_USER_TIMEOUT in milliseconds (0: off): data unacknowledged that
    /// long fails the stream with ETIMEDOUT.
    UserTimeout(u32),
    /// TCP_CONGESTION: `opt::CC_*`.
    Congestion(u8),
    /// TCP_FASTOPEN on a listener: the RFC 7413 Fast Open queue length (0: off).
    FastOpen(u16),
    /// IP_TOS: the TOS byte of the stream's packets (ECN bits ignored); on
    /// a listener, of the connections it accepts from then on.
    Tos(u8),
    /// IPV6_TCLASS on a listener: the TOS byte of the IPv6 connections it
    /// accepts from then on (`Tos` on a listener is for its IPv4 ones).
    TrafficClass(u8),
    /// SO_RCVBUF, as the window clamp in bytes (0: none): on a stream the
    /// window offered from now on, on a listener its connections'.
    RcvClamp(u32),
    /// TCP_MAXSEG on a listener (0: none; 88..=32767): the MSS its
    /// SYN-ACKs advertise at most and its connections' send-MSS ceiling.
    MaxSeg(u16),
    /// TCP_QUICKACK on a stream, the value as set (`opt::QUICKACK`).
    QuickAck(u32),
    /// An unknown option or a value out of range: counted (`bad_options`)
    /// and ignored, not a violation (the application checks its own values).
    Invalid,
}

/// How a listener shares its port and takes connections (`proto::listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListenFlags {
    pub reuseport: bool,
    pub on_demand: bool,
    /// Which connections it takes by their local address.
    pub family: ListenFamily,
    /// RFC 7413 Fast Open queue length (TCP_FASTOPEN before `listen`); 0: off.
    pub fastopen_qlen: u16,
    /// TCP_MAXSEG set before `listen` (0: none; else 88..=32767).
    pub mss: u16,
    /// IP_TOS set before `listen`, for IPv4 connections (ECN bits ignored by the engine).
    pub tos: u8,
    /// IPV6_TCLASS set before `listen`, for IPv6 connections.
    pub tclass: u8,
    /// SO_RCVBUF set before `listen`, as the window clamp in bytes (0: none).
    pub rcv_clamp: u32,
}

/// Which local addresses a listener takes connections on, as Linux's socket
/// families do: an AF_INET6 socket on `::` takes both families (IPV6_V6ONLY
/// off, Linux's default), with V6ONLY only IPv6; an AF_INET socket only
/// IPv4; a socket bound to one address only that address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenFamily {
    /// IPv4 and IPv6 (a dual-stack `::` listener; the engine's own services).
    #[default]
    Both,
    /// IPv4 only (an AF_INET socket on 0.0.0.0).
    Ipv4,
    /// IPv6 only (an AF_INET6 socket on `::` with IPV6_V6ONLY).
    Ipv6,
    /// Connections to this one local address only.
    Addr(std::net::IpAddr),
}

impl ListenFamily {
    /// What a socket bound to `addr` takes (`v6only`: IPV6_V6ONLY on an
    /// AF_INET6 socket): `::` both families (IPv6 only with `v6only`),
    /// 0.0.0.0 IPv4, another address only itself.
    pub fn of_bound(addr: std::net::IpAddr, v6only: bool) -> ListenFamily {
        match addr {
            std::net::IpAddr::V6(a) if a.is_unspecified() && v6only => ListenFamily::Ipv6,
            std::net::IpAddr::V6(a) if a.is_unspecified() => ListenFamily::Both,
            std::net::IpAddr::V4(a) if a.is_unspecified() => ListenFamily::Ipv4,
            ip => ListenFamily::Addr(ip),
        }
    }

    /// Whether one connection could be for both (Linux's bind conflict on
    /// one port: the same family, and a wildcard or the same address).
    pub fn overlaps(&self, other: &ListenFamily) -> bool {
        use ListenFamily::*;
        match (self, other) {
            (Both, _) | (_, Both) | (Ipv4, Ipv4) | (Ipv6, Ipv6) => true,
            (Ipv4, Ipv6) | (Ipv6, Ipv4) => false,
            (Ipv4, Addr(a)) | (Addr(a), Ipv4) => a.is_ipv4(),
            (Ipv6, Addr(a)) | (Addr(a), Ipv6) => a.is_ipv6(),
            (Addr(a), Addr(b)) => a == b,
        }
    }
}

impl ListenFlags {
    /// The flags, and the bound address from words c, d and e when `listen::ADDR` is set.
    fn decode(c: &Command) -> Result<ListenFlags, CommandViolation> {
        let bits = c.flags;
        let family = match (bits & listen::ADDR != 0, bits & listen::IPV4_ONLY != 0, bits & listen::IPV6_ONLY != 0) {
            (true, _, _) => ListenFamily::Addr(
                NetAddr::from_words([c.c, c.d, c.e])
                    .to_socket_addr()
                    .map_err(|e| CommandViolation::BadAddress("listen", e))?
                    .ip(),
            ),
            (false, true, true) => return Err(CommandViolation::BadField("listen family")),
            (false, true, false) => ListenFamily::Ipv4,
            (false, false, true) => ListenFamily::Ipv6,
            (false, false, false) => ListenFamily::Both,
        };
        Ok(ListenFlags {
            reuseport: bits & listen::REUSEPORT != 0,
            on_demand: bits & listen::ON_DEMAND != 0,
            family,
            fastopen_qlen: (bits >> listen::FASTOPEN_QLEN_SHIFT) as u16,
            // Out of range (Linux takes 88..=32767): none, as for CONNECT.
            mss: Some((c.f & listen::MSS_MASK) as u16).filter(|m| (opt::MIN_MSS..=opt::MAX_MSS).contains(m)).unwrap_or(0),
            tclass: (c.f >> listen::TCLASS_SHIFT) as u8,
            rcv_clamp: ((c.f >> listen::RCV_CLAMP_SHIFT) as u32).min(opt::MAX_RCV_CLAMP),
            tos: (bits >> listen::TOS_SHIFT) as u8,
        })
    }
    fn encode(self, c: &mut Command) {
        let family = match self.family {
            ListenFamily::Both => 0,
            ListenFamily::Ipv4 => listen::IPV4_ONLY,
            ListenFamily::Ipv6 => listen::IPV6_ONLY,
            ListenFamily::Addr(a) => {
                [c.c, c.d, c.e] = NetAddr::from(SocketAddr::new(a, 0)).to_words();
                listen::ADDR
            }
        };
        c.flags = family
            | (if self.reuseport { listen::REUSEPORT } else { 0 })
            | (if self.on_demand { listen::ON_DEMAND } else { 0 })
            | u32::from(self.tos) << listen::TOS_SHIFT
            | u32::from(self.fastopen_qlen) << listen::FASTOPEN_QLEN_SHIFT;
        c.f = u64::from(self.mss)
            | u64::from(self.tclass) << listen::TCLASS_SHIFT
            | u64::from(self.rcv_clamp) << listen::RCV_CLAMP_SHIFT;
    }
}

/// One decoded command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardCommand {
    /// Listen on `port` of the engine's address. `port` is `None` when the
    /// record's port is 0 or does not fit 16 bits (answered EINVAL).
    Listen { sync: SyncSlot, port: Option<u16>, backlog: u32, flags: ListenFlags },
    /// Join the listener `ep` of the board whose inherit key is `key` (a
    /// listener inherited across fork).
    Inherit { sync: SyncSlot, key: u64, ep: u32, flags: ListenFlags },
    /// Listener opened on demand: accepted connections may come now.
    AcceptOn { ep: Endpoint },
    /// Listener `ep` (opened on another shard) listens on this shard too.
    ShadowListen { ep: Endpoint, port: u16, backlog: u32, flags: ListenFlags },
    /// Listener `ep` (opened on another shard by INHERIT) joins on this shard too.
    ShadowInherit { ep: Endpoint, key: u64, parent: u32, flags: ListenFlags },
    /// Stream: close this copy, keeping the connection for a forked child's ADOPT.
    Release { ep: Endpoint },
    /// Take over stream `ep` of the board whose key is `key`; `shard` is
    /// where that stream lives (the ring it goes to; not read by the engine).
    Adopt { sync: SyncSlot, key: u64, ep: u32, shard: u32 },
    /// This application was forked from the one whose key is `key`.
    ChildOf { key: u64 },
    /// Connect to `to` (port 0 is answered EINVAL). `mss`: TCP_MAXSEG set
    /// before connect (the SYN's MSS and the send MSS's ceiling), 0: none.
    /// `fast_open`: RFC 7413 (`connect::FAST_OPEN`). `tos`: IP_TOS /
    /// IPV6_TCLASS set before connect (the SYN carries it). `rcv_clamp`:
    /// SO_RCVBUF set before connect, as the window clamp (0: none).
    Connect { sync: SyncSlot, to: SocketAddr, mss: u16, fast_open: bool, tos: u8, rcv_clamp: u32 },
    /// Stream: the application has written `written` bytes in all into its transmit region.
    Push { ep: Endpoint, written: u64 },
    /// Stream: the application has consumed `read` bytes in all from its receive region.
    Consumed { ep: Endpoint, read: u64 },
    /// Stream: no more data from us (FIN after what is queued).
    Shutdown { ep: Endpoint },
    /// Any endpoint: done with it (graceful for a stream).
    Close { ep: Endpoint },
    /// Stream: reset now.
    Abort { ep: Endpoint },
    /// A datagram socket on `port` (0: any) for `family`'s datagrams
    /// (`listen` flag bits and words c..e as LISTEN's): sockets of families
    /// that do not overlap share a port, as Linux's.
    UdpBind { sync: SyncSlot, port: u16, family: ListenFamily },
    /// Datagram: send `len` bytes at board offset `offset` to `to`; the
    /// buffer passes to the engine and comes back with `BUF_RETURN`.
    UdpSend { ep: Endpoint, offset: u64, len: u64, to: SocketAddr },
    /// Give back a received datagram's buffer (its board offset).
    UdpRelease { offset: u64 },
    SetOption { ep: Endpoint, option: StreamOption },
    /// The application detaches cleanly (streams close gracefully).
    Detach,
    /// A message mailbox (`op::MSG_BIND`): `number` None lets the engine pick.
    MsgBind { sync: SyncSlot, number: Option<u32>, capacity: u32, name: MsgName, posted: bool },
    /// Mailbox `ep` sends `len` bytes at `offset` to mailbox `mailbox` at `to`.
    MsgSend { ep: Endpoint, offset: u64, len: u64, to: SocketAddr, mailbox: u32, tag: u32, reliable: bool },
    /// Mailbox `ep` calls mailbox `mailbox` at `to` (`timeout_ms` 0: the engine's).
    MsgCall { ep: Endpoint, offset: u64, len: u64, to: SocketAddr, mailbox: u32, tag: u32, timeout_ms: u32 },
    /// Mailbox `ep` answers the request of token `token`.
    MsgReply { ep: Endpoint, offset: u64, len: u64, token: u32 },
    /// Which mailbox is called `name` at `host`.
    MsgLookup { sync: SyncSlot, host: SocketAddr, name: MsgName },
    /// Mailbox `ep` takes its next message into this buffer.
    MsgPostRecv { ep: Endpoint, offset: u64, len: u64, tag: u32 },
    /// A region for one-sided writes to mailbox `ep`.
    MsgRegister { sync: SyncSlot, ep: Endpoint, offset: u64, len: u64, tripwire: Option<u64>, notify: bool },
    MsgUnregister { ep: Endpoint, cookie: u64 },
    /// Mailbox `ep` writes `len` bytes at `offset` into region `cookie` at `to`, at `at`.
    MsgWrite { ep: Endpoint, offset: u64, len: u64, to: SocketAddr, cookie: u64, at: u32, tag: u32 },
    /// Append `len` bytes at `offset` to this board's staged handler module.
    HandlerStage { offset: u64, len: u64 },
    /// Load the staged module as handler `name` on mailbox `mailbox` (0: the
    /// engine picks); limits 0 (and faults `u32::MAX` meaning never) as in `op::HANDLER_LOAD`.
    HandlerLoad { sync: SyncSlot, name: MsgName, mailbox: u32, memory: u64, kv: u64, deadline_ms: u32, max_faults: u32 },
    HandlerUnload { sync: SyncSlot, name: MsgName },
    /// `op::INFO`: keep this stream's TCP_INFO words current from now on.
    Info { sync: SyncSlot, ep: Endpoint },
    /// `op::WAKE_GROUP`: `ep`'s events wake wake group `group` (below `WAKE_SLOTS`).
    WakeGroup { ep: Endpoint, group: u8 },
}

/// A mailbox name in a command: up to `msg::NAME_LEN` bytes of UTF-8,
/// NUL-padded (all zero: no name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsgName([u8; msg::NAME_LEN]);

impl MsgName {
    /// `None` when `name` is longer than `msg::NAME_LEN` bytes or holds a NUL.
    pub fn new(name: &str) -> Option<MsgName> {
        if name.len() > msg::NAME_LEN || name.contains('\0') {
            return None;
        }
        let mut b = [0u8; msg::NAME_LEN];
        b[..name.len()].copy_from_slice(name.as_bytes());
        Some(MsgName(b))
    }
    /// The name; `None` for no name.
    pub fn as_str(&self) -> Option<&str> {
        let n = self.0.iter().position(|b| *b == 0).unwrap_or(msg::NAME_LEN);
        // Checked UTF-8 when decoded.
        std::str::from_utf8(&self.0[..n]).ok().filter(|s| !s.is_empty())
    }
    fn from_words(w: [u64; 3]) -> Result<MsgName, CommandViolation> {
        let mut b = [0u8; msg::NAME_LEN];
        for (i, x) in w.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
        }
        let n = b.iter().position(|x| *x == 0).unwrap_or(msg::NAME_LEN);
        // NUL padding only after the name, and UTF-8.
        if b[n..].iter().any(|x| *x != 0) || std::str::from_utf8(&b[..n]).is_err() {
            return Err(CommandViolation::BadField("mailbox name"));
        }
        Ok(MsgName(b))
    }
    fn to_words(self) -> [u64; 3] {
        std::array::from_fn(|i| u64::from_le_bytes(self.0[8 * i..8 * i + 8].try_into().expect("8 bytes")))
    }
}

impl BoardCommand {
    /// A message mailbox command (`op::MSG_*`).
    pub fn is_message(&self) -> bool {
        use BoardCommand::*;
        matches!(
            self,
            MsgBind { .. }
                | MsgSend { .. }
                | MsgCall { .. }
                | MsgReply { .. }
                | MsgLookup { .. }
                | MsgPostRecv { .. }
                | MsgRegister { .. }
                | MsgUnregister { .. }
                | MsgWrite { .. }
                | HandlerStage { .. }
                | HandlerLoad { .. }
                | HandlerUnload { .. }
        )
    }
}

/// Why a command record is not a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandViolation {
    UnknownOp(u32),
    /// The endpoint id is past the board's endpoints.
    BadEndpoint(&'static str),
    /// The sync slot is past the board's syncs.
    BadSync,
    BadAddress(&'static str, AddrError),
    /// A port or length field that cannot hold what it says.
    BadField(&'static str),
}

impl std::fmt::Display for CommandViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandViolation::UnknownOp(o) => write!(f, "unknown command {o}"),
            CommandViolation::BadEndpoint(w) => write!(f, "bad endpoint in {w}"),
            CommandViolation::BadSync => write!(f, "bad sync slot"),
            CommandViolation::BadAddress(w, e) => write!(f, "bad address in {w}: {e}"),
            CommandViolation::BadField(w) => write!(f, "impossible value in {w}"),
        }
    }
}

/// The board's sizes that bound ids (from its `BoardParams`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub endpoints: u32,
    pub syncs: u32,
}

/// Decodes one command record copied out of a board.
pub fn decode(c: &Command, b: Bounds) -> Result<BoardCommand, CommandViolation> {
    let ep = |what| if c.endpoint < b.endpoints { Ok(Endpoint(c.endpoint)) } else { Err(CommandViolation::BadEndpoint(what)) };
    let sync = || if c.sync < b.syncs { Ok(SyncSlot(c.sync)) } else { Err(CommandViolation::BadSync) };
    let port = |v: u64, what| u16::try_from(v).map_err(|_| CommandViolation::BadField(what));
    let addr = |w: [u64; 3], what| NetAddr::from_words(w).to_socket_addr().map_err(|e| CommandViolation::BadAddress(what, e));
    Ok(match c.op {
        op::LISTEN => BoardCommand::Listen {
            sync: sync()?,
            port: u16::try_from(c.a).ok().filter(|p| *p != 0),
            backlog: c.b.clamp(1, 4096) as u32,
            flags: ListenFlags::decode(c)?,
        },
        op::INHERIT => BoardCommand::Inherit {
            sync: sync()?,
            key: c.a,
            ep: u32::try_from(c.b).map_err(|_| CommandViolation::BadField("inherited endpoint"))?,
            flags: ListenFlags::decode(c)?,
        },
        op::ACCEPT_ON => BoardCommand::AcceptOn { ep: ep("accept on")? },
        op::SHADOW_LISTEN => BoardCommand::ShadowListen {
            ep: ep("shadow listen")?,
            port: u16::try_from(c.a).ok().filter(|p| *p != 0).ok_or(CommandViolation::BadField("shadow listen port"))?,
            backlog: c.b.clamp(1, 4096) as u32,
            flags: ListenFlags::decode(c)?,
        },
        op::RELEASE => BoardCommand::Release { ep: ep("release")? },
        op::ADOPT => BoardCommand::Adopt {
            sync: sync()?,
            key: c.a,
            ep: u32::try_from(c.b).map_err(|_| CommandViolation::BadField("adopted endpoint"))?,
            shard: c.c as u32,
        },
        op::CHILD_OF => BoardCommand::ChildOf { key: c.a },
        op::SHADOW_INHERIT => BoardCommand::ShadowInherit {
            ep: ep("shadow inherit")?,
            key: c.a,
            parent: u32::try_from(c.b).map_err(|_| CommandViolation::BadField("inherited endpoint"))?,
            flags: ListenFlags::decode(c)?,
        },
        op::CONNECT => BoardCommand::Connect {
            sync: sync()?,
            to: addr([c.a, c.b, c.c], "connect")?,
            // Out of range (Linux takes 88..=32767): none.
            mss: u16::try_from(c.d).ok().filter(|m| (opt::MIN_MSS..=opt::MAX_MSS).contains(m)).unwrap_or(0),
            fast_open: c.flags & connect::FAST_OPEN != 0,
            tos: (c.flags >> connect::TOS_SHIFT) as u8,
            rcv_clamp: u32::try_from(c.e).unwrap_or(u32::MAX).min(opt::MAX_RCV_CLAMP),
        },
        op::PUSH => BoardCommand::Push { ep: ep("push")?, written: c.a },
        op::CONSUMED => BoardCommand::Consumed { ep: ep("consumed")?, read: c.a },
        op::SHUTDOWN => BoardCommand::Shutdown { ep: ep("shutdown")? },
        op::CLOSE => BoardCommand::Close { ep: ep("close")? },
        op::ABORT => BoardCommand::Abort { ep: ep("close")? },
        op::UDP_BIND => BoardCommand::UdpBind {
            sync: sync()?,
            port: port(c.a, "bind port")?,
            family: ListenFlags::decode(&Command { flags: c.flags & listen::ALL, f: 0, ..*c })?.family,
        },
        op::UDP_SEND => BoardCommand::UdpSend {
            ep: ep("udp send")?,
            offset: c.a,
            len: c.b,
            to: addr([c.c, c.d, c.e], "udp send")?,
        },
        op::UDP_RELEASE => BoardCommand::UdpRelease { offset: c.a },
        op::SET_OPTION => BoardCommand::SetOption { ep: ep("set option")?, option: stream_option(c) },
        op::DETACH => BoardCommand::Detach,
        op::MSG_BIND => BoardCommand::MsgBind {
            sync: sync()?,
            number: Some(u32::try_from(c.a).map_err(|_| CommandViolation::BadField("mailbox number"))?).filter(|n| *n != 0),
            capacity: u32::try_from(c.b).map_err(|_| CommandViolation::BadField("mailbox budget"))?,
            name: MsgName::from_words([c.c, c.d, c.e])?,
            posted: c.flags & msg::POSTED != 0,
        },
        op::MSG_SEND => BoardCommand::MsgSend {
            ep: ep("message send")?,
            offset: c.a,
            len: c.b,
            to: addr([c.c, c.d, c.e], "message send")?,
            mailbox: c.f as u32,
            tag: (c.f >> 32) as u32,
            reliable: c.flags & msg::RELIABLE != 0,
        },
        op::MSG_CALL => BoardCommand::MsgCall {
            ep: ep("call")?,
            offset: c.a,
            len: c.b,
            to: addr([c.c, c.d, c.e], "call")?,
            mailbox: c.f as u32,
            tag: (c.f >> 32) as u32,
            timeout_ms: c.flags,
        },
        op::MSG_REPLY => BoardCommand::MsgReply {
            ep: ep("reply")?,
            offset: c.a,
            len: c.b,
            token: u32::try_from(c.c).map_err(|_| CommandViolation::BadField("reply token"))?,
        },
        op::MSG_LOOKUP => BoardCommand::MsgLookup {
            sync: sync()?,
            host: addr([c.c, c.d, c.e], "lookup")?,
            name: MsgName::from_words([c.a, c.b, c.f])?,
        },
        op::MSG_POST_RECV => BoardCommand::MsgPostRecv { ep: ep("post receive")?, offset: c.a, len: c.b, tag: (c.f >> 32) as u32 },
        op::MSG_REGISTER => BoardCommand::MsgRegister {
            sync: sync()?,
            ep: ep("register")?,
            offset: c.a,
            len: c.b,
            tripwire: Some(c.c).filter(|t| *t != u64::MAX),
            notify: c.flags & msg::NOTIFY != 0,
        },
        op::MSG_UNREGISTER => BoardCommand::MsgUnregister { ep: ep("unregister")?, cookie: c.f },
        op::MSG_WRITE => BoardCommand::MsgWrite {
            ep: ep("write")?,
            offset: c.a,
            len: c.b,
            to: addr([c.c, c.d, c.e], "write")?,
            cookie: c.f,
            at: c.flags,
            tag: c.sync,
        },
        op::HANDLER_STAGE => BoardCommand::HandlerStage { offset: c.a, len: c.b },
        op::HANDLER_LOAD => BoardCommand::HandlerLoad {
            sync: sync()?,
            name: MsgName::from_words([c.c, c.d, c.e])?,
            mailbox: u32::try_from(c.f).map_err(|_| CommandViolation::BadField("handler mailbox"))?,
            memory: c.a,
            kv: c.b,
            deadline_ms: c.flags,
            max_faults: c.endpoint,
        },
        op::HANDLER_UNLOAD => BoardCommand::HandlerUnload { sync: sync()?, name: MsgName::from_words([c.c, c.d, c.e])? },
        op::INFO => BoardCommand::Info { sync: sync()?, ep: ep("info")? },
        op::WAKE_GROUP => BoardCommand::WakeGroup {
            ep: ep("wake group")?,
            group: u8::try_from(c.a).ok().filter(|g| usize::from(*g) < crate::layout::WAKE_SLOTS).ok_or(CommandViolation::BadField("wake group"))?,
        },
        other => return Err(CommandViolation::UnknownOp(other)),
    })
}

fn stream_option(c: &Command) -> StreamOption {
    match c.a {
        opt::NODELAY => StreamOption::NoDelay(c.b != 0),
        opt::KEEPALIVE => match c.b {
            0 => StreamOption::KeepAlive(None),
            1 => {
                let ms = |v: u64| (1..=opt::KEEPALIVE_MAX_MS).contains(&v).then(|| Duration::from_millis(v));
                let probes = (1..=opt::KEEPALIVE_MAX_PROBES).contains(&c.e).then_some(c.e as u32);
                match (ms(c.c), ms(c.d), probes) {
                    (Some(idle), Some(interval), Some(probes)) => {
                        StreamOption::KeepAlive(Some(KeepAlive { idle, interval, probes }))
                    }
                    _ => StreamOption::Invalid,
                }
            }
            _ => StreamOption::Invalid,
        },
        opt::CORK => StreamOption::Cork(c.b != 0),
        opt::USER_TIMEOUT => u32::try_from(c.b).map_or(StreamOption::Invalid, StreamOption::UserTimeout),
        opt::CONGESTION => match c.b {
            v @ (opt::CC_RENO | opt::CC_CUBIC) => StreamOption::Congestion(v as u8),
            _ => StreamOption::Invalid,
        },
        opt::FAST_OPEN => u16::try_from(c.b).map_or(StreamOption::Invalid, StreamOption::FastOpen),
        opt::TOS => u8::try_from(c.b).map_or(StreamOption::Invalid, StreamOption::Tos),
        opt::RCV_CLAMP => match u32::try_from(c.b) {
            Ok(v) if v <= opt::MAX_RCV_CLAMP => StreamOption::RcvClamp(v),
            _ => StreamOption::Invalid,
        },
        opt::TCLASS => u8::try_from(c.b).map_or(StreamOption::Invalid, StreamOption::TrafficClass),
        opt::MAXSEG => match u16::try_from(c.b) {
            Ok(m) if m == 0 || (opt::MIN_MSS..=opt::MAX_MSS).contains(&m) => StreamOption::MaxSeg(m),
            _ => StreamOption::Invalid,
        },
        opt::QUICKACK => u32::try_from(c.b).map_or(StreamOption::Invalid, StreamOption::QuickAck),
        _ => StreamOption::Invalid,
    }
}

impl BoardCommand {
    /// The record an application puts in the command ring.
    pub fn encode(&self) -> Command {
        let mut c = Command::default();
        let put_addr = |c: &mut Command, a: SocketAddr, at: usize| {
            let w = NetAddr::from(a).to_words();
            let slots: [&mut u64; 5] = [&mut c.a, &mut c.b, &mut c.c, &mut c.d, &mut c.e];
            for (i, s) in slots.into_iter().enumerate().skip(at).take(3) {
                *s = w[i - at];
            }
        };
        match *self {
            BoardCommand::Listen { sync, port, backlog, flags } => {
                c.op = op::LISTEN;
                c.sync = sync.0;
                c.a = u64::from(port.unwrap_or(0));
                c.b = u64::from(backlog);
                flags.encode(&mut c);
            }
            BoardCommand::Inherit { sync, key, ep, flags } => {
                (c.op, c.sync, c.a, c.b) = (op::INHERIT, sync.0, key, u64::from(ep));
                flags.encode(&mut c);
            }
            BoardCommand::AcceptOn { ep } => (c.op, c.endpoint) = (op::ACCEPT_ON, ep.0),
            BoardCommand::ShadowListen { ep, port, backlog, flags } => {
                (c.op, c.endpoint, c.a, c.b) = (op::SHADOW_LISTEN, ep.0, u64::from(port), u64::from(backlog));
                flags.encode(&mut c);
            }
            BoardCommand::Release { ep } => (c.op, c.endpoint) = (op::RELEASE, ep.0),
            BoardCommand::Adopt { sync, key, ep, shard } => {
                (c.op, c.sync, c.a, c.b, c.c) = (op::ADOPT, sync.0, key, u64::from(ep), u64::from(shard));
            }
            BoardCommand::ChildOf { key } => (c.op, c.a) = (op::CHILD_OF, key),
            BoardCommand::ShadowInherit { ep, key, parent, flags } => {
                (c.op, c.endpoint, c.a, c.b) = (op::SHADOW_INHERIT, ep.0, key, u64::from(parent));
                flags.encode(&mut c);
            }
            BoardCommand::Connect { sync, to, mss, fast_open, tos, rcv_clamp } => {
                c.e = u64::from(rcv_clamp);
                c.op = op::CONNECT;
                c.sync = sync.0;
                put_addr(&mut c, to, 0);
                c.d = u64::from(mss);
                c.flags = (if fast_open { connect::FAST_OPEN } else { 0 }) | u32::from(tos) << connect::TOS_SHIFT;
            }
            BoardCommand::Push { ep, written } => (c.op, c.endpoint, c.a) = (op::PUSH, ep.0, written),
            BoardCommand::Consumed { ep, read } => (c.op, c.endpoint, c.a) = (op::CONSUMED, ep.0, read),
            BoardCommand::Shutdown { ep } => (c.op, c.endpoint) = (op::SHUTDOWN, ep.0),
            BoardCommand::Close { ep } => (c.op, c.endpoint) = (op::CLOSE, ep.0),
            BoardCommand::Abort { ep } => (c.op, c.endpoint) = (op::ABORT, ep.0),
            BoardCommand::UdpBind { sync, port, family } => {
                (c.op, c.sync, c.a) = (op::UDP_BIND, sync.0, u64::from(port));
                ListenFlags { family, ..ListenFlags::default() }.encode(&mut c);
            }
            BoardCommand::UdpSend { ep, offset, len, to } => {
                (c.op, c.endpoint, c.a, c.b) = (op::UDP_SEND, ep.0, offset, len);
                put_addr(&mut c, to, 2);
            }
            BoardCommand::UdpRelease { offset } => (c.op, c.a) = (op::UDP_RELEASE, offset),
            BoardCommand::SetOption { ep, option } => {
                (c.op, c.endpoint) = (op::SET_OPTION, ep.0);
                match option {
                    StreamOption::NoDelay(on) => (c.a, c.b) = (opt::NODELAY, u64::from(on)),
                    StreamOption::KeepAlive(None) => (c.a, c.b) = (opt::KEEPALIVE, 0),
                    StreamOption::KeepAlive(Some(k)) => {
                        c.a = opt::KEEPALIVE;
                        c.b = 1;
                        c.c = k.idle.as_millis().min(u128::from(u64::MAX)) as u64;
                        c.d = k.interval.as_millis().min(u128::from(u64::MAX)) as u64;
                        c.e = u64::from(k.probes);
                    }
                    StreamOption::Cork(on) => (c.a, c.b) = (opt::CORK, u64::from(on)),
                    StreamOption::UserTimeout(ms) => (c.a, c.b) = (opt::USER_TIMEOUT, u64::from(ms)),
                    StreamOption::Congestion(k) => (c.a, c.b) = (opt::CONGESTION, u64::from(k)),
                    StreamOption::FastOpen(q) => (c.a, c.b) = (opt::FAST_OPEN, u64::from(q)),
                    StreamOption::Tos(t) => (c.a, c.b) = (opt::TOS, u64::from(t)),
                    StreamOption::RcvClamp(v) => (c.a, c.b) = (opt::RCV_CLAMP, u64::from(v)),
                    StreamOption::TrafficClass(t) => (c.a, c.b) = (opt::TCLASS, u64::from(t)),
                    StreamOption::MaxSeg(m) => (c.a, c.b) = (opt::MAXSEG, u64::from(m)),
                    StreamOption::QuickAck(v) => (c.a, c.b) = (opt::QUICKACK, u64::from(v)),
                    // An option number nobody defines.
                    StreamOption::Invalid => c.a = u64::MAX,
                }
            }
            BoardCommand::Detach => c.op = op::DETACH,
            BoardCommand::MsgBind { sync, number, capacity, name, posted } => {
                (c.op, c.sync, c.a, c.b) = (op::MSG_BIND, sync.0, u64::from(number.unwrap_or(0)), u64::from(capacity));
                [c.c, c.d, c.e] = name.to_words();
                c.flags = if posted { msg::POSTED } else { 0 };
            }
            BoardCommand::MsgSend { ep, offset, len, to, mailbox, tag, reliable } => {
                (c.op, c.endpoint, c.a, c.b) = (op::MSG_SEND, ep.0, offset, len);
                put_addr(&mut c, to, 2);
                c.f = u64::from(mailbox) | u64::from(tag) << 32;
                c.flags = if reliable { msg::RELIABLE } else { 0 };
            }
            BoardCommand::MsgCall { ep, offset, len, to, mailbox, tag, timeout_ms } => {
                (c.op, c.endpoint, c.a, c.b) = (op::MSG_CALL, ep.0, offset, len);
                put_addr(&mut c, to, 2);
                c.f = u64::from(mailbox) | u64::from(tag) << 32;
                c.flags = timeout_ms;
            }
            BoardCommand::MsgReply { ep, offset, len, token } => {
                (c.op, c.endpoint, c.a, c.b, c.c) = (op::MSG_REPLY, ep.0, offset, len, u64::from(token));
            }
            BoardCommand::MsgLookup { sync, host, name } => {
                (c.op, c.sync) = (op::MSG_LOOKUP, sync.0);
                put_addr(&mut c, host, 2);
                [c.a, c.b, c.f] = name.to_words();
            }
            BoardCommand::MsgPostRecv { ep, offset, len, tag } => {
                (c.op, c.endpoint, c.a, c.b, c.f) = (op::MSG_POST_RECV, ep.0, offset, len, u64::from(tag) << 32);
            }
            BoardCommand::MsgRegister { sync, ep, offset, len, tripwire, notify } => {
                (c.op, c.sync, c.endpoint, c.a, c.b) = (op::MSG_REGISTER, sync.0, ep.0, offset, len);
                c.c = tripwire.unwrap_or(u64::MAX);
                c.flags = if notify { msg::NOTIFY } else { 0 };
            }
            BoardCommand::MsgUnregister { ep, cookie } => (c.op, c.endpoint, c.f) = (op::MSG_UNREGISTER, ep.0, cookie),
            BoardCommand::MsgWrite { ep, offset, len, to, cookie, at, tag } => {
                (c.op, c.endpoint, c.a, c.b, c.f, c.flags, c.sync) = (op::MSG_WRITE, ep.0, offset, len, cookie, at, tag);
                put_addr(&mut c, to, 2);
            }
            BoardCommand::HandlerStage { offset, len } => (c.op, c.a, c.b) = (op::HANDLER_STAGE, offset, len),
            BoardCommand::HandlerLoad { sync, name, mailbox, memory, kv, deadline_ms, max_faults } => {
                (c.op, c.sync, c.f, c.a, c.b, c.flags, c.endpoint) = (op::HANDLER_LOAD, sync.0, u64::from(mailbox), memory, kv, deadline_ms, max_faults);
                [c.c, c.d, c.e] = name.to_words();
            }
            BoardCommand::HandlerUnload { sync, name } => {
                (c.op, c.sync) = (op::HANDLER_UNLOAD, sync.0);
                [c.c, c.d, c.e] = name.to_words();
            }
            BoardCommand::Info { sync, ep } => (c.op, c.sync, c.endpoint) = (op::INFO, sync.0, ep.0),
            BoardCommand::WakeGroup { ep, group } => (c.op, c.endpoint, c.a) = (op::WAKE_GROUP, ep.0, u64::from(group)),
        }
        c
    }
}

#[cfg(test)]
mod tests;
