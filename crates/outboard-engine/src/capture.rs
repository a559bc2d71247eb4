//! `--pcap FILE`: every frame in and out, as the link saw it, in pcap format
//! (nanosecond timestamps, wall-clock time) for tshark and Wireshark.

use outboard_time::Instant;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

pub struct PcapWriter {
    out: BufWriter<File>,
    /// Wall-clock nanoseconds at monotonic zero.
    wall_offset_ns: u64,
    pub frames: u64,
    /// First write error; capture stops there (the engine keeps running).
    pub error: Option<String>,
}

const SNAPLEN: u32 = 65535;

impl PcapWriter {
    pub fn create(path: &Path, now: Instant) -> std::io::Result<PcapWriter> {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        out.write_all(&outboard_wire::pcap::file_header(SNAPLEN))?;
        #[allow(clippy::disallowed_methods)] // the capture's timestamps are wall-clock by convention
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(PcapWriter { out, wall_offset_ns: wall.saturating_sub(now.as_nanos()), frames: 0, error: None })
    }

    pub fn record(&mut self, at: Instant, frame: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let caplen = frame.len().min(SNAPLEN as usize);
        let hdr = outboard_wire::pcap::record_header(at.as_nanos() + self.wall_offset_ns, caplen, frame.len());
        if let Err(e) = self.out.write_all(&hdr).and_then(|_| self.out.write_all(&frame[..caplen])) {
            self.error = Some(e.to_string());
        } else {
            self.frames += 1;
        }
    }

    pub fn flush(&mut self) {
        if let Err(e) = self.out.flush() {
            self.error.get_or_insert(e.to_string());
        }
    }
}

impl Drop for PcapWriter {
    fn drop(&mut self) {
        self.flush();
    }
}
