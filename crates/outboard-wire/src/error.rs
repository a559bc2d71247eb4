//! The one error type of the wire crate.

use core::fmt;

/// Why a buffer could not be parsed or a header could not be emitted.
///
/// Small and typed on purpose: the stack maps each variant to a drop counter
/// (and, for a few, to an ICMP error), never to a string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says.
    /// From `emit`: the destination buffer is too small.
    Truncated,
    /// A length or offset field is impossible (IPv4 IHL < 5, TCP data offset < 5,
    /// UDP length < 8, an IPv4 total length shorter than its header, ...).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// Well formed but not something this crate handles (IP version 6 in an
    /// IPv4 parser, ARP for a non-Ethernet/IPv4 pair, an unknown ICMP type).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum mismatch",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl std::error::Error for Error {}

/// Result alias for the wire crate.
pub type Result<T> = core::result::Result<T, Error>;
