//! `tap:NAME`: frames through a Linux TAP device. The kernel end of the
//! device is an ordinary interface (give it an IP, route to it); our end is
//! the file descriptor.
//!
//! # How
//!
//! - `open("/dev/net/tun", O_RDWR | O_NONBLOCK)`, then `TUNSETIFF` with
//!   `IFF_TAP | IFF_NO_PI`: creates the device, or attaches to an existing
//!   (persistent) TAP of that name. Then the interface is brought up and,
//!   when `opts.mtu` is given, its MTU set.
//! - A device we create is not persistent: it disappears when the link is
//!   dropped (the fd closes). One we attached to stays, as it was made.
//! - Our MAC is a locally administered unicast address derived from the name
//!   (`02:` + 5 bytes of an FNV-1a hash), never equal to the kernel end's MAC
//!   (the kernel end is a different host on the same wire).
//! - `receive`: one `read` per frame into an internal 64 KiB buffer (a TAP
//!   read with a short buffer fails and loses the frame), up to `max`, until
//!   `EAGAIN`. Frames longer than `mtu + 14` count in `rx_oversize`.
//! - `transmit`: the callback builds into an internal buffer, then one
//!   `write`. If the write says `EAGAIN` (in practice never: a TAP's send
//!   buffer is unlimited) the frame is kept and retried by `flush` and the
//!   next `transmit`, which returns `Full` while it is still stuck. A frame
//!   the kernel rejects (`EINVAL`, `EIO`) counts in `tx_errors`.
//! - `flush` only retries such a kept frame; `wait` polls the fd plus `also`.
//! - `info().mode` is `tap`. Errors: no CAP_NET_ADMIN → `NeedsPrivilege`;
//!   the TAP is held by another process → `Busy` (an existing device is
//!   claimed before `TUNSETIFF`, a new one after: see [`super::claim`],
//!   which names the holding engine's pid); a non-TAP interface of
//!   that name exists → `NoSuchInterface` saying so.
//!
//! # Offloads (`opts.offloads`, the engine's default)
//!
//! `TUNSETIFF` also gets `IFF_VNET_HDR`, then `TUNSETVNETHDRSZ` = 10 (the
//! plain `struct virtio_net_hdr`: we never merge receive buffers, so the
//! 12-byte `virtio_net_hdr_mrg_rxbuf` would only carry an unused
//! `num_buffers`) and `TUNSETOFFLOAD` = `TUN_F_CSUM | TUN_F_TSO4`. Every
//! read and write then starts with that header:
//! - we write TCP segments of up to 64 KiB with `GSO_TCPV4`, `gso_size` =
//!   the MSS and `NEEDS_CSUM`; the kernel takes them as one skb (its TCP
//!   receives them GRO-sized; forwarded, they are cut to the MTU);
//! - the kernel hands us its GSO segments whole (up to 64 KiB, `GSO_TCPV4`,
//!   counted in `rx_gro_frames`) with `NEEDS_CSUM` (CHECKSUM_PARTIAL: the
//!   checksum holds only the pseudo-header sum) or `DATA_VALID`;
//!   `receive` passes that on in its `RxMeta`.
//!
//! `info().offloads` is then `["vnet_hdr", "tso4", "rx-csum"]`, the
//! transmit slot `TSO_FRAME` bytes.
//!
//! # Several shards
//!
//! [`TapLink::open_queue`] with `multi` opens the device with
//! `IFF_MULTI_QUEUE`: each shard opens `/dev/net/tun` and attaches its own
//! queue (a file descriptor) to the one device, as a NIC's queues. The
//! kernel picks the queue for what it sends by its own flow hash, not ours:
//! frames for another shard's flow are forwarded by the engine
//! (`steering`). A device made without `IFF_MULTI_QUEUE` (a persistent TAP
//! made for one queue) refuses a second queue with EINVAL.
//!
//! A syscall per frame makes this the slowest link per frame; with offloads
//! a frame is up to 64 KiB.

