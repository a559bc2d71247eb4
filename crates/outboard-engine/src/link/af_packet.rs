//! `af_packet:IFACE`: frames through an AF_PACKET socket with memory-mapped
//! TPACKET_V2 rings. The fallback link for any interface, no XDP needed.
//!
//! # How
//!
//! - `socket(AF_PACKET, SOCK_RAW, 0)` (protocol 0: nothing is queued before
//!   the rings exist), then `PACKET_VERSION = TPACKET_V2`, `PACKET_LOSS`,
//!   `PACKET_QDISC_BYPASS` (best effort), `PACKET_IGNORE_OUTGOING` (we do not
//!   see frames this host sends out of the interface, ours included),
//!   `PACKET_RX_RING` and `PACKET_TX_RING` of 1024 frames each, one shared
//!   `mmap` of both, and finally `bind` to the ifindex with `ETH_P_ALL`.
//!   V2, not V3: V3 hands a block over only when it fills or its timer
//!   fires (0.5–0.8 ms ping RTT, see shared/LINKS.md); V2 hands each frame
//!   over at once.
//! - Frame slots are a power of two ≥ 2048 bytes, big enough for
//!   `mtu + 14` plus the ring header (2048 for MTU 1500, 16384 for 9000).
//!   `info().mode` says e.g. `tpacket_v2 mmap rx 1024x2048 tx 1024x2048 qdisc-bypass`.
//!   Rings are sized to ride out the engine being off its core for a few
//!   milliseconds under a flood (1024 frames are 10 ms at 100 kpps): a frame
//!   the kernel drops for a full ring may be a legitimate client's SYN,
//!   which then waits a second for its retransmission.
//! - `receive` walks RX slots whose status has `TP_STATUS_USER`, lends the
//!   frame in place, then hands the slot back (`TP_STATUS_KERNEL`, release
//!   store). A frame the kernel truncated to fit the slot (`tp_snaplen <
//!   tp_len`) is not delivered and counts in `rx_oversize`. Kernel drops
//!   (ring full) come from `PACKET_STATISTICS.tp_drops`, read when a slot
//!   carries `TP_STATUS_LOSING` and on every `counters()`.
//! - `transmit` lends the next TX slot if it is `TP_STATUS_AVAILABLE`
//!   (else `Full`), writes `tp_len` and marks it `TP_STATUS_SEND_REQUEST`;
//!   `flush` kicks with `sendto(fd, NULL, 0, MSG_DONTWAIT)` (bounded retries)
//!   and reclaims slots the kernel has taken.
//! - The MAC is the interface's own; the MTU is `opts.mtu` (at most the
//!   interface's) or the interface's (capped at `MAX_FRAME - 14`). The
//!   interface is brought up if it is down; nothing else about it changes.
//!
//! # Offloads (`opts.offloads`, the engine's default)
//!
//! `PACKET_VNET_HDR` is set before the rings: every RX slot then has a
//! 10-byte `struct virtio_net_hdr` right in front of the frame (at
//! `tp_mac - 10`), and every TX slot starts with one (at the data offset;
//! `tp_len` counts it). We send TCP segments of up to 64 KiB with
//! `GSO_TCPV4` + `NEEDS_CSUM` (the kernel or the device cuts them) and take
//! the peer's GSO frames whole with their checksum state (`RxMeta`). Slots
//! are then 66048 bytes (a 64 KiB frame plus headers), 63 to a 4 MiB block,
//! four blocks per ring: 252 RX and 252 TX slots, 32 MiB mapped.
//! `info().offloads` is `["vnet_hdr", "tso4", "rx-csum"]`. TSO is used only
//! when the device has it on (`ethtool -k`, read with `ETHTOOL_GTSO` at
//! open): without it the kernel refuses GSO frames from AF_PACKET, so we
//! send MSS-sized frames.
//!
//! # Malformed frames and `tx_errors`
//!
//! Without `PACKET_LOSS` the kernel marks a malformed TX slot
//! `TP_STATUS_WRONG_FORMAT` and parks its ring head on it: the ring stalls
//! for good. So `PACKET_LOSS` is on, and `transmit` refuses a frame shorter
//! than 14 or longer than `mtu + 14` bytes before it reaches the ring (an
//! `Io` error with `InvalidInput`, counted in `tx_errors`). `tx_errors`
//! also counts frames the driver dropped (`ENOBUFS` from the kick) and any
//! slot still seen with `TP_STATUS_WRONG_FORMAT`.
//!
//! # Caveats (not done, and why)
//!
//! - Without offloads, frames from a local Linux peer (veth) with TX
//!   checksum offload on carry only the pseudo-header checksum
//!   (`TP_STATUS_CSUMNOTREADY`, CHECKSUM_PARTIAL) and its TSO sends 64 KiB
//!   frames that do not fit a slot: the lab turns offload off on the peer
//!   (`ethtool -K IF tx off`). With offloads (below) both are handled.
//! - The kernel's own stack shares the interface and its MAC: give the
//!   interface no kernel IP address (and no IPv6), or the kernel answers too.
//! - The socket sees every frame on the interface (other destination MACs
//!   included on veth/promiscuous NICs): the stack filters by MAC.
//! - Several shards: one socket (and ring pair) per shard, joined in one
//!   `PACKET_FANOUT` group of type `PACKET_FANOUT_HASH` (the kernel's flow
//!   hash, the same socket for every frame of a flow) with
//!   [`AfPacketLink::open_fanout`]. That hash is not our Toeplitz hash, so
//!   a frame may land on a shard that does not own its flow; the engine's
//!   steering stage forwards it (`steering`).

