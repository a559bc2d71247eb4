//! What `outboard stat` shows: a snapshot of one engine, taken by its shard
//! between two loop turns (so it is consistent), sent as JSON over the
//! control socket, and rendered as text like `ss` and `onload_stackdump`.

use crate::link::{LinkCounters, LinkInfo};
use crate::services::ServiceCounters;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnRow {
    pub local: String,
    pub remote: String,
    pub state: String,
    /// The service or client that owns it ("" once released and closing).
    pub owner: String,
    /// The shard that holds it.
    #[serde(default)]
    pub shard: u32,
    pub send_queue: usize,
    pub recv_queue: usize,
    pub cwnd: usize,
    pub srtt_us: u64,
    pub retransmits: u64,
    /// RFC 5961 challenge ACKs sent, and segments dropped as unacceptable.
    pub challenge_acks: u64,
    pub dropped_segments: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub memory: usize,
    /// RFC 3168 ECN negotiated on it.
    #[serde(default)]
    pub ecn: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ShardCounters {
    /// Loop turns, and turns that found work.
    pub turns: u64,
    pub busy_turns: u64,
    /// Times the shard went to sleep on its link.
    pub sleeps: u64,
    /// CPU seconds this shard's thread used, and wall seconds since start.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Turns in which a waiting connection was not accepted: memory over the cap.
    pub accept_paused_turns: u64,
    pub pcap_frames: u64,
    /// Multi-shard engines: frames the link handed this shard for another
    /// shard and sent there, frames other shards sent here, frames dropped
    /// because the ring to their owner was full, and ARP frames copied to
    /// the other shards (shard 0).
    #[serde(default)]
    pub forwarded_out: u64,
    #[serde(default)]
    pub forwarded_in: u64,
    #[serde(default)]
    pub forward_drops: u64,
    #[serde(default)]
    pub arp_copies: u64,
    /// Network-device mode: frames to and from the host kernel's TAP.
    #[serde(default)]
    pub kernel: Option<crate::kernel::KernelCounters>,
    /// Turns the application's own threads ran (an in-process engine shared
    /// with them, `outboard run --inline`); included in `turns`.
    #[serde(default)]
    pub app_turns: u64,
}

impl ShardCounters {
    /// Adds another shard's counters (CPU adds up; wall time is the longest).
    pub fn add(&mut self, o: &ShardCounters) {
        self.turns += o.turns;
        self.busy_turns += o.busy_turns;
        self.sleeps += o.sleeps;
        self.cpu_s += o.cpu_s;
        self.wall_s = self.wall_s.max(o.wall_s);
        self.accept_paused_turns += o.accept_paused_turns;
        self.pcap_frames += o.pcap_frames;
        self.forwarded_out += o.forwarded_out;
        self.forwarded_in += o.forwarded_in;
        self.forward_drops += o.forward_drops;
        self.arp_copies += o.arp_copies;
        self.app_turns += o.app_turns;
        if let Some(k) = o.kernel {
            let mine = self.kernel.get_or_insert_with(Default::default);
            mine.to_kernel += k.to_kernel;
            mine.to_both += k.to_both;
            mine.to_kernel_dropped += k.to_kernel_dropped;
            mine.from_kernel += k.from_kernel;
            mine.from_kernel_dropped += k.from_kernel_dropped;
        }
    }
}

/// One shard of the engine, for `outboard stat` (`shards: [...]` in JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShardRow {
    pub shard: u32,
    #[serde(flatten)]
    pub counters: ShardCounters,
    /// TCP connections the shard holds, and its stack's memory.
    pub connections: usize,
    pub memory_in_use: usize,
    /// Frames this shard's queue of the link received and sent.
    #[serde(default)]
    pub rx_frames: u64,
    #[serde(default)]
    pub tx_frames: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkSnapshot {
    pub kind: String,
    pub name: String,
    pub mode: String,
    pub mtu: usize,
    pub mac: String,
    pub offloads: Vec<String>,
    pub counters: BTreeMap<String, u64>,
}

impl LinkSnapshot {
    pub fn new(info: &LinkInfo, c: &LinkCounters) -> LinkSnapshot {
        let v = serde_json::to_value(c).unwrap_or_default();
        let counters = v
            .as_object()
            .map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), v.as_u64()?))).collect())
            .unwrap_or_default();
        LinkSnapshot {
            kind: info.kind.clone(),
            name: info.name.clone(),
            mode: info.mode.clone(),
            mtu: info.mtu,
            mac: mac_string(&info.mac),
            offloads: info.offloads.clone(),
            counters,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub name: String,
    pub pid: u32,
    pub addr: String,
    pub gateway: Option<String>,
    /// IPv6 addresses, router and MTU; None when the engine runs IPv4 only.
    #[serde(default)]
    pub ipv6: Option<Ipv6Snapshot>,
    pub link: LinkSnapshot,
    /// The engine's shards together (the sum of `shards`).
    pub shard: ShardCounters,
    /// Each shard on its own.
    #[serde(default)]
    pub shards: Vec<ShardRow>,
    /// Every stack counter (frames, drops by reason, checksum failures, ARP, ICMP, TCP, UDP).
    pub stack: BTreeMap<String, u64>,
    pub memory_in_use: usize,
    pub memory_cap: usize,
    pub arp_entries: usize,
    pub connections: Vec<ConnRow>,
    pub services: Vec<ServiceCounters>,
    /// Attached applications (boards) and the host interface's counters.
    #[serde(default)]
    pub boards: Vec<crate::host::BoardRow>,
    #[serde(default)]
    pub host: crate::host::HostCounters,
    /// Bytes of every board mapped now (beside the stack's `memory_in_use`).
    #[serde(default)]
    pub board_memory: usize,
    /// The message service (`--messages`): its mailboxes and counters.
    #[serde(default)]
    pub messages: Option<crate::messages::MessageSnapshot>,
    /// TCP-listener handlers, one row per handler and shard.
    #[serde(default)]
    pub tcp_handlers: Vec<crate::tcp_handlers::TcpHandlerRow>,
}

