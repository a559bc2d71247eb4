//! `outboard lab up|down|status` and the hidden `outboard relay`: the
//! command-line face of the `outboard-lab` crate (see its docs for the
//! topology and the design). Exit codes: 0 ok, 1 other failure, 2 bad
//! arguments, 10 needs root, 11 a tool is missing, 12 a command failed,
//! 13 the lab is already up, 14 the relay failed.

use crate::args;
use clap::{Args, Subcommand, ValueEnum};
use outboard_lab::relay::{self, RelayConfig};
use outboard_lab::{Impairment, Lab, LabConfig, LabError, LabInfo, LabStatus, Topology};
use std::path::PathBuf;
use std::process::ExitCode;

const LAB_HELP: &str = "\
Topology for lab NAME (namespaces ob-NAME-eng, ob-NAME-imp, ob-NAME-lnx, and ob-NAME-rtr when routed):
  direct: eng[eng0] -- [imp-e] imp [imp-l] -- [lnx0] lnx
          engine 10.77.0.2/24 (not configured on eng0: the engine owns it), Linux 10.77.0.1/24
  routed: eng[eng0] -- imp -- [rtr-e] rtr [rtr-l] -- [lnx0] lnx
          engine 10.77.0.2/24 gateway 10.77.0.1 (rtr-e), rtr-l 10.78.0.1/24, Linux 10.78.0.2/24

Impairment: without any impairment flag a kernel bridge joins imp-e and imp-l. With one, our
seeded relay (`outboard relay`) forwards every frame through a fault injector per direction
(seeds S and S+1) and reports what it did when the lab goes down. Every impairment is done in
the relay, not with netem or nftables, because their randomness (`numgen random`) cannot be
seeded: a relay run is reproducible from its seed.

Needs root, iproute2, ethtool and procps (sysctl). State lives in /run/outboard/lab/NAME/.
Exit codes: 0 ok, 2 bad arguments, 10 needs root, 11 tool missing, 12 a command failed,
13 lab already up, 14 relay failed, 1 other.";

