/* The S3 error table: codes, statuses and messages as S3 documents them. */
#include "gateway/s3_errors.h"

#include <stdarg.h>
#include <stdio.h>

static const struct gw_s3_error_info table[GW_S3_ERR_COUNT] = {
    [GW_S3_OK] = {"OK", 200, "OK"},
    [GW_S3_ACCESS_DENIED] = {"AccessDenied", 403, "Access Denied"},
    [GW_S3_REQUEST_EXPIRED] = {"AccessDenied", 403, "Request has expired"},
    [GW_S3_AUTH_HEADER_MALFORMED] = {"AuthorizationHeaderMalformed", 400,
                                     "The authorization header is malformed."},
    [GW_S3_AUTH_QUERY_ERROR] = {"AuthorizationQueryParametersError", 400,
                                "Error parsing the X-Amz-Credential parameter."},
    [GW_S3_BAD_DIGEST] = {"BadDigest", 400,
                          "The Content-MD5 you specified did not match what we received."},
    [GW_S3_BUCKET_ALREADY_EXISTS] = {"BucketAlreadyExists", 409,
                                     "The requested bucket name is not available."},
    [GW_S3_BUCKET_ALREADY_OWNED] = {"BucketAlreadyOwnedByYou", 409,
                                    "Your previous request to create the named bucket "
                                    "succeeded and you already own it."},
    [GW_S3_BUCKET_NOT_EMPTY] = {"BucketNotEmpty", 409,
                                "The bucket you tried to delete is not empty."},
    [GW_S3_CONDITIONAL_CONFLICT] = {"ConditionalRequestConflict", 409,
                                    "A conflicting operation occurred. If using PutObject you "
                                    "can retry the request."},
    [GW_S3_CONTENT_SHA256_MISMATCH] = {"XAmzContentSHA256Mismatch", 400,
                                       "The provided 'x-amz-content-sha256' header does not "
                                       "match what was computed."},
    [GW_S3_ENTITY_TOO_LARGE] = {"EntityTooLarge", 400,
                                "Your proposed upload exceeds the maximum allowed object size."},
    [GW_S3_ENTITY_TOO_SMALL] = {"EntityTooSmall", 400,
                                "Your proposed upload is smaller than the minimum allowed "
                                "object size."},
    [GW_S3_INCOMPLETE_BODY] = {"IncompleteBody", 400,
                               "You did not provide the number of bytes specified by the "
                               "Content-Length HTTP header."},
    [GW_S3_INTERNAL_ERROR] = {"InternalError", 500,
                              "We encountered an internal error. Please try again."},
    [GW_S3_INVALID_ACCESS_KEY_ID] = {"InvalidAccessKeyId", 403,
                                     "The AWS access key Id you provided does not exist in "
                                     "our records."},
    [GW_S3_INVALID_ARGUMENT] = {"InvalidArgument", 400, "Invalid Argument"},
    [GW_S3_INVALID_BUCKET_NAME] = {"InvalidBucketName", 400, "The specified bucket is not valid."},
    [GW_S3_INVALID_DIGEST] = {"InvalidDigest", 400, "The Content-MD5 you specified is not valid."},
    [GW_S3_INVALID_PART] = {"InvalidPart", 400,
                            "One or more of the specified parts could not be found."},
    [GW_S3_INVALID_PART_NUMBER] = {"InvalidPartNumber", 416,
                                   "The requested partnumber is not satisfiable"},
    [GW_S3_INVALID_PART_ORDER] = {"InvalidPartOrder", 400,
                                  "The list of parts was not in ascending order."},
    [GW_S3_INVALID_RANGE] = {"InvalidRange", 416, "The requested range is not satisfiable"},
    [GW_S3_INVALID_REQUEST] = {"InvalidRequest", 400, "Invalid Request"},
    [GW_S3_KEY_TOO_LONG] = {"KeyTooLongError", 400, "Your key is too long"},
    [GW_S3_METADATA_TOO_LARGE] = {"MetadataTooLarge", 400,
                                  "Your metadata headers exceed the maximum allowed metadata "
                                  "size."},
    [GW_S3_MALFORMED_XML] = {"MalformedXML", 400,
                             "The XML you provided was not well-formed or did not validate "
                             "against our published schema."},
    [GW_S3_METHOD_NOT_ALLOWED] = {"MethodNotAllowed", 405,
                                  "The specified method is not allowed against this resource."},
    [GW_S3_MISSING_CONTENT_LENGTH] = {"MissingContentLength", 411,
                                      "You must provide the Content-Length HTTP header."},
    [GW_S3_MISSING_SECURITY_HEADER] = {"MissingSecurityHeader", 400,
                                       "Your request is missing a required header."},
    [GW_S3_NO_SUCH_BUCKET] = {"NoSuchBucket", 404, "The specified bucket does not exist"},
    [GW_S3_NO_SUCH_KEY] = {"NoSuchKey", 404, "The specified key does not exist."},
    [GW_S3_NO_SUCH_LIFECYCLE] = {"NoSuchLifecycleConfiguration", 404,
                                 "The lifecycle configuration does not exist."},
    [GW_S3_NO_SUCH_UPLOAD] = {"NoSuchUpload", 404, "The specified upload does not exist."},
    [GW_S3_NOT_IMPLEMENTED] = {"NotImplemented", 501,
                               "A header you provided implies functionality that is not "
                               "implemented."},
    [GW_S3_PRECONDITION_FAILED] = {"PreconditionFailed", 412,
                                   "At least one of the preconditions you specified did not "
                                   "hold."},
    [GW_S3_REQUEST_TIME_TOO_SKEWED] = {"RequestTimeTooSkewed", 403,
                                       "The difference between the request time and the "
                                       "server's time is too large."},
    [GW_S3_REQUEST_TIMEOUT] = {"RequestTimeout", 400,
                               "Your socket connection to the server was not read from or "
                               "written to within the timeout period."},
    [GW_S3_SERVICE_UNAVAILABLE] = {"ServiceUnavailable", 503, "Please reduce your request rate."},
    [GW_S3_SIGNATURE_DOES_NOT_MATCH] = {"SignatureDoesNotMatch", 403,
                                        "The request signature we calculated does not match "
                                        "the signature you provided. Check your key and "
                                        "signing method."},
    [GW_S3_SLOW_DOWN] = {"SlowDown", 503, "Please reduce your request rate."},
};

const struct gw_s3_error_info *gw_s3_error(enum gw_s3_err e)
{
    if ((unsigned)e >= GW_S3_ERR_COUNT)
        return &table[GW_S3_INTERNAL_ERROR];
    return &table[e];
}

enum gw_s3_err gw_s3_errorf(enum gw_s3_err e, char *msg, size_t msglen, const char *fmt, ...)
{
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return e;
}
