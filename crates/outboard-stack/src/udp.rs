//! UDP sockets (RFC 768): a port table and bounded receive queues. A queue
//! full of unread datagrams drops new ones (counted), as a kernel socket
//! buffer does; it never grows. Sockets of families that do not overlap
//! share a port, as Linux's AF_INET socket on `0.0.0.0:P` beside an
//! IPV6_V6ONLY one on `[::]:P`: a datagram (or an ICMP error quoting one)
//! goes to the socket that takes its local address.

use crate::listener::Families;
use crate::stats::StackStats;
use crate::{StackError, UdpId};
use crate::flowhash::FlowMap;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

/// Bytes of payload a socket may hold unread.
pub const UDP_RECV_QUEUE_BYTES: usize = 256 * 1024;
/// Datagrams a socket may hold unread (bounds the per-datagram overhead of tiny ones).
pub const UDP_RECV_QUEUE_DATAGRAMS: usize = 1024;
/// Bytes charged per queued datagram besides its payload.
const DATAGRAM_OVERHEAD: usize = 32;

/// What a UDP socket is, across a live upgrade: the port it holds and the
/// families (or the one address) it takes datagrams for. The stack keeps
/// no other per-socket state: no connected remote (an application's
/// `connect` on a datagram socket is its library's or shim's business) and
/// no options. Its receive queue and a pending ICMP error are not in it:
/// the engine hands a socket over only when both are empty
/// (`Stack::udp_has_unread`), answering "busy" otherwise — it drains them
/// into the application's mailbox every turn, so that passes by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSettings {
    pub port: u16,
    pub families: Families,
}

#[derive(Debug)]
struct Socket {
    port: u16,
    families: Families,
    queue: VecDeque<(SocketAddr, Vec<u8>)>,
    queued_bytes: usize,
    /// An ICMP error to report once on the next receive (RFC 1122 §4.1.3.3).
    pending_error: Option<StackError>,
}

#[derive(Debug, Default)]
pub(crate) struct UdpTable {
    sockets: FlowMap<UdpId, Socket>,
    by_port: FlowMap<u16, Vec<UdpId>>,
    next_id: u32,
    memory: usize,
}

