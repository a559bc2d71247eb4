//! One IPv4 stack instance per engine shard, sans-IO: frames and time in,
//! frames out. ARP, IPv4 (with bounded fragment reassembly), ICMP, UDP and the
//! TCP connection table (listeners with SYN queue and SYN cookies, accept
//! queues, port allocation). No global state: two `Stack`s never share anything.
//!
//! Call order: `receive_frame` for each received frame and the socket calls
//! as the application makes them; then drain `poll_transmit` until `None`,
//! and call `handle_timeout` at or after `poll_timeout`.
//! STUB: signatures are the contract; bodies are being written.

#![forbid(unsafe_code)]

use outboard_tcp::{Connection, ConnStats, FourTuple, State};
use outboard_time::{Duration, Instant};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Settings of one stack instance.
#[derive(Debug, Clone)]
pub struct StackConfig {
    pub mac: [u8; 6],
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU of the link (frames are at most mtu + 14 bytes).
    pub mtu: usize,
    /// Template for every TCP connection of this stack.
    pub tcp: outboard_tcp::Config,
    /// Secret for ISNs and SYN cookies; the owner draws it from its random source.
    pub secret: [u8; 16],
    pub arp_cache_cap: usize,
    pub arp_entry_ttl: Duration,
    /// Frames held per unresolved next hop while ARP resolves.
    pub arp_pending_cap: usize,
    pub reassembly_mem_cap: usize,
    pub reassembly_timeout: Duration,
    /// Embryonic (SYN-RECEIVED) connections per listener before SYN cookies take over.
    pub syn_queue_cap: usize,
    pub ephemeral_ports: (u16, u16),
}

impl StackConfig {
    /// Defaults for everything but the addresses.
    pub fn new(mac: [u8; 6], addr: Ipv4Addr, prefix_len: u8) -> StackConfig {
        StackConfig {
            mac,
            addr,
            prefix_len,
            gateway: None,
            mtu: 1500,
            tcp: outboard_tcp::Config::default(),
            secret: [0; 16],
            arp_cache_cap: 1024,
            arp_entry_ttl: Duration::from_secs(60),
            arp_pending_cap: 16,
            reassembly_mem_cap: 256 * 1024,
            reassembly_timeout: Duration::from_secs(30),
            syn_queue_cap: 128,
            ephemeral_ports: (32768, 60999),
        }
    }
}

/// Handle of a TCP connection in this stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);
/// Handle of a TCP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(pub u32);
/// Handle of a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackError {
    AddrInUse,
    NoEphemeralPorts,
    NoSuchSocket,
    /// UDP datagram larger than the stack will send.
    MessageTooLong,
    /// UDP receive: nothing queued.
    WouldBlock,
    /// UDP: an ICMP port unreachable came back for this socket (ECONNREFUSED).
    Refused,
}

/// Counters, one per event and one per drop reason. (Fields are added as the stack grows.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackStats {
    pub frames_in: u64,
    pub frames_out: u64,
    pub drops_malformed: u64,
    pub drops_checksum: u64,
    pub drops_not_for_us: u64,
}

#[derive(Debug)]
pub struct Stack {
    _todo: (),
}

#[allow(unused_variables)]
impl Stack {
    pub fn new(cfg: StackConfig, now: Instant) -> Stack {
        todo!()
    }
    pub fn config(&self) -> &StackConfig {
        todo!()
    }
    /// One received Ethernet frame. Anything malformed is dropped and counted.
    pub fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        todo!()
    }
    /// Writes the next frame to send into `buf` (at least mtu + 14 bytes) and returns its length.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        todo!()
    }
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }
    pub fn handle_timeout(&mut self, now: Instant) {
        todo!()
    }

    // --- TCP ---
    pub fn tcp_listen(&mut self, port: u16, backlog: usize) -> Result<ListenerId, StackError> {
        todo!()
    }
    /// Takes the next established connection off the listener's accept queue.
    pub fn tcp_accept(&mut self, listener: ListenerId) -> Option<ConnId> {
        todo!()
    }
    pub fn tcp_connect(&mut self, now: Instant, remote: SocketAddrV4) -> Result<ConnId, StackError> {
        todo!()
    }
    /// The connection, for send/recv/close/poll_event. None once released and gone.
    pub fn tcp(&mut self, id: ConnId) -> Option<&mut Connection> {
        todo!()
    }
    /// The application is done with the handle: the stack frees the connection
    /// when it finishes (after TIME-WAIT). Call `close`/`abort` on it first.
    pub fn tcp_release(&mut self, id: ConnId) {
        todo!()
    }
    /// Every connection: id, 4-tuple, state, counters.
    pub fn tcp_connections(&self) -> Vec<(ConnId, FourTuple, State, ConnStats)> {
        todo!()
    }

    // --- UDP ---
    pub fn udp_bind(&mut self, port: u16) -> Result<UdpId, StackError> {
        todo!()
    }
    pub fn udp_send_to(&mut self, now: Instant, id: UdpId, dst: SocketAddrV4, data: &[u8]) -> Result<(), StackError> {
        todo!()
    }
    /// Next datagram: (length copied, source). Err(Refused) reports a port unreachable once.
    pub fn udp_recv_from(&mut self, id: UdpId, buf: &mut [u8]) -> Result<(usize, SocketAddrV4), StackError> {
        todo!()
    }
    pub fn udp_close(&mut self, id: UdpId) {
        todo!()
    }

    // --- observability ---
    pub fn stats(&self) -> &StackStats {
        todo!()
    }
    /// Bytes held by buffers of this stack (connections, queues, reassembly, ARP).
    pub fn memory_in_use(&self) -> usize {
        todo!()
    }
}
