//! Network-device mode (`--kernel-tap NAME`): the engine also presents a
//! TAP interface to the host kernel, so traffic it does not accelerate
//! still reaches the kernel's stack (Nectar's first level of use: the
//! communication processor as a plain network device).
//!
//! - **Which frames go to the kernel.** Every frame the link receives is
//!   asked `Stack::claims_frame`: TCP segments of a connection or to a
//!   listening port of the engine, UDP to a bound port, ICMP echo, and
//!   fragments stay with the engine; TCP and UDP to ports the engine has
//!   nothing on, other IP protocols, other EtherTypes (IPv6, LLDP) and
//!   multicast go to the kernel; ARP, ICMP errors and broadcasts go to
//!   both (each side takes what is its own). The policy overrides this:
//!   ports the operator names (`--kernel-ports tcp:22,udp:53,tcp:8000-8100`)
//!   always go to the kernel, and `--kernel-echo` hands pings to it. Nothing
//!   the engine owns goes to the kernel unless a port rule says so.
//! - **What the kernel sends** through the TAP leaves through the engine's
//!   link as it is.
//! - **Addresses.** The TAP interface gets the engine's MAC (frames pass
//!   unchanged both ways); give it the engine's address too (`ip addr add
//!   ADDR/N dev NAME`): the kernel then answers for the ports the engine
//!   leaves to it (ssh, DNS, anything) and its own connections use its
//!   ephemeral ports, which the engine does not listen on.
//! - **The engine's own interface stays out of the kernel's IP stack.**
//!   Linux takes packets for any of its addresses on any interface, so with
//!   the engine's address on the TAP it would also answer what arrives on
//!   the engine's af_packet interface (resets to the engine's connections).
//!   The engine therefore sets, on that interface, strict reverse-path
//!   filtering (`rp_filter = 1`: a packet from a source routed through the
//!   TAP is dropped there), `arp_ignore = 8` (no ARP replies for local
//!   addresses) and `disable_ipv6 = 1` — sysctls of the engine's network
//!   namespace — and warns if `net.ipv4.conf.all.rp_filter` is 2 (loose,
//!   which would win).
//! - **With AF_XDP** the engine's XDP program already passes frames that
//!   are not for the engine's address to the kernel's own interface; the
//!   TAP carries what is addressed to the engine's address but not taken
//!   by it. The two do not overlap.
//! - One shard only (the TAP has one queue here): `--kernel-tap` with
//!   `--shards` above 1 is refused.
//! - **Live upgrade** hands the TAP's queue and claim to the new engine
//!   after the link's ([`KernelPort::hand_over`], [`KernelPort::adopt`]):
//!   the kernel's interface never goes away, so its addresses, routes and
//!   sockets stay; frames from the kernel still waiting for the link make
//!   the offer "busy".

use crate::link::tap::TapLink;
use crate::link::{Link, LinkError, LinkOptions, TxStatus};
use outboard_stack::steer::Transport;
use outboard_stack::{FrameClaim, Stack};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::os::fd::RawFd;

/// Frames from the kernel waiting for the link, at most.
const TO_WIRE: usize = 512;

/// What the operator decides beyond "what the engine does not own".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelPolicy {
    /// Local ports whose frames always go to the kernel.
    pub ports: Vec<(Transport, RangeInclusive<u16>)>,
    /// ICMP echo requests go to the kernel (it answers pings), not the engine.
    pub echo_to_kernel: bool,
}

impl KernelPolicy {
    /// `tcp:22,udp:53,tcp:8000-8100` (empty: none).
    pub fn parse_ports(s: &str) -> Result<Vec<(Transport, RangeInclusive<u16>)>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || format!("{part:?}: expected tcp:PORT, udp:PORT or tcp:LO-HI (ports 1 to 65535)");
            let (proto, ports) = part.split_once(':').ok_or_else(bad)?;
            let t = match proto {
                "tcp" => Transport::Tcp,
                "udp" => Transport::Udp,
                _ => return Err(bad()),
            };
            let (lo, hi) = match ports.split_once('-') {
                Some((a, b)) => (a.parse::<u16>().map_err(|_| bad())?, b.parse::<u16>().map_err(|_| bad())?),
                None => {
                    let p = ports.parse::<u16>().map_err(|_| bad())?;
                    (p, p)
                }
            };
            if lo == 0 || lo > hi {
                return Err(bad());
            }
            out.push((t, lo..=hi));
        }
        Ok(out)
    }

    fn overrides(&self, frame: &[u8]) -> bool {
        // Ethernet + IPv4 (no fragments) + the L4 ports, or ICMP echo.
        if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
            return false;
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let Some(l4) = ip.get(ihl..) else { return false };
        match ip[9] {
            1 => self.echo_to_kernel && l4.first() == Some(&8),
            6 | 17 if l4.len() >= 4 => {
                let t = if ip[9] == 6 { Transport::Tcp } else { Transport::Udp };
                let port = u16::from_be_bytes([l4[2], l4[3]]);
                self.ports.iter().any(|(pt, r)| *pt == t && r.contains(&port))
            }
            _ => false,
        }
    }
}

/// Keeps the engine's link interface `iface` out of the kernel's IP stack
/// (see the module doc). Returns what could not be set, for a warning.
pub fn isolate_link_iface(iface: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for (key, value) in [
        (format!("net/ipv4/conf/{iface}/rp_filter"), "1"),
        (format!("net/ipv4/conf/{iface}/arp_ignore"), "8"),
        (format!("net/ipv6/conf/{iface}/disable_ipv6"), "1"),
    ] {
        if let Err(e) = std::fs::write(format!("/proc/sys/{key}"), value) {
            failed.push(format!("{key}={value}: {e}"));
        }
    }
    if std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter").is_ok_and(|v| v.trim() == "2") {
        failed.push("net.ipv4.conf.all.rp_filter is 2 (loose): the kernel may answer on the engine's interface too; set it to 0 or 1".into());
    }
    failed
}

