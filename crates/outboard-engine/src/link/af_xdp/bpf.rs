//! The eBPF side of the AF_XDP link, with nothing but the `bpf(2)` syscall:
//! an XSKMAP, a hand-assembled XDP program that redirects only our frames,
//! and a BPF link that attaches it (and detaches it when its fd closes).
//!
//! The program, in pseudo-C (`ADDR` is our IPv4 address in network order):
//!
//! ```text
//! if data + 14 > data_end                       -> XDP_PASS
//! switch ethertype:
//!   0x0806 ARP:  if data + 42 > data_end         -> XDP_PASS
//!                if arp.target_proto != ADDR     -> XDP_PASS
//!   0x0800 IPv4: if data + 34 > data_end         -> XDP_PASS
//!                if ip.daddr != ADDR             -> XDP_PASS
//!   0x86dd IPv6: if !IPV6                        -> XDP_PASS
//!   other                                        -> XDP_PASS
//! return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
//! ```
//!
//! With IPv6 on (`IPV6`), every IPv6 frame goes to the engine: it owns the
//! interface's link-local address, its neighbour discovery and whatever
//! addresses it forms, so there is nothing IPv6 left for the kernel there.
//! VLAN-tagged frames go to the kernel (not supported yet).

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// `XDP_FLAGS_SKB_MODE` (generic) and `XDP_FLAGS_DRV_MODE` (native), linux/if_link.h.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `BPF_F_XDP_HAS_FRAGS` (prog_flags, linux/bpf.h): the program accepts
/// multi-buffer (fragmented) frames.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// XDP verdicts.
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

// struct xdp_md field offsets.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// `union bpf_attr` for BPF_MAP_CREATE (prefix the kernel needs; it zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for BPF_MAP_UPDATE_ELEM.
#[repr(C)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

const _: () = assert!(std::mem::size_of::<MapCreateAttr>() == 44);
const _: () = assert!(std::mem::size_of::<MapUpdateAttr>() == 32);
const _: () = assert!(std::mem::size_of::<ProgLoadAttr>() == 72);
const _: () = assert!(std::mem::size_of::<LinkCreateAttr>() == 16);
const _: () = assert!(std::mem::size_of::<TestRunAttr>() == 40);

/// Calls `bpf(cmd, attr, size_of::<A>())`; returns the result (an fd for the creating commands).
fn sys_bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, `#[repr(C)]` prefix of `union bpf_attr` for `cmd`, and we pass its
    // exact size; the kernel zero-fills the rest and writes back at most that many bytes. Any
    // pointers inside it point to buffers the caller keeps alive for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut libc::c_void,
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf() call that creates a new fd; nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, s) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = s;
    }
    n
}

/// Creates an XSKMAP with `max_entries` slots (key: queue index, value: XSK fd).
pub fn create_xskmap(max_entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_name: name16("outboard_xsks"),
        ..Default::default()
    };
    sys_bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// Puts the XSK `xsk_fd` in `map` at `queue` (BPF_ANY).
pub fn xskmap_set(map: &OwnedFd, queue: u32, xsk_fd: RawFd) -> io::Result<()> {
    let key = queue;
    let value = xsk_fd as u32;
    let mut attr = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Why a program load failed: the errno and the verifier's log.
#[derive(Debug)]
pub struct LoadError {
    pub err: io::Error,
    pub log: String,
}

/// Loads `insns` as an XDP program. On failure retries once with verifier
/// log level 1 so the error carries the verifier's explanation.
pub fn load_xdp(insns: &[u64]) -> Result<OwnedFd, LoadError> {
    load_xdp_with(insns, 0)
}

/// [`load_xdp`] with `prog_flags` (e.g. [`BPF_F_XDP_HAS_FRAGS`]).
pub fn load_xdp_with(insns: &[u64], prog_flags: u32) -> Result<OwnedFd, LoadError> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let try_load = |level: u32, log: &mut [u8]| {
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: level,
            log_size: if level > 0 { log.len() as u32 } else { 0 },
            log_buf: if level > 0 {
                log.as_mut_ptr() as u64
            } else {
                0
            },
            prog_name: name16("outboard_xdp"),
            expected_attach_type: BPF_XDP,
            prog_flags,
            ..Default::default()
        };
        sys_bpf(BPF_PROG_LOAD, &mut attr).map(owned)
    };
    match try_load(0, &mut log) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            // Again with the verifier's log, to explain the refusal.
            let err = match try_load(1, &mut log) {
                Ok(fd) => return Ok(fd),
                Err(e) => e,
            };
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            // The verifier's verdict is at the end of its log.
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(12)..].join("\n");
            // Report the first failure's errno unless the retry found something else.
            let err = if err.raw_os_error() == first.raw_os_error() {
                first
            } else {
                err
            };
            Err(LoadError { err, log: tail })
        }
    }
}

