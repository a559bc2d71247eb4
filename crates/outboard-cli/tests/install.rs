#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! `scripts/install.sh` (no root): the build installed under a temporary
//! prefix works from there — `PREFIX/bin/outboard run` finds the shim in
//! `PREFIX/lib` by itself and a Python client under it reaches an engine's
//! echo service; a C program compiled against `PREFIX/include` and linked
//! with `PREFIX/lib/liboutboard` fetches from an engine's chargen. Two
//! engines on a private fabric.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::engine::start_engine;
use support::{output_within, test_dir, text, OUTBOARD};

/// The cargo target directory the tests were built in (`…/target`).
fn target_dir() -> PathBuf {
    Path::new(OUTBOARD).parent().and_then(Path::parent).expect("target/PROFILE/outboard").to_path_buf()
}

const ECHO: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], 7), timeout=10)
s.sendall(b"installed")
got = b""
while len(got) < 9:
    b = s.recv(64)
    if not b:
        break
    got += b
print(got.decode(), flush=True)
"#;

#[test]
fn the_installed_outboard_finds_its_shim_and_c_programs_build_against_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = test_dir("ob-install", "prefix");
    let prefix = dir.join("prefix");
    let profile = Path::new(OUTBOARD).parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
    let mut c = Command::new(root.join("scripts/install.sh"));
    c.args(["--prefix", prefix.to_str().unwrap(), "--no-build"]).env("CARGO_TARGET_DIR", target_dir());
    if profile == "debug" {
        c.arg("--debug");
    }
    let o = c.output().expect("scripts/install.sh");
    assert!(o.status.success(), "install.sh: {}", text(&o));
    for f in ["bin/outboard", "lib/liboutboard_shim.so", "lib/liboutboard_shim_inline.so", "lib/liboutboard.so", "lib/liboutboard.a", "include/outboard.h", "share/outboard/engine.toml"] {
        assert!(prefix.join(f).is_file(), "{f} installed");
    }

    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let fabric = format!("fabric:inst{}", std::process::id());
    let _a = start_engine(&run, "inst-a", &["--link", &fabric, "--addr", "10.0.0.1/24"], Duration::from_secs(15));
    let _b = start_engine(&run, "inst-b", &["--link", &fabric, "--addr", "10.0.0.2/24", "--services", "none"], Duration::from_secs(15));

    // The installed `outboard run`, no --shim, no OUTBOARD_SHIM: it finds PREFIX/lib/liboutboard_shim.so.
    let mut c = Command::new(prefix.join("bin/outboard"));
    c.args(["run", "--name", "inst-b", "--", "python3", "-c", ECHO, "10.0.0.1"]).env("OUTBOARD_RUN_DIR", &run).env_remove("OUTBOARD_SHIM");
    let (ok, out, err) = output_within(c, Duration::from_secs(30), Duration::from_secs(2));
    assert!(ok && out.trim() == "installed", "a client under the installed shim: {out}\n{err}");
    // And `outboard run --inline` finds PREFIX/lib/liboutboard_shim_inline.so (its engine inside the client).
    let mut c = Command::new(prefix.join("bin/outboard"));
    c.args(["run", "--inline", "--name", "inst-i", "--link", &fabric, "--addr", "10.0.0.3/24", "--", "python3", "-c", ECHO, "10.0.0.1"])
        .env("OUTBOARD_RUN_DIR", &run)
        .env_remove("OUTBOARD_SHIM");
    let (ok, out, err) = output_within(c, Duration::from_secs(30), Duration::from_secs(2));
    assert!(ok && out.trim() == "installed", "a client under the installed inline shim: {out}\n{err}");

    // A C program against the installed header and library.
    let exe = dir.join("fetch");
    let lib = prefix.join("lib");
    let o = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(prefix.join("include"))
        .arg(root.join("examples/c/fetch.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-loutboard")
        .output()
        .expect("cc (apt-get install gcc)");
    assert!(o.status.success(), "cc fetch.c against {}: {}", prefix.display(), text(&o));
    let mut c = Command::new(&exe);
    c.args(["inst-b", "10.0.0.1", "19", "100000"]).env("OUTBOARD_RUN_DIR", &run);
    let (ok, out, err) = output_within(c, Duration::from_secs(30), Duration::from_secs(2));
    assert!(ok && out.contains("bytes=100000"), "the C program fetched from chargen: {out}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
