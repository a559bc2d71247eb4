//! The lab: network namespaces joined by veth pairs, the engine's interface
//! on one end, the Linux stack on the other, an impairment stage between.
//! `outboard lab up|down|status` and the tests share this crate.
//!
//! ```text
//! direct: ob-N-eng[eng0] ── [imp-e] ob-N-imp [imp-l] ── [lnx0] ob-N-lnx
//!         engine 10.77.0.2/24 (not configured: the engine owns it)   Linux 10.77.0.1/24
//! routed: ob-N-eng[eng0] ── ob-N-imp ── [rtr-e] ob-N-rtr [rtr-l] ── [lnx0] ob-N-lnx
//!         engine 10.77.0.2/24 gw 10.77.0.1 = rtr-e; rtr-l 10.78.0.1/24; Linux 10.78.0.2/24 via 10.78.0.1
//! ```
//!
//! How: [`Lab::up`] validates the config, checks for root and the tools, takes
//! the state dir `/run/outboard/lab/NAME/` (creating it is the lock: a second
//! `up` fails with [`LabError::Exists`]), then runs a fixed plan of `ip`,
//! `ethtool` and `sysctl` commands ([`plan`], unit-tested without root),
//! each with its output captured; the first failure tears down everything
//! and is returned with the command line and its stderr. veth pairs are
//! created with one queue each (AF_XDP sees one queue only) and the MTU asked
//! for; every lab interface has IPv6 disabled (the lab is IPv4; no router
//! solicitations or MLD reports wander into the engine) and the kernel's ends
//! have TX checksum offload off (otherwise the kernel sends only partial
//! checksums over veth). eng0 gets no address: the engine owns 10.77.0.2.
//!
//! The impairment stage: with no impairment a kernel bridge `br0` joins
//! imp-e and imp-l (fast, no user-space hop). With any impairment (or
//! `force_relay`) our [`relay`] runs in ob-N-imp, started detached (`ip netns
//! exec … setsid outboard relay …`, output to `relay.log` in the state
//! dir) and forwards every frame through a seeded `FaultInjector` per
//! direction. We do every impairment in the relay rather than with netem or
//! nftables because `numgen random` and netem cannot be seeded: a relay run
//! is reproducible from its seed and reports what it did.
//!
//! [`Lab::down`] is idempotent and works on half-built labs: it stops relays
//! found by their command line (which names the state dir) with SIGTERM,
//! waits up to 2 s for the report, SIGKILLs stragglers, deletes every
//! `ob-NAME-*` namespace (which destroys the veths) and removes the state dir.
//!
//! IPv6 (`LabConfig::ipv6`, `outboard lab up --ipv6`): Linux's side and the
//! router get IPv6 too (fd77::/64 beside 10.77.0.0/24, fd78::/64 beside
//! 10.78.0.0/24; the engine is fd77::2), added without duplicate-address
//! detection so the lab is usable at once; the router forwards IPv6; eng0
//! and the impairment stage keep IPv6 off (the engine owns eng0, the stage is
//! layer 2), and the bridge does no multicast snooping, so neighbour
//! discovery's multicasts always pass.
//!
//! Not done: more than one engine interface; impairment changes on a running
//! lab (take it down and up again).

use outboard_impair::FaultConfig;
use outboard_time::Duration;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub mod relay;
pub mod sys;

/// Where labs keep their state: `STATE_ROOT/NAME/lab.json`.
pub const STATE_ROOT: &str = "/run/outboard/lab";

/// The engine's interface, in every topology.
pub const ENGINE_IFACE: &str = "eng0";
/// Linux's interface, in every topology.
pub const LINUX_IFACE: &str = "lnx0";

const ENGINE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const NEAR_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const RTR_L_ADDR: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const FAR_LINUX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
const ENGINE_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2);
const NEAR_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1);
const RTR_L_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd78, 0, 0, 0, 0, 0, 0, 1);
const FAR_LINUX_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd78, 0, 0, 0, 0, 0, 0, 2);

/// How the engine reaches Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// One Ethernet segment: engine and Linux on 10.77.0.0/24.
    Direct,
    /// A Linux router between 10.77.0.0/24 (engine) and 10.78.0.0/24 (Linux).
    Routed,
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Topology::Direct => "direct",
            Topology::Routed => "routed",
        })
    }
}

/// The relay's knobs (the same names as `outboard sim transfer`'s flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impairment {
    /// Probability a frame is lost, per direction.
    pub loss: f64,
    pub duplicate: f64,
    pub corrupt: f64,
    /// Probability a frame is held back a further (0, reorder_delay_ms].
    pub reorder: f64,
    pub reorder_delay_ms: f64,
    /// One-way delay (each direction).
    pub delay_ms: f64,
    pub jitter_ms: f64,
    /// Link rate in Mbit/s per direction; 0 = unlimited.
    pub rate_mbit: f64,
    /// Bytes the rate limiter's queue holds before it tail-drops.
    pub queue_bytes: u64,
}

impl Default for Impairment {
    /// No impairment.
    fn default() -> Impairment {
        Impairment {
            loss: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            reorder: 0.0,
            reorder_delay_ms: 1.0,
            delay_ms: 0.0,
            jitter_ms: 0.0,
            rate_mbit: 0.0,
            queue_bytes: 256 * 1024,
        }
    }
}

fn ms(x: f64) -> Duration {
    Duration::try_from_secs_f64(x / 1000.0).unwrap_or(Duration::MAX)
}

impl Impairment {
    /// True when every knob leaves frames alone (the lab then uses a bridge).
    pub fn is_none(&self) -> bool {
        self.loss == 0.0
            && self.duplicate == 0.0
            && self.corrupt == 0.0
            && self.reorder == 0.0
            && self.delay_ms == 0.0
            && self.jitter_ms == 0.0
            && self.rate_mbit == 0.0
    }

