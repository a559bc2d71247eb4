//! The receiving side of a reliable flow: in-order delivery into the
//! mailbox, out-of-order frames held within the credit, and the credit itself.

use super::SACK_BITS;
use crate::mailbox::{cost, Delivery, DeliveryKind, Mailbox, OVERHEAD};
use crate::addr::MailboxAddr;
use outboard_time::Instant;
use outboard_wire::msg::{MsgKind, MsgRepr};
use std::collections::BTreeMap;

#[derive(Debug)]
struct Held {
    offset: u32,
    total: u32,
    data: Vec<u8>,
}

/// Where a frame went.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum FrameFate {
    /// In order (and any held frames after it): maybe messages completed.
    InOrder,
    /// Held until the frames before it arrive.
    OutOfOrder,
    Duplicate,
    /// Above the credit given: dropped (the sender will send it again).
    BeyondCredit,
}

#[derive(Debug)]
pub(crate) struct RecvFlow {
    pub src_session: u32,
    pub incarnation: u64,
    /// Next frame expected; every frame below it arrived.
    pub rcv_nxt: u64,
    /// Frames below this may be sent (credit given and reserved).
    pub granted: u64,
    ooo: BTreeMap<u64, Held>,
    /// The message being put together: (total length, bytes so far).
    partial: Option<(u32, Vec<u8>)>,
    /// In-order frames since the last ack.
    pub unacked: u32,
    pub ack_due: Option<Instant>,
    pub last_active: Instant,
    /// The last grant fell short: send an ack when the mailbox frees room.
    pub starved: bool,
    pub bad_fragments: u64,
}

impl RecvFlow {
    pub fn new(src_session: u32, incarnation: u64, now: Instant) -> RecvFlow {
        RecvFlow {
            src_session,
            incarnation,
            rcv_nxt: 1,
            granted: 1,
            ooo: BTreeMap::new(),
            partial: None,
            unacked: 0,
            ack_due: None,
            last_active: now,
            starved: false,
            bad_fragments: 0,
        }
    }

    /// Grows the credit toward `window` frames above `rcv_nxt`, as far as the
    /// mailbox's free budget allows. True when the credit grew.
    pub fn grant(&mut self, mb: &mut Mailbox, window: u32, frame_cost: usize) -> bool {
        // No flow takes more than half the mailbox: a second sender always finds room.
        let window = u64::from(window).min((mb.capacity / 2 / frame_cost).max(1) as u64);
        let want = self.rcv_nxt + window;
        if want <= self.granted {
            self.starved = false;
            return false;
        }
        let extra = want - self.granted;
        let n = extra.min((mb.free() / frame_cost) as u64);
        self.granted += n;
        mb.reserved += n as usize * frame_cost;
        self.starved = n < extra;
        if self.starved {
            mb.starved = true;
            if self.granted == self.rcv_nxt {
                mb.stats.credit_stalls += 1;
            }
        }
        n > 0
    }

    /// Takes back credit this flow was given but has not used (keeping room
    /// for frames already held out of order). True when some came back.
    pub fn reclaim(&mut self, mb: &mut Mailbox, frame_cost: usize) -> bool {
        let floor = self.ooo.keys().next_back().map_or(self.rcv_nxt, |&s| s + 1);
        if self.granted <= floor {
            return false;
        }
        mb.reserved = mb.reserved.saturating_sub((self.granted - floor) as usize * frame_cost);
        self.granted = floor;
        true
    }

    /// Gives back everything this flow holds of the mailbox's budget.
    pub fn release(&mut self, mb: &mut Mailbox, frame_cost: usize) {
        mb.reserved = mb.reserved.saturating_sub((self.granted - self.rcv_nxt) as usize * frame_cost);
        if let Some((_, buf)) = self.partial.take() {
            mb.held = mb.held.saturating_sub(cost(buf.len()));
        }
        self.granted = self.rcv_nxt;
        self.ooo.clear();
    }

    /// Takes frame `repr.id`. Whole messages go into `mb`; returns where the
    /// frame went and how many messages completed.
    pub fn on_frame(&mut self, repr: &MsgRepr, payload: &[u8], mb: &mut Mailbox, from: MailboxAddr, frame_cost: usize) -> (FrameFate, usize, bool) {
        let seq = repr.id;
        if seq < self.rcv_nxt {
            return (FrameFate::Duplicate, 0, false);
        }
        if seq >= self.granted {
            return (FrameFate::BeyondCredit, 0, false);
        }
        if seq > self.rcv_nxt {
            if self.ooo.contains_key(&seq) {
                return (FrameFate::Duplicate, 0, false);
            }
            self.ooo.insert(seq, Held { offset: repr.offset, total: repr.total_len, data: payload.to_vec() });
            return (FrameFate::OutOfOrder, 0, false);
        }
        let mut completed = 0;
        let mut became_readable = false;
        let (c, r) = self.take_in_order(repr.offset, repr.total_len, payload, mb, from, frame_cost);
        completed += c;
        became_readable |= r;
        while let Some(h) = self.ooo.remove(&self.rcv_nxt) {
            let (c, r) = self.take_in_order(h.offset, h.total, &h.data, mb, from, frame_cost);
            completed += c;
            became_readable |= r;
        }
        (FrameFate::InOrder, completed, became_readable)
    }

    /// Frame `rcv_nxt`: its reservation becomes held bytes of the message it builds.
    fn take_in_order(&mut self, offset: u32, total: u32, data: &[u8], mb: &mut Mailbox, from: MailboxAddr, frame_cost: usize) -> (usize, bool) {
        self.rcv_nxt += 1;
        self.unacked += 1;
        mb.reserved = mb.reserved.saturating_sub(frame_cost);
        if offset == 0 {
            if let Some((_, buf)) = self.partial.take() {
                // A new message before the last one ended: a broken sender.
                mb.held = mb.held.saturating_sub(cost(buf.len()));
                self.bad_fragments += 1;
            }
            self.partial = Some((total, Vec::with_capacity((total as usize).min(64 << 10))));
            mb.held += OVERHEAD;
        }
        let Some((want, buf)) = self.partial.as_mut() else {
            self.bad_fragments += 1;
            return (0, false);
        };
        if *want != total || buf.len() != offset as usize {
            self.bad_fragments += 1;
            return (0, false);
        }
        buf.extend_from_slice(data);
        mb.held += data.len();
        if buf.len() < *want as usize {
            return (0, false);
        }
        let (_, data) = self.partial.take().expect("just matched");
        let readable = mb.push(Delivery { from, kind: DeliveryKind::Message, data });
        (1, readable)
    }

    /// The acknowledgement this flow sends now.
    pub fn ack_repr(&self, session: u32, local_mailbox: u32, remote_mailbox: u32) -> MsgRepr {
        let mut sack = 0u64;
        for (&seq, _) in self.ooo.range(self.rcv_nxt + 1..=self.rcv_nxt + SACK_BITS) {
            sack |= 1 << (seq - self.rcv_nxt - 1);
        }
        MsgRepr {
            src_mailbox: local_mailbox,
            dst_mailbox: remote_mailbox,
            src_session: session,
            dst_session: self.src_session,
            id: self.incarnation,
            ack: self.rcv_nxt,
            sack,
            credit: u32::try_from(self.granted - self.rcv_nxt).unwrap_or(u32::MAX),
            ..MsgRepr::new(MsgKind::MessageAck)
        }
    }

    pub fn is_quiet(&self) -> bool {
        self.partial.is_none() && self.ooo.is_empty() && self.ack_due.is_none()
    }
}
