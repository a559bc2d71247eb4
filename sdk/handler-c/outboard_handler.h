/*
 * outboard_handler.h: write Outboard engine handlers in C.
 *
 * A handler is a WebAssembly module (wasm32, no libc, no WASI) that the
 * engine runs as a mailbox's reader upcall or as a TCP listener's handler.
 * This header is ABI version 1 of docs/HANDLERS.md ("The module's side"):
 * the engine's functions, imported from the wasm module "outboard", and
 * macros for the exports a handler defines.
 *
 * A handler exports `memory` (wasm-ld does so by default), `ob_abi` (write OB_ABI(); once), and the
 * entry points it serves, with exactly these signatures:
 *
 *   OB_EXPORT(ob_init)      int32_t ob_init(void);                optional
 *   OB_EXPORT(ob_message)   int32_t ob_message(int32_t kind, int32_t len);
 *   OB_EXPORT(ob_tcp_open)  int32_t ob_tcp_open(int32_t conn);
 *   OB_EXPORT(ob_tcp_data)  int32_t ob_tcp_data(int32_t conn, int32_t len);
 *   OB_EXPORT(ob_tcp_close) int32_t ob_tcp_close(int32_t conn);
 *
 * Build (clang and lld with the WebAssembly target; sdk/handler-c/build.sh):
 *
 *   clang --target=wasm32-unknown-unknown -O2 -mbulk-memory -nostdlib -ffreestanding \
 *         -Wl,--no-entry -Wl,--stack-first -Wl,-z,stack-size=65536 -o handler.wasm handler.c
 *
 * There is no libc; -mbulk-memory makes the compiler's memcpy/memset calls
 * wasm instructions (without it they fail to link).
 *
 * Every engine function returns a negative errno (OB_EFAULT, ...) on error.
 * Pointers are addresses in the handler's own memory; the engine checks each
 * pointer and length before it copies a byte.
 */
#ifndef OUTBOARD_HANDLER_H
#define OUTBOARD_HANDLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI version -------------------------------------------------------- */

/* The ABI version this header describes (what ob_abi returns). */
#define OB_ABI_VERSION 1

/* ---- Exports ------------------------------------------------------------ */

/* Exports the function that follows under its own name:
 *   OB_EXPORT(ob_message) int32_t ob_message(int32_t kind, int32_t len) { ... } */
#define OB_EXPORT(name) __attribute__((export_name(#name), visibility("default")))

/* Defines the required `ob_abi` export (returns OB_ABI_VERSION). Use once. */
#define OB_ABI()                                                   \
    OB_EXPORT(ob_abi) int32_t ob_abi(void);                        \
    OB_EXPORT(ob_abi) int32_t ob_abi(void) { return OB_ABI_VERSION; }

/* ---- Message kinds (ob_message's `kind`) -------------------------------- */

#define OB_KIND_DATAGRAM 1 /* an unreliable datagram (also what ob_enqueue delivers) */
#define OB_KIND_MESSAGE  2 /* a reliable message */
#define OB_KIND_REQUEST  3 /* a request (RPC): answer it with ob_reply, once */

/* ob_send's `flags` bit: a reliable message (else a datagram). */
#define OB_SEND_RELIABLE 1

/* ---- Error numbers (returned negated) ----------------------------------- */

#define OB_ENOENT   2   /* no such key or mailbox */
#define OB_EAGAIN   11  /* no room now (a full reliable queue; a dropped log line) */
#define OB_EFAULT   14  /* a range outside the handler's memory */
#define OB_EINVAL   22  /* an invalid argument (ob_reply to a non-request, ...) */
#define OB_ENOSPC   28  /* the key-value store's cap, or a full mailbox */
#define OB_EMSGSIZE 90  /* too large */
#define OB_ENOTCONN 107 /* the connection is not open */
#define OB_EALREADY 114 /* a second ob_reply to one request */

/* ---- Limits ------------------------------------------------------------- */

#define OB_MAX_KEY      256        /* keys are 1..=256 bytes */
#define OB_MAX_VALUE    (64 * 1024) /* values up to 64 KiB */
#define OB_MAX_LOG_LINE 256        /* the longest log line */

/* ---- The address ------------------------------------------------------- */

