//! Links: where a shard's frames come from and go to. Each kind is a small
//! module behind the one [`Link`] trait; the shard loop knows nothing else
//! about them.
//!
//! | spec | module | needs |
//! |---|---|---|
//! | `af_xdp:IFACE[:QUEUE]` | [`af_xdp`] | root (CAP_NET_ADMIN, CAP_BPF), a kernel with XDP sockets |
//! | `af_packet:IFACE` | [`af_packet`] | root (CAP_NET_RAW) |
//! | `tap:NAME` | [`tap`] | root (CAP_NET_ADMIN), /dev/net/tun |
//! | `fabric:NAME` | [`fabric`] | nothing: shared memory between processes of one user |
//!
//! Contract every link keeps:
//! - `receive` hands each frame to the callback borrowed from the link's own
//!   memory (a ring slot where the kernel allows it) and takes it back when
//!   the callback returns: the stack copies what it keeps.
//! - `transmit` lends the callback a frame-sized slot (at least
//!   `mtu() + 14` bytes, a ring slot where the kernel allows it) to build
//!   one frame in place; the frame leaves at the latest on `flush`.
//! - Nothing blocks but `wait`.
//! - Frames the link cannot take (ring full) are reported as
//!   [`TxStatus::Full`], never silently lost; frames the kernel dropped
//!   before we saw them are reported in [`LinkCounters::rx_kernel_drops`]
//!   where the kernel tells.
//!
//! Unsafe code (rings in shared memory, syscalls) lives only in the link
//! modules and `sys`, each block with a `// SAFETY:` comment.

use outboard_time::Duration;
use serde::Serialize;
use std::fmt;
use std::os::fd::RawFd;

pub mod af_packet;
pub mod af_xdp;
pub mod fabric;
pub mod sys;
pub mod tap;

/// Largest frame a link hands out or accepts without multi-buffer/offloads:
/// a 9000-byte jumbo MTU plus the Ethernet header.
pub const MAX_FRAME: usize = 9014;

/// Result of offering one transmit slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// The callback built a frame; it is queued on the link.
    Queued,
    /// The callback had nothing to send (returned None); the slot was not used.
    Idle,
    /// No slot free (ring full): try again after `flush`/`wait`. The callback was not called.
    Full,
}

/// Counters every link keeps (monotonic since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames the kernel (or the fabric) dropped before we could read them, where it reports them.
    pub rx_kernel_drops: u64,
    /// Frames the link refused for being larger than it carries.
    pub rx_oversize: u64,
    /// Times `transmit` found no free slot.
    pub tx_full: u64,
    /// Transmit errors reported by the kernel (frames lost on the way out).
    pub tx_errors: u64,
}

/// What `stat` shows about a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkInfo {
    /// `af_xdp`, `af_packet`, `tap` or `fabric`.
    pub kind: String,
    /// Interface, TAP device or fabric name.
    pub name: String,
    /// How the link runs, e.g. `native copy-mode queue 0`, `generic`, `tpacket_v2 mmap`, `port 1`.
    pub mode: String,
    /// IP MTU.
    pub mtu: usize,
    pub mac: [u8; 6],
    /// Offloads in use, e.g. `["vnet_hdr"]`; empty when none.
    pub offloads: Vec<String>,
}

/// Why a link could not be opened or used. Each maps to a distinct exit code
/// in the `outboard` command and says what to do.
#[derive(Debug)]
pub enum LinkError {
    /// The spec string does not parse.
    BadSpec(String),
    /// Root or a capability is needed.
    NeedsPrivilege { what: String, hint: String },
    /// No such network interface (or TAP device could not be created under that name).
    NoSuchInterface(String),
    /// The interface or driver cannot do AF_XDP at all (neither native nor generic).
    XdpUnsupported(String),
    /// Fabric name/port conflicts: every port of the fabric taken, or a port in use.
    FabricTaken(String),
    /// The interface is busy (another program holds the queue or the TAP device).
    Busy(String),
    /// Any other system error, with the call that failed.
    Io { call: &'static str, err: std::io::Error },
}

impl LinkError {
    pub fn io(call: &'static str, err: std::io::Error) -> LinkError {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => LinkError::NeedsPrivilege {
                what: format!("{call}: {err}"),
                hint: "run as root (or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)".into(),
            },
            _ => LinkError::Io { call, err },
        }
    }
    /// The last OS error of `call`.
    pub fn last(call: &'static str) -> LinkError {
        LinkError::io(call, std::io::Error::last_os_error())
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::BadSpec(s) => write!(f, "bad link spec: {s}"),
            LinkError::NeedsPrivilege { what, hint } => write!(f, "permission denied: {what}; {hint}"),
            LinkError::NoSuchInterface(s) => write!(f, "no such interface: {s}"),
            LinkError::XdpUnsupported(s) => write!(f, "AF_XDP unsupported: {s}"),
            LinkError::FabricTaken(s) => write!(f, "fabric unavailable: {s}"),
            LinkError::Busy(s) => write!(f, "interface busy: {s}"),
            LinkError::Io { call, err } => write!(f, "{call} failed: {err}"),
        }
    }
}

impl std::error::Error for LinkError {}

