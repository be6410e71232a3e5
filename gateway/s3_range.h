/*
 * HTTP Range for GET/HEAD Object, as S3 answers it:
 *   bytes=a-b   bytes a..min(b, size-1)
 *   bytes=a-    bytes a..size-1
 *   bytes=-n    the last min(n, size) bytes
 * A range starting at or past the end (or any range of an empty object, or
 * bytes=-0) is unsatisfiable: 416 InvalidRange, whose Content-Range is
 * "bytes", a star, "/" and the size. Syntactically invalid headers, a > b, other units, and
 * multiple ranges ("bytes=0-1,4-5", which S3 does not serve) are ignored
 * per RFC 9110: the whole object with 200.
 */
#ifndef INEC_GATEWAY_S3_RANGE_H
#define INEC_GATEWAY_S3_RANGE_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/s3_errors.h"

struct gw_range {
    bool partial; /* 206 with Content-Range, else 200 and the whole object */
    uint64_t first, length;
};

/* header may be NULL (no Range). Returns GW_S3_OK or GW_S3_INVALID_RANGE. */
enum gw_s3_err gw_range_parse(const char *header, uint64_t size, struct gw_range *out);

#endif
