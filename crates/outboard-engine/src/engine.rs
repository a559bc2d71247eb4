//! Putting an engine together from its settings: open the link, build the
//! stack on the link's MAC and MTU, start the services, bind the control
//! socket, open the capture. Errors say what failed and what to do; each
//! kind maps to a distinct exit code (`EngineError::exit_code`).

use crate::capture::PcapWriter;
use crate::client::{FetchPlan, Fetches};
use crate::control::{ControlError, ControlInbox, ControlServer};
use crate::host::{AttachServer, BoardLimits, Host, LocalAttacher};
use crate::link::{self, LinkError, LinkOptions, LinkSpec};
use crate::log::{self, Level};
use crate::services::{ServiceSpec, Services};
use crate::shard::Shard;
use crate::steering::Steer;
use outboard_impair::FaultConfig;
use outboard_stack::{Stack, StackConfig};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// Everything an engine needs, resolved (the CLI merges flags and TOML into this).
#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub name: String,
    pub link: LinkSpec,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    pub mtu: Option<usize>,
    pub pcap: Option<PathBuf>,
    pub services: Vec<ServiceSpec>,
    /// Bytes the stack may hold before the shard stops accepting connections.
    pub memory_cap: usize,
    /// Fabric only: impairment of what this engine sends, and its seed.
    pub fabric_faults: Option<(FaultConfig, u64)>,
    pub tcp: outboard_tcp::Config,
    /// Bind the control socket (off for throwaway engines such as `fetch`).
    pub control: bool,
    /// TAP and AF_PACKET: TSO/GSO and checksum offload through virtio-net
    /// headers (on by default; `--offloads off`).
    pub offloads: bool,
    /// How applications attach (boards): a Unix socket next to the control
    /// socket (daemon), in-process only (embedded), or not at all.
    pub boards: BoardAttach,
    /// Largest board one application may map.
    pub max_board_bytes: usize,
    /// af_xdp/af_packet: start even when the interface has kernel IP
    /// addresses (logged as a warning). Off by default: the start fails
    /// with [`EngineError::KernelAddress`], since the kernel answers too.
    pub allow_kernel_address: bool,
    /// Users and groups besides root and the engine's own user that may
    /// attach applications (`--allow-user`, `--allow-group`).
    pub access: outboard_board::access::Access,
    /// Shards: threads, each with its own stack, link queue, timers and
    /// buffers (`--shards`). 1 runs in the caller's thread as before.
    pub shards: usize,
    /// The cores the shards are pinned to, shard i on `cores[i]`
    /// (`--cores`); none: shards are not pinned.
    pub cores: Option<Vec<usize>>,
    /// Network-device mode (`--kernel-tap NAME`): a TAP interface for the
    /// host kernel, which gets the traffic the engine does not take.
    pub kernel_tap: Option<(String, crate::kernel::KernelPolicy)>,
    /// IPv6 beside IPv4 (`--addr` with an IPv6 address, or `--ipv6 on`):
    /// a link-local address always, a static one and SLAAC as configured.
    pub ipv6: Option<outboard_stack::Ipv6Config>,
    /// The native message protocols on a UDP port of shard 0 (`--messages`).
    pub messages: Option<crate::messages::MessageSettings>,
    /// TCP-listener handlers (`--handler NAME=FILE:tcp=PORT`), on every shard.
    pub tcp_handlers: Vec<crate::tcp_handlers::TcpHandlerSettings>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardAttach {
    Off,
    /// `RUN_DIR/NAME.board` (needs the control socket's name).
    Daemon,
    /// `Engine::local_attacher` only: the engine runs as threads of the application.
    Embedded,
}

/// An engine's IPv4 address and prefix, `A.B.C.D/N` (N 1 to 32, a host
/// address): the one parser behind `--addr`, `outboard run --inline` and
/// the embedded engine's C options.
pub fn parse_ipv4_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, p) = s.split_once('/').ok_or("expected A.B.C.D/N, e.g. 10.77.0.2/24")?;
    let addr: Ipv4Addr = a.parse().map_err(|_| format!("{a:?} is not an IPv4 address"))?;
    let prefix: u8 = p.parse().ok().filter(|p| (1..=32).contains(p)).ok_or("prefix length must be 1..32")?;
    if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
        return Err("not a host address".into());
    }
    Ok((addr, prefix))
}

/// Default `max_board_bytes`.
pub const DEFAULT_MAX_BOARD: usize = 1 << 30;

impl EngineSettings {
    pub fn new(name: &str, link: LinkSpec, addr: Ipv4Addr, prefix_len: u8) -> EngineSettings {
        EngineSettings {
            name: name.to_string(),
            link,
            addr,
            prefix_len,
            gateway: None,
            mtu: None,
            pcap: None,
            services: Vec::new(),
            memory_cap: DEFAULT_MEMORY_CAP,
            fabric_faults: None,
            tcp: outboard_tcp::Config::default(),
            control: true,
            offloads: true,
            boards: BoardAttach::Daemon,
            max_board_bytes: DEFAULT_MAX_BOARD,
            allow_kernel_address: false,
            access: outboard_board::access::Access::default(),
            shards: 1,
            cores: None,
            kernel_tap: None,
            ipv6: None,
            messages: None,
            tcp_handlers: Vec::new(),
        }
    }
}

pub const DEFAULT_MEMORY_CAP: usize = 512 << 20;