/// What `outboard stat` shows of IPv6.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ipv6Snapshot {
    /// "ADDR/N STATE ORIGIN", the link-local address first, e.g.
    /// "2001:db8::1/64 preferred static".
    pub addresses: Vec<String>,
    pub router: Option<String>,
    pub mtu: usize,
}

impl Ipv6Snapshot {
    pub fn of(stack: &outboard_stack::Stack) -> Option<Ipv6Snapshot> {
        use outboard_stack::{AddrOrigin, AddrState};
        let mtu = stack.ipv6_mtu()?;
        let addresses = stack
            .ipv6_addresses()
            .iter()
            .map(|a| {
                let state = match a.state {
                    AddrState::Tentative { .. } => "tentative",
                    AddrState::Preferred => "preferred",
                    AddrState::Duplicate => "duplicate",
                };
                let origin = match a.origin {
                    AddrOrigin::LinkLocal => "link-local",
                    AddrOrigin::Static => "static",
                    AddrOrigin::Autoconf { .. } => "slaac",
                };
                format!("{}/{} {state} {origin}", a.addr, a.prefix_len)
            })
            .collect();
        Some(Ipv6Snapshot { addresses, router: stack.ipv6_default_router().map(|r| r.to_string()), mtu })
    }
}

impl Snapshot {
    /// One engine's snapshot from its shards' (each with its own row): the
    /// engine-wide fields are the sums, `shards` lists every shard's row.
    /// `None` for no shards.
    pub fn merge(parts: Vec<Snapshot>) -> Option<Snapshot> {
        let mut it = parts.into_iter();
        let mut all = it.next()?;
        for p in it {
            all.shard.add(&p.shard);
            for (k, v) in p.link.counters {
                *all.link.counters.entry(k).or_insert(0) += v;
            }
            all.shards.extend(p.shards);
            for (k, v) in p.stack {
                *all.stack.entry(k).or_insert(0) += v;
            }
            all.memory_in_use += p.memory_in_use;
            all.arp_entries = all.arp_entries.max(p.arp_entries);
            all.connections.extend(p.connections);
            // A board has a session on every shard (same id): one row, summed.
            for b in p.boards {
                match all.boards.iter_mut().find(|x| x.session == b.session && x.pid == b.pid) {
                    Some(x) => x.add(&b),
                    None => all.boards.push(b),
                }
            }
            all.board_memory += p.board_memory;
            // The message service runs on shard 0 only.
            all.messages = all.messages.or(p.messages);
            all.tcp_handlers.extend(p.tcp_handlers);
            all.host.add(&p.host);
            for (mine, theirs) in all.services.iter_mut().zip(&p.services) {
                mine.add(theirs);
            }
        }
        Some(all)
    }
}

