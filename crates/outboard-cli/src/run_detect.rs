//! What kind of executable `outboard run` is about to start, so it can say so
//! when the socket shim cannot take the program's sockets.
//!
//! The shim is an `LD_PRELOAD` library: it sees a program's socket calls only
//! when the dynamic loader runs (the executable has a `PT_INTERP` program
//! header) and the program makes those calls through libc. Two common kinds
//! of program do neither:
//!
//! - **statically linked** executables (no `PT_INTERP`): no loader runs, so
//!   `LD_PRELOAD` is never read;
//! - **Go** programs: the Go runtime makes socket system calls itself, not
//!   through libc, even when the binary is dynamically linked (cgo).
//!
//! [`detect`] resolves the command as `exec` would (a name without `/` through
//! `PATH`), reads the ELF headers with plain std and classifies the file; a
//! `#!` script is judged by its interpreter (one level). Only 64-bit
//! little-endian ELF is parsed; every offset and size read from the file is
//! bounds-checked and capped, and anything malformed, truncated or unexpected
//! classifies as [`Kind::Unknown`] (say nothing, let exec proceed), never a
//! panic.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What an executable is, as far as the shim is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ELF with a dynamic loader (`PT_INTERP`), not Go: the shim applies.
    Dynamic,
    /// ELF executable without `PT_INTERP`: `LD_PRELOAD` does not apply.
    Static,
    /// A Go program (`.go.buildinfo`, `.gopclntab`, or a `Go` build-id
    /// note), linked either way: its runtime bypasses libc for sockets.
    Go,
    /// Not an ELF file (and not a script whose interpreter is one).
    NotElf,
    /// ELF we do not parse (32-bit, big-endian, not an executable), a
    /// malformed or truncated file, or one that could not be read.
    Unknown,
}

/// What [`detect`] found about a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The file exec would run (after the `PATH` search).
    pub path: PathBuf,
    /// For a `#!` script: the interpreter that was classified instead.
    pub interpreter: Option<PathBuf>,
    pub kind: Kind,
}

impl Detection {
    /// Why the shim cannot take the sockets of `shown` (the command as the
    /// user typed it), or None when there is nothing to say.
    pub fn explain(&self, shown: &str) -> Option<String> {
        let subject = match &self.interpreter {
            Some(i) => format!("{shown} is a script for {}, which", i.display()),
            None => shown.to_string(),
        };
        match self.kind {
            Kind::Go => Some(format!(
                "{subject} is a Go program: its runtime makes socket system calls itself, not \
                 through libc, so the shim cannot take its sockets; they stay with the kernel. \
                 Use the native API (docs/API.md; its C library can be called through cgo) to \
                 put a Go program's connections on the engine"
            )),
            Kind::Static => Some(format!(
                "{subject} is statically linked: LD_PRELOAD does not apply to it (no dynamic \
                 loader runs), so the shim cannot take its sockets; they stay with the kernel. \
                 Link it dynamically against libc, or use the native API (docs/API.md)"
            )),
            Kind::Dynamic | Kind::NotElf | Kind::Unknown => None,
        }
    }
}

/// Resolves `program` as `execvp` does and classifies it; None when it is not
/// found (exec will then fail and say so).
pub fn detect(program: &OsStr) -> Option<Detection> {
    let path = resolve(program)?;
    let file = open_regular(&path)?;
    let mut head = [0u8; 256];
    let n = read_prefix(&file, &mut head);
    let head = &head[..n];
    if head.starts_with(b"#!") {
        // The kernel's rule: the interpreter is the first word after `#!`
        // on the first line (of at most 256 bytes), used as a path as it is.
        let interp = shebang_interpreter(head);
        let (interpreter, kind) = match interp {
            Some(i) => {
                let kind = open_regular(&i).map_or(Kind::Unknown, |f| classify(&f));
                // One level only: an interpreter that is itself a script is
                // not followed.
                (Some(i), kind)
            }
            None => (None, Kind::Unknown),
        };
        return Some(Detection {
            path,
            interpreter,
            kind,
        });
    }
    let kind = classify(&file);
    Some(Detection {
        path,
        interpreter: None,
        kind,
    })
}

