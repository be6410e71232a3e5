/*
 * DEG vertices hosted by the node: a vertex of a graph gets a device of its
 * own (the runner's shape), its local chunks loaded from the store as
 * {object, stripe, chunk index}; every whole chunk it results in (a sink of
 * an encode, the new holder in a repair) is written to the store, durable,
 * before its run is reported done. A persistent vertex serves run after run.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codecs/errf.h"
#include "deg/deg.h"
#include "inec/log.h"
#include "node/client.h"
#include "node/service_internal.h"

struct hosted {
    struct hosted *next;
    int handle, v;
    bool running;
    bool persist;   /* stays set up after a successful run, for the next stripe */
    int chunk;      /* persistent: the chunk this run's result is stored as (-1: the graph's) */
    time_t expires; /* set up but not run (again) by then: the runner is gone */
    struct deg_graph *g;
    struct deg_vx *x;
    int timeout_ms;
    size_t len;
    struct node_stripe stripe;
    uint8_t *chunks[CODEC_MAX_CHUNKS];
    /* run results */
    int rc;
    char err[256];
    struct deg_results res;
};

static void hosted_free(struct hosted *h)
{
    if (!h)
        return;
    deg_vx_close(h->x);
    deg_graph_destroy(h->g);
    for (int i = 0; i < CODEC_MAX_CHUNKS; i++)
        free(h->chunks[i]);
    free(h);
}

/* Takes vertex `handle` out of the table (NULL if unknown or running). */
static struct hosted *hosted_take(struct node_service *s, int handle)
{
    pthread_mutex_lock(&s->lock);
    struct hosted **pp = &s->vertices;
    while (*pp && (*pp)->handle != handle)
        pp = &(*pp)->next;
    struct hosted *h = *pp;
    if (h && !h->running)
        *pp = h->next;
    else
        h = NULL;
    pthread_mutex_unlock(&s->lock);
    return h;
}

/* Vertex `handle`, marked busy (running) so nothing closes it meanwhile;
 * NULL if unknown or busy. hosted_release() ends that. */
static struct hosted *hosted_claim(struct node_service *s, int handle)
{
    pthread_mutex_lock(&s->lock);
    struct hosted *h = s->vertices;
    while (h && h->handle != handle)
        h = h->next;
    if (h && h->running)
        h = NULL;
    if (h)
        h->running = true;
    pthread_mutex_unlock(&s->lock);
    return h;
}

static void hosted_release(struct node_service *s, struct hosted *h)
{
    pthread_mutex_lock(&s->lock);
    h->running = false;
    pthread_mutex_unlock(&s->lock);
}

static json_t *req_json(struct req *r)
{
    return json_loadb((const char *)r->msg.data, r->msg.len, 0, NULL);
}

static void hosted_touch(struct hosted *h, int timeout_ms)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    h->expires = now.tv_sec + 2 * timeout_ms / 1000 + 5;
}

/* {"graph":{...},"vertex":name,"len":N,"timeout_ms":T,"incoherent":b,
 *  "object":hex,"stripe":S,"version":V,"persist":b} -> {"handle","addr","in":[qpn],"out":[qpn]}
 * A persistent vertex serves run after run; each run names its stripe,
 * length and chunk: the chunk a sink stores its result as, or the one chunk
 * a source (one local, no results: a decode's survivor) reads and sends. */
