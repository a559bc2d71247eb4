//! `outboard engine --metrics ADDR:PORT`: every `outboard stat` counter in
//! the Prometheus (OpenMetrics) text format, encoded by the
//! `prometheus-client` crate, over plain HTTP (`GET /metrics`).
//!
//! Each scrape asks the engine for a snapshot through its control socket —
//! the same answer `outboard stat --json` gets — so the engine's shards
//! never see the scraper. Names follow Prometheus conventions: prefix
//! `outboard_`, snake case, `_total` on counters, units in the name
//! (`_bytes`, `_seconds`); per-shard, per-board and per-service series
//! carry `shard`, `session`/`pid` and `service`/`port` labels. Every stack
//! counter (drops by reason, checksum failures, ARP, ICMP, TCP, UDP) is
//! `outboard_stack_<name>_total`, every link counter
//! `outboard_link_<name>_total`.
//!
//! The listener is a small thread in the engine process answering one
//! request at a time (a scraper every few seconds, not a web server): a
//! request line and headers within 8 KiB and 2 s, then the answer and
//! `Connection: close`.

use outboard_engine::stat::Snapshot;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

type Labels = Vec<(String, String)>;

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

fn gauge(v: usize) -> Gauge {
    let g = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

/// A family of counters, one series per (labels, value).
fn counters(rows: impl IntoIterator<Item = (Labels, u64)>) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    for (l, v) in rows {
        f.get_or_create(&l).inc_by(v);
    }
    f
}

fn gauges(rows: impl IntoIterator<Item = (Labels, usize)>) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    for (l, v) in rows {
        f.get_or_create(&l).set(i64::try_from(v).unwrap_or(i64::MAX));
    }
    f
}

