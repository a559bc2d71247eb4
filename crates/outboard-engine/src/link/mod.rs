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
//!   memory (a ring slot where the kernel allows it), with its [`RxMeta`],
//!   and takes it back when the callback returns: the stack copies what it
//!   keeps.
//! - `transmit` lends the callback a frame-sized slot (at least
//!   `mtu() + 14` bytes, a ring slot where the kernel allows it) to build
//!   one frame in place and say, with a [`TxMeta`], how to finish it; the
//!   frame leaves at the latest on `flush`.
//! - Nothing blocks but `wait`.
//! - Frames the link cannot take (ring full) are reported as
//!   [`TxStatus::Full`], never silently lost; frames the kernel dropped
//!   before we saw them are reported in [`LinkCounters::rx_kernel_drops`]
//!   where the kernel tells.
//! - A link without offloads reports `RxMeta::default()` for every frame and
//!   takes only `TxMeta::default()`; a caller that wants plain frames ignores
//!   the one and passes the other.
//!
//! Offloads (TAP and AF_PACKET, `LinkOptions::offloads`): every frame
//! carries a `struct virtio_net_hdr` (module [`vnet`]) between us and the
//! kernel. `transmit` takes TCP segments of up to 64 KiB that the kernel
//! cuts into MTU-sized frames (GSO, `TxMeta`), `receive` reports checksums
//! the kernel verified or never computed and hands over GRO/GSO frames
//! larger than the MTU (`RxMeta`): a caller that ignores the meta must open
//! the link with offloads off, or it sees frames whose checksum holds only
//! the pseudo-header sum. `info().offloads` lists what is on (`vnet_hdr`,
//! `tso4`, `rx-csum`); counters `tx_gso_frames`, `rx_csum_offloaded`,
//! `rx_gro_frames` show them used.
//!
//! Ownership: an `af_xdp`, `af_packet` or `tap` link claims its interface
//! for its whole life ([`claim`]): a link of another process on the same
//! interface (any kind, any queue) fails with [`LinkError::Busy`]; links of
//! one process share the claim (several AF_XDP queues of one engine).
//!
//! Unsafe code (rings in shared memory, syscalls) lives only in the link
//! modules and `sys`, each block with a `// SAFETY:` comment.

use outboard_time::Duration;
use serde::Serialize;
use std::fmt;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU32;

pub mod af_packet;
pub mod af_xdp;
pub mod claim;
pub mod fabric;
pub mod memory;
pub mod sys;
pub mod tap;

/// Largest frame a link hands out or accepts without multi-buffer/offloads:
/// a 9000-byte jumbo MTU plus the Ethernet header.
pub const MAX_FRAME: usize = 9014;

pub use outboard_stack::{RxCsum, RxMeta, TxMeta};

/// Largest TSO segment payload a vnet-header link offers (the kernel's
/// 64 KiB GSO limit; TCP keeps the whole datagram within 65535 bytes).
pub const TSO_MAX: usize = 65536;
/// Transmit slot (and receive buffer) of a link with TSO/GRO on: a 64 KiB
/// segment plus its headers and some room.
pub const TSO_FRAME: usize = 65536 + 256;

/// The callback of `Link::transmit`: builds a frame in the slot and
/// returns its length and how the link must finish it.
pub type MetaFill<'a> = dyn FnMut(&mut [u8]) -> Option<(usize, TxMeta)> + 'a;

/// What a link without offloads keeps of a `transmit` callback's answer: the
/// frame length. Such a link takes only default metas (checked in debug builds).
pub(crate) fn without_offloads(filled: Option<(usize, TxMeta)>) -> Option<usize> {
    let (n, meta) = filled?;
    debug_assert_eq!(meta, TxMeta::default(), "offload meta on a link without offloads");
    Some(n)
}

/// Offloads a link has on (through virtio-net headers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offloads {
    /// Largest TCP segment payload `transmit` takes as one GSO frame; 0 = none.
    pub tso_max: usize,
    /// `receive` reports checksums the kernel verified or left partial.
    pub rx_csum: bool,
}

/// The 10-byte `struct virtio_net_hdr` (legacy layout, native byte order:
/// what TAP with `IFF_VNET_HDR` and AF_PACKET with `PACKET_VNET_HDR` use).
pub mod vnet {
    use super::{RxCsum, RxMeta, TxMeta};

