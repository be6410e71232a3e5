/*
 * Idle DEG sessions.
 *
 * A DEG session (node_deg_session) set up once over a set of nodes and run
 * stripe after stripe, with the node clients it runs on. Encode sessions
 * (sessions.c) and decode sessions (decode_sessions.c) keep theirs idle
 * here between stripes: newest first, at most max_idle, dropped when idle
 * longer than the peer timeout (well before the nodes reap their
 * persistent vertices) or when their caller finds them unsound; a failed
 * run closes one. Each caller matches on its own key beyond the pool and
 * the node set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deg/deg.h"
#include "inec/log.h"
#include "object/objects_internal.h"

void gw_session_pool_init(struct gw_session_pool *sp, int max_idle)
{
    pthread_mutex_init(&sp->lock, NULL);
    sp->idle = NULL;
    sp->max_idle = max_idle;
}

static void pooled_free(struct gw_objects *o, struct gw_pooled_session *ss, int rc)
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
    free(ss); /* the caller's session: this is its first member */
}

static void free_list(struct gw_objects *o, struct gw_pooled_session *ss)
{
    while (ss) {
        struct gw_pooled_session *next = ss->next;
        pooled_free(o, ss, 0);
        ss = next;
    }
}

void gw_session_pool_destroy(struct gw_objects *o, struct gw_session_pool *sp)
{
    free_list(o, sp->idle);
    sp->idle = NULL;
    pthread_mutex_destroy(&sp->lock);
}

struct gw_pooled_session *gw_session_pool_take(struct gw_objects *o, struct gw_session_pool *sp,
                                               const struct gw_pool *pool, const int *nodes, int n,
                                               bool fresh, gw_session_fit_fn fit, const void *key)
{
    int64_t now = gw_now_ms();
    struct gw_pooled_session *out = NULL, *stale = NULL;
    pthread_mutex_lock(&sp->lock);
    for (struct gw_pooled_session **pp = &sp->idle; *pp;) {
        struct gw_pooled_session *ss = *pp;
        enum gw_session_fit f = GW_SESSION_OTHER;
        if (now - ss->idle_since_ms > o->timeout_ms)
            f = GW_SESSION_DROP;
        else if (!fresh && !out && ss->pool == pool && ss->n == n &&
                 !memcmp(ss->nodes, nodes, (size_t)n * sizeof(int)))
            f = fit(o, ss, key);
        if (f == GW_SESSION_DROP) {
            *pp = ss->next;
            ss->next = stale;
            stale = ss;
        } else if (f == GW_SESSION_TAKE) {
            *pp = ss->next;
            out = ss;
        } else {
            pp = &ss->next;
        }
    }
    pthread_mutex_unlock(&sp->lock);
    free_list(o, stale);
    return out;
}

int gw_pooled_session_open(struct gw_objects *o, struct gw_pooled_session *ss,
                           const struct deg_graph *g, char *err, size_t errlen)
{
    struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
    int rc = cl ? 0 : -ENOMEM;
    for (int i = 0; i < ss->n && rc == 0; i++) {
        rc = gw_client_get(o, ss->nodes[i], &ss->cl[i]);
        if (rc)
            snprintf(err, errlen, "node %s: %s", o->nodes[ss->nodes[i]].id, strerror(-rc));
        else
            cl[ss->nodes[i]] = ss->cl[i];
    }
    struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
    if (rc == 0)
        rc = node_deg_session_open(g, ss->pool->p.chunk_size, cl, o->nnodes, &ro, &ss->s, err,
                                   errlen);
    free(cl);
    if (rc)
        pooled_free(o, ss, rc);
    return rc;
}

/* A session whose run left sinks running, and their nodes. */
struct late_close {
    struct gw_objects *o;
    struct gw_pooled_session *ss;
    int nodes[PLACE_MAX_CHUNKS], n;
};

static void late_close(void *arg, int i)
{
    (void)i;
    struct late_close *lc = arg;
    pooled_free(lc->o, lc->ss, -EIO); /* waits for the sinks left running */
    for (int j = 0; j < lc->n; j++)
        atomic_fetch_sub(&lc->o->nodes[lc->nodes[j]].late_sinks, 1);
    free(lc);
}

/* Marks the nodes of ss's late sinks and closes it on the fan-out. */
static void release_late(struct gw_objects *o, struct gw_pooled_session *ss)
{
    struct late_close *lc = calloc(1, sizeof(*lc));
    if (!lc) {
        pooled_free(o, ss, -EIO);
        return;
    }
    *lc = (struct late_close){.o = o, .ss = ss};
    for (int i = 0; i < ss->n; i++) {
        if (node_deg_session_sink_rc(ss->s, ss->nodes[i]) != -EINPROGRESS)
            continue;
        lc->nodes[lc->n++] = ss->nodes[i];
        atomic_fetch_add(&o->nodes[ss->nodes[i]].late_sinks, 1);
        inec_log(INEC_LOG_WARN, "gateway",
                 "node %s: a chunk write still out after the write quorum's grace; written "
                 "around, no new chunks there until it answers",
                 o->nodes[ss->nodes[i]].id);
    }
    if (gw_fanout_post(o->fan, late_close, lc, 0))
        late_close(lc, 0);
}

void gw_session_pool_release(struct gw_objects *o, struct gw_session_pool *sp,
                             struct gw_pooled_session *ss, int rc)
{
    if (rc == -EINPROGRESS) {
        release_late(o, ss);
        return;
    }
    if (rc) {
        pooled_free(o, ss, rc);
        return;
    }
    for (int i = 0; i < ss->n; i++) /* they answered: up (again) */
        gw_client_put(o, ss->nodes[i], NULL, 0);
    ss->idle_since_ms = gw_now_ms();
    pthread_mutex_lock(&sp->lock);
    int n = 0;
    struct gw_pooled_session **pp = &sp->idle;
    while (*pp && ++n < sp->max_idle)
        pp = &(*pp)->next;
    struct gw_pooled_session *old = *pp; /* the oldest beyond the limit */
    *pp = NULL;
    ss->next = sp->idle;
    sp->idle = ss;
    pthread_mutex_unlock(&sp->lock);
    free_list(o, old);
}
