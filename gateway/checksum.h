/*
 * The additional checksums of S3 (x-amz-checksum-*): CRC32, CRC32C,
 * CRC64NVME, SHA1 and SHA256 of an object's bytes, as SDKs send them in a
 * header or an aws-chunked trailer (base64 of the big-endian digest), and as
 * S3 stores and returns them. CRCs come from ISA-L, digests from libcrypto.
 *
 * A multipart object's checksum is composite: the checksum of the parts'
 * raw digests concatenated, then "-N" (gw_checksum_composite).
 */
#ifndef INEC_GATEWAY_CHECKSUM_H
#define INEC_GATEWAY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

enum gw_checksum_algo {
    GW_SUM_NONE = -1,
    GW_SUM_CRC32,
    GW_SUM_CRC32C,
    GW_SUM_CRC64NVME,
    GW_SUM_SHA1,
    GW_SUM_SHA256,
    GW_SUM_COUNT
};

#define GW_CHECKSUM_MAX     32 /* bytes of the longest digest (SHA256) */
#define GW_CHECKSUM_B64_MAX 64 /* base64 of it, "-NNNNN" and the NUL */

/* "x-amz-checksum-crc32" ... (lower case), "CRC32" ... (the API's name). */
const char *gw_checksum_header(enum gw_checksum_algo a);
const char *gw_checksum_name(enum gw_checksum_algo a);
/* The algorithm of a header name (any case), or GW_SUM_NONE. */
enum gw_checksum_algo gw_checksum_from_header(const char *name);
/* The algorithm of an API name ("crc32", "SHA256"... any case), or GW_SUM_NONE. */
enum gw_checksum_algo gw_checksum_from_name(const char *name);

struct gw_checksum {
    enum gw_checksum_algo algo;
    uint64_t crc;
    void *md; /* EVP_MD_CTX of the SHA digests */
};

/* 0 or -ENOMEM/-EINVAL; gw_checksum_free even after a failure. */
int gw_checksum_init(struct gw_checksum *c, enum gw_checksum_algo a);
void gw_checksum_update(struct gw_checksum *c, const void *data, size_t len);
/* The raw digest (returns its length); the state is consumed. */
size_t gw_checksum_final(struct gw_checksum *c, uint8_t out[GW_CHECKSUM_MAX]);
void gw_checksum_free(struct gw_checksum *c);

/* base64 of a raw digest into out[GW_CHECKSUM_B64_MAX]. */
void gw_checksum_base64(const uint8_t *digest, size_t len, char *out);
/* The raw digest of a base64 value of algorithm a; its length, or 0 when the
 * value is not the base64 of exactly that many bytes. */
size_t gw_checksum_decode(enum gw_checksum_algo a, const char *b64, uint8_t out[GW_CHECKSUM_MAX]);
/* One call: the base64 checksum of a buffer; 0 or -ENOMEM. */
int gw_checksum_of(enum gw_checksum_algo a, const void *data, size_t len,
                   char out[GW_CHECKSUM_B64_MAX]);

#endif
