/* Buckets: ListBuckets, CreateBucket, HEAD, DELETE, their location and
 * versioning, and the listings of their objects (s3_list.h's rules). */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/s3_list.h"
#include "gateway/s3_xml.h"
#include "volume/volume.h"

struct bucket_walk {
    struct gw_xml_bucket *b;
    char (*names)[GW_BUCKET_MAX + 1];
    size_t n, cap;
};

static int bucket_cb(const struct gw_bucket_info *b, void *arg)
{
    struct bucket_walk *w = arg;
    if (gw_volume_bucket(b->name))
        return 0; /* a volume's stripes: not S3's (s3_server.c's begin) */
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

void gw_s3_list_buckets(struct gw_s3_req *r)
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
        gw_s3_answer_errno(r, rc, "ListBuckets");
    else
        gw_s3_answer_xml(r, 200, &b);
    gw_buf_free(&b);
}

void gw_s3_bucket_location(struct gw_s3_req *r)
{
    struct gw_bucket_info bi;
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc) {
        gw_s3_answer_errno(r, rc, "GetBucketLocation");
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
    gw_s3_answer_xml(r, 200, &b);
}

/* CreateBucket: the configuration's LocationConstraint is accepted and
 * ignored, the gateway has one region. Creating a bucket one owns again
 * is a success that keeps its contents in us-east-1 (S3's legacy rule),
 * BucketAlreadyOwnedByYou elsewhere; either way x-amz-acl sets its ACL. */
void gw_s3_create_bucket(struct gw_s3_req *r)
{
    char acl[GW_ACL_MAX];
    enum gw_s3_err ae = gw_s3_request_acl(r, false, acl);
    if (ae) {
        gw_s3_answer_error(r, ae, r->msg);
        return;
    }
    int rc = gw_bucket_create(r->srv->objects, r->t.bucket);
    if (rc == -EEXIST && strcmp(r->srv->region, "us-east-1") == 0)
        rc = 0;
    if (rc == 0 && (acl[0] || gw_s3_header(r, "x-amz-acl")))
        rc = gw_bucket_acl_set(r->srv->objects, r->t.bucket, acl);
    if (rc) {
        gw_s3_answer_errno(r, rc, "CreateBucket");
        return;
    }
    struct MHD_Response *resp = gw_s3_buffer_response(NULL, 0, NULL);
    if (resp) {
        char loc[GW_BUCKET_MAX + 2];
        snprintf(loc, sizeof(loc), "/%s", r->t.bucket);
        MHD_add_response_header(resp, "Location", loc);
        gw_s3_queue(r, 200, resp);
    }
}

void gw_s3_head_bucket(struct gw_s3_req *r)
{
    struct gw_bucket_info bi;
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc)
        gw_s3_answer_errno(r, rc, "HeadBucket");
    else
        gw_s3_answer_empty(r, 200);
}

void gw_s3_delete_bucket(struct gw_s3_req *r)
{
    int rc = gw_bucket_delete(r->srv->objects, r->t.bucket);
    if (rc)
        gw_s3_answer_errno(r, rc, "DeleteBucket");
    else
        gw_s3_answer_empty(r, 204);
}

/* Versioning is never enabled: an empty VersioningConfiguration. */
void gw_s3_bucket_versioning(struct gw_s3_req *r)
{
    struct gw_bucket_info bi;
    struct gw_buf b = {0};
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc)
        gw_s3_answer_errno(r, rc, "GetBucketVersioning");
    else
        gw_s3_answer_doc(r, gw_xml_versioning_off(&b), &b);
}

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
void gw_s3_list_objects(struct gw_s3_req *r, int version)
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
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT, "max-keys must be a non-negative integer");
        return;
    }
    if (enc && strcmp(enc, "url") != 0) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT,
                           "Invalid Encoding Method specified in Request");
        return;
    }
    if (vid_marker && !marker) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT,
                           "A version-id marker cannot be specified without a key marker.");
        return;
    }
    char token_key[GW_S3_KEY_MAX + 1];
    const char *after = marker;
    if (version == 2) {
        after = start_after;
        if (token) {
            if (gw_list_token_decode(token, token_key, sizeof(token_key)) != 0) {
                gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT,
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
    /* max-keys + 1 keys tell whether the listing is truncated (a delimiter
     * may take more: the object layer then asks for full pages). */
    rc = gw_object_list(r->srv->objects, r->t.bucket, prefix, after, (size_t)max_keys + 1, list_cb,
                        w);
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
        gw_s3_answer_errno(r, rc, "ListObjects");
    else
        gw_s3_answer_xml(r, 200, &b);
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
