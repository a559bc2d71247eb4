//! setsockopt/getsockopt for engine sockets. Options the engine honours are
//! kept and applied to the connection; options it cannot honour are refused
//! with ENOPROTOOPT and counted (never silently accepted).

use crate::sock::{keepalive_of, Kind, Sock};
use crate::state::{count, Count};
use libc::{c_int, c_void, socklen_t};
use outboard_board::proto::opt;
use std::time::Duration;

/// Linux's `struct tcp_info` (linux/tcp.h), the fields up to `tcpi_total_rto_time` (Linux 6.7).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct LinuxTcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    /// snd_wscale:4 | rcv_wscale:4 (low nibble first).
    pub wscales: u8,
    pub app_limited: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub rehash: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
}
const _: () = assert!(std::mem::size_of::<LinuxTcpInfo>() == 248);

/// Fills Linux's tcp_info from what the engine publishes.
pub fn tcp_info(sock: &Sock) -> LinuxTcpInfo {
    let mut t = LinuxTcpInfo::default();
    match &sock.kind {
        Kind::Stream(s) => {
            let i = s.tcp_info();
            t.state = i.state;
            t.ca_state = i.ca_state;
            t.retransmits = i.retransmits;
            t.backoff = i.backoff;
            t.options = i.options;
            t.wscales = (i.snd_wscale & 0xf) | (i.rcv_wscale << 4);
            t.rto = i.rto_us;
            t.snd_mss = i.snd_mss;
            t.rcv_mss = i.rcv_mss;
            t.advmss = i.snd_mss;
            t.unacked = i.unacked;
            t.rtt = i.rtt_us;
            t.rttvar = i.rttvar_us;
            t.snd_ssthresh = i.snd_ssthresh;
            t.snd_cwnd = i.snd_cwnd;
            t.total_retrans = i.total_retrans;
            t.bytes_acked = i.bytes_acked;
            t.bytes_received = i.bytes_received;
            t.segs_out = i.segs_out;
            t.segs_in = i.segs_in;
            t.app_limited = u8::from(i.delivery_rate_app_limited);
            t.delivery_rate = i.delivery_rate;
            t.delivered = i.delivered;
            t.delivered_ce = i.delivered_ce;
            t.bytes_sent = i.bytes_sent;
            t.bytes_retrans = i.bytes_retrans;
            t.dsack_dups = i.dsack_dups;
            t.reord_seen = i.reord_seen;
            t.reordering = i.reordering;
            t.rcv_ooopack = i.rcv_ooopack;
            t.snd_wnd = i.snd_wnd;
            t.rcv_wnd = i.rcv_wnd;
            t.total_rto = i.total_rto;
            t.total_rto_recoveries = i.total_rto_recoveries;
            t.total_rto_time = i.total_rto_time;
            t.notsent_bytes = s.notsent().min(u64::from(u32::MAX)) as u32;
            t.min_rtt = i.min_rtt_us;
            // The path MTU the MSS came from: IP (20 bytes, or 40 over IPv6) and TCP
            // headers, and the timestamp option when in use.
            let ts = if i.options & outboard_api::TCPI_OPT_TIMESTAMPS != 0 { 12 } else { 0 };
            let ip = if crate::addr::unmap(s.peer_addr()).is_ipv6() { 40 } else { 20 };
            t.pmtu = i.snd_mss + ip + 20 + ts;
        }
        Kind::Listener(_) => t.state = 10,    // TCP_LISTEN
        Kind::Connecting(_) => t.state = 2,   // TCP_SYN_SENT
        _ => t.state = 7,                     // TCP_CLOSE
    }
    t
}

fn read_int(val: *const c_void, len: socklen_t) -> Result<i32, i32> {
    if val.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<c_int>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: at least an int is readable (checked).
    Ok(unsafe { std::ptr::read_unaligned(val.cast::<c_int>()) })
}

