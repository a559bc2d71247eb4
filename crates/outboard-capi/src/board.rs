//! Attaching to an engine: the board.

use crate::{c_str, ffi, free, handle, handle_ref, mode, ob_dgram_t, ob_event_queue_t, ob_listener_t, ob_stream_t};
use crate::{addr_from_c, ip_to_c, ob_addr_t, sockaddr, Errno, EINVAL, OB_MODE_BLOCKING, OB_MODE_NONBLOCKING, OB_MODE_POLLING};
use libc::{c_char, c_int};
use outboard_api::{AttachOptions, Board, Mode};
use outboard_board::BoardParams;
use std::ptr;
use std::time::Duration;

/// An attachment to an engine: shared memory with it. Made by `ob_attach`
/// or `ob_embedded_attach`, freed by `ob_detach`. Use a board and every
/// handle made from it from one thread at a time.
pub struct ob_board_t {
    pub(crate) board: Board,
}

impl ob_board_t {
    /// The handle of `board` (for `outboard-embedded`'s `ob_embedded_attach`).
    #[doc(hidden)]
    pub fn new(board: Board) -> ob_board_t {
        ob_board_t { board }
    }
}

/// Board sizes to ask for (the engine sets the stream region size and may
/// refuse a board too large). Start from
/// `ob_attach_options_default()` and change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ob_board_params_t {
    /// Slots in the application-to-engine command ring.
    pub command_capacity: u32,
    /// Slots in the engine-to-application event ring.
    pub event_capacity: u32,
    /// Listeners, streams and datagram sockets the board can hold at once.
    pub endpoints: u32,
    /// Datagrams queued per datagram socket.
    pub mailbox_capacity: u32,
    /// Wait objects (one per endpoint that can block).
    pub syncs: u32,
    /// Datagram buffers in the board.
    pub dgram_buffers: u32,
    /// Bytes per datagram buffer.
    pub dgram_size: u32,
    /// Bytes of each stream's transmit and receive region.
    pub stream_buffer: u32,
    /// Stream regions in the board (two per stream).
    pub stream_buffers: u32,
}

/// How to attach (`ob_attach`, `ob_embedded_attach`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ob_attach_options_t {
    /// Board sizes to ask for.
    pub params: ob_board_params_t,
    /// `OB_MODE_*` of the endpoints made from this board (each can change its own).
    pub mode: c_int,
    /// Microseconds to spin before sleeping in `OB_MODE_BLOCKING`.
    pub spin_us: u32,
}

/// Bytes the library copied for the application (`ob_send`, `ob_recv`,
/// `ob_send_to`, `ob_recv_from`); the zero-copy calls copy nothing.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ob_copy_counters_t {
    pub send_copied: u64,
    pub recv_copied: u64,
}

pub(crate) fn params_from_c(p: &ob_board_params_t) -> BoardParams {
    BoardParams {
        command_capacity: p.command_capacity,
        event_capacity: p.event_capacity,
        endpoints: p.endpoints,
        mailbox_capacity: p.mailbox_capacity,
        syncs: p.syncs,
        dgram_buffers: p.dgram_buffers,
        dgram_size: p.dgram_size,
        stream_buffer: p.stream_buffer,
        stream_buffers: p.stream_buffers,
        // The engine's shards serve the board, whatever is asked.
        shards: BoardParams::default().shards,
    }
}

fn params_to_c(p: &BoardParams) -> ob_board_params_t {
    ob_board_params_t {
        command_capacity: p.command_capacity,
        event_capacity: p.event_capacity,
        endpoints: p.endpoints,
        mailbox_capacity: p.mailbox_capacity,
        syncs: p.syncs,
        dgram_buffers: p.dgram_buffers,
        dgram_size: p.dgram_size,
        stream_buffer: p.stream_buffer,
        stream_buffers: p.stream_buffers,
    }
}

/// The Rust options for `opts` (NULL: the defaults).
#[doc(hidden)]
pub unsafe fn options_from_c(opts: *const ob_attach_options_t) -> Result<AttachOptions, Errno> {
    let Some(o) = opts.as_ref() else { return Ok(AttachOptions::default()) };
    Ok(AttachOptions {
        params: params_from_c(&o.params),
        mode: mode(o.mode)?,
        spin: Duration::from_micros(u64::from(o.spin_us)),
        wake_fd: None,
        wake_group_fds: Vec::new(),
        run_dir: None,
    })
}

