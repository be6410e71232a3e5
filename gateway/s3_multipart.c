/* Multipart uploads: create, complete, abort, and the listings of parts
 * and uploads (UploadPart is a PUT: s3_objects.c; UploadPartCopy: s3_copy.c). */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/s3_xml.h"
#include "gateway/s3_xml_parse.h"

/* partNumber of UploadPart(Copy) into r->part; answers when it is bad. */
bool gw_s3_part_number(struct gw_s3_req *r)
{
    const char *v = gw_s3_query_get(&r->q, "partNumber");
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || n < 1 || n > GW_PART_MAX) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT, "partNumber must be an integer in 1..10000");
        return false;
    }
    r->part = (int)n;
    return true;
}

void gw_s3_create_multipart(struct gw_s3_req *r)
{
    struct gw_object_info attrs = {0};
    enum gw_s3_err e = gw_s3_request_attrs(r, &attrs);
    if (e) {
        gw_object_info_clear(&attrs);
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    char uid[GW_UPLOAD_ID_LEN + 1];
    int rc = gw_mpu_create(r->srv->objects, r->t.bucket, r->t.key, &attrs, uid);
    gw_object_info_clear(&attrs);
    if (rc) {
        gw_s3_answer_errno(r, rc, "CreateMultipartUpload");
        return;
    }
    struct gw_buf b = {0};
    gw_s3_answer_doc(r, gw_xml_initiate_multipart(&b, r->t.bucket, r->t.key, uid), &b);
}

void gw_s3_complete_multipart(struct gw_s3_req *r)
{
    struct gw_complete_request *c = NULL;
    enum gw_s3_err e =
        gw_xml_parse_complete(r->body ? r->body : "", r->body_len, &c, r->msg, sizeof(r->msg));
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    struct gw_part_info *parts = calloc(c->n, sizeof(*parts));
    if (!parts) {
        gw_complete_request_free(c);
        gw_s3_answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
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
    int rc =
        gw_mpu_complete(r->srv->objects, r->t.bucket, r->t.key, gw_s3_query_get(&r->q, "uploadId"),
                        parts, c->n, gw_s3_create_only(r), &oi);
    free(parts);
    gw_complete_request_free(c);
    if (rc) {
        gw_s3_answer_errno(r, rc, "CompleteMultipartUpload");
        return;
    }
    char loc[GW_BUCKET_MAX + GW_KEY_MAX + 3];
    snprintf(loc, sizeof(loc), "/%s/%s", r->t.bucket, r->t.key);
    struct gw_buf b = {0};
    gw_s3_answer_doc(r, gw_xml_complete_multipart(&b, loc, r->t.bucket, r->t.key, oi.etag), &b);
    gw_object_info_clear(&oi);
}

void gw_s3_abort_multipart(struct gw_s3_req *r)
{
    int rc =
        gw_mpu_abort(r->srv->objects, r->t.bucket, r->t.key, gw_s3_query_get(&r->q, "uploadId"));
    if (rc)
        gw_s3_answer_errno(r, rc, "AbortMultipartUpload");
    else
        gw_s3_answer_empty(r, 204);
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

void gw_s3_list_parts(struct gw_s3_req *r)
{
    int max, marker = 0;
    const char *m = gw_s3_query_get(&r->q, "part-number-marker");
    if (!parse_max(gw_s3_query_get(&r->q, "max-parts"), 1000, &max) ||
        (m && !parse_max(m, GW_PART_MAX, &marker))) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT,
                           "max-parts or part-number-marker is malformed");
        return;
    }
    const char *uid = gw_s3_query_get(&r->q, "uploadId");
    struct parts_walk w = {calloc((size_t)max + 1, sizeof(*w.p)),
                           calloc((size_t)max + 1, sizeof(*w.etags)), 0, max};
    int rc = w.p && w.etags ? gw_mpu_list_parts(r->srv->objects, r->t.bucket, r->t.key, uid, marker,
                                                parts_cb, &w)
                            : -ENOMEM;
    if (rc) {
        gw_s3_answer_errno(r, rc, "ListParts");
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
        gw_s3_answer_doc(r, gw_xml_list_parts(&b, &pg), &b);
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

void gw_s3_list_uploads(struct gw_s3_req *r)
{
    int max;
    if (!parse_max(gw_s3_query_get(&r->q, "max-uploads"), 1000, &max)) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT, "max-uploads is malformed");
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
        gw_s3_answer_errno(r, rc, "ListMultipartUploads");
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
        gw_s3_answer_doc(r, gw_xml_list_uploads(&b, &pg), &b);
    }
    for (int i = 0; w.u && i < w.n; i++) {
        free((char *)w.u[i].key);
        free((char *)w.u[i].upload_id);
    }
    free(w.u);
}