use super::sys::{self, Mmap};
use super::*;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Frames per ring (RX and TX each) without offloads.
const FRAME_NR: usize = 1024;
/// Slot size with offloads: a 64 KiB GSO frame, its headers and the vnet header.
const VNET_FRAME_SIZE: usize = 65536 + 512;
/// Block size with offloads (63 slots each).
const VNET_BLOCK_SIZE: usize = 4 << 20;
/// Blocks per ring with offloads.
const VNET_BLOCK_NR: usize = 4;
/// Where TX frame data starts in a slot: `tp_hdrlen - sizeof(sockaddr_ll)`
/// = `TPACKET_ALIGN(sizeof(tpacket2_hdr))` (no `PACKET_TX_HAS_OFF`).
const TX_DATA_OFF: usize = align16(std::mem::size_of::<libc::tpacket2_hdr>());
/// Where the kernel puts an RX frame's MAC header for Ethernet:
/// `TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14` (66 on x86-64).
const RX_MAC_OFF: usize = align16(libc::TPACKET2_HDRLEN + 16) - 14;
/// Room for a VLAN tag the kernel may leave in front of the payload.
const VLAN_HLEN: usize = 4;

const fn align16(x: usize) -> usize {
    (x + 15) & !15
}

/// The rings' sizes and the interface's facts, the same for the same
/// interface and options (so an adopted socket's rings map as they were made).
struct Geometry {
    mtu: usize,
    mac: [u8; 6],
    tso: bool,
    frame_size: usize,
    block_size: usize,
    block_nr: usize,
}

impl Geometry {
    fn of(iface: &str, opts: &LinkOptions) -> Result<Geometry, LinkError> {
        let if_mtu = sys::if_mtu(iface)?;
        let max_mtu = MAX_FRAME - 14;
        let mtu = match opts.mtu {
            Some(m) if m > if_mtu || m > max_mtu || m < 68 => {
                return Err(LinkError::BadSpec(format!(
                    "MTU {m} for af_packet:{iface}: must be 68..={} (the interface's MTU is {if_mtu}; raise it with `ip link set {iface} mtu {m}`)",
                    if_mtu.min(max_mtu)
                )))
            }
            Some(m) => m,
            None => if_mtu.min(max_mtu),
        };
        let mac = sys::if_mac(iface)?;
        // GSO frames only where the device segments (or lets the kernel segment) them.
        let tso = opts.offloads && sys::if_tso_enabled(iface).unwrap_or(false);
        let (frame_size, block_size, block_nr) = if opts.offloads {
            (VNET_FRAME_SIZE, VNET_BLOCK_SIZE, VNET_BLOCK_NR)
        } else {
            let need = (RX_MAC_OFF.max(TX_DATA_OFF) + mtu + 14 + VLAN_HLEN).max(2048);
            let frame_size = need.next_power_of_two();
            // SAFETY: sysconf takes an integer and returns one.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                .unwrap_or(4096)
                .max(4096);
            let block_size = frame_size.max(page);
            (frame_size, block_size, FRAME_NR * frame_size / block_size)
        };
        Ok(Geometry { mtu, mac, tso, frame_size, block_size, block_nr })
    }
}