void node_req_vertex_setup(struct req *r)
{
    struct node_service *s = r->svc;
    char err[256] = "";
    json_t *j = req_json(r);
    struct hosted *h = calloc(1, sizeof(*h));
    const char *vname = json_string_value(json_object_get(j, "vertex"));
    const char *obj = json_string_value(json_object_get(j, "object"));
    json_int_t len = json_integer_value(json_object_get(j, "len"));
    char *gtext = json_dumps(json_object_get(j, "graph"), JSON_COMPACT);
    int rc = 0;
    if (!h || !j) {
        rc = codec_errf(err, sizeof(err), h ? -EPROTO : -ENOMEM, "vertex setup: bad request");
        goto out;
    }
    if (!vname || !obj || strlen(obj) != 2 * NODE_OBJECT_ID_BYTES || !gtext || len <= 0 ||
        len > NODE_CHUNK_MAX) {
        rc =
            codec_errf(err, sizeof(err), -EPROTO, "vertex setup: needs graph, vertex, object, len");
        goto out;
    }
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        sscanf(obj + 2 * i, "%2hhx", &h->stripe.object[i]);
    h->stripe.stripe = (uint64_t)json_integer_value(json_object_get(j, "stripe"));
    h->stripe.version = (uint64_t)json_integer_value(json_object_get(j, "version"));
    h->len = (size_t)len;
    if ((rc = deg_from_json(gtext, &h->g, err, sizeof(err))))
        goto out;
    int v = deg_find_vertex(h->g, vname);
    if (v < 0) {
        rc = codec_errf(err, sizeof(err), -ENOENT, "vertex setup: the graph has no vertex %s",
                        vname);
        goto out;
    }
    h->v = v;
    h->chunk = -1;
    const struct deg_vertex *vx = &h->g->vertices[v];
    if ((h->persist = json_is_true(json_object_get(j, "persist"))) && vx->nlocal > 0 &&
        (vx->nlocal > 1 || vx->nresults > 0)) {
        rc = codec_errf(err, sizeof(err), -EINVAL,
                        "vertex %s: a persistent vertex reads at most one chunk and keeps nothing",
                        vname);
        goto out;
    }
    for (int i = 0; i < vx->nlocal && rc == 0 && !h->persist; i++) {
        int c = vx->local[i];
        struct node_chunk_id id = {.stripe = h->stripe.stripe, .index = (uint32_t)c};
        memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
        size_t got = 0;
        void *buf = NULL;
        if (h->chunks[c])
            continue;
        if ((rc = node_store_get_chunk_alloc(s->store, &id, &buf, &got, NULL)))
            codec_errf(err, sizeof(err), rc, "vertex %s: local chunk %d: %s", vname, c,
                       node_store_strerror(rc));
        else if (got != h->len)
            rc = codec_errf(err, sizeof(err), -EINVAL,
                            "vertex %s: local chunk %d has %zu bytes, not %zu", vname, c, got,
                            h->len);
        h->chunks[c] = buf;
    }
    if (rc)
        goto out;
    struct deg_run_opts o = {
        .incoherent = json_is_true(json_object_get(j, "incoherent")),
        .timeout_ms = (int)json_integer_value(json_object_get(j, "timeout_ms")),
        .options = s->dev_options,
    };
    if (o.timeout_ms <= 0)
        o.timeout_ms = s->timeout_ms;
    /* A persistent source reads its chunk run by run (rebind). */
    if ((rc = deg_vx_open(h->g, v, h->len, h->persist ? NULL : h->chunks, &o, &h->x, err,
                          sizeof(err))))
        goto out;
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < vx->nin; i++)
        json_array_append_new(ins, json_integer(deg_vx_in_qpn(h->x, i)));
    for (int i = 0; i < vx->nout_edges; i++)
        json_array_append_new(outs, json_integer(deg_vx_out_qpn(h->x, i)));
    h->timeout_ms = o.timeout_ms;
    hosted_touch(h, o.timeout_ms);
    pthread_mutex_lock(&s->lock);
    h->handle = ++s->next_handle;
    h->next = s->vertices;
    s->vertices = h;
    pthread_mutex_unlock(&s->lock);
    inec_log(INEC_LOG_DEBUG, "node", "vertex set up id=%s vertex=%s handle=%d", s->id, vname,
             h->handle);
    node_reply_json(r, json_pack("{s:i,s:s,s:o,s:o}", "handle", h->handle, "addr",
                                 deg_vx_addr(h->x), "in", ins, "out", outs));
    h = NULL;
