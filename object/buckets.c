/*
 * Buckets: their records in the store bucket ".", create, delete when
 * empty (no objects, no multipart uploads), head, list, ACL and other
 * fields. A record's "created" tells a bucket from one deleted and created
 * again under its name (put.c checks it at a PUT's commit).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "object/objects_internal.h"

static int bucket_rec(struct gw_objects *o, const char *name, json_t **rec)
{
    if (!gw_valid_bucket(name))
        return -EINVAL;
    int rc = gw_meta_read(o, GW_META_BUCKET, name, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    return rc;
}

int gw_bucket_create_in_pool(struct gw_objects *o, const char *name, const char *pool)
{
    if (!gw_valid_bucket(name))
        return -EINVAL;
    if (!gw_pool_find(o, pool))
        return -ENOENT;
    json_t *prev = NULL;
    int rc = gw_meta_read(o, GW_META_BUCKET, name, &prev);
    if (rc && rc != -ENOENT)
        return rc;
    if (prev && !gw_rec_deleted(prev)) {
        json_decref(prev);
        return -EEXIST;
    }
    json_t *rec = json_pack("{s:I,s:b,s:I,s:s}", "version", (json_int_t)gw_next_version(o, prev),
                            "deleted", 0, "created", (json_int_t)gw_realtime_ns(), "pool", pool);
    json_decref(prev);
    rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
    gw_bucket_cache_drop(o, name);
    json_decref(rec);
    return rc;
}

int gw_bucket_create(struct gw_objects *o, const char *name)
{
    const struct gw_pool *p = gw_pool_default(o);
    return p ? gw_bucket_create_in_pool(o, name, p->p.name) : -EIO;
}

struct any {
    int64_t created; /* the bucket's */
    bool some;
};

/* Stops at the first record of a live object or an upload (which has no stamp). */
static int any_key(const char *key, json_t *rec, void *arg)
{
    (void)key;
    struct any *a = arg;
    a->some = !gw_rec_outlived(rec, a->created);
    return a->some;
}

int gw_bucket_delete(struct gw_objects *o, const char *name)
{
    json_t *prev;
    int rc = bucket_rec(o, name, &prev);
    if (rc)
        return rc;
    /* Not empty while it has objects, or multipart uploads in progress (as
     * S3): an upload's Complete would land in a deleted bucket, and its
     * parts would never expire (the scanner walks live buckets). */
    struct any a = {json_integer_value(json_object_get(prev, "created")), false};
    char uploads[GW_BUCKET_MAX + 4];
    snprintf(uploads, sizeof(uploads), GW_MPU_UPLOADS, name);
    rc = gw_meta_list(o, name, NULL, NULL, 0, any_key, &a);
    if (rc == 0 && !a.some)
        rc = gw_meta_list(o, GW_META_MPU, uploads, NULL, 1, any_key, &a);
    if (rc == 0 && a.some)
        rc = -ENOTEMPTY;
    if (rc == 0) {
        json_t *rec =
            json_pack("{s:I,s:b}", "version", (json_int_t)gw_next_version(o, prev), "deleted", 1);
        rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
        gw_bucket_cache_drop(o, name);
        json_decref(rec);
    }
    json_decref(prev);
    return rc;
}

int gw_bucket_stamp(struct gw_objects *o, const char *bucket, json_t *rec)
{
    json_t *brec;
    int rc = gw_bucket_cached(o, bucket, &brec);
    json_int_t created = rc ? 0 : json_integer_value(json_object_get(brec, "created"));
    json_decref(brec);
    if (rc && rc != -ENOENT)
        return rc; /* not a guess: a wrong stamp would hide the object */
    return json_object_set_new(rec, GW_REC_BUCKET, json_integer(created)) ? -ENOMEM : 0;
}

bool gw_rec_outlived(const json_t *rec, int64_t created_ns)
{
    const json_t *stamp = json_object_get(rec, GW_REC_BUCKET);
    return created_ns == GW_BUCKET_GONE || (stamp && json_integer_value(stamp) != created_ns);
}

/* The read again costs only records that disagree with the cache: those of
 * a bucket gone, and those of one created again elsewhere since cached. */
bool gw_bucket_outlived(struct gw_objects *o, const char *bucket, const json_t *rec)
{
    if (!json_object_get(rec, GW_REC_BUCKET))
        return false;
    bool outlived = true;
    for (int fresh = 0; outlived && fresh < 2; fresh++) {
        json_t *brec;
        if (fresh)
            gw_bucket_cache_drop(o, bucket);
        int rc = gw_bucket_cached(o, bucket, &brec);
        if (rc == 0 || rc == -ENOENT)
            outlived = gw_rec_outlived(
                rec, rc ? GW_BUCKET_GONE : json_integer_value(json_object_get(brec, "created")));
        else
            outlived = false; /* unknown: as before the stamp, the record stands */
        json_decref(brec);
    }
    return outlived;
}

static void bucket_info(const char *name, const json_t *rec, struct gw_bucket_info *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->created_ns = json_integer_value(json_object_get(rec, "created"));
    snprintf(out->acl, sizeof(out->acl), "%s",
             json_string_value(json_object_get(rec, "acl")) ?: "");
}

int gw_bucket_set_field(struct gw_objects *o, const char *name, const char *field,
                        const json_t *value)
{
    json_t *prev;
    int rc = bucket_rec(o, name, &prev);
    if (rc)
        return rc;
    json_t *rec = json_deep_copy(prev);
    if (!rec ||
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, prev))) ||
        (value ? json_object_set(rec, field, (json_t *)value) : (json_object_del(rec, field), 0)))
        rc = -ENOMEM;
    else
        rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
    gw_bucket_cache_drop(o, name);
    json_decref(rec);
    json_decref(prev);
    return rc;
}

int gw_bucket_acl_set(struct gw_objects *o, const char *name, const char *acl)
{
    json_t *v = json_string(acl && strcmp(acl, "private") ? acl : "");
    int rc = v ? gw_bucket_set_field(o, name, "acl", v) : -ENOMEM;
    json_decref(v);
    return rc;
}

int gw_bucket_head(struct gw_objects *o, const char *name, struct gw_bucket_info *out)
{
    json_t *rec;
    int rc = bucket_rec(o, name, &rec);
    if (rc == 0 && out)
        bucket_info(name, rec, out);
    json_decref(rec);
    return rc;
}

struct blist {
    int (*cb)(const struct gw_bucket_info *b, void *arg);
    void *arg;
};

static int blist_cb(const char *key, json_t *rec, void *arg)
{
    struct blist *b = arg;
    struct gw_bucket_info bi;
    bucket_info(key, rec, &bi);
    return b->cb(&bi, b->arg);
}

int gw_bucket_list(struct gw_objects *o, int (*cb)(const struct gw_bucket_info *b, void *arg),
                   void *arg)
{
    struct blist b = {cb, arg};
    return gw_meta_list(o, GW_META_BUCKET, NULL, NULL, 0, blist_cb, &b);
}