    /// Checks ranges: probabilities in [0, 1], times and rates finite and >= 0.
    pub fn validate(&self) -> Result<(), LabError> {
        for (n, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(LabError::BadConfig(format!("--{n} {p} is outside 0..1")));
            }
        }
        for (n, x) in [
            ("reorder-delay-ms", self.reorder_delay_ms),
            ("delay-ms", self.delay_ms),
            ("jitter-ms", self.jitter_ms),
            ("rate-mbit", self.rate_mbit),
        ] {
            if !x.is_finite() || x < 0.0 {
                return Err(LabError::BadConfig(format!(
                    "--{n} {x} must be a finite number >= 0"
                )));
            }
        }
        Ok(())
    }

    /// The injector configuration for one direction.
    pub fn fault_config(&self) -> FaultConfig {
        FaultConfig {
            loss: self.loss,
            duplicate: self.duplicate,
            corrupt: self.corrupt,
            reorder: self.reorder,
            reorder_delay: ms(self.reorder_delay_ms),
            delay: ms(self.delay_ms),
            jitter: ms(self.jitter_ms),
            bandwidth_bps: (self.rate_mbit * 1e6) as u64,
            queue_bytes: usize::try_from(self.queue_bytes).unwrap_or(usize::MAX),
            ..FaultConfig::default()
        }
    }

    /// The flags that give `outboard relay` these knobs (floats print exactly).
    pub fn to_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, x) in [
            ("--loss", self.loss),
            ("--duplicate", self.duplicate),
            ("--corrupt", self.corrupt),
            ("--reorder", self.reorder),
            ("--reorder-delay-ms", self.reorder_delay_ms),
            ("--delay-ms", self.delay_ms),
            ("--jitter-ms", self.jitter_ms),
            ("--rate-mbit", self.rate_mbit),
        ] {
            v.push(flag.to_string());
            v.push(format!("{x}"));
        }
        v.push("--queue-bytes".into());
        v.push(self.queue_bytes.to_string());
        v
    }

    /// A short human summary, e.g. `loss 20% delay 20ms`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (n, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if p > 0.0 {
                parts.push(format!("{n} {}%", p * 100.0));
            }
        }
        if self.reorder > 0.0 {
            parts.push(format!(
                "reorder {}% (up to {} ms)",
                self.reorder * 100.0,
                self.reorder_delay_ms
            ));
        }
        if self.delay_ms > 0.0 {
            parts.push(format!("delay {} ms", self.delay_ms));
        }
        if self.jitter_ms > 0.0 {
            parts.push(format!("jitter {} ms", self.jitter_ms));
        }
        if self.rate_mbit > 0.0 {
            parts.push(format!(
                "rate {} Mbit/s (queue {} B)",
                self.rate_mbit, self.queue_bytes
            ));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What to build.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// 1 to 8 of [a-z0-9].
    pub name: String,
    pub topology: Topology,
    /// MTU of every veth (68..=9000).
    pub mtu: u32,
    pub impairment: Impairment,
    /// The relay's seed (directions use seed and seed + 1).
    pub seed: u64,
    /// Use the relay even without impairment (to measure it, or to get its report).
    pub force_relay: bool,
    /// The `outboard` binary that runs `outboard relay`; None = this process's own executable.
    pub relay_exe: Option<PathBuf>,
    /// Receive and transmit queues of the engine's veth pair (eng0 and its
    /// peer), 1 to 16: an engine with N shards on af_xdp binds one queue
    /// each; the peer's transmit queue (by flow hash) picks eng0's receive queue.
    pub queues: u32,
    /// IPv6 beside IPv4 on Linux's side and the router (the engine is fd77::2/64).
    pub ipv6: bool,
    /// Routed only: the MTU of the router-to-Linux link (576..=`mtu`), a
    /// narrower hop than the engine's. Linux still advertises the MSS of the
    /// engine's MTU (`advmss` on its routes), so the engine's full-size
    /// segments meet the narrow hop and the router's "fragmentation needed" /
    /// "packet too big": path MTU discovery (RFC 1191, RFC 8201) is exercised.
    pub far_mtu: Option<u32>,
}

impl LabConfig {
    /// A direct lab, MTU 1500, no impairment, seed 1.
    pub fn new(name: &str) -> LabConfig {
        LabConfig {
            name: name.to_string(),
            topology: Topology::Direct,
            mtu: 1500,
            impairment: Impairment::default(),
            seed: 1,
            force_relay: false,
            relay_exe: None,
            queues: 1,
            ipv6: false,
            far_mtu: None,
        }
    }

    /// True when the impairment stage is the relay rather than a bridge.
    pub fn uses_relay(&self) -> bool {
        self.force_relay || !self.impairment.is_none()
    }

    pub fn validate(&self) -> Result<(), LabError> {
        validate_name(&self.name)?;
        if !(68..=9000).contains(&self.mtu) {
            return Err(LabError::BadConfig(format!(
                "--mtu {} is outside 68..=9000",
                self.mtu
            )));
        }
        if let Some(m) = self.far_mtu {
            if self.topology != Topology::Routed || !(576..=self.mtu).contains(&m) {
                return Err(LabError::BadConfig(format!(
                    "--far-mtu {m} needs --topology routed and a value in 576..={}",
                    self.mtu
                )));
            }
        }
        if !(1..=16).contains(&self.queues) {
            return Err(LabError::BadConfig(format!("--queues {} is outside 1..=16", self.queues)));
        }
        self.impairment.validate()
    }
}

/// Checks a lab name: 1 to 8 of [a-z0-9] (namespace names stay short and unambiguous).
pub fn validate_name(name: &str) -> Result<(), LabError> {
    if name.is_empty()
        || name.len() > 8
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(LabError::BadName(name.to_string()));
    }
    Ok(())
}

/// Why a lab operation failed. [`LabError::exit_code`] gives the `outboard` exit code.
#[derive(Debug)]
pub enum LabError {
    /// The lab name is not 1..8 of [a-z0-9].
    BadName(String),
    /// A knob or the MTU is out of range.
    BadConfig(String),
    /// Not root.
    NeedsRoot(String),
    /// A program the lab shells out to is missing.
    MissingTool { tool: String, package: String },
    /// A command failed: its command line, exit status and stderr.
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    /// The lab (or some of its namespaces) already exists.
    Exists(String),
    /// The relay did not start or did not stop as it should.
    Relay(String),
    /// A file or system call failed.
    Io { what: String, err: io::Error },
}

