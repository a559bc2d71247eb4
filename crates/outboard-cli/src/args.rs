//! Value parsers for command-line flags: sizes like `64MiB`, probabilities like `1%` or `0.01`,
//! and the ranges that work.
//!
//! Every bounded flag goes through one helper per kind of bound (`size_in`,
//! `probability_upto`, `number_in`, `rate_in`, `count_in`), so every refusal reads the
//! same: clap prints `invalid value '0' for '--memory-cap <MEMORY_CAP>': must be between
//! 1 MiB and 1 TiB` and exits 2, before anything starts. The TOML config goes through
//! the same helpers (`in_config`). The named parsers below (`loss`, `delay_ms`, ...) are
//! the ranges each kind of setting takes, shared by every subcommand that has it.

/// Parses a byte count: a plain number or one with a binary (KiB, MiB, GiB) or
/// decimal (K, M, G) suffix, case-insensitive.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} is not a size (examples: 4096, 64KiB, 16MiB, 1GiB)"));
    }
    let n: u64 = num.parse().map_err(|_| format!("{s:?}: number too large"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, K, M, G)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("{s:?}: size too large"))
}

/// Parses a probability: `0.01` or `1%`, in [0, 1].
pub fn parse_probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (v, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    let x: f64 = v.parse().map_err(|_| format!("{s:?} is not a probability (examples: 0.01, 1%)"))?;
    let p = x / scale;
    if !(0.0..=1.0).contains(&p) || p.is_nan() {
        return Err(format!("{s:?} is outside 0..1 (0%..100%)"));
    }
    Ok(p)
}

/// Parses a non-negative finite number (milliseconds, Mbit/s).
pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    let x: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !x.is_finite() || x < 0.0 {
        return Err(format!("{s:?} must be a finite number >= 0"));
    }
    Ok(x)
}


use outboard_engine::engine::limits;
use std::fmt::Display;
use std::str::FromStr;

/// A value parser clap takes (`#[arg(value_parser = ...)]`).
pub trait ValueParser<T>: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {}
impl<T, F: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static> ValueParser<T> for F {}

/// The one wording of a refusal: `must be between LO and HI` (`at least LO` when unbounded above).
fn range_message(lo: impl Display, hi: Option<impl Display>) -> String {
    match hi {
        Some(hi) => format!("must be between {lo} and {hi}"),
        None => format!("must be at least {lo}"),
    }
}

/// `4096` as `4 KiB`, `1073741824` as `1 GiB`; other numbers as bytes.
pub fn show_size(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} B")
}

/// A size (see `parse_size`) in `lo..=hi` (`hi` = `u64::MAX`: no upper bound).
pub fn size_in(lo: u64, hi: u64) -> impl ValueParser<u64> {
    move |s: &str| {
        let n = parse_size(s)?;
        if (lo..=hi).contains(&n) {
            Ok(n)
        } else {
            Err(range_message(show_size(lo), (hi != u64::MAX).then(|| show_size(hi))))
        }
    }
}

/// A probability (see `parse_probability`) in `0..=hi`.
pub fn probability_upto(hi: f64) -> impl ValueParser<f64> {
    move |s: &str| {
        let p = parse_probability(s).map_err(|_| {
            format!("{s:?} is not a probability (examples: 0.01, 1%): {}", range_message("0%", Some(percent(hi))))
        })?;
        if p <= hi {
            Ok(p)
        } else {
            Err(range_message("0%", Some(percent(hi))))
        }
    }
}

fn percent(p: f64) -> String {
    format!("{}%", (p * 1e6).round() / 1e4)
}

/// A finite number in `lo..=hi`, shown with its unit (`ms`, `s`).
pub fn number_in(lo: f64, hi: f64, unit: &'static str) -> impl ValueParser<f64> {
    move |s: &str| {
        let x: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
        if x.is_finite() && (lo..=hi).contains(&x) {
            Ok(x)
        } else {
            Err(range_message(lo, Some(format!("{hi} {unit}"))))
        }
    }
}

/// A rate: 0 (unlimited) or a finite number in `lo..=hi`.
pub fn rate_in(lo: f64, hi: f64, unit: &'static str) -> impl ValueParser<f64> {
    move |s: &str| {
        let x: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
        if x == 0.0 || (x.is_finite() && (lo..=hi).contains(&x)) {
            Ok(x)
        } else {
            Err(format!("must be 0 (unlimited) or between {lo} and {hi} {unit}"))
        }
    }
}

/// A whole number in `lo..=hi` (`hi` = the type's largest: no upper bound).
pub fn count_in<T>(lo: T, hi: T, max: T) -> impl ValueParser<T>
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |s: &str| {
        let n: T = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number"))?;
        if n >= lo && n <= hi {
            Ok(n)
        } else {
            Err(range_message(lo, (hi != max).then_some(hi)))
        }
    }
}

/// Checks a value with `parser` but keeps the text (for flags passed on to child processes).
pub fn keep_text<T>(parser: impl ValueParser<T>) -> impl ValueParser<String> {
    move |s: &str| parser(s).map(|_| s.to_string())
}

