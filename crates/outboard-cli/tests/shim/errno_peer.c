/* The peer of errno_cases.c: a kernel-socket server with one behaviour per
 * port (BASE+0 resets each connection, BASE+2 closes each at once, BASE+3
 * and BASE+4 hold each connection open without sending). Runs until killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: errno_peer IP BASE\n"); return 2; }
    int base = atoi(argv[2]);
    int offs[] = {0, 2, 3, 4};
    struct pollfd p[4];
    for (int i = 0; i < 4; i++) p[i] = (struct pollfd){.fd = listen_on(argv[1], base + offs[i]), .events = POLLIN};
    printf("listening\n");
    fflush(stdout);
    for (;;) {
        if (poll(p, 4, -1) < 0) continue;
        for (int i = 0; i < 4; i++) {
            if (!(p[i].revents & POLLIN)) continue;
            int c = accept(p[i].fd, NULL, NULL);
            if (c < 0) continue;
            if (offs[i] == 0) {
                struct linger l = {1, 0};
                setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
                close(c);
            } else if (offs[i] == 2) {
                close(c);
            } /* else: hold it open (leaked until exit, on purpose) */
        }
    }
}
