#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! Who may attach to an engine, with real users and groups made by the test
//! (`useradd`/`groupadd`, removed on drop even when a test fails) and
//! programs run as them (`setpriv --reuid --regid --init-groups`) under the
//! shim, on an engine on the built-in fabric.
//!
//! - An engine started with no `--allow-*` admits root and its own user
//!   only: another user's program is told why (the engine, the user, the
//!   option), once, and runs on the kernel; with `OUTBOARD_REQUIRE_ENGINE=1`
//!   (what `outboard run --require-engine` sets) it exits 4 instead, and
//!   `outboard run --require-engine` itself exits 4 before the program runs.
//! - `--allow-user A --allow-group G`: A and a member of G (a supplementary
//!   group) attach; a third user is refused by the engine's credential check.
//!
//! Needs root (users, `setpriv`); prints SKIPPED otherwise. The `outboard`
//! binary, the shim and the scripts are copied to a world-readable scratch
//! directory: the build tree may sit under a directory only root can enter.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::engine::{start_engine, stat_in, ChildGuard};
use support::netns::{need, skip_unless_root};
use support::{output_within, shim_lib, OUTBOARD};

/// Users and groups of one test; deleted on drop.
struct Users {
    users: Vec<String>,
    groups: Vec<String>,
}

impl Users {
    fn group(&mut self, name: &str) {
        let o = Command::new("groupadd").arg(name).output().expect("groupadd");
        assert!(o.status.success(), "groupadd {name}: {}", String::from_utf8_lossy(&o.stderr));
        self.groups.push(name.to_string());
    }

    /// A system user with no home and no login, in its own group, plus `extra` groups.
    fn user(&mut self, name: &str, extra: &[&str]) {
        let mut c = Command::new("useradd");
        c.args(["--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin"]);
        if !extra.is_empty() {
            c.args(["--groups", &extra.join(",")]);
        }
        let o = c.arg(name).output().expect("useradd");
        assert!(o.status.success(), "useradd {name}: {}", String::from_utf8_lossy(&o.stderr));
        self.users.push(name.to_string());
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").arg(u).output();
        }
        for g in &self.groups {
            let _ = Command::new("groupdel").arg(g).output();
        }
    }
}