/// The settings an engine can run with. `Engine::start` refuses others
/// (`EngineError::Config`, exit code 2), and the `outboard` command's flags
/// are checked against the same numbers before anything starts.
pub mod limits {
    /// IP MTU: 576 (every IPv4 host must take it; our MSS is MTU - 40)
    /// to 9000 (jumbo frames; af_xdp takes at most `af_xdp::MAX_MTU`).
    pub const MIN_MTU: usize = 576;
    pub const MAX_MTU: usize = 9000;
    /// TCP send and receive buffer: at least one 4 KiB page (a few
    /// segments), at most 1 GiB (the largest window RFC 7323 scaling
    /// advertises, 65535 << 14, rounded up; a board's stream region is one buffer).
    pub const MIN_TCP_BUFFER: usize = 4 << 10;
    pub const MAX_TCP_BUFFER: usize = 1 << 30;
    /// Memory cap: the command line's floor (1 MiB holds one connection's
    /// default buffers, 2 x 256 KiB, with room to spare) and ceiling. The
    /// library's own floor is one connection's buffers (send + receive):
    /// below it the engine completes handshakes but never serves data.
    pub const MIN_MEMORY_CAP: usize = 1 << 20;
    pub const MAX_MEMORY_CAP: usize = 1 << 40;
    /// Fabric impairment: frames lost plus frames corrupted (a corrupted frame
    /// is dropped by its checksum) at most 25%, the most our TCP gets through
    /// in a demo's time (1 MiB at 25% loss: about 110 virtual seconds; at 40%
    /// it does not finish in 600).
    pub const MAX_LOSS: f64 = 0.25;
    /// Fabric delay, jitter and reorder delay: at most 1 s each way.
    pub const MAX_DELAY_MS: f64 = 1000.0;
    /// Shards: one bit each in the steering table's port words.
    pub const MAX_SHARDS: usize = crate::steering::MAX_SHARDS;
}

impl EngineSettings {
    /// Refuses settings the engine cannot run with (see `limits`).
    pub fn validate(&self) -> Result<(), String> {
        use limits::*;
        if self.prefix_len > 32 {
            return Err(format!("prefix length {} is over 32", self.prefix_len));
        }
        if let Some(m) = self.mtu {
            if !(MIN_MTU..=MAX_MTU).contains(&m) {
                return Err(format!("mtu {m}: must be between {MIN_MTU} and {MAX_MTU}"));
            }
        }
        for (what, b) in [("send_buffer", self.tcp.send_buffer), ("recv_buffer", self.tcp.recv_buffer)] {
            if !(MIN_TCP_BUFFER..=MAX_TCP_BUFFER).contains(&b) {
                return Err(format!("tcp.{what} {b}: must be between {MIN_TCP_BUFFER} and {MAX_TCP_BUFFER} bytes"));
            }
        }
        let one_connection = self.tcp.send_buffer + self.tcp.recv_buffer;
        if !(one_connection..=MAX_MEMORY_CAP).contains(&self.memory_cap) {
            return Err(format!(
                "memory_cap {}: must be between {one_connection} bytes (one connection's send + receive buffers) and {MAX_MEMORY_CAP} bytes",
                self.memory_cap
            ));
        }
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(format!("shards {}: must be between 1 and {MAX_SHARDS}", self.shards));
        }
        if let Some(cores) = &self.cores {
            if cores.len() != self.shards {
                return Err(format!(
                    "cores {}: give one core per shard ({} shard{})",
                    cores.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
                    self.shards,
                    if self.shards == 1 { "" } else { "s" }
                ));
            }
            let allowed = crate::cpu::allowed();
            if let Some(c) = cores.iter().find(|c| !allowed.contains(c)) {
                return Err(format!(
                    "cores: core {c} is not one this process may run on ({})",
                    allowed.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
                ));
            }
        }
        if self.kernel_tap.is_some() && self.ipv6.is_some() {
            return Err("kernel_tap: network-device mode gives IPv6 to the host kernel; run the engine without IPv6 (no IPv6 addr, ipv6 off)".into());
        }
        if self.kernel_tap.is_some() && self.shards > 1 {
            return Err(format!("kernel_tap: the kernel's TAP takes one shard, not {} (use shards = 1)", self.shards));
        }
        if let (Some((name, _)), LinkSpec::Tap { name: link }) = (&self.kernel_tap, &self.link) {
            if name == link {
                return Err(format!("kernel_tap {name}: the engine's own link is that TAP; name another device"));
            }
        }
        if self.memory_cap / self.shards < one_connection {
            return Err(format!(
                "memory_cap {}: each of {} shards gets an equal share, which must hold one connection's send + receive buffers ({one_connection} bytes)",
                self.memory_cap, self.shards
            ));
        }
        if self.max_board_bytes == 0 {
            return Err("max_board_bytes 0: must be at least 1 byte".into());
        }
        if let Some((fc, _)) = &self.fabric_faults {
            for (what, p) in [
                ("loss", fc.loss),
                ("duplicate", fc.duplicate),
                ("reorder", fc.reorder),
                ("corrupt", fc.corrupt),
                ("undetectable_corrupt", fc.undetectable_corrupt),
            ] {
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("fabric {what} {p}: must be between 0 and 1"));
                }
            }
            let lost = fc.loss + fc.corrupt + fc.undetectable_corrupt;
            if lost > MAX_LOSS {
                return Err(format!(
                    "fabric loss {} + corrupt {}: frames lost or corrupted must be at most {MAX_LOSS} together",
                    fc.loss,
                    fc.corrupt + fc.undetectable_corrupt
                ));
            }
            for (what, d) in [("delay", fc.delay), ("jitter", fc.jitter), ("reorder_delay", fc.reorder_delay)] {
                let ms = d.as_nanos() as f64 / 1e6;
                if ms > MAX_DELAY_MS {
                    return Err(format!("fabric {what} {ms} ms: must be between 0 and {MAX_DELAY_MS} ms"));
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum EngineError {
    Link(LinkError),
    Control(ControlError),
    /// A service could not bind its port.
    Service(String),
    Pcap(PathBuf, std::io::Error),
    Config(String),
    /// An af_xdp/af_packet interface has kernel IP addresses: (interface, addresses).
    KernelAddress(String, Vec<String>),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Link(e) => write!(f, "{e}"),
            EngineError::Control(e) => write!(f, "{e}"),
            EngineError::Service(s) => write!(f, "address in use: {s}"),
            EngineError::Pcap(p, e) => write!(f, "cannot write pcap {}: {e}", p.display()),
            EngineError::Config(s) => write!(f, "{s}"),
            EngineError::KernelAddress(iface, addrs) => write!(
                f,
                "{iface} has the kernel address{} {}: the kernel would answer on it too \
                 (duplicate ping replies, RSTs to the engine's connections); remove {} with \
                 `ip addr flush dev {iface}`",
                if addrs.len() > 1 { "es" } else { "" },
                addrs.join(", "),
                if addrs.len() > 1 { "them" } else { "it" },
            ),
        }
    }
}