fn read_timeval(val: *const c_void, len: socklen_t) -> Result<Option<Duration>, i32> {
    if val.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<libc::timeval>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a timeval is readable (checked).
    let tv = unsafe { std::ptr::read_unaligned(val.cast::<libc::timeval>()) };
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(libc::EDOM);
    }
    let d = Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64);
    Ok(if d.is_zero() { None } else { Some(d) })
}

/// setsockopt for an engine socket (the value was also given to the kernel
/// placeholder while undecided). `Ok` if kept; `Err(errno)` otherwise.
pub fn set(sock: &mut Sock, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> Result<(), i32> {
    let o = &mut sock.opts;
    let mut keepalive_changed = false;
    let mut nodelay_changed = false;
    let mut cork_changed = false;
    let mut user_timeout_changed = false;
    let mut cc_changed = false;
    let mut fastopen_changed = false;
    let mut tos_changed = false;
    let mut maxseg_changed = false;
    let mut bufs_changed = false;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = read_int(val, len)? != 0,
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuseport = read_int(val, len)? != 0,
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
            o.keepalive = read_int(val, len)? != 0;
            keepalive_changed = true;
        }
        // Linux's sock_setsockopt: the value (as unsigned) capped at
        // net.core.[rw]mem_max, doubled, at least SOCK_MIN_[RCV|SND]BUF.
        // Honoured as Linux's locked buffers: the window the engine offers
        // (and, before connect or listen, the SYN's window scale), and the
        // bytes written and not yet acknowledged.
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            o.rcvbuf = Some(linux_buf(read_int(val, len)?, rmem_max(), SOCK_MIN_RCVBUF));
            bufs_changed = true;
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            o.sndbuf = Some(linux_buf(read_int(val, len)?, wmem_max(), SOCK_MIN_SNDBUF));
            bufs_changed = true;
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => o.rcvtimeo = read_timeval(val, len)?,
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => o.sndtimeo = read_timeval(val, len)?,
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            if val.is_null() {
                return Err(libc::EFAULT);
            }
            if (len as usize) < std::mem::size_of::<libc::linger>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: a struct linger is readable (checked).
            let l = unsafe { std::ptr::read_unaligned(val.cast::<libc::linger>()) };
            o.linger = (l.l_onoff != 0).then_some(l.l_linger.max(0) as u32);
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
            o.nodelay = read_int(val, len)? != 0;
            nodelay_changed = true;
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => {
            let v = read_int(val, len)?;
            if !(1..=32767).contains(&v) {
                return Err(libc::EINVAL);
            }
            o.keepidle_s = v as u32;
            keepalive_changed = true;
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => {
            let v = read_int(val, len)?;
            if !(1..=32767).contains(&v) {
                return Err(libc::EINVAL);
            }
            o.keepintvl_s = v as u32;
            keepalive_changed = true;
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => {
            let v = read_int(val, len)?;
            if !(1..=127).contains(&v) {
                return Err(libc::EINVAL);
            }
            o.keepcnt = v as u32;
            keepalive_changed = true;
        }
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => {
            if !matches!(sock.kind, Kind::Undecided) {
                return Err(libc::EINVAL);
            }
            o.v6only = read_int(val, len)? != 0;
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
            let v = read_int(val, len)?;
            // Linux: 0 (none) or TCP_MIN_MSS (88) ..= MAX_TCP_WINDOW (32767).
            if v != 0 && !(i32::from(opt::MIN_MSS)..=i32::from(opt::MAX_MSS)).contains(&v) {
                return Err(libc::EINVAL);
            }
            // Honoured before connect (the SYN's MSS, the send MSS's ceiling)
            // and on a listener (inherited by the connections it accepts);
            // on a connected stream Linux records it for nothing it does.
            o.maxseg = v as u16;
            maxseg_changed = true;
        }
        (libc::IPPROTO_TCP, libc::TCP_CORK) => {
            o.cork = read_int(val, len)? != 0;
            cork_changed = true;
        }
        // Linux's do_tcp_setsockopt keeps any int (as unsigned); 0 means the sysctl (UINT_MAX).
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => o.notsent_lowat = read_int(val, len)? as u32,
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
            let v = read_int(val, len)?;
            if v < 0 {
                return Err(libc::EINVAL);
            }
            o.user_timeout_ms = v as u32;
            user_timeout_changed = true;
        }
        (libc::IPPROTO_TCP, libc::TCP_INQ) => {
            let v = read_int(val, len)?;
            if !(0..=1).contains(&v) {
                return Err(libc::EINVAL);
            }
            o.inq = v == 1;
        }
        // RFC 7413 server side, as Linux's do_tcp_setsockopt: a socket not
        // yet connected or a listener; the queue length is capped at
        // net.core.somaxconn (`fastopen_queue_tune`).
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => {
            let v = read_int(val, len)?;
            let open = matches!(sock.kind, Kind::Undecided | Kind::Bound | Kind::Listener(_));
            if v < 0 || !open {
                return Err(libc::EINVAL);
            }
            o.fastopen_qlen = (v as u32).min(somaxconn()).min(u32::from(u16::MAX)) as u16;
            fastopen_changed = true;
        }
        // RFC 7413 client side (net.ipv4.tcp_fastopen = 1 enables it): 0 or 1, before connect.
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT) => {
            let v = read_int(val, len)?;
            if !(0..=1).contains(&v) || !matches!(sock.kind, Kind::Undecided | Kind::Bound) {
                return Err(libc::EINVAL);
            }
            o.fastopen_connect = v == 1;
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            if val.is_null() {
                return Err(libc::EFAULT);
            }
            if len < 1 {
                return Err(libc::EINVAL);
            }
            // Linux reads at most TCP_CA_NAME_MAX - 1 bytes, up to a NUL.
            // SAFETY: `len` bytes are readable (the caller's contract).
            let raw = unsafe { std::slice::from_raw_parts(val.cast::<u8>(), (len as usize).min(CA_NAME_MAX - 1)) };
            let name = raw.split(|b| *b == 0).next().unwrap_or_default();
            o.cc = Some(match name {
                b"reno" => opt::CC_RENO as u8,
                b"cubic" => opt::CC_CUBIC as u8,
                // What the engine does not have: as Linux for an algorithm it cannot load.
                _ => return Err(libc::ENOENT),
            });
            cc_changed = true;
        }
        // IP_TOS: an int, or one byte (Linux's do_ip_setsockopt); on a
        // stream the ECN bits stay as they were (0). Kept, read back and
        // put on the stream's packets.
        (libc::IPPROTO_IP, libc::IP_TOS) => {
            if val.is_null() && len > 0 {
                return Err(libc::EFAULT);
            }
            let v = match len as usize {
                0 => 0,
                // SAFETY: a byte is readable.
                1..=3 => i32::from(unsafe { *val.cast::<u8>() }),
                _ => read_int(val, len)?,
            };
            o.tos = if sock.stream { (v as u8) & !0x3 } else { v as u8 };
            tos_changed = true;
        }
        // IPV6_TCLASS (Linux's do_ipv6_setsockopt): an AF_INET6 socket's;
        // an int, -1 (RFC 3542 §6.5: the default, 0) ..= 255; on a stream
        // the ECN bits stay the engine's. Put on the stream's IPv6 packets.
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if sock.v6 => {
            if (len as usize) < std::mem::size_of::<c_int>() {
                return Err(libc::EINVAL);
            }
            let v = read_int(val, len)?;
            if !(-1..=0xff).contains(&v) {
                return Err(libc::EINVAL);
            }
            let v = v.max(0) as u8;
            o.tclass = if sock.stream { v & !0x3 } else { v };
            tos_changed = true;
        }
        // A hint a program may set that changes nothing it can observe
        // here: accepted as Linux does (no error), on purpose.
        (libc::SOL_SOCKET, libc::SO_PRIORITY) => {
            read_int(val, len)?;
        }
        // Linux's `__tcp_sock_set_quickack`, on the engine's connection.
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => {
            let v = read_int(val, len)?;
            match &mut sock.kind {
                Kind::Stream(s) => s.set_quickack(v as u32).map_err(|e| crate::sock::errno_of(&e, true))?,
                // No connection, so no ACK pending: 0 enters the mode, anything else leaves it.
                _ => o.quickack = v != 0,
            }
        }
        _ => {
            count(Count::UnsupportedOptions);
            if crate::log::debug_enabled() {
                crate::log::debug(&format!("unsupported setsockopt level={level} name={name} errno=ENOPROTOOPT"));
            }
            return Err(libc::ENOPROTOOPT);
        }
    }
    let o = sock.opts;
    if let Kind::Stream(s) = &mut sock.kind {
        if nodelay_changed {
            s.set_nodelay(o.nodelay).map_err(|e| crate::sock::errno_of(&e, true))?;
        }
        if keepalive_changed {
            let ka = o.keepalive.then(|| keepalive_of(&o));
            s.set_keepalive(ka).map_err(|e| crate::sock::errno_of(&e, true))?;
        }
        if user_timeout_changed {
            s.set_user_timeout(o.user_timeout_ms).map_err(|e| crate::sock::errno_of(&e, true))?;
        }
        if tos_changed {
            s.set_tos(o.tos_for(s.peer_addr())).map_err(|e| crate::sock::errno_of(&e, true))?;
        }
        if bufs_changed {
            s.set_send_limit(o.send_limit());
            if o.rcvbuf.is_some() {
                s.set_rcv_clamp(o.rcv_clamp()).map_err(|e| crate::sock::errno_of(&e, true))?;
            }
        }
        if let (true, Some(cc)) = (cc_changed, o.cc) {
            s.set_cubic(u64::from(cc) == opt::CC_CUBIC).map_err(|e| crate::sock::errno_of(&e, true))?;
        }
    }
    if let Kind::Listener(l) = &sock.kind {
        let err = |e| crate::sock::errno_of(&e, true);
        if fastopen_changed {
            l.set_fast_open(o.fastopen_qlen).map_err(err)?;
        }
        // What Linux's accepted sockets inherit from the listener.
        if maxseg_changed {
            l.set_max_seg(o.maxseg).map_err(err)?;
        }
        if bufs_changed && o.rcvbuf.is_some() {
            l.set_rcv_clamp(o.rcv_clamp()).map_err(err)?;
        }
        if tos_changed {
            l.set_tos(false, o.tos & !0x3).map_err(err)?;
            l.set_tos(true, o.tclass & !0x3).map_err(err)?;
        }
    }
    if cork_changed {
        // Turning TCP_CORK off sends what waits (a MSG_MORE send in progress
        // keeps its own cork only until its call returns).
        sock.cork_for_send(false);
    }
    Ok(())
}