use super::sys;
use super::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Read buffer: the largest frame a TAP can hand us (64 KiB MTU, or a GSO
/// segment) and its vnet header, and then some.
const RX_BUF: usize = vnet::HDR_LEN + 65536 + 512;

/// A TAP device link. See the module docs.
pub struct TapLink {
    fd: OwnedFd,
    name: String,
    mac: [u8; 6],
    mtu: usize,
    rx_buf: Vec<u8>,
    tx_buf: Vec<u8>,
    /// Length of a frame in `tx_buf` whose write returned EAGAIN (0: none).
    tx_stuck: usize,
    /// IFF_VNET_HDR is on: every read and write starts with a virtio_net_hdr.
    vnet: bool,
    counters: LinkCounters,
    /// This process's claim on the device (dropped after the fd closed).
    _claim: super::claim::Claim,
}

impl TapLink {
    /// Creates (or attaches to) TAP device `name` in the calling thread's
    /// network namespace and brings it up.
    pub fn open(name: &str, opts: &LinkOptions) -> Result<TapLink, LinkError> {
        TapLink::open_queue(name, opts, false)
    }

    /// Opens one queue of TAP `name`; with `multi`, of a multi-queue device
    /// (`IFF_MULTI_QUEUE`: every shard of an engine opens one).
    pub fn open_queue(name: &str, opts: &LinkOptions, multi: bool) -> Result<TapLink, LinkError> {
        let mut req = sys::ifreq(name)?;
        if name.contains('%') {
            return Err(LinkError::BadSpec(format!(
                "{name:?}: TAP names with '%' are templates; give a plain name"
            )));
        }
        // A device of that name already there (a persistent TAP, or one
        // another engine made): claim it first, so a second engine is told
        // who holds it. A device we create is claimed once it exists.
        let pre_claim = match sys::ifindex(name) {
            Ok(idx) => Some(super::claim::claim(name, idx)?),
            Err(_) => None,
        };
        // SAFETY: the path is a NUL-terminated literal; open takes plain flags.
        let raw = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ENODEV) => LinkError::NoSuchInterface(format!(
                    "{name}: /dev/net/tun is missing ({err}); load the tun module or create the node"
                )),
                _ => LinkError::io("open(/dev/net/tun)", err),
            });
        }
        // SAFETY: `raw` was just returned by open(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let vnet_flag = if opts.offloads { libc::IFF_VNET_HDR } else { 0 };
        let mq_flag = if multi { libc::IFF_MULTI_QUEUE } else { 0 };
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | vnet_flag | mq_flag) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, valid for the call.
        let rc = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETIFF,
                &mut req as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EBUSY) => LinkError::Busy(format!(
                    "TAP {name} is already attached ({err}), by another link of this process \
                     or by another program: one engine per TAP device; stop it or use another name"
                )),
                Some(libc::EINVAL) if multi => LinkError::Busy(format!(
                    "{name}: cannot add a queue ({err}): it exists as a single-queue TAP device \
                     (or is not a TAP); delete it or run one shard"
                )),
                Some(libc::EINVAL) => LinkError::NoSuchInterface(format!(
                    "{name}: an interface of that name exists and is not a TAP device ({err})"
                )),
                _ => sys::if_err("ioctl(TUNSETIFF)", name, err),
            });
        }
        let claim = match pre_claim {
            Some(c) => c,
            None => super::claim::claim(name, sys::ifindex(name)?)?,
        };
        if opts.offloads {
            let sz: libc::c_int = vnet::HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one c_int through the pointer, valid for the call.
            if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &sz as *const libc::c_int) } < 0 {
                return Err(sys::if_err("ioctl(TUNSETVNETHDRSZ)", name, std::io::Error::last_os_error()));
            }
            let feats = libc::TUN_F_CSUM | libc::TUN_F_TSO4;
            // SAFETY: TUNSETOFFLOAD takes the feature bits as the argument value itself.
            if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, feats as libc::c_ulong) } < 0 {
                return Err(sys::if_err("ioctl(TUNSETOFFLOAD)", name, std::io::Error::last_os_error()));
            }
        }
        if let Some(m) = opts.mtu {
            if !(68..=MAX_FRAME - 14).contains(&m) {
                return Err(LinkError::BadSpec(format!(
                    "MTU {m} for tap:{name}: must be 68..={}",
                    MAX_FRAME - 14
                )));
            }
            if sys::if_mtu(name)? != m {
                sys::set_if_mtu(name, m)?;
            }
        }
        sys::set_if_up(name)?;
        TapLink::with_queue(name, opts, fd, claim)
    }

    /// The link on an open, configured queue `fd` of TAP `name`: the MTU the
    /// options or the device give, and our MAC (a function of the name, so
    /// an engine that upgrades this one has the same).
    fn with_queue(name: &str, opts: &LinkOptions, fd: OwnedFd, claim: super::claim::Claim) -> Result<TapLink, LinkError> {
        let mtu = match opts.mtu {
            Some(m) => m,
            None => sys::if_mtu(name)?.min(MAX_FRAME - 14),
        };
        let kernel_mac = sys::if_mac(name)?;
        let mut mac = mac_for(name);
        if mac == kernel_mac {
            mac[5] ^= 1;
        }
        Ok(TapLink {
            fd,
            name: name.to_string(),
            mac,
            mtu,
            rx_buf: vec![0; RX_BUF],
            tx_buf: vec![0; if opts.offloads { vnet::HDR_LEN + TSO_FRAME } else { mtu + 14 }],
            tx_stuck: 0,
            vnet: opts.offloads,
            counters: LinkCounters::default(),
            _claim: claim,
        })
    }

    /// Takes over the queue descriptor and claim of the engine being
    /// upgraded (live upgrade): the same queue of the same device, its
    /// settings (vnet header, offloads, MTU, up) as the old engine left
    /// them; frames the kernel queued meanwhile wait in the device for us.
    /// The MAC is the one the old engine used (a function of the name).
    pub fn adopt(name: &str, opts: &LinkOptions, taken: super::Adopted) -> Result<TapLink, LinkError> {
        let claim = super::claim::adopt(sys::ifindex(name)?, taken.claim);
        TapLink::with_queue(name, opts, taken.socket, claim)
    }

    /// The device's descriptor (readable when the kernel sent a frame).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Writes `tx_buf[..len]`. Ok(true): gone (sent, or lost and counted);
    /// Ok(false): EAGAIN, still ours.
    fn write_frame(&mut self, len: usize) -> Result<bool, LinkError> {
        loop {
            // SAFETY: `tx_buf[..len]` is initialised memory we own (len <= tx_buf.len()).
            let rc = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    self.tx_buf.as_ptr() as *const libc::c_void,
                    len,
                )
            };
            if rc >= 0 {
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += (len - self.hdr_len()) as u64;
                return Ok(true);
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(false),
                Some(libc::EINVAL) | Some(libc::EIO) | Some(libc::ENOBUFS) | Some(libc::ENOMEM) => {
                    self.counters.tx_errors += 1;
                    return Ok(true);
                }
                _ => return Err(sys::if_err("write(tap)", &self.name, err)),
            }
        }
    }

    /// Bytes of vnet header in front of each frame (0 without offloads).
    fn hdr_len(&self) -> usize {
        if self.vnet {
            vnet::HDR_LEN
        } else {
            0
        }
    }

    /// Reads up to `max` frames.
    fn read_frames(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError> {
        let hdr = self.hdr_len();
        let max_len = if self.vnet { RX_BUF - hdr } else { self.mtu + 14 };
        let mut n = 0;
        while n < max {
            // SAFETY: `rx_buf` is RX_BUF writable bytes we own.
            let rc = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.rx_buf.as_mut_ptr() as *mut libc::c_void,
                    self.rx_buf.len(),
                )
            };
            if rc < 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    // A frame too large for the buffer is lost by the kernel.
                    Some(libc::EFAULT) | Some(libc::EINVAL) => {
                        self.counters.rx_oversize += 1;
                        n += 1;
                        continue;
                    }
                    _ => return Err(sys::if_err("read(tap)", &self.name, err)),
                }
            }
            let len = rc as usize;
            n += 1;
            if len <= hdr {
                continue;
            }
            let flen = len - hdr;
            if flen > max_len {
                self.counters.rx_oversize += 1;
                continue;
            }
            let (meta, gso) = if self.vnet {
                vnet::read(&self.rx_buf[..hdr])
            } else {
                (RxMeta::default(), vnet::GSO_NONE)
            };
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += flen as u64;
            if meta.csum != RxCsum::None {
                self.counters.rx_csum_offloaded += 1;
            }
            if gso != vnet::GSO_NONE || flen > self.mtu + 14 {
                self.counters.rx_gro_frames += 1;
            }
            rx(&self.rx_buf[hdr..len], meta);
        }
        Ok(n)
    }

    /// Retries a frame whose write said EAGAIN. Ok(true) when none is left.
    fn retry_stuck(&mut self) -> Result<bool, LinkError> {
        if self.tx_stuck == 0 {
            return Ok(true);
        }
        if self.write_frame(self.tx_stuck)? {
            self.tx_stuck = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Our MAC on TAP `name`: locally administered unicast, `02:` + 5 bytes of
/// the name's FNV-1a hash (stable across runs).
pub fn mac_for(name: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

impl Link for TapLink {
    fn hand_over(&mut self) -> Result<super::HandOver, String> {
        // A frame the device refused (EAGAIN) goes out now or the offer waits.
        if self.tx_stuck > 0 && !self.retry_stuck().map_err(|e| e.to_string())? {
            return Err(format!("busy: TAP {} does not take a frame now; try again", self.name));
        }
        let ifindex = sys::ifindex(&self.name).map_err(|e| e.to_string())?;
        let claim = super::claim::raw_fd(ifindex).ok_or("the device's claim is not held")?;
        Ok(super::HandOver {
            kind: "tap".into(),
            iface: self.name.clone(),
            fds: vec![("link socket", self.fd.as_raw_fd()), ("link claim", claim)],
            rx_idx: 0,
            tx_idx: 0,
            tx_unsent: 0,
            xdp: None,
        })
    }

    fn info(&self) -> LinkInfo {
        LinkInfo {
            kind: "tap".into(),
            name: self.name.clone(),
            mode: "tap".into(),
            mtu: self.mtu,
            mac: self.mac,
            offloads: if self.vnet {
                vec!["vnet_hdr".into(), "tso4".into(), "rx-csum".into()]
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
        if !self.retry_stuck()? {
            self.counters.tx_full += 1;
            return Ok(TxStatus::Full);
        }
        let hdr = self.hdr_len();
        let cap = self.tx_buf.len() - hdr;
        let Some((len, meta)) = fill(&mut self.tx_buf[hdr..]) else {
            return Ok(TxStatus::Idle);
        };
        let plain = meta.gso_size == 0;
        let max = if plain { cap.min(self.mtu + 14) } else { cap };
        if !(14..=max).contains(&len) || (!self.vnet && meta != TxMeta::default()) {
            self.counters.tx_errors += 1;
            return Err(LinkError::io(
                "tap transmit",
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("frame length {len} outside 14..={max} (or offload meta {meta:?} without vnet_hdr)"),
                ),
            ));
        }
        if self.vnet {
            vnet::write(&mut self.tx_buf[..hdr], &meta);
            if !plain {
                self.counters.tx_gso_frames += 1;
            }
        }
        if !self.write_frame(hdr + len)? {
            self.tx_stuck = hdr + len;
        }
        Ok(TxStatus::Queued)
    }

    fn flush(&mut self) -> Result<(), LinkError> {
        self.retry_stuck().map(|_| ())
    }

    fn wait(
        &mut self,
        timeout: Duration,
        also: &[RawFd],
        _futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError> {
        let mut fds = Vec::with_capacity(1 + also.len());
        fds.push(self.fd.as_raw_fd());
        fds.extend_from_slice(also);
        sys::poll_readable(&fds, timeout)
    }

    fn counters(&self) -> LinkCounters {
        self.counters
    }

    fn offloads(&self) -> Offloads {
        if self.vnet {
            Offloads { tso_max: TSO_MAX, rx_csum: true }
        } else {
            Offloads::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mac_is_local_unicast_and_stable() {
        let a = super::mac_for("tap0");
        assert_eq!(a[0], 0x02);
        assert_eq!(a, super::mac_for("tap0"));
        assert_ne!(a, super::mac_for("tap1"));
    }
}