impl LabError {
    /// 2 bad name/config, 10 needs root, 11 missing tool, 12 command failed,
    /// 13 lab exists, 14 relay, 1 other.
    pub fn exit_code(&self) -> u8 {
        match self {
            LabError::BadName(_) | LabError::BadConfig(_) => 2,
            LabError::NeedsRoot(_) => 10,
            LabError::MissingTool { .. } => 11,
            LabError::Command { .. } => 12,
            LabError::Exists(_) => 13,
            LabError::Relay(_) => 14,
            LabError::Io { .. } => 1,
        }
    }
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabError::BadName(n) => write!(f, "bad lab name {n:?}: use 1 to 8 of a-z 0-9"),
            LabError::BadConfig(s) => write!(f, "bad lab config: {s}"),
            LabError::NeedsRoot(s) => write!(
                f,
                "needs root: network namespaces and veth pairs need CAP_SYS_ADMIN and CAP_NET_ADMIN ({s}); run it as root, e.g. with sudo"
            ),
            LabError::MissingTool { tool, package } => {
                write!(f, "`{tool}` not found in PATH: apt-get install {package}")
            }
            LabError::Command { cmd, status, stderr } => {
                write!(f, "command failed ({status}): {cmd}\n{}", stderr.trim_end())
            }
            LabError::Exists(n) => write!(f, "lab {n} is up; run `outboard lab down {n}`"),
            LabError::Relay(s) => write!(f, "relay: {s}"),
            LabError::Io { what, err } => write!(f, "{what}: {err}"),
        }
    }
}

impl std::error::Error for LabError {}

fn io_err(what: impl Into<String>, err: io::Error) -> LabError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            LabError::NeedsRoot(format!("{}: {err}", what.into()))
        }
        _ => LabError::Io {
            what: what.into(),
            err,
        },
    }
}

/// The namespace of `role` (`eng`, `imp`, `lnx`, `rtr`) in lab `name`.
pub fn namespace(name: &str, role: &str) -> String {
    format!("ob-{name}-{role}")
}

/// The state directory of lab `name`.
pub fn state_dir(name: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(name)
}

// ---------------------------------------------------------------- the description

/// One veth pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Veth {
    pub a_ns: String,
    pub a_if: String,
    pub b_ns: String,
    pub b_if: String,
    /// Receive and transmit queues of each end.
    #[serde(default = "one_queue")]
    pub queues: u32,
    /// This pair's MTU when it differs from the lab's (the routed lab's far hop).
    #[serde(default)]
    pub mtu: Option<u32>,
}

fn one_queue() -> u32 {
    1
}

/// An addressed end: the engine's or Linux's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub namespace: String,
    pub iface: String,
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv4Addr>,
    /// With IPv6: the /64 address and the IPv6 gateway.
    #[serde(default)]
    pub addr6: Option<Ipv6Addr>,
    #[serde(default)]
    pub gateway6: Option<Ipv6Addr>,
}

/// The router of a routed lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Router {
    pub namespace: String,
    /// Engine side: `rtr-e`, 10.77.0.1/24.
    pub east_iface: String,
    pub east_addr: Ipv4Addr,
    /// Linux side: `rtr-l`, 10.78.0.1/24.
    pub west_iface: String,
    pub west_addr: Ipv4Addr,
    /// With IPv6: fd77::1 and fd78::1.
    #[serde(default)]
    pub east_addr6: Option<Ipv6Addr>,
    #[serde(default)]
    pub west_addr6: Option<Ipv6Addr>,
}

/// The impairment stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// `bridge` or `relay`.
    pub kind: String,
    pub namespace: String,
    pub seed: u64,
    pub impairment: Impairment,
    /// The relay's pid (kind `relay`).
    pub relay_pid: Option<u32>,
    /// Where the relay writes its report when stopped.
    pub report: Option<String>,
    pub log: Option<String>,
}

/// Commands to use the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands {
    /// Runs the engine on eng0.
    pub engine: String,
    /// Prefix for Linux programs (append the program).
    pub linux: String,
    /// An example: ping the engine from Linux.
    pub linux_ping: String,
    pub down: String,
}

/// Everything about a lab; `lab.json` in its state dir.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabInfo {
    pub name: String,
    pub topology: Topology,
    pub mtu: u32,
    pub state_dir: String,
    /// eng, imp, (rtr,) lnx.
    pub namespaces: Vec<String>,
    pub links: Vec<Veth>,
    /// The engine's address is not configured on eng0: the engine owns it.
    pub engine: Endpoint,
    pub linux: Endpoint,
    pub router: Option<Router>,
    pub stage: Stage,
    pub commands: Commands,
}

fn veth(a_ns: &str, a_if: &str, b_ns: &str, b_if: &str) -> Veth {
    Veth {
        a_ns: a_ns.into(),
        a_if: a_if.into(),
        b_ns: b_ns.into(),
        b_if: b_if.into(),
        queues: 1,
        mtu: None,
    }
}

