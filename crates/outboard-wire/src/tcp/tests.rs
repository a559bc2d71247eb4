use std::net::Ipv4Addr;
use super::*;
use crate::checksum::copy_and_checksum;
use crate::ethernet::HEADER_LEN as ETH_LEN;
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::testdata;

/// (src, dst, TCP bytes) of a captured frame.
fn tcp_of(frame: &[u8]) -> (Ipv4Addr, Ipv4Addr, &[u8]) {
    let ip = Ipv4Packet::new_checked(&frame[ETH_LEN..]).unwrap();
    let r = Ipv4Repr::parse(&ip, RxChecksum::Verify).unwrap();
    assert_eq!(r.protocol, IpProtocol::Tcp);
    let start = ETH_LEN + ip.header_len();
    (r.src_addr, r.dst_addr, &frame[start..start + r.payload_len])
}

fn parse(frame: &[u8]) -> (TcpRepr, Vec<u8>) {
    let (src, dst, b) = tcp_of(frame);
    let p = TcpPacket::new_checked(b).unwrap();
    (TcpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap(), p.payload().to_vec())
}

#[test]
fn captured_linux_syn_options() {
    let (r, payload) = parse(testdata::TCP_SYN);
    assert_eq!(r.flags, TcpFlags::SYN);
    assert_eq!(r.dst_port, 8080);
    assert!(payload.is_empty());
    assert_eq!(r.options.mss, Some(1240));
    assert!(r.options.sack_permitted);
    assert_eq!(r.options.window_scale, Some(10));
    let (tsval, tsecr) = r.options.timestamps.unwrap();
    assert_ne!(tsval, 0);
    assert_eq!(tsecr, 0);
    assert!(r.options.sack.is_empty());
    assert_eq!(r.segment_len(0), 1);
}