/// An AF_PACKET link over TPACKET_V2 mmap rings. See the module docs.
pub struct AfPacketLink {
    // Field order = drop order: unmap the rings before closing the socket.
    ring: Mmap,
    fd: OwnedFd,
    name: String,
    mac: [u8; 6],
    mtu: usize,
    mode: String,
    frame_size: usize,
    block_size: usize,
    frames_per_block: usize,
    /// Slots per ring (RX and TX each).
    frame_nr: usize,
    /// Bytes of the RX ring (the TX ring follows it in the mapping).
    ring_bytes: usize,
    /// PACKET_VNET_HDR is on.
    vnet: bool,
    /// The device has TSO on: GSO frames may be sent (else the kernel refuses them).
    tso: bool,
    /// Next RX slot to look at.
    rx_idx: usize,
    /// Next TX slot to fill.
    tx_idx: usize,
    /// Slots filled and marked SEND_REQUEST that the kernel has not taken yet,
    /// the oldest being `tx_idx - tx_unsent`.
    tx_unsent: usize,
    counters: LinkCounters,
    /// `tp_drops` accumulated from PACKET_STATISTICS (reading resets the kernel's).
    kernel_drops: AtomicU64,
    /// This process's claim on the interface (dropped last).
    _claim: super::claim::Claim,
}

impl AfPacketLink {
    /// Opens `iface` (in the calling thread's network namespace).
    /// `NoSuchInterface` when it does not exist, `NeedsPrivilege` without
    /// CAP_NET_RAW, `BadSpec` for an MTU the interface cannot carry.
    pub fn open(iface: &str, opts: &LinkOptions) -> Result<AfPacketLink, LinkError> {
        AfPacketLink::open_fanout(iface, opts, None)
    }

    /// Like `open`, and joins the socket to fanout group `group` (one socket
    /// per shard of an engine, all with the same group id; ids are per
    /// network namespace, so the engine uses its pid's low bits).
    pub fn open_fanout(iface: &str, opts: &LinkOptions, group: Option<u16>) -> Result<AfPacketLink, LinkError> {
        AfPacketLink::open_inner(iface, opts, group, None)
    }

    /// Takes over the socket and claim of the engine being upgraded (live
    /// upgrade): the rings are mapped again from the same socket, with the
    /// same geometry (the same interface and options give the same sizes),
    /// and reading and writing go on at the slots the old engine stopped at.
    pub fn adopt(iface: &str, opts: &LinkOptions, taken: super::Adopted) -> Result<AfPacketLink, LinkError> {
        AfPacketLink::open_inner(iface, opts, None, Some(taken))
    }

