/* echo_server: echoes many TCP connections at once from one thread, with
 * one event queue over the listener and every stream, moving the bytes in
 * place from the receive region to the transmit region (ob_begin_get_put:
 * one memcpy, no buffer of our own).
 *
 *   echo_server ENGINE PORT [CONNECTIONS]
 *
 * prints "listening on PORT"; with CONNECTIONS, exits after that many
 * connections have closed and prints "served=N bytes=B".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"

#define MAX_CONNS 1024
#define LISTENER_TOKEN 0 /* streams use token = slot + 1 */

static void die(const char *what) {
    fprintf(stderr, "echo_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

static ob_stream_t *conns[MAX_CONNS];
static ob_event_queue_t *eq;
static unsigned long long echoed;

/* Echoes what can be echoed now, without waiting. Returns 0 to keep the
 * stream, -1 when it has ended (end of stream or an error). */
static int echo(size_t slot) {
    ob_stream_t *s = conns[slot];
    for (;;) {
        const void *in;
        void *out;
        size_t have, room;
        if (ob_begin_get_put(s, &in, &have, &out, &room) < 0) return -1; /* the stream failed */
        if (have == 0) return ob_at_eof(s) ? -1 : 0; /* peer closed, or nothing more for now */
        if (room == 0) { /* the peer is slow to read: wait until we can send */
            ob_eq_modify(eq, ob_stream_id(s), slot + 1, OB_WRITABLE);
            return 0;
        }
        size_t n = have < room ? have : room;
        memcpy(out, in, n); /* receive region -> transmit region */
        if (ob_end_put(s, n) < 0 || ob_end_get(s, n) < 0) return -1;
        echoed += n;
    }
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s ENGINE PORT [CONNECTIONS]\n", argv[0]);
        return 2;
    }
    long limit = argc == 4 ? atol(argv[3]) : -1;

    /* Blocking board: ob_eq_wait sleeps. The listener is made non-blocking
     * so that accepting never waits; ob_begin_get_put never waits. */
    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    ob_listener_t *listener = ob_listen(board, (uint16_t)atoi(argv[2]), 128);
    if (!listener) die("ob_listen");
    ob_listener_set_mode(listener, OB_MODE_NONBLOCKING);
    if (!(eq = ob_event_queue(board))) die("ob_event_queue");
    if (ob_eq_add(eq, ob_listener_id(listener), LISTENER_TOKEN, OB_READABLE) < 0) die("ob_eq_add");
    printf("listening on %d\n", ob_listener_port(listener));
    fflush(stdout);

    long served = 0;
    ob_ready_t ready[64];
    while (limit < 0 || served < limit) {
        int n = ob_eq_wait(eq, ready, 64, -1);
        if (n < 0) die("ob_eq_wait");
        for (int i = 0; i < n; i++) {
            if (ready[i].token == LISTENER_TOKEN) {
                ob_stream_t *s;
                while ((s = ob_accept(listener)) != NULL) { /* until EAGAIN */
                    size_t slot = 0;
                    while (slot < MAX_CONNS && conns[slot]) slot++;
                    if (slot == MAX_CONNS) { /* full: refuse */
                        ob_close(s);
                        continue;
                    }
                    conns[slot] = s;
                    if (ob_eq_add(eq, ob_stream_id(s), slot + 1, OB_READABLE) < 0) die("ob_eq_add");
                }
                if (errno != EAGAIN) die("ob_accept");
                continue;
            }
            size_t slot = (size_t)ready[i].token - 1;
            if (!conns[slot]) continue;
            if (ready[i].events & OB_WRITABLE) /* room again: back to reading */
                ob_eq_modify(eq, ob_stream_id(conns[slot]), slot + 1, OB_READABLE);
            if (echo(slot) < 0) {
                ob_eq_remove(eq, ob_stream_id(conns[slot]));
                ob_close(conns[slot]);
                conns[slot] = NULL;
                served++;
            }
        }
    }
    printf("served=%ld bytes=%llu\n", served, echoed);
    ob_eq_free(eq);
    ob_listener_close(listener);
    ob_detach(board);
    return 0;
}
