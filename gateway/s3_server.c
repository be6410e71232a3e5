/*
 * The S3 front end over libmicrohttpd.
 *
 * A request lives in one struct req from the URI log callback (which sees
 * the raw URI: SigV4 signs the path as sent, before MHD decodes it) to the
 * completion callback (which records metrics and frees it). The access
 * handler is called once with the headers (route, authenticate, and either
 * answer or open the body's sinks), once per piece of body, and once more
 * with no data (finish: verify the body, commit, answer). A PUT is committed
 * only after every check of its body passed; until then it can be aborted
 * and the previous version stays.
 *
 * Connections are kept alive. MHD closes a connection whose answer was
 * queued from the first call (an "early" answer: it cannot know the body was
 * read), so an answer made then is held (req.reply) and queued from the
 * last call instead, once the request has been read whole. Only an answer
 * refusing a body that will not be read is sent early, and closes: the
 * client waits for it before sending the body (Expect: 100-continue), or the
 * body is longer than DROP_MAX. A shorter refused body is read and dropped,
 * and the connection stays open.
 */
#include "gateway/s3_server.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "gateway/conn_guard.h"
#include "gateway/s3_acl.h"
#include "gateway/s3_checksum.h"
#include "gateway/s3_errno.h"
#include "gateway/s3_list.h"
#include "gateway/s3_range.h"
#include "gateway/s3_request.h"
#include "gateway/s3_xml.h"
#include "gateway/s3_xml_parse.h"
#include "gateway/sigv4.h"
#include "volume/volume.h"
#include "inec/log.h"

#define MAX_OBJECT_SIZE  (5ull << 30) /* S3's single-PUT limit */
#define SMALL_BODY_MAX   (64u << 10)  /* CreateBucket's configuration */
#define READ_BLOCK       (256u << 10)
#define DROP_MAX         (8u << 20)   /* body bytes read after a refusal (handle) */
#define MEMORY_LIMIT     (128u << 10) /* per connection: bounds the request header */
#define CONN_TIMEOUT_SEC 60           /* idle: each connection holds a thread */
#define MAX_CONNECTIONS  256u         /* conn_guard.h: idle ones are closed to make room */
#define MAX_PER_CLIENT   64u          /* active connections from one address (conn_guard.h) */
#define CLOSING_SLACK    64u          /* connections the guard closed whose threads still run */
#define HEADER_TIMEOUT   30u          /* seconds to send a request's headers (conn_guard.h) */

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

struct req {
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

struct get_stream {
    struct gw_get *g;
    struct req *r;
    uint64_t left;
    char *first; /* the first block, read before the status line (get_object) */
    size_t nfirst, done;
};

static int64_t now_ns(int clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct join {
    const char *name;
    char *buf;
    size_t len;
    int n;
    bool nomem;
};

static enum MHD_Result join_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct join *j = cls;
    if (strcasecmp(key, j->name) != 0)
        return MHD_YES;
    size_t vlen = value ? strlen(value) : 0;
    char *nb = realloc(j->buf, j->len + vlen + 2);
    if (!nb) {
        j->nomem = true;
        return MHD_NO;
    }
    j->buf = nb;
    if (j->n++)
        j->buf[j->len++] = ',';
    memcpy(j->buf + j->len, value ? value : "", vlen);
    j->len += vlen;
    j->buf[j->len] = '\0';
    return MHD_YES;
}

/* A header's value; a repeated header's values joined by ",", as SigV4
 * canonicalises them (the joined string lives as long as the request). */
static const char *header(void *arg, const char *name)
{
    struct req *r = arg;
    struct join j = {name, NULL, 0, 0, false};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, join_one, &j);
    if (j.n <= 1 || j.nomem || r->njoined == sizeof(r->joined) / sizeof(r->joined[0])) {
        free(j.buf);
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
    }
    return r->joined[r->njoined++] = j.buf;
}

struct each_ctx {
    void (*cb)(void *, const char *, const char *);
    void *cbarg;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct each_ctx *e = cls;
    e->cb(e->cbarg, key, value ? value : "");
    return MHD_YES;
}

static void header_each(void *arg, void (*cb)(void *, const char *, const char *), void *cbarg)
{
    struct req *r = arg;
    struct each_ctx e = {cb, cbarg};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, each_header, &e);
}

static int secret_of(void *arg, const char *access_key, char *secret, size_t len)
{
    struct gw_s3_server *s = arg;
    if (s->keys)
        return gw_keys_secret(s->keys, access_key, secret, len);
    if (strcmp(access_key, s->access_key) != 0)
        return -ENOENT;
    snprintf(secret, len, "%s", s->secret_key);
    return 0;
}

/* ---- responses ---- */

static void common_headers(struct req *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "x-amz-request-id", r->id);
    MHD_add_response_header(resp, "Server", "inec");
}

/* The answer, held until MHD may send it without closing the connection
 * (send_reply). */
static void queue(struct req *r, int status, struct MHD_Response *resp)
{
    common_headers(r, resp);
    r->status = status;
    r->answered = true;
    r->reply = resp;
}

static void send_reply(struct req *r)
{
    if (!r->reply)
        return;
    if (MHD_queue_response(r->conn, (unsigned)r->status, r->reply) != MHD_YES)
        inec_log(INEC_LOG_WARN, "s3", "MHD refused an answer (HTTP %d)", r->status);
    MHD_destroy_response(r->reply);
    r->reply = NULL;
}

/* After the first call answered: is the body, if any, read and dropped (the
 * connection lives on) rather than left unread (the answer goes now, early,
 * and MHD closes the connection)? */
static bool drain_body(struct req *r)
{
    const char *expect = header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0)
        return false; /* the client waits for this answer before sending it */
    const char *te = header(r, "Transfer-Encoding");
    if (te)
        return false; /* of unknown length */
    const char *cl = header(r, "Content-Length");
    char *end;
    errno = 0;
    unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
    return !cl || (*cl && !*end && !errno && *cl != '-' && n <= DROP_MAX);
}

static struct MHD_Response *buffer_response(char *data, size_t len, const char *content_type)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, data, data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (resp && content_type)
        MHD_add_response_header(resp, "Content-Type", content_type);
    return resp;
}

static void answer_empty(struct req *r, int status)
{
    struct MHD_Response *resp = buffer_response(NULL, 0, NULL);
    if (resp)
        queue(r, status, resp);
}

/* Takes the gw_buf's memory. */
static void answer_xml(struct req *r, int status, struct gw_buf *b)
{
    r->bytes_out += b->len;
    struct MHD_Response *resp = buffer_response(b->data, b->len, "application/xml");
    if (!resp) {
        gw_buf_free(b);
        return;
    }
    *b = (struct gw_buf){0};
    queue(r, status, resp);
}

static void answer_error(struct req *r, enum gw_s3_err e, const char *message)
{
    const struct gw_s3_error_info *info = gw_s3_error(e);
    struct gw_buf b = {0};
    if (message && !message[0])
        message = NULL;
    if (e != GW_S3_ACCESS_DENIED || r->t.bucket[0] || r->t.key[0])
        inec_log(INEC_LOG_DEBUG, "s3", "error op=%s code=%s msg=%s", gw_s3_op_name(r->op),
                 info->code, message ? message : info->message);
    if (gw_xml_error(&b, e, message, r->uri, r->id) != 0) {
        gw_buf_free(&b);
        answer_empty(r, 500);
        return;
    }
    r->bytes_out += b.len;
    struct MHD_Response *resp = buffer_response(b.data, b.len, "application/xml");
    if (!resp) {
        gw_buf_free(&b);
        return;
    }
    if (r->content_range[0])
        MHD_add_response_header(resp, "Content-Range", r->content_range);
    if (info->status == 503) /* a transient cluster condition: when to try again */
        MHD_add_response_header(resp, "Retry-After", "1");
    queue(r, info->status, resp);
}

/* The object layer's errno as S3 answers it (s3_errno.h); key-level ENOENT
 * is NoSuchKey unless the bucket itself is missing. */
static enum gw_s3_err map_errno(struct req *r, int rc)
{
    if (rc == -ENOENT && r->t.key[0]) {
        struct gw_bucket_info bi;
        if (gw_bucket_head(r->srv->objects, r->t.bucket, &bi) == 0)
            return GW_S3_NO_SUCH_KEY;
    }
    return gw_s3_errno(rc, r->op, r->t.key[0] != 0);
}

static void answer_errno(struct req *r, int rc, const char *what)
{
    enum gw_s3_err e = map_errno(r, rc);
    if (e == GW_S3_INTERNAL_ERROR || e == GW_S3_SERVICE_UNAVAILABLE)
        inec_log(INEC_LOG_WARN, "s3", "%s failed bucket=%s key=%s err=%s", what, r->t.bucket,
                 r->t.key, strerror(-rc));
    answer_error(r, e, NULL);
}

/* Headers an object keeps from its PUT (the system metadata a client sets),
 * and the GET/HEAD query parameters that override them for one response. */
static const struct stored_header {
    const char *name, *override;
} stored_headers[] = {
    {"Content-Type", "response-content-type"},
    {"Cache-Control", "response-cache-control"},
    {"Content-Disposition", "response-content-disposition"},
    {"Content-Encoding", "response-content-encoding"},
    {"Content-Language", "response-content-language"},
    {"Expires", "response-expires"},
};
#define STORED_HEADER_MAX 1024 /* bytes of one stored header's value */

