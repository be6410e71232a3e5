/*
 * S3 XML: the response documents (ListAllMyBucketsResult, ListBucketResult
 * V1 and V2, DeleteResult, Error, the multipart and copy results, ACLs). The
 * request documents the gateway reads are parsed in s3_xml_parse.h.
 *
 * Writers append to a gw_buf and return 0 or -ENOMEM. Text is escaped for
 * XML (& < > " ' and control characters as character references); listings
 * with encoding-type=url percent-encode keys and prefixes instead, as S3 does.
 */
#ifndef INEC_GATEWAY_S3_XML_H
#define INEC_GATEWAY_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/s3_errors.h"

#define GW_S3_KEY_MAX 1024 /* bytes of UTF-8, S3's limit */

struct gw_buf {
    char *data; /* NUL-terminated */
    size_t len, cap;
};

void gw_buf_free(struct gw_buf *b);

struct gw_xml_bucket {
    const char *name;
    int64_t created_ms; /* unix milliseconds */
};

int gw_xml_list_buckets(struct gw_buf *out, const char *owner_id, const char *owner_name,
                        const struct gw_xml_bucket *buckets, size_t n);

struct gw_xml_object {
    const char *key;
    int64_t modified_ms; /* unix milliseconds */
    const char *etag;    /* without quotes */
    uint64_t size;
    const char *storage_class; /* NULL: STANDARD */
};

/* One page of ListObjects (version 1), ListObjectsV2 (version 2) or
 * ListObjectVersions (version 3: ListVersionsResult, each object as its one
 * "null" version, the latest). */
struct gw_list_page {
    int version;
    const char *bucket;
    const char *prefix, *delimiter; /* NULL when not given (an empty delimiter is none) */
    int max_keys;
    bool url_encode; /* encoding-type=url (V1 still returns the top-level Prefix as sent) */
    const char *owner_id, *owner_name; /* each entry's Owner; NULL: none */
    /* V1 */
    const char *marker, *next_marker; /* next_marker: only with a delimiter, when truncated */
    /* V2 */
    const char *start_after, *continuation_token, *next_continuation_token;
    /* versions */
    const char *key_marker, *version_id_marker, *next_key_marker;
    bool truncated;
    const struct gw_xml_object *objects;
    size_t nobjects;
    const char *const *prefixes; /* CommonPrefixes */
    size_t nprefixes;
};

int gw_xml_list_objects(struct gw_buf *out, const struct gw_list_page *page);

struct gw_delete_outcome {
    const char *key;
    enum gw_s3_err err;  /* GW_S3_OK: <Deleted>, else <Error> */
    const char *message; /* NULL: the table's message */
};

/* Quiet mode lists only the failures. */
int gw_xml_delete_result(struct gw_buf *out, const struct gw_delete_outcome *r, size_t n,
                         bool quiet);

/* <Error><Code/><Message/><Resource/><RequestId/></Error>; message NULL: the
 * table's message. */
int gw_xml_error(struct gw_buf *out, enum gw_s3_err err, const char *message, const char *resource,
                 const char *request_id);

/* ---- multipart and copy ---- */

int gw_xml_initiate_multipart(struct gw_buf *out, const char *bucket, const char *key,
                              const char *upload_id);
/* etag without quotes (they are added, as everywhere S3 writes an ETag). */
int gw_xml_complete_multipart(struct gw_buf *out, const char *location, const char *bucket,
                              const char *key, const char *etag);

struct gw_parts_page {
    const char *bucket, *key, *upload_id;
    int marker, next_marker, max_parts;
    bool truncated;
    const struct gw_xml_part {
        int number;
        int64_t modified_ms;
        const char *etag;
        uint64_t size;
    } * parts;
    size_t n;
};
int gw_xml_list_parts(struct gw_buf *out, const struct gw_parts_page *page);

struct gw_uploads_page {
    const char *bucket, *prefix, *key_marker, *upload_id_marker; /* NULL: not given */
    const char *next_key_marker, *next_upload_id_marker;         /* when truncated */
    int max_uploads;
    bool truncated;
    const struct gw_xml_upload {
        const char *key, *upload_id;
        int64_t initiated_ms;
    } * uploads;
    size_t n;
};
int gw_xml_list_uploads(struct gw_buf *out, const struct gw_uploads_page *page);

/* AccessControlPolicy: the owner, then each grant (group_uri NULL: to the owner). */
struct gw_xml_grant {
    const char *group_uri, *permission;
};
int gw_xml_access_policy(struct gw_buf *out, const char *owner_id, const char *owner_name,
                         const struct gw_xml_grant *grants, size_t n);

/* <VersioningConfiguration/>: versioning was never enabled (GetBucketVersioning). */
int gw_xml_versioning_off(struct gw_buf *out);

/* A bucket lifecycle rule of the kinds the gateway honours (the parser,
 * s3_xml_parse.h, refuses the others). */
struct gw_lifecycle_rule {
    char *id;     /* "" when none was given */
    char *prefix; /* of the keys it applies to ("" = every key) */
    bool enabled;
    int abort_days; /* AbortIncompleteMultipartUpload DaysAfterInitiation (>= 1) */
};
/* LifecycleConfiguration with each rule's ID, Filter/Prefix, Status and
 * AbortIncompleteMultipartUpload. */
int gw_xml_lifecycle(struct gw_buf *out, const struct gw_lifecycle_rule *rules, size_t n);

/* <Tagging><TagSet/></Tagging>: what GetObjectTagging answers (the AWS CLI
 * asks before a multipart copy). */
int gw_xml_empty_tagging(struct gw_buf *out);

/* CopyObjectResult, or CopyPartResult when part. */
int gw_xml_copy_result(struct gw_buf *out, bool part, const char *etag, int64_t modified_ms);

#endif
