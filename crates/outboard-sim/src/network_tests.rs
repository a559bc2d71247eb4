use super::*;
use outboard_time::Duration;

/// A fake host: records what it receives, sends what the test queues, and
/// answers every unicast frame with one reply when `echo` is set.
#[derive(Default)]
struct Fake {
    mac: [u8; 6],
    outbox: Vec<Vec<u8>>,
    inbox: Vec<(Instant, Vec<u8>)>,
    timer: Option<Instant>,
    fired: Vec<Instant>,
    echo: bool,
    /// Re-arm the timer at `now` forever (a buggy host).
    stuck: bool,
}

impl Endpoint for Fake {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }
    fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        self.inbox.push((now, frame.to_vec()));
        if self.echo && frame[0] & 1 == 0 {
            let mut reply = frame.to_vec();
            reply[..6].copy_from_slice(&frame[6..12]);
            reply[6..12].copy_from_slice(&self.mac);
            self.outbox.push(reply);
        }
    }
    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.outbox.is_empty() {
            return None;
        }
        let f = self.outbox.remove(0);
        buf[..f.len()].copy_from_slice(&f);
        Some(f.len())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.timer
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.fired.push(now);
        self.timer = if self.stuck { Some(now) } else { None };
    }
}

fn fakes(n: usize) -> Vec<Fake> {
    (0..n)
        .map(|i| Fake {
            mac: host_mac(i),
            ..Fake::default()
        })
        .collect()
}

