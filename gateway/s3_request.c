/* S3 request targets, queries and the routing table. */
#include "gateway/s3_request.h"
#include "inec/hostport.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <netdb.h>
#include <netinet/in.h>

#include <openssl/evp.h>

#include <openssl/crypto.h>

/* Decodes src[0, len) into dst (at most dstlen - 1 bytes plus NUL).
 * Returns the decoded length, -EINVAL for a bad escape or a NUL byte,
 * -EILSEQ when the bytes are not UTF-8 (S3 keys and parameters are text: a
 * record could not hold them, nor a listing show them), -ENAMETOOLONG when
 * it does not fit. */
static ssize_t pct_decode(const char *src, size_t len, char *dst, size_t dstlen, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= len || (h = OPENSSL_hexchar2int((unsigned char)src[i + 1])) < 0 ||
                (l = OPENSSL_hexchar2int((unsigned char)src[i + 2])) < 0)
                return -EINVAL;
            c = h * 16 + l;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        if (c == 0)
            return -EINVAL;
        if (o + 1 >= dstlen)
            return -ENAMETOOLONG;
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    json_t *text = json_stringn(dst, o); /* jansson's UTF-8 check */
    json_decref(text);
    return text ? (ssize_t)o : -EILSEQ;
}

bool gw_s3_bucket_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n < 3 || n > GW_BUCKET_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
            return false;
    }
    if (!isalnum((unsigned char)name[0]) || !isalnum((unsigned char)name[n - 1]))
        return false;
    if (strstr(name, "..") || strstr(name, ".-") || strstr(name, "-."))
        return false;
    if (strncmp(name, "xn--", 4) == 0 || (n > 8 && strcmp(name + n - 8, "-s3alias") == 0))
        return false;
    unsigned a, b, c, d;
    char tail;
    if (sscanf(name, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4)
        return false; /* formatted like an IP address */
    return true;
}

enum gw_s3_err gw_s3_parse_target(const char *host, const char *base_domain, const char *raw_path,
                                  struct gw_s3_target *t, char *msg, size_t msglen)
{
    memset(t, 0, sizeof(*t));
    if (!raw_path || raw_path[0] != '/') {
        snprintf(msg, msglen, "the request path must start with '/'");
        return GW_S3_INVALID_ARGUMENT;
    }
    const char *path = raw_path + 1;

    /* Virtual-host style: Host is "<bucket>.<base domain>", maybe with a port. */
    if (host && base_domain && base_domain[0]) {
        size_t hlen = strcspn(host, ":");
        if (host[0] == '[')
            hlen = strlen(host); /* IPv6 literal: never a bucket */
        size_t blen = strlen(base_domain);
        if (hlen > blen + 1 && host[hlen - blen - 1] == '.' &&
            strncasecmp(host + hlen - blen, base_domain, blen) == 0) {
            size_t n = hlen - blen - 1;
            if (n > GW_BUCKET_MAX) {
                snprintf(msg, msglen, "bucket name longer than %d bytes", GW_BUCKET_MAX);
                return GW_S3_INVALID_BUCKET_NAME;
            }
            memcpy(t->bucket, host, n);
            t->bucket[n] = '\0';
            t->virtual_host = true;
        }
    }

