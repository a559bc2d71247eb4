//! `outboard msg`: an engine of its own as a message-protocol client — calls
//! to a mailbox (each response checked against its request; the `echo`
//! mailbox answers with the request) or a stream of reliable messages to
//! the `sink` mailbox (checked against the digest the sink reports).

use crate::args;
use crate::engine_cmd::{fail, settings, usage, EngineFlags};
use clap::Args;
use outboard_engine::engine::Engine;
use outboard_engine::messages::{JobKind, JobPlan, JobState, MessageApp, MessageSettings, Target};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MsgArgs {
    #[command(flatten)]
    pub flags: EngineFlags,
    /// The mailbox: HOST:PORT/NUMBER or HOST:PORT/NAME (a name is looked up at that engine),
    /// e.g. 10.77.0.1:7373/echo.
    #[arg(long, value_parser = parse_target)]
    pub to: (SocketAddr, Target),
    /// Make this many calls (1 to 10^6), each response checked against its request.
    #[arg(long, value_parser = args::message_count(), conflicts_with = "send")]
    pub calls: Option<u64>,
    /// Send this many bytes of a seeded stream as reliable messages, then check the receiver's digest.
    #[arg(long, value_parser = args::nonzero_size())]
    pub send: Option<u64>,
    /// Request or message size (8 B to 1 MiB; default 64 B for calls, 64 KiB for --send).
    #[arg(long, value_parser = args::message_size())]
    pub size: Option<u64>,
    /// Calls in flight at once (1 to 4096).
    #[arg(long, default_value_t = 16, value_parser = args::outstanding_calls())]
    pub outstanding: usize,
    /// Seed of the requests or the stream.
    #[arg(long, default_value_t = 1)]
    pub stream_seed: u64,
    /// Give up after this many seconds (0.001 to a year).
    #[arg(long, default_value = "120", value_parser = args::run_seconds())]
    pub timeout_s: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_target(s: &str) -> Result<(SocketAddr, Target), String> {
    let (host, mb) = s.rsplit_once('/').ok_or_else(|| format!("{s:?}: use HOST:PORT/MAILBOX (a number or a name)"))?;
    let host: SocketAddr = host.parse().map_err(|_| format!("{host:?}: use an address and port, e.g. 10.77.0.1:7373"))?;
    if mb.is_empty() || mb.len() > 255 {
        return Err(format!("{mb:?}: a mailbox is a number or a name of 1 to 255 bytes"));
    }
    let target = match mb.parse::<u32>() {
        Ok(0) => return Err("mailbox 0 is the engine's control mailbox; name another".into()),
        Ok(n) => Target::Number(n),
        Err(_) => Target::Name(mb.to_string()),
    };
    Ok((host, target))
}

pub fn msg(a: &MsgArgs) -> ExitCode {
    let kind = match (a.calls, a.send) {
        (Some(count), None) => JobKind::Calls { count, size: a.size.unwrap_or(64) as usize, outstanding: a.outstanding },
        (None, Some(bytes)) => JobKind::Messages { bytes, size: a.size.unwrap_or(64 << 10) as usize },
        _ => return usage("say what to do: --calls N or --send BYTES"),
    };
    let mut flags = a.flags.clone();
    if flags.name.is_none() {
        flags.name = Some(format!("msg-{}", std::process::id()));
    }
    let mut set = match settings(&flags, None, "none") {
        Ok(s) => s,
        Err(m) => return usage(m),
    };
    if a.to.0.is_ipv6() && set.ipv6.is_none() {
        return usage(format!("--to {}: an IPv6 engine needs an IPv6 --addr (or --ipv6 on)", a.to.0));
    }
    if let Some(v6) = set.ipv6.as_mut() {
        v6.dad_transmits = 0;
    }
    let port = set.messages.as_ref().map_or(outboard_wire::msg::DEFAULT_PORT, |m| m.port);
    set.messages = Some(MessageSettings::new(port));
    let stop = outboard_engine::signals::stop_on_signals();
    let mut engine = match Engine::start(&set) {
        Ok(e) => e,
        Err(e) => return fail(&e),
    };
    engine.message_job(JobPlan { host: a.to.0, target: a.to.1.clone(), kind, seed: a.stream_seed });
    let deadline = outboard_engine::clock::now() + Duration::from_secs_f64(a.timeout_s);
    let job_over = |s: &outboard_engine::shard::Shard| {
        s.apps.get::<MessageApp>().is_none_or(|a| a.lock().job_finished()) || outboard_engine::clock::now() >= deadline
    };
    if let Err(e) = engine.run(stop, job_over) {
        return fail(&e);
    }
    // Let the last acknowledgements leave before the process (and its link) goes.
    let linger = outboard_engine::clock::now() + Duration::from_millis(50);
    let _ = engine.run(stop, |_| outboard_engine::clock::now() >= linger);
    let Some(r) = engine.message_job_report() else {
        eprintln!("outboard: the engine has no message client");
        return ExitCode::from(1);
    };
    let ok = r.state == JobState::Done && r.verified;
    if a.json {
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        v["ok"] = serde_json::Value::Bool(ok);
        println!("{v}");
    } else if a.calls.is_some() {
        println!(
            "msg {} {:?}{}: {} calls in {:.3} s ({:.0} calls/s), round trip p50 {:.1} us p99 {:.1} us max {:.1} us{}",
            r.target,
            r.state,
            r.error.as_ref().map_or(String::new(), |e| format!(" ({e})")),
            r.done,
            r.elapsed_s,
            r.rate,
            r.p50_us,
            r.p99_us,
            r.max_us,
            if r.verified { ", every response verified" } else { "" }
        );
    } else {
        println!(
            "msg {} {:?}{}: {} bytes in {} messages in {:.3} s ({:.1} Mbit/s){}",
            r.target,
            r.state,
            r.error.as_ref().map_or(String::new(), |e| format!(" ({e})")),
            r.bytes,
            r.done,
            r.elapsed_s,
            r.rate * 8.0 / 1e6,
            if r.verified { ", the receiver's digest matches: every byte once, in order" } else { "" }
        );
    }
    if !ok && r.state != JobState::Done && r.error.is_none() {
        eprintln!("outboard: msg did not finish within {} s", a.timeout_s);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
