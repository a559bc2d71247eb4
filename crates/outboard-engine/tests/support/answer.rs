//! Test helper: a hand-written ARP and ICMP echo responder driven through a
//! `Link`, and a kernel-side pinger (the `ping` command, or a raw ICMP socket
//! when `ping` is missing or OBT_TEST_NO_PING=1).
#![allow(dead_code)]

use outboard_engine::link::{Link, TxMeta, TxStatus};
use outboard_wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr, RxChecksum,
};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Answers ARP requests for `ip` and ICMP echo requests to `ip` as host `mac`.
#[derive(Debug)]
pub struct Answerer {
    pub mac: [u8; 6],
    pub ip: Ipv4Addr,
    pub arp_requests: usize,
    pub echo_requests: usize,
    /// Frames received that were neither (IPv6 noise, other hosts' ARP, ...).
    pub other: usize,
    /// Received frames whose source MAC was our own (must stay 0).
    pub own_frames: usize,
}

impl Answerer {
    pub fn new(mac: [u8; 6], ip: Ipv4Addr) -> Answerer {
        Answerer {
            mac,
            ip,
            arp_requests: 0,
            echo_requests: 0,
            other: 0,
            own_frames: 0,
        }
    }

    /// The reply frame for `frame`, if it asks us something.
    pub fn answer(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let r = self.try_answer(frame);
        if r.is_none() {
            self.other += 1;
        }
        r
    }

    fn try_answer(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        let eth_repr = EthernetRepr::parse(&eth).ok()?;
        if eth_repr.src_addr.0 == self.mac {
            self.own_frames += 1;
            return None;
        }
        match eth_repr.ethertype {
            EtherType::Arp => {
                let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()?;
                if arp.operation != ArpOperation::Request || arp.target_protocol_addr != self.ip {
                    return None;
                }
                self.arp_requests += 1;
                let reply = ArpRepr {
                    operation: ArpOperation::Reply,
                    source_hardware_addr: EthernetAddress(self.mac),
                    source_protocol_addr: self.ip,
                    target_hardware_addr: arp.source_hardware_addr,
                    target_protocol_addr: arp.source_protocol_addr,
                };
                let mut out = vec![0u8; 14 + reply.buffer_len()];
                EthernetRepr {
                    src_addr: EthernetAddress(self.mac),
                    dst_addr: arp.source_hardware_addr,
                    ethertype: EtherType::Arp,
                }
                .emit(&mut out)
                .ok()?;
                reply.emit(&mut out[14..]).ok()?;
                Some(out)
            }
            EtherType::Ipv4 => {
                if eth_repr.dst_addr.0 != self.mac {
                    return None;
                }
                let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
                let ip_repr = Ipv4Repr::parse(&ip, RxChecksum::Verify).ok()?;
                if ip_repr.dst_addr != self.ip
                    || ip_repr.protocol != IpProtocol::Icmp
                    || ip_repr.is_fragment()
                {
                    return None;
                }
                let payload = ip.payload();
                let icmp = Icmpv4Packet::new_checked(payload).ok()?;
                let Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                } = Icmpv4Repr::parse(&icmp, RxChecksum::Verify).ok()?
                else {
                    return None;
                };
                self.echo_requests += 1;
                let echo = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let reply_ip = Ipv4Repr {
                    src_addr: self.ip,
                    dst_addr: ip_repr.src_addr,
                    protocol: IpProtocol::Icmp,
                    payload_len: echo.buffer_len(),
                    ttl: 64,
                    dscp_ecn: 0,
                    ident: ip_repr.ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                };
                let mut out = vec![0u8; 14 + 20 + echo.buffer_len()];
                EthernetRepr {
                    src_addr: EthernetAddress(self.mac),
                    dst_addr: eth_repr.src_addr,
                    ethertype: EtherType::Ipv4,
                }
                .emit(&mut out)
                .ok()?;
                reply_ip.emit(&mut out[14..]).ok()?;
                echo.emit(&mut out[34..]).ok()?;
                Some(out)
            }
            _ => None,
        }
    }
}

