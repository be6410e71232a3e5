/*
 * The failure detector's probes: on their own threads, a health call every
 * heartbeat_ms to each node that has not answered anything within the last
 * heartbeat, and probes of chosen nodes for the PUT path. What the answers
 * mean (up, suspect, down) is peer_state.c's.
 */
#include <errno.h>
#include <pthread.h>

#include "object/objects_internal.h"

#define PROBE_THREADS 4

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
    pthread_setname_np(pthread_self(), "detector");
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->det_lock);
    while (!o->det_stop) {
        int64_t now = gw_now_ms();
        for (int i = 0; i < o->nnodes; i++) {
            struct gw_node *nd = &o->nodes[i];
            if (atomic_load(&nd->probe_since_ms)) { /* still out: may make it suspect */
                if (atomic_load(&nd->verdict) == GW_PEER_UP)
                    gw_peer_note(o, i, "probe unanswered");
                continue;
            }
            if (now - atomic_load(&nd->last_seen_ms) < o->heartbeat_ms && !atomic_load(&nd->misses))
                continue; /* heard from within the beat: no need to ask */
            atomic_store(&nd->probe_since_ms, now);
            if (gw_fanout_post(o->det_fan, probe_job, o, i))
                atomic_store(&nd->probe_since_ms, 0);
        }
        struct timespec until = gw_deadline_in_ms(o->heartbeat_ms);
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

struct probe_job {
    struct gw_objects *o;
    int node[PLACE_MAX_CHUNKS];
};

static void probe_one(void *arg, int i)
{
    struct probe_job *j = arg;
    gw_probe_node(j->o, j->node[i]);
}

/* Probes the nodes of the chunks whose missing[c] equals `which`. */
void gw_probe_nodes(struct gw_objects *o, const int *place, const bool *missing, int n, bool which)
{
    struct probe_job pj = {.o = o};
    int np = 0;
    for (int c = 0; c < n; c++)
        if (missing[c] == which)
            pj.node[np++] = place[c];
    gw_fanout_run(o, np, probe_one, &pj);
}