/// Attaches `prog` to `ifindex` with BPF_LINK_CREATE in the given mode; the
/// program stays attached while the returned link fd is open.
pub fn attach_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    sys_bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}

/// Runs `prog` once on `frame` (BPF_PROG_TEST_RUN) and returns its verdict.
pub fn test_run(prog: &OwnedFd, frame: &[u8]) -> io::Result<u32> {
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat: 1,
        ..Default::default()
    };
    sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(attr.retval)
}

// ---- a tiny assembler --------------------------------------------------------

// Instruction classes and codes (linux/bpf_common.h, linux/bpf.h).
const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_MEM_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const MOV64_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const ADD64_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const JGT_X: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
const JEQ32_K: u8 = 0x16; // BPF_JMP32 | BPF_JEQ | BPF_K
const JNE32_K: u8 = 0x56; // BPF_JMP32 | BPF_JNE | BPF_K
const JA: u8 = 0x05; // BPF_JMP | BPF_JA
const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW

/// `struct bpf_insn` as a little-endian u64: code, dst:4 | src:4, off, imm.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64
        | ((dst & 0xf) as u64) << 8
        | ((src & 0xf) as u64) << 12
        | (off as u16 as u64) << 16
        | (imm as u32 as u64) << 32
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Arp,
    Redirect,
    Pass,
}

struct Asm {
    code: Vec<u64>,
    labels: Vec<(Label, usize)>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            code: Vec::new(),
            labels: Vec::new(),
            fixups: Vec::new(),
        }
    }
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.code.push(insn(code, dst, src, off, imm));
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.code.len(), to));
        self.op(code, dst, src, 0, imm);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }
    fn finish(mut self) -> Vec<u64> {
        for (at, to) in std::mem::take(&mut self.fixups) {
            // Every label used is defined below; offsets are relative to the next instruction.
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map_or(at + 1, |&(_, pos)| pos);
            let off = target as i64 - at as i64 - 1;
            self.code[at] = (self.code[at] & !(0xffff << 16)) | ((off as i16 as u16 as u64) << 16);
        }
        self.code
    }
}