/// The description of the lab `cfg` builds (no relay pid yet).
pub fn describe(cfg: &LabConfig) -> LabInfo {
    let n = &cfg.name;
    let (eng, imp, lnx, rtr) = (
        namespace(n, "eng"),
        namespace(n, "imp"),
        namespace(n, "lnx"),
        namespace(n, "rtr"),
    );
    let routed = cfg.topology == Topology::Routed;
    let v6 = |a: Ipv6Addr| cfg.ipv6.then_some(a);
    let mut namespaces = vec![eng.clone(), imp.clone()];
    let mut links = vec![Veth { queues: cfg.queues, ..veth(&eng, ENGINE_IFACE, &imp, "imp-e") }];
    let (router, linux, gateway) = if routed {
        namespaces.push(rtr.clone());
        links.push(veth(&imp, "imp-l", &rtr, "rtr-e"));
        links.push(Veth { mtu: cfg.far_mtu, ..veth(&rtr, "rtr-l", &lnx, LINUX_IFACE) });
        let router = Router {
            namespace: rtr.clone(),
            east_iface: "rtr-e".into(),
            east_addr: NEAR_ADDR,
            west_iface: "rtr-l".into(),
            west_addr: RTR_L_ADDR,
            east_addr6: v6(NEAR_ADDR6),
            west_addr6: v6(RTR_L_ADDR6),
        };
        let linux = Endpoint {
            namespace: lnx.clone(),
            iface: LINUX_IFACE.into(),
            addr: FAR_LINUX_ADDR,
            prefix: 24,
            gateway: Some(RTR_L_ADDR),
            addr6: v6(FAR_LINUX_ADDR6),
            gateway6: v6(RTR_L_ADDR6),
        };
        (Some(router), linux, Some(NEAR_ADDR))
    } else {
        links.push(veth(&imp, "imp-l", &lnx, LINUX_IFACE));
        let linux = Endpoint {
            namespace: lnx.clone(),
            iface: LINUX_IFACE.into(),
            addr: NEAR_ADDR,
            prefix: 24,
            gateway: None,
            addr6: v6(NEAR_ADDR6),
            gateway6: None,
        };
        (None, linux, None)
    };
    namespaces.push(lnx.clone());
    let engine = Endpoint {
        namespace: eng.clone(),
        iface: ENGINE_IFACE.into(),
        addr: ENGINE_ADDR,
        prefix: 24,
        gateway,
        addr6: v6(ENGINE_ADDR6),
        gateway6: if routed { v6(NEAR_ADDR6) } else { None },
    };
    let dir = state_dir(n);
    let relay = cfg.uses_relay();
    let stage = Stage {
        kind: if relay { "relay" } else { "bridge" }.into(),
        namespace: imp.clone(),
        seed: cfg.seed,
        impairment: cfg.impairment.clone(),
        relay_pid: None,
        report: relay.then(|| dir.join("relay-report.json").display().to_string()),
        log: relay.then(|| dir.join("relay.log").display().to_string()),
    };
    let mut engine_cmd = format!(
        "ip netns exec {eng} outboard engine --link af_packet:{ENGINE_IFACE} --addr {ENGINE_ADDR}/24"
    );
    if let Some(gw) = gateway {
        engine_cmd.push_str(&format!(" --gateway {gw}"));
    }
    if let Some(a) = engine.addr6 {
        engine_cmd.push_str(&format!(" --addr {a}/64"));
    }
    if let Some(gw) = engine.gateway6 {
        engine_cmd.push_str(&format!(" --gateway {gw}"));
    }
    let commands = Commands {
        engine: engine_cmd,
        linux: format!("ip netns exec {lnx} "),
        linux_ping: format!("ip netns exec {lnx} ping -c 3 {ENGINE_ADDR}"),
        down: format!("outboard lab down {n}"),
    };
    LabInfo {
        name: n.clone(),
        topology: cfg.topology,
        mtu: cfg.mtu,
        state_dir: dir.display().to_string(),
        namespaces,
        links,
        engine,
        linux,
        router,
        stage,
        commands,
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// The commands that build the lab `info` describes, in order (the relay,
/// if any, is started after them). Each is a full argv.
pub fn plan(info: &LabInfo) -> Vec<Vec<String>> {
    let mut p = Vec::new();
    let mtu = info.mtu.to_string();
    let ipv6 = info.linux.addr6.is_some();
    for ns in &info.namespaces {
        p.push(argv(&["ip", "netns", "add", ns]));
    }
    for v in &info.links {
        let q = v.queues.to_string();
        let mtu = v.mtu.map_or(mtu.clone(), |m| m.to_string());
        p.push(argv(&[
            "ip",
            "link",
            "add",
            &v.a_if,
            "netns",
            &v.a_ns,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            &v.b_if,
            "netns",
            &v.b_ns,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "mtu",
            &mtu,
        ]));
    }
    for ns in &info.namespaces {
        p.push(argv(&["ip", "-n", ns, "link", "set", "lo", "up"]));
    }
    let imp = &info.stage.namespace;
    if info.stage.kind == "bridge" {
        p.push(argv(&[
            "ip",
            "-n",
            imp,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
            // IPv6: no multicast snooping, so neighbour discovery's solicited-node
            // multicasts are flooded like broadcasts whoever has reported what.
            "mcast_snooping",
            if ipv6 { "0" } else { "1" },
        ]));
    }
    // Every lab interface: IPv6 off (before it comes up, so no link-local
    // address, DAD or router solicitation ever leaves); the kernel's ends
    // also get TX checksum offload off.
    let mut ifaces: Vec<(String, String, bool)> = Vec::new();
    for v in &info.links {
        for (ns, i) in [(&v.a_ns, &v.a_if), (&v.b_ns, &v.b_if)] {
            let kernel_end = i != ENGINE_IFACE;
            ifaces.push((ns.clone(), i.clone(), kernel_end));
        }
    }
    if info.stage.kind == "bridge" {
        ifaces.push((imp.clone(), "br0".into(), true));
    }
    for (ns, i, kernel_end) in &ifaces {
        // With IPv6 only the interfaces that carry it keep it: Linux's and the router's.
        let keeps_ipv6 = ipv6 && (i == LINUX_IFACE || i.starts_with("rtr-"));
        p.push(argv(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{i}.disable_ipv6={}", if keeps_ipv6 { 0 } else { 1 }),
        ]));
        if *kernel_end {
            p.push(argv(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", i, "tx", "off",
            ]));
        } else if info.stage.kind == "relay" {
            // The relay impairs wire-sized frames: the engine must not hand
            // 64 KiB GSO frames to eng0 (it checks the device's TSO flag).
            p.push(argv(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", i, "tso", "off", "gso", "off",
            ]));
        }
    }
    if info.stage.kind == "bridge" {
        for i in ["imp-e", "imp-l"] {
            p.push(argv(&["ip", "-n", imp, "link", "set", i, "master", "br0"]));
        }
        p.push(argv(&["ip", "-n", imp, "link", "set", "br0", "up"]));
        // With br_netfilter loaded on the host, a bridge hands IPv4 to
        // netfilter, which drops frames with bad IP checksums before the
        // engine could see (and count) them: a lab must pass every frame.
        p.push(argv(&[
            "ip",
            "netns",
            "exec",
            imp,
            "sh",
            "-c",
            "for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-arptables; do [ -e $f ] && echo 0 > $f; done; true",
        ]));
    }
    if let Some(r) = &info.router {
        p.push(argv(&[
            "ip",
            "-n",
            &r.namespace,
            "addr",
            "add",
            &format!("{}/24", r.east_addr),
            "dev",
            &r.east_iface,
        ]));
        p.push(argv(&[
            "ip",
            "-n",
            &r.namespace,
            "addr",
            "add",
            &format!("{}/24", r.west_addr),
            "dev",
            &r.west_iface,
        ]));
        p.push(argv(&[
            "ip",
            "netns",
            "exec",
            &r.namespace,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]));
        for (a, i) in [(r.east_addr6, &r.east_iface), (r.west_addr6, &r.west_iface)] {
            if let Some(a) = a {
                p.push(argv(&["ip", "-n", &r.namespace, "-6", "addr", "add", &format!("{a}/64"), "dev", i, "nodad"]));
            }
        }
        if ipv6 {
            p.push(argv(&["ip", "netns", "exec", &r.namespace, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]));
        }
    }
    let l = &info.linux;
    p.push(argv(&[
        "ip",
        "-n",
        &l.namespace,
        "addr",
        "add",
        &format!("{}/{}", l.addr, l.prefix),
        "dev",
        &l.iface,
    ]));
    if let Some(a) = l.addr6 {
        p.push(argv(&["ip", "-n", &l.namespace, "-6", "addr", "add", &format!("{a}/64"), "dev", &l.iface, "nodad"]));
    }
    for (ns, i, _) in &ifaces {
        if i != "br0" {
            p.push(argv(&["ip", "-n", ns, "link", "set", i, "up"]));
        }
    }
    // A narrow far hop: Linux advertises the MSS of the engine's MTU anyway.
    let far = info.links.iter().find_map(|v| v.mtu);
    let advmss = |ip_header: u32| far.map(|_| vec!["advmss".to_string(), (info.mtu - ip_header - 20).to_string()]).unwrap_or_default();
    if let Some(gw) = l.gateway {
        let mut c = argv(&["ip", "-n", &l.namespace, "route", "add", "default", "via", &gw.to_string()]);
        c.extend(advmss(20));
        p.push(c);
    }
    if let Some(gw) = l.gateway6 {
        let mut c = argv(&["ip", "-n", &l.namespace, "-6", "route", "add", "default", "via", &gw.to_string()]);
        c.extend(advmss(40));
        p.push(c);
    }
    p
}

