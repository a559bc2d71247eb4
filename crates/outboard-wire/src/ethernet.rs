//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894).

use core::fmt;

use crate::{Error, Result};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    pub const ZERO: EthernetAddress = EthernetAddress([0; 6]);

    /// From the first six bytes of `b`; `None` if it is shorter.
    pub fn from_bytes(b: &[u8]) -> Option<EthernetAddress> {
        let mut a = [0u8; 6];
        a.copy_from_slice(b.get(..6)?);
        Some(EthernetAddress(a))
    }
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }
    /// The individual/group bit is clear (IEEE 802 §8.2).
    pub const fn is_unicast(&self) -> bool {
        self.0[0] & 0x01 == 0
    }
    /// The individual/group bit is set; broadcast is a multicast address.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
    /// The universal/local bit is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The EtherType field.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum EtherType {
    Ipv4,
    Arp,
    Ipv6,
    /// Any other value (including 802.3 length values below 0x0600).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> EtherType {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            v => EtherType::Unknown(v),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        match t {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// The Ethernet II header length (no 802.1Q tag).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of an Ethernet II frame (without the FCS, which NICs strip).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it; accessors may panic unless
    /// [`check_len`](Self::check_len) passes.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }
    /// Wraps a buffer that holds at least a header.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        EthernetAddress(a)
    }
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        EthernetAddress(a)
    }
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }
    /// Everything after the header, padding included (the IP length says how much is real).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// A parsed Ethernet II header.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }
    /// Header bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header into the start of `buf`; the payload goes at `buf[HEADER_LEN..]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut f = EthernetFrame::new_checked(buf)?;
        f.set_dst_addr(self.dst_addr);
        f.set_src_addr(self.src_addr);
        f.set_ethertype(self.ethertype);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRAME: [u8; 18] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, // dst
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, // src
        0x08, 0x00, // IPv4
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn deconstruct_reads_addresses_type_and_payload() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress([1, 2, 3, 4, 5, 6]));
        assert_eq!(f.src_addr(), EthernetAddress([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]));
        assert_eq!(f.ethertype(), EtherType::Ipv4);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn construct_writes_the_same_bytes() {
        let repr = EthernetRepr::parse(&EthernetFrame::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut buf = [0u8; 18];
        assert_eq!(repr.emit(&mut buf), Ok(14));
        buf[14..].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn every_shorter_length_is_truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(EthernetFrame::new_checked(&FRAME[..n]).err(), Some(Error::Truncated));
        }
        assert!(EthernetRepr::parse(&EthernetFrame::new_unchecked(&FRAME[..13])).is_err());
    }

    #[test]
    fn emit_into_short_buffer_is_truncated() {
        let repr = EthernetRepr { src_addr: EthernetAddress::ZERO, dst_addr: EthernetAddress::BROADCAST, ethertype: EtherType::Arp };
        assert_eq!(repr.emit(&mut [0u8; 13]), Err(Error::Truncated));
    }

    #[test]
    fn address_classes_follow_the_group_bit() {
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(!EthernetAddress::BROADCAST.is_unicast());
        let mcast = EthernetAddress([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert!(mcast.is_multicast() && !mcast.is_broadcast());
        let ucast = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
        assert!(ucast.is_unicast() && ucast.is_local());
        assert_eq!(ucast.to_string(), "02:00:00:00:00:01");
    }

    #[test]
    fn ethertype_round_trips_through_u16() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0x88cc, 0x0000, 0xffff] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
    }
}
