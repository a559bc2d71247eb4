/* Socket options, one line each ("name result"): run once on the kernel's
 * stack and once under the shim, the lines must be identical (except those
 * starting "measured ", numbers the harness checks for each side).
 * Usage: sockopt_cases PEER_IP BASE [usertimeout]. The peer is sockopt_peer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif
#ifndef TCP_INQ
#define TCP_INQ 36
#define TCP_CM_INQ TCP_INQ
#endif

static const char *peer;
static int base;

static const char *en(int e) {
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EAGAIN: return "EAGAIN";
    case ESPIPE: return "ESPIPE";
    case EPIPE: return "EPIPE";
    case ECONNRESET: return "ECONNRESET";
    default: { static char b[32]; snprintf(b, sizeof b, "errno%d", e); return b; }
    }
}
static int res(long r) { return r < 0 ? errno : 0; }

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int conn_to(int port, int presocket) {
    int s = presocket >= 0 ? presocket : socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, peer, &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
    return s;
}
static int conn_cmd(char cmd) {
    int s = conn_to(base, -1);
    write(s, &cmd, 1);
    return s;
}

static int geti(int s, int level, int name) {
    int v = -1;
    socklen_t l = sizeof v;
    if (getsockopt(s, level, name, &v, &l) < 0) return -errno - 1000;
    return v;
}
static int seti(int s, int level, int name, int v) { return res(setsockopt(s, level, name, &v, sizeof v)); }

/* Milliseconds until s is readable (-1: not within ms). */
static int readable_within(int s, int ms) {
    long t0 = now_ms();
    struct pollfd p = {.fd = s, .events = POLLIN};
    int r = poll(&p, 1, ms);
    return r == 1 ? (int)(now_ms() - t0) : -1;
}

static void maxseg(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    printf("maxseg unconnected=%d\n", geti(s, IPPROTO_TCP, TCP_MAXSEG));
    int e50 = seti(s, IPPROTO_TCP, TCP_MAXSEG, 50);
    int e40k = seti(s, IPPROTO_TCP, TCP_MAXSEG, 40000);
    printf("maxseg set_50=%s set_40000=%s\n", en(e50), en(e40k));
    printf("maxseg set_1000=%s\n", en(seti(s, IPPROTO_TCP, TCP_MAXSEG, 1000)));
    conn_to(base, s);
    write(s, "M", 1);
    char b[64] = {0};
    ssize_t n = 0, k;
    while ((k = read(s, b + n, sizeof b - 1 - n)) > 0) n += k;
    b[strcspn(b, "\n")] = 0;
    int ours = geti(s, IPPROTO_TCP, TCP_MAXSEG);
    printf("maxseg peer_sees=%s ours=%d\n", b, ours);
    close(s);
}

/* TCP_MAXSEG on a listener, before or after listen(): the peer connects
 * back; it sees the MSS our SYN-ACK advertised, and the accepted socket
 * inherits the value (its send MSS never above it). */
static void maxseg_listener(int port, int mss, int after) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    int e = 0;
    if (!after) e = seti(l, IPPROTO_TCP, TCP_MAXSEG, mss);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4)) { perror("listen"); exit(1); }
    if (after) e = seti(l, IPPROTO_TCP, TCP_MAXSEG, mss);
    int got = geti(l, IPPROTO_TCP, TCP_MAXSEG);
    int s = conn_cmd('C');
    char b[64] = {0};
    int n = snprintf(b, sizeof b, "%d\n", port);
    write(s, b, n);
    int c = accept(l, NULL, NULL);
    if (c < 0) { perror("accept"); exit(1); }
    ssize_t k, r = 0;
    memset(b, 0, sizeof b);
    while (r < (ssize_t)sizeof b - 1 && (k = read(s, b + r, sizeof b - 1 - r)) > 0) {
        r += k;
        if (strchr(b, '\n')) break;
    }
    b[strcspn(b, "\n")] = 0;
    int ours = geti(c, IPPROTO_TCP, TCP_MAXSEG);
    printf("maxseg listener %s set_%d=%s get=%d peer_sees=%s accepted=%d\n", after ? "after_listen" : "before_listen", mss, en(e), got, b, ours);
    close(c);
    close(s);
    close(l);
}