#[test]
fn captured_handshake_and_data_are_consistent() {
    let (syn, _) = parse(testdata::TCP_SYN);
    let (syn_ack, _) = parse(testdata::TCP_SYN_ACK);
    let (ack, _) = parse(testdata::TCP_ACK);
    let (data, payload) = parse(testdata::TCP_DATA);
    assert_eq!(syn_ack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(syn_ack.ack, syn.seq + 1);
    // RFC 7323 §4.3: the SYN-ACK echoes the SYN's TSval.
    assert_eq!(syn_ack.options.timestamps.unwrap().1, syn.options.timestamps.unwrap().0);
    assert_eq!(ack.flags, TcpFlags::ACK);
    assert_eq!(ack.ack, syn_ack.seq + 1);
    assert_eq!(ack.options, TcpOptions { timestamps: ack.options.timestamps, ..TcpOptions::default() });
    assert_eq!(payload, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(data.flags, TcpFlags::PSH | TcpFlags::ACK);
    let (data_ack, _) = parse(testdata::TCP_DATA_ACK);
    assert_eq!(data_ack.ack, data.seq + payload.len());
    let (fin, _) = parse(testdata::TCP_SERVER_FIN);
    assert!(fin.flags.fin() && fin.flags.ack());
}

#[test]
fn captured_segments_round_trip_byte_exact() {
    // Linux uses the same option layout as our emit, so every capture comes back byte for byte.
    for frame in testdata::ALL_TCP {
        let (src, dst, b) = tcp_of(frame);
        let p = TcpPacket::new_checked(b).unwrap();
        let r = TcpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
        assert_eq!(r.header_len(), p.header_len());
        let mut out = b.to_vec();
        out[..p.header_len()].fill(0);
        assert_eq!(r.emit(&mut out, src, dst, p.payload().len(), TxChecksum::Compute), Ok(p.header_len()));
        assert_eq!(out, b);
    }
}

#[test]
fn one_copy_transmit_matches_compute() {
    let (src, dst, b) = tcp_of(testdata::TCP_RESPONSE);
    let p = TcpPacket::new_checked(b).unwrap();
    let r = TcpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
    let hl = r.header_len();
    let mut seg = vec![0u8; r.buffer_len(p.payload().len())];
    let sum = copy_and_checksum(&mut seg[hl..], p.payload());
    r.emit(&mut seg, src, dst, p.payload().len(), TxChecksum::Payload(sum)).unwrap();
    assert_eq!(seg, b);
}

#[test]
fn one_copy_receive_verifies_with_payload_sum() {
    let (src, dst, b) = tcp_of(testdata::TCP_DATA);
    let p = TcpPacket::new_checked(b).unwrap();
    assert!(TcpRepr::parse(&p, src, dst, RxChecksum::Skip).is_ok());
    let mut app = vec![0u8; p.payload().len()];
    let sum = copy_and_checksum(&mut app, p.payload());
    assert!(p.verify_checksum_with(src, dst, sum));
    app[0] ^= 1;
    assert!(!p.verify_checksum_with(src, dst, crate::checksum::sum(&app)));
}

#[test]
fn corrupted_segment_fails_checksum() {
    let (src, dst, b) = tcp_of(testdata::TCP_DATA);
    for i in [0usize, 13, 20, b.len() - 1] {
        let mut c = b.to_vec();
        c[i] ^= 0x04;
        let p = TcpPacket::new_checked(&c[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, src, dst, RxChecksum::Verify), Err(Error::Checksum), "byte {i}");
    }
}

#[test]
fn every_truncation_is_an_error() {
    let (_, _, b) = tcp_of(testdata::TCP_SYN);
    for n in 0..40 {
        assert_eq!(TcpPacket::new_checked(&b[..n]).err(), Some(Error::Truncated), "len {n}");
    }
}

#[test]
fn data_offset_below_five_is_malformed() {
    let (_, _, b) = tcp_of(testdata::TCP_ACK);
    let mut b = b.to_vec();
    b[12] = 0x40;
    assert_eq!(TcpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
}

#[test]
fn port_zero_is_malformed() {
    let (src, dst, b) = tcp_of(testdata::TCP_ACK);
    let mut b = b.to_vec();
    b[0..2].fill(0);
    let p = TcpPacket::new_checked(&b[..]).unwrap();
    assert_eq!(TcpRepr::parse(&p, src, dst, RxChecksum::Skip), Err(Error::Malformed));
}

// --- options -------------------------------------------------------------

#[test]
fn options_parse_eol_stops_and_nop_skips() {
    let o = TcpOptions::parse(&[1, 1, 3, 3, 9, 0, 2, 4, 5, 0xb4]);
    assert_eq!(o.window_scale, Some(9));
    assert_eq!(o.mss, None, "bytes after EOL are not options");
}

#[test]
fn unknown_option_is_skipped_by_length() {
    // Kind 30 (MPTCP) with 6 bytes, then MSS.
    let o = TcpOptions::parse(&[30, 6, 0, 0, 0, 0, 2, 4, 0x05, 0xb4]);
    assert_eq!(o.mss, Some(1460));
}

#[test]
fn sack_blocks_parse() {
    let mut b = vec![1, 1, 5, 18];
    for v in [100u32, 200, 300, 400] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    let o = TcpOptions::parse(&b);
    assert_eq!(o.sack.as_slice(), &[(SeqNumber(100), SeqNumber(200)), (SeqNumber(300), SeqNumber(400))]);
}

/// Linux's `tcp_parse_options`: a known option of the wrong length is
/// skipped by its length (options around it still count); a missing,
/// "silly" (< 2) or overlong length ends parsing, keeping what came before.
/// The segment itself is never lost to its options.
#[test]
fn malformed_options_are_ignored_as_linux_ignores_them() {
    let ts = [8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
    let wrong_length: &[&[u8]] = &[
        &[2, 3, 0],                 // MSS must be 4
        &[3, 4, 7, 0],              // window scale must be 3
        &[4, 3, 0],                 // SACK-permitted must be 2
        &[5, 2],                    // SACK needs at least one block
        &[5, 6, 0, 0, 0, 0],        // SACK length not 2 + 8n
        &[8, 3, 0],                 // a timestamp of length 3
        &[8, 8, 0, 0, 0, 0, 0, 0],  // timestamps must be 10
    ];
    for c in wrong_length {
        let mut b = c.to_vec();
        b.extend_from_slice(&ts);
        let o = TcpOptions::parse(&b);
        assert_eq!(o.timestamps, Some((1, 2)), "{c:?} skipped by its length, the timestamp after it parsed");
        assert_eq!((o.mss, o.window_scale, o.sack_permitted, o.sack.len()), (None, None, false, 0), "{c:?} ignored");
    }
    let ending: &[&[u8]] = &[
        &[2],             // length byte missing
        &[30, 0],         // length below 2 (would loop forever)
        &[30, 1],         // length below 2
        &[30, 8, 0, 0],   // runs past the option space
    ];
    for c in ending {
        let mut b = ts.to_vec();
        b.extend_from_slice(c);
        assert_eq!(TcpOptions::parse(&b).timestamps, Some((1, 2)), "{c:?} ends parsing, what came before stands");
        let mut b = c.to_vec();
        b.extend_from_slice(&ts);
        assert_eq!(TcpOptions::parse(&b), TcpOptions::default(), "{c:?} ends parsing: nothing after it");
    }
}

#[test]
fn a_segment_with_a_malformed_option_still_parses() {
    let (src, dst, b) = tcp_of(testdata::TCP_ACK);
    let mut b = b.to_vec();
    b[22] = 8;
    b[23] = 11; // timestamps with length 11 runs one byte past the header
    let p = TcpPacket::new_checked(&b[..]).unwrap();
    let r = TcpRepr::parse(&p, src, dst, RxChecksum::Skip).expect("the segment is kept");
    assert_eq!(r.options.timestamps, None);
}

fn sack(n: u32) -> SackBlocks {
    let mut s = SackBlocks::new();
    for i in 0..n {
        s.push(SeqNumber(i * 1000), SeqNumber(i * 1000 + 500));
    }
    s
}

fn repr_with(options: TcpOptions) -> TcpRepr {
    TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: SeqNumber(10),
        ack: SeqNumber(20),
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options,
    }
}

#[test]
fn rfc2018_timestamps_leave_room_for_three_sack_blocks() {
    let o = TcpOptions { timestamps: Some((1, 2)), sack: sack(4), ..TcpOptions::default() };
    assert_eq!(o.buffer_len(), 12 + 4 + 24);
    assert_eq!(o.fitted().sack, sack(3), "the last block is dropped");
    let o = TcpOptions { sack: sack(4), ..TcpOptions::default() };
    assert_eq!(o.buffer_len(), 36);
    assert_eq!(o.fitted(), o);
}

#[test]
fn syn_options_leave_room_for_two_sack_blocks() {
    let o = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((1, 2)),
        sack: sack(4),
        fast_open: None,
    };
    assert_eq!(o.buffer_len(), 40);
    assert_eq!(o.fitted().sack, sack(2));
}

#[test]
fn emitted_options_are_padded_and_never_exceed_40_bytes() {
    let (src, dst) = (Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
    let cookies = [None, Some(FastOpenCookie::request()), Some(FastOpenCookie::new(&[9; 8]).unwrap()), Some(FastOpenCookie::new(&[7; 16]).unwrap()), Some(FastOpenCookie::new(&[5; 6]).unwrap())];
    for mask in 0..32u32 * cookies.len() as u32 {
        let o = TcpOptions {
            mss: (mask & 1 != 0).then_some(536),
            window_scale: (mask & 2 != 0).then_some(14),
            sack_permitted: mask & 4 != 0,
            timestamps: (mask & 8 != 0).then_some((7, 8)),
            sack: if mask & 16 != 0 { sack(4) } else { SackBlocks::new() },
            fast_open: cookies[(mask / 32) as usize],
        };
        let r = repr_with(o);
        let hl = r.header_len();
        assert!(hl & 3 == 0 && hl <= 60, "mask {mask}: {hl}");
        let mut buf = [0u8; 60];
        assert_eq!(r.emit(&mut buf, src, dst, 0, TxChecksum::Compute), Ok(hl));
        let p = TcpPacket::new_checked(&buf[..hl]).unwrap();
        let back = TcpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
        assert_eq!(back, repr_with(o.fitted()), "mask {mask}");
    }
}

#[test]
fn emit_checks_buffer_and_length() {
    let (src, dst) = (Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
    let r = repr_with(TcpOptions { mss: Some(1), ..TcpOptions::default() });
    assert_eq!(r.emit(&mut [0u8; 23], src, dst, 0, TxChecksum::Omit), Err(Error::Truncated));
    assert_eq!(r.emit(&mut [0u8; 24], src, dst, 1, TxChecksum::Compute), Err(Error::Truncated));
    assert_eq!(r.emit(&mut [0u8; 24], src, dst, 1, TxChecksum::Omit), Ok(24));
    assert_eq!(r.emit(&mut [0u8; 24], src, dst, 65512, TxChecksum::Omit), Err(Error::Malformed));
}

/// RFC 7413 §4.1.1: kind 34, length 2 (a request) or 6 to 18; the experimental
/// form (kind 254, magic 0xF989) is read as the same option, as Linux reads it.
#[test]
fn rfc7413_4_1_1_fast_open_option_parses_both_forms() {
    let req = TcpOptions::parse(&[34, 2, 1, 1]);
    assert_eq!(req.fast_open, Some(FastOpenCookie::request()));
    let c = TcpOptions::parse(&[34, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1]);
    assert_eq!(c.fast_open.unwrap().as_bytes(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    let exp = TcpOptions::parse(&[254, 12, 0xF9, 0x89, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(exp.fast_open, c.fast_open);
    let exp_req = TcpOptions::parse(&[254, 4, 0xF9, 0x89]);
    assert_eq!(exp_req.fast_open, Some(FastOpenCookie::request()));
    // Another experiment's option, an odd length, or too short a cookie: ignored.
    assert_eq!(TcpOptions::parse(&[254, 4, 0x12, 0x34]).fast_open, None);
    assert_eq!(TcpOptions::parse(&[34, 7, 1, 2, 3, 4, 5, 1]).fast_open, None);
    assert_eq!(TcpOptions::parse(&[34, 4, 1, 2]).fast_open, None);
    // Emitted in the RFC form, padded with trailing NOPs.
    let o = TcpOptions { fast_open: FastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]), ..TcpOptions::default() };
    assert_eq!(o.buffer_len(), 12);
    let mut buf = [0u8; 12];
    assert_eq!(o.emit(&mut buf), Ok(12));
    assert_eq!(buf, [34, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1]);
    let o = TcpOptions { fast_open: Some(FastOpenCookie::request()), ..TcpOptions::default() };
    let mut buf = [0u8; 4];
    assert_eq!(o.emit(&mut buf), Ok(4));
    assert_eq!(buf, [34, 2, 1, 1]);
}
