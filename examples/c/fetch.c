/* fetch: connects to a TCP server, reads with the copying ob_recv until N
 * bytes or end of stream, and prints the byte count and SHA-256.
 *
 *   fetch ENGINE ADDRESS PORT [BYTES]
 *
 * ADDRESS is IPv4 (A.B.C.D) or, on an engine running IPv6, IPv6 (then the
 * engine's static IPv6 address is printed first: "engine6=ADDR/PREFIX").
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
        fprintf(stderr, "usage: %s ENGINE A.B.C.D|IPV6 PORT [BYTES]\n", argv[0]);
        return 2;
    }
    ob_addr_t to;
    memset(&to, 0, sizeof to);
    to.port = (uint16_t)atoi(argv[3]); /* host byte order; address bytes in network order */
    if (inet_pton(AF_INET, argv[2], to.addr) == 1) {
        to.family = OB_AF_INET;
    } else if (inet_pton(AF_INET6, argv[2], to.addr) == 1) {
        to.family = OB_AF_INET6;
    } else {
        fprintf(stderr, "fetch: %s is not an IPv4 or IPv6 address\n", argv[2]);
        return 2;
    }
    uint64_t want = argc == 5 ? strtoull(argv[4], NULL, 0) : UINT64_MAX;

    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    if (to.family == OB_AF_INET6) {
        ob_addr_t me;
        uint8_t prefix = 0;
        char text[INET6_ADDRSTRLEN];
        if (ob_engine_address6(board, &me, &prefix) != 0) die("ob_engine_address6");
        printf("engine6=%s/%u\n", inet_ntop(AF_INET6, me.addr, text, sizeof text), prefix);
    }
    ob_stream_t *s = ob_connect_addr(board, &to);
    if (!s) die("ob_connect_addr");

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