/// The default attach options (the same as passing NULL).
#[no_mangle]
pub extern "C" fn ob_attach_options_default() -> ob_attach_options_t {
    let d = AttachOptions::default();
    ob_attach_options_t {
        params: params_to_c(&d.params),
        mode: match d.mode {
            Mode::Blocking => OB_MODE_BLOCKING,
            Mode::NonBlocking => OB_MODE_NONBLOCKING,
            Mode::Polling => OB_MODE_POLLING,
        },
        spin_us: u32::try_from(d.spin.as_micros()).unwrap_or(u32::MAX),
    }
}

/// Attaches to the daemon engine `engine_name` (`outboard engine --name NAME`;
/// the engine's run directory is `$OUTBOARD_RUN_DIR` when set). `opts` may be
/// NULL for the defaults. Returns NULL with errno set on failure
/// (ECONNREFUSED: no such engine or it refused).
#[no_mangle]
pub unsafe extern "C" fn ob_attach(engine_name: *const c_char, opts: *const ob_attach_options_t) -> *mut ob_board_t {
    ffi(ptr::null_mut(), || {
        let name = c_str(engine_name)?;
        let opts = options_from_c(opts)?;
        let board = Board::attach_with(name, &opts)?;
        Ok(Box::into_raw(Box::new(ob_board_t { board })))
    })
}

/// Frees the board handle. The attachment ends when this handle and every
/// handle made from the board (listeners, streams, datagram sockets, event
/// queues) are freed; the engine then resets the board's streams that are
/// still open, and may reset those closed just before (a close queued but not
/// yet run): wait for the peer's end of stream before detaching when that
/// matters. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_detach(board: *mut ob_board_t) -> c_int {
    free(board)
}

/// After the engine died: waits up to `timeout_ms` for an engine of the same
/// name to come back (a restart) and attaches a new board to it with the
/// options `board` was attached with. `board` stays failed (free it); open
/// listeners and datagram sockets again on the new board. Returns NULL with
/// errno ETIMEDOUT (none came back), EACCES (the engine does not admit this
/// user), EINVAL (NULL, or a board of an embedded engine).
#[no_mangle]
pub unsafe extern "C" fn ob_reattach(board: *const ob_board_t, timeout_ms: u32) -> *mut ob_board_t {
    ffi(ptr::null_mut(), || {
        let b = handle_ref(board)?.board.reattach(Duration::from_millis(u64::from(timeout_ms)))?;
        Ok(Box::into_raw(Box::new(ob_board_t { board: b })))
    })
}

/// 1 while the engine is attached and alive, 0 once it is gone, -1 (EINVAL) for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_engine_alive(board: *const ob_board_t) -> c_int {
    ffi(-1, || Ok(c_int::from(handle_ref(board)?.board.engine_alive())))
}

/// The engine's IPv4 address in host byte order; 0 with errno EINVAL for
/// NULL, EAFNOSUPPORT for an engine whose address is IPv6 (see
/// `ob_engine_address`).
#[no_mangle]
pub unsafe extern "C" fn ob_engine_addr(board: *const ob_board_t) -> u32 {
    ffi(0, || match handle_ref(board)?.board.engine_addr() {
        std::net::IpAddr::V4(v4) => Ok(u32::from(v4)),
        std::net::IpAddr::V6(_) => Err(Errno(libc::EAFNOSUPPORT)),
    })
}

/// The engine's address, of either family, into `*out` (port 0). Returns 0,
/// or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_engine_address(board: *const ob_board_t, out: *mut ob_addr_t) -> c_int {
    ffi(-1, || {
        let ip = handle_ref(board)?.board.engine_addr();
        out.as_mut().ok_or(EINVAL)?.clone_from(&ip_to_c(ip));
        Ok(0)
    })
}

/// The engine's static IPv6 address into `*out` (port 0) and its prefix
/// length into `*prefix_len` (may be NULL). Returns 0, or -1 with errno:
/// EINVAL for NULL, EAFNOSUPPORT when the engine runs no IPv6,
/// EADDRNOTAVAIL when it runs IPv6 with no static address (link-local and
/// autoconfigured addresses only).
#[no_mangle]
pub unsafe extern "C" fn ob_engine_address6(board: *const ob_board_t, out: *mut ob_addr_t, prefix_len: *mut u8) -> c_int {
    ffi(-1, || {
        let net = handle_ref(board)?.board.engine_net();
        let out = out.as_mut().ok_or(EINVAL)?;
        let v6 = net.ipv6.ok_or(Errno(libc::EAFNOSUPPORT))?;
        let (a, p) = v6.addr.ok_or(Errno(libc::EADDRNOTAVAIL))?;
        out.clone_from(&ip_to_c(a.into()));
        crate::put_opt(prefix_len, p);
        Ok(0)
    })
}

