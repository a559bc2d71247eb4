//! Publishing a stream's state into its status record (engine-written
//! only, never read back) and posting the events that say what changed:
//! byte counts, flags, errors, TCP_INFO words, a connect's sync.

use super::{EpKind, Session, Violation};
use outboard_board::layout::{flags, status, tcp_info};
use outboard_board::proto::ev;
use outboard_board::Mapping;
use outboard_stack::Stack;
use outboard_tcp::conn::ConnInfo;
use outboard_tcp::{Event as TcpEvent, State};
use std::sync::atomic::Ordering;

impl Session {
    /// Brings a stream's status record up to date with its connection and
    /// posts what changed (and completes a pending connect's sync).
    pub(crate) fn update_stream(&mut self, stack: &mut Stack, ep: u32) -> Result<(), Violation> {
        let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_mut() else { return Ok(()) };
        let mut bits = 0;
        let mut batched = 0;
        let mut sync_done: Option<(u32, i64)> = None;
        let Some(c) = stack.tcp_status(s.conn) else {
            // The stack freed it (e.g. after a reset): report once.
            if s.error == 0 && s.flags & flags::PEER_CLOSED == 0 {
                s.error = libc::ECONNRESET as u32;
                bits |= ev::ERROR;
            }
            let (e, f) = (s.error, s.flags);
            if let Some(slot) = s.connect_sync.take() {
                sync_done = Some((slot, -i64::from(e.max(1))));
            }
            let info = s.published_info.map_or(ConnInfo::default(), |(_, i)| i);
            if s.info_wanted && s.published_info.map(|(st, _)| st) != Some(tcp_info::TCP_CLOSE) {
                s.published_info = Some((tcp_info::TCP_CLOSE, info));
                Self::write_info(&self.map, self.layout.endpoint_status(ep), tcp_info::TCP_CLOSE, &info);
            }
            self.write_flags(ep, f, e);
            if bits != 0 {
                self.post(ep, bits, 0);
            }
            if let Some((slot, v)) = sync_done {
                self.sync_result(slot, v)?;
            }
            return Ok(());
        };
        while let Some(e) = c.poll_event() {
            match e {
                TcpEvent::Connected => {
                    s.flags |= flags::CONNECTED;
                    if let Some(slot) = s.connect_sync.take() {
                        sync_done = Some((slot, i64::from(ep)));
                    }
                }
                TcpEvent::PeerClosed => s.flags |= flags::PEER_CLOSED,
                TcpEvent::Reset => {
                    s.error = if c.state() == State::Closed && s.flags & flags::CONNECTED == 0 {
                        // A connect that failed: an ICMP error says why, as on Linux.
                        c.soft_error().map_or(libc::ECONNREFUSED, icmp_errno) as u32
                    } else {
                        libc::ECONNRESET as u32
                    }
                }
                // Linux reports the last ICMP error seen (sk_err_soft) rather than ETIMEDOUT.
                TcpEvent::TimedOut => s.error = c.soft_error().map_or(libc::ETIMEDOUT, icmp_errno) as u32,
                TcpEvent::Readable | TcpEvent::Writable | TcpEvent::Closed => {}
            }
        }
        if s.error != 0 {
            if let Some(slot) = s.connect_sync.take() {
                sync_done = Some((slot, -i64::from(s.error)));
            }
        }
        let pushed = c.take_push();
        let rx_total = s.rx_consumed + c.recv_available() as u64;
        let acked = s.tx_pushed - (c.send_queued() as u64).min(s.tx_pushed);
        if c.send_queued() > 0 {
            c.request_writable();
        }
        let state = state_number(c.state());
        let base = self.layout.endpoint_status(ep);
        self.map.atomic_u32(base + status::STATE).store(state, Ordering::Relaxed);
        if s.info_wanted {
            let info = (linux_state(c.state()), c.info());
            if s.published_info != Some(info) {
                s.published_info = Some(info);
                Self::write_info(&self.map, base, info.0, &info.1);
            }
        }
        if rx_total != s.rx_published {
            if outboard_trace::enabled() && rx_total > s.rx_published {
                let (a, b) = c.recv_slices();
                let fresh = s.rx_published.saturating_sub(s.rx_consumed) as usize;
                outboard_trace::ring(outboard_trace::Hop::BoardDeliver, a, b, fresh);
            }
            s.rx_published = rx_total;
            self.map.atomic_u64(base + status::RX_TOTAL).store(rx_total, Ordering::Release);
            // Bytes the peer has not pushed yet wake nobody by themselves
            // (`events` module: batched wake-ups).
            if pushed {
                bits |= ev::READABLE;
            } else {
                batched |= ev::READABLE;
            }
        }
        if acked != s.acked_published {
            if s.error == 0 {
                self.counters.tx_delivered += acked.saturating_sub(s.acked_published);
            }
            s.acked_published = acked;
            self.map.atomic_u64(base + status::TX_ACKED).store(acked, Ordering::Release);
            // Room freed while more than half the region still waits for
            // its ACK wakes nobody by itself: a blocked writer waits for half
            // (Linux wakes one at a third, `sk_stream_write_space`).
            if c.send_capacity() < c.send_queued() {
                batched |= ev::WRITABLE;
            } else {
                bits |= ev::WRITABLE;
            }
        }
        let old_flags = s.published_flags;
        let (f, e) = (s.flags, s.error);
        if f & flags::PEER_CLOSED != 0 && old_flags & flags::PEER_CLOSED == 0 {
            bits |= ev::PEER_CLOSED | ev::READABLE;
        }
        if e != 0 && s.published_error == 0 {
            bits |= ev::ERROR | ev::READABLE | ev::WRITABLE;
        }
        if f & flags::CONNECTED != 0 && old_flags & flags::CONNECTED == 0 {
            bits |= ev::WRITABLE;
        }
        let changed = (f, e) != (s.published_flags, s.published_error);
        s.published_flags = f;
        s.published_error = e;
        if changed {
            self.write_flags(ep, f, e);
        }
        if bits != 0 {
            self.post(ep, bits | batched, 0);
        } else if batched != 0 {
            self.post_batched(ep, batched);
        }
        if let Some((slot, v)) = sync_done {
            if !self.sync_result(slot, v)? {
                // The application gave up on this connect: undo it.
                self.drop_stream(stack, ep, true);
            }
        }
        Ok(())
    }

