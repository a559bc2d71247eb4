//! What the services need of the endpoint around them to act: the
//! settings, the session, the peers they learn about, and where frames and
//! events go.

use crate::outbox::Outbox;
use crate::peers::Peers;
use crate::{Config, Event};
use std::collections::VecDeque;

pub(crate) struct Io<'a> {
    pub cfg: &'a Config,
    pub session: u32,
    pub peers: &'a mut Peers,
    pub out: &'a mut Outbox,
    pub events: &'a mut VecDeque<Event>,
}

/// An [`Io`] over an endpoint's own fields (a macro, so the borrow is of those fields only).
macro_rules! io {
    ($ep:ident) => {
        crate::io::Io { cfg: &$ep.cfg, session: $ep.session, peers: &mut $ep.peers, out: &mut $ep.out, events: &mut $ep.events }
    };
}
pub(crate) use io;