/* Content-Encoding without aws-chunked, which only says how the body travelled. */
static void strip_aws_chunked(char *v)
{
    char out[STORED_HEADER_MAX + 1] = "";
    size_t n = 0;
    for (char *tok = v; *tok;) {
        size_t len = strcspn(tok, ",");
        char *a = tok, *b = tok + len;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if (b > a && !((size_t)(b - a) == 11 && strncasecmp(a, "aws-chunked", 11) == 0) &&
            n + (size_t)(b - a) + 1 < sizeof(out))
            n +=
                (size_t)snprintf(out + n, sizeof(out) - n, "%s%.*s", n ? "," : "", (int)(b - a), a);
        tok += len + (tok[len] == ',');
    }
    strcpy(v, out);
}

/* The stored headers of a PUT, CreateMultipartUpload or CopyObject (REPLACE). */
static enum gw_s3_err request_headers(struct req *r, json_t **out)
{
    *out = json_object();
    if (!*out)
        return GW_S3_INTERNAL_ERROR;
    for (size_t i = 1; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *v = header(r, stored_headers[i].name);
        if (!v)
            continue;
        if (strlen(v) > STORED_HEADER_MAX)
            return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg),
                                "%s is longer than %d bytes", stored_headers[i].name,
                                STORED_HEADER_MAX);
        char val[STORED_HEADER_MAX + 1];
        strcpy(val, v);
        if (strcasecmp(stored_headers[i].name, "Content-Encoding") == 0)
            strip_aws_chunked(val);
        json_t *js = val[0] ? json_string(val) : NULL;
        if (val[0] && !js)
            return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg), "%s is not UTF-8",
                                stored_headers[i].name);
        if (js && json_object_set_new(*out, stored_headers[i].name, js))
            return GW_S3_INTERNAL_ERROR;
    }
    return GW_S3_OK;
}

/* response-* overrides of a GET/HEAD: only signed requests may give them
 * (as in S3), and no value may hold what would end a header line. */
static enum gw_s3_err check_overrides(struct req *r)
{
    for (size_t i = 0; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *v = gw_s3_query_get(&r->q, stored_headers[i].override);
        if (!v)
            continue;
        if (r->auth.anonymous)
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, r->msg, sizeof(r->msg),
                                "Request specific response headers cannot be used for "
                                "anonymous GET requests.");
        for (const char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg),
                                    "%s holds a control character", stored_headers[i].override);
    }
    return GW_S3_OK;
}

static void object_headers(struct req *r, struct MHD_Response *resp,
                           const struct gw_object_info *oi)
{
    char v[64];
    snprintf(v, sizeof(v), "\"%s\"", oi->etag);
    MHD_add_response_header(resp, "ETag", v);
    gw_http_date(oi->mtime_ns, v);
    MHD_add_response_header(resp, "Last-Modified", v);
    for (size_t i = 0; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *val = gw_s3_query_get(&r->q, stored_headers[i].override);
        if (!val && i == 0)
            val = oi->content_type[0] ? oi->content_type : "binary/octet-stream";
        if (!val)
            val = json_string_value(json_object_get(oi->headers, stored_headers[i].name));
        if (val && val[0])
            MHD_add_response_header(resp, stored_headers[i].name, val);
    }
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    const char *name;
    json_t *val;
    json_object_foreach(oi->user_meta, name, val)
    {
        char h[300];
        snprintf(h, sizeof(h), "x-amz-meta-%s", name);
        /* MHD refuses an empty value; a lone space is one (HTTP strips it) */
        const char *v = json_string_value(val);
        MHD_add_response_header(resp, h, v && v[0] ? v : " ");
    }
}

/* The stored x-amz-checksum-* of a whole object, when the client asks with
 * x-amz-checksum-mode: ENABLED (a range has no checksum of its own). */
static void checksum_headers(struct req *r, struct MHD_Response *resp,
                             const struct gw_object_info *oi)
{
    const char *mode = header(r, "x-amz-checksum-mode");
    if (!mode || strcasecmp(mode, "ENABLED") != 0)
        return;
    for (int a = 0; a < GW_SUM_COUNT; a++) {
        const char *name = gw_checksum_header((enum gw_checksum_algo)a);
        const char *v = json_string_value(json_object_get(oi->headers, name));
        if (v)
            MHD_add_response_header(resp, name, v);
    }
}

/* ---- buckets ---- */

struct bucket_walk {
    struct gw_xml_bucket *b;
    char (*names)[GW_BUCKET_MAX + 1];
    size_t n, cap;
};

static int bucket_cb(const struct gw_bucket_info *b, void *arg)
{
    struct bucket_walk *w = arg;
    if (gw_volume_bucket(b->name))
        return 0; /* a volume's stripes: not S3's (see begin) */
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        void *nb = realloc(w->b, cap * sizeof(*w->b));
        if (!nb)
            return -ENOMEM;
        w->b = nb;
        void *nn = realloc(w->names, cap * sizeof(*w->names));
        if (!nn)
            return -ENOMEM;
        w->names = nn;
        w->cap = cap;
    }
    memcpy(w->names[w->n], b->name, sizeof(w->names[0]));
    w->b[w->n].created_ms = b->created_ns / 1000000;
    w->n++;
    return 0;
}

static void list_buckets(struct req *r)
{
    struct bucket_walk w = {0};
    int rc = gw_bucket_list(r->srv->objects, bucket_cb, &w);
    struct gw_buf b = {0};
    if (rc == 0) {
        for (size_t i = 0; i < w.n; i++)
            w.b[i].name = w.names[i];
        rc = gw_xml_list_buckets(&b, r->srv->owner_id, "inec", w.b, w.n);
    }
    free(w.b);
    free(w.names);
    if (rc)
        answer_errno(r, rc, "ListBuckets");
    else
        answer_xml(r, 200, &b);
    gw_buf_free(&b);
}

static void bucket_location(struct req *r)
{
    struct gw_bucket_info bi;
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc) {
        answer_errno(r, rc, "GetBucketLocation");
        return;
    }
    char *doc;
    /* us-east-1 is S3's empty LocationConstraint. */
    const char *loc = strcmp(r->srv->region, "us-east-1") == 0 ? "" : r->srv->region;
    if (asprintf(&doc,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s</LocationConstraint>",
                 loc) < 0)
        return;
    struct gw_buf b = {doc, strlen(doc), strlen(doc) + 1};
    answer_xml(r, 200, &b);
}

/* ---- listing ---- */

struct list_walk {
    struct gw_list l;
    struct gw_xml_object *objs;
    size_t nobjs;
    char **prefixes;
    size_t nprefixes;
    int err;
};

static int list_cb(const char *key, const struct gw_object_info *info, void *arg)
{
    struct list_walk *w = arg;
    switch (gw_list_offer(&w->l, key)) {
    case GW_LIST_SKIP:
        return 0;
    case GW_LIST_STOP:
        return 1;
    case GW_LIST_CONTENTS: {
        struct gw_xml_object *o = &w->objs[w->nobjs];
        char *k = strdup(key), *etag = strdup(info->etag);
        if (!k || !etag) {
            free(k);
            free(etag);
            w->err = -ENOMEM;
            return 1;
        }
        *o = (struct gw_xml_object){k, info->mtime_ns / 1000000, etag, info->size, NULL};
        w->nobjs++;
        return 0;
    }
    case GW_LIST_PREFIX:
        if (!(w->prefixes[w->nprefixes] = strdup(gw_list_prefix(&w->l)))) {
            w->err = -ENOMEM;
            return 1;
        }
        w->nprefixes++;
        return 0;
    }
    return 1;
}

static bool parse_max_keys(const char *s, int *out)
{
    if (!s) {
        *out = GW_LIST_MAX_KEYS;
        return true;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0)
        return false;
    *out = v > GW_LIST_MAX_KEYS ? GW_LIST_MAX_KEYS : (int)v;
    return true;
}

/* A query parameter given a value (empty counts as absent), or NULL. */
static const char *param(const struct gw_s3_query *q, const char *name)
{
    const char *v = gw_s3_query_get(q, name);
    return v && *v ? v : NULL;
}

/* ListObjects (version 1), ListObjectsV2 (2) and ListObjectVersions (3):
 * with no versioning, each object is its own "null" version. Empty
 * parameters (delimiter=, continuation-token=, ...) count as absent. */
