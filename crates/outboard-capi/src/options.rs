//! A stream's TCP options and its TCP_INFO: the C names of the Rust API's
//! `Stream::set_cork`, `set_quickack`, `set_user_timeout`, `set_tos`,
//! `set_cubic`, `set_keepalive` and `tcp_info` (docs/API.md, "Keep-alives"
//! and "TCP_INFO"). Each option takes effect at the engine's next turn, as
//! the setsockopt of the same name does on a Linux socket.

use crate::{c_str, ffi, handle, handle_ref, ob_stream_t, Errno, EINVAL};
use libc::{c_char, c_int, c_uint};
use std::time::Duration;

/// A stream's TCP_INFO (`ob_tcp_info`): Linux's `struct tcp_info` fields
/// under the same names (without the `tcpi_` prefix), plus `cc` (0 NewReno,
/// 1 CUBIC), `interactive` (Linux's interactive delayed-ACK mode, which
/// `TCP_QUICKACK` sets), `notsent`, `in_flight` and `min_rtt_us` (bytes and
/// microseconds). Flags are 0 or 1.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ob_tcp_info_t {
    /// 1 ESTABLISHED, 2 SYN_SENT, 3 SYN_RECV, 4 FIN_WAIT1, 5 FIN_WAIT2,
    /// 6 TIME_WAIT, 7 CLOSE, 8 CLOSE_WAIT, 9 LAST_ACK, 10 LISTEN, 11 CLOSING.
    pub state: u8,
    /// 0 open, 1 disorder, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// Consecutive retransmission timeouts.
    pub retransmits: u8,
    pub backoff: u8,
    /// `OB_TCPI_OPT_*` bits.
    pub options: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub cc: u8,
    pub rto_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Segments sent and not acknowledged.
    pub unacked: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Segments; 0x7fffffff while unset.
    pub snd_ssthresh: u32,
    /// Segments.
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub segs_out: u32,
    pub segs_in: u32,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub reordering: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    /// Milliseconds spent in finished timeout episodes.
    pub total_rto_time: u32,
    pub notsent: u32,
    pub in_flight: u32,
    pub min_rtt_us: u32,
    pub delivery_rate_app_limited: u8,
    pub interactive: u8,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_retrans: u64,
    pub bytes_sent: u64,
    /// Bytes per second.
    pub delivery_rate: u64,
}

/// `ob_tcp_info_t.options`: timestamps.
pub const OB_TCPI_OPT_TIMESTAMPS: u8 = 1;
/// `ob_tcp_info_t.options`: SACK.
pub const OB_TCPI_OPT_SACK: u8 = 2;
/// `ob_tcp_info_t.options`: window scaling.
pub const OB_TCPI_OPT_WSCALE: u8 = 4;
/// `ob_tcp_info_t.options`: ECN negotiated.
pub const OB_TCPI_OPT_ECN: u8 = 8;
/// `ob_tcp_info_t.options`: an ECN mark seen.
pub const OB_TCPI_OPT_ECN_SEEN: u8 = 16;
/// `ob_tcp_info_t.options`: data went in the SYN (TCP Fast Open).
pub const OB_TCPI_OPT_SYN_DATA: u8 = 32;

// Literals, for cbindgen; the same bits as the Rust API's (Linux's).
const _: () = assert!(
    OB_TCPI_OPT_TIMESTAMPS == outboard_api::TCPI_OPT_TIMESTAMPS
        && OB_TCPI_OPT_SACK == outboard_api::TCPI_OPT_SACK
        && OB_TCPI_OPT_WSCALE == outboard_api::TCPI_OPT_WSCALE
        && OB_TCPI_OPT_ECN == outboard_api::TCPI_OPT_ECN
        && OB_TCPI_OPT_ECN_SEEN == outboard_api::TCPI_OPT_ECN_SEEN
        && OB_TCPI_OPT_SYN_DATA == outboard_api::TCPI_OPT_SYN_DATA
);

