//! Settings of one message-protocol endpoint, with the ranges that work.

use outboard_tcp::CcKind;
use outboard_time::Duration;
use outboard_wire::msg::{HEADER_LEN, MAX_MESSAGE_LEN};

/// IPv6 (40) + UDP (8): the headers under ours, taken at their largest so a
/// frame fits the MTU on either family.
const IP_UDP_HEADERS: usize = 48;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The link MTU; each frame carries `mtu - 48 - 64` bytes of a message.
    pub mtu: usize,
    /// The largest message a send, call or reply takes.
    pub max_message: usize,
    /// Bytes a mailbox holds by default: queued messages, partial messages and
    /// the credit promised to senders. Reliable senders never exceed it.
    pub mailbox_capacity: usize,
    /// Most frames of credit one reliable flow is given at a time.
    pub flow_window: u32,
    /// Bytes of messages one reliable flow queues before `send_message` says
    /// the queue is full.
    pub send_queue: usize,
    /// Congestion control of reliable flows (bytes counted as TCP's).
    pub cc: CcKind,
    /// Retransmission timeout before an RTT sample, and its bounds.
    pub initial_rto: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    /// How long a receiver may hold an acknowledgement for a second frame.
    pub ack_delay: Duration,
    /// A reliable flow that makes no progress for this long fails its messages.
    pub message_timeout: Duration,
    /// A call's timeout unless the call names one.
    pub call_timeout: Duration,
    /// A partly received datagram is dropped after this long.
    pub reassembly_timeout: Duration,
    /// Bytes of partly received datagrams held at once.
    pub reassembly_memory: usize,
    /// Calls a client may have outstanding at once.
    pub max_outstanding_calls: usize,
    /// Calls of one client a server remembers (running, replied, finished)
    /// before it answers "busy".
    pub max_server_calls_per_client: usize,
    /// An unacknowledged reply is dropped after this long (the call stays
    /// remembered as done, so it is never run again).
    pub reply_keep: Duration,
    /// Reliable flows a receiver keeps state for.
    pub max_recv_flows: usize,
    /// Error frames sent per second, at most.
    pub errors_per_sec: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mtu: 1500,
            max_message: 1 << 20,
            mailbox_capacity: 4 << 20,
            flow_window: 256,
            send_queue: 4 << 20,
            cc: CcKind::Cubic,
            initial_rto: Duration::from_millis(50),
            min_rto: Duration::from_millis(5),
            max_rto: Duration::from_secs(2),
            ack_delay: Duration::from_micros(500),
            message_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(5),
            reassembly_timeout: Duration::from_secs(2),
            reassembly_memory: 8 << 20,
            max_outstanding_calls: 4096,
            max_server_calls_per_client: 4096,
            reply_keep: Duration::from_secs(30),
            max_recv_flows: 65536,
            errors_per_sec: 1000,
        }
    }
}

impl Config {
    /// Message bytes per frame.
    pub fn frame_payload(&self) -> usize {
        self.mtu.saturating_sub(IP_UDP_HEADERS + HEADER_LEN)
    }

    /// Refuses settings that cannot work, naming the range that does.
    pub fn validate(&self) -> Result<(), String> {
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        check((576..=65535).contains(&self.mtu), "mtu must be 576 to 65535")?;
        check(
            (1..=MAX_MESSAGE_LEN as usize).contains(&self.max_message),
            "max_message must be 1 byte to 16 MiB",
        )?;
        let min_box = (self.frame_payload() + HEADER_LEN) * 2;
        check(
            self.mailbox_capacity >= min_box,
            &format!("mailbox capacity must be at least two frames ({min_box} bytes)"),
        )?;
        check((1..=65536).contains(&self.flow_window), "flow window must be 1 to 65536 frames")?;
        check(self.send_queue >= 1, "send queue must be at least 1 byte")?;
        check(self.min_rto > Duration::ZERO, "min RTO must be above zero")?;
        check(self.min_rto <= self.max_rto, "min RTO must not exceed max RTO")?;
        check(self.message_timeout > Duration::ZERO, "message timeout must be above zero")?;
        check(self.call_timeout > Duration::ZERO, "call timeout must be above zero")?;
        check(self.reassembly_timeout > Duration::ZERO, "reassembly timeout must be above zero")?;
        check(self.max_outstanding_calls >= 1, "outstanding calls must be at least 1")?;
        check(self.max_server_calls_per_client >= 1, "server calls per client must be at least 1")?;
        check(self.max_recv_flows >= 1, "receive flows must be at least 1")?;
        Ok(())
    }
}
