//! Network-wide mailbox addresses.

use core::fmt;
use std::net::SocketAddr;

/// A mailbox anywhere: the engine's message-protocol endpoint (host address
/// and UDP port) and the mailbox's number there.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct MailboxAddr {
    pub host: SocketAddr,
    pub mailbox: u32,
}

impl MailboxAddr {
    pub const fn new(host: SocketAddr, mailbox: u32) -> MailboxAddr {
        MailboxAddr { host, mailbox }
    }
}

impl fmt::Display for MailboxAddr {
    /// `10.0.0.2:7373/42`, `[fd00::2]:7373/42`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.mailbox)
    }
}

impl core::str::FromStr for MailboxAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<MailboxAddr, String> {
        let (host, mb) = s
            .rsplit_once('/')
            .ok_or_else(|| format!("{s:?} is not HOST:PORT/MAILBOX"))?;
        let host = host
            .parse()
            .map_err(|_| format!("{host:?} is not an address and port (10.0.0.2:7373 or [fd00::2]:7373)"))?;
        let mailbox = mb.parse().map_err(|_| format!("{mb:?} is not a mailbox number (0 to 4294967295)"))?;
        Ok(MailboxAddr { host, mailbox })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        for s in ["10.0.0.2:7373/42", "[fd00::2]:7373/4294967295"] {
            let a: MailboxAddr = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
        assert!("10.0.0.2:7373".parse::<MailboxAddr>().is_err());
        assert!("10.0.0.2/1".parse::<MailboxAddr>().is_err());
        assert!("10.0.0.2:7373/x".parse::<MailboxAddr>().is_err());
    }
}