impl EngineError {
    /// Distinct exit codes, documented in `outboard engine --help`.
    pub fn exit_code(&self) -> u8 {
        match self {
            EngineError::Config(_) | EngineError::Link(LinkError::BadSpec(_)) => 2,
            EngineError::Link(LinkError::NeedsPrivilege { .. }) => 10,
            EngineError::Link(LinkError::NoSuchInterface(_)) => 11,
            EngineError::Link(LinkError::XdpUnsupported(_)) => 12,
            EngineError::Link(LinkError::FabricTaken(_)) | EngineError::Control(ControlError::NameTaken(_)) => 13,
            EngineError::Service(_) | EngineError::Link(LinkError::Busy(_)) | EngineError::KernelAddress(..) => 14,
            EngineError::Pcap(..) | EngineError::Control(ControlError::Io(..)) | EngineError::Link(LinkError::Io { .. }) => 15,
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            EngineError::Link(LinkError::NeedsPrivilege { .. }) => {
                "af_xdp, af_packet and tap need root; fabric:NAME needs nothing"
            }
            EngineError::Link(LinkError::NoSuchInterface(_)) => {
                "check `ip link` (inside the right network namespace); `outboard lab up` makes one"
            }
            EngineError::Link(LinkError::XdpUnsupported(_)) => "use --link af_packet:IFACE on this interface",
            EngineError::Link(LinkError::FabricTaken(_)) => "use another fabric name, or stop engines on it",
            EngineError::Control(ControlError::NameTaken(_)) => "give this engine another --name",
            EngineError::Control(ControlError::Io(_, e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                "the run directory is not this user's: start the engine as root, or set OUTBOARD_RUN_DIR to a directory this user may write"
            }
            EngineError::Service(_) => "choose other ports with --services NAME:PORT",
            EngineError::Link(LinkError::Busy(_)) => {
                "one engine per interface: stop the other engine (or program), or give this one another interface"
            }
            EngineError::KernelAddress(..) => {
                "give the engine's interface no kernel address (`ip addr flush dev IFACE`), or pass --allow-kernel-address"
            }
            _ => "",
        }
    }
}

/// A started engine: its shards plus its control socket.
pub struct Engine {
    /// The engine's shards (one per core it is given), each owning its
    /// stack, link, apps and buffers.
    pub shards: Vec<Shard>,
    control: Option<(ControlServer, Vec<ControlInbox>)>,
    attach: Option<AttachServer>,
    cores: Option<Vec<usize>>,
}

fn random_secret() -> [u8; 16] {
    let mut s = [0u8; 16];
    if let Ok(b) = std::fs::read("/proc/sys/kernel/random/uuid") {
        // 36 hex-ish characters: fold them in.
        for (i, c) in b.iter().enumerate() {
            s[i % 16] ^= c.wrapping_mul(31).wrapping_add(i as u8);
        }
    }
    let t = crate::clock::now().as_nanos().to_le_bytes();
    for (i, b) in t.iter().enumerate() {
        s[i] ^= b;
    }
    s
}

/// af_xdp/af_packet: the interface must have no kernel IP address (the
/// kernel would answer ARP, pings and TCP beside us), unless
/// `allow_kernel_address` (then a warning). Not for tap (its kernel end is
/// the kernel's interface by design) or fabric. Here, in the engine's start,
/// not in the links: tests may open links on addressed interfaces directly.
fn check_kernel_address(set: &EngineSettings) -> Result<(), EngineError> {
    let iface = match &set.link {
        LinkSpec::AfXdp { iface, .. } | LinkSpec::AfPacket { iface } => iface,
        LinkSpec::Tap { .. } | LinkSpec::Fabric { .. } => return Ok(()),
    };
    let addrs = link::sys::if_addresses(iface).map_err(EngineError::Link)?;
    if addrs.is_empty() {
        return Ok(());
    }
    if !set.allow_kernel_address {
        return Err(EngineError::KernelAddress(iface.clone(), addrs));
    }
    log::event(
        Level::Warn,
        "kernel_address",
        &[
            ("iface", iface),
            ("addrs", &addrs.join(",")),
            ("note", &"allowed by --allow-kernel-address; the kernel answers on this interface too"),
        ],
    );
    Ok(())
}

/// The link options `set` gives.
fn link_options(set: &EngineSettings) -> LinkOptions {
    LinkOptions {
        mtu: set.mtu,
        addr: set.addr,
        fabric_faults: set.fabric_faults.clone(),
        offloads: set.offloads,
        ipv6: set.ipv6.is_some(),
    }
}

/// What an engine that upgrades a running one takes over from it (the
/// `upgrade` module's exchange): the link's socket, claim and ring
/// positions, the control and board listening sockets, the secret.
#[derive(Debug)]
pub struct Takeover {
    pub control: std::os::unix::net::UnixListener,
    pub board: Option<std::os::unix::net::UnixListener>,
    pub secret: [u8; 16],
    /// One per shard, in shard order.
    pub shards: Vec<ShardTakeover>,
    /// The attached applications (each shard's sessions and listener groups,
    /// in shard order) and their descriptors (each board's memfd, socket and
    /// wake eventfd, the doorbell), by name.
    pub boards: Vec<crate::host::takeover::BoardsRecord>,
    pub board_fds: Vec<(String, std::os::fd::OwnedFd)>,
}

/// What one shard of the running engine hands over.
#[derive(Debug)]
pub struct ShardTakeover {
    pub link: link::Adopted,
    /// Network-device mode: the kernel's TAP (its queue and claim).
    pub kernel: Option<link::Adopted>,
    /// Its TCP connections, with who holds each.
    pub tcp: Vec<crate::upgrade::TcpRecord>,
    /// Its resolved ARP entries.
    pub arp: Vec<(Ipv4Addr, [u8; 6])>,
}

/// What an engine needs privileges for, opened ahead of its start
/// (`Engine::prepare`): its links (AF_XDP needs CAP_NET_RAW, a TAP
/// CAP_NET_ADMIN) and its control socket's name (in the run directory).
/// Nothing runs: no thread, no frame read. It is plain memory and
/// descriptors, so it survives `fork` and is started by whichever process
/// holds it then (`Engine::start_prepared`): a daemon that drops to its
/// `user` and then forks (`memcached -d -u nobody`) serves on the links
/// its parent opened as root. Only one process may start it (the links'
/// rings and the UMEM are shared, not copied, across `fork`): the caller
/// sees to that.
pub struct Prepared {
    /// The settings' name and link, to check `start_prepared` is given the same.
    name: String,
    link: LinkSpec,
    links: Vec<Box<dyn link::Link>>,
    control: Option<std::os::unix::net::UnixListener>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prepared({} on {}, {} link(s))", self.name, self.link, self.links.len())
    }
}