    pub const HDR_LEN: usize = 10;
    pub const F_NEEDS_CSUM: u8 = 1;
    pub const F_DATA_VALID: u8 = 2;
    pub const GSO_NONE: u8 = 0;
    pub const GSO_TCPV4: u8 = 1;

    /// Writes the header for a frame with `meta` into `h` (at least HDR_LEN bytes).
    pub fn write(h: &mut [u8], meta: &TxMeta) {
        let (flags, (start, off)) = match meta.csum {
            Some(c) => (F_NEEDS_CSUM, c),
            None => (0, (0, 0)),
        };
        h[0] = flags;
        h[1] = if meta.gso_size > 0 { GSO_TCPV4 } else { GSO_NONE };
        h[2..4].copy_from_slice(&meta.hdr_len.to_ne_bytes());
        h[4..6].copy_from_slice(&meta.gso_size.to_ne_bytes());
        h[6..8].copy_from_slice(&start.to_ne_bytes());
        h[8..10].copy_from_slice(&off.to_ne_bytes());
    }

    /// A received header: (its meta, GSO type).
    pub fn read(h: &[u8]) -> (RxMeta, u8) {
        let flags = h[0];
        let csum = if flags & F_NEEDS_CSUM != 0 {
            RxCsum::Partial
        } else if flags & F_DATA_VALID != 0 {
            RxCsum::Verified
        } else {
            RxCsum::None
        };
        (RxMeta { csum }, h[1])
    }

    /// Completes a partial checksum in software (for a capture of a frame
    /// sent with one): the field at `start + off` holds the pseudo-header sum,
    /// the sum over `frame[start..]` finishes it. False if out of range.
    pub fn finish_csum(frame: &mut [u8], start: usize, off: usize) -> bool {
        let at = start + off;
        if at + 2 > frame.len() {
            return false;
        }
        let c = outboard_wire::checksum::checksum(&frame[start..]);
        frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
        true
    }
}

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
    /// Frames sent as GSO (TSO) segments that the kernel cuts into MTU-sized frames.
    pub tx_gso_frames: u64,
    /// Frames received whose TCP/UDP checksum the kernel verified or left
    /// partial (not summed by us).
    pub rx_csum_offloaded: u64,
    /// Frames received as GSO/GRO segments (larger than one MTU).
    pub rx_gro_frames: u64,
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
    /// The interface is busy: another engine claimed it, or another program
    /// holds the queue, the XDP hook or the TAP device.
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
    /// Hands up to `max` received frames to `rx`, one call each, with what
    /// the link knows about each (checksum verified or partial; GRO-merged
    /// frames may exceed `mtu() + 14`; a link without offloads reports
    /// `RxMeta::default()`); returns how many.
    fn receive(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError>;
    /// Lends `fill` one transmit slot; `fill` writes a frame at its start and
    /// returns its length and how the link must finish it (GSO, partial
    /// checksum), or None when it has nothing to send. The slot is
    /// `TSO_FRAME` bytes when `offloads().tso_max > 0`. A link without
    /// offloads takes only `TxMeta::default()`.
    fn transmit(&mut self, fill: &mut MetaFill<'_>) -> Result<TxStatus, LinkError>;
    /// Makes every queued frame leave (a kick syscall on ring links); reclaims completed slots.
    fn flush(&mut self) -> Result<(), LinkError>;
    /// Sleeps until a frame may have arrived, `timeout` passed, (on
    /// fd-based links) one of `also` became readable, or (on links that say
    /// `wakes_on_futex`; others ignore them) one of `futexes` no longer holds
    /// its expected value. Spurious wake-ups are allowed.
    fn wait(
        &mut self,
        timeout: Duration,
        also: &[RawFd],
        futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError>;
    /// Whether `wait` also sleeps on futex words (shared memory), so
    /// applications can wake the shard with a futex instead of an fd.
    fn wakes_on_futex(&self) -> bool {
        false
    }
    fn counters(&self) -> LinkCounters;
    /// Live upgrade: stops at a frame boundary (what was queued to send is
    /// flushed) and says what the new engine needs to go on where this link
    /// stopped: its descriptors (borrowed: this link still owns them) and
    /// ring positions. Links that cannot be handed over say why.
    fn hand_over(&mut self) -> Result<HandOver, String> {
        Err(format!("the {} link cannot be handed over yet (only af_packet, af_xdp and tap links can)", self.info().kind))
    }
    /// Offloads this link has on; none unless the link says so.
    fn offloads(&self) -> Offloads {
        Offloads::default()
    }
}

/// A parsed `--link` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSpec {
    AfXdp { iface: String, queue: u32 },
    AfPacket { iface: String },
    Tap { name: String },
    Fabric { name: String },
}

/// The same text `--link` takes (`FromStr` reads it back).
impl std::fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkSpec::AfXdp { iface, queue } => write!(f, "af_xdp:{iface}:{queue}"),
            LinkSpec::AfPacket { iface } => write!(f, "af_packet:{iface}"),
            LinkSpec::Tap { name } => write!(f, "tap:{name}"),
            LinkSpec::Fabric { name } => write!(f, "fabric:{name}"),
        }
    }
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
    /// TAP and AF_PACKET: use virtio-net headers for TSO/GSO and checksum
    /// offload (the engine's default; `--offloads off` clears it).
    pub offloads: bool,
    /// The engine runs IPv6: AF_XDP's XDP program redirects IPv6 frames too.
    pub ipv6: bool,
}

