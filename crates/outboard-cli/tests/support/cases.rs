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
    pub fn clear(&self) {
        let _ = self.cmd(&format!("delete table inet {}", self.table));
    }
}

impl Drop for Nft<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}
