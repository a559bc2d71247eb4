//! The message services on the simulator: real stacks, UDP, seeded faults.
//!
//! A matrix of fault cases × seeds for each service, each run checked to
//! the byte:
//! - reliable messages: every one delivered once, in order, byte-exact,
//!   acknowledged to the sender, and the receiving mailbox never over its budget
//!   (a slow reader makes senders wait for credit);
//! - calls: every call answered with the right response and run at most once
//!   (the server counts runs per call id), whatever the network did;
//! - datagrams: a delivered datagram is always one that was sent, whole and intact.
//!
//! Then the failure cases: a server that goes silent, a server that restarts,
//! a mailbox that nobody reads, an unknown mailbox, a name that is not bound.
//! `OUTBOARD_MSG_SEEDS` changes the number of seeds per case (default 16).

use outboard_msg::{CallError, Config, DeliveryKind, Endpoint, Event, MailboxAddr, MessageError, SendError};
use outboard_sim::msg::{drive, look_up, msg_addr, msg_addr6, of_msg_hosts, MsgHost, APP_TICK as TICK};
use outboard_sim::network::{Network, StackNetConfig};
use outboard_sim::{FaultConfig, Rng};
use outboard_time::{Duration, Instant};
use std::collections::HashMap;

fn seeds() -> std::ops::Range<u64> {
    let n = std::env::var("OUTBOARD_MSG_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    1..n + 1
}

fn base_link() -> FaultConfig {
    FaultConfig {
        delay: Duration::from_millis(1),
        bandwidth_bps: 100_000_000,
        ..FaultConfig::default()
    }
}

/// The fault cases every service runs under.
fn cases() -> Vec<(&'static str, FaultConfig)> {
    let b = base_link();
    vec![
        ("clean", b.clone()),
        ("loss 5%", FaultConfig { loss: 0.05, ..b.clone() }),
        ("duplicate 5%", FaultConfig { duplicate: 0.05, ..b.clone() }),
        (
            "reorder 10% + jitter",
            FaultConfig { reorder: 0.10, reorder_delay: Duration::from_millis(3), jitter: Duration::from_micros(500), ..b.clone() },
        ),
        ("corrupt 1%", FaultConfig { corrupt: 0.01, ..b.clone() }),
        ("delay 20 ms + jitter", FaultConfig { delay: Duration::from_millis(20), jitter: Duration::from_millis(5), ..b.clone() }),
        (
            "mixed",
            FaultConfig {
                loss: 0.02,
                duplicate: 0.02,
                reorder: 0.05,
                corrupt: 0.005,
                jitter: Duration::from_millis(1),
                ..b
            },
        ),
    ]
}

/// Two message hosts whose ARP caches are warm (a lookup round trip on a
/// clean link: the stack holds only a few datagrams while it resolves, as
/// Linux's unres_qlen), then with `link` in both directions.
fn network(seed: u64, link: FaultConfig, msg: &Config) -> Network<MsgHost> {
    let cfg = StackNetConfig { hosts: 2, mtu: 1500, tcp: Default::default(), link: base_link(), seed, ipv6: false };
    let mut net = of_msg_hosts(&cfg, msg);
    let answer = look_up(&mut net, 0, 1, "warm-up").expect("a lookup on a clean link is answered");
    assert!(answer.is_err(), "no mailbox is called warm-up");
    net.link_mut(0, 1).set_config(link.clone());
    net.link_mut(1, 0).set_config(link);
    net
}

/// Message `i`'s bytes for a run: its index first, then seeded bytes.
fn body(seed: u64, i: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(8)];
    v[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Rng::derive(seed, 1000 + i as u64).fill_bytes(&mut v[8..]);
    v.truncate(len.max(8));
    v
}

/// A size drawn from a mix: small (most), a few frames, and up to ~60 KB.
fn size(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=3 => 8 + rng.below(100) as usize,
        4..=7 => 100 + rng.below(5000) as usize,
        _ => 5000 + rng.below(55_000) as usize,
    }
}

