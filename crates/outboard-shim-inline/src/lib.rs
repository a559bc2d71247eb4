//! `liboutboard_shim_inline.so`: the socket shim with the engine inside the
//! program (`outboard run --inline --link KIND:ARGS --addr A/P -- PROGRAM`),
//! Onload's model: no daemon and no cross-process hop between the program
//! and its stack.
//!
//! It is `liboutboard_shim` (every interposed call, the same code) plus a
//! board source: at the program's first engine socket, instead of attaching
//! to a daemon, it starts the engine as a thread of this process
//! (`outboard_embedded::EmbeddedEngine`, the daemon's engine code) on the
//! link and address `outboard run` passed, and attaches the shim's board to
//! it through an in-process socket pair. The engine thread is marked as the
//! shim's own (its system calls bypass the interposers) and starts with
//! every signal blocked (the program's signals reach the program's threads).
//! The engine is shared (`outboard_embedded::shared`): the program's threads
//! run its turns while they wait (their commands go out at their next wait
//! at the latest), and the engine thread stands aside meanwhile (`OUTBOARD_INLINE_DRIVE=0`: only the
//! engine thread runs it).
//!
//! What `outboard run --inline` passes (read once, when the library loads:
//! programs may clear their environment): `OUTBOARD_INLINE_LINK`
//! (`KIND:ARGS`), `OUTBOARD_INLINE_ADDR` (`A.B.C.D/P`), optional
//! `OUTBOARD_INLINE_GATEWAY`, `OUTBOARD_INLINE_MTU` and
//! `OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS=1`; the engine's name
//! (for `outboard stat --name`) is `OUTBOARD_ENGINE`.
//!
//! Choices, and why:
//! - **Started lazily**, at the first engine socket, not when the library
//!   loads: daemons fork and exit before they open sockets, and the engine
//!   must live in the process that uses it.
//! - **Forked children** do not share it (its thread is not in the child):
//!   a child's attach is refused with a message, so its own sockets stay
//!   with the kernel and the engine sockets it inherited fail. Programs
//!   whose workers serve the parent's listeners (nginx with
//!   `master_process on`) use an engine daemon (`outboard run` without
//!   `--inline`).
//! - **Before a privilege drop**, the engine's link and control socket are
//!   opened and nothing is started (`before_drop`): the engine starts at
//!   the first socket on what was opened, in this process or in one child
//!   forked after the drop (a daemon whose parent exits).
//! - **At exit** (`atexit`), the board detaches (the engine closes every
//!   stream gracefully: FIN after what is queued) and the process lingers
//!   until the engine has delivered everything — no board, no connection
//!   with data or a FIN unacknowledged (`Shard::quiescent`) — at most
//!   [`EXIT_LINGER`]: what the program wrote before it exited reaches the
//!   peer, as it does when the kernel's stack keeps sending after a
//!   process is gone. A process killed by a signal loses its connections
//!   (its peers get nothing more; they time out or are reset on their next
//!   segment), as the engine inside it dies with it.
//! - **`exec`** ends the engine with the image: engine sockets are not
//!   carried into the next image (which starts an engine of its own at its
//!   first socket).

use outboard_api::{AttachOptions, Board, Error};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The longest a process waits at exit for its engine to deliver what the
/// program wrote (usually milliseconds: one round trip for the last FIN).
pub const EXIT_LINGER: Duration = Duration::from_secs(10);