/// The message service's part of `outboard stat`: its counters, then one row per mailbox.
fn messages_section(o: &mut String, m: &crate::messages::MessageSnapshot) {
    let t = &m.stats;
    let _ = writeln!(
        o,
        "\nmessages: udp port {} session {:08x}: frames in {} out {}; calls {} done {} failed {} re-sent {}; run {} replies re-sent {}; \
         messages {} acked {} failed {} frames re-sent {}; datagrams {}",
        m.port,
        m.session,
        t.frames_in,
        t.frames_out,
        t.calls_started,
        t.calls_completed,
        t.calls_failed,
        t.requests_retransmitted,
        t.requests_executed,
        t.replies_resent,
        t.messages_sent,
        t.messages_acked,
        t.messages_failed,
        t.message_frames_retransmitted,
        t.datagrams_sent
    );
    let _ = writeln!(
        o,
        "  drops: malformed {} unsupported {} no-mailbox {} stale-session {} too-big {} mailbox-full {} duplicate {} beyond-credit {} \
         reassembly-timeout {} reassembly-memory {} stray {}; errors sent {} suppressed {}; udp send refused {}",
        t.drop_malformed,
        t.drop_unsupported,
        t.drop_no_mailbox,
        t.drop_stale_session,
        t.drop_too_big,
        t.drop_mailbox_full,
        t.drop_duplicate,
        t.drop_beyond_credit,
        t.drop_reassembly_timeout,
        t.drop_reassembly_memory,
        t.drop_stray,
        t.errors_sent,
        t.errors_suppressed,
        m.udp_send_refused
    );
    let _ = writeln!(
        o,
        "  {:<12} {:<12} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "mailbox", "name", "queued", "queued-b", "held-b", "credit-b", "messages", "requests", "datagrams", "dropped", "stalls"
    );
    for b in &m.mailboxes {
        let _ = writeln!(
            o,
            "  {:<12} {:<12} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7}",
            b.number,
            b.name.as_deref().unwrap_or("-"),
            b.queued_messages,
            b.queued_bytes,
            b.held_bytes,
            b.reserved_bytes,
            b.stats.messages,
            b.stats.requests,
            b.stats.datagrams,
            b.stats.dropped_full,
            b.stats.credit_stalls
        );
    }
    for h in &m.handlers {
        let (i, s) = (&h.info, &h.info.stats);
        let _ = writeln!(
            o,
            "  handler {} on {}: {}; {} KiB module, memory cap {} KiB, deadline {} us, kv {} keys {} B; \
             invocations {} errors {} failed-answers {}; faults: overrun {} out-of-bounds {} stack {} trap {} init {} \
             (in a row {}/{}); instances {} grow-refused {} bad-args {} logs {} dropped {} refused-disabled {}",
            i.name,
            i.attached,
            i.state,
            i.module_bytes.div_ceil(1024),
            i.memory_cap >> 10,
            i.deadline_us,
            i.kv_keys,
            i.kv_bytes,
            s.invocations,
            s.errors_returned,
            h.failed_answers,
            s.overruns,
            s.out_of_bounds,
            s.stack_overflows,
            s.traps,
            s.init_failures,
            i.faults_in_a_row,
            i.max_faults,
            s.instances,
            s.grow_refused,
            s.bad_args,
            s.logs,
            s.logs_dropped,
            s.refused_disabled
        );
    }
}