    fn open_inner(
        iface: &str,
        opts: &LinkOptions,
        group: Option<u16>,
        adopted: Option<super::Adopted>,
    ) -> Result<AfPacketLink, LinkError> {
        let ifindex = sys::ifindex(iface)?;
        let (adopted, positions) = match adopted {
            Some(a) => (Some((a.socket, a.claim)), (a.rx_idx, a.tx_idx, a.tx_unsent)),
            None => (None, (0, 0, 0)),
        };
        if let Some((fd, claim)) = adopted {
            return AfPacketLink::remap(iface, ifindex, opts, fd, super::claim::adopt(ifindex, claim), positions);
        }
        // Before any socket: a second engine must not see (or answer) a frame.
        let claim = super::claim::claim(iface, ifindex)?;
        let g = Geometry::of(iface, opts)?;
        let (mtu, mac, tso) = (g.mtu, g.mac, g.tso);
        let (frame_size, block_size, block_nr) = (g.frame_size, g.block_size, g.block_nr);

        // Protocol 0: the socket receives nothing until bind names ETH_P_ALL,
        // so no frame is queued outside the ring.
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
        let raw = fd.as_raw_fd();
        let v2 = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &v2,
            "setsockopt(PACKET_VERSION)",
        )?;
        let one: libc::c_int = 1;
        if opts.offloads {
            // Before the rings: the kernel refuses it (EBUSY) once they exist.
            sys::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                &one,
                "setsockopt(PACKET_VNET_HDR)",
            )?;
        }
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_LOSS,
            &one,
            "setsockopt(PACKET_LOSS)",
        )?;
        let bypass = sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &one,
            "setsockopt(PACKET_QDISC_BYPASS)",
        )
        .is_ok();
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
            "setsockopt(PACKET_IGNORE_OUTGOING)",
        )?;

        let frames_per_block = block_size / frame_size;
        let frame_nr = frames_per_block * block_nr;
        let req = libc::tpacket_req {
            tp_block_size: block_size as libc::c_uint,
            tp_block_nr: block_nr as libc::c_uint,
            tp_frame_size: frame_size as libc::c_uint,
            tp_frame_nr: frame_nr as libc::c_uint,
        };
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
            "setsockopt(PACKET_RX_RING)",
        )?;
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &req,
            "setsockopt(PACKET_TX_RING)",
        )?;
        let ring_bytes = block_nr * block_size;
        let ring_len = 2 * ring_bytes;
        let ring = Mmap::shared(raw, ring_len, 0, libc::MAP_POPULATE)?;

        // Room for a full TX ring of skbs in flight, so a burst kick does not
        // stop on the send buffer (FORCE needs CAP_NET_ADMIN; best effort).
        let sndbuf = libc::c_int::try_from(ring_len).unwrap_or(libc::c_int::MAX);
        if sys::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &sndbuf,
            "setsockopt(SO_SNDBUFFORCE)",
        )
        .is_err()
        {
            let _ = sys::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &sndbuf,
                "setsockopt(SO_SNDBUF)",
            );
        }

        sys::set_if_up(iface)?;
        // SAFETY: sockaddr_ll is plain data; zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` is a valid sockaddr_ll and the length says so.
        let rc = unsafe {
            libc::bind(
                raw,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(sys::if_err(
                "bind(AF_PACKET)",
                iface,
                std::io::Error::last_os_error(),
            ));
        }
        if let Some(group) = group {
            let arg: libc::c_int = libc::c_int::from(group) | (libc::PACKET_FANOUT_HASH as libc::c_int) << 16;
            sys::setsockopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg, "setsockopt(PACKET_FANOUT)")?;
        }

        let mode = format!(
            "tpacket_v2 mmap rx {frame_nr}x{frame_size} tx {frame_nr}x{frame_size}{}",
            if bypass { " qdisc-bypass" } else { "" }
        );
        Ok(AfPacketLink {
            ring,
            fd,
            name: iface.to_string(),
            mac,
            mtu,
            mode,
            frame_size,
            block_size,
            frames_per_block,
            frame_nr,
            ring_bytes,
            vnet: opts.offloads,
            tso,
            rx_idx: 0,
            tx_idx: 0,
            tx_unsent: 0,
            counters: LinkCounters::default(),
            kernel_drops: AtomicU64::new(0),
            _claim: claim,
        })
    }

    /// The rings of an adopted socket, mapped again; reading and writing go
    /// on at `(rx_idx, tx_idx, tx_unsent)`.
    fn remap(
        iface: &str,
        ifindex: u32,
        opts: &LinkOptions,
        fd: OwnedFd,
        claim: super::claim::Claim,
        (rx_idx, tx_idx, tx_unsent): (usize, usize, usize),
    ) -> Result<AfPacketLink, LinkError> {
        let _ = ifindex;
        let g = Geometry::of(iface, opts)?;
        let frames_per_block = g.block_size / g.frame_size;
        let frame_nr = frames_per_block * g.block_nr;
        if rx_idx >= frame_nr || tx_idx >= frame_nr || tx_unsent > frame_nr {
            return Err(LinkError::BadSpec(format!(
                "af_packet:{iface}: ring positions rx {rx_idx} tx {tx_idx} (+{tx_unsent}) handed over do not fit rings of {frame_nr} slots"
            )));
        }
        let ring_bytes = g.block_nr * g.block_size;
        let ring = Mmap::shared(fd.as_raw_fd(), 2 * ring_bytes, 0, libc::MAP_POPULATE)?;
        Ok(AfPacketLink {
            ring,
            fd,
            name: iface.to_string(),
            mac: g.mac,
            mtu: g.mtu,
            mode: format!("tpacket_v2 mmap rx {frame_nr}x{fs} tx {frame_nr}x{fs} (handed over)", fs = g.frame_size),
            frame_size: g.frame_size,
            block_size: g.block_size,
            frames_per_block,
            frame_nr,
            ring_bytes,
            vnet: opts.offloads,
            tso: g.tso,
            rx_idx,
            tx_idx,
            tx_unsent,
            counters: LinkCounters::default(),
            kernel_drops: AtomicU64::new(0),
            _claim: claim,
        })
    }

    /// Offset of slot `i` (< frame_nr) from its ring's start: slots never
    /// straddle blocks.
    fn slot_offset(&self, i: usize) -> usize {
        (i / self.frames_per_block) * self.block_size + (i % self.frames_per_block) * self.frame_size
    }

    /// Start of RX slot `i` (< frame_nr).
    fn rx_slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frame_nr);
        // SAFETY: i < frame_nr, so the slot lies inside the RX ring, the first
        // ring_bytes of the mapping.
        unsafe { self.ring.as_ptr().add(self.slot_offset(i)) }
    }

    /// Start of TX slot `i` (< frame_nr).
    fn tx_slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frame_nr);
        // SAFETY: i < frame_nr, so the slot lies inside the TX ring, the
        // second ring_bytes of the mapping.
        unsafe { self.ring.as_ptr().add(self.ring_bytes + self.slot_offset(i)) }
    }

    /// Bytes of vnet header with each frame (0 without offloads).
    fn hdr_len(&self) -> usize {
        if self.vnet {
            vnet::HDR_LEN
        } else {
            0
        }
    }

    /// Loads (acquire) the status word of the slot at `slot` (a slot start from `rx_slot`/`tx_slot`).
    fn load_status(slot: *mut u8) -> u32 {
        // SAFETY: every slot of the live mapping starts with a tpacket2_hdr
        // whose first field is the u32 tp_status, 16-byte aligned
        // (page-aligned mapping, power-of-two slots). The kernel writes it
        // concurrently, hence an atomic access; the reference does not
        // outlive this call.
        unsafe { AtomicU32::from_ptr(slot as *mut u32) }.load(Ordering::Acquire)
    }

    /// Stores (release) the status word of the slot at `slot`, handing the slot over.
    fn store_status(slot: *mut u8, v: u32) {
        // SAFETY: as in `load_status`.
        unsafe { AtomicU32::from_ptr(slot as *mut u32) }.store(v, Ordering::Release)
    }

    /// Folds the kernel's PACKET_STATISTICS drop count (reset on read) into ours.
    fn read_kernel_drops(&self) {
        if let Ok(st) = sys::getsockopt::<libc::tpacket_stats>(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            libc::tpacket_stats {
                tp_packets: 0,
                tp_drops: 0,
            },
            "getsockopt(PACKET_STATISTICS)",
        ) {
            self.kernel_drops
                .fetch_add(u64::from(st.tp_drops), Ordering::Relaxed);
        }
    }

    /// Walks up to `max` RX slots.
    fn read_frames(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError> {
        let vh = self.hdr_len();
        let max_len = if self.vnet { self.frame_size } else { self.mtu + 14 + VLAN_HLEN };
        let mut n = 0;
        let mut losing = false;
        while n < max {
            let slot = self.rx_slot(self.rx_idx);
            let s = Self::load_status(slot);
            if s & libc::TP_STATUS_USER == 0 {
                break;
            }
            losing |= s & libc::TP_STATUS_LOSING != 0;
            let hdr = slot as *const libc::tpacket2_hdr;
            // SAFETY: the slot is ours (TP_STATUS_USER, acquire-loaded) until we
            // store TP_STATUS_KERNEL; the header lies at its start.
            let (len, snap, mac_off) = unsafe {
                (
                    std::ptr::addr_of!((*hdr).tp_len).read() as usize,
                    std::ptr::addr_of!((*hdr).tp_snaplen).read() as usize,
                    std::ptr::addr_of!((*hdr).tp_mac).read() as usize,
                )
            };
            if snap < len
                || mac_off < vh + std::mem::size_of::<libc::tpacket2_hdr>()
                || mac_off.saturating_add(snap) > self.frame_size
                || len > max_len
            {
                self.counters.rx_oversize += 1;
            } else {
                // SAFETY: vh <= mac_off and mac_off + snap <= frame_size were
                // checked, so the vnet header and the frame lie inside this
                // slot, which the kernel does not touch until we hand it back
                // below; the borrow ends before that.
                let whole = unsafe { std::slice::from_raw_parts(slot.add(mac_off - vh), vh + snap) };
                let (vhdr, frame) = whole.split_at(vh);
                let (meta, gso) = if self.vnet {
                    vnet::read(vhdr)
                } else {
                    (RxMeta::default(), vnet::GSO_NONE)
                };
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += snap as u64;
                if meta.csum != RxCsum::None {
                    self.counters.rx_csum_offloaded += 1;
                }
                if gso != vnet::GSO_NONE || snap > self.mtu + 14 + VLAN_HLEN {
                    self.counters.rx_gro_frames += 1;
                }
                rx(frame, meta);
            }
            Self::store_status(slot, libc::TP_STATUS_KERNEL);
            self.rx_idx = (self.rx_idx + 1) % self.frame_nr;
            n += 1;
        }
        if losing {
            self.read_kernel_drops();
        }
        Ok(n)
    }

    /// Advances past TX slots the kernel has taken (status no longer SEND_REQUEST).
    fn reclaim_tx(&mut self) {
        while self.tx_unsent > 0 {
            let i = (self.tx_idx + self.frame_nr - self.tx_unsent) % self.frame_nr;
            let slot = self.tx_slot(i);
            let s = Self::load_status(slot);
            if s & libc::TP_STATUS_SEND_REQUEST != 0 {
                break;
            }
            if s & libc::TP_STATUS_WRONG_FORMAT != 0 {
                // Not expected with PACKET_LOSS on; count it and free the slot.
                self.counters.tx_errors += 1;
                Self::store_status(slot, libc::TP_STATUS_AVAILABLE);
            }
            self.tx_unsent -= 1;
        }
    }
}

