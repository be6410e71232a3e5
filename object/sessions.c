/*
 * Encode sessions.
 *
 * The encode DEG of a pool over one set of nodes, set up once and run stripe
 * after stripe (node_deg_session): a stripe costs one RUN message per node
 * plus its data. Keyed by pool and node set (sorted); the chunks of a stripe
 * may land on the set in any order. Idle ones are kept (GW_SESSIONS_IDLE at
 * most) until they idle longer than the RPC bound, well before the nodes
 * reap their persistent vertices. A failed run closes the session: the next
 * stripe opens a new one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deg/deg.h"
#include "object/objects_internal.h"

#define GW_SESSIONS_IDLE 12

static void session_free(struct gw_objects *o, struct gw_session *ss, int rc)
{
    node_deg_session_close(ss->s);
    /* A client whose own call failed may be broken: closed, not kept (a
     * node really down shows when it is connected again). */
    for (int i = 0; i < ss->n; i++) {
        if (rc && ss->cl[i] && node_client_errmsg(ss->cl[i])[0]) {
            node_client_close(ss->cl[i]);
            ss->cl[i] = NULL;
        }
        if (ss->cl[i])
            gw_client_put(o, ss->nodes[i], ss->cl[i], 0);
    }
    free(ss);
}

void gw_sessions_close(struct gw_objects *o)
{
    while (o->sessions) {
        struct gw_session *ss = o->sessions;
        o->sessions = ss->next;
        session_free(o, ss, 0);
    }
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* An idle session running g (pool's encode over place[c] for the chunks not
 * missing) (*reused), or a new one. A session serves stripes with the same
 * nodes and the same missing chunk indices: its gateway sends the same
 * values, only to other nodes. */
int gw_session_get(struct gw_objects *o, const struct gw_pool *pool, const struct deg_graph *g,
                   const int *place, const bool *missing, bool fresh, struct gw_session **out,
                   bool *reused, char *err, size_t errlen)
{
    int n = 0, set[PLACE_MAX_CHUNKS];
    for (int c = 0; c < pool->p.n; c++)
        if (!missing[c])
            set[n++] = place[c];
    qsort(set, (size_t)n, sizeof(int), cmp_int);
    size_t mlen = (size_t)pool->p.n * sizeof(bool);
    int64_t now = gw_now_ms();
    struct gw_session *stale = NULL;
    pthread_mutex_lock(&o->sess_lock);
    *out = NULL;
    for (struct gw_session **pp = &o->sessions; *pp;) {
        struct gw_session *ss = *pp;
        if (now - ss->idle_since_ms > o->timeout_ms) {
            *pp = ss->next;
            ss->next = stale;
            stale = ss;
        } else if (!fresh && !*out && ss->pool == pool && ss->n == n &&
                   !memcmp(ss->nodes, set, (size_t)n * sizeof(int)) &&
                   !memcmp(ss->missing, missing, mlen)) {
            *pp = ss->next;
            *out = ss;
        } else {
            pp = &ss->next;
        }
    }
    pthread_mutex_unlock(&o->sess_lock);
    while (stale) {
        struct gw_session *ss = stale;
        stale = ss->next;
        session_free(o, ss, 0);
    }
    if ((*reused = *out != NULL))
        return 0;
    struct gw_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return -ENOMEM;
    ss->pool = pool;
    ss->n = n;
    memcpy(ss->nodes, set, sizeof(set));
    memcpy(ss->missing, missing, mlen);
    struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
    int rc = cl ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = gw_client_get(o, set[i], &ss->cl[i]);
        if (rc)
            snprintf(err, errlen, "node %s: %s", o->nodes[set[i]].id, strerror(-rc));
        else
            cl[set[i]] = ss->cl[i];
    }
    struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
    if (rc == 0)
        rc = node_deg_session_open(g, pool->p.chunk_size, cl, o->nnodes, &ro, &ss->s, err, errlen);
    free(cl);
    if (rc) {
        session_free(o, ss, rc);
        return rc;
    }
    atomic_fetch_add(&o->sessions_opened, 1);
    *out = ss;
    return 0;
}

/* Back to the idle list after a good run; closed after a failed one. */
void gw_session_put(struct gw_objects *o, struct gw_session *ss, int rc)
{
    if (rc == 0) {
        for (int i = 0; i < ss->n; i++) /* they answered: up (again) */
            gw_client_put(o, ss->nodes[i], NULL, 0);
        ss->idle_since_ms = gw_now_ms();
        pthread_mutex_lock(&o->sess_lock);
        int n = 0;
        struct gw_session **pp = &o->sessions;
        while (*pp && ++n < GW_SESSIONS_IDLE)
            pp = &(*pp)->next;
        struct gw_session *old = *pp; /* the oldest beyond the limit */
        *pp = NULL;
        ss->next = o->sessions;
        o->sessions = ss;
        pthread_mutex_unlock(&o->sess_lock);
        while (old) {
            struct gw_session *nx = old->next;
            session_free(o, old, 0);
            old = nx;
        }
        return;
    }
    session_free(o, ss, rc);
}
