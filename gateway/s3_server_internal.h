/*
 * Shared between the files of the S3 front end (gateway/s3_server.c and the
 * handlers, one file per resource: docs/DESIGN.md lists them); nothing else
 * includes it. A request lives in one struct gw_s3_req from the first byte
 * of its URI to its completion (s3_server.c, which routes it); the handlers
 * answer it through s3_answer.c and read its headers through s3_headers.c.
 * Prototypes are grouped by the file that defines them.
 */
#ifndef INEC_GATEWAY_S3_SERVER_INTERNAL_H
#define INEC_GATEWAY_S3_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>
#include <openssl/evp.h>

#include "gateway/s3_acl.h"
#include "gateway/s3_checksum.h"
#include "gateway/s3_conditions.h"
#include "gateway/s3_errors.h"
#include "gateway/s3_request.h"
#include "gateway/s3_server.h"
#include "gateway/s3_xml.h"
#include "gateway/sigv4.h"
#include "object/objects.h"

#define GW_S3_MAX_OBJECT_SIZE (5ull << 30) /* S3's single-PUT limit */
#define GW_S3_READ_BLOCK      (256u << 10)

/* The buffer libmicrohttpd allocates, and zeroes, with each response whose
 * body a callback reads: no larger than the body (at GW_S3_READ_BLOCK, a
 * 4 KiB GET paid a 256 KiB memset, 5% of the gateway's CPU at 16 clients). */
static inline size_t gw_s3_read_block(uint64_t len)
{
    return len == 0 ? 1 : len < GW_S3_READ_BLOCK ? (size_t)len : GW_S3_READ_BLOCK;
}

struct gw_s3_server {
    struct MHD_Daemon *daemon;
    struct gw_objects *objects;
    struct gw_metrics *metrics;
    char *base_domain, *region, *access_key, *secret_key;
    struct gw_keys *keys; /* NULL: access_key/secret_key only */
    struct gw_conn_guard *guard;
    char owner_id[65]; /* the canonical user id listings and ACLs name: hex SHA-256 of the key */
    uint16_t port;
    atomic_uint inflight;
    atomic_uint_fast64_t next_id;
    bool floor; /* gw_s3_config.floor: benchmarks only */
    pthread_mutex_t floor_lock;
    json_t *floor_sizes; /* "bucket/key" -> size */
};

struct gw_s3_req {
    struct gw_s3_server *srv;
    struct MHD_Connection *conn;
    char *uri; /* raw path, then the raw query after a NUL */
    const char *raw_query;
    char id[17];
    char content_range[48]; /* sent with an error too (416) */
    int64_t t0;
    enum gw_s3_op op;
    int status;
    uint64_t bytes_in, bytes_out;
    bool started, answered;
    struct MHD_Response *reply; /* answered, not yet queued: send_reply */
    uint64_t dropped;           /* body bytes read after the answer or the failure */
    char *joined[8];            /* repeated headers, joined */
    size_t njoined;

    struct gw_s3_target t;
    struct gw_s3_query q;
    struct gw_sigv4_auth auth;

    /* the body */
    enum gw_s3_err err; /* first failure while reading it */
    char msg[256];
    struct gw_payload_check *payload;
    struct gw_chunked *chunked;
    EVP_MD_CTX *md5;
    uint8_t md5_expect[16];
    struct gw_s3_checksum sum; /* x-amz-checksum-* */
    const char *sum_value;     /* verified, once the body ended */
    int64_t expect_len;        /* decoded body bytes promised, -1 unknown */
    uint64_t decoded;
    struct gw_put *put;
    int part; /* UploadPart's number */
    uint8_t *scratch;
    size_t scratch_cap;
    char *body; /* small bodies kept whole (DeleteObjects, CreateBucket) */
    size_t body_len, body_max;
};

/* s3_headers.c (arg: the request) */
const char *gw_s3_header(void *arg, const char *name);
void gw_s3_header_each(void *arg, void (*cb)(void *, const char *, const char *), void *cbarg);
/* The request's preconditions (s3_conditions.h) held against the version
 * oi: If-* on GET/HEAD, x-amz-copy-source-if-* for a copy's source. */
enum gw_condition gw_s3_condition(struct gw_s3_req *r, bool copy_source,
                                  const struct gw_object_info *oi);

