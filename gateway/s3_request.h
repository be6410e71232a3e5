/*
 * What an S3 request addresses and asks for, decided from its method, Host,
 * raw path and raw query alone (no storage, no HTTP library), so that the
 * routing rules are testable on their own:
 *
 *   - the target: bucket and key, path-style (/bucket/key) or virtual-host
 *     style (Host: bucket.<base domain>[:port], path = /key);
 *   - the query, percent-decoded;
 *   - the operation, from a table of (method, level, sub-resource, header)
 *     rows: adding multipart or CopyObject later is adding rows.
 *
 * Anything S3 defines that the gateway does not serve (tagging writes,
 * versioning, ...) routes to GW_OP_NOT_IMPLEMENTED. versionId=null names the
 * one version an unversioned object has, so it is no sub-resource.
 */
#ifndef INEC_GATEWAY_S3_REQUEST_H
#define INEC_GATEWAY_S3_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "object/objects.h"
#include "gateway/s3_errors.h"
#include "gateway/sigv4.h"

#define GW_S3_QUERY_MAX_PARAMS 64
#define GW_S3_META_MAX         2048 /* bytes of x-amz-meta-* names and values, S3's limit */

struct gw_s3_target {
    char bucket[GW_BUCKET_MAX + 1]; /* "" for the service (ListBuckets) */
    char key[GW_KEY_MAX + 1];       /* decoded; "" when the request names no object */
    bool virtual_host;
};

/*
 * host: the Host header (may be NULL); base_domain: the configured domain
 * for virtual-host style (NULL or "": path-style only); raw_path: as sent,
 * percent-encoded, without the query. Errors: InvalidBucketName,
 * KeyTooLongError, InvalidURI-like InvalidArgument (bad escapes, NUL).
 */
enum gw_s3_err gw_s3_parse_target(const char *host, const char *base_domain, const char *raw_path,
                                  struct gw_s3_target *t, char *msg, size_t msglen);

/* S3's bucket naming rules: 3..63 of [a-z0-9.-], letter or digit at both
 * ends, no "..", not an IPv4 address, no xn-- prefix or -s3alias suffix. */
bool gw_s3_bucket_name_valid(const char *name);

struct gw_s3_query {
    size_t n;
    struct gw_s3_param {
        char *name, *value; /* decoded; value "" for a bare ?name */
    } p[GW_S3_QUERY_MAX_PARAMS];
};

/* Parses a raw query (may be NULL or ""); '+' reads as a space. Returns 0,
 * -EINVAL for a bad escape, a name or value that is not UTF-8 or more than
 * GW_S3_QUERY_MAX_PARAMS parameters, -ENOMEM. Free with gw_s3_query_free
 * even after an error. */
int gw_s3_query_parse(const char *raw, struct gw_s3_query *q);
void gw_s3_query_free(struct gw_s3_query *q);
/* The decoded value of the first `name`, or NULL when absent. */
const char *gw_s3_query_get(const struct gw_s3_query *q, const char *name);

enum gw_s3_op {
    GW_OP_LIST_BUCKETS,
    GW_OP_CREATE_BUCKET,
    GW_OP_HEAD_BUCKET,
    GW_OP_DELETE_BUCKET,
    GW_OP_GET_BUCKET_LOCATION,
    GW_OP_LIST_OBJECTS,
    GW_OP_LIST_OBJECTS_V2,
    GW_OP_DELETE_OBJECTS,
    GW_OP_PUT_OBJECT,
    GW_OP_GET_OBJECT,
    GW_OP_HEAD_OBJECT,
    GW_OP_DELETE_OBJECT,
    GW_OP_COPY_OBJECT,
    GW_OP_CREATE_MULTIPART_UPLOAD,
    GW_OP_UPLOAD_PART,
    GW_OP_UPLOAD_PART_COPY,
    GW_OP_COMPLETE_MULTIPART_UPLOAD,
    GW_OP_ABORT_MULTIPART_UPLOAD,
    GW_OP_LIST_PARTS,
    GW_OP_LIST_MULTIPART_UPLOADS,
    GW_OP_GET_OBJECT_TAGGING, /* always an empty tag set: the gateway keeps no tags */
    GW_OP_GET_BUCKET_ACL,
    GW_OP_PUT_BUCKET_ACL,
    GW_OP_GET_OBJECT_ACL,
    GW_OP_PUT_OBJECT_ACL,
    GW_OP_LIST_OBJECT_VERSIONS,  /* unversioned: every object as its null version */
    GW_OP_GET_BUCKET_VERSIONING, /* never enabled: an empty VersioningConfiguration */
    GW_OP_GET_BUCKET_LIFECYCLE,  /* AbortIncompleteMultipartUpload rules only */
    GW_OP_PUT_BUCKET_LIFECYCLE,
    GW_OP_DELETE_BUCKET_LIFECYCLE,
    GW_OP_NOT_IMPLEMENTED,    /* S3 has it, the gateway does not (501) */
    GW_OP_METHOD_NOT_ALLOWED, /* a known method on the wrong resource (405) */
    GW_OP_COUNT
};

/* "PutObject", ...: the names S3's documentation uses (and the metrics' op label). */
extern const char *const gw_s3_op_names[GW_OP_COUNT];
const char *gw_s3_op_name(enum gw_s3_op op);

enum gw_s3_op gw_s3_route(const char *method, const struct gw_s3_target *t,
                          const struct gw_s3_query *q, gw_header_fn header, void *header_arg);

/* RFC 1123 date of a CLOCK_REALTIME time in ns, as Last-Modified wants it:
 * "Sun, 06 Nov 1994 08:49:37 GMT" (independent of the locale). */
void gw_http_date(int64_t unix_ns, char out[30]);

/*
 * x-amz-meta-* headers into {"name": "value"} (names lower-cased, without
 * the prefix). Returns GW_S3_OK, or MetadataTooLarge when names and values
 * exceed GW_S3_META_MAX bytes (InvalidArgument for values not UTF-8).
 * `each` is the header iterator: it calls cb for every header.
 */
typedef void (*gw_header_each_fn)(void *arg,
                                  void (*cb)(void *cbarg, const char *name, const char *value),
                                  void *cbarg);
enum gw_s3_err gw_s3_user_meta(gw_header_each_fn each, void *arg, json_t **out, char *msg,
                               size_t msglen);

/* Content-MD5 (base64 of 16 bytes) into raw bytes; -EINVAL when malformed. */
int gw_s3_content_md5(const char *header, uint8_t md5[16]);

/* "host:port", "[v6]:port" or "localhost:port" into a socket address;
 * -EINVAL when malformed. */
int gw_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len);

#endif