/// Linux's TCP_CA_NAME_MAX.
const CA_NAME_MAX: usize = 16;
/// Linux's SOCK_MIN_SNDBUF and SOCK_MIN_RCVBUF on 64-bit builds (2048 bytes
/// plus an aligned `struct sk_buff`, twice for the send side).
pub const SOCK_MIN_SNDBUF: u32 = 4608;
pub const SOCK_MIN_RCVBUF: u32 = 2304;

/// What Linux's SO_SNDBUF/SO_RCVBUF keep for `v`: as unsigned, capped at
/// the sysctl maximum, doubled, at least the minimum.
fn linux_buf(v: i32, max: u32, min: u32) -> u32 {
    let v = (v as u32).min(max).min(i32::MAX as u32 / 2);
    (v * 2).max(min)
}

fn sysctl(path: &str, default: u32) -> u32 {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}

fn wmem_max() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| sysctl("/proc/sys/net/core/wmem_max", 212_992))
}

/// net.core.somaxconn (Linux caps TCP_FASTOPEN's queue length at it).
fn somaxconn() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| sysctl("/proc/sys/net/core/somaxconn", 4096))
}

fn rmem_max() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| sysctl("/proc/sys/net/core/rmem_max", 212_992))
}

/// As `set`, without counting or logging: options given to a socket before
/// the engine or the kernel took it (the kernel placeholder answers for it).
pub fn set_quiet(sock: &mut Sock, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> Result<(), i32> {
    let known = matches!(
        (level, name),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_REUSEPORT | libc::SO_KEEPALIVE | libc::SO_RCVBUF | libc::SO_SNDBUF
            | libc::SO_RCVTIMEO | libc::SO_SNDTIMEO | libc::SO_LINGER)
            | (libc::IPPROTO_TCP, libc::TCP_NODELAY | libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT
                | libc::TCP_MAXSEG | libc::TCP_CORK | libc::TCP_USER_TIMEOUT | libc::TCP_INQ | libc::TCP_CONGESTION
                | libc::TCP_FASTOPEN | libc::TCP_FASTOPEN_CONNECT | libc::TCP_NOTSENT_LOWAT)
            | (libc::IPPROTO_IP, libc::IP_TOS)
            | (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)
            | (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
            // The hints `set` accepts.
            | (libc::SOL_SOCKET, libc::SO_PRIORITY)
            | (libc::IPPROTO_TCP, libc::TCP_QUICKACK)
    );
    if !known {
        // The kernel placeholder took it; if the engine takes the socket,
        // it is counted as refused then (`Sock::became_engine`).
        if sock.unhonoured.len() < 16 {
            sock.unhonoured.push((level, name));
        }
        return Ok(());
    }
    let r = set(sock, level, name, val, len);
    if r.is_err() && sock.unhonoured.len() < 16 {
        // A value the engine cannot take (a congestion control it does not
        // have): the kernel may have taken it; refused if the engine gets the socket.
        sock.unhonoured.push((level, name));
    }
    r
}

/// Writes an option value the way the kernel does (truncated to the
/// caller's buffer, `*len` set to what was written).
///
/// # Safety
/// `val` must point to `*len` writable bytes; `len` must be valid.
pub unsafe fn put<T: Copy>(v: &T, val: *mut c_void, len: *mut socklen_t) -> Result<(), i32> {
    if val.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: len is valid per the contract.
    let room = unsafe { *len } as usize;
    let n = room.min(std::mem::size_of::<T>());
    // SAFETY: copies n ≤ room bytes.
    unsafe {
        std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), val.cast::<u8>(), n);
        *len = n as socklen_t;
    }
    Ok(())
}

