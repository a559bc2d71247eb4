//! Where a ring's bytes live: its own growable `Vec`, or memory it was lent.

/// Where lent memory is, as its lender names it: (the lender's number for
/// the memory, e.g. a board's; the offset in it).
pub type Place = (u64, u64);

/// Memory for a ring that the ring does not own (shared memory of a board).
///
/// `bytes` and `bytes_mut` must return the same length every time: that
/// length is the ring's capacity, and the ring keeps byte `k` of its stream
/// (counted from the attach) at index `k % len` (see `RingBuffer::attach`).
pub trait RingStorage: Send + std::fmt::Debug {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Where the memory is, in terms its lender understands (a board's
    /// number and the region's offset in it): what a live upgrade records
    /// so the new engine can lend the same memory again. None: not said.
    fn place(&self) -> Option<Place> {
        None
    }
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
    /// Lent storage of this many bytes, read back from a record (live
    /// upgrade) and not yet bound again: the bytes are where they were lent
    /// (a board's region, which the new engine maps too), and the ring has
    /// none until `RingBuffer::rebind` gives them back.
    /// `Connection::check_restored` refuses a connection with such a ring.
    Unbound(usize),
}

impl Storage {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes(),
            Storage::Unbound(_) => &[],
        }
    }
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::External(s) => s.bytes_mut(),
            Storage::Unbound(_) => &mut [],
        }
    }
}

/// Live upgrade: an owned ring's bytes go in the record as hex (every
/// byte of the storage: a receive ring keeps out-of-order bytes past its
/// queued ones). A ring in lent storage (a board's) writes no bytes, only
/// the storage's length, `{"lent": N}`: its bytes stay in the memory it was
/// lent, which the engine taking over maps again and binds to the ring
/// (`RingBuffer::rebind`); the ring's positions (`head`, `len`) are in the
/// record beside it as for an owned ring.
impl serde::Serialize for Storage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let lent = |s: S, n: usize| {
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry("lent", &(n as u64))?;
            m.end()
        };
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
            Storage::External(e) => lent(s, e.bytes().len()),
            Storage::Unbound(n) => lent(s, *n),
        }
    }
}

/// Reads what `Serialize` wrote: a hex string (owned bytes) or `{"lent": N}`.
struct StorageVisitor;

impl<'de> serde::de::Visitor<'de> for StorageVisitor {
    type Value = Storage;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ring bytes as lower-case hex, or {\"lent\": length}")
    }

    fn visit_str<E: serde::de::Error>(self, hex: &str) -> Result<Storage, E> {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(E::custom("ring bytes: not a lower-case hex digit")),
        };
        let h = hex.as_bytes();
        if !h.len().is_multiple_of(2) {
            return Err(E::custom("ring bytes: odd number of hex digits"));
        }
        let mut v = Vec::with_capacity(h.len() / 2);
        for pair in h.chunks_exact(2) {
            v.push(digit(pair[0])? << 4 | digit(pair[1])?);
        }
        Ok(Storage::Owned(v))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Storage, A::Error> {
        use serde::de::Error;
        let mut lent = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != "lent" {
                return Err(A::Error::custom(format!("ring storage: unknown field {key:?}")));
            }
            lent = Some(map.next_value::<u64>()?);
        }
        let n = lent.ok_or_else(|| A::Error::custom("ring storage: no \"lent\" length"))?;
        let n = usize::try_from(n).map_err(|_| A::Error::custom("ring storage: lent length out of range"))?;
        Ok(Storage::Unbound(n))
    }
}

impl<'de> serde::Deserialize<'de> for Storage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Storage, D::Error> {
        d.deserialize_any(StorageVisitor)
    }
}
