/* The verbs address exchange codec (format in addr.h). */
#include "inec/providers/verbs/addr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

int verbs_addr_format(const struct verbs_addr *a, char *out, size_t len)
{
    char gid[33];
    for (int i = 0; i < 16; i++)
        snprintf(gid + 2 * i, 3, "%02x", a->gid[i]);
    int n = snprintf(out, len, "verbs:%s:%u:%u:%u:%06x", gid, a->lid, a->port, a->mtu,
                     a->psn_seed & 0xffffffu);
    return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* A decimal field up to max, ending at ':' or the end (*p moves past it). */
static bool number(const char **p, unsigned long max, unsigned long *out)
{
    char *end;
    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    *out = strtoul(*p, &end, 10);
    if (errno || *out > max || (*end != ':' && *end != '\0'))
        return false;
    *p = *end == ':' ? end + 1 : end;
    return true;
}

int verbs_addr_parse(const char *text, struct verbs_addr *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof(*a));
    if (!text || strncmp(text, "verbs:", 6) != 0) {
        snprintf(err, errlen, "'%s' is not a verbs address (verbs:GID:LID:PORT:MTU:PSN)",
                 text ? text : "(null)");
        return -EINVAL;
    }
    const char *p = text + 6;
    for (int i = 0; i < 16; i++) {
        int hi = OPENSSL_hexchar2int((unsigned char)p[2 * i]),
            lo = hi < 0 ? -1 : OPENSSL_hexchar2int((unsigned char)p[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(err, errlen, "verbs address: the GID must be 32 hex digits");
            return -EINVAL;
        }
        a->gid[i] = (uint8_t)(hi << 4 | lo);
    }
    p += 32;
    if (*p++ != ':') {
        snprintf(err, errlen, "verbs address: the GID must be 32 hex digits");
        return -EINVAL;
    }
    unsigned long lid, port, mtu;
    if (!number(&p, 0xffff, &lid) || !number(&p, 255, &port) || port == 0 || !number(&p, 5, &mtu) ||
        mtu == 0) {
        snprintf(err, errlen, "verbs address: LID 0..65535, port 1..255, MTU 1..5 expected");
        return -EINVAL;
    }
    uint32_t seed = 0;
    int digits = 0;
    for (; OPENSSL_hexchar2int((unsigned char)*p) >= 0 && digits < 7; p++, digits++)
        seed = seed << 4 | (uint32_t)OPENSSL_hexchar2int((unsigned char)*p);
    if (digits != 6 || *p != '\0') {
        snprintf(err, errlen, "verbs address: the PSN seed must be 6 hex digits at the end");
        return -EINVAL;
    }
    a->lid = (uint16_t)lid;
    a->port = (uint8_t)port;
    a->mtu = (uint8_t)mtu;
    a->psn_seed = seed;
    return 0;
}

uint32_t verbs_psn(uint32_t psn_seed, uint32_t qpn)
{
    /* Different QPs of one device start far apart, and 0 is as good as any. */
    return (psn_seed ^ (qpn * 0x9e3779b1u >> 8)) & 0xffffffu;
}

bool verbs_gid_is_zero(const uint8_t gid[16])
{
    for (int i = 0; i < 16; i++)
        if (gid[i])
            return false;
    return true;
}
