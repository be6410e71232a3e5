/*
 * A request body's checks: the SigV4 payload hash or the aws-chunked
 * decoder (with its chunk signatures or trailer), Content-MD5,
 * x-amz-checksum-*, the declared length and the object size limit. Every
 * check has passed before anything is committed (gw_s3_body_end). A PUT or
 * part hands its payload hash and Content-MD5 to the put, which hashes the
 * body anyway (gw_s3_put_begin) and checks them before its commit.
 */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets up the payload checks that every request with a body needs. */
enum gw_s3_err gw_s3_body_begin(struct gw_s3_req *r)
{
    const char *md5 = gw_s3_header(r, "Content-MD5");
    if (md5) {
        if (gw_s3_content_md5(md5, r->md5_expect) != 0) {
            snprintf(r->msg, sizeof(r->msg), "Content-MD5 is not the base64 of 16 bytes");
            return GW_S3_INVALID_DIGEST;
        }
        if (!(r->md5 = EVP_MD_CTX_new()) || EVP_DigestInit_ex(r->md5, EVP_md5(), NULL) != 1)
            return GW_S3_INTERNAL_ERROR;
    }
    enum gw_s3_err e =
        gw_s3_checksum_begin(&r->sum, gw_s3_header_each, r, &r->auth, r->msg, sizeof(r->msg));
    if (e)
        return e;
    r->expect_len = -1;
    const char *cl = gw_s3_header(r, "Content-Length");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!*cl || *end || (errno && errno != ERANGE) || *cl == '-')
            return GW_S3_INVALID_ARGUMENT;
        /* beyond what an int64 holds is beyond every limit, never "unknown" */
        if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
            return gw_s3_errorf(GW_S3_ENTITY_TOO_LARGE, r->msg, sizeof(r->msg),
                                "Content-Length %.30s is too large", cl);
        r->expect_len = (int64_t)v;
    }
    if (r->auth.payload == GW_PAYLOAD_STREAMING ||
        r->auth.payload == GW_PAYLOAD_STREAMING_UNSIGNED) {
        if (gw_chunked_create(&r->auth, &r->chunked) != 0)
            return GW_S3_INTERNAL_ERROR;
        r->expect_len = r->auth.decoded_length;
    } else if (gw_payload_create(&r->auth, &r->payload) != 0) {
        return GW_S3_INTERNAL_ERROR;
    }
    return GW_S3_OK;
}

/* Decodes one piece of the body in place of the caller's pointer and length. */
enum gw_s3_err gw_s3_body_feed(struct gw_s3_req *r, const char **data, size_t *len)
{
    r->bytes_in += *len;
    if (r->chunked) {
        if (r->scratch_cap < *len) {
            free(r->scratch);
            if (!(r->scratch = malloc(*len)))
                return GW_S3_INTERNAL_ERROR;
            r->scratch_cap = *len;
        }
        memcpy(r->scratch, *data, *len);
        size_t out;
        enum gw_s3_err e =
            gw_chunked_feed(r->chunked, r->scratch, *len, &out, r->msg, sizeof(r->msg));
        if (e)
            return e;
        *data = (const char *)r->scratch;
        *len = out;
    } else if (r->payload) { /* NULL: handed to the put (gw_s3_put_begin) */
        gw_payload_update(r->payload, *data, *len);
    }
    if (r->md5)
        EVP_DigestUpdate(r->md5, *data, *len);
    gw_s3_checksum_update(&r->sum, *data, *len);
    r->decoded += *len;
    if (r->decoded > GW_S3_MAX_OBJECT_SIZE) /* whatever the headers said */
        return gw_s3_errorf(GW_S3_ENTITY_TOO_LARGE, r->msg, sizeof(r->msg),
                            "the body is larger than %llu bytes", GW_S3_MAX_OBJECT_SIZE);
    if (r->expect_len >= 0 && r->decoded > (uint64_t)r->expect_len) {
        snprintf(r->msg, sizeof(r->msg), "the body is longer than its declared length");
        return GW_S3_INVALID_REQUEST;
    }
    return GW_S3_OK;
}

/* Every check of a finished body: nothing is committed before this says OK. */
enum gw_s3_err gw_s3_body_end(struct gw_s3_req *r)
{
    if (r->chunked) {
        if (!gw_chunked_done(r->chunked)) {
            snprintf(r->msg, sizeof(r->msg), "the aws-chunked body ended before its final chunk");
            return GW_S3_INCOMPLETE_BODY;
        }
    } else if (r->payload) {
        enum gw_s3_err e = gw_payload_final(r->payload);
        if (e)
            return e;
    }
    if (r->expect_len >= 0 && r->decoded != (uint64_t)r->expect_len)
        return GW_S3_INCOMPLETE_BODY;
    if (r->md5) {
        uint8_t got[EVP_MAX_MD_SIZE];
        unsigned n = 0;
        if (EVP_DigestFinal_ex(r->md5, got, &n) != 1 || n != 16 ||
            memcmp(got, r->md5_expect, 16) != 0)
            return GW_S3_BAD_DIGEST;
    }
    return gw_s3_checksum_end(&r->sum, r->chunked ? gw_chunked_trailer(r->chunked) : NULL,
                              &r->sum_value, r->msg, sizeof(r->msg));
}