/// `path` opened for reading if it is a regular file (a FIFO or a device is
/// not read: opening does not block, and exec refuses them anyway).
fn open_regular(path: &Path) -> Option<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    f.metadata().ok()?.is_file().then_some(f)
}

/// The file `execvp(program)` would run: `program` itself when it contains a
/// `/`, else the first regular file with an execute bit in a `PATH`
/// directory (`/bin:/usr/bin` when `PATH` is unset; an empty entry is the
/// current directory).
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let cand = dir.join(program);
        if let Ok(m) = std::fs::metadata(&cand) {
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Some(cand);
            }
        }
    }
    None
}

/// The interpreter of a `#!` line (`head` starts with `#!`).
fn shebang_interpreter(head: &[u8]) -> Option<PathBuf> {
    let line = &head[2..];
    let line = match line.iter().position(|&b| b == b'\n') {
        Some(i) => &line[..i],
        None => line,
    };
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(word)))
}

/// Reads up to `buf.len()` bytes from the start of `f`; the count read.
fn read_prefix(f: &File, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    n
}

// ---------------------------------------------------------------- ELF

/// Random access to the bytes of a file (or a slice, in tests).
pub trait Bytes {
    fn size(&self) -> u64;
    /// `len` bytes at `off`, or None if they are not all there.
    fn read(&self, off: u64, len: usize) -> Option<Vec<u8>>;
}

impl Bytes for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read(&self, off: u64, len: usize) -> Option<Vec<u8>> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(len)?;
        self.get(start..end).map(<[u8]>::to_vec)
    }
}

impl Bytes for File {
    fn size(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }
    fn read(&self, off: u64, len: usize) -> Option<Vec<u8>> {
        off.checked_add(len as u64)
            .filter(|&end| end <= self.size())?;
        let mut v = vec![0u8; len];
        self.read_exact_at(&mut v, off).ok()?;
        Some(v)
    }
}

/// The most of one table or note we read: real executables need a few KiB.
const MAX_TABLE: u64 = 1 << 20;
/// The most program or section headers we look at.
const MAX_HEADERS: u64 = 8192;

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const PN_XNUM: u16 = 0xffff;
const SHN_XINDEX: u16 = 0xffff;
const DT_NULL: u64 = 0;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_1_PIE: u64 = 0x0800_0000;
/// Go's build-id note: name "Go", type 4.
const NT_GO_BUILD_ID: u32 = 4;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A capped read of `len` bytes at `off`.
fn read_capped(src: &(impl Bytes + ?Sized), off: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_TABLE {
        return None;
    }
    src.read(off, usize::try_from(len).ok()?)
}

struct Phdr {
    kind: u32,
    offset: u64,
    filesz: u64,
}

