#!/usr/bin/env bash
# Installs what the tests need and runs every test: the README's test command and CI's.
# Bounded: each fuzz target runs for FUZZ_SECONDS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# apt_install PACKAGE...: installs them as root with apt-get, else says what is missing.
apt_install() {
    [ "$#" -gt 0 ] || return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    else
        echo "missing: $* (install them, as root, with apt-get)" >&2
    fi
}

step "toolchain"
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust (https://rustup.rs) and re-run" >&2
    exit 1
fi
cargo --version

step "system packages for the root tests (namespaces, veth, ping, tshark, nftables, scapy) and valgrind (bench cost)"
# The lab and interop tests drive the real Linux stack: they need these tools.
need_pkgs=()
for pair in ip:iproute2 ethtool:ethtool ping:iputils-ping sysctl:procps setsid:util-linux \
            setpriv:util-linux tshark:tshark nft:nftables cc:gcc tmux:tmux valgrind:valgrind; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need_pkgs+=("${pair#*:}")
done
apt_install ${need_pkgs[@]+"${need_pkgs[@]}"}
step "system packages for the socket-shim tests (curl, nginx, redis, memcached, iperf3, sockperf, wrk, node, Java, PostgreSQL)"
# tests/shim_apps.rs, tests/shim_runtimes.rs and `outboard bench apps` run these unmodified programs
# under the shim (and on the kernel). They run in the tests' namespaces; the
# services the packages would start are kept from starting (policy-rc.d) and
# any that did start are stopped, so nothing holds their ports.
app_pkgs=()
for pair in curl:curl nginx:nginx-light redis-server:redis-server redis-benchmark:redis-tools \
            redis-cli:redis-tools memcached:memcached memcaslap:libmemcached-tools iperf3:iperf3 \
            sockperf:sockperf wrk:wrk node:nodejs java:default-jdk-headless javac:default-jdk-headless \
            useradd:passwd pgbench:postgresql psql:postgresql-client; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || app_pkgs+=("${pair#*:}")
done
# The PostgreSQL server is not on PATH on Debian (/usr/lib/postgresql/VERSION/bin).
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || app_pkgs+=(postgresql)
if [ "${#app_pkgs[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        made_policy=0
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod +x /usr/sbin/policy-rc.d
            made_policy=1
        fi
        apt-get update -qq
        echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${app_pkgs[@]}" || apt_rc=$?
        [ "$made_policy" -eq 1 ] && rm -f /usr/sbin/policy-rc.d
        [ "${apt_rc:-0}" -eq 0 ] || { echo "apt-get install ${app_pkgs[*]} failed" >&2; exit 1; }
    else
        echo "missing tools: ${app_pkgs[*]} (install them, as root, with apt-get)" >&2
    fi
fi
if [ "$(id -u)" -eq 0 ]; then
    for svc in nginx redis-server memcached iperf3 postgresql; do
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
            systemctl stop "$svc" || true
        elif command -v service >/dev/null 2>&1; then
            service "$svc" stop >/dev/null 2>&1 || true
        fi
    done
fi

# tests/run_detect.rs builds a Go program and a static C one (`outboard run`
# must recognise both): Go (the machine's, else Debian's) and libc.a.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
build_pkgs=()
command -v go >/dev/null 2>&1 || build_pkgs+=(golang-go)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -e /usr/lib/aarch64-linux-gnu/libc.a ] || build_pkgs+=(libc6-dev)
apt_install ${build_pkgs[@]+"${build_pkgs[@]}"}

if ! python3 -c 'import scapy' >/dev/null 2>&1; then
    python3 -m pip install --quiet scapy || echo "could not install scapy (pip install scapy)" >&2
fi
# tests/service.rs parses `--metrics` pages with the Prometheus project's own parser.
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
    python3 -m pip install --quiet prometheus-client==0.26.0 \
        || echo "could not install prometheus-client (pip install prometheus-client)" >&2
fi

step "handler toolchains: Rust's wasm32 target (and clang with lld for the C handler example)"
# tests/handlers.rs builds the SDK's example handlers (sdk/build.sh) for wasm32-unknown-unknown.
if command -v rustup >/dev/null 2>&1; then
    rustup target add wasm32-unknown-unknown
elif [ ! -d "$(rustc --print sysroot)/lib/rustlib/wasm32-unknown-unknown" ]; then
    echo "missing: the wasm32-unknown-unknown Rust target (rustup target add wasm32-unknown-unknown)" >&2
fi
wasm_pkgs=()
command -v clang >/dev/null 2>&1 || wasm_pkgs+=(clang)
command -v wasm-ld >/dev/null 2>&1 || wasm_pkgs+=(lld)
apt_install ${wasm_pkgs[@]+"${wasm_pkgs[@]}"}

step "installing cargo-fuzz (for the bounded fuzz runs)"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

step "build (all targets)"
# One-shot builds gain nothing from incremental state (it was most of the disk used);
# keep it off unless the caller asked for it. Report the free disk: a full run needs about
# 7 GB under target/ and fuzz/target/ (6.4 GB measured: 5.7 + 0.65).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "disk: $((free_kb / 1024 / 1024)) GiB free here"
if [ "${free_kb:-0}" -lt $((10 * 1024 * 1024)) ]; then
    echo "warning: under 10 GiB free; the build may run out of disk" >&2
fi
cargo build --workspace --all-targets --locked

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "unit, property, scripted-TCP, simulator, CLI and (as root) namespace tests"
# The interop echo matrix (2 links x 2 topologies x 6 impairments through the lab)
# moves OUTBOARD_INTEROP_BYTES each way per run: 1 GiB (about 9 minutes for all
# 24 runs on 2 cores); set it smaller for a quick local run.
export OUTBOARD_INTEROP_BYTES="${OUTBOARD_INTEROP_BYTES:-1GiB}"
cargo test --workspace --locked

step "fuzz targets, each for a bounded time"
scripts/fuzz-smoke.sh "${FUZZ_SECONDS:-20}"

du -sh target fuzz/target 2>/dev/null || true
step "all tests passed"
