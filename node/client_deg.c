/*
 * DEG vertices run on their nodes: node_deg_run sets up each node vertex
 * through RPCs (VERTEX_SETUP, CONNECT), runs them all (VERTEX_RUN, one
 * thread per node) beside the gateway's own vertices, and closes them; a
 * session (node_deg_session_*) keeps them set up from stripe to stripe.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "deg/deg.h"
#include "node/client_internal.h"

struct vstate {
    struct deg_vx *x;      /* a gateway vertex, run here */
    struct node_client *c; /* a node vertex, run there */
    int handle;            /* on its node, 0 when not set up */
    char addr[128];
    uint32_t *in_qpn, *out_qpn;
};

struct run_ctx {
    const struct deg_graph *g;
    struct vstate *vs;
    deg_result_fn result;
    void *arg;
    pthread_mutex_t lock;
    int timeout_ms;
    /* per thread */
    int rc;
    char err[512];
};

struct node_job {
    struct run_ctx *ctx;
    struct node_client *c; /* RUN of all vertices on this node */
    int v;                 /* or a gateway vertex run here */
    bool started;
    int rc;
    char err[512];
};

static json_t *call_json(struct node_client *c, int type, json_t *req, int timeout_ms, int *rc)
{
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text) {
        *rc = -ENOMEM;
        return NULL;
    }
    struct rpc_msg m = {0};
    *rc = node_call_timeout(c, type, text, strlen(text), NULL, 0, &m, timeout_ms);
    free(text);
    json_t *j = *rc == 0 && m.len ? json_loadb((char *)m.data, m.len, 0, NULL) : NULL;
    free(m.data);
    return j;
}

static void *job_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-client");
    struct node_job *jb = arg;
    struct run_ctx *x = jb->ctx;
    if (!jb->c) {
        jb->rc = deg_vx_run(x->vs[jb->v].x, x->result, x->arg, &x->lock, jb->err, sizeof(jb->err));
        return NULL;
    }
    json_t *hs = json_array();
    for (int v = 0; v < x->g->nvertices; v++)
        if (x->vs[v].c == jb->c)
            json_array_append_new(hs, json_integer(x->vs[v].handle));
    /* The node's own bound on the run, plus room for storing the results. */
    json_decref(call_json(jb->c, NODE_RPC_VERTEX_RUN, json_pack("{s:o}", "handles", hs),
                          x->timeout_ms * 2 + 2000, &jb->rc));
    if (jb->rc)
        snprintf(jb->err, sizeof(jb->err), "%s", node_client_errmsg(jb->c));
    for (int v = 0; v < x->g->nvertices; v++)
        if (x->vs[v].c == jb->c)
            x->vs[v].handle = 0; /* the node closes a vertex once run */
    return NULL;
}

static int out_pos(const struct deg_graph *g, int from, int edge)
{
    int pos = 0;
    while (g->vertices[from].out[pos] != edge)
        pos++;
    return pos;
}

static void obj_hex(const struct node_stripe *stripe, char *obj)
{
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        snprintf(obj + 2 * i, 3, "%02x", stripe->object[i]);
}

/* Sets up every vertex: gateway ones here, node ones on their nodes
 * (persistent ones when persist), then connects every edge at both ends. */