/* SO_RCVBUF 16384 before connect: the window Linux's sender sees never
 * exceeds it (Linux's window clamp for a locked buffer), the SYN's window
 * scale comes from it (0), and 2,000,000 bytes arrive byte-exact. */
static void rcvbuf(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0), v = 16384;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    conn_to(base, s);
    write(s, "W", 1);
    static unsigned char b[4096];
    char tail[64] = {0};
    long got = 0, t = 0;
    int ok = 1;
    ssize_t n;
    while ((n = read(s, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < n; i++, got++) {
            if (got < 2000000) ok &= b[i] == got * 7 % 251;
            else if (t < (long)sizeof tail - 1) tail[t++] = b[i];
        }
        if (got % 65536 < 4096) usleep(2000);
    }
    unsigned int most = 0;
    int wscale = -1;
    sscanf(tail, "\n%u %d", &most, &wscale);
    printf("rcvbuf got=%ld bytes_ok=%d peer_wscale=%d\n", got - t, ok, wscale);
    printf("measured rcvbuf_peer_window_max=%u\n", most);
    close(s);
}

/* SO_SNDBUF 8192 (16384 as Linux doubles it) against a peer that reads
 * nothing for 1 s: bytes written and not yet acknowledged (SIOCOUTQ) never
 * exceed 16384, a non-blocking send gets EAGAIN, and all 400,000 bytes
 * arrive byte-exact. */
static void sndbuf(void) {
    int s = conn_cmd('D'), v = 8192;
    int e = seti(s, SOL_SOCKET, SO_SNDBUF, v);
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    static unsigned char chunk[4096];
    long sent = 0, total = 400000;
    unsigned long sum = 0;
    int most = 0, blocked = 0;
    long t0 = now_ms();
    while (sent < total && now_ms() - t0 < 20000) {
        int len = total - sent < (long)sizeof chunk ? (int)(total - sent) : (int)sizeof chunk;
        for (int i = 0; i < len; i++) chunk[i] = (sent + i) % 241;
        ssize_t n = send(s, chunk, len, 0);
        int q = 0;
        ioctl(s, SIOCOUTQ, &q);
        if (q > most) most = q;
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++) sum += chunk[i];
            sent += n;
        } else if (errno == EAGAIN) {
            blocked = 1;
            struct pollfd p = {.fd = s, .events = POLLOUT};
            poll(&p, 1, 100);
        } else {
            break;
        }
    }
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
    shutdown(s, SHUT_WR);
    char b[64] = {0};
    ssize_t n = 0, k;
    while ((k = read(s, b + n, sizeof b - 1 - n)) > 0) n += k;
    unsigned long got = 0, gsum = 0;
    sscanf(b, "%lu %lu", &got, &gsum);
    printf("sndbuf set=%s get=%d blocked=%d peer_got=%lu sum_ok=%d\n", en(e), geti(s, SOL_SOCKET, SO_SNDBUF), blocked, got, gsum == sum);
    printf("measured sndbuf_outq_max=%d\n", most);
    close(s);
}

static void cork(void) {
    int s = conn_cmd('E');
    char b[64];
    /* Let the command byte's echo-less round trip settle. */
    usleep(50000);
    int g0 = geti(s, IPPROTO_TCP, TCP_CORK);
    int e = seti(s, IPPROTO_TCP, TCP_CORK, 1);
    int g1 = geti(s, IPPROTO_TCP, TCP_CORK);
    printf("cork get=%d set=%s get=%d\n", g0, en(e), g1);
    write(s, "a", 1);
    int held = readable_within(s, 100) < 0;
    seti(s, IPPROTO_TCP, TCP_CORK, 0);
    int after = readable_within(s, 1000);
    ssize_t n = read(s, b, sizeof b);
    printf("cork held=%d uncork_echo_within_100ms=%d n=%zd\n", held, after >= 0 && after < 100, n);
    /* The ceiling: a corked partial segment goes after 200 ms. */
    seti(s, IPPROTO_TCP, TCP_CORK, 1);
    write(s, "b", 1);
    int t = readable_within(s, 2000);
    n = read(s, b, sizeof b);
    printf("cork ceiling=%s n=%zd\n", t < 0 ? "none" : t < 150 ? "early" : t < 600 ? "about_200ms" : "late", n);
    seti(s, IPPROTO_TCP, TCP_CORK, 0);
    /* MSG_MORE: held until a send without it, then both bytes together. */
    send(s, "c", 1, MSG_MORE);
    held = readable_within(s, 100) < 0;
    send(s, "d", 1, 0);
    after = readable_within(s, 1000);
    usleep(20000);
    n = read(s, b, sizeof b);
    printf("msg_more held=%d echo_within_100ms=%d got=%.*s\n", held, after >= 0 && after < 100, (int)(n > 0 ? n : 0), b);
    close(s);
}

