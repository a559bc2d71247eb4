//! The Wireshark dissector (tools/wireshark/outboard-msg.lua) against frames
//! this crate writes: one of every message kind on UDP port 7373, one on
//! another port (found by the heuristic), and frames on 7373 that break each
//! rule of `MsgPacket::check_len` and `MsgRepr::parse`.
//! Run through tshark, every field and every summary must be the one written,
//! and no frame may raise a Lua error.
//!
//! Without tshark the test says so on stderr and passes, unless `CI` is set
//! (CI installs tshark), where it fails.

use outboard_time::Instant;
use outboard_wire::msg::{flags, DEFAULT_PORT, HEADER_LEN, MAX_MESSAGE_LEN};
use outboard_wire::pcap::PcapBuf;
use outboard_wire::{
    EtherType, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Repr, MsgKind, MsgRepr, MsgStatus, TxChecksum, UdpRepr,
};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SRC_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// A port nothing in Wireshark claims, so only the heuristic can find the frame.
const OTHER_PORT: u16 = 50123;

/// One frame of the capture and what tshark must show for it.
struct Case {
    repr: MsgRepr,
    payload: &'static [u8],
    dst_port: u16,
    /// The Info column, exactly.
    info: &'static str,
}

fn cases() -> Vec<Case> {
    let base = |kind: MsgKind, k: u32| MsgRepr {
        src_mailbox: 16,
        dst_mailbox: 32,
        src_session: 0xa000_0000 + k,
        dst_session: 0xb000_0000 + k,
        ..MsgRepr::new(kind)
    };
    let c = |repr, payload, info| Case { repr, payload, dst_port: DEFAULT_PORT, info };
    vec![
        c(MsgRepr { id: 5, total_len: 5, ..base(MsgKind::Datagram, 1) }, b"hello", "datagram id=5 mb 16→32 off 0/5"),
        c(
            MsgRepr { flags: flags::ACK_NOW, id: 7, ack: 2, offset: 1400, total_len: 1405, ..base(MsgKind::Message, 2) },
            b"world",
            "message id=7 mb 16→32 off 1400/1405 ack-now",
        ),
        c(
            MsgRepr { id: 2, ack: 8, sack: 0x8000_0000_0000_0005, credit: 64, ..base(MsgKind::MessageAck, 3) },
            b"",
            "message-ack id=2 mb 16→32 ack=8 credit=64",
        ),
        c(MsgRepr { id: 5, ack: 3, total_len: 5, ..base(MsgKind::Request, 4) }, b"query", "request id=5 mb 16→32 off 0/5"),
        c(
            MsgRepr { flags: flags::RETRANSMIT, id: 5, total_len: 3, ..base(MsgKind::Response, 5) },
            b"ans",
            "response id=5 mb 16→32 off 0/3 retransmit",
        ),
        c(MsgRepr { id: 5, ..base(MsgKind::ResponseAck, 6) }, b"", "response-ack id=5 mb 16→32"),
        c(MsgRepr { id: 6, ..base(MsgKind::RequestAck, 7) }, b"", "request-ack id=6 mb 16→32"),
        c(
            MsgRepr { id: 9, dst_mailbox: 0, ..base(MsgKind::Lookup, 8) },
            b"kv-store",
            "lookup id=9 mb 16→0 name=\"kv-store\"",
        ),
        c(MsgRepr { id: 9, src_mailbox: 48, dst_mailbox: 16, ..base(MsgKind::LookupReply, 9) }, b"", "lookup-reply id=9 mb 48→16"),
        // An id above 2^53, so a dissector that reads it as a double would show it wrong.
        c(
            MsgRepr {
                id: 0xfedc_ba98_7654_3210,
                ack: MsgKind::Request as u64,
                status: MsgStatus::Busy as u32,
                ..base(MsgKind::Error, 10)
            },
            b"",
            "error id=18364758544493064720 mb 16→32 busy refused=request",
        ),
        c(MsgRepr { id: 2, ..base(MsgKind::Probe, 11) }, b"", "probe id=2 mb 16→32"),
        Case {
            repr: MsgRepr { id: 77, total_len: 2, ..base(MsgKind::Datagram, 12) },
            payload: b"hi",
            dst_port: OTHER_PORT,
            info: "datagram id=77 mb 16→32 off 0/2",
        },
    ]
}

/// Ethernet, IPv4 and UDP around `msg`, both checksums computed.
fn udp_frame(msg: &[u8], src_port: u16, dst_port: u16, ident: u16) -> Vec<u8> {
    let udp = UdpRepr { src_port, dst_port };
    let ip = Ipv4Repr {
        src_addr: SRC_IP,
        dst_addr: DST_IP,
        protocol: IpProtocol::Udp,
        payload_len: udp.buffer_len(msg.len()),
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
        dst_addr: EthernetAddress([0x02, 0, 0, 0, 0, 2]),
        ethertype: EtherType::Ipv4,
    };
    let (eh, ih, uh) = (eth.buffer_len(), ip.buffer_len(), udp.header_len());
    let mut buf = vec![0u8; eh + ih + uh + msg.len()];
    eth.emit(&mut buf).unwrap();
    ip.emit(&mut buf[eh..]).unwrap();
    buf[eh + ih + uh..].copy_from_slice(msg);
    udp.emit(&mut buf[eh + ih..], SRC_IP, DST_IP, msg.len(), TxChecksum::Compute).unwrap();
    buf
}