#[derive(Subcommand, Debug)]
#[command(after_help = LAB_HELP)]
pub enum LabCommand {
    /// Create lab NAME (impairments are done by our seeded relay, not netem/nftables, which cannot be seeded).
    #[command(after_long_help = LAB_HELP)]
    Up(UpArgs),
    /// Remove lab NAME: stop its relay (printing its report), delete its namespaces and state. Idempotent.
    Down(DownArgs),
    /// Show lab NAME, or every lab.
    Status(StatusArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TopologyArg {
    Direct,
    Routed,
}

/// The relay's knobs: the same names and parsers as `outboard sim transfer`.
#[derive(Args, Debug, Clone)]
pub struct ImpairArgs {
    /// Probability a frame is lost (0.01 or 1%), in each direction (0% to 25%, with
    /// --corrupt: at most 25% together).
    #[arg(long, default_value = "0", value_parser = args::loss())]
    pub loss: f64,
    /// Probability a frame is delivered twice.
    #[arg(long, default_value = "0", value_parser = args::probability())]
    pub duplicate: f64,
    /// Probability one bit of a frame is flipped (0% to 25%).
    #[arg(long, default_value = "0", value_parser = args::loss())]
    pub corrupt: f64,
    /// Probability a frame is held back so later frames overtake it.
    #[arg(long, default_value = "0", value_parser = args::probability())]
    pub reorder: f64,
    /// Largest extra delay of a reordered frame, in milliseconds (0 to 1000).
    #[arg(long, default_value = "1", value_parser = args::delay_ms())]
    pub reorder_delay_ms: f64,
    /// One-way delay in milliseconds, each direction (RTT grows by twice this; 0 to 1000).
    #[arg(long, default_value = "0", value_parser = args::delay_ms())]
    pub delay_ms: f64,
    /// Random extra delay per frame, up to this many milliseconds (0 to 1000).
    #[arg(long, default_value = "0", value_parser = args::delay_ms())]
    pub jitter_ms: f64,
    /// Link rate in Mbit/s, each direction (0 = unlimited, else 0.1 to 100000).
    #[arg(long, default_value = "0", value_parser = args::rate_mbit())]
    pub rate_mbit: f64,
    /// Bytes the rate limiter queues before it tail-drops (with --rate-mbit; 16 KiB to 1 GiB).
    #[arg(long, default_value = "256KiB", value_parser = args::queue_bytes())]
    pub queue_bytes: u64,
}

impl ImpairArgs {
    fn impairment(&self) -> Impairment {
        Impairment {
            loss: self.loss,
            duplicate: self.duplicate,
            corrupt: self.corrupt,
            reorder: self.reorder,
            reorder_delay_ms: self.reorder_delay_ms,
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            rate_mbit: self.rate_mbit,
            queue_bytes: self.queue_bytes,
        }
    }
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Lab name: 1 to 8 of a-z 0-9.
    pub name: String,
    /// direct: engine and Linux on one segment; routed: a Linux router between them.
    #[arg(long, value_enum, default_value = "direct")]
    pub topology: TopologyArg,
    /// MTU of every veth (68 to 9000; the engine needs at least 576).
    #[arg(long, default_value_t = 1500, value_parser = args::lab_mtu())]
    pub mtu: u32,
    #[command(flatten)]
    pub impair: ImpairArgs,
    /// Seed of the relay's random choices (directions use S and S+1).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Use the relay even without impairment (to measure it or get its report).
    #[arg(long)]
    pub relay: bool,
    /// Receive/transmit queues of the engine's veth pair (1 to 16): one per shard of an
    /// af_xdp engine (`outboard engine --shards N`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub queues: u32,
    /// IPv6 beside IPv4: Linux fd77::1/64 (routed: fd78::2/64 behind router fd77::1 and
    /// fd78::1); give the engine fd77::2/64 with a second --addr.
    #[arg(long)]
    pub ipv6: bool,
    /// Routed only: MTU of the router-to-Linux hop (576 to --mtu), narrower than the engine's
    /// link, with Linux advertising the wide MSS: exercises path MTU discovery.
    #[arg(long)]
    pub far_mtu: Option<u32>,
    /// Print the lab's description as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// Lab name.
    pub name: String,
    /// Print what was done (and the relay's report) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Lab name; every lab when left out.
    pub name: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// `outboard relay`: forwards frames between two interfaces through the seeded injector.
#[derive(Args, Debug)]
pub struct RelayArgs {
    /// Interface a (the engine's side).
    #[arg(long)]
    pub a: String,
    /// Interface b (Linux's side).
    #[arg(long)]
    pub b: String,
    /// Seed: a→b uses S, b→a uses S+1.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub impair: ImpairArgs,
    /// Write the JSON report here on SIGTERM/SIGINT.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Create this file (holding the pid) once the sockets are bound.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
}

fn fail(what: &str, e: &LabError) -> ExitCode {
    eprintln!("outboard {what}: {e}");
    ExitCode::from(e.exit_code())
}

fn pretty<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

pub fn run(cmd: LabCommand) -> ExitCode {
    match cmd {
        LabCommand::Up(a) => up(&a),
        LabCommand::Down(a) => down(&a),
        LabCommand::Status(a) => status(&a),
    }
}

fn up(a: &UpArgs) -> ExitCode {
    if let Err(e) = args::check_loss(a.impair.loss, a.impair.corrupt) {
        eprintln!("outboard lab up: {e}");
        return ExitCode::from(2);
    }
    let cfg = LabConfig {
        name: a.name.clone(),
        topology: match a.topology {
            TopologyArg::Direct => Topology::Direct,
            TopologyArg::Routed => Topology::Routed,
        },
        mtu: a.mtu,
        impairment: a.impair.impairment(),
        seed: a.seed,
        force_relay: a.relay,
        relay_exe: None,
        queues: a.queues,
        ipv6: a.ipv6,
        far_mtu: a.far_mtu,
    };
    match Lab::up(&cfg) {
        Ok(lab) => {
            let info = lab.detach();
            if a.json {
                println!("{}", pretty(&info));
            } else {
                print_info(&info);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("lab up", &e),
    }
}

fn print_info(i: &LabInfo) {
    println!("lab {} ({}, MTU {})", i.name, i.topology, i.mtu);
    println!("  namespaces: {}", i.namespaces.join(" "));
    for l in &i.links {
        println!("  veth: {}:{} <-> {}:{}", l.a_ns, l.a_if, l.b_ns, l.b_if);
    }
    let e = &i.engine;
    let gw = e
        .gateway
        .map(|g| format!(", gateway {g}"))
        .unwrap_or_default();
    println!(
        "  engine: {} in {}, address {}/{}{gw} (not configured on {}: the engine owns it)",
        e.iface, e.namespace, e.addr, e.prefix, e.iface
    );
    if let Some(a) = e.addr6 {
        let gw = e.gateway6.map(|g| format!(", gateway {g}")).unwrap_or_default();
        println!("  engine IPv6: {a}/64{gw}");
    }
    if let Some(r) = &i.router {
        println!(
            "  router: {} in {}, {}/24; {} {}/24; forwarding on",
            r.east_iface, r.namespace, r.east_addr, r.west_iface, r.west_addr
        );
    }
    let l = &i.linux;
    let gw = l
        .gateway
        .map(|g| format!(", default via {g}"))
        .unwrap_or_default();
    println!(
        "  linux: {} in {}, address {}/{}{gw}",
        l.iface, l.namespace, l.addr, l.prefix
    );
    if let Some(a) = l.addr6 {
        let gw = l.gateway6.map(|g| format!(", default via {g}")).unwrap_or_default();
        println!("  linux IPv6: {a}/64{gw}");
    }
    let s = &i.stage;
    if s.kind == "relay" {
        println!(
            "  impairment: relay pid {} in {}, seed {}: {}",
            s.relay_pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "?".into()),
            s.namespace,
            s.seed,
            s.impairment.summary()
        );
        if let Some(log) = &s.log {
            println!("    log {log}; report on `lab down`");
        }
    } else {
        println!("  impairment: none (kernel bridge br0 in {})", s.namespace);
    }
    println!("run the engine:      {}", i.commands.engine);
    println!(
        "run Linux programs:  {}PROGRAM   e.g. {}",
        i.commands.linux, i.commands.linux_ping
    );
    println!("tear it down:        {}", i.commands.down);
}

fn down(a: &DownArgs) -> ExitCode {
    match Lab::down(&a.name) {
        Ok(r) => {
            if a.json {
                println!("{}", pretty(&r));
            } else if r.namespaces_deleted.is_empty()
                && !r.state_dir_removed
                && r.relays_stopped.is_empty()
            {
                println!("lab {} was not up; nothing to do", r.name);
            } else {
                println!(
                    "lab {} is down: deleted {}",
                    r.name,
                    r.namespaces_deleted.join(" ")
                );
                match &r.relay_report {
                    Some(rep) => println!("relay report:\n{}", pretty(rep)),
                    None if !r.relays_stopped.is_empty() => {
                        println!("relay (pid {:?}) left no report", r.relays_stopped)
                    }
                    None => {}
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("lab down", &e),
    }
}

fn print_status(s: &LabStatus) {
    let relay = match s.relay_running {
        Some(true) => ", relay running",
        Some(false) => ", relay NOT running",
        None => "",
    };
    println!("lab {}: {}{relay}", s.name, s.state);
    if s.namespaces_present.is_empty() {
        println!("  no namespaces");
    } else {
        println!("  namespaces: {}", s.namespaces_present.join(" "));
    }
    if let Some(i) = &s.info {
        print_info(i);
    }
}

fn status(a: &StatusArgs) -> ExitCode {
    match &a.name {
        Some(n) => match Lab::status(n) {
            Ok(s) => {
                if a.json {
                    println!("{}", pretty(&s));
                } else {
                    print_status(&s);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail("lab status", &e),
        },
        None => match Lab::list() {
            Ok(all) => {
                if a.json {
                    println!("{}", pretty(&all));
                } else if all.is_empty() {
                    println!("no labs");
                } else {
                    for s in &all {
                        print_status(s);
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail("lab status", &e),
        },
    }
}

pub fn relay(args: &RelayArgs) -> ExitCode {
    if let Err(e) = crate::args::check_loss(args.impair.loss, args.impair.corrupt) {
        eprintln!("outboard relay: {e}");
        return ExitCode::from(2);
    }
    let impairment = args.impair.impairment();
    if let Err(e) = impairment.validate() {
        return fail("relay", &e);
    }
    let cfg = RelayConfig {
        a: args.a.clone(),
        b: args.b.clone(),
        seed: args.seed,
        impairment,
        report: args.report.clone(),
        ready_file: args.ready_file.clone(),
    };
    eprintln!(
        "outboard relay: {} <-> {}, seed {}: {}",
        cfg.a,
        cfg.b,
        cfg.seed,
        cfg.impairment.summary()
    );
    match relay::run(&cfg) {
        Ok(report) => {
            println!("{}", pretty(&report));
            ExitCode::SUCCESS
        }
        Err(e) => fail("relay", &e),
    }
}
