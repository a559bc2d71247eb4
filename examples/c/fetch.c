/* fetch: connects to a TCP server, reads with the copying ob_recv until N
 * bytes or end of stream, and prints the byte count and SHA-256.
 *
 *   fetch ENGINE A.B.C.D PORT [BYTES]
 *
 * prints "bytes=N sha256=HEX".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"
#include "sha256.h"

static void die(const char *what) {
    fprintf(stderr, "fetch: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s ENGINE A.B.C.D PORT [BYTES]\n", argv[0]);
        return 2;
    }
    struct in_addr ip;
    if (inet_pton(AF_INET, argv[2], &ip) != 1) {
        fprintf(stderr, "fetch: %s is not an IPv4 address\n", argv[2]);
        return 2;
    }
    uint16_t port = (uint16_t)atoi(argv[3]);
    uint64_t want = argc == 5 ? strtoull(argv[4], NULL, 0) : UINT64_MAX;

    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    ob_stream_t *s = ob_connect(board, ntohl(ip.s_addr), port); /* host byte order */
    if (!s) die("ob_connect");

    static char buf[64 * 1024];
    sha256_t hash;
    sha256_init(&hash);
    uint64_t total = 0;
    while (total < want) {
        size_t ask = want - total < sizeof buf ? (size_t)(want - total) : sizeof buf;
        ssize_t n = ob_recv(s, buf, ask); /* copies out of the board */
        if (n < 0) die("ob_recv");
        if (n == 0) break; /* end of stream */
        sha256_update(&hash, buf, (size_t)n);
        total += (uint64_t)n;
    }
    char hex[65];
    sha256_final_hex(&hash, hex);
    printf("bytes=%llu sha256=%s\n", (unsigned long long)total, hex);

    ob_close(s);
    ob_detach(board);
    return 0;
}