fn message(repr: &MsgRepr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    assert_eq!(repr.emit(&mut b), Ok(HEADER_LEN));
    b[HEADER_LEN..].copy_from_slice(payload);
    b
}

const MALFORMED: &str = "outboard_msg.malformed";
const UNSUPPORTED: &str = "outboard_msg.unsupported";

/// Frames on port 7373 that break a rule of `MsgPacket::check_len` or
/// `MsgRepr::parse`: the Info column for each and the expert info it must carry.
fn broken_frames() -> Vec<(Vec<u8>, &'static str, &'static str)> {
    let probe = MsgRepr { id: 3, ..MsgRepr::new(MsgKind::Probe) };
    let mut bad_magic = message(&probe, b"");
    bad_magic[0] = b'X';
    let mut header_past_end = message(&probe, b"");
    header_past_end[7] = 200;
    let mut odd_header = message(&probe, b"abcd");
    odd_header[7] = 66;
    let mut version_2 = message(&probe, b"");
    version_2[2] = 2;
    let mut kind_12 = message(&probe, b"");
    kind_12[3] = 12;
    let datagram = MsgRepr { total_len: 3, ..MsgRepr::new(MsgKind::Datagram) };
    let error = MsgRepr { ack: 99, status: 9, ..MsgRepr::new(MsgKind::Error) };
    vec![
        (b"OB\x01\x01garbage".to_vec(), "malformed: 11 bytes", MALFORMED),
        (bad_magic, "malformed: bad magic", MALFORMED),
        (header_past_end, "probe id=3 mb 0→0 [malformed header length]", MALFORMED),
        (odd_header, "probe id=3 mb 0→0 [malformed header length]", MALFORMED),
        (version_2, "probe id=3 mb 0→0 [unsupported version]", UNSUPPORTED),
        (kind_12, "kind-12 id=3 mb 0→0 [unknown kind]", UNSUPPORTED),
        (message(&datagram, b"abcd"), "datagram id=0 mb 0→0 off 0/3 [malformed]", MALFORMED),
        (message(&datagram, b""), "datagram id=0 mb 0→0 off 0/3 [malformed]", MALFORMED),
        (message(&MsgRepr { total_len: MAX_MESSAGE_LEN + 1, ..datagram }, b"a"), "datagram id=0 mb 0→0 off 0/16777217 [malformed]", MALFORMED),
        (message(&MsgRepr::new(MsgKind::Lookup), b""), "lookup id=0 mb 0→0 [malformed]", MALFORMED),
        (message(&error, b""), "error id=0 mb 0→0 status-9 refused=99 [malformed]", MALFORMED),
        (message(&probe, b"x"), "probe id=3 mb 0→0 [malformed]", MALFORMED),
    ]
}

/// Removes the directory when the test ends, passed or not.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tshark(pcap: &Path, lua: &Path, args: &[&str]) -> String {
    let script = format!("lua_script:{}", lua.display());
    let o: Output = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-X", &script])
        .args(args)
        .output()
        .expect("run tshark");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tshark {args:?} failed: {stderr}\n{stdout}");
    // tshark reports a script that does not load on stderr and carries on.
    assert!(!stderr.contains("Lua"), "tshark {args:?} reported a Lua problem: {stderr}");
    stdout
}

/// True when tshark runs; false (after saying so) when it is missing outside CI.
fn have_tshark() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        r => {
            let why = match r {
                Ok(o) => format!("`tshark --version` exited with {}", o.status),
                Err(e) => format!("tshark could not be run: {e}"),
            };
            if std::env::var_os("CI").is_some() {
                panic!("{why}; CI must install tshark (apt-get install tshark)");
            }
            // Straight to stderr, past the harness's capture, so a passing run shows it.
            let line = format!("SKIPPED: the Wireshark dissector test needs tshark: {why}. Install it with `apt-get install tshark`.\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            false
        }
    }
}