out:
    if (rc) {
        inec_log(INEC_LOG_WARN, "node", "vertex setup failed id=%s err=\"%s\"", s->id, err);
        node_reply_err(r, rc, err);
    }
    hosted_free(h);
    free(gtext);
    json_decref(j);
}

/* {"handle":H,"in":[{"addr","qpn"}|null...],"out":[...]} */
void node_req_vertex_connect(struct req *r)
{
    char err[256] = "";
    json_t *j = req_json(r);
    struct hosted *h = hosted_claim(r->svc, (int)json_integer_value(json_object_get(j, "handle")));
    int rc = h ? 0 : codec_errf(err, sizeof(err), -ENOENT, "vertex connect: no such vertex");
    for (int d = 0; d < 2 && rc == 0; d++) {
        json_t *a = json_object_get(j, d ? "out" : "in");
        for (size_t i = 0; i < json_array_size(a) && rc == 0; i++) {
            json_t *p = json_array_get(a, i);
            const char *addr = json_string_value(json_object_get(p, "addr"));
            uint32_t qpn = (uint32_t)json_integer_value(json_object_get(p, "qpn"));
            if (!addr)
                continue; /* that peer failed: the run will name this edge */
            rc = d ? deg_vx_connect_out(h->x, (int)i, addr, qpn, err, sizeof(err))
                   : deg_vx_connect_in(h->x, (int)i, addr, qpn, err, sizeof(err));
        }
    }
    json_decref(j);
    if (h)
        hosted_release(r->svc, h);
    if (rc)
        return node_reply_err(r, rc, err);
    node_reply(r, 0);
}

static void vertex_run(struct hosted *h)
{
    h->rc = deg_vx_run(h->x, deg_collect, &h->res, NULL, h->err, sizeof(h->err));
}

/* Named here, not in vertex_run: a lone vertex runs on the worker itself,
 * which must keep its name. */
static void *vertex_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-vertex");
    vertex_run(arg);
    return NULL;
}

/* Crash hooks for the write-hole tests (tests/integration/volume_crash.py).
 * With INEC_NODE_CRASH_FILE set, the file's first line names a step of a
 * delta-parity update (a graph built with op update), "update-ROLE-WHEN":
 * ROLE "data" (the vertex holding the written chunk: it sends the deltas) or
 * "parity" (a vertex adding a delta to its parity); WHEN "run" (before the
 * vertex runs), "computed" (ran: deltas sent or the new parity in memory,
 * nothing stored) or "stored" (its new chunk durable, no reply yet). The
 * first node of the cluster to reach that step renames the file to
 * FILE.fired (so exactly one node fires) and SIGKILLs itself. */
static void update_crash_hook(const struct hosted *h, const char *when)
{
    const char *path = getenv("INEC_NODE_CRASH_FILE");
    if (!path || !strstr(h->g->desc, " update chunk="))
        return;
    char want[64] = "", step[64], fired[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(want, sizeof(want), f))
        want[0] = '\0';
    fclose(f);
    want[strcspn(want, "\n")] = '\0';
    snprintf(step, sizeof(step), "update-%s-%s",
             h->g->vertices[h->v].nout_edges > 0 ? "data" : "parity", when);
    snprintf(fired, sizeof(fired), "%s.fired", path);
    if (strcmp(want, step) == 0 && rename(path, fired) == 0) {
        inec_log(INEC_LOG_WARN, "node", "crash hook: SIGKILL at %s", step);
        raise(SIGKILL);
    }
}

/* A persistent vertex's next run: {"len","object","stripe","version",
 * "chunks":[c per handle]} of the run request. */
