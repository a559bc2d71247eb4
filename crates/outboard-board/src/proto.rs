//! The doorbell records: commands (application → engine) and events
//! (engine → application). Both are plain data; the engine checks every
//! field of a command it copied out before acting on it.

use crate::shm::Pod;

/// One command, 64 bytes. Fields `a`..`d` mean what `op` says.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Command {
    pub op: u32,
    /// The endpoint the command is about (ignored by LISTEN/CONNECT/UDP_BIND).
    pub endpoint: u32,
    /// The sync slot that receives the result (LISTEN, CONNECT, UDP_BIND).
    pub sync: u32,
    pub flags: u32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub d: u64,
    pub e: u64,
    pub f: u64,
}
const _: () = assert!(std::mem::size_of::<Command>() == 64);
// SAFETY: repr(C), u32s and u64s only, no padding (4×4 + 6×8 = 64).
unsafe impl Pod for Command {}

/// Operations (`Command::op`).
pub mod op {
    /// a = port, b = backlog, flags = `listen::*` → sync: endpoint or
    /// -errno (EADDRINUSE when another endpoint listens on the port and
    /// the two may not share it).
    pub const LISTEN: u32 = 1;
    /// a, b, c = the destination (`NetAddr` as three words), d = TCP_MAXSEG
    /// set before connect (`opt::MIN_MSS..=opt::MAX_MSS`; 0 or out of
    /// range: none) → sync: endpoint
    /// once established, or -errno (ECONNREFUSED, ETIMEDOUT, ENETUNREACH,
    /// EAFNOSUPPORT for a family the engine does not run…).
    pub const CONNECT: u32 = 2;
    /// Stream: a = total bytes the application has written into the
    /// endpoint's transmit region since it opened.
    pub const PUSH: u32 = 3;
    /// Stream: a = total bytes the application has consumed from the receive region.
    pub const CONSUMED: u32 = 4;
    /// Stream: no more data from us (FIN after what is queued).
    pub const SHUTDOWN: u32 = 5;
    /// Any endpoint: the application is done with it (graceful close for a
    /// stream); the id stays taken until the engine posts `CLOSED`.
    pub const CLOSE: u32 = 6;
    /// Stream: reset now.
    pub const ABORT: u32 = 7;
    /// a = port (0: any) → sync: endpoint or -errno.
    pub const UDP_BIND: u32 = 8;
    /// Datagram: a = board offset of the payload, b = length, c, d, e = the
    /// destination (`NetAddr` as three words). The buffer passes to the
    /// engine and comes back with a `BUF_RETURN` event.
    pub const UDP_SEND: u32 = 9;
    /// Datagram: a = board offset of a received message's buffer, given back.
    pub const UDP_RELEASE: u32 = 10;
    /// Stream: a = option (`opt::*`), b = value (more in `c`..`e` where
    /// the option says). A bad value is counted (`bad_options`) and ignored,
    /// not a violation: the application learns of it from its own checks.
    pub const SET_OPTION: u32 = 11;
    /// The application detaches cleanly (its socket closes next): streams
    /// still open are closed gracefully, not reset.
    pub const DETACH: u32 = 12;
    /// Join a listener inherited across fork (the socket shim in a child):
    /// a = the parent board's inherit key (`header::INHERIT_KEY`, which only
    /// processes that mapped that board can read), b = the listener's
    /// endpoint in the parent's board, flags = `listen::*` (`ON_DEMAND`) →
    /// sync: this board's endpoint on the same listener, or -errno (EBADF:
    /// no such listener). The engine hands each accepted connection to one
    /// of the listener's endpoints.
    pub const INHERIT: u32 = 13;
    /// Listener (opened `ON_DEMAND`): give this endpoint accepted
    /// connections from now on (the application showed it accepts: an
    /// `accept`, or read interest in poll/epoll/select).
    pub const ACCEPT_ON: u32 = 14;
    /// Sent to every shard but the one that opened listener `endpoint` (by
    /// LISTEN): listen on a = port, b = backlog, flags = `listen::*` on this
    /// shard too, and give this shard's accepted connections to `endpoint`
    /// (so connections to it are accepted on whichever shard their SYN
    /// reaches). No sync: the opening shard answered already.
    pub const SHADOW_LISTEN: u32 = 15;
    /// The same for a listener opened by INHERIT: a = the parent's key,
    /// b = the parent's endpoint, flags = `listen::*`.
    pub const SHADOW_INHERIT: u32 = 16;
    /// Stream: the application closes its copy, which a process it forked
    /// may still hold (the socket shim sends this for streams that existed
    /// when it forked). The endpoint id is freed as by CLOSE; the connection
    /// waits for that child's ADOPT while the application has a live child
    /// (or forked less than a moment ago), then closes as CLOSE would.
    pub const RELEASE: u32 = 17;
    /// Take over a stream of the process this one was forked from: a = the
    /// parent board's inherit key, b = the stream's endpoint in the parent's
    /// board → sync: this board's endpoint for the same connection (the
    /// bytes still queued both ways are in its regions; its status record's
    /// TX_BASE says how many of the transmit region's bytes are queued
    /// already), or -errno (EBADF: no such stream; EBUSY: the parent kept it
    /// open). Sent to the shard the parent's endpoint is on.
    pub const ADOPT: u32 = 18;
    /// The application was forked from the one whose inherit key is a (sent
    /// to every shard right after attaching): the engine keeps that parent's
    /// released streams for this child while it lives.
    pub const CHILD_OF: u32 = 19;
    /// Message mailboxes (shard 0's message service; `msg` says the fields).
    /// Bind: a = mailbox number (0: the engine picks one), b = byte budget
    /// (0: the engine's default), c, d, e = name (`msg::NAME_LEN` bytes,
    /// NUL-padded; all zero: none), flags = `msg::POSTED` → sync: endpoint
    /// (status record: kind `MAILBOX`, `RX_TOTAL` = the mailbox number,
    /// `LOCAL` = the engine's address and message port) or -errno
    /// (EADDRINUSE: number or name taken; EINVAL: a bad name;
    /// EPROTONOSUPPORT: the engine runs no message service).
    pub const MSG_BIND: u32 = 20;
    /// Mailbox `endpoint` sends: a = board offset of the bytes (inside one
    /// buffer the application holds), b = length, c, d, e = the destination
    /// engine (`NetAddr`), f = destination mailbox | tag << 32, flags =
    /// `msg::RELIABLE` (else a datagram). The buffer passes to the engine:
    /// a send buffer comes back with `BUF_RETURN`, a received one (a message
    /// forwarded in place) returns to the engine's pool. A reliable
    /// message completes with `COMPLETION` (tag, 0 or errno).
    pub const MSG_SEND: u32 = 21;
    /// Mailbox `endpoint` calls: a, b, c..e as `MSG_SEND`, f = server
    /// mailbox | tag << 32, flags = timeout in ms (0: the engine's). The
    /// response arrives in the mailbox (`msg::RESPONSE`, descriptor tag =
    /// the call's tag); a failed call completes with `COMPLETION` (tag, errno:
    /// ETIMEDOUT, ECONNREFUSED no such mailbox, ECONNRESET server restarted).
    pub const MSG_CALL: u32 = 22;
    /// Mailbox `endpoint` answers the request whose descriptor tag is c:
    /// a, b as `MSG_SEND` (the request's own buffer: a reply in place).
    pub const MSG_REPLY: u32 = 23;
    /// Look a name up at an engine: c, d, e = that engine (`NetAddr`),
    /// a, b, f = the name (as `MSG_BIND`'s) → sync: the mailbox number or
    /// -errno (ENOENT: no such name; ETIMEDOUT).
    pub const MSG_LOOKUP: u32 = 24;
    /// Mailbox `endpoint` (bound `POSTED`) takes messages into this buffer
    /// next: a = board offset, b = length (inside one send buffer the
    /// application holds; the engine holds it until it fills it), f high =
    /// the application's tag (the descriptor's tag when it is filled).
    pub const MSG_POST_RECV: u32 = 25;
    /// Register a region for one-sided writes to mailbox `endpoint`:
    /// a = board offset, b = length (inside one send buffer the application
    /// holds; the engine holds it until `MSG_UNREGISTER` or close), c = the
    /// tripwire's offset in the region (`u64::MAX`: none), flags =
    /// `msg::NOTIFY` (a `REMOTE_WRITE` event per write) → sync: the cookie
    /// (non-negative) or -errno.
    pub const MSG_REGISTER: u32 = 26;
    /// Mailbox `endpoint` gives up the region of cookie f (its buffer comes back with `BUF_RETURN`).
    pub const MSG_UNREGISTER: u32 = 27;
    /// Mailbox `endpoint` writes a, b (as `MSG_SEND`) into the remote
    /// region f (its cookie) at offset `flags`, at the engine c, d, e;
    /// sync = tag: completes with `COMPLETION` (tag, 0 or errno; EFAULT: out
    /// of the region's bounds or no such region there).
    pub const MSG_WRITE: u32 = 28;
    /// Handlers (docs/HANDLERS.md), on shard 0 (the message service). Stage
    /// part of a module: a = board offset, b = length of a send buffer the
    /// application holds (it comes back with `BUF_RETURN`); the bytes are
    /// appended to this board's staged module (at most `handler::MAX_MODULE`).
    pub const HANDLER_STAGE: u32 = 29;
    /// Load the staged module as handler c, d, e (a name, as `MSG_BIND`'s) on
    /// mailbox f (0: a number the engine picks, the mailbox named after the
    /// handler), or replace this board's handler of that name (keeping its
    /// mailbox and key-value store): a = memory cap in bytes, b = key-value
    /// cap in bytes, flags = deadline in ms, endpoint = faults in a row that
    /// disable it (0 for each: the engine's default; `u32::MAX` faults:
    /// never) → sync: the mailbox number or -errno (EINVAL: the module or
    /// the limits refused, the engine's log says why; EPERM: a handler of
    /// that name that is not this board's; E2BIG: staged past the limit;
    /// ENOSPC: the engine holds all the handlers it may; EPROTONOSUPPORT: no
    /// message service). The staged bytes are consumed either way. A
    /// board's handlers are unloaded when it detaches or dies.
    pub const HANDLER_LOAD: u32 = 30;
    /// Unload this board's handler c, d, e (what waits in its mailbox runs
    /// through it first) → sync: 0 or -errno (ENOENT; EPERM: not this board's).
    pub const HANDLER_UNLOAD: u32 = 31;
    /// Stream: publish its `TCP_INFO` words in the status record from now
    /// on (the engine computes and writes them only for streams whose
    /// application asked: most never do) → sync: 0 once they are written.
    /// Until then the record's `INFO_BYTES` word is 0 (no state is 0).
    pub const INFO: u32 = 32;
    /// Endpoint (a stream or listener): its events wake the application's
    /// threads asleep in wake group `a` (1 to `WAKE_SLOTS - 1`; 0: in no
    /// group, every sleeper) instead of every thread asleep in poll/epoll
    /// (`header::APP_POLLERS`). No sync. A closed endpoint leaves its group.
    pub const WAKE_GROUP: u32 = 33;
}