/// The engine's settings from the variables `outboard run --inline` sets
/// (`get` reads one): its link, address, gateway and MTU; the control socket
/// on, so `outboard stat --name` sees it while the program runs.
pub fn settings_from_vars(get: impl Fn(&str) -> Option<String>) -> Result<EngineSettings, String> {
    let link = get("OUTBOARD_INLINE_LINK").ok_or("OUTBOARD_INLINE_LINK is not set (use outboard run --inline)")?;
    let link: LinkSpec = link.parse().map_err(|e| format!("OUTBOARD_INLINE_LINK: {e}"))?;
    let addr = get("OUTBOARD_INLINE_ADDR").ok_or("OUTBOARD_INLINE_ADDR is not set (use outboard run --inline)")?;
    let (addr, prefix_len) =
        outboard_engine::engine::parse_ipv4_cidr(&addr).map_err(|e| format!("OUTBOARD_INLINE_ADDR {addr:?}: {e}"))?;
    let name = get("OUTBOARD_ENGINE").unwrap_or_else(|| format!("inline-{}", std::process::id()));
    let mut s = EngineSettings::new(&name, link, addr, prefix_len);
    if let Some(g) = get("OUTBOARD_INLINE_GATEWAY") {
        s.gateway = Some(g.parse().map_err(|_| format!("OUTBOARD_INLINE_GATEWAY: {g:?} is not an IPv4 address"))?);
    }
    if let Some(m) = get("OUTBOARD_INLINE_MTU") {
        s.mtu = Some(m.parse::<usize>().ok().filter(|m| (576..=9000).contains(m)).ok_or_else(|| format!("OUTBOARD_INLINE_MTU: {m:?}: use 576 to 9000"))?);
    }
    s.allow_kernel_address = get("OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS").is_some_and(|v| v == "1");
    s.control = true;
    Ok(s)
}

fn from_env() -> &'static Result<EngineSettings, String> {
    static SETTINGS: OnceLock<Result<EngineSettings, String>> = OnceLock::new();
    SETTINGS.get_or_init(|| settings_from_vars(|k| std::env::var(k).ok().filter(|v| !v.is_empty())))
}

/// The engine of this process, and the process that started it.
static ENGINE: Mutex<Option<(u32, EmbeddedEngine)>> = Mutex::new(None);
/// What was opened before the program dropped its privileges, not yet started (see [`before_drop`]).
static PREPARED: Mutex<Option<Ready>> = Mutex::new(None);

/// An engine prepared before a privilege drop, and the one ticket that
/// lets a process start it: a byte in a pipe made then. The pipe is shared
/// by every process forked afterwards; the one whose `read` gets the byte
/// starts the engine, and the others are told it is taken (the links' rings
/// and memory are shared across `fork`, so two engines on them would take
/// each other's frames).
struct Ready {
    /// The process that prepared it.
    by: u32,
    engine: Option<outboard_engine::engine::Prepared>,
    ticket: std::os::fd::OwnedFd,
}

impl Ready {
    fn new(by: u32, engine: outboard_engine::engine::Prepared) -> std::io::Result<Ready> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors that nothing else owns.
        let (ticket, put) = unsafe {
            use std::os::fd::FromRawFd;
            (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1]))
        };
        // SAFETY: writes one byte from a local.
        if unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(&put), [1u8].as_ptr().cast(), 1) } != 1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ready { by, engine: Some(engine), ticket })
    }

    /// The prepared engine, if this process is the first to ask for it in
    /// any process that shares the ticket. Another's stays here, unused and
    /// never dropped: dropping the links would tear down what they share
    /// with the process that runs them.
    fn claim(&mut self) -> Option<outboard_engine::engine::Prepared> {
        self.engine.as_ref()?;
        let mut b = [0u8; 1];
        // SAFETY: reads at most one byte into a local; the pipe does not block.
        let got = unsafe { libc::read(std::os::fd::AsRawFd::as_raw_fd(&self.ticket), b.as_mut_ptr().cast(), 1) };
        if got == 1 {
            self.engine.take()
        } else {
            None
        }
    }
}

/// `OUTBOARD_INLINE_DRIVE`, read when the library loads (see `threads_drive`).
static DRIVE: AtomicBool = AtomicBool::new(true);
/// Set once the process is exiting: no engine starts again.
static EXITING: AtomicBool = AtomicBool::new(false);

