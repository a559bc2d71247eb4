//! AF_XDP link: frames straight from the driver into our own memory (UMEM),
//! set up with nothing but `libc` syscalls — no libbpf, libxdp or C toolchain.
//!
//! # How
//!
//! - **UMEM**: 4096 chunks of 2048 bytes (4096 bytes when the MTU is above
//!   1778) in a memfd mapped shared, registered with `XDP_UMEM_REG`. Half the chunks are RX buffers,
//!   posted on the fill ring at open and recycled after each `receive`
//!   callback (copy mode hands us `chunk + 256` headroom: masked back to the
//!   chunk); half are TX buffers on a free list, lent to `transmit` and
//!   reclaimed from the completion ring. Rings and their memory ordering:
//!   [`ring`].
//! - **BPF** ([`bpf`]): an XSKMAP and a hand-assembled XDP program that
//!   redirects only ARP asking for `opts.addr` and IPv4 to `opts.addr`; all
//!   else goes on to the kernel. Attached with `BPF_LINK_CREATE`, native
//!   (driver) mode first, generic (skb) mode if the driver refuses; the
//!   program detaches itself when the link fd closes (also on a crash).
//! - One attachment (program, map, BPF link) per interface per network
//!   namespace is shared by all links of this process on that interface, one
//!   XSK per queue: a second link on another queue adds its socket to the
//!   same map; a second link on the same queue is refused at once (`Busy`).
//!   Another process's XDP program on the interface also gives `Busy`.
//! - The XSK binds in copy mode (`XDP_COPY`, with `XDP_USE_NEED_WAKEUP` when
//!   the kernel has it), retrying `EBUSY` for about a second because a
//!   previous socket's teardown on the queue is asynchronous.
//! - **Multi-buffer** (jumbo MTU, above [`MAX_MTU`] up to `MAX_FRAME - 14`):
//!   4096-byte chunks, the XSK bound with `XDP_USE_SG` and the program loaded
//!   with `BPF_F_XDP_HAS_FRAGS` (without it native veth attach fails with
//!   `ERANGE` and generic mode drops jumbo frames). RX: descriptors with
//!   `XDP_PKT_CONTD` in `options` continue into the next; a frame of several
//!   is copied into a per-link `MAX_FRAME` reassembly buffer before the
//!   callback (one extra copy per jumbo frame; a frame in one chunk is still
//!   handed from the UMEM), and every chunk goes back to the fill ring. TX:
//!   `transmit` lends a `MAX_FRAME` scratch buffer and copies the frame into
//!   chunk-sized descriptors, `XDP_PKT_CONTD` on all but the last (again one
//!   extra copy); it answers `Full` without calling `fill` unless chunks and
//!   ring slots for a full-size frame are free. The mode says
//!   `multi-buffer`. An MTU of at most [`MAX_MTU`] takes the single-chunk
//!   path, unchanged. A jumbo link cannot join an interface whose program was
//!   loaded without frags by an earlier non-jumbo link (`XdpUnsupported`).
//! - TX kicks: in copy mode each `sendto` moves at most 32 descriptors and
//!   says `EAGAIN` while more are pending, so `flush` kicks in a bounded loop.
//! - Counters: `rx_kernel_drops` = `rx_dropped + rx_ring_full` from
//!   `XDP_STATISTICS` (`rx_fill_ring_empty_descs` is not added: the kernel
//!   counts a fill-ring miss in `rx_dropped` too); `tx_errors` adds
//!   `tx_invalid_descs`.
//!
//! - **Live upgrade** (`Link::hand_over`, [`AfXdpLink::adopt`]): the old
//!   engine flushes TX, puts every stashed RX chunk on the fill ring and
//!   hands over the XSK, the UMEM's memfd, the claim and the attachment's
//!   program, map and BPF link, with [`XdpState`] (the shape, the RX stash
//!   and the TX free list). Every other chunk is on a ring whose positions
//!   live in the shared ring memory, so the new engine maps the same rings
//!   and UMEM again (the kernel allows mmap of a bound XSK's rings; older
//!   kernels that do not fail the adopt, and the old engine serves on) and
//!   reads on where the old one stopped. The program stays attached
//!   throughout: the BPF link lives while either process holds it.
//!
//! # Not done (yet)
//!
//! - Zero-copy (`XDP_ZEROCOPY`): veth cannot, and copy mode is what we test;
//!   a NIC with zero-copy support would gain from trying it first.
//! - Multi-buffer without the copies (handing fragments to the callback
//!   separately would need a scatter-gather `Link` API); MTUs above
//!   `MAX_FRAME - 14` are refused with `XdpUnsupported`.
//! - VLAN tags, IPv6 and an unspecified `opts.addr` (DHCP): such frames go
//!   to the kernel.
//! - Shared UMEM across queues (`XDP_SHARED_UMEM`): each link has its own.

pub mod bpf;
pub mod ring;

