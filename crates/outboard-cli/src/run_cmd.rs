//! `outboard run [--name NAME] [--shim PATH] -- CMD ARGS…`: runs an unmodified
//! program with its sockets on an engine daemon, through the socket shim
//! (`liboutboard_shim.so`, an `LD_PRELOAD` library).
//!
//! It puts the shim first in `LD_PRELOAD` (keeping what was there), sets
//! `OUTBOARD_ENGINE` to the engine's name and `OUTBOARD_RUN_DIR` to the run
//! directory the engine's board socket was found in (the one already set, or
//! the default), checks that the engine is there, then `exec`s the program:
//! its pid, stdio, signals and exit status are the program's, and what it
//! execs in turn stays under the shim (`LD_PRELOAD` is inherited).
//!
//! The shim is `--shim PATH`, else `$OUTBOARD_SHIM`, else
//! `liboutboard_shim.so` beside the `outboard` executable, else in its
//! `deps/` directory (where `cargo build` leaves it), else in `../lib/`
//! (where `scripts/install.sh` puts it for `PREFIX/bin/outboard`).
//!
//! Before the exec it looks at the program (`run_detect`): a statically
//! linked executable (no dynamic loader, so `LD_PRELOAD` is never read) or a
//! Go program (its runtime makes socket system calls itself, not through
//! libc) would keep its sockets on the kernel. For those it says so on
//! stderr, once, and runs the program anyway; with `--require-engine` it
//! exits 5 instead, before running it. A `#!` script is judged by its
//! interpreter.
//!
//! `outboard run --inline --link KIND:ARGS --addr A.B.C.D/P [--gateway G]
//! [--mtu N] [--allow-kernel-address] [--name NAME] -- CMD ARGS…` runs the engine inside the program
//! instead (Onload's model, no daemon): the shim is then
//! `liboutboard_shim_inline.so` (found the same way), which starts the
//! engine as a thread of the program at its first engine socket, on that
//! link and address, named NAME (default `inline-PID`, the program's pid;
//! `outboard stat --name` sees it while the program runs). The flags are
//! checked here (exit 2 with the range that works); the link itself is
//! opened by the program, which says why on stderr if it cannot (and runs
//! on the kernel, or exits 4 with `--require-engine`). One process per
//! engine: a forked child does not share it (see the library's doc).
//!
//! Exit codes (before the program runs): 2 bad command line; 3 no such
//! engine (no board socket `RUN_DIR/NAME.board`); 4 the engine does not
//! admit this user and `--require-engine` was given; 5 the program's sockets
//! would not reach the engine (static or Go) and `--require-engine` was
//! given; 16 shim library not found; 126 the program cannot be executed;
//! 127 the program was not found. After the exec, the program's own — but
//! with `--require-engine` (`OUTBOARD_REQUIRE_ENGINE=1` for the shim) a
//! process the engine refuses later (it dropped privileges to a user the
//! engine does not admit) exits 4 at its first engine socket.

use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The shim's file name.
pub const SHIM_FILE: &str = "liboutboard_shim.so";
/// The shim with the engine inside the program (`--inline`).
pub const INLINE_SHIM_FILE: &str = "liboutboard_shim_inline.so";
/// What `--inline` tells that library (removed from a daemon run's environment).
const INLINE_VARS: [&str; 5] = [
    "OUTBOARD_INLINE_LINK",
    "OUTBOARD_INLINE_ADDR",
    "OUTBOARD_INLINE_GATEWAY",
    "OUTBOARD_INLINE_MTU",
    "OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS",
];
/// Exit code: no engine of that name (same as `outboard stat`).
pub const NO_ENGINE: u8 = 3;
/// Exit code: `--require-engine`, and the program is one whose sockets the
/// shim cannot take (statically linked, or Go).
pub const NOT_INTERPOSABLE: u8 = 5;
/// Exit code: the engine does not admit this user (`--require-engine`).
pub const NOT_ADMITTED: u8 = 4;
/// Exit code: the shim library was not found.
pub const NO_SHIM: u8 = 16;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The engine daemon to use (its `outboard engine --name`; default "default"); with
    /// --inline, the name the in-process engine answers `outboard stat` by (default inline-PID).
    #[arg(long)]
    pub name: Option<String>,
    /// The shim library (default: $OUTBOARD_SHIM, else liboutboard_shim.so, or
    /// liboutboard_shim_inline.so with --inline, beside this executable, in its deps/
    /// directory or in ../lib/).
    #[arg(long)]
    pub shim: Option<PathBuf>,
    /// Run the engine inside the program (no daemon): on --link, at --addr.
    #[arg(long, requires_all = ["link", "addr"])]
    pub inline: bool,
    /// With --inline: the link, af_xdp:IFACE[:QUEUE], af_packet:IFACE, tap:NAME or fabric:NAME.
    #[arg(long, requires = "inline", value_parser = parse_link)]
    pub link: Option<String>,
    /// With --inline: the engine's IPv4 address and prefix, e.g. 10.77.0.2/24.
    #[arg(long, requires = "inline", value_parser = parse_inline_addr)]
    pub addr: Option<String>,
    /// With --inline: the next hop for destinations outside the prefix.
    #[arg(long, requires = "inline")]
    pub gateway: Option<std::net::Ipv4Addr>,
    /// With --inline: the IP MTU, 576 to 9000 (default: the interface's; fabric and TAP 1500).
    #[arg(long, requires = "inline", value_parser = crate::args::engine_mtu())]
    pub mtu: Option<usize>,
    /// With --inline: start even when the af_xdp/af_packet interface has kernel IP addresses
    /// (as `outboard engine --allow-kernel-address`).
    #[arg(long, requires = "inline")]
    pub allow_kernel_address: bool,
    /// Fail instead of running a program whose sockets would not reach the
    /// engine: exit 5 before running a static or Go program, 4 when the engine
    /// does not admit this user (checked by attaching first), and 4 from the
    /// program itself if the engine refuses it later (after a privilege drop).
    #[arg(long)]
    pub require_engine: bool,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn parse_link(s: &str) -> Result<String, String> {
    s.parse::<outboard_engine::link::LinkSpec>().map(|_| s.to_string()).map_err(|e| e.to_string())
}