fn matrix(service: &str, each: impl Fn(u64, FaultConfig) -> Result<(), String> + Sync) {
    let jobs: Vec<(&str, FaultConfig, u64)> =
        cases().into_iter().flat_map(|(name, link)| seeds().map(move |s| (name, link.clone(), s))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, link, seed)) = jobs.get(i) else { break };
                if let Err(e) = each(*seed, link.clone()) {
                    failures.lock().unwrap().push(format!("{service}, {name}, seed {seed}: {e}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} runs failed:\n{}", failures.len(), jobs.len(), failures.join("\n"));
}

// --- reliable messages ---

fn reliable_run(seed: u64, link: FaultConfig) -> Result<(), String> {
    // A mailbox of 256 KiB and a reader that takes 4 messages a millisecond:
    // senders run out of credit and must wait, never overrun.
    let msg = Config { mailbox_capacity: 256 << 10, send_queue: 512 << 10, ..Config::default() };
    let mut net = network(seed, link, &msg);
    net.host_mut(0).ep.bind(Some(1), None).map_err(|e| e.to_string())?;
    net.host_mut(1).ep.bind(Some(2), Some("sink")).map_err(|e| e.to_string())?;
    let to = MailboxAddr::new(msg_addr(1), 2);
    let from = MailboxAddr::new(msg_addr(0), 1);
    let mut rng = Rng::derive(seed, 7);
    let n = 150;
    let sizes: Vec<usize> = (0..n).map(|_| size(&mut rng)).collect();
    let (mut sent, mut acked, mut received) = (0, 0, 0);
    let mut next_read = Instant::ZERO;
    drive(&mut net, Duration::from_secs(300), |net, now| {
        while sent < n {
            match net.host_mut(0).ep.send_message(now, 1, to, &body(seed, sent, sizes[sent])) {
                Ok(_) => sent += 1,
                Err(SendError::QueueFull) => break,
                Err(e) => return Err(format!("send {sent}: {e}")),
            }
        }
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::MessageAcked { .. } => acked += 1,
                Event::MessageFailed { message, error } => return Err(format!("{message:?} failed: {error}")),
                _ => {}
            }
        }
        while net.host_mut(1).ep.poll_event().is_some() {}
        if now >= next_read {
            next_read = now + TICK;
            for _ in 0..4 {
                let Some(d) = net.host_mut(1).ep.recv(now, 2) else { break };
                if d.kind != DeliveryKind::Message || d.from != from {
                    return Err(format!("message {received}: {:?} from {}", d.kind, d.from));
                }
                if d.data != body(seed, received, sizes[received]) {
                    let got = u64::from_be_bytes(d.data[..8].try_into().unwrap_or([0xff; 8]));
                    return Err(format!("message {received}: wrong bytes (index field {got}, {} bytes)", d.data.len()));
                }
                received += 1;
            }
        }
        let mb = net.host(1).ep.mailbox(2).expect("bound");
        if mb.queued_bytes + mb.held_bytes + mb.reserved_bytes > mb.capacity + mb.queued_messages * 64 {
            return Err(format!("mailbox over its budget: {mb:?}"));
        }
        Ok(received == n && acked == n)
    })
    .map_err(|e| format!("{e} ({received} of {n} received, {acked} acked; sender {:?})", net.host(0).ep.stats()))?;
    if std::env::var("DBG").is_ok() { eprintln!("seed {seed} t={:?} snd {:?} rcv {:?} mb {:?}", net.now(), net.host(0).ep.stats(), net.host(1).ep.stats(), net.host(1).ep.mailbox(2)); }
    if net.host(1).ep.mailbox(2).expect("bound").queued_messages != 0 {
        return Err("a message was delivered twice".into());
    }
    Ok(())
}

#[test]
fn reliable_messages_arrive_once_in_order_byte_exact_under_every_fault() {
    matrix("reliable", reliable_run);
}

// --- request-response ---

fn response_to(request: &[u8]) -> Vec<u8> {
    let mut r: Vec<u8> = request.iter().rev().map(|b| b ^ 0x5a).collect();
    r.extend_from_slice(&(request.len() as u32).to_be_bytes());
    r
}

