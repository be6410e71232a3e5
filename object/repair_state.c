/*
 * The repair service's shared state: its settings, the node states that
 * decide what counts as lost, and the questions the scanner asks it.
 */
#include <string.h>
#include <time.h>

#include "object/objects_internal.h"
#include "object/repair.h"

const char *const gw_repair_scheme_names[NSCHEMES] = {"auto", "ppr", "ecpipe", "rs"};

enum scheme gw_repair_scheme_parse(const char *s)
{
    for (int i = 0; s && i < NSCHEMES; i++)
        if (strcmp(s, gw_repair_scheme_names[i]) == 0)
            return (enum scheme)i;
    return NSCHEMES;
}

/* --- node states ------------------------------------------------------------------ */

/* Silent for this long (the failure detector's last answer), a down node. */
int64_t gw_node_silent_ms(struct gw_objects *o, int node)
{
    if (!gw_node_is_down(o, node))
        return 0;
    return gw_now_ms() - atomic_load(&o->nodes[node].last_seen_ms);
}

bool gw_repair_node_lost(struct gw_objects *o, int node)
{
    if (atomic_load(&o->nodes[node].admin) == PLACE_OUT)
        return true;
    struct gw_repair *r = o->rep;
    return r && r->down_out_ms >= 0 && gw_node_silent_ms(o, node) >= r->down_out_ms;
}

bool gw_repair_node_usable(struct gw_objects *o, int node)
{
    return atomic_load(&o->nodes[node].admin) == PLACE_UP &&
           o->map->nodes[node].state == PLACE_UP && !gw_node_is_down(o, node) &&
           !gw_repair_node_lost(o, node);
}

bool gw_node_draining(struct gw_objects *o, int node)
{
    return atomic_load(&o->nodes[node].admin) == PLACE_DRAINING ||
           o->map->nodes[node].state == PLACE_DRAINING;
}

/* --- start / stop --------------------------------------------------------------------- */

/* The scanner's wake-up (interval, or a kick) and its view of the settings. */
bool gw_repair_wait_scan(struct gw_objects *o, int64_t migrate_at_ms, int64_t *grace_ms, bool *full,
                         bool *asked)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    int64_t now = gw_now_ms();
    if (!r->scan_at_ms) /* the interval counts from the end of the last scan */
        r->scan_at_ms = r->scan_interval_ms > 0 ? now + r->scan_interval_ms : INT64_MAX;
    while (!r->stop && !r->scan_now && now < r->scan_at_ms && now < migrate_at_ms) {
        int64_t until = r->scan_at_ms < migrate_at_ms ? r->scan_at_ms : migrate_at_ms;
        if (until == INT64_MAX) {
            pthread_cond_wait(&r->cond, &r->lock);
        } else {
            struct timespec ts = gw_deadline_in_ms(until - now);
            pthread_cond_timedwait(&r->cond, &r->lock, &ts);
        }
        now = gw_now_ms();
    }
    *asked = r->scan_now;
    *full = r->scan_now || now >= r->scan_at_ms;
    if (*full) {
        r->scan_now = false;
        r->scan_at_ms = 0;
    }
    bool stop = r->stop;
    r->scanning = !stop && *full;
    *grace_ms = r->orphan_grace_ms;
    pthread_mutex_unlock(&r->lock);
    return !stop;
}

bool gw_repair_removed_in_scan(struct gw_objects *o, const char *qkey)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    bool removed = json_object_get(r->removed, qkey) != NULL;
    pthread_mutex_unlock(&r->lock);
    return removed;
}

int64_t gw_repair_tombstones_due(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    int64_t now = gw_now_ms(), grace = -1;
    if (r->tombstones_last_ms == 0 || now - r->tombstones_last_ms >= r->tombstone_grace_ms / 24) {
        r->tombstones_last_ms = now;
        grace = r->tombstone_grace_ms;
    }
    pthread_mutex_unlock(&r->lock);
    return grace;
}

bool gw_repair_scrub_due(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    int64_t now = gw_now_ms();
    bool due = r->scrub_now ||
               (r->scrub_interval_ms > 0 && now - r->last_scrub_ms >= r->scrub_interval_ms);
    if (due) {
        r->scrub_now = false;
        r->last_scrub_ms = now;
    }
    pthread_mutex_unlock(&r->lock);
    return due;
}

bool gw_repair_stopping(struct gw_objects *o)
{
    pthread_mutex_lock(&o->rep->lock);
    bool s = o->rep->stop;
    pthread_mutex_unlock(&o->rep->lock);
    return s;
}

void gw_scanner_kick(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->scan_now = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}
