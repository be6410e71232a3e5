/*
 * The gateway's failure detector of its nodes: one verdict per node (up,
 * suspect, down) from evidence, never from a timer alone.
 *
 * Evidence: every call's outcome (gw_client_put) and a probe (a health call)
 * sent every heartbeat_ms to each node that has not answered anything within
 * the last heartbeat. An answer clears every doubt at once. A failed call or
 * a probe unanswered for 2 heartbeats makes the node *suspect*: reads route
 * around it while the code can do without it, writes still use it. It is
 * *down* (placement skips it, writes leave its chunk missing) only when it
 * has been silent for the map's peer_timeout_ms, or when a connection to it
 * is refused (nothing listens: a fact, not a guess). The tcp transport's own
 * heartbeats (inec/providers/soft/tcp.c) keep idle connections from being
 * taken for dead; this layer judges the node service itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/objects_internal.h"
#include "inec/log.h"

#define SUSPECT_BEATS 2 /* a probe unanswered this many heartbeats: suspect */
#define PROBE_THREADS 4

const char *gw_peer_state_name(enum gw_peer_state s)
{
    return s == GW_PEER_UP ? "up" : s == GW_PEER_SUSPECT ? "suspect" : "down";
}

enum gw_peer_state gw_peer_state(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    int64_t now = gw_now_ms(), seen = atomic_load(&nd->last_seen_ms);
    if (atomic_load(&nd->refused_ms) > seen)
        return GW_PEER_DOWN;
    int64_t probe = atomic_load(&nd->probe_since_ms);
    bool doubt = atomic_load(&nd->misses) > 0 ||
                 (probe && now - probe > SUSPECT_BEATS * (int64_t)o->heartbeat_ms);
    if (!doubt)
        return GW_PEER_UP;
    return now - seen >= o->timeout_ms ? GW_PEER_DOWN : GW_PEER_SUSPECT;
}

bool gw_node_is_down(struct gw_objects *o, int node)
{
    return gw_peer_state(o, node) == GW_PEER_DOWN;
}

/* Logs a change of verdict once (the first caller to see it). */
static void note(struct gw_objects *o, int node, const char *why)
{
    struct gw_node *nd = &o->nodes[node];
    enum gw_peer_state s = gw_peer_state(o, node);
    int was = atomic_exchange(&nd->verdict, (int)s);
    if (was == (int)s)
        return;
    if (s == GW_PEER_SUSPECT)
        atomic_fetch_add(&nd->suspicions, 1);
    else if (s == GW_PEER_DOWN)
        atomic_fetch_add(&nd->downs, 1);
    inec_log(s == GW_PEER_UP ? INEC_LOG_INFO : INEC_LOG_WARN, "gateway",
             "node %s %s (was %s) why=%s silent_ms=%lld", nd->id, gw_peer_state_name(s),
             gw_peer_state_name((enum gw_peer_state)was), why,
             (long long)(gw_now_ms() - atomic_load(&nd->last_seen_ms)));
}

void gw_peer_answered(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    atomic_store(&nd->last_seen_ms, gw_now_ms());
    atomic_store(&nd->misses, 0);
    if (atomic_load(&nd->verdict) != GW_PEER_UP)
        note(o, node, "answered");
}

void gw_peer_failed(struct gw_objects *o, int node, int rc, bool connecting)
{
    struct gw_node *nd = &o->nodes[node];
    atomic_fetch_add(&nd->failures, 1);
    atomic_fetch_add(&nd->misses, 1);
    /* A refused connection (or an embedded node stopped, or one that fails
     * authentication: not a member of this cluster) is no guess. */
    if (connecting &&
        (rc == -ECONNREFUSED || rc == -EHOSTDOWN || rc == -ESHUTDOWN || rc == -EACCES))
        atomic_store(&nd->refused_ms, gw_now_ms());
    note(o, node, rc ? strerror(-rc) : "failed");
}

/* A health call. Idle clients may be broken (their node restarted since):
 * each failure closes one (gw_client_put drops the rest), the next try
 * connects afresh. True when the node answered. */
bool gw_probe_node(struct gw_objects *o, int node)
{
    for (int t = 0; t < 2; t++) {
        struct node_client *cl = NULL;
        struct node_health h;
        int rc = gw_client_get(o, node, &cl);
        if (rc)
            return false; /* no connection: counted by gw_client_get */
        rc = node_client_health(cl, &h);
        gw_client_put(o, node, cl, rc);
        if (!gw_transport_error(rc))
            return true;
    }
    return false;
}

static void probe_job(void *arg, int node)
{
    struct gw_objects *o = arg;
    gw_probe_node(o, node);
    atomic_store(&o->nodes[node].probe_since_ms, 0);
}

static void *detector_main(void *arg)
{
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->det_lock);
    while (!o->det_stop) {
        int64_t now = gw_now_ms();
        for (int i = 0; i < o->nnodes; i++) {
            struct gw_node *nd = &o->nodes[i];
            if (atomic_load(&nd->probe_since_ms)) { /* still out: may make it suspect */
                if (atomic_load(&nd->verdict) == GW_PEER_UP)
                    note(o, i, "probe unanswered");
                continue;
            }
            if (now - atomic_load(&nd->last_seen_ms) < o->heartbeat_ms && !atomic_load(&nd->misses))
                continue; /* heard from within the beat: no need to ask */
            atomic_store(&nd->probe_since_ms, now);
            if (gw_fanout_post(o->det_fan, probe_job, o, i))
                atomic_store(&nd->probe_since_ms, 0);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += o->heartbeat_ms / 1000;
        until.tv_nsec += (long)(o->heartbeat_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&o->det_cond, &o->det_lock, &until);
    }
    pthread_mutex_unlock(&o->det_lock);
    return NULL;
}

int gw_detector_start(struct gw_objects *o)
{
    int64_t now = gw_now_ms();
    for (int i = 0; i < o->nnodes; i++)
        atomic_store(&o->nodes[i].last_seen_ms, now); /* innocent until silent */
    pthread_mutex_init(&o->det_lock, NULL);
    pthread_cond_init(&o->det_cond, NULL);
    int rc = gw_fanout_create(PROBE_THREADS, &o->det_fan);
    if (rc)
        return rc;
    if (pthread_create(&o->det_thread, NULL, detector_main, o))
        return -EAGAIN;
    o->det_started = true;
    return 0;
}

void gw_detector_stop(struct gw_objects *o)
{
    if (o->det_started) {
        pthread_mutex_lock(&o->det_lock);
        o->det_stop = true;
        pthread_cond_broadcast(&o->det_cond);
        pthread_mutex_unlock(&o->det_lock);
        pthread_join(o->det_thread, NULL);
        o->det_started = false;
    }
    gw_fanout_destroy(o->det_fan); /* waits for the probes out */
    o->det_fan = NULL;
}

json_t *gw_peer_json(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    enum gw_peer_state s = gw_peer_state(o, node);
    return json_pack("{s:s,s:b,s:f,s:i,s:I,s:I,s:I}", "peer_state", gw_peer_state_name(s),
                     "suspect", s != GW_PEER_UP, "last_seen_age_seconds",
                     (double)(gw_now_ms() - atomic_load(&nd->last_seen_ms)) / 1000.0, "misses",
                     atomic_load(&nd->misses), "peer_failures",
                     (json_int_t)atomic_load(&nd->failures), "suspicions",
                     (json_int_t)atomic_load(&nd->suspicions), "down_verdicts",
                     (json_int_t)atomic_load(&nd->downs));
}