/// Receives on `link` and sends the answerer's replies until `done()` or
/// `limit` passes (bounded: at most limit / 10 ms turns).
pub fn serve(link: &mut dyn Link, ans: &mut Answerer, limit: Duration, done: &dyn Fn() -> bool) {
    let turns = (limit.as_millis() / 10).max(1);
    for _ in 0..turns {
        if done() {
            break;
        }
        link.wait(Duration::from_millis(10), &[], &[]).expect("wait");
        let mut replies = Vec::new();
        link.receive(64, &mut |f, _| {
            if let Some(r) = ans.answer(f) {
                replies.push(r);
            }
        })
        .expect("receive");
        for r in &replies {
            let st = link
                .transmit(&mut |buf| {
                    buf[..r.len()].copy_from_slice(r);
                    Some((r.len(), TxMeta::default()))
                })
                .expect("transmit");
            assert_eq!(
                st,
                TxStatus::Queued,
                "a nearly empty ring must take a frame"
            );
        }
        link.flush().expect("flush");
    }
}

/// Pings `addr` 3 times from inside namespace `ns` on another thread; the
/// result is (success, description). Uses `ping -c 3 -W 1` when present,
/// else a raw ICMP socket (3 echo requests, each answered within 1 s).
pub fn ping_from(
    ns: &super::netns::Netns,
    addr: Ipv4Addr,
) -> std::thread::JoinHandle<(bool, String)> {
    let use_cmd = super::netns::have("ping") && std::env::var_os("OBT_TEST_NO_PING").is_none();
    if use_cmd {
        let name = ns.name.clone();
        std::thread::spawn(move || {
            let out = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &name,
                    "ping",
                    "-c",
                    "3",
                    "-W",
                    "1",
                    &addr.to_string(),
                ])
                .output();
            match out {
                Ok(o) => (
                    o.status.success(),
                    format!(
                        "ping: {}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ),
                ),
                Err(e) => (false, format!("ping: {e}")),
            }
        })
    } else {
        eprintln!(
            "NOTE: no `ping` command (or OBT_TEST_NO_PING set): pinging from a raw ICMP socket"
        );
        ns.spawn_in(move || raw_ping(addr))
    }
}

fn raw_ping(addr: Ipv4Addr) -> (bool, String) {
    // SAFETY: socket(2) with integer arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMP,
        )
    };
    if fd < 0 {
        return (
            false,
            format!("raw socket: {}", std::io::Error::last_os_error()),
        );
    }
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: valid timeval of the right size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    // SAFETY: plain-data sockaddr_in, zero is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_addr.s_addr = u32::from(addr).to_be();
    let ident = (std::process::id() & 0xffff) as u16;
    let data = [0x5au8; 32];
    let mut replies = 0;
    for seq in 1..=3u16 {
        let req = Icmpv4Repr::EchoRequest {
            ident,
            seq_no: seq,
            data: &data,
        };
        let mut buf = vec![0u8; req.buffer_len()];
        req.emit(&mut buf).expect("emit echo request");
        // SAFETY: buf and sa are valid for the call.
        let rc = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                0,
                &sa as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return (
                false,
                format!("sendto: {}", std::io::Error::last_os_error()),
            );
        }
        // Up to 1 s (10 x 100 ms receive timeouts) for the reply.
        for _ in 0..10 {
            let mut rb = [0u8; 2048];
            // SAFETY: rb is writable for its length.
            let n = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    rb.as_mut_ptr() as *mut libc::c_void,
                    rb.len(),
                    0,
                )
            };
            if n <= 0 {
                continue;
            }
            let Ok(ip) = Ipv4Packet::new_checked(&rb[..n as usize]) else {
                continue;
            };
            let Ok(icmp) = Icmpv4Packet::new_checked(ip.payload()) else {
                continue;
            };
            if let Ok(Icmpv4Repr::EchoReply {
                ident: i,
                seq_no: s,
                data: d,
            }) = Icmpv4Repr::parse(&icmp, RxChecksum::Verify)
            {
                if i == ident && s == seq && d == data {
                    replies += 1;
                    break;
                }
            }
        }
    }
    (replies == 3, format!("raw ping: {replies}/3 replies"))
}