    if (!t->virtual_host) {
        size_t blen = strcspn(path, "/");
        if (blen > 0) {
            char tmp[3 * GW_BUCKET_MAX + 1];
            ssize_t r = blen < sizeof(tmp) ? pct_decode(path, blen, tmp, GW_BUCKET_MAX + 1, false)
                                           : -ENAMETOOLONG;
            if (r < 0) {
                snprintf(msg, msglen, "bucket name is not valid");
                return GW_S3_INVALID_BUCKET_NAME;
            }
            memcpy(t->bucket, tmp, (size_t)r + 1);
        }
        path += blen;
        if (*path == '/')
            path++;
    }
    if (t->bucket[0] && !gw_s3_bucket_name_valid(t->bucket)) {
        snprintf(msg, msglen, "bucket name '%s' breaks S3's naming rules", t->bucket);
        return GW_S3_INVALID_BUCKET_NAME;
    }
    if (*path) {
        if (!t->bucket[0]) {
            snprintf(msg, msglen, "an object key needs a bucket");
            return GW_S3_INVALID_ARGUMENT;
        }
        ssize_t r = pct_decode(path, strlen(path), t->key, sizeof(t->key), false);
        if (r == -ENAMETOOLONG) {
            snprintf(msg, msglen, "key longer than %d bytes", GW_KEY_MAX);
            return GW_S3_KEY_TOO_LONG;
        }
        if (r < 0) {
            snprintf(msg, msglen,
                     r == -EILSEQ ? "key is not UTF-8"
                                  : "key holds a malformed escape or a NUL byte");
            return GW_S3_INVALID_ARGUMENT;
        }
    }
    return GW_S3_OK;
}

int gw_s3_query_parse(const char *raw, struct gw_s3_query *q)
{
    memset(q, 0, sizeof(*q));
    if (!raw)
        return 0;
    const char *s = raw;
    while (*s) {
        size_t len = strcspn(s, "&");
        if (len > 0) {
            if (q->n == GW_S3_QUERY_MAX_PARAMS)
                return -EINVAL;
            const char *eq = memchr(s, '=', len);
            size_t nlen = eq ? (size_t)(eq - s) : len;
            size_t vlen = eq ? len - nlen - 1 : 0;
            struct gw_s3_param *p = &q->p[q->n];
            p->name = malloc(nlen + 1);
            p->value = malloc(vlen + 1);
            if (!p->name || !p->value) {
                free(p->name);
                free(p->value);
                p->name = p->value = NULL;
                return -ENOMEM;
            }
            q->n++;
            if (pct_decode(s, nlen, p->name, nlen + 1, true) < 0 ||
                pct_decode(eq ? eq + 1 : "", vlen, p->value, vlen + 1, true) < 0)
                return -EINVAL;
        }
        s += len;
        if (*s == '&')
            s++;
    }
    return 0;
}

void gw_s3_query_free(struct gw_s3_query *q)
{
    for (size_t i = 0; i < q->n; i++) {
        free(q->p[i].name);
        free(q->p[i].value);
    }
    q->n = 0;
}

const char *gw_s3_query_get(const struct gw_s3_query *q, const char *name)
{
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->p[i].name, name) == 0)
            return q->p[i].value;
    return NULL;
}

/* Sub-resources S3 defines on buckets and objects: a request naming one the
 * table below does not route is NotImplemented, never a plain GET or PUT. */
static const char *const subresources[] = {"accelerate",
                                           "acl",
                                           "analytics",
                                           "attributes",
                                           "cors",
                                           "delete",
                                           "encryption",
                                           "intelligent-tiering",
                                           "inventory",
                                           "legal-hold",
                                           "lifecycle",
                                           "location",
                                           "logging",
                                           "metrics",
                                           "notification",
                                           "object-lock",
                                           "ownershipControls",
                                           "partNumber",
                                           "policy",
                                           "policyStatus",
                                           "publicAccessBlock",
                                           "replication",
                                           "requestPayment",
                                           "restore",
                                           "retention",
                                           "select",
                                           "tagging",
                                           "torrent",
                                           "uploadId",
                                           "uploads",
                                           "versionId",
                                           "versioning",
                                           "versions",
                                           "website",
                                           NULL};

static bool has_subresource(const struct gw_s3_query *q)
{
    for (const char *const *s = subresources; *s; s++) {
        const char *v = gw_s3_query_get(q, *s);
        if (v && !(strcmp(*s, "versionId") == 0 && strcmp(v, "null") == 0))
            return true;
    }
    return false;
}

enum level { SERVICE, BUCKET, OBJECT };

/*
 * First matching row wins. subres NULL: the request names no sub-resource;
 * header: the row needs it present (x-amz-copy-source tells CopyObject from
 * PutObject); query/value: a parameter that must have that value.
 */