static int setup_connect(struct run_ctx *ctx, size_t len, uint8_t *const *chunks,
                         struct node_client *const *nodes, int nnodes,
                         const struct node_stripe *stripe, const struct deg_run_opts *vo,
                         bool persist, char *err, size_t errlen)
{
    const struct deg_graph *g = ctx->g;
    int rc = 0;
    char obj[2 * NODE_OBJECT_ID_BYTES + 1];
    obj_hex(stripe, obj);
    char *gtext = deg_to_json(g);
    json_t *gjson = gtext ? json_loads(gtext, 0, NULL) : NULL;
    free(gtext);
    if (!gjson) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        struct vstate *s = &ctx->vs[v];
        s->in_qpn = calloc((size_t)vx->nin + 1, sizeof(uint32_t));
        s->out_qpn = calloc((size_t)vx->nout_edges + 1, sizeof(uint32_t));
        if (!s->in_qpn || !s->out_qpn) {
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            break;
        }
        if (vx->node == DEG_GATEWAY) {
            if ((rc = deg_vx_open(g, v, len, chunks, vo, &s->x, err, errlen)))
                break;
            snprintf(s->addr, sizeof(s->addr), "%s", deg_vx_addr(s->x));
            for (int i = 0; i < vx->nin; i++)
                s->in_qpn[i] = deg_vx_in_qpn(s->x, i);
            for (int i = 0; i < vx->nout_edges; i++)
                s->out_qpn[i] = deg_vx_out_qpn(s->x, i);
            continue;
        }
        if (vx->node < 0 || vx->node >= nnodes || !nodes[vx->node]) {
            rc = -EHOSTDOWN;
            snprintf(err, errlen, "vertex %s: node %d has no connection", vx->name, vx->node);
            break;
        }
        s->c = nodes[vx->node];
        json_t *req =
            json_pack("{s:O,s:s,s:I,s:i,s:b,s:s,s:I,s:I,s:b}", "graph", gjson, "vertex", vx->name,
                      "len", (json_int_t)len, "timeout_ms", ctx->timeout_ms, "incoherent",
                      vo->incoherent, "object", obj, "stripe", (json_int_t)stripe->stripe,
                      "version", (json_int_t)stripe->version, "persist", persist);
        json_t *ans = call_json(s->c, NODE_RPC_VERTEX_SETUP, req, s->c->timeout_ms, &rc);
        if (rc) {
            snprintf(err, errlen, "vertex %s: setup: %s", vx->name, node_client_errmsg(s->c));
            break;
        }
        s->handle = (int)json_integer_value(json_object_get(ans, "handle"));
        snprintf(s->addr, sizeof(s->addr), "%s",
                 json_string_value(json_object_get(ans, "addr")) ?: "");
        for (int i = 0; i < vx->nin; i++)
            s->in_qpn[i] =
                (uint32_t)json_integer_value(json_array_get(json_object_get(ans, "in"), (size_t)i));
        for (int i = 0; i < vx->nout_edges; i++)
            s->out_qpn[i] = (uint32_t)json_integer_value(
                json_array_get(json_object_get(ans, "out"), (size_t)i));
        json_decref(ans);
    }
    json_decref(gjson);
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        struct vstate *s = &ctx->vs[v];
        json_t *ins = json_array(), *outs = json_array();
        for (int i = 0; i < vx->nin && rc == 0; i++) {
            const struct deg_edge *e = &g->edges[vx->in[i]];
            const struct vstate *f = &ctx->vs[e->from];
            uint32_t qpn = f->out_qpn[out_pos(g, e->from, vx->in[i])];
            if (s->x)
                rc = deg_vx_connect_in(s->x, i, f->addr, qpn, err, errlen);
            json_array_append_new(ins,
                                  json_pack("{s:s,s:I}", "addr", f->addr, "qpn", (json_int_t)qpn));
        }
        for (int i = 0; i < vx->nout_edges && rc == 0; i++) {
            const struct deg_edge *e = &g->edges[vx->out[i]];
            const struct vstate *t = &ctx->vs[e->to];
            if (s->x)
                rc = deg_vx_connect_out(s->x, i, t->addr, t->in_qpn[e->slot], err, errlen);
            json_array_append_new(outs, json_pack("{s:s,s:I}", "addr", t->addr, "qpn",
                                                  (json_int_t)t->in_qpn[e->slot]));
        }
        if (rc == 0 && s->c) {
            json_decref(
                call_json(s->c, NODE_RPC_VERTEX_CONNECT,
                          json_pack("{s:i,s:o,s:o}", "handle", s->handle, "in", ins, "out", outs),
                          s->c->timeout_ms, &rc));
            if (rc)
                snprintf(err, errlen, "vertex %s: connect: %s", vx->name, node_client_errmsg(s->c));
        } else {
            json_decref(ins);
            json_decref(outs);
        }
    }
    return rc;
}

/* Closes what setup_connect set up (node vertices still set up on their nodes). */
static void teardown(struct run_ctx *ctx)
{
    for (int v = 0; ctx->vs && v < ctx->g->nvertices; v++) {
        struct vstate *s = &ctx->vs[v];
        if (s->c && s->handle) {
            int crc;
            json_decref(call_json(s->c, NODE_RPC_VERTEX_CLOSE,
                                  json_pack("{s:i}", "handle", s->handle), s->c->timeout_ms, &crc));
        }
        deg_vx_close(s->x);
        free(s->in_qpn);
        free(s->out_qpn);
    }
    free(ctx->vs);
    ctx->vs = NULL;
}

