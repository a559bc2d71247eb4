//! The RST to send for a segment that matches no connection (RFC 9293 §3.10.7.1).
//! STUB: being written.