fn label(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// The OpenMetrics text of one snapshot.
pub fn encode_snapshot(s: &Snapshot) -> Result<String, std::fmt::Error> {
    let mut r = Registry::with_prefix("outboard");
    r.register(
        "engine",
        "The engine: its name, link and address",
        Info::new(vec![
            label("name", &s.name),
            label("link", format!("{}:{}", s.link.kind, s.link.name)),
            label("mode", &s.link.mode),
            label("addr", &s.addr),
        ]),
    );
    for (k, v) in &s.link.counters {
        r.register(format!("link_{k}"), format!("Link counter {k}"), counter(*v));
    }
    r.register_with_unit("memory_in_use", "Memory the stack holds", Unit::Bytes, gauge(s.memory_in_use));
    r.register_with_unit("memory_cap", "Memory the stack may hold before new connections wait", Unit::Bytes, gauge(s.memory_cap));
    r.register_with_unit("board_memory", "Bytes of every board mapped", Unit::Bytes, gauge(s.board_memory));
    r.register("arp_entries", "Entries in the ARP table", gauge(s.arp_entries));
    r.register("connections", "TCP connections", gauge(s.connections.len()));
    let shard = |f: &dyn Fn(&outboard_engine::stat::ShardRow) -> u64| {
        counters(s.shards.iter().map(|row| (vec![label("shard", row.shard)], f(row))))
    };
    r.register("shard_turns", "Loop turns", shard(&|x| x.counters.turns));
    r.register("shard_busy_turns", "Loop turns that found work", shard(&|x| x.counters.busy_turns));
    r.register("shard_sleeps", "Times the shard slept on its link", shard(&|x| x.counters.sleeps));
    r.register("shard_accept_paused_turns", "Turns a waiting connection was not accepted (memory over the cap)", shard(&|x| {
        x.counters.accept_paused_turns
    }));
    r.register("shard_pcap_frames", "Frames written to the pcap file", shard(&|x| x.counters.pcap_frames));
    r.register("shard_rx_frames", "Frames the shard's queue of the link received", shard(&|x| x.rx_frames));
    r.register("shard_tx_frames", "Frames the shard's queue of the link sent", shard(&|x| x.tx_frames));
    r.register("shard_forwarded_out", "Frames the link handed this shard for another shard, sent there", shard(&|x| x.counters.forwarded_out));
    r.register("shard_forwarded_in", "Frames other shards sent to this shard", shard(&|x| x.counters.forwarded_in));
    r.register("shard_forward_drops", "Frames for another shard dropped: the ring to it was full", shard(&|x| x.counters.forward_drops));
    let cpu = Family::<Labels, Counter<f64, AtomicU64>>::default();
    for row in &s.shards {
        cpu.get_or_create(&vec![label("shard", row.shard)]).inc_by(row.counters.cpu_s);
    }
    r.register_with_unit("shard_cpu", "CPU time of the shard's thread", Unit::Seconds, cpu);
    r.register("shard_connections", "TCP connections on the shard", gauges(s.shards.iter().map(|x| (vec![label("shard", x.shard)], x.connections))));
    r.register_with_unit(
        "shard_memory_in_use",
        "Memory the shard's stack holds",
        Unit::Bytes,
        gauges(s.shards.iter().map(|x| (vec![label("shard", x.shard)], x.memory_in_use))),
    );
    for (k, v) in &s.stack {
        r.register(format!("stack_{k}"), format!("Stack counter {k}"), counter(*v));
    }
    let h = &s.host;
    r.register("apps_attached", "Applications attached, ever", counter(h.attached));
    r.register("apps_detached", "Applications gone, for any reason", counter(h.detached));
    r.register("apps_died", "Applications that died while attached", counter(h.died));
    r.register("apps_violations", "Applications disconnected for breaking the board's rules", counter(h.violations));
    r.register_with_unit("apps_rx_delivered", "Stream bytes read by applications through boards", Unit::Bytes, counter(h.rx_delivered));
    r.register_with_unit("apps_tx_delivered", "Stream bytes of applications acknowledged by peers", Unit::Bytes, counter(h.tx_delivered));
    let board = |f: &dyn Fn(&outboard_engine::host::BoardRow) -> u64| {
        counters(s.boards.iter().map(|b| (vec![label("session", b.session), label("pid", b.pid)], f(b))))
    };
    r.register("board_commands", "Commands the board's application sent", board(&|b| b.commands));
    r.register("board_events", "Events the engine posted to the board", board(&|b| b.events));
    r.register("board_accepts", "Connections accepted for the board", board(&|b| b.accepts));
    r.register("board_datagrams_in", "Datagrams delivered to the board", board(&|b| b.datagrams_in));
    r.register("board_datagrams_out", "Datagrams the board sent", board(&|b| b.datagrams_out));
    r.register("board_bad_options", "Socket options the engine refused", board(&|b| b.bad_options));
    r.register("board_endpoints", "Endpoints open on the board", gauges(s.boards.iter().map(|b| {
        (vec![label("session", b.session), label("pid", b.pid)], b.endpoints)
    })));
    let svc = |f: &dyn Fn(&outboard_engine::services::ServiceCounters) -> u64| {
        counters(s.services.iter().map(|x| (vec![label("service", &x.service), label("port", x.port)], f(x))))
    };
    r.register("service_tcp_accepted", "Connections the service accepted", svc(&|x| x.tcp_accepted));
    r.register("service_tcp_closed", "Connections the service closed", svc(&|x| x.tcp_closed));
    r.register("service_tcp_reset", "Connections of the service reset", svc(&|x| x.tcp_reset));
    r.register_with_unit("service_in", "Bytes the service received", Unit::Bytes, svc(&|x| x.bytes_in));
    r.register_with_unit("service_out", "Bytes the service sent", Unit::Bytes, svc(&|x| x.bytes_out));
    r.register("service_udp_datagrams_in", "Datagrams the service received", svc(&|x| x.udp_datagrams_in));
    r.register("service_udp_datagrams_out", "Datagrams the service sent", svc(&|x| x.udp_datagrams_out));
    if let Some(m) = &s.messages {
        messages(&mut r, m);
    }
    let mut out = String::new();
    encode(&mut out, &r)?;
    Ok(out)
}

/// The message service (`--messages`): every protocol counter as
/// `outboard_messages_<counter>_total`, and per-mailbox series labelled
/// `mailbox` (its number) and `name`.
fn messages(r: &mut Registry, m: &outboard_engine::messages::MessageSnapshot) {
    if let Ok(serde_json::Value::Object(stats)) = serde_json::to_value(m.stats) {
        for (k, v) in stats {
            r.register(format!("messages_{k}"), format!("Message protocol counter {k}"), counter(v.as_u64().unwrap_or(0)));
        }
    }
    let labels = |b: &outboard_msg::MailboxInfo| vec![label("mailbox", b.number), label("name", b.name.as_deref().unwrap_or(""))];
    let mailbox = |f: &dyn Fn(&outboard_msg::MailboxInfo) -> u64| counters(m.mailboxes.iter().map(|b| (labels(b), f(b))));
    r.register("mailbox_messages", "Reliable messages the mailbox took", mailbox(&|b| b.stats.messages));
    r.register("mailbox_requests", "Calls the mailbox took", mailbox(&|b| b.stats.requests));
    r.register("mailbox_datagrams", "Datagrams the mailbox took", mailbox(&|b| b.stats.datagrams));
    r.register("mailbox_dropped_full", "Datagrams and requests refused: the mailbox was full", mailbox(&|b| b.stats.dropped_full));
    r.register("mailbox_credit_stalls", "Times a sender was held back for want of room", mailbox(&|b| b.stats.credit_stalls));
    r.register("mailbox_queued", "Messages waiting in the mailbox", gauges(m.mailboxes.iter().map(|b| (labels(b), b.queued_messages))));
    r.register_with_unit(
        "mailbox_used",
        "Bytes of the mailbox's budget in use: waiting, held and promised to senders",
        Unit::Bytes,
        gauges(m.mailboxes.iter().map(|b| (labels(b), b.queued_bytes + b.held_bytes + b.reserved_bytes))),
    );
}

/// Binds `addr` (a taken port or a bad address is the caller's error to
/// report), then serves scrapes of engine `engine` from a thread.
pub fn serve(addr: SocketAddr, engine: String) -> io::Result<SocketAddr> {
    let l = TcpListener::bind(addr)?;
    let bound = l.local_addr()?;
    std::thread::Builder::new().name("outboard-metrics".into()).spawn(move || {
        for c in l.incoming().flatten() {
            let _ = answer(c, &engine);
        }
    })?;
    Ok(bound)
}

fn answer(mut c: TcpStream, engine: &str) -> io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let mut first = line.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let (status, ctype, body) = if method != "GET" {
        ("405 Method Not Allowed", "text/plain", "GET only\n".to_string())
    } else if path != "/metrics" && !path.starts_with("/metrics?") {
        ("404 Not Found", "text/plain", "the metrics are at /metrics\n".to_string())
    } else {
        match outboard_engine::control::query(engine, "stat")
            .and_then(|a| serde_json::from_str::<Snapshot>(&a).map_err(|e| format!("the engine answered badly: {e}")))
            .and_then(|s| encode_snapshot(&s).map_err(|e| format!("encoding: {e}")))
        {
            Ok(b) => ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", b),
            Err(e) => ("503 Service Unavailable", "text/plain", format!("{e}\n")),
        }
    };
    write!(c, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    c.flush()
}
