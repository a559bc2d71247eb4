/* sink_server: accepts one TCP connection, reads everything in place
 * (zero-copy ob_begin_get/ob_end_get) until the peer closes, and prints the
 * byte count and SHA-256.
 *
 *   sink_server ENGINE PORT
 *
 * prints "listening on PORT" once it listens, then "bytes=N sha256=HEX".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"
#include "sha256.h"

static void die(const char *what) {
    fprintf(stderr, "sink_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ENGINE PORT\n", argv[0]);
        return 2;
    }
    uint16_t port = (uint16_t)atoi(argv[2]);

    ob_board_t *board = ob_attach(argv[1], NULL); /* NULL: default options, blocking mode */
    if (!board) die("ob_attach");
    ob_listener_t *listener = ob_listen(board, port, 1);
    if (!listener) die("ob_listen");
    printf("listening on %d\n", ob_listener_port(listener));
    fflush(stdout);

    ob_stream_t *s = ob_accept(listener); /* waits for a connection */
    if (!s) die("ob_accept");
    ob_listener_close(listener);

    sha256_t hash;
    sha256_init(&hash);
    uint64_t total = 0;
    for (;;) {
        const void *buf;
        size_t len;
        if (ob_begin_get(s, &buf, &len) < 0) die("ob_begin_get"); /* waits for bytes */
        if (len == 0) break;                                      /* the peer closed */
        sha256_update(&hash, buf, len);                           /* read in place in the board */
        total += len;
        if (ob_end_get(s, len) < 0) die("ob_end_get"); /* hand the room back */
    }
    char hex[65];
    sha256_final_hex(&hash, hex);
    printf("bytes=%llu sha256=%s\n", (unsigned long long)total, hex);

    ob_close(s);
    ob_detach(board);
    return 0;
}
