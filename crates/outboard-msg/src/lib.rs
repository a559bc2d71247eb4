//! Outboard's native message protocols, sans-IO.
//!
//! The communication processor's three transport services between mailboxes with network-wide
//! addresses (`host:port/mailbox`), over UDP (the header is
//! `outboard_wire::msg`; docs/MESSAGES.md describes the protocol):
//!
//! - **datagram**: unreliable, a whole message or nothing;
//! - **reliable message** ([`reliable`]): exactly once and in order per
//!   (sending mailbox, receiving mailbox), flow-controlled by the receiver's
//!   credit and congestion-controlled as TCP;
//! - **request-response** ([`rpc`]): calls executed at most once, replies
//!   kept until acknowledged.
//!
//! One [`Endpoint`] serves one UDP port of an engine shard. Like the TCP
//! core it reads no clock and does no I/O; it is driven in quinn's order:
//!
//! 1. feed inputs: [`Endpoint::handle_datagram`] for each UDP payload that
//!    arrived on its port, [`Endpoint::handle_timeout`], and the
//!    application's calls (`bind`, `send_message`, `call`, `reply`, `recv`, …);
//! 2. drain outputs: [`Endpoint::poll_transmit`] until `None` (each a UDP
//!    payload and its destination), [`Endpoint::poll_event`] until `None`;
//! 3. arm one timer for [`Endpoint::poll_timeout`].
//!
//! The session number given to [`Endpoint::new`] must differ between
//! incarnations of an endpoint (the engine draws it from its secret): it is
//! how peers tell a restart, which keeps calls at most once across it.

#![forbid(unsafe_code)]

pub mod addr;
mod assembly;
pub mod config;
mod endpoint;
mod io;
pub mod error;
mod lookup;
pub mod mailbox;
mod outbox;
mod peers;
pub mod reliable;
pub mod rpc;
pub mod stats;

pub use addr::MailboxAddr;
pub use config::Config;
pub use endpoint::Endpoint;
pub use error::{BindError, CallError, LookupError, MessageError, SendError};
pub use mailbox::{CallToken, Delivery, DeliveryKind, MailboxInfo, MailboxStats};
pub use stats::Stats;

/// A reliable message, as `send_message` numbered it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct MessageId(pub u64);

/// A call, as `call` numbered it (its id on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// A name lookup, as `lookup` numbered it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct LookupId(pub u64);

/// What the endpoint tells its application.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    /// The mailbox went from empty to holding a message: `recv` it.
    Readable { mailbox: u32 },
    /// The receiving engine has the whole message (it will be delivered
    /// unless its mailbox is unbound first).
    MessageAcked { message: MessageId },
    MessageFailed { message: MessageId, error: MessageError },
    /// A flow whose queue was full has room again.
    SendSpace { from: u32, to: MailboxAddr },
    CallDone { call: CallId, result: Result<Vec<u8>, CallError> },
    LookupDone { lookup: LookupId, result: Result<MailboxAddr, LookupError> },
}
