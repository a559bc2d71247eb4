//! Value parsers for command-line flags: sizes like `64MiB`, probabilities like `1%` or `0.01`.

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
    fn non_negative() {
        assert_eq!(parse_non_negative("10").unwrap(), 10.0);
        assert!(parse_non_negative("-1").is_err());
        assert!(parse_non_negative("inf").is_err());
    }
}
