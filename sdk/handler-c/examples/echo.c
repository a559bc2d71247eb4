/*
 * echo: answers each request with its own bytes (any size the handler's
 * memory cap allows); datagrams and messages are ignored. The C twin of the
 * Rust example sdk/handler-rust/examples/echo.
 *
 * Build: sdk/handler-c/build.sh (clang --target=wasm32-unknown-unknown).
 */
#include "../outboard_handler.h"

#include <stddef.h>

OB_ABI();

/* The first address past the module's data and stack (set by wasm-ld). */
extern unsigned char __heap_base;

/* `len` bytes of scratch memory at the heap base, growing the memory when it
 * is too small; NULL when the memory cap refuses. */
static unsigned char *scratch(uint32_t len) {
    uintptr_t base = (uintptr_t)&__heap_base;
    uintptr_t end = __builtin_wasm_memory_size(0) * 65536u;
    if (len > end - base) {
        uintptr_t pages = (len - (end - base) + 65535u) / 65536u;
        if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1)
            return NULL;
    }
    return (unsigned char *)base;
}

/* One message arrived: a request is answered with its own bytes. */
OB_EXPORT(ob_message) int32_t ob_message(int32_t kind, int32_t len) {
    if (kind != OB_KIND_REQUEST)
        return 0;
    if (len < 0)
        return -OB_EINVAL;
    unsigned char *buf = scratch((uint32_t)len);
    if (buf == NULL)
        return -OB_ENOSPC;
    int32_t got = 0;
    while (got < len) {
        int32_t n = ob_input_read(got, buf + got, len - got);
        if (n < 0)
            return n;
        if (n == 0)
            break;
        got += n;
    }
    int32_t r = ob_reply(buf, got);
    return r < 0 ? r : 0;
}