/// A source and sink of Ethernet frames for one shard.
pub trait Link: Send {
    fn info(&self) -> LinkInfo;
    /// Our MAC address on this link (the stack's source address).
    fn mac(&self) -> [u8; 6];
    /// IP MTU (frames are at most `mtu() + 14` bytes).
    fn mtu(&self) -> usize;
    /// Hands up to `max` received frames to `rx`, one call each; returns how many.
    fn receive(&mut self, max: usize, rx: &mut dyn FnMut(&[u8])) -> Result<usize, LinkError>;
    /// Lends `fill` one transmit slot; `fill` writes a frame at its start and
    /// returns its length, or None when it has nothing to send.
    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<TxStatus, LinkError>;
    /// Makes every queued frame leave (a kick syscall on ring links); reclaims completed slots.
    fn flush(&mut self) -> Result<(), LinkError>;
    /// Sleeps until a frame may have arrived, `timeout` passed, or (on
    /// fd-based links) one of `also` became readable. Spurious wake-ups are allowed.
    fn wait(&mut self, timeout: Duration, also: &[RawFd]) -> Result<(), LinkError>;
    fn counters(&self) -> LinkCounters;
}

/// A parsed `--link` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSpec {
    AfXdp { iface: String, queue: u32 },
    AfPacket { iface: String },
    Tap { name: String },
    Fabric { name: String },
}

impl std::str::FromStr for LinkSpec {
    type Err = LinkError;
    fn from_str(s: &str) -> Result<LinkSpec, LinkError> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            LinkError::BadSpec(format!(
                "{s:?}: expected KIND:ARGS, one of af_xdp:IFACE[:QUEUE], af_packet:IFACE, tap:NAME, fabric:NAME"
            ))
        })?;
        let name_ok = |n: &str, max: usize| {
            !n.is_empty()
                && n.len() <= max
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        // Interface names: at most 15 bytes (IFNAMSIZ - 1).
        let iface = |n: &str| -> Result<String, LinkError> {
            if name_ok(n, 15) {
                Ok(n.to_string())
            } else {
                Err(LinkError::BadSpec(format!(
                    "{n:?} is not an interface name (1 to 15 of A-Z a-z 0-9 - _ .)"
                )))
            }
        };
        match kind {
            "af_xdp" => {
                let (ifname, queue) = match rest.split_once(':') {
                    Some((i, q)) => (
                        i,
                        q.parse::<u32>().map_err(|_| {
                            LinkError::BadSpec(format!("{q:?} is not a queue number"))
                        })?,
                    ),
                    None => (rest, 0),
                };
                Ok(LinkSpec::AfXdp { iface: iface(ifname)?, queue })
            }
            "af_packet" => Ok(LinkSpec::AfPacket { iface: iface(rest)? }),
            "tap" => Ok(LinkSpec::Tap { name: iface(rest)? }),
            "fabric" => {
                if name_ok(rest, 64) {
                    Ok(LinkSpec::Fabric { name: rest.to_string() })
                } else {
                    Err(LinkError::BadSpec(format!(
                        "{rest:?} is not a fabric name (1 to 64 of A-Z a-z 0-9 - _ .)"
                    )))
                }
            }
            other => Err(LinkError::BadSpec(format!(
                "unknown link kind {other:?}: use af_xdp, af_packet, tap or fabric"
            ))),
        }
    }
}

/// Settings a link needs beyond its spec.
#[derive(Debug, Clone)]
pub struct LinkOptions {
    /// Requested IP MTU; None = the interface's own (fabric and TAP: 1500).
    pub mtu: Option<usize>,
    /// Our IPv4 address: AF_XDP's XDP program redirects only frames for it.
    pub addr: std::net::Ipv4Addr,
    /// Fabric only: impairment of frames this engine sends, and its seed.
    pub fabric_faults: Option<(outboard_impair::FaultConfig, u64)>,
}

/// Opens the link a spec names.
pub fn open(spec: &LinkSpec, opts: &LinkOptions) -> Result<Box<dyn Link>, LinkError> {
    Ok(match spec {
        LinkSpec::AfXdp { iface, queue } => Box::new(af_xdp::AfXdpLink::open(iface, *queue, opts)?),
        LinkSpec::AfPacket { iface } => Box::new(af_packet::AfPacketLink::open(iface, opts)?),
        LinkSpec::Tap { name } => Box::new(tap::TapLink::open(name, opts)?),
        LinkSpec::Fabric { name } => Box::new(fabric::FabricLink::open(name, opts)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_reject() {
        assert_eq!(
            "af_xdp:veth0:3".parse::<LinkSpec>().unwrap(),
            LinkSpec::AfXdp { iface: "veth0".into(), queue: 3 }
        );
        assert_eq!(
            "af_xdp:veth0".parse::<LinkSpec>().unwrap(),
            LinkSpec::AfXdp { iface: "veth0".into(), queue: 0 }
        );
        assert_eq!(
            "fabric:demo".parse::<LinkSpec>().unwrap(),
            LinkSpec::Fabric { name: "demo".into() }
        );
        for bad in ["", "eth0", "af_xdp:", "af_xdp:eth0:x", "tap:a/b", "af_packet:0123456789abcdef", "wifi:wlan0", "fabric:a b"] {
            assert!(bad.parse::<LinkSpec>().is_err(), "{bad} should not parse");
        }
    }
}
