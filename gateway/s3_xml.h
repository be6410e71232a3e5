/*
 * S3 XML: the response documents (ListAllMyBucketsResult, ListBucketResult
 * V1 and V2, DeleteResult, Error) and the one request document the gateway
 * reads, DeleteObjects' <Delete>.
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

#define GW_S3_KEY_MAX         1024 /* bytes of UTF-8, S3's limit */
#define GW_S3_DELETE_MAX_KEYS 1000
#define GW_S3_DELETE_MAX_BODY (2u << 20)

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

/* One page of ListObjects (version 1) or ListObjectsV2 (version 2). */
struct gw_list_page {
    int version;
    const char *bucket;
    const char *prefix, *delimiter; /* NULL when not given */
    int max_keys;
    bool url_encode; /* encoding-type=url */
    /* V1 */
    const char *marker, *next_marker; /* next_marker: only with a delimiter, when truncated */
    /* V2 */
    const char *start_after, *continuation_token, *next_continuation_token;
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

struct gw_delete_request {
    bool quiet;
    size_t n;
    struct gw_delete_key {
        char *key;        /* decoded, NUL-terminated (a key cannot hold NUL) */
        char *version_id; /* NULL when absent */
    } * keys;
};

/*
 * Parses a DeleteObjects body strictly:
 *   [<?xml ...?>] <Delete [xmlns=...]> (<Object><Key>k</Key>[<VersionId>v</VersionId>]
 *   </Object>)+ [<Quiet>true|false</Quiet>] </Delete>
 * ETag, LastModifiedTime and Size inside Object are accepted and ignored.
 * No DTDs, CDATA, comments or processing instructions besides the
 * declaration; the five predefined entities and numeric character references
 * are decoded. Errors: MalformedXML (with a message saying where),
 * KeyTooLongError, or InternalError when out of memory.
 */
enum gw_s3_err gw_xml_parse_delete(const char *xml, size_t len, struct gw_delete_request **out,
                                   char *msg, size_t msglen);
void gw_delete_request_free(struct gw_delete_request *r);

#endif
