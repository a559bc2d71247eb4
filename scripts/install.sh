#!/usr/bin/env bash
# Installs Outboard where `outboard run` and a C compiler find it:
#   PREFIX/bin/outboard
#   PREFIX/lib/liboutboard_shim.so            (outboard run finds it from PREFIX/bin)
#   PREFIX/lib/liboutboard_shim_inline.so     (outboard run --inline: the shim with the engine inside)
#   PREFIX/lib/liboutboard.{so,a}             (the C API: cc ... -loutboard)
#   PREFIX/lib/liboutboard_embedded.{so,a}    (the C API with an engine inside the process)
#   PREFIX/include/outboard.h, outboard_embedded.h
#   PREFIX/share/outboard/                    (the systemd unit and a sample engine config)
#   PREFIX/share/doc/outboard/                (README and docs)
#
# usage: scripts/install.sh [--prefix DIR] [--debug] [--no-build]
#   --prefix DIR   where to install (default /usr/local)
#   --debug        install the debug build (target/debug) instead of the release build
#   --no-build     install what is already built (CARGO_TARGET_DIR or target/)
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
profile=release
build=1
while [ "$#" -gt 0 ]; do
    case "$1" in
        --prefix) [ "$#" -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix="$2"; shift 2 ;;
        --debug) profile=debug; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

target="${CARGO_TARGET_DIR:-target}/$profile"
if [ "$build" -eq 1 ]; then
    flags=()
    [ "$profile" = release ] && flags+=(--release)
    cargo build --locked "${flags[@]}" -p outboard-cli -p outboard-shim -p outboard-shim-inline -p outboard-capi -p outboard-embedded
fi
for f in outboard liboutboard_shim.so liboutboard_shim_inline.so liboutboard.so liboutboard.a liboutboard_embedded.so liboutboard_embedded.a; do
    [ -f "$target/$f" ] || { echo "install.sh: $target/$f is missing (build it, or drop --no-build)" >&2; exit 1; }
done

install -d "$prefix/bin" "$prefix/lib" "$prefix/include" "$prefix/share/outboard" "$prefix/share/doc/outboard"
install -m 755 "$target/outboard" "$prefix/bin/outboard"
for f in liboutboard_shim.so liboutboard_shim_inline.so liboutboard.so liboutboard_embedded.so; do
    install -m 755 "$target/$f" "$prefix/lib/$f"
done
for f in liboutboard.a liboutboard_embedded.a; do
    install -m 644 "$target/$f" "$prefix/lib/$f"
done
install -m 644 include/outboard.h include/outboard_embedded.h "$prefix/include/"
install -m 644 packaging/outboard-engine@.service packaging/engine.toml "$prefix/share/outboard/"
install -m 644 README.md docs/*.md "$prefix/share/doc/outboard/"
echo "installed Outboard ($profile) under $prefix: bin/outboard, lib/liboutboard{,_shim,_shim_inline,_embedded}, include/outboard{,_embedded}.h"