pub fn mac_string(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

fn mib(b: usize) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// The engine's answer to `stat` (JSON) as a snapshot; `Err` with the
/// answer itself when it is not one (an error from the engine).
pub fn parse(answer: &str) -> Result<Snapshot, String> {
    serde_json::from_str(answer).map_err(|_| answer.to_string())
}

/// The text form of `outboard stat`.
pub fn render(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "engine {} (pid {}) addr {}{}",
        s.name,
        s.pid,
        s.addr,
        s.gateway.as_ref().map_or(String::new(), |g| format!(" gateway {g}"))
    );
    if let Some(v6) = &s.ipv6 {
        let _ = writeln!(
            o,
            "ipv6 {}{} mtu {}",
            v6.addresses.join(", "),
            v6.router.as_ref().map_or(String::new(), |r| format!(" router {r}")),
            v6.mtu
        );
    }
    let _ = writeln!(
        o,
        "link {}:{} mode \"{}\" mtu {} mac {}{}",
        s.link.kind,
        s.link.name,
        s.link.mode,
        s.link.mtu,
        s.link.mac,
        if s.link.offloads.is_empty() { String::new() } else { format!(" offloads {}", s.link.offloads.join(",")) }
    );
    let lc: Vec<String> = s.link.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(o, "  {}", lc.join(" "));
    // An engine from before per-shard rows reports its one shard as the sum.
    let rows = if s.shards.is_empty() {
        vec![ShardRow { counters: s.shard.clone(), connections: s.connections.len(), memory_in_use: s.memory_in_use, ..Default::default() }]
    } else {
        s.shards.clone()
    };
    for r in &rows {
        let c = &r.counters;
        let cpu_pct = if c.wall_s > 0.0 { 100.0 * c.cpu_s / c.wall_s } else { 0.0 };
        let _ = writeln!(
            o,
            "shard {}: turns {}{} busy {} sleeps {} cpu {:.2}s of {:.1}s ({:.1}%) accept-paused {} connections {} frames in {} out {}{}",
            r.shard,
            c.turns,
            if c.app_turns > 0 { format!(" (by the application's threads {})", c.app_turns) } else { String::new() },
            c.busy_turns,
            c.sleeps,
            c.cpu_s,
            c.wall_s,
            cpu_pct,
            c.accept_paused_turns,
            r.connections,
            r.rx_frames,
            r.tx_frames,
            if rows.len() > 1 {
                format!(
                    " forwarded out {} in {} drops {} arp-copies {}",
                    c.forwarded_out, c.forwarded_in, c.forward_drops, c.arp_copies
                )
            } else {
                String::new()
            }
        );
    }
    for r in &rows {
        if let Some(k) = &r.counters.kernel {
            let _ = writeln!(
                o,
                "kernel tap: to the kernel {} frames ({} also the engine's, {} dropped), from the kernel {} ({} dropped)",
                k.to_kernel, k.to_both, k.to_kernel_dropped, k.from_kernel, k.from_kernel_dropped
            );
        }
    }
    let _ = writeln!(
        o,
        "memory {} of cap {}; arp entries {}",
        mib(s.memory_in_use),
        mib(s.memory_cap),
        s.arp_entries
    );
    let _ = writeln!(o, "\nconnections: {}", s.connections.len());
    if !s.connections.is_empty() {
        let _ = writeln!(
            o,
            "{:<22} {:<22} {:<12} {:<10} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "local", "remote", "state", "owner", "send-q", "recv-q", "cwnd", "srtt-us", "retrans"
        );
        for c in &s.connections {
            let _ = writeln!(
                o,
                "{:<22} {:<22} {:<12} {:<10} {:>9} {:>9} {:>9} {:>9} {:>7}",
                c.local, c.remote, c.state, c.owner, c.send_queue, c.recv_queue, c.cwnd, c.srtt_us, c.retransmits
            );
        }
    }
    if !s.services.is_empty() {
        let _ = writeln!(o, "\nservices:");
        for v in &s.services {
            let _ = writeln!(
                o,
                "  {}:{} accepted {} active {} closed {} reset {} bytes in {} out {} udp in {} out {}",
                v.service, v.port, v.tcp_accepted, v.tcp_active, v.tcp_closed, v.tcp_reset, v.bytes_in, v.bytes_out,
                v.udp_datagrams_in, v.udp_datagrams_out
            );
        }
    }
    for h in &s.tcp_handlers {
        let (i, st) = (&h.info, &h.info.stats);
        let _ = writeln!(
            o,
            "\nhandler {} on {} (shard {}): {}; connections accepted {} active {} reset {}; bytes in {} out {}; invocations {} \
             faults: overrun {} out-of-bounds {} stack {} trap {} init {}; instances {} grow-refused {} bad-args {}",
            i.name, i.attached, h.shard, i.state, h.accepted, h.active, h.reset, h.bytes_in, h.bytes_out, st.invocations,
            st.overruns, st.out_of_bounds, st.stack_overflows, st.traps, st.init_failures, st.instances, st.grow_refused, st.bad_args
        );
    }
    if let Some(m) = &s.messages {
        messages_section(&mut o, m);
    }
    let h = &s.host;
    let _ = writeln!(
        o,
        "\nboards: {} attached ({}) — attached {} detached {} died {} violations {}",
        s.boards.len(),
        mib(s.board_memory),
        h.attached,
        h.detached,
        h.died,
        h.violations
    );
    let per = |copied: &str, delivered: u64| match (s.stack.get(copied), delivered) {
        (Some(&c), d) if d > 0 => format!("{:.3}", c as f64 / d as f64),
        _ => "-".to_string(),
    };
    let _ = writeln!(
        o,
        "  delivered through boards: rx {} B, tx {} B; engine copies per delivered byte: rx {}, tx {}",
        h.rx_delivered,
        h.tx_delivered,
        per("tcp_rx_payload_copied", h.rx_delivered),
        per("tcp_tx_payload_copied", h.tx_delivered)
    );
    let (l, ho) = (&h.listeners, &h.handover);
    if l.joined + l.inherit_refused + l.lingered + ho.released + ho.refused > 0 {
        let _ = writeln!(
            o,
            "  shared listeners: joined {} inherit refused {} lingered {} expired {}; streams across fork: released {} adopted {} expired {} refused {}",
            l.joined, l.inherit_refused, l.lingered, l.linger_expired, ho.released, ho.adopted, ho.expired, ho.refused
        );
    }
    for b in &s.boards {
        let _ = writeln!(
            o,
            "  session {} pid {} {} endpoints {} commands {} events {} wakeups {} batched {} accepts {} udp in {} out {}",
            b.session, b.pid, mib(b.board_bytes), b.endpoints, b.commands, b.events, b.signals, b.batched, b.accepts,
            b.datagrams_in, b.datagrams_out
        );
        if b.bad_options != 0 {
            let _ = writeln!(o, "    bad options {}", b.bad_options);
        }
        if !b.app.is_empty() {
            let app: Vec<String> = b.app.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(o, "    app: {}", app.join(" "));
        }
    }
    let _ = writeln!(o, "\ncounters (non-zero):");
    for (k, v) in s.stack.iter().filter(|(_, v)| **v != 0) {
        let _ = writeln!(o, "  {k:<40} {v}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(shard: u32, turns: u64, conns: usize, counter: u64) -> Snapshot {
        let counters = ShardCounters { turns, cpu_s: 1.0, wall_s: 2.0 + f64::from(shard), ..Default::default() };
        let row = |i: usize| ConnRow {
            local: format!("10.0.0.1:{i}"),
            remote: "10.0.0.2:7".into(),
            state: "Established".into(),
            owner: String::new(),
            shard,
            send_queue: 0,
            recv_queue: 0,
            cwnd: 0,
            srtt_us: 0,
            retransmits: 0,
            challenge_acks: 0,
            dropped_segments: 0,
            bytes_in: 0,
            bytes_out: 0,
            memory: 0,
            ecn: false,
        };
        Snapshot {
            name: "e".into(),
            pid: 1,
            addr: "10.0.0.1/24".into(),
            gateway: None,
            ipv6: None,
            link: LinkSnapshot::new(
                &LinkInfo { kind: "fabric".into(), name: "f".into(), mode: String::new(), mtu: 1500, mac: [0; 6], offloads: Vec::new() },
                &LinkCounters::default(),
            ),
            shard: counters.clone(),
            shards: vec![ShardRow { shard, counters, connections: conns, memory_in_use: 100, ..Default::default() }],
            stack: [("frames_in".to_string(), counter)].into_iter().collect(),
            memory_in_use: 100,
            memory_cap: 1000,
            arp_entries: 1,
            connections: (0..conns).map(row).collect(),
            services: Vec::new(),
            boards: Vec::new(),
            host: Default::default(),
            board_memory: 0,
            messages: None,
            tcp_handlers: Vec::new(),
        }
    }

    #[test]
    fn an_engine_snapshot_lists_every_shard_and_sums_them() {
        let all = Snapshot::merge(vec![snap(0, 10, 2, 5), snap(1, 7, 3, 4)]).unwrap();
        assert_eq!(all.shards.iter().map(|r| r.shard).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(all.shard.turns, 17);
        assert_eq!(all.shard.cpu_s, 2.0);
        assert_eq!(all.shard.wall_s, 3.0, "wall time is the longest, not a sum");
        assert_eq!(all.connections.len(), 5);
        assert_eq!(all.stack["frames_in"], 9);
        assert_eq!(all.memory_in_use, 200);
        let json = serde_json::to_value(&all).unwrap();
        assert_eq!(json["shards"].as_array().unwrap().len(), 2);
        assert_eq!(json["shards"][1]["turns"], 7, "a row carries its counters flat");
        assert_eq!(json["shard"]["turns"], 17, "the old field stays, as the sum");
        let text = render(&all);
        assert!(text.contains("shard 0: turns 10") && text.contains("shard 1: turns 7"), "{text}");
        assert!(Snapshot::merge(Vec::new()).is_none());
    }

    #[test]
    fn a_snapshot_without_shard_rows_still_parses_and_renders() {
        let mut v = serde_json::to_value(snap(0, 3, 0, 1)).unwrap();
        v.as_object_mut().unwrap().remove("shards");
        let s: Snapshot = serde_json::from_value(v).unwrap();
        assert!(s.shards.is_empty());
        assert!(render(&s).contains("shard 0: turns 3"));
    }
}
