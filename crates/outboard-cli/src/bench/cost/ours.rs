//! Our stack in the `bench cost` workload: two `outboard_stack::Stack`s on
//! virtual time, A sending to B, driven the way a shard drives them (frames
//! in, due timers, application events drained, frames out).

use super::frames::{self, AppBuffer, Pool, Queue, PERIOD};
use super::World;
use outboard_stack::{ConnId, Stack, StackConfig};
use outboard_tcp::State;
use outboard_time::{Duration, Instant};
use std::net::{Ipv4Addr, SocketAddrV4};

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 80;

pub struct Ours {
    a: Stack,
    b: Stack,
    ca: ConnId,
    cb: ConnId,
    now: Instant,
    a_rx: Queue,
    a_tx: Queue,
    b_rx: Queue,
    b_tx: Queue,
    pool: Pool,
    pattern: Vec<u8>,
    sent: u64,
    app: AppBuffer,
}

fn config(mac_last: u8, ip: Ipv4Addr, secret: u8) -> StackConfig {
    let mut c = StackConfig::new([0x02, 0, 0, 0, 0, mac_last], ip, 24);
    c.secret = [secret; 16];
    c
}

/// Every frame `s` has to send now, onto `out`.
fn transmit(s: &mut Stack, now: Instant, pool: &mut Pool, out: &mut Queue) {
    loop {
        let mut f = pool.take();
        match s.poll_transmit(now, &mut f.buf[..]) {
            Some(n) => {
                f.len = n;
                out.push_back(f);
            }
            None => {
                pool.give(f);
                return;
            }
        }
    }
}

/// Frames in, then due timers, then the application's events drained.
fn input(s: &mut Stack, now: Instant, pool: &mut Pool, rx: &mut Queue) {
    while let Some(f) = rx.pop_front() {
        s.receive_frame(now, f.bytes());
        pool.give(f);
    }
    if s.poll_timeout().is_some_and(|t| t <= now) {
        s.handle_timeout(now);
    }
    while let Some(id) = s.tcp_poll_ready() {
        if let Some(c) = s.tcp(id) {
            while c.poll_event().is_some() {}
        }
    }
}

impl Ours {
    /// Moves both directions' frames and advances the clock, for the handshake.
    fn exchange(&mut self) {
        transmit(&mut self.a, self.now, &mut self.pool, &mut self.a_tx);
        transmit(&mut self.b, self.now, &mut self.pool, &mut self.b_tx);
        frames::carry(&mut self.a_tx, &mut self.b_rx);
        frames::carry(&mut self.b_tx, &mut self.a_rx);
        self.now += Duration::from_micros(10);
        input(&mut self.a, self.now, &mut self.pool, &mut self.a_rx);
        input(&mut self.b, self.now, &mut self.pool, &mut self.b_rx);
    }
}

impl World for Ours {
    const NAME: &'static str = "outboard";

    fn new() -> Result<Ours, String> {
        let now = Instant::from_millis(1000);
        let mut a = Stack::new(config(0x0a, IP_A, 1), now);
        let mut b = Stack::new(config(0x0b, IP_B, 2), now);
        let l = b.tcp_listen(PORT, 8).map_err(|e| format!("listen: {e:?}"))?;
        let ca = a.tcp_connect(now, SocketAddrV4::new(IP_B, PORT)).map_err(|e| format!("connect: {e:?}"))?;
        let mut w = Ours {
            a,
            b,
            ca,
            cb: ConnId(u32::MAX),
            now,
            a_rx: Queue::new(),
            a_tx: Queue::new(),
            b_rx: Queue::new(),
            b_tx: Queue::new(),
            pool: Pool::default(),
            pattern: frames::pattern(),
            sent: 0,
            app: AppBuffer::new(),
        };
        let mut accepted = None;
        for _ in 0..10_000 {
            w.exchange();
            accepted = accepted.or_else(|| w.b.tcp_accept(l));
            if let Some(cb) = accepted {
                if w.a.tcp(ca).is_some_and(|c| c.state() == State::Established) {
                    w.cb = cb;
                    return Ok(w);
                }
            }
        }
        Err("our stacks did not connect".into())
    }

    #[inline(never)]
    fn send_phase(&mut self) {
        input(&mut self.a, self.now, &mut self.pool, &mut self.a_rx);
        if let Some(c) = self.a.tcp(self.ca) {
            loop {
                let off = (self.sent % PERIOD as u64) as usize;
                match c.send(&self.pattern[off..off + PERIOD]) {
                    Ok(n) => {
                        self.sent += n as u64;
                        if n < PERIOD {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        transmit(&mut self.a, self.now, &mut self.pool, &mut self.a_tx);
    }

    #[inline(never)]
    fn receive_phase(&mut self) {
        input(&mut self.b, self.now, &mut self.pool, &mut self.b_rx);
        if let Some(c) = self.b.tcp(self.cb) {
            loop {
                let room = self.app.room();
                if room.is_empty() {
                    break;
                }
                match c.recv(room) {
                    Ok(n) if n > 0 => self.app.filled(n),
                    _ => break,
                }
            }
        }
        transmit(&mut self.b, self.now, &mut self.pool, &mut self.b_tx);
    }

    fn carry_to_receiver(&mut self) -> u64 {
        frames::carry(&mut self.a_tx, &mut self.b_rx)
    }

    fn carry_to_sender(&mut self) -> u64 {
        let n = self.b_tx.len() as u64;
        frames::carry(&mut self.b_tx, &mut self.a_rx);
        n
    }

    fn check_read(&mut self) -> Result<u64, String> {
        self.app.check()
    }

    fn tick(&mut self, idle: bool) -> Result<(), String> {
        self.now += Duration::from_micros(10);
        if idle {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min();
            match next {
                Some(t) => self.now = self.now.max(t),
                None => return Err("our stacks stalled: nothing in flight and no timer".into()),
            }
        }
        Ok(())
    }
}