static const struct route {
    const char *method;
    enum level level;
    const char *subres;
    const char *header;
    const char *param, *value;
    enum gw_s3_op op;
} routes[] = {
    {"GET", SERVICE, NULL, NULL, NULL, NULL, GW_OP_LIST_BUCKETS},
    {"PUT", BUCKET, NULL, NULL, NULL, NULL, GW_OP_CREATE_BUCKET},
    {"HEAD", BUCKET, NULL, NULL, NULL, NULL, GW_OP_HEAD_BUCKET},
    {"DELETE", BUCKET, NULL, NULL, NULL, NULL, GW_OP_DELETE_BUCKET},
    {"GET", BUCKET, "location", NULL, NULL, NULL, GW_OP_GET_BUCKET_LOCATION},
    {"GET", BUCKET, NULL, NULL, "list-type", "2", GW_OP_LIST_OBJECTS_V2},
    {"GET", BUCKET, NULL, NULL, NULL, NULL, GW_OP_LIST_OBJECTS},
    {"POST", BUCKET, "delete", NULL, NULL, NULL, GW_OP_DELETE_OBJECTS},
    {"GET", OBJECT, "tagging", NULL, NULL, NULL, GW_OP_GET_OBJECT_TAGGING},
    {"GET", BUCKET, "acl", NULL, NULL, NULL, GW_OP_GET_BUCKET_ACL},
    {"PUT", BUCKET, "acl", NULL, NULL, NULL, GW_OP_PUT_BUCKET_ACL},
    {"GET", OBJECT, "acl", NULL, NULL, NULL, GW_OP_GET_OBJECT_ACL},
    {"PUT", OBJECT, "acl", NULL, NULL, NULL, GW_OP_PUT_OBJECT_ACL},
    {"GET", BUCKET, "versions", NULL, NULL, NULL, GW_OP_LIST_OBJECT_VERSIONS},
    {"GET", BUCKET, "versioning", NULL, NULL, NULL, GW_OP_GET_BUCKET_VERSIONING},
    {"GET", BUCKET, "lifecycle", NULL, NULL, NULL, GW_OP_GET_BUCKET_LIFECYCLE},
    {"PUT", BUCKET, "lifecycle", NULL, NULL, NULL, GW_OP_PUT_BUCKET_LIFECYCLE},
    {"DELETE", BUCKET, "lifecycle", NULL, NULL, NULL, GW_OP_DELETE_BUCKET_LIFECYCLE},
    {"GET", BUCKET, "uploads", NULL, NULL, NULL, GW_OP_LIST_MULTIPART_UPLOADS},
    {"POST", OBJECT, "uploads", NULL, NULL, NULL, GW_OP_CREATE_MULTIPART_UPLOAD},
    {"POST", OBJECT, "uploadId", NULL, NULL, NULL, GW_OP_COMPLETE_MULTIPART_UPLOAD},
    {"PUT", OBJECT, "uploadId", "x-amz-copy-source", NULL, NULL, GW_OP_UPLOAD_PART_COPY},
    {"PUT", OBJECT, "uploadId", NULL, NULL, NULL, GW_OP_UPLOAD_PART},
    {"GET", OBJECT, "uploadId", NULL, NULL, NULL, GW_OP_LIST_PARTS},
    {"DELETE", OBJECT, "uploadId", NULL, NULL, NULL, GW_OP_ABORT_MULTIPART_UPLOAD},
    {"PUT", OBJECT, NULL, "x-amz-copy-source", NULL, NULL, GW_OP_COPY_OBJECT},
    {"PUT", OBJECT, NULL, NULL, NULL, NULL, GW_OP_PUT_OBJECT},
    {"GET", OBJECT, NULL, NULL, NULL, NULL, GW_OP_GET_OBJECT},
    {"HEAD", OBJECT, NULL, NULL, NULL, NULL, GW_OP_HEAD_OBJECT},
    {"GET", OBJECT, "partNumber", NULL, NULL, NULL, GW_OP_GET_OBJECT},
    {"HEAD", OBJECT, "partNumber", NULL, NULL, NULL, GW_OP_HEAD_OBJECT},
    {"DELETE", OBJECT, NULL, NULL, NULL, NULL, GW_OP_DELETE_OBJECT},
};

