/* msg_kv_server: a tiny key-value store served by RPC on a message mailbox
 * named "kv". Each request is read in place in the board and answered in
 * place: the response is written over the request, in its own buffer
 * (ob_mailbox_reply_buffer + ob_mailbox_reply_in_place), so no byte is
 * copied besides the value itself.
 *
 *   msg_kv_server ENGINE REQUESTS
 *
 * The engine must run the message service (`outboard engine --messages`).
 * Prints "kv at HOST:PORT/MAILBOX" once bound; serves REQUESTS requests,
 * prints "served=N puts=P gets=G" and exits 0.
 *
 * The protocol (msg_kv_client speaks it):
 *   request  P<key>\0<value>   put      response  + (stored) or - (store full)
 *   request  G<key>            get      response  +<value> or - (no such key)
 *   anything else                       response  !
 * Keys are 1 to 64 bytes without NUL, values 0 to 256 bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mailbox_addr.h"
#include "outboard.h"

#define SLOTS 16384 /* a power of two */
#define MAX_KEY 64
#define MAX_VALUE 256

struct slot {
    uint8_t key_len; /* 0: empty */
    uint16_t value_len;
    char key[MAX_KEY];
    char value[MAX_VALUE];
};
static struct slot table[SLOTS];
static size_t used;

static void die(const char *what) {
    fprintf(stderr, "msg_kv_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint32_t hash(const char *k, size_t n) { /* FNV-1a */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 16777619u;
    return h;
}

/* The slot holding key, or the empty slot where it would go (NULL: full). */
static struct slot *find(const char *k, size_t n) {
    for (uint32_t i = hash(k, n), probes = 0; probes < SLOTS; i++, probes++) {
        struct slot *s = &table[i & (SLOTS - 1)];
        if (s->key_len == 0 || (s->key_len == n && memcmp(s->key, k, n) == 0)) return s;
    }
    return NULL;
}

/* Answers req[0..len] into out[0..cap] (the same buffer: out overwrites
 * req, so everything needed from req is taken before out is written).
 * Returns the response length. */
static size_t serve(const char *req, size_t len, char *out, size_t cap, unsigned long *puts, unsigned long *gets) {
    if (len >= 2 && req[0] == 'P') {
        const char *nul = memchr(req + 1, '\0', len - 1);
        size_t klen = nul ? (size_t)(nul - (req + 1)) : 0;
        size_t vlen = nul ? len - 2 - klen : 0;
        if (klen == 0 || klen > MAX_KEY || vlen > MAX_VALUE) goto bad;
        struct slot *s = find(req + 1, klen);
        char answer = '-';
        if (s && (s->key_len != 0 || used < SLOTS - 1)) {
            if (s->key_len == 0) used++;
            s->key_len = (uint8_t)klen;
            memcpy(s->key, req + 1, klen);
            s->value_len = (uint16_t)vlen;
            memcpy(s->value, nul + 1, vlen); /* the request's bytes, before the reply overwrites them */
            answer = '+';
        }
        ++*puts;
        out[0] = answer;
        return 1;
    }
    if (len >= 2 && len - 1 <= MAX_KEY && req[0] == 'G' && !memchr(req + 1, '\0', len - 1)) {
        struct slot *s = find(req + 1, len - 1);
        ++*gets;
        if (!s || s->key_len == 0 || 1 + (size_t)s->value_len > cap) {
            out[0] = '-';
            return 1;
        }
        memcpy(out + 1, s->value, s->value_len);
        out[0] = '+';
        return 1 + s->value_len;
    }
bad:
    out[0] = '!';
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ENGINE REQUESTS\n", argv[0]);
        return 2;
    }
    unsigned long limit = strtoul(argv[2], NULL, 0);

    ob_board_t *board = ob_attach(argv[1], NULL);
    if (!board) die("ob_attach");
    ob_mailbox_t *mb = ob_mailbox_bind(board, 0, "kv"); /* any number; peers find it by name */
    if (!mb) die("ob_mailbox_bind");
    ob_mailbox_addr_t me;
    char text[64];
    if (ob_mailbox_addr(mb, &me) != 0) die("ob_mailbox_addr");
    printf("kv at %s\n", format_mailbox_addr(&me, text, sizeof text));
    fflush(stdout);

    unsigned long served = 0, puts = 0, gets = 0, others = 0;
    while (served < limit) {
        ob_message_t m;
        if (ob_mailbox_begin_get(mb, &m) != 0) die("ob_mailbox_begin_get"); /* waits */
        if (m.kind != OB_MSG_REQUEST) { /* datagrams and messages: not our protocol */
            others++;
            if (ob_mailbox_end_get(mb) != 0) die("ob_mailbox_end_get");
            continue;
        }
        if (m.len == 0) { /* nothing to parse: answer with a copy */
            if (ob_mailbox_reply(mb, "!", 1) != 0) die("ob_mailbox_reply");
            served++;
            continue;
        }
        void *out;
        size_t cap;
        if (ob_mailbox_reply_buffer(mb, &out, &cap) != 0) die("ob_mailbox_reply_buffer");
        size_t n = serve(m.data, m.len, out, cap, &puts, &gets);
        if (ob_mailbox_reply_in_place(mb, n) != 0) die("ob_mailbox_reply_in_place");
        served++;
    }
    printf("served=%lu puts=%lu gets=%lu keys=%zu others=%lu\n", served, puts, gets, used, others);
    ob_mailbox_close(mb);
    ob_detach(board);
    return 0;
}