/// Handlers loaded through a board (`op::HANDLER_*`).
pub mod handler {
    /// The largest module a board may stage.
    pub const MAX_MODULE: usize = 16 << 20;
}

/// Message mailboxes on the board (`op::MSG_*`).
pub mod msg {
    /// Bytes of a name in a command.
    pub const NAME_LEN: usize = 24;
    /// `MSG_BIND`: messages land only in buffers posted with `MSG_POST_RECV`.
    pub const POSTED: u32 = 1;
    /// `MSG_SEND`: a reliable message (else a datagram).
    pub const RELIABLE: u32 = 1;
    /// `MSG_REGISTER`: post `REMOTE_WRITE` for every write.
    pub const NOTIFY: u32 = 1;
    /// The header before a received message's payload in its buffer:
    /// `[0, 24)` the sending engine (`NetAddr`), `[24, 28)` the sending
    /// mailbox, `[28, 32)` the kind, `[32, 36)` the tag. The descriptor's
    /// `aux` is the kind and its `tag` the tag too (the engine reads neither
    /// back from the buffer).
    pub const HEADER: usize = 64;
    pub const HDR_MAILBOX: usize = 24;
    pub const HDR_KIND: usize = 28;
    pub const HDR_TAG: usize = 32;
    /// Kinds (descriptor `aux`).
    pub const DATAGRAM: u32 = 1;
    pub const MESSAGE: u32 = 2;
    /// A request: the tag is its token for `MSG_REPLY`.
    pub const REQUEST: u32 = 3;
    /// A response: the tag is the call's.
    pub const RESPONSE: u32 = 4;
    /// A message that filled a posted buffer (the tag is the post's); the
    /// buffer is the application's again.
    pub const POSTED_MESSAGE: u32 = 5;
    /// A posted buffer too small for the message (dropped and counted;
    /// the buffer is the application's again, len = the message's length).
    pub const POSTED_TOO_SMALL: u32 = 6;
}

