#!/usr/bin/env bash
# Builds the C example handlers (examples/NAME.c) into WebAssembly modules,
# OUT_DIR/NAME_c.wasm.
#
# usage: sdk/handler-c/build.sh [OUT_DIR]   (default: target/handlers)
#
# Needs clang and wasm-ld (Debian/Ubuntu: apt-get install clang lld).
# CC overrides the compiler (for example CC=clang-14).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/handlers}"
cc="${CC:-clang}"

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "handler-c: $cc not found (apt-get install clang lld)" >&2
    exit 1
fi
if ! command -v wasm-ld >/dev/null 2>&1; then
    echo "handler-c: wasm-ld not found (apt-get install lld)" >&2
    exit 1
fi

mkdir -p "$out"
for src in "$here"/examples/*.c; do
    name="$(basename "$src" .c)"
    # -nostdlib -ffreestanding: no libc, no WASI (-mbulk-memory: the
    # compiler's memcpy/memset become memory.copy/memory.fill instructions). --no-entry: a library whose
    # exports are the OB_EXPORT functions, plus the memory (as `memory`),
    # which wasm-ld exports by default. A 64 KiB stack placed first, so that
    # an overflow traps instead of corrupting data. Named NAME_c.wasm, to sit
    # beside the Rust example of the same name.
    "$cc" --target=wasm32-unknown-unknown -O2 -mbulk-memory -nostdlib -ffreestanding \
        -Wall -Wextra -Werror \
        -Wl,--no-entry -Wl,--stack-first -Wl,-z,stack-size=65536 \
        -o "$out/${name}_c.wasm" "$src"
    echo "handler-c: $out/${name}_c.wasm"
done
