//! `outboard engine`, `outboard stat` and `outboard fetch`: the engine on a
//! real link (or the fabric) from the command line.
//!
//! Settings come from flags, or from a TOML file (`--config FILE`) whose
//! keys are the flags' long names with `_` for `-` (flags given on the
//! command line win):
//!
//! ```toml
//! name = "edge"
//! link = "af_packet:eng0"
//! addr = "10.77.0.2/24"
//! gateway = "10.77.0.1"
//! mtu = 1500
//! services = "echo,discard,chargen,source,sink"
//! pcap = "/tmp/edge.pcap"
//! memory_cap = "512MiB"
//! log_level = "info"
//! cc = "cubic"
//! offloads = "on"   # tap/af_packet: TSO/GSO + checksum offload (virtio-net headers)
//! allow_kernel_address = false   # af_xdp/af_packet: start even if the interface has a kernel IP
//! allow_user = ["memcache", "www-data"]   # who may attach besides root and the engine's user
//! allow_group = ["outboard"]
//! shards = 2        # protocol threads, each with its own stack and link queue
//! cores = "2,3"     # pin shard i to the i-th core listed (one per shard)
//! [fabric]          # only for link = "fabric:NAME": impairment of what this engine sends
//! loss = "1%"
//! reorder = "5%"
//! delay_ms = 1.0
//! seed = 7
//! ```

use crate::args::{self, in_config};
use clap::Args;
use outboard_board::access::{gid_of, uid_of, Access};
use outboard_engine::client::{FetchPlan, FetchState, Fetches};
use outboard_engine::engine::{Engine, EngineError, EngineSettings, DEFAULT_MEMORY_CAP};
use outboard_engine::link::LinkSpec;
use outboard_engine::log::{self, Level};
use outboard_engine::services::parse_services;
use outboard_engine::stat::{render, Snapshot};
use outboard_impair::FaultConfig;
use outboard_tcp::CcKind;
use outboard_time::Duration;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;

/// A list of CPUs. Its own name, so clap takes `--cores 2,3` as one value
/// (a field spelled `Option<Vec<_>>` would be a repeated flag of one CPU each).
pub type CoreList = Vec<usize>;

