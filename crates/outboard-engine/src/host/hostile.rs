//! The hostile-board rule exercised without processes: one board session
//! on a real stack, in this thread, driven by arbitrary bytes — command
//! records the engine decodes, and scribbles anywhere in the board (ring
//! indices, status records, sync slots, buffers) — between shard turns.
//! Used by the `board_commands` fuzz target and by a property test; the
//! rule is that nothing panics, a session that breaks the rules is torn
//! down (its board marked `ENGINE_GONE`), and the stack stays bounded.
//! The shard runs the message service too, so message-mailbox commands
//! (binds, sends, calls, replies with made-up tokens, posted receives,
//! regions, writes) reach their real paths.

use super::attach::NewSession;
use super::Host;
use crate::app::Apps;
use outboard_board::command::{BoardCommand, Endpoint, ListenFamily, MsgName, StreamOption, SyncSlot};
use outboard_board::layout::{header, BoardParams, ENGINE_GONE, ENGINE_RUNNING, MAGIC, VERSION};
use outboard_board::{BoardLayout, Command, Mapping, Producer};
use outboard_stack::{Stack, StackConfig};
use outboard_time::{Duration, Instant};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a run came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostileOutcome {
    /// Records the run put in the command ring.
    pub commands: u64,
    /// The session was torn down (a violation, or a DETACH).
    pub torn_down: bool,
    /// Frames the stack produced (SYNs, datagrams).
    pub frames_out: u64,
}

/// A small reader over the fuzzer's bytes (zeros once they run out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let n = N.min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        b
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// A message-mailbox command from a few bytes (offsets anywhere in the board).
fn message_command(b: &mut Bytes<'_>, ep: Endpoint, sync: SyncSlot, to: SocketAddr, total: u64) -> BoardCommand {
    let to = SocketAddr::new(to.ip(), 7373);
    let (offset, len) = (u64::from(b.u32()) % total, u64::from(b.u8()) * 8);
    let name = if b.u8().is_multiple_of(2) { MsgName::new("kv").expect("a short name") } else { MsgName::default() };
    match b.u8() % 12 {
        0 => BoardCommand::MsgBind { sync, number: Some(u32::from(b.u8() % 3) + 10).filter(|_| b.u8().is_multiple_of(2)), capacity: 0, name, posted: b.u8().is_multiple_of(2) },
        1 => BoardCommand::MsgSend { ep, offset, len, to, mailbox: 10, tag: 1, reliable: b.u8().is_multiple_of(2) },
        2 => BoardCommand::MsgCall { ep, offset, len, to, mailbox: 10, tag: 2, timeout_ms: u32::from(b.u8()) },
        3 => BoardCommand::MsgReply { ep, offset, len, token: u32::from(b.u8() % 4) },
        4 => BoardCommand::MsgLookup { sync, host: to, name },
        5 => BoardCommand::MsgPostRecv { ep, offset, len, tag: 3 },
        6 => BoardCommand::MsgRegister { sync, ep, offset, len, tripwire: Some(u64::from(b.u8())), notify: true },
        7 => BoardCommand::MsgUnregister { ep, cookie: b.u64() },
        // Handlers: whatever the board's bytes are, staged and loaded (refused: never valid WebAssembly).
        8 => BoardCommand::HandlerStage { offset, len },
        9 => BoardCommand::HandlerLoad { sync, name, mailbox: u32::from(b.u8() % 3), memory: b.u64() % (2 << 20), kv: 0, deadline_ms: 0, max_faults: 0 },
        10 => BoardCommand::HandlerUnload { sync, name },
        _ => BoardCommand::MsgWrite { ep, offset, len, to, cookie: b.u64(), at: b.u32(), tag: 4 },
    }
}

