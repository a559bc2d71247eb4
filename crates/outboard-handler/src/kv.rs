//! A handler's key-value store: the host keeps it, so it outlives the
//! instance (a trap, a replacement). Bounded in bytes (keys and values
//! together) and in each key's and value's size.

use std::collections::HashMap;

pub const MAX_KEY: usize = 256;
pub const MAX_VALUE: usize = 64 << 10;
/// Bytes an entry costs beyond its key and value.
const ENTRY_OVERHEAD: usize = 32;

#[derive(Debug, Default, Clone)]
pub struct KvStore {
    map: HashMap<Vec<u8>, Vec<u8>>,
    used: usize,
    cap: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KvError {
    /// A key of 0 or more than [`MAX_KEY`] bytes, a value over [`MAX_VALUE`].
    Invalid,
    /// The store would pass its cap.
    Full,
}

impl KvStore {
    pub fn new(cap: usize) -> KvStore {
        KvStore { map: HashMap::new(), used: 0, cap }
    }

    /// A copy with another cap (a store over it keeps its entries; puts fail until it is under).
    pub fn clone_with_cap(&self, cap: usize) -> KvStore {
        KvStore { cap, ..self.clone() }
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).map(Vec::as_slice)
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        if key.is_empty() || key.len() > MAX_KEY || value.len() > MAX_VALUE {
            return Err(KvError::Invalid);
        }
        let old = self.map.get(key).map_or(0, |v| v.len() + key.len() + ENTRY_OVERHEAD);
        let new = key.len() + value.len() + ENTRY_OVERHEAD;
        if self.used - old + new > self.cap {
            return Err(KvError::Full);
        }
        self.used = self.used - old + new;
        match self.map.get_mut(key) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            None => {
                self.map.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }

    pub fn delete(&mut self, key: &[u8]) -> bool {
        match self.map.remove(key) {
            Some(v) => {
                self.used -= v.len() + key.len() + ENTRY_OVERHEAD;
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn used_bytes(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_holds_and_replacing_or_deleting_gives_bytes_back() {
        let mut kv = KvStore::new(200);
        kv.put(b"a", &[1; 100]).unwrap();
        assert_eq!(kv.put(b"b", &[2; 100]), Err(KvError::Full));
        kv.put(b"a", &[3; 10]).unwrap();
        kv.put(b"b", &[2; 100]).unwrap();
        assert_eq!(kv.get(b"a"), Some(&[3u8; 10][..]));
        assert!(kv.delete(b"b"));
        assert!(!kv.delete(b"b"));
        assert_eq!(kv.used_bytes(), 1 + 10 + ENTRY_OVERHEAD);
        assert_eq!(kv.put(b"", b"x"), Err(KvError::Invalid));
        assert_eq!(kv.put(&[0; MAX_KEY + 1], b"x"), Err(KvError::Invalid));
    }
}