fn rpc_run(seed: u64, link: FaultConfig) -> Result<(), String> {
    let mut net = network(seed, link, &Config::default());
    net.host_mut(0).ep.bind(Some(1), None).map_err(|e| e.to_string())?;
    net.host_mut(1).ep.bind(Some(10), Some("kv")).map_err(|e| e.to_string())?;
    let now = net.now();
    let lookup = net.host_mut(0).ep.lookup(now, msg_addr(1), "kv").map_err(|e| e.to_string())?;
    let mut server_addr = None;
    let mut rng = Rng::derive(seed, 9);
    let n = 300;
    let sizes: Vec<usize> = (0..n).map(|_| if rng.chance(0.9) { rng.below(3000) as usize } else { size(&mut rng) }).collect();
    let mut started = 0;
    let mut index_of_call = HashMap::new();
    let mut done = 0;
    let mut runs: HashMap<u64, u32> = HashMap::new();
    let mut deferred: Vec<(Instant, outboard_msg::CallToken, Vec<u8>)> = Vec::new();
    drive(&mut net, Duration::from_secs(300), |net, now| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::LookupDone { lookup: l, result } if l == lookup => {
                    let a = result.map_err(|e| format!("lookup: {e}"))?;
                    if a != MailboxAddr::new(msg_addr(1), 10) {
                        return Err(format!("lookup found {a}"));
                    }
                    server_addr = Some(a);
                }
                Event::CallDone { call, result } => {
                    let i = index_of_call.remove(&call).ok_or(format!("{call:?} finished twice or never started"))?;
                    let resp = result.map_err(|e| format!("call {i}: {e}"))?;
                    if resp != response_to(&body(seed, i, sizes[i])) {
                        return Err(format!("call {i}: wrong response ({} bytes)", resp.len()));
                    }
                    done += 1;
                }
                _ => {}
            }
        }
        if let Some(to) = server_addr {
            while started < n && net.host(0).ep.outstanding_calls() < 16 {
                let call = net.host_mut(0).ep.call(now, 1, to, &body(seed, started, sizes[started]), None).map_err(|e| e.to_string())?;
                index_of_call.insert(call, started);
                started += 1;
            }
        }
        // The server: runs each request it is given, and answers every
        // seventh only after 25 ms (the client re-sends meanwhile).
        let srv = &mut net.host_mut(1).ep;
        while srv.poll_event().is_some() {}
        while let Some(d) = srv.recv(now, 10) {
            let DeliveryKind::Request(token) = d.kind else { return Err(format!("{:?} in the server's mailbox", d.kind)) };
            *runs.entry(token.call_id()).or_default() += 1;
            let resp = response_to(&d.data);
            if token.call_id() % 7 == 0 {
                deferred.push((now + Duration::from_millis(25), token, resp));
            } else {
                srv.reply(now, &token, &resp).map_err(|e| e.to_string())?;
            }
        }
        let mut i = 0;
        while i < deferred.len() {
            if deferred[i].0 <= now {
                let (_, token, resp) = deferred.swap_remove(i);
                srv.reply(now, &token, &resp).map_err(|e| e.to_string())?;
            } else {
                i += 1;
            }
        }
        Ok(done == n)
    })
    .map_err(|e| format!("{e} ({done} of {n} done; client {:?})", net.host(0).ep.stats()))?;
    if let Some((id, k)) = runs.iter().find(|(_, &k)| k > 1) {
        return Err(format!("call {id} ran {k} times"));
    }
    if std::env::var("DBG").is_ok() { eprintln!("seed {seed} t={:?} cli {:?} srv {:?}", net.now(), net.host(0).ep.stats(), net.host(1).ep.stats()); }
    let executed = net.host(1).ep.stats().requests_executed;
    if runs.len() != n || executed != n as u64 {
        return Err(format!("{} calls ran, the server counted {executed}, {n} were made", runs.len()));
    }
    Ok(())
}

#[test]
fn every_call_runs_at_most_once_and_gets_its_reply_under_every_fault() {
    matrix("rpc", rpc_run);
}

// --- datagrams ---

