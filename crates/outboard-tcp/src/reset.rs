//! The RST to send for a segment that matches no connection (RFC 9293 §3.10.7.1).
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

/// The reset answering `repr` (carrying `payload_len` bytes of data) when no
/// connection (and no listener) exists for it, per RFC 9293 §3.10.7.1:
///
/// - an incoming RST is never answered (`None`);
/// - if it has ACK set: `<SEQ=SEG.ACK><CTL=RST>`;
/// - otherwise: `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`, where SEG.LEN
///   counts SYN and FIN.
///
/// Ports are swapped; the reset carries no options, no data and a zero window.
pub fn reset_for(repr: &TcpRepr, payload_len: usize) -> Option<TcpRepr> {
    if repr.flags.rst() {
        return None;
    }
    let (seq, ack, flags) = if repr.flags.ack() {
        (repr.ack, SeqNumber(0), TcpFlags::RST)
    } else {
        (SeqNumber(0), repr.seq + repr.segment_len(payload_len), TcpFlags::RST | TcpFlags::ACK)
    };
    Some(TcpRepr {
        src_port: repr.dst_port,
        dst_port: repr.src_port,
        seq,
        ack,
        flags,
        window: 0,
        urgent: 0,
        options: TcpOptions::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: TcpFlags, seq: u32, ack: u32) -> TcpRepr {
        let options = TcpOptions { mss: Some(1460), timestamps: Some((1, 2)), ..TcpOptions::default() };
        TcpRepr { src_port: 40_000, dst_port: 80, seq: SeqNumber(seq), ack: SeqNumber(ack), flags, window: 1000, urgent: 0, options }
    }

    #[test]
    fn rfc9293_3_10_7_1_rst_is_never_answered() {
        assert_eq!(reset_for(&seg(TcpFlags::RST, 5, 0), 0), None);
        assert_eq!(reset_for(&seg(TcpFlags::RST | TcpFlags::ACK, 5, 9), 0), None);
    }

    #[test]
    fn rfc9293_3_10_7_1_ack_segment_gets_rst_with_seq_from_its_ack() {
        let r = reset_for(&seg(TcpFlags::ACK | TcpFlags::PSH, 100, 7_000), 50).unwrap();
        assert_eq!(r.flags, TcpFlags::RST);
        assert_eq!(r.seq, SeqNumber(7_000));
        assert_eq!((r.src_port, r.dst_port), (80, 40_000));
        assert_eq!(r.options, TcpOptions::default());
        assert_eq!(r.window, 0);
    }

    #[test]
    fn rfc9293_3_10_7_1_syn_gets_rst_ack_covering_the_syn() {
        let r = reset_for(&seg(TcpFlags::SYN, 1_000, 0), 0).unwrap();
        assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
        assert_eq!(r.seq, SeqNumber(0));
        assert_eq!(r.ack, SeqNumber(1_001));
        assert_eq!((r.src_port, r.dst_port), (80, 40_000));
        assert_eq!(r.options, TcpOptions::default());
    }

    #[test]
    fn rfc9293_3_10_7_1_non_ack_segment_len_counts_data_syn_and_fin() {
        let r = reset_for(&seg(TcpFlags::SYN | TcpFlags::FIN, 10, 0), 20).unwrap();
        assert_eq!(r.ack, SeqNumber(10 + 20 + 2));
        let r = reset_for(&seg(TcpFlags::NONE, 10, 0), 5).unwrap();
        assert_eq!(r.ack, SeqNumber(15));
        // Wraps around the sequence space.
        let r = reset_for(&seg(TcpFlags::FIN, u32::MAX, 0), 3).unwrap();
        assert_eq!(r.ack, SeqNumber(3));
    }
}
