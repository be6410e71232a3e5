/*
 * Bucket lifecycle (objects.h): the rules a bucket sets live in its record
 * ("lifecycle": [{"id", "prefix", "enabled", "abort_days"}]), so every gateway
 * applies the same ones; gw_mpu_expire, run by the repair scanner, ends the
 * multipart uploads they (or the gateway's default age) say are abandoned:
 * aborted, or completed where a Complete was decided that its gateway did not
 * live to finish.
 *
 * An upload's age is the wall clock now minus its "initiated" time, both
 * CLOCK_REALTIME of some gateway: clocks a few seconds apart shift an expiry
 * by as much, nothing worse (ages are days, or multipart_expire_ms).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"
#include "inec/log.h"

int gw_bucket_lifecycle_set(struct gw_objects *o, const char *bucket, const json_t *rules)
{
    return gw_bucket_set_field(o, bucket, "lifecycle", rules);
}

int gw_bucket_lifecycle_get(struct gw_objects *o, const char *bucket, json_t **rules)
{
    *rules = NULL;
    json_t *rec;
    int rc = gw_meta_read(o, GW_META_BUCKET, bucket, &rec);
    if (rc == 0 && gw_rec_deleted(rec))
        rc = -ENOENT;
    if (rc == 0) {
        json_t *l = json_object_get(rec, "lifecycle");
        if (json_array_size(l))
            *rules = json_incref(l);
        else
            rc = -ENODATA;
    }
    json_decref(rec);
    return rc;
}

/* How long an upload of `key` may stay: the smallest age of the enabled rules
 * whose prefix it has, else the gateway's default (0: forever). */
static int64_t max_age_ms(const struct gw_objects *o, const json_t *rules, const char *key)
{
    int64_t best = -1;
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        const char *prefix = json_string_value(json_object_get(r, "prefix")) ?: "";
        int64_t days = json_integer_value(json_object_get(r, "abort_days"));
        if (!json_is_true(json_object_get(r, "enabled")) || days < 1 ||
            strncmp(key, prefix, strlen(prefix)) != 0)
            continue;
        int64_t ms = days * o->lifecycle_day_ms;
        if (best < 0 || ms < best)
            best = ms;
    }
    return best >= 0 ? best : o->mpu_expire_ms;
}

struct expiry {
    struct gw_objects *o;
    const json_t *rules;
    int64_t now_ns;
    json_t *due; /* [[key, upload id], ...] */
};

static int upload_cb(const char *key, const char *upload_id, int64_t initiated_ns, void *arg)
{
    struct expiry *x = arg;
    int64_t limit = max_age_ms(x->o, x->rules, key);
    if (limit > 0 && (x->now_ns - initiated_ns) / 1000000 >= limit)
        json_array_append_new(x->due, json_pack("[s,s]", key, upload_id));
    return 0;
}

static int bucket_cb(const struct gw_bucket_info *b, void *arg)
{
    json_array_append_new(arg, json_string(b->name));
    return 0;
}

uint64_t gw_mpu_expire(struct gw_objects *o)
{
    json_t *buckets = json_array();
    if (!buckets || gw_bucket_list(o, bucket_cb, buckets)) {
        json_decref(buckets);
        return 0;
    }
    uint64_t ended = 0;
    size_t i;
    json_t *b;
    json_array_foreach(buckets, i, b)
    {
        const char *bucket = json_string_value(b);
        json_t *rules = NULL;
        int rc = gw_bucket_lifecycle_get(o, bucket, &rules);
        if (rc && rc != -ENODATA)
            continue;
        if (!rules && o->mpu_expire_ms <= 0)
            continue; /* nothing can expire here */
        struct expiry x = {o, rules, gw_realtime_ns(), json_array()};
        if (x.due && gw_mpu_list(o, bucket, NULL, upload_cb, &x) == 0) {
            size_t j;
            json_t *u;
            json_array_foreach(x.due, j, u)
            {
                const char *key = json_string_value(json_array_get(u, 0));
                const char *uid = json_string_value(json_array_get(u, 1));
                bool completed;
                rc = gw_mpu_end_abandoned(o, bucket, key, uid, &completed);
                inec_log(rc ? INEC_LOG_WARN : INEC_LOG_INFO, "lifecycle",
                         "abandoned multipart upload bucket=%s key=%s upload=%s %s rc=%d", bucket,
                         key, uid, completed ? "completed (its Complete was decided)" : "aborted",
                         rc);
                ended += rc == 0;
            }
        }
        json_decref(x.due);
        json_decref(rules);
    }
    json_decref(buckets);
    return ended;
}
