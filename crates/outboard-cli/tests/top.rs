#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! `outboard top`: the live view of an engine, no root needed. An engine on
//! a private fabric echoes a fetch's stream while `top --once` prints one
//! screen and the live view runs in a tmux pane (read back with
//! `capture-pane`, quit with `q`).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::engine::{poll, until, wait_up, ChildGuard, GRACE};
use support::netns::have;
use support::{output_within, test_dir, OUTBOARD};

/// How long an engine may take to answer `stat` after it starts.
const UP: Duration = Duration::from_secs(10);

/// `outboard ARGS` with the test's run and fabric directories.
fn outboard_cmd(run: &Path, fabric: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(OUTBOARD);
    c.args(args).env("OUTBOARD_RUN_DIR", run).env("OUTBOARD_FABRIC_DIR", fabric).stdin(Stdio::null());
    c
}

/// A number as `top` prints it: `123`, `12.5`, `12.8k`, `1.20M`, `3.00G`.
fn rate(s: &str) -> f64 {
    let (n, mult) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    n.parse::<f64>().unwrap_or_else(|_| panic!("{s:?} is not a number")) * mult
}

/// The fields of the first line of `screen` that, trimmed, starts with `start`.
fn row<'a>(screen: &'a str, start: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(start))
        .map(|l| l.split_whitespace().collect())
}

/// The screen shows a busy shard 0 and link: (frames-in/s of shard 0, rx frames/s, rx Mbit/s).
fn busy_numbers(screen: &str) -> Option<(f64, f64, f64)> {
    // shard busy% cpu% frames-in/s frames-out/s conns fwd-out/s fwd-in/s fwd-drops
    let shard = row(screen, "0 ")?;
    // dir frames/s Mbit/s frames bytes
    let rx = row(screen, "rx ")?;
    if shard.len() < 9 || rx.len() < 5 {
        return None;
    }
    Some((rate(shard[3]), rate(rx[1]), rate(rx[2])))
}

/// A private tmux server (its own socket), killed with its sessions on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux")
    }

    fn screen(&self, session: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", session]).stdout).to_string()
    }

    fn has(&self, session: &str) -> bool {
        self.cmd(&["has-session", "-t", session]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

#[test]
fn top_shows_a_busy_engine_once_and_live_and_quits_on_q() {
    let pid = std::process::id();
    let run = test_dir("ob-top-test", "run");
    let fabric_dir = test_dir("ob-top-test", "fabric");
    let fabric = format!("fabric:top{pid}");
    let name = format!("top{pid}");
    let engine = outboard_cmd(
        &run,
        &fabric_dir,
        &["engine", "--link", &fabric, "--addr", "10.61.0.1/24", "--name", &name, "--services", "echo"],
    )
    .args(["--run-for-s", "30", "--log-level", "warn"])
    .spawn()
    .expect("spawn outboard engine");
    let _engine = ChildGuard::new(engine, GRACE);
    wait_up(&run, &name, UP);

    // A fetch that outlasts the checks (stopped by its guard, or its own timeout).
    let fetch = outboard_cmd(
        &run,
        &fabric_dir,
        &["fetch", "--link", &fabric, "--addr", "10.61.0.2/24", "--connect", "10.61.0.1:7", "--send", "64GiB"],
    )
    .args(["--expect-echo", "--timeout-s", "25", "--log-level", "warn"])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn outboard fetch");
    let _fetch = ChildGuard::new(fetch, GRACE);
    until(&run, &name, UP, Duration::from_millis(50), "the fetch's connection carries data", |s| {
        s["connections"].as_array().is_some_and(|c| !c.is_empty()) && s["link"]["counters"]["rx_frames"].as_u64() > Some(100)
    });

    // (1) One screen as plain text, rates over 300 ms.
    let (ok, out, err) = output_within(
        outboard_cmd(&run, &fabric_dir, &["top", "--once", "--name", &name, "--interval-ms", "300"]),
        Duration::from_secs(10),
        GRACE,
    );
    assert!(ok, "top --once failed: {err}\n{out}");
    eprintln!("top --once:\n{out}");
    for want in [
        &format!("engine {name} (pid "),
        &format!("link fabric:top{pid}"),
        "SHARDS",
        "LINK",
        "link drops: rx_kernel_drops",
        "DROPS BY REASON",
        "BOARDS (0 attached)",
        "BUSIEST CONNECTIONS (1 of 1, by bytes/s)",
    ] {
        assert!(out.contains(want), "top --once lacks {want:?}:\n{out}");
    }
    let (shard_in, rx_fps, rx_mbit) = busy_numbers(&out).unwrap_or_else(|| panic!("no shard or rx row:\n{out}"));
    assert!(shard_in > 0.0 && rx_fps > 0.0 && rx_mbit > 0.0, "rates are zero while a fetch runs:\n{out}");
    let conn = row(&out, "10.61.0.1:7 ").unwrap_or_else(|| panic!("no connection row:\n{out}"));
    // local remote state shard owner in out
    assert!(conn[1].starts_with("10.61.0.2:"), "{out}");
    assert_eq!(conn[2..5], ["Established", "0", "echo:7"][..], "{out}");
    assert!(rate(conn[5]) > 0.0 && rate(conn[6]) > 0.0, "the connection's rates are zero:\n{out}");

    // (2) The live view in a tmux pane.
    if !have("tmux") {
        eprintln!("SKIPPED: the live view's check needs tmux (scripts/test.sh installs it)");
        return;
    }
    let tmux = Tmux { socket: format!("outboard-top-test-{pid}") };
    let session = "top";
    let shell = format!(
        "tty0=$(stty -g); OUTBOARD_RUN_DIR={} {} top --name {name} --interval-ms 200; rc=$?; \
         [ \"$(stty -g)\" = \"$tty0\" ] && t=restored || t=changed; echo \"top exited rc=$rc tty=$t\"; sleep 2",
        quote(&run),
        quote(Path::new(OUTBOARD))
    );
    let o = tmux.cmd(&["new-session", "-d", "-s", session, "-x", "160", "-y", "50", &shell]);
    assert!(o.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&o.stderr));
    // Until the second snapshot is in: rates over the last refresh, non-zero.
    let (screen, took) = poll(
        Duration::from_secs(8),
        Duration::from_millis(200),
        || tmux.screen(session),
        |s| s.contains("rates over the last") && busy_numbers(s).is_some_and(|(a, b, c)| a > 0.0 && b > 0.0 && c > 0.0),
    );
    assert!(took.is_some(), "the live view shows no busy shard and link within 8 s:\n{screen}");
    eprintln!("top in tmux:\n{screen}");
    for want in [&format!("engine {name} (pid "), "(q: quit)", "SHARDS", "LINK", "BUSIEST CONNECTIONS", "echo:7"] {
        assert!(screen.contains(want), "the live view lacks {want:?}:\n{screen}");
    }

    // `q` quits: exit 0, the terminal as it was (main screen, cooked mode), the session ends.
    let o = tmux.cmd(&["send-keys", "-t", session, "q"]);
    assert!(o.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&o.stderr));
    let (after, took) = poll(
        Duration::from_secs(5),
        Duration::from_millis(100),
        || tmux.screen(session),
        |s| s.contains("top exited"),
    );
    assert!(took.is_some(), "top did not exit within 5 s of q:\n{after}");
    assert!(after.contains("top exited rc=0 tty=restored"), "{after}");
    assert!(!after.contains("SHARDS"), "the alternate screen was not left:\n{after}");
    let (_, took) = poll(Duration::from_secs(5), Duration::from_millis(100), || tmux.has(session), |h| !h);
    assert!(took.is_some(), "the tmux session did not end");
}

