//! Outboard's socket shim: an LD_PRELOAD library (`outboard run -- CMD`)
//! that gives an unmodified program's TCP and UDP sockets (IPv4, and IPv6
//! when the engine runs it) to an engine and passes every other descriptor
//! to the kernel untouched.
//!
//! How it is built:
//! - `interpose.rs`: the exported C functions (socket, connect, read, epoll_wait…);
//!   each checks a lock-free per-descriptor mark first, so files, pipes and
//!   kernel sockets cost one atomic load.
//! - `ops.rs`: the calls for tracked descriptors, over the socket objects of
//!   `sock.rs` (built on the native API, `outboard-api`), with waiting done
//!   by `wait.rs` (futex for one socket; the thread's eventfd plus a waker
//!   thread for poll/select/epoll mixing engine and kernel descriptors).
//! - `state.rs`: the board (attached on first use), the descriptor table,
//!   the process-wide lock, fork handling, counters (shown by `outboard stat`).
//! - `sockopt.rs`: socket options and Linux's `struct tcp_info`.
//! - `exec.rs`: engine sockets carried across `exec` into the next image.
//!
//! Which sockets go to the engine: AF_INET and AF_INET6 stream/datagram
//! sockets bound to a wildcard (`::` only dual-stack unless the engine runs
//! IPv6) or one of the engine's addresses, and connects or first datagrams
//! to destinations the engine serves (`EngineNet::serves`: its subnet or
//! IPv6 prefix, or anywhere through its gateway). Loopback and everything
//! else stays with the kernel.

// The shim runs in applications and waits on the real clock (timeouts of
// poll, SO_RCVTIMEO): the protocol crates' ban on reading it does not apply.
#![allow(clippy::disallowed_methods)]

pub mod addr;
pub mod epoll;
pub mod exec;
pub mod interpose;
pub mod log;
pub mod ops;
pub mod poll;
pub mod real;
pub mod sock;
pub mod sockopt;
pub mod state;
pub mod wait;

extern "C" fn on_load() {
    state::init();
}

// Runs when the dynamic loader loads the library (before the program's main).
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
