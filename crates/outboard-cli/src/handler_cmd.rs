//! `outboard handler load|unload|enable|list`: handlers on a running engine,
//! through its control socket (docs/HANDLERS.md "Loading").

use crate::handler_spec;
use clap::{Args, Subcommand};
use outboard_engine::messages::handlers::LoadRequest;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum HandlerCommand {
    /// Load a mailbox handler (or replace the one of that name, keeping its mailbox and key-value
    /// store): NAME=FILE.wasm:mailbox=M[:memory=SIZE][:deadline_ms=N][:max_faults=N][:kv=SIZE].
    Load(LoadArgs),
    /// Unload a handler: what waits in its mailbox runs through it first, then the mailbox goes.
    Unload(NameArgs),
    /// Enable a handler that repeated faults disabled.
    Enable(NameArgs),
    /// The engine's handlers, their state and counters.
    List(ListArgs),
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The engine (as `outboard engine --name`).
    #[arg(long, default_value = "default")]
    pub name: String,
    #[arg(value_parser = handler_spec::parse)]
    pub spec: handler_spec::HandlerArg,
}

#[derive(Args, Debug)]
pub struct NameArgs {
    #[arg(long, default_value = "default")]
    pub name: String,
    /// The handler's name.
    pub handler: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[arg(long, default_value = "default")]
    pub name: String,
    #[arg(long)]
    pub json: bool,
}

/// Sends `request` to engine `name`; the answer's JSON, or exit 3 (no engine) / 1 (refused).
fn ask(name: &str, request: &str) -> Result<serde_json::Value, ExitCode> {
    let answer = outboard_engine::control::query(name, request).map_err(|e| {
        eprintln!("outboard: {e}");
        ExitCode::from(3)
    })?;
    let v: serde_json::Value = serde_json::from_str(&answer).map_err(|_| {
        eprintln!("outboard: the engine answered: {answer}");
        ExitCode::from(1)
    })?;
    if let Some(e) = v["error"].as_str() {
        eprintln!("outboard: {e}");
        return Err(ExitCode::from(1));
    }
    Ok(v)
}

pub fn main(c: &HandlerCommand) -> ExitCode {
    let r = match c {
        HandlerCommand::Load(a) => {
            // The engine reads the module itself: give it an absolute path.
            let path = match std::fs::canonicalize(&a.spec.path) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("outboard: handler {}: {}: {e}", a.spec.name, a.spec.path.display());
                    return ExitCode::from(2);
                }
            };
            let handler_spec::AttachSpec::Mailbox(mailbox) = a.spec.attach.clone() else {
                eprintln!("outboard: handler {}: TCP handlers are loaded when the engine starts (--handler NAME=FILE:tcp=PORT); at runtime, mailbox handlers", a.spec.name);
                return ExitCode::from(2);
            };
            let req = LoadRequest { name: a.spec.name.clone(), path: path.display().to_string(), mailbox, limits: a.spec.limits };
            let line = serde_json::to_string(&req).expect("a load request serialises");
            ask(&a.name, &format!("handler load {line}")).map(|v| println!("handler {} on mailbox {}", a.spec.name, v["mailbox"]))
        }
        HandlerCommand::Unload(a) => ask(&a.name, &format!("handler unload {}", a.handler)).map(|_| println!("handler {} unloaded", a.handler)),
        HandlerCommand::Enable(a) => ask(&a.name, &format!("handler enable {}", a.handler)).map(|_| println!("handler {} enabled", a.handler)),
        HandlerCommand::List(a) => ask(&a.name, "handler list").map(|v| {
            if a.json {
                println!("{v}");
                return;
            }
            let rows = v["handlers"].as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                println!("no handlers");
            }
            for h in rows {
                let s = &h["stats"];
                println!(
                    "{} {} {}: invocations {} failed-answers {} overruns {} out-of-bounds {} traps {} instances {} kv {} keys",
                    h["name"].as_str().unwrap_or("?"),
                    h["attached"].as_str().unwrap_or("?"),
                    h["state"].as_str().unwrap_or("?"),
                    s["invocations"],
                    h["failed_answers"],
                    s["overruns"],
                    s["out_of_bounds"],
                    s["traps"],
                    s["instances"],
                    h["kv_keys"],
                );
            }
        }),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