/// Flags of `op::LISTEN` and `op::INHERIT`.
pub mod listen {
    /// SO_REUSEPORT: share the port with other endpoints that set it, of the
    /// same user (connections are spread among them).
    pub const REUSEPORT: u32 = 1;
    /// Accepted connections go to this endpoint only after `ACCEPT_ON`
    /// (a process holding a shared listener it never accepts on, such as
    /// nginx's master, is given none).
    pub const ON_DEMAND: u32 = 2;
    /// An AF_INET listener: IPv4 connections only.
    pub const IPV4_ONLY: u32 = 4;
    /// An AF_INET6 listener with IPV6_V6ONLY: IPv6 connections only
    /// (neither family bit: both, as a dual-stack `::` socket).
    pub const IPV6_ONLY: u32 = 8;
    /// Bound to one local address, in words c, d and e (a `NetAddr`, port
    /// ignored): connections to that address only.
    pub const ADDR: u32 = 16;
    pub const ALL: u32 = REUSEPORT | ON_DEMAND | IPV4_ONLY | IPV6_ONLY | ADDR;
    /// Bits 16..32: RFC 7413 Fast Open queue length (Linux's `TCP_FASTOPEN`
    /// set before `listen`); 0: Fast Open off.
    pub const FASTOPEN_QLEN_SHIFT: u32 = 16;
    /// Bits 8..16: IP_TOS set before `listen` (the DSCP of the IPv4
    /// SYN-ACKs and accepted connections; ECN bits ignored).
    pub const TOS_SHIFT: u32 = 8;
    /// Word f of LISTEN, SHADOW_LISTEN, INHERIT and SHADOW_INHERIT, bits
    /// 0..16: TCP_MAXSEG set before `listen` (0: none; else 88..=32767), the
    /// SYN-ACK's MSS and the accepted connections' send-MSS ceiling.
    pub const MSS_MASK: u64 = 0xffff;
    /// Word f bits 16..24: IPV6_TCLASS set before `listen` (as `TOS_SHIFT` for IPv6).
    pub const TCLASS_SHIFT: u32 = 16;
    /// Word f bits 32..64: SO_RCVBUF set before `listen`, as the window clamp
    /// in bytes (0: none): the SYN-ACK's window and scale come from it.
    pub const RCV_CLAMP_SHIFT: u32 = 32;
}