int node_deg_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                 struct node_client *const *nodes, int nnodes, const struct node_stripe *stripe,
                 const struct deg_run_opts *opts, deg_result_fn result, void *arg, char *err,
                 size_t errlen)
{
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    struct run_ctx ctx = {.g = g, .result = result, .arg = arg};
    ctx.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    struct deg_run_opts vo = {.incoherent = opts && opts->incoherent,
                              .timeout_ms = ctx.timeout_ms,
                              .options = opts ? opts->options : NULL};
    pthread_mutex_init(&ctx.lock, NULL);
    ctx.vs = calloc((size_t)g->nvertices, sizeof(*ctx.vs));
    struct node_job *jobs = calloc((size_t)g->nvertices, sizeof(*jobs));
    pthread_t *threads = calloc((size_t)g->nvertices, sizeof(*threads));
    if (!ctx.vs || !jobs || !threads) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if ((rc = setup_connect(&ctx, len, chunks, nodes, nnodes, stripe, &vo, false, err, errlen)))
        goto out;
    /* 3. run: one thread per node (all its vertices in one RUN) and per gateway vertex. */
    int njobs = 0;
    for (int v = 0; v < g->nvertices; v++) {
        struct vstate *s = &ctx.vs[v];
        bool first = true;
        for (int u = 0; u < v && s->c; u++)
            first &= ctx.vs[u].c != s->c;
        if (s->c && !first)
            continue;
        jobs[njobs] = (struct node_job){.ctx = &ctx, .c = s->c, .v = v};
        jobs[njobs].started = pthread_create(&threads[njobs], NULL, job_main, &jobs[njobs]) == 0;
        if (!jobs[njobs].started) {
            jobs[njobs].rc = -EAGAIN;
            snprintf(jobs[njobs].err, sizeof(jobs[njobs].err), "no thread for vertex %s",
                     g->vertices[v].name);
        }
        njobs++;
    }
    /* The root cause first: a failure other than a timeout (timeouts are
     * usually echoes of a failure upstream). */
    int best = 0;
    for (int i = 0; i < njobs; i++) {
        if (jobs[i].started)
            pthread_join(threads[i], NULL);
        int rank = !jobs[i].rc ? 0 : jobs[i].rc == -ETIMEDOUT ? 1 : 2;
        if (rank > best) {
            best = rank;
            rc = jobs[i].rc;
            snprintf(err, errlen, "%s", jobs[i].err);
        }
    }
out:
    teardown(&ctx);
    free(jobs);
    free(threads);
    pthread_mutex_destroy(&ctx.lock);
    return rc;
}

/* ---- persistent sessions ------------------------------------------------------------------ */

struct sess_worker {
    struct node_deg_session *s;
    int v; /* the node vertex this worker runs */
    pthread_t thread;
    bool started;
    bool late; /* left running by the last run (a quorum's): rc and err are its own */
    int rc;    /* of its last RUN (s->lock) */
    char err[512];
};

struct node_deg_session {
    struct deg_graph *g;
    struct run_ctx ctx;
    int gv; /* the gateway vertex */
    int nworkers;
    struct sess_worker *w;
    pthread_mutex_t lock;
    /* Two conditions, so a worker's answer wakes the run's waiter alone, not
     * every idle worker too (each rechecking gen and sleeping again: up to
     * 8 wake-ups for each of 9 answers of an RS(6,3) stripe). */
    pthread_cond_t go; /* to the workers: a run started (gen), or stop */
    pthread_cond_t cv; /* to the run: a worker answered (pending) */
    uint64_t gen;
    int pending;
    bool stop, broken;
    bool unsettled; /* a decode returned before its workers' answers */
    bool refused;   /* the last run did not start: no sink stored */
    /* the run in progress */
    char *run_head; /* JSON of the per-run fields, without the handles */
    int *chunk_of;  /* per vertex: the chunk its result is stored as */
};