/// A TOML key's value through a flag's parser: `KEY "VALUE": must be between ...`.
pub fn in_config<T>(key: &str, raw: &str, parser: impl Fn(&str) -> Result<T, String>) -> Result<T, String> {
    parser(raw).map_err(|e| format!("{key} {raw:?}: {e}"))
}

/// Frames lost plus frames corrupted (dropped by their checksums) together at most `limits::MAX_LOSS`.
pub fn check_loss(loss: f64, corrupt: f64) -> Result<(), String> {
    if loss + corrupt <= limits::MAX_LOSS {
        Ok(())
    } else {
        Err(format!(
            "--loss {} with --corrupt {}: lost plus corrupted frames {}",
            percent(loss),
            percent(corrupt),
            range_message("0%", Some(percent(limits::MAX_LOSS)))
        ))
    }
}

// ---- The ranges each kind of setting takes (README: "The `outboard` command").

/// Seconds of a run (`--run-for-s`, `--timeout-s`, `--time-limit-s`): 1 ms to one year.
pub const MAX_RUN_S: f64 = 365.0 * 86_400.0;
/// Seconds of a benchmark case: 1 ms to an hour.
pub const MAX_BENCH_S: f64 = 3600.0;
/// Link rates (Mbit/s): 0 = unlimited, else 0.1 to 100 000 (100 Gbit/s).
pub const MIN_RATE_MBIT: f64 = 0.1;
pub const MAX_RATE_MBIT: f64 = 100_000.0;
/// A link queue holds at least a jumbo frame and at most 1 GiB.
pub const MIN_QUEUE: u64 = 16 << 10;
pub const MAX_QUEUE: u64 = 1 << 30;
/// Counts of round trips: at most 10^9.
pub const MAX_COUNT: u64 = 1_000_000_000;
/// The lab's veths (what `outboard-lab` checks): 68 (IPv4's minimum) to 9000.
pub const MIN_LAB_MTU: u32 = 68;
/// `sim messages --count`: at most 10^6 (the run keeps a few bytes per message).
pub const MAX_MESSAGES: u64 = 1_000_000;
/// `sim messages --size`: 8 B (each message carries its index) to 1 MiB
/// (the message protocols' default largest message).
pub const MIN_MESSAGE: u64 = 8;
pub const MAX_MESSAGE: u64 = 1 << 20;
/// `sim messages --outstanding`: at most the endpoint's default outstanding calls.
pub const MAX_OUTSTANDING: usize = 4096;

