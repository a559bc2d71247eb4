//! One IP stack instance per engine shard, sans-IO: frames and time in,
//! frames out. ARP, IPv4 (with bounded fragment reassembly), ICMP, and with
//! `StackConfig::ipv6` also IPv6 (neighbour discovery, SLAAC, ICMPv6,
//! reassembly); UDP and the TCP connection table (listeners with SYN queue and SYN cookies, accept
//! queues, port allocation). No global state: two `Stack`s never share anything.
//!
//! Call order: `receive_frame` for each received frame and the socket calls
//! as the application makes them; then drain `poll_transmit` until `None`,
//! and call `handle_timeout` at or after `poll_timeout`.
//!
//! Module map: `input` (Ethernet/ARP/IPv4 receive path), `input6` (IPv6
//! receive path), `ipv6` (addresses, prefixes, router, neighbour cache),
//! `icmp6` (ICMPv6 and neighbour discovery messages), `output` (framing,
//! next-hop resolution, the transmit queue, fragmentation), `arp` (cache),
//! `reassembly`, `icmp`, `transport` (UDP/TCP receive), `udp` (sockets),
//! `tcp_table` + `listener` + `tcp_input` (connections, listeners, demux),
//! `route`, `ratelimit`, `stats`, `steer` (the NIC's RSS hash in software,
//! for source ports that steer home).
//!
//! Memory: every queue is bounded — ARP entries and their pending frames,
//! reassembly bytes, UDP receive queues, the transmit queue, SYN queues (SYN
//! cookies beyond them) and accept queues — so `memory_in_use` stays bounded
//! whatever arrives.

#![forbid(unsafe_code)]

mod arp;
mod fastopen;
pub use outboard_wire::flowhash;
mod icmp;
mod icmp6;
mod input;
mod input6;
mod ipv6;
mod listener;
mod output;
mod ratelimit;
mod reassembly;
mod route;
mod stats;
pub mod steer;
mod tcp_input;
mod tcp_table;
mod transport;
mod udp;

pub use icmp::EchoReply;
pub use listener::{Families, ListenerSettings};
pub use ipv6::{Addr6, AddrOrigin, AddrState, Ipv6Config};
pub use output::UDP_MAX_PAYLOAD;
pub use stats::StackStats;
pub use udp::{UdpSettings, UDP_RECV_QUEUE_BYTES, UDP_RECV_QUEUE_DATAGRAMS};

use outboard_tcp::{ConnStats, Connection, FourTuple, State};
use outboard_time::{Duration, Instant};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

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
    /// This stack's shard among `shard_count` (one stack per shard, each on
    /// its own NIC queue): `tcp_connect` picks a source port whose returning
    /// segments the NIC's RSS hash steers to this shard (`steer`). Shard 0
    /// of 1, the default, takes any free port.
    pub shard_index: u16,
    pub shard_count: u16,
    /// Answer ARP requests for our address (on by default). An engine's
    /// shards other than 0 see copies of ARP frames only to learn from
    /// them, so one reply leaves per request.
    pub arp_replies: bool,
    /// What the link does for us (virtio-net header offloads); none by default.
    pub offloads: LinkOffloads,
    /// IPv6 beside IPv4 (dual stack); off by default.
    pub ipv6: Option<Ipv6Config>,
}

/// Who a received frame is for (`Stack::claims_frame`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClaim {
    Stack,
    Kernel,
    Both,
}

/// Offloads a link offers the stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkOffloads {
    /// Largest TCP segment payload the link cuts into MSS-sized frames for us
    /// (TSO/GSO with a partial checksum); 0 = none. Used only through
    /// [`Stack::poll_transmit_meta`].
    pub tso_max: usize,
}

/// How the link describes one frame it takes from [`Stack::poll_transmit_meta`]
/// (the fields of a `struct virtio_net_hdr`). The default is a plain,
/// fully checksummed frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxMeta {
    /// Nonzero: a TCPv4 segment longer than one frame that the link must cut
    /// into pieces of this many payload bytes (`VIRTIO_NET_HDR_GSO_TCPV4`),
    /// copying the headers into each (the kernel fixes lengths, IDs, flags
    /// and sequence numbers).
    pub gso_size: u16,
    /// Ethernet + IPv4 + TCP header bytes in front of the payload (`hdr_len`).
    pub hdr_len: u16,
    /// `Some((start, offset))`: the checksum at `start + offset` holds only
    /// the pseudo-header sum; the link finishes it over the bytes from
    /// `start` (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, the kernel's CHECKSUM_PARTIAL).
    pub csum: Option<(u16, u16)>,
}

