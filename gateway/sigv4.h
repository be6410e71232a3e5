/*
 * AWS Signature Version 4 verification for S3 requests, independent of any
 * HTTP library: the caller hands over the method, the raw path and query as
 * they came off the wire, and a header lookup.
 *
 * Three forms are accepted:
 *   - header auth: Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 *     Signature=..., with x-amz-content-sha256 naming the payload: a hex SHA-256
 *     (checked with gw_payload_*), UNSIGNED-PAYLOAD, or
 *     STREAMING-AWS4-HMAC-SHA256-PAYLOAD (an aws-chunked body with chunk signatures,
 *     gw_chunked_*), STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER (the same ending
 *     in a checksum trailer and its x-amz-trailer-signature), or STREAMING-UNSIGNED-PAYLOAD-TRAILER
 * (aws-chunked without signatures, ending in a checksum trailer named by x-amz-trailer, which
 *     gw_chunked_* verifies: what SDKs send over TLS);
 *   - presigned URLs: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
 *     X-Amz-SignedHeaders, X-Amz-Signature in the query; the payload is unsigned.
 *
 * The canonical request follows AWS's rules for S3: each path segment is
 * percent-decoded once and re-encoded (so a path is never double-encoded),
 * query parameters are decoded, re-encoded and sorted, header values are
 * trimmed with inner runs of spaces folded to one.
 *
 * Every verdict is an S3 error code (s3_errors.h) plus a message that says
 * what was wrong, for the Error response and the log.
 */
#ifndef INEC_GATEWAY_SIGV4_H
#define INEC_GATEWAY_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/s3_errors.h"

#define GW_SIGV4_MAX_SKEW       900    /* seconds a request's date may be off the clock */
#define GW_SIGV4_MAX_EXPIRES    604800 /* 7 days, the presigned URL limit */
#define GW_SIGV4_ACCESS_KEY_MAX 128
#define GW_SIGV4_SECRET_MAX     128

/* Value of a request header, matched case-insensitively, or NULL. With
 * repeated headers, the caller returns them joined by "," (as HTTP allows). */
typedef const char *(*gw_header_fn)(void *arg, const char *name);
/* Calls cb once per request header (name as sent, value). */
typedef void (*gw_header_each_fn)(void *arg, void (*cb)(void *, const char *, const char *),
                                  void *cbarg);

/* Copies the secret key of `access_key` into secret (NUL-terminated);
 * returns 0, or -ENOENT for an unknown key. */
typedef int (*gw_secret_fn)(void *arg, const char *access_key, char *secret, size_t len);

struct gw_sigv4_request {
    const char *method;
    const char *path;  /* raw, still percent-encoded, without the query */
    const char *query; /* raw, without '?'; NULL or "" when absent */
    gw_header_fn header;
    void *header_arg;
    /* Every header, to refuse those the signature does not cover: each
     * x-amz-*, Content-MD5 and Content-Type that is present must be signed
     * (AccessDenied otherwise, as S3 answers), or an added header could change
     * what a presigned URL does. One exception: the Content-Type HTTP
     * libraries add to a presigned PUT is let through, flagged
     * (unsigned_content_type) for the caller to ignore. NULL only for callers
     * that check signatures of requests they built themselves (tests, fuzzers). */
    gw_header_each_fn each;
};

struct gw_sigv4_config {
    const char *region; /* the gateway's region; requests scoped to another fail */
    gw_secret_fn secret;
    void *secret_arg;
    int64_t now; /* the clock, unix seconds */
};

enum gw_payload {
    GW_PAYLOAD_UNSIGNED,           /* UNSIGNED-PAYLOAD (and every presigned URL) */
    GW_PAYLOAD_SHA256,             /* body must hash to payload_sha256 */
    GW_PAYLOAD_STREAMING,          /* aws-chunked body with chained chunk signatures
                                      (and a signed trailer when trailer[0]) */
    GW_PAYLOAD_STREAMING_UNSIGNED, /* aws-chunked body with a checksum trailer */
};