// ---------------------------------------------------------------- running commands

fn package_of(tool: &str) -> &'static str {
    match tool {
        "ip" => "iproute2",
        "ethtool" => "ethtool",
        "sysctl" => "procps",
        "setsid" => "util-linux",
        _ => "the package that provides it",
    }
}

/// True when `tool` is an executable file in PATH.
fn in_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).any(|d| {
        let f = d.join(tool);
        std::fs::metadata(&f).map(|m| m.is_file()).unwrap_or(false)
    })
}

fn need_tools(tools: &[&str]) -> Result<(), LabError> {
    for t in tools {
        if !in_path(t) {
            return Err(LabError::MissingTool {
                tool: t.to_string(),
                package: package_of(t).into(),
            });
        }
    }
    Ok(())
}

/// Runs one argv with output captured: stdout on success, else [`LabError::Command`].
pub fn run_cmd(argv: &[String]) -> Result<String, LabError> {
    let Some((prog, args)) = argv.split_first() else {
        return Ok(String::new());
    };
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                LabError::MissingTool {
                    tool: prog.clone(),
                    package: package_of(prog).into(),
                }
            } else {
                io_err(format!("run {prog}"), e)
            }
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let cmd = argv.join(" ");
    // ip/ethtool print "Operation not permitted" when not root.
    if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        return Err(LabError::NeedsRoot(format!("{cmd}: {}", stderr.trim_end())));
    }
    Err(LabError::Command {
        cmd,
        status: out.status.to_string(),
        stderr,
    })
}

fn need_root() -> Result<(), LabError> {
    if sys::euid() != 0 {
        return Err(LabError::NeedsRoot(format!(
            "running as uid {}",
            sys::euid()
        )));
    }
    Ok(())
}

/// Every network namespace whose name starts with `ob-NAME-`.
pub fn lab_namespaces(name: &str) -> Result<Vec<String>, LabError> {
    let prefix = format!("ob-{name}-");
    Ok(all_namespaces()?
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect())
}

fn all_namespaces() -> Result<Vec<String>, LabError> {
    let out = run_cmd(&argv(&["ip", "netns", "list"]))?;
    // Lines look like `ob-x-eng (id: 3)` or `ob-x-eng`.
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Every lab interface (and br0) with the namespace it lives in.
fn lab_ifaces(info: &LabInfo) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for l in &info.links {
        v.push((l.a_ns.clone(), l.a_if.clone()));
        v.push((l.b_ns.clone(), l.b_if.clone()));
    }
    if info.stage.kind == "bridge" {
        v.push((info.stage.namespace.clone(), "br0".into()));
    }
    v
}

/// How long `up` waits for the kernel to report every interface up.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits until the kernel reports every lab interface operationally up. The
/// kernel applies carrier changes (and a bridge's forwarding) from its
/// link-watch work up to a second after `ip link set up`; frames sent
/// before then vanish, which would make a test's first ARP or SYN get lost.
fn wait_ready(info: &LabInfo) -> Result<(), LabError> {
    let want = lab_ifaces(info);
    let deadline = sys::now() + READY_TIMEOUT;
    loop {
        let mut not_up = Vec::new();
        for ns in &info.namespaces {
            let out = run_cmd(&argv(&["ip", "-n", ns, "-o", "link", "show"]))?;
            for (wns, wif) in want.iter().filter(|(n, _)| n == ns) {
                let up = out.lines().any(|l| {
                    let name = l
                        .split(':')
                        .nth(1)
                        .map(|s| s.trim().split('@').next().unwrap_or(""));
                    name == Some(wif.as_str()) && l.contains(" state UP ")
                });
                if !up {
                    not_up.push(format!("{wns}:{wif}"));
                }
            }
        }
        if not_up.is_empty() {
            return Ok(());
        }
        if sys::now() >= deadline {
            return Err(LabError::Command {
                cmd: "ip -o link show (waiting for every interface to be up)".into(),
                status: format!("not up after {} s", READY_TIMEOUT.as_secs()),
                stderr: not_up.join(" "),
            });
        }
        sleep_ms(20);
    }
}