/// What the link knows about a received frame's TCP/UDP checksum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RxCsum {
    /// Nothing: the stack verifies it.
    #[default]
    None,
    /// The kernel or NIC verified it (`VIRTIO_NET_HDR_F_DATA_VALID`).
    Verified,
    /// The sender left it to offload and the frame never left the host, so it
    /// holds only the pseudo-header sum (`VIRTIO_NET_HDR_F_NEEDS_CSUM`,
    /// CHECKSUM_PARTIAL): nothing to verify, the data did not cross a wire.
    Partial,
}

/// What the link tells [`Stack::receive_frame_offloaded`] about a frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxMeta {
    pub csum: RxCsum,
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
            shard_index: 0,
            shard_count: 1,
            arp_replies: true,
            offloads: LinkOffloads::default(),
            ipv6: None,
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
    /// UDP receive: nothing queued. UDP send: the transmit queue is full.
    WouldBlock,
    /// UDP: an ICMP port unreachable came back for this socket (ECONNREFUSED).
    Refused,
    /// No route to the destination, or no source address for it (IPv6 not
    /// configured, or no usable address yet): ENETUNREACH.
    NoRoute,
}

/// One shard's IPv4 stack.
#[derive(Debug)]
pub struct Stack {
    cfg: StackConfig,
    route: route::Route,
    stats: StackStats,
    arp: arp::ArpCache,
    reasm: reassembly::Reassembler,
    udp: udp::UdpTable,
    tcp: tcp_table::TcpTable,
    icmp_limit: ratelimit::RateLimiter,
    /// Frames ready to send (ARP, ICMP, TCP control, UDP, flushed ARP waits), bounded.
    txq: VecDeque<Vec<u8>>,
    txq_bytes: usize,
    /// IPv4 identification for the next datagram we originate.
    ip_ident: u16,
    /// IPv6: addresses, routers, neighbour cache; None when not configured.
    ip6: Option<ipv6::Ipv6State>,
    /// IPv6 Fragment header identification for the next fragmented packet.
    ip6_ident: u32,
    /// UDP ephemeral port cursor.
    udp_port_cursor: u16,
    ports_generation: u64,
    /// Echo replies received, for `poll_echo_reply`.
    echo_replies: VecDeque<icmp::EchoReply>,
    /// The frame being received has a TCP/UDP checksum the link vouches for
    /// (`receive_frame_offloaded`): transport input skips verifying it.
    rx_csum_trusted: bool,
    /// The frame being built may use the link's offloads (`poll_transmit_meta`).
    tx_offload: bool,
}