/* What a verified request proved, and what its body must still prove. */
struct gw_sigv4_auth {
    bool anonymous; /* no signature at all (the verdict is then AccessDenied) */
    bool presigned;
    bool unsigned_content_type; /* presigned: a Content-Type the URL did not sign (ignore it) */
    char access_key[GW_SIGV4_ACCESS_KEY_MAX];
    enum gw_payload payload;
    uint8_t payload_sha256[32];
    int64_t decoded_length; /* streaming: x-amz-decoded-content-length, else -1 */
    char trailer[32];       /* streaming: the x-amz-checksum-* trailer, or "" */
    /* the chunk signature chain starts from these */
    uint8_t signing_key[32];
    char seed_signature[65];
    char amz_date[17];
    char scope[128];
};

enum gw_s3_err gw_sigv4_verify(const struct gw_sigv4_request *req,
                               const struct gw_sigv4_config *cfg, struct gw_sigv4_auth *auth,
                               char *msg, size_t msglen);

/*
 * The client side, for tools that speak S3 to a gateway (bench/s3_bench.c):
 * header auth over the same canonical request the verifier builds. The
 * headers named in signed_headers (";"-list, lowercase, sorted, including
 * host and x-amz-date, whose value must be amz_date) are read through
 * req->header, and so is x-amz-content-sha256 (absent: UNSIGNED-PAYLOAD,
 * which the caller must then also send). Writes the Authorization header's
 * value; returns 0, -EINVAL or -ENOSPC.
 */
struct gw_sigv4_signer {
    const char *access_key, *secret_key;
    const char *region; /* NULL: "us-east-1" */
    const char *signed_headers;
    const char *amz_date; /* "YYYYMMDDTHHMMSSZ", gw_sigv4_amz_date */
};
int gw_sigv4_sign(const struct gw_sigv4_request *req, const struct gw_sigv4_signer *s, char *authz,
                  size_t len);
/* Unix seconds as x-amz-date wants them. */
void gw_sigv4_amz_date(int64_t t, char out[17]);

/*
 * Body check for GW_PAYLOAD_SHA256 (a no-op for UNSIGNED): feed the body,
 * then gw_payload_final says GW_S3_OK or XAmzContentSHA256Mismatch.
 */
struct gw_payload_check;
int gw_payload_create(const struct gw_sigv4_auth *auth, struct gw_payload_check **out);
void gw_payload_update(struct gw_payload_check *p, const void *data, size_t len);
enum gw_s3_err gw_payload_final(struct gw_payload_check *p);
void gw_payload_destroy(struct gw_payload_check *p);

/*
 * Decoder of an aws-chunked body, GW_PAYLOAD_STREAMING:
 *   <hex size>;chunk-signature=<64 hex>\r\n<data>\r\n ... 0;chunk-signature=<sig>\r\n\r\n
 * or GW_PAYLOAD_STREAMING_UNSIGNED:
 *   <hex size>\r\n<data>\r\n ... 0\r\nx-amz-checksum-crc32:<base64>\r\n\r\n
 * or signed with a trailer: ... 0;chunk-signature=<sig>\r\nx-amz-checksum-crc32:<base64>\r\n
 *   x-amz-trailer-signature:<sig>\r\n\r\n
 * (every checksum.h algorithm: BadDigest on a mismatch).
 * gw_chunked_feed decodes in place: it consumes all `len` bytes of buf and
 * moves the payload bytes among them to buf[0, *out_len). A chunk's bytes are
 * released as they arrive, before its signature (which follows the data) can
 * be checked: the caller must not commit anything until the body ends with
 * gw_chunked_done() true. Any error is final.
 */
struct gw_chunked;
int gw_chunked_create(const struct gw_sigv4_auth *auth, struct gw_chunked **out);
enum gw_s3_err gw_chunked_feed(struct gw_chunked *c, uint8_t *buf, size_t len, size_t *out_len,
                               char *msg, size_t msglen);
/* True once the final chunk was verified and the decoded length matched. */
bool gw_chunked_done(const struct gw_chunked *c);
/* The verified value of the checksum trailer once done, else NULL. */
const char *gw_chunked_trailer(const struct gw_chunked *c);
void gw_chunked_destroy(struct gw_chunked *c);

#endif
