//! What the integration tests of the API on in-process engines share.

use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::Ipv4Addr;

/// Settings of an engine on `fabric` at 10.0.0.`last`/24, with no control socket.
pub fn settings(fabric: &str, name: &str, last: u8) -> EngineSettings {
    let link: LinkSpec = fabric.parse().expect("link spec");
    let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
    s.control = false;
    s
}

/// An embedded engine with [`settings`].
pub fn engine(fabric: &str, name: &str, last: u8) -> EmbeddedEngine {
    EmbeddedEngine::start(settings(fabric, name, last)).expect("engine starts")
}