impl Engine {
    pub fn start(set: &EngineSettings) -> Result<Engine, EngineError> {
        Engine::start_inner(set, None, None)
    }

    /// Opens what `set` needs privileges for, and starts nothing (see
    /// [`Prepared`]): the control socket first (a name clash must not
    /// disturb the link), then the links, checked as `start` checks them.
    pub fn prepare(set: &EngineSettings) -> Result<Prepared, EngineError> {
        set.validate().map_err(EngineError::Config)?;
        let control = if set.control { Some(ControlServer::bind_listener(&set.name).map_err(EngineError::Control)?) } else { None };
        let links = link::open_shards(&set.link, &link_options(set), set.shards).map_err(EngineError::Link)?;
        check_kernel_address(set)?;
        Ok(Prepared { name: set.name.clone(), link: set.link.clone(), links, control })
    }

    /// Starts an engine on what [`Engine::prepare`] opened with the same settings.
    pub fn start_prepared(set: &EngineSettings, p: Prepared) -> Result<Engine, EngineError> {
        if p.name != set.name || p.link != set.link || p.links.len() != set.shards || p.control.is_some() != set.control {
            return Err(EngineError::Config(format!("{p:?} was prepared with other settings than engine {} on {}", set.name, set.link)));
        }
        Engine::start_inner(set, None, Some(p))
    }

    /// Starts with what a running engine handed over (live upgrade): the
    /// settings must name the same link (af_packet, one shard) as the
    /// running engine's. Nothing here reads a frame: the old engine may
    /// still resume until the caller confirms.
    pub fn take_over(set: &EngineSettings, t: Takeover) -> Result<Engine, EngineError> {
        Engine::start_inner(set, Some(t), None)
    }

