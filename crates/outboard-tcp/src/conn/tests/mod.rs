//! Scripted segment tests (smoltcp's `send!`/`recv!` style): a `Harness`
//! feeds the connection segments "from the peer" and collects what comes out.
//! Our ISS is 1000, the peer's 5000; we are 10.0.0.1:4000, the peer 10.0.0.2:80.

mod blackhole;
mod data;
mod ecn;
mod fastopen;
mod fused;
mod in_place;
mod memory;
mod options;
mod predict;
mod prr;
mod rack;
mod rate;
mod recovery;
mod reorder;
mod robust;
mod sockopt;
mod rst;
mod rules;
mod states;
mod timers;
mod tso;

use super::*;
use crate::cc::CcKind;
use outboard_time::Duration;
use outboard_wire::{SackBlocks, TcpFlags, TcpOptions};
use std::net::{Ipv4Addr, SocketAddrV4};

pub(super) const ISS: u32 = 1000;
pub(super) const PEER_ISS: u32 = 5000;
pub(super) const LOCAL_PORT: u16 = 4000;
pub(super) const REMOTE_PORT: u16 = 80;

pub(super) const SYN: TcpFlags = TcpFlags::SYN;
pub(super) const ACK: TcpFlags = TcpFlags::ACK;
pub(super) const FIN: TcpFlags = TcpFlags::FIN;
pub(super) const RST: TcpFlags = TcpFlags::RST;

pub(super) fn tuple() -> FourTuple {
    FourTuple::new(
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), LOCAL_PORT).into(),
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), REMOTE_PORT).into(),
    )
}

/// A plain configuration: no window scaling, SACK or timestamps, so the
/// numbers in scripts stay readable. Option tests turn them on.
pub(super) fn plain_cfg() -> Config {
    Config {
        window_scaling: false,
        sack: false,
        timestamps: false,
        recv_buffer: 64 * 1024,
        send_buffer: 64 * 1024,
        cc: CcKind::NewReno,
        ..Config::default()
    }
}

/// A segment from the peer.
pub(super) fn seg(flags: TcpFlags, seq: u32, ack: u32) -> TcpRepr {
    TcpRepr {
        src_port: REMOTE_PORT,
        dst_port: LOCAL_PORT,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 65535,
        urgent: 0,
        options: TcpOptions::default(),
    }
}

pub(super) fn sack(blocks: &[(u32, u32)]) -> SackBlocks {
    let mut s = SackBlocks::new();
    for &(l, r) in blocks {
        s.push(SeqNumber(l), SeqNumber(r));
    }
    s
}

/// What the connection sent: header and payload copied out.
#[derive(Debug, Clone)]
pub(super) struct Out {
    pub repr: TcpRepr,
    pub payload: Vec<u8>,
    /// `Transmit::gso_size`: nonzero for a TSO segment.
    pub gso: usize,
    /// `Transmit::ect`: sent with ECT(0).
    pub ect: bool,
}

impl Out {
    pub fn seq(&self) -> u32 {
        self.repr.seq.0
    }
    pub fn ack(&self) -> u32 {
        self.repr.ack.0
    }
    pub fn flags(&self) -> TcpFlags {
        self.repr.flags
    }
    pub fn len(&self) -> usize {
        self.payload.len()
    }
}

pub(super) struct Harness {
    pub c: Connection,
    pub now: Instant,
}

impl Harness {
    /// `connect`: SYN-SENT, the SYN not yet drained.
    pub fn connect(cfg: &Config) -> Harness {
        let now = Instant::from_millis(10_000);
        Harness { c: Connection::connect(cfg, tuple(), SeqNumber(ISS), now), now }
    }

    /// `accept` of a SYN from the peer: SYN-RECEIVED, the SYN-ACK not yet drained.
    pub fn accept(cfg: &Config, syn: &TcpRepr) -> Harness {
        let now = Instant::from_millis(10_000);
        Harness { c: Connection::accept(cfg, tuple(), syn, SeqNumber(ISS), now), now }
    }

    /// An ESTABLISHED connection (active open, peer answered with `synack_opts`),
    /// everything drained. SND.NXT = 1001, RCV.NXT = 5001.
    pub fn established_with(cfg: &Config, synack_opts: TcpOptions) -> Harness {
        let mut h = Harness::connect(cfg);
        let syn = h.recv_one();
        assert_eq!(syn.flags(), SYN);
        let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
        sa.options = synack_opts;
        h.send(&sa, b"");
        let ack = h.recv_one();
        assert_eq!(ack.flags(), ACK);
        assert_eq!(h.c.state(), State::Established);
        h.events();
        h
    }

    pub fn established(cfg: &Config) -> Harness {
        Harness::established_with(cfg, TcpOptions { mss: Some(1460), ..TcpOptions::default() })
    }

    pub fn send(&mut self, repr: &TcpRepr, payload: &[u8]) {
        self.c.handle_segment(self.now, repr, payload);
    }

    /// Drains everything the connection wants to send now.
    pub fn recv(&mut self) -> Vec<Out> {
        let mut v = Vec::new();
        while let Some(t) = self.c.poll_transmit(self.now) {
            let mut payload = t.payload[0].to_vec();
            payload.extend_from_slice(t.payload[1]);
            v.push(Out { repr: t.repr, payload, gso: t.gso_size, ect: t.ect });
            assert!(v.len() < 10_000, "poll_transmit never returns None");
        }
        v
    }

    /// Exactly one segment must come out.
    #[track_caller]
    pub fn recv_one(&mut self) -> Out {
        let mut v = self.recv();
        assert_eq!(v.len(), 1, "expected one segment, got {v:#?}");
        v.pop().unwrap() // invariant: length checked above
    }

    #[track_caller]
    pub fn recv_nothing(&mut self) {
        let v = self.recv();
        assert!(v.is_empty(), "expected nothing, got {v:#?}");
    }

    /// Moves time forward by `d`, firing every timer that falls due on the way.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some(t) = self.c.poll_timeout() {
            if t > end {
                break;
            }
            self.now = self.now.max(t);
            self.c.handle_timeout(self.now);
        }
        self.now = end;
    }

    /// Fires the earliest timer (moving time to it) and returns how far time moved.
    pub fn fire_next_timer(&mut self) -> Duration {
        let t = self.c.poll_timeout().expect("a timer must be armed");
        let d = t - self.now;
        self.now = self.now.max(t);
        self.c.handle_timeout(self.now);
        d
    }

    pub fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.c.poll_event()).collect()
    }
}