static void list_objects(struct req *r, int version)
{
    const struct gw_s3_query *q = &r->q;
    const char *prefix = param(q, "prefix");
    const char *delim = param(q, "delimiter");
    const char *enc = gw_s3_query_get(q, "encoding-type");
    const char *token = version == 2 ? param(q, "continuation-token") : NULL;
    const char *start_after = version == 2 ? param(q, "start-after") : NULL;
    const char *marker = version == 1   ? param(q, "marker")
                         : version == 3 ? param(q, "key-marker")
                                        : NULL;
    const char *vid_marker = version == 3 ? param(q, "version-id-marker") : NULL;
    int max_keys;
    if (!parse_max_keys(gw_s3_query_get(q, "max-keys"), &max_keys)) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "max-keys must be a non-negative integer");
        return;
    }
    if (enc && strcmp(enc, "url") != 0) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "Invalid Encoding Method specified in Request");
        return;
    }
    if (vid_marker && !marker) {
        answer_error(r, GW_S3_INVALID_ARGUMENT,
                     "A version-id marker cannot be specified without a key marker.");
        return;
    }
    char token_key[GW_S3_KEY_MAX + 1];
    const char *after = marker;
    if (version == 2) {
        after = start_after;
        if (token) {
            if (gw_list_token_decode(token, token_key, sizeof(token_key)) != 0) {
                answer_error(r, GW_S3_INVALID_ARGUMENT,
                             "The continuation token provided is incorrect");
                return;
            }
            after = token_key;
        }
    }
    const char *fetch_owner = gw_s3_query_get(q, "fetch-owner");
    bool with_owner = version != 2 || (fetch_owner && strcmp(fetch_owner, "true") == 0);

    struct list_walk *w = calloc(1, sizeof(*w));
    struct gw_buf b = {0};
    int rc = -ENOMEM;
    if (!w)
        goto out;
    struct gw_list_params p = {prefix, delim, after, max_keys};
    gw_list_begin(&w->l, &p);
    w->objs = calloc((size_t)max_keys + 1, sizeof(*w->objs));
    w->prefixes = calloc((size_t)max_keys + 1, sizeof(*w->prefixes));
    if (!w->objs || !w->prefixes)
        goto out;
    /* Keys at or before `after` are skipped by the object layer already. */
    rc = gw_object_list(r->srv->objects, r->t.bucket, prefix, after, list_cb, w);
    if (rc == 0 && w->err)
        rc = w->err;
    if (rc)
        goto out;
    char next_token[4 * GW_S3_KEY_MAX / 3 + 8];
    struct gw_list_page page = {
        .version = version,
        .bucket = r->t.bucket,
        .prefix = gw_s3_query_get(q, "prefix"),
        .delimiter = delim,
        .max_keys = max_keys,
        .url_encode = enc != NULL,
        .owner_id = with_owner ? r->srv->owner_id : NULL,
        .owner_name = "inec",
        .marker = version == 1 ? (marker ? marker : "") : NULL,
        .start_after = start_after,
        .continuation_token = token,
        .key_marker = version == 3 ? marker : NULL,
        .version_id_marker = vid_marker,
        .next_key_marker = version == 3 && w->l.truncated ? w->l.next : NULL,
        .truncated = w->l.truncated,
        .objects = w->objs,
        .nobjects = w->nobjs,
        .prefixes = (const char *const *)w->prefixes,
        .nprefixes = w->nprefixes,
    };
    if (w->l.truncated && version == 1 && delim)
        page.next_marker = w->l.next;
    if (w->l.truncated && version == 2) {
        rc = gw_list_token_encode(w->l.next, next_token, sizeof(next_token));
        if (rc)
            goto out;
        page.next_continuation_token = next_token;
    }
    rc = gw_xml_list_objects(&b, &page);
out:
    if (rc)
        answer_errno(r, rc, "ListObjects");
    else
        answer_xml(r, 200, &b);
    gw_buf_free(&b);
    if (w) {
        for (size_t i = 0; i < w->nobjs; i++) {
            free((char *)w->objs[i].key);
            free((char *)w->objs[i].etag);
        }
        for (size_t i = 0; i < w->nprefixes; i++)
            free(w->prefixes[i]);
        free(w->objs);
        free(w->prefixes);
        free(w);
    }
}

/* ---- objects: GET and HEAD ---- */

static ssize_t get_read(struct get_stream *s, char *buf, size_t max)
{
    if (s->left == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (max > s->left)
        max = (size_t)s->left;
    ssize_t n;
    if (s->done < s->nfirst) {
        n = (ssize_t)(s->nfirst - s->done < max ? s->nfirst - s->done : max);
        memcpy(buf, s->first + s->done, (size_t)n);
        s->done += (size_t)n;
    } else {
        n = gw_get_read(s->g, buf, max);
    }
    if (n <= 0) {
        /* The status line has gone out: all that is left is to cut the
         * connection, so the client sees a short body, never wrong bytes. */
        inec_log(INEC_LOG_WARN, "s3", "read failed, connection cut bucket=%s key=%s err=%s",
                 s->r->t.bucket, s->r->t.key, n == 0 ? "short object" : strerror((int)-n));
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    s->left -= (uint64_t)n;
    s->r->bytes_out += (uint64_t)n;
    return n;
}

static ssize_t get_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct get_stream *s = cls;
    inec_log_context_set(s->r->id);
    ssize_t n = get_read(s, buf, max);
    inec_log_context_set(NULL);
    return n;
}

static void get_free(void *cls)
{
    struct get_stream *s = cls;
    gw_get_end(s->g);
    free(s->first);
    free(s);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void get_object(struct req *r, bool head)
{
    struct gw_objects *o = r->srv->objects;
    struct gw_object_info oi = {0};
    struct gw_range range;
    struct gw_get *g = NULL;
    int rc;
    enum gw_s3_err oe = check_overrides(r);
    if (oe) {
        answer_error(r, oe, r->msg);
        return;
    }
    /* One read of the record: a GET opens the object whole, then narrows it
     * to the range parsed against that record's size. */
    rc = head ? gw_object_head(o, r->t.bucket, r->t.key, &oi)
              : gw_get_begin(o, r->t.bucket, r->t.key, 0, UINT64_MAX, &oi, &g);
    if (rc) {
        answer_errno(r, rc, head ? "HeadObject" : "GetObject");
        return;
    }
    enum gw_s3_err e = gw_range_parse(header(r, "Range"), oi.size, &range);
    if (e) {
        snprintf(r->content_range, sizeof(r->content_range), "bytes */%" PRIu64, oi.size);
        gw_object_info_clear(&oi);
        gw_get_end(g);
        answer_error(r, e, NULL);
        return;
    }
    if (g && range.length == 0) {
        gw_get_end(g);
        g = NULL;
    } else if (g) {
        gw_get_narrow(g, range.first, range.length);
    }

    struct MHD_Response *resp;
    if (g) {
        struct get_stream *s = malloc(sizeof(*s));
        if (!s) {
            gw_get_end(g);
            gw_object_info_clear(&oi);
            return;
        }
        *s = (struct get_stream){g, r, range.length, NULL, 0, 0};
        /* Read the first block before the status line goes out: an object
         * that cannot be read at all (more chunks lost than the code
         * tolerates) gets a 503, not a 200 with a cut body. */
        s->nfirst = range.length < READ_BLOCK ? (size_t)range.length : READ_BLOCK;
        s->first = malloc(s->nfirst);
        ssize_t n = s->first ? gw_get_read(g, s->first, s->nfirst) : -ENOMEM;
        if (n <= 0) {
            get_free(s);
            gw_object_info_clear(&oi);
            answer_errno(r, n == 0 ? -EIO : (int)n, "GetObject");
            return;
        }
        s->nfirst = (size_t)n;
        resp = MHD_create_response_from_callback(range.length, READ_BLOCK, get_reader, s, get_free);
        if (!resp)
            get_free(s);
    } else if (head) {
        /* MHD sends no body for HEAD, only this size as Content-Length. */
        resp = MHD_create_response_from_callback(range.length, READ_BLOCK, no_body, NULL, NULL);
    } else {
        resp = buffer_response(NULL, 0, NULL);
    }
    if (resp) {
        object_headers(r, resp, &oi);
        if (!range.partial)
            checksum_headers(r, resp, &oi);
        if (range.partial) {
            snprintf(r->content_range, sizeof(r->content_range),
                     "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, range.first,
                     range.first + range.length - 1, oi.size);
            MHD_add_response_header(resp, "Content-Range", r->content_range);
        }
        queue(r, range.partial ? 206 : 200, resp);
    }
    gw_object_info_clear(&oi);
}

/* ---- bodies ---- */

/* Sets up the payload checks that every request with a body needs. */
static enum gw_s3_err body_begin(struct req *r)
{
    const char *md5 = header(r, "Content-MD5");
    if (md5) {
        if (gw_s3_content_md5(md5, r->md5_expect) != 0) {
            snprintf(r->msg, sizeof(r->msg), "Content-MD5 is not the base64 of 16 bytes");
            return GW_S3_INVALID_DIGEST;
        }
        if (!(r->md5 = EVP_MD_CTX_new()) || EVP_DigestInit_ex(r->md5, EVP_md5(), NULL) != 1)
            return GW_S3_INTERNAL_ERROR;
    }
    enum gw_s3_err e =
        gw_s3_checksum_begin(&r->sum, header_each, r, &r->auth, r->msg, sizeof(r->msg));
    if (e)
        return e;
    r->expect_len = -1;
    const char *cl = header(r, "Content-Length");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!*cl || *end || (errno && errno != ERANGE) || *cl == '-')
            return GW_S3_INVALID_ARGUMENT;
        /* beyond what an int64 holds is beyond every limit, never "unknown" */
        if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
            return gw_s3_errorf(GW_S3_ENTITY_TOO_LARGE, r->msg, sizeof(r->msg),
                                "Content-Length %.30s is too large", cl);
        r->expect_len = (int64_t)v;
    }
    if (r->auth.payload == GW_PAYLOAD_STREAMING ||
        r->auth.payload == GW_PAYLOAD_STREAMING_UNSIGNED) {
        if (gw_chunked_create(&r->auth, &r->chunked) != 0)
            return GW_S3_INTERNAL_ERROR;
        r->expect_len = r->auth.decoded_length;
    } else if (gw_payload_create(&r->auth, &r->payload) != 0) {
        return GW_S3_INTERNAL_ERROR;
    }
    return GW_S3_OK;
}

