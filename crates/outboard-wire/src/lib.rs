//! Packet formats for Outboard.
//!
//! Each format has a zero-copy view `XxxPacket<T: AsRef<[u8]>>` with byte
//! ranges in a `field` module, `new_checked` (after which no accessor panics),
//! and a plain `XxxRepr` with `parse`/`emit`/`buffer_len`. Parsing is total:
//! any byte string yields a value or a typed [`Error`], never a panic.
//! `emit` writes into a caller's buffer and returns [`Error::Truncated`] when
//! it is too small. No I/O and no allocation on the hot path.
//!
//! Checksums live in [`checksum`]; see its docs for the data path's fused
//! copy-and-checksum and how `emit` and the views use it.

// Unsafe code is denied everywhere but the AVX2 checksum kernel in
// `checksum.rs`, which allows it locally with a `// SAFETY:` comment per block.
#![deny(unsafe_code)]

pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod flowhash;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod msg;
pub mod pcap;
pub mod pseudo;
pub mod seq;
pub mod tcp;
pub mod udp;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod testdata;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::{PartialSum, RxChecksum, TxChecksum};
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr, TimeExceededCode, UnreachableCode};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, NdiscOption};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use msg::{MsgKind, MsgPacket, MsgRepr, MsgStatus};
pub use pseudo::PseudoAddr;
pub use seq::SeqNumber;
pub use tcp::{FastOpenCookie, SackBlocks, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
