/* sha256.h: a small SHA-256 (FIPS 180-4) for the examples, header-only.
 *
 *   sha256_t h; sha256_init(&h);
 *   sha256_update(&h, data, len);  ... as often as needed
 *   char hex[65]; sha256_final_hex(&h, hex);
 */
#ifndef OB_EXAMPLES_SHA256_H
#define OB_EXAMPLES_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    uint32_t state[8];
    uint64_t total;      /* bytes hashed so far */
    uint8_t block[64];   /* a partial block */
    size_t used;         /* bytes in block */
} sha256_t;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t sha256_rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline void sha256_block(sha256_t *h, const uint8_t *p) {
    uint32_t w[64], s[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(s, h->state, sizeof s);
    for (int i = 0; i < 64; i++) {
        uint32_t e = s[4], a = s[0];
        uint32_t t1 = s[7] + (sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25)) + ((e & s[5]) ^ (~e & s[6])) +
                      sha256_k[i] + w[i];
        uint32_t t2 = (sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22)) + ((a & s[1]) ^ (a & s[2]) ^ (s[1] & s[2]));
        memmove(s + 1, s, 7 * sizeof s[0]);
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h->state[i] += s[i];
}

static inline void sha256_init(sha256_t *h) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, iv, sizeof iv);
    h->total = 0;
    h->used = 0;
}

static inline void sha256_update(sha256_t *h, const void *data, size_t len) {
    const uint8_t *p = data;
    h->total += len;
    if (h->used > 0) { /* finish the partial block first */
        size_t take = 64 - h->used < len ? 64 - h->used : len;
        memcpy(h->block + h->used, p, take);
        h->used += take, p += take, len -= take;
        if (h->used < 64) return;
        sha256_block(h, h->block);
        h->used = 0;
    }
    for (; len >= 64; p += 64, len -= 64) sha256_block(h, p);
    memcpy(h->block, p, len);
    h->used = len;
}

/* Finishes the hash and writes it as 64 hex digits and a NUL. */
static inline void sha256_final_hex(sha256_t *h, char hex[65]) {
    uint64_t bits = h->total * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (h->used < 56 ? 56 : 120) - h->used;
    for (int i = 0; i < 8; i++) pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(h, pad, padlen + 8);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", h->state[i]);
}

#endif /* OB_EXAMPLES_SHA256_H */