fn datagram_run(seed: u64, link: FaultConfig) -> Result<(), String> {
    let clean = link == base_link();
    let mut net = network(seed, link, &Config::default());
    net.host_mut(0).ep.bind(Some(1), None).map_err(|e| e.to_string())?;
    net.host_mut(1).ep.bind(Some(2), None).map_err(|e| e.to_string())?;
    let to = MailboxAddr::new(msg_addr(1), 2);
    let mut rng = Rng::derive(seed, 11);
    let n = 300;
    let sizes: Vec<usize> = (0..n).map(|_| 8 + rng.below(4000) as usize).collect();
    let mut sent = 0;
    let mut seen = vec![0u32; n];
    let mut quiet_since = None;
    let mut next_send = Instant::ZERO;
    drive(&mut net, Duration::from_secs(30), |net, now| {
        // Paced at three a millisecond (about 50 Mbit/s on a 100 Mbit/s link):
        // datagrams have no congestion control, and the link's queue would drop a flood.
        if now >= next_send {
            next_send = now + TICK;
            for _ in 0..3 {
                if sent == n {
                    break;
                }
                net.host_mut(0).ep.send_datagram(now, 1, to, &body(seed, sent, sizes[sent])).map_err(|e| e.to_string())?;
                sent += 1;
            }
        }
        while let Some(d) = net.host_mut(1).ep.recv(now, 2) {
            let i = u64::from_be_bytes(d.data[..8].try_into().map_err(|_| "a datagram under 8 bytes")?) as usize;
            if i >= n || d.data != body(seed, i, sizes[i]) {
                return Err(format!("datagram claiming index {i}: not one that was sent ({} bytes)", d.data.len()));
            }
            seen[i] += 1;
        }
        while net.host_mut(1).ep.poll_event().is_some() {}
        // Done once everything was sent and the network has been quiet a while.
        if sent == n && net.in_flight() == 0 {
            let t = *quiet_since.get_or_insert(now);
            return Ok(now.saturating_duration_since(t) > Duration::from_secs(3));
        }
        quiet_since = None;
        Ok(false)
    })?;
    let delivered = seen.iter().filter(|&&k| k > 0).count();
    if clean && delivered != n {
        return Err(format!(
            "{delivered} of {n} delivered on a clean link (sender refused {}; receiver {:?}; stack {:?})",
            net.host(0).send_refused,
            net.host(1).ep.stats(),
            net.host(1).stack.stats()
        ));
    }
    if delivered < n / 2 {
        return Err(format!("only {delivered} of {n} delivered"));
    }
    Ok(())
}

#[test]
fn datagrams_arrive_whole_and_intact_or_not_at_all_under_every_fault() {
    matrix("datagram", datagram_run);
}

// --- failures ---

fn two_hosts(seed: u64) -> Network<MsgHost> {
    let mut net = network(seed, base_link(), &Config::default());
    net.host_mut(0).ep.bind(Some(1), None).unwrap();
    net.host_mut(1).ep.bind(Some(10), Some("svc")).unwrap();
    net
}

/// Runs until host 0 reports an event `pick` accepts; returns it and the virtual time it took.
fn until_event<T>(net: &mut Network<MsgHost>, limit: Duration, mut pick: impl FnMut(Event) -> Option<T>) -> (T, Duration) {
    let start = net.now();
    let mut got = None;
    drive(net, limit, |net, _| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            if let Some(v) = pick(e) {
                got = Some(v);
            }
        }
        Ok(got.is_some())
    })
    .expect("the event came");
    (got.expect("set"), net.now().saturating_duration_since(start))
}

#[test]
fn a_server_that_goes_silent_mid_call_gives_a_timeout_within_the_calls_timeout() {
    let mut net = two_hosts(1);
    let to = MailboxAddr::new(msg_addr(1), 10);
    let now = net.now();
    let call = net.host_mut(0).ep.call(now, 1, to, b"hello", Some(Duration::from_secs(2))).unwrap();
    // The request arrives; then the server's engine vanishes from the network.
    drive(&mut net, Duration::from_secs(1), |net, _| Ok(net.host(1).ep.mailbox(10).unwrap().queued_messages == 1)).unwrap();
    net.link_mut(1, 0).set_config(FaultConfig { loss: 1.0, ..base_link() });
    net.link_mut(0, 1).set_config(FaultConfig { loss: 1.0, ..base_link() });
    let (result, took) = until_event(&mut net, Duration::from_secs(5), |e| match e {
        Event::CallDone { call: c, result } if c == call => Some(result),
        _ => None,
    });
    assert_eq!(result, Err(CallError::TimedOut));
    assert!(took <= Duration::from_secs(2), "timed out after {took:?}");
    assert!(net.host(0).ep.stats().requests_retransmitted > 0);
}