fn parse_inline_addr(s: &str) -> Result<String, String> {
    crate::engine_cmd::parse_addr(s).map(|_| s.to_string())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Where the shim is, or why it is not.
pub fn find_shim(flag: Option<&Path>) -> Result<PathBuf, String> {
    find_library(flag, SHIM_FILE)
}

/// Where the shim library `file` is ([`SHIM_FILE`] or [`INLINE_SHIM_FILE`]), or why it is not.
pub fn find_library(flag: Option<&Path>, file: &str) -> Result<PathBuf, String> {
    let (candidates, from): (Vec<PathBuf>, String) = if let Some(p) = flag {
        (vec![p.to_path_buf()], "--shim".into())
    } else if let Some(p) = std::env::var_os("OUTBOARD_SHIM").filter(|p| !p.is_empty()) {
        (vec![PathBuf::from(p)], "$OUTBOARD_SHIM".into())
    } else {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the outboard executable: {e}"))?;
        let dir = exe.parent().unwrap_or(Path::new("/")).to_path_buf();
        (
            // Beside it (a build), in its deps/ (cargo's), or PREFIX/lib for PREFIX/bin (installed).
            vec![dir.join(file), dir.join("deps").join(file), dir.join("../lib").join(file)],
            format!("beside {}, in its deps/ or in ../lib/", exe.display()),
        )
    };
    for c in &candidates {
        if c.is_file() {
            // Absolute, so the program may change directory before loading it.
            return Ok(std::fs::canonicalize(c).unwrap_or_else(|_| c.clone()));
        }
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(format!(
        "the socket shim {file} was not found ({from}: {}); build it with `cargo build -p {}` \
         (next to the outboard binary), or name it with --shim PATH or OUTBOARD_SHIM=PATH",
        tried.join(", "),
        if file == INLINE_SHIM_FILE { "outboard-shim-inline" } else { "outboard-shim" }
    ))
}

/// `shim` first, then what `LD_PRELOAD` held (without another copy of `shim`).
pub fn preload_value(shim: &OsStr, existing: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(shim);
    if let Some(old) = existing {
        let old = old.to_string_lossy();
        for p in old
            .split([':', ' '])
            .filter(|p| !p.is_empty() && OsStr::new(p) != shim)
        {
            v.push(":");
            v.push(p);
        }
    }
    v
}

pub fn main(a: &RunArgs) -> ExitCode {
    let name = match (&a.name, a.inline) {
        (Some(n), _) => n.clone(),
        // The program keeps this pid (exec).
        (None, true) => format!("inline-{}", std::process::id()),
        (None, false) => "default".to_string(),
    };
    if !valid_name(&name) {
        eprintln!("outboard run: --name {name:?}: use 1 to 64 of A-Z a-z 0-9 - _ .");
        return ExitCode::from(2);
    }
    let file = if a.inline { INLINE_SHIM_FILE } else { SHIM_FILE };
    let shim = match find_library(a.shim.as_deref(), file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("outboard run: {e}");
            return ExitCode::from(NO_SHIM);
        }
    };
    let run_dir = outboard_engine::control::run_dir();
    if a.inline {
        return exec_program(a, &shim, &name, &run_dir);
    }
    let board = outboard_engine::host::board_socket_path(&name);
    let is_socket = std::fs::metadata(&board)
        .map(|m| m.file_type().is_socket())
        .unwrap_or(false);
    if !is_socket {
        eprintln!(
            "outboard run: no engine named {:?} is running (no board socket {}); start one with \
             `outboard engine --name {} --link ... --addr ...` (or run it with the engine inside: \
             `outboard run --inline --link ... --addr ...`), or set OUTBOARD_RUN_DIR as the engine had it",
            name,
            board.display(),
            name
        );
        return ExitCode::from(NO_ENGINE);
    }
    exec_program(a, &shim, &name, &run_dir)
}

/// Checks the program, then execs it with the shim preloaded (returns only on failure).
fn exec_program(a: &RunArgs, shim: &Path, name: &str, run_dir: &Path) -> ExitCode {
    let program = &a.command[0];
    // A program the shim cannot take: say so, and run it anyway unless told
    // not to. One not found is left to exec (127).
    if let Some(d) = crate::run_detect::detect(program) {
        if let Some(why) = d.explain(&Path::new(program).display().to_string()) {
            if a.require_engine {
                eprintln!("outboard run: {why}. Not running it (--require-engine).");
                return ExitCode::from(NOT_INTERPOSABLE);
            }
            eprintln!(
                "outboard run: {why}. Running it anyway, on the kernel (--require-engine refuses instead)."
            );
        }
    }
    // A daemon is asked now whether it admits this user; an in-process
    // engine is the program's own (it exits 4 if it cannot start one).
    if a.require_engine && !a.inline {
        if let Err((code, why)) = probe_attach(name) {
            eprintln!("outboard run: {why}. Not running {} (--require-engine).", Path::new(program).display());
            return ExitCode::from(code);
        }
    }
    let preload = preload_value(shim.as_os_str(), std::env::var_os("LD_PRELOAD").as_deref());
    let mut cmd = Command::new(program);
    cmd.args(&a.command[1..])
        .env("LD_PRELOAD", preload)
        .env("OUTBOARD_ENGINE", name)
        .env("OUTBOARD_RUN_DIR", run_dir);
    if a.require_engine {
        cmd.env("OUTBOARD_REQUIRE_ENGINE", "1");
    }
    if a.inline {
        let (link, addr) = (a.link.as_deref().unwrap_or_default(), a.addr.as_deref().unwrap_or_default());
        cmd.env("OUTBOARD_INLINE_LINK", link).env("OUTBOARD_INLINE_ADDR", addr);
        match a.gateway {
            Some(g) => cmd.env("OUTBOARD_INLINE_GATEWAY", g.to_string()),
            None => cmd.env_remove("OUTBOARD_INLINE_GATEWAY"),
        };
        match a.mtu {
            Some(m) => cmd.env("OUTBOARD_INLINE_MTU", m.to_string()),
            None => cmd.env_remove("OUTBOARD_INLINE_MTU"),
        };
        match a.allow_kernel_address {
            true => cmd.env("OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS", "1"),
            false => cmd.env_remove("OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS"),
        };
    } else {
        for v in INLINE_VARS {
            cmd.env_remove(v);
        }
    }
    let err = cmd.exec();
    // exec returns only on failure.
    let code = match err.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    eprintln!(
        "outboard run: cannot execute {}: {err}",
        Path::new(program).display()
    );
    ExitCode::from(code)
}

/// Attaches a small board to engine `name` as this user and detaches it:
/// whether the program, started as this user, will be taken.
fn probe_attach(name: &str) -> Result<(), (u8, String)> {
    use outboard_api::{AttachOptions, Board, Error};
    let params = outboard_board::layout::BoardParams::small();
    match Board::attach_with(name, &AttachOptions { params, ..AttachOptions::default() }) {
        Ok(board) => {
            drop(board);
            Ok(())
        }
        Err(Error::NotAdmitted(why)) => Err((NOT_ADMITTED, why)),
        Err(e) => Err((NO_ENGINE, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_goes_first_once() {
        let s = OsStr::new("/x/liboutboard_shim.so");
        assert_eq!(
            preload_value(s, None),
            OsString::from("/x/liboutboard_shim.so")
        );
        assert_eq!(
            preload_value(s, Some(OsStr::new("/a.so /x/liboutboard_shim.so:/b.so"))),
            OsString::from("/x/liboutboard_shim.so:/a.so:/b.so")
        );
    }

    #[test]
    fn names() {
        assert!(valid_name("e-1.x_y"));
        assert!(!valid_name(""));
        assert!(!valid_name("a/b"));
    }
}
