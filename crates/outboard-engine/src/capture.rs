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
        let mut w = PcapWriter::create_on(File::create(path)?, now);
        w.out.write_all(&outboard_wire::pcap::file_header(SNAPLEN))?;
        Ok(w)
    }

    /// Live upgrade: goes on with the capture the running engine wrote to
    /// `path` (appending records after its; a missing or empty file is
    /// created as by `create`).
    pub fn append(path: &Path, now: Instant) -> std::io::Result<PcapWriter> {
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= outboard_wire::pcap::file_header(SNAPLEN).len() as u64) {
            let f = std::fs::OpenOptions::new().append(true).open(path)?;
            return Ok(PcapWriter::create_on(f, now));
        }
        PcapWriter::create(path, now)
    }

    fn create_on(f: File, now: Instant) -> PcapWriter {
        #[allow(clippy::disallowed_methods)] // the capture's timestamps are wall-clock by convention
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        PcapWriter { out: BufWriter::with_capacity(1 << 20, f), wall_offset_ns: wall.saturating_sub(now.as_nanos()), frames: 0, error: None }
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
