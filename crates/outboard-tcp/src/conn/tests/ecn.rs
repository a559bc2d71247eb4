//! RFC 3168 §6.1 ECN, scripted: negotiation as Linux's `tcp_ecn` modes,
//! ECT on new data only, the receiver's ECE echo until CWR, and the sender's
//! one reduction per window with CWR on its next new data.

use super::*;
use crate::conn::EcnMode;
use crate::CcKind;

const ECE: TcpFlags = TcpFlags::ECE;
const CWR: TcpFlags = TcpFlags::CWR;

fn cfg(ecn: EcnMode) -> Config {
    Config { ecn, ..plain_cfg() }
}

/// An established connection with ECN negotiated (we asked, the peer agreed).
fn ecn_established() -> Harness {
    let mut h = Harness::connect(&cfg(EcnMode::On));
    let syn = h.recv_one();
    assert!(syn.flags().contains(ECE | CWR), "ECN-setup SYN: {:?}", syn.flags());
    let mut sa = seg(SYN | ACK | ECE, PEER_ISS, ISS + 1);
    sa.options.mss = Some(1460);
    h.send(&sa, b"");
    h.recv_one();
    assert!(h.c.info().ecn);
    h
}

#[test]
fn rfc3168_6_1_1_passive_default_answers_an_ecn_setup_syn_with_ece_only() {
    let mut syn = seg(SYN | ECE | CWR, PEER_ISS, 0);
    syn.options.mss = Some(1460);
    let mut h = Harness::accept(&Config::default(), &syn);
    let sa = h.recv_one();
    assert_eq!(sa.flags(), SYN | ACK | ECE, "ECN-setup SYN-ACK carries ECE, not CWR");
    assert!(h.c.info().ecn);
    // A plain SYN gets a plain SYN-ACK; so does any SYN with ECN off.
    let mut h = Harness::accept(&Config::default(), &seg(SYN, PEER_ISS, 0));
    assert_eq!(h.recv_one().flags(), SYN | ACK);
    let mut h = Harness::accept(&cfg(EcnMode::Off), &syn);
    assert_eq!(h.recv_one().flags(), SYN | ACK);
    assert!(!h.c.info().ecn);
    // A SYN with ECE alone is not an ECN-setup SYN (§6.1.1).
    let mut h = Harness::accept(&Config::default(), &seg(SYN | ECE, PEER_ISS, 0));
    assert_eq!(h.recv_one().flags(), SYN | ACK);
}

#[test]
fn rfc3168_6_1_1_an_active_open_asks_only_when_on_and_needs_ece_without_cwr_back() {
    // Linux's default (2) never asks.
    let mut h = Harness::connect(&Config::default());
    assert_eq!(h.recv_one().flags(), SYN);
    // On asks; a SYN-ACK with ECE and CWR is not an ECN-setup SYN-ACK.
    let mut h = Harness::connect(&cfg(EcnMode::On));
    assert_eq!(h.recv_one().flags(), SYN | ECE | CWR);
    h.send(&seg(SYN | ACK | ECE | CWR, PEER_ISS, ISS + 1), b"");
    assert!(!h.c.info().ecn);
    // A SYN-ACK without ECE: no ECN.
    let mut h = Harness::connect(&cfg(EcnMode::On));
    h.recv_one();
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    assert!(!h.c.info().ecn);
    // ECE alone: ECN.
    assert!(ecn_established().c.info().ecn);
}

#[test]
fn rfc3168_6_1_2_ect_only_on_new_data_never_on_acks_or_retransmissions() {
    let mut h = ecn_established();
    h.c.send(&[1u8; 3000]).unwrap();
    let out = h.recv();
    assert!(out.len() >= 2 && out.iter().all(|o| o.ect), "new data carries ECT(0): {out:?}");
    // The RTO resends without ECT (§6.1.5).
    h.fire_next_timer();
    let rexmit = h.recv();
    assert!(!rexmit.is_empty() && rexmit.iter().all(|o| !o.ect), "{rexmit:?}");
    // A pure ACK carries no ECT.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"hello");
    h.advance(Duration::from_millis(300));
    let acks = h.recv();
    assert!(acks.iter().any(|o| o.len() == 0), "{acks:?}");
    assert!(acks.iter().filter(|o| o.len() == 0).all(|o| !o.ect));
    // Without ECN nothing carries ECT.
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&[1u8; 100]).unwrap();
    assert!(!h.recv_one().ect);
}

