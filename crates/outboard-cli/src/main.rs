//! `outboard`: the command-line face of the Outboard communication processor.
//!
//! Exit codes: 0 success; 1 the run failed its own check (e.g. a transfer
//! that did not arrive byte-exact); 2 bad command line.

mod args;
mod bench;
mod demo;
mod engine_cmd;
mod handler_cmd;
mod handler_spec;
mod lab;
mod run_cmd;
mod run_detect;
mod metrics;
mod msg_cmd;
mod service;
mod sim;
mod sim_messages;
mod top;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "outboard", version, about = "A software communication processor: a user-space TCP/IP engine.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Two engine processes move data across a faulty shared-memory fabric (no root needed).
    Demo(demo::DemoArgs),
    /// The deterministic simulator.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Benchmarks: ours beside the alternative, in one run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the engine on a link: af_xdp, af_packet, tap or fabric, with built-in services.
    Engine(engine_cmd::EngineArgs),
    /// Connections, counters and memory of a running engine.
    Stat(engine_cmd::StatArgs),
    /// A live view of a running engine: shard load, link rates, drops, boards, busiest connections.
    Top(top::TopArgs),
    /// The engine as a TCP client: connect, send a seeded stream, read until the server closes.
    Fetch(engine_cmd::FetchArgs),
    /// The engine as a message-protocol client: calls to a mailbox, or reliable messages to a sink.
    Msg(msg_cmd::MsgArgs),
    /// Handlers (WebAssembly modules run on the engine) on a running engine: load, unload, enable, list.
    #[command(subcommand)]
    Handler(handler_cmd::HandlerCommand),
    /// Run an unmodified program with its sockets on an engine daemon (LD_PRELOAD socket shim).
    Run(run_cmd::RunArgs),
    /// Network namespaces joined by veth pairs: the engine on one end, Linux on the other, impairment between.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// The lab's seeded impairment relay between two interfaces (started by `outboard lab up`).
    #[command(hide = true)]
    Relay(lab::RelayArgs),
    /// One application process of `bench latency` / `bench throughput` (started by them).
    #[command(hide = true)]
    BenchPeer(bench::peer::PeerArgs),
}

#[derive(Subcommand, Debug)]
enum SimCommand {
    /// A TCP transfer between two simulated hosts, verified byte for byte and by SHA-256.
    Transfer(sim::TransferArgs),
    /// Two simulated hosts move data across a faulty simulated network, in virtual time.
    Demo(sim::DemoArgs),
    /// One message service (reliable, rpc or datagram) between two simulated hosts, verified.
    Messages(sim_messages::MessagesArgs),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Internet checksum and fused copy+checksum throughput against memcpy.
    Checksum(ChecksumArgs),
    /// The engine vs Linux on the lab's veth pair: throughput and 64-byte round trips (root).
    Link(bench::link::LinkArgs),
    /// 64-byte round trips between two applications through two engines on the fabric vs Linux TCP on loopback (no root).
    Latency(bench::latency::LatencyArgs),
    /// Application-to-application throughput and CPU efficiency against write size, ours vs Linux TCP (no root).
    Throughput(bench::throughput::ThroughputArgs),
    /// Unmodified servers (redis, nginx, iperf3, sockperf) under the socket shim vs on the kernel, on the lab's veth (root).
    Apps(bench::apps::AppsArgs),
    /// Protocol-processing throughput against the number of shards: speedup and efficiency (CDP), synthetic in-memory load (no root).
    Scale(bench::scale::ScaleArgs),
    /// Live upgrade under load: the longest gap a Linux peer sees in an echo transfer and a
    /// request/response loop, without and with `engine --upgrade` (root, the lab).
    Upgrade(bench::upgrade::UpgradeArgs),
    /// RPC round trips and rate, and reliable-message throughput: two engines on the fabric vs the kernel's UDP and TCP on loopback (no root).
    Messages(bench::messages::MessagesArgs),
    /// An echo RPC answered by a WebAssembly handler on the engine vs an application through its board vs the kernel's UDP, and the sandbox's own costs (no root).
    Handlers(bench::handlers::HandlersArgs),
    /// Instructions (and cycles where counters are lent) per TCP segment sent and received: our stack vs smoltcp's, same in-memory workload (no root; callgrind where no counters).
    Cost(bench::cost::CostArgs),
}

#[derive(Args, Debug)]
struct ChecksumArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Seconds spent on each (size, operation) case (0.001 to 3600).
    #[arg(long, default_value = "0.3", value_parser = args::bench_seconds())]
    seconds: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(a) => demo::demo(&a),
        Command::Sim(SimCommand::Demo(a)) => sim::demo(&a),
        Command::Sim(SimCommand::Transfer(a)) => sim::transfer(&a),
        Command::Sim(SimCommand::Messages(a)) => sim_messages::messages(&a),
        Command::Engine(a) => engine_cmd::engine(&a),
        Command::Stat(a) => engine_cmd::stat(&a),
        Command::Top(a) => top::main(&a),
        Command::Fetch(a) => engine_cmd::fetch(&a),
        Command::Msg(a) => msg_cmd::msg(&a),
        Command::Handler(c) => handler_cmd::main(&c),
        Command::Run(a) => run_cmd::main(&a),
        Command::Lab(c) => lab::run(c),
        Command::Relay(a) => lab::relay(&a),
        Command::Bench(BenchCommand::Checksum(a)) => {
            let report = bench::checksum::run(Duration::from_secs_f64(a.seconds.max(0.005)));
            if a.json {
                println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
            } else {
                bench::checksum::print_table(&report);
            }
            ExitCode::SUCCESS
        }
        Command::Bench(BenchCommand::Link(a)) => bench::link::main(&a),
        Command::Bench(BenchCommand::Latency(a)) => bench::latency::main(&a),
        Command::Bench(BenchCommand::Throughput(a)) => bench::throughput::main(&a),
        Command::Bench(BenchCommand::Apps(a)) => bench::apps::main(&a),
        Command::Bench(BenchCommand::Scale(a)) => bench::scale::main(&a),
        Command::Bench(BenchCommand::Upgrade(a)) => bench::upgrade::main(&a),
        Command::Bench(BenchCommand::Messages(a)) => bench::messages::main(&a),
        Command::Bench(BenchCommand::Handlers(a)) => bench::handlers::main(&a),
        Command::Bench(BenchCommand::Cost(a)) => bench::cost::main(&a),
        Command::BenchPeer(a) => bench::peer::main(&a),
    }
}