    /// The TCP_INFO words of a status record (Release: a reader that sees
    /// one word sees the record's earlier bytes; the words are independent).
    fn write_info(m: &Mapping, base: usize, state: u8, i: &ConnInfo) {
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        let opts = bit(i.timestamps, tcp_info::OPT_TIMESTAMPS)
            | bit(i.sack, tcp_info::OPT_SACK)
            | bit(i.wscale, tcp_info::OPT_WSCALE)
            | bit(i.ecn, tcp_info::OPT_ECN)
            | bit(i.ecn_seen, tcp_info::OPT_ECN_SEEN)
            | bit(i.syn_data, tcp_info::OPT_SYN_DATA);
        let mut b = [0u8; 8];
        b[tcp_info::STATE] = state;
        b[tcp_info::CA_STATE] = i.ca_state as u8;
        b[tcp_info::RETRANSMITS] = sat_u8(i.rto_count);
        b[tcp_info::BACKOFF] = sat_u8(i.backoff);
        b[tcp_info::OPTIONS] = opts;
        b[tcp_info::SND_WSCALE] = i.snd_wscale;
        b[tcp_info::RCV_WSCALE] = i.rcv_wscale;
        b[tcp_info::CC] = u8::from(i.cubic) | bit(i.delivery_rate_app_limited, tcp_info::CC_APP_LIMITED)
            | bit(i.interactive, tcp_info::CC_INTERACTIVE);
        for (off, v) in [
            (status::RTO_US, i.rto_us),
            (status::SND_MSS, i.snd_mss),
            (status::RCV_MSS, i.rcv_mss),
            (status::UNACKED, i.unacked_segs),
            (status::RTT_US, i.srtt_us),
            (status::RTTVAR_US, i.rttvar_us),
            (status::SND_SSTHRESH, i.ssthresh_segs),
            (status::SND_CWND, i.cwnd_segs),
            (status::TOTAL_RETRANS, low_u32(i.retransmits)),
            (status::SEGS_OUT, low_u32(i.segments_out)),
            (status::SEGS_IN, low_u32(i.segments_in)),
            (status::NOTSENT, i.notsent),
            (status::IN_FLIGHT, i.in_flight),
            (status::MIN_RTT_US, i.min_rtt_us),
            (status::DELIVERED, low_u32(i.delivered)),
            (status::DELIVERED_CE, low_u32(i.delivered_ce)),
            (status::DSACK_DUPS, low_u32(i.dsack_dups)),
            (status::REORD_SEEN, low_u32(i.reord_events)),
            (status::RCV_OOOPACK, low_u32(i.rcv_ooopack)),
            (status::SND_WND, i.snd_wnd),
            (status::RCV_WND, i.rcv_wnd),
            (status::REORDERING, i.reordering),
            (status::TOTAL_RTOS, sat_u16(i.total_rto) | (sat_u16(i.total_rto_recoveries) << 16)),
            (status::TOTAL_RTO_TIME, i.total_rto_time_ms),
        ] {
            m.atomic_u32(base + off).store(v, Ordering::Release);
        }
        m.atomic_u64(base + status::RETRANS_BYTES).store(i.retransmitted_bytes, Ordering::Release);
        m.atomic_u64(base + status::DELIVERY_RATE).store(i.delivery_rate, Ordering::Release);
        m.atomic_u64(base + status::BYTES_SENT).store(i.bytes_sent, Ordering::Release);
        m.atomic_u64(base + status::INFO_BYTES).store(tcp_info::pack(b), Ordering::Release);
    }

