/* msg_kv_client: talks to msg_kv_server by RPC over message mailboxes and
 * checks every answer: N puts and N gets with blocking calls (ob_mailbox_call),
 * a get of a missing key, a get into a short buffer (the response is cut,
 * its full length reported), then N gets again with up to 32 calls
 * outstanding at once (ob_mailbox_call_start + ob_mailbox_wait_call).
 *
 *   msg_kv_client ENGINE HOST:PORT N
 *
 * HOST:PORT is the server engine's message address (e.g. 10.0.0.1:7373);
 * the client finds the mailbox "kv" there with ob_mailbox_lookup. Both
 * engines run the message service (`outboard engine --messages`).
 * Makes 3N+2 calls; exits 0 only when every answer is right, after one line
 * "kv ok calls=C puts=N gets=N async=N us_per_call=U" (on a wrong answer it
 * prints what was wrong to stderr and exits 1).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mailbox_addr.h"
#include "outboard.h"

#define WINDOW 32 /* calls outstanding at once in the asynchronous batch */

static void die(const char *what) {
    fprintf(stderr, "msg_kv_client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void wrong(const char *what, unsigned i) {
    fprintf(stderr, "msg_kv_client: wrong answer: %s (key %u)\n", what, i);
    exit(1);
}

static size_t make_key(unsigned i, char *out) {
    return (size_t)snprintf(out, 32, "key-%u", i);
}

/* Value i: 1 to 200 bytes, a pattern of i. */
static size_t make_value(unsigned i, char *out) {
    size_t len = (i * 37u) % 200 + 1;
    for (size_t k = 0; k < len; k++) out[k] = (char)('a' + (i * 7u + k * 13u) % 26);
    return len;
}

static size_t get_request(unsigned i, char *req) {
    req[0] = 'G';
    return 1 + make_key(i, req + 1);
}

/* Checks a get's response: "+" and value i. */
static void check_value(unsigned i, const char *resp, size_t len) {
    char want[256];
    size_t n = make_value(i, want);
    if (len != n + 1 || resp[0] != '+' || memcmp(resp + 1, want, n) != 0) wrong("get", i);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s ENGINE HOST:PORT N\n", argv[0]);
        return 2;
    }
    ob_addr_t server;
    if (parse_host(argv[2], &server) != 0) {
        fprintf(stderr, "msg_kv_client: %s is not HOST:PORT\n", argv[2]);
        return 2;
    }
    unsigned n = (unsigned)strtoul(argv[3], NULL, 0);

    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    ob_mailbox_t *mb = ob_mailbox_bind(board, 0, NULL); /* any number, no name: calls only */
    if (!mb) die("ob_mailbox_bind");
    ob_mailbox_addr_t kv;
    if (ob_mailbox_lookup(board, &server, "kv", &kv) != 0) die("ob_mailbox_lookup kv");

    char req[512], resp[512];
    size_t len;
    unsigned long calls = 0;
    double start = now_us();

    for (unsigned i = 0; i < n; i++) { /* puts */
        req[0] = 'P';
        size_t k = 1 + make_key(i, req + 1);
        req[k++] = '\0';
        k += make_value(i, req + k);
        if (ob_mailbox_call(mb, &kv, req, k, resp, sizeof resp, &len) != 0) die("ob_mailbox_call put");
        calls++;
        if (len != 1 || resp[0] != '+') wrong("put", i);
    }
    for (unsigned i = 0; i < n; i++) { /* gets */
        size_t k = get_request(i, req);
        if (ob_mailbox_call(mb, &kv, req, k, resp, sizeof resp, &len) != 0) die("ob_mailbox_call get");
        calls++;
        check_value(i, resp, len);
    }
    /* A key nobody put. */
    if (ob_mailbox_call(mb, &kv, "Gno-such-key", 12, resp, sizeof resp, &len) != 0) die("ob_mailbox_call missing");
    calls++;
    if (len != 1 || resp[0] != '-') wrong("missing key", n);
    /* A response longer than the buffer: cut to it, the full length reported. */
    if (n > 0) {
        unsigned i = n - 1;
        char small[4], want[256];
        size_t k = get_request(i, req), vlen = make_value(i, want);
        if (ob_mailbox_call(mb, &kv, req, k, small, sizeof small, &len) != 0) die("ob_mailbox_call short");
        if (len != vlen + 1 || small[0] != '+' || memcmp(small + 1, want, vlen < 3 ? vlen : 3) != 0) wrong("short buffer", i);
    } else if (ob_mailbox_call(mb, &kv, "G-", 2, resp, sizeof resp, &len) != 0) {
        die("ob_mailbox_call");
    }
    calls++;

    /* The asynchronous batch: up to WINDOW calls outstanding, answers taken in order. */
    uint32_t tags[WINDOW];
    unsigned sent = 0, done = 0;
    while (done < n) {
        while (sent < n && sent - done < WINDOW) {
            size_t k = get_request(sent, req);
            int64_t tag = ob_mailbox_call_start(mb, &kv, req, k, 0);
            if (tag < 0) die("ob_mailbox_call_start");
            tags[sent % WINDOW] = (uint32_t)tag;
            sent++;
        }
        if (ob_mailbox_wait_call(mb, tags[done % WINDOW], resp, sizeof resp, &len) != 0) die("ob_mailbox_wait_call");
        calls++;
        check_value(done, resp, len);
        done++;
    }
    double us = calls ? (now_us() - start) / (double)calls : 0;

    printf("kv ok calls=%lu puts=%u gets=%u async=%u us_per_call=%.1f\n", calls, n, n, n, us);
    ob_mailbox_close(mb);
    ob_detach(board);
    return 0;
}