/* Decodes one piece of the body in place of the caller's pointer and length. */
static enum gw_s3_err body_feed(struct req *r, const char **data, size_t *len)
{
    r->bytes_in += *len;
    if (r->chunked) {
        if (r->scratch_cap < *len) {
            free(r->scratch);
            if (!(r->scratch = malloc(*len)))
                return GW_S3_INTERNAL_ERROR;
            r->scratch_cap = *len;
        }
        memcpy(r->scratch, *data, *len);
        size_t out;
        enum gw_s3_err e =
            gw_chunked_feed(r->chunked, r->scratch, *len, &out, r->msg, sizeof(r->msg));
        if (e)
            return e;
        *data = (const char *)r->scratch;
        *len = out;
    } else {
        gw_payload_update(r->payload, *data, *len);
    }
    if (r->md5)
        EVP_DigestUpdate(r->md5, *data, *len);
    gw_s3_checksum_update(&r->sum, *data, *len);
    r->decoded += *len;
    if (r->decoded > MAX_OBJECT_SIZE) /* whatever the headers said */
        return gw_s3_errorf(GW_S3_ENTITY_TOO_LARGE, r->msg, sizeof(r->msg),
                            "the body is larger than %llu bytes", MAX_OBJECT_SIZE);
    if (r->expect_len >= 0 && r->decoded > (uint64_t)r->expect_len) {
        snprintf(r->msg, sizeof(r->msg), "the body is longer than its declared length");
        return GW_S3_INVALID_REQUEST;
    }
    return GW_S3_OK;
}

/* Every check of a finished body: nothing is committed before this says OK. */
static enum gw_s3_err body_end(struct req *r)
{
    if (r->chunked) {
        if (!gw_chunked_done(r->chunked)) {
            snprintf(r->msg, sizeof(r->msg), "the aws-chunked body ended before its final chunk");
            return GW_S3_INCOMPLETE_BODY;
        }
    } else {
        enum gw_s3_err e = gw_payload_final(r->payload);
        if (e)
            return e;
    }
    if (r->expect_len >= 0 && r->decoded != (uint64_t)r->expect_len)
        return GW_S3_INCOMPLETE_BODY;
    if (r->md5) {
        uint8_t got[EVP_MAX_MD_SIZE];
        unsigned n = 0;
        if (EVP_DigestFinal_ex(r->md5, got, &n) != 1 || n != 16 ||
            memcmp(got, r->md5_expect, 16) != 0)
            return GW_S3_BAD_DIGEST;
    }
    return gw_s3_checksum_end(&r->sum, r->chunked ? gw_chunked_trailer(r->chunked) : NULL,
                              &r->sum_value, r->msg, sizeof(r->msg));
}

/* The canned ACL of x-amz-acl (private when absent) into acl ("" = private);
 * x-amz-grant-* headers (ACLs beyond the canned ones) are not implemented. */
static enum gw_s3_err request_acl(struct req *r, bool object, char acl[GW_ACL_MAX])
{
    static const char *const grants[] = {"x-amz-grant-read", "x-amz-grant-write",
                                         "x-amz-grant-read-acp", "x-amz-grant-write-acp",
                                         "x-amz-grant-full-control"};
    for (size_t i = 0; i < sizeof(grants) / sizeof(grants[0]); i++)
        if (header(r, grants[i]))
            return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, r->msg, sizeof(r->msg),
                                "%s is not implemented by inec: use a canned x-amz-acl", grants[i]);
    enum gw_acl a;
    enum gw_s3_err e = gw_acl_parse(header(r, "x-amz-acl"), object, &a, r->msg, sizeof(r->msg));
    if (e == GW_S3_OK)
        snprintf(acl, GW_ACL_MAX, "%s", a == GW_ACL_PRIVATE ? "" : gw_acl_name(a));
    return e;
}

/* Content-Type, the other stored headers, x-amz-meta-* and x-amz-acl of the
 * request (user_meta and headers are the caller's to free). */
static enum gw_s3_err request_attrs(struct req *r, struct gw_object_info *attrs)
{
    enum gw_s3_err e = request_headers(r, &attrs->headers);
    if (e == GW_S3_OK)
        e = request_acl(r, true, attrs->acl);
    if (e)
        return e;
    const char *ct = r->auth.unsigned_content_type ? NULL : header(r, "Content-Type");
    if (ct) {
        if (strlen(ct) >= sizeof(attrs->content_type)) {
            snprintf(r->msg, sizeof(r->msg), "Content-Type longer than %zu bytes",
                     sizeof(attrs->content_type) - 1);
            return GW_S3_INVALID_ARGUMENT;
        }
        strcpy(attrs->content_type, ct);
    }
    return gw_s3_user_meta(header_each, r, &attrs->user_meta, r->msg, sizeof(r->msg));
}

static enum gw_s3_err put_begin(struct req *r)
{
    enum gw_s3_err e = body_begin(r);
    if (e)
        return e;
    /* The size must be known before the body is read, so the limit holds:
     * a plain body needs Content-Length (not Transfer-Encoding: chunked), an
     * aws-chunked one x-amz-decoded-content-length, which the decoder enforces. */
    if (r->expect_len < 0) {
        snprintf(r->msg, sizeof(r->msg), "%s is required",
                 r->chunked ? "x-amz-decoded-content-length" : "Content-Length");
        return GW_S3_MISSING_CONTENT_LENGTH;
    }
    if (r->expect_len >= 0 && (uint64_t)r->expect_len > MAX_OBJECT_SIZE)
        return GW_S3_ENTITY_TOO_LARGE;
    int rc;
    if (r->op == GW_OP_UPLOAD_PART) {
        rc = gw_mpu_part_begin(r->srv->objects, r->t.bucket, r->t.key,
                               gw_s3_query_get(&r->q, "uploadId"), &r->put);
    } else {
        struct gw_object_info attrs = {0};
        e = request_attrs(r, &attrs);
        if (e == GW_S3_OK)
            rc = gw_put_begin(r->srv->objects, r->t.bucket, r->t.key, &attrs, &r->put);
        gw_object_info_clear(&attrs);
        if (e)
            return e;
    }
    if (rc)
        answer_errno(r, rc, gw_s3_op_name(r->op));
    return GW_S3_OK;
}

static void put_end(struct req *r)
{
    enum gw_s3_err e = body_end(r);
    if (e) {
        gw_put_abort(r->put);
        r->put = NULL;
        answer_error(r, e, r->msg);
        return;
    }
    struct gw_object_info oi = {0};
    int rc = 0;
    if (r->sum_value && r->op == GW_OP_PUT_OBJECT)
        rc = gw_put_set_header(r->put, gw_checksum_header(r->sum.algo), r->sum_value);
    if (rc) {
        gw_put_abort(r->put);
    } else if (r->op == GW_OP_UPLOAD_PART) {
        struct gw_part_info pi;
        rc = gw_mpu_part_commit(r->srv->objects, r->put, r->t.bucket, r->t.key,
                                gw_s3_query_get(&r->q, "uploadId"), r->part, &pi);
        snprintf(oi.etag, sizeof(oi.etag), "%s", rc ? "" : pi.etag);
    } else {
        rc = gw_put_commit(r->put, &oi);
    }
    r->put = NULL;
    if (rc) {
        answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    struct MHD_Response *resp = buffer_response(NULL, 0, NULL);
    if (resp) {
        char v[64];
        snprintf(v, sizeof(v), "\"%s\"", oi.etag);
        MHD_add_response_header(resp, "ETag", v);
        if (r->sum_value)
            MHD_add_response_header(resp, gw_checksum_header(r->sum.algo), r->sum_value);
        queue(r, 200, resp);
    }
    gw_object_info_clear(&oi);
}

static void delete_objects(struct req *r)
{
    struct gw_delete_request *d = NULL;
    enum gw_s3_err e =
        gw_xml_parse_delete(r->body ? r->body : "", r->body_len, &d, r->msg, sizeof(r->msg));
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    struct gw_bucket_info bi;
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc) {
        gw_delete_request_free(d);
        answer_errno(r, rc, "DeleteObjects");
        return;
    }
    struct gw_delete_outcome *out = calloc(d->n, sizeof(*out));
    if (!out) {
        gw_delete_request_free(d);
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        return;
    }
    for (size_t i = 0; i < d->n; i++) {
        out[i].key = d->keys[i].key;
        rc = gw_object_delete(r->srv->objects, r->t.bucket, d->keys[i].key);
        /* Deleting a missing key succeeds in S3. */
        if (rc && rc != -ENOENT) {
            out[i].err = gw_s3_errno(rc, r->op, true);
            inec_log(INEC_LOG_WARN, "s3", "DeleteObjects key failed bucket=%s key=%s err=%s",
                     r->t.bucket, d->keys[i].key, strerror(-rc));
        }
    }
    struct gw_buf b = {0};
    if (gw_xml_delete_result(&b, out, d->n, d->quiet) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
    free(out);
    gw_delete_request_free(d);
}

/* ---- multipart and copy ---- */

static void complete_multipart(struct req *r)
{
    struct gw_complete_request *c = NULL;
    enum gw_s3_err e =
        gw_xml_parse_complete(r->body ? r->body : "", r->body_len, &c, r->msg, sizeof(r->msg));
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    struct gw_part_info *parts = calloc(c->n, sizeof(*parts));
    if (!parts) {
        gw_complete_request_free(c);
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        parts[i].number = c->parts[i].number;
        /* quotes are stripped by the object layer; an over-long ETag cannot match */
        snprintf(parts[i].etag, sizeof(parts[i].etag), "%.32s",
                 c->parts[i].etag + (c->parts[i].etag[0] == '"'));
        if (strlen(c->parts[i].etag) > 34)
            parts[i].etag[0] = '\0';
    }
    struct gw_object_info oi = {0};
    int rc = gw_mpu_complete(r->srv->objects, r->t.bucket, r->t.key,
                             gw_s3_query_get(&r->q, "uploadId"), parts, c->n, &oi);
    free(parts);
    gw_complete_request_free(c);
    if (rc) {
        answer_errno(r, rc, "CompleteMultipartUpload");
        return;
    }
    char loc[GW_BUCKET_MAX + GW_KEY_MAX + 3];
    snprintf(loc, sizeof(loc), "/%s/%s", r->t.bucket, r->t.key);
    struct gw_buf b = {0};
    if (gw_xml_complete_multipart(&b, loc, r->t.bucket, r->t.key, oi.etag) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
    gw_object_info_clear(&oi);
}

/* ---- ACLs ---- */

/* The canned ACL of the bucket (and, for an object request, of the object);
 * -ENOENT names which is missing through answer_errno. */
static int current_acl(struct req *r, bool object, enum gw_acl *out)
{
    struct gw_objects *o = r->srv->objects;
    char name[GW_ACL_MAX];
    int rc;
    if (object) {
        rc = gw_object_acl_get(o, r->t.bucket, r->t.key, name);
    } else {
        struct gw_bucket_info bi;
        rc = gw_bucket_head(o, r->t.bucket, &bi);
        snprintf(name, sizeof(name), "%s", rc == 0 ? bi.acl : "");
    }
    if (rc == 0 && gw_acl_parse(name, object, out, NULL, 0) != GW_S3_OK)
        *out = GW_ACL_PRIVATE; /* a name this gateway does not know grants nothing */
    return rc;
}

static void get_acl(struct req *r)
{
    enum gw_acl a;
    int rc = current_acl(r, r->op == GW_OP_GET_OBJECT_ACL, &a);
    struct gw_buf b = {0};
    if (rc)
        answer_errno(r, rc, gw_s3_op_name(r->op));
    else if (gw_xml_acl(&b, r->srv->owner_id, "inec", a) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
}

/* Put{Bucket,Object}Acl: x-amz-acl or an AccessControlPolicy body, not both. */
static void put_acl(struct req *r)
{
    bool object = r->op == GW_OP_PUT_OBJECT_ACL;
    char acl[GW_ACL_MAX];
    enum gw_s3_err e = GW_S3_OK;
    if (header(r, "x-amz-acl") && r->body_len) {
        e = gw_s3_errorf(GW_S3_INVALID_REQUEST, r->msg, sizeof(r->msg),
                         "give x-amz-acl or an AccessControlPolicy body, not both");
    } else if (r->body_len) {
        enum gw_acl a;
        e = gw_acl_parse_policy(r->body, r->body_len, r->srv->owner_id, &a, r->msg, sizeof(r->msg));
        snprintf(acl, sizeof(acl), "%s", a == GW_ACL_PRIVATE ? "" : gw_acl_name(a));
    } else if (header(r, "x-amz-acl") || header(r, "x-amz-grant-read") ||
               header(r, "x-amz-grant-full-control") || header(r, "x-amz-grant-write") ||
               header(r, "x-amz-grant-read-acp") || header(r, "x-amz-grant-write-acp")) {
        e = request_acl(r, object, acl);
    } else {
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, r->msg, sizeof(r->msg),
                         "neither x-amz-acl nor an AccessControlPolicy body");
    }
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    int rc = object ? gw_object_acl_set(r->srv->objects, r->t.bucket, r->t.key, acl)
                    : gw_bucket_acl_set(r->srv->objects, r->t.bucket, acl);
    if (rc)
        answer_errno(r, rc, gw_s3_op_name(r->op));
    else
        answer_empty(r, 200);
}

/* Lifecycle rules between their S3 form (s3_xml*.h) and the bucket record's. */
static void put_lifecycle(struct req *r)
{
    struct gw_lifecycle_rule *rules;
    size_t n;
    enum gw_s3_err e =
        gw_xml_parse_lifecycle(r->body, r->body_len, &rules, &n, r->msg, sizeof(r->msg));
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_pack("{s:s,s:s,s:b,s:i}", "id", rules[i].id, "prefix",
                                               rules[i].prefix, "enabled", rules[i].enabled,
                                               "abort_days", rules[i].abort_days))) {
            json_decref(a);
            a = NULL;
        }
    gw_lifecycle_rules_free(rules, n);
    int rc = a ? gw_bucket_lifecycle_set(r->srv->objects, r->t.bucket, a) : -ENOMEM;
    json_decref(a);
    if (rc)
        answer_errno(r, rc, "PutBucketLifecycleConfiguration");
    else
        answer_empty(r, 200);
}