/// The XDP program: redirect ARP for `addr` and IPv4 to `addr` to the XSK in
/// `map_fd` at `ctx->rx_queue_index`; pass everything else to the kernel.
pub fn program(map_fd: RawFd, addr: Ipv4Addr, ipv6: bool) -> Vec<u64> {
    // Loaded as a u32 from packet memory (little-endian host), the address's
    // network-order bytes read as this value; compared with 32-bit jumps so
    // the immediate is not sign-extended.
    let want = u32::from_le_bytes(addr.octets()) as i32;
    let mut a = Asm::new();
    a.op(MOV64_X, 6, 1, 0, 0); // r6 = ctx
    a.op(LDX_MEM_W, 2, 1, MD_DATA, 0); // r2 = ctx->data
    a.op(LDX_MEM_W, 3, 1, MD_DATA_END, 0); // r3 = ctx->data_end
    a.op(MOV64_X, 4, 2, 0, 0); // r4 = data + 14
    a.op(ADD64_K, 4, 0, 0, 14);
    a.jump(JGT_X, 4, 3, 0, Label::Pass); // if r4 > data_end: pass
    a.op(LDX_MEM_H, 5, 2, 12, 0); // r5 = ethertype (as read little-endian)
    a.jump(JEQ32_K, 5, 0, 0x0608, Label::Arp); // 08 06
    if ipv6 {
        a.jump(JEQ32_K, 5, 0, 0xdd86, Label::Redirect); // 86 dd
    }
    a.jump(JNE32_K, 5, 0, 0x0008, Label::Pass); // 08 00, else pass
                                                // IPv4: daddr at 14 + 16.
    a.op(MOV64_X, 4, 2, 0, 0);
    a.op(ADD64_K, 4, 0, 0, 34);
    a.jump(JGT_X, 4, 3, 0, Label::Pass);
    a.op(LDX_MEM_W, 5, 2, 30, 0);
    a.jump(JNE32_K, 5, 0, want, Label::Pass);
    a.jump(JA, 0, 0, 0, Label::Redirect);
    // ARP: target protocol address at 14 + 24.
    a.label(Label::Arp);
    a.op(MOV64_X, 4, 2, 0, 0);
    a.op(ADD64_K, 4, 0, 0, 42);
    a.jump(JGT_X, 4, 3, 0, Label::Pass);
    a.op(LDX_MEM_W, 5, 2, 38, 0);
    a.jump(JNE32_K, 5, 0, want, Label::Pass);
    a.label(Label::Redirect);
    a.op(LDX_MEM_W, 2, 6, MD_RX_QUEUE_INDEX, 0); // r2 = ctx->rx_queue_index
    a.op(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map_fd); // r1 = &xsks
    a.op(0, 0, 0, 0, 0);
    a.op(MOV64_K, 3, 0, 0, XDP_PASS as i32); // r3 = fallback verdict
    a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.op(EXIT, 0, 0, 0, 0);
    a.label(Label::Pass);
    a.op(MOV64_K, 0, 0, 0, XDP_PASS as i32);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_headers() {
        // r6 = r1: code 0xbf, dst 6, src 1.
        assert_eq!(
            insn(MOV64_X, 6, 1, 0, 0).to_le_bytes(),
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0]
        );
        // r0 = 2; exit.
        assert_eq!(
            insn(MOV64_K, 0, 0, 0, 2).to_le_bytes(),
            [0xb7, 0, 0, 0, 2, 0, 0, 0]
        );
        // Negative offsets and immediates keep their two's complement bits.
        assert_eq!(
            insn(JA, 0, 0, -1, -2).to_le_bytes(),
            [0x05, 0, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let p = program(7, Ipv4Addr::new(10, 202, 0, 2), true);
        let off = |i: usize| (p[i] >> 16) as u16 as i16 as i64;
        let code = |i: usize| p[i] as u8;
        // Every jump (not call/exit) lands inside the program, and every jump to
        // "pass" lands on `r0 = XDP_PASS`.
        let pass = p.len() - 2;
        assert_eq!(code(pass), MOV64_K);
        for i in 0..p.len() {
            let c = code(i);
            if c & 0x07 == 0x05 || c & 0x07 == 0x06 {
                if c == CALL || c == EXIT {
                    continue;
                }
                let t = i as i64 + 1 + off(i);
                assert!(t > i as i64 && (t as usize) < p.len(), "jump at {i} to {t}");
            }
        }
        assert_eq!(code(5), JGT_X);
        assert_eq!(5 + 1 + off(5), pass as i64);
        // The map load carries the fd and the pseudo-map marker.
        let ld = p.iter().position(|&x| x as u8 == LD_IMM64).unwrap_or(0);
        assert_eq!((p[ld] >> 32) as i32, 7);
        assert_eq!((p[ld] >> 12) & 0xf, BPF_PSEUDO_MAP_FD as u64);
    }
}
