//! `outboard bench latency --breakdown`: where a round trip's time goes,
//! hop by hop, from the hop trace (`outboard_trace`).
//!
//! With `--breakdown` every process of our cases (both applications, and
//! the two daemon engines when there are daemons) traces: the ping marks
//! each measured request, the echo sends the same bytes back, and each hop
//! point records when the marked message passed it. Here the records of
//! the client side (the ping, and engine B when it is a daemon) and of the
//! server side (the echo, and engine A) are put together by tag, and each
//! hop's duration is the later point's time less the earlier one's, per
//! round trip. A hop is reported as the median over the round trips in
//! which both of its points were seen.
//!
//! Hops, for the request (the client's write to the server's read) and
//! the response (the other way):
//!
//! | hop | from | to |
//! |---|---|---|
//! | app → engine | the sender's write (`end_put`/`send`) | its engine takes it from the board (push) |
//! | engine → link | that push | the frame built and handed to the link |
//! | link | frame out | frame in at the other engine |
//! | engine → board | frame in | the bytes published to the receiver's board |
//! | board → app | published | the receiver's read sees them (`begin_get`/`recv`) |
//!
//! and the echo's own turn: its read seeing the request to its write of the response.

use outboard_trace::Hop;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct HopRow {
    pub hop: &'static str,
    /// Median over the traced round trips, in µs (None: never seen).
    pub request_us: Option<f64>,
    pub response_us: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Breakdown {
    pub mode: String,
    /// Marked round trips the client wrote.
    pub marked: usize,
    /// Of those, round trips in which every hop point was seen.
    pub complete: usize,
    pub hops: Vec<HopRow>,
    /// The echo application: its read seeing the request to its write of the response.
    pub echo_us: Option<f64>,
    /// The sum of every hop's median and the echo's.
    pub sum_us: f64,
    /// Median of the client's write to its read seeing the response (the
    /// traced round trip between the two hop points).
    pub round_trip_us: Option<f64>,
    /// Records a process could not keep (its buffer was full).
    pub dropped: u64,
}

/// (name, from, to): the hops of one direction.
const HOPS: [(&str, Hop, Hop); 5] = [
    ("app -> engine", Hop::AppWrite, Hop::EnginePickup),
    ("engine -> link", Hop::EnginePickup, Hop::FrameOut),
    ("link", Hop::FrameOut, Hop::FrameIn),
    ("engine -> board", Hop::FrameIn, Hop::BoardDeliver),
    ("board -> app", Hop::BoardDeliver, Hop::AppWake),
];

/// Points seen on the sender's side of a direction (the rest are the receiver's).
fn on_sender(h: Hop) -> bool {
    matches!(h, Hop::AppWrite | Hop::EnginePickup | Hop::FrameOut)
}

/// First time each (hop, tag) was seen on one side.
type Points = HashMap<(Hop, u64), u64>;

/// Reads the trace files of the processes logged as `names` in `dir`
/// (`NAME.hops.PID`), keeping each point's first time.
fn side(dir: &Path, names: &[String]) -> Result<(Points, u64), String> {
    let mut points = Points::new();
    let mut dropped = 0;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if !names.iter().any(|n| file.starts_with(&format!("{n}.hops."))) {
            continue;
        }
        let (records, d) = outboard_trace::read(&e.path()).map_err(|e| format!("hop trace: {e}"))?;
        dropped += d;
        for r in records {
            points.entry((r.hop, r.tag)).and_modify(|t| *t = (*t).min(r.ns)).or_insert(r.ns);
        }
    }
    Ok((points, dropped))
}

fn median_us(mut v: Vec<u64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(super::peer::percentile_us(&v, 0.5))
}

/// The breakdown of one case: `client` and `server` are the log names of
/// each side's processes (application, and its daemon engine if any).
pub fn analyse(dir: &Path, mode: &str, client: &[String], server: &[String]) -> Result<Breakdown, String> {
    let (c, dc) = side(dir, client)?;
    let (s, ds) = side(dir, server)?;
    // The client's writes that the server's application read: the requests.
    let tags: Vec<u64> = {
        let mut seen = HashSet::new();
        c.keys()
            .filter(|(h, t)| *h == Hop::AppWrite && s.contains_key(&(Hop::AppWake, *t)) && seen.insert(*t))
            .map(|&(_, t)| t)
            .collect()
    };
    let span = |from: (&Points, Hop), to: (&Points, Hop), t: u64| -> Option<u64> {
        let a = *from.0.get(&(from.1, t))?;
        let b = *to.0.get(&(to.1, t))?;
        b.checked_sub(a)
    };
    let mut req: Vec<Vec<u64>> = vec![Vec::new(); HOPS.len()];
    let mut resp: Vec<Vec<u64>> = vec![Vec::new(); HOPS.len()];
    let (mut echo, mut round) = (Vec::new(), Vec::new());
    let mut complete = 0;
    for &t in &tags {
        let mut all = true;
        for (i, &(_, from, to)) in HOPS.iter().enumerate() {
            let pick = |sender: &'static str, h: Hop| -> &Points {
                match (sender, on_sender(h)) {
                    ("client", true) | ("server", false) => &c,
                    _ => &s,
                }
            };
            match span((pick("client", from), from), (pick("client", to), to), t) {
                Some(d) => req[i].push(d),
                None => all = false,
            }
            match span((pick("server", from), from), (pick("server", to), to), t) {
                Some(d) => resp[i].push(d),
                None => all = false,
            }
        }
        match span((&s, Hop::AppWake), (&s, Hop::AppWrite), t) {
            Some(d) => echo.push(d),
            None => all = false,
        }
        if let Some(d) = span((&c, Hop::AppWrite), (&c, Hop::AppWake), t) {
            round.push(d);
        }
        complete += usize::from(all);
    }
    let hops: Vec<HopRow> = HOPS
        .iter()
        .zip(req.into_iter().zip(resp))
        .map(|(&(hop, _, _), (q, r))| HopRow { hop, request_us: median_us(q), response_us: median_us(r) })
        .collect();
    let echo_us = median_us(echo);
    let sum_us = hops.iter().map(|h| h.request_us.unwrap_or(0.0) + h.response_us.unwrap_or(0.0)).sum::<f64>()
        + echo_us.unwrap_or(0.0);
    Ok(Breakdown {
        mode: mode.to_string(),
        marked: c.keys().filter(|(h, _)| *h == Hop::AppWrite).count(),
        complete,
        hops,
        echo_us,
        sum_us,
        round_trip_us: median_us(round),
        dropped: dc + ds,
    })
}

