#!/usr/bin/env bash
# Builds the example handlers: every Rust example of sdk/handler-rust (in
# release, for wasm32-unknown-unknown) and, when clang and wasm-ld are
# installed, the C examples of sdk/handler-c; copies the modules to OUT_DIR
# as NAME.wasm (C ones as NAME_c.wasm) and checks each against the handler
# ABI with sdk/check_exports.py.
#
# usage: sdk/build.sh [OUT_DIR]   (default: target/handlers, from the
#                                  repository's root)
#
# Needs: cargo with the wasm32-unknown-unknown target; python3 for the check;
# optional: clang and lld (apt-get install clang lld) for the C examples.
set -euo pipefail

sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$sdk/.." && pwd)"
out="${1:-$root/target/handlers}"
ws="$sdk/handler-rust"
target=wasm32-unknown-unknown

fail() {
    echo "sdk/build.sh: $*" >&2
    exit 1
}

command -v cargo >/dev/null 2>&1 || fail "cargo not found"
sysroot="$(rustc --print sysroot)" || fail "rustc not found"
if [ ! -d "$sysroot/lib/rustlib/$target/lib" ]; then
    fail "the Rust target $target is not installed (rustup target add $target)"
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"

# Rust: run from the workspace so its .cargo/config.toml applies; the stack
# size is passed here too, because RUSTFLAGS (if the caller set it) would
# replace that file's rustflags.
export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-zstack-size=65536"
build=(cargo build --release --target "$target" --target-dir "$ws/target")
cd "$ws"
if ! "${build[@]}" --offline; then
    echo "sdk/build.sh: offline build failed; trying with the registry" >&2
    "${build[@]}" || fail "cargo build of the Rust handlers failed"
fi
built=()
for dir in "$ws"/examples/*/; do
    name="$(basename "$dir")"
    wasm="$ws/target/$target/release/${name//-/_}.wasm"
    [ -f "$wasm" ] || fail "$wasm was not built"
    cp "$wasm" "$out/$name.wasm"
    built+=("$out/$name.wasm")
done

# C: only where clang and wasm-ld are installed.
if command -v "${CC:-clang}" >/dev/null 2>&1 && command -v wasm-ld >/dev/null 2>&1; then
    "$sdk/handler-c/build.sh" "$out" || fail "the C handlers failed to build"
    for src in "$sdk"/handler-c/examples/*.c; do
        built+=("$out/$(basename "$src" .c)_c.wasm")
    done
else
    echo "sdk/build.sh: clang or wasm-ld not found: C examples skipped (apt-get install clang lld)" >&2
fi

# Check every module against the ABI.
if command -v python3 >/dev/null 2>&1; then
    python3 "$sdk/check_exports.py" --quiet "${built[@]}" || fail "a module fails the ABI check"
else
    echo "sdk/build.sh: python3 not found: ABI check skipped" >&2
fi
for m in "${built[@]}"; do
    echo "$(wc -c <"$m") bytes  $m"
done
