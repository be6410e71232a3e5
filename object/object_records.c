/*
 * The object calls that touch only its record: HEAD, DELETE, the ACL,
 * listing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

bool gw_object_live(struct gw_objects *o, const char *bucket, const json_t *rec)
{
    return rec && !gw_rec_deleted(rec) && !gw_bucket_outlived(o, bucket, rec);
}

/* The live record of an object; -ENOENT if it, or its bucket, does not exist. */
int gw_object_rec(struct gw_objects *o, const char *bucket, const char *key, json_t **rec)
{
    *rec = NULL;
    int rc = gw_check_key(bucket, key);
    if (rc)
        return rc;
    rc = gw_meta_read(o, bucket, key, rec);
    if (rc == 0 && !gw_object_live(o, bucket, *rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    if (rc == -ENOENT) { /* NoSuchBucket rather than NoSuchKey when that is why */
        int brc = gw_bucket_head(o, bucket, NULL);
        if (brc && brc != -ENOENT)
            rc = brc;
    }
    return rc;
}

int gw_object_head(struct gw_objects *o, const char *bucket, const char *key,
                   struct gw_object_info *out)
{
    json_t *rec;
    int rc = gw_object_rec(o, bucket, key, &rec);
    if (rc == 0 && out)
        gw_rec_object_info(rec, out);
    json_decref(rec);
    return rc;
}

int gw_object_delete(struct gw_objects *o, const char *bucket, const char *key)
{
    json_t *prev;
    int rc = gw_object_rec(o, bucket, key, &prev);
    if (rc)
        return rc;
    json_t *rec = json_pack("{s:I,s:b,s:I}", "version", (json_int_t)gw_next_version(o, prev),
                            "deleted", 1, "mtime", (json_int_t)gw_realtime_ns());
    rc = gw_meta_write(o, bucket, key, rec);
    if (rc == 0)
        gw_gc_queue(o, prev, o->gc_delay_ms);
    json_decref(rec);
    json_decref(prev);
    return rc;
}

/* The ACL record of an object: "<bucket>/<key>" under GW_META_ACL. */
static char *acl_key(const char *bucket, const char *key)
{
    char *k;
    return asprintf(&k, "%s/%s", bucket, key) < 0 ? NULL : k;
}

int gw_object_acl_set(struct gw_objects *o, const char *bucket, const char *key, const char *acl)
{
    json_t *obj, *prev = NULL;
    int rc = gw_object_rec(o, bucket, key, &obj);
    if (rc)
        return rc;
    char *k = acl_key(bucket, key);
    rc = k ? gw_meta_read(o, GW_META_ACL, k, &prev) : -ENOMEM;
    if (rc == 0 || rc == -ENOENT) {
        /* The object id names the upload: repair rewrites a record, never it. */
        json_t *rec =
            json_pack("{s:I,s:b,s:s,s:s}", "version", (json_int_t)gw_next_version(o, prev),
                      "deleted", 0, "oid", json_string_value(json_object_get(obj, "oid")) ?: "",
                      "acl", acl && strcmp(acl, "private") ? acl : "");
        rc = rec ? gw_meta_write(o, GW_META_ACL, k, rec) : -ENOMEM;
        json_decref(rec);
    }
    free(k);
    json_decref(prev);
    json_decref(obj);
    return rc;
}

int gw_object_acl_get(struct gw_objects *o, const char *bucket, const char *key,
                      char acl[GW_ACL_MAX])
{
    json_t *obj, *rec = NULL;
    int rc = gw_object_rec(o, bucket, key, &obj);
    if (rc)
        return rc;
    snprintf(acl, GW_ACL_MAX, "%s", json_string_value(json_object_get(obj, "acl")) ?: "");
    char *k = acl_key(bucket, key);
    rc = k ? gw_meta_read(o, GW_META_ACL, k, &rec) : -ENOMEM;
    free(k);
    const char *oid = json_string_value(json_object_get(obj, "oid"));
    if (rc == 0 && oid && strcmp(json_string_value(json_object_get(rec, "oid")) ?: "", oid) == 0)
        snprintf(acl, GW_ACL_MAX, "%s", json_string_value(json_object_get(rec, "acl")) ?: "");
    json_decref(rec);
    json_decref(obj);
    return rc == -ENOENT ? 0 : rc;
}

struct olist {
    int (*cb)(const char *key, const struct gw_object_info *info, void *arg);
    void *arg;
    int64_t created; /* the bucket's */
};

static int olist_cb(const char *key, json_t *rec, void *arg)
{
    struct olist *l = arg;
    if (gw_rec_outlived(rec, l->created))
        return 0;
    struct gw_object_info info;
    gw_rec_object_info(rec, &info);
    int rc = l->cb(key, &info, l->arg);
    gw_object_info_clear(&info);
    return rc;
}

int gw_object_list(struct gw_objects *o, const char *bucket, const char *prefix,
                   const char *start_after, size_t want,
                   int (*cb)(const char *key, const struct gw_object_info *info, void *arg),
                   void *arg)
{
    struct gw_bucket_info b;
    int rc = gw_bucket_head(o, bucket, &b);
    if (rc)
        return rc;
    struct olist l = {cb, arg, b.created_ns};
    return gw_meta_list(o, bucket, prefix, start_after, want, olist_cb, &l);
}