// ---------------------------------------------------------------- relays as processes

/// Pids of running relays whose command line names a file in `dir`.
fn find_relays(dir: &Path) -> Vec<i32> {
    let want = format!("{}/", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_relay = args.iter().any(|a| *a == b"relay");
        let names_dir = args
            .windows(2)
            .any(|w| w[0] == b"--report" && w[1].starts_with(want.as_bytes()));
        if is_relay && names_dir && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => match stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
        {
            Some(state) => state != "Z" && state != "X",
            None => false,
        },
        Err(_) => false,
    }
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Stops every relay of lab `dir`: SIGTERM, up to 2 s for them to exit, then SIGKILL.
fn stop_relays(dir: &Path, child: Option<&mut Child>) -> Vec<i32> {
    let pids = find_relays(dir);
    for &pid in &pids {
        let _ = sys::kill(pid, libc::SIGTERM);
    }
    let deadline = sys::now() + Duration::from_secs(2);
    let mut reap = child;
    loop {
        if let Some(c) = reap.as_mut() {
            let _ = c.try_wait();
        }
        if !pids.iter().any(|&p| alive(p)) || sys::now() >= deadline {
            break;
        }
        sleep_ms(10);
    }
    for &pid in &pids {
        if alive(pid) {
            let _ = sys::kill(pid, libc::SIGKILL);
        }
    }
    if let Some(c) = reap {
        // Killed above if still running; wait() reaps our own child (bounded: it got SIGKILL).
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    pids
}

// ---------------------------------------------------------------- the lab

/// What `down` did.
#[derive(Debug, Clone, Serialize)]
pub struct DownReport {
    pub name: String,
    /// Namespaces deleted (empty when the lab was not up).
    pub namespaces_deleted: Vec<String>,
    /// Relay processes stopped.
    pub relays_stopped: Vec<i32>,
    /// The relay's report, when it wrote one (not after `kill -9`).
    pub relay_report: Option<serde_json::Value>,
    pub state_dir_removed: bool,
}

/// What `status` sees of one lab.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    pub name: String,
    /// `up` (state and every namespace present), `partial`, or `down`.
    pub state: String,
    pub namespaces_present: Vec<String>,
    /// Whether the relay process is alive (None: the lab has no relay).
    pub relay_running: Option<bool>,
    pub info: Option<LabInfo>,
}

/// A lab that is up. Dropping it tears it down (for tests); [`Lab::detach`] leaves it up.
#[derive(Debug)]
pub struct Lab {
    info: LabInfo,
    relay: Option<Child>,
    armed: bool,
}

impl Lab {
    /// Builds the lab. On failure everything created is torn down again.
    pub fn up(cfg: &LabConfig) -> Result<Lab, LabError> {
        cfg.validate()?;
        need_root()?;
        let mut tools = vec!["ip", "ethtool", "sysctl"];
        if cfg.uses_relay() {
            tools.push("setsid");
        }
        need_tools(&tools)?;
        if !lab_namespaces(&cfg.name)?.is_empty() {
            return Err(LabError::Exists(cfg.name.clone()));
        }
        let dir = state_dir(&cfg.name);
        std::fs::create_dir_all(STATE_ROOT)
            .map_err(|e| io_err(format!("create {STATE_ROOT}"), e))?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(LabError::Exists(cfg.name.clone()))
            }
            Err(e) => return Err(io_err(format!("create {}", dir.display()), e)),
        }
        let mut lab = Lab {
            info: describe(cfg),
            relay: None,
            armed: true,
        };
        // On error `lab` is dropped armed, which tears down whatever was built.
        lab.build(cfg)?;
        Ok(lab)
    }

    fn build(&mut self, cfg: &LabConfig) -> Result<(), LabError> {
        for step in plan(&self.info) {
            run_cmd(&step)?;
        }
        wait_ready(&self.info)?;
        if cfg.uses_relay() {
            self.start_relay(cfg)?;
        }
        let json = serde_json::to_string_pretty(&self.info).unwrap_or_default();
        let path = Path::new(&self.info.state_dir).join("lab.json");
        std::fs::write(&path, json + "\n")
            .map_err(|e| io_err(format!("write {}", path.display()), e))
    }

    fn start_relay(&mut self, cfg: &LabConfig) -> Result<(), LabError> {
        let exe = match &cfg.relay_exe {
            Some(p) => p.clone(),
            None => {
                std::env::current_exe().map_err(|e| io_err("find the outboard executable", e))?
            }
        };
        let dir = PathBuf::from(&self.info.state_dir);
        let report = dir.join("relay-report.json");
        let log = dir.join("relay.log");
        let ready = dir.join("relay.ready");
        let logf = std::fs::File::create(&log)
            .map_err(|e| io_err(format!("create {}", log.display()), e))?;
        let logf2 = logf.try_clone().map_err(|e| io_err("dup log file", e))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.info.stage.namespace, "setsid"])
            .arg(&exe)
            .args([
                "relay",
                "--a",
                "imp-e",
                "--b",
                "imp-l",
                "--seed",
                &cfg.seed.to_string(),
            ])
            .args(cfg.impairment.to_args())
            .arg("--report")
            .arg(&report)
            .arg("--ready-file")
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(logf)
            .stderr(logf2);
        let child = cmd
            .spawn()
            .map_err(|e| io_err(format!("start relay {}", exe.display()), e))?;
        self.relay = Some(child);
        let deadline = sys::now() + Duration::from_secs(5);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                if let Ok(pid) = text.trim().parse::<u32>() {
                    self.info.stage.relay_pid = Some(pid);
                    return Ok(());
                }
            }
            let exited = match self.relay.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => Some(status.to_string()),
                _ => None,
            };
            if exited.is_some() || sys::now() >= deadline {
                let why = exited.unwrap_or_else(|| "not ready after 5 s".into());
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(LabError::Relay(format!(
                    "relay did not start ({why}); its log:\n{}",
                    text.trim_end()
                )));
            }
            sleep_ms(10);
        }
    }

    /// Tears lab `name` down: idempotent, works on half-built labs, Ok when nothing was there.
    pub fn down(name: &str) -> Result<DownReport, LabError> {
        down_with(name, None)
    }

    /// Tears this lab down now and reports what was done.
    pub fn teardown(mut self) -> Result<DownReport, LabError> {
        self.armed = false;
        down_with(&self.info.name, self.relay.as_mut())
    }

    /// Leaves the lab up (the CLI's `lab up`) and returns its description.
    pub fn detach(mut self) -> LabInfo {
        self.armed = false;
        self.info.clone()
    }

    /// The state of lab `name` (`down` when nothing of it exists).
    pub fn status(name: &str) -> Result<LabStatus, LabError> {
        validate_name(name)?;
        let present = lab_namespaces(name)?;
        let info: Option<LabInfo> = std::fs::read_to_string(state_dir(name).join("lab.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let relay_running = info.as_ref().and_then(|i| {
            (i.stage.kind == "relay").then(|| !find_relays(&state_dir(name)).is_empty())
        });
        let state = match &info {
            Some(i)
                if i.namespaces.iter().all(|n| present.contains(n))
                    && relay_running != Some(false) =>
            {
                "up"
            }
            None if present.is_empty() && !state_dir(name).exists() => "down",
            _ => "partial",
        };
        Ok(LabStatus {
            name: name.to_string(),
            state: state.into(),
            namespaces_present: present,
            relay_running,
            info,
        })
    }

    /// Every lab with a state dir or an `ob-NAME-{eng,imp,lnx,rtr}` namespace.
    pub fn list() -> Result<Vec<LabStatus>, LabError> {
        let mut names: Vec<String> = Vec::new();
        if let Ok(entries) = std::fs::read_dir(STATE_ROOT) {
            for e in entries.flatten() {
                if let Some(n) = e.file_name().to_str() {
                    names.push(n.to_string());
                }
            }
        }
        for ns in all_namespaces()? {
            if let Some((n, role)) = ns.strip_prefix("ob-").and_then(|r| r.rsplit_once('-')) {
                if ["eng", "imp", "lnx", "rtr"].contains(&role) {
                    names.push(n.to_string());
                }
            }
        }
        names.sort();
        names.dedup();
        names.retain(|n| validate_name(n).is_ok());
        names.iter().map(|n| Lab::status(n)).collect()
    }

    pub fn info(&self) -> &LabInfo {
        &self.info
    }
    pub fn name(&self) -> &str {
        &self.info.name
    }
    pub fn topology(&self) -> Topology {
        self.info.topology
    }
    /// `ob-NAME-eng`: run the engine here.
    pub fn engine_ns(&self) -> &str {
        &self.info.engine.namespace
    }
    /// `ob-NAME-lnx`: run Linux programs here.
    pub fn linux_ns(&self) -> &str {
        &self.info.linux.namespace
    }
    /// `ob-NAME-imp`: the bridge or the relay.
    pub fn impair_ns(&self) -> &str {
        &self.info.stage.namespace
    }
    /// `ob-NAME-rtr` in a routed lab.
    pub fn router_ns(&self) -> Option<&str> {
        self.info.router.as_ref().map(|r| r.namespace.as_str())
    }
    /// `eng0`.
    pub fn engine_iface(&self) -> &str {
        &self.info.engine.iface
    }
    /// 10.77.0.2 (not configured on eng0: the engine owns it).
    pub fn engine_addr(&self) -> Ipv4Addr {
        self.info.engine.addr
    }
    pub fn engine_prefix(&self) -> u8 {
        self.info.engine.prefix
    }
    /// The engine's default gateway (routed: 10.77.0.1).
    pub fn gateway(&self) -> Option<Ipv4Addr> {
        self.info.engine.gateway
    }
    /// The Linux address the engine talks to (direct 10.77.0.1, routed 10.78.0.2).
    pub fn linux_addr(&self) -> Ipv4Addr {
        self.info.linux.addr
    }
    /// With IPv6: the engine's address (fd77::2), its IPv6 gateway (routed:
    /// fd77::1) and Linux's address.
    pub fn engine_addr6(&self) -> Option<Ipv6Addr> {
        self.info.engine.addr6
    }
    pub fn gateway6(&self) -> Option<Ipv6Addr> {
        self.info.engine.gateway6
    }
    pub fn linux_addr6(&self) -> Option<Ipv6Addr> {
        self.info.linux.addr6
    }
    pub fn linux_iface(&self) -> &str {
        &self.info.linux.iface
    }
    pub fn mtu(&self) -> u32 {
        self.info.mtu
    }
    /// The relay's pid, when the stage is the relay.
    pub fn relay_pid(&self) -> Option<u32> {
        self.info.stage.relay_pid
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.armed {
            let _ = down_with(&self.info.name, self.relay.as_mut());
        }
    }
}

