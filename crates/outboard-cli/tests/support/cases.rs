//! The C-cases harness of the shim-versus-Linux tests (`shim_errno.rs`,
//! `shim_sockopts.rs`): compile a program from `tests/shim/`, run it and
//! take its output lines (a `READY` line runs a callback instead), and an
//! nftables table in a namespace that silences a peer's port.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Compiles `tests/shim/SRC` into `dir`; returns the binary.
pub fn compile(src: &str, dir: &Path) -> PathBuf {
    let out = dir.join(src.trim_end_matches(".c"));
    let srcp = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim").join(src);
    let st = Command::new("cc").args(["-O1", "-Wall", "-o"]).arg(&out).arg(&srcp).status().expect("cc (install gcc)");
    assert!(st.success(), "compiling {src} failed");
    out
}

/// Runs `cmd` (a cases program), returns its stdout lines; on a `READY`
/// line runs `on_ready` (for a case that needs the peer silenced mid-way).
pub fn run_lines(mut cmd: Command, mut on_ready: impl FnMut()) -> Vec<String> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).spawn().expect("spawn cases");
    let out = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("line");
        if line == "READY" {
            on_ready();
            continue;
        }
        lines.push(line);
    }
    let o = child.wait_with_output().expect("wait");
    assert!(
        o.status.success(),
        "cases exited {} after\n  {}\nstderr: {}",
        o.status,
        lines.join("\n  "),
        String::from_utf8_lossy(&o.stderr)
    );
    lines
}

/// An nftables table `table` in namespace `ns`; deleted on drop.
pub struct Nft<'a> {
    pub ns: &'a str,
    pub table: &'a str,
}

impl Nft<'_> {
    fn cmd(&self, script: &str) -> bool {
        Command::new("ip").args(["netns", "exec", self.ns, "nft", script]).status().is_ok_and(|s| s.success())
    }
    /// Drops every packet the namespace sends from TCP port `port`.
    pub fn drop_from_port(&self, port: u16) {
        let t = self.table;
        let _ = self.cmd(&format!("delete table inet {t}"));
        assert!(self.cmd(&format!("add table inet {t}")));
        assert!(self.cmd(&format!("add chain inet {t} out {{ type filter hook output priority 0 ; }}")));
        assert!(self.cmd(&format!("add rule inet {t} out tcp sport {port} drop")));
    }
    /// Drops the ICMP errors that carry a path MTU (fragmentation needed,
    /// packet too big) that the namespace sends: a path MTU black hole.
    pub fn drop_icmp_too_big(&self) {
        let t = self.table;
        let _ = self.cmd(&format!("delete table inet {t}"));
        assert!(self.cmd(&format!("add table inet {t}")));
        assert!(self.cmd(&format!("add chain inet {t} out {{ type filter hook output priority 0 ; }}")));
        assert!(self.cmd(&format!("add rule inet {t} out icmp type destination-unreachable icmp code frag-needed drop")));
        assert!(self.cmd(&format!("add rule inet {t} out icmpv6 type packet-too-big drop")));
    }
    /// Counts the TCP packets from `src` arriving with TOS byte `tos` (DSCP
    /// and ECN bits as given) in the named counter `tosmatch` (all of them in `tcpseen`).
    pub fn count_tos(&self, src: &str, tos: u8) {
        let t = self.table;
        let _ = self.cmd(&format!("delete table inet {t}"));
        assert!(self.cmd(&format!("add table inet {t}")));
        assert!(self.cmd(&format!("add counter inet {t} tosmatch")));
        assert!(self.cmd(&format!("add counter inet {t} tcpseen")));
        assert!(self.cmd(&format!("add chain inet {t} inp {{ type filter hook input priority 0 ; }}")));
        assert!(self.cmd(&format!("add rule inet {t} inp ip saddr {src} meta l4proto tcp counter name tcpseen")));
        assert!(self.cmd(&format!("add rule inet {t} inp ip saddr {src} meta l4proto tcp ip dscp {} ip ecn {} counter name tosmatch", tos >> 2, tos & 3)));
    }
    /// Named counters, each counting the packets arriving in the namespace
    /// that match its nftables expression (`counters[i] = (name, expr)`).
    pub fn count(&self, counters: &[(&str, String)]) {
        let t = self.table;
        let _ = self.cmd(&format!("delete table inet {t}"));
        assert!(self.cmd(&format!("add table inet {t}")));
        assert!(self.cmd(&format!("add chain inet {t} inp {{ type filter hook input priority 0 ; }}")));
        for (name, expr) in counters {
            assert!(self.cmd(&format!("add counter inet {t} {name}")));
            assert!(self.cmd(&format!("add rule inet {t} inp {expr} counter name {name}")), "nft rule {expr}");
        }
    }
    /// The packets a named counter has seen.
    pub fn packets(&self, counter: &str) -> u64 {
        let o = Command::new("ip")
            .args(["netns", "exec", self.ns, "nft", "list", "counter", "inet", self.table, counter])
            .output()
            .expect("nft list counter");
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        text.split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no packet count in {text:?}"))
    }
    pub fn clear(&self) {
        let _ = self.cmd(&format!("delete table inet {}", self.table));
    }
}