/// Frames each way, for `outboard stat` (and the metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelCounters {
    /// Frames handed to the kernel, and how many of them were also the engine's (ARP, ICMP errors, broadcasts).
    pub to_kernel: u64,
    pub to_both: u64,
    /// Frames for the kernel lost because its TAP queue was full.
    pub to_kernel_dropped: u64,
    /// Frames the kernel sent that left through the link, and those dropped (link full).
    pub from_kernel: u64,
    pub from_kernel_dropped: u64,
}

/// The kernel's TAP: the engine's MTU, no offloads.
fn tap_options(mtu: usize) -> LinkOptions {
    LinkOptions { mtu: Some(mtu), addr: std::net::Ipv4Addr::UNSPECIFIED, fabric_faults: None, offloads: false, ipv6: false }
}

/// The kernel's interface and the frames on their way to and from it.
pub struct KernelPort {
    tap: TapLink,
    pub name: String,
    policy: KernelPolicy,
    to_wire: VecDeque<Vec<u8>>,
    pub counters: KernelCounters,
}

impl KernelPort {
    /// Creates (or attaches to) TAP `name` for the kernel, with the engine's
    /// MAC and MTU, up.
    pub fn open(name: &str, mac: [u8; 6], mtu: usize, policy: KernelPolicy) -> Result<KernelPort, LinkError> {
        let tap = TapLink::open(name, &tap_options(mtu))?;
        crate::link::sys::set_if_mac(name, mac)?;
        Ok(KernelPort { tap, name: name.to_string(), policy, to_wire: VecDeque::new(), counters: KernelCounters::default() })
    }

    /// Takes over the kernel's TAP from the engine being upgraded: the same
    /// queue of the same device (its MAC, MTU and addresses as they are);
    /// frames the kernel sends meanwhile wait in the device.
    pub fn adopt(name: &str, mtu: usize, policy: KernelPolicy, taken: crate::link::Adopted) -> Result<KernelPort, LinkError> {
        let tap = TapLink::adopt(name, &tap_options(mtu), taken)?;
        Ok(KernelPort { tap, name: name.to_string(), policy, to_wire: VecDeque::new(), counters: KernelCounters::default() })
    }

    /// Live upgrade: the TAP's queue and claim (`TapLink::hand_over`), once
    /// no frame from the kernel waits for the link.
    pub fn hand_over(&mut self) -> Result<crate::link::HandOver, String> {
        if !self.to_wire.is_empty() {
            return Err(format!("busy: {} frames from the kernel wait for the link; try again", self.to_wire.len()));
        }
        self.tap.hand_over()
    }

    /// Who gets `frame`: the stack, the kernel, or both (the policy first).
    pub fn claim(&self, stack: &Stack, frame: &[u8]) -> FrameClaim {
        if self.policy.overrides(frame) {
            FrameClaim::Kernel
        } else {
            stack.claims_frame(frame)
        }
    }

    /// Hands `frame` to the kernel (it arrives on its TAP interface).
    pub fn to_kernel(&mut self, frame: &[u8], both: bool) {
        let n = frame.len();
        let sent = self.tap.transmit(&mut |buf| {
            if buf.len() < n {
                return None;
            }
            buf[..n].copy_from_slice(frame);
            Some((n, Default::default()))
        });
        match sent {
            Ok(TxStatus::Queued) => {
                self.counters.to_kernel += 1;
                self.counters.to_both += u64::from(both);
            }
            _ => self.counters.to_kernel_dropped += 1,
        }
        let _ = self.tap.flush();
    }

    /// Takes what the kernel sent (at most `max` frames) for the link.
    pub fn from_kernel(&mut self, max: usize) -> Result<usize, LinkError> {
        let room = TO_WIRE.saturating_sub(self.to_wire.len()).min(max);
        let q = &mut self.to_wire;
        self.tap.receive(room, &mut |f, _| q.push_back(f.to_vec()))
    }

    /// The next frame for the link.
    pub fn next_for_wire(&mut self) -> Option<Vec<u8>> {
        self.to_wire.pop_front()
    }

    /// A frame the link could not take goes back to the front.
    pub fn unsent(&mut self, f: Vec<u8>) {
        self.to_wire.push_front(f);
    }

    /// The TAP's descriptor (readable when the kernel sent something).
    pub fn fd(&self) -> RawFd {
        self.tap.raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_rules_parse_and_refuse() {
        let p = KernelPolicy::parse_ports("tcp:22, udp:53,tcp:8000-8100").unwrap();
        assert_eq!(p, vec![(Transport::Tcp, 22..=22), (Transport::Udp, 53..=53), (Transport::Tcp, 8000..=8100)]);
        assert_eq!(KernelPolicy::parse_ports("").unwrap(), vec![]);
        for bad in ["22", "sctp:1", "tcp:0", "tcp:9-8", "tcp:70000", "tcp:a"] {
            assert!(KernelPolicy::parse_ports(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_policy_overrides_only_what_it_names() {
        let policy = KernelPolicy { ports: vec![(Transport::Tcp, 22..=22)], echo_to_kernel: true };
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[36..38].copy_from_slice(&22u16.to_be_bytes());
        assert!(policy.overrides(&f));
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        assert!(!policy.overrides(&f));
        f[14 + 9] = 1;
        f[34] = 8;
        assert!(policy.overrides(&f));
        f[34] = 0;
        assert!(!policy.overrides(&f));
    }
}
