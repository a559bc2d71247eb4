//! Test helper: throwaway network namespaces (shared by the link tests; copy
//! or `#[path]`-include it).
//!
//! - [`Netns::new`] creates `obt-<tag>-<pid>` (deleting a stale one first);
//!   dropping it runs `ip netns del`, also when the test panics.
//! - [`Netns::ip`] runs `ip -n NS ...` and panics with its stderr on failure;
//!   [`Netns::exec`] runs any command inside the namespace.
//! - [`Netns::run_in`] runs a closure on a fresh thread that `setns`-ed into
//!   the namespace: sockets, TAP devices and interface ioctls made there live
//!   in that namespace. Only that thread moves; the test process does not.
//! - [`skip_unless_root`] (and [`skip_unless`], naming the tools) prints a
//!   loud SKIPPED line and returns true when not root.
//! - [`enter`] moves the calling thread into a namespace; [`run_ok`] runs a
//!   command that must succeed.
#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::process::{Command, Output};

/// A network namespace that is deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates namespace `obt-<tag>-<pid>` with its loopback up.
    pub fn new(tag: &str) -> Netns {
        let name = format!("obt-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS args...`; panics (with stderr) when it fails.
    pub fn ip(&self, args: &[&str]) -> Output {
        run_ok(Command::new("ip").arg("-n").arg(&self.name).args(args))
    }

    /// `ip netns exec NS args...`, whatever its exit status.
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("ip netns exec {} {args:?}: {e}", self.name))
    }

    /// Runs `f` on a new thread inside this namespace and returns its result
    /// (a panic in `f` is re-raised here).
    pub fn run_in<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(move || {
                enter(&path);
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Spawns a thread inside this namespace (for work alongside another thread).
    pub fn spawn_in<F, R>(&self, f: F) -> std::thread::JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            enter(&path);
            f()
        })
    }
}

/// Moves the calling thread into the namespace at `path`.
pub fn enter(path: &str) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    // SAFETY: setns on a valid namespace fd affects only the calling thread's
    // network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Runs `cmd`; panics with its stderr when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// True (after a loud SKIPPED line on stderr) when the test cannot run: not
/// root, or no `ip` command.
pub fn skip_unless_root(test: &str) -> bool {
    skip_unless(test, &["ip"])
}

/// True (after a loud SKIPPED line on stderr) when the test cannot run: not
/// root, or one of `tools` (iproute2's `ip`, …) missing. A test that lists no
/// tools fails, rather than skips, where one it runs is missing.
pub fn skip_unless(test: &str, tools: &[&str]) -> bool {
    if !is_root() {
        eprintln!("SKIPPED: needs root ({test}: network namespaces, CAP_NET_ADMIN/CAP_NET_RAW)");
        return true;
    }
    if let Some(tool) = tools.iter().find(|t| !have(t)) {
        eprintln!("SKIPPED: needs the `{tool}` command ({test})");
        return true;
    }
    false
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `cmd` is found on PATH.
pub fn have(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

/// Writes a sysctl under /proc/sys/net inside the namespace (`key` like
/// `ipv6/conf/veth0/disable_ipv6`); best effort (IPv6 may be off already).
pub fn sysctl_in(ns: &Netns, key: &str, value: &str) {
    let _ = ns.exec(&["sh", "-c", &format!("echo {value} > /proc/sys/net/{key}")]);
}
