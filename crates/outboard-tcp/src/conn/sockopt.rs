//! Per-connection socket options set at run time, as Linux's: the MSS
//! ceiling before connect (TCP_MAXSEG), corking (TCP_CORK, MSG_MORE), the
//! user timeout (TCP_USER_TIMEOUT) and the congestion controller
//! (TCP_CONGESTION). Kept apart from the segment-handling modules: they
//! consult `cork_holds` (output) and the `Connection` entry points in
//! `mod.rs` call `note_unacked` and `user_timeout_due`.

use super::{Connection, State, DEFAULT_MSS};
use crate::cc::{CcKind, Controller};
use outboard_time::{Duration, Instant};

/// Linux's ceiling on how long TCP_CORK holds a partial segment (tcp(7)).
pub const CORK_CEILING: Duration = Duration::from_millis(200);

/// The options' state (a field of `Connection`).
#[derive(Debug, Clone, Copy, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SockOpts {
    /// Corked since then (TCP_CORK or MSG_MORE): partial segments wait.
    corked_at: Option<Instant>,
    /// TCP_USER_TIMEOUT: data unacknowledged this long fails the connection.
    user_timeout: Option<Duration>,
    /// Since when data has been outstanding without SND.UNA moving, and
    /// the SND.UNA seen then.
    unacked_since: Option<(Instant, u32)>,
    /// IP_TOS / IPV6_TCLASS without the ECN bits.
    tos: u8,
}

impl Connection {
    /// IP_TOS (IPV6_TCLASS): the DSCP bits every segment of this connection
    /// carries from now on; the ECN bits stay under RFC 3168's control, as
    /// Linux keeps them (`INET_ECN_MASK` cleared on a TCP socket).
    pub fn set_tos(&mut self, tos: u8) {
        self.sockopt.tos = tos & !0b11;
    }

    /// The DSCP bits set by `set_tos` (ECN bits 0).
    pub fn tos(&self) -> u8 {
        self.sockopt.tos
    }

    /// TCP_MAXSEG before connect: our SYN advertises at most `mss`, and the
    /// send MSS is never above it (Linux's `user_mss` / `mss_clamp`).
    /// Ignored once the SYN went out (Linux records it then for nothing the
    /// connection does).
    pub fn set_user_mss(&mut self, mss: u16) {
        if self.state != State::SynSent || self.snd_max != self.iss || mss == 0 {
            return;
        }
        self.cfg.mss = self.cfg.mss.min(mss).max(64);
        let m = usize::from(self.cfg.mss);
        self.send_mss = DEFAULT_MSS.min(m);
        self.rcv_mss = DEFAULT_MSS.min(m);
        self.cc = Controller::new(self.cfg.cc, DEFAULT_MSS.min(m));
    }

    /// SO_RCVBUF (`clamp`: the window it allows, half Linux's doubled value;
    /// 0: none): from now on the window offered never exceeds `clamp` less
    /// the bytes waiting to be read (Linux's `tcp_space` under a locked
    /// buffer), and never shrinks what was offered already. Set before the
    /// SYN goes out it also chooses the SYN's window scale, as Linux's
    /// `tcp_connect_init` does.
    pub fn set_rcv_clamp(&mut self, clamp: usize) {
        self.cfg.rcv_clamp = clamp;
        if self.state == State::SynSent && self.snd_max == self.iss {
            self.rcv_wscale = super::options::offered_wscale(&self.cfg);
        }
    }

    /// The room the window may offer: the receive region's free space, under
    /// the SO_RCVBUF clamp when one is set.
    pub(super) fn rcv_room(&self) -> usize {
        let free = self.recv_buf.free();
        match self.cfg.rcv_clamp {
            0 => free,
            clamp => free.min(clamp.saturating_sub(self.recv_buf.len())),
        }
    }

    /// TCP_CORK (the socket shim also corks around a MSG_MORE send): while
    /// on, new data goes only in full segments; turning it off sends what
    /// waits (under Nagle's rule, as Linux). A partial segment waits at most
    /// `CORK_CEILING` from when the cork went on.
    pub fn set_cork(&mut self, now: Instant, on: bool) {
        match (on, self.sockopt.corked_at) {
            (true, None) => self.sockopt.corked_at = Some(now),
            (false, Some(_)) => {
                self.sockopt.corked_at = None;
                // The ceiling's timer (the persist timer with an open window,
                // as the SWS override): not wanted now; re-armed if needed.
                if self.snd_wnd > 0 {
                    self.timers.stop(super::timers::Timer::Persist);
                }
            }
            _ => {}
        }
    }