/* Whether g fits a session: one gateway vertex, and every other vertex on
 * a node of its own, either (encode) a sink of one input from the gateway,
 * the only source, or (decode) a source sending its one chunk to the
 * gateway, the only sink (RS and LRC decodes). */
static bool fits(const struct deg_graph *g, bool decode)
{
    int gw = 0;
    bool seen[CODEC_MAX_CHUNKS * 4] = {false};
    for (int v = 0; v < g->nvertices; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        if (vx->node == DEG_GATEWAY) {
            gw++;
            if (decode ? vx->nout_edges || vx->nlocal || !vx->nresults : vx->nin || vx->nresults)
                return false;
            continue;
        }
        if (vx->node < 0 || vx->node >= (int)sizeof(seen) || seen[vx->node])
            return false;
        bool ok = decode ? !vx->nin && vx->nlocal == 1 && vx->nout_edges == 1 && !vx->nrows &&
                               !vx->nresults && g->edges[vx->out[0]].src.kind == DEG_LOCAL &&
                               g->vertices[g->edges[vx->out[0]].to].node == DEG_GATEWAY
                         : vx->nin == 1 && !vx->nout_edges && !vx->nlocal && vx->nresults == 1 &&
                               g->vertices[g->edges[vx->in[0]].from].node == DEG_GATEWAY;
        if (!ok)
            return false;
        seen[vx->node] = true;
    }
    return gw == 1;
}

bool node_deg_session_fits(const struct deg_graph *g)
{
    return fits(g, false) || fits(g, true);
}

static void *sess_main(void *p)
{
    pthread_setname_np(pthread_self(), "sess-vertex");
    struct sess_worker *w = p;
    struct node_deg_session *s = w->s;
    struct vstate *vs = &s->ctx.vs[w->v];
    uint64_t seen = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stop && s->gen == seen)
            pthread_cond_wait(&s->go, &s->lock);
        if (s->stop)
            break;
        seen = s->gen;
        pthread_mutex_unlock(&s->lock);
        json_t *req = json_loads(s->run_head, 0, NULL);
        int rc = req ? 0 : -ENOMEM;
        if (req) {
            json_object_set_new(req, "handles", json_pack("[i]", vs->handle));
            json_object_set_new(req, "chunks", json_pack("[i]", s->chunk_of[w->v]));
            json_decref(
                call_json(vs->c, NODE_RPC_VERTEX_RUN, req, s->ctx.timeout_ms * 2 + 2000, &rc));
        }
        if (rc)
            snprintf(w->err, sizeof(w->err), "vertex %s: %s", s->g->vertices[w->v].name,
                     node_client_errmsg(vs->c));
        pthread_mutex_lock(&s->lock);
        w->rc = rc; /* under the lock: a run waiting for a quorum reads it */
        s->pending--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void node_deg_session_close(struct node_deg_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->nworkers; i++)
        if (s->w[i].started)
            pthread_join(s->w[i].thread, NULL);
    free(s->run_head);
    if (s->ctx.vs)
        teardown(&s->ctx);
    pthread_mutex_destroy(&s->ctx.lock);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->cv);
    deg_graph_destroy(s->g);
    free(s->w);
    free(s->chunk_of);
    free(s);
}

