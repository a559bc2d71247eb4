//! What the services report, as small enums (errno only at the shim).

use core::fmt;

/// Why `send_datagram`, `send_message`, `call` or `reply` refused at once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SendError {
    /// The sending mailbox is not bound here.
    NoMailbox,
    /// Over the configured largest message.
    TooBig,
    /// The flow's send queue (or the client's outstanding calls) is full: wait
    /// for [`crate::Event::SendSpace`] or a call's completion.
    QueueFull,
    /// `reply` to a call that is not waiting for a reply here.
    UnknownCall,
}

/// Why a reliable message was not delivered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MessageError {
    /// No progress for the configured message timeout.
    TimedOut,
    /// The destination mailbox is not bound at the receiver.
    NoMailbox,
    /// The receiving engine restarted; whether the message arrived before is unknown.
    PeerRestarted,
}

/// Why a call ended without a response.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CallError {
    /// No response within the call's timeout (server down, or the path).
    TimedOut,
    /// The server's mailbox is not bound.
    NoMailbox,
    /// The server restarted: the call ran at most once, before the restart, or never.
    ServerRestarted,
    /// The server took the request and failed on it (a handler that trapped,
    /// ran past its deadline or refused it): it ran at most once.
    Failed,
}

/// Why a name lookup failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LookupError {
    /// The engine asked holds no mailbox of that name.
    NoName,
    TimedOut,
}

/// Why `bind` refused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum BindError {
    /// The number (or 0, the control mailbox) is taken.
    NumberInUse(u32),
    NameInUse(String),
    /// Names are 1 to 255 bytes.
    BadName,
    /// Every automatic number is taken.
    NoNumbers,
}

macro_rules! display {
    ($t:ty, $($p:pat => $s:expr),+ $(,)?) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self { $($p => write!(f, "{}", $s)),+ }
            }
        }
        impl std::error::Error for $t {}
    };
}

display!(SendError,
    SendError::NoMailbox => "the sending mailbox is not bound",
    SendError::TooBig => "message larger than the configured maximum",
    SendError::QueueFull => "send queue full",
    SendError::UnknownCall => "no such call is waiting for a reply",
);
display!(MessageError,
    MessageError::TimedOut => "message not acknowledged within the message timeout",
    MessageError::NoMailbox => "no such mailbox at the receiver",
    MessageError::PeerRestarted => "the receiving engine restarted",
);
display!(CallError,
    CallError::TimedOut => "call timed out",
    CallError::NoMailbox => "no such mailbox at the server",
    CallError::ServerRestarted => "the server's engine restarted",
    CallError::Failed => "the server failed on the request",
);
display!(LookupError,
    LookupError::NoName => "no mailbox of that name",
    LookupError::TimedOut => "lookup timed out",
);
display!(BindError,
    BindError::NumberInUse(n) => format!("mailbox {n} is in use"),
    BindError::NameInUse(n) => format!("mailbox name {n:?} is in use"),
    BindError::BadName => "mailbox names are 1 to 255 bytes",
    BindError::NoNumbers => "no free mailbox number",
);