static void get_lifecycle(struct req *r)
{
    json_t *a;
    int rc = gw_bucket_lifecycle_get(r->srv->objects, r->t.bucket, &a);
    if (rc == -ENODATA) {
        answer_error(r, GW_S3_NO_SUCH_LIFECYCLE, NULL);
        return;
    }
    if (rc) {
        answer_errno(r, rc, "GetBucketLifecycleConfiguration");
        return;
    }
    size_t n = json_array_size(a), i;
    struct gw_lifecycle_rule *rules = calloc(n ? n : 1, sizeof(*rules));
    json_t *v;
    json_array_foreach(a, i, v) if (rules) rules[i] =
        (struct gw_lifecycle_rule){(char *)json_string_value(json_object_get(v, "id")),
                                   (char *)json_string_value(json_object_get(v, "prefix")),
                                   json_is_true(json_object_get(v, "enabled")),
                                   (int)json_integer_value(json_object_get(v, "abort_days"))};
    struct gw_buf b = {0};
    if (rules && gw_xml_lifecycle(&b, rules, n) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
    free(rules);
    json_decref(a);
}

/* An unsigned request: GET/HEAD of an object whose ACL lets anyone read it,
 * or a listing of (or HEAD on) a bucket whose ACL does; anything else stays
 * AccessDenied. A missing key of a bucket anyone may list is a 404 (its
 * absence is public); otherwise 403, saying nothing about what exists. */
static bool anonymous_allowed(struct req *r)
{
    enum gw_acl a;
    switch (r->op) {
    case GW_OP_GET_OBJECT:
    case GW_OP_HEAD_OBJECT:
        if (current_acl(r, true, &a) == 0)
            return gw_acl_anonymous_read(a);
        return current_acl(r, false, &a) == 0 && gw_acl_anonymous_read(a);
    case GW_OP_LIST_OBJECTS:
    case GW_OP_LIST_OBJECTS_V2:
    case GW_OP_LIST_OBJECT_VERSIONS:
    case GW_OP_HEAD_BUCKET:
        return current_acl(r, false, &a) == 0 && gw_acl_anonymous_read(a);
    default:
        return false;
    }
}

static void small_body_end(struct req *r)
{
    enum gw_s3_err e = body_end(r);
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    if (r->op == GW_OP_DELETE_OBJECTS) {
        delete_objects(r);
        return;
    }
    if (r->op == GW_OP_COMPLETE_MULTIPART_UPLOAD) {
        complete_multipart(r);
        return;
    }
    if (r->op == GW_OP_PUT_BUCKET_ACL || r->op == GW_OP_PUT_OBJECT_ACL) {
        put_acl(r);
        return;
    }
    if (r->op == GW_OP_PUT_BUCKET_LIFECYCLE) {
        put_lifecycle(r);
        return;
    }
    /* CreateBucket: the configuration's LocationConstraint is accepted and
     * ignored, the gateway has one region. Creating a bucket one owns again
     * is a success that keeps its contents in us-east-1 (S3's legacy rule),
     * BucketAlreadyOwnedByYou elsewhere; either way x-amz-acl sets its ACL. */
    char acl[GW_ACL_MAX];
    enum gw_s3_err ae = request_acl(r, false, acl);
    if (ae) {
        answer_error(r, ae, r->msg);
        return;
    }
    int rc = gw_bucket_create(r->srv->objects, r->t.bucket);
    if (rc == -EEXIST && strcmp(r->srv->region, "us-east-1") == 0)
        rc = 0;
    if (rc == 0 && (acl[0] || header(r, "x-amz-acl")))
        rc = gw_bucket_acl_set(r->srv->objects, r->t.bucket, acl);
    if (rc) {
        answer_errno(r, rc, "CreateBucket");
        return;
    }
    struct MHD_Response *resp = buffer_response(NULL, 0, NULL);
    if (resp) {
        char loc[GW_BUCKET_MAX + 2];
        snprintf(loc, sizeof(loc), "/%s", r->t.bucket);
        MHD_add_response_header(resp, "Location", loc);
        queue(r, 200, resp);
    }
}

/* ---- the benchmark floor (gw_s3_config.floor): no object layer ---- */

#define FLOOR_PERIOD ((1u << 20) + 4099)

static uint8_t floor_pattern[2 * FLOOR_PERIOD];
static pthread_once_t floor_once = PTHREAD_ONCE_INIT;

static void floor_init(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < FLOOR_PERIOD; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        floor_pattern[i] = floor_pattern[i + FLOOR_PERIOD] = (uint8_t)(x >> 32);
    }
}

const uint8_t *gw_s3_floor_bytes(const char *key, uint64_t off, size_t *len)
{
    pthread_once(&floor_once, floor_init);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    *len = FLOOR_PERIOD;
    return floor_pattern + (h % FLOOR_PERIOD + off % FLOOR_PERIOD) % FLOOR_PERIOD;
}

struct floor_stream {
    char key[GW_S3_KEY_MAX + 1];
};

static ssize_t floor_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct floor_stream *f = cls;
    size_t n;
    const uint8_t *p = gw_s3_floor_bytes(f->key, pos, &n);
    n = n < max ? n : max;
    memcpy(buf, p, n);
    return (ssize_t)n;
}

