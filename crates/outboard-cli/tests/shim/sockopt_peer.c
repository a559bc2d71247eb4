/* The peer of sockopt_cases.c: a kernel-socket server on BASE and BASE+1.
 * Each connection (a child process) reads one command byte:
 *   M  write "<TCP_MAXSEG of this accepted socket>\n", then close;
 *   E  echo every byte back at once until end of stream;
 *   S  send "hello", then wait for end of stream;
 *   F  send "hello", then close (FIN);
 *   G  send 100000 bytes (i * 7 % 251), then close;
 *   B  read to end of stream, then write "<bytes> <sum>\n" and close;
 *   H  read nothing for 1.5 s, then read to end of stream;
 *   W  send 2000000 bytes (i * 7 % 251) in 16 KiB writes, noting the
 *      largest window the other side offered (tcpi_snd_wnd), then
 *      "\n<largest window> <its window scale>\n" and close;
 *   D  SO_RCVBUF 4096, read nothing for 1 s, then read to end of stream and
 *      write "<bytes> <sum>\n" as B;
 *   C  read "<port>\n", connect back to the sender's address at that port,
 *      write "<TCP_MAXSEG of that connection>\n" here, then wait for the
 *      back connection's end of stream.
 * Runs until killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_on(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 64)) { perror("peer listen"); exit(1); }
    return s;
}

static void serve(int c) {
    char cmd;
    if (read(c, &cmd, 1) != 1) return;
    char buf[65536];
    switch (cmd) {
    case 'M': {
        int mss = 0;
        socklen_t l = sizeof mss;
        getsockopt(c, IPPROTO_TCP, TCP_MAXSEG, &mss, &l);
        int n = snprintf(buf, sizeof buf, "%d\n", mss);
        write(c, buf, n);
        break;
    }
    case 'E': {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) write(c, buf, n);
        break;
    }
    case 'S':
        write(c, "hello", 5);
        while (read(c, buf, sizeof buf) > 0) {}
        break;
    case 'F':
        write(c, "hello", 5);
        break;
    case 'G': {
        static unsigned char g[100000];
        for (int i = 0; i < 100000; i++) g[i] = i * 7 % 251;
        size_t off = 0;
        while (off < sizeof g) {
            ssize_t n = write(c, g + off, sizeof g - off);
            if (n <= 0) break;
            off += n;
        }
        break;
    }
    case 'H':
        usleep(1500000);
        while (read(c, buf, sizeof buf) > 0) {}
        break;
    case 'W': {
        static unsigned char g[16384];
        unsigned int most = 0;
        int wscale = -1;
        for (int off = 0; off < 2000000; off += (int)sizeof g) {
            int len = 2000000 - off < (int)sizeof g ? 2000000 - off : (int)sizeof g;
            for (int i = 0; i < len; i++) g[i] = (off + i) * 7 % 251;
            if (write(c, g, len) != len) break;
            struct tcp_info ti;
            socklen_t l = sizeof ti;
            if (getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0) {
                if (ti.tcpi_snd_wnd > most) most = ti.tcpi_snd_wnd;
                wscale = ti.tcpi_snd_wscale;
            }
        }
        int n = snprintf(buf, sizeof buf, "\n%u %d\n", most, wscale);
        write(c, buf, n);
        break;
    }
    case 'D': {
        int small = 4096;
        setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        usleep(1000000);
        unsigned long total = 0, sum = 0;
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < n; i++) sum += (unsigned char)buf[i];
            total += n;
        }
        int k = snprintf(buf, sizeof buf, "%lu %lu\n", total, sum);
        write(c, buf, k);
        break;
    }
    case 'C': {
        char line[16] = {0};
        for (size_t i = 0; i + 1 < sizeof line && read(c, line + i, 1) == 1 && line[i] != '\n'; i++) {}
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        getpeername(c, (struct sockaddr *)&a, &al);
        a.sin_port = htons(atoi(line));
        int b = socket(AF_INET, SOCK_STREAM, 0);
        int mss = -1;
        socklen_t l = sizeof mss;
        if (connect(b, (struct sockaddr *)&a, sizeof a) == 0) getsockopt(b, IPPROTO_TCP, TCP_MAXSEG, &mss, &l);
        int n = snprintf(buf, sizeof buf, "%d\n", mss);
        write(c, buf, n);
        while (read(b, buf, sizeof buf) > 0) {}
        close(b);
        break;
    }
    case 'B': {
        unsigned long total = 0, sum = 0;
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < n; i++) sum += (unsigned char)buf[i];
            total += n;
        }
        int k = snprintf(buf, sizeof buf, "%lu %lu\n", total, sum);
        write(c, buf, k);
        break;
    }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: sockopt_peer IP BASE\n"); return 2; }
    int base = atoi(argv[2]);
    signal(SIGCHLD, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    struct pollfd p[2];
    for (int i = 0; i < 2; i++) p[i] = (struct pollfd){.fd = listen_on(argv[1], base + i), .events = POLLIN};
    printf("listening\n");
    fflush(stdout);
    for (;;) {
        if (poll(p, 2, -1) < 0) continue;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & POLLIN)) continue;
            int c = accept(p[i].fd, NULL, NULL);
            if (c < 0) continue;
            if (fork() == 0) {
                /* A connection's server dies with the peer (the test kills
                 * it) and in any case within a minute: none outlives a run. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                alarm(60);
                close(p[0].fd);
                close(p[1].fd);
                serve(c);
                close(c);
                _exit(0);
            }
            close(c);
        }
    }
}
