/*
 * Degraded reads through cached decode graphs and long-lived DEG sessions
 * (see decode_sessions.h).
 */
#include "object/decode_sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECODE_GRAPHS        256 /* compiled graphs kept; past that they are built per stripe */
#define DECODE_SESSIONS_IDLE 8   /* idle sessions kept (each holds ~(k + rows) chunk buffers) */
#define DECODE_THREADS       8   /* decodes ahead at once; more wait for a thread */

struct compiled {
    const struct gw_pool *pool;
    bool erased[PLACE_MAX_CHUNKS], unavailable[PLACE_MAX_CHUNKS];
    struct deg_graph *g; /* participant c holds chunk c; never changed once cached */
};

struct dsession {
    struct gw_pooled_session base; /* over the source nodes */
    int rows;
    uint64_t failures[PLACE_MAX_CHUNKS]; /* of base.nodes[i] when it opened */
};

struct gw_decoder {
    pthread_mutex_t lock; /* graphs */
    struct compiled graphs[DECODE_GRAPHS];
    int ngraphs;
    struct gw_session_pool sessions;
    struct gw_fanout *fan; /* runs gw_decode_start's jobs */
    _Atomic uint64_t opened, runs;
};

int gw_decoder_create(struct gw_objects *o)
{
    struct gw_decoder *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    int rc = gw_fanout_create(DECODE_THREADS, &d->fan);
    if (rc) {
        free(d);
        return rc;
    }
    pthread_mutex_init(&d->lock, NULL);
    gw_session_pool_init(&d->sessions, DECODE_SESSIONS_IDLE);
    o->decoder = d;
    return 0;
}

void gw_decoder_destroy(struct gw_objects *o)
{
    struct gw_decoder *d = o->decoder;
    if (!d)
        return;
    gw_fanout_destroy(d->fan); /* every GET finished its jobs: none is queued */
    gw_session_pool_destroy(o, &d->sessions);
    for (int i = 0; i < d->ngraphs; i++)
        deg_graph_destroy(d->graphs[i].g);
    pthread_mutex_destroy(&d->lock);
    free(d);
    o->decoder = NULL;
}

void gw_decoder_counters(struct gw_objects *o, uint64_t *opened, uint64_t *runs)
{
    *opened = o->decoder ? atomic_load(&o->decoder->opened) : 0;
    *runs = o->decoder ? atomic_load(&o->decoder->runs) : 0;
}

/* The pool's decode graph for a read (gw_decode_graph); one that fits a
 * session also hands the chunks its sources send to the caller: the data
 * chunks among them need no read of their own. */
static int build_graph(const struct gw_pool *pool, const bool *erased, const bool *unavailable,
                       const int *holder, struct deg_graph **out, char *err, size_t errlen)
{
    int rc = gw_decode_graph(pool, erased, unavailable, holder, out, err, errlen);
    if (rc || !node_deg_session_fits(*out))
        return rc;
    for (int v = 0; v < (*out)->nvertices; v++)
        for (int j = 0; (*out)->vertices[v].node == DEG_GATEWAY && j < (*out)->vertices[v].nin; j++)
            if ((rc = deg_add_result(*out, v, deg_in(j))) < 0) {
                deg_graph_destroy(*out);
                *out = NULL;
                snprintf(err, errlen, "out of memory");
                return rc;
            }
    return 0;
}

/* The compiled decode graph over abstract participants (*owned: built for
 * this stripe only, the caller destroys it; else the cache's). */