/// The live view leaves by itself, exit 3, when its engine stops.
#[test]
fn the_live_view_quits_with_exit_3_when_the_engine_goes_away() {
    if !have("tmux") {
        eprintln!("SKIPPED: needs tmux (scripts/test.sh installs it)");
        return;
    }
    let pid = std::process::id();
    let run = test_dir("ob-top-test", "gone-run");
    let fabric_dir = test_dir("ob-top-test", "gone-fabric");
    let name = format!("topgone{pid}");
    let engine = outboard_cmd(&run, &fabric_dir, &["engine", "--link", &format!("fabric:topgone{pid}"), "--addr", "10.62.0.1/24"])
        .args(["--name", &name, "--run-for-s", "3", "--log-level", "warn"])
        .spawn()
        .expect("spawn outboard engine");
    let _engine = ChildGuard::new(engine, GRACE);
    wait_up(&run, &name, UP);
    let tmux = Tmux { socket: format!("outboard-top-gone-{pid}") };
    let shell = format!(
        "OUTBOARD_RUN_DIR={} {} top --name {name} --interval-ms 100; echo \"top exited rc=$?\"; sleep 2",
        quote(&run),
        quote(Path::new(OUTBOARD))
    );
    let o = tmux.cmd(&["new-session", "-d", "-s", "gone", "-x", "160", "-y", "50", &shell]);
    assert!(o.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&o.stderr));
    let (screen, took) =
        poll(Duration::from_secs(8), Duration::from_millis(100), || tmux.screen("gone"), |s| s.contains("top exited"));
    assert!(took.is_some(), "top did not leave when its engine stopped:\n{screen}");
    assert!(screen.contains("top exited rc=3"), "{screen}");
    assert!(screen.contains("outboard: the engine went away: "), "{screen}");
}

#[test]
fn top_of_no_engine_is_exit_3_and_bad_flags_are_exit_2() {
    let run = test_dir("ob-top-test", "none");
    let o = outboard_cmd(&run, &run, &["top", "--name", "nosuch", "--once"]).output().expect("run outboard top");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no engine named \"nosuch\" is running"), "{stderr}");
    // The same message as `outboard stat`.
    let s = outboard_cmd(&run, &run, &["stat", "--name", "nosuch"]).output().expect("run outboard stat");
    assert_eq!(stderr, String::from_utf8_lossy(&s.stderr));
    for bad in [&["--interval-ms", "50"][..], &["--interval-ms", "10001"], &["--rows", "3"]] {
        let o = outboard_cmd(&run, &run, &[&["top", "--once"], bad].concat()).output().expect("run outboard top");
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}
