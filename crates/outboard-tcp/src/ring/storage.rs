//! Where a ring's bytes live: its own growable `Vec`, or memory it was lent.

/// Memory for a ring that the ring does not own (shared memory of a board).
///
/// `bytes` and `bytes_mut` must return the same length every time: that
/// length is the ring's capacity, and the ring keeps byte `k` of its stream
/// (counted from the attach) at index `k % len` (see `RingBuffer::attach`).
pub trait RingStorage: Send + std::fmt::Debug {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// A plain heap buffer lent as storage (tests, or an application without boards).
impl RingStorage for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl RingStorage for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[derive(Debug)]
pub(super) enum Storage {
    /// Grows lazily up to the capacity; freed by `release`.
    Owned(Vec<u8>),
    /// Fixed size: its length is the capacity.
    External(Box<dyn RingStorage>),
}

impl Storage {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes(),
        }
    }
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes_mut(),
        }
    }
}

/// Live upgrade: an owned ring's bytes go in the record as hex (every
/// byte of the storage: a receive ring keeps out-of-order bytes past its
/// queued ones). A ring in lent storage (a board's) is not written: its
/// bytes stay in the memory it was lent, and the record says so with an error.
impl serde::Serialize for Storage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Storage::Owned(v) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut out = String::with_capacity(v.len() * 2);
                for b in v {
                    out.push(HEX[usize::from(b >> 4)] as char);
                    out.push(HEX[usize::from(b & 15)] as char);
                }
                s.serialize_str(&out)
            }
            Storage::External(_) => Err(serde::ser::Error::custom(
                "a ring in lent storage (a board's stream region) is not written to a record",
            )),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Storage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Storage, D::Error> {
        let hex = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(serde::de::Error::custom("ring bytes: not a lower-case hex digit")),
        };
        let h = hex.as_bytes();
        if !h.len().is_multiple_of(2) {
            return Err(serde::de::Error::custom("ring bytes: odd number of hex digits"));
        }
        let mut v = Vec::with_capacity(h.len() / 2);
        for pair in h.chunks_exact(2) {
            v.push(digit(pair[0])? << 4 | digit(pair[1])?);
        }
        Ok(Storage::Owned(v))
    }
}