fn frame_to(dst: [u8; 6], src: [u8; 6], tag: u8) -> Vec<u8> {
    let mut f = vec![tag; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f
}

fn delayed(ms: u64) -> FaultConfig {
    FaultConfig {
        delay: Duration::from_millis(ms),
        ..FaultConfig::default()
    }
}

#[test]
fn unicast_reaches_only_its_destination_after_the_link_delay() {
    let mut net = Network::new(fakes(3), &delayed(2), 1, 1514, Instant::ZERO);
    net.host_mut(0)
        .outbox
        .push(frame_to(host_mac(2), host_mac(0), 1));
    net.flush();
    assert_eq!(net.advance(Instant::from_secs_test(1)), Step::Advanced);
    assert_eq!(net.now(), Instant::from_millis(2));
    assert_eq!(net.host(2).inbox.len(), 1);
    assert!(net.host(1).inbox.is_empty());
    assert_eq!(net.advance(Instant::from_secs_test(1)), Step::Idle);
}

#[test]
fn broadcast_goes_to_every_other_host() {
    let mut net = Network::new(fakes(4), &FaultConfig::default(), 1, 1514, Instant::ZERO);
    net.host_mut(1)
        .outbox
        .push(frame_to([0xff; 6], host_mac(1), 1));
    net.flush();
    net.advance(Instant::from_millis(1));
    let got: Vec<usize> = (0..4).map(|i| net.host(i).inbox.len()).collect();
    assert_eq!(got, [1, 0, 1, 1]);
}

#[test]
fn frame_to_unknown_mac_is_counted_unroutable() {
    let mut net = Network::new(fakes(2), &FaultConfig::default(), 1, 1514, Instant::ZERO);
    net.host_mut(0)
        .outbox
        .push(frame_to([2, 9, 9, 9, 9, 9], host_mac(0), 1));
    net.host_mut(0).outbox.push(vec![1, 2, 3]);
    net.flush();
    assert_eq!(net.stats().unroutable, 2);
    assert_eq!(net.in_flight(), 0);
}

#[test]
fn timers_fire_exactly_at_their_deadline() {
    let mut net = Network::new(fakes(2), &FaultConfig::default(), 1, 1514, Instant::ZERO);
    net.host_mut(1).timer = Some(Instant::from_millis(250));
    assert_eq!(net.next_event(), Some(Instant::from_millis(250)));
    assert_eq!(net.advance(Instant::from_millis(100)), Step::Limit);
    assert_eq!(net.now(), Instant::from_millis(100));
    assert_eq!(net.advance(Instant::from_millis(1000)), Step::Advanced);
    assert_eq!(net.host(1).fired, [Instant::from_millis(250)]);
    assert_eq!(net.stats().timer_fires, 1);
}

#[test]
fn frames_due_at_one_instant_arrive_in_send_order() {
    let mut net = Network::new(fakes(2), &delayed(1), 1, 1514, Instant::ZERO);
    for tag in 0..5 {
        net.host_mut(0)
            .outbox
            .push(frame_to(host_mac(1), host_mac(0), tag));
    }
    net.flush();
    net.advance(Instant::from_millis(5));
    let tags: Vec<u8> = net.host(1).inbox.iter().map(|(_, f)| f[20]).collect();
    assert_eq!(tags, [0, 1, 2, 3, 4]);
}

#[test]
fn echo_round_trip_takes_two_one_way_delays() {
    let mut hosts = fakes(2);
    hosts[1].echo = true;
    let mut net = Network::new(hosts, &delayed(3), 1, 1514, Instant::ZERO);
    net.host_mut(0)
        .outbox
        .push(frame_to(host_mac(1), host_mac(0), 7));
    net.flush();
    while net.advance(Instant::from_millis(100)) == Step::Advanced {}
    assert_eq!(net.host(0).inbox.len(), 1);
    assert_eq!(net.host(0).inbox[0].0, Instant::from_millis(6));
}

#[test]
fn a_host_stuck_at_one_instant_is_reported_as_stalled() {
    let mut hosts = fakes(1);
    hosts[0].timer = Some(Instant::from_millis(1));
    hosts[0].stuck = true;
    let mut net = Network::new(hosts, &FaultConfig::default(), 1, 1514, Instant::ZERO);
    net.set_stall_steps(1000);
    let mut last = Step::Advanced;
    for _ in 0..2000 {
        last = net.advance(Instant::from_millis(10));
        if last != Step::Advanced {
            break;
        }
    }
    assert_eq!(last, Step::Stalled);
}

#[test]
fn same_seed_same_trace_under_faults() {
    let link = FaultConfig {
        loss: 0.2,
        duplicate: 0.2,
        reorder: 0.2,
        corrupt: 0.2,
        delay: Duration::from_millis(1),
        jitter: Duration::from_millis(1),
        bandwidth_bps: 10_000_000,
        ..FaultConfig::default()
    };
    let trace = |seed| {
        let mut hosts = fakes(3);
        hosts[2].echo = true;
        let mut net = Network::new(hosts, &link, seed, 1514, Instant::ZERO);
        for tag in 0..200u8 {
            net.host_mut(tag as usize % 2).outbox.push(frame_to(
                host_mac(2),
                host_mac(tag as usize % 2),
                tag,
            ));
        }
        net.flush();
        while net.advance(Instant::from_millis(1000)) == Step::Advanced {}
        (
            net.host(0).inbox.clone(),
            net.host(1).inbox.clone(),
            net.fault_totals(),
        )
    };
    let a = trace(5);
    assert_eq!(a, trace(5));
    assert_ne!(a, trace(6));
    assert!(a.2.dropped > 0 && a.2.duplicated > 0 && a.2.corrupted > 0 && a.2.reordered > 0);
}

trait SecsForTest {
    fn from_secs_test(s: u64) -> Instant;
}
impl SecsForTest for Instant {
    fn from_secs_test(s: u64) -> Instant {
        Instant::from_millis(s * 1000)
    }
}

#[test]
fn taps_see_delivered_and_transmitted_frames() {
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut net = Network::new(fakes(3), &delayed(1), 1, 1514, Instant::ZERO);
    let log = seen.clone();
    net.set_tap(Box::new(move |t, from, to, f| {
        log.lock().unwrap().push((t, from, to, f.len()))
    }));
    net.host_mut(2)
        .outbox
        .push(frame_to(host_mac(0), host_mac(2), 1));
    net.flush();
    net.advance(Instant::from_millis(5));
    assert_eq!(*seen.lock().unwrap(), [(Instant::from_millis(1), 2, 0, 60)]);
}