/// What a link hands to the engine that upgrades this one (`Link::hand_over`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandOver {
    /// The link's kind (`af_packet`) and interface.
    pub kind: String,
    pub iface: String,
    /// The descriptors, named, in order: the socket (`link socket`), the
    /// interface's claim (`link claim`), then the link's own (af_xdp: its
    /// UMEM, XSK map, program and BPF link).
    #[serde(skip)]
    pub fds: Vec<(&'static str, std::os::fd::RawFd)>,
    /// Next RX slot to read, next TX slot to fill, slots queued and not yet taken by the kernel.
    pub rx_idx: usize,
    pub tx_idx: usize,
    pub tx_unsent: usize,
    /// af_xdp: the UMEM's shape and the chunks no ring holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<af_xdp::XdpState>,
}

/// A handed-over link's descriptors, owned by the new engine, and its positions.
#[derive(Debug)]
pub struct Adopted {
    pub socket: std::os::fd::OwnedFd,
    pub claim: std::os::fd::OwnedFd,
    pub rx_idx: usize,
    pub tx_idx: usize,
    pub tx_unsent: usize,
    pub xdp: Option<af_xdp::XdpState>,
    /// The link's other descriptors, by name (af_xdp's).
    pub more: Vec<(String, std::os::fd::OwnedFd)>,
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

/// Opens one link per shard of an engine of `shards` shards, as one NIC
/// with that many receive queues: AF_XDP queues `queue`, `queue + 1`, …
/// (the interface must have them: veth is made with `numrxqueues`);
/// AF_PACKET sockets in one fanout group; a fabric port group (the fabric
/// steers by our Toeplitz hash like a NIC's RSS); queues of a multi-queue TAP.
pub fn open_shards(spec: &LinkSpec, opts: &LinkOptions, shards: usize) -> Result<Vec<Box<dyn Link>>, LinkError> {
    if shards <= 1 {
        return Ok(vec![open(spec, opts)?]);
    }
    let mut links: Vec<Box<dyn Link>> = Vec::with_capacity(shards);
    match spec {
        LinkSpec::AfXdp { iface, queue } => {
            for i in 0..shards as u32 {
                links.push(Box::new(af_xdp::AfXdpLink::open(iface, queue + i, opts)?));
            }
        }
        LinkSpec::AfPacket { iface } => {
            let group = (std::process::id() & 0xffff) as u16;
            for _ in 0..shards {
                links.push(Box::new(af_packet::AfPacketLink::open_fanout(iface, opts, Some(group))?));
            }
        }
        LinkSpec::Fabric { name } => {
            for l in fabric::FabricLink::open_group(name, opts, shards)? {
                links.push(Box::new(l));
            }
        }
        LinkSpec::Tap { name } => {
            for _ in 0..shards {
                links.push(Box::new(tap::TapLink::open_queue(name, opts, true)?));
            }
        }
    }
    Ok(links)
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

    #[test]
    fn specs_print_as_they_are_given() {
        for s in ["af_xdp:veth0:3", "af_packet:eth0", "tap:ob0", "fabric:demo"] {
            assert_eq!(s.parse::<LinkSpec>().unwrap().to_string(), s);
        }
    }
}