    fn start_inner(set: &EngineSettings, mut taken: Option<Takeover>, prepared: Option<Prepared>) -> Result<Engine, EngineError> {
        // Impossible settings are refused before anything is bound or opened.
        set.validate().map_err(EngineError::Config)?;
        let n = set.shards;
        let upgrading = taken.is_some();
        if let Some(t) = &taken {
            if t.shards.len() != n || !matches!(set.link, LinkSpec::AfPacket { .. } | LinkSpec::AfXdp { .. } | LinkSpec::Tap { .. }) || !set.control {
                return Err(EngineError::Config(format!(
                    "only an af_packet, af_xdp or tap engine with a control socket can be taken over, with one record per shard ({} records for {} shards on {})",
                    t.shards.len(),
                    n,
                    set.link
                )));
            }
        }
        let (mut prepared_links, prepared_control) = match prepared {
            Some(p) => (Some(p.links), p.control),
            None => (None, None),
        };
        // The control socket first: a name clash must not disturb the link.
        let control = match (taken.as_mut(), prepared_control) {
            (Some(t), _) => {
                let l = t.control.try_clone().map_err(|e| EngineError::Control(ControlError::Io(crate::control::socket_path(&set.name), e)))?;
                Some(ControlServer::with_listener(&set.name, l, n).map_err(EngineError::Control)?)
            }
            (None, Some(l)) => Some(ControlServer::with_listener(&set.name, l, n).map_err(EngineError::Control)?),
            (None, None) if set.control => Some(ControlServer::bind_shards(&set.name, n).map_err(EngineError::Control)?),
            (None, None) => None,
        };
        let opts = link_options(set);
        // Opening the link first gives "needs root" (10), "no such interface" (11) and "held by
        // another engine" (14) their own codes; the engine refuses a kernel address before its
        // first turn, so the link it opened never moved a frame.
        let mut boards_taken = None;
        let mut kernel_taken: Vec<Option<link::Adopted>> = Vec::new();
        let (links, board_taken, secret_taken, state_taken) = match taken {
            Some(t) => {
                boards_taken = Some((t.boards, t.board_fds));
                let mut links: Vec<Box<dyn link::Link>> = Vec::with_capacity(n);
                let mut state = Vec::with_capacity(n);
                for (i, s) in t.shards.into_iter().enumerate() {
                    // The same sockets: an engine of several shards keeps its
                    // fanout group (af_packet) or its queues (a multi-queue TAP).
                    let l: Box<dyn link::Link> = match &set.link {
                        LinkSpec::AfPacket { iface } => Box::new(link::af_packet::AfPacketLink::adopt(iface, &opts, s.link).map_err(EngineError::Link)?),
                        LinkSpec::Tap { name } => Box::new(link::tap::TapLink::adopt(name, &opts, s.link).map_err(EngineError::Link)?),
                        LinkSpec::AfXdp { iface, queue } => {
                            Box::new(link::af_xdp::AfXdpLink::adopt(iface, queue + i as u32, &opts, s.link).map_err(EngineError::Link)?)
                        }
                        _ => unreachable!("checked above"),
                    };
                    links.push(l);
                    state.push((s.tcp, s.arp));
                    kernel_taken.push(s.kernel);
                }
                (links, t.board, Some(t.secret), state)
            }
            None => match prepared_links.take() {
                Some(links) => (links, None, None, Vec::new()),
                None => (link::open_shards(&set.link, &opts, n).map_err(EngineError::Link)?, None, None, Vec::new()),
            },
        };
        check_kernel_address(set)?;
        let mtu = links[0].mtu();
        if mtu < limits::MIN_MTU {
            return Err(EngineError::Config(format!(
                "the link's MTU {mtu} is below {}: raise the interface's MTU (e.g. `outboard lab up --mtu 1500`)",
                limits::MIN_MTU
            )));
        }
        if set.ipv6.is_some() && mtu < outboard_wire::ipv6::MIN_MTU {
            return Err(EngineError::Config(format!(
                "the link's MTU {mtu} is below IPv6's minimum of {}: raise it or run without IPv6",
                outboard_wire::ipv6::MIN_MTU
            )));
        }
        let info = links[0].info();
        let now = crate::clock::now();
        // One secret for every shard: ISNs and SYN cookies agree whichever shard computes them.
        let secret = secret_taken.unwrap_or_else(random_secret);
        let steer = Steer::new(n);
        let mut mesh = if n > 1 {
            crate::steering::mesh(&steer)
                .map_err(|e| EngineError::Link(LinkError::io("the shards' forwarding rings", e)))?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        let mut shards = Vec::with_capacity(n);
        let mut messages: Option<crate::messages::SharedMessages> = None;
        for (i, link) in links.into_iter().enumerate() {
            let mut cfg = StackConfig::new(link.mac(), set.addr, set.prefix_len);
            cfg.gateway = set.gateway;
            cfg.mtu = link.mtu();
            cfg.tcp = set.tcp.clone();
            // Our MSS follows the link's MTU (RFC 9293 §3.7.1: MTU - 40).
            cfg.tcp.mss = u16::try_from(cfg.mtu.saturating_sub(40)).unwrap_or(u16::MAX);
            cfg.secret = secret;
            cfg.offloads = outboard_stack::LinkOffloads { tso_max: link.offloads().tso_max };
            cfg.shard_index = i as u16;
            cfg.shard_count = n as u16;
            // Shard 0 answers ARP; the others learn from the copies it gives them.
            cfg.arp_replies = i == 0;
            cfg.ipv6 = set.ipv6.clone();
            let mut stack = Stack::new(cfg, now);
            // The built-in services listen on every shard (connections spread by hash).
            let services = Services::start(&mut stack, &set.services).map_err(EngineError::Service)?;
            let pcap = match &set.pcap {
                Some(p) => {
                    let p = shard_pcap_path(p, i);
                    let w = if upgrading { PcapWriter::append(&p, now) } else { PcapWriter::create(&p, now) };
                    Some(w.map_err(|e| EngineError::Pcap(p.clone(), e))?)
                }
                None => None,
            };
            let mut shard = Shard::new(&set.name, i as u32, stack, link, pcap, set.memory_cap / n, now);
            shard.add_app(Box::new(services));
            if !set.tcp_handlers.is_empty() {
                let h = crate::tcp_handlers::TcpHandlers::start(&mut shard.stack, now, i as u32, &set.tcp_handlers).map_err(EngineError::Config)?;
                shard.add_app(Box::new(h));
            }
            shard.add_app(Box::new(Fetches::default()));
            if let (0, Some(m)) = (i, &set.messages) {
                // A new session each start: peers tell a restarted engine by it.
                let s = random_secret();
                let session = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                // Frames sized for this link's MTU (peers must use the same, or smaller).
                let mut m = m.clone();
                m.config.mtu = shard.stack.config().mtu;
                let mut svc = crate::messages::MessageService::start(&mut shard.stack, &m, session)
                    .map_err(|e| EngineError::Service(format!("message port {}: {e:?}", m.port)))?;
                for h in &m.handlers {
                    svc.load_handler(now, h, None).map_err(|e| EngineError::Config(e.why))?;
                }
                let svc = std::sync::Arc::new(std::sync::Mutex::new(svc));
                messages = Some(svc.clone());
                shard.add_app(Box::new(crate::messages::MessageApp(svc)));
            }
            if let Some(port) = mesh[i].take() {
                shard.join_mesh(port);
            }
            if let Some((name, policy)) = &set.kernel_tap {
                let k = match kernel_taken.get_mut(i).and_then(Option::take) {
                    Some(t) => crate::kernel::KernelPort::adopt(name, mtu, policy.clone(), t),
                    None => crate::kernel::KernelPort::open(name, info.mac, mtu, policy.clone()),
                }
                .map_err(EngineError::Link)?;
                if let LinkSpec::AfXdp { iface, .. } | LinkSpec::AfPacket { iface } = &set.link {
                    for why in crate::kernel::isolate_link_iface(iface) {
                        log::event(Level::Warn, "kernel_tap_isolation", &[("iface", iface), ("problem", &why)]);
                    }
                }
                log::event(Level::Info, "kernel_tap", &[("iface", name), ("mac", &crate::stat::mac_string(&info.mac)), ("mtu", &mtu)]);
                shard.set_kernel_port(k);
            }
            shards.push(shard);
        }
        // Connections whose bytes live in a board go to shard 0's host, once it exists.
        let mut board_tcp: Vec<Vec<crate::upgrade::TcpRecord>> = (0..n).map(|_| Vec::new()).collect();
        for (i, (shard, (tcp, arp))) in shards.iter_mut().zip(state_taken).enumerate() {
            shard.stack.arp_import(now, &arp);
            for r in tcp {
                if r.in_board() {
                    board_tcp[i].push(r);
                } else {
                    adopt_connection(shard, r, now)?;
                }
            }
        }
        log::event(
            Level::Info,
            "engine_started",
            &[
                ("name", &set.name),
                ("link", &format!("{}:{}", info.kind, info.name)),
                ("mode", &info.mode),
                ("mtu", &info.mtu),
                ("offloads", &if info.offloads.is_empty() { "none".to_string() } else { info.offloads.join(",") }),
                ("mac", &crate::stat::mac_string(&info.mac)),
                ("addr", &format!("{}/{}", set.addr, set.prefix_len)),
                ("gateway", &set.gateway.map_or("none".to_string(), |g| g.to_string())),
                (
                    "ipv6",
                    &set.ipv6.as_ref().map_or("off".to_string(), |c| {
                        c.addr.map_or("link-local".to_string(), |(a, p)| format!("{a}/{p}"))
                    }),
                ),
                (
                    "services",
                    &set.services.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","),
                ),
                ("shards", &n),
                (
                    "cores",
                    &set.cores.as_ref().map_or("any".to_string(), |c| {
                        c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
                    }),
                ),
                (
                    "control",
                    &control.as_ref().map_or("off".to_string(), |c| c.0.path().display().to_string()),
                ),
            ],
        );
        let attach = match set.boards {
            BoardAttach::Off => None,
            BoardAttach::Daemon if !set.control => None,
            mode => {
                // Every stream region holds one TCP buffer: the stack's window follows it.
                let buf = set.tcp.send_buffer.max(set.tcp.recv_buffer).div_ceil(4096) * 4096;
                // Every board has a ring pair on every shard: an application's
                // endpoints live on the shard of the thread that made them
                // (connections), or on every shard (listeners).
                let limits = BoardLimits {
                    max_board_bytes: set.max_board_bytes,
                    stream_buffer: u32::try_from(buf).map_err(|_| EngineError::Config("TCP buffers over 4 GiB".into()))?,
                    engine_addr: std::net::IpAddr::V4(set.addr),
                    prefix_len: set.prefix_len,
                    gateway: set.gateway.map(std::net::IpAddr::V4),
                    ipv6: set.ipv6.as_ref().map(|c| crate::host::Ipv6Facts { addr: c.addr, gateway: c.gateway }),
                    shards: n as u32,
                };
                let mut taken = crate::host::TakenAttach { listener: board_taken, ..Default::default() };
                if let Some((r, fds)) = boards_taken.as_mut() {
                    taken.boards_before = r.iter().flat_map(|b| &b.sessions).map(|s| s.id).max().unwrap_or(0);
                    if let Some(i) = fds.iter().position(|(n, _)| n == crate::host::takeover::DOORBELL_FD) {
                        taken.doorbell = Some(fds.remove(i).1);
                    }
                }
                let (server, inboxes) = AttachServer::start_with(&set.name, limits, mode == BoardAttach::Daemon, set.access.clone(), taken)
                    .map_err(|e| EngineError::Config(e.to_string()))?;
                if let (Some((c, _)), Some(fd)) = (control.as_ref(), server.listener_fd()) {
                    c.set_board_listener(fd);
                }
                for (i, (shard, inbox)) in shards.iter_mut().zip(inboxes).enumerate() {
                    let mut host = Host::new(i as u32, Some(inbox));
                    if i == 0 {
                        // Board mailboxes are served where the message service runs.
                        host.set_messages(messages.clone());
                    }
                    shard.add_app(Box::new(host));
                }
                if let Some((records, mut fds)) = boards_taken.take() {
                    let what = |e: String| EngineError::Config(format!("taking over the attached applications: {e}"));
                    let take_fd = |name: &str| fds.iter().position(|(n, _)| n == name).map(|i| fds.remove(i).1);
                    let all: Vec<&crate::upgrade::TcpRecord> = board_tcp.iter().flatten().collect();
                    let empty = crate::host::takeover::BoardsRecord::default();
                    let boards = crate::host::takeover::open_boards(records.first().unwrap_or(&empty), take_fd, &all).map_err(what)?;
                    if records.len() != n {
                        return Err(what(format!("{} shard records of applications for {n} shards", records.len())));
                    }
                    for (i, r) in records.into_iter().enumerate() {
                        let tcp = std::mem::take(&mut board_tcp[i]);
                        shards[i]
                            .with_app::<Host, _>(now, |h, cx| h.import(cx, r, &boards, tcp))
                            .ok_or_else(|| what("no board host".into()))?
                            .map_err(what)?;
                    }
                    // The listeners taken over are in the steering table
                    // before any shard reads a frame: a port published by
                    // one shard alone would steer every frame to it,
                    // another shard's connections included (reset there).
                    for s in shards.iter_mut() {
                        s.publish_ports();
                    }
                    for b in boards.values() {
                        let (sock, dead) = b.watch().map_err(|e| what(format!("watching a board's socket: {e}")))?;
                        server.watch(sock, dead);
                    }
                }
                Some(server)
            }
        };
        if let Some(r) = board_tcp.iter().flatten().next() {
            let t = r.conn.tuple();
            return Err(EngineError::Config(format!(
                "handed-over connection {} - {} lives in an application's board, and this engine takes no boards",
                t.local, t.remote
            )));
        }
        if boards_taken.as_ref().is_some_and(|(r, _)| r.iter().any(|b| !b.sessions.is_empty())) {
            return Err(EngineError::Config("the running engine has applications attached, and this engine takes no boards".into()));
        }
        Ok(Engine { shards, control, attach, cores: set.cores.clone() })
    }