/// The shim's board source: a board on this process's engine, started at the first call.
fn board(opts: &AttachOptions) -> Result<Board, Error> {
    if EXITING.load(Ordering::SeqCst) {
        return Err(Error::Attach("the process is exiting: its in-process engine has stopped".into()));
    }
    let mut g = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    match g.as_ref() {
        Some((owner, engine)) if *owner == pid => return engine.attach(opts),
        Some((owner, _)) => {
            return Err(Error::Attach(format!(
                "the engine runs inside process {owner}, which this one was forked from, and a forked process \
                 cannot share it; multi-process programs use an engine daemon (outboard engine, then outboard run without --inline)"
            )))
        }
        None => {}
    }
    let settings = from_env().as_ref().map_err(|e| Error::Attach(e.clone()))?;
    set_engine_log_level();
    let drive = DRIVE.load(Ordering::Relaxed);
    let mark = outboard_shim::state::mark_thread_internal;
    let engine = match PREPARED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        Some(ready) => match ready.claim() {
            Some(p) => EmbeddedEngine::start_prepared(settings.clone(), p, mark, drive),
            None => {
                return Err(Error::Attach(format!(
                    "the in-process engine that process {} opened before it dropped privileges was started by another process \
                     forked after that, and only one process can run it; multi-process programs use an engine daemon \
                     (outboard engine, then outboard run without --inline)",
                    ready.by
                )))
            }
        },
        None if drive => EmbeddedEngine::start_shared(settings.clone(), mark),
        None => EmbeddedEngine::start_with(settings.clone(), mark),
    };
    // SAFETY: geteuid cannot fail.
    let engine = engine.map_err(|e| unprivileged(e, unsafe { libc::geteuid() }))?;
    let b = engine.attach(opts)?;
    if let Some(d) = engine.driver() {
        outboard_shim::wait::set_driver(d);
    }
    *g = Some((pid, engine));
    // SAFETY: registers a plain extern "C" function, once per process that starts an engine.
    unsafe { libc::atexit(at_exit) };
    Ok(b)
}

/// The program is about to drop its privileges (`setuid` and the like; the
/// shim's `before_credentials_change`): opens the engine's link and control
/// socket now, while it may, and starts nothing. The engine starts at the
/// first socket, in this process or in a child forked after the drop (a
/// daemon that forks and exits, as `memcached -d -u nobody`): whichever
/// asks first. False (start the engine now, as before) for a link that
/// needs no privileges (a fabric: its ports belong to the process that
/// opened them) and when nothing can be prepared here.
fn before_drop() -> bool {
    if EXITING.load(Ordering::SeqCst) || ENGINE.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
        // Started (a child of the process that started it is refused at its first socket).
        return true;
    }
    let mut ready = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
    if ready.is_some() {
        // setgroups, setgid, then setuid: prepared at the first.
        return true;
    }
    let Ok(settings) = from_env() else { return false };
    if matches!(settings.link, LinkSpec::Fabric { .. }) {
        return false;
    }
    set_engine_log_level();
    let pid = std::process::id();
    match EmbeddedEngine::prepare(settings).and_then(|p| Ready::new(pid, p).map_err(|e| Error::Attach(format!("pipe: {e}")))) {
        Ok(r) => {
            *ready = Some(r);
            true
        }
        // Started now, it fails the same way, and says so as at a first socket.
        Err(_) => false,
    }
}

/// An engine that could not start in a process that is not root: the
/// error says when an in-process engine starts and what it needs then, and
/// which programs cannot have one.
fn unprivileged(e: Error, euid: u32) -> Error {
    match e {
        Error::Attach(m) if euid != 0 => Error::Attach(format!(
            "{m}; this process runs as uid {euid}: an in-process engine starts at the program's first socket, or just before \
             it drops privileges, and needs the link's privileges then (a program started through a wrapper that \
             stays alive, as `su`, uses an engine daemon)"
        )),
        e => e,
    }
}

/// Whether the program's waiting threads run the engine's turns
/// (`OUTBOARD_INLINE_DRIVE`: on unless `0`); off, only the engine's own
/// thread runs them.
fn threads_drive(v: Option<&str>) -> bool {
    v.is_none_or(|v| v.trim() != "0")
}

/// The engine logs as the shim does: at `OUTBOARD_LOG` (default warn), on stderr.
fn set_engine_log_level() {
    use outboard_engine::log::{set_level, Level};
    let level = std::env::var("OUTBOARD_LOG").ok().and_then(|l| l.parse::<Level>().ok()).unwrap_or(Level::Warn);
    set_level(level);
}

extern "C" fn at_exit() {
    EXITING.store(true, Ordering::SeqCst);
    let pid = std::process::id();
    // Only the process that started the engine (a forked child that exits
    // runs this too). The engine lock is not held while the shim's is taken
    // (attaching takes the shim's, then the engine's).
    {
        let g = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some((owner, engine)) if *owner == pid => engine.drain_when_quiescent(),
            _ => return,
        }
    }
    outboard_shim::state::detach_for_exit();
    let g = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, engine)) = g.as_ref() {
        if !engine.linger(EXIT_LINGER) {
            outboard_shim::log::warn(&format!(
                "exit: the in-process engine still had data to deliver after {} s; stopped it (those connections' peers get no more)",
                EXIT_LINGER.as_secs()
            ));
        }
    }
}