static int rebind(struct node_service *svc, struct hosted *h, json_t *j, size_t i, char *err,
                  size_t errlen)
{
    json_t *len = json_object_get(j, "len");
    const char *obj = json_string_value(json_object_get(j, "object"));
    if (!len && !obj)
        return 0;
    if (!h->persist || !obj || strlen(obj) != 2 * NODE_OBJECT_ID_BYTES)
        return codec_errf(err, errlen, -EPROTO,
                          "vertex run: stripe fields for a vertex set up once");
    for (int b = 0; b < NODE_OBJECT_ID_BYTES; b++)
        sscanf(obj + 2 * b, "%2hhx", &h->stripe.object[b]);
    h->stripe.stripe = (uint64_t)json_integer_value(json_object_get(j, "stripe"));
    h->stripe.version = (uint64_t)json_integer_value(json_object_get(j, "version"));
    json_t *c = json_array_get(json_object_get(j, "chunks"), i);
    h->chunk = c ? (int)json_integer_value(c) : -1;
    size_t n = (size_t)json_integer_value(len);
    const struct deg_vertex *vx = &h->g->vertices[h->v];
    if (vx->nlocal == 0) {
        int rc = deg_vx_rebind(h->x, n, NULL, err, errlen);
        if (rc == 0)
            h->len = n;
        return rc;
    }
    /* A source: this run's chunk, read now (the store checks its CRC). */
    if (h->chunk < 0 || h->chunk >= h->g->n)
        return codec_errf(err, errlen, -EPROTO, "vertex run: no chunk for source %s", vx->name);
    struct node_chunk_id id = {.stripe = h->stripe.stripe, .index = (uint32_t)h->chunk};
    memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
    void *buf = NULL;
    size_t got = 0;
    int rc = node_store_get_chunk_alloc(svc->store, &id, &buf, &got, NULL);
    if (rc)
        return codec_errf(err, errlen, rc, "vertex %s: local chunk %d: %s", vx->name, h->chunk,
                          node_store_strerror(rc));
    if (got != n) {
        free(buf);
        return codec_errf(err, errlen, -EINVAL, "vertex %s: local chunk %d has %zu bytes, not %zu",
                          vx->name, h->chunk, got, n);
    }
    int slot = vx->local[0];
    uint8_t *chunks[CODEC_MAX_CHUNKS] = {0};
    chunks[slot] = buf;
    if ((rc = deg_vx_rebind(h->x, n, chunks, err, errlen))) {
        free(buf);
        return rc;
    }
    free(h->chunks[slot]); /* the last run's, no longer registered */
    h->chunks[slot] = buf;
    h->len = n;
    return 0;
}

/* {"handles":[H...]} (+ rebind's fields for persistent vertices): runs them
 * all at once (they may feed each other), then stores every whole-chunk
 * result durably. -> {"vertices":[{"handle","results":
 * [{"chunk","partial","stored"}]}]}, or an error naming the first failure. */