/// Copies the board's copy counters into `*out`. Returns 0 or -1 (EINVAL).
#[no_mangle]
pub unsafe extern "C" fn ob_board_copy_counters(board: *const ob_board_t, out: *mut ob_copy_counters_t) -> c_int {
    ffi(-1, || {
        let b = handle_ref(board)?;
        if out.is_null() {
            return Err(EINVAL);
        }
        let c = b.board.copy_counters();
        out.write(ob_copy_counters_t { send_copied: c.send_copied, recv_copied: c.recv_copied });
        Ok(0)
    })
}

/// Listens on TCP `port` of the engine's address with room for `backlog`
/// connections the engine accepted and the application has not. Returns NULL
/// with errno on failure (EADDRINUSE, ENOBUFS, ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_listen(board: *mut ob_board_t, port: u16, backlog: u32) -> *mut ob_listener_t {
    ffi(ptr::null_mut(), || {
        let listener = handle(board)?.board.listen(port, backlog)?;
        Ok(Box::into_raw(Box::new(ob_listener_t { listener })))
    })
}

/// Like `ob_listen`, with `flags` (`OB_LISTEN_REUSEPORT`: share the port
/// with other boards' listeners of the same user that set it too;
/// `OB_LISTEN_ON_DEMAND`: take connections only after
/// `ob_listener_accept_on`). Returns NULL with errno on failure (EINVAL for
/// unknown flags, EADDRINUSE, ENOBUFS, ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_listen_with(board: *mut ob_board_t, port: u16, backlog: u32, flags: u32) -> *mut ob_listener_t {
    ffi(ptr::null_mut(), || {
        let flags = crate::listener::listen_flags(flags)?;
        let listener = handle(board)?.board.listen_with(port, backlog, flags)?;
        Ok(Box::into_raw(Box::new(ob_listener_t { listener })))
    })
}

/// Listens on `*addr` as a Linux socket bound to it: `0.0.0.0` takes IPv4
/// connections only, `[::]` both families (only IPv6 with
/// `OB_LISTEN_IPV6_ONLY`), any other address only connections to it.
/// `flags` as for `ob_listen_with`. Returns NULL with errno on failure
/// (EINVAL, EAFNOSUPPORT for IPv6 on an engine without it, EADDRNOTAVAIL
/// for an address not the engine's, EADDRINUSE, ENOBUFS, ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_listen_addr(board: *mut ob_board_t, addr: *const ob_addr_t, backlog: u32, flags: u32) -> *mut ob_listener_t {
    ffi(ptr::null_mut(), || {
        let addr = crate::addr::addr_from_c(addr)?;
        let flags = crate::listener::listen_flags(flags)?;
        let listener = handle(board)?.board.listen_on(addr, backlog, flags)?;
        Ok(Box::into_raw(Box::new(ob_listener_t { listener })))
    })
}

/// Says this process was forked from the one whose `ob_inherit_key` is
/// `parent_key`: the streams it releases (`ob_stream_release`) wait for
/// this process to adopt them. Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_child_of(board: *mut ob_board_t, parent_key: u64) -> c_int {
    ffi(-1, || {
        handle(board)?.board.child_of(parent_key)?;
        Ok(0)
    })
}

/// Takes over stream `parent_stream` (its `ob_stream_id`, on shard
/// `shard`: its `ob_stream_shard`) of the process whose `ob_inherit_key`
/// is `parent_key`, with every byte still queued either way. Waits up to a
/// second for the parent to release it. Returns NULL with errno on failure
/// (EBADF: no such stream; EBUSY: the parent kept it).
#[no_mangle]
pub unsafe extern "C" fn ob_adopt_stream(board: *mut ob_board_t, parent_key: u64, parent_stream: u32, shard: u32) -> *mut ob_stream_t {
    ffi(ptr::null_mut(), || {
        let stream = handle(board)?.board.adopt_stream(parent_key, parent_stream, shard)?;
        Ok(Box::into_raw(Box::new(ob_stream_t { stream })))
    })
}

