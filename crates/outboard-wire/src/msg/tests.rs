use super::*;

/// A reliable-message fragment written out by hand from the byte table in
/// docs/MESSAGES.md: "hello" at offset 1400 of a 1405-byte message, frame 7
/// of incarnation 2, from mailbox 0x10 (session 0xAABBCCDD) to mailbox 0x20.
const MESSAGE_FRAME: [u8; 69] = [
    0x4f, 0x42, 0x01, 0x02, // magic "OB", version 1, kind 2 (message)
    0x00, 0x01, 0x00, 0x40, // flags ACK_NOW, header length 64
    0x00, 0x00, 0x00, 0x10, // source mailbox
    0x00, 0x00, 0x00, 0x20, // destination mailbox
    0xaa, 0xbb, 0xcc, 0xdd, // source session
    0x00, 0x00, 0x00, 0x00, // destination session (not yet known)
    0, 0, 0, 0, 0, 0, 0, 7, // id: frame 7
    0, 0, 0, 0, 0, 0, 0, 2, // ack: incarnation 2
    0, 0, 0, 0, 0, 0, 0, 0, // sack
    0x00, 0x00, 0x00, 0x00, // credit
    0x00, 0x00, 0x05, 0x78, // offset 1400
    0x00, 0x00, 0x05, 0x7d, // total length 1405
    0x00, 0x00, 0x00, 0x00, // status
    b'h', b'e', b'l', b'l', b'o',
];

fn message_repr() -> MsgRepr {
    MsgRepr {
        flags: flags::ACK_NOW,
        src_mailbox: 0x10,
        dst_mailbox: 0x20,
        src_session: 0xaabb_ccdd,
        id: 7,
        ack: 2,
        offset: 1400,
        total_len: 1405,
        ..MsgRepr::new(MsgKind::Message)
    }
}

#[test]
fn construct_matches_the_byte_table() {
    let r = message_repr();
    let mut buf = vec![0u8; r.buffer_len(5)];
    assert_eq!(r.emit(&mut buf), Ok(HEADER_LEN));
    buf[HEADER_LEN..].copy_from_slice(b"hello");
    assert_eq!(buf, MESSAGE_FRAME);
}

#[test]
fn deconstruct_reads_every_field() {
    let p = MsgPacket::new_checked(&MESSAGE_FRAME[..]).unwrap();
    assert_eq!(MsgRepr::parse(&p), Ok(message_repr()));
    assert_eq!(p.payload(), b"hello");
    assert_eq!(p.header_len(), 64);
}