#[test]
fn a_server_that_restarts_refuses_the_old_sessions_calls_and_serves_new_ones() {
    let mut net = two_hosts(2);
    let to = MailboxAddr::new(msg_addr(1), 10);
    // One call completes, so the client knows the server's session.
    let now = net.now();
    let first = net.host_mut(0).ep.call(now, 1, to, b"one", None).unwrap();
    let mut answered = false;
    drive(&mut net, Duration::from_secs(1), |net, now| {
        if let Some(d) = net.host_mut(1).ep.recv(now, 10) {
            let DeliveryKind::Request(t) = d.kind else { panic!("a request") };
            net.host_mut(1).ep.reply(now, &t, b"ONE").unwrap();
            answered = true;
        }
        Ok(answered)
    })
    .unwrap();
    let (r, _) = until_event(&mut net, Duration::from_secs(1), |e| match e {
        Event::CallDone { call, result } if call == first => Some(result),
        _ => None,
    });
    assert_eq!(r.as_deref(), Ok(&b"ONE"[..]));
    // The server's engine restarts (a new session) before the second call's request arrives.
    let now = net.now();
    let second = net.host_mut(0).ep.call(now, 1, to, b"two", None).unwrap();
    let mut fresh = Endpoint::new(Config::default(), 0xdead_beef);
    fresh.bind(Some(10), Some("svc")).unwrap();
    net.host_mut(1).restart(fresh);
    let (r, _) = until_event(&mut net, Duration::from_secs(5), |e| match e {
        Event::CallDone { call, result } if call == second => Some(result),
        _ => None,
    });
    assert_eq!(r, Err(CallError::ServerRestarted));
    assert_eq!(net.host(1).ep.stats().requests_executed, 0, "the old session's call never runs on the new engine");
    // A new call reaches the new engine.
    let now = net.now();
    let third = net.host_mut(0).ep.call(now, 1, to, b"three", None).unwrap();
    let mut answered = false;
    drive(&mut net, Duration::from_secs(1), |net, now| {
        if let Some(d) = net.host_mut(1).ep.recv(now, 10) {
            let DeliveryKind::Request(t) = d.kind else { panic!("a request") };
            net.host_mut(1).ep.reply(now, &t, b"THREE").unwrap();
            answered = true;
        }
        Ok(answered)
    })
    .unwrap();
    let (r, _) = until_event(&mut net, Duration::from_secs(1), |e| match e {
        Event::CallDone { call, result } if call == third => Some(result),
        _ => None,
    });
    assert_eq!(r.as_deref(), Ok(&b"THREE"[..]));
}