/// Runs one session through `input` (at most a few hundred steps).
pub fn drive_board(input: &[u8]) -> HostileOutcome {
    let mut out = HostileOutcome::default();
    let Ok(layout) = BoardLayout::new(BoardParams::small()) else { return out };
    let Ok(map) = Mapping::anonymous_shared(layout.total) else { return out };
    let map = Arc::new(map);
    map.write(header::MAGIC, MAGIC);
    map.write(header::VERSION, VERSION);
    map.atomic_u32(header::ENGINE_STATE).store(ENGINE_RUNNING, Ordering::Release);
    let Ok((app_sock, engine_sock)) = UnixStream::pair() else { return out };
    let dead = Arc::new(AtomicBool::new(false));
    let rings = layout.shards[0];
    let mut cmds: Producer<Command> = Producer::new(map.clone(), rings.command_ring, layout.params.command_capacity);
    let session = NewSession { map: map.clone(), layout: layout.clone(), sock: engine_sock, pid: 1, uid: 0, key: 1, dead: dead.clone(), wake: None, wake_groups: Default::default(), board: 1, regions: NewSession::all_regions(&layout), memory: None };

    let mut now = Instant::from_nanos(1_000_000_000);
    let mut cfg = StackConfig::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 9, 0, 1), 24);
    cfg.secret = [7; 16];
    // Stream regions hold at least the stack's TCP buffers (attach sees to it).
    cfg.tcp.send_buffer = BoardParams::small().stream_buffer as usize;
    cfg.tcp.recv_buffer = BoardParams::small().stream_buffer as usize;
    let mut stack = Stack::new(cfg, now);
    let mut host = Host::new(0, None);
    host.adopt(session);
    let mut apps = Apps::new(64 << 20);
    let settings = crate::messages::MessageSettings::new(7373);
    if let Ok(svc) = crate::messages::MessageService::start(&mut stack, &settings, 1) {
        let svc = Arc::new(std::sync::Mutex::new(svc));
        host.set_messages(Some(svc.clone()));
        apps.add(Box::new(crate::messages::MessageApp(svc)));
    }
    apps.add(Box::new(host));

    let syncs = outboard_board::SyncTable::new(map.clone(), layout.syncs, layout.params.syncs);
    let mut b = Bytes(input);
    let mut frame = vec![0u8; 2048];
    for _ in 0..256 {
        if b.0.is_empty() {
            break;
        }
        match b.u8() % 8 {
            // A well-formed command from a few bytes (reaches deep paths quickly).
            0..=2 => {
                let ep = Endpoint(u32::from(b.u8() % 20));
                let sync = SyncSlot(u32::from(b.u8() % 20));
                let port = u16::from(b.u8() % 4) + 5000;
                let to = SocketAddr::from((Ipv4Addr::new(10, 9, 0, 2), port));
                let c = match b.u8() % 10 {
                    0 => BoardCommand::Listen { sync, port: Some(port), backlog: 4, flags: Default::default() },
                    1 => BoardCommand::Connect { sync, to, mss: 0, fast_open: false, tos: 0, rcv_clamp: 0 },
                    2 => BoardCommand::Push { ep, written: b.u64() % 40_000 },
                    3 => BoardCommand::Consumed { ep, read: b.u64() % 40_000 },
                    4 => BoardCommand::UdpBind { sync, port, family: ListenFamily::Both },
                    5 => BoardCommand::UdpSend { ep, offset: u64::from(b.u32()) % layout.total as u64, len: u64::from(b.u8()), to },
                    6 if b.u8().is_multiple_of(2) => {
                        let option = if b.u8().is_multiple_of(2) { StreamOption::NoDelay(true) } else { StreamOption::QuickAck(b.u32() % 4) };
                        BoardCommand::SetOption { ep, option }
                    }
                    6 => {
                        syncs.arm(sync.0);
                        BoardCommand::Info { sync, ep }
                    }
                    7 if b.u8().is_multiple_of(4) => BoardCommand::WakeGroup { ep, group: b.u8() % 8 },
                    7 => BoardCommand::Shutdown { ep },
                    8 => BoardCommand::Close { ep },
                    // (Abort when the input ends here, as before message commands.)
                    _ if b.0.is_empty() || b.u8().is_multiple_of(2) => BoardCommand::Abort { ep },
                    _ => {
                        // Armed as an application arms a slot before a command that completes it.
                        syncs.arm(sync.0);
                        message_command(&mut b, ep, sync, to, layout.total as u64)
                    }
                };
                let _ = cmds.put(c.encode());
                out.commands += 1;
            }
            // An arbitrary 64-byte record.
            3 => {
                let r = Command {
                    op: b.u32() % 32,
                    endpoint: b.u32(),
                    sync: b.u32(),
                    flags: b.u32(),
                    a: b.u64(),
                    b: b.u64(),
                    c: b.u64(),
                    d: b.u64(),
                    e: b.u64(),
                    f: b.u64(),
                };
                let _ = cmds.put(r);
                out.commands += 1;
            }
            // Scribble on the board anywhere (ring indices and records included).
            4 => {
                let at = b.u32() as usize % layout.total;
                let bytes: [u8; 16] = b.take();
                let n = bytes.len().min(layout.total - at);
                map.copy_in(at, &bytes[..n]);
            }
            // Time passes.
            5 => now += Duration::from_millis(u64::from(b.u8()) * 10),
            // A turn: the shard's apps, the stack's timers, its frames out.
            _ => {
                if stack.poll_timeout().is_some_and(|t| t <= now) {
                    stack.handle_timeout(now);
                }
                apps.turn(&mut stack, now);
                while stack.poll_transmit(now, &mut frame).is_some() {
                    out.frames_out += 1;
                }
            }
        }
    }
    apps.turn(&mut stack, now);
    let sessions = |apps: &Apps| apps.get::<Host>().map_or(0, |h| h.rows().len());
    out.torn_down = sessions(&apps) == 0;
    // The application hangs up: whatever is left is torn down, and nothing stays owned.
    drop(app_sock);
    dead.store(true, Ordering::Release);
    apps.turn(&mut stack, now);
    assert_eq!(sessions(&apps), 0, "a dead session is dropped");
    if !out.torn_down {
        // Torn down by this last turn, so nothing scribbled since: the board says so.
        // (After an earlier teardown the application may still scribble on its own board.)
        assert_eq!(map.atomic_u32(header::ENGINE_STATE).load(Ordering::Acquire), ENGINE_GONE, "a dead session is told");
    }
    assert!(apps.owners().is_empty(), "a torn-down session owns no connection");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_listen_then_garbage_tears_the_session_down() {
        // op 0 (a typed command), listen; then an arbitrary record with op 0 (unknown); then a turn.
        let mut input = vec![0u8, 0, 0, 0, 0];
        input.push(3);
        input.extend_from_slice(&[0u8; 64]);
        input.push(7);
        let out = drive_board(&input);
        assert_eq!(out.commands, 2);
        assert!(out.torn_down, "an unknown command is a violation");
    }

    #[test]
    fn a_scribble_after_the_teardown_is_the_application_s_own_business() {
        // Found by the fuzzer: ten listens and a connect on one sync slot, a
        // turn ("bad sync slot": torn down), then zeros scribbled over the
        // header's engine state. The engine has dropped the session; the board is the
        // application's to spoil.
        let mut input = vec![0u8; 54];
        input.extend_from_slice(&[0xa1, 0x2f, 0x06, 0x44, 0x77]);
        let out = drive_board(&input);
        assert!(out.torn_down);
    }

    /// A typed message command: op 0, endpoint 0, sync `sync`, port byte,
    /// kind 9 and an odd byte (a message command), the offset (board
    /// header: no buffer), `len` bytes / 8, the name byte, `which`, then `rest`.
    fn message(sync: u8, len: u8, which: u8, rest: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, sync, 0, 9, 1, 0, 0, 0, 0, len, 0, which];
        v.extend_from_slice(rest);
        v
    }

    #[test]
    fn a_mailbox_binds_and_a_send_from_outside_any_buffer_is_a_violation() {
        // Bind mailbox 10 named "kv", then a turn: the session lives.
        let bind = message(0, 0, 0, &[0, 0, 1]);
        let out = drive_board(&[&bind[..], &[7]].concat());
        assert_eq!(out.commands, 1);
        assert!(!out.torn_down, "a bind is no violation");
        // Then a reliable send from the board's header: not a buffer the application holds.
        let send = message(1, 8, 1, &[0]);
        let out = drive_board(&[&bind[..], &[7], &send[..], &[7]].concat());
        assert_eq!(out.commands, 2);
        assert!(out.torn_down, "bytes outside the application's buffers are a violation");
        // A reply to a token the engine never gave, from outside any buffer: the same.
        let reply = message(1, 1, 3, &[2]);
        assert!(drive_board(&[&bind[..], &[7], &reply[..], &[7]].concat()).torn_down);
        // A lookup (no engine answers at 10.9.0.2): no violation.
        let lookup = message(1, 0, 4, &[]);
        assert!(!drive_board(&[&bind[..], &[7], &lookup[..], &[7]].concat()).torn_down);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// Any bytes: no panic, and a dead session frees everything (checked inside).
        #[test]
        fn arbitrary_commands_and_scribbles_never_break_the_engine(input in proptest::collection::vec(any::<u8>(), 0..2048)) {
            drive_board(&input);
        }
    }
}