    /// Whether this engine stopped because a new engine took it over (live upgrade).
    pub fn handed_over(&self) -> bool {
        self.shards.first().is_some_and(|s| s.handed_over())
    }

    /// Makes in-process attachments (embedded mode; daemon mode too).
    pub fn local_attacher(&self) -> Option<LocalAttacher> {
        self.attach.as_ref().map(|a| a.local_attacher())
    }

    /// Shard 0 (the one that serves control requests and runs fetches).
    pub fn shard(&self) -> &Shard {
        &self.shards[0]
    }
    pub fn shard_mut(&mut self) -> &mut Shard {
        &mut self.shards[0]
    }

    /// Starts a client connection on shard 0.
    pub fn fetch(&mut self, plan: FetchPlan) {
        self.fetch_on(0, plan, 0);
    }

    /// Starts a client connection on shard `shard` from `local_port` (0: an
    /// ephemeral port whose returning frames steer to that shard).
    pub fn fetch_on(&mut self, shard: usize, plan: FetchPlan, local_port: u16) {
        let now = crate::clock::now();
        self.shards[shard].with_app::<Fetches, _>(now, |f, cx| f.start(cx, plan, local_port));
    }

    /// Starts the message service's client job (`outboard msg`); false when
    /// the engine runs no message service.
    pub fn message_job(&mut self, plan: crate::messages::JobPlan) -> bool {
        let now = crate::clock::now();
        self.shards[0].with_app::<crate::messages::MessageApp, _>(now, |m, _| m.lock().start_job(now, plan)).is_some()
    }