/// A server that fails on a request (a handler that trapped) answers it as
/// failed, once: under loss the failed answer is re-sent like any reply, the
/// request is never run twice, and the next call is served normally.
#[test]
fn a_request_the_server_failed_on_ends_the_call_as_failed_once_even_under_loss() {
    for seed in 0..8 {
        let mut net = network(100 + seed, FaultConfig { loss: 0.2, ..base_link() }, &Config::default());
        net.host_mut(0).ep.bind(Some(1), None).unwrap();
        net.host_mut(1).ep.bind(Some(10), Some("svc")).unwrap();
        let to = MailboxAddr::new(msg_addr(1), 10);
        let now = net.now();
        let failing = net.host_mut(0).ep.call(now, 1, to, b"fail", None).unwrap();
        let ok = net.host_mut(0).ep.call(now, 1, to, b"ok", None).unwrap();
        let mut results = Vec::new();
        drive(&mut net, Duration::from_secs(20), |net, now| {
            while let Some(d) = net.host_mut(1).ep.recv(now, 10) {
                let DeliveryKind::Request(t) = d.kind else { panic!("a request") };
                if d.data == b"fail" {
                    net.host_mut(1).ep.reply_failed(now, &t).unwrap();
                } else {
                    net.host_mut(1).ep.reply(now, &t, b"OK").unwrap();
                }
            }
            while let Some(e) = net.host_mut(0).ep.poll_event() {
                if let Event::CallDone { call, result } = e {
                    results.push((call, result));
                }
            }
            Ok(results.len() == 2)
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        results.sort_by_key(|(c, _)| *c == ok);
        assert_eq!(results[0], (failing, Err(CallError::Failed)), "seed {seed}");
        assert_eq!(results[1], (ok, Ok(b"OK".to_vec())), "seed {seed}");
        assert_eq!(net.host(1).ep.stats().requests_executed, 2, "seed {seed}: each request ran once");
    }
}

/// A call lost early while many later ones finish: the server remembers
/// every finished call above the client's oldest unfinished one, so the
/// client starts no call further than the server remembers past it (else the
/// lost call's re-sent request finds the server's table full and is refused
/// as busy until it times out, and every later call with it).
#[test]
fn a_call_lost_early_is_not_shut_out_by_the_later_calls_the_server_remembers() {
    let msg = Config { max_server_calls_per_client: 64, ..Config::default() };
    for seed in 0..4 {
        let mut net = network(200 + seed, FaultConfig { loss: 0.05, ..base_link() }, &msg);
        net.host_mut(0).ep.bind(Some(1), None).unwrap();
        net.host_mut(1).ep.bind(Some(10), None).unwrap();
        let to = MailboxAddr::new(msg_addr(1), 10);
        let (total, mut started, mut done) = (3000u64, 0u64, 0u64);
        drive(&mut net, Duration::from_secs(60), |net, now| {
            while started < total && started - done < 200 {
                match net.host_mut(0).ep.call(now, 1, to, &started.to_be_bytes(), None) {
                    Ok(_) => started += 1,
                    Err(SendError::QueueFull) => break,
                    Err(e) => return Err(format!("call: {e}")),
                }
            }
            while let Some(d) = net.host_mut(1).ep.recv(now, 10) {
                let DeliveryKind::Request(t) = d.kind else { panic!("a request") };
                net.host_mut(1).ep.reply(now, &t, &d.data).unwrap();
            }
            while let Some(e) = net.host_mut(0).ep.poll_event() {
                if let Event::CallDone { result, .. } = e {
                    result.map_err(|e| format!("call {done}: {e}"))?;
                    done += 1;
                }
            }
            Ok(done == total)
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(net.host(1).ep.stats().requests_executed, total);
    }
}

#[test]
fn a_full_mailbox_holds_senders_back_and_loses_nothing() {
    let msg = Config { mailbox_capacity: 64 << 10, message_timeout: Duration::from_secs(2), ..Config::default() };
    let mut net = network(3, base_link(), &msg);
    net.host_mut(0).ep.bind(Some(1), None).unwrap();
    net.host_mut(1).ep.bind(Some(2), None).unwrap();
    let to = MailboxAddr::new(msg_addr(1), 2);
    let n = 40;
    let now = net.now();
    for i in 0..n {
        net.host_mut(0).ep.send_message(now, 1, to, &body(4, i, 10_000)).unwrap();
    }
    // Nobody reads for 10 s: five message timeouts. The receiver answers
    // probes, so the sender waits instead of failing.
    let end = net.now() + Duration::from_secs(10);
    drive(&mut net, Duration::from_secs(11), |net, now| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            assert!(!matches!(e, Event::MessageFailed { .. }), "{e:?}");
        }
        let mb = net.host(1).ep.mailbox(2).unwrap();
        assert!(mb.queued_bytes + mb.held_bytes <= mb.capacity, "{mb:?}");
        Ok(now >= end)
    })
    .unwrap();
    let stalled = net.host(1).ep.mailbox(2).unwrap();
    assert!(stalled.queued_messages < n && stalled.queued_messages > 0, "{stalled:?}");
    assert!(stalled.stats.credit_stalls > 0);
    assert!(net.host(0).ep.stats().probes_sent > 0);
    // Now the reader comes: everything arrives, in order.
    let mut got = 0;
    drive(&mut net, Duration::from_secs(10), |net, now| {
        while let Some(d) = net.host_mut(1).ep.recv(now, 2) {
            assert_eq!(d.data, body(4, got, 10_000), "message {got}");
            got += 1;
        }
        Ok(got == n)
    })
    .unwrap();
}

#[test]
fn an_unknown_mailbox_is_counted_and_answered() {
    let mut net = two_hosts(4);
    let nowhere = MailboxAddr::new(msg_addr(1), 99);
    let before = net.host(1).ep.stats();
    let now = net.now();
    let m = net.host_mut(0).ep.send_message(now, 1, nowhere, b"anyone?").unwrap();
    let c = net.host_mut(0).ep.call(now, 1, nowhere, b"anyone?", None).unwrap();
    net.host_mut(0).ep.send_datagram(now, 1, nowhere, b"anyone?").unwrap();
    let l = net.host_mut(0).ep.lookup(now, msg_addr(1), "nobody").unwrap();
    let mut seen = (None, None, None);
    drive(&mut net, Duration::from_secs(1), |net, _| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::MessageFailed { message, error } if message == m => seen.0 = Some(error),
                Event::CallDone { call, result } if call == c => seen.1 = Some(result),
                Event::LookupDone { lookup, result } if lookup == l => seen.2 = Some(result),
                other => panic!("unexpected {other:?}"),
            }
        }
        Ok(seen.0.is_some() && seen.1.is_some() && seen.2.is_some())
    })
    .unwrap();
    assert_eq!(seen.0, Some(MessageError::NoMailbox));
    assert_eq!(seen.1, Some(Err(CallError::NoMailbox)));
    assert_eq!(seen.2, Some(Err(outboard_msg::LookupError::NoName)));
    let s = net.host(1).ep.stats();
    assert_eq!(s.drop_no_mailbox - before.drop_no_mailbox, 3, "{s:?}");
    assert_eq!(s.errors_sent - before.errors_sent, 3, "message, call and lookup answered; the datagram not: {s:?}");
}

