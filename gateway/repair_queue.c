/*
 * The durable repair queue: one metadata record per degraded stripe in the
 * store bucket ".repair", on the nodes like every record (repair.h).
 *
 * Key "<99 - lost chunks>/<object id>/<stripe, 16 hex>": a listing (key
 * order) yields the stripes with the most lost chunks first, then in object
 * id order (random, so no bucket starves another). A stripe reported twice
 * with different losses has two entries; the worker repairs what the stripe
 * really lacks at the first and finds nothing left at the second. Entries are
 * removed without tombstones: one that comes back only costs a check.
 *
 * Entry: {"version", "bucket", "key", "oid", "stripe", "len", "lost": [c],
 *         "at": [node id], "reason", "queued_ns"}.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/objects_internal.h"
#include "gateway/repair.h"

void gw_rq_key(const json_t *entry, char *out, size_t outlen)
{
    int nlost = (int)json_array_size(json_object_get(entry, "lost"));
    snprintf(out, outlen, "%02d/%s/%016llx", 99 - (nlost < 99 ? nlost : 99),
             json_string_value(json_object_get(entry, "oid")) ?: "",
             (unsigned long long)json_integer_value(json_object_get(entry, "stripe")));
}

int gw_rq_put(struct gw_objects *o, json_t *entry)
{
    char key[128];
    gw_rq_key(entry, key, sizeof(key));
    json_object_set_new(entry, "version", json_integer((json_int_t)gw_next_version(o, NULL)));
    return gw_meta_write(o, GW_REPAIR_BUCKET, key, entry);
}

struct rq_walk {
    int (*cb)(const char *qkey, json_t *entry, void *arg);
    void *arg;
};

static int rq_walk_cb(const char *key, json_t *rec, void *arg)
{
    struct rq_walk *w = arg;
    if (!json_is_string(json_object_get(rec, "oid")) ||
        !json_is_array(json_object_get(rec, "lost")))
        return 0; /* not an entry this gateway understands: left alone */
    return w->cb(key, rec, w->arg);
}

int gw_rq_list(struct gw_objects *o, int (*cb)(const char *qkey, json_t *entry, void *arg),
               void *arg)
{
    struct rq_walk w = {cb, arg};
    return gw_meta_list(o, GW_REPAIR_BUCKET, NULL, NULL, rq_walk_cb, &w);
}

int gw_rq_remove(struct gw_objects *o, const char *qkey)
{
    return gw_meta_remove(o, GW_REPAIR_BUCKET, qkey);
}
