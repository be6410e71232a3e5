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
 * The scanner reports every degraded stripe at every scan; an entry already
 * queued for the same chunks is not written again, so it is counted as left
 * work once (repair.c) and keeps the time of its first report. A scan that
 * saw a stripe before the worker repaired it (its entry removed since the
 * scan began) would queue it again and count its bytes as left for nothing:
 * that report is dropped, the next scan judges the stripe afresh. The entry
 * is looked up first, so a removal before the lookup is known by then.
 *
 * Entry: {"version", "bucket", "key", "oid", "stripe", "len", "lost": [c],
 *         "at": [node id], "reason", "queued_ns"}.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "object/objects_internal.h"
#include "object/repair.h"

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

int gw_rq_add_scanned(struct gw_objects *o, json_t *entry)
{
    char key[128];
    gw_rq_key(entry, key, sizeof(key));
    json_t *old = NULL;
    bool queued = gw_meta_read(o, GW_REPAIR_BUCKET, key, &old) == 0 && !gw_rec_deleted(old);
    bool same = queued && json_equal(json_object_get(old, "lost"), json_object_get(entry, "lost"));
    json_decref(old);
    if (same || (!queued && gw_repair_removed_in_scan(o, key)))
        return 0;
    int rc = gw_rq_put(o, entry);
    return rc ? rc : !queued;
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
    return gw_meta_list(o, GW_REPAIR_BUCKET, NULL, NULL, 0, rq_walk_cb, &w);
}

int gw_rq_remove(struct gw_objects *o, const char *qkey)
{
    return gw_meta_remove_all(o, GW_REPAIR_BUCKET, qkey);
}