static void floor_begin(struct req *r)
{
    struct gw_s3_server *s = r->srv;
    char name[GW_BUCKET_MAX + GW_S3_KEY_MAX + 2];
    snprintf(name, sizeof(name), "%s/%s", r->t.bucket, r->t.key);
    if (r->op == GW_OP_CREATE_BUCKET) {
        answer_empty(r, 200);
    } else if (r->op == GW_OP_PUT_OBJECT) {
        enum gw_s3_err e = body_begin(r);
        if (e)
            answer_error(r, e, r->msg);
    } else if (r->op == GW_OP_GET_OBJECT) {
        pthread_mutex_lock(&s->floor_lock);
        json_t *v = json_object_get(s->floor_sizes, name);
        uint64_t size = (uint64_t)json_integer_value(v);
        pthread_mutex_unlock(&s->floor_lock);
        struct floor_stream *f = v ? malloc(sizeof(*f)) : NULL;
        if (!f) {
            answer_error(r, v ? GW_S3_INTERNAL_ERROR : GW_S3_NO_SUCH_KEY, NULL);
            return;
        }
        snprintf(f->key, sizeof(f->key), "%s", r->t.key);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(size, READ_BLOCK, floor_reader, f, free);
        if (resp) {
            r->bytes_out += size;
            queue(r, 200, resp);
        }
    } else {
        answer_error(r, GW_S3_NOT_IMPLEMENTED, "a benchmark floor serves PUT and GET only");
    }
}

static void floor_put_end(struct req *r)
{
    enum gw_s3_err e = body_end(r);
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    char name[GW_BUCKET_MAX + GW_S3_KEY_MAX + 2];
    snprintf(name, sizeof(name), "%s/%s", r->t.bucket, r->t.key);
    pthread_mutex_lock(&r->srv->floor_lock);
    int rc = json_object_set_new(r->srv->floor_sizes, name, json_integer((json_int_t)r->decoded));
    pthread_mutex_unlock(&r->srv->floor_lock);
    if (rc)
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    else
        answer_empty(r, 200);
}

/* partNumber of UploadPart(Copy) into r->part; answers when it is bad. */
static bool part_number(struct req *r)
{
    const char *v = gw_s3_query_get(&r->q, "partNumber");
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || n < 1 || n > GW_PART_MAX) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "partNumber must be an integer in 1..10000");
        return false;
    }
    r->part = (int)n;
    return true;
}

static void create_multipart(struct req *r)
{
    struct gw_object_info attrs = {0};
    enum gw_s3_err e = request_attrs(r, &attrs);
    if (e) {
        gw_object_info_clear(&attrs);
        answer_error(r, e, r->msg);
        return;
    }
    char uid[GW_UPLOAD_ID_LEN + 1];
    int rc = gw_mpu_create(r->srv->objects, r->t.bucket, r->t.key, &attrs, uid);
    gw_object_info_clear(&attrs);
    if (rc) {
        answer_errno(r, rc, "CreateMultipartUpload");
        return;
    }
    struct gw_buf b = {0};
    if (gw_xml_initiate_multipart(&b, r->t.bucket, r->t.key, uid) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
}

/* "bytes=first-last" of x-amz-copy-source-range within size. */
static bool copy_range(const char *h, uint64_t size, uint64_t *first, uint64_t *len)
{
    unsigned long long a, b;
    int end = 0;
    if (sscanf(h, "bytes=%llu-%llu%n", &a, &b, &end) != 2 || h[end] || a > b || b >= size)
        return false;
    *first = a;
    *len = b - a + 1;
    return true;
}

/* CopyObject and UploadPartCopy: the source is read through the object
 * layer and written again (re-encoded, its own chunks). */
static void copy_object(struct req *r)
{
    struct gw_objects *o = r->srv->objects;
    bool part = r->op == GW_OP_UPLOAD_PART_COPY;
    if (part && !part_number(r))
        return;
    const char *src = header(r, "x-amz-copy-source");
    char path[GW_BUCKET_MAX + 3 * GW_KEY_MAX + 8];
    snprintf(path, sizeof(path), "/%s", src[0] == '/' ? src + 1 : src);
    char *version = strchr(path, '?');
    if (version && strcmp(version, "?versionId=null") == 0) {
        *version = '\0'; /* the one version an object has */
    } else if (version) {
        answer_error(r, GW_S3_NOT_IMPLEMENTED, "copying a version is not implemented");
        return;
    }
    struct gw_s3_target from;
    if (gw_s3_parse_target(NULL, NULL, path, &from, r->msg, sizeof(r->msg)) != GW_S3_OK ||
        !from.key[0]) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "x-amz-copy-source must be bucket/key");
        return;
    }
    const char *dir = header(r, "x-amz-metadata-directive");
    bool replace = dir && strcmp(dir, "REPLACE") == 0;
    if (dir && !replace && strcmp(dir, "COPY") != 0) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "x-amz-metadata-directive is COPY or REPLACE");
        return;
    }
    if (!part && !replace && strcmp(from.bucket, r->t.bucket) == 0 &&
        strcmp(from.key, r->t.key) == 0) {
        answer_error(r, GW_S3_INVALID_REQUEST,
                     "copying an object onto itself needs x-amz-metadata-directive: REPLACE");
        return;
    }
    struct gw_object_info si = {0}, attrs = {0}, oi = {0};
    int rc = gw_object_head(o, from.bucket, from.key, &si);
    if (rc) {
        if (rc == -ENOENT && gw_bucket_head(o, from.bucket, NULL) == 0)
            answer_error(r, GW_S3_NO_SUCH_KEY, "the copy source does not exist");
        else if (rc == -ENOENT)
            answer_error(r, GW_S3_NO_SUCH_BUCKET, "the copy source's bucket does not exist");
        else
            answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    uint64_t first = 0, len = si.size;
    const char *range = part ? header(r, "x-amz-copy-source-range") : NULL;
    enum gw_s3_err e = GW_S3_OK;
    if (range && !copy_range(range, si.size, &first, &len))
        e = GW_S3_INVALID_RANGE;
    else if (len > MAX_OBJECT_SIZE)
        e = GW_S3_ENTITY_TOO_LARGE;
    else if (replace && !part)
        e = request_attrs(r, &attrs);
    else if (!part)
        e = request_acl(r, true, si.acl); /* a copy has its own ACL, never the source's */
    if (e) {
        gw_object_info_clear(&si);
        gw_object_info_clear(&attrs);
        answer_error(r, e, r->msg);
        return;
    }
    const char *uid = gw_s3_query_get(&r->q, "uploadId");
    struct gw_put *p = NULL;
    rc = part ? gw_mpu_part_begin(o, r->t.bucket, r->t.key, uid, &p)
              : gw_put_begin(o, r->t.bucket, r->t.key, replace ? &attrs : &si, &p);
    gw_object_info_clear(&attrs);
    struct gw_get *g = NULL;
    struct gw_object_info gi = {0};
    if (rc == 0 && len > 0) {
        rc = gw_get_begin(o, from.bucket, from.key, first, len, &gi, &g);
        if (rc == 0 && gi.version != si.version)
            rc = -EAGAIN; /* overwritten since the HEAD: its size may differ */
    }
    uint8_t *buf = rc == 0 ? malloc(READ_BLOCK) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    for (uint64_t left = g ? len : 0; rc == 0 && left > 0;) {
        ssize_t n = gw_get_read(g, buf, left < READ_BLOCK ? (size_t)left : READ_BLOCK);
        rc = n < 0 ? (int)n : n == 0 ? -EIO : gw_put_write(p, buf, (size_t)n);
        left -= n > 0 ? (uint64_t)n : 0;
    }
    free(buf);
    gw_get_end(g);
    gw_object_info_clear(&gi);
    gw_object_info_clear(&si);
    if (rc) {
        gw_put_abort(p);
    } else if (part) {
        struct gw_part_info pi;
        if ((rc = gw_mpu_part_commit(o, p, r->t.bucket, r->t.key, uid, r->part, &pi)) == 0) {
            snprintf(oi.etag, sizeof(oi.etag), "%s", pi.etag);
            oi.mtime_ns = pi.mtime_ns;
        }
    } else {
        rc = gw_put_commit(p, &oi);
    }
    if (rc) {
        answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    struct gw_buf b = {0};
    if (gw_xml_copy_result(&b, part, oi.etag, oi.mtime_ns / 1000000) == 0)
        answer_xml(r, 200, &b);
    else
        answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(&b);
    gw_object_info_clear(&oi);
}

static bool parse_max(const char *s, int dflt, int *out)
{
    if (!s) {
        *out = dflt;
        return true;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0)
        return false;
    *out = v > dflt ? dflt : (int)v;
    return true;
}

struct parts_walk {
    struct gw_xml_part *p;
    char (*etags)[33];
    int n, max;
};

static int parts_cb(const struct gw_part_info *pi, void *arg)
{
    struct parts_walk *w = arg;
    if (w->n == w->max + 1)
        return 1;
    memcpy(w->etags[w->n], pi->etag, 33);
    w->p[w->n] = (struct gw_xml_part){pi->number, pi->mtime_ns / 1000000, w->etags[w->n], pi->size};
    w->n++;
    return 0;
}

static void list_parts(struct req *r)
{
    int max, marker = 0;
    const char *m = gw_s3_query_get(&r->q, "part-number-marker");
    if (!parse_max(gw_s3_query_get(&r->q, "max-parts"), 1000, &max) ||
        (m && !parse_max(m, GW_PART_MAX, &marker))) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "max-parts or part-number-marker is malformed");
        return;
    }
    const char *uid = gw_s3_query_get(&r->q, "uploadId");
    struct parts_walk w = {calloc((size_t)max + 1, sizeof(*w.p)),
                           calloc((size_t)max + 1, sizeof(*w.etags)), 0, max};
    int rc = w.p && w.etags ? gw_mpu_list_parts(r->srv->objects, r->t.bucket, r->t.key, uid, marker,
                                                parts_cb, &w)
                            : -ENOMEM;
    if (rc) {
        answer_errno(r, rc, "ListParts");
    } else {
        bool truncated = w.n > max;
        struct gw_parts_page pg = {r->t.bucket,
                                   r->t.key,
                                   uid,
                                   marker,
                                   truncated && max > 0 ? w.p[max - 1].number : marker,
                                   max,
                                   truncated,
                                   w.p,
                                   truncated ? (size_t)max : (size_t)w.n};
        struct gw_buf b = {0};
        if (gw_xml_list_parts(&b, &pg) == 0)
            answer_xml(r, 200, &b);
        else
            answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        gw_buf_free(&b);
    }
    free(w.p);
    free(w.etags);
}

