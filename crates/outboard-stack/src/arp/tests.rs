use super::*;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn frame(tag: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[tag; 20]);
    f
}

fn cache() -> ArpCache {
    ArpCache::new(4, Duration::from_secs(60), 2, t(0))
}

#[test]
fn miss_queues_frame_and_requests_once() {
    let mut c = cache();
    let mut st = StackStats::default();
    assert_eq!(c.lookup(t(0), ip(2)), None);
    assert_eq!(
        c.queue(t(0), ip(2), frame(1), &mut st),
        QueueOutcome::Queued
    );
    assert_eq!(
        c.queue(t(1), ip(2), frame(2), &mut st),
        QueueOutcome::Queued
    );
    assert_eq!(c.poll_request(), Some(ip(2)));
    assert_eq!(c.poll_request(), None, "one request for both frames");
}

#[test]
fn rfc826_reply_flushes_pending_frames_with_the_mac_filled_in() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.queue(t(0), ip(2), frame(1), &mut st);
    c.queue(t(0), ip(2), frame(2), &mut st);
    let flushed = c.learn(t(5), ip(2), MAC_B, false, &mut st);
    assert_eq!(flushed.len(), 2);
    assert!(flushed.iter().all(|f| f[..6] == MAC_B));
    assert_eq!(flushed[0][6], 1, "order kept");
    assert_eq!(c.lookup(t(6), ip(2)), Some(MAC_B));
    assert_eq!(c.memory(), ENTRY_OVERHEAD, "pending bytes released");
}

#[test]
fn pending_queue_is_capped_per_next_hop() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.queue(t(0), ip(2), frame(1), &mut st);
    c.queue(t(0), ip(2), frame(2), &mut st);
    assert_eq!(
        c.queue(t(0), ip(2), frame(3), &mut st),
        QueueOutcome::PendingFull
    );
}

#[test]
fn rfc826_merge_does_not_create_entries_unless_we_are_the_target() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.learn(t(0), ip(3), MAC_A, false, &mut st);
    assert_eq!(c.lookup(t(0), ip(3)), None);
    c.learn(t(0), ip(3), MAC_A, true, &mut st);
    assert_eq!(c.lookup(t(0), ip(3)), Some(MAC_A));
    // An existing entry is updated by any packet from that sender.
    c.learn(t(1), ip(3), MAC_B, false, &mut st);
    assert_eq!(c.lookup(t(1), ip(3)), Some(MAC_B));
}

#[test]
fn requests_retry_then_give_up_and_drop_pending() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.queue(t(0), ip(2), frame(1), &mut st);
    assert_eq!(c.poll_request(), Some(ip(2)));
    assert_eq!(c.poll_timeout(), Some(t(1000)));
    for i in 1..MAX_REQUESTS as u64 {
        assert_eq!(c.handle_timeout(t(1000 * i)), Expired::default());
        assert_eq!(c.poll_request(), Some(ip(2)), "retry {i}");
    }
    let e = c.handle_timeout(t(1000 * MAX_REQUESTS as u64));
    assert_eq!(
        e,
        Expired {
            failures: 1,
            frames_dropped: 1
        }
    );
    assert_eq!(c.poll_request(), None);
    // During the hold-down new frames are refused at once.
    let now = t(1000 * MAX_REQUESTS as u64 + 10);
    assert_eq!(
        c.queue(now, ip(2), frame(2), &mut st),
        QueueOutcome::Unreachable
    );
    // Afterwards resolution starts again.
    let later = now + FAILED_HOLD;
    assert_eq!(
        c.queue(later, ip(2), frame(3), &mut st),
        QueueOutcome::Queued
    );
    assert_eq!(c.poll_request(), Some(ip(2)));
}

#[test]
fn entry_expires_after_ttl_with_refresh_grace() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.learn(t(0), ip(2), MAC_B, true, &mut st);
    assert_eq!(c.lookup(t(59_999), ip(2)), Some(MAC_B));
    assert_eq!(c.poll_request(), None);
    // Past the lifetime: still used, but a refresh goes out (once).
    assert_eq!(c.lookup(t(60_000), ip(2)), Some(MAC_B));
    assert_eq!(c.lookup(t(60_001), ip(2)), Some(MAC_B));
    assert_eq!(c.poll_request(), Some(ip(2)));
    assert_eq!(c.poll_request(), None);
    // Unanswered beyond the grace period: gone.
    assert_eq!(c.lookup(t(70_000), ip(2)), None);
    c.handle_timeout(t(70_000));
    assert_eq!(c.len(), 0, "purged");
    // A reply during the grace period renews it instead.
    c.learn(t(80_000), ip(2), MAC_A, true, &mut st);
    c.lookup(t(140_000), ip(2));
    c.learn(t(140_100), ip(2), MAC_A, false, &mut st);
    assert_eq!(c.lookup(t(150_000), ip(2)), Some(MAC_A));
}

#[test]
fn cache_never_exceeds_its_cap_and_evicts_oldest() {
    let mut c = cache();
    let mut st = StackStats::default();
    for n in 1..=10u8 {
        c.learn(t(n as u64), ip(n), MAC_A, true, &mut st);
        assert!(c.len() <= 4);
    }
    assert_eq!(st.arp_evictions, 6);
    assert_eq!(c.lookup(t(20), ip(1)), None, "oldest evicted");
    assert_eq!(c.lookup(t(20), ip(10)), Some(MAC_A));
    // Incomplete entries count too; evicting one drops its frames.
    for n in 20..30u8 {
        c.queue(t(30), ip(n), frame(n), &mut st);
        assert!(c.len() <= 4);
    }
    assert!(st.drops_arp_unresolved > 0);
    assert!(c.memory() <= 4 * ENTRY_OVERHEAD + 4 * 2 * frame(0).len());
}

/// The last hit answers repeated lookups without the table, but never
/// outlives what it copied: a new MAC, an eviction or an expiry is seen by
/// the very next lookup.
#[test]
fn the_last_hit_follows_every_change_to_its_entry() {
    let mut c = cache();
    let mut st = StackStats::default();
    c.learn(t(0), ip(2), MAC_A, true, &mut st);
    assert_eq!(c.lookup(t(1), ip(2)), Some(MAC_A));
    assert_eq!(c.lookup(t(2), ip(2)), Some(MAC_A));
    // RFC 826 merge: the peer's MAC changed.
    c.learn(t(3), ip(2), MAC_B, false, &mut st);
    assert_eq!(c.lookup(t(4), ip(2)), Some(MAC_B));
    // Evicted by four newer entries (the cap).
    for n in 3..=6u8 {
        c.learn(t(10 + u64::from(n)), ip(n), MAC_A, true, &mut st);
    }
    assert_eq!(c.lookup(t(20), ip(2)), None, "evicted, not answered from the last hit");
    // Past its lifetime the slow path runs: the refresh request goes out.
    assert_eq!(c.lookup(t(30), ip(6)), Some(MAC_A));
    assert_eq!(c.lookup(t(60_016), ip(6)), Some(MAC_A));
    assert_eq!(c.poll_request(), Some(ip(6)));
}