int node_deg_session_open(const struct deg_graph *g, size_t len, struct node_client *const *nodes,
                          int nnodes, const struct deg_run_opts *opts,
                          struct node_deg_session **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    if (!node_deg_session_fits(g)) {
        snprintf(err, errlen, "graph %s: neither a gateway source with node sinks nor the reverse",
                 g->desc);
        return -EINVAL;
    }
    struct node_deg_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->ctx.lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->go, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* The session keeps its own copy: the caller's graph is per stripe. */
    char *text = deg_to_json(g);
    if (text)
        rc = deg_from_json(text, &s->g, err, errlen);
    free(text);
    if (!text || rc) {
        node_deg_session_close(s);
        return rc ? rc : -ENOMEM;
    }
    s->ctx.g = s->g;
    s->ctx.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    s->ctx.vs = calloc((size_t)g->nvertices, sizeof(*s->ctx.vs));
    s->w = calloc((size_t)g->nvertices, sizeof(*s->w));
    s->chunk_of = calloc((size_t)g->nvertices, sizeof(int));
    if (!s->ctx.vs || !s->w || !s->chunk_of) {
        node_deg_session_close(s);
        return -ENOMEM;
    }
    struct deg_run_opts vo = {.incoherent = opts && opts->incoherent,
                              .timeout_ms = s->ctx.timeout_ms,
                              .options = opts ? opts->options : NULL};
    struct node_stripe none = {0};
    rc = setup_connect(&s->ctx, len, NULL, nodes, nnodes, &none, &vo, true, err, errlen);
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        if (g->vertices[v].node == DEG_GATEWAY) {
            s->gv = v;
            continue;
        }
        s->chunk_of[v] = g->vertices[v].nlocal ? g->vertices[v].local[0] : -1;
        struct sess_worker *w = &s->w[s->nworkers];
        *w = (struct sess_worker){.s = s, .v = v};
        if ((rc = -pthread_create(&w->thread, NULL, sess_main, w)))
            snprintf(err, errlen, "no thread for vertex %s", g->vertices[v].name);
        w->started = rc == 0;
        s->nworkers += rc == 0;
    }
    if (rc) {
        node_deg_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int node_deg_session_sink_rc(const struct node_deg_session *s, int node)
{
    for (int i = 0; i < s->nworkers; i++)
        if (s->g->vertices[s->w[i].v].node == node)
            return s->w[i].late ? -EINPROGRESS : s->refused ? -EIO : s->w[i].rc;
    return -ENOENT;
}

static int run_all(struct node_deg_session *s, size_t len, const struct node_stripe *stripe,
                   deg_result_fn result, void *arg, bool early, const struct node_deg_quorum *q,
                   char *err, size_t errlen);

/* Waits for the workers of a run that returned before them: one that
 * failed there breaks the session (its node dropped its vertex). */
static bool settle(struct node_deg_session *s, char *err, size_t errlen)
{
    if (!s->unsettled)
        return false;
    pthread_mutex_lock(&s->lock);
    while (s->pending > 0)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    s->unsettled = false;
    for (int i = 0; i < s->nworkers && !s->broken; i++)
        if (s->w[i].rc) {
            s->broken = true;
            snprintf(err, errlen, "%s", s->w[i].err);
            return true;
        }
    return false;
}

int node_deg_session_run(struct node_deg_session *s, const struct deg_graph *g, size_t len,
                         uint8_t *const *chunks, const struct node_stripe *stripe,
                         const struct node_deg_quorum *quorum, char *err, size_t errlen)
{
    bool failed = settle(s, err, errlen);
    s->refused = true; /* until a run starts: nothing stored */
    if (s->broken) {
        if (!failed)
            snprintf(err, errlen, "an earlier run of this session failed");
        return -EIO;
    }
    /* g's vertex on node N is the session's vertex on N; the gateway's
     * out-edge to N goes over the session's connection to N. */
    const struct deg_vertex *sgv = &s->g->vertices[s->gv], *ggv = NULL;
    bool same = node_deg_session_fits(g) && g->nvertices == s->g->nvertices;
    for (int v = 0; same && v < g->nvertices; v++)
        if (g->vertices[v].node == DEG_GATEWAY)
            ggv = &g->vertices[v];
    same = same && ggv && ggv->nlocal == sgv->nlocal && ggv->nrows == sgv->nrows &&
           ggv->nout_edges == sgv->nout_edges &&
           !memcmp(ggv->local, sgv->local, (size_t)sgv->nlocal * sizeof(int)) &&
           (!sgv->nrows || !memcmp(ggv->coeffs, sgv->coeffs,
                                   (size_t)sgv->nrows * (size_t)(sgv->nlocal + sgv->nin)));
    int route[CODEC_MAX_CHUNKS * 4];
    same = same && sgv->nout_edges <= (int)(sizeof(route) / sizeof(route[0]));
    for (int e = 0; same && e < ggv->nout_edges; e++) {
        const struct deg_edge *ed = &g->edges[ggv->out[e]];
        int node = g->vertices[ed->to].node, q = 0;
        while (q < sgv->nout_edges && s->g->vertices[s->g->edges[sgv->out[q]].to].node != node)
            q++;
        /* Out-edge e sends the session's edge e's value, over route[e]. */
        const struct deg_edge *sed = &s->g->edges[sgv->out[e]];
        same =
            q < sgv->nout_edges && ed->src.kind == sed->src.kind && ed->src.index == sed->src.index;
        if (!same)
            break;
        route[e] = q;
        struct deg_label label;
        deg_value_label(g, ed->from, ed->src, &label);
        s->chunk_of[s->g->edges[sgv->out[q]].to] = label.chunk;
    }
    if (!same) {
        snprintf(err, errlen, "graph %s does not match the session's %s", g->desc, s->g->desc);
        return -EINVAL;
    }
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    int rc = deg_vx_rebind(x, len, chunks, err, errlen);
    if (rc == 0)
        rc = deg_vx_route_out(x, route);
    if (rc)
        return rc;
    return run_all(s, len, stripe, NULL, NULL, false, quorum, err, errlen);
}

/* An encode's grace: once its quorum (q) stored their chunks, the others
 * have as long again as that took, at least q->grace_min_ms. */
struct grace {
    const struct node_deg_quorum *q;
    struct node_deg_session *s;
    int64_t started_ms, until_ms; /* -1 until the quorum */
};

/* s->lock held: when the grace ends, or -1 while there is no quorum. */
static int64_t grace_until(struct grace *g)
{
    if (g->until_ms < 0 && g->q->enough(g->q->arg, g->s)) {
        int64_t now = node_now_ms(), took = now - g->started_ms;
        g->until_ms = now + (took > g->q->grace_min_ms ? took : g->q->grace_min_ms);
    }
    return g->until_ms;
}

/* The gateway vertex's give-up (deg_vx_set_give_up): a sink whose
 * transport does not take its chunk (a frozen process) holds the run no
 * longer than the grace, as a sink that does not answer does. */
static bool grace_over(void *arg)
{
    struct grace *g = arg;
    pthread_mutex_lock(&g->s->lock);
    int64_t until = grace_until(g);
    pthread_mutex_unlock(&g->s->lock);
    return until >= 0 && node_now_ms() >= until;
}

/* Until every worker answered, or (g) the grace after a quorum of them
 * has passed: the others are then left running (s->lock held). */
static void wait_workers(struct node_deg_session *s, struct grace *g)
{
    while (s->pending > 0) {
        int64_t until = g ? grace_until(g) : -1;
        if (until < 0) {
            pthread_cond_wait(&s->cv, &s->lock);
            continue;
        }
        int64_t left = until - node_now_ms();
        if (left <= 0)
            break;
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += left / 1000;
        t.tv_nsec += (left % 1000) * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->lock, &t);
    }
}

