//! What this endpoint knows of the engines it talks to: their session (to
//! tell a restart) and their round-trip time (for calls and lookups).
//! Filled only from answers to what this endpoint sent, so a flood of forged
//! sources cannot grow it.

use crate::Config;
use outboard_tcp::rtt::RttEstimator;
use outboard_wire::flowhash::FlowMap;
use std::net::SocketAddr;

#[derive(Debug)]
pub(crate) struct Peer {
    /// 0 until an answer arrived.
    pub session: u32,
    pub rtt: RttEstimator,
}

#[derive(Debug, Default)]
pub(crate) struct Peers {
    map: FlowMap<SocketAddr, Peer>,
}

impl Peers {
    pub fn get(&mut self, host: SocketAddr, cfg: &Config) -> &mut Peer {
        self.map
            .entry(host)
            .or_insert_with(|| Peer { session: 0, rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto) })
    }
}