struct uploads_walk {
    const char *key_marker, *uid_marker;
    struct gw_xml_upload *u;
    int n, max;
    bool nomem;
};

static int uploads_cb(const char *key, const char *uid, int64_t initiated_ns, void *arg)
{
    struct uploads_walk *w = arg;
    if (w->key_marker) {
        int c = strcmp(key, w->key_marker);
        if (c < 0 || (c == 0 && (!w->uid_marker || strcmp(uid, w->uid_marker) <= 0)))
            return 0;
    }
    if (w->n == w->max + 1)
        return 1;
    char *k = strdup(key), *u = strdup(uid);
    if (!k || !u) {
        free(k);
        free(u);
        w->nomem = true;
        return 1;
    }
    w->u[w->n++] = (struct gw_xml_upload){k, u, initiated_ns / 1000000};
    return 0;
}

static void list_uploads(struct req *r)
{
    int max;
    if (!parse_max(gw_s3_query_get(&r->q, "max-uploads"), 1000, &max)) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "max-uploads is malformed");
        return;
    }
    const char *prefix = gw_s3_query_get(&r->q, "prefix");
    struct uploads_walk w = {gw_s3_query_get(&r->q, "key-marker"),
                             gw_s3_query_get(&r->q, "upload-id-marker"),
                             calloc((size_t)max + 1, sizeof(*w.u)),
                             0,
                             max,
                             false};
    int rc = w.u ? gw_mpu_list(r->srv->objects, r->t.bucket, prefix, uploads_cb, &w) : -ENOMEM;
    if (rc == 0 && w.nomem)
        rc = -ENOMEM;
    if (rc) {
        answer_errno(r, rc, "ListMultipartUploads");
    } else {
        bool truncated = w.n > max && max > 0;
        struct gw_uploads_page pg = {
            .bucket = r->t.bucket,
            .prefix = prefix,
            .key_marker = w.key_marker,
            .upload_id_marker = w.uid_marker,
            .next_key_marker = truncated ? w.u[max - 1].key : NULL,
            .next_upload_id_marker = truncated ? w.u[max - 1].upload_id : NULL,
            .max_uploads = max,
            .truncated = truncated,
            .uploads = w.u,
            .n = (size_t)(w.n > max ? max : w.n),
        };
        struct gw_buf b = {0};
        if (gw_xml_list_uploads(&b, &pg) == 0)
            answer_xml(r, 200, &b);
        else
            answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        gw_buf_free(&b);
    }
    for (int i = 0; w.u && i < w.n; i++) {
        free((char *)w.u[i].key);
        free((char *)w.u[i].upload_id);
    }
    free(w.u);
}

/* ---- the request's first call: route, authenticate, answer or open the body ---- */

static void begin(struct req *r, const char *method)
{
    struct gw_s3_server *s = r->srv;
    char *q = strchr(r->uri, '?');
    if (q) {
        *q = '\0';
        r->raw_query = q + 1;
    }
    enum gw_s3_err e = gw_s3_parse_target(header(r, "Host"), s->base_domain, r->uri, &r->t, r->msg,
                                          sizeof(r->msg));
    if (e) {
        answer_error(r, e, r->msg);
        return;
    }
    if (gw_volume_bucket(r->t.bucket)) { /* an S3 write there would corrupt a disk */
        answer_error(r, GW_S3_ACCESS_DENIED,
                     "buckets " GW_VOLUME_BUCKET_PREFIX "* hold block volumes: use NBD");
        return;
    }
    if (gw_s3_query_parse(r->raw_query, &r->q) != 0) {
        answer_error(r, GW_S3_INVALID_ARGUMENT, "the query string is malformed");
        return;
    }
    r->op = gw_s3_route(method, &r->t, &r->q, header, r);

    struct gw_sigv4_request sreq = {method, r->uri, r->raw_query, header, r, header_each};
    struct gw_sigv4_config scfg = {s->region, secret_of, s, now_ns(CLOCK_REALTIME) / 1000000000};
    e = gw_sigv4_verify(&sreq, &scfg, &r->auth, r->msg, sizeof(r->msg));
    if (e &&
        !(e == GW_S3_ACCESS_DENIED && r->auth.anonymous && !s->floor && anonymous_allowed(r))) {
        answer_error(r, e, r->msg);
        return;
    }
    if (s->floor) {
        floor_begin(r);
        return;
    }

    struct gw_objects *o = s->objects;
    struct gw_bucket_info bi;
    int rc;
    switch (r->op) {
    case GW_OP_LIST_BUCKETS:
        list_buckets(r);
        return;
    case GW_OP_HEAD_BUCKET:
        if ((rc = gw_bucket_head(o, r->t.bucket, &bi)) != 0)
            answer_errno(r, rc, "HeadBucket");
        else
            answer_empty(r, 200);
        return;
    case GW_OP_DELETE_BUCKET:
        if ((rc = gw_bucket_delete(o, r->t.bucket)) != 0)
            answer_errno(r, rc, "DeleteBucket");
        else
            answer_empty(r, 204);
        return;
    case GW_OP_GET_BUCKET_LOCATION:
        bucket_location(r);
        return;
    case GW_OP_LIST_OBJECTS:
        list_objects(r, 1);
        return;
    case GW_OP_LIST_OBJECTS_V2:
        list_objects(r, 2);
        return;
    case GW_OP_GET_OBJECT:
        get_object(r, false);
        return;
    case GW_OP_HEAD_OBJECT:
        get_object(r, true);
        return;
    case GW_OP_DELETE_OBJECT:
        rc = gw_object_delete(o, r->t.bucket, r->t.key);
        if (rc == -ENOENT && map_errno(r, rc) == GW_S3_NO_SUCH_KEY)
            rc = 0; /* S3 answers 204 for a key that is not there */
        if (rc)
            answer_errno(r, rc, "DeleteObject");
        else
            answer_empty(r, 204);
        return;
    case GW_OP_UPLOAD_PART:
        if (!part_number(r))
            return;
        /* fall through */
    case GW_OP_PUT_OBJECT:
        e = put_begin(r);
        if (e)
            answer_error(r, e, r->msg);
        return;
    case GW_OP_COPY_OBJECT:
    case GW_OP_UPLOAD_PART_COPY:
        copy_object(r);
        return;
    case GW_OP_CREATE_MULTIPART_UPLOAD:
        create_multipart(r);
        return;
    case GW_OP_ABORT_MULTIPART_UPLOAD:
        if ((rc = gw_mpu_abort(o, r->t.bucket, r->t.key, gw_s3_query_get(&r->q, "uploadId"))))
            answer_errno(r, rc, "AbortMultipartUpload");
        else
            answer_empty(r, 204);
        return;
    case GW_OP_LIST_PARTS:
        list_parts(r);
        return;
    case GW_OP_LIST_MULTIPART_UPLOADS:
        list_uploads(r);
        return;
    case GW_OP_GET_OBJECT_TAGGING: {
        struct gw_buf b = {0};
        if ((rc = gw_object_head(o, r->t.bucket, r->t.key, NULL)))
            answer_errno(r, rc, "GetObjectTagging");
        else if (gw_xml_empty_tagging(&b) == 0)
            answer_xml(r, 200, &b);
        else
            answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        gw_buf_free(&b);
        return;
    }
    case GW_OP_GET_BUCKET_ACL:
    case GW_OP_GET_OBJECT_ACL:
        get_acl(r);
        return;
    case GW_OP_LIST_OBJECT_VERSIONS:
        list_objects(r, 3);
        return;
    case GW_OP_GET_BUCKET_VERSIONING: {
        struct gw_buf b = {0};
        if ((rc = gw_bucket_head(o, r->t.bucket, &bi)))
            answer_errno(r, rc, "GetBucketVersioning");
        else if (gw_xml_versioning_off(&b) == 0)
            answer_xml(r, 200, &b);
        else
            answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        gw_buf_free(&b);
        return;
    }
    case GW_OP_GET_BUCKET_LIFECYCLE:
        get_lifecycle(r);
        return;
    case GW_OP_DELETE_BUCKET_LIFECYCLE:
        if ((rc = gw_bucket_lifecycle_set(o, r->t.bucket, NULL)))
            answer_errno(r, rc, "DeleteBucketLifecycle");
        else
            answer_empty(r, 204);
        return;
    case GW_OP_CREATE_BUCKET:
    case GW_OP_DELETE_OBJECTS:
    case GW_OP_COMPLETE_MULTIPART_UPLOAD:
    case GW_OP_PUT_BUCKET_ACL:
    case GW_OP_PUT_OBJECT_ACL:
    case GW_OP_PUT_BUCKET_LIFECYCLE:
        r->body_max = r->op == GW_OP_DELETE_OBJECTS              ? GW_S3_DELETE_MAX_BODY
                      : r->op == GW_OP_COMPLETE_MULTIPART_UPLOAD ? GW_S3_COMPLETE_MAX_BODY
                      : r->op == GW_OP_PUT_BUCKET_LIFECYCLE      ? GW_S3_LIFECYCLE_MAX_BODY
                      : r->op == GW_OP_CREATE_BUCKET             ? SMALL_BODY_MAX
                                                                 : GW_ACL_MAX_BODY;
        e = body_begin(r);
        if (e)
            answer_error(r, e, r->msg);
        else if (r->expect_len > (int64_t)r->body_max)
            answer_error(
                r, r->op != GW_OP_CREATE_BUCKET ? GW_S3_MALFORMED_XML : GW_S3_ENTITY_TOO_LARGE,
                "the request body is too large");
        return;
    case GW_OP_NOT_IMPLEMENTED:
        answer_error(r, GW_S3_NOT_IMPLEMENTED, "this operation is not implemented by inec");
        return;
    case GW_OP_METHOD_NOT_ALLOWED:
    case GW_OP_COUNT:
        answer_error(r, GW_S3_METHOD_NOT_ALLOWED, NULL);
        return;
    }
}

