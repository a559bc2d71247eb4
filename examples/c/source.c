/* source: sends N bytes of a seeded pattern over one TCP connection,
 * writing them in place (zero-copy ob_begin_put/ob_end_put), and prints
 * their SHA-256. It connects, or listens and accepts one connection.
 *
 *   source ENGINE connect A.B.C.D PORT BYTES [SEED]
 *   source ENGINE listen PORT BYTES [SEED]
 *
 * prints "listening on PORT" (listen), then "bytes=N sha256=HEX".
 * The pattern: x = SEED * 0x9E3779B97F4A7C15 + 1; per 8 bytes
 * x ^= x << 13, x ^= x >> 7, x ^= x << 17, then x's bytes, low first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"
#include "sha256.h"

static void die(const char *what) {
    fprintf(stderr, "source: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s ENGINE connect A.B.C.D PORT BYTES [SEED]\n"
                    "       %s ENGINE listen PORT BYTES [SEED]\n", argv0, argv0);
    exit(2);
}

typedef struct {
    uint64_t x, word;
    unsigned left; /* bytes of word not yet used */
} pattern_t;

static uint8_t pattern_next(pattern_t *p) {
    if (p->left == 0) {
        p->x ^= p->x << 13;
        p->x ^= p->x >> 7;
        p->x ^= p->x << 17;
        p->word = p->x;
        p->left = 8;
    }
    uint8_t b = (uint8_t)p->word;
    p->word >>= 8;
    p->left--;
    return b;
}

int main(int argc, char **argv) {
    if (argc < 5) usage(argv[0]);
    int listen_mode = strcmp(argv[2], "listen") == 0;
    if (!listen_mode && strcmp(argv[2], "connect") != 0) usage(argv[0]);
    int rest = listen_mode ? 4 : 5; /* index of BYTES */
    if (argc != rest + 1 && argc != rest + 2) usage(argv[0]);
    uint64_t bytes = strtoull(argv[rest], NULL, 0);
    uint64_t seed = argc == rest + 2 ? strtoull(argv[rest + 1], NULL, 0) : 1;

    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    ob_stream_t *s;
    if (listen_mode) {
        ob_listener_t *l = ob_listen(board, (uint16_t)atoi(argv[3]), 1);
        if (!l) die("ob_listen");
        printf("listening on %d\n", ob_listener_port(l));
        fflush(stdout);
        s = ob_accept(l);
        if (!s) die("ob_accept");
        ob_listener_close(l);
    } else {
        struct in_addr ip;
        if (inet_pton(AF_INET, argv[3], &ip) != 1) usage(argv[0]);
        s = ob_connect(board, ntohl(ip.s_addr), (uint16_t)atoi(argv[4]));
        if (!s) die("ob_connect");
    }

    pattern_t pat = {seed * 0x9E3779B97F4A7C15ull + 1, 0, 0};
    sha256_t hash;
    sha256_init(&hash);
    for (uint64_t sent = 0; sent < bytes;) {
        void *room;
        size_t len;
        if (ob_begin_put(s, &room, &len) < 0) die("ob_begin_put"); /* waits for room */
        if (len > bytes - sent) len = (size_t)(bytes - sent);
        uint8_t *p = room;
        for (size_t i = 0; i < len; i++) p[i] = pattern_next(&pat); /* written in place in the board */
        sha256_update(&hash, p, len);
        if (ob_end_put(s, len) < 0) die("ob_end_put"); /* the engine sends them */
        sent += len;
    }
    /* FIN after the queued bytes; then wait until the peer closes (it has
     * read everything) before detaching, which would reset the stream. */
    if (ob_shutdown(s) < 0) die("ob_shutdown");
    for (;;) {
        const void *buf;
        size_t len;
        if (ob_begin_get(s, &buf, &len) < 0) {
            if (errno == ECONNRESET) break; /* the peer closed and left at once */
            die("ob_begin_get");
        }
        if (len == 0) break;
        ob_end_get(s, len); /* ignore anything the peer sends */
    }
    char hex[65];
    sha256_final_hex(&hash, hex);
    printf("bytes=%llu sha256=%s\n", (unsigned long long)bytes, hex);

    ob_close(s);
    ob_detach(board);
    return 0;
}