extern "C" fn on_load() {
    outboard_shim::state::init();
    outboard_shim::state::set_board_source(board);
    outboard_shim::state::set_before_drop(before_drop);
    DRIVE.store(threads_drive(std::env::var("OUTBOARD_INLINE_DRIVE").ok().as_deref()), Ordering::Relaxed);
    if let Err(e) = from_env() {
        outboard_shim::log::error(&format!("the in-process engine cannot start: {e}"));
    }
}

// Runs when the dynamic loader loads the library (before the program's main).
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn settings_come_from_what_outboard_run_sets() {
        let s = settings_from_vars(vars(&[
            ("OUTBOARD_INLINE_LINK", "fabric:lab"),
            ("OUTBOARD_INLINE_ADDR", "10.9.0.2/24"),
            ("OUTBOARD_INLINE_GATEWAY", "10.9.0.1"),
            ("OUTBOARD_INLINE_MTU", "1400"),
            ("OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS", "1"),
            ("OUTBOARD_ENGINE", "web"),
        ]))
        .unwrap();
        assert!(s.allow_kernel_address);
        assert_eq!(s.name, "web");
        assert_eq!(s.link, "fabric:lab".parse().unwrap());
        assert_eq!((s.addr, s.prefix_len), (Ipv4Addr::new(10, 9, 0, 2), 24));
        assert_eq!(s.gateway, Some(Ipv4Addr::new(10, 9, 0, 1)));
        assert_eq!(s.mtu, Some(1400));
        assert!(s.control && s.shards == 1 && s.services.is_empty());
    }

    #[test]
    fn an_engine_that_cannot_start_unprivileged_says_who_may_have_one() {
        let e = unprivileged(Error::Attach("control socket /run/outboard/x.sock: Permission denied".into()), 65534);
        let Error::Attach(m) = e else { panic!("{e:?}") };
        assert!(m.starts_with("control socket") && m.contains("uid 65534") && m.contains("engine daemon"), "{m}");
        let Error::Attach(m) = unprivileged(Error::Attach("no such interface".into()), 0) else { panic!() };
        assert_eq!(m, "no such interface", "root is told nothing more");
    }

    #[test]
    fn the_programs_threads_drive_unless_told_0() {
        assert!(threads_drive(None) && threads_drive(Some("1")) && threads_drive(Some("")));
        assert!(!threads_drive(Some("0")) && !threads_drive(Some(" 0 ")));
    }

    #[test]
    fn bad_or_missing_settings_say_which() {
        let base = [("OUTBOARD_INLINE_LINK", "fabric:lab"), ("OUTBOARD_INLINE_ADDR", "10.9.0.2/24")];
        for (k, v, want) in [
            ("OUTBOARD_INLINE_LINK", "wifi:wlan0", "OUTBOARD_INLINE_LINK"),
            ("OUTBOARD_INLINE_ADDR", "10.9.0.2", "OUTBOARD_INLINE_ADDR"),
            ("OUTBOARD_INLINE_ADDR", "10.9.0.2/33", "1..32"),
            ("OUTBOARD_INLINE_ADDR", "224.0.0.1/8", "not a host address"),
            ("OUTBOARD_INLINE_GATEWAY", "gw", "OUTBOARD_INLINE_GATEWAY"),
            ("OUTBOARD_INLINE_MTU", "100", "576 to 9000"),
        ] {
            let mut v2: Vec<(&str, &str)> = base.iter().filter(|(b, _)| *b != k).copied().collect();
            v2.push((k, v));
            let e = settings_from_vars(vars(&v2)).unwrap_err();
            assert!(e.contains(want), "{k}={v}: {e}");
        }
        assert!(!settings_from_vars(vars(&base)).unwrap().allow_kernel_address, "refused by default, as the daemon");
        let e = settings_from_vars(vars(&base[1..])).unwrap_err();
        assert!(e.contains("OUTBOARD_INLINE_LINK is not set"), "{e}");
    }
}
