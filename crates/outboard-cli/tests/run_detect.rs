//! `outboard run` of programs whose sockets the socket shim cannot take
//! (no root needed): a Go TCP server built with `go build` (CGO_ENABLED=0,
//! statically linked; and CGO_ENABLED=1, dynamically linked yet still Go)
//! and a C program built with `gcc -static`. `outboard run` names the
//! program, says why its sockets stay with the kernel, and runs it (its exit
//! status is the program's); with `--require-engine` it exits 5 and the
//! program does not run. A dynamically linked program gets no such message.
//!
//! Each program, given `--mark FILE`, writes FILE and exits 0 at once (no
//! network needed), so a marker shows whether it ran. The engine is a fake:
//! a bound Unix socket where the board socket would be.
//!
//! `go` (on PATH or /usr/local/go/bin/go) and `gcc -static` (libc6-dev) are
//! required: a missing one fails the test with what to install. The builds
//! go under Cargo's `CARGO_TARGET_TMPDIR`, with a private GOCACHE and GOPATH
//! there (GOFLAGS=-mod=mod, GOTOOLCHAIN=local, GOPROXY=off: no network).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use support::engine::FakeEngine;
use support::OUTBOARD;

/// Exit code of `outboard run --require-engine` for such a program.
const NOT_INTERPOSABLE: i32 = 5;

impl FakeEngine {
    /// A shim that is not a library: dynamic programs' loader ignores it.
    fn dummy_shim(&self) -> PathBuf {
        let p = self.file("dummy-liboutboard_shim.so");
        std::fs::write(&p, b"not a library").unwrap();
        p
    }

    /// `outboard run --name e --shim DUMMY [FLAGS] -- PROGRAM ARGS`, with
    /// `path` prepended to PATH when given.
    fn run(&self, flags: &[&str], program: &[&str], path: Option<&Path>) -> Output {
        let shim = self.dummy_shim();
        let mut c = Command::new(OUTBOARD);
        c.args(["run", "--name", "e", "--shim"])
            .arg(&shim)
            .args(flags)
            .arg("--")
            .args(program)
            .env("OUTBOARD_RUN_DIR", &self.dir)
            .env_remove("OUTBOARD_SHIM")
            .env_remove("LD_PRELOAD");
        if let Some(p) = path {
            let old = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![p.to_path_buf()];
            dirs.extend(std::env::split_paths(&old));
            c.env("PATH", std::env::join_paths(dirs).unwrap());
        }
        c.output().expect("run outboard")
    }
}

// ---------------------------------------------------------------- the programs

/// Where the builds go (persistent: the Go cache makes reruns quick).
fn build_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("run-detect");
    std::fs::create_dir_all(&d).unwrap();
    d
}

const GO_SERVER: &str = r#"package main

import (
	"net"
	"os"
)

// A TCP echo-less server; with --mark FILE it writes FILE and exits at once.
func main() {
	for i := 1; i+1 < len(os.Args); i++ {
		if os.Args[i] == "--mark" {
			if err := os.WriteFile(os.Args[i+1], []byte("ran\n"), 0o644); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	l, err := net.Listen("tcp", ":8080")
	if err != nil {
		panic(err)
	}
	for {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
	}
}
"#;

const C_PROGRAM: &str = r#"#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* With --mark FILE it writes FILE and exits at once; else it makes a socket. */
int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--mark") == 0) {
            FILE *f = fopen(argv[i + 1], "w");
            if (!f) return 1;
            fputs("ran\n", f);
            return fclose(f) == 0 ? 0 : 1;
        }
    }
    return socket(AF_INET, SOCK_STREAM, 0) < 0;
}
"#;

fn go_exe() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
        .unwrap_or_else(|| {
            panic!(
                "go is not installed (not on PATH, not /usr/local/go/bin/go): install Go \
                 (https://go.dev/dl/ or `apt-get install golang-go`) to run these tests"
            )
        })
}

fn have_gcc() -> bool {
    Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `go build` of the server with CGO_ENABLED=`cgo`.
fn build_go(cgo: bool) -> PathBuf {
    let go = go_exe();
    let root = build_dir();
    let src = root.join(if cgo { "go-src-cgo" } else { "go-src" });
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("go.mod"), "module obrundetect\n\ngo 1.21\n").unwrap();
    std::fs::write(src.join("main.go"), GO_SERVER).unwrap();
    let out = root.join(if cgo { "go-server-cgo" } else { "go-server" });
    let o = Command::new(&go)
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", root.join("gocache"))
        .env("GOPATH", root.join("gopath"))
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env_remove("GOOS")
        .env_remove("GOARCH")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", go.display()));
    assert!(
        o.status.success(),
        "go build (CGO_ENABLED={}) failed: {}",
        u8::from(cgo),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn go_server() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| build_go(false))
}

fn go_server_cgo() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| build_go(true))
}

/// The C program, `gcc -static`, named `ob-static-prog` in its own directory.
fn static_program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = build_dir().join("static");
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.c");
        std::fs::write(&src, C_PROGRAM).unwrap();
        let out = dir.join("ob-static-prog");
        let o = Command::new("gcc")
            .args(["-static", "-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| {
                panic!("gcc is needed to build a static test program ({e}): install gcc and libc6-dev")
            });
        assert!(
            o.status.success(),
            "gcc -static failed (the static C library libc.a is in the package libc6-dev: install it): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// Whether an executable (64-bit little-endian ELF, trusted: built here)
/// has a PT_INTERP program header, i.e. is dynamically linked.
fn names_a_loader(exe: &Path) -> bool {
    let b = std::fs::read(exe).unwrap();
    assert_eq!(
        &b[..6],
        b"\x7fELF\x02\x01",
        "{} is 64-bit little-endian ELF",
        exe.display()
    );
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) == 3
    })
}

