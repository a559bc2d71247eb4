//! `outboard top`: a live view of one engine, like top/htop. Each refresh
//! asks the engine for its `stat` snapshot over the control socket, keeps the
//! previous one, and shows rates from the difference: per-shard load, link
//! rates, drops by reason, boards and the busiest connections.
//!
//! Rates are over the engine's own clock (the snapshots' `wall_s`), not the
//! time between our queries. The first screen, before there is a previous
//! snapshot, shows averages since the engine started.
//!
//! The screen is drawn with `ratatui` (crossterm backend) into a buffer; the
//! live view puts that buffer on the alternate screen in raw mode, `--once`
//! prints the same buffer as plain text. The terminal is restored on every
//! way out: a key, a signal, the engine going away, an error, a panic.

use crate::args;
use clap::Args;
use outboard_engine::stat::{ConnRow, ShardCounters, ShardRow, Snapshot};
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table, Widget};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Name of the engine (its --name).
    #[arg(long, default_value = "default")]
    pub name: String,
    /// Milliseconds between refreshes (100 to 10000).
    #[arg(long, default_value = "1000", value_parser = args::count_in(100u64, 10_000, u64::MAX))]
    pub interval_ms: u64,
    /// Print one screen as plain text (two snapshots --interval-ms apart) and exit.
    #[arg(long)]
    pub once: bool,
}

/// Connections listed by `--once` (the live view lists as many as fit).
const ONCE_CONNECTIONS: usize = 10;
/// Boards listed at most (the rest are counted).
const MAX_BOARDS: usize = 8;
/// Width of the `--once` text when stdout is not a terminal.
const ONCE_WIDTH: u16 = 120;

/// Exit code when there is no engine of that name, or it went away (as `outboard stat`).
const NO_ENGINE: u8 = 3;

// ---------------------------------------------------------------- snapshots

/// Why a query gave no snapshot.
enum QueryError {
    /// No engine answers (the message `outboard stat` prints), or it went away mid-answer.
    Gone(String),
    /// The engine answered something else (an error of its own).
    Answer(String),
}

fn snapshot(name: &str) -> Result<Snapshot, QueryError> {
    let answer = outboard_engine::control::query(name, "stat").map_err(QueryError::Gone)?;
    if answer.trim().is_empty() {
        return Err(QueryError::Gone(format!("engine {name:?} went away (its control socket closed without an answer)")));
    }
    outboard_engine::stat::parse(&answer).map_err(|a| QueryError::Answer(a.trim().to_string()))
}

// ---------------------------------------------------------------- the view: numbers

/// One screen's numbers, from the current snapshot and (when there is one) the previous.
#[derive(Debug, Clone, PartialEq)]
struct View {
    header: Vec<String>,
    /// Rates over this many seconds of the engine's clock; None: averages since start.
    dt: Option<f64>,
    shards: Vec<ShardLine>,
    link: [LinkLine; 2],
    /// (counter, total, +delta) for the link's drop counters.
    link_drops: Vec<(String, u64, Option<u64>)>,
    /// (counter, total, +delta) for every non-zero `drops_*` stack counter.
    drops: Vec<(String, u64, Option<u64>)>,
    boards: Vec<BoardLine>,
    boards_total: usize,
    /// Every connection, busiest first.
    conns: Vec<ConnLine>,
}