const char *const gw_s3_op_names[GW_OP_COUNT] = {
    [GW_OP_LIST_BUCKETS] = "ListBuckets",
    [GW_OP_CREATE_BUCKET] = "CreateBucket",
    [GW_OP_HEAD_BUCKET] = "HeadBucket",
    [GW_OP_DELETE_BUCKET] = "DeleteBucket",
    [GW_OP_GET_BUCKET_LOCATION] = "GetBucketLocation",
    [GW_OP_LIST_OBJECTS] = "ListObjects",
    [GW_OP_LIST_OBJECTS_V2] = "ListObjectsV2",
    [GW_OP_DELETE_OBJECTS] = "DeleteObjects",
    [GW_OP_PUT_OBJECT] = "PutObject",
    [GW_OP_GET_OBJECT] = "GetObject",
    [GW_OP_HEAD_OBJECT] = "HeadObject",
    [GW_OP_DELETE_OBJECT] = "DeleteObject",
    [GW_OP_COPY_OBJECT] = "CopyObject",
    [GW_OP_CREATE_MULTIPART_UPLOAD] = "CreateMultipartUpload",
    [GW_OP_UPLOAD_PART] = "UploadPart",
    [GW_OP_UPLOAD_PART_COPY] = "UploadPartCopy",
    [GW_OP_COMPLETE_MULTIPART_UPLOAD] = "CompleteMultipartUpload",
    [GW_OP_ABORT_MULTIPART_UPLOAD] = "AbortMultipartUpload",
    [GW_OP_LIST_PARTS] = "ListParts",
    [GW_OP_LIST_MULTIPART_UPLOADS] = "ListMultipartUploads",
    [GW_OP_GET_OBJECT_TAGGING] = "GetObjectTagging",
    [GW_OP_GET_BUCKET_ACL] = "GetBucketAcl",
    [GW_OP_PUT_BUCKET_ACL] = "PutBucketAcl",
    [GW_OP_GET_OBJECT_ACL] = "GetObjectAcl",
    [GW_OP_PUT_OBJECT_ACL] = "PutObjectAcl",
    [GW_OP_LIST_OBJECT_VERSIONS] = "ListObjectVersions",
    [GW_OP_GET_BUCKET_VERSIONING] = "GetBucketVersioning",
    [GW_OP_GET_BUCKET_LIFECYCLE] = "GetBucketLifecycleConfiguration",
    [GW_OP_PUT_BUCKET_LIFECYCLE] = "PutBucketLifecycleConfiguration",
    [GW_OP_DELETE_BUCKET_LIFECYCLE] = "DeleteBucketLifecycle",
    [GW_OP_NOT_IMPLEMENTED] = "NotImplemented",
    [GW_OP_METHOD_NOT_ALLOWED] = "MethodNotAllowed",
};

const char *gw_s3_op_name(enum gw_s3_op op)
{
    return op < GW_OP_COUNT ? gw_s3_op_names[op] : "Unknown";
}

enum gw_s3_op gw_s3_route(const char *method, const struct gw_s3_target *t,
                          const struct gw_s3_query *q, gw_header_fn header, void *header_arg)
{
    enum level level = !t->bucket[0] ? SERVICE : !t->key[0] ? BUCKET : OBJECT;
    bool subres = has_subresource(q);
    bool known_method = false;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct route *r = &routes[i];
        if (strcmp(r->method, method) != 0)
            continue;
        known_method = true;
        if (r->level != level)
            continue;
        if (r->subres ? !gw_s3_query_get(q, r->subres) : subres)
            continue;
        if (r->header && !(header && header(header_arg, r->header)))
            continue;
        if (r->param) {
            const char *v = gw_s3_query_get(q, r->param);
            if (!v || strcmp(v, r->value) != 0)
                continue;
        }
        return r->op;
    }
    if (!known_method || subres)
        return GW_OP_NOT_IMPLEMENTED;
    return GW_OP_METHOD_NOT_ALLOWED;
}

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static void utc(int64_t unix_ns, struct tm *tm, int *ms)
{
    int64_t s = unix_ns / 1000000000;
    int64_t rem = unix_ns % 1000000000;
    if (rem < 0) {
        s--;
        rem += 1000000000;
    }
    time_t tt = (time_t)s;
    gmtime_r(&tt, tm);
    *ms = (int)(rem / 1000000);
}

