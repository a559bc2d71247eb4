//! Request-response with at-most-once execution (Birrell and Nelson's RPC,
//! eRPC's session shape).
//!
//! A client numbers its calls from 1 in its session and re-sends a request
//! until the response arrives or the call's timeout passes. Each request
//! carries the client's *watermark*: every call below it is finished. The
//! server runs a request once (it is queued to the mailbox once), keeps the
//! reply until the client acknowledges it (or `reply_keep` passes) and
//! answers a re-sent request from that reply, and remembers each call as done
//! until the watermark passes it, so a late duplicate is never run again.
//! A request naming a server session that is not the server's (the server
//! restarted) is refused, so a call runs at most once across restarts too,
//! once the client has heard from that server.

//!
//! A request or response of more than one frame goes a window at a time:
//! at most [`WINDOW`] frames, the last marked `ACK_NOW`; the receiver says
//! how many bytes it holds from the start (a server with `request-ack`'s
//! `credit`, a client with a re-sent request's `credit`), and the sender
//! goes on from there. So a large call never floods a path's queues, and a
//! loss costs one window, not the whole message.

pub(crate) mod client;
pub(crate) mod server;

/// Frames of a request or response sent before the receiver says what it holds.
pub(crate) const WINDOW: usize = 32;