#[derive(Debug, Clone, PartialEq)]
struct ShardLine {
    shard: u32,
    busy_pct: f64,
    cpu_pct: f64,
    frames_in: f64,
    frames_out: f64,
    connections: usize,
    fwd_out: f64,
    fwd_in: f64,
    fwd_drops: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct LinkLine {
    dir: &'static str,
    frames_s: f64,
    mbit_s: f64,
    frames: u64,
    bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct BoardLine {
    session: u64,
    pid: u32,
    endpoints: usize,
    accepts: u64,
    commands: u64,
    commands_delta: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
struct ConnLine {
    local: String,
    remote: String,
    state: String,
    shard: u32,
    owner: String,
    /// Bytes in and out per second (None on the first screen).
    in_s: Option<f64>,
    out_s: Option<f64>,
    /// Bytes in + out since the previous snapshot (its totals when it is new),
    /// or since it opened on the first screen: the sort key.
    moved: u64,
}

fn per_s(delta: u64, dt: f64) -> f64 {
    if dt > 0.0 {
        delta as f64 / dt
    } else {
        0.0
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (100.0 * part / whole).clamp(0.0, 100.0 * 64.0)
    } else {
        0.0
    }
}

/// The shard rows of a snapshot (an engine without per-shard rows: its sum as shard 0).
fn shard_rows(s: &Snapshot) -> Vec<ShardRow> {
    if s.shards.is_empty() {
        vec![ShardRow {
            counters: s.shard.clone(),
            connections: s.connections.len(),
            memory_in_use: s.memory_in_use,
            ..Default::default()
        }]
    } else {
        s.shards.clone()
    }
}

fn shard_line(r: &ShardRow, prev: Option<&ShardRow>) -> ShardLine {
    let zero = ShardCounters::default();
    let (p, prx, ptx) = match prev {
        Some(p) if p.counters.wall_s < r.counters.wall_s => (&p.counters, p.rx_frames, p.tx_frames),
        _ => (&zero, 0, 0),
    };
    let c = &r.counters;
    let dt = c.wall_s - p.wall_s;
    ShardLine {
        shard: r.shard,
        busy_pct: pct(c.busy_turns.saturating_sub(p.busy_turns) as f64, c.turns.saturating_sub(p.turns) as f64),
        cpu_pct: pct(c.cpu_s - p.cpu_s, dt),
        frames_in: per_s(r.rx_frames.saturating_sub(prx), dt),
        frames_out: per_s(r.tx_frames.saturating_sub(ptx), dt),
        connections: r.connections,
        fwd_out: per_s(c.forwarded_out.saturating_sub(p.forwarded_out), dt),
        fwd_in: per_s(c.forwarded_in.saturating_sub(p.forwarded_in), dt),
        fwd_drops: c.forward_drops,
    }
}

fn counter(m: &std::collections::BTreeMap<String, u64>, k: &str) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

fn link_line(dir: &'static str, cur: &Snapshot, prev: Option<&Snapshot>, dt: f64) -> LinkLine {
    let (fk, bk) = if dir == "rx" { ("rx_frames", "rx_bytes") } else { ("tx_frames", "tx_bytes") };
    let (frames, bytes) = (counter(&cur.link.counters, fk), counter(&cur.link.counters, bk));
    let (pf, pb) = prev.map_or((0, 0), |p| (counter(&p.link.counters, fk), counter(&p.link.counters, bk)));
    LinkLine {
        dir,
        frames_s: per_s(frames.saturating_sub(pf), dt),
        mbit_s: per_s(bytes.saturating_sub(pb), dt) * 8.0 / 1e6,
        frames,
        bytes,
    }
}

fn with_delta(
    cur: &std::collections::BTreeMap<String, u64>,
    prev: Option<&std::collections::BTreeMap<String, u64>>,
    k: &str,
) -> (String, u64, Option<u64>) {
    let v = counter(cur, k);
    (k.to_string(), v, prev.map(|p| v.saturating_sub(counter(p, k))))
}

fn conn_key(c: &ConnRow) -> (&str, &str) {
    (c.local.as_str(), c.remote.as_str())
}

fn uptime(s: f64) -> String {
    let t = s.max(0.0) as u64;
    if t >= 3600 {
        format!("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60)
    } else if t >= 60 {
        format!("{}m{:02}s", t / 60, t % 60)
    } else {
        format!("{s:.1}s")
    }
}

fn mib(b: usize) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// The view of `cur`, with rates against `prev` when it is an earlier
/// snapshot of the same engine (same pid, its clock behind).
fn view(cur: &Snapshot, prev: Option<&Snapshot>, interval_ms: u64, note: Option<&str>) -> View {
    let prev = prev.filter(|p| p.pid == cur.pid && p.shard.wall_s < cur.shard.wall_s);
    let dt = prev.map(|p| cur.shard.wall_s - p.shard.wall_s);
    // Rates on the first screen are averages since the start.
    let span = dt.unwrap_or(cur.shard.wall_s);

    let prev_rows: Vec<ShardRow> = prev.map(shard_rows).unwrap_or_default();
    let shards: Vec<ShardLine> = shard_rows(cur)
        .iter()
        .map(|r| shard_line(r, prev_rows.iter().find(|p| p.shard == r.shard)))
        .collect();

    let link = [link_line("rx", cur, prev, span), link_line("tx", cur, prev, span)];
    let plink = prev.map(|p| &p.link.counters);
    let link_drops = ["rx_kernel_drops", "tx_full", "tx_errors"]
        .iter()
        .map(|k| with_delta(&cur.link.counters, plink, k))
        .collect();

    let pstack = prev.map(|p| &p.stack);
    let drops = cur
        .stack
        .iter()
        .filter(|(k, v)| k.starts_with("drops_") && **v != 0)
        .map(|(k, _)| with_delta(&cur.stack, pstack, k))
        .collect();

    let mut boards: Vec<BoardLine> = cur
        .boards
        .iter()
        .map(|b| {
            let before = prev.and_then(|p| p.boards.iter().find(|x| x.session == b.session && x.pid == b.pid));
            BoardLine {
                session: b.session,
                pid: b.pid,
                endpoints: b.endpoints,
                accepts: b.accepts,
                commands: b.commands,
                commands_delta: prev.map(|_| b.commands.saturating_sub(before.map_or(0, |x| x.commands))),
            }
        })
        .collect();
    boards.sort_by(|a, b| b.commands_delta.cmp(&a.commands_delta).then(b.commands.cmp(&a.commands)).then(a.session.cmp(&b.session)));
    let boards_total = boards.len();
    boards.truncate(MAX_BOARDS);

    let before: HashMap<(&str, &str), &ConnRow> =
        prev.map(|p| p.connections.iter().map(|c| (conn_key(c), c)).collect()).unwrap_or_default();
    let mut conns: Vec<ConnLine> = cur
        .connections
        .iter()
        .map(|c| {
            // A connection not in the previous snapshot moved all its bytes since.
            let (pin, pout) = before.get(&conn_key(c)).map_or((0, 0), |p| (p.bytes_in, p.bytes_out));
            let (din, dout) = (c.bytes_in.saturating_sub(pin), c.bytes_out.saturating_sub(pout));
            ConnLine {
                local: c.local.clone(),
                remote: c.remote.clone(),
                state: c.state.clone(),
                shard: c.shard,
                owner: c.owner.clone(),
                in_s: dt.map(|d| per_s(din, d)),
                out_s: dt.map(|d| per_s(dout, d)),
                moved: din + dout,
            }
        })
        .collect();
    conns.sort_by(|a, b| b.moved.cmp(&a.moved).then_with(|| (&a.local, &a.remote).cmp(&(&b.local, &b.remote))));

    let link_name = format!("{}:{}", cur.link.kind, cur.link.name);
    let mode = if cur.link.mode.is_empty() { String::new() } else { format!(" mode \"{}\"", cur.link.mode) };
    let rates = match dt {
        Some(d) => format!("rates over the last {d:.2}s"),
        None => "averages since start (rates from the next refresh)".to_string(),
    };
    let mut header = vec![
        format!(
            "outboard top - engine {} (pid {})  addr {}  up {}  shards {}",
            cur.name,
            cur.pid,
            cur.addr,
            uptime(cur.shard.wall_s),
            shard_rows(cur).len()
        ),
        format!("link {link_name}{mode}  mtu {}", cur.link.mtu),
        format!(
            "memory {} of {}  connections {}  boards {}  arp {}  refresh {:.1}s, {rates}",
            mib(cur.memory_in_use),
            mib(cur.memory_cap),
            cur.connections.len(),
            cur.boards.len(),
            cur.arp_entries,
            interval_ms as f64 / 1000.0
        ),
    ];
    if let Some(n) = note {
        header.push(n.to_string());
    }
    View { header, dt, shards, link, link_drops, drops, boards, boards_total, conns }
}

// ---------------------------------------------------------------- the view: drawing

fn rate(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn opt_rate_mbit(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |b| format!("{:.2}", b * 8.0 / 1e6))
}

fn plus(d: Option<u64>) -> String {
    d.map_or("-".to_string(), |d| format!("+{d}"))
}

fn title_style() -> Style {
    Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
}

fn head_style() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// A section: a title line, then a table (columns left-aligned where `left`), or `empty` when it has no rows.
fn section(title: String, cols: &[(&str, u16, bool)], rows: Vec<Vec<String>>, empty: &str, area: Rect, buf: &mut Buffer) {
    let [t, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    Paragraph::new(Line::from(format!("{title:<w$}", w = usize::from(area.width)))).style(title_style()).render(t, buf);
    if rows.is_empty() {
        Paragraph::new(format!("  {empty}")).render(body, buf);
        return;
    }
    let cell = |s: String, left: bool| {
        if left {
            Cell::from(Line::from(s))
        } else {
            Cell::from(Line::from(s).right_aligned())
        }
    };
    let header = Row::new(cols.iter().map(|(h, _, left)| cell((*h).to_string(), *left))).style(head_style());
    let rows = rows
        .into_iter()
        .map(|r| Row::new(r.into_iter().zip(cols).map(|(s, (_, _, left))| cell(s, *left))));
    Table::new(rows, cols.iter().map(|(_, w, _)| Constraint::Length(*w)))
        .header(header)
        .column_spacing(2)
        .render(body, buf);
}

/// Lines a section takes: title, and a header and `rows` rows or one "none" line.
fn section_height(rows: usize) -> u16 {
    if rows == 0 {
        2
    } else {
        2 + u16::try_from(rows).unwrap_or(u16::MAX - 2).min(u16::MAX - 2)
    }
}

/// Height of the whole screen with `conns` connection rows.
fn screen_height(v: &View, conns: usize) -> u16 {
    let header = v.header.len() as u16;
    let gaps = 5;
    header + section_height(v.shards.len()) + section_height(2) + 1 + section_height(v.drops.len())
        + section_height(v.boards.len()) + u16::from(v.boards_total > v.boards.len())
        + section_height(conns) + gaps
}

fn draw(v: &View, live: bool, area: Rect, buf: &mut Buffer) {
    let boards_more = u16::from(v.boards_total > v.boards.len());
    let [header, shards, link, drops, boards, conns] = Layout::vertical([
        Constraint::Length(v.header.len() as u16),
        Constraint::Length(section_height(v.shards.len())),
        Constraint::Length(section_height(2) + 1),
        Constraint::Length(section_height(v.drops.len())),
        Constraint::Length(section_height(v.boards.len()) + boards_more),
        Constraint::Min(2),
    ])
    .spacing(1)
    .areas(area);

    let mut head: Vec<Line> = v.header.iter().map(|l| Line::from(l.clone())).collect();
    if live {
        if let Some(first) = head.first_mut() {
            *first = Line::from(format!("{}   (q: quit)", v.header[0]));
        }
    }
    Paragraph::new(head).render(header, buf);

    let avg = if v.dt.is_some() { "" } else { ", since start" };
    section(
        format!("SHARDS{avg}"),
        &[
            ("shard", 5, false),
            ("busy%", 6, false),
            ("cpu%", 6, false),
            ("frames-in/s", 11, false),
            ("frames-out/s", 12, false),
            ("conns", 6, false),
            ("fwd-out/s", 9, false),
            ("fwd-in/s", 9, false),
            ("fwd-drops", 9, false),
        ],
        v.shards
            .iter()
            .map(|s| {
                vec![
                    s.shard.to_string(),
                    format!("{:.1}", s.busy_pct),
                    format!("{:.1}", s.cpu_pct),
                    rate(s.frames_in),
                    rate(s.frames_out),
                    s.connections.to_string(),
                    rate(s.fwd_out),
                    rate(s.fwd_in),
                    s.fwd_drops.to_string(),
                ]
            })
            .collect(),
        "no shards",
        shards,
        buf,
    );

    let [link_table, link_drops] = Layout::vertical([Constraint::Length(section_height(2)), Constraint::Length(1)]).areas(link);
    section(
        format!("LINK{avg}"),
        &[("dir", 5, true), ("frames/s", 10, false), ("Mbit/s", 10, false), ("frames", 14, false), ("bytes", 16, false)],
        v.link
            .iter()
            .map(|l| vec![l.dir.to_string(), rate(l.frames_s), format!("{:.2}", l.mbit_s), l.frames.to_string(), l.bytes.to_string()])
            .collect(),
        "",
        link_table,
        buf,
    );
    let ld: Vec<String> = v.link_drops.iter().map(|(k, t, d)| format!("{k} {t} ({})", plus(*d))).collect();
    Paragraph::new(format!("  link drops: {}", ld.join("  "))).render(link_drops, buf);

    section(
        "DROPS BY REASON (stack counters drops_*, non-zero; +since last refresh)".to_string(),
        &[("reason", 32, true), ("total", 14, false), ("+last", 10, false)],
        v.drops.iter().map(|(k, t, d)| vec![k.clone(), t.to_string(), plus(*d)]).collect(),
        "none",
        drops,
        buf,
    );

    let [boards_table, boards_more_line] =
        Layout::vertical([Constraint::Length(section_height(v.boards.len())), Constraint::Length(boards_more)]).areas(boards);
    section(
        format!("BOARDS ({} attached)", v.boards_total),
        &[
            ("session", 8, false),
            ("pid", 8, false),
            ("endpoints", 9, false),
            ("accepts", 10, false),
            ("commands", 14, false),
            ("+last", 10, false),
        ],
        v.boards
            .iter()
            .map(|b| {
                vec![
                    b.session.to_string(),
                    b.pid.to_string(),
                    b.endpoints.to_string(),
                    b.accepts.to_string(),
                    b.commands.to_string(),
                    plus(b.commands_delta),
                ]
            })
            .collect(),
        "none attached",
        boards_table,
        buf,
    );
    if boards_more == 1 {
        Paragraph::new(format!("  ... and {} more", v.boards_total - v.boards.len())).render(boards_more_line, buf);
    }

    let fit = usize::from(conns.height.saturating_sub(2));
    let shown = v.conns.len().min(fit.max(1));
    let order = if v.dt.is_some() { "by bytes/s" } else { "by bytes since open" };
    section(
        format!("BUSIEST CONNECTIONS ({shown} of {}, {order})", v.conns.len()),
        &[
            ("local", 21, true),
            ("remote", 21, true),
            ("state", 12, true),
            ("shard", 5, false),
            ("owner", 12, true),
            ("in Mbit/s", 10, false),
            ("out Mbit/s", 10, false),
        ],
        v.conns
            .iter()
            .take(shown)
            .map(|c| {
                vec![
                    c.local.clone(),
                    c.remote.clone(),
                    c.state.clone(),
                    c.shard.to_string(),
                    if c.owner.is_empty() { "-".to_string() } else { c.owner.clone() },
                    opt_rate_mbit(c.in_s),
                    opt_rate_mbit(c.out_s),
                ]
            })
            .collect(),
        "none",
        conns,
        buf,
    );
}

/// The screen as plain text, `width` columns, trailing blanks trimmed.
fn plain(v: &View, width: u16) -> String {
    let conns = v.conns.len().min(ONCE_CONNECTIONS);
    let area = Rect::new(0, 0, width, screen_height(v, conns));
    let mut buf = Buffer::empty(area);
    draw(v, false, area, &mut buf);
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf.cell((x, y)).map_or(" ", |c| c.symbol()));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

// ---------------------------------------------------------------- the command

pub fn main(a: &TopArgs) -> ExitCode {
    let interval = Duration::from_millis(a.interval_ms);
    let first = match snapshot(&a.name) {
        Ok(s) => s,
        Err(QueryError::Gone(e)) => {
            eprintln!("outboard: {e}");
            return ExitCode::from(NO_ENGINE);
        }
        Err(QueryError::Answer(e)) => {
            eprintln!("outboard: the engine answered: {e}");
            return ExitCode::from(1);
        }
    };
    if a.once {
        return once(a, first, interval);
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!("outboard: top needs a terminal (stdin and stdout); use --once for one screen as plain text");
        return ExitCode::from(2);
    }
    match live(a, first, interval) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("outboard: top: terminal: {e}");
            ExitCode::from(1)
        }
    }
}

fn once(a: &TopArgs, first: Snapshot, interval: Duration) -> ExitCode {
    std::thread::sleep(interval);
    let cur = match snapshot(&a.name) {
        Ok(s) => s,
        Err(QueryError::Gone(e)) => {
            eprintln!("outboard: {e}");
            return ExitCode::from(NO_ENGINE);
        }
        Err(QueryError::Answer(e)) => {
            eprintln!("outboard: the engine answered: {e}");
            return ExitCode::from(1);
        }
    };
    let width = if std::io::stdout().is_terminal() {
        terminal::size().map_or(ONCE_WIDTH, |(w, _)| w.max(80))
    } else {
        ONCE_WIDTH
    };
    print!("{}", plain(&view(&cur, Some(&first), a.interval_ms, None), width));
    ExitCode::SUCCESS
}

/// Whether the terminal is in raw mode on the alternate screen (so that
/// restoring twice, from the guard and the panic hook, is harmless).
static TERMINAL_TAKEN: AtomicBool = AtomicBool::new(false);

fn restore_terminal() {
    if TERMINAL_TAKEN.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    }
}

/// Raw mode and the alternate screen while it lives; restored on drop
/// (returns, errors, unwinding) and by the panic hook (before the message prints).
struct TerminalGuard;

impl TerminalGuard {
    fn take() -> std::io::Result<TerminalGuard> {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            hook(info);
        }));
        TERMINAL_TAKEN.store(true, Ordering::SeqCst);
        let guard = TerminalGuard;
        terminal::enable_raw_mode()?;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn is_quit(k: &KeyEvent) -> bool {
    k.kind == KeyEventKind::Press
        && (matches!(k.code, KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc)
            || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL)))
}