/// The key a process forked from this application presents to join its
/// listeners (`ob_inherit_listener`); 0 for NULL (EINVAL).
#[no_mangle]
pub unsafe extern "C" fn ob_inherit_key(board: *const ob_board_t) -> u64 {
    ffi(0, || Ok(handle_ref(board)?.board.inherit_key()))
}

/// Joins, on this board, listener `parent_listener` (its `ob_listener_id`
/// in the parent) of the board whose `ob_inherit_key` is `parent_key`: a
/// process forked from a server shares its listening port. `flags` as for
/// `ob_listen_with`. Returns NULL with errno on failure (EBADF: no such
/// listener).
#[no_mangle]
pub unsafe extern "C" fn ob_inherit_listener(board: *mut ob_board_t, parent_key: u64, parent_listener: u32, flags: u32) -> *mut ob_listener_t {
    ffi(ptr::null_mut(), || {
        let flags = crate::listener::listen_flags(flags)?;
        let listener = handle(board)?.board.inherit_listener(parent_key, parent_listener, flags)?;
        Ok(Box::into_raw(Box::new(ob_listener_t { listener })))
    })
}

/// Connects to `ipv4:port` (address in host byte order, e.g. `OB_IPV4(10, 0, 0, 1)`)
/// and waits for the handshake (spinning on a polling board, sleeping
/// otherwise, a non-blocking board too). Returns NULL with errno on failure
/// (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENOBUFS, ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_connect(board: *mut ob_board_t, ipv4: u32, port: u16) -> *mut ob_stream_t {
    ffi(ptr::null_mut(), || {
        let stream = handle(board)?.board.connect(sockaddr(ipv4, port))?;
        Ok(Box::into_raw(Box::new(ob_stream_t { stream })))
    })
}

/// Connects to `*to` (either family) and waits for the handshake, as
/// `ob_connect`. Returns NULL with errno on failure: as `ob_connect`, and
/// EAFNOSUPPORT for a family the engine does not run (IPv6 on an engine
/// without it) or an `ob_addr_t.family` that is neither `OB_AF_INET` nor
/// `OB_AF_INET6`; EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_connect_addr(board: *mut ob_board_t, to: *const ob_addr_t) -> *mut ob_stream_t {
    ffi(ptr::null_mut(), || {
        let b = handle(board)?;
        let stream = b.board.connect(addr_from_c(to)?)?;
        Ok(Box::into_raw(Box::new(ob_stream_t { stream })))
    })
}

/// `ob_connect_addr` with RFC 7413 Fast Open (Linux's `TCP_FASTOPEN_CONNECT`):
/// when the engine holds a cookie for the destination this returns at once
/// and the SYN carries the first data written; otherwise the SYN asks for a
/// cookie (for the next connection) and this returns when the handshake
/// completes. Returns NULL with errno on failure, as `ob_connect_addr`.
#[no_mangle]
pub unsafe extern "C" fn ob_connect_fast_open(board: *mut ob_board_t, to: *const ob_addr_t) -> *mut ob_stream_t {
    ffi(ptr::null_mut(), || {
        let b = handle(board)?;
        let stream = b.board.connect_fast_open(addr_from_c(to)?)?;
        Ok(Box::into_raw(Box::new(ob_stream_t { stream })))
    })
}

/// A UDP socket on `port` of the engine's address (0: any free port).
/// Returns NULL with errno on failure.
#[no_mangle]
pub unsafe extern "C" fn ob_bind_udp(board: *mut ob_board_t, port: u16) -> *mut ob_dgram_t {
    ffi(ptr::null_mut(), || {
        let dgram = handle(board)?.board.bind_udp(port)?;
        Ok(Box::into_raw(Box::new(ob_dgram_t { dgram })))
    })
}

/// A new event queue over this board's endpoints (free with `ob_eq_free`).
/// Returns NULL with errno on failure.
#[no_mangle]
pub unsafe extern "C" fn ob_event_queue(board: *mut ob_board_t) -> *mut ob_event_queue_t {
    ffi(ptr::null_mut(), || {
        let eq = handle(board)?.board.event_queue();
        Ok(Box::into_raw(Box::new(ob_event_queue_t::new(eq))))
    })
}