impl UdpTable {
    /// A socket on `port` for `families`; EADDRINUSE when one of an
    /// overlapping family has the port (Linux's bind conflict).
    pub(crate) fn bind(&mut self, port: u16, families: Families) -> Result<UdpId, StackError> {
        let taken = self.by_port.get(&port).is_some_and(|ids| {
            ids.iter().any(|id| self.sockets.get(id).is_some_and(|s| s.families.overlaps(&families)))
        });
        if taken {
            return Err(StackError::AddrInUse);
        }
        let id = loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = UdpId(self.next_id);
            if !self.sockets.contains_key(&id) {
                break id;
            }
        };
        self.sockets.insert(
            id,
            Socket {
                port,
                families,
                queue: VecDeque::new(),
                queued_bytes: 0,
                pending_error: None,
            },
        );
        self.by_port.entry(port).or_default().push(id);
        Ok(id)
    }

    /// The socket on `port` that takes datagrams to our address `local`.
    fn find(&self, port: u16, local: IpAddr) -> Option<UdpId> {
        let ids = self.by_port.get(&port)?;
        ids.iter().copied().find(|id| self.sockets.get(id).is_some_and(|s| s.families.takes_addr(local)))
    }

    pub(crate) fn ports(&self) -> Vec<u16> {
        self.by_port.keys().copied().collect()
    }

    pub(crate) fn port_in_use(&self, port: u16) -> bool {
        self.by_port.contains_key(&port)
    }

    pub(crate) fn local_port(&self, id: UdpId) -> Option<u16> {
        self.sockets.get(&id).map(|s| s.port)
    }

    pub(crate) fn settings(&self, id: UdpId) -> Option<UdpSettings> {
        self.sockets.get(&id).map(|s| UdpSettings { port: s.port, families: s.families })
    }

    /// Whether the socket holds queued datagrams or an error not yet
    /// received. None if there is no such socket.
    pub(crate) fn has_unread(&self, id: UdpId) -> Option<bool> {
        self.sockets.get(&id).map(|s| !s.queue.is_empty() || s.pending_error.is_some())
    }

    /// Whether the socket on `port` for `local` can queue `len` more bytes.
    /// None if no socket takes it.
    pub(crate) fn has_room(&self, port: u16, local: IpAddr, len: usize) -> Option<bool> {
        let sock = self.find(port, local).and_then(|id| self.sockets.get(&id))?;
        Some(
            sock.queued_bytes + len <= UDP_RECV_QUEUE_BYTES
                && sock.queue.len() < UDP_RECV_QUEUE_DATAGRAMS,
        )
    }

    /// Queues a received datagram to `dst`; false if no socket takes it.
    pub(crate) fn deliver(
        &mut self,
        dst: SocketAddr,
        src: SocketAddr,
        payload: Vec<u8>,
        stats: &mut StackStats,
    ) -> bool {
        match self.has_room(dst.port(), dst.ip(), payload.len()) {
            None => return false,
            Some(false) => {
                stats.drops_udp_queue_full += 1;
                return true;
            }
            Some(true) => {}
        }
        // Invariant: has_room found the socket just above.
        let sock = self
            .find(dst.port(), dst.ip())
            .and_then(|id| self.sockets.get_mut(&id))
            .expect("socket exists");
        sock.queued_bytes += payload.len();
        self.memory += payload.len() + DATAGRAM_OVERHEAD;
        sock.queue.push_back((src, payload));
        true
    }

    /// Records an ICMP port unreachable (or other hard error) for the socket
    /// that sent from `local` (the quoted datagram's source).
    pub(crate) fn set_error(&mut self, local: SocketAddr, err: StackError) -> bool {
        let Some(id) = self.find(local.port(), local.ip()) else {
            return false;
        };
        if let Some(sock) = self.sockets.get_mut(&id) {
            sock.pending_error = Some(err);
        }
        true
    }

    /// Next datagram, truncated to `buf` (the rest is discarded, as recvfrom does).
    /// A pending error is reported first, once.
    pub(crate) fn recv(
        &mut self,
        id: UdpId,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr), StackError> {
        let sock = self.sockets.get_mut(&id).ok_or(StackError::NoSuchSocket)?;
        if let Some(err) = sock.pending_error.take() {
            return Err(err);
        }
        let (src, data) = sock.queue.pop_front().ok_or(StackError::WouldBlock)?;
        sock.queued_bytes -= data.len();
        self.memory -= data.len() + DATAGRAM_OVERHEAD;
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        Ok((n, src))
    }

    pub(crate) fn close(&mut self, id: UdpId) {
        if let Some(sock) = self.sockets.remove(&id) {
            if let Some(ids) = self.by_port.get_mut(&sock.port) {
                ids.retain(|x| *x != id);
                if ids.is_empty() {
                    self.by_port.remove(&sock.port);
                }
            }
            self.memory -= sock.queued_bytes + sock.queue.len() * DATAGRAM_OVERHEAD;
        }
    }

    pub(crate) fn memory(&self) -> usize {
        self.memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn peer() -> SocketAddr {
        SocketAddr::new(Ipv4Addr::new(10, 0, 0, 2).into(), 9999)
    }

    fn ours(port: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::new(10, 0, 0, 1).into(), port)
    }

    #[test]
    fn settings_and_unread() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let v6 = t.bind(5353, Families::Ipv6).unwrap();
        assert_eq!(t.settings(v6), Some(UdpSettings { port: 5353, families: Families::Ipv6 }));
        assert_eq!(t.has_unread(v6), Some(false));
        let peer6: SocketAddr = "[fd77::1]:9999".parse().unwrap();
        assert!(t.deliver("[fd77::2]:5353".parse().unwrap(), peer6, b"six".to_vec(), &mut stats));
        assert_eq!(t.has_unread(v6), Some(true));
        let mut buf = [0u8; 8];
        assert_eq!(t.recv(v6, &mut buf), Ok((3, peer6)));
        assert_eq!(t.has_unread(v6), Some(false));
        assert!(t.set_error("[fd77::2]:5353".parse().unwrap(), StackError::Refused));
        assert_eq!(t.has_unread(v6), Some(true), "a pending error is unread too");
        t.close(v6);
        assert_eq!(t.settings(v6), None);
        assert_eq!(t.has_unread(v6), None);
    }

    #[test]
    fn bind_twice_is_addr_in_use() {
        let mut t = UdpTable::default();
        t.bind(53, Families::Both).unwrap();
        assert_eq!(t.bind(53, Families::Both), Err(StackError::AddrInUse));
    }

    #[test]
    fn receive_queue_is_bounded_and_drops_are_counted() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let id = t.bind(7, Families::Both).unwrap();
        let big = vec![1u8; 60_000];
        for _ in 0..10 {
            assert!(t.deliver(ours(7), peer(), big.clone(), &mut stats));
        }
        assert_eq!(
            stats.drops_udp_queue_full,
            10 - UDP_RECV_QUEUE_BYTES as u64 / 60_000
        );
        assert!(t.memory() <= UDP_RECV_QUEUE_BYTES + UDP_RECV_QUEUE_DATAGRAMS * DATAGRAM_OVERHEAD);
        let mut buf = [0u8; 10];
        assert_eq!(
            t.recv(id, &mut buf),
            Ok((10, peer())),
            "truncated to the buffer"
        );
    }

    #[test]
    fn pending_error_is_reported_once_before_data() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let id = t.bind(7, Families::Both).unwrap();
        t.deliver(ours(7), peer(), b"hi".to_vec(), &mut stats);
        assert!(t.set_error(ours(7), StackError::Refused));
        let mut buf = [0u8; 10];
        assert_eq!(t.recv(id, &mut buf), Err(StackError::Refused));
        assert_eq!(t.recv(id, &mut buf), Ok((2, peer())));
        assert_eq!(t.recv(id, &mut buf), Err(StackError::WouldBlock));
    }

    #[test]
    fn close_frees_port_and_memory() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let id = t.bind(7, Families::Both).unwrap();
        t.deliver(ours(7), peer(), b"hello".to_vec(), &mut stats);
        t.close(id);
        assert_eq!(t.memory(), 0);
        assert!(
            !t.deliver(ours(7), peer(), b"x".to_vec(), &mut stats),
            "no socket after close"
        );
        assert!(t.bind(7, Families::Both).is_ok());
        let mut buf = [0u8; 4];
        assert_eq!(t.recv(id, &mut buf), Err(StackError::NoSuchSocket));
    }

    /// Linux's AF_INET socket on 0.0.0.0:P beside an IPV6_V6ONLY one on
    /// [::]:P: both bind, each gets its family's datagrams and ICMP errors; a
    /// dual-stack socket on the port conflicts with either.
    #[test]
    fn sockets_of_both_families_share_a_port() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let v4 = t.bind(5353, Families::Ipv4).unwrap();
        let v6 = t.bind(5353, Families::Ipv6).unwrap();
        assert_eq!(t.bind(5353, Families::Both), Err(StackError::AddrInUse));
        assert_eq!(t.bind(5353, Families::Ipv4), Err(StackError::AddrInUse));
        let ours6: SocketAddr = "[fd77::2]:5353".parse().unwrap();
        let peer6: SocketAddr = "[fd77::1]:9999".parse().unwrap();
        assert!(t.deliver(ours(5353), peer(), b"four".to_vec(), &mut stats));
        assert!(t.deliver(ours6, peer6, b"six".to_vec(), &mut stats));
        let mut buf = [0u8; 8];
        assert_eq!(t.recv(v4, &mut buf), Ok((4, peer())));
        assert_eq!(t.recv(v4, &mut buf), Err(StackError::WouldBlock));
        assert_eq!(t.recv(v6, &mut buf), Ok((3, peer6)));
        assert!(t.set_error(ours6, StackError::Refused));
        assert_eq!(t.recv(v4, &mut buf), Err(StackError::WouldBlock), "the IPv4 socket's error is not the IPv6 one's");
        assert_eq!(t.recv(v6, &mut buf), Err(StackError::Refused));
        // Closing one leaves the other with the port.
        t.close(v4);
        assert!(!t.deliver(ours(5353), peer(), b"x".to_vec(), &mut stats));
        assert!(t.deliver(ours6, peer6, b"y".to_vec(), &mut stats));
        assert!(t.port_in_use(5353));
        t.close(v6);
        assert!(!t.port_in_use(5353));
    }
}