    /// The client job's report so far.
    pub fn message_job_report(&self) -> Option<crate::messages::JobReport> {
        let now = crate::clock::now();
        self.shards[0].apps.get::<crate::messages::MessageApp>()?.lock().job_report(now)
    }

    /// The fetches started with `fetch`.
    pub fn fetches(&self) -> &[crate::client::Fetch] {
        self.fetches_on(0)
    }

    /// The fetches started on shard `shard`.
    pub fn fetches_on(&self, shard: usize) -> &[crate::client::Fetch] {
        self.shards[shard].apps.get::<Fetches>().map_or(&[], |f| f.list())
    }

    /// One turn of every shard in the caller's thread, then control requests
    /// (an inline engine: the application drives it). True if it did work.
    pub fn turn(&mut self) -> Result<bool, EngineError> {
        let now = crate::clock::now();
        let mut work = false;
        for s in &mut self.shards {
            work |= s.turn(now).map_err(EngineError::Link)?;
        }
        if let Some((_, inboxes)) = self.control.as_mut() {
            for (s, inbox) in self.shards.iter_mut().zip(inboxes) {
                s.serve_control(Some(inbox), now);
            }
        }
        Ok(work)
    }

    /// The boards' wake-ups are owed by each turn, not issued in it, until
    /// taken with [`Engine::take_owed_wakes`] (for an engine whose turns
    /// run holding a lock the woken threads need; `host::OwedWakes`).
    pub fn defer_wakes(&mut self) {
        self.hosts_mut().for_each(|h| h.defer_wakes());
    }

    /// Moves the wake-ups the turns owe into `into`, to issue with the engine let go.
    pub fn take_owed_wakes(&mut self, into: &mut crate::host::OwedWakes) {
        self.hosts_mut().for_each(|h| h.take_owed_wakes(into));
    }

    /// Each shard's board host (none where the engine takes no boards).
    fn hosts_mut(&mut self) -> impl Iterator<Item = &mut crate::host::Host> {
        self.shards.iter_mut().filter_map(|s| s.apps.get_mut::<crate::host::Host>())
    }

    /// Sleeps as an idle shard does (until a frame, a deadline, a command), at most `longest`.
    /// With several shards driven from one thread, only shard 0's link is
    /// slept on, so the sleep is cut to 1 ms.
    pub fn idle(&mut self, longest: std::time::Duration) -> Result<(), EngineError> {
        let now = crate::clock::now();
        let mut longest = outboard_time::Duration::from_nanos(longest.as_nanos().min(u128::from(u64::MAX)) as u64);
        if self.shards.len() > 1 {
            longest = longest.min(outboard_time::Duration::from_millis(1));
        }
        let control = self.control.as_ref().map(|c| &c.1[0]);
        self.shards[0].sleep(control, now, longest).map_err(EngineError::Link)
    }

    /// Tells every attached application the engine is going away.
    pub fn shutdown(&mut self) {
        let now = crate::clock::now();
        for s in &mut self.shards {
            s.apps.shutdown(&mut s.stack, now);
        }
    }