#[test]
fn rfc3168_6_1_3_the_receiver_echoes_ece_from_a_ce_mark_until_cwr() {
    let mut h = ecn_established();
    // A CE-marked data segment: the ACK goes at once with ECE.
    h.c.note_ce();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"marked");
    let a = h.recv_one();
    assert_eq!((a.ack(), a.flags()), (PEER_ISS + 7, ACK | ECE));
    assert!(h.c.info().ecn_seen);
    // Unmarked data still gets ECE: the echo lasts until CWR.
    h.send(&seg(ACK, PEER_ISS + 7, ISS + 1), &[0u8; 1460]);
    h.send(&seg(ACK, PEER_ISS + 1467, ISS + 1), &[0u8; 1460]);
    let a = h.recv_one();
    assert!(a.flags().contains(ECE), "{:?}", a.flags());
    h.send(&seg(ACK | CWR, PEER_ISS + 2927, ISS + 1), &[0u8; 1460]);
    h.send(&seg(ACK, PEER_ISS + 4387, ISS + 1), &[0u8; 1460]);
    let a = h.recv_one();
    assert!(!a.flags().contains(ECE), "CWR ended the echo: {:?}", a.flags());
    // A CE note on a dropped (out-of-window) segment does not start an echo.
    h.c.note_ce();
    h.send(&seg(ACK, PEER_ISS + 900_000, ISS + 1), b"x");
    h.send(&seg(ACK, PEER_ISS + 5847, ISS + 1), &[0u8; 1460]);
    h.send(&seg(ACK, PEER_ISS + 7307, ISS + 1), &[0u8; 1460]);
    assert!(h.recv().iter().all(|o| !o.flags().contains(ECE)));
}

#[test]
fn rfc3168_6_1_2_ece_reduces_the_window_once_per_window_and_sets_cwr_on_new_data() {
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        let mut h = Harness::connect(&Config { ecn: EcnMode::On, cc, ..plain_cfg() });
        h.recv_one();
        let mut sa = seg(SYN | ACK | ECE, PEER_ISS, ISS + 1);
        sa.options.mss = Some(1000);
        h.send(&sa, b"");
        h.recv_one();
        h.c.send(&[7u8; 30_000]).unwrap();
        let flight = h.recv();
        let cwnd0 = h.c.stats().cwnd;
        // The first ACK echoes ECE: one reduction, no retransmission.
        h.send(&seg(ACK | ECE, PEER_ISS + 1, ISS + 1 + 1000), b"");
        let cwnd1 = h.c.stats().cwnd;
        assert!(cwnd1 < cwnd0, "{cc:?}: cwnd {cwnd0} -> {cwnd1}");
        assert_eq!(h.c.stats().retransmits, 0);
        // More ECE within the same window: no further reduction.
        h.send(&seg(ACK | ECE, PEER_ISS + 1, ISS + 1 + 2000), b"");
        assert_eq!(h.c.ecn_state().2, 1, "{cc:?}: one reduction per window");
        // The next new data segment carries CWR, once.
        let out = h.recv();
        let news: Vec<&Out> = out.iter().filter(|o| o.len() > 0).collect();
        if let Some(first) = news.first() {
            assert!(first.flags().contains(CWR), "{cc:?}: {:?}", first.flags());
            assert!(news[1..].iter().all(|o| !o.flags().contains(CWR)));
        }
        // Once the window of that time is acknowledged, ECE reduces again.
        let end = flight.last().map_or(ISS + 1, |o| o.seq() + o.len() as u32);
        h.send(&seg(ACK, PEER_ISS + 1, end), b"");
        h.recv();
        h.send(&seg(ACK | ECE, PEER_ISS + 1, end), b"");
        assert_eq!(h.c.ecn_state().2, 2, "{cc:?}");
    }
}