impl Drop for Nft<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A lab with an engine (AF_XDP, no services), a C cases program and its
/// kernel peer started on Linux's side at `ip:base`; the cases program runs
/// on the kernel (`kernel_cmd`) and under the shim (`shim_cmd`).
/// Fields drop in order: the peer and the engine stop before the lab goes.
pub struct CasesRig {
    /// Killed (and reaped) when the test ends, even by a panic.
    pub peer: super::engine::ChildGuard,
    pub engine: super::engine::EngineProc,
    pub cases: PathBuf,
    pub shim: PathBuf,
    /// Linux's address, as the programs take it.
    pub lip: String,
    pub base: u16,
    pub limit: std::time::Duration,
    /// Where the programs were compiled; removed on drop.
    dir: PathBuf,
    pub lab: outboard_lab::Lab,
}

impl Drop for CasesRig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl CasesRig {
    /// Compiles `tests/shim/{tag}_cases.c` and `{tag}_peer.c`, brings the lab
    /// up and the peer listening (it prints `listening`).
    pub fn start(tag: &str, base: u16, limit: std::time::Duration) -> CasesRig {
        CasesRig::start_as(tag, tag, base, limit)
    }

    /// `start` with its own lab name (`lab_tag`), for tests of one binary
    /// that run at once with the same programs.
    pub fn start_as(tag: &str, lab_tag: &str, base: u16, limit: std::time::Duration) -> CasesRig {
        let dir = std::env::temp_dir().join(format!("ob-shim-{lab_tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = compile(&format!("{tag}_cases.c"), &dir);
        let peer_bin = compile(&format!("{tag}_peer.c"), &dir);
        let name = super::netns::lab_name(lab_tag);
        let lab = super::netns::lab(&outboard_lab::LabConfig::new(&name));
        let engine = super::engine::EngineProc::in_lab(&lab, &format!("{name}-e"), "af_xdp", &["--services", "none"]);
        let lip = lab.linux_addr().to_string();
        let mut peer = super::engine::ChildGuard::new(
            Command::new("ip")
                .args(["netns", "exec", lab.linux_ns()])
                .arg(&peer_bin)
                .args([&lip, &base.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("peer"),
            std::time::Duration::ZERO,
        );
        let mut first = String::new();
        BufReader::new(peer.child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
        assert_eq!(first.trim(), "listening");
        CasesRig { lab, engine, peer, cases, shim: super::shim_lib(), lip, base, limit, dir }
    }

    /// The cases program on the kernel's stack, in Linux's namespace.
    pub fn kernel_cmd(&self, extra: &[&str]) -> Command {
        let mut c = super::netns::ns_command(self.lab.linux_ns(), self.limit, 2, &[]);
        c.arg(&self.cases).args([&self.lip, &self.base.to_string()]).args(extra);
        c
    }

    /// The cases program under the shim, in the engine's namespace.
    pub fn shim_cmd(&self, extra: &[&str]) -> Command {
        let mut c = super::netns::ns_command(
            self.lab.engine_ns(),
            self.limit,
            2,
            &[super::OUTBOARD, "run", "--name", &self.engine.name, "--shim"],
        );
        c.arg(&self.shim)
            .arg("--")
            .arg(&self.cases)
            .args([&self.lip, &self.base.to_string()])
            .args(extra)
            .env("OUTBOARD_RUN_DIR", super::run_dir())
            .env("OUTBOARD_REQUIRE_ENGINE", "1");
        c
    }
}
