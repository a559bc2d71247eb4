//! Socket options under the shim against Linux's, across the lab's veth
//! (root): `tests/shim/sockopt_cases.c` runs once on the kernel's stack (in
//! the Linux namespace) and once under the shim (in the engine's
//! namespace, through `outboard run`), both against the same kernel peer
//! (`tests/shim/sockopt_peer.c`); every line must be the same, and the
//! lines that say what Linux does are checked by value too. Covered:
//! TCP_MAXSEG before connect (the peer's MSS shows the SYN carried it),
//! TCP_CORK and MSG_MORE (held, sent on uncork, the 200 ms ceiling),
//! reads after SHUT_RD, SIOCINQ/SIOCOUTQ, IP_TOS as an int and a byte,
//! SO_SNDBUF/SO_RCVBUF read back, TCP_USER_TIMEOUT, TCP_CONGESTION,
//! TCP_CC_INFO, TCP_INQ with TCP_CM_INQ, TCP_FASTOPEN and
//! TCP_FASTOPEN_CONNECT read back and refused where Linux refuses them, and
//! splice both ways. The user
//! timeout case makes the peer go silent with an nftables rule: both must
//! end in ETIMEDOUT.
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use std::time::{Duration, Instant};
use support::cases::{run_lines, CasesRig, Nft};
use support::netns::skip_unless_root;

const BASE: u16 = 30100;

#[test]
fn shim_socket_options_match_linux() {
    if skip_unless_root("shim_socket_options_match_linux") {
        return;
    }
    let rig = CasesRig::start("sockopt", BASE, Duration::from_secs(60));
    let lab = &rig.lab;
    let kernel_cmd = |extra: &[&str]| rig.kernel_cmd(extra);
    let shim_cmd = |extra: &[&str]| rig.shim_cmd(extra);

    let t0 = Instant::now();
    let kernel = run_lines(kernel_cmd(&[]), || {});
    let shimmed = run_lines(shim_cmd(&[]), || {});
    eprintln!("kernel:\n  {}\nshim:\n  {}", kernel.join("\n  "), shimmed.join("\n  "));
    assert_eq!(kernel.len(), shimmed.len(), "both runs print every case");
    let mut differ = Vec::new();
    for (k, s) in kernel.iter().zip(&shimmed) {
        if k != s {
            differ.push(format!("kernel: {k}\n  shim: {s}"));
        }
    }
    assert!(differ.is_empty(), "the shim's results differ from Linux's:\n{}", differ.join("\n"));
    // Both agreeing is not enough: they must agree on what Linux does.
    for want in [
        "maxseg set_50=EINVAL set_40000=EINVAL",
        "maxseg set_1000=0",
        "maxseg peer_sees=988 ours=988",
        "cork get=0 set=0 get=1",
        "cork held=1 uncork_echo_within_100ms=1 n=1",
        "cork ceiling=about_200ms n=1",
        "msg_more held=1 echo_within_100ms=1 got=cd",
        "ioctl siocinq=5 siocoutq=0",
        "shut_rd poll in=1 rdhup=1 out=1",
        "shut_rd read=5 then=0 then=0",
        "tos set_int_0x10=0 get=16",
        "tos set_byte_0x28=0 get_byte=0 0x28 len=1 get_int=40",
        "tos set_int_0x13=0 get=16",
        "bufs set=1 sndbuf=4608 rcvbuf=2304",
        "bufs set=100000 sndbuf=200000 rcvbuf=200000",
        "user_timeout default=0 set=0 get=1500 set_neg=EINVAL",
        "congestion set_reno=0 get=0 reno len=16",
        "congestion set_cubic=0 get=cubic",
        "congestion set_nosuch=ENOENT",
        "cc_info get=0 len=0 set=ENOPROTOOPT",
        "inq default=0 set=0 get=1 set_2=EINVAL",
        "inq recvmsg=2 cmsg=1 level_tcp=1 type_inq=1 inq=4 flags=0",
        "inq recvmsg=0 cmsg=1 level_tcp=1 type_inq=1 inq=1 flags=0",
        "listener siocinq=EINVAL siocoutq=EINVAL",
        "fastopen get=0 set_neg=EINVAL set_5=0 get=5",
        "fastopen_connect get=0 set_2=EINVAL set_1=0 get=1",
        "fastopen listener set_7=0 get=7",
        "fastopen connected set=EINVAL connect_set=EINVAL",
        "splice sock_to_pipe total=100000 sum_ok=1",
        "splice offset_on_pipe=ESPIPE",
        "splice pipe_to_sock sent=100000 peer_got=100000 sum_ok=1",
        "splice empty_pipe_nonblock=EAGAIN",
    ] {
        assert!(shimmed.iter().any(|l| l == want), "expected line {want:?}");
    }

    // TCP_USER_TIMEOUT (1 s) against a peer gone silent: ETIMEDOUT.
    let nft = Nft { ns: lab.linux_ns(), table: "obshimopt" };
    for (what, cmd) in [("kernel", kernel_cmd(&["usertimeout"])), ("shim", shim_cmd(&["usertimeout"]))] {
        let lines = run_lines(cmd, || nft.drop_from_port(BASE + 1));
        nft.clear();
        assert_eq!(lines, vec!["user_timeout read=-1 error=ETIMEDOUT in_time=1".to_string()], "{what}");
    }
    eprintln!("socket option cases took {:?}", t0.elapsed());
    drop(nft);
    drop(rig);
}
