//! ARP for Ethernet and IPv4 (RFC 826).

use std::net::Ipv4Addr;

use crate::ethernet::EthernetAddress;
use crate::{Error, Result};

/// The ARP operation field.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ArpOperation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> ArpOperation {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            v => ArpOperation::Unknown(v),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    // Offsets below hold for HLEN = 6, PLEN = 4, the only pair this crate parses.
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::TPA.end;

const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

/// A view of an ARP packet. `check_len` requires the 28 bytes of the
/// Ethernet/IPv4 layout, so the address accessors never panic; whether the
/// packet really is Ethernet/IPv4 is [`ArpRepr::parse`]'s question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < PACKET_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn hardware_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::HTYPE])
    }
    pub fn protocol_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::PTYPE])
    }
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(be16(&self.buffer.as_ref()[field::OPER]))
    }
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SHA]);
        EthernetAddress(a)
    }
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        ipv4(&self.buffer.as_ref()[field::SPA])
    }
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::THA]);
        EthernetAddress(a)
    }
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        ipv4(&self.buffer.as_ref()[field::TPA])
    }
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ArpRepr {
    pub operation: ArpOperation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Parses an Ethernet/IPv4 ARP packet; other hardware or protocol types
    /// are [`Error::Unsupported`]. Trailing bytes (Ethernet padding) are ignored.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<ArpRepr> {
        p.check_len()?;
        if p.hardware_type() != HTYPE_ETHERNET
            || p.protocol_type() != PTYPE_IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: p.operation(),
            source_hardware_addr: p.source_hardware_addr(),
            source_protocol_addr: p.source_protocol_addr(),
            target_hardware_addr: p.target_hardware_addr(),
            target_protocol_addr: p.target_protocol_addr(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }
    /// Writes the 28-byte packet into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = buf.get_mut(..PACKET_LEN).ok_or(Error::Truncated)?;
        b[field::HTYPE].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        b[field::PTYPE].copy_from_slice(&PTYPE_IPV4.to_be_bytes());
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        b[field::OPER].copy_from_slice(&u16::from(self.operation).to_be_bytes());
        b[field::SHA].copy_from_slice(&self.source_hardware_addr.0);
        b[field::SPA].copy_from_slice(&self.source_protocol_addr.octets());
        b[field::THA].copy_from_slice(&self.target_hardware_addr.0);
        b[field::TPA].copy_from_slice(&self.target_protocol_addr.octets());
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests;
