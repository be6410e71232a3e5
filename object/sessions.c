/*
 * Encode sessions.
 *
 * The encode DEG of a pool over one set of nodes, set up once and run stripe
 * after stripe (node_deg_session): a stripe costs one RUN message per node
 * plus its data. Keyed by pool and node set (sorted); the chunks of a stripe
 * may land on the set in any order. Idle ones are kept in the gateway's
 * session pool (session_pool.c: GW_SESSIONS_IDLE at most, until they idle
 * longer than the RPC bound). A failed run closes the session: the next
 * stripe opens a new one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Same nodes and the same missing chunk indices (key): its gateway sends
 * the same values, only to other nodes. */
static enum gw_session_fit same_missing(struct gw_objects *o, const struct gw_pooled_session *ss,
                                        const void *key)
{
    (void)o;
    const struct gw_session *es = (const struct gw_session *)ss;
    return memcmp(es->missing, key, (size_t)ss->pool->p.n * sizeof(bool)) ? GW_SESSION_OTHER
                                                                          : GW_SESSION_TAKE;
}

/* An idle session running g (pool's encode over place[c] for the chunks not
 * missing) (*reused), or a new one. */
int gw_session_get(struct gw_objects *o, const struct gw_pool *pool, const struct deg_graph *g,
                   const int *place, const bool *missing, bool fresh, struct gw_session **out,
                   bool *reused, char *err, size_t errlen)
{
    int n = 0, set[PLACE_MAX_CHUNKS];
    for (int c = 0; c < pool->p.n; c++)
        if (!missing[c])
            set[n++] = place[c];
    qsort(set, (size_t)n, sizeof(int), cmp_int);
    *out = (struct gw_session *)gw_session_pool_take(o, &o->sessions, pool, set, n, fresh,
                                                     same_missing, missing);
    if ((*reused = *out != NULL))
        return 0;
    struct gw_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return -ENOMEM;
    ss->base.pool = pool;
    ss->base.n = n;
    memcpy(ss->base.nodes, set, sizeof(set));
    memcpy(ss->missing, missing, (size_t)pool->p.n * sizeof(bool));
    int rc = gw_pooled_session_open(o, &ss->base, g, err, errlen);
    if (rc)
        return rc;
    atomic_fetch_add(&o->sessions_opened, 1);
    *out = ss;
    return 0;
}

/* Back to the idle list after a good run; closed after a failed one. */
void gw_session_put(struct gw_objects *o, struct gw_session *ss, int rc)
{
    gw_session_pool_release(o, &o->sessions, &ss->base, rc);
}
