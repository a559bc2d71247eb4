//! UDP sockets (RFC 768): a port table and bounded receive queues. A queue
//! full of unread datagrams drops new ones (counted), as a kernel socket
//! buffer does; it never grows.

use crate::stats::StackStats;
use crate::{StackError, UdpId};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// Bytes of payload a socket may hold unread.
pub const UDP_RECV_QUEUE_BYTES: usize = 256 * 1024;
/// Datagrams a socket may hold unread (bounds the per-datagram overhead of tiny ones).
pub const UDP_RECV_QUEUE_DATAGRAMS: usize = 1024;
/// Bytes charged per queued datagram besides its payload.
const DATAGRAM_OVERHEAD: usize = 32;

#[derive(Debug)]
struct Socket {
    port: u16,
    queue: VecDeque<(SocketAddr, Vec<u8>)>,
    queued_bytes: usize,
    /// An ICMP error to report once on the next receive (RFC 1122 §4.1.3.3).
    pending_error: Option<StackError>,
}

#[derive(Debug, Default)]
pub(crate) struct UdpTable {
    sockets: HashMap<UdpId, Socket>,
    by_port: HashMap<u16, UdpId>,
    next_id: u32,
    memory: usize,
}

impl UdpTable {
    pub(crate) fn bind(&mut self, port: u16) -> Result<UdpId, StackError> {
        if self.by_port.contains_key(&port) {
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
                queue: VecDeque::new(),
                queued_bytes: 0,
                pending_error: None,
            },
        );
        self.by_port.insert(port, id);
        Ok(id)
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

    /// Whether the socket on `port` can queue `len` more bytes. None if no socket has the port.
    pub(crate) fn has_room(&self, port: u16, len: usize) -> Option<bool> {
        let sock = self
            .by_port
            .get(&port)
            .and_then(|id| self.sockets.get(id))?;
        Some(
            sock.queued_bytes + len <= UDP_RECV_QUEUE_BYTES
                && sock.queue.len() < UDP_RECV_QUEUE_DATAGRAMS,
        )
    }

    /// Queues a received datagram; false if no socket has the port.
    pub(crate) fn deliver(
        &mut self,
        dst_port: u16,
        src: SocketAddr,
        payload: Vec<u8>,
        stats: &mut StackStats,
    ) -> bool {
        match self.has_room(dst_port, payload.len()) {
            None => return false,
            Some(false) => {
                stats.drops_udp_queue_full += 1;
                return true;
            }
            Some(true) => {}
        }
        // Invariant: has_room found the socket just above.
        let sock = self
            .by_port
            .get(&dst_port)
            .and_then(|id| self.sockets.get_mut(id))
            .expect("socket exists");
        sock.queued_bytes += payload.len();
        self.memory += payload.len() + DATAGRAM_OVERHEAD;
        sock.queue.push_back((src, payload));
        true
    }

    /// Records an ICMP port unreachable (or other hard error) for the socket on `port`.
    pub(crate) fn set_error(&mut self, port: u16, err: StackError) -> bool {
        let Some(id) = self.by_port.get(&port) else {
            return false;
        };
        if let Some(sock) = self.sockets.get_mut(id) {
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
            self.by_port.remove(&sock.port);
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

    #[test]
    fn bind_twice_is_addr_in_use() {
        let mut t = UdpTable::default();
        t.bind(53).unwrap();
        assert_eq!(t.bind(53), Err(StackError::AddrInUse));
    }

    #[test]
    fn receive_queue_is_bounded_and_drops_are_counted() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let id = t.bind(7).unwrap();
        let big = vec![1u8; 60_000];
        for _ in 0..10 {
            assert!(t.deliver(7, peer(), big.clone(), &mut stats));
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
        let id = t.bind(7).unwrap();
        t.deliver(7, peer(), b"hi".to_vec(), &mut stats);
        assert!(t.set_error(7, StackError::Refused));
        let mut buf = [0u8; 10];
        assert_eq!(t.recv(id, &mut buf), Err(StackError::Refused));
        assert_eq!(t.recv(id, &mut buf), Ok((2, peer())));
        assert_eq!(t.recv(id, &mut buf), Err(StackError::WouldBlock));
    }

    #[test]
    fn close_frees_port_and_memory() {
        let mut t = UdpTable::default();
        let mut stats = StackStats::default();
        let id = t.bind(7).unwrap();
        t.deliver(7, peer(), b"hello".to_vec(), &mut stats);
        t.close(id);
        assert_eq!(t.memory(), 0);
        assert!(
            !t.deliver(7, peer(), b"x".to_vec(), &mut stats),
            "no socket after close"
        );
        assert!(t.bind(7).is_ok());
        let mut buf = [0u8; 4];
        assert_eq!(t.recv(id, &mut buf), Err(StackError::NoSuchSocket));
    }
}
