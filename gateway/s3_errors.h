/*
 * The S3 error codes the gateway returns: each maps to the code string S3
 * clients switch on, its HTTP status, and S3's default message.
 */
#ifndef INEC_GATEWAY_S3_ERRORS_H
#define INEC_GATEWAY_S3_ERRORS_H

#include <stddef.h>

enum gw_s3_err {
    GW_S3_OK = 0,
    GW_S3_ACCESS_DENIED,
    GW_S3_REQUEST_EXPIRED, /* AccessDenied "Request has expired" (presigned URLs) */
    GW_S3_AUTH_HEADER_MALFORMED,
    GW_S3_AUTH_QUERY_ERROR, /* AuthorizationQueryParametersError */
    GW_S3_BAD_DIGEST,
    GW_S3_BUCKET_ALREADY_EXISTS,
    GW_S3_BUCKET_ALREADY_OWNED,
    GW_S3_BUCKET_NOT_EMPTY,
    GW_S3_CONDITIONAL_CONFLICT,    /* ConditionalRequestConflict */
    GW_S3_CONTENT_SHA256_MISMATCH, /* XAmzContentSHA256Mismatch */
    GW_S3_ENTITY_TOO_LARGE,
    GW_S3_ENTITY_TOO_SMALL,
    GW_S3_INCOMPLETE_BODY,
    GW_S3_INTERNAL_ERROR,
    GW_S3_INVALID_ACCESS_KEY_ID,
    GW_S3_INVALID_ARGUMENT,
    GW_S3_INVALID_BUCKET_NAME,
    GW_S3_INVALID_DIGEST,
    GW_S3_INVALID_PART,
    GW_S3_INVALID_PART_ORDER,
    GW_S3_INVALID_PART_NUMBER, /* a GET's partNumber beyond the object's parts */
    GW_S3_INVALID_RANGE,
    GW_S3_INVALID_REQUEST,
    GW_S3_KEY_TOO_LONG,
    GW_S3_MALFORMED_XML,
    GW_S3_METADATA_TOO_LARGE,
    GW_S3_METHOD_NOT_ALLOWED,
    GW_S3_MISSING_CONTENT_LENGTH,
    GW_S3_MISSING_SECURITY_HEADER,
    GW_S3_NO_SUCH_BUCKET,
    GW_S3_NO_SUCH_KEY,
    GW_S3_NO_SUCH_LIFECYCLE, /* NoSuchLifecycleConfiguration */
    GW_S3_NO_SUCH_UPLOAD,
    GW_S3_NOT_IMPLEMENTED,
    GW_S3_PRECONDITION_FAILED,
    GW_S3_REQUEST_TIME_TOO_SKEWED,
    GW_S3_REQUEST_TIMEOUT,
    GW_S3_SERVICE_UNAVAILABLE,
    GW_S3_SIGNATURE_DOES_NOT_MATCH,
    GW_S3_SLOW_DOWN,
    GW_S3_ERR_COUNT
};

struct gw_s3_error_info {
    const char *code;    /* "NoSuchKey" */
    int status;          /* 404 */
    const char *message; /* "The specified key does not exist." */
};

/* Never NULL: an out-of-range value reads as InternalError. */
const struct gw_s3_error_info *gw_s3_error(enum gw_s3_err e);

/* Formats the reason into msg (skipped when msg is NULL or msglen 0) and
 * returns e: `return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, len, "...", ...);` */
enum gw_s3_err gw_s3_errorf(enum gw_s3_err e, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