/// Fills `*out` with the stream's TCP_INFO. The first call on a stream
/// asks the engine to keep its figures current and waits for its answer;
/// later calls read what it last published. Returns 0, or -1 with errno
/// (EINVAL for NULL).
#[no_mangle]
pub unsafe extern "C" fn ob_tcp_info(s: *const ob_stream_t, out: *mut ob_tcp_info_t) -> c_int {
    ffi(-1, || {
        let s = handle_ref(s)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        let i = s.stream.tcp_info();
        *out = ob_tcp_info_t {
            state: i.state,
            ca_state: i.ca_state,
            retransmits: i.retransmits,
            backoff: i.backoff,
            options: i.options,
            snd_wscale: i.snd_wscale,
            rcv_wscale: i.rcv_wscale,
            cc: i.cc,
            rto_us: i.rto_us,
            snd_mss: i.snd_mss,
            rcv_mss: i.rcv_mss,
            unacked: i.unacked,
            rtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            snd_ssthresh: i.snd_ssthresh,
            snd_cwnd: i.snd_cwnd,
            total_retrans: i.total_retrans,
            delivered: i.delivered,
            delivered_ce: i.delivered_ce,
            segs_out: i.segs_out,
            segs_in: i.segs_in,
            dsack_dups: i.dsack_dups,
            reord_seen: i.reord_seen,
            reordering: i.reordering,
            rcv_ooopack: i.rcv_ooopack,
            snd_wnd: i.snd_wnd,
            rcv_wnd: i.rcv_wnd,
            total_rto: i.total_rto,
            total_rto_recoveries: i.total_rto_recoveries,
            total_rto_time: i.total_rto_time,
            notsent: i.notsent,
            in_flight: i.in_flight,
            min_rtt_us: i.min_rtt_us,
            delivery_rate_app_limited: u8::from(i.delivery_rate_app_limited),
            interactive: u8::from(i.interactive),
            bytes_acked: i.bytes_acked,
            bytes_received: i.bytes_received,
            bytes_retrans: i.bytes_retrans,
            bytes_sent: i.bytes_sent,
            delivery_rate: i.delivery_rate,
        };
        Ok(0)
    })
}

/// TCP_CORK: while on (`on` non-zero), new data leaves only in full
/// segments; a partial one waits until it is turned off, or 200 ms.
/// Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_set_cork(s: *mut ob_stream_t, on: c_int) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.set_cork(on != 0)?;
        Ok(0)
    })
}

/// TCP_QUICKACK, as Linux takes it: 0 makes the stream interactive (its
/// ACKs wait for replies to carry them); any other value leaves that mode
/// and sends an ACK that waits if nothing is left unread, and an even one
/// then makes it interactive again. Not sticky. Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_set_quickack(s: *mut ob_stream_t, val: c_uint) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.set_quickack(val)?;
        Ok(0)
    })
}

/// TCP_USER_TIMEOUT: data unacknowledged for `ms` milliseconds fails the
/// stream with ETIMEDOUT (0: off). Returns 0, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_set_user_timeout(s: *mut ob_stream_t, ms: c_uint) -> c_int {
    ffi(-1, || {
        handle(s)?.stream.set_user_timeout(ms)?;
        Ok(0)
    })
}

/// IP_TOS: the TOS byte of the stream's packets from now on (the engine
/// keeps the ECN bits, as Linux does on a TCP socket). Returns 0, or -1
/// with errno (EINVAL outside 0..=255).
#[no_mangle]
pub unsafe extern "C" fn ob_set_tos(s: *mut ob_stream_t, tos: c_int) -> c_int {
    ffi(-1, || {
        let tos = u8::try_from(tos).map_err(|_| EINVAL)?;
        handle(s)?.stream.set_tos(tos)?;
        Ok(0)
    })
}

/// TCP_CONGESTION by name, as Linux's: "cubic" or "reno". Returns 0, or
/// -1 with errno (ENOENT for another name, as Linux says of an algorithm
/// it does not have).
#[no_mangle]
pub unsafe extern "C" fn ob_set_congestion(s: *mut ob_stream_t, name: *const c_char) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        let cubic = match c_str(name)? {
            "cubic" => true,
            "reno" => false,
            _ => return Err(Errno(libc::ENOENT)),
        };
        s.stream.set_cubic(cubic)?;
        Ok(0)
    })
}

/// Keep-alives (SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPINTVL and
/// TCP_KEEPCNT in one call): with `on` non-zero, after `idle_ms` without a
/// segment from the peer the engine sends a probe every `interval_ms`, and
/// after `probes` unanswered ones the stream fails with ETIMEDOUT; `on` 0
/// turns them off (the other arguments are not looked at). Returns 0, or -1
/// with errno (EINVAL for times outside 1 ms ..= 2^31 ms or probes outside
/// 1..=127).
#[no_mangle]
pub unsafe extern "C" fn ob_set_keepalive(s: *mut ob_stream_t, on: c_int, idle_ms: c_uint, interval_ms: c_uint, probes: c_uint) -> c_int {
    ffi(-1, || {
        let s = handle(s)?;
        let ka = (on != 0).then(|| (Duration::from_millis(idle_ms.into()), Duration::from_millis(interval_ms.into()), probes));
        s.stream.set_keepalive(ka)?;
        Ok(0)
    })
}