pub fn print(b: &Breakdown) {
    let us = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    println!(
        "hop breakdown, ours {} ({} of {} marked round trips with every hop seen; medians in us):",
        b.mode, b.complete, b.marked
    );
    println!("  {:<18} {:>10} {:>10}", "hop", "request", "response");
    for h in &b.hops {
        println!("  {:<18} {:>10} {:>10}", h.hop, us(h.request_us), us(h.response_us));
    }
    println!("  {:<18} {:>10}", "echo app turn", us(b.echo_us));
    println!(
        "  sum of medians {:.2} us; traced round trip (write to read, median) {} us{}",
        b.sum_us,
        us(b.round_trip_us),
        if b.dropped > 0 { format!("; {} records dropped (buffers full)", b.dropped) } else { String::new() }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One round trip's points, 1 µs apart, written as the processes would.
    fn write_side(dir: &Path, name: &str, lines: &[(&str, u64, u64)]) {
        let text: String = lines.iter().map(|(h, t, ns)| format!("{h} {t} {ns}\n")).collect();
        std::fs::write(dir.join(format!("{name}.hops.1")), text).unwrap();
    }

    #[test]
    fn hops_are_matched_by_tag_and_side() {
        let dir = std::env::temp_dir().join(format!("ob-breakdown-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Client app + engine B; server app + engine A. Two round trips (tags 1, 2);
        // tag 1 also retransmitted (a later frame out that must not count).
        let k = 1000;
        write_side(&dir, "ping", &[("app_write", 1, k), ("app_wake", 1, 20 * k), ("app_write", 2, 101 * k), ("app_wake", 2, 120 * k)]);
        write_side(
            &dir,
            "engine-b",
            &[
                ("engine_pickup", 1, 2 * k),
                ("frame_out", 1, 3 * k),
                ("frame_out", 1, 50 * k),
                ("frame_in", 1, 15 * k),
                ("board_deliver", 1, 17 * k),
                ("engine_pickup", 2, 102 * k),
                ("frame_out", 2, 103 * k),
                ("frame_in", 2, 115 * k),
                ("board_deliver", 2, 117 * k),
            ],
        );
        write_side(
            &dir,
            "echo",
            &[("app_wake", 1, 8 * k), ("app_write", 1, 9 * k), ("app_wake", 2, 108 * k), ("app_write", 2, 109 * k)],
        );
        write_side(
            &dir,
            "engine-a",
            &[
                ("frame_in", 1, 5 * k),
                ("board_deliver", 1, 6 * k),
                ("engine_pickup", 1, 10 * k),
                ("frame_out", 1, 12 * k),
                ("frame_in", 2, 105 * k),
                ("board_deliver", 2, 106 * k),
                ("engine_pickup", 2, 110 * k),
                ("frame_out", 2, 112 * k),
            ],
        );
        let b = analyse(&dir, "blocking", &["ping".into(), "engine-b".into()], &["echo".into(), "engine-a".into()]).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((b.marked, b.complete), (2, 2));
        let get = |name: &str| b.hops.iter().find(|h| h.hop == name).unwrap();
        assert_eq!(get("app -> engine").request_us, Some(1.0));
        assert_eq!(get("engine -> link").request_us, Some(1.0));
        assert_eq!(get("link").request_us, Some(2.0));
        assert_eq!(get("engine -> board").request_us, Some(1.0));
        assert_eq!(get("board -> app").request_us, Some(2.0));
        assert_eq!(b.echo_us, Some(1.0));
        assert_eq!(get("app -> engine").response_us, Some(1.0));
        assert_eq!(get("engine -> link").response_us, Some(2.0));
        assert_eq!(get("link").response_us, Some(3.0));
        assert_eq!(get("engine -> board").response_us, Some(2.0));
        assert_eq!(get("board -> app").response_us, Some(3.0));
        assert_eq!(b.round_trip_us, Some(19.0));
        assert!((b.sum_us - 19.0).abs() < 1e-9, "{}", b.sum_us);
    }
}
