/*
 * Bucket records a gateway read recently, so a PUT does not read its
 * bucket's record (a quorum read) each time. An entry is a bucket that
 * exists (with its pool and ACL), trusted for bucket_cache_ms counted from
 * when the read that fetched it began; a missing bucket is never cached (a
 * bucket another gateway creates is seen at once). This gateway drops the
 * entry when it creates, deletes or changes the bucket; a change made
 * through another gateway is seen here within bucket_cache_ms (see
 * docs/DESIGN.md, "Bucket records").
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "object/objects_internal.h"

#define BUCKET_CACHE_MAX 4096 /* entries; when full the cache starts over */

int gw_bucket_cached(struct gw_objects *o, const char *name, json_t **rec)
{
    *rec = NULL;
    int64_t now = gw_now_ms();
    if (o->bucket_cache_ms > 0) {
        pthread_mutex_lock(&o->bucket_lock);
        json_t *e = json_object_get(o->buckets, name);
        if (e && json_integer_value(json_object_get(e, "until")) > now)
            *rec = json_incref(json_object_get(e, "rec"));
        pthread_mutex_unlock(&o->bucket_lock);
        if (*rec)
            return 0;
    }
    int rc = gw_meta_read(o, GW_META_BUCKET, name, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    if (rc || o->bucket_cache_ms <= 0)
        return rc;
    json_t *e =
        json_pack("{s:O,s:I}", "rec", *rec, "until", (json_int_t)(now + o->bucket_cache_ms));
    pthread_mutex_lock(&o->bucket_lock);
    if (json_object_size(o->buckets) >= BUCKET_CACHE_MAX)
        json_object_clear(o->buckets);
    if (e)
        json_object_set(o->buckets, name, e);
    pthread_mutex_unlock(&o->bucket_lock);
    json_decref(e);
    return 0;
}

void gw_bucket_cache_drop(struct gw_objects *o, const char *name)
{
    pthread_mutex_lock(&o->bucket_lock);
    json_object_del(o->buckets, name);
    pthread_mutex_unlock(&o->bucket_lock);
}