void gw_http_date(int64_t unix_ns, char out[30])
{
    struct tm tm;
    int ms;
    utc(unix_ns, &tm, &ms);
    char tmp[64]; /* room for what the compiler cannot prove out of range */
    snprintf(tmp, sizeof(tmp), "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday % 7],
             tm.tm_mday, months[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
    memcpy(out, tmp, 29);
    out[29] = '\0';
}

struct meta_walk {
    json_t *obj;
    size_t bytes;
    bool nomem, bad;
};

static void meta_one(void *arg, const char *name, const char *value)
{
    struct meta_walk *w = arg;
    static const char prefix[] = "x-amz-meta-";
    if (strncasecmp(name, prefix, sizeof(prefix) - 1) != 0)
        return;
    const char *n = name + sizeof(prefix) - 1;
    char lower[256];
    size_t len = strlen(n);
    if (len == 0)
        return;
    w->bytes += len + strlen(value);
    if (len >= sizeof(lower))
        return; /* counted: it makes the set too large */
    for (size_t i = 0; i <= len; i++)
        lower[i] = (char)tolower((unsigned char)n[i]);
    json_t *v = json_string(value);
    if (!v) /* not UTF-8 (clients send ASCII, RFC 2047 for the rest) */
        w->bad = true;
    else if (json_object_set_new(w->obj, lower, v) != 0)
        w->nomem = true;
}

enum gw_s3_err gw_s3_user_meta(gw_header_each_fn each, void *arg, json_t **out, char *msg,
                               size_t msglen)
{
    struct meta_walk w = {json_object(), 0, false, false};
    *out = NULL;
    if (!w.obj)
        return GW_S3_INTERNAL_ERROR;
    each(arg, meta_one, &w);
    if (w.nomem) {
        json_decref(w.obj);
        return GW_S3_INTERNAL_ERROR;
    }
    if (w.bad) {
        json_decref(w.obj);
        snprintf(msg, msglen, "user metadata values must be UTF-8");
        return GW_S3_INVALID_ARGUMENT;
    }
    if (w.bytes > GW_S3_META_MAX) {
        json_decref(w.obj);
        snprintf(msg, msglen, "user metadata is %zu bytes, more than the %d allowed", w.bytes,
                 GW_S3_META_MAX);
        return GW_S3_METADATA_TOO_LARGE;
    }
    *out = w.obj;
    return GW_S3_OK;
}

int gw_s3_content_md5(const char *header, uint8_t md5[16])
{
    uint8_t raw[20];
    if (!header || strlen(header) != 24 || header[22] != '=' || header[23] != '=')
        return -EINVAL;
    if (EVP_DecodeBlock(raw, (const unsigned char *)header, 24) != 18)
        return -EINVAL;
    memcpy(md5, raw, 16);
    return 0;
}

int gw_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[96], p[8];
    memset(ss, 0, sizeof(*ss));
    if (inec_hostport_split(listen, host, sizeof(host), p, sizeof(p)))
        return -EINVAL;
    if (strcmp(host, "localhost") == 0 || host[0] == '\0')
        strcpy(host, host[0] ? "127.0.0.1" : "0.0.0.0");
    /* Numeric only (no name service at start-up); a link-local IPv6 address
     * keeps its scope (fe80::1%eth0). */
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM},
                    *res;
    if (getaddrinfo(host, p, &hints, &res))
        return -EINVAL;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}