/// getsockopt for an engine socket.
///
/// # Safety
/// As `put`.
pub unsafe fn get(sock: &mut Sock, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> Result<(), i32> {
    let o = sock.opts;
    let int = |v: i32| -> Result<(), i32> {
        // SAFETY: forwarded contract.
        unsafe { put(&v, val, len) }
    };
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => {
            sock.settle();
            let e = sock.take_error();
            int(e)
        }
        (libc::SOL_SOCKET, libc::SO_TYPE) => int(if sock.stream { libc::SOCK_STREAM } else { libc::SOCK_DGRAM }),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => int(if sock.v6 { libc::AF_INET6 } else { libc::AF_INET }),
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if sock.v6 => int(i32::from(o.v6only)),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => int(if sock.stream { libc::IPPROTO_TCP } else { libc::IPPROTO_UDP }),
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => int(i32::from(matches!(sock.kind, Kind::Listener(_)))),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => int(i32::from(o.reuseaddr)),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => int(i32::from(o.reuseport)),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => int(i32::from(o.keepalive)),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) | (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            // Set: what Linux keeps for that value (doubled, clamped). Not
            // set: the region the engine really uses (Linux, too, reports
            // the buffer it uses, which autotuning grows).
            let set = if name == libc::SO_RCVBUF { o.rcvbuf } else { o.sndbuf };
            let v = match (set, &sock.kind) {
                (Some(v), _) => v as i32,
                (None, Kind::Stream(s)) => s.rx_region_size() as i32,
                (None, _) => 256 * 1024,
            };
            int(v)
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => {
            // Linux gives one byte to a buffer shorter than an int.
            if len.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: len is valid per the contract.
            let room = unsafe { *len } as i32;
            if room < 0 {
                return Err(libc::EINVAL);
            }
            if room > 0 && room < 4 {
                // SAFETY: forwarded contract.
                unsafe { put(&o.tos, val, len) }
            } else {
                int(i32::from(o.tos))
            }
        }
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if sock.v6 => int(i32::from(o.tclass)),
        (libc::IPPROTO_TCP, libc::TCP_CORK) => int(i32::from(o.cork)),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => int(o.user_timeout_ms as i32),
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => int(o.notsent_lowat as i32),
        (libc::IPPROTO_TCP, libc::TCP_INQ) => int(i32::from(o.inq)),
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => int(i32::from(o.fastopen_qlen)),
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT) => int(i32::from(o.fastopen_connect)),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let cc = match (&sock.kind, o.cc) {
                // What was set (the engine applies it in order with what follows).
                (_, Some(cc)) => cc,
                (Kind::Stream(s), None) => s.tcp_info().cc,
                // The engine's default (NewReno unless it runs `--cc cubic`).
                (_, None) => opt::CC_RENO as u8,
            };
            let mut name = [0u8; CA_NAME_MAX];
            let n: &[u8] = if u64::from(cc) == opt::CC_CUBIC { b"cubic" } else { b"reno" };
            name[..n.len()].copy_from_slice(n);
            // SAFETY: forwarded contract (truncated to the caller's room, as Linux).
            unsafe { put(&name, val, len) }
        }
        // Reno and CUBIC have no TCP_CC_INFO in Linux (no get_info): length 0.
        (libc::IPPROTO_TCP, libc::TCP_CC_INFO) => {
            if len.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: len is valid per the contract.
            unsafe { *len = 0 };
            Ok(())
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let l = libc::linger { l_onoff: i32::from(o.linger.is_some()), l_linger: o.linger.unwrap_or(0) as i32 };
            // SAFETY: forwarded contract.
            unsafe { put(&l, val, len) }
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) | (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => {
            let d = if name == libc::SO_RCVTIMEO { o.rcvtimeo } else { o.sndtimeo }.unwrap_or_default();
            let tv = libc::timeval { tv_sec: d.as_secs() as libc::time_t, tv_usec: d.subsec_micros() as libc::suseconds_t };
            // SAFETY: forwarded contract.
            unsafe { put(&tv, val, len) }
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => int(i32::from(o.nodelay)),
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => int(i32::from(match &sock.kind {
            Kind::Stream(s) => !s.tcp_info().interactive,
            _ => o.quickack,
        })),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => int(o.keepidle_s as i32),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => int(o.keepintvl_s as i32),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => int(o.keepcnt as i32),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
            // Linux: the send MSS (mss_cache, 536 until connected), or what
            // was set while the socket is closed or listening.
            let mss = match &sock.kind {
                Kind::Stream(s) => s.tcp_info().snd_mss as i32,
                Kind::Connecting(_) => 536,
                _ if o.maxseg != 0 => i32::from(o.maxseg),
                _ => 536,
            };
            int(mss)
        }
        (libc::IPPROTO_TCP, libc::TCP_INFO) => {
            let t = tcp_info(sock);
            // SAFETY: forwarded contract.
            unsafe { put(&t, val, len) }
        }
        _ => {
            count(Count::UnsupportedOptions);
            if crate::log::debug_enabled() {
                crate::log::debug(&format!("unsupported getsockopt level={level} name={name} errno=ENOPROTOOPT"));
            }
            Err(libc::ENOPROTOOPT)
        }
    }
}