/* One run of every vertex: the node ones by their workers' RUN messages,
 * the gateway's here. early: back as soon as the gateway's vertex is done
 * (a decode: it has every input then, so every source sent, and the RUN
 * answers are waited for by the next run, settle()). q: an encode's quorum
 * (node_deg_session_run). */
static int run_all(struct node_deg_session *s, size_t len, const struct node_stripe *stripe,
                   deg_result_fn result, void *arg, bool early, const struct node_deg_quorum *q,
                   char *err, size_t errlen)
{
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    int rc;
    int64_t started = node_now_ms();
    char obj[2 * NODE_OBJECT_ID_BYTES + 1];
    obj_hex(stripe, obj);
    json_t *head = json_pack("{s:I,s:s,s:I,s:I}", "len", (json_int_t)len, "object", obj, "stripe",
                             (json_int_t)stripe->stripe, "version", (json_int_t)stripe->version);
    s->run_head = head ? json_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    if (!s->run_head)
        return -ENOMEM;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->nworkers; i++) /* nothing stored until a worker says so */
        s->w[i].rc = -EINPROGRESS;
    s->refused = false;
    s->pending = s->nworkers;
    s->gen++;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    char gerr[512] = "";
    struct grace gr = {q, s, started, -1};
    if (q)
        deg_vx_set_give_up(x, grace_over, &gr);
    int grc = deg_vx_run(x, result, arg, NULL, gerr, sizeof(gerr));
    deg_vx_set_give_up(x, NULL, NULL);
    /* Given up after the grace: the quorum stored its chunks, the sinks
     * still out are late, and the vertex's connections to them are closed. */
    bool gave_up = grc == -EINPROGRESS;
    if (gave_up)
        grc = 0;
    if (grc == 0 && q && q->sent)
        q->sent(q->sent_arg);
    if (early && grc == 0) {
        /* Every worker read run_head before its source could send. */
        free(s->run_head);
        s->run_head = NULL;
        s->unsettled = true;
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    /* Every worker's call is bounded, so this wait is too. */
    wait_workers(s, grc || !q ? NULL : &gr);
    bool late = s->pending > 0;
    for (int i = 0; i < s->nworkers; i++)
        s->w[i].late = s->w[i].rc == -EINPROGRESS;
    pthread_mutex_unlock(&s->lock);
    if (late) { /* the workers left running still read run_head: freed at close */
        s->broken = true;
        return 0;
    }
    free(s->run_head);
    s->run_head = NULL;
    /* The root cause first: a failure other than a timeout. */
    int best = grc ? (grc == -ETIMEDOUT ? 1 : 2) : 0;
    rc = grc;
    if (grc)
        snprintf(err, errlen, "%s", gerr);
    for (int i = 0; i < s->nworkers; i++) {
        int r = s->w[i].rc, rank = !r ? 0 : r == -ETIMEDOUT ? 1 : 2;
        if (rank > best) {
            best = rank;
            rc = r;
            snprintf(err, errlen, "%s", s->w[i].err);
        }
    }
    s->broken = rc != 0 || gave_up; /* given up, its vertex cannot run again */
    return rc;
}

