#include "gateway/checksum.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include <openssl/evp.h>

static const struct {
    const char *header, *name;
    size_t len; /* of the digest */
} algos[GW_SUM_COUNT] = {
    [GW_SUM_CRC32] = {"x-amz-checksum-crc32", "CRC32", 4},
    [GW_SUM_CRC32C] = {"x-amz-checksum-crc32c", "CRC32C", 4},
    [GW_SUM_CRC64NVME] = {"x-amz-checksum-crc64nvme", "CRC64NVME", 8},
    [GW_SUM_SHA1] = {"x-amz-checksum-sha1", "SHA1", 20},
    [GW_SUM_SHA256] = {"x-amz-checksum-sha256", "SHA256", 32},
};

const char *gw_checksum_header(enum gw_checksum_algo a)
{
    return a >= 0 && a < GW_SUM_COUNT ? algos[a].header : "";
}

const char *gw_checksum_name(enum gw_checksum_algo a)
{
    return a >= 0 && a < GW_SUM_COUNT ? algos[a].name : "";
}

enum gw_checksum_algo gw_checksum_from_header(const char *name)
{
    for (int a = 0; name && a < GW_SUM_COUNT; a++)
        if (strcasecmp(name, algos[a].header) == 0)
            return (enum gw_checksum_algo)a;
    return GW_SUM_NONE;
}

enum gw_checksum_algo gw_checksum_from_name(const char *name)
{
    for (int a = 0; name && a < GW_SUM_COUNT; a++)
        if (strcasecmp(name, algos[a].name) == 0)
            return (enum gw_checksum_algo)a;
    return GW_SUM_NONE;
}

#ifndef INEC_HAVE_CRC64_ROCKSOFT
/*
 * CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5, init and xorout all
 * ones; ISA-L calls it Rocksoft). ISA-L has crc64_rocksoft_refl only since
 * 2.31 and Debian 12 ships 2.30, so this byte-table version stands in; meson
 * picks ISA-L's when the installed library has it.
 */
static uint64_t crc64_rocksoft_refl(uint64_t seed, const uint8_t *p, uint64_t len)
{
    static uint64_t table[256];
    static _Atomic int ready;
    if (!ready) { /* idempotent: racing threads write the same values */
        for (uint64_t i = 0; i < 256; i++) {
            uint64_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? c >> 1 ^ 0x9a6c9329ac4bc9b5ull : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint64_t crc = ~seed;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ crc >> 8;
    return ~crc;
}
#endif

int gw_checksum_init(struct gw_checksum *c, enum gw_checksum_algo a)
{
    memset(c, 0, sizeof(*c));
    c->algo = a;
    if (a < 0 || a >= GW_SUM_COUNT)
        return -EINVAL;
    if (a == GW_SUM_SHA1 || a == GW_SUM_SHA256) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        c->md = md;
        if (!md || EVP_DigestInit_ex(md, a == GW_SUM_SHA1 ? EVP_sha1() : EVP_sha256(), NULL) != 1)
            return -ENOMEM;
    }
    return 0;
}

void gw_checksum_update(struct gw_checksum *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        size_t part = len > (1u << 30) ? 1u << 30 : len; /* ISA-L's CRC32C takes an int */
        switch (c->algo) {
        case GW_SUM_CRC32:
            c->crc = crc32_gzip_refl((uint32_t)c->crc, p, part);
            break;
        case GW_SUM_CRC32C:
            /* ISA-L's iSCSI CRC neither inverts the seed nor the result */
            c->crc = ~crc32_iscsi((unsigned char *)p, (int)part, ~(uint32_t)c->crc) & 0xffffffffu;
            break;
        case GW_SUM_CRC64NVME:
            c->crc = crc64_rocksoft_refl(c->crc, p, part);
            break;
        case GW_SUM_SHA1:
        case GW_SUM_SHA256:
            EVP_DigestUpdate(c->md, p, part);
            break;
        default:
            return;
        }
        p += part;
        len -= part;
    }
}

size_t gw_checksum_final(struct gw_checksum *c, uint8_t out[GW_CHECKSUM_MAX])
{
    if (c->algo < 0 || c->algo >= GW_SUM_COUNT)
        return 0;
    size_t n = algos[c->algo].len;
    if (c->md) {
        unsigned int len = 0;
        EVP_DigestFinal_ex(c->md, out, &len);
        return len;
    }
    for (size_t i = 0; i < n; i++) /* big-endian, as the SDKs encode it */
        out[i] = (uint8_t)(c->crc >> (8 * (n - 1 - i)));
    return n;
}

void gw_checksum_free(struct gw_checksum *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

void gw_checksum_base64(const uint8_t *digest, size_t len, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, digest, (int)len);
}

size_t gw_checksum_decode(enum gw_checksum_algo a, const char *b64, uint8_t out[GW_CHECKSUM_MAX])
{
    if (a < 0 || a >= GW_SUM_COUNT || !b64)
        return 0;
    size_t want = algos[a].len, n = strlen(b64);
    if (n != 4 * ((want + 2) / 3))
        return 0;
    uint8_t buf[GW_CHECKSUM_B64_MAX];
    int got = EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)n);
    size_t pad = (n && b64[n - 1] == '=') + (n > 1 && b64[n - 2] == '=');
    if (got < 0 || (size_t)got - pad != want)
        return 0;
    /* canonical: re-encoding must give the same text */
    char again[GW_CHECKSUM_B64_MAX];
    gw_checksum_base64(buf, want, again);
    if (strcmp(again, b64) != 0)
        return 0;
    memcpy(out, buf, want);
    return want;
}

int gw_checksum_of(enum gw_checksum_algo a, const void *data, size_t len,
                   char out[GW_CHECKSUM_B64_MAX])
{
    struct gw_checksum c;
    int rc = gw_checksum_init(&c, a);
    if (rc == 0) {
        uint8_t d[GW_CHECKSUM_MAX];
        gw_checksum_update(&c, data, len);
        gw_checksum_base64(d, gw_checksum_final(&c, d), out);
    }
    gw_checksum_free(&c);
    return rc;
}
