//! How `bench cost` counts: the CPU's own counters through `perf_event_open`
//! where the machine lends them, else valgrind's callgrind (instructions only,
//! counted by emulation: the same total for the same binary and input,
//! whatever else the machine runs).
//!
//! Hardware counters: one instructions and one cycles counter for each
//! measured phase, user space only, opened disabled on this thread and
//! enabled for exactly the calls being measured (the ioctl pair costs a few
//! hundred instructions in the kernel, which `exclude_kernel` leaves out, and
//! a handful in user space per call, against thousands per phase).
//!
//! Callgrind: the parent re-runs this program as `outboard bench cost --phase
//! STACK:PHASE` under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=FUNCTION`, where FUNCTION is the unmangled wrapper that
//! the measured calls (and only they) go through, and reads the collected
//! total from callgrind's output file.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

/// `struct perf_event_attr` as of its first version (`PERF_ATTR_SIZE_VER0`,
/// 64 bytes): every later field left out reads as zero to the kernel.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0 disabled, bit 5 exclude_kernel, bit 6 exclude_hv.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
/// `_IO('$', 0)`, `_IO('$', 1)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// One user-space hardware counter on the calling thread.
struct Counter {
    fd: OwnedFd,
}

impl Counter {
    fn open(config: u64) -> Result<Counter, String> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ..PerfEventAttr::default()
        };
        // SAFETY: the attribute struct outlives the call and its size field
        // says how much of it the kernel may read; pid 0, cpu -1: this thread
        // on any CPU; no group, no flags.
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, 0, -1, -1, 0)
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        // SAFETY: the kernel just returned this descriptor to us alone.
        Ok(Counter { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) } })
    }

    fn ioctl(&self, request: libc::c_ulong) {
        // SAFETY: an argument-less perf ioctl on a descriptor we own.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), request, 0) };
    }

    fn read(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64 we own.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v
        } else {
            0
        }
    }
}

/// Instructions and cycles of one measured phase, summed over its calls.
pub struct PhaseCounters {
    instructions: Counter,
    cycles: Counter,
}

impl PhaseCounters {
    /// Opens both counters, or says why the machine lends none (a VM without
    /// a virtual PMU answers ENOENT or EOPNOTSUPP; `perf_event_paranoid` above
    /// 2 answers EACCES).
    pub fn open() -> Result<PhaseCounters, String> {
        let instructions =
            Counter::open(PERF_COUNT_HW_INSTRUCTIONS).map_err(|e| format!("perf_event_open(instructions): {e}"))?;
        let cycles = Counter::open(PERF_COUNT_HW_CPU_CYCLES).map_err(|e| format!("perf_event_open(cycles): {e}"))?;
        Ok(PhaseCounters { instructions, cycles })
    }

    /// Runs `f` with both counters counting.
    #[inline(always)]
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> R {
        self.instructions.ioctl(PERF_EVENT_IOC_ENABLE);
        self.cycles.ioctl(PERF_EVENT_IOC_ENABLE);
        let r = f();
        self.cycles.ioctl(PERF_EVENT_IOC_DISABLE);
        self.instructions.ioctl(PERF_EVENT_IOC_DISABLE);
        r
    }

    /// (instructions, cycles) counted so far.
    pub fn totals(&self) -> (u64, u64) {
        (self.instructions.read(), self.cycles.read())
    }
}

/// Whether `valgrind` runs here.
pub fn valgrind_available() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Runs `exe args…` under callgrind collecting only inside `function`, and
/// returns the instructions it counted there and what the program printed.
pub fn callgrind(exe: &Path, args: &[String], function: &str, out: &Path) -> Result<(u64, String), String> {
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect={function}"))
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--quiet")
        .arg(exe)
        .args(args)
        .env("GLIBC_TUNABLES", tunables())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting valgrind: {e}"))?;
    if !output.status.success() {
        let _ = fs::remove_file(out);
        return Err(format!("valgrind --tool=callgrind {} {}: {}", exe.display(), args.join(" "), output.status));
    }
    let text = fs::read_to_string(out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = fs::remove_file(out);
    let ir = collected_instructions(&text).ok_or_else(|| format!("no totals in callgrind's output {}", out.display()))?;
    Ok((ir, String::from_utf8_lossy(&output.stdout).into_owned()))
}

/// The caller's glibc tunables plus one that keeps `memcpy` off `rep movsb`:
/// callgrind counts each byte a `rep movsb` moves as one instruction (the CPU
/// retires it as one), which would charge both stacks about one instruction
/// per byte copied out to the application. With the threshold out of reach,
/// glibc copies with its vector loop, whose instructions both count alike.
fn tunables() -> String {
    const REP_MOVSB_OFF: &str = "glibc.cpu.x86_rep_movsb_threshold=1000000000";
    match std::env::var("GLIBC_TUNABLES") {
        Ok(t) if !t.is_empty() => format!("{t}:{REP_MOVSB_OFF}"),
        _ => REP_MOVSB_OFF.to_string(),
    }
}

/// The instruction total of a callgrind output file: its `summary:` line
/// (or `totals:`), whose first number is Ir, the only event collected.
fn collected_instructions(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_totals_are_read_from_summary_or_totals() {
        let out = "# callgrind format\nversion: 1\nevents: Ir\nfn=(1) f\n3 100\nsummary: 123456\n";
        assert_eq!(collected_instructions(out), Some(123_456));
        assert_eq!(collected_instructions("events: Ir\ntotals: 77 3\n"), Some(77));
        assert_eq!(collected_instructions("events: Ir\n"), None);
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64, "PERF_ATTR_SIZE_VER0");
    }
}