#[test]
fn truncated_and_wrong_magic_are_errors() {
    for n in 0..HEADER_LEN {
        assert_eq!(MsgPacket::new_checked(&MESSAGE_FRAME[..n]).err(), Some(Error::Truncated), "{n} bytes");
    }
    let mut b = MESSAGE_FRAME;
    b[0] = b'X';
    assert_eq!(MsgPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
}

#[test]
fn header_extension_is_skipped_and_bad_lengths_refused() {
    // A later version's longer header: this version reads its own fields and skips the rest.
    let mut b = MESSAGE_FRAME[..HEADER_LEN].to_vec();
    b[7] = 68;
    b.extend_from_slice(&[9, 9, 9, 9]);
    b.extend_from_slice(b"hello");
    let p = MsgPacket::new_checked(&b[..]).unwrap();
    assert_eq!(MsgRepr::parse(&p), Ok(message_repr()));
    assert_eq!(p.payload(), b"hello");
    for (hl, err) in [(60u8, Error::Malformed), (66, Error::Malformed), (200, Error::Truncated)] {
        let mut b = MESSAGE_FRAME;
        b[7] = hl;
        assert_eq!(MsgPacket::new_checked(&b[..]).err(), Some(err), "header length {hl}");
    }
}

#[test]
fn other_versions_and_unknown_kinds_are_unsupported() {
    let mut b = MESSAGE_FRAME;
    b[2] = 2;
    assert_eq!(MsgRepr::parse(&MsgPacket::new_unchecked(&b[..])), Err(Error::Unsupported));
    for kind in [0u8, 12, 255] {
        let mut b = MESSAGE_FRAME;
        b[3] = kind;
        assert_eq!(MsgRepr::parse(&MsgPacket::new_unchecked(&b[..])), Err(Error::Unsupported), "kind {kind}");
    }
}

#[test]
fn a_fragment_must_fit_its_message() {
    let emit = |r: MsgRepr, payload: &[u8]| {
        let mut b = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut b).unwrap();
        b[HEADER_LEN..].copy_from_slice(payload);
        MsgRepr::parse(&MsgPacket::new_checked(&b[..]).unwrap())
    };
    let ok = MsgRepr { total_len: 10, offset: 5, ..MsgRepr::new(MsgKind::Datagram) };
    assert!(emit(ok, b"12345").is_ok());
    assert_eq!(emit(ok, b"123456"), Err(Error::Malformed), "past the end");
    assert_eq!(emit(MsgRepr { offset: u32::MAX, ..ok }, b"1"), Err(Error::Malformed), "offset overflow");
    assert_eq!(emit(ok, b""), Err(Error::Malformed), "empty fragment of a non-empty message");
    assert!(emit(MsgRepr { total_len: 0, offset: 0, ..ok }, b"").is_ok(), "the empty message");
    let huge = MsgRepr { total_len: MAX_MESSAGE_LEN + 1, offset: 0, ..ok };
    assert_eq!(emit(huge, b"x"), Err(Error::Malformed));
    // Control kinds carry no payload; a lookup carries a name of 1..=255 bytes.
    assert_eq!(emit(MsgRepr::new(MsgKind::MessageAck), b"x"), Err(Error::Malformed));
    assert_eq!(emit(MsgRepr::new(MsgKind::Lookup), b""), Err(Error::Malformed));
    assert_eq!(emit(MsgRepr::new(MsgKind::Lookup), &[b'n'; 256]), Err(Error::Malformed));
    assert!(emit(MsgRepr::new(MsgKind::Lookup), b"kv").is_ok());
    // An error frame names a known status.
    assert_eq!(emit(MsgRepr::new(MsgKind::Error), b""), Err(Error::Malformed));
    let e = emit(MsgRepr { status: MsgStatus::NoMailbox as u32, ..MsgRepr::new(MsgKind::Error) }, b"").unwrap();
    assert_eq!(e.error_status(), Some(MsgStatus::NoMailbox));
    // A response is answered (status 0) or failed (1, with no bytes); other kinds' status is kept, unchecked.
    let resp = MsgRepr { total_len: 2, offset: 0, ..MsgRepr::new(MsgKind::Response) };
    assert!(emit(resp, b"ok").is_ok());
    let failed = MsgRepr { status: super::response_status::FAILED, total_len: 0, ..resp };
    assert_eq!(emit(failed, b"").unwrap().status, super::response_status::FAILED);
    assert_eq!(emit(MsgRepr { total_len: 2, ..failed }, b"no"), Err(Error::Malformed), "a failed response with bytes");
    assert_eq!(emit(MsgRepr { status: 2, ..resp }, b"ok"), Err(Error::Malformed), "an unknown response status");
    assert_eq!(emit(MsgRepr { status: 7, ..ok }, b"12345").unwrap().status, 7);
}

#[test]
fn unknown_flags_are_dropped_and_emit_needs_room() {
    let mut b = MESSAGE_FRAME;
    b[4] = 0x80;
    let r = MsgRepr::parse(&MsgPacket::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(r.flags, flags::ACK_NOW);
    assert_eq!(message_repr().emit(&mut [0u8; 63]), Err(Error::Truncated));
}

#[test]
fn every_kind_round_trips() {
    for k in 1..=11u8 {
        let kind = MsgKind::from_u8(k).unwrap();
        assert_eq!(kind as u8, k);
        let mut r = MsgRepr { id: u64::MAX - u64::from(k), ack: 3, sack: 0x8000_0000_0000_0001, credit: 64, ..MsgRepr::new(kind) };
        let payload: &[u8] = match kind {
            MsgKind::Lookup => b"name",
            _ if kind.carries_fragment() => {
                r.total_len = 3;
                b"abc"
            }
            MsgKind::Error => {
                r.status = MsgStatus::Busy as u32;
                b""
            }
            _ => b"",
        };
        let mut b = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut b).unwrap();
        b[HEADER_LEN..].copy_from_slice(payload);
        let p = MsgPacket::new_checked(&b[..]).unwrap();
        assert_eq!(MsgRepr::parse(&p), Ok(r), "{}", kind.name());
        assert_eq!(p.payload(), payload);
    }
}
