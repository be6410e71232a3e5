/*
 * The object layer's errno (objects.h) as S3 answers it, so clients can tell
 * what to retry: a node's failure is the cluster's transient state, a 503
 * ServiceUnavailable (with Retry-After), never a 500 InternalError, which
 * says the gateway itself is broken.
 */
#ifndef INEC_GATEWAY_S3_ERRNO_H
#define INEC_GATEWAY_S3_ERRNO_H

#include <stdbool.h>

#include "gateway/s3_errors.h"
#include "gateway/s3_request.h"

/* A node failed (down, refused, reset, timed out, unreachable) or answered
 * what no healthy node sends (a malformed message, a corrupt record, a
 * request it does not know). */
bool gw_s3_peer_failure(int rc);

/* rc (< 0) of operation op; has_key: the request names a key (an -EINVAL is
 * then about an argument, not the bucket's name). -ENOENT is the caller's
 * (NoSuchKey or NoSuchBucket needs a look at the bucket): NoSuchBucket here. */
enum gw_s3_err gw_s3_errno(int rc, enum gw_s3_op op, bool has_key);

#endif