static int compiled_get(struct gw_objects *o, const struct gw_pool *pool, const bool *erased,
                        const bool *unavailable, struct deg_graph **out, bool *owned, char *err,
                        size_t errlen)
{
    struct gw_decoder *d = o->decoder;
    size_t n = (size_t)pool->p.n;
    *owned = false;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->ngraphs; i++) {
        struct compiled *c = &d->graphs[i];
        if (c->pool == pool && !memcmp(c->erased, erased, n) &&
            !memcmp(c->unavailable, unavailable, n)) {
            *out = c->g;
            pthread_mutex_unlock(&d->lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&d->lock);
    int holder[PLACE_MAX_CHUNKS];
    for (int c = 0; c < pool->p.n; c++)
        holder[c] = c;
    struct deg_graph *g;
    int rc = build_graph(pool, erased, unavailable, holder, &g, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&d->lock);
    if (d->ngraphs < DECODE_GRAPHS) { /* another thread may have cached its twin: harmless */
        struct compiled *c = &d->graphs[d->ngraphs++];
        c->pool = pool;
        memcpy(c->erased, erased, n);
        memcpy(c->unavailable, unavailable, n);
        c->g = g;
    } else {
        *owned = true;
    }
    pthread_mutex_unlock(&d->lock);
    *out = g;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Same rows (key), and kept only while its nodes stayed up and failed no
 * call. */
static enum gw_session_fit same_rows_sound(struct gw_objects *o, const struct gw_pooled_session *ss,
                                           const void *key)
{
    const struct dsession *ds = (const struct dsession *)ss;
    if (ds->rows != *(const int *)key)
        return GW_SESSION_OTHER;
    for (int i = 0; i < ss->n; i++)
        if (gw_node_is_down(o, ss->nodes[i]) ||
            atomic_load(&o->nodes[ss->nodes[i]].failures) != ds->failures[i])
            return GW_SESSION_DROP;
    return GW_SESSION_TAKE;
}

/* An idle session of (pool, nodes, rows) (*reused), or a new one set up
 * from the stripe's graph over its real holders. */
static int dsession_get(struct gw_objects *o, const struct gw_pool *pool, const int *nodes, int n,
                        int rows, bool fresh, const bool *erased, const bool *unavailable,
                        const int *holder, struct dsession **out, bool *reused, char *err,
                        size_t errlen)
{
    struct gw_decoder *d = o->decoder;
    *out = (struct dsession *)gw_session_pool_take(o, &d->sessions, pool, nodes, n, fresh,
                                                   same_rows_sound, &rows);
    if ((*reused = *out != NULL))
        return 0;
    struct deg_graph *g = NULL;
    int rc = build_graph(pool, erased, unavailable, holder, &g, err, errlen);
    if (rc)
        return rc;
    struct dsession *ss = calloc(1, sizeof(*ss));
    if (!ss) {
        deg_graph_destroy(g);
        return -ENOMEM;
    }
    ss->base.pool = pool;
    ss->base.n = n;
    memcpy(ss->base.nodes, nodes, (size_t)n * sizeof(int));
    ss->rows = rows;
    for (int i = 0; i < n; i++)
        ss->failures[i] = atomic_load(&o->nodes[nodes[i]].failures);
    rc = gw_pooled_session_open(o, &ss->base, g, err, errlen);
    deg_graph_destroy(g);
    if (rc)
        return rc;
    atomic_fetch_add(&d->opened, 1);
    *out = ss;
    return 0;
}

/* Graph g (abstract) through a session over its source nodes. */
static int run_session(struct gw_objects *o, const struct gw_pool *pool, const struct deg_graph *g,
                       const bool *erased, const bool *unavailable, const int *holder,
                       const struct node_stripe *ns, size_t len, deg_result_fn result, void *arg,
                       char *err, size_t errlen)
{
    int n = 0, rows = 0, nodes[PLACE_MAX_CHUNKS];
    for (int v = 0; v < g->nvertices; v++) {
        if (g->vertices[v].node == DEG_GATEWAY)
            rows = g->vertices[v].nrows;
        else
            nodes[n++] = holder[g->vertices[v].node];
    }
    qsort(nodes, (size_t)n, sizeof(int), cmp_int);
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct dsession *ss;
        bool reused;
        rc = dsession_get(o, pool, nodes, n, rows, attempt > 0, erased, unavailable, holder, &ss,
                          &reused, err, errlen);
        if (rc)
            return rc;
        rc = node_deg_session_decode(ss->base.s, g, holder, len, ns, result, arg, err, errlen);
        gw_session_pool_release(o, &o->decoder->sessions, &ss->base, rc);
        if (rc == 0)
            atomic_fetch_add(&o->decoder->runs, 1);
        /* A kept session may only have outlived a node's restart. */
        if (rc == 0 || !reused)
            break;
    }
    return rc;
}

/* Graph g (abstract) set up, run and torn down on its holders. */
static int run_whole(struct gw_objects *o, const struct gw_pool *pool, const bool *erased,
                     const bool *unavailable, const int *holder, const struct node_stripe *ns,
                     size_t len, deg_result_fn result, void *arg, char *err, size_t errlen)
{
    struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    struct deg_graph *g = NULL;
    int rc = gw_decode_graph(pool, erased, unavailable, holder, &g, err, errlen);
    for (int v = 0; rc == 0 && v < g->nvertices; v++) {
        int node = g->vertices[v].node;
        if (node >= 0 && !cl[node] && (rc = gw_client_get(o, node, &cl[node])))
            snprintf(err, errlen, "node %s: %s", o->nodes[node].id, strerror(-rc));
    }
    if (rc == 0) {
        uint8_t *none[PLACE_MAX_CHUNKS] = {0};
        struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
        rc = node_deg_run(g, len, none, cl, o->nnodes, ns, &ro, result, arg, err, errlen);
    }
    deg_graph_destroy(g);
    for (int i = 0; i < o->nnodes; i++)
        if (cl[i])
            gw_client_put(o, i, cl[i], 0);
    free(cl);
    return rc;
}

int gw_decode_stripe(struct gw_objects *o, const struct gw_pool *pool, const int *holder,
                     const bool *lost, const bool *rebuild, const struct node_stripe *ns,
                     size_t len, deg_result_fn result, void *arg, char *err, size_t errlen)
{
    int k = pool->p.k, n = pool->p.n;
    bool erased[PLACE_MAX_CHUNKS] = {0}, unavailable[PLACE_MAX_CHUNKS] = {0};
    bool narrow[PLACE_MAX_CHUNKS] = {0};
    int order[PLACE_MAX_CHUNKS], nleft = 0, nerased = 0;
    for (int c = 0; c < n; c++) {
        erased[c] = c < k && rebuild[c] && lost[c];
        unavailable[c] = lost[c] && !erased[c];
        nerased += erased[c];
        if (!lost[c])
            order[nleft++] = c;
    }
    if (!nerased)
        return 0;
    /* The survivors on the lowest node ids: the same nodes send stripe after
     * stripe. A code that needs other ones (LRC) gets every survivor. */
    for (int i = 1; i < nleft; i++)
        for (int j = i; j > 0 && holder[order[j]] < holder[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    memcpy(narrow, unavailable, sizeof(narrow));
    for (int i = k; i < nleft; i++)
        narrow[order[i]] = true;
    struct deg_graph *g = NULL;
    bool owned = false;
    const bool *unav = narrow;
    int rc = compiled_get(o, pool, erased, narrow, &g, &owned, err, errlen);
    if (rc && rc != -ENOMEM) {
        unav = unavailable;
        rc = compiled_get(o, pool, erased, unavailable, &g, &owned, err, errlen);
    }
    if (rc)
        return rc;
    if (node_deg_session_fits(g))
        rc = run_session(o, pool, g, erased, unav, holder, ns, len, result, arg, err, errlen);
    else
        rc = run_whole(o, pool, erased, unav, holder, ns, len, result, arg, err, errlen);
    if (owned)
        deg_graph_destroy(g);
    return rc;
}

bool gw_decode_at_gateway(struct gw_objects *o, const struct gw_pool *pool, const bool *lost,
                          const bool *rebuild)
{
    bool erased[PLACE_MAX_CHUNKS] = {0}, unavailable[PLACE_MAX_CHUNKS] = {0};
    for (int c = 0; c < pool->p.n; c++) {
        erased[c] = c < pool->p.k && rebuild[c] && lost[c];
        unavailable[c] = lost[c] && !erased[c];
    }
    struct deg_graph *g = NULL;
    bool owned = false;
    char err[256];
    if (compiled_get(o, pool, erased, unavailable, &g, &owned, err, sizeof(err)))
        return false;
    bool star = node_deg_session_fits(g);
    if (owned)
        deg_graph_destroy(g);
    return star;
}

struct gw_decode_job {
    struct gw_objects *o;
    const struct gw_pool *pool;
    int holder[PLACE_MAX_CHUNKS];
    bool lost[PLACE_MAX_CHUNKS], rebuild[PLACE_MAX_CHUNKS];
    const struct node_stripe *ns;
    size_t len;
    deg_result_fn result;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done;
    int rc;
    char err[512];
};

static void job_main(void *arg, int i)
{
    (void)i;
    struct gw_decode_job *j = arg;
    int rc = gw_decode_stripe(j->o, j->pool, j->holder, j->lost, j->rebuild, j->ns, j->len,
                              j->result, j->arg, j->err, sizeof(j->err));
    pthread_mutex_lock(&j->lock);
    j->rc = rc;
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->lock);
}

int gw_decode_start(struct gw_objects *o, const struct gw_pool *pool, const int *holder,
                    const bool *lost, const bool *rebuild, const struct node_stripe *ns, size_t len,
                    deg_result_fn result, void *arg, struct gw_decode_job **out)
{
    struct gw_decode_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    size_t n = (size_t)pool->p.n;
    *j = (struct gw_decode_job){
        .o = o, .pool = pool, .ns = ns, .len = len, .result = result, .arg = arg};
    memcpy(j->holder, holder, n * sizeof(int));
    memcpy(j->lost, lost, n);
    memcpy(j->rebuild, rebuild, n);
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cv, NULL);
    int rc = gw_fanout_post(o->decoder->fan, job_main, j, 0);
    if (rc) {
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->cv);
        free(j);
        return rc;
    }
    *out = j;
    return 0;
}

int gw_decode_finish(struct gw_decode_job *j, char *err, size_t errlen)
{
    pthread_mutex_lock(&j->lock);
    while (!j->done) /* the run is bounded by the peer timeout */
        pthread_cond_wait(&j->cv, &j->lock);
    pthread_mutex_unlock(&j->lock);
    int rc = j->rc;
    if (rc)
        snprintf(err, errlen, "%s", j->err);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cv);
    free(j);
    return rc;
}
