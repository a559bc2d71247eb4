//! `outboard bench …`: programs that measure ours beside the alternative in one run.

pub mod apps;
pub mod breakdown;
pub mod lab_engine;
pub mod checksum;
pub mod cost;
pub mod floor;
pub mod handlers;
pub mod latency;
pub mod link;
pub mod messages;
pub mod peer;
pub mod placement;
pub mod plot;
pub mod scale;
pub mod throughput;
pub mod tools;
pub mod upgrade;

/// A lab name for a bench run: `prefix` and this process's id in base 36
/// (≤ 8 characters, as lab names must be).
pub(crate) fn lab_name(prefix: &str) -> String {
    let mut n = std::process::id();
    let mut s = String::from(prefix);
    for _ in 0..6 {
        let d = (n % 36) as u8;
        s.push(if d < 10 { (b'0' + d) as char } else { (b'a' + d - 10) as char });
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s
}

/// Ends a lab bench: reports a failed run (exit 1) or a lab that would not
/// come down, then prints the report as JSON or as the bench's table.
pub(crate) fn finish<R: serde::Serialize>(
    bench: &str,
    lab: &str,
    result: Result<R, String>,
    down: Result<outboard_lab::DownReport, outboard_lab::LabError>,
    json: bool,
    print_table: fn(&R),
) -> std::process::ExitCode {
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("outboard bench {bench}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    if let Err(e) = down {
        eprintln!("outboard bench {bench}: tearing down lab {lab}: {e}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
    } else {
        print_table(&report);
    }
    std::process::ExitCode::SUCCESS
}

