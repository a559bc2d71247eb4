//! smoltcp's TCP in the `bench cost` workload: two `smoltcp` interfaces over
//! Ethernet on virtual time, A sending to B, with the same wire, pattern,
//! buffer sizes (256 KiB each way) and MTU (1500) as ours.
//!
//! TCP timestamps stay off (smoltcp's default): with them on, smoltcp 0.12
//! still fills segments to the full MSS, so that a segment with the 12-byte
//! option no longer fits the MTU and is never sent (seen here: the transfer
//! stalls after the handshake). Ours runs with its defaults, timestamps and
//! SACK on, as Linux: 12 bytes more header per segment, and their processing,
//! counted against ours.

use super::frames::{self, AppBuffer, Frame, Pool, Queue, PERIOD};
use super::World;
use smoltcp::iface::{Config, Interface, PollIngressSingleResult, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use std::cell::RefCell;

const PORT: u16 = 80;
const BUFFER: usize = 256 * 1024;

/// One interface's end of the wire.
struct Dev {
    rx: Queue,
    tx: Queue,
    pool: RefCell<Pool>,
}

struct Rx<'a> {
    frame: Frame,
    pool: &'a RefCell<Pool>,
}

struct Tx<'a> {
    tx: &'a mut Queue,
    pool: &'a RefCell<Pool>,
}

impl RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(self.frame.bytes());
        self.pool.borrow_mut().give(self.frame);
        r
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = self.pool.borrow_mut().take();
        frame.len = len.min(frames::FRAME_CAP);
        let r = f(&mut frame.buf[..frame.len]);
        self.tx.push_back(frame);
        r
    }
}

impl Device for Dev {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        let Dev { rx, tx, pool } = self;
        let frame = rx.pop_front()?;
        Some((Rx { frame, pool }, Tx { tx, pool }))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Tx<'_>> {
        Some(Tx { tx: &mut self.tx, pool: &self.pool })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        // smoltcp counts the Ethernet header in an Ethernet device's MTU.
        c.max_transmission_unit = 1514;
        c
    }
}

/// One host: interface, device, socket set and its one TCP socket.
struct Host {
    iface: Interface,
    dev: Dev,
    sockets: SocketSet<'static>,
    tcp: SocketHandle,
}

impl Host {
    fn new(mac_last: u8, ip: [u8; 4], now: Instant) -> Host {
        let mut dev = Dev { rx: Queue::new(), tx: Queue::new(), pool: RefCell::new(Pool::default()) };
        let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress([0x02, 0, 0, 0, 0, mac_last])));
        cfg.random_seed = u64::from(mac_last);
        let mut iface = Interface::new(cfg, &mut dev, now);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::v4(ip[0], ip[1], ip[2], ip[3]), 24));
        });
        let socket =
            tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]));
        let mut sockets = SocketSet::new(Vec::new());
        let tcp = sockets.add(socket);
        Host { iface, dev, sockets, tcp }
    }

    fn ingress(&mut self, now: Instant) {
        while self.iface.poll_ingress_single(now, &mut self.dev, &mut self.sockets) != PollIngressSingleResult::None {}
    }

    fn egress(&mut self, now: Instant) {
        self.iface.poll_egress(now, &mut self.dev, &mut self.sockets);
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.tcp)
    }
}

pub struct Smol {
    a: Host,
    b: Host,
    now: Instant,
    pattern: Vec<u8>,
    sent: u64,
    app: AppBuffer,
}

impl World for Smol {
    const NAME: &'static str = "smoltcp";

    fn new() -> Result<Smol, String> {
        let now = Instant::from_millis(1000);
        let mut w = Smol {
            a: Host::new(0x0a, [10, 0, 0, 1], now),
            b: Host::new(0x0b, [10, 0, 0, 2], now),
            now,
            pattern: frames::pattern(),
            sent: 0,
            app: AppBuffer::new(),
        };
        w.b.socket().listen(PORT).map_err(|e| format!("smoltcp listen: {e}"))?;
        let cx = w.a.iface.context();
        let a_sock = w.a.sockets.get_mut::<tcp::Socket>(w.a.tcp);
        a_sock
            .connect(cx, (IpAddress::v4(10, 0, 0, 2), PORT), 49_152)
            .map_err(|e| format!("smoltcp connect: {e}"))?;
        for _ in 0..10_000 {
            for h in [&mut w.a, &mut w.b] {
                h.ingress(w.now);
                h.egress(w.now);
            }
            frames::carry(&mut w.a.dev.tx, &mut w.b.dev.rx);
            frames::carry(&mut w.b.dev.tx, &mut w.a.dev.rx);
            w.now += Duration::from_micros(10);
            if w.a.socket().state() == tcp::State::Established && w.b.socket().state() == tcp::State::Established {
                return Ok(w);
            }
        }
        Err("smoltcp's stacks did not connect".into())
    }

    #[inline(never)]
    fn send_phase(&mut self) {
        let now = self.now;
        self.a.ingress(now);
        let s = self.a.sockets.get_mut::<tcp::Socket>(self.a.tcp);
        loop {
            let off = (self.sent % PERIOD as u64) as usize;
            match s.send_slice(&self.pattern[off..off + PERIOD]) {
                Ok(n) => {
                    self.sent += n as u64;
                    if n < PERIOD {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        self.a.egress(now);
    }

    #[inline(never)]
    fn receive_phase(&mut self) {
        let now = self.now;
        self.b.ingress(now);
        let s = self.b.sockets.get_mut::<tcp::Socket>(self.b.tcp);
        loop {
            let room = self.app.room();
            if room.is_empty() {
                break;
            }
            match s.recv_slice(room) {
                Ok(n) if n > 0 => self.app.filled(n),
                _ => break,
            }
        }
        self.b.egress(now);
    }

    fn carry_to_receiver(&mut self) -> u64 {
        frames::carry(&mut self.a.dev.tx, &mut self.b.dev.rx)
    }

    fn carry_to_sender(&mut self) -> u64 {
        let n = self.b.dev.tx.len() as u64;
        frames::carry(&mut self.b.dev.tx, &mut self.a.dev.rx);
        n
    }

    fn check_read(&mut self) -> Result<u64, String> {
        self.app.check()
    }

    fn tick(&mut self, idle: bool) -> Result<(), String> {
        self.now += Duration::from_micros(10);
        if idle {
            let next = [
                self.a.iface.poll_delay(self.now, &self.a.sockets),
                self.b.iface.poll_delay(self.now, &self.b.sockets),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(d) => self.now += d,
                None => return Err("smoltcp's stacks stalled: nothing in flight and no timer".into()),
            }
        }
        Ok(())
    }
}