struct Shdr {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

fn shdr(b: &[u8]) -> Option<Shdr> {
    Some(Shdr {
        name: u32_at(b, 0)?,
        kind: u32_at(b, 4)?,
        offset: u64_at(b, 24)?,
        size: u64_at(b, 32)?,
        link: u32_at(b, 40)?,
        info: u32_at(b, 44)?,
    })
}

/// `n` entries of `entsize` bytes at `off`, each at least `min` bytes.
fn table(
    src: &(impl Bytes + ?Sized),
    off: u64,
    n: u64,
    entsize: u64,
    min: u64,
) -> Option<Vec<Vec<u8>>> {
    if n == 0 {
        return Some(Vec::new());
    }
    if entsize < min || n > MAX_HEADERS {
        return None;
    }
    let bytes = read_capped(src, off, n.checked_mul(entsize)?)?;
    let es = usize::try_from(entsize).ok()?;
    Some(bytes.chunks_exact(es).map(<[u8]>::to_vec).collect())
}

/// Classifies the bytes of an executable. Never panics.
pub fn classify(src: &(impl Bytes + ?Sized)) -> Kind {
    let Some(ident) = src.read(0, 4) else {
        return Kind::NotElf;
    };
    if ident != b"\x7fELF" {
        return Kind::NotElf;
    }
    classify_elf(src).unwrap_or(Kind::Unknown)
}

fn classify_elf(src: &(impl Bytes + ?Sized)) -> Option<Kind> {
    let eh = src.read(0, 64)?;
    // ELFCLASS64, ELFDATA2LSB, EV_CURRENT.
    if eh[4] != 2 || eh[5] != 1 || eh[6] != 1 {
        return None;
    }
    let e_type = u16_at(&eh, 16)?;
    if e_type != ET_EXEC && e_type != ET_DYN {
        return None;
    }
    let phoff = u64_at(&eh, 32)?;
    let shoff = u64_at(&eh, 40)?;
    let phentsize = u64::from(u16_at(&eh, 54)?);
    let mut phnum = u64::from(u16_at(&eh, 56)?);
    let shentsize = u64::from(u16_at(&eh, 58)?);
    let mut shnum = u64::from(u16_at(&eh, 60)?);
    let mut shstrndx = u64::from(u16_at(&eh, 62)?);

    // Section 0 holds the real counts when they do not fit the header.
    let sh0 = if shoff != 0 && shentsize >= 64 {
        src.read(shoff, 64).and_then(|b| shdr(&b))
    } else {
        None
    };
    if phnum == u64::from(PN_XNUM) {
        phnum = u64::from(sh0.as_ref()?.info);
    }
    if shoff != 0 && shnum == 0 {
        shnum = sh0.as_ref().map_or(0, |s| s.size);
    }
    if shstrndx == u64::from(SHN_XINDEX) {
        shstrndx = u64::from(sh0.as_ref()?.link);
    }

    let phdrs: Vec<Phdr> = table(src, phoff, phnum, phentsize, 56)?
        .iter()
        .map(|b| {
            Some(Phdr {
                kind: u32_at(b, 0)?,
                offset: u64_at(b, 8)?,
                filesz: u64_at(b, 32)?,
            })
        })
        .collect::<Option<_>>()?;
    // Section headers are optional (and may be stripped): a bad table means
    // "no sections", not "unknown".
    let shdrs: Vec<Shdr> = if shoff == 0 {
        Vec::new()
    } else {
        table(src, shoff, shnum, shentsize, 64)
            .and_then(|t| t.iter().map(|b| shdr(b)).collect::<Option<_>>())
            .unwrap_or_default()
    };

    if is_go(src, &phdrs, &shdrs, shstrndx) {
        return Some(Kind::Go);
    }
    if phdrs.iter().any(|p| p.kind == PT_INTERP) {
        return Some(Kind::Dynamic);
    }
    if e_type == ET_EXEC {
        return Some(Kind::Static);
    }
    // ET_DYN without a loader: a static PIE (DT_FLAGS_1 has DF_1_PIE), or a
    // shared library that was not meant to be run.
    if phdrs
        .iter()
        .filter(|p| p.kind == PT_DYNAMIC)
        .any(|p| dynamic_is_pie(src, p))
    {
        return Some(Kind::Static);
    }
    None
}

fn dynamic_is_pie(src: &(impl Bytes + ?Sized), p: &Phdr) -> bool {
    let Some(d) = read_capped(src, p.offset, p.filesz) else {
        return false;
    };
    for e in d.chunks_exact(16) {
        let (Some(tag), Some(val)) = (u64_at(e, 0), u64_at(e, 8)) else {
            return false;
        };
        if tag == DT_NULL {
            break;
        }
        if tag == DT_FLAGS_1 && val & DF_1_PIE != 0 {
            return true;
        }
    }
    false
}

fn is_go(src: &(impl Bytes + ?Sized), phdrs: &[Phdr], shdrs: &[Shdr], shstrndx: u64) -> bool {
    // Section names.
    let strtab = usize::try_from(shstrndx)
        .ok()
        .and_then(|i| shdrs.get(i))
        .and_then(|s| read_capped(src, s.offset, s.size));
    if let Some(strtab) = &strtab {
        for s in shdrs {
            let name = usize::try_from(s.name)
                .ok()
                .and_then(|i| strtab.get(i..))
                .map(|rest| &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]);
            if matches!(name, Some(b".go.buildinfo" | b".gopclntab")) {
                return true;
            }
        }
    }
    // Notes, in segments and in sections.
    let notes = phdrs
        .iter()
        .filter(|p| p.kind == PT_NOTE)
        .map(|p| (p.offset, p.filesz))
        .chain(
            shdrs
                .iter()
                .filter(|s| s.kind == SHT_NOTE)
                .map(|s| (s.offset, s.size)),
        );
    for (off, len) in notes {
        if let Some(b) = read_capped(src, off, len) {
            if has_go_note(&b) {
                return true;
            }
        }
    }
    false
}