impl Link for AfPacketLink {
    fn hand_over(&mut self) -> Result<super::HandOver, String> {
        self.flush().map_err(|e| e.to_string())?;
        let ifindex = sys::ifindex(&self.name).map_err(|e| e.to_string())?;
        let claim = super::claim::raw_fd(ifindex).ok_or("the interface's claim is not held")?;
        Ok(super::HandOver {
            kind: "af_packet".into(),
            iface: self.name.clone(),
            fds: vec![("link socket", self.fd.as_raw_fd()), ("link claim", claim)],
            rx_idx: self.rx_idx,
            tx_idx: self.tx_idx,
            tx_unsent: self.tx_unsent,
            xdp: None,
        })
    }

    fn info(&self) -> LinkInfo {
        LinkInfo {
            kind: "af_packet".into(),
            name: self.name.clone(),
            mode: self.mode.clone(),
            mtu: self.mtu,
            mac: self.mac,
            offloads: if self.vnet {
                let mut v = vec!["vnet_hdr".to_string()];
                if self.tso {
                    v.push("tso4".into());
                }
                v.push("rx-csum".into());
                v
            } else {
                Vec::new()
            },
        }
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn receive(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError> {
        self.read_frames(max, rx)
    }

    fn transmit(
        &mut self,
        fill: &mut MetaFill<'_>,
    ) -> Result<TxStatus, LinkError> {
        let slot = self.tx_slot(self.tx_idx);
        if Self::load_status(slot) != libc::TP_STATUS_AVAILABLE {
            self.reclaim_tx();
            if self.tx_unsent == self.frame_nr || Self::load_status(slot) != libc::TP_STATUS_AVAILABLE {
                self.counters.tx_full += 1;
                return Ok(TxStatus::Full);
            }
        }
        let hdr = self.hdr_len();
        let room = self.frame_size - TX_DATA_OFF - hdr;
        let cap = if self.vnet { room } else { (self.mtu + 14).min(room) };
        // SAFETY: the slot is AVAILABLE, i.e. ours until we mark it
        // SEND_REQUEST; TX_DATA_OFF + hdr + cap <= frame_size, inside the slot.
        let buf = unsafe { std::slice::from_raw_parts_mut(slot.add(TX_DATA_OFF + hdr), cap) };
        let Some((len, meta)) = fill(buf) else {
            return Ok(TxStatus::Idle);
        };
        let plain = meta.gso_size == 0;
        let max = if plain { cap.min(self.mtu + 14) } else { cap };
        if !(14..=max).contains(&len) || (!self.vnet && meta != TxMeta::default()) {
            self.counters.tx_errors += 1;
            return Err(LinkError::io(
                "af_packet transmit",
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("frame length {len} outside 14..={max} (or offload meta {meta:?} without vnet_hdr)"),
                ),
            ));
        }
        if self.vnet {
            // SAFETY: the slot is still ours; the header's HDR_LEN bytes lie
            // between the tpacket2_hdr and the frame, inside the slot.
            let h = unsafe { std::slice::from_raw_parts_mut(slot.add(TX_DATA_OFF), hdr) };
            vnet::write(h, &meta);
            if !plain {
                self.counters.tx_gso_frames += 1;
            }
        }
        let hdr_ptr = slot as *mut libc::tpacket2_hdr;
        // SAFETY: the slot is still ours (AVAILABLE); tp_len is a plain u32 in its header.
        unsafe { std::ptr::addr_of_mut!((*hdr_ptr).tp_len).write((hdr + len) as u32) };
        Self::store_status(slot, libc::TP_STATUS_SEND_REQUEST);
        self.tx_idx = (self.tx_idx + 1) % self.frame_nr;
        self.tx_unsent += 1;
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += len as u64;
        Ok(TxStatus::Queued)
    }

    fn flush(&mut self) -> Result<(), LinkError> {
        // Each successful kick sends every SEND_REQUEST slot unless the send
        // buffer runs out; ENOBUFS loses one frame and stops. Bounded either way.
        for _ in 0..=self.frame_nr {
            self.reclaim_tx();
            if self.tx_unsent == 0 {
                return Ok(());
            }
            // SAFETY: a NULL buffer of length 0 with no address is how a
            // TX ring is kicked; the kernel reads the frames from the ring.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc >= 0 {
                continue;
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::ENOBUFS) => self.counters.tx_errors += 1,
                // Send buffer full: the frames stay queued for the next flush.
                Some(libc::EAGAIN) => return Ok(()),
                _ => return Err(sys::if_err("sendto(AF_PACKET kick)", &self.name, err)),
            }
        }
        Ok(())
    }

    fn wait(
        &mut self,
        timeout: Duration,
        also: &[RawFd],
        _futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError> {
        if Self::load_status(self.rx_slot(self.rx_idx)) & libc::TP_STATUS_USER != 0 {
            return Ok(());
        }
        let mut fds = Vec::with_capacity(1 + also.len());
        fds.push(self.fd.as_raw_fd());
        fds.extend_from_slice(also);
        sys::poll_readable(&fds, timeout)
    }

    fn counters(&self) -> LinkCounters {
        self.read_kernel_drops();
        LinkCounters {
            rx_kernel_drops: self.kernel_drops.load(Ordering::Relaxed),
            ..self.counters
        }
    }

    fn offloads(&self) -> Offloads {
        if self.vnet {
            Offloads { tso_max: if self.tso { TSO_MAX } else { 0 }, rx_csum: true }
        } else {
            Offloads::default()
        }
    }
}