#[test]
fn the_wireshark_dissector_decodes_every_kind_and_survives_broken_frames() {
    if !have_tshark() {
        return;
    }
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/outboard-msg.lua");
    assert!(lua.is_file(), "{} is missing", lua.display());

    let cases = cases();
    let broken = broken_frames();
    let mut pcap = PcapBuf::new(65535);
    let mut n = 0u64;
    for c in &cases {
        n += 1;
        let frame = udp_frame(&message(&c.repr, c.payload), 40000 + n as u16, c.dst_port, n as u16);
        pcap.record(Instant::from_nanos(n * 1_000_000), &frame);
    }
    for (msg, _, _) in &broken {
        n += 1;
        pcap.record(Instant::from_nanos(n * 1_000_000), &udp_frame(msg, 40000 + n as u16, DEFAULT_PORT, n as u16));
    }
    // One test per process: the process id makes the name unique.
    let dir = TempDir(std::env::temp_dir().join(format!("outboard-dissector-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("msg.pcap");
    std::fs::write(&file, pcap.as_bytes()).unwrap();

    // Every header field, one line per frame.
    const FIELDS: [&str; 19] = [
        "udp.dstport",
        "ip.checksum.status",
        "udp.checksum.status",
        "outboard_msg.version",
        "outboard_msg.kind",
        "outboard_msg.flags.ack_now",
        "outboard_msg.flags.retransmit",
        "outboard_msg.header_len",
        "outboard_msg.src_mailbox",
        "outboard_msg.dst_mailbox",
        "outboard_msg.src_session",
        "outboard_msg.dst_session",
        "outboard_msg.id",
        "outboard_msg.ack",
        "outboard_msg.sack",
        "outboard_msg.credit",
        "outboard_msg.offset",
        "outboard_msg.total_len",
        "outboard_msg.status",
    ];
    let mut args = vec!["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-T", "fields"];
    for f in FIELDS.iter().chain(&["outboard_msg.name", "outboard_msg.payload"]) {
        args.extend(["-e", f]);
    }
    let out = tshark(&file, &lua, &args);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), cases.len() + broken.len(), "one line per frame:\n{out}");
    for (c, line) in cases.iter().zip(&lines) {
        let what = c.repr.kind.name();
        let got: Vec<&str> = line.split('\t').collect();
        assert_eq!(got.len(), FIELDS.len() + 2, "{what}: {line}");
        let r = &c.repr;
        let flag = |f: u16| if r.flags & f != 0 { "1" } else { "0" };
        let want = [
            c.dst_port.to_string(),
            "1".into(), // checksum good (0 bad, 2 unverified)
            "1".into(),
            "1".into(),
            (r.kind as u8).to_string(),
            flag(flags::ACK_NOW).into(),
            flag(flags::RETRANSMIT).into(),
            HEADER_LEN.to_string(),
            r.src_mailbox.to_string(),
            r.dst_mailbox.to_string(),
            format!("{:#010x}", r.src_session),
            format!("{:#010x}", r.dst_session),
            r.id.to_string(),
            r.ack.to_string(),
            format!("{:#018x}", r.sack),
            r.credit.to_string(),
            r.offset.to_string(),
            r.total_len.to_string(),
            r.status.to_string(),
        ];
        for ((name, w), g) in FIELDS.iter().zip(&want).zip(&got) {
            assert_eq!(g, w, "{what}: {name} in {line}");
        }
        let (name, payload) = (got[FIELDS.len()], got[FIELDS.len() + 1].replace(':', ""));
        if r.kind == MsgKind::Lookup {
            assert_eq!((name, payload.as_str()), (std::str::from_utf8(c.payload).unwrap(), ""), "{what}: {line}");
        } else {
            let hex: String = c.payload.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!((name, payload), ("", hex), "{what}: {line}");
        }
    }

    // The Info column: kind names, summaries, and the broken frames' diagnoses.
    let out = tshark(&file, &lua, &["-o", "gui.column.format:\"Info\",\"%i\""]);
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let want: Vec<&str> = cases.iter().map(|c| c.info).chain(broken.iter().map(|b| b.1)).collect();
    assert_eq!(lines, want, "Info column:\n{out}");

    // The detail view: value strings by name, no Lua error, the broken frames flagged.
    let out = tshark(&file, &lua, &["-V"]);
    assert!(!out.contains("Lua Error"), "a Lua error in the detail view:\n{out}");
    for c in &cases {
        let k = c.repr.kind;
        assert!(out.contains(&format!("Kind: {} ({})", k.name(), k as u8)), "no `Kind: {}` in:\n{out}", k.name());
    }
    for needle in ["Status: busy (4)", "Refused kind: request (4)", "Name: kv-store", ".... .... .... ...1 = Ack now: True"] {
        assert!(out.contains(needle), "no `{needle}` in the detail view:\n{out}");
    }

    // Exactly the broken frames carry expert info, each the one it should.
    for expert in [MALFORMED, UNSUPPORTED] {
        let out = tshark(&file, &lua, &["-Y", expert, "-T", "fields", "-e", "frame.number"]);
        let flagged: Vec<usize> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
        let want: Vec<usize> = (broken.iter().enumerate())
            .filter(|(_, b)| b.2 == expert)
            .map(|(i, _)| cases.len() + 1 + i)
            .collect();
        assert_eq!(flagged, want, "frames with {expert}");
    }
}