/// Whether a run of ELF notes holds name "Go", type 4 (Go's build id).
fn has_go_note(b: &[u8]) -> bool {
    let pad4 = |n: usize| n.checked_add(3).map(|v| v & !3);
    let mut off = 0usize;
    while let (Some(namesz), Some(descsz), Some(kind)) =
        (u32_at(b, off), u32_at(b, off + 4), u32_at(b, off + 8))
    {
        let (namesz, descsz) = (namesz as usize, descsz as usize);
        let name_at = off + 12;
        let Some(name) = name_at
            .checked_add(namesz)
            .and_then(|end| b.get(name_at..end))
        else {
            return false;
        };
        let name = name.strip_suffix(b"\0").unwrap_or(name);
        if name == b"Go" && kind == NT_GO_BUILD_ID {
            return true;
        }
        let next = pad4(namesz)
            .and_then(|n| name_at.checked_add(n))
            .and_then(|d| pad4(descsz).and_then(|n| d.checked_add(n)));
        match next {
            Some(n) if n > off => off = n,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic 64-bit little-endian ELF: header, program headers of the
    /// given types (with `PT_INTERP` pointing at a path, `PT_NOTE` at
    /// `note`), then section headers named `sections` (plus the null section
    /// and `.shstrtab`).
    struct Elf {
        e_type: u16,
        phdrs: Vec<u32>,
        sections: Vec<&'static str>,
        note: Vec<u8>,
        dynamic: Vec<(u64, u64)>,
    }

    impl Elf {
        fn new(e_type: u16) -> Elf {
            Elf {
                e_type,
                phdrs: vec![1],
                sections: vec![".text"],
                note: Vec::new(),
                dynamic: Vec::new(),
            }
        }

        fn build(&self) -> Vec<u8> {
            let interp = b"/lib64/ld-linux-x86-64.so.2\0".to_vec();
            let dynamic: Vec<u8> = self
                .dynamic
                .iter()
                .chain(std::iter::once(&(DT_NULL, 0)))
                .flat_map(|(t, v)| t.to_le_bytes().into_iter().chain(v.to_le_bytes()))
                .collect();
            let mut strtab = vec![0u8];
            let mut names = Vec::new();
            for s in self.sections.iter().chain(std::iter::once(&".shstrtab")) {
                names.push(strtab.len() as u32);
                strtab.extend_from_slice(s.as_bytes());
                strtab.push(0);
            }
            let phoff = 64u64;
            let data = phoff + 56 * self.phdrs.len() as u64;
            let interp_at = data;
            let note_at = interp_at + interp.len() as u64;
            let dyn_at = note_at + self.note.len() as u64;
            let str_at = dyn_at + dynamic.len() as u64;
            let shoff = (str_at + strtab.len() as u64 + 7) & !7;
            let shnum = self.sections.len() + 2;

            let mut b = vec![0u8; 64];
            b[..4].copy_from_slice(b"\x7fELF");
            b[4] = 2;
            b[5] = 1;
            b[6] = 1;
            b[16..18].copy_from_slice(&self.e_type.to_le_bytes());
            b[18..20].copy_from_slice(&62u16.to_le_bytes());
            b[32..40].copy_from_slice(&phoff.to_le_bytes());
            b[40..48].copy_from_slice(&shoff.to_le_bytes());
            b[52..54].copy_from_slice(&64u16.to_le_bytes());
            b[54..56].copy_from_slice(&56u16.to_le_bytes());
            b[56..58].copy_from_slice(&(self.phdrs.len() as u16).to_le_bytes());
            b[58..60].copy_from_slice(&64u16.to_le_bytes());
            b[60..62].copy_from_slice(&(shnum as u16).to_le_bytes());
            b[62..64].copy_from_slice(&((shnum - 1) as u16).to_le_bytes());
            for &t in &self.phdrs {
                let (off, size) = match t {
                    PT_INTERP => (interp_at, interp.len() as u64),
                    PT_NOTE => (note_at, self.note.len() as u64),
                    PT_DYNAMIC => (dyn_at, dynamic.len() as u64),
                    _ => (0, 0),
                };
                let mut p = vec![0u8; 56];
                p[..4].copy_from_slice(&t.to_le_bytes());
                p[8..16].copy_from_slice(&off.to_le_bytes());
                p[32..40].copy_from_slice(&size.to_le_bytes());
                b.extend(p);
            }
            b.extend(&interp);
            b.extend(&self.note);
            b.extend(&dynamic);
            b.extend(&strtab);
            b.resize(shoff as usize, 0);
            b.extend([0u8; 64]); // the null section
            for (i, name) in names.iter().enumerate() {
                let mut s = vec![0u8; 64];
                s[..4].copy_from_slice(&name.to_le_bytes());
                let last = i == names.len() - 1;
                s[4..8].copy_from_slice(&(if last { 3u32 } else { 1 }).to_le_bytes());
                if last {
                    s[24..32].copy_from_slice(&str_at.to_le_bytes());
                    s[32..40].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
                }
                b.extend(s);
            }
            b
        }
    }

    fn go_note() -> Vec<u8> {
        let mut n = Vec::new();
        n.extend(3u32.to_le_bytes());
        n.extend(8u32.to_le_bytes());
        n.extend(NT_GO_BUILD_ID.to_le_bytes());
        n.extend(b"Go\0\0");
        n.extend(b"buildid!");
        n
    }

    #[test]
    fn dynamic_static_and_go() {
        let mut e = Elf::new(ET_DYN);
        e.phdrs = vec![6, PT_INTERP, 1, PT_DYNAMIC];
        assert_eq!(classify(&e.build()[..]), Kind::Dynamic);
        e.sections.push(".go.buildinfo");
        assert_eq!(classify(&e.build()[..]), Kind::Go, "cgo: dynamic yet Go");

        let mut s = Elf::new(ET_EXEC);
        assert_eq!(classify(&s.build()[..]), Kind::Static);
        s.sections.push(".gopclntab");
        assert_eq!(classify(&s.build()[..]), Kind::Go);

        let mut n = Elf::new(ET_EXEC);
        n.sections = vec![];
        n.phdrs = vec![1, PT_NOTE];
        n.note = go_note();
        assert_eq!(classify(&n.build()[..]), Kind::Go, "Go build-id note");
        // Another note of the same type, other name: not Go.
        n.note[12..14].copy_from_slice(b"GN");
        assert_eq!(classify(&n.build()[..]), Kind::Static);
    }

    #[test]
    fn static_pie_and_plain_shared_objects() {
        let mut e = Elf::new(ET_DYN);
        e.phdrs = vec![1, PT_DYNAMIC];
        assert_eq!(
            classify(&e.build()[..]),
            Kind::Unknown,
            "a library without a loader"
        );
        e.dynamic = vec![(DT_FLAGS_1, DF_1_PIE)];
        assert_eq!(classify(&e.build()[..]), Kind::Static, "static-pie");
    }

    #[test]
    fn other_formats() {
        assert_eq!(classify(&b""[..]), Kind::NotElf);
        assert_eq!(classify(&b"#!/bin/sh\n"[..]), Kind::NotElf);
        assert_eq!(classify(&b"\x7fELF"[..]), Kind::Unknown, "truncated header");
        let mut e = Elf::new(ET_EXEC).build();
        e[4] = 1; // 32-bit
        assert_eq!(classify(&e[..]), Kind::Unknown);
        let mut e = Elf::new(ET_EXEC).build();
        e[16] = 1; // ET_REL
        assert_eq!(classify(&e[..]), Kind::Unknown);
    }

    #[test]
    fn truncated_and_garbage_never_panic() {
        let mut e = Elf::new(ET_DYN);
        e.phdrs = vec![6, PT_INTERP, PT_NOTE, PT_DYNAMIC, 1];
        e.sections.push(".go.buildinfo");
        e.note = go_note();
        e.dynamic = vec![(DT_FLAGS_1, DF_1_PIE)];
        let full = e.build();
        for n in 0..full.len() {
            let _ = classify(&full[..n]);
        }
        // Every byte of the headers set to extremes, one at a time.
        for i in 0..full.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut b = full.clone();
                b[i] = v;
                let _ = classify(&b[..]);
            }
        }
        // A simple deterministic generator for random headers after the magic.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut b = b"\x7fELF\x02\x01\x01".to_vec();
            for _ in 0..300 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push(x as u8);
            }
            let _ = classify(&b[..]);
        }
        // Huge counts and offsets.
        let mut b = full.clone();
        b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(classify(&b[..]), Kind::Unknown);
        let mut b = full.clone();
        b[56..58].copy_from_slice(&PN_XNUM.to_le_bytes());
        let _ = classify(&b[..]);
    }

    #[test]
    fn notes_with_bad_sizes_end_quietly() {
        let mut n = go_note();
        n[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(!has_go_note(&n));
        let mut n = vec![0u8; 12];
        n.extend(go_note());
        assert!(has_go_note(&n), "an empty note, then Go's");
        assert!(!has_go_note(&[0u8; 11]));
    }

    #[test]
    fn truncations_of_a_real_binary_never_panic() {
        let exe = resolve(OsStr::new("true")).expect("true on PATH");
        let full = std::fs::read(&exe).unwrap();
        assert_eq!(classify(&full[..]), Kind::Dynamic, "{}", exe.display());
        let step = (full.len() / 3000).max(1);
        for n in (0..full.len()).step_by(step).chain(0..512.min(full.len())) {
            let k = classify(&full[..n]);
            assert!(k != Kind::Go, "a truncation of {} is not Go", exe.display());
        }
    }

    #[test]
    fn shebang_lines() {
        assert_eq!(
            shebang_interpreter(b"#!/bin/sh -e\n"),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            shebang_interpreter(b"#! \t/usr/bin/env python3"),
            Some(PathBuf::from("/usr/bin/env"))
        );
        assert_eq!(shebang_interpreter(b"#!\n/bin/sh"), None);
    }

    #[test]
    fn detect_follows_path_and_scripts() {
        let d = detect(OsStr::new("true")).expect("true is found");
        assert_eq!(d.kind, Kind::Dynamic);
        assert!(d.explain("true").is_none());
        assert!(detect(OsStr::new("no-such-program-xyz-12345")).is_none());
        let dir = std::env::temp_dir().join(format!("ob-detect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        let d = detect(script.as_os_str()).unwrap();
        assert_eq!(d.interpreter, Some(PathBuf::from("/bin/sh")));
        assert_eq!(d.kind, Kind::Dynamic);
        let text = dir.join("t.txt");
        std::fs::write(&text, "hello").unwrap();
        assert_eq!(detect(text.as_os_str()).unwrap().kind, Kind::NotElf);
        // A FIFO or a directory is not read (opening a FIFO would block).
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) of a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o755) }, 0);
        assert!(detect(fifo.as_os_str()).is_none());
        assert!(detect(dir.as_os_str()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn explanations_name_the_program() {
        let d = Detection {
            path: "/x/server".into(),
            interpreter: None,
            kind: Kind::Go,
        };
        let m = d.explain("./server").unwrap();
        assert!(m.starts_with("./server is a Go program"), "{m}");
        let d = Detection {
            path: "/x/s".into(),
            interpreter: Some("/x/busybox".into()),
            kind: Kind::Static,
        };
        let m = d.explain("./s").unwrap();
        assert!(
            m.starts_with("./s is a script for /x/busybox, which is statically linked"),
            "{m}"
        );
        assert!(m.contains("LD_PRELOAD does not apply"), "{m}");
    }
}