// ---------------------------------------------------------------- checks

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `outboard run` of `program --mark M`: the message names `shown` and says
/// `why`, the program ran (marker) and its status (0) is the command's.
fn runs_with_the_explanation(
    fake: &FakeEngine,
    program: &str,
    path: Option<&Path>,
    shown: &str,
    why: &str,
) {
    let marker = fake.file("marker");
    let o = fake.run(&[], &[program, "--mark", marker.to_str().unwrap()], path);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "stderr: {err}");
    assert!(marker.exists(), "the program ran: stderr: {err}");
    assert!(
        err.contains(&format!("outboard run: {shown} {why}")),
        "stderr: {err}"
    );
    assert!(err.contains("they stay with the kernel"), "stderr: {err}");
    assert!(err.contains("--require-engine"), "stderr: {err}");
    assert_eq!(err.matches("outboard run:").count(), 1, "said once: {err}");
}

/// `outboard run --require-engine` of `program --mark M`: exit 5, the
/// message, and the program did not run.
fn refused_with_5(fake: &FakeEngine, program: &str, path: Option<&Path>, shown: &str, why: &str) {
    let marker = fake.file("marker-refused");
    let o = fake.run(
        &["--require-engine"],
        &[program, "--mark", marker.to_str().unwrap()],
        path,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(NOT_INTERPOSABLE), "stderr: {err}");
    assert!(
        !marker.exists(),
        "the program must not have run: stderr: {err}"
    );
    assert!(
        err.contains(&format!("outboard run: {shown} {why}")),
        "stderr: {err}"
    );
    assert!(
        err.contains("Not running it (--require-engine)"),
        "stderr: {err}"
    );
}

const GO_WHY: &str = "is a Go program: its runtime makes socket system calls itself";
const STATIC_WHY: &str = "is statically linked: LD_PRELOAD does not apply to it";

#[test]
fn run_of_a_go_program_says_its_sockets_stay_with_the_kernel_and_runs_it() {
    let exe = go_server();
    assert!(!names_a_loader(exe), "CGO_ENABLED=0 builds a static binary");
    let fake = FakeEngine::new("go", "e");
    let p = exe.to_str().unwrap();
    runs_with_the_explanation(&fake, p, None, p, GO_WHY);
    assert!(stderr(&fake.run(&[], &[p, "--mark", "/dev/null"], None))
        .contains("native API (docs/API.md"));
}

#[test]
fn run_of_a_cgo_go_program_dynamically_linked_says_the_same() {
    if !have_gcc() {
        eprintln!("SKIPPED: gcc is not installed, so go cannot build with CGO_ENABLED=1");
        return;
    }
    let exe = go_server_cgo();
    assert!(
        names_a_loader(exe),
        "CGO_ENABLED=1 with net builds a dynamically linked binary"
    );
    let fake = FakeEngine::new("cgo", "e");
    let p = exe.to_str().unwrap();
    runs_with_the_explanation(&fake, p, None, p, GO_WHY);
    refused_with_5(&fake, p, None, p, GO_WHY);
}

#[test]
fn run_require_engine_refuses_a_go_program_with_5() {
    let fake = FakeEngine::new("go-req", "e");
    let p = go_server().to_str().unwrap();
    refused_with_5(&fake, p, None, p, GO_WHY);
}

#[test]
fn run_of_a_static_program_found_on_path_says_ld_preload_does_not_apply_and_runs_it() {
    let exe = static_program();
    assert!(!names_a_loader(exe), "gcc -static builds a static binary");
    let fake = FakeEngine::new("static", "e");
    runs_with_the_explanation(
        &fake,
        "ob-static-prog",
        exe.parent(),
        "ob-static-prog",
        STATIC_WHY,
    );
    let err = stderr(&fake.run(
        &[],
        &["ob-static-prog", "--mark", "/dev/null"],
        exe.parent(),
    ));
    assert!(err.contains("Link it dynamically against libc"), "{err}");
}

#[test]
fn run_require_engine_refuses_a_static_program_with_5() {
    let fake = FakeEngine::new("static-req", "e");
    let p = static_program().to_str().unwrap();
    refused_with_5(&fake, p, None, p, STATIC_WHY);
}

#[test]
fn run_of_a_script_judges_its_interpreter() {
    let fake = FakeEngine::new("script", "e");
    let script = fake.file("script");
    support::write_executable(&script, format!("#!{}\n", static_program().display()).as_bytes());
    let s = script.to_str().unwrap();
    let why = format!(
        "is a script for {}, which {STATIC_WHY}",
        static_program().display()
    );
    runs_with_the_explanation(&fake, s, None, s, &why);
    refused_with_5(&fake, s, None, s, &why);
}

#[test]
fn run_of_a_dynamic_program_says_nothing_of_the_sort() {
    let fake = FakeEngine::new("dynamic", "e");
    // Without --require-engine only: with it, `outboard run` attaches first,
    // which a fake engine does not answer (tests/access.rs runs it on a real one).
    {
        let flags: &[&str] = &[];
        let o = fake.run(flags, &["true"], None);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "flags {flags:?}: stderr: {err}");
        assert!(
            !err.contains("outboard run:"),
            "flags {flags:?}: stderr: {err}"
        );
        // A shell script for a dynamic interpreter: the same.
        let script = fake.file("dyn.sh");
        support::write_executable(&script, b"#!/bin/sh\nexit 6\n");
        let o = fake.run(flags, &[script.to_str().unwrap()], None);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "flags {flags:?}: stderr: {err}");
        assert!(
            !err.contains("outboard run:"),
            "flags {flags:?}: stderr: {err}"
        );
    }
}
