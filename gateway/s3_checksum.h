/*
 * The checksum an S3 request sends for its body: one x-amz-checksum-*
 * header, or an aws-chunked trailer announced by x-amz-trailer (which the
 * chunked decoder of sigv4.h verifies). The body is checked as it streams;
 * at its end a mismatch is BadDigest and nothing may be committed, a match
 * gives the value to store with the object and return on GET/HEAD with
 * x-amz-checksum-mode: ENABLED.
 */
#ifndef INEC_GATEWAY_S3_CHECKSUM_H
#define INEC_GATEWAY_S3_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/checksum.h"
#include "gateway/s3_errors.h"
#include "gateway/sigv4.h"

struct gw_s3_checksum {
    enum gw_checksum_algo algo; /* GW_SUM_NONE: the request sent none */
    bool trailer;               /* the value comes in the trailer, verified by the decoder */
    char want[GW_CHECKSUM_B64_MAX];
    struct gw_checksum sum;
    int headers; /* x-amz-checksum-<algorithm> headers seen */
};

/* Reads the request's checksum headers (each) and the announced trailer
 * (auth->trailer). InvalidRequest for two checksums, an unknown algorithm
 * or a value that is not the base64 of a digest of that algorithm. */
enum gw_s3_err gw_s3_checksum_begin(struct gw_s3_checksum *c, gw_header_each_fn each, void *arg,
                                    const struct gw_sigv4_auth *auth, char *msg, size_t msglen);
void gw_s3_checksum_update(struct gw_s3_checksum *c, const void *data, size_t len);
/* After the whole body: BadDigest on a mismatch; else *value is the verified
 * checksum (trailer_value for a trailer) or NULL when none was sent. */
enum gw_s3_err gw_s3_checksum_end(struct gw_s3_checksum *c, const char *trailer_value,
                                  const char **value, char *msg, size_t msglen);
void gw_s3_checksum_free(struct gw_s3_checksum *c);

#endif
