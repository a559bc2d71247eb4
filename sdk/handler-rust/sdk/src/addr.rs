//! Message kinds and the 24-byte sender/destination address.

/// What `ob_message`'s `kind` argument says the message is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(i32)]
pub enum Kind {
    /// An unreliable datagram (also what `enqueue` delivers).
    Datagram = 1,
    /// A reliable message.
    Message = 2,
    /// A request (RPC): answer it with [`reply`](crate::reply), once; return
    /// without replying (or a negative value) and the caller's call fails.
    Request = 3,
}

impl Kind {
    /// The kind an `ob_message` `kind` argument names, or `None` for a value
    /// ABI version 1 does not define.
    #[inline]
    pub const fn from_i32(kind: i32) -> Option<Kind> {
        match kind {
            1 => Some(Kind::Datagram),
            2 => Some(Kind::Message),
            3 => Some(Kind::Request),
            _ => None,
        }
    }

    /// Whether a reply is expected (a request).
    #[inline]
    pub const fn is_request(self) -> bool {
        matches!(self, Kind::Request)
    }
}

/// [`Addr::family`] of an IPv4 address.
pub const FAMILY_IPV4: u16 = 4;
/// [`Addr::family`] of an IPv6 address.
pub const FAMILY_IPV6: u16 = 6;

/// A mailbox's address, laid out as the engine reads and writes it (24
/// bytes, alignment 1): 16 bytes of IPv6 address (an IPv4 address as
/// `::ffff:a.b.c.d`), the UDP port (2 bytes, little-endian), the family (2
/// bytes, little-endian: 4 or 6), the mailbox number (4 bytes,
/// little-endian). The fields are byte arrays so that the layout is the
/// same on any target.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[repr(C)]
pub struct Addr {
    ip: [u8; 16],
    port: [u8; 2],
    family: [u8; 2],
    mailbox: [u8; 4],
}

const _: () = assert!(core::mem::size_of::<Addr>() == Addr::SIZE);
const _: () = assert!(core::mem::align_of::<Addr>() == 1);

impl Addr {
    /// The address's size in bytes (24).
    pub const SIZE: usize = 24;

    /// Mailbox `mailbox` at the IPv4 address `a.b.c.d`, UDP port `port`.
    pub const fn ipv4(a: u8, b: u8, c: u8, d: u8, port: u16, mailbox: u32) -> Addr {
        Addr {
            ip: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d],
            port: port.to_le_bytes(),
            family: FAMILY_IPV4.to_le_bytes(),
            mailbox: mailbox.to_le_bytes(),
        }
    }

    /// Mailbox `mailbox` at the IPv6 address `ip` (16 bytes, network order),
    /// UDP port `port`.
    pub const fn ipv6(ip: [u8; 16], port: u16, mailbox: u32) -> Addr {
        Addr {
            ip,
            port: port.to_le_bytes(),
            family: FAMILY_IPV6.to_le_bytes(),
            mailbox: mailbox.to_le_bytes(),
        }
    }

    /// The address in its 24 raw bytes (no check that they make sense).
    pub const fn from_bytes(b: [u8; 24]) -> Addr {
        Addr {
            ip: [
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15],
            ],
            port: [b[16], b[17]],
            family: [b[18], b[19]],
            mailbox: [b[20], b[21], b[22], b[23]],
        }
    }

    /// The address's 24 raw bytes, as the engine reads them.
    pub const fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        let mut i = 0;
        while i < 16 {
            b[i] = self.ip[i];
            i += 1;
        }
        b[16] = self.port[0];
        b[17] = self.port[1];
        b[18] = self.family[0];
        b[19] = self.family[1];
        b[20] = self.mailbox[0];
        b[21] = self.mailbox[1];
        b[22] = self.mailbox[2];
        b[23] = self.mailbox[3];
        b
    }

    /// The 16 bytes of IPv6 address (an IPv4 address is `::ffff:a.b.c.d`).
    pub const fn ip(&self) -> [u8; 16] {
        self.ip
    }

    /// The IPv4 address, if the family is 4 and the address is an
    /// IPv4-mapped one.
    pub const fn ipv4_octets(&self) -> Option<[u8; 4]> {
        let ip = &self.ip;
        let mapped = ip[0] == 0
            && ip[1] == 0
            && ip[2] == 0
            && ip[3] == 0
            && ip[4] == 0
            && ip[5] == 0
            && ip[6] == 0
            && ip[7] == 0
            && ip[8] == 0
            && ip[9] == 0
            && ip[10] == 0xff
            && ip[11] == 0xff;
        if mapped && self.family() == FAMILY_IPV4 {
            Some([ip[12], ip[13], ip[14], ip[15]])
        } else {
            None
        }
    }

    /// The UDP port.
    pub const fn port(&self) -> u16 {
        u16::from_le_bytes(self.port)
    }

    /// The family: [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub const fn family(&self) -> u16 {
        u16::from_le_bytes(self.family)
    }

    /// The mailbox number.
    pub const fn mailbox(&self) -> u32 {
        u32::from_le_bytes(self.mailbox)
    }

    /// The same engine (address and port), another mailbox.
    pub const fn with_mailbox(self, mailbox: u32) -> Addr {
        Addr {
            mailbox: mailbox.to_le_bytes(),
            ..self
        }
    }
}
