/*
 * Repair status for the control API and metrics: progress, ETA, the
 * queue, the last scan.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "object/objects_internal.h"
#include "object/repair.h"

void gw_repair_scan_done(struct gw_objects *o, const uint64_t *degraded_by_lost, int maxlost,
                         uint64_t stripes, uint64_t orphans_deleted, uint64_t tombstones_deleted,
                         int64_t duration_ms)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    memset(r->degraded_by_lost, 0, sizeof(r->degraded_by_lost));
    for (int i = 0; i <= maxlost && i <= PLACE_MAX_CHUNKS; i++)
        r->degraded_by_lost[i] = degraded_by_lost[i];
    r->scan_maxlost = maxlost;
    r->scan_stripes = stripes;
    r->orphans_deleted += orphans_deleted;
    r->tombstones_deleted += tombstones_deleted;
    r->scans++;
    r->scanning = false;
    json_object_clear(r->removed); /* the next scan sees the stripes after these removals */
    r->scan_ms = duration_ms;
    r->scan_done_ns = gw_realtime_ns();
    r->kick = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

int gw_objects_repair_status(struct gw_objects *o, json_t **out)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return -EOPNOTSUPP;
    pthread_mutex_lock(&r->lock);
    int64_t now = gw_now_ms();
    double active_s = 0, rate = 0, eta = -1;
    if (r->running) {
        int64_t paused = r->run_paused_ms + (r->paused_since_ms ? now - r->paused_since_ms : 0);
        active_s = (double)(now - r->run_start_ms - paused) / 1e3;
        if (active_s > 0.5)
            rate = (double)r->run_bytes_done / active_s;
        /* Early in a throttled run the pace is known better than measured. */
        if (r->throttle_mbps > 0 && (active_s < 3 || rate > r->throttle_mbps * 1e6))
            rate = r->throttle_mbps * 1e6;
        if (rate > 0)
            eta = (double)r->left_bytes / rate;
    }
    json_t *by_lost = json_object();
    for (int i = 1; i <= r->scan_maxlost; i++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", i);
        json_object_set_new(by_lost, k, json_integer((json_int_t)r->degraded_by_lost[i]));
    }
    json_t *nodes = json_array();
    for (int i = 0; i < o->nnodes; i++) {
        int st = atomic_load(&o->nodes[i].admin);
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:b,s:I,s:b}", "id", o->nodes[i].id,
                                               "state", place_state_name((enum place_state)st),
                                               "lost", gw_repair_node_lost(o, i), "down_ms",
                                               (json_int_t)gw_node_silent_ms(o, i), "meta_member",
                                               gw_meta_member(o, i)));
    }
    json_int_t oldest_s =
        r->oldest_ns ? (json_int_t)((gw_realtime_ns() - r->oldest_ns) / 1000000000) : 0;
    *out = json_pack(
        "{s:s,s:b,s:f,s:b,s:{s:I,s:I,s:I,s:I,s:f,s:f,s:f},s:{s:I,s:I,s:I,s:I},"
        "s:{s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I,s:o,s:I,s:I},s:o,s:I,s:I,s:I}",
        "state",
        r->paused    ? "paused"
        : r->running ? "running"
                     : "idle",
        "paused", r->paused, "throttle_mbps", r->throttle_mbps, "running", r->running, "progress",
        "stripes_done", (json_int_t)r->run_stripes_done, "stripes_total",
        (json_int_t)(r->run_stripes_done + r->left_stripes), "bytes_done",
        (json_int_t)r->run_bytes_done, "bytes_total",
        (json_int_t)(r->run_bytes_done + r->left_bytes), "rate_bytes_per_s", rate, "eta_s", eta,
        "elapsed_s", active_s, "queue", "stripes", (json_int_t)r->left_stripes, "bytes",
        (json_int_t)r->left_bytes, "waiting", (json_int_t)r->waiting_stripes, "oldest_age_s",
        oldest_s, "totals", "stripes_repaired", (json_int_t)r->stripes_repaired, "bytes_repaired",
        (json_int_t)r->bytes_repaired, "chunks_moved", (json_int_t)r->chunks_moved, "failed",
        (json_int_t)r->failed, "unrecoverable", (json_int_t)r->unrecoverable, "orphans_deleted",
        (json_int_t)r->orphans_deleted, "scan", "scans", (json_int_t)r->scans, "stripes",
        (json_int_t)r->scan_stripes, "degraded_by_lost", by_lost, "duration_ms",
        (json_int_t)r->scan_ms, "interval_ms", (json_int_t)r->scan_interval_ms, "nodes", nodes,
        "down_out_ms", (json_int_t)r->down_out_ms, "orphan_grace_ms",
        (json_int_t)r->orphan_grace_ms, "pending", (json_int_t)json_object_size(r->pending));
    if (*out) {
        json_object_set_new(*out, "scrub_interval_ms", json_integer(r->scrub_interval_ms));
        json_object_set_new(*out, "tombstone_grace_ms", json_integer(r->tombstone_grace_ms));
        json_object_set_new(json_object_get(*out, "totals"), "tombstones_deleted",
                            json_integer((json_int_t)r->tombstones_deleted));
        json_object_set_new(json_object_get(*out, "scan"), "running",
                            json_boolean(r->scanning || r->scan_now));
    }
    if (*out)
        json_object_set_new(*out, "scheme", json_string(gw_repair_scheme_names[r->scheme_default]));
    pthread_mutex_unlock(&r->lock);
    return *out ? 0 : -ENOMEM;
}

/* The queue, one element per lost chunk (what the control API lists). */
struct qlist {
    json_t *out;
};

static void expand(json_t *out, const json_t *e)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(e, "lost"), i, c)
    {
        json_array_append_new(
            out,
            json_pack("{s:O,s:O,s:O,s:O,s:O,s:s,s:s,s:O}", "bucket", json_object_get(e, "bucket"),
                      "key", json_object_get(e, "key"), "object", json_object_get(e, "oid"),
                      "stripe", json_object_get(e, "stripe"), "chunk", c, "node",
                      json_string_value(json_array_get(json_object_get(e, "at"), i)) ?: "?",
                      "reason",
                      json_string_value(json_array_get(json_object_get(e, "reason"), i)) ?: "?",
                      "queued_ns", json_object_get(e, "queued_ns")));
    }
}

static int qlist_cb(const char *qkey, json_t *e, void *arg)
{
    (void)qkey;
    struct qlist *q = arg;
    expand(q->out, e);
    return json_array_size(q->out) >= 10000;
}

int gw_objects_repair_json(struct gw_objects *o, json_t **out)
{
    struct qlist q = {json_array()};
    if (o->rep) {
        pthread_mutex_lock(&o->rep->lock);
        const char *k;
        json_t *e;
        json_object_foreach(o->rep->pending, k, e) expand(q.out, e);
        pthread_mutex_unlock(&o->rep->lock);
    }
    int rc = gw_rq_list(o, qlist_cb, &q);
    if (rc) {
        json_decref(q.out);
        return rc;
    }
    *out = q.out;
    return 0;
}

uint64_t gw_repair_queue_length(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->left_stripes + json_object_size(r->pending);
    pthread_mutex_unlock(&r->lock);
    return n;
}
