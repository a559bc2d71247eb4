/* qp_pingpong: a counter bounced between two queue pairs (VIA-style: posted
 * receive buffers, reliable sends, one completion queue), one per engine.
 *
 *   qp_pingpong pong ENGINE ROUNDS
 *   qp_pingpong ping ENGINE ROUNDS PEER
 *
 * Both engines run the message service (`outboard engine --messages`).
 * Each prints "qp HOST:PORT/MAILBOX", its queue pair's address, first.
 * Start pong, then ping with pong's address as PEER. A completion carries
 * no sender, so ping's first message is its own address as text: pong
 * connects to it and answers "ok". Then ping sends 0, pong answers 1, ping
 * sends 2, ... (a uint64_t in host byte order, each checked), ROUNDS round
 * trips. Each waits until its last send completed, then prints
 * "pong rounds=N" or "ping rounds=N median_us=M p99_us=P min_us=L" and exits 0.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mailbox_addr.h"
#include "outboard.h"

#define RECVS 4           /* receive buffers posted at once */
#define TIMEOUT_MS 10000  /* a completion that takes longer is a failure */

static const char *role = "qp_pingpong";
static ob_cq_t *cq;
static int qp;
static unsigned long sends_posted, sends_done;

static void die(const char *what) {
    fprintf(stderr, "%s: %s: %s\n", role, what, strerror(errno));
    exit(1);
}

static void fail(const char *what) {
    fprintf(stderr, "%s: %s\n", role, what);
    exit(1);
}

static void send_bytes(const void *buf, size_t len) {
    if (ob_qp_post_send(cq, qp, buf, len, (uint32_t)sends_posted) != 0) die("ob_qp_post_send");
    sends_posted++;
}

/* Waits for the next receive (counting send completions on the way): its
 * message in place, held until ob_qp_repost. Returns its wr_id. */
static uint32_t next_recv(const void **data, size_t *len) {
    for (;;) {
        ob_completion_t c;
        int got = ob_cq_wait(cq, TIMEOUT_MS, &c);
        if (got < 0) die("ob_cq_wait");
        if (got == 0) fail("no completion within 10 s");
        if (c.err != 0) {
            errno = c.err;
            die(c.op == OB_WC_SEND ? "send completion" : "receive completion");
        }
        if (c.op == OB_WC_SEND) {
            sends_done++;
            continue;
        }
        if (ob_qp_data(cq, c.qp, data, len) != 0) die("ob_qp_data");
        return c.wr_id;
    }
}

/* Waits until every send posted has completed (the peer's engine has it). */
static void drain_sends(void) {
    while (sends_done < sends_posted) {
        ob_completion_t c;
        int got = ob_cq_wait(cq, TIMEOUT_MS, &c);
        if (got < 0) die("ob_cq_wait");
        if (got == 0) fail("sends did not complete within 10 s");
        if (c.err != 0) {
            errno = c.err;
            die("completion");
        }
        if (c.op == OB_WC_SEND) sends_done++;
        else if (ob_qp_repost(cq, c.qp, c.wr_id) != 0) die("ob_qp_repost"); /* nothing more expected */
    }
}

static uint64_t counter(const void *data, size_t len) {
    uint64_t v;
    if (len != sizeof v) fail("a message of the wrong length");
    memcpy(&v, data, sizeof v);
    return v;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int ping = argc == 5 && strcmp(argv[1], "ping") == 0;
    int pong = argc == 4 && strcmp(argv[1], "pong") == 0;
    if (!ping && !pong) {
        fprintf(stderr, "usage: %s pong ENGINE ROUNDS\n       %s ping ENGINE ROUNDS HOST:PORT/MAILBOX\n", argv[0], argv[0]);
        return 2;
    }
    role = ping ? "qp_pingpong ping" : "qp_pingpong pong";
    unsigned long rounds = strtoul(argv[3], NULL, 0);
    ob_mailbox_addr_t peer;
    if (ping && parse_mailbox_addr(argv[4], &peer) != 0) fail("PEER is not HOST:PORT/MAILBOX");

    ob_board_t *board = ob_attach(argv[2], NULL);
    if (!board) die("ob_attach");
    cq = ob_cq_new();
    if (!cq) die("ob_cq_new");
    qp = ob_qp_create(cq, board, 0);
    if (qp < 0) die("ob_qp_create");
    for (uint32_t w = 0; w < RECVS; w++)
        if (ob_qp_post_recv(cq, qp, w) != 0) die("ob_qp_post_recv");
    ob_mailbox_addr_t me;
    char text[64];
    if (ob_qp_addr(cq, qp, &me) != 0) die("ob_qp_addr");
    format_mailbox_addr(&me, text, sizeof text);
    printf("qp %s\n", text);
    fflush(stdout);

    const void *data;
    size_t len;
    uint32_t wr;
    if (pong) {
        /* The first message is ping's address. */
        wr = next_recv(&data, &len);
        char hello[64];
        if (len == 0 || len >= sizeof hello) fail("a hello of the wrong length");
        memcpy(hello, data, len);
        hello[len] = '\0';
        if (parse_mailbox_addr(hello, &peer) != 0) fail("the hello is not HOST:PORT/MAILBOX");
        if (ob_qp_repost(cq, qp, wr) != 0) die("ob_qp_repost");
        if (ob_qp_connect(cq, qp, &peer) != 0) die("ob_qp_connect");
        send_bytes("ok", 2);
        for (unsigned long r = 0; r < rounds; r++) {
            wr = next_recv(&data, &len);
            uint64_t v = counter(data, len);
            if (v != 2 * (uint64_t)r) fail("ping sent the wrong counter");
            if (ob_qp_repost(cq, qp, wr) != 0) die("ob_qp_repost"); /* the same buffer, posted again */
            v++;
            send_bytes(&v, sizeof v);
        }
        drain_sends();
        printf("pong rounds=%lu\n", rounds);
    } else {
        if (ob_qp_connect(cq, qp, &peer) != 0) die("ob_qp_connect");
        send_bytes(text, strlen(text));
        wr = next_recv(&data, &len);
        if (len != 2 || memcmp(data, "ok", 2) != 0) fail("pong did not answer ok");
        if (ob_qp_repost(cq, qp, wr) != 0) die("ob_qp_repost");
        double *rtt = malloc((rounds ? rounds : 1) * sizeof *rtt);
        if (!rtt) die("malloc");
        for (unsigned long r = 0; r < rounds; r++) {
            uint64_t v = 2 * (uint64_t)r;
            double t0 = now_us();
            send_bytes(&v, sizeof v);
            wr = next_recv(&data, &len);
            if (counter(data, len) != v + 1) fail("pong answered the wrong counter");
            rtt[r] = now_us() - t0;
            if (ob_qp_repost(cq, qp, wr) != 0) die("ob_qp_repost");
        }
        drain_sends();
        double median = 0, p99 = 0, min = 0;
        if (rounds > 0) {
            qsort(rtt, rounds, sizeof *rtt, by_value);
            median = rtt[rounds / 2];
            p99 = rtt[rounds * 99 / 100];
            min = rtt[0];
        }
        printf("ping rounds=%lu median_us=%.1f p99_us=%.1f min_us=%.1f\n", rounds, median, p99, min);
        free(rtt);
    }
    ob_cq_free(cq);
    ob_detach(board);
    return 0;
}