#[test]
fn senders_into_one_small_mailbox_share_it_and_an_idle_one_gives_its_credit_back() {
    let msg = Config { mailbox_capacity: 128 << 10, ..Config::default() };
    let cfg = StackNetConfig { hosts: 3, mtu: 1500, tcp: Default::default(), link: base_link(), seed: 5, ipv6: false };
    let mut net = of_msg_hosts(&cfg, &msg);
    net.host_mut(0).ep.bind(Some(1), None).unwrap();
    net.host_mut(2).ep.bind(Some(1), None).unwrap();
    net.host_mut(1).ep.bind(Some(2), None).unwrap();
    let to = MailboxAddr::new(msg_addr(1), 2);
    // Host 0 sends a burst and falls silent, keeping whatever credit it was given;
    // host 2 then sends five times as much and needs that room.
    let now = net.now();
    for i in 0..10 {
        net.host_mut(0).ep.send_message(now, 1, to, &body(50, i, 20_000)).unwrap();
    }
    let mut next = 0;
    let mut got = [0usize; 2];
    drive(&mut net, Duration::from_secs(30), |net, now| {
        if now >= Instant::from_millis(50) {
            while next < 50 && net.host_mut(2).ep.send_message(now, 1, to, &body(52, next, 20_000)).is_ok() {
                next += 1;
            }
        }
        for h in [0, 2] {
            while let Some(e) = net.host_mut(h).ep.poll_event() {
                assert!(!matches!(e, Event::MessageFailed { .. }), "host {h}: {e:?}");
            }
        }
        while let Some(d) = net.host_mut(1).ep.recv(now, 2) {
            let (k, seed) = if d.from.host == msg_addr(0) { (0, 50) } else { (1, 52) };
            assert_eq!(d.data, body(seed, got[k], 20_000), "sender {k}, message {}", got[k]);
            got[k] += 1;
        }
        Ok(got == [10, 50])
    })
    .unwrap_or_else(|e| panic!("{e}: got {got:?}"));
}