    fn write_flags(&self, ep: u32, f: u32, e: u32) {
        let base = self.layout.endpoint_status(ep);
        // Error before flags: an application that sees a flag change reads a settled error.
        self.map.atomic_u32(base + status::ERROR).store(e, Ordering::Release);
        self.map.atomic_u32(base + status::FLAGS).store(f, Ordering::Release);
    }

}

fn state_number(s: State) -> u32 {
    match s {
        State::Closed => 0,
        State::SynSent => 1,
        State::SynReceived => 2,
        State::Established => 3,
        State::FinWait1 => 4,
        State::FinWait2 => 5,
        State::CloseWait => 6,
        State::Closing => 7,
        State::LastAck => 8,
        State::TimeWait => 9,
    }
}

/// `State` numbered as Linux's `tcp_states.h` (TCP_INFO's `tcpi_state`).
fn linux_state(s: State) -> u8 {
    match s {
        State::Established => tcp_info::TCP_ESTABLISHED,
        State::SynSent => tcp_info::TCP_SYN_SENT,
        State::SynReceived => tcp_info::TCP_SYN_RECV,
        State::FinWait1 => tcp_info::TCP_FIN_WAIT1,
        State::FinWait2 => tcp_info::TCP_FIN_WAIT2,
        State::TimeWait => tcp_info::TCP_TIME_WAIT,
        State::Closed => tcp_info::TCP_CLOSE,
        State::CloseWait => tcp_info::TCP_CLOSE_WAIT,
        State::LastAck => tcp_info::TCP_LAST_ACK,
        State::Closing => tcp_info::TCP_CLOSING,
    }
}

fn sat_u8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn low_u32(v: u64) -> u32 {
    // Linux's segs_in/segs_out are u32 that wrap; so do ours.
    v as u32
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_numbered_as_linux_numbers_them() {
        assert_eq!(linux_state(State::Established), 1);
        assert_eq!(linux_state(State::SynSent), 2);
        assert_eq!(linux_state(State::SynReceived), 3);
        assert_eq!(linux_state(State::FinWait1), 4);
        assert_eq!(linux_state(State::FinWait2), 5);
        assert_eq!(linux_state(State::TimeWait), 6);
        assert_eq!(linux_state(State::Closed), 7);
        assert_eq!(linux_state(State::CloseWait), 8);
        assert_eq!(linux_state(State::LastAck), 9);
        assert_eq!(linux_state(State::Closing), 11);
    }
}

/// The errno Linux gives for an ICMP error (`icmp_err_convert`, and
/// EHOSTUNREACH for time exceeded as `tcp_v4_err` does).
fn icmp_errno(e: outboard_tcp::IcmpError) -> i32 {
    use outboard_tcp::IcmpError;
    match e {
        IcmpError::FragmentationNeeded { .. } => libc::EMSGSIZE,
        IcmpError::TimeExceeded => libc::EHOSTUNREACH,
        IcmpError::Unreachable { code } => match code {
            0 | 6 | 9 | 11 => libc::ENETUNREACH,
            2 => libc::ENOPROTOOPT,
            3 => libc::ECONNREFUSED,
            4 => libc::EMSGSIZE,
            5 => libc::EOPNOTSUPP,
            7 => libc::EHOSTDOWN,
            8 => libc::ENONET,
            _ => libc::EHOSTUNREACH,
        },
    }
}

#[cfg(test)]
mod icmp_tests {
    use super::icmp_errno;
    use outboard_tcp::IcmpError;

    #[test]
    fn icmp_errors_map_to_linux_errnos() {
        let u = |code| icmp_errno(IcmpError::Unreachable { code });
        assert_eq!(u(0), libc::ENETUNREACH);
        assert_eq!(u(1), libc::EHOSTUNREACH);
        assert_eq!(u(3), libc::ECONNREFUSED);
        assert_eq!(u(13), libc::EHOSTUNREACH);
        assert_eq!(icmp_errno(IcmpError::TimeExceeded), libc::EHOSTUNREACH);
    }
}

fn sat_u16(v: u64) -> u32 {
    u32::from(u16::try_from(v).unwrap_or(u16::MAX))
}