/// Settings shared by `engine` and `fetch`.
#[derive(Args, Debug, Clone, Default)]
pub struct EngineFlags {
    /// The link: af_xdp:IFACE[:QUEUE], af_packet:IFACE, tap:NAME or fabric:NAME.
    #[arg(long)]
    pub link: Option<String>,
    /// The engine's IPv4 address and prefix, e.g. 10.77.0.2/24; give it a second time with an
    /// IPv6 address (2001:db8::2/64) to run IPv6 beside IPv4 (dual stack).
    #[arg(long)]
    pub addr: Vec<String>,
    /// Next hop for destinations outside the prefix; give it twice for an IPv4 and an IPv6
    /// router (IPv6 also learns its router from router advertisements).
    #[arg(long)]
    pub gateway: Vec<IpAddr>,
    /// IPv6 on or off (default: on when an --addr is IPv6). On without an IPv6 --addr: the
    /// link-local address and addresses from router advertisements (SLAAC) only.
    #[arg(long, value_parser = parse_on_off)]
    pub ipv6: Option<bool>,
    /// IP MTU, 576 to 9000 (default: the interface's; the fabric and TAP use 1500).
    #[arg(long, value_parser = args::engine_mtu())]
    pub mtu: Option<usize>,
    /// Write every frame in and out to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Engine name: its control socket, for `outboard stat --name` (default "default").
    #[arg(long)]
    pub name: Option<String>,
    /// TOML file with the same settings (flags win).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Memory the stack may hold before new connections wait (e.g. 512MiB; 1 MiB to 1 TiB).
    #[arg(long, value_parser = args::memory_cap())]
    pub memory_cap: Option<u64>,
    /// error, warn, info or debug (also OUTBOARD_LOG).
    #[arg(long)]
    pub log_level: Option<Level>,
    /// Congestion controller: newreno or cubic.
    #[arg(long)]
    pub cc: Option<CcKind>,
    /// ECN (RFC 3168): passive answers peers that ask (Linux's default), on also asks, off.
    #[arg(long)]
    pub ecn: Option<outboard_tcp::EcnMode>,
    /// RFC 4821 black-hole detection, as Linux's tcp_mtu_probing: on (Linux's default 1)
    /// lowers the segment size after repeated timeouts of full-sized segments; off (0).
    #[arg(long)]
    pub mtu_probing: Option<outboard_tcp::MtuProbing>,
    /// TAP and AF_PACKET: TSO/GSO and checksum offload through virtio-net headers, on or off (default on).
    #[arg(long, value_parser = parse_on_off)]
    pub offloads: Option<bool>,
    /// af_xdp/af_packet: start even though the interface has a kernel IP address (a warning;
    /// the kernel then answers too). Without it that is exit 14.
    #[arg(long)]
    pub allow_kernel_address: bool,
    /// Users (names or uids) who may attach applications besides root and the engine's own
    /// user; repeat or separate with commas. Programs that drop privileges (`memcached -u
    /// nobody`, nginx's workers) attach as the user they drop to.
    #[arg(long, value_delimiter = ',')]
    pub allow_user: Vec<String>,
    /// Groups (names or gids) whose members may attach applications; repeat or separate with commas.
    #[arg(long, value_delimiter = ',')]
    pub allow_group: Vec<String>,
    /// Protocol shards: threads that each own a stack, a queue of the link (AF_XDP queue,
    /// AF_PACKET fanout socket, fabric port) and their connections (1 to 64; default 1).
    #[arg(long, value_parser = args::shards())]
    pub shards: Option<usize>,
    /// Pin shard i to the i-th CPU of this list (e.g. 2,3 or 2-5; one per shard).
    #[arg(long, value_parser = args::cores())]
    pub cores: Option<CoreList>,
    /// Network-device mode: create TAP interface NAME for the host kernel, which gets every
    /// frame the engine does not take (ports it has nothing on, IPv6, …) and sends through
    /// the engine's link. Give NAME the engine's address (`ip addr add ADDR/N dev NAME`).
    #[arg(long, value_name = "NAME")]
    pub kernel_tap: Option<String>,
    /// Serve the native message protocols on UDP PORT (default 7373 when PORT is left out),
    /// with the built-in mailboxes `echo` (1) and `sink` (2). See docs/MESSAGES.md.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "7373",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub messages: Option<u16>,
    /// Run a WebAssembly handler on the engine: as the reader of a message mailbox (needs
    /// --messages) or serving a TCP port:
    /// NAME=FILE.wasm:mailbox=M|tcp=PORT[:memory=SIZE][:deadline_ms=N][:max_faults=N][:kv=SIZE]
    /// (M a number or a name; defaults 16MiB, 10 ms, 8, 4MiB). Repeat for more. docs/HANDLERS.md.
    #[arg(long = "handler", value_name = "SPEC", value_parser = crate::handler_spec::parse)]
    pub handlers: Vec<crate::handler_spec::HandlerArg>,
    /// With --kernel-tap: local ports whose traffic always goes to the kernel
    /// (e.g. tcp:22,udp:53,tcp:8000-8100).
    #[arg(long, value_name = "LIST")]
    pub kernel_ports: Option<String>,
    /// With --kernel-tap: the kernel answers pings (ICMP echo), not the engine.
    #[arg(long)]
    pub kernel_echo: bool,
    /// Fabric only: probability a frame this engine sends is lost (0.01 or 1%; 0% to 25%,
    /// with --corrupt: at most 25% together).
    #[arg(long, value_parser = args::loss())]
    pub loss: Option<f64>,
    /// Fabric only: probability a frame is delivered twice.
    #[arg(long, value_parser = args::probability())]
    pub duplicate: Option<f64>,
    /// Fabric only: probability a frame is held back and overtaken.
    #[arg(long, value_parser = args::probability())]
    pub reorder: Option<f64>,
    /// Fabric only: probability one bit of a frame is flipped (0% to 25%).
    #[arg(long, value_parser = args::loss())]
    pub corrupt: Option<f64>,
    /// Fabric only: one-way delay in milliseconds (0 to 1000).
    #[arg(long, value_parser = args::delay_ms())]
    pub delay_ms: Option<f64>,
    /// Fabric only: random extra delay up to this many milliseconds (0 to 1000).
    #[arg(long, value_parser = args::delay_ms())]
    pub jitter_ms: Option<f64>,
    /// Fabric only: seed of the impairment (the same seed replays the same decisions).
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct EngineArgs {
    #[command(flatten)]
    pub flags: EngineFlags,
    /// Built-in services: a comma list of echo, discard, chargen, source, sink
    /// (each NAME or NAME:PORT), `all` or `none`. Default: all (ports 7, 9, 19, 5002, 5001).
    #[arg(long)]
    pub services: Option<String>,
    /// Stop after this many seconds, 0.001 to a year (default: run until SIGINT/SIGTERM).
    #[arg(long, value_parser = args::run_seconds())]
    pub run_for_s: Option<f64>,
    /// Live upgrade: take over from the running engine NAME (its link, sockets and settings)
    /// and serve in its place; it exits once this one is ready. Give no other settings: they
    /// come from the running engine. Exit 16 when the upgrade does not happen (refused or
    /// failed before the hand-over completed): the running engine then goes on serving.
    #[arg(long, value_name = "NAME")]
    pub upgrade: Option<String>,
    /// Validate the settings (this TOML file, with any flags given) and exit: 0 and a summary
    /// when the engine would start with them, 2 and the reason when not. Opens nothing.
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,
    /// Serve every stat counter in the Prometheus text format at http://ADDR:PORT/metrics
    /// (e.g. 127.0.0.1:9464; the kernel's network, not the engine's).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

#[derive(Args, Debug)]
pub struct StatArgs {
    /// Name of the engine (its --name).
    #[arg(long, default_value = "default")]
    pub name: String,
    /// Print the snapshot as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    #[command(flatten)]
    pub flags: EngineFlags,
    /// The server to connect to, IP:PORT or [IPV6]:PORT (IPv6 needs an IPv6 --addr or --ipv6 on).
    #[arg(long)]
    pub connect: std::net::SocketAddr,
    /// Bytes to send (a seeded stream), then half-close.
    #[arg(long, default_value = "0", value_parser = args::parse_size)]
    pub send: u64,
    /// Stop reading after this many bytes, at least 1 (default: read until the server closes).
    #[arg(long, value_parser = args::nonzero_size())]
    pub recv_limit: Option<u64>,
    /// The server echoes: succeed only if what came back is byte-identical to what was sent.
    #[arg(long)]
    pub expect_echo: bool,
    /// Seed of the byte stream sent.
    #[arg(long, default_value_t = 1)]
    pub stream_seed: u64,
    /// Give up after this many seconds (0.001 to a year).
    #[arg(long, default_value = "120", value_parser = args::run_seconds())]
    pub timeout_s: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The TOML form (`--config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    name: Option<String>,
    link: Option<String>,
    addr: Option<String>,
    gateway: Option<Ipv4Addr>,
    addr6: Option<String>,
    gateway6: Option<Ipv6Addr>,
    ipv6: Option<bool>,
    mtu: Option<toml::Value>,
    pcap: Option<PathBuf>,
    services: Option<String>,
    memory_cap: Option<String>,
    log_level: Option<String>,
    cc: Option<String>,
    ecn: Option<String>,
    mtu_probing: Option<String>,
    offloads: Option<String>,
    allow_kernel_address: Option<bool>,
    allow_user: Option<Vec<String>>,
    allow_group: Option<Vec<String>>,
    shards: Option<toml::Value>,
    cores: Option<toml::Value>,
    kernel_tap: Option<String>,
    messages: Option<u16>,
    handler: Option<Vec<crate::handler_spec::HandlerFile>>,
    kernel_ports: Option<String>,
    kernel_echo: Option<bool>,
    fabric: Option<FabricFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FabricFile {
    loss: Option<String>,
    duplicate: Option<String>,
    reorder: Option<String>,
    corrupt: Option<String>,
    delay_ms: Option<toml::Value>,
    jitter_ms: Option<toml::Value>,
    seed: Option<u64>,
}

/// A TOML value as the text a flag would have carried (`1500`, `"1%"`, `0.5`).
fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A setting from the flag or, failing that, from the file's `key`, through the flag's parser.
fn flag_or_file<T>(
    flag: Option<T>,
    file: Option<String>,
    key: &str,
    parser: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match (flag, file) {
        (Some(v), _) => Ok(Some(v)),
        (None, Some(raw)) => in_config(key, &raw, parser).map(Some),
        (None, None) => Ok(None),
    }
}

/// Exit code for a bad command line or config.
const USAGE: u8 = 2;

pub(crate) fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("outboard: {msg}");
    ExitCode::from(USAGE)
}

/// `on` or `off` (also true/false, yes/no, 1/0).
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("{s:?}: use on or off")),
    }
}

pub(crate) fn parse_addr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    outboard_engine::engine::parse_ipv4_cidr(s).map_err(|e| format!("--addr {s:?}: {e}"))
}

fn parse_addr6(s: &str) -> Result<(Ipv6Addr, u8), String> {
    let (a, p) = s
        .split_once('/')
        .ok_or_else(|| format!("--addr {s:?}: expected ADDR/N, e.g. 2001:db8::2/64"))?;
    let addr: Ipv6Addr = a.parse().map_err(|_| format!("--addr {s:?}: {a:?} is not an IPv6 address"))?;
    let prefix: u8 = p
        .parse()
        .ok()
        .filter(|p| (1..=128).contains(p))
        .ok_or_else(|| format!("--addr {s:?}: prefix length must be 1..128"))?;
    if addr.is_unspecified() || addr.is_multicast() || addr.is_loopback() {
        return Err(format!("--addr {s:?}: not a host address"));
    }
    if addr.segments()[0] & 0xffc0 == 0xfe80 {
        return Err(format!("--addr {s:?}: the link-local address is formed from the MAC; give a global one"));
    }
    Ok((addr, prefix))
}

/// The addresses and gateways of `--addr`/`--gateway` (flags over the
/// file's `addr`/`addr6`/`gateway`/`gateway6`): one IPv4 address (required)
/// and at most one IPv6 address, at most one gateway of each family.
#[allow(clippy::type_complexity)]
fn addresses(
    f: &EngineFlags,
    file: &ConfigFile,
) -> Result<((Ipv4Addr, u8), Option<(Ipv6Addr, u8)>, Option<Ipv4Addr>, Option<Ipv6Addr>), String> {
    let addrs: Vec<String> = if f.addr.is_empty() {
        file.addr.iter().chain(file.addr6.iter()).cloned().collect()
    } else {
        f.addr.clone()
    };
    let (mut v4, mut v6) = (None, None);
    for a in &addrs {
        if a.contains(':') {
            if v6.replace(parse_addr6(a)?).is_some() {
                return Err("--addr: give at most one IPv6 address".into());
            }
        } else if v4.replace(parse_addr(a)?).is_some() {
            return Err("--addr: give one IPv4 address (and at most one IPv6 address beside it)".into());
        }
    }
    let v4 = v4.ok_or("--addr A.B.C.D/N is required (and an IPv6 ADDR/N may follow in a second --addr)")?;
    let gateways: Vec<IpAddr> = if f.gateway.is_empty() {
        file.gateway.map(IpAddr::V4).into_iter().chain(file.gateway6.map(IpAddr::V6)).collect()
    } else {
        f.gateway.clone()
    };
    let (mut g4, mut g6) = (None, None);
    for g in gateways {
        let dup = match g {
            IpAddr::V4(g) => g4.replace(g).is_some(),
            IpAddr::V6(g) => g6.replace(g).is_some(),
        };
        if dup {
            return Err("--gateway: give at most one of each family".into());
        }
    }
    Ok((v4, v6, g4, g6))
}

/// Merges flags over the config file into engine settings.
pub(crate) fn settings(f: &EngineFlags, services: Option<&str>, default_services: &str) -> Result<EngineSettings, String> {
    let file: ConfigFile = match &f.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("--config {}: {e}", p.display()))?;
            toml::from_str(&text).map_err(|e| format!("--config {}: {e}", p.display()))?
        }
        None => ConfigFile::default(),
    };
    let ((addr, prefix), addr6, gateway, gateway6) = addresses(f, &file)?;
    let link_s = f
        .link
        .clone()
        .or(file.link)
        .ok_or("--link is required (af_xdp:IFACE[:QUEUE], af_packet:IFACE, tap:NAME or fabric:NAME)")?;
    let link: LinkSpec = link_s.parse().map_err(|e| format!("--link: {e}"))?;
    let name = f.name.clone().or(file.name).unwrap_or_else(|| "default".into());
    if name.is_empty()
        || name.len() > 64
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(format!("--name {name:?}: use 1 to 64 of A-Z a-z 0-9 - _ ."));
    }
    let mut set = EngineSettings::new(&name, link, addr, prefix);
    set.gateway = gateway;
    if let Some(g) = set.gateway {
        let mask = u32::MAX << (32 - u32::from(prefix));
        if u32::from(g) & mask != u32::from(addr) & mask {
            return Err(format!("--gateway {g} is not inside {addr}/{prefix}"));
        }
    }
    let ipv6_on = f.ipv6.or(file.ipv6).unwrap_or(addr6.is_some());
    if addr6.is_some() && !ipv6_on {
        return Err("--ipv6 off with an IPv6 --addr: drop one of them".into());
    }
    if gateway6.is_some() && !ipv6_on {
        return Err("--gateway with an IPv6 router needs IPv6 (an IPv6 --addr or --ipv6 on)".into());
    }
    if let (Some(g), Some((a, p))) = (gateway6, addr6) {
        let link_local = g.segments()[0] & 0xffc0 == 0xfe80;
        let mask = if p == 0 { 0 } else { u128::MAX << (128 - u32::from(p)) };
        if !link_local && u128::from(g) & mask != u128::from(a) & mask {
            return Err(format!("--gateway {g} is neither link-local nor inside {a}/{p}"));
        }
    }
    set.ipv6 = ipv6_on.then(|| outboard_stack::Ipv6Config { addr: addr6, gateway: gateway6, ..Default::default() });
    set.mtu = flag_or_file(f.mtu, file.mtu.as_ref().map(toml_text), "mtu", args::engine_mtu())?;
    set.pcap = f.pcap.clone().or(file.pcap);
    let svc = services.map(str::to_string).or(file.services).unwrap_or_else(|| default_services.into());
    set.services = parse_services(&svc).map_err(|e| format!("--services: {e}"))?;
    set.memory_cap = flag_or_file(f.memory_cap, file.memory_cap, "memory_cap", args::memory_cap())?
        .map_or(DEFAULT_MEMORY_CAP, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let level = match (f.log_level, file.log_level, std::env::var("OUTBOARD_LOG").ok()) {
        (Some(l), _, _) => l,
        (None, Some(s), _) | (None, None, Some(s)) => s.parse()?,
        (None, None, None) => Level::Info,
    };
    log::set_level(level);
    let cc = match (f.cc, file.cc) {
        (Some(c), _) => Some(c),
        (None, Some(s)) => Some(s.parse::<CcKind>().map_err(|e| format!("cc: {e:?}"))?),
        (None, None) => None,
    };
    if let Some(c) = cc {
        set.tcp.cc = c;
    }
    match (f.ecn, file.ecn) {
        (Some(e), _) => set.tcp.ecn = e,
        (None, Some(s)) => set.tcp.ecn = s.parse().map_err(|e| format!("ecn {e}"))?,
        (None, None) => {}
    }
    match (f.mtu_probing, file.mtu_probing) {
        (Some(m), _) => set.tcp.mtu_probing = m,
        (None, Some(s)) => set.tcp.mtu_probing = s.parse().map_err(|e| format!("mtu_probing {e}"))?,
        (None, None) => {}
    }
    set.offloads = match (f.offloads, file.offloads) {
        (Some(o), _) => o,
        (None, Some(s)) => parse_on_off(&s).map_err(|e| format!("offloads: {e}"))?,
        (None, None) => true,
    };
    set.allow_kernel_address = f.allow_kernel_address || file.allow_kernel_address.unwrap_or(false);
    set.access = access(f, file.allow_user, file.allow_group)?;
    set.shards = flag_or_file(f.shards, file.shards.as_ref().map(toml_text), "shards", args::shards())?.unwrap_or(1);
    let cores_text = file.cores.as_ref().map(|v| match v {
        toml::Value::Array(a) => a.iter().map(toml_text).collect::<Vec<_>>().join(","),
        other => toml_text(other),
    });
    set.cores = flag_or_file(f.cores.clone(), cores_text, "cores", args::cores())?;
    let kernel_ports = f.kernel_ports.clone().or(file.kernel_ports);
    let kernel_echo = f.kernel_echo || file.kernel_echo.unwrap_or(false);
    set.kernel_tap = match f.kernel_tap.clone().or(file.kernel_tap) {
        Some(name) => {
            outboard_engine::link::LinkSpec::Tap { name: name.clone() }
                .to_string()
                .parse::<LinkSpec>()
                .map_err(|e| format!("kernel_tap {name:?}: {e}"))?;
            let ports = outboard_engine::kernel::KernelPolicy::parse_ports(kernel_ports.as_deref().unwrap_or(""))
                .map_err(|e| format!("kernel_ports {e}"))?;
            Some((name, outboard_engine::kernel::KernelPolicy { ports, echo_to_kernel: kernel_echo }))
        }
        None if kernel_ports.is_some() || kernel_echo => {
            return Err("kernel_ports and kernel_echo need kernel_tap (--kernel-tap NAME)".into())
        }
        None => None,
    };
    set.messages = match f.messages.or(file.messages) {
        Some(0) => return Err("messages: the port is 1 to 65535".into()),
        Some(port) => Some(outboard_engine::messages::MessageSettings::new(port)),
        None => None,
    };
    // Handlers: the file's, then the flags' (a flag's handler replaces the file's of the same name).
    let config_dir = f.config.as_deref().and_then(|p| p.parent()).unwrap_or(std::path::Path::new("."));
    let mut handlers = Vec::new();
    for h in file.handler.iter().flatten() {
        handlers.push(h.resolve(config_dir)?);
    }
    for h in &f.handlers {
        handlers.retain(|o: &crate::handler_spec::HandlerArg| o.name != h.name);
        handlers.push(h.clone());
    }
    for h in &handlers {
        match h.read()? {
            Ok(mailbox) => match set.messages.as_mut() {
                Some(m) => m.handlers.push(mailbox),
                None => return Err(format!("handler {}: mailbox handlers run on the message service: give --messages (TOML messages = PORT) too", h.name)),
            },
            Err(tcp) => set.tcp_handlers.push(tcp),
        }
    }
    // Fabric impairment: flags over [fabric] in the file.
    let ff = file.fabric.unwrap_or_default();
    let ms = |v: &Option<toml::Value>| v.as_ref().map(toml_text);
    let fc = FaultConfig {
        loss: flag_or_file(f.loss, ff.loss, "fabric.loss", args::loss())?.unwrap_or(0.0),
        duplicate: flag_or_file(f.duplicate, ff.duplicate, "fabric.duplicate", args::probability())?.unwrap_or(0.0),
        reorder: flag_or_file(f.reorder, ff.reorder, "fabric.reorder", args::probability())?.unwrap_or(0.0),
        corrupt: flag_or_file(f.corrupt, ff.corrupt, "fabric.corrupt", args::loss())?.unwrap_or(0.0),
        delay: Duration::from_secs_f64(
            flag_or_file(f.delay_ms, ms(&ff.delay_ms), "fabric.delay_ms", args::delay_ms())?.unwrap_or(0.0) / 1000.0,
        ),
        jitter: Duration::from_secs_f64(
            flag_or_file(f.jitter_ms, ms(&ff.jitter_ms), "fabric.jitter_ms", args::delay_ms())?.unwrap_or(0.0) / 1000.0,
        ),
        ..FaultConfig::default()
    };
    args::check_loss(fc.loss, fc.corrupt)?;
    let impaired = fc != FaultConfig::default();
    if impaired && !matches!(set.link, LinkSpec::Fabric { .. }) {
        return Err("--loss/--duplicate/--reorder/--corrupt/--delay-ms/--jitter-ms apply to fabric links only; impair real links with `outboard lab up --loss ...`".into());
    }
    if matches!(set.link, LinkSpec::Fabric { .. }) {
        set.fabric_faults = Some((fc, f.seed.or(ff.seed).unwrap_or(1)));
    }
    Ok(set)
}

/// `--allow-user`/`--allow-group` (flags over the file's lists), resolved to
/// ids now: an unknown name is a bad flag, not a surprise at attach time.
fn access(f: &EngineFlags, file_users: Option<Vec<String>>, file_groups: Option<Vec<String>>) -> Result<Access, String> {
    let pick = |flag: &Vec<String>, file: Option<Vec<String>>| if flag.is_empty() { file.unwrap_or_default() } else { flag.clone() };
    let users = pick(&f.allow_user, file_users)
        .iter()
        .map(|u| uid_of(u.trim()).ok_or_else(|| format!("--allow-user {u:?}: no such user (give a name from /etc/passwd or a uid)")))
        .collect::<Result<Vec<u32>, String>>()?;
    let groups = pick(&f.allow_group, file_groups)
        .iter()
        .map(|g| gid_of(g.trim()).ok_or_else(|| format!("--allow-group {g:?}: no such group (give a name from /etc/group or a gid)")))
        .collect::<Result<Vec<u32>, String>>()?;
    Ok(Access { users, groups })
}

pub(crate) fn fail(e: &EngineError) -> ExitCode {
    let hint = e.hint();
    if hint.is_empty() {
        eprintln!("outboard: {e}");
    } else {
        eprintln!("outboard: {e}\n  hint: {hint}");
    }
    ExitCode::from(e.exit_code())
}

pub fn engine(a: &EngineArgs) -> ExitCode {
    if let Some(file) = &a.check_config {
        return check_config(a, file);
    }
    if let Some(name) = &a.upgrade {
        return upgrade(a, name);
    }
    let set = match settings(&a.flags, a.services.as_deref(), "all") {
        Ok(s) => s,
        Err(m) => return usage(m),
    };
    // The metrics port first: a taken port is found before the engine takes its link.
    if let Some(addr) = a.metrics {
        match crate::metrics::serve(addr, set.name.clone()) {
            Ok(bound) => log::event(Level::Info, "metrics_listening", &[("addr", &bound)]),
            Err(e) => {
                eprintln!("outboard engine: --metrics {addr}: {e}");
                return ExitCode::from(if e.kind() == std::io::ErrorKind::AddrInUse { 14 } else { 15 });
            }
        }
    }
    let stop = outboard_engine::signals::stop_on_signals();
    let engine = match Engine::start(&set) {
        Ok(e) => e,
        Err(e) => return fail(&e),
    };
    // What an engine that upgrades this one takes its settings from.
    outboard_engine::upgrade::set_command_line(std::env::args().collect());
    serve(engine, &set, a, stop)
}

/// Exit code of `--upgrade` when the upgrade did not happen (the running engine serves on).
pub const UPGRADE_FAILED: u8 = 16;

/// The old engine's command line, parsed as this binary parses `outboard engine`.
#[derive(clap::Parser, Debug)]
#[command(name = "outboard")]
struct OldCommandLine {
    #[command(subcommand)]
    command: OldCommand,
}

#[derive(clap::Subcommand, Debug)]
enum OldCommand {
    Engine(EngineArgs),
}

/// `outboard engine --upgrade NAME`: takes over from the running engine
/// NAME (`outboard_engine::upgrade` has the exchange), then serves as
/// `engine` does with the running engine's settings.
fn upgrade(a: &EngineArgs, name: &str) -> ExitCode {
    use clap::Parser;
    let f = &a.flags;
    if let Some(other) = other_than_upgrade(std::env::args().skip_while(|a| a != "engine").skip(1)) {
        return usage(format!(
            "--upgrade NAME takes the running engine's settings: {other} cannot be given with it (only --log-level)"
        ));
    }
    if let Some(l) = f.log_level {
        log::set_level(l);
    }
    let failed = |why: &str| {
        eprintln!("outboard engine --upgrade {name}: {why}\n  hint: the running engine goes on serving");
        ExitCode::from(UPGRADE_FAILED)
    };
    let asked = outboard_engine::clock::now();
    // A connection in its handshake is not handed over: ask again (the
    // running engine resumes between two asks) for up to 3 s.
    let mut inc = loop {
        match outboard_engine::upgrade::request(name) {
            Ok(i) => break i,
            Err(e) if e.starts_with("busy:") && outboard_engine::clock::now() < asked + Duration::from_secs(3) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return failed(&e),
        }
    };
    let abort = |inc: &outboard_engine::upgrade::Incoming, why: String| {
        inc.abort(&why);
        failed(&why)
    };
    let old = match OldCommandLine::try_parse_from(&inc.record().args) {
        Ok(OldCommandLine { command: OldCommand::Engine(e) }) => e,
        Err(e) => return abort(&inc, format!("the running engine's command line does not parse here: {}", e.to_string().trim())),
    };
    let set = match settings(&old.flags, old.services.as_deref(), "all") {
        Ok(s) => s,
        Err(m) => return abort(&inc, format!("the running engine's settings: {m}")),
    };
    if set.name != name {
        return abort(&inc, format!("the engine answering as {name:?} is named {:?}", set.name));
    }
    let (Some(control), board) = (inc.take_fd(None, "control socket"), inc.take_fd(None, "board socket")) else {
        return abort(&inc, "the running engine did not send its control socket".into());
    };
    let mut shards = Vec::new();
    for i in 0..inc.records.len() {
        let (Some(socket), Some(claim)) = (inc.take_fd(Some(i), "link socket"), inc.take_fd(Some(i), "link claim")) else {
            return abort(&inc, format!("the running engine did not send shard {i}'s link socket and claim"));
        };
        // Network-device mode: the kernel's TAP.
        let kernel = match (inc.take_fd(Some(i), "kernel tap socket"), inc.take_fd(Some(i), "kernel tap claim")) {
            (Some(socket), Some(claim)) => Some(outboard_engine::link::Adopted {
                socket,
                claim,
                rx_idx: 0,
                tx_idx: 0,
                tx_unsent: 0,
                xdp: None,
                more: Vec::new(),
            }),
            _ => None,
        };
        // The link's other descriptors (af_xdp: UMEM, XSK map, program, BPF link).
        let more = inc.shard_fds.get_mut(i).map_or_else(Vec::new, |f| {
            let (link, rest): (Vec<_>, Vec<_>) = std::mem::take(f).into_iter().partition(|(n, _)| n.starts_with("link "));
            *f = rest;
            link
        });
        let r = &mut inc.records[i];
        shards.push(outboard_engine::engine::ShardTakeover {
            link: outboard_engine::link::Adopted {
                socket,
                claim,
                rx_idx: r.link.rx_idx,
                tx_idx: r.link.tx_idx,
                tx_unsent: r.link.tx_unsent,
                xdp: r.link.xdp.take(),
                more,
            },
            kernel,
            tcp: std::mem::take(&mut r.tcp),
            arp: std::mem::take(&mut r.arp),
        });
    }
    let handed: usize = shards.iter().map(|s| s.tcp.len()).sum();
    // The attached applications: every shard's sessions, and the boards'
    // descriptors (shard 0's record names them).
    let boards: Vec<_> = inc.records.iter_mut().map(|r| std::mem::take(&mut r.boards)).collect();
    let board_fds: Vec<(String, std::os::fd::OwnedFd)> = inc
        .shard_fds
        .get_mut(0)
        .map(|f| {
            let (b, rest): (Vec<_>, Vec<_>) = std::mem::take(f).into_iter().partition(|(n, _)| n.starts_with("board "));
            *f = rest;
            b
        })
        .unwrap_or_default();
    let applications = boards.first().map_or(0, |b| b.sessions.len());
    let taken = outboard_engine::engine::Takeover {
        control: std::os::unix::net::UnixListener::from(control),
        board: board.map(std::os::unix::net::UnixListener::from),
        secret: inc.record().secret,
        shards,
        boards,
        board_fds,
    };
    let stop = outboard_engine::signals::stop_on_signals();
    let mut engine = match Engine::take_over(&set, taken) {
        Ok(e) => e,
        Err(e) => return abort(&inc, e.to_string()),
    };
    let (tcp, udp) = engine.shard().stack.bound_ports();
    let r0 = inc.record();
    if (tcp.as_slice(), udp.as_slice()) != (r0.tcp_ports.as_slice(), r0.udp_ports.as_slice()) {
        let why = format!(
            "this engine would listen on TCP {tcp:?} UDP {udp:?}, the running one on TCP {:?} UDP {:?}",
            r0.tcp_ports, r0.udp_ports
        );
        return abort(&inc, why);
    }
    if std::env::var("OUTBOARD_UPGRADE_FAIL").as_deref() == Ok("before-confirm") {
        // For the rollback test: the new engine dies (as a crash would) with everything built.
        std::process::abort();
    }
    if let Err(e) = inc.confirm() {
        // No `ok`: the old engine took the confirmation (and is going) or
        // not (and serves on). Its pid says which; never two engines.
        let gone = pid_gone_within(inc.record().pid, std::time::Duration::from_secs(2));
        if !gone {
            return failed(&e);
        }
        log::event(Level::Warn, "upgrade_unconfirmed", &[("error", &e), ("note", &"the old engine has exited: going on")]);
    }
    outboard_engine::upgrade::set_command_line(inc.record().args.clone());
    let first = engine.turn();
    let now = outboard_engine::clock::now();
    // From the first shard to stop.
    let quiesced = inc.records.iter().map(|r| r.quiesced_ns).min().unwrap_or(0);
    let blackout = now.as_nanos().saturating_sub(quiesced) as f64 / 1e6;
    let total = now.saturating_duration_since(asked).as_nanos() as f64 / 1e6;
    log::event(
        Level::Info,
        "engine_upgraded",
        &[
            ("name", &set.name),
            ("old_pid", &inc.record().pid),
            ("pid", &std::process::id()),
            ("record_version", &inc.record().version),
            ("shards", &inc.records.len()),
            ("connections", &handed),
            ("applications", &applications),
            ("pause_ms", &format!("{blackout:.2}")),
            ("upgrade_ms", &format!("{total:.2}")),
        ],
    );
    if let Err(e) = first {
        return fail(&e);
    }
    // The old engine's metrics port is free once it has exited.
    if let Some(addr) = old.metrics {
        let until = outboard_engine::clock::now() + Duration::from_secs(3);
        loop {
            match crate::metrics::serve(addr, set.name.clone()) {
                Ok(bound) => {
                    log::event(Level::Info, "metrics_listening", &[("addr", &bound)]);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && outboard_engine::clock::now() < until => {
                    let _ = engine.turn();
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => {
                    log::event(Level::Warn, "metrics_failed", &[("addr", &addr), ("error", &e)]);
                    break;
                }
            }
        }
    }
    serve(engine, &set, &old, stop)
}

/// The first argument of `outboard engine ARGS` other than `--upgrade NAME`
/// and `--log-level LEVEL` (each also as `--flag=value`), if any.
fn other_than_upgrade(args: impl Iterator<Item = String>) -> Option<String> {
    let mut args = args;
    while let Some(a) = args.next() {
        let flag = a.split('=').next().unwrap_or("");
        if !matches!(flag, "--upgrade" | "--log-level") {
            return Some(a);
        }
        if !a.contains('=') {
            args.next();
        }
    }
    None
}

/// Whether process `pid` exits within `limit` (polled).
fn pid_gone_within(pid: u32, limit: std::time::Duration) -> bool {
    let until = outboard_engine::clock::now() + limit;
    loop {
        // A zombie still has /proc/PID; its state says it is gone.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')) {
            return true;
        }
        if outboard_engine::clock::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Runs a started engine until it is stopped (signal, `--run-for-s`, or an
/// upgrade that took it over).
fn serve(mut engine: Engine, set: &EngineSettings, a: &EngineArgs, stop: &'static std::sync::atomic::AtomicBool) -> ExitCode {
    let status = format!("engine {} on {} at {}/{}", set.name, set.link, set.addr, set.prefix_len);
    if let Err(e) = crate::service::notify(&format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id())) {
        log::event(Level::Warn, "notify_failed", &[("error", &e)]);
    }
    let deadline = a
        .run_for_s
        .map(|s| outboard_engine::clock::now() + Duration::from_secs_f64(s));
    let r = engine.run(stop, |_| deadline.is_some_and(|d| outboard_engine::clock::now() >= d));
    if engine.handed_over() {
        log::event(Level::Info, "engine_handed_over", &[("name", &set.name), ("pid", &std::process::id())]);
        return ExitCode::SUCCESS;
    }
    let _ = crate::service::notify("STOPPING=1");
    log::event(Level::Info, "engine_stopped", &[("name", &set.name)]);
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `outboard engine --check-config FILE [FLAGS]`: the settings as the engine
/// would take them (flags over the file), checked as `Engine::start` checks
/// them before it opens anything.
fn check_config(a: &EngineArgs, file: &std::path::Path) -> ExitCode {
    let mut flags = a.flags.clone();
    flags.config = Some(file.to_path_buf());
    let set = match settings(&flags, a.services.as_deref(), "all").and_then(|s| s.validate().map(|()| s)) {
        Ok(s) => s,
        Err(m) => return usage(format!("{}: {m}", file.display())),
    };
    let services: Vec<String> = set.services.iter().map(|s| format!("{}:{}", s.kind.name(), s.port)).collect();
    println!(
        "{}: valid: engine {:?} on {}{}, address {}/{}{}, services {}, memory cap {} B{}",
        file.display(),
        set.name,
        set.link,
        match (&set.shards, &set.cores) {
            (1, None) => String::new(),
            (n, None) => format!(" with {n} shards"),
            (n, Some(c)) => format!(" with {n} shards on cores {}", c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")),
        },
        set.addr,
        set.prefix_len,
        set.gateway.map(|g| format!(" via {g}")).unwrap_or_default(),
        if services.is_empty() { "none".into() } else { services.join(",") },
        set.memory_cap,
        if set.access.users.is_empty() && set.access.groups.is_empty() {
            String::new()
        } else {
            format!(", also admits uids {:?} and gids {:?}", set.access.users, set.access.groups)
        }
    );
    ExitCode::SUCCESS
}

pub fn stat(a: &StatArgs) -> ExitCode {
    let answer = match outboard_engine::control::query(&a.name, "stat") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("outboard: {e}");
            return ExitCode::from(3);
        }
    };
    if a.json {
        println!("{answer}");
        return ExitCode::SUCCESS;
    }
    match serde_json::from_str::<Snapshot>(&answer) {
        Ok(s) => {
            print!("{}", render(&s));
            ExitCode::SUCCESS
        }
        Err(_) => {
            eprintln!("outboard: the engine answered: {answer}");
            ExitCode::from(1)
        }
    }
}

pub fn fetch(a: &FetchArgs) -> ExitCode {
    let mut flags = a.flags.clone();
    if flags.name.is_none() {
        flags.name = Some(format!("fetch-{}", std::process::id()));
    }
    let mut set = match settings(&flags, None, "none") {
        Ok(s) => s,
        Err(m) => return usage(m),
    };
    if a.connect.is_ipv6() && set.ipv6.is_none() {
        return usage(format!("--connect {}: an IPv6 server needs an IPv6 --addr (or --ipv6 on)", a.connect));
    }
    // A fetch is a client that lives for one connection: it uses its IPv6
    // addresses at once instead of waiting a second for duplicate-address
    // detection (RFC 4862 §5.4 lets a node configure DupAddrDetectTransmits 0).
    if let Some(v6) = set.ipv6.as_mut() {
        v6.dad_transmits = 0;
    }
    let stop = outboard_engine::signals::stop_on_signals();
    let mut engine = match Engine::start(&set) {
        Ok(e) => e,
        Err(e) => return fail(&e),
    };
    engine.fetch(FetchPlan {
        remote: a.connect,
        send_bytes: a.send,
        seed: a.stream_seed,
        recv_limit: a.recv_limit,
    });
    let deadline = outboard_engine::clock::now() + Duration::from_secs_f64(a.timeout_s);
    let r = engine.run(stop, |s| {
        s.apps.get::<Fetches>().is_none_or(Fetches::all_finished) || outboard_engine::clock::now() >= deadline
    });
    if let Err(e) = r {
        return fail(&e);
    }
    // Let the final ACK/FIN leave before the process (and its link) goes.
    let linger = outboard_engine::clock::now() + Duration::from_millis(50);
    let _ = engine.run(stop, |_| outboard_engine::clock::now() >= linger);
    let now = outboard_engine::clock::now();
    let Some(report) = engine.fetches().first().map(|f| f.report(now)) else {
        eprintln!("outboard: the engine has no client to fetch with");
        return ExitCode::from(1);
    };
    let echo_ok = !a.expect_echo
        || (report.bytes_received == report.bytes_sent && report.sha256_received == report.sha256_sent);
    let ok = report.state == FetchState::Done && echo_ok && report.bytes_sent == a.send;
    if a.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        v["ok"] = serde_json::Value::Bool(ok);
        println!("{v}");
    } else {
        let mbit = |b: u64| if report.total_s > 0.0 { b as f64 * 8.0 / report.total_s / 1e6 } else { 0.0 };
        println!(
            "fetch {} {:?}{}: sent {} B (sha256 {}), received {} B (sha256 {}) in {:.3} s ({:.1} Mbit/s out, {:.1} in), {} retransmits",
            report.remote,
            report.state,
            report.error.as_ref().map_or(String::new(), |e| format!(" ({e})")),
            report.bytes_sent,
            &report.sha256_sent[..16],
            report.bytes_received,
            &report.sha256_received[..16],
            report.total_s,
            mbit(report.bytes_sent),
            mbit(report.bytes_received),
            report.retransmits
        );
        if a.expect_echo {
            println!("echo {}", if echo_ok { "verified: byte-identical" } else { "MISMATCH" });
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else if report.state != FetchState::Done && outboard_engine::clock::now() >= deadline {
        eprintln!("outboard: fetch did not finish within {} s", a.timeout_s);
        ExitCode::from(1)
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_take_a_list_in_one_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            f: EngineFlags,
        }
        // A list in one flag (this panicked in clap when the field read as repeated values).
        assert_eq!(T::try_parse_from(["t", "--cores", "2,3"]).unwrap().f.cores, Some(vec![2, 3]));
        assert_eq!(T::try_parse_from(["t", "--cores", "0"]).unwrap().f.cores, Some(vec![0]));
        assert!(T::try_parse_from(["t", "--cores", "x"]).is_err());
        assert_eq!(T::try_parse_from(["t", "--messages"]).unwrap().f.messages, Some(7373));
        assert_eq!(T::try_parse_from(["t", "--messages", "9000"]).unwrap().f.messages, Some(9000));
        assert!(T::try_parse_from(["t", "--messages", "0"]).is_err());
    }

    #[test]
    fn upgrade_takes_no_settings_but_the_log_level() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().into_iter();
        assert_eq!(other_than_upgrade(args(&["--upgrade", "edge"])), None);
        assert_eq!(other_than_upgrade(args(&["--upgrade=edge", "--log-level", "debug"])), None);
        assert_eq!(other_than_upgrade(args(&["--upgrade", "edge", "--cc", "reno"])).as_deref(), Some("--cc"));
        assert_eq!(other_than_upgrade(args(&["--allow-user=bob", "--upgrade", "edge"])).as_deref(), Some("--allow-user=bob"));
    }

    #[test]
    fn addresses_parse_and_reject() {
        assert_eq!(parse_addr("10.77.0.2/24").unwrap(), ("10.77.0.2".parse().unwrap(), 24));
        for bad in ["10.77.0.2", "10.77.0.2/33", "10.77.0/24", "0.0.0.0/8", "224.0.0.1/4", "x/24"] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv6_addresses_parse_and_reject() {
        assert_eq!(parse_addr6("2001:db8::2/64").unwrap(), ("2001:db8::2".parse().unwrap(), 64));
        for bad in ["2001:db8::2", "2001:db8::2/129", "::/0", "::/64", "ff02::1/64", "::1/128", "fe80::1/64", "x/64"] {
            assert!(parse_addr6(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dual_stack_flags_and_file() {
        let flags = |addr: &[&str], gw: &[&str], ipv6: Option<bool>| EngineFlags {
            link: Some("fabric:f1".into()),
            addr: addr.iter().map(|s| s.to_string()).collect(),
            gateway: gw.iter().map(|s| s.parse().unwrap()).collect(),
            ipv6,
            ..Default::default()
        };
        let s = settings(&flags(&["10.0.0.1/24", "2001:db8::1/64"], &["10.0.0.254", "fe80::1"], None), None, "all").unwrap();
        let v6 = s.ipv6.unwrap();
        assert_eq!(v6.addr, Some(("2001:db8::1".parse().unwrap(), 64)));
        assert_eq!(v6.gateway, Some("fe80::1".parse().unwrap()));
        assert_eq!(s.gateway, Some("10.0.0.254".parse().unwrap()));
        assert!(v6.accept_ra && v6.slaac);
        // IPv4 only by default; --ipv6 on gives link-local and SLAAC.
        assert!(settings(&flags(&["10.0.0.1/24"], &[], None), None, "all").unwrap().ipv6.is_none());
        assert_eq!(settings(&flags(&["10.0.0.1/24"], &[], Some(true)), None, "all").unwrap().ipv6.unwrap().addr, None);
        for (a, g, on, needle) in [
            (&["2001:db8::1/64"][..], &[][..], None, "A.B.C.D/N is required"),
            (&["10.0.0.1/24", "10.0.0.2/24"][..], &[][..], None, "one IPv4 address"),
            (&["10.0.0.1/24", "2001:db8::1/64", "2001:db8::2/64"][..], &[][..], None, "at most one IPv6"),
            (&["10.0.0.1/24", "2001:db8::1/64"][..], &[][..], Some(false), "--ipv6 off"),
            (&["10.0.0.1/24"][..], &["fe80::1"][..], None, "needs IPv6"),
            (&["10.0.0.1/24", "2001:db8::1/64"][..], &["2001:db9::1"][..], None, "neither link-local nor inside"),
        ] {
            let e = settings(&flags(a, g, on), None, "all").unwrap_err();
            assert!(e.contains(needle), "{a:?} {g:?}: {e}");
        }
        // Network-device mode gives IPv6 to the kernel: refused with IPv6 on (exit 2, from validate).
        let mut f = flags(&["10.0.0.1/24", "2001:db8::1/64"], &[], None);
        f.kernel_tap = Some("obk0".into());
        let e = settings(&f, None, "all").unwrap().validate().unwrap_err();
        assert!(e.contains("gives IPv6 to the host kernel"), "{e}");
        // The file's addr6/gateway6/ipv6 keys.
        let dir = std::env::temp_dir().join(format!("ob-cfg6-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("e.toml");
        std::fs::write(&p, "link = \"fabric:f1\"\naddr = \"10.0.0.1/24\"\naddr6 = \"2001:db8::1/64\"\ngateway6 = \"fe80::1\"\n").unwrap();
        let s = settings(&EngineFlags { config: Some(p), ..Default::default() }, None, "all").unwrap();
        assert_eq!(s.ipv6.unwrap().gateway, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn config_file_and_flags_merge() {
        let dir = std::env::temp_dir().join(format!("ob-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("e.toml");
        std::fs::write(
            &p,
            "name = \"edge\"\nlink = \"fabric:f1\"\naddr = \"10.0.0.1/24\"\nservices = \"echo\"\nmemory_cap = \"64MiB\"\n[fabric]\nloss = \"1%\"\nseed = 9\n",
        )
        .unwrap();
        let f = EngineFlags { config: Some(p.clone()), addr: vec!["10.0.0.5/24".into()], ..Default::default() };
        let s = settings(&f, None, "all").unwrap();
        assert_eq!(s.name, "edge");
        assert_eq!(s.addr, "10.0.0.5".parse::<Ipv4Addr>().unwrap());
        assert_eq!(s.services.len(), 1);
        assert_eq!(s.memory_cap, 64 << 20);
        let (fc, seed) = s.fabric_faults.unwrap();
        assert!((fc.loss - 0.01).abs() < 1e-12);
        assert_eq!(seed, 9);
        std::fs::write(&p, "lnk = \"x\"\n").unwrap();
        let e = settings(&EngineFlags { config: Some(p), ..Default::default() }, None, "all").unwrap_err();
        assert!(e.contains("lnk"), "{e}");
        let f = EngineFlags {
            link: Some("af_packet:eth0".into()),
            addr: vec!["10.0.0.1/24".into()],
            loss: Some(0.1),
            ..Default::default()
        };
        assert!(settings(&f, None, "all").unwrap_err().contains("fabric links only"));
    }

    #[test]
    fn config_file_values_are_bounded_like_flags() {
        let dir = std::env::temp_dir().join(format!("ob-cfg-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("e.toml");
        let base = "link = \"fabric:f1\"\naddr = \"10.0.0.1/24\"\n";
        for (extra, needle) in [
            ("memory_cap = \"0\"\n", "memory_cap \"0\": must be between 1 MiB and 1 TiB"),
            ("mtu = 100\n", "mtu \"100\": must be between 576 and 9000"),
            ("[fabric]\nloss = \"100%\"\n", "fabric.loss \"100%\": must be between 0% and 25%"),
            ("[fabric]\ndelay_ms = 5000.0\n", "fabric.delay_ms \"5000.0\": must be between 0 and 1000 ms"),
            ("[fabric]\nloss = \"20%\"\ncorrupt = \"10%\"\n", "lost plus corrupted frames must be between 0% and 25%"),
        ] {
            std::fs::write(&p, format!("{base}{extra}")).unwrap();
            let e = settings(&EngineFlags { config: Some(p.clone()), ..Default::default() }, None, "all").unwrap_err();
            assert!(e.contains(needle), "{extra}: {e}");
        }
        std::fs::write(&p, format!("{base}mtu = 9000\nmemory_cap = \"1MiB\"\n[fabric]\nloss = \"25%\"\ndelay_ms = 1000\n")).unwrap();
        let s = settings(&EngineFlags { config: Some(p), ..Default::default() }, None, "all").unwrap();
        assert_eq!((s.mtu, s.memory_cap), (Some(9000), 1 << 20));
        s.validate().unwrap();
    }
}