fn down_with(name: &str, child: Option<&mut Child>) -> Result<DownReport, LabError> {
    validate_name(name)?;
    need_root()?;
    need_tools(&["ip"])?;
    let dir = state_dir(name);
    let relays_stopped = stop_relays(&dir, child);
    let relay_report = std::fs::read_to_string(dir.join("relay-report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let mut namespaces_deleted = Vec::new();
    let mut failure = None;
    for ns in lab_namespaces(name)? {
        match run_cmd(&argv(&["ip", "netns", "del", &ns])) {
            Ok(_) => namespaces_deleted.push(ns),
            Err(e) => failure = Some(e),
        }
    }
    let state_dir_removed = match std::fs::remove_dir_all(&dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_err(format!("remove {}", dir.display()), e)),
    };
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(DownReport {
        name: name.to_string(),
        namespaces_deleted,
        relays_stopped,
        relay_report,
        state_dir_removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "lab1", "abcdefgh", "0"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "abcdefghi", "Lab", "a-b", "a b", "ü", "../x"] {
            assert!(
                matches!(validate_name(bad), Err(LabError::BadName(_))),
                "{bad}"
            );
        }
    }

    fn has(plan: &[Vec<String>], words: &[&str]) -> bool {
        plan.iter().any(|s| {
            let line = s.join(" ");
            words.iter().all(|w| line.contains(w))
        })
    }

    #[test]
    fn direct_plan_wires_a_bridge_and_leaves_eng0_unaddressed() {
        let info = describe(&LabConfig::new("x1"));
        assert_eq!(info.namespaces, ["ob-x1-eng", "ob-x1-imp", "ob-x1-lnx"]);
        assert_eq!(info.stage.kind, "bridge");
        let p = plan(&info);
        assert!(has(
            &p,
            &[
                "ip link add eng0 netns ob-x1-eng numrxqueues 1 numtxqueues 1 mtu 1500",
                "peer name imp-e netns ob-x1-imp"
            ]
        ));
        assert!(has(
            &p,
            &[
                "ip link add imp-l netns ob-x1-imp",
                "peer name lnx0 netns ob-x1-lnx"
            ]
        ));
        assert!(has(&p, &["ip -n ob-x1-imp link add br0 type bridge"]));
        assert!(has(&p, &["link set imp-e master br0"]));
        assert!(has(&p, &["ip -n ob-x1-lnx addr add 10.77.0.1/24 dev lnx0"]));
        assert!(has(&p, &["net.ipv6.conf.eng0.disable_ipv6=1"]));
        assert!(has(&p, &["ip -n ob-x1-eng link set eng0 up"]));
        for i in ["lnx0", "imp-e", "imp-l", "br0"] {
            assert!(has(&p, &["ethtool -K", &format!(" {i} tx off")]), "{i}");
        }
        // The engine owns its address; eng0 keeps its offloads (the engine's frames are complete).
        assert!(!p
            .iter()
            .any(|s| s.contains(&"ob-x1-eng".to_string()) && s.contains(&"addr".to_string())));
        assert!(!has(&p, &["ethtool", "eng0"]));
        // Namespaces exist before links; links before addresses.
        let pos = |w: &str| p.iter().position(|s| s.join(" ").contains(w)).unwrap();
        assert!(pos("netns add ob-x1-lnx") < pos("type veth"));
        assert!(pos("disable_ipv6") < pos("link set eng0 up"));
        assert_eq!(
            info.commands.engine,
            "ip netns exec ob-x1-eng outboard engine --link af_packet:eng0 --addr 10.77.0.2/24"
        );
    }

    #[test]
    fn routed_plan_has_a_router_and_routes() {
        let mut cfg = LabConfig::new("r9");
        cfg.topology = Topology::Routed;
        cfg.mtu = 9000;
        cfg.impairment.loss = 0.1;
        let info = describe(&cfg);
        assert_eq!(
            info.namespaces,
            ["ob-r9-eng", "ob-r9-imp", "ob-r9-rtr", "ob-r9-lnx"]
        );
        assert_eq!(info.stage.kind, "relay");
        assert_eq!(info.engine.gateway, Some(Ipv4Addr::new(10, 77, 0, 1)));
        assert_eq!(info.linux.addr, Ipv4Addr::new(10, 78, 0, 2));
        let p = plan(&info);
        assert!(has(
            &p,
            &[
                "ip link add imp-l netns ob-r9-imp",
                "peer name rtr-e netns ob-r9-rtr",
                "mtu 9000"
            ]
        ));
        assert!(has(
            &p,
            &[
                "ip link add rtr-l netns ob-r9-rtr",
                "peer name lnx0 netns ob-r9-lnx"
            ]
        ));
        assert!(has(
            &p,
            &["ip -n ob-r9-rtr addr add 10.77.0.1/24 dev rtr-e"]
        ));
        assert!(has(
            &p,
            &["ip -n ob-r9-rtr addr add 10.78.0.1/24 dev rtr-l"]
        ));
        assert!(has(
            &p,
            &["ip netns exec ob-r9-rtr sysctl -qw net.ipv4.ip_forward=1"]
        ));
        assert!(has(&p, &["ip -n ob-r9-lnx addr add 10.78.0.2/24 dev lnx0"]));
        assert!(has(
            &p,
            &["ip -n ob-r9-lnx route add default via 10.78.0.1"]
        ));
        assert!(!has(&p, &["bridge"]));
        for i in ["rtr-e", "rtr-l", "lnx0", "imp-e", "imp-l"] {
            assert!(has(&p, &["ethtool -K", &format!(" {i} tx off")]), "{i}");
        }
        assert!(info.commands.engine.ends_with("--gateway 10.77.0.1"));
    }

    #[test]
    fn impairment_args_round_trip_and_configs() {
        let imp = Impairment {
            loss: 0.2,
            delay_ms: 20.0,
            rate_mbit: 1.5,
            ..Impairment::default()
        };
        assert!(!imp.is_none());
        assert!(Impairment::default().is_none());
        let args = imp.to_args();
        let i = args.iter().position(|a| a == "--loss").unwrap();
        assert_eq!(args[i + 1], "0.2");
        let f = imp.fault_config();
        assert_eq!(f.delay, Duration::from_millis(20));
        assert_eq!(f.bandwidth_bps, 1_500_000);
        assert!(Impairment {
            loss: 1.5,
            ..Impairment::default()
        }
        .validate()
        .is_err());
        assert!(Impairment {
            jitter_ms: f64::NAN,
            ..Impairment::default()
        }
        .validate()
        .is_err());
        let mut cfg = LabConfig::new("ok");
        cfg.mtu = 10_000;
        assert!(matches!(cfg.validate(), Err(LabError::BadConfig(_))));
    }

    #[test]
    fn exit_codes() {
        assert_eq!(LabError::NeedsRoot("x".into()).exit_code(), 10);
        assert_eq!(LabError::Exists("x".into()).exit_code(), 13);
        assert!(LabError::Exists("ab".into())
            .to_string()
            .contains("lab ab is up; run `outboard lab down ab`"));
        assert!(LabError::NeedsRoot("x".into())
            .to_string()
            .starts_with("needs root: network namespaces"));
        let m = LabError::MissingTool {
            tool: "ethtool".into(),
            package: "ethtool".into(),
        };
        assert!(m.to_string().contains("apt-get install ethtool"));
    }
}