int node_deg_session_decode(struct node_deg_session *s, const struct deg_graph *g,
                            const int *node_of, size_t len, const struct node_stripe *stripe,
                            deg_result_fn result, void *arg, char *err, size_t errlen)
{
    bool failed = settle(s, err, errlen);
    s->refused = true;
    if (s->broken) {
        if (!failed)
            snprintf(err, errlen, "an earlier run of this session failed");
        return -EIO;
    }
    /* g's source on node N is the session's source on N, reading g's chunk;
     * the gateway's input from N is the session's input slot from N, so the
     * coefficients of g's slot go to that slot. */
    struct deg_vertex *sgv = &s->g->vertices[s->gv];
    const struct deg_vertex *ggv = NULL;
    bool same = fits(s->g, true) && fits(g, true) && g->nvertices == s->g->nvertices;
    for (int v = 0; same && v < g->nvertices; v++)
        if (g->vertices[v].node == DEG_GATEWAY)
            ggv = &g->vertices[v];
    same = same && ggv && ggv->nin == sgv->nin && ggv->nrows == sgv->nrows &&
           ggv->nresults == sgv->nresults && deg_vertex_calc(ggv) == deg_vertex_calc(sgv) &&
           !memcmp(ggv->results, sgv->results, (size_t)sgv->nresults * sizeof(*sgv->results));
    int perm[CODEC_MAX_CHUNKS * 4];
    same = same && sgv->nin <= (int)(sizeof(perm) / sizeof(perm[0]));
    for (int q = 0; same && q < sgv->nin; q++) {
        int sv = s->g->edges[sgv->in[q]].from, i = 0, node = -1;
        for (; i < ggv->nin; i++) {
            const struct deg_vertex *u = &g->vertices[g->edges[ggv->in[i]].from];
            node = node_of ? node_of[u->node] : u->node;
            if (node == s->g->vertices[sv].node)
                break;
        }
        if (!(same = i < ggv->nin))
            break;
        perm[q] = i;
        /* The session's graph says what its source sends this run: the
         * labels of the gateway's results that are its inputs. */
        s->chunk_of[sv] = s->g->vertices[sv].local[0] =
            g->vertices[g->edges[ggv->in[i]].from].local[0];
    }
    if (!same) {
        snprintf(err, errlen, "graph %s does not match the session's %s", g->desc, s->g->desc);
        return -EINVAL;
    }
    int ncols = sgv->nin;
    for (int r = 0; r < sgv->nrows; r++) {
        for (int q = 0; q < ncols; q++)
            sgv->coeffs[r * ncols + q] = ggv->coeffs[r * ncols + perm[q]];
        sgv->labels[r] = ggv->labels[r];
    }
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    deg_vx_retable(x);
    int rc = deg_vx_rebind(x, len, NULL, err, errlen);
    if (rc)
        return rc;
    return run_all(s, len, stripe, result, arg, true, NULL, err, errlen);
}