/// `CONNECT` flags (`Command::flags`).
pub mod connect {
    /// RFC 7413 Fast Open (Linux's `TCP_FASTOPEN_CONNECT`, or `MSG_FASTOPEN`):
    /// with a cookie cached for the destination the sync completes at once
    /// and the SYN goes with the first data; without one the SYN asks for a
    /// cookie and the sync completes with the handshake.
    pub const FAST_OPEN: u32 = 1;
    /// Bits 8..16: IP_TOS / IPV6_TCLASS set before `connect` (the SYN
    /// carries it; ECN bits ignored). Word d is TCP_MAXSEG; word e SO_RCVBUF
    /// set before `connect`, as the window clamp in bytes (0: none; the SYN's
    /// window and scale come from it).
    pub const TOS_SHIFT: u32 = 8;
}

/// Options for `op::SET_OPTION`.
pub mod opt {
    pub const NODELAY: u64 = 1;
    /// RFC 1122 §4.2.3.6 keep-alives: b = 0 off / 1 on, c = idle ms,
    /// d = interval ms, e = probes (SO_KEEPALIVE, TCP_KEEPIDLE,
    /// TCP_KEEPINTVL, TCP_KEEPCNT).
    pub const KEEPALIVE: u64 = 2;
    /// Bounds of `KEEPALIVE`'s values (Linux takes at most 2^31 ms and 127 probes).
    pub const KEEPALIVE_MAX_MS: u64 = 1 << 31;
    pub const KEEPALIVE_MAX_PROBES: u64 = 127;
    /// TCP_CORK: b = 0 off / 1 on (the shim also sends it around a
    /// `MSG_MORE` send).
    pub const CORK: u64 = 3;
    /// TCP_USER_TIMEOUT: b = milliseconds (0: off).
    pub const USER_TIMEOUT: u64 = 4;
    /// TCP_CONGESTION: b = `CC_RENO` or `CC_CUBIC`.
    pub const CONGESTION: u64 = 5;
    pub const CC_RENO: u64 = 0;
    pub const CC_CUBIC: u64 = 1;
    /// TCP_FASTOPEN on a listener: b = the Fast Open queue length (0: off).
    pub const FAST_OPEN: u64 = 6;
    /// IP_TOS / IPV6_TCLASS: b = the byte (the engine keeps the ECN bits under its control).
    pub const TOS: u64 = 7;
    /// IPV6_TCLASS on a listener: b = the byte for its IPv6 connections
    /// (`TOS` on a listener is IP_TOS, for its IPv4 ones; on a stream `TOS`
    /// serves both families).
    pub const TCLASS: u64 = 9;
    /// SO_RCVBUF on a stream or a listener: b = the window clamp in bytes
    /// (0: none; at most 2^31).
    pub const RCV_CLAMP: u64 = 10;
    /// The largest window clamp (Linux's largest buffer, `INT_MAX`, halved).
    pub const MAX_RCV_CLAMP: u32 = 1 << 30;
    /// TCP_MAXSEG on a listener: b = the MSS (0: none; else `MIN_MSS..=MAX_MSS`)
    /// for the connections it accepts from then on.
    pub const MAXSEG: u64 = 8;
    /// TCP_QUICKACK on a stream: b = the value as set (at most `u32::MAX`):
    /// 0 makes the connection interactive (its ACKs wait for replies); any
    /// other value leaves that mode and sends a delayed ACK that is due by
    /// Linux's rule; an even one then makes it interactive again.
    pub const QUICKACK: u64 = 11;
    /// Bounds of a CONNECT's MSS (Linux's TCP_MAXSEG: 88 ..= 32767).
    pub const MIN_MSS: u16 = 88;
    pub const MAX_MSS: u16 = 32767;
}