/* s3_answer.c */
void gw_s3_queue(struct gw_s3_req *r, int status, struct MHD_Response *resp);
struct MHD_Response *gw_s3_buffer_response(char *data, size_t len, const char *content_type);
void gw_s3_answer_empty(struct gw_s3_req *r, int status);
void gw_s3_answer_xml(struct gw_s3_req *r, int status, struct gw_buf *b);
void gw_s3_answer_doc(struct gw_s3_req *r, int built, struct gw_buf *b);
void gw_s3_answer_error(struct gw_s3_req *r, enum gw_s3_err e, const char *message);
enum gw_s3_err gw_s3_map_errno(struct gw_s3_req *r, int rc);
void gw_s3_answer_errno(struct gw_s3_req *r, int rc, const char *what);

/* s3_attrs.c */
enum gw_s3_err gw_s3_check_overrides(struct gw_s3_req *r);
void gw_s3_object_headers(struct gw_s3_req *r, struct MHD_Response *resp,
                          const struct gw_object_info *oi);
void gw_s3_checksum_headers(struct gw_s3_req *r, struct MHD_Response *resp,
                            const struct gw_object_info *oi);
enum gw_s3_err gw_s3_request_acl(struct gw_s3_req *r, bool object, char acl[GW_ACL_MAX]);
enum gw_s3_err gw_s3_request_attrs(struct gw_s3_req *r, struct gw_object_info *attrs);
enum gw_s3_err gw_s3_write_unkept(struct gw_s3_req *r);
/* The conditional writes kept: a write of a whole object with If-None-Match: *,
 * and the ETag of a PutObject's, CopyObject's or DeleteObject's If-Match (else NULL). */
bool gw_s3_create_only(struct gw_s3_req *r);
const char *gw_s3_if_match(struct gw_s3_req *r);

/* s3_body.c */
enum gw_s3_err gw_s3_body_begin(struct gw_s3_req *r);
enum gw_s3_err gw_s3_body_feed(struct gw_s3_req *r, const char **data, size_t *len);
enum gw_s3_err gw_s3_body_end(struct gw_s3_req *r);

/* The operations, each in the file of its resource: each answers r, except
 * that the ones that open a body (put_begin, floor_begin) may leave it to be
 * read, and put_begin returns an error for the caller to answer. */
void gw_s3_get_object(struct gw_s3_req *r, bool head);
enum gw_s3_err gw_s3_put_begin(struct gw_s3_req *r);
void gw_s3_put_end(struct gw_s3_req *r);
void gw_s3_delete_object(struct gw_s3_req *r);
void gw_s3_delete_objects(struct gw_s3_req *r);
void gw_s3_get_object_tagging(struct gw_s3_req *r);

void gw_s3_list_buckets(struct gw_s3_req *r);
void gw_s3_create_bucket(struct gw_s3_req *r);
void gw_s3_head_bucket(struct gw_s3_req *r);
void gw_s3_delete_bucket(struct gw_s3_req *r);
void gw_s3_bucket_location(struct gw_s3_req *r);
void gw_s3_bucket_versioning(struct gw_s3_req *r);
void gw_s3_list_objects(struct gw_s3_req *r, int version);

bool gw_s3_part_number(struct gw_s3_req *r);
void gw_s3_create_multipart(struct gw_s3_req *r);
void gw_s3_complete_multipart(struct gw_s3_req *r);
void gw_s3_abort_multipart(struct gw_s3_req *r);
void gw_s3_list_parts(struct gw_s3_req *r);
void gw_s3_list_uploads(struct gw_s3_req *r);

void gw_s3_copy_object(struct gw_s3_req *r);

void gw_s3_get_acl(struct gw_s3_req *r);
void gw_s3_put_acl(struct gw_s3_req *r);
bool gw_s3_anonymous_allowed(struct gw_s3_req *r);

void gw_s3_put_lifecycle(struct gw_s3_req *r);
void gw_s3_get_lifecycle(struct gw_s3_req *r);
void gw_s3_delete_lifecycle(struct gw_s3_req *r);

void gw_s3_floor_begin(struct gw_s3_req *r);
void gw_s3_floor_put_end(struct gw_s3_req *r);

#endif