static void shut_rd(void) {
    int s = conn_cmd('S');
    char b[64];
    /* Wait until the peer's 5 bytes are here. */
    int q = 0;
    for (int i = 0; i < 200 && q < 5; i++) {
        ioctl(s, SIOCINQ, &q);
        if (q < 5) usleep(10000);
    }
    int outq = -1;
    ioctl(s, SIOCOUTQ, &outq);
    printf("ioctl siocinq=%d siocoutq=%d\n", q, outq);
    printf("shut_rd shutdown=%s\n", en(res(shutdown(s, SHUT_RD))));
    struct pollfd p = {.fd = s, .events = POLLIN | POLLRDHUP | POLLOUT};
    poll(&p, 1, 0);
    printf("shut_rd poll in=%d rdhup=%d out=%d\n", !!(p.revents & POLLIN), !!(p.revents & POLLRDHUP), !!(p.revents & POLLOUT));
    ssize_t n1 = read(s, b, sizeof b);
    ssize_t n2 = read(s, b, sizeof b);
    ssize_t n3 = recv(s, b, sizeof b, MSG_DONTWAIT);
    printf("shut_rd read=%zd then=%zd then=%zd\n", n1, n2, n3);
    close(s);
}

static void tos_bufs_timeout(void) {
    int s = conn_cmd('E');
    printf("tos default=%d\n", geti(s, IPPROTO_IP, IP_TOS));
    int e = seti(s, IPPROTO_IP, IP_TOS, 0x10);
    printf("tos set_int_0x10=%s get=%d\n", en(e), geti(s, IPPROTO_IP, IP_TOS));
    unsigned char c = 0x28;
    int r = res(setsockopt(s, IPPROTO_IP, IP_TOS, &c, 1));
    unsigned char g = 0;
    socklen_t l = 1;
    int r2 = res(getsockopt(s, IPPROTO_IP, IP_TOS, &g, &l));
    int gi = geti(s, IPPROTO_IP, IP_TOS);
    printf("tos set_byte_0x28=%s get_byte=%s 0x%x len=%u get_int=%d\n", en(r), en(r2), g, l, gi);
    e = seti(s, IPPROTO_IP, IP_TOS, 0x13);
    printf("tos set_int_0x13=%s get=%d\n", en(e), geti(s, IPPROTO_IP, IP_TOS));
    int vals[] = {1, 100000, 100000000, -1};
    for (int i = 0; i < 4; i++) {
        seti(s, SOL_SOCKET, SO_SNDBUF, vals[i]);
        seti(s, SOL_SOCKET, SO_RCVBUF, vals[i]);
        int sb = geti(s, SOL_SOCKET, SO_SNDBUF), rb = geti(s, SOL_SOCKET, SO_RCVBUF);
        printf("bufs set=%d sndbuf=%d rcvbuf=%d\n", vals[i], sb, rb);
    }
    int u0 = geti(s, IPPROTO_TCP, TCP_USER_TIMEOUT);
    int ue = seti(s, IPPROTO_TCP, TCP_USER_TIMEOUT, 1500);
    int u1 = geti(s, IPPROTO_TCP, TCP_USER_TIMEOUT);
    int un = seti(s, IPPROTO_TCP, TCP_USER_TIMEOUT, -1);
    printf("user_timeout default=%d set=%s get=%d set_neg=%s\n", u0, en(ue), u1, en(un));
    close(s);
}

