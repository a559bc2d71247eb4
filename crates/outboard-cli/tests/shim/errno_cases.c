/* Socket error cases, one line each ("name result"): run once on the
 * kernel's stack and once under the shim, the lines must be identical.
 * Usage: errno_cases PEER_IP BASE [keepalive]. The peer is errno_peer. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char *peer;
static int base;
static volatile sig_atomic_t sigpipes, alarms;

static const char *en(int e) {
    switch (e) {
    case 0: return "0";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case EPIPE: return "EPIPE";
    case EAGAIN: return "EAGAIN";
    case EINPROGRESS: return "EINPROGRESS";
    case EADDRINUSE: return "EADDRINUSE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EINTR: return "EINTR";
    case EBADF: return "EBADF";
    case ENOTCONN: return "ENOTCONN";
    case EISCONN: return "EISCONN";
    case EALREADY: return "EALREADY";
    default: { static char b[32]; snprintf(b, sizeof b, "errno%d", e); return b; }
    }
}

static struct sockaddr_in at(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, peer, &a.sin_addr);
    return a;
}

/* -errno or the descriptor. */
static int conn(int port, int nonblock) {
    int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = at(port);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        if (!nonblock) { close(s); return -e; }
        if (e != EINPROGRESS) { close(s); return -e; }
    }
    return s;
}

static int res(long r) { return r < 0 ? errno : 0; }

static void on_pipe(int sig) { (void)sig; sigpipes++; }
static void on_alarm(int sig) { (void)sig; alarms++; }

static void timer_ms(int ms, int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static int listen_on(int port, int nonblock) {
    int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) return -errno;
    if (listen(s, 16) < 0) return -errno;
    return s;
}

static void keepalive_case(void) {
    int s = conn(base + 3, 0);
    if (s < 0) { printf("keepalive_timeout connect-%s\n", en(-s)); return; }
    int on = 1, idle = 1, intvl = 1, cnt = 2;
    setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(s, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(s, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    printf("READY\n");
    fflush(stdout);
    char b[16];
    long r = recv(s, b, sizeof b, 0);
    printf("keepalive_timeout %s\n", r < 0 ? en(errno) : "data");
    close(s);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: errno_cases PEER_IP BASE [keepalive]\n"); return 2; }
    peer = argv[1];
    base = atoi(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 3 && !strcmp(argv[3], "keepalive")) { keepalive_case(); return 0; }
    signal(SIGPIPE, on_pipe);
    char b[64];
    int s, r;

    s = conn(base + 9, 0);
    printf("connect_refused %s\n", en(s < 0 ? -s : 0));

    s = conn(base + 9, 1);
    {
        struct pollfd p = {s, POLLOUT, 0};
        int n = poll(&p, 1, 3000), e = -1;
        socklen_t l = sizeof e;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
        printf("nonblocking_connect_refused EINPROGRESS poll=%d out=%d err=%d so_error=%s\n", n, !!(p.revents & POLLOUT),
               !!(p.revents & POLLERR), en(e));
        close(s);
    }

    s = conn(base + 2, 1);
    {
        struct pollfd p = {s, POLLOUT, 0};
        int n = poll(&p, 1, 3000), e = -1;
        socklen_t l = sizeof e;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
        struct sockaddr_in a = at(base + 2);
        /* The first connect after completion confirms it (0), later ones say EISCONN. */
        r = connect(s, (struct sockaddr *)&a, sizeof a);
        int e2 = r < 0 ? errno : 0;
        r = connect(s, (struct sockaddr *)&a, sizeof a);
        printf("nonblocking_connect_ok poll=%d out=%d so_error=%s again=%s again=%s\n", n, !!(p.revents & POLLOUT), en(e), en(e2),
               en(r < 0 ? errno : 0));
        close(s);
    }

    s = conn(base + 0, 0);
    {
        struct pollfd p = {s, POLLIN, 0};
        poll(&p, 1, 3000);
        long r1 = recv(s, b, sizeof b, 0);
        int e1 = r1 < 0 ? errno : 0;
        long r2 = recv(s, b, sizeof b, 0);
        printf("reset recv=%s then=%ld\n", en(e1), r2);
        close(s);
    }

    s = conn(base + 4, 0);
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    printf("nonblocking_recv %s\n", en(res(recv(s, b, sizeof b, 0))));
    printf("dontwait_recv %s\n", en(res(recv(s, b, sizeof b, MSG_DONTWAIT))));
    close(s);

    s = listen_on(base + 20, 1);
    printf("nonblocking_accept %s\n", en(s < 0 ? -s : res(accept(s, NULL, NULL))));
    {
        int s2 = listen_on(base + 20, 0);
        printf("bind_in_use %s\n", en(s2 < 0 ? -s2 : 0));
        if (s2 >= 0) close(s2);
    }
    close(s);

    s = conn(base + 4, 0);
    shutdown(s, SHUT_WR);
    {
        int e1 = res(send(s, "x", 1, 0));
        int p1 = sigpipes;
        int e2 = res(send(s, "x", 1, MSG_NOSIGNAL));
        int p2 = sigpipes;
        printf("send_after_shutdown %s sigpipes=%d nosignal=%s sigpipes=%d\n", en(e1), p1, en(e2), p2);
    }
    close(s);

    sigpipes = 0;
    s = conn(base + 2, 0);
    usleep(300000);
    {
        int e1 = res(write(s, "x", 1));
        usleep(300000);
        int e2 = res(write(s, "x", 1));
        int p2 = sigpipes;
        int e3 = res(send(s, "x", 1, MSG_NOSIGNAL));
        printf("write_after_peer_reset first=%s second=%s sigpipes=%d third=%s sigpipes=%d\n", en(e1), en(e2), p2, en(e3), sigpipes);
    }
    close(s);

    s = conn(base + 4, 0);
    timer_ms(200, 0);
    r = res(recv(s, b, sizeof b, 0));
    printf("recv_interrupted %s alarms=%d\n", en(r), alarms);
    {
        struct timeval tv = {0, 300000};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        printf("recv_timeout %s\n", en(res(recv(s, b, sizeof b, 0))));
        tv.tv_sec = 3;
        tv.tv_usec = 0;
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        alarms = 0;
        timer_ms(200, 1);
        r = res(recv(s, b, sizeof b, 0));
        printf("recv_timeout_restart_handler %s alarms=%d\n", en(r), alarms);
    }
    {
        struct sockaddr_in a = at(base + 4);
        r = connect(s, (struct sockaddr *)&a, sizeof a);
        printf("connect_connected %s\n", en(r < 0 ? errno : 0));
    }
    close(s);
    printf("recv_closed %s\n", en(res(recv(s, b, sizeof b, 0))));
    printf("close_closed %s\n", en(res(close(s))));

    s = listen_on(base + 22, 0);
    alarms = 0;
    timer_ms(200, 0);
    r = s < 0 ? -s : res(accept(s, NULL, NULL));
    printf("accept_interrupted %s alarms=%d\n", en(r), alarms);
    close(s);

    s = socket(AF_INET, SOCK_STREAM, 0);
    {
        struct sockaddr_in a;
        socklen_t l = sizeof a;
        printf("getpeername_unconnected %s\n", en(res(getpeername(s, (struct sockaddr *)&a, &l))));
        sigpipes = 0;
        r = res(send(s, "x", 1, 0));
        printf("send_unconnected %s sigpipes=%d\n", en(r), sigpipes);
    }
    close(s);
    return 0;
}
