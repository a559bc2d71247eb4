#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (seconds, default 20). Any crash fails.
# Uses a nightly toolchain when one is installed, otherwise the stable one with
# RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Z flags for its sanitizer build).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-20}"
toolchain=()
if rustup run nightly rustc --version >/dev/null 2>&1; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
fi
targets=$(cargo "${toolchain[@]}" fuzz list)
cargo "${toolchain[@]}" fuzz build --release
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in $targets; do
    mkdir -p "corpus/$t"
    if ! cargo "${toolchain[@]}" fuzz run --release "$t" "corpus/$t" -- -max_total_time="$secs" >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "fuzz: $t FAILED (the failing input is in fuzz/artifacts/$t)" >&2
        exit 1
    fi
    echo "fuzz: $t: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)"
done
echo "fuzz: every target ran ${secs}s without a failure"
