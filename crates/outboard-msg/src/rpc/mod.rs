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

pub(crate) mod client;
pub(crate) mod server;