    /// Runs until `stop` is set or `done` (asked of shard 0) says so: shard 0
    /// in the calling thread, every other shard in a thread of its own, each
    /// pinned to its core when `cores` was given. A shard that fails (or
    /// panics) stops the others, and the engine returns its error: never a
    /// silent half-engine.
    pub fn run(
        &mut self,
        stop: &std::sync::atomic::AtomicBool,
        mut done: impl FnMut(&Shard) -> bool,
    ) -> Result<(), EngineError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let cores = self.cores.clone();
        let mut inboxes: Vec<Option<&mut ControlInbox>> = match self.control.as_mut() {
            Some((_, v)) => v.iter_mut().map(Some).collect(),
            None => (0..self.shards.len()).map(|_| None).collect(),
        };
        let pin = |i: usize| {
            if let Some(c) = cores.as_ref().and_then(|c| c.get(i)) {
                if let Err(e) = crate::cpu::pin_current_thread(*c) {
                    log::event(Level::Warn, "pin_failed", &[("shard", &i), ("core", c), ("error", &e)]);
                }
            }
        };
        let (first, rest) = self.shards.split_first_mut().expect("an engine has a shard");
        let (inbox0, other_inboxes) = inboxes.split_first_mut().expect("one inbox per shard");
        if rest.is_empty() {
            pin(0);
            let r = first.run(stop, inbox0.as_deref_mut(), done).map_err(EngineError::Link);
            if let Err(e) = &r {
                log::event(Level::Error, "engine_failed", &[("error", e)]);
            }
            if first.handed_over() {
                if let Some(a) = self.attach.as_mut() {
                    a.hand_over();
                }
            }
            self.close_control();
            return r;
        }
        // Set when any shard stops, for any reason: the others follow.
        let halt = AtomicBool::new(false);
        struct Halt<'a>(&'a AtomicBool);
        impl Drop for Halt<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let result = std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for (k, (shard, inbox)) in rest.iter_mut().zip(other_inboxes.iter_mut()).enumerate() {
                let i = k + 1;
                let (halt, pin) = (&halt, &pin);
                let h = std::thread::Builder::new()
                    .name(format!("outboard-shard{i}"))
                    .spawn_scoped(scope, move || {
                        let _halt = Halt(halt);
                        pin(i);
                        shard.reset_cpu_clock();
                        shard.run(stop, inbox.as_deref_mut(), |_| halt.load(Ordering::Relaxed))
                    })
                    .map_err(|e| EngineError::Link(LinkError::io("starting a shard thread", e)));
                match h {
                    Ok(h) => handles.push((i, h)),
                    Err(e) => {
                        halt.store(true, Ordering::SeqCst);
                        return Err(e);
                    }
                }
            }
            pin(0);
            let r0 = {
                let _halt = Halt(&halt);
                first.run(stop, inbox0.as_deref_mut(), |s| halt.load(Ordering::Relaxed) || done(s))
            };
            let mut result = r0.map_err(EngineError::Link);
            for (i, h) in handles {
                let r = match h.join() {
                    Ok(r) => r.map_err(|e| EngineError::Config(format!("shard {i} failed: {e}"))),
                    Err(panic) => {
                        let what = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "a panic".into());
                        Err(EngineError::Config(format!("shard {i} panicked: {what}")))
                    }
                };
                if result.is_ok() {
                    result = r;
                }
            }
            result
        });
        if let Err(e) = &result {
            log::event(Level::Error, "engine_failed", &[("error", e)]);
        }
        if self.handed_over() {
            if let Some(a) = self.attach.as_mut() {
                a.hand_over();
            }
        }
        self.close_control();
        result
    }

    /// The shards stopped: the control socket goes at once, so `stat` and
    /// `top` learn the engine is gone instead of waiting for an answer. The
    /// inboxes go first: a request waiting in one then fails at once, and
    /// the control thread (joined by the server's drop) is not held up.
    fn close_control(&mut self) {
        if let Some((server, inboxes)) = self.control.take() {
            drop(inboxes);
            drop(server);
        }
    }
}

/// Live upgrade: one of the running engine's connections, checked, in the
/// stack, and given back to its service.
fn adopt_connection(shard: &mut Shard, r: crate::upgrade::TcpRecord, now: outboard_time::Instant) -> Result<(), EngineError> {
    use crate::upgrade::Holder;
    let tuple = r.conn.tuple();
    let what = |e: String| EngineError::Config(format!("handed-over connection {} - {}: {e}", tuple.local, tuple.remote));
    r.conn.check_restored().map_err(what)?;
    let id = shard
        .stack
        .tcp_adopt(r.conn, r.holder != Holder::Released)
        .map_err(|e| what(format!("{e:?}")))?;
    if let Holder::Service(sr) = &r.holder {
        shard
            .with_app::<Services, _>(now, |s, cx| s.adopt(cx, id, sr))
            .ok_or_else(|| what("this engine runs no services".into()))?
            .map_err(what)?;
    }
    Ok(())
}

/// Where shard `i` writes its capture: FILE for shard 0, FILE.shardI (before
/// the extension: `cap.shard1.pcap`) for the others.
pub fn shard_pcap_path(p: &std::path::Path, i: usize) -> PathBuf {
    if i == 0 {
        return p.to_path_buf();
    }
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match p.extension() {
        Some(ext) => format!("{stem}.shard{i}.{}", ext.to_string_lossy()),
        None => format!("{stem}.shard{i}"),
    };
    p.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric() -> EngineSettings {
        EngineSettings::new("t", LinkSpec::Fabric { name: "t".into() }, Ipv4Addr::new(10, 0, 0, 1), 24)
    }

    #[test]
    fn impossible_settings_are_refused_before_anything_starts() {
        assert!(fabric().validate().is_ok());
        let mut s = fabric();
        s.memory_cap = 0;
        assert!(s.validate().unwrap_err().contains("one connection's send + receive buffers"));
        // Refused by start itself, as a config error (exit code 2), with no fabric opened.
        let e = Engine::start(&s).err().expect("refused");
        assert!(matches!(e, EngineError::Config(_)) && e.exit_code() == 2, "{e}");
        let mut s = fabric();
        s.memory_cap = s.tcp.send_buffer + s.tcp.recv_buffer;
        assert!(s.validate().is_ok());
        let mut s = fabric();
        s.tcp.send_buffer = 0;
        assert!(s.validate().unwrap_err().contains("send_buffer"));
        let mut s = fabric();
        s.mtu = Some(100);
        assert!(s.validate().unwrap_err().contains("mtu 100"));
        let mut s = fabric();
        s.fabric_faults = Some((FaultConfig { loss: 1.0, ..FaultConfig::default() }, 1));
        assert!(s.validate().unwrap_err().contains("at most 0.25"));
        let mut s = fabric();
        let delay = outboard_time::Duration::from_secs(5);
        s.fabric_faults = Some((FaultConfig { delay, ..FaultConfig::default() }, 1));
        assert!(s.validate().unwrap_err().contains("fabric delay"));
    }
}
