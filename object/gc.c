/*
 * Garbage: the chunks of a replaced or deleted version are deleted
 * gc_delay_ms after the change, a delay longer than the longest GET.
 */
#include <errno.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"

void gw_gc_queue(struct gw_objects *o, json_t *rec, int delay_ms)
{
    size_t ns = json_array_size(json_object_get(rec, "stripes"));
    if (!ns)
        return;
    pthread_mutex_lock(&o->gc_lock);
    if (o->gc_stripes + ns > GW_GC_PENDING_STRIPES) { /* bounded memory: orphans now */
        if (atomic_fetch_add(&o->gc_dropped, 1) % 10000 == 0)
            inec_log(INEC_LOG_WARN, "gateway",
                     "%d stripes of replaced versions wait for gc: more are left to the scanner",
                     GW_GC_PENDING_STRIPES);
        pthread_mutex_unlock(&o->gc_lock);
        return;
    }
    o->gc_stripes += ns;
    json_array_append_new(
        o->gc, json_pack("{s:I,s:O}", "due", (json_int_t)(gw_now_ms() + delay_ms), "rec", rec));
    pthread_cond_broadcast(&o->gc_cond);
    pthread_mutex_unlock(&o->gc_lock);
}

void gw_gc_queue_replaced(struct gw_objects *o, const json_t *replaced, int delay_ms)
{
    size_t i, j;
    json_t *prev, *before;
    json_array_foreach(replaced, i, prev)
    {
        bool seen = gw_rec_deleted(prev);
        for (j = 0; j < i && !seen; j++) {
            before = json_array_get(replaced, j);
            seen = !gw_rec_deleted(before) &&
                   json_equal(json_object_get(before, "oid"), json_object_get(prev, "oid"));
        }
        if (!seen)
            gw_gc_queue(o, prev, delay_ms);
    }
}

struct gc_job {
    struct gw_objects *o;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t stripe;
    const json_t *s;
};

static void gc_one(void *arg, int c)
{
    struct gc_job *j = arg;
    int node = gw_stripe_node(j->o, j->s, c);
    struct node_client *cl = NULL;
    if (node < 0 || gw_node_is_down(j->o, node) || gw_client_get(j->o, node, &cl))
        return; /* left behind: an orphan chunk costs space, never correctness */
    struct node_chunk_id id = {.stripe = j->stripe, .index = (uint32_t)c};
    memcpy(id.object, j->oid, sizeof(id.object));
    int rc = node_client_delete_chunk(cl, &id, GW_CHUNK_VERSION);
    gw_client_put(j->o, node, cl, rc == -ENOENT ? 0 : rc);
}

static void gc_rec(struct gw_objects *o, const json_t *rec)
{
    struct gc_job j = {.o = o};
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        if (gw_layout_chunk(rec, s, j.oid, &j.stripe))
            continue;
        j.s = st;
        gw_fanout_run(o, (int)json_array_size(json_object_get(st, "nodes")), gc_one, &j);
    }
}

void gw_gc_run(struct gw_objects *o, bool all)
{
    json_t *due = json_array();
    pthread_mutex_lock(&o->gc_lock);
    int64_t now = gw_now_ms();
    for (size_t i = 0; i < json_array_size(o->gc);) {
        json_t *e = json_array_get(o->gc, i);
        if (all || json_integer_value(json_object_get(e, "due")) <= now) {
            json_array_append(due, json_object_get(e, "rec"));
            json_array_remove(o->gc, i);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&o->gc_lock);
    /* Counted until its deletes are done, not only until it leaves the queue:
     * gw_objects_counters' gc_pending says when the garbage is gone. */
    size_t i;
    json_t *rec;
    json_array_foreach(due, i, rec)
    {
        gc_rec(o, rec);
        pthread_mutex_lock(&o->gc_lock);
        o->gc_stripes -= json_array_size(json_object_get(rec, "stripes"));
        pthread_mutex_unlock(&o->gc_lock);
    }
    json_decref(due);
}

void *gw_gc_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gc");
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->gc_lock);
    while (!o->gc_stop) {
        int64_t next = INT64_MAX;
        size_t i;
        json_t *e;
        json_array_foreach(o->gc, i, e)
        {
            int64_t d = json_integer_value(json_object_get(e, "due"));
            if (d < next)
                next = d;
        }
        int64_t now = gw_now_ms();
        if (next <= now) {
            pthread_mutex_unlock(&o->gc_lock);
            gw_gc_run(o, false);
            pthread_mutex_lock(&o->gc_lock);
            continue;
        }
        struct timespec ts = gw_deadline_in_ms(next == INT64_MAX ? 1000 : next - now);
        pthread_cond_timedwait(&o->gc_cond, &o->gc_lock, &ts);
    }
    pthread_mutex_unlock(&o->gc_lock);
    return NULL;
}