static void congestion(void) {
    int s = conn_cmd('E');
    char name[32];
    socklen_t l;
    int r = res(setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, "reno", 4));
    memset(name, 'x', sizeof name);
    l = sizeof name;
    int r2 = res(getsockopt(s, IPPROTO_TCP, TCP_CONGESTION, name, &l));
    printf("congestion set_reno=%s get=%s %s len=%u\n", en(r), en(r2), name, l);
    r = res(setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, "cubic", 6));
    l = sizeof name;
    getsockopt(s, IPPROTO_TCP, TCP_CONGESTION, name, &l);
    printf("congestion set_cubic=%s get=%s\n", en(r), name);
    printf("congestion set_nosuch=%s\n", en(res(setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, "nosuchcc", 8))));
    l = 4;
    getsockopt(s, IPPROTO_TCP, TCP_CONGESTION, name, &l);
    printf("congestion short_get=%.4s len=%u\n", name, l);
    char info[128];
    l = sizeof info;
    r = res(getsockopt(s, IPPROTO_TCP, TCP_CC_INFO, info, &l));
    int rs = res(setsockopt(s, IPPROTO_TCP, TCP_CC_INFO, info, 16));
    printf("cc_info get=%s len=%u set=%s\n", en(r), l, en(rs));
    close(s);
}

static int read_n(int s, char *b, int n) {
    int got = 0;
    while (got < n) {
        ssize_t r = read(s, b + got, n - got);
        if (r <= 0) return -1;
        got += (int)r;
    }
    return got;
}

/* TCP_QUICKACK: 1 on a new socket; 0 holds until the handshake (Linux
 * leaves interactive mode there); a reply within 40 ms of the data it
 * answers makes the connection interactive (reads 0; tried three times, in
 * case a reply was late); 1 leaves the mode, 0 enters it. */
static void quickack(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int fresh = geti(s, IPPROTO_TCP, TCP_QUICKACK);
    int r = seti(s, IPPROTO_TCP, TCP_QUICKACK, 0);
    int before = geti(s, IPPROTO_TCP, TCP_QUICKACK);
    conn_to(base, s);
    int connected = geti(s, IPPROTO_TCP, TCP_QUICKACK);
    write(s, "E", 1);
    char buf[4];
    int replied = -1;
    for (int i = 0; i < 3 && replied != 0; i++) {
        write(s, "ping", 4);
        if (read_n(s, buf, 4) != 4) break;
        write(s, "pong", 4);
        replied = geti(s, IPPROTO_TCP, TCP_QUICKACK);
        if (read_n(s, buf, 4) != 4) break;
    }
    int r1 = seti(s, IPPROTO_TCP, TCP_QUICKACK, 1);
    int after1 = geti(s, IPPROTO_TCP, TCP_QUICKACK);
    int r0 = seti(s, IPPROTO_TCP, TCP_QUICKACK, 0);
    int after0 = geti(s, IPPROTO_TCP, TCP_QUICKACK);
    printf("quickack fresh=%d set0=%s before_connect=%d connected=%d after_reply=%d set1=%s get=%d set0=%s get=%d\n",
           fresh, en(r), before, connected, replied, en(r1), after1, en(r0), after0);
    close(s);
}

static void inq(void) {
    int s = conn_cmd('F');
    int i0 = geti(s, IPPROTO_TCP, TCP_INQ);
    int ie = seti(s, IPPROTO_TCP, TCP_INQ, 1);
    int i1 = geti(s, IPPROTO_TCP, TCP_INQ);
    int i2 = seti(s, IPPROTO_TCP, TCP_INQ, 2);
    printf("inq default=%d set=%s get=%d set_2=%s\n", i0, en(ie), i1, en(i2));
    struct pollfd p = {.fd = s, .events = POLLRDHUP};
    poll(&p, 1, 2000);
    usleep(20000);
    for (int round = 0; round < 3; round++) {
        char b[3];
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
        struct iovec v = {.iov_base = b, .iov_len = round == 0 ? 2 : 3};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        ssize_t n = recvmsg(s, &m, 0);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        int val = -1, level = -1, type = -1;
        if (c) { level = c->cmsg_level; type = c->cmsg_type; memcpy(&val, CMSG_DATA(c), sizeof val); }
        printf("inq recvmsg=%zd cmsg=%d level_tcp=%d type_inq=%d inq=%d flags=%d\n", n, c != NULL, level == SOL_TCP, type == TCP_CM_INQ, val, m.msg_flags);
    }
    close(s);
}

