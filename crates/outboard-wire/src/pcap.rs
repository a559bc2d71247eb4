//! A minimal pcap (libpcap 2.4, Ethernet link type) encoder into memory, so a
//! failing seed's traffic can be opened in Wireshark. Timestamps are virtual
//! time with nanosecond resolution (magic 0xa1b23c4d).

use outboard_time::Instant;

/// Collects frames as a pcap file image.
#[derive(Debug, Clone)]
pub struct PcapBuf {
    bytes: Vec<u8>,
    snaplen: u32,
}

/// The 24-byte pcap file header (nanosecond timestamps, Ethernet link type).
pub fn file_header(snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes()); // nanosecond timestamps
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs stay 0.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    h
}

/// The 16-byte header of one record: timestamp (ns since the epoch the
/// caller chose), captured length, original length.
pub fn record_header(at_ns: u64, caplen: usize, len: usize) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&((at_ns / 1_000_000_000) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&((at_ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
    h[12..16].copy_from_slice(&(len as u32).to_le_bytes());
    h
}

impl PcapBuf {
    pub fn new(snaplen: u32) -> PcapBuf {
        let mut bytes = Vec::with_capacity(1 << 16);
        bytes.extend_from_slice(&file_header(snaplen));
        PcapBuf { bytes, snaplen }
    }

    pub fn record(&mut self, at: Instant, frame: &[u8]) {
        let caplen = frame.len().min(self.snaplen as usize);
        self.bytes
            .extend_from_slice(&record_header(at.as_nanos(), caplen, frame.len()));
        self.bytes.extend_from_slice(&frame[..caplen]);
    }

    /// The file image so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout_follow_libpcap_format() {
        let mut p = PcapBuf::new(65535);
        p.record(Instant::from_nanos(3_000_000_007), &[1, 2, 3]);
        let b = p.as_bytes();
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 3);
        assert_eq!(&b[40..], &[1, 2, 3]);
    }

    #[test]
    fn long_frames_are_cut_at_snaplen() {
        let mut p = PcapBuf::new(4);
        p.record(Instant::ZERO, &[9; 10]);
        let b = p.as_bytes();
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 4);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 10);
        assert_eq!(b.len(), 24 + 16 + 4);
    }
}