/// The live view; Ok(exit code) or a terminal error (the terminal restored either way).
fn live(a: &TopArgs, first: Snapshot, interval: Duration) -> std::io::Result<ExitCode> {
    // SIGINT/SIGTERM from outside: leave the loop and restore the terminal.
    let stop = outboard_engine::signals::stop_on_signals();
    // Snapshots come from a thread of their own, so keys are answered at
    // once even while the engine takes its time.
    let (tx, rx) = mpsc::channel::<Result<Snapshot, QueryError>>();
    let name = a.name.clone();
    std::thread::Builder::new().name("outboard-top-query".into()).spawn(move || loop {
        std::thread::sleep(interval);
        if tx.send(snapshot(&name)).is_err() {
            break;
        }
    })?;

    let guard = TerminalGuard::take()?;
    let mut term = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
    term.clear()?;
    let mut prev: Option<Snapshot> = None;
    let mut cur = first;
    let mut note: Option<String> = None;
    let mut dirty = true;
    let gone = loop {
        if stop.load(Ordering::Relaxed) {
            break None;
        }
        if dirty {
            let v = view(&cur, prev.as_ref(), a.interval_ms, note.as_deref());
            term.draw(|f| draw(&v, true, f.area(), f.buffer_mut()))?;
            dirty = false;
        }
        if event::poll(Duration::from_millis(50))? {
            match event::read()? {
                Event::Key(k) if is_quit(&k) => break None,
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        match rx.try_recv() {
            Ok(Ok(s)) => {
                prev = Some(std::mem::replace(&mut cur, s));
                note = None;
                dirty = true;
            }
            Ok(Err(QueryError::Gone(e))) => break Some(format!("the engine went away: {e}")),
            Ok(Err(QueryError::Answer(e))) => {
                note = Some(format!("the engine answered: {e}"));
                dirty = true;
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => break Some("the query thread stopped".to_string()),
        }
    };
    drop(term);
    drop(guard);
    Ok(match gone {
        None => ExitCode::SUCCESS,
        Some(e) => {
            eprintln!("outboard: {e}");
            ExitCode::from(NO_ENGINE)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(wall: f64, rx: u64, conn_bytes: u64, drops: u64) -> Snapshot {
        serde_json::from_value(serde_json::json!({
            "name": "e1", "pid": 42, "addr": "10.0.0.1/24", "gateway": null,
            "link": {"kind": "fabric", "name": "f", "mode": "port 1", "mtu": 1500, "mac": "02:00:00:00:00:01",
                     "offloads": [], "counters": {"rx_frames": rx, "rx_bytes": rx * 1000, "tx_frames": rx / 2,
                     "tx_bytes": rx * 100, "rx_kernel_drops": 0, "tx_full": 3, "tx_errors": 0}},
            "shard": {"turns": rx * 2, "busy_turns": rx, "sleeps": 0, "cpu_s": wall / 2.0, "wall_s": wall,
                      "accept_paused_turns": 0, "pcap_frames": 0},
            "shards": [{"shard": 0, "turns": rx * 2, "busy_turns": rx, "sleeps": 0, "cpu_s": wall / 2.0, "wall_s": wall,
                        "accept_paused_turns": 0, "pcap_frames": 0, "connections": 2, "memory_in_use": 10,
                        "rx_frames": rx, "tx_frames": rx / 2}],
            "stack": {"drops_checksum": drops, "drops_no_route": 0, "frames_in": rx},
            "memory_in_use": 10, "memory_cap": 100, "arp_entries": 1,
            "connections": [
                {"local": "10.0.0.1:7", "remote": "10.0.0.2:40000", "state": "Established", "owner": "echo:7", "shard": 0,
                 "send_queue": 0, "recv_queue": 0, "cwnd": 0, "srtt_us": 0, "retransmits": 0, "challenge_acks": 0,
                 "dropped_segments": 0, "bytes_in": conn_bytes, "bytes_out": conn_bytes, "memory": 0},
                {"local": "10.0.0.1:7", "remote": "10.0.0.3:40000", "state": "Established", "owner": "echo:7", "shard": 0,
                 "send_queue": 0, "recv_queue": 0, "cwnd": 0, "srtt_us": 0, "retransmits": 0, "challenge_acks": 0,
                 "dropped_segments": 0, "bytes_in": 5000, "bytes_out": 5000, "memory": 0}],
            "services": []
        }))
        .unwrap()
    }

    #[test]
    fn rates_come_from_the_difference_of_two_snapshots() {
        let a = snap(10.0, 1000, 1000, 1);
        let b = snap(12.0, 3000, 1_001_000, 4);
        let v = view(&b, Some(&a), 1000, None);
        assert_eq!(v.dt, Some(2.0));
        let s = &v.shards[0];
        assert_eq!((s.frames_in, s.frames_out), (1000.0, 500.0));
        assert_eq!((s.busy_pct, s.cpu_pct), (50.0, 50.0));
        assert_eq!(v.link[0].frames_s, 1000.0);
        assert_eq!(v.link[0].mbit_s, 2_000_000.0 * 8.0 / 2.0 / 1e6);
        assert_eq!(v.drops, vec![("drops_checksum".to_string(), 4, Some(3))], "zero drops are not listed");
        assert_eq!(v.link_drops[1], ("tx_full".to_string(), 3, Some(0)));
        assert_eq!(v.conns[0].remote, "10.0.0.2:40000", "busiest first");
        assert_eq!(v.conns[0].in_s, Some(500_000.0));
        assert_eq!(v.conns[1].in_s, Some(0.0));
    }

    #[test]
    fn the_first_screen_shows_averages_and_a_restarted_engine_starts_over() {
        let b = snap(10.0, 3000, 10, 0);
        let v = view(&b, None, 1000, None);
        assert_eq!(v.dt, None);
        assert_eq!(v.shards[0].frames_in, 300.0);
        assert!(v.drops.is_empty());
        assert_eq!(v.conns[0].in_s, None);
        // A later snapshot with an earlier clock (a new engine of the same name): no rates.
        let later = snap(20.0, 5000, 10, 0);
        assert_eq!(view(&b, Some(&later), 1000, None).dt, None);
    }

    #[test]
    fn the_plain_screen_has_every_section() {
        let v = view(&snap(12.0, 3000, 1_001_000, 4), Some(&snap(10.0, 1000, 1000, 1)), 1000, None);
        let text = plain(&v, 120);
        for want in [
            "engine e1 (pid 42)",
            "link fabric:f mode \"port 1\"",
            "SHARDS",
            "LINK",
            "DROPS BY REASON",
            "drops_checksum",
            "BOARDS (0 attached)",
            "BUSIEST CONNECTIONS (2 of 2, by bytes/s)",
            "10.0.0.2:40000",
            "tx_full 3 (+0)",
        ] {
            assert!(text.contains(want), "{want:?} missing:\n{text}");
        }
        assert!(!text.contains("drops_no_route"), "{text}");
        assert!(text.lines().all(|l| l.len() <= 120 && l == l.trim_end()), "{text}");
    }
}