impl Stack {
    pub fn new(cfg: StackConfig, now: Instant) -> Stack {
        let route = route::Route::new(cfg.addr, cfg.prefix_len, cfg.gateway);
        let mut tcp_cfg = cfg.tcp.clone();
        // Our MSS must fit the link (RFC 9293 §3.7.1: MTU minus 40).
        tcp_cfg.mss = tcp_cfg
            .mss
            .min(cfg.mtu.saturating_sub(40).clamp(8, 65535 - 40) as u16);
        Stack {
            route,
            stats: StackStats::default(),
            arp: arp::ArpCache::new(
                cfg.arp_cache_cap,
                cfg.arp_entry_ttl,
                cfg.arp_pending_cap,
                now,
            ),
            reasm: reassembly::Reassembler::new(cfg.reassembly_mem_cap, cfg.reassembly_timeout),
            udp: udp::UdpTable::default(),
            tcp: tcp_table::TcpTable::new(
                tcp_cfg,
                cfg.secret,
                cfg.ephemeral_ports.0,
                cfg.syn_queue_cap,
                now,
            ),
            icmp_limit: ratelimit::RateLimiter::new(
                icmp::ERROR_RATE_PER_SEC,
                icmp::ERROR_BURST,
                now,
            ),
            txq: VecDeque::new(),
            txq_bytes: 0,
            // Start identifications from the secret so restarts don't repeat them.
            ip_ident: u16::from_be_bytes([cfg.secret[0], cfg.secret[1]]),
            // RFC 8200 §5: IPv6 needs links of at least 1280 bytes; below that it stays off.
            ip6: cfg.ipv6.clone().filter(|_| cfg.mtu >= outboard_wire::ipv6::MIN_MTU).map(|mut c| {
                let neighbors = arp::ArpCache::new(cfg.arp_cache_cap, cfg.arp_entry_ttl, cfg.arp_pending_cap, now);
                // A shard that does not answer ARP (all but shard 0) does not
                // probe or solicit either: shard 0 speaks for the interface,
                // the others learn from the copies of its neighbour discovery.
                let solicit = cfg.arp_replies;
                if !solicit {
                    c.dad_transmits = 0;
                }
                ipv6::Ipv6State::new(c, cfg.mac, cfg.mtu, neighbors, solicit, now)
            }),
            ip6_ident: u32::from_be_bytes([cfg.secret[2], cfg.secret[3], cfg.secret[4], cfg.secret[5]]),
            udp_port_cursor: cfg.ephemeral_ports.0,
            ports_generation: 0,
            echo_replies: VecDeque::new(),
            rx_csum_trusted: false,
            tx_offload: false,
            cfg,
        }
    }

    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// One received Ethernet frame. Anything malformed is dropped and counted.
    pub fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        self.stats.frames_in += 1;
        self.ethernet_input(now, frame);
    }

    /// A received frame with what the link knows about it: a checksum it
    /// verified or that was never computed (`RxCsum::Verified`/`Partial`) is
    /// not verified again (the IPv4 header checksum still is). Frames may
    /// be larger than the MTU (GRO-merged TCP segments).
    pub fn receive_frame_offloaded(&mut self, now: Instant, frame: &[u8], meta: RxMeta) {
        self.rx_csum_trusted = meta.csum != RxCsum::None;
        self.receive_frame(now, frame);
        self.rx_csum_trusted = false;
    }

    /// Writes the next frame to send into `buf` (at least mtu + 14 bytes) and returns its length.
    /// Never uses offloads: every frame is at most mtu + 14 bytes and fully checksummed.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let n = self.next_frame(now, buf)?;
        self.stats.frames_out += 1;
        Some(n)
    }

    /// `poll_transmit` for a link with offloads (`StackConfig::offloads`):
    /// a TCP segment may be up to `offloads.tso_max` bytes of payload (as
    /// `buf` allows), and the meta says how the link must finish it. Frames
    /// with a default meta are ordinary ones.
    pub fn poll_transmit_meta(&mut self, now: Instant, buf: &mut [u8]) -> Option<(usize, TxMeta)> {
        self.tx_offload = self.cfg.offloads.tso_max > 0;
        let mut meta = TxMeta::default();
        let n = self.next_frame_meta(now, buf, &mut meta);
        self.tx_offload = false;
        let n = n?;
        self.stats.frames_out += 1;
        Some((n, meta))
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        // A chain of two-way minimums, not an array of options iterated:
        // the shard asks every turn, and the array cost about 100
        // instructions a call (built on the stack, then walked).
        let mut t = self.tcp.poll_timeout();
        t = earlier(t, self.arp.poll_timeout());
        t = earlier(t, self.reasm.poll_timeout());
        if let Some(s) = self.ip6.as_ref() {
            t = earlier(t, s.poll_timeout());
        }
        t
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let expired = self.arp.handle_timeout(now);
        self.stats.arp_resolution_failures += expired.failures;
        self.stats.drops_arp_unresolved += expired.frames_dropped;
        if let Some(s) = self.ip6.as_mut() {
            let expired = s.neighbors.handle_timeout(now);
            self.stats.ndisc_resolution_failures += expired.failures;
            self.stats.drops_arp_unresolved += expired.frames_dropped;
            s.handle_timeout(now);
        }
        for (key, quote) in self.reasm.handle_timeout(now, &mut self.stats) {
            // RFC 1122 §3.3.2, RFC 8200 §4.5: Time Exceeded (reassembly) when fragment zero arrived.
            match (key.src, key.dst) {
                (IpAddr::V4(src), _) => {
                    self.send_icmp_error(now, src, icmp::ErrorKind::ReassemblyTimeExceeded, &quote)
                }
                (IpAddr::V6(src), IpAddr::V6(dst)) => {
                    let meta = input::Ip6Meta { src, dst, multicast: dst.is_multicast(), tclass: 0, packet: &quote };
                    let quote = self.icmpv6_quote(&quote);
                    let repr = outboard_wire::icmpv6::Icmpv6Repr::TimeExceeded { code: 1, invoking: &quote };
                    self.send_icmpv6_error(now, meta, &repr);
                }
                (IpAddr::V6(_), IpAddr::V4(_)) => {}
            }
        }
        for id in self.tcp.expired(now) {
            // The wheel files deadlines lazily: one that moved later since
            // fires early, finds nothing due, and is only filed again.
            let due = match self.tcp.conns.get_mut(&id) {
                Some(e) if e.conn.poll_timeout().is_some_and(|d| d <= now) => {
                    e.conn.handle_timeout(now);
                    true
                }
                _ => false,
            };
            if due {
                self.tcp.mark_ready(id);
            }
            if self.tcp.settle(id).is_some() {
                self.stats.tcp_connections_freed += 1;
            }
        }
    }

    // --- TCP ---
    pub fn tcp_listen(&mut self, port: u16, backlog: usize) -> Result<ListenerId, StackError> {
        self.tcp_listen_for(port, backlog, Families::Both)
    }

    /// A listener that takes only `families`: listeners whose families do
    /// not overlap may share a port (an IPv4-only and an IPv6-only one, as
    /// Linux's AF_INET `0.0.0.0` beside an IPV6_V6ONLY `::`); an
    /// overlapping one is `AddrInUse`.
    pub fn tcp_listen_for(&mut self, port: u16, backlog: usize, families: Families) -> Result<ListenerId, StackError> {
        self.ports_generation += 1;
        self.tcp.listen(port, backlog, families)
    }

    /// Restricts a listener to some address families (new listeners take both).
    pub fn tcp_listen_families(&mut self, listener: ListenerId, families: Families) {
        if let Some(l) = self.tcp.listeners.get_mut(&listener) {
            l.families = families;
        }
    }

    /// RFC 7413 server side for a listener (Linux's `TCP_FASTOPEN`): at most
    /// `qlen` Fast Open connections pending at once; 0 turns it off.
    pub fn tcp_listen_fast_open(&mut self, listener: ListenerId, qlen: usize) {
        if let Some(l) = self.tcp.listeners.get_mut(&listener) {
            l.fastopen_qlen = qlen;
        }
    }

    /// TCP_MAXSEG on a listener (Linux takes it before or after `listen`):
    /// the SYN-ACKs of connections it accepts from now on advertise at most
    /// `mss` and their send MSS never exceeds it; 0: none.
    pub fn tcp_listen_mss(&mut self, listener: ListenerId, mss: u16) {
        if let Some(l) = self.tcp.listeners.get_mut(&listener) {
            l.user_mss = mss;
        }
    }

    /// IP_TOS (`ipv6` false) or IPV6_TCLASS (`ipv6` true) on a listener:
    /// the DSCP bits of the SYN-ACKs and of the connections of that family it
    /// accepts from now on (ECN bits stay the engine's).
    pub fn tcp_listen_tos(&mut self, listener: ListenerId, ipv6: bool, tos: u8) {
        if let Some(l) = self.tcp.listeners.get_mut(&listener) {
            *(if ipv6 { &mut l.tclass } else { &mut l.tos }) = tos & !0b11;
        }
    }

    /// SO_RCVBUF on a listener as a window clamp in bytes (0: none): the
    /// connections it accepts from now on offer at most that window, their
    /// SYN-ACK's window scale chosen for it (Linux's `tcp_openreq_init_rwin`).
    pub fn tcp_listen_rcv_clamp(&mut self, listener: ListenerId, clamp: usize) {
        if let Some(l) = self.tcp.listeners.get_mut(&listener) {
            l.rcv_clamp = clamp;
        }
    }

    /// The listener's Fast Open queue length (0: off).
    pub fn tcp_listen_fast_open_qlen(&self, listener: ListenerId) -> usize {
        self.tcp.listeners.get(&listener).map_or(0, |l| l.fastopen_qlen)
    }

    /// RFC 7413 client side for a connection just made by `tcp_connect` (before
    /// the next `poll_transmit`): with a cookie cached for the destination the
    /// SYN waits for the first data and carries it (returns true: the
    /// application may write at once, as after Linux's `TCP_FASTOPEN_CONNECT`);
    /// without one the SYN asks for a cookie (false). A destination that
    /// loses SYNs with data gets a plain SYN for a while (false).
    pub fn tcp_fast_open(&mut self, now: Instant, id: ConnId) -> bool {
        let Some(e) = self.tcp.conns.get(&id) else { return false };
        let dst = e.conn.tuple().remote.ip();
        let plan = self.tcp.tfo_cache.plan(now, dst);
        let Some(e) = self.tcp.conns.get_mut(&id) else { return false };
        match plan {
            fastopen::ClientPlan::Cookie(c) => {
                e.conn.set_fast_open(Some(c));
                true
            }
            fastopen::ClientPlan::Request => {
                e.conn.set_fast_open(None);
                false
            }
            fastopen::ClientPlan::Disabled => {
                self.stats.tcp_fastopen_disabled += 1;
                false
            }
        }
    }

    /// Destinations in the Fast Open cookie cache.
    pub fn tcp_fast_open_cached(&self) -> usize {
        self.tcp.tfo_cache.len()
    }

    /// Stops listening; connections not yet accepted are reset.
    pub fn tcp_unlisten(&mut self, listener: ListenerId) {
        self.ports_generation += 1;
        self.tcp.unlisten(listener)
    }

    /// Changes whenever a TCP listener or a UDP socket is opened or closed
    /// (an engine's shards publish their bound ports for steering when it does).
    pub fn ports_generation(&self) -> u64 {
        self.ports_generation
    }

    /// Who a received frame is for when the engine shares its address with
    /// the host kernel (network-device mode): this stack (a connection,
    /// listener or socket of its own, ARP, ICMP echo, fragments it
    /// reassembles), the kernel (TCP and UDP to ports it has nothing on,
    /// other IP protocols, other EtherTypes such as IPv6, multicast), or
    /// both (ARP, ICMP errors, broadcasts: each takes what is its own).
    pub fn claims_frame(&self, frame: &[u8]) -> FrameClaim {
        if frame.len() < 14 {
            return FrameClaim::Stack;
        }
        let dst_mac = &frame[0..6];
        let broadcast = dst_mac == [0xff; 6];
        if !broadcast && dst_mac[0] & 1 == 1 {
            return FrameClaim::Kernel;
        }
        match u16::from_be_bytes([frame[12], frame[13]]) {
            0x0806 => return FrameClaim::Both,
            0x0800 => {}
            _ => return FrameClaim::Kernel,
        }
        let ip = &frame[14..];
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return FrameClaim::Stack;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        if broadcast || dst != self.cfg.addr {
            return FrameClaim::Both;
        }
        if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
            // Fragments are reassembled here (a fragmented datagram for the kernel is lost).
            return FrameClaim::Stack;
        }
        let l4 = ip.get(ihl..).unwrap_or(&[]);
        let ports = (l4.len() >= 4).then(|| (u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]])));
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        match (ip[9], ports) {
            (1, _) => match l4.first() {
                // Echo requests are answered here; errors go to both (each takes its own flows').
                Some(8) => FrameClaim::Stack,
                _ => FrameClaim::Both,
            },
            (6, Some((sport, dport))) => {
                let tuple = FourTuple::new(SocketAddrV4::new(dst, dport).into(), SocketAddrV4::new(src, sport).into());
                if self.tcp.by_tuple.contains_key(&tuple) || self.tcp.listener_by_port.contains_key(&dport) {
                    FrameClaim::Stack
                } else {
                    FrameClaim::Kernel
                }
            }
            (17, Some((_, dport))) => {
                if self.udp.port_in_use(dport) {
                    FrameClaim::Stack
                } else {
                    FrameClaim::Kernel
                }
            }
            (6 | 17, None) => FrameClaim::Stack,
            _ => FrameClaim::Kernel,
        }
    }

    /// Whether this stack listens on TCP `port` or has UDP `port` bound.
    pub fn is_bound(&self, t: steer::Transport, port: u16) -> bool {
        match t {
            steer::Transport::Tcp => self.tcp.listener_by_port.contains_key(&port),
            steer::Transport::Udp => self.udp.port_in_use(port),
        }
    }

    /// The TCP ports listened on and the UDP ports bound, sorted.
    pub fn bound_ports(&self) -> (Vec<u16>, Vec<u16>) {
        let mut tcp: Vec<u16> = self.tcp.listener_by_port.keys().copied().collect();
        let mut udp = self.udp.ports();
        tcp.sort_unstable();
        udp.sort_unstable();
        (tcp, udp)
    }

    /// Takes the next established connection off the listener's accept queue.
    pub fn tcp_accept(&mut self, listener: ListenerId) -> Option<ConnId> {
        self.tcp.accept(listener)
    }

    /// Whether `tcp_accept` would return a connection (cheap: no dequeue).
    pub fn tcp_accept_pending(&self, listener: ListenerId) -> bool {
        self.tcp.has_pending(listener)
    }

    /// Opens a connection to `remote` (IPv4, or IPv6 when configured) from
    /// an ephemeral port that steers back to this shard.
    pub fn tcp_connect(
        &mut self,
        now: Instant,
        remote: impl Into<SocketAddr>,
    ) -> Result<ConnId, StackError> {
        let remote = remote.into();
        let local = self.local_addr_for(remote.ip()).ok_or(StackError::NoRoute)?;
        let port = self
            .tcp
            .ephemeral_port(
                local,
                remote,
                self.cfg.ephemeral_ports,
                (self.cfg.shard_index, self.cfg.shard_count),
            )
            .ok_or(StackError::NoEphemeralPorts)?;
        self.tcp_connect_from(now, port, remote)
    }

    /// `tcp_connect` from a chosen local port (which need not steer to this
    /// shard). AddrInUse if the 4-tuple exists.
    pub fn tcp_connect_from(
        &mut self,
        now: Instant,
        local_port: u16,
        remote: impl Into<SocketAddr>,
    ) -> Result<ConnId, StackError> {
        let remote = remote.into();
        let local = self.local_addr_for(remote.ip()).ok_or(StackError::NoRoute)?;
        let tuple = FourTuple::new(SocketAddr::new(local, local_port), remote);
        if local_port == 0 || self.tcp.by_tuple.contains_key(&tuple) {
            return Err(StackError::AddrInUse);
        }
        let iss = self.tcp.isn.isn(now, tuple.local, tuple.remote);
        let conn = Connection::connect(self.tcp.cfg_for(&tuple), tuple, iss, now);
        self.stats.tcp_connections_opened += 1;
        Ok(self.tcp.insert(conn, tcp_table::Owner::App))
    }

    /// The connection, for send/recv/close/poll_event. None once released and gone.
    pub fn tcp(&mut self, id: ConnId) -> Option<&mut Connection> {
        // The caller may queue data or close: serve it at the next poll_transmit.
        self.tcp.mark_ready(id);
        self.tcp_status(id)
    }

    /// The connection, for reading its state and taking its events
    /// (`poll_event`, `take_push`, `request_writable`): unlike
    /// [`Stack::tcp`], it is not served at the next `poll_transmit`, so the
    /// caller must change nothing that could make it send. Publishing a
    /// stream's status to its application, once per segment that changes
    /// it, cost a poll that found nothing to send.
    pub fn tcp_status(&mut self, id: ConnId) -> Option<&mut Connection> {
        self.tcp.conns.get_mut(&id).map(|e| &mut e.conn)
    }

    /// The application read `n` bytes in place (`Connection::recv_consume`;
    /// returns how many it dropped). Unlike [`Stack::tcp`], the connection
    /// is served at the next `poll_transmit` only if the read left it
    /// something to send (a window update, or what it had already):
    /// most reads of a request or a reply leave nothing.
    pub fn tcp_consume(&mut self, now: Instant, id: ConnId, n: usize) -> usize {
        let Some(e) = self.tcp.conns.get_mut(&id) else {
            return 0;
        };
        let n = e.conn.recv_consume(n);
        if self.tcp.sched.settle_changed(id, e, now) && self.tcp.remove(id).is_some() {
            self.stats.tcp_connections_freed += 1;
        }
        n
    }

    /// The application is done with the handle: the stack frees the connection
    /// when it finishes (after TIME-WAIT). Call `close`/`abort` on it first.
    pub fn tcp_release(&mut self, id: ConnId) {
        if let Some(e) = self.tcp.conns.get_mut(&id) {
            e.owner = tcp_table::Owner::Released;
            self.tcp.mark_ready(id);
        }
    }

    /// The next connection the application holds (accepted or connected)
    /// that has events since it was last returned here. Drain its
    /// `poll_event` each time: a connection comes back only when the stack
    /// next changes it. Newly accepted connections are not announced here:
    /// look at them right after `tcp_accept`.
    pub fn tcp_poll_ready(&mut self) -> Option<ConnId> {
        self.tcp.poll_app_event()
    }

    /// Every connection: id, 4-tuple, state, counters.
    pub fn tcp_connections(&self) -> Vec<(ConnId, FourTuple, State, ConnStats)> {
        let mut v: Vec<_> = self
            .tcp
            .conns
            .iter()
            .map(|(id, e)| (*id, e.conn.tuple(), e.conn.state(), e.conn.stats()))
            .collect();
        v.sort_by_key(|c| c.0);
        v
    }

    /// Live upgrade: the connection as it is, and who holds it — `Some(true)`
    /// the application, `Some(false)` nobody (released, closing or in
    /// TIME-WAIT); `None` when it is still a listener's (handshake not
    /// complete, or waiting to be accepted) or there is no such connection.
    pub fn tcp_export(&self, id: ConnId) -> Option<(&Connection, bool)> {
        let e = self.tcp.conns.get(&id)?;
        match e.owner {
            tcp_table::Owner::App => Some((&e.conn, true)),
            tcp_table::Owner::Released => Some((&e.conn, false)),
            tcp_table::Owner::Embryonic(_) | tcp_table::Owner::Queued(_) => None,
        }
    }

    /// Live upgrade: takes over a connection read back from a record (see
    /// `Connection::check_restored`), held by the application (`app`) or
    /// released. Its timers are absolute times on the same clock, and it
    /// is served at the next `poll_transmit`. `AddrInUse` if its 4-tuple is
    /// here already, `NoRoute` if its local address is not ours.
    pub fn tcp_adopt(&mut self, conn: Connection, app: bool) -> Result<ConnId, StackError> {
        let tuple = conn.tuple();
        if self.tcp.by_tuple.contains_key(&tuple) {
            return Err(StackError::AddrInUse);
        }
        if self.local_addr_for(tuple.remote.ip()) != Some(tuple.local.ip()) {
            return Err(StackError::NoRoute);
        }
        let owner = if app { tcp_table::Owner::App } else { tcp_table::Owner::Released };
        Ok(self.tcp.insert(conn, owner))
    }

    /// Live upgrade: a listener's settings (its queues are not in them).
    pub fn tcp_listener_settings(&self, listener: ListenerId) -> Option<ListenerSettings> {
        let l = self.tcp.listeners.get(&listener)?;
        let port = self.tcp.listener_by_port.iter().find(|(_, ls)| ls.contains(&listener))?.0;
        Some(l.settings(*port))
    }

    /// Live upgrade: opens a listener with the settings another engine's had.
    pub fn tcp_listen_settings(&mut self, s: &ListenerSettings) -> Result<ListenerId, StackError> {
        let id = self.tcp_listen_for(s.port, s.backlog, s.families)?;
        if let Some(l) = self.tcp.listeners.get_mut(&id) {
            l.fastopen_qlen = s.fastopen_qlen;
            l.user_mss = s.user_mss;
            l.tos = s.tos;
            l.tclass = s.tclass;
            l.rcv_clamp = s.rcv_clamp;
        }
        Ok(id)
    }

    /// Live upgrade: the resolved ARP entries (IPv4 address, MAC).
    pub fn arp_export(&self) -> Vec<(Ipv4Addr, [u8; 6])> {
        self.arp.resolved()
    }

    /// Live upgrade: learns the running engine's resolved ARP entries (each
    /// with a fresh lifetime), so handed-over connections send at once
    /// instead of resolving first.
    pub fn arp_import(&mut self, now: Instant, entries: &[(Ipv4Addr, [u8; 6])]) {
        for &(ip, mac) in entries {
            let flushed = self.arp.learn(now, ip, mac, true, &mut self.stats);
            debug_assert!(flushed.is_empty(), "a fresh stack has nothing waiting");
        }
    }

    // --- UDP ---
    /// Binds `port`, or an ephemeral port when `port` is 0, for both families.
    pub fn udp_bind(&mut self, port: u16) -> Result<UdpId, StackError> {
        self.udp_bind_for(port, Families::Both)
    }

    /// `udp_bind` for `families`: sockets of families that do not overlap
    /// share a port (Linux's AF_INET `0.0.0.0` beside an IPV6_V6ONLY `::`);
    /// each gets the datagrams, and the ICMP errors, of its own.
    pub fn udp_bind_for(&mut self, port: u16, families: Families) -> Result<UdpId, StackError> {
        self.ports_generation += 1;
        if port != 0 {
            return self.udp.bind(port, families);
        }
        let (lo, hi) = self.cfg.ephemeral_ports;
        let (lo, hi) = (lo.min(hi).max(1), lo.max(hi).max(1));
        for _ in 0..=u32::from(hi - lo) {
            let p = if (lo..=hi).contains(&self.udp_port_cursor) {
                self.udp_port_cursor
            } else {
                lo
            };
            self.udp_port_cursor = if p == hi { lo } else { p + 1 };
            if !self.udp.port_in_use(p) {
                return self.udp.bind(p, families);
            }
        }
        Err(StackError::NoEphemeralPorts)
    }

    /// The local port of a UDP socket.
    pub fn udp_local_port(&self, id: UdpId) -> Option<u16> {
        self.udp.local_port(id)
    }

    /// Sends one datagram, fragmenting it when it exceeds the MTU. Err(WouldBlock)
    /// when the transmit queue is full.
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        id: UdpId,
        dst: impl Into<SocketAddr>,
        data: &[u8],
    ) -> Result<(), StackError> {
        let port = self.udp.local_port(id).ok_or(StackError::NoSuchSocket)?;
        self.udp_output(now, port, dst.into(), data)
    }

    /// Next datagram: (length copied, source). Err(Refused) reports a port unreachable once.
    pub fn udp_recv_from(
        &mut self,
        id: UdpId,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr), StackError> {
        self.udp.recv(id, buf)
    }

    pub fn udp_close(&mut self, id: UdpId) {
        self.ports_generation += 1;
        self.udp.close(id)
    }

    /// Live upgrade: a UDP socket's settings (its receive queue is not in
    /// them: see `udp_has_unread`).
    pub fn udp_socket_settings(&self, id: UdpId) -> Option<UdpSettings> {
        self.udp.settings(id)
    }

    /// Live upgrade: whether a UDP socket still holds datagrams (or an ICMP
    /// error) its owner has not received. These are not handed over: the
    /// engine answers "busy" until the socket's queue is drained.
    /// None if there is no such socket.
    pub fn udp_has_unread(&self, id: UdpId) -> Option<bool> {
        self.udp.has_unread(id)
    }

    /// Live upgrade: binds a UDP socket with the settings another engine's
    /// had (a bound socket's port is never 0, so this is never an
    /// ephemeral pick).
    pub fn udp_bind_settings(&mut self, s: &UdpSettings) -> Result<UdpId, StackError> {
        self.udp_bind_for(s.port, s.families)
    }

    // --- observability ---
    pub fn stats(&self) -> &StackStats {
        &self.stats
    }

    /// Bytes held by buffers of this stack (connections, queues, reassembly, ARP).
    /// Connections count what they really allocate (`Connection::memory_in_use`):
    /// a half-open or TIME-WAIT connection a few KiB, not its configured buffers.
    pub fn memory_in_use(&self) -> usize {
        self.tcp.memory()
            + self.udp.memory()
            + self.reasm.memory()
            + self.arp.memory()
            + self.ip6.as_ref().map_or(0, |s| s.memory())
            + self.txq_bytes
    }

    /// Our IPv6 addresses (link-local first) with their state; empty without IPv6.
    pub fn ipv6_addresses(&self) -> Vec<Addr6> {
        self.ip6.as_ref().map_or_else(Vec::new, |s| s.addresses().to_vec())
    }

    /// The IPv6 default router in use (advertised or configured).
    pub fn ipv6_default_router(&self) -> Option<Ipv6Addr> {
        self.ip6.as_ref().and_then(|s| s.default_router())
    }

    /// The IPv6 MTU in use (the link's, or lower if a router advertised so);
    /// None without IPv6.
    pub fn ipv6_mtu(&self) -> Option<usize> {
        self.ip6.as_ref().map(|s| s.mtu)
    }

    /// The IPv6 settings, if configured.
    pub fn ipv6_config(&self) -> Option<&Ipv6Config> {
        self.ip6.as_ref().map(|s| s.config())
    }

    /// ARP entries held (resolved, resolving or failed).
    pub fn arp_entries(&self) -> usize {
        self.arp.len()
    }

    /// Datagrams being reassembled.
    pub fn reassembly_in_progress(&self) -> usize {
        self.reasm.datagrams_held()
    }
}

/// The earlier of two optional deadlines (None: no deadline).
#[inline]
fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