#define OB_FAMILY_IPV4 4
#define OB_FAMILY_IPV6 6

/* A mailbox's address, 24 bytes, every field little-endian: 16 bytes of
 * IPv6 address (an IPv4 address as ::ffff:a.b.c.d), the UDP port, the family
 * (OB_FAMILY_IPV4 or OB_FAMILY_IPV6), the mailbox number. wasm32 is
 * little-endian, so the integer fields read as they are. */
struct ob_addr {
    uint8_t ip[16];
    uint16_t port;
    uint16_t family;
    uint32_t mailbox;
};

_Static_assert(sizeof(struct ob_addr) == 24, "struct ob_addr is 24 bytes");
_Static_assert(__builtin_offsetof(struct ob_addr, port) == 16, "port at 16");
_Static_assert(__builtin_offsetof(struct ob_addr, family) == 18, "family at 18");
_Static_assert(__builtin_offsetof(struct ob_addr, mailbox) == 20, "mailbox at 20");

/* Mailbox `mailbox` at the IPv4 address a.b.c.d, UDP port `port`. */
static inline struct ob_addr ob_addr_ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d,
                                          uint16_t port, uint32_t mailbox) {
    struct ob_addr addr = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d},
                           port, OB_FAMILY_IPV4, mailbox};
    return addr;
}

/* ---- The engine's functions -------------------------------------------- */

#define OB_IMPORT(name) __attribute__((import_module("outboard"), import_name(#name)))

/* Copies bytes offset..offset+len of the message (or TCP data) being handled
 * to dst; returns the bytes copied (fewer at its end). */
OB_IMPORT(input_read) int32_t ob_input_read(int32_t offset, void *dst, int32_t len);

/* Writes the sender's 24-byte address to dst; returns 24. */
OB_IMPORT(msg_from) int32_t ob_msg_from(struct ob_addr *dst);

/* Answers the request being handled (once: -OB_EALREADY after; -OB_EINVAL if
 * it is not a request). */
OB_IMPORT(reply) int32_t ob_reply(const void *ptr, int32_t len);

/* Sends ptr..ptr+len to the address at addr, from the handler's mailbox;
 * flags: OB_SEND_RELIABLE, else a datagram. -OB_EAGAIN: no room now. */
OB_IMPORT(send) int32_t ob_send(const struct ob_addr *addr, const void *ptr, int32_t len,
                                int32_t flags);

/* Puts ptr..ptr+len into mailbox `mailbox` of this engine, from the handler's
 * mailbox, as a datagram. -OB_ENOENT: no such mailbox; -OB_ENOSPC: full. */
OB_IMPORT(enqueue) int32_t ob_enqueue(uint32_t mailbox, const void *ptr, int32_t len);

/* Queues bytes on a connection; returns how many were taken (fewer when its
 * send buffer is full). */
OB_IMPORT(tcp_write) int32_t ob_tcp_write(int32_t conn, const void *ptr, int32_t len);

/* Closes the connection after what was written. */
OB_IMPORT(tcp_close) int32_t ob_tcp_close_conn(int32_t conn);

/* The engine's monotonic clock, nanoseconds. */
OB_IMPORT(now_ns) int64_t ob_now_ns(void);

/* The value's full length (copying at most cap bytes of it to dst), or
 * -OB_ENOENT. */
OB_IMPORT(kv_get) int32_t ob_kv_get(const void *key, int32_t key_len, void *dst, int32_t cap);

/* 0; -OB_ENOSPC beyond the store's cap. Keys 1..=256 bytes, values up to
 * 64 KiB. */
OB_IMPORT(kv_put) int32_t ob_kv_put(const void *key, int32_t key_len, const void *val,
                                    int32_t val_len);

/* 0 or -OB_ENOENT. */
OB_IMPORT(kv_del) int32_t ob_kv_del(const void *key, int32_t key_len);

/* One line (at most 256 bytes) to the engine's log; -OB_EAGAIN when the rate
 * limit dropped it. */
OB_IMPORT(log) int32_t ob_log(const void *ptr, int32_t len);

#undef OB_IMPORT

#ifdef __cplusplus
}
#endif

#endif /* OUTBOARD_HANDLER_H */
