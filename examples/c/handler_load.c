/* handler_load: loads a WebAssembly handler onto an engine through the board
 * (ob_handler_load), keeps it while it runs, and unloads it
 * (ob_handler_unload) when told to stop (SIGTERM or SIGINT).
 *
 *   handler_load ENGINE MODULE.wasm NAME
 *
 * The engine runs the message service (`outboard engine --messages`). The
 * handler reads mailbox NAME (a number the engine picks): peers find it with
 * ob_mailbox_lookup. Prints "handler NAME mailbox N" once loaded, and
 * "unloaded NAME" when it stops; exits 0, or 1 with the reason on stderr
 * (e.g. EINVAL: the engine refused the module, its log says why). The
 * engine unloads a board's handlers when it detaches or dies, too.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"

static void die(const char *what) {
    fprintf(stderr, "handler_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The whole file, or exit 1. */
static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) die("malloc");
    for (;;) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        if (cap > (64u << 20)) { errno = EFBIG; die(path); }
        if (!(buf = realloc(buf, cap))) die("realloc");
    }
    if (ferror(f)) die(path);
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: handler_load ENGINE MODULE.wasm NAME\n");
        return 2;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    /* Taken by sigwait below, not by a handler (blocked before the board's threads start). */
    if (sigprocmask(SIG_BLOCK, &stop, NULL) != 0) die("sigprocmask");
    size_t len;
    uint8_t *wasm = read_file(argv[2], &len);
    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    /* Mailbox 0: named after the handler. Limits 0: the engine's defaults. */
    int64_t mailbox = ob_handler_load(board, argv[3], wasm, len, 0, 0, 0, 0, 0);
    if (mailbox < 0) die("ob_handler_load");
    free(wasm);
    printf("handler %s mailbox %lld\n", argv[3], (long long)mailbox);
    fflush(stdout);
    int sig;
    if (sigwait(&stop, &sig) != 0) die("sigwait");
    if (ob_handler_unload(board, argv[3]) != 0) die("ob_handler_unload");
    printf("unloaded %s\n", argv[3]);
    ob_detach(board);
    return 0;
}