    pub fn corked(&self) -> bool {
        self.sockopt.corked_at.is_some()
    }

    /// Whether the cork holds a partial segment back now; when it does,
    /// the persist timer is armed for the ceiling (its expiry sends it).
    pub(super) fn cork_holds(&mut self, now: Instant) -> bool {
        let Some(at) = self.sockopt.corked_at else { return false };
        let until = at + CORK_CEILING;
        if now >= until {
            return false;
        }
        let sooner = self.timers.get(super::timers::Timer::Persist).is_none_or(|t| t > until);
        if sooner && self.snd_wnd > 0 {
            self.timers.set(super::timers::Timer::Persist, until);
        }
        true
    }

    /// TCP_USER_TIMEOUT (`None` or zero: off).
    pub fn set_user_timeout(&mut self, now: Instant, t: Option<Duration>) {
        self.sockopt.user_timeout = t.filter(|d| *d > Duration::ZERO);
        self.note_unacked(now);
    }

    pub fn user_timeout(&self) -> Option<Duration> {
        self.sockopt.user_timeout
    }

    /// Follows SND.UNA: the user timeout counts from when data went out
    /// with nothing outstanding, or from the last acknowledgement that
    /// moved SND.UNA.
    pub(super) fn note_unacked(&mut self, now: Instant) {
        if self.sockopt.user_timeout.is_none() || self.snd_max == self.snd_una {
            self.sockopt.unacked_since = None;
            return;
        }
        let una = self.snd_una.0;
        match self.sockopt.unacked_since {
            Some((_, seen)) if seen == una => {}
            _ => self.sockopt.unacked_since = Some((now, una)),
        }
    }

    /// When the user timeout expires, if data is outstanding.
    pub(super) fn user_timeout_at(&self) -> Option<Instant> {
        if self.state == State::Closed {
            return None;
        }
        let (since, _) = self.sockopt.unacked_since?;
        Some(since + self.sockopt.user_timeout?)
    }

    /// Fails the connection with TimedOut if the user timeout has expired.
    pub(super) fn check_user_timeout(&mut self, now: Instant) -> bool {
        if self.state == State::Closed || self.user_timeout_at().is_none_or(|at| at > now) {
            return false;
        }
        self.sockopt.unacked_since = None;
        self.fail(super::Error::TimedOut);
        true
    }

    /// TCP_CONGESTION at run time: a new controller of `kind` for the current
    /// MSS (Linux re-initialises the connection's controller the same way).
    pub fn set_congestion(&mut self, kind: CcKind) {
        if self.cfg.cc == kind {
            return;
        }
        self.cfg.cc = kind;
        self.cc = Controller::new(kind, self.data_mss());
    }

    pub fn congestion(&self) -> CcKind {
        self.cfg.cc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::conn::FourTuple;
    use outboard_wire::SeqNumber;

    fn conn() -> Connection {
        let t = FourTuple {
            local: "10.0.0.1:1000".parse().unwrap(),
            remote: "10.0.0.2:80".parse().unwrap(),
        };
        Connection::connect(&Config::default(), t, SeqNumber(100), Instant::from_millis(0))
    }

    #[test]
    fn user_mss_lowers_the_syn_mss_only_before_the_syn() {
        let mut c = conn();
        c.set_user_mss(1000);
        assert_eq!(c.cfg.mss, 1000);
        c.set_user_mss(1400); // never above what was set
        assert_eq!(c.cfg.mss, 1000);
        let syn = c.poll_transmit(Instant::from_millis(0)).expect("SYN");
        assert_eq!(syn.repr.options.mss, Some(1000));
        c.set_user_mss(500);
        assert_eq!(c.cfg.mss, 1000, "after the SYN it changes nothing");
    }

    #[test]
    fn cork_holds_until_uncorked_or_the_ceiling() {
        let mut c = conn();
        let t0 = Instant::from_millis(0);
        c.set_cork(t0, true);
        assert!(c.cork_holds(t0 + Duration::from_millis(199)));
        assert!(!c.cork_holds(t0 + Duration::from_millis(200)));
        c.set_cork(t0, false);
        assert!(!c.corked());
        assert!(!c.cork_holds(t0));
    }

    #[test]
    fn congestion_can_change() {
        let mut c = conn();
        assert_eq!(c.congestion(), CcKind::NewReno);
        c.set_congestion(CcKind::Cubic);
        assert_eq!(c.congestion(), CcKind::Cubic);
        assert!(matches!(c.cc, Controller::Cubic(_)));
    }
}