#[test]
fn messages_and_calls_of_one_mib_cross_a_lossy_link_whole() {
    let link = FaultConfig { loss: 0.02, reorder: 0.05, duplicate: 0.01, ..base_link() };
    let mut net = network(6, link, &Config::default());
    net.host_mut(0).ep.bind(Some(1), None).unwrap();
    net.host_mut(1).ep.bind(Some(2), None).unwrap();
    let to = MailboxAddr::new(msg_addr(1), 2);
    // The request leaves room for the 4 bytes the response adds, within the 1 MiB limit.
    let big = |i: usize| body(60 + i as u64, i, if i == 3 { (1 << 20) - 4 } else { 1 << 20 });
    let now = net.now();
    for i in 0..3 {
        net.host_mut(0).ep.send_message(now, 1, to, &big(i)).unwrap();
    }
    let call = net.host_mut(0).ep.call(now, 1, to, &big(3), Some(Duration::from_secs(30))).unwrap();
    let (mut got, mut answered, mut done) = (0, false, None);
    drive(&mut net, Duration::from_secs(60), |net, now| {
        while let Some(d) = net.host_mut(1).ep.recv(now, 2) {
            match d.kind {
                DeliveryKind::Message => {
                    assert_eq!(d.data, big(got), "message {got}");
                    got += 1;
                }
                DeliveryKind::Request(t) => {
                    assert_eq!(d.data, big(3));
                    net.host_mut(1).ep.reply(now, &t, &response_to(&d.data)).unwrap();
                    answered = true;
                }
                DeliveryKind::Datagram => panic!("no datagram was sent"),
            }
        }
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::CallDone { call: c, result } if c == call => done = Some(result),
                Event::MessageFailed { .. } => panic!("{e:?}"),
                _ => {}
            }
        }
        Ok(got == 3 && done.is_some())
    })
    .unwrap();
    assert!(answered, "{:?} after {:?}: client {:?} server {:?}", done.as_ref().map(|r| r.as_ref().map(Vec::len)), net.now(), net.host(0).ep.stats(), net.host(1).ep.stats());
    assert_eq!(done, Some(Ok(response_to(&big(3)))));
    assert_eq!(net.host(1).ep.stats().requests_executed, 1);
}

#[test]
fn the_services_run_over_ipv6_too() {
    let link = FaultConfig { loss: 0.02, reorder: 0.05, ..base_link() };
    let cfg = StackNetConfig { hosts: 2, mtu: 1500, tcp: Default::default(), link, seed: 8, ipv6: true };
    let mut net = of_msg_hosts(&cfg, &Config::default());
    net.host_mut(0).ep.bind(Some(1), None).unwrap();
    net.host_mut(1).ep.bind(Some(2), Some("six")).unwrap();
    let now = net.now();
    let lookup = net.host_mut(0).ep.lookup(now, msg_addr6(1), "six").unwrap();
    let (mut to, mut got, mut calls_done, mut started) = (None, 0, 0, false);
    drive(&mut net, Duration::from_secs(30), |net, now| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::LookupDone { lookup: l, result } if l == lookup => to = Some(result.expect("found over IPv6")),
                Event::CallDone { result, .. } => {
                    assert_eq!(result.expect("answered"), b"pong");
                    calls_done += 1;
                }
                Event::MessageFailed { .. } => panic!("{e:?}"),
                _ => {}
            }
        }
        if let (Some(to), false) = (to, started) {
            assert_eq!(to, MailboxAddr::new(msg_addr6(1), 2));
            for i in 0..20 {
                net.host_mut(0).ep.send_message(now, 1, to, &body(8, i, 3000)).unwrap();
                net.host_mut(0).ep.call(now, 1, to, b"ping", None).unwrap();
            }
            started = true;
        }
        while let Some(d) = net.host_mut(1).ep.recv(now, 2) {
            assert_eq!(d.from, MailboxAddr::new(msg_addr6(0), 1), "the sender's IPv6 address");
            match d.kind {
                DeliveryKind::Message => {
                    assert_eq!(d.data, body(8, got, 3000));
                    got += 1;
                }
                DeliveryKind::Request(t) => net.host_mut(1).ep.reply(now, &t, b"pong").unwrap(),
                DeliveryKind::Datagram => panic!("no datagrams were sent"),
            }
        }
        Ok(got == 20 && calls_done == 20)
    })
    .unwrap();
    // Frames are sized for IPv6's header, so none needed IP fragmentation.
    assert_eq!(net.host(0).stack.stats().fragments_out, 0);
}