use super::*;
use ring::{Mapping, Ring};
use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// UMEM chunks in all; half RX, half TX.
const FRAMES: u32 = 4096;
const RX_FRAMES: u32 = FRAMES / 2;
const TX_FRAMES: u32 = FRAMES - RX_FRAMES;
/// Ring sizes (powers of two): each ring can hold every buffer of its half.
const RING: u32 = 2048;
/// Headroom the kernel leaves in front of a received frame in copy mode.
const XDP_PACKET_HEADROOM: usize = 256;
/// Largest IP MTU without multi-buffer (above it, up to `MAX_FRAME - 14`,
/// the link binds with `XDP_USE_SG`) (4096-byte chunks minus headroom,
/// capped where native veth attach still works).
pub const MAX_MTU: usize = 3498;
/// Kicks one `flush` may make (64 are needed to drain a full TX ring 32 at a time).
const MAX_KICKS: u32 = 256;
/// How long `bind` retries `EBUSY` from a queue's previous socket.
const BIND_RETRY: Duration = Duration::from_millis(1000);

/// The XDP program, map and BPF link on one interface, shared by this
/// process's links on it.
struct Attachment {
    netns: u64,
    /// Loaded with `BPF_F_XDP_HAS_FRAGS` (multi-buffer).
    frags: bool,
    ifindex: u32,
    addr: Ipv4Addr,
    ipv6: bool,
    native: bool,
    max_entries: u32,
    queues: Vec<u32>,
    map: OwnedFd,
    prog: OwnedFd,
    /// Closing this detaches the program.
    _link: OwnedFd,
}

static ATTACHED: Mutex<Vec<Attachment>> = Mutex::new(Vec::new());

fn attachments() -> std::sync::MutexGuard<'static, Vec<Attachment>> {
    // A panic elsewhere while holding the lock leaves the list consistent (plain pushes/removes).
    ATTACHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Identity of the calling thread's network namespace (ifindexes are per namespace).
fn netns_id() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0)
}

/// An AF_XDP socket on one queue of one interface.
pub struct AfXdpLink {
    // Drop order matters: the rings are unmapped, then the socket closed,
    // then the UMEM unmapped; `Drop` releases the shared attachment last.
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    umem: Mapping,
    /// The UMEM's memfd (handed over on a live upgrade).
    umem_fd: OwnedFd,
    chunk: u64,
    /// RX chunks to hand back to the fill ring.
    rx_stash: Vec<u64>,
    /// TX chunks free for `transmit`.
    tx_free: Vec<u64>,
    need_wakeup: bool,
    netns: u64,
    ifindex: u32,
    queue: u32,
    iface: String,
    mode: String,
    mac: [u8; 6],
    mtu: usize,
    /// Bound with `XDP_USE_SG`: frames span several chunks (MTU > [`MAX_MTU`]).
    multi: bool,
    /// Multi-buffer only: where a chained RX frame is reassembled (`MAX_FRAME` bytes).
    rx_buf: Vec<u8>,
    /// Multi-buffer only: the slot `transmit` lends (`MAX_FRAME` bytes), split into chunks after.
    tx_buf: Vec<u8>,
    counters: LinkCounters,
    pollfds: Vec<libc::pollfd>,
    /// This process's claim on the interface (shared by its queues; dropped
    /// after `Drop` detached the program and the socket closed).
    _claim: super::claim::Claim,
}

// SAFETY: the raw pointers inside the rings and UMEM point into mappings the
// link owns exclusively; nothing is shared with other threads of this process,
// so moving the whole link to another thread is sound.
unsafe impl Send for AfXdpLink {}

fn io_err(call: &'static str, e: io::Error, iface: &str) -> LinkError {
    match e.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => no_such(iface, call, &e),
        Some(libc::EBUSY) => LinkError::Busy(format!("{iface}: {call}: {e}")),
        _ => LinkError::io(call, e),
    }
}

fn no_such(iface: &str, call: &str, e: &io::Error) -> LinkError {
    LinkError::NoSuchInterface(format!("{iface} ({call}: {e})"))
}

fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live value of the type the kernel expects for `opt`, passed with its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt(SOL_XDP, opt)` into `val`; returns the length the kernel wrote.
fn getsockopt<T>(fd: &OwnedFd, opt: libc::c_int, val: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes and `len` is a valid in/out length.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            val as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(len as usize)
    }
}

/// The interface's index, MAC and MTU.
fn interface(iface: &str) -> Result<(u32, [u8; 6], usize), LinkError> {
    if iface.is_empty()
        || iface.len() >= libc::IFNAMSIZ
        || iface.bytes().any(|b| b == 0 || b == b'/')
    {
        return Err(LinkError::BadSpec(format!(
            "{iface:?} is not an interface name"
        )));
    }
    let name = CString::new(iface)
        .map_err(|_| LinkError::BadSpec(format!("{iface:?} is not an interface name")))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(no_such(
            iface,
            "if_nametoindex",
            &io::Error::last_os_error(),
        ));
    }
    // SAFETY: plain socket creation; the fd is owned right below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(LinkError::last("socket(AF_INET) for interface ioctls"));
    }
    // SAFETY: `s` is a fresh fd nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, b) in req.ifr_name.iter_mut().zip(iface.bytes()) {
        *d = b as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming the interface; SIOCGIFHWADDR writes the union's hwaddr.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } < 0 {
        return Err(io_err(
            "ioctl(SIOCGIFHWADDR)",
            io::Error::last_os_error(),
            iface,
        ));
    }
    // SAFETY: SIOCGIFHWADDR succeeded, so `ifru_hwaddr` is the union's active member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    if hw.sa_family != libc::ARPHRD_ETHER {
        return Err(LinkError::XdpUnsupported(format!(
            "{iface} is not an Ethernet interface (hardware type {})",
            hw.sa_family
        )));
    }
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *d = *s as u8;
    }
    // SAFETY: as above; SIOCGIFMTU writes the union's mtu.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
        return Err(io_err(
            "ioctl(SIOCGIFMTU)",
            io::Error::last_os_error(),
            iface,
        ));
    }
    // SAFETY: SIOCGIFMTU succeeded, so `ifru_mtu` is the union's active member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok((ifindex, mac, mtu.max(0) as usize))
}

fn zero_off() -> libc::xdp_ring_offset {
    libc::xdp_ring_offset {
        producer: 0,
        consumer: 0,
        desc: 0,
        flags: 0,
    }
}

/// Finds or creates (loads and attaches) the XDP program for (`netns`,
/// `ifindex`) and reserves `queue` on it. Returns whether it runs in native mode.
fn reserve(
    netns: u64,
    ifindex: u32,
    queue: u32,
    iface: &str,
    (addr, ipv6): (Ipv4Addr, bool),
    frags: bool,
) -> Result<bool, LinkError> {
    let mut list = attachments();
    if let Some(a) = list
        .iter_mut()
        .find(|a| a.netns == netns && a.ifindex == ifindex)
    {
        if a.queues.contains(&queue) {
            return Err(LinkError::Busy(format!(
                "{iface} queue {queue} already has an AF_XDP link in this process"
            )));
        }
        if a.addr != addr || a.ipv6 != ipv6 {
            return Err(LinkError::Busy(format!(
                "{iface} already carries this process's XDP program for {}, not {addr}",
                a.addr
            )));
        }
        if frags && !a.frags {
            return Err(LinkError::XdpUnsupported(format!(
                "{iface} already carries this process's XDP program without multi-buffer \
                 support; a jumbo-MTU link needs all links on {iface} closed first"
            )));
        }
        if queue >= a.max_entries {
            return Err(LinkError::BadSpec(format!(
                "queue {queue} is beyond the XSK map ({} queues)",
                a.max_entries
            )));
        }
        a.queues.push(queue);
        return Ok(a.native);
    }
    let max_entries = (queue + 1).max(64);
    let map = bpf::create_xskmap(max_entries)
        .map_err(|e| LinkError::io("bpf(BPF_MAP_CREATE, XSKMAP)", e))?;
    let insns = bpf::program(map.as_raw_fd(), addr, ipv6);
    let prog_flags = if frags { bpf::BPF_F_XDP_HAS_FRAGS } else { 0 };
    let prog = bpf::load_xdp_with(&insns, prog_flags).map_err(|e| match e.err.raw_os_error() {
        // EACCES with a log is the verifier refusing, not a missing privilege.
        Some(libc::EPERM) => LinkError::io("bpf(BPF_PROG_LOAD)", e.err),
        Some(libc::EACCES) if e.log.is_empty() => LinkError::io("bpf(BPF_PROG_LOAD)", e.err),
        _ => LinkError::XdpUnsupported(format!(
            "the kernel rejected the XDP program: {}; verifier log:\n{}",
            e.err, e.log
        )),
    })?;
    let busy = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST));
    let (link, native) = match bpf::attach_xdp(&prog, ifindex, bpf::XDP_FLAGS_DRV_MODE) {
        Ok(l) => (l, true),
        Err(native) if busy(&native) => {
            return Err(LinkError::Busy(format!(
                "{iface} already has an XDP program attached (native: {native})"
            )))
        }
        Err(native)
            if matches!(
                native.raw_os_error(),
                Some(libc::EPERM) | Some(libc::EACCES)
            ) =>
        {
            return Err(LinkError::io("bpf(BPF_LINK_CREATE, XDP)", native))
        }
        Err(native) => match bpf::attach_xdp(&prog, ifindex, bpf::XDP_FLAGS_SKB_MODE) {
            Ok(l) => (l, false),
            Err(generic) if busy(&generic) => {
                return Err(LinkError::Busy(format!(
                    "{iface} already has an XDP program attached (generic: {generic})"
                )))
            }
            Err(generic) if matches!(generic.raw_os_error(), Some(libc::ENODEV)) => {
                return Err(no_such(iface, "bpf(BPF_LINK_CREATE, XDP)", &generic))
            }
            Err(generic) => {
                return Err(LinkError::XdpUnsupported(format!(
                    "{iface}: native attach failed ({native}), generic attach failed ({generic})"
                )))
            }
        },
    };
    list.push(Attachment {
        netns,
        frags,
        ifindex,
        addr,
        ipv6,
        native,
        max_entries,
        queues: vec![queue],
        map,
        prog,
        _link: link,
    });
    Ok(native)
}

/// Gives `queue` back; the last queue out detaches the program.
fn release(netns: u64, ifindex: u32, queue: u32) {
    let mut list = attachments();
    if let Some(i) = list
        .iter()
        .position(|a| a.netns == netns && a.ifindex == ifindex)
    {
        list[i].queues.retain(|&q| q != queue);
        if list[i].queues.is_empty() {
            list.swap_remove(i);
        }
    }
}

/// Makes the program, map and BPF link an upgraded engine handed over this
/// process's attachment on (`netns`, `ifindex`), with `queue` reserved on
/// it; a later shard's copies of the same descriptors are dropped.
fn adopt_attachment(
    netns: u64,
    ifindex: u32,
    queue: u32,
    (addr, ipv6): (Ipv4Addr, bool),
    st: &XdpState,
    [map, prog, link]: [OwnedFd; 3],
) -> Result<(), LinkError> {
    let mut list = attachments();
    if let Some(a) = list.iter_mut().find(|a| a.netns == netns && a.ifindex == ifindex) {
        if a.queues.contains(&queue) {
            return Err(LinkError::Busy(format!("queue {queue} was handed over twice")));
        }
        a.queues.push(queue);
        return Ok(());
    }
    list.push(Attachment {
        netns,
        frags: st.frags,
        ifindex,
        addr,
        ipv6,
        native: st.native,
        max_entries: st.max_entries,
        queues: vec![queue],
        map,
        prog,
        _link: link,
    });
    Ok(())
}

/// Releases a reserved queue unless `open` completes.
struct Reservation {
    netns: u64,
    ifindex: u32,
    queue: u32,
    armed: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.armed {
            release(self.netns, self.ifindex, self.queue);
        }
    }
}

/// The four rings of one XSK, mapped.
struct Rings {
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
}

impl Rings {
    /// Maps the rings of `fd` (sized [`RING`]); each ring starts at the
    /// positions the shared memory holds (zero on a new socket, where the
    /// old engine stopped on a handed-over one).
    fn map(fd: &OwnedFd) -> Result<Rings, LinkError> {
        let mut off = libc::xdp_mmap_offsets { rx: zero_off(), tx: zero_off(), fr: zero_off(), cr: zero_off() };
        let len = getsockopt(fd, libc::XDP_MMAP_OFFSETS, &mut off)
            .map_err(|e| LinkError::io("getsockopt(XDP_MMAP_OFFSETS)", e))?;
        if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(LinkError::XdpUnsupported(
                "kernel too old: XDP ring offsets without flags (before 5.4)".into(),
            ));
        }
        let raw = fd.as_raw_fd();
        Ok(Rings {
            rx: map_ring(raw, &off.rx, libc::XDP_PGOFF_RX_RING as u64, false, ("mmap(RX ring)", "RX ring layout"))?,
            tx: map_ring(raw, &off.tx, libc::XDP_PGOFF_TX_RING as u32 as u64, true, ("mmap(TX ring)", "TX ring layout"))?,
            fill: map_ring(raw, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING, true, ("mmap(fill ring)", "fill ring layout"))?,
            comp: map_ring(
                raw,
                &off.cr,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
                false,
                ("mmap(completion ring)", "completion ring layout"),
            )?,
        })
    }
}

/// Maps one ring of [`RING`] descriptors of type `D` of the XSK `fd` at page
/// offset `pgoff`; `calls` name the mmap and the layout check in errors.
fn map_ring<D: Copy>(
    fd: std::os::fd::RawFd,
    o: &libc::xdp_ring_offset,
    pgoff: u64,
    producer_side: bool,
    calls: (&'static str, &'static str),
) -> Result<Ring<D>, LinkError> {
    let len = o.desc as usize + RING as usize * std::mem::size_of::<D>();
    let map = Mapping::ring(fd, len, pgoff).map_err(|e| LinkError::io(calls.0, e))?;
    Ring::new(map, o, RING, producer_side).map_err(|e| LinkError::io(calls.1, e))
}

/// A memfd of `len` bytes for the UMEM: shared memory an upgrading engine
/// can map again from the descriptor (anonymous memory it could not).
fn umem_memfd(len: usize) -> Result<OwnedFd, LinkError> {
    // SAFETY: a NUL-terminated name; the fd is owned right below.
    let raw = unsafe { libc::memfd_create(c"outboard-umem".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(LinkError::last("memfd_create(UMEM)"));
    }
    // SAFETY: `raw` is a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: plain syscall on our own fd.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
        return Err(LinkError::last("ftruncate(UMEM)"));
    }
    Ok(fd)
}

/// What an af_xdp link hands to the engine that upgrades this one besides
/// its descriptors: its shape, and where the UMEM chunks that no ring holds
/// are. Every other chunk is on a ring (fill and TX: the kernel's; RX and
/// completion: the new engine consumes them from where the old one stopped).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct XdpState {
    pub queue: u32,
    pub chunk: u64,
    /// Bound with `XDP_USE_SG` (frames over several chunks).
    pub multi: bool,
    /// The program runs in native (driver) mode, not generic.
    pub native: bool,
    pub need_wakeup: bool,
    /// The XSK map's size and whether the program was loaded with frags.
    pub max_entries: u32,
    pub frags: bool,
    /// RX chunks not yet back on the fill ring.
    pub rx_stash: Vec<u64>,
    /// TX chunks free for `transmit`.
    pub tx_free: Vec<u64>,
}

/// Everything but the chunk lists an af_xdp link is built from.
struct Parts<'a> {
    iface: &'a str,
    ifindex: u32,
    mac: [u8; 6],
    mtu: usize,
    queue: u32,
    netns: u64,
    fd: OwnedFd,
    umem_fd: OwnedFd,
    umem: Mapping,
    rings: Rings,
    chunk: u64,
    multi: bool,
    native: bool,
    need_wakeup: bool,
    claim: super::claim::Claim,
}

impl AfXdpLink {
    /// Opens an XSK on `queue` of `iface` and attaches the XDP program that
    /// steers frames for `opts.addr` to it.
    pub fn open(iface: &str, queue: u32, opts: &LinkOptions) -> Result<AfXdpLink, LinkError> {
        let (ifindex, mac, if_mtu) = interface(iface)?;
        // Before the XDP program: it would steal another engine's frames.
        let claim = super::claim::claim(iface, ifindex)?;
        let mtu = opts.mtu.unwrap_or(if_mtu);
        if mtu > MAX_FRAME - 14 {
            return Err(LinkError::XdpUnsupported(format!(
                "MTU {mtu} on {iface} is above the largest this link carries ({})",
                MAX_FRAME - 14
            )));
        }
        // Above MAX_MTU a frame spans several chunks: multi-buffer.
        let multi = mtu > MAX_MTU;
        let chunk: usize = if multi {
            4096
        } else if mtu + 14 + XDP_PACKET_HEADROOM <= 2048 {
            2048
        } else {
            4096
        };

        // SAFETY: plain socket creation; the fd is owned right below.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EAFNOSUPPORT) => {
                    LinkError::XdpUnsupported(format!("this kernel has no AF_XDP sockets ({e})"))
                }
                _ => LinkError::io("socket(AF_XDP)", e),
            });
        }
        // SAFETY: `fd` is a fresh socket nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };

        let umem_fd = umem_memfd(FRAMES as usize * chunk)?;
        let umem = Mapping::shared(umem_fd.as_raw_fd(), FRAMES as usize * chunk)
            .map_err(|e| LinkError::io("mmap(UMEM)", e))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem.size() as u64,
            chunk_size: chunk as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&fd, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| LinkError::io("setsockopt(XDP_UMEM_REG)", e))?;
        for (opt, call) in [
            (libc::XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
            (libc::XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
            (libc::XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
        ] {
            setsockopt(&fd, opt, &RING).map_err(|e| LinkError::io(call, e))?;
        }
        let rings = Rings::map(&fd)?;

        let netns = netns_id();
        let native = reserve(netns, ifindex, queue, iface, (opts.addr, opts.ipv6), multi)?;
        let mut reservation = Reservation {
            netns,
            ifindex,
            queue,
            armed: true,
        };

        let need_wakeup = bind(&fd, ifindex, queue, iface, multi)?;
        {
            let list = attachments();
            let a = list
                .iter()
                .find(|a| a.netns == netns && a.ifindex == ifindex);
            match a {
                Some(a) => bpf::xskmap_set(&a.map, queue, fd.as_raw_fd())
                    .map_err(|e| LinkError::io("bpf(BPF_MAP_UPDATE_ELEM, XSKMAP)", e))?,
                None => {
                    return Err(LinkError::Io {
                        call: "XSK map",
                        err: io::Error::other("attachment vanished"),
                    })
                }
            }
        }

        let mut link = AfXdpLink::assemble(
            Parts { iface, ifindex, mac, mtu, queue, netns, fd, umem_fd, umem, rings, chunk: chunk as u64, multi, native, need_wakeup, claim },
            (0..RX_FRAMES).map(|i| i as u64 * chunk as u64).collect(),
            (RX_FRAMES..RX_FRAMES + TX_FRAMES).rev().map(|i| i as u64 * chunk as u64).collect(),
        );
        reservation.armed = false;
        link.refill();
        Ok(link)
    }

    fn assemble(p: Parts<'_>, rx_stash: Vec<u64>, tx_free: Vec<u64>) -> AfXdpLink {
        let Rings { rx, tx, fill, comp } = p.rings;
        AfXdpLink {
            rx,
            tx,
            fill,
            comp,
            fd: p.fd,
            umem_fd: p.umem_fd,
            umem: p.umem,
            chunk: p.chunk,
            rx_stash,
            tx_free,
            need_wakeup: p.need_wakeup,
            netns: p.netns,
            ifindex: p.ifindex,
            queue: p.queue,
            iface: p.iface.to_string(),
            mode: format!(
                "{} copy-mode {}queue {}",
                if p.native { "native" } else { "generic" },
                if p.multi { "multi-buffer " } else { "" },
                p.queue
            ),
            multi: p.multi,
            rx_buf: if p.multi { vec![0; MAX_FRAME] } else { Vec::new() },
            tx_buf: if p.multi { vec![0; MAX_FRAME] } else { Vec::new() },
            mac: p.mac,
            mtu: p.mtu,
            counters: LinkCounters::default(),
            pollfds: Vec::with_capacity(4),
            _claim: p.claim,
        }
    }

    /// Takes over the link an engine being upgraded handed over on `queue`
    /// of `iface`: the same XSK (bound, in the XSK map), the same UMEM
    /// (mapped again from its memfd), the rings mapped again at the
    /// positions the old engine left, and the program, map and BPF link it
    /// attached (this process's attachment on the interface from now on).
    /// Reads and writes nothing on the rings: the old engine may still
    /// resume until the upgrade is confirmed.
    pub fn adopt(iface: &str, queue: u32, opts: &LinkOptions, mut taken: super::Adopted) -> Result<AfXdpLink, LinkError> {
        let bad = |why: String| LinkError::BadSpec(format!("the handed-over af_xdp link on {iface}: {why}"));
        let st = taken.xdp.take().ok_or_else(|| bad("the record has no AF_XDP state".into()))?;
        let mut take = |name: &str| {
            let i = taken.more.iter().position(|(n, _)| n == name);
            i.map(|i| taken.more.swap_remove(i).1).ok_or_else(|| bad(format!("no {name} descriptor")))
        };
        let (umem_fd, map, prog, bpf_link) = (take("link umem")?, take("link xsk map")?, take("link xdp program")?, take("link xdp attachment")?);
        let (ifindex, mac, if_mtu) = interface(iface)?;
        let mtu = opts.mtu.unwrap_or(if_mtu);
        if st.queue != queue || st.multi != (mtu > MAX_MTU) || !matches!(st.chunk, 2048 | 4096) {
            return Err(bad(format!(
                "queue {} chunk {} multi-buffer {} does not fit queue {queue} at MTU {mtu}",
                st.queue, st.chunk, st.multi
            )));
        }
        let len = FRAMES as u64 * st.chunk;
        let place = |a: &u64| a.is_multiple_of(st.chunk) && *a < len;
        if st.rx_stash.len() + st.tx_free.len() > FRAMES as usize || !st.rx_stash.iter().chain(&st.tx_free).all(place) {
            return Err(bad("a chunk outside the UMEM or off a chunk boundary".into()));
        }
        // SAFETY: `stat` is plain old data the kernel fills.
        let mut meta: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a live fd and a writable stat.
        if unsafe { libc::fstat(umem_fd.as_raw_fd(), &mut meta) } < 0 || (meta.st_size as u64) < len {
            return Err(bad(format!("the UMEM memfd is smaller than {len} bytes")));
        }
        let umem = Mapping::shared(umem_fd.as_raw_fd(), len as usize).map_err(|e| LinkError::io("mmap(UMEM)", e))?;
        let rings = Rings::map(&taken.socket)?;
        let netns = netns_id();
        adopt_attachment(netns, ifindex, queue, (opts.addr, opts.ipv6), &st, [map, prog, bpf_link])?;
        let claim = super::claim::adopt(ifindex, taken.claim);
        let parts = Parts {
            iface,
            ifindex,
            mac,
            mtu,
            queue,
            netns,
            fd: taken.socket,
            umem_fd,
            umem,
            rings,
            chunk: st.chunk,
            multi: st.multi,
            native: st.native,
            need_wakeup: st.need_wakeup,
            claim,
        };
        Ok(AfXdpLink::assemble(parts, st.rx_stash, st.tx_free))
    }

    /// Runs the attached XDP program once on `frame` (BPF_PROG_TEST_RUN) and
    /// returns its verdict (2 = pass to the kernel, 4 = redirect to an XSK).
    /// For tests and diagnostics.
    pub fn test_program(&self, frame: &[u8]) -> Result<u32, LinkError> {
        let list = attachments();
        let a = list
            .iter()
            .find(|a| a.netns == self.netns && a.ifindex == self.ifindex)
            .ok_or_else(|| LinkError::Io {
                call: "XSK map",
                err: io::Error::other("attachment vanished"),
            })?;
        bpf::test_run(&a.prog, frame).map_err(|e| LinkError::io("bpf(BPF_PROG_TEST_RUN)", e))
    }

    /// Hands stashed RX chunks back to the kernel's fill ring.
    fn refill(&mut self) {
        let n = (self.fill.free() as usize).min(self.rx_stash.len());
        if n == 0 {
            return;
        }
        for _ in 0..n {
            if let Some(addr) = self.rx_stash.pop() {
                self.fill.push(addr);
            }
        }
        self.fill.submit();
        if self.need_wakeup && self.fill.needs_wakeup() {
            // SAFETY: a zero-length, non-blocking recvfrom with null buffers only wakes the driver.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Moves completed TX chunks back to the free list.
    fn reclaim(&mut self) {
        let n = self.comp.available();
        for i in 0..n {
            let addr = self.comp.peek(i);
            self.tx_free.push(addr - addr % self.chunk);
        }
        if n > 0 {
            self.comp.release(n);
        }
    }

    fn frame_max(&self) -> usize {
        self.mtu + 14
    }

    /// `receive` when bound with `XDP_USE_SG`: descriptors with
    /// `XDP_PKT_CONTD` continue into the next; a chain of several is copied
    /// into `rx_buf` (a single-descriptor frame is handed from the UMEM as usual).
    /// `max` counts frames, not descriptors.
    fn receive_multi(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, LinkError> {
        let avail = self.rx.available();
        let umem_len = self.umem.size() as u64;
        let frame_max = self.frame_max();
        let (mut i, mut frames) = (0u32, 0usize);
        while i < avail && frames < max {
            // The kernel publishes a frame's descriptors together; a chain cut
            // short by `avail` is left for the next call all the same.
            let mut end = i;
            let complete = loop {
                let d = self.rx.peek(end);
                end += 1;
                if d.options & libc::XDP_PKT_CONTD == 0 {
                    break true;
                }
                if end == avail {
                    break false;
                }
            };
            if !complete {
                break;
            }
            let mut total = 0usize;
            let mut bad = false;
            for j in i..end {
                let d = self.rx.peek(j);
                let (addr, len) = (d.addr, d.len as u64);
                self.rx_stash.push(addr - addr % self.chunk);
                if bad {
                    continue;
                }
                if addr.checked_add(len).is_none_or(|e| e > umem_len)
                    || total + len as usize > frame_max
                {
                    bad = true;
                    continue;
                }
                if end - i == 1 {
                    // SAFETY: [addr, addr+len) lies inside the UMEM (checked above); the
                    // kernel published this descriptor and will not write the chunk until
                    // it is back on the fill ring (refill below, after the callback).
                    let frame = unsafe {
                        std::slice::from_raw_parts(self.umem.as_ptr().add(addr as usize), len as usize)
                    };
                    rx(frame);
                } else {
                    // SAFETY: as above; `rx_buf` is our own Vec, distinct from the UMEM
                    // mapping, with room for `total + len` <= frame_max <= MAX_FRAME bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.umem.as_ptr().add(addr as usize),
                            self.rx_buf.as_mut_ptr().add(total),
                            len as usize,
                        )
                    };
                }
                total += len as usize;
            }
            if bad {
                self.counters.rx_oversize += 1;
            } else {
                if end - i > 1 {
                    rx(&self.rx_buf[..total]);
                }
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += total as u64;
            }
            frames += 1;
            i = end;
        }
        if i > 0 {
            self.rx.release(i);
        }
        self.refill();
        Ok(frames)
    }

    /// `transmit` when bound with `XDP_USE_SG`: lends `tx_buf`, then copies
    /// the frame into as many TX chunks as it needs, `XDP_PKT_CONTD` on all
    /// descriptors but the last. Chunks and ring slots for a full-size frame
    /// are checked before `fill` runs.
    fn transmit_multi(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<TxStatus, LinkError> {
        let cap = self.frame_max();
        let chunk = self.chunk as usize;
        let need = cap.div_ceil(chunk);
        if self.tx_free.len() < need {
            self.reclaim();
        }
        if self.tx_free.len() < need || !self.tx.has_free(need as u32) {
            self.counters.tx_full += 1;
            return Ok(TxStatus::Full);
        }
        match fill(&mut self.tx_buf[..cap]) {
            None | Some(0) => Ok(TxStatus::Idle),
            Some(len) if len > cap => Err(LinkError::Io {
                call: "transmit",
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("frame of {len} bytes in a {cap}-byte slot"),
                ),
            }),
            Some(len) => {
                let mut off = 0;
                while off < len {
                    let n = chunk.min(len - off);
                    let Some(addr) = self.tx_free.pop() else {
                        unreachable!("checked above: {need} free chunks");
                    };
                    // SAFETY: `addr` is a free TX chunk (chunk-aligned, inside the UMEM, `n` <=
                    // chunk bytes), which the kernel is done with; `tx_buf` is our own Vec with
                    // `off + n` <= len <= cap bytes, distinct from the UMEM mapping.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.tx_buf.as_ptr().add(off),
                            self.umem.as_ptr().add(addr as usize),
                            n,
                        )
                    };
                    off += n;
                    self.tx.push(libc::xdp_desc {
                        addr,
                        len: n as u32,
                        options: if off < len { libc::XDP_PKT_CONTD } else { 0 },
                    });
                }
                self.tx.submit();
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += len as u64;
                Ok(TxStatus::Queued)
            }
        }
    }
}

/// Binds the XSK; returns whether need_wakeup is in use.
fn bind(fd: &OwnedFd, ifindex: u32, queue: u32, iface: &str, sg: bool) -> Result<bool, LinkError> {
    let try_bind = |flags: u16| {
        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp passed with its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    let start = crate::clock::now();
    let sg = if sg { libc::XDP_USE_SG } else { 0 };
    let mut flags = libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP | sg;
    loop {
        match try_bind(flags) {
            Ok(()) => return Ok(flags & libc::XDP_USE_NEED_WAKEUP != 0),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && flags & libc::XDP_USE_NEED_WAKEUP != 0 => {
                flags = libc::XDP_COPY | sg;
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if crate::clock::now().saturating_duration_since(start) >= BIND_RETRY {
                    return Err(LinkError::Busy(format!(
                        "{iface} queue {queue} is held by another AF_XDP socket (bind: {e})"
                    )));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && sg != 0 => {
                return Err(LinkError::XdpUnsupported(format!(
                    "bind to {iface} queue {queue} with XDP_USE_SG failed ({e}): does the interface \
                     have that queue, and the kernel multi-buffer AF_XDP (6.6+)?"
                )))
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return Err(LinkError::XdpUnsupported(format!(
                    "bind to {iface} queue {queue} failed ({e}): does the interface have that queue?"
                )))
            }
            Err(e) => return Err(io_err("bind(AF_XDP)", e, iface)),
        }
    }
}

impl Drop for AfXdpLink {
    fn drop(&mut self) {
        // The socket leaves the XSK map when it closes (field drop, after this);
        // the program detaches when the last queue on the interface lets go.
        release(self.netns, self.ifindex, self.queue);
    }
}

impl Link for AfXdpLink {
    fn info(&self) -> LinkInfo {
        LinkInfo {
            kind: "af_xdp".into(),
            name: self.iface.clone(),
            mode: self.mode.clone(),
            mtu: self.mtu,
            mac: self.mac,
            offloads: Vec::new(),
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
        let rx = &mut |f: &[u8]| rx(f, RxMeta::default());
        if self.multi {
            return self.receive_multi(max, rx);
        }
        let n = self.rx.available().min(max.min(u32::MAX as usize) as u32);
        let umem_len = self.umem.size() as u64;
        let frame_max = self.frame_max();
        for i in 0..n {
            let d = self.rx.peek(i);
            let (addr, len) = (d.addr, d.len as u64);
            if addr.checked_add(len).is_none_or(|end| end > umem_len) {
                // The kernel never does this; don't trust it blindly either.
                self.counters.rx_oversize += 1;
                continue;
            }
            if len as usize > frame_max {
                self.counters.rx_oversize += 1;
            } else {
                // SAFETY: [addr, addr+len) lies inside the UMEM (checked above); the kernel
                // published this descriptor and will not write the chunk until we return it
                // to the fill ring below, after the callback.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.as_ptr().add(addr as usize), len as usize)
                };
                rx(frame);
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += len;
            }
            self.rx_stash.push(addr - addr % self.chunk);
        }
        if n > 0 {
            self.rx.release(n);
        }
        self.refill();
        Ok(n as usize)
    }

    fn transmit(&mut self, fill: &mut MetaFill<'_>) -> Result<TxStatus, LinkError> {
        let fill = &mut |buf: &mut [u8]| without_offloads(fill(buf));
        if self.multi {
            return self.transmit_multi(fill);
        }
        if self.tx_free.is_empty() {
            self.reclaim();
        }
        let Some(&addr) = self.tx_free.last() else {
            self.counters.tx_full += 1;
            return Ok(TxStatus::Full);
        };
        if self.tx.free() == 0 {
            self.counters.tx_full += 1;
            return Ok(TxStatus::Full);
        }
        let cap = self.frame_max();
        // SAFETY: `addr` is a TX chunk on our free list (chunk-aligned, inside the UMEM,
        // chunk >= cap); the kernel is done with it (it came back on the completion ring or
        // was never given), and nothing else references it while the slice lives.
        let slot =
            unsafe { std::slice::from_raw_parts_mut(self.umem.as_ptr().add(addr as usize), cap) };
        match fill(slot) {
            None | Some(0) => Ok(TxStatus::Idle),
            Some(len) if len > cap => Err(LinkError::Io {
                call: "transmit",
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("frame of {len} bytes in a {cap}-byte slot"),
                ),
            }),
            Some(len) => {
                self.tx_free.pop();
                self.tx.push(libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                });
                self.tx.submit();
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += len as u64;
                Ok(TxStatus::Queued)
            }
        }
    }

    fn flush(&mut self) -> Result<(), LinkError> {
        for _ in 0..MAX_KICKS {
            if self.tx.pending() == 0 || (self.need_wakeup && !self.tx.needs_wakeup()) {
                break;
            }
            // SAFETY: a zero-length, non-blocking sendto with null buffers only kicks TX.
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
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // More pending, the driver busy, or the completion ring full: reclaim, kick again.
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                    | Some(libc::EINTR) => {}
                    _ => return Err(io_err("sendto (AF_XDP TX kick)", e, &self.iface)),
                }
            }
            self.reclaim();
        }
        self.reclaim();
        Ok(())
    }

    fn wait(
        &mut self,
        timeout: Duration,
        also: &[RawFd],
        _futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError> {
        if self.rx.available() > 0 {
            return Ok(());
        }
        self.pollfds.clear();
        self.pollfds.push(libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        self.pollfds.extend(also.iter().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `pollfds` is a live array of `len` pollfd structs.
        let rc = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(LinkError::io("poll(AF_XDP)", e));
            }
        }
        Ok(())
    }

    fn counters(&self) -> LinkCounters {
        let mut c = self.counters;
        let mut st = libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        };
        if getsockopt(&self.fd, libc::XDP_STATISTICS, &mut st).is_ok() {
            c.rx_kernel_drops += st.rx_dropped + st.rx_ring_full;
            c.tx_errors += st.tx_invalid_descs;
        }
        c
    }

    /// Flushes what was queued, gives the fill ring every stashed RX chunk,
    /// and hands over the XSK, the claim, the UMEM's memfd and the
    /// interface's program, map and BPF link with [`XdpState`]. The kernel
    /// goes on filling the RX ring meanwhile; the new engine reads on from
    /// where this one stopped.
    fn hand_over(&mut self) -> Result<super::HandOver, String> {
        self.flush().map_err(|e| e.to_string())?;
        self.refill();
        let claim = super::claim::raw_fd(self.ifindex).ok_or("the interface's claim is not held")?;
        let list = attachments();
        let a = list
            .iter()
            .find(|a| a.netns == self.netns && a.ifindex == self.ifindex)
            .ok_or("the interface's XDP attachment is gone")?;
        Ok(super::HandOver {
            kind: "af_xdp".into(),
            iface: self.iface.clone(),
            // Raw fds stay valid: this link and its attachment outlive the offer.
            fds: vec![
                ("link socket", self.fd.as_raw_fd()),
                ("link claim", claim),
                ("link umem", self.umem_fd.as_raw_fd()),
                ("link xsk map", a.map.as_raw_fd()),
                ("link xdp program", a.prog.as_raw_fd()),
                ("link xdp attachment", a._link.as_raw_fd()),
            ],
            rx_idx: 0,
            tx_idx: 0,
            tx_unsent: 0,
            xdp: Some(XdpState {
                queue: self.queue,
                chunk: self.chunk,
                multi: self.multi,
                native: a.native,
                need_wakeup: self.need_wakeup,
                max_entries: a.max_entries,
                frags: a.frags,
                rx_stash: self.rx_stash.clone(),
                tx_free: self.tx_free.clone(),
            }),
        })
    }
}
