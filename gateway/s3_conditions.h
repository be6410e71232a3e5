/*
 * Preconditions on the version a request reads, as S3 evaluates them: on
 * GET/HEAD Object If-Match, If-None-Match, If-Modified-Since and
 * If-Unmodified-Since; on a copy's source the same four as
 * x-amz-copy-source-if-*. In this order:
 *   If-Match present: the ETag must be one listed ("*": any), else failed;
 *   otherwise If-Unmodified-Since: not modified after it, else failed;
 *   If-None-Match present: no ETag listed may match, else not modified;
 *   otherwise If-Modified-Since: modified after it, else not modified.
 * So If-Match that holds wins over If-Unmodified-Since, and a matching
 * If-None-Match gives "not modified" whatever If-Modified-Since says (S3's
 * documented pairs). GET/HEAD answer "failed" 412 PreconditionFailed and
 * "not modified" 304; a copy answers 412 to both. ETags compare without
 * quotes and a weak prefix (W/); a date that does not parse as an HTTP date
 * is ignored (RFC 9110), as is a header that is absent (NULL).
 */
#ifndef INEC_GATEWAY_S3_CONDITIONS_H
#define INEC_GATEWAY_S3_CONDITIONS_H

#include <stdint.h>

struct gw_conditions {
    const char *if_match, *if_none_match, *if_modified_since, *if_unmodified_since;
};

enum gw_condition { GW_COND_OK, GW_COND_NOT_MODIFIED, GW_COND_FAILED };

/* etag: hex, without quotes; mtime_s: the version's Last-Modified, seconds
 * since the epoch (HTTP dates have no finer unit). */
enum gw_condition gw_conditions_eval(const struct gw_conditions *c, const char *etag,
                                     int64_t mtime_s);

#endif