/// One event, 16 bytes: `kind` is a set of `ev::*` bits.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Event {
    pub endpoint: u32,
    pub kind: u32,
    pub value: u64,
}
const _: () = assert!(std::mem::size_of::<Event>() == 16);
// SAFETY: repr(C), two u32s and a u64, no padding.
unsafe impl Pod for Event {}

/// Event bits (`Event::kind`). State lives in the endpoint's status record;
/// events say which endpoints to look at (and carry ids and buffers).
pub mod ev {
    /// New bytes in the receive region, or a datagram in the mailbox.
    pub const READABLE: u32 = 1;
    /// Room freed in the transmit region.
    pub const WRITABLE: u32 = 2;
    /// Listener: `value` = a new stream endpoint.
    pub const ACCEPT: u32 = 4;
    /// A sync completed: `value` = its slot.
    pub const SYNC: u32 = 8;
    /// The peer sent FIN: no more data after what is in the region.
    pub const PEER_CLOSED: u32 = 16;
    /// The endpoint failed: the status record's `error` says why.
    pub const ERROR: u32 = 32;
    /// The engine released the endpoint after CLOSE: its id may be reused.
    pub const CLOSED: u32 = 64;
    /// `value` = board offset of a buffer given back to the application.
    pub const BUF_RETURN: u32 = 128;
    /// Mailbox: an operation completed: `value` = tag << 32 | errno (0: done).
    pub const COMPLETION: u32 = 256;
    /// Mailbox: a one-sided write landed in a region it registered:
    /// `value` = offset in the region << 32 | length.
    pub const REMOTE_WRITE: u32 = 512;
    /// Mailbox: a write covered a region's tripwire byte: `value` = the region's cookie.
    pub const TRIPWIRE: u32 = 1024;
}

/// Endpoint kinds in the status record.
pub mod kind {
    pub const FREE: u32 = 0;
    pub const LISTENER: u32 = 1;
    pub const STREAM: u32 = 2;
    pub const DATAGRAM: u32 = 3;
    pub const MAILBOX: u32 = 4;
}