static void body(struct req *r, const char *data, size_t len)
{
    if (r->err)
        return; /* the rest of a failed body is read and dropped */
    enum gw_s3_err e = body_feed(r, &data, &len);
    if (r->srv->floor) {
        /* dropped: the floor stores nothing */
    } else if (!e && r->put && len) {
        int rc = gw_put_write(r->put, data, len);
        if (rc) {
            e = map_errno(r, rc);
            snprintf(r->msg, sizeof(r->msg), "storing the body failed: %s", strerror(-rc));
        }
    } else if (!e && !r->put && len) {
        if (r->body_len + len > r->body_max) {
            e = r->op != GW_OP_CREATE_BUCKET ? GW_S3_MALFORMED_XML : GW_S3_ENTITY_TOO_LARGE;
            snprintf(r->msg, sizeof(r->msg), "the request body is too large");
        } else {
            char *nb = realloc(r->body, r->body_len + len + 1);
            if (!nb) {
                e = GW_S3_INTERNAL_ERROR;
            } else {
                r->body = nb;
                memcpy(r->body + r->body_len, data, len);
                r->body_len += len;
                r->body[r->body_len] = '\0';
            }
        }
    }
    if (e) {
        r->err = e;
        if (r->put) {
            gw_put_abort(r->put);
            r->put = NULL;
        }
    }
}

static enum MHD_Result handle(struct req *r, struct MHD_Connection *conn, const char *method,
                              const char *upload_data, size_t *upload_data_size)
{
    if (!r->started) {
        r->started = true;
        r->conn = conn;
        gw_conn_guard_headers_done(conn);
        begin(r, method);
        if (r->reply && !drain_body(r))
            send_reply(r);
        return MHD_YES;
    }
    if (*upload_data_size && (r->answered || r->err)) {
        /* Answered before the body, or the body failed: the rest is read and
         * dropped so the client can read the answer, but only so much of it:
         * its length may be anything the client claimed (chunked), and MHD
         * cannot send an answer before the body has ended. Beyond that, the
         * connection is closed. */
        r->dropped += *upload_data_size;
        *upload_data_size = 0;
        if (r->dropped > DROP_MAX) {
            inec_log(INEC_LOG_INFO, "s3", "closing a connection whose refused body goes on");
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->answered) {
        send_reply(r);
        return MHD_YES;
    }
    if (r->err)
        answer_error(r, r->err, r->msg);
    else if (r->srv->floor)
        floor_put_end(r);
    else if (r->op == GW_OP_PUT_OBJECT || r->op == GW_OP_UPLOAD_PART)
        put_end(r);
    else
        small_body_end(r);
    send_reply(r);
    return r->answered ? MHD_YES : MHD_NO;
}

/* Every log line written while serving the request, here or on the fan-out
 * threads working for it, names the request's id (inec/log.h). */
static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    (void)cls, (void)url, (void)version;
    struct req *r = *con_cls;
    if (!r)
        return MHD_NO;
    inec_log_context_set(r->id);
    enum MHD_Result res = handle(r, conn, method, upload_data, upload_data_size);
    inec_log_context_set(NULL);
    return res;
}

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    struct gw_s3_server *s = cls;
    struct req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    if (!(r->uri = strdup(uri ? uri : "/"))) {
        free(r);
        return NULL;
    }
    r->srv = s;
    r->sum.algo = r->sum.sum.algo = GW_SUM_NONE;
    r->t0 = now_ns(CLOCK_MONOTONIC);
    r->op = GW_OP_NOT_IMPLEMENTED;
    snprintf(r->id, sizeof(r->id), "%016" PRIxFAST64,
             atomic_fetch_add_explicit(&s->next_id, 1, memory_order_relaxed));
    atomic_fetch_add(&s->inflight, 1);
    return r;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct gw_s3_server *s = cls;
    gw_conn_guard_request_done(conn);
    struct req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    inec_log_context_set(r->id);
    if (r->put) /* the client went away mid-body, or the body failed */
        gw_put_abort(r->put);
    if (r->reply) /* the client went away before its answer could go */
        MHD_destroy_response(r->reply);
    int status = r->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status >= 200 && status < 300)
        status = 0; /* cut short: counted as "other" */
    gw_metrics_record(s->metrics, r->op, status, (uint64_t)(now_ns(CLOCK_MONOTONIC) - r->t0),
                      r->bytes_in, r->bytes_out);
    gw_s3_query_free(&r->q);
    gw_payload_destroy(r->payload);
    gw_chunked_destroy(r->chunked);
    EVP_MD_CTX_free(r->md5);
    gw_s3_checksum_free(&r->sum);
    free(r->scratch);
    free(r->body);
    for (size_t i = 0; i < r->njoined; i++)
        free(r->joined[i]);
    free(r->uri);
    free(r);
    inec_log_context_set(NULL);
    atomic_fetch_sub(&s->inflight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    inec_log(INEC_LOG_DEBUG, "s3", "httpd: %s", line);
}

int gw_s3_server_start(const struct gw_s3_config *cfg, struct gw_objects *o, struct gw_metrics *m,
                       struct gw_s3_server **out, char *msg, size_t msglen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (gw_parse_listen(cfg->listen, &ss, &sslen) != 0) {
        snprintf(msg, msglen, "cannot parse listen address '%s' (want host:port)",
                 cfg->listen ? cfg->listen : "");
        return -EINVAL;
    }
    if (!cfg->access_key || !cfg->secret_key || !cfg->access_key[0] || !cfg->secret_key[0]) {
        snprintf(msg, msglen, "the S3 server needs an access key and a secret key");
        return -EINVAL;
    }
    struct gw_s3_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->objects = o;
    s->metrics = m;
    s->base_domain = cfg->base_domain ? strdup(cfg->base_domain) : NULL;
    s->region = strdup(cfg->region ? cfg->region : "us-east-1");
    s->access_key = strdup(cfg->access_key);
    s->secret_key = strdup(cfg->secret_key);
    s->floor = cfg->floor;
    s->keys = cfg->keys;
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(cfg->access_key, strlen(cfg->access_key), md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < mdlen && i < 32; i++)
        snprintf(s->owner_id + 2 * i, 3, "%02x", md[i]);
    pthread_mutex_init(&s->floor_lock, NULL);
    s->floor_sizes = json_object();
    atomic_init(&s->inflight, 0);
    uint64_t seed = 0;
    RAND_bytes((unsigned char *)&seed, sizeof(seed));
    atomic_init(&s->next_id, seed >> 16 << 16); /* ids unique across restarts */
    if ((cfg->base_domain && !s->base_domain) || !s->region || !s->access_key || !s->secret_key ||
        !s->floor_sizes) {
        gw_s3_server_stop(s, 0);
        return -ENOMEM;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    unsigned maxc = cfg->max_connections ? cfg->max_connections : MAX_CONNECTIONS;
    unsigned per_client = cfg->max_per_client ? cfg->max_per_client : MAX_PER_CLIENT;
    struct MHD_OptionItem tls[3];
    gw_tls_mhd_options(cfg->tls, tls, &flags);
    int rc = gw_conn_guard_start(cfg->header_timeout_s ? cfg->header_timeout_s : HEADER_TIMEOUT,
                                 maxc, per_client < maxc ? per_client : maxc, &s->guard);
    if (rc) {
        gw_s3_server_stop(s, 0);
        return rc;
    }
    /* The guard applies the limits (it tells idle connections from active
     * ones); MHD's own limit only bounds the threads in all. */
    s->daemon = MHD_start_daemon(
        flags, 0, gw_conn_guard_accept, s->guard, handler, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_URI_LOG_CALLBACK, uri_log, s,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        gw_conn_guard_notify, s->guard, MHD_OPTION_CONNECTION_LIMIT, maxc + CLOSING_SLACK,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_SEC,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(msg, msglen, "cannot listen on %s (in use, or not an address of this host)",
                 cfg->listen);
        gw_s3_server_stop(s, 0);
        return -EADDRINUSE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
}

uint16_t gw_s3_server_port(const struct gw_s3_server *s)
{
    return s->port;
}

void gw_s3_server_stop(struct gw_s3_server *s, int drain_ms)
{
    if (!s)
        return;
    if (s->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t)drain_ms * 1000000;
        while (atomic_load(&s->inflight) > 0 && now_ns(CLOCK_MONOTONIC) < deadline)
            usleep(10000);
        MHD_stop_daemon(s->daemon);
    }
    gw_conn_guard_stop(s->guard);
    free(s->base_domain);
    free(s->region);
    free(s->access_key);
    free(s->secret_key);
    json_decref(s->floor_sizes);
    pthread_mutex_destroy(&s->floor_lock);
    free(s);
}