/// `--loss`, `--corrupt`: 0% to 25% (`limits::MAX_LOSS`, also their sum: `check_loss`).
pub fn loss() -> impl ValueParser<f64> {
    probability_upto(limits::MAX_LOSS)
}
/// `--duplicate`, `--reorder`: 0% to 100% (a transfer finishes at 100% of either).
pub fn probability() -> impl ValueParser<f64> {
    probability_upto(1.0)
}
/// `--delay-ms`, `--jitter-ms`, `--reorder-delay-ms`: 0 to 1000 ms.
pub fn delay_ms() -> impl ValueParser<f64> {
    number_in(0.0, limits::MAX_DELAY_MS, "ms")
}
/// `--bandwidth-mbit`, `--rate-mbit`.
pub fn rate_mbit() -> impl ValueParser<f64> {
    rate_in(MIN_RATE_MBIT, MAX_RATE_MBIT, "Mbit/s")
}
/// `--queue-bytes`.
pub fn queue_bytes() -> impl ValueParser<u64> {
    size_in(MIN_QUEUE, MAX_QUEUE)
}
/// `--send-buffer`, `--recv-buffer`: 4 KiB to 1 GiB.
pub fn tcp_buffer() -> impl ValueParser<u64> {
    size_in(limits::MIN_TCP_BUFFER as u64, limits::MAX_TCP_BUFFER as u64)
}
/// `--memory-cap`: 1 MiB to 1 TiB.
pub fn memory_cap() -> impl ValueParser<u64> {
    size_in(limits::MIN_MEMORY_CAP as u64, limits::MAX_MEMORY_CAP as u64)
}
/// The engine's `--mtu`: 576 to 9000.
pub fn engine_mtu() -> impl ValueParser<usize> {
    count_in(limits::MIN_MTU, limits::MAX_MTU, usize::MAX)
}
/// `bench link --mtu` (a lab the engine runs on): 576 to 9000.
pub fn engine_mtu_u32() -> impl ValueParser<u32> {
    count_in(limits::MIN_MTU as u32, limits::MAX_MTU as u32, u32::MAX)
}
/// `--shards`: 1 to 64 (more shards than cores work, just not faster).
pub fn shards() -> impl ValueParser<usize> {
    count_in(1, limits::MAX_SHARDS, usize::MAX)
}
/// `--cores`: a comma list of CPU numbers and ranges (`0,2`, `2-5`).
pub fn cores() -> impl ValueParser<Vec<usize>> {
    |s: &str| {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            let bad = || format!("{part:?} is not a CPU number or range (e.g. 0,1 or 2-5)");
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                    if a > b || b - a >= 1024 {
                        return Err(bad());
                    }
                    out.extend(a..=b);
                }
                None => out.push(part.parse().map_err(|_| bad())?),
            }
        }
        let mut seen = out.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != out.len() {
            return Err("a core is named twice: give each shard its own core".into());
        }
        Ok(out)
    }
}
/// The lab's `--mtu`: 68 to 9000.
pub fn lab_mtu() -> impl ValueParser<u32> {
    count_in(MIN_LAB_MTU, limits::MAX_MTU as u32, u32::MAX)
}
/// `--run-for-s`, `--timeout-s`, `--time-limit-s`.
pub fn run_seconds() -> impl ValueParser<f64> {
    number_in(0.001, MAX_RUN_S, "s")
}
/// A benchmark's `--seconds`.
pub fn bench_seconds() -> impl ValueParser<f64> {
    number_in(0.001, MAX_BENCH_S, "s")
}
/// `sim messages --count`: 1 to 10^6.
pub fn message_count() -> impl ValueParser<u64> {
    count_in(1, MAX_MESSAGES, u64::MAX)
}
/// `sim messages --size`: 8 B to 1 MiB.
pub fn message_size() -> impl ValueParser<u64> {
    size_in(MIN_MESSAGE, MAX_MESSAGE)
}
/// `sim messages --outstanding`: 1 to 4096 calls in flight.
pub fn outstanding_calls() -> impl ValueParser<usize> {
    count_in(1, MAX_OUTSTANDING, usize::MAX)
}
/// A byte count that must be at least 1 (`--recv-limit`, the demo's and bench's `--bytes`).
pub fn nonzero_size() -> impl ValueParser<u64> {
    size_in(1, u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1gib").unwrap(), 1 << 30);
        assert_eq!(parse_size("2K").unwrap(), 2000);
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("18446744073709551615GiB").is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        assert_eq!(parse_probability("0.05").unwrap(), 0.05);
        assert!(parse_probability("101%").is_err());
        assert!(parse_probability("-0.1").is_err());
        assert!(parse_probability("NaN").is_err());
        assert!(parse_probability("lots").is_err());
    }

    #[test]
    fn bounds_name_the_range() {
        assert_eq!(memory_cap()("64MiB").unwrap(), 64 << 20);
        assert_eq!(memory_cap()("0").unwrap_err(), "must be between 1 MiB and 1 TiB");
        assert_eq!(tcp_buffer()("0").unwrap_err(), "must be between 4 KiB and 1 GiB");
        assert_eq!(loss()("100%").unwrap_err(), "must be between 0% and 25%");
        assert_eq!(loss()("20%").unwrap(), 0.2);
        assert!(loss()("lots").unwrap_err().contains("not a probability"));
        assert_eq!(probability()("100%").unwrap(), 1.0);
        assert_eq!(delay_ms()("1001").unwrap_err(), "must be between 0 and 1000 ms");
        assert!(delay_ms()("NaN").is_err());
        assert_eq!(rate_mbit()("0").unwrap(), 0.0);
        assert!(rate_mbit()("1e-300").unwrap_err().starts_with("must be 0 (unlimited) or between 0.1 and"));
        assert_eq!(engine_mtu()("575").unwrap_err(), "must be between 576 and 9000");
        assert_eq!(lab_mtu()("68").unwrap(), 68);
        assert_eq!(run_seconds()("0").unwrap_err(), "must be between 0.001 and 31536000 s");
        assert_eq!(nonzero_size()("0").unwrap_err(), "must be at least 1 B");
        assert_eq!(count_in(1u64, u64::MAX, u64::MAX)("0").unwrap_err(), "must be at least 1");
        assert_eq!(keep_text(loss())("1%").unwrap(), "1%");
        assert_eq!(in_config("memory_cap", "0", memory_cap()).unwrap_err(), "memory_cap \"0\": must be between 1 MiB and 1 TiB");
        assert!(check_loss(0.2, 0.05).is_ok());
        assert_eq!(
            check_loss(0.2, 0.1).unwrap_err(),
            "--loss 20% with --corrupt 10%: lost plus corrupted frames must be between 0% and 25%"
        );
        assert_eq!(message_count()("0").unwrap_err(), "must be between 1 and 1000000");
        assert_eq!(message_size()("1KiB").unwrap(), 1024);
        assert_eq!(message_size()("1048577").unwrap_err(), "must be between 8 B and 1 MiB");
        assert_eq!(outstanding_calls()("0").unwrap_err(), "must be between 1 and 4096");
        assert_eq!(show_size(1 << 40), "1 TiB");
        assert_eq!(show_size(1500), "1500 B");
    }

    #[test]
    fn non_negative() {
        assert_eq!(parse_non_negative("10").unwrap(), 10.0);
        assert!(parse_non_negative("-1").is_err());
        assert!(parse_non_negative("inf").is_err());
    }
}
