#!/usr/bin/env bash
# Installs what the tests need and runs every test: the README's test command and CI's.
# Bounded: each fuzz target runs for FUZZ_SECONDS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust (https://rustup.rs) and re-run" >&2
    exit 1
fi
cargo --version

step "installing cargo-fuzz (for the bounded fuzz runs)"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

step "build (all targets)"
cargo build --workspace --all-targets --locked

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "unit, property, scripted-TCP, simulator and CLI tests"
cargo test --workspace --locked

step "fuzz targets, each for a bounded time"
scripts/fuzz-smoke.sh "${FUZZ_SECONDS:-20}"

step "all tests passed"