void node_req_vertex_run(struct req *r)
{
    struct node_service *s = r->svc;
    json_t *j = req_json(r), *hs = json_object_get(j, "handles");
    size_t n = json_array_size(hs);
    struct hosted **v = calloc(n + 1, sizeof(*v));
    pthread_t *t = calloc(n + 1, sizeof(*t));
    bool *started = calloc(n + 1, sizeof(*started));
    int rc = v && t && started ? 0 : -ENOMEM;
    char err[300] = "";
    for (size_t i = 0; i < n && rc == 0; i++) {
        int handle = (int)json_integer_value(json_array_get(hs, i));
        if (!(v[i] = hosted_claim(s, handle)))
            rc = codec_errf(err, sizeof(err), -ENOENT, "vertex run: no vertex %d", handle);
        else if ((rc = rebind(s, v[i], j, i, err, sizeof(err))) == 0)
            v[i]->res.n = 0;
        if (rc == 0)
            update_crash_hook(v[i], "run");
    }
    /* One vertex (a sink of an encode) runs on this worker: no thread to start. */
    if (n == 1 && rc == 0)
        vertex_run(v[0]);
    for (size_t i = 0; i < n && rc == 0 && n > 1; i++)
        started[i] = pthread_create(&t[i], NULL, vertex_main, v[i]) == 0;
    for (size_t i = 0; i < n && rc == 0 && n > 1; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        else
            v[i]->rc = codec_errf(v[i]->err, sizeof(v[i]->err), -EAGAIN, "no thread for a vertex");
    }
    json_t *out = json_array();
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct hosted *h = v[i];
        json_t *res = json_array();
        if (h->rc == 0)
            update_crash_hook(h, "computed");
        for (int k = 0; k < h->res.n && h->rc == 0; k++) {
            bool store = !h->res.labels[k].partial;
            if (store) {
                if (h->chunk >= 0)
                    h->res.labels[k].chunk = h->chunk;
                struct node_chunk_id id = {.stripe = h->stripe.stripe,
                                           .index = (uint32_t)h->res.labels[k].chunk};
                memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
                int src =
                    node_store_put_chunk(s->store, &id, h->stripe.version, h->res.data[k], h->len);
                if (src)
                    h->rc = codec_errf(h->err, sizeof(h->err), src,
                                       "vertex %s: storing chunk %d: %s", h->g->vertices[h->v].name,
                                       h->res.labels[k].chunk, node_store_strerror(src));
            }
            json_array_append_new(res,
                                  json_pack("{s:i,s:b,s:b}", "chunk", h->res.labels[k].chunk,
                                            "partial", h->res.labels[k].partial, "stored", store));
        }
        if (h->rc == 0)
            update_crash_hook(h, "stored");
        if (h->rc && !rc) {
            rc = h->rc;
            snprintf(err, sizeof(err), "%s", h->err);
        }
        json_array_append_new(out, json_pack("{s:i,s:o}", "handle", h->handle, "results", res));
    }
    /* A vertex runs once, a persistent one until a run fails: after a failure
     * its QPs hold requests that will never complete. */
    for (size_t i = 0; i < n && v && v[i]; i++) {
        int handle = v[i]->handle;
        bool keep = v[i]->persist && rc == 0;
        if (keep)
            hosted_touch(v[i], v[i]->timeout_ms);
        hosted_release(s, v[i]);
        if (!keep)
            hosted_free(hosted_take(s, handle));
    }
    free(v);
    free(t);
    free(started);
    json_decref(j);
    if (rc) {
        json_decref(out);
        inec_log(INEC_LOG_WARN, "node", "vertex run failed id=%s err=\"%s\"", s->id, err);
        node_reply_err(r, rc, err);
    } else {
        node_reply_json(r, json_pack("{s:o}", "vertices", out));
    }
}

void node_req_vertex_close(struct req *r)
{
    json_t *j = req_json(r);
    struct hosted *h = hosted_take(r->svc, (int)json_integer_value(json_object_get(j, "handle")));
    json_decref(j);
    node_reply(r, h ? 0 : -ENOENT);
    hosted_free(h);
}

/* Closes vertices whose runner set them up and went away. */
void node_vertices_reap(struct node_service *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct hosted *dead = NULL;
    pthread_mutex_lock(&s->lock);
    for (struct hosted **pp = &s->vertices; *pp;) {
        struct hosted *h = *pp;
        if (!h->running && h->expires < now.tv_sec) {
            *pp = h->next;
            h->next = dead;
            dead = h;
        } else {
            pp = &h->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (struct hosted *h = dead, *n; h; h = n) {
        n = h->next;
        inec_log(INEC_LOG_WARN, "node", "vertex never run, closed id=%s handle=%d", s->id,
                 h->handle);
        hosted_free(h);
    }
}

void node_vertices_close(struct node_service *s)
{
    for (struct hosted *h = s->vertices, *n; h; h = n) {
        n = h->next;
        if (!h->running)
            hosted_free(h);
    }
}