static void listener_ioctl(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, v = 0;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(base + 10)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4)) { perror("listen"); exit(1); }
    int r1 = res(ioctl(s, SIOCINQ, &v));
    int r2 = res(ioctl(s, SIOCOUTQ, &v));
    printf("listener siocinq=%s siocoutq=%s\n", en(r1), en(r2));
    close(s);
}

static void splices(void) {
    int pp[2];
    if (pipe(pp)) { perror("pipe"); exit(1); }
    /* socket -> pipe */
    int s = conn_cmd('G');
    unsigned long total = 0, sum = 0;
    int calls = 0;
    for (;;) {
        ssize_t n = splice(s, NULL, pp[1], NULL, 65536, 0);
        if (n < 0) { printf("splice sock_to_pipe error=%s\n", en(errno)); break; }
        if (n == 0) break;
        calls++;
        unsigned char b[65536];
        ssize_t k = 0;
        while (k < n) {
            ssize_t r = read(pp[0], b, n - k);
            if (r <= 0) break;
            for (ssize_t i = 0; i < r; i++) sum += b[i];
            k += r;
        }
        total += n;
    }
    unsigned long want = 0;
    for (int i = 0; i < 100000; i++) want += i * 7 % 251;
    printf("splice sock_to_pipe total=%lu sum_ok=%d\n", total, sum == want);
    loff_t off = 0;
    printf("splice offset_on_pipe=%s\n", en(res(splice(s, NULL, pp[1], &off, 10, 0))));
    close(s);
    /* pipe -> socket */
    s = conn_cmd('B');
    unsigned char chunk[10000];
    unsigned long sent = 0;
    sum = 0;
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < 10000; i++) { chunk[i] = (r * 10000 + i) % 253; sum += chunk[i]; }
        write(pp[1], chunk, sizeof chunk);
        size_t left = sizeof chunk;
        while (left > 0) {
            ssize_t n = splice(pp[0], NULL, s, NULL, left, 0);
            if (n <= 0) { printf("splice pipe_to_sock error=%s\n", en(errno)); exit(1); }
            left -= n;
            sent += n;
        }
    }
    shutdown(s, SHUT_WR);
    char b[64] = {0};
    ssize_t n = 0, k;
    while ((k = read(s, b + n, sizeof b - 1 - n)) > 0) n += k;
    unsigned long got = 0, gsum = 0;
    sscanf(b, "%lu %lu", &got, &gsum);
    printf("splice pipe_to_sock sent=%lu peer_got=%lu sum_ok=%d\n", sent, got, gsum == sum);
    /* Nothing in the pipe and SPLICE_F_NONBLOCK: EAGAIN. */
    printf("splice empty_pipe_nonblock=%s\n", en(res(splice(pp[0], NULL, s, NULL, 100, SPLICE_F_NONBLOCK))));
    close(s);
    close(pp[0]);
    close(pp[1]);
}

/* TCP_USER_TIMEOUT against a peer gone silent (the harness drops its
 * segments after READY): the connection fails with ETIMEDOUT. */
static void usertimeout(void) {
    int s = conn_to(base + 1, -1);
    write(s, "E", 1);
    char b[8];
    write(s, "x", 1);
    readable_within(s, 1000);
    read(s, b, sizeof b);
    seti(s, IPPROTO_TCP, TCP_USER_TIMEOUT, 1000);
    printf("READY\n");
    fflush(stdout);
    usleep(300000);
    long t0 = now_ms();
    write(s, "y", 1);
    struct pollfd p = {.fd = s, .events = POLLIN};
    poll(&p, 1, 10000);
    ssize_t n = read(s, b, sizeof b);
    long t = now_ms() - t0;
    printf("user_timeout read=%zd error=%s in_time=%d\n", n, en(n < 0 ? errno : 0), t >= 900 && t < 4000);
    close(s);
}