/// A scratch directory everyone can read (mode 755), with `outboard` and the
/// shim in it, and the run directory `run/` (755) the engine uses.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("ob-access-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("run")).unwrap();
        for d in [&dir, &dir.join("run")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        support::copy_executable(Path::new(OUTBOARD), &dir.join("outboard"));
        support::copy_executable(&shim_lib(), &dir.join("liboutboard_shim.so"));
        Scratch { dir }
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// `setpriv` as `user` (its groups too) of `outboard run --name ENGINE
    /// -- python3 -c SCRIPT`, with `env`: (success, exit code, stdout, stderr).
    fn run_as(&self, user: &str, engine: &str, script: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        self.run_as_with(user, engine, &[], script, env)
    }

    /// The same with `outboard run` flags.
    fn run_as_with(&self, user: &str, engine: &str, flags: &[&str], script: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", user, "--regid", user, "--init-groups", "--"])
            .arg(self.dir.join("outboard"))
            .args(["run", "--name", engine])
            .args(flags)
            .arg("--shim")
            .arg(self.dir.join("liboutboard_shim.so"))
            .args(["--", "/usr/bin/python3", "-c", script])
            .env("OUTBOARD_RUN_DIR", self.run_dir())
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("setpriv");
        let o = child.wait_with_output().expect("wait");
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Binds a TCP listener on 0.0.0.0 (a socket for the engine when the
/// process is on it), then says so; a marker file proves it ran.
const LISTEN: &str = r#"
import socket, sys
s = socket.socket()
s.bind(("0.0.0.0", 7300))
s.listen(8)
print("listening", flush=True)
"#;

fn attached(run: &Path, engine: &str) -> u64 {
    stat_in(run, engine).expect("stat")["host"]["attached"].as_u64().unwrap_or(0)
}

fn prepare(test: &str) -> bool {
    if skip_unless_root(test) {
        return false;
    }
    for (tool, pkg) in [("useradd", "passwd"), ("groupadd", "passwd"), ("setpriv", "util-linux")] {
        need(tool, pkg);
    }
    assert!(Path::new("/usr/bin/python3").exists(), "/usr/bin/python3 is missing: apt-get install python3");
    true
}

fn fabric_engine(s: &Scratch, name: &str, extra: &[&str]) -> ChildGuard {
    let fabric = format!("fabric:{name}");
    let mut args = vec!["--link", &fabric, "--addr", "10.0.0.1/24", "--services", "none"];
    args.extend_from_slice(extra);
    start_engine(&s.run_dir(), name, &args, Duration::from_secs(15))
}

fn tag() -> String {
    format!("{}", std::process::id() % 100_000)
}

#[test]
fn a_user_the_engine_does_not_admit_is_told_why_and_runs_on_the_kernel_or_exits_4_if_required() {
    if !prepare("a_user_the_engine_does_not_admit_is_told_why_and_runs_on_the_kernel_or_exits_4_if_required") {
        return;
    }
    let t = tag();
    let mut users = Users { users: Vec::new(), groups: Vec::new() };
    let stranger = format!("obx{t}s");
    users.user(&stranger, &[]);
    let s = Scratch::new("deny");
    let name = format!("acc-deny-{t}");
    let _e = fabric_engine(&s, &name, &[]);
    let board = s.run_dir().join(format!("{name}.board"));
    let mode = std::fs::metadata(&board).expect("board socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "with no --allow-*, only the engine's user may connect");

    let (code, out, err) = s.run_as(&stranger, &name, LISTEN, &[]);
    assert_eq!(code, Some(0), "the program runs (on the kernel): {out}\n{err}");
    assert!(out.contains("listening"), "{out}\n{err}");
    for want in [name.clone(), format!("does not admit user {stranger}"), format!("--allow-user {stranger}"), "stays with the kernel".into()] {
        assert!(err.contains(&want), "the program is told why ({want:?}):\n{err}");
    }
    assert_eq!(err.matches("does not admit").count(), 1, "said once:\n{err}");
    assert_eq!(attached(&s.run_dir(), &name), 0);

    let (code, out, err) = s.run_as(&stranger, &name, LISTEN, &[("OUTBOARD_REQUIRE_ENGINE", "1")]);
    assert_eq!(code, Some(4), "required engine, refused: exit 4\n{out}\n{err}");
    assert!(!out.contains("listening"), "the socket never reached the kernel: {out}");
    assert!(err.contains("does not admit") && err.contains("--require-engine"), "{err}");

    // `outboard run --require-engine` finds out before the program starts.
    let (code, out, err) = s.run_as_with(&stranger, &name, &["--require-engine"], LISTEN, &[]);
    assert_eq!(code, Some(4), "outboard run --require-engine, refused: exit 4\n{out}\n{err}");
    assert!(out.is_empty(), "the program did not run: {out}");
    assert!(err.contains(&format!("does not admit user {stranger}")) && err.contains("Not running"), "{err}");

    // Root is always admitted.
    let (ok, out, err) = output_within(
        {
            let mut c = Command::new(s.dir.join("outboard"));
            c.args(["run", "--name", &name, "--shim"])
                .arg(s.dir.join("liboutboard_shim.so"))
                .args(["--", "/usr/bin/python3", "-c", LISTEN])
                .env("OUTBOARD_RUN_DIR", s.run_dir());
            c
        },
        Duration::from_secs(30),
        Duration::from_secs(2),
    );
    assert!(ok && out.contains("listening"), "{out}\n{err}");
    assert_eq!(attached(&s.run_dir(), &name), 1, "root attached");
}

#[test]
fn allowed_users_and_members_of_allowed_groups_attach_others_are_refused_by_the_engine() {
    if !prepare("allowed_users_and_members_of_allowed_groups_attach_others_are_refused_by_the_engine") {
        return;
    }
    let t = tag();
    let mut users = Users { users: Vec::new(), groups: Vec::new() };
    let group = format!("obx{t}g");
    users.group(&group);
    let (named, member, stranger) = (format!("obx{t}a"), format!("obx{t}b"), format!("obx{t}c"));
    users.user(&named, &[]);
    users.user(&member, &[&group]);
    users.user(&stranger, &[]);
    let s = Scratch::new("allow");
    let name = format!("acc-allow-{t}");
    let _e = fabric_engine(&s, &name, &["--allow-user", &named, "--allow-group", &group]);
    let board = s.run_dir().join(format!("{name}.board"));
    let mode = std::fs::metadata(&board).expect("board socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o666, "others named: anyone may connect, the engine decides");

    for (i, who) in [&named, &member].into_iter().enumerate() {
        let (code, out, err) = s.run_as_with(who, &name, &["--require-engine"], LISTEN, &[]);
        assert_eq!(code, Some(0), "{who} is admitted: {out}\n{err}");
        assert!(out.contains("listening") && !err.contains("does not admit"), "{who}: {out}\n{err}");
        // The probe of --require-engine and the program: two attachments each.
        assert_eq!(attached(&s.run_dir(), &name), 2 * (i as u64 + 1), "{who} attached");
    }
    let (code, out, err) = s.run_as(&stranger, &name, LISTEN, &[]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains(&format!("does not admit user {stranger}")), "the engine's refusal reaches the program:\n{err}");
    assert_eq!(attached(&s.run_dir(), &name), 4, "the stranger did not attach");

    // Unknown names are bad flags (exit 2), found before anything starts.
    let o = Command::new(OUTBOARD)
        .args(["engine", "--link", "fabric:x", "--addr", "10.0.0.1/24", "--allow-user", "no-such-user-obx"])
        .env("OUTBOARD_RUN_DIR", s.run_dir())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-user \"no-such-user-obx\": no such user"));
}
