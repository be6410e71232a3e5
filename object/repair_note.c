/*
 * Reports of degraded stripes (a read, a degraded write, the scanner):
 * buffered for a moment, flushed to the durable queue by the worker.
 */
#include "object/objects_internal.h"
#include "object/repair.h"

void gw_repair_note(struct gw_objects *o, const char *bucket, const char *key, const char *oid_hex,
                    uint64_t stripe, uint64_t len, const int *lost, const char *const *at,
                    const char *const *reason, int nlost, bool sync, bool scan)
{
    struct gw_repair *r = o->rep;
    if (!r || nlost <= 0)
        return;
    json_t *lj = json_array(), *aj = json_array(), *rj = json_array();
    for (int i = 0; i < nlost; i++) {
        json_array_append_new(lj, json_integer(lost[i]));
        json_array_append_new(aj, json_string(at && at[i] ? at[i] : "?"));
        json_array_append_new(rj, json_string(reason[i]));
    }
    json_t *e =
        json_pack("{s:s,s:s,s:s,s:I,s:I,s:o,s:o,s:o,s:I}", "bucket", bucket, "key", key, "oid",
                  oid_hex, "stripe", (json_int_t)stripe, "len", (json_int_t)len, "lost", lj, "at",
                  aj, "reason", rj, "queued_ns", (json_int_t)gw_realtime_ns());
    if (!e)
        return;
    /* A write reports stripes it has just written, new to the queue (no
     * lookup in its path); the scanner reports every queued stripe at every
     * scan. */
    int added = -1;
    if (sync)
        added = scan ? gw_rq_add_scanned(o, e) : gw_rq_put(o, e) == 0 ? 1 : -1;
    if (added >= 0) {
        json_decref(e);
        pthread_mutex_lock(&r->lock);
        /* A new entry is counted as left now: the status never says idle
         * with it queued (the worker's next listing counts exactly). One
         * queued already is counted, by the listing or by its first report:
         * counting each scan's report again made the totals grow. */
        if (added) {
            r->left_stripes++;
            r->left_bytes += len * (uint64_t)nlost;
        }
        r->kick = true;
        r->note_wakes++;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        return;
    }
    char qkey[128];
    gw_rq_key(e, qkey, sizeof(qkey));
    int64_t now = gw_now_ms();
    pthread_mutex_lock(&r->lock);
    /* A degraded stripe read again and again (a hot object while a node is
     * down) is reported once: it stays queued until the worker repairs it,
     * which forgets the report. */
    json_t *seen = json_object_get(r->noted, qkey);
    if (seen && json_equal(json_object_get(seen, "lost"), lj) &&
        now - json_integer_value(json_object_get(seen, "ms")) < GW_REPAIR_NOTE_REPEAT_MS) {
        pthread_mutex_unlock(&r->lock);
        json_decref(e);
        return;
    }
    if (json_object_size(r->noted) >= GW_REPAIR_PENDING_MAX)
        json_object_clear(r->noted);
    json_object_set_new(r->noted, qkey, json_pack("{s:O,s:I}", "lost", lj, "ms", (json_int_t)now));
    if (json_object_size(r->pending) < GW_REPAIR_PENDING_MAX && !json_object_get(r->pending, qkey))
        json_object_set(r->pending, qkey, e);
    r->kick = true;
    r->note_wakes++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    json_decref(e);
}

/* Pending reports to the nodes; each stays pending (and listed) until it is
 * written, what fails stays pending. */
void gw_repair_flush_pending(struct gw_repair *r)
{
    pthread_mutex_lock(&r->lock);
    json_t *p = json_copy(r->pending);
    pthread_mutex_unlock(&r->lock);
    const char *k;
    json_t *e;
    json_object_foreach(p, k, e)
    {
        json_t *c = json_deep_copy(e); /* gw_rq_put versions it; e is shared with listers */
        if (c && gw_rq_put(r->o, c) == 0) {
            pthread_mutex_lock(&r->lock);
            if (json_object_get(r->pending, k) == e)
                json_object_del(r->pending, k);
            pthread_mutex_unlock(&r->lock);
        }
        json_decref(c);
    }
    json_decref(p);
}
