/* mailbox_addr.h: message addresses as text for the examples, header-only.
 *
 *   HOST:PORT          an engine's message address (ob_addr_t), e.g. 10.0.0.1:7373
 *   HOST:PORT/MAILBOX  a mailbox anywhere (ob_mailbox_addr_t), e.g. 10.0.0.1:7373/5
 *
 * HOST is A.B.C.D or [IPV6]. Each parser returns 0, or -1 for bad text.
 */
#ifndef OB_EXAMPLES_MAILBOX_ADDR_H
#define OB_EXAMPLES_MAILBOX_ADDR_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard.h"

static inline int parse_host(const char *text, ob_addr_t *out) {
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof host) return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port == 0 || port > 65535) return -1;
    memset(out, 0, sizeof *out);
    out->port = (uint16_t)port; /* host byte order; address bytes in network order */
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host[n - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, out->addr) != 1) return -1;
        out->family = OB_AF_INET6;
    } else {
        if (inet_pton(AF_INET, host, out->addr) != 1) return -1;
        out->family = OB_AF_INET;
    }
    return 0;
}

static inline int parse_mailbox_addr(const char *text, ob_mailbox_addr_t *out) {
    char host[INET6_ADDRSTRLEN + 16];
    const char *slash = strrchr(text, '/');
    if (!slash || (size_t)(slash - text) >= sizeof host) return -1;
    memcpy(host, text, (size_t)(slash - text));
    host[slash - text] = '\0';
    char *end;
    unsigned long mailbox = strtoul(slash + 1, &end, 10);
    if (*end != '\0' || slash[1] == '\0' || mailbox > UINT32_MAX) return -1;
    if (parse_host(host, &out->host) != 0) return -1;
    out->mailbox = (uint32_t)mailbox;
    return 0;
}

/* Writes "HOST:PORT/MAILBOX" into text (64 bytes are always enough). */
static inline const char *format_mailbox_addr(const ob_mailbox_addr_t *a, char *text, size_t size) {
    char ip[INET6_ADDRSTRLEN];
    if (a->host.family == OB_AF_INET6) {
        inet_ntop(AF_INET6, a->host.addr, ip, sizeof ip);
        snprintf(text, size, "[%s]:%u/%u", ip, a->host.port, a->mailbox);
    } else {
        inet_ntop(AF_INET, a->host.addr, ip, sizeof ip);
        snprintf(text, size, "%s:%u/%u", ip, a->host.port, a->mailbox);
    }
    return text;
}

#endif