/* RFC 7413 options: TCP_FASTOPEN (a queue length, before connect or on a
 * listener) and TCP_FASTOPEN_CONNECT (0/1 before connect); both EINVAL on a
 * connected socket. */
static void fastopen(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int g0 = geti(s, IPPROTO_TCP, TCP_FASTOPEN);
    int rn = seti(s, IPPROTO_TCP, TCP_FASTOPEN, -1);
    int r5 = seti(s, IPPROTO_TCP, TCP_FASTOPEN, 5);
    int g5 = geti(s, IPPROTO_TCP, TCP_FASTOPEN);
    printf("fastopen get=%d set_neg=%s set_5=%s get=%d\n", g0, en(rn), en(r5), g5);
    int c0 = geti(s, IPPROTO_TCP, TCP_FASTOPEN_CONNECT);
    int c2 = seti(s, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 2);
    int c1 = seti(s, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1);
    int g1 = geti(s, IPPROTO_TCP, TCP_FASTOPEN_CONNECT);
    printf("fastopen_connect get=%d set_2=%s set_1=%s get=%d\n", c0, en(c2), en(c1), g1);
    close(s);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(base + 11)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4)) { perror("listen"); exit(1); }
    int rl = seti(l, IPPROTO_TCP, TCP_FASTOPEN, 7);
    printf("fastopen listener set_7=%s get=%d\n", en(rl), geti(l, IPPROTO_TCP, TCP_FASTOPEN));
    close(l);
    int c = conn_cmd('F');
    int rc = seti(c, IPPROTO_TCP, TCP_FASTOPEN, 1);
    int rcc = seti(c, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1);
    printf("fastopen connected set=%s connect_set=%s\n", en(rc), en(rcc));
    close(c);
}

/* SIOCOUTQNSD and TCP_NOTSENT_LOWAT against a peer that reads nothing for
 * 1.5 s: unsent bytes pile up, POLLOUT is off while they are at or above the
 * low-water mark, and comes back once the peer reads and they drain. */
static void notsent(void) {
    int s = conn_cmd('H');
    int r = seti(s, IPPROTO_TCP, TCP_NOTSENT_LOWAT, 16384);
    int g = geti(s, IPPROTO_TCP, TCP_NOTSENT_LOWAT);
    static char buf[65536];
    for (int i = 0; i < 4000; i++)
        if (send(s, buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
    usleep(200000);
    int outq = -1, nsd = -1;
    ioctl(s, SIOCOUTQ, &outq);
    ioctl(s, SIOCOUTQNSD, &nsd);
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int held = poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
    printf("notsent lowat set=%s get=%d nsd_at_least_lowat=%d nsd_le_outq=%d pollout_held=%d\n", en(r), g, nsd >= 16384, nsd <= outq, held);
    p.revents = 0;
    int later = poll(&p, 1, 8000) == 1 && (p.revents & POLLOUT);
    ioctl(s, SIOCOUTQNSD, &nsd);
    printf("notsent pollout_after_drain=%d nsd_below_lowat=%d\n", later, nsd < 16384);
    shutdown(s, SHUT_WR);
    close(s);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: sockopt_cases PEER_IP BASE [usertimeout]\n"); return 2; }
    peer = argv[1];
    base = atoi(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 3 && !strcmp(argv[3], "usertimeout")) { usertimeout(); return 0; }
    maxseg();
    maxseg_listener(base + 12, 1000, 0);
    maxseg_listener(base + 13, 700, 1);
    cork();
    shut_rd();
    tos_bufs_timeout();
    congestion();
    quickack();
    inq();
    listener_ioctl();
    fastopen();
    splices();
    notsent();
    rcvbuf();
    sndbuf();
    return 0;
}
