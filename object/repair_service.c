/*
 * Starts and stops the repair service: the worker and the scanner
 * threads, with their settings from the gateway options.
 */
#include <errno.h>
#include <stdlib.h>

#include "object/objects_internal.h"
#include "object/repair.h"

static int64_t opt_ms(const json_t *opts, const char *name, int64_t dflt)
{
    json_t *v = json_object_get(opts, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

int gw_repair_start(struct gw_objects *o, const json_t *opts)
{
    struct gw_repair *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->o = o;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->pending = json_object();
    r->removed = json_object();
    r->noted = json_object();
    r->scan_interval_ms = (int)opt_ms(opts, "scan_interval_ms", 60000);
    r->down_out_ms = opt_ms(opts, "down_out_ms", 600000);
    r->orphan_grace_ms = opt_ms(opts, "orphan_grace_ms", 3600000);
    r->tombstone_grace_ms = opt_ms(opts, "tombstone_grace_ms", 24 * 3600000LL);
    r->scrub_interval_ms = opt_ms(opts, "scrub_interval_ms", 7 * 24 * 3600000LL);
    r->last_scrub_ms = gw_now_ms();
    r->scheme_default =
        gw_repair_scheme_parse(json_string_value(json_object_get(opts, "scheme")) ?: "auto");
    r->schemes = json_object_get(opts, "schemes") ? json_deep_copy(json_object_get(opts, "schemes"))
                                                  : json_object();
    gw_repair_settings_apply(r, opts);
    if (!r->pending || !r->removed || !r->noted || r->scheme_default == NSCHEMES) {
        json_decref(r->pending);
        json_decref(r->removed);
        json_decref(r->noted);
        json_decref(r->schemes);
        free(r);
        return -EINVAL;
    }
    for (int i = 0; i < o->nnodes; i++)
        atomic_store(&o->nodes[i].admin,
                     o->map->nodes[i].state == PLACE_UP ? PLACE_UP : o->map->nodes[i].state);
    o->rep = r;
    gw_repair_admin_load(o);
    if (pthread_create(&r->worker, NULL, gw_repair_worker_main, r) == 0)
        r->worker_started = true;
    if (pthread_create(&r->scanner, NULL, gw_scanner_main, o) == 0)
        r->scanner_started = true;
    return 0;
}

void gw_repair_stop(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    if (r->worker_started)
        pthread_join(r->worker, NULL);
    if (r->scanner_started)
        pthread_join(r->scanner, NULL);
    gw_repair_flush_pending(r); /* reports are not lost by a clean stop */
}

void gw_repair_free(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return;
    o->rep = NULL;
    for (int p = 0; p < GW_MAX_POOLS; p++)
        for (int s = 0; s < NSCHEMES; s++)
            codec_destroy(r->codecs[p][s]);
    json_decref(r->pending);
    json_decref(r->removed);
    json_decref(r->noted);
    json_decref(r->schemes);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
