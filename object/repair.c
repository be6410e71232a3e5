/*
 * The repair worker (repair.h says how the pieces fit).
 *
 * One stripe at a time, most lost chunks first:
 *   1. The record is read again; a stripe it no longer names (overwritten,
 *      deleted) needs nothing. What the stripe lacks is recomputed: chunks
 *      the record lists as missing, chunks on nodes that are out (removed for
 *      good) or down longer than down_out_ms, and the reported ones that a
 *      read of them confirms (missing or corrupt on a node that answers). A
 *      chunk on a node down for less than down_out_ms is waited for, as Ceph
 *      waits before it marks an OSD out. Chunks on draining nodes move.
 *   2. New homes: a lost chunk on a live node is rewritten in place; one on a
 *      lost node goes to the node placement ranks best for the stripe among
 *      those that hold none of its chunks (place_replacement).
 *   3. The pool's repair DEG runs node to node (node_deg_run; no byte passes
 *      the gateway): "ppr" a reduction tree per lost chunk, "ecpipe" a sliced
 *      chain, "rs" the conventional star (k chunks to the new home); "auto"
 *      (the default) takes PPR for one lost chunk and ECPipe for more, or
 *      for chunks of ecpipe_min_chunk bytes and up. LRC pools repair from
 *      the local group. A survivor that fails the run is found by reading
 *      the survivors, and the run is tried once more without it.
 *   4. The record is updated by compare-and-set: read again, and only if its
 *      version is still the one repaired is it written with that version + 1
 *      (any other writer's version is above it, so a concurrent PUT always
 *      wins; the rebuilt chunks are then orphans the scanner collects).
 *
 * Throttle: rebuilt bytes are paced to throttle_mbps (1e6 B/s), changeable
 * live. Progress: a run starts when the queue stops being empty; stripes and
 * bytes done/total, the rate over the run (paused time excluded) and the ETA
 * = bytes left / rate.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deg/deg.h"
#include "inec/log.h"
#include "object/objects_internal.h"
#include "object/repair.h"

#define IDLE_WAIT_MS     2000
#define PASS_MAX         256 /* entries handled per listing */
#define ECPIPE_MIN_CHUNK (4u << 20)

/* --- repairing one stripe --------------------------------------------------------------- */

static const struct codec *repair_codec(struct gw_repair *r, const struct gw_pool *pool,
                                        enum scheme s)
{
    int pi = (int)(pool - r->o->pools);
    const struct codec_profile *prof = codec_profile(pool->codec);
    if (prof->scheme == CODEC_LRC)
        return pool->codec; /* its star decode reads the local group: already the cheapest */
    enum codec_scheme want = s == SCHEME_PPR      ? CODEC_PPR
                             : s == SCHEME_ECPIPE ? CODEC_ECPIPE
                                                  : CODEC_RS;
    if (prof->scheme == want)
        return pool->codec;
    pthread_mutex_lock(&r->lock);
    if (!r->codecs[pi][s]) {
        struct codec_profile p = *prof;
        p.scheme = want;
        if (codec_create(&p, &r->codecs[pi][s], NULL, 0))
            r->codecs[pi][s] = NULL;
    }
    const struct codec *c = r->codecs[pi][s];
    pthread_mutex_unlock(&r->lock);
    return c ? c : pool->codec;
}

static enum scheme pool_scheme(struct gw_repair *r, const struct gw_pool *pool, int nlost, size_t L)
{
    pthread_mutex_lock(&r->lock);
    enum scheme s =
        gw_repair_scheme_parse(json_string_value(json_object_get(r->schemes, pool->p.name)));
    if (s == NSCHEMES)
        s = r->scheme_default;
    pthread_mutex_unlock(&r->lock);
    if (s == SCHEME_AUTO)
        s = nlost == 1 && L < ECPIPE_MIN_CHUNK ? SCHEME_PPR : SCHEME_ECPIPE;
    return s;
}

struct stripe_ctx {
    struct gw_objects *o;
    const struct gw_pool *pool;
    int k, n;
    size_t L;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t cs;
    const json_t *crc;
    int node[PLACE_MAX_CHUNKS]; /* current holder, -1 unknown */
    int rc[PLACE_MAX_CHUNKS];
    int which[PLACE_MAX_CHUNKS];
};

/* Reads chunk which[i]: 0 when its node holds it whole and correct. */
static void check_one(void *arg, int i)
{
    struct stripe_ctx *x = arg;
    int c = x->which[i], node = x->node[c];
    struct node_client *cl = NULL;
    int rc = node < 0                      ? -ENOENT
             : gw_node_is_down(x->o, node) ? -EHOSTDOWN
                                           : gw_client_get(x->o, node, &cl);
    void *data = NULL;
    size_t len = 0;
    struct node_chunk_id id = {.stripe = x->cs, .index = (uint32_t)c};
    memcpy(id.object, x->oid, sizeof(id.object));
    if (rc == 0)
        rc = node_client_get_chunk(cl, &id, &data, &len, NULL);
    if (node >= 0)
        gw_client_put(x->o, node, cl, gw_chunk_read_evidence(rc));
    if (rc == 0 && len != x->L)
        rc = -EBADMSG;
    if (rc == 0 && c < x->k &&
        (json_int_t)node_crc32c(data, len) != json_integer_value(json_array_get(x->crc, (size_t)c)))
        rc = -EBADMSG;
    free(data);
    x->rc[i] = rc;
}

/* Runs the checks of chunks which[0..n). */
static void check_chunks(struct stripe_ctx *x, int n)
{
    gw_fanout_run(x->o, n, check_one, x);
}

/* Keeps only the reader's result for chunk e (a star reader computes every
 * erased chunk; each new home stores only its own). */
static void keep_result(struct deg_graph *g, int reader, int e)
{
    for (int v = 0; v < g->nvertices; v++) {
        struct deg_vertex *vx = &g->vertices[v];
        if (vx->node != reader || !vx->nresults)
            continue;
        int n = 0;
        for (int i = 0; i < vx->nresults; i++) {
            struct deg_label l;
            if (deg_value_label(g, v, vx->results[i], &l) && l.chunk == e)
                vx->results[n++] = vx->results[i];
        }
        vx->nresults = n;
    }
}

/* DEG runs rebuilding the lost chunks at home[c]; 0 once every one is durable. */
static int rebuild(struct stripe_ctx *x, const struct codec *codec, const bool *lost,
                   const int *home, char *err, size_t errlen)
{
    struct gw_objects *o = x->o;
    int erased[PLACE_MAX_CHUNKS], ne = 0;
    for (int c = 0; c < x->n; c++)
        if (lost[c])
            erased[ne++] = c;
    enum codec_scheme cs = codec_profile(codec)->scheme;
    /* A star (RS, LRC) sends its survivors to one reader: one graph per new home. */
    bool star = cs == CODEC_RS || cs == CODEC_LRC;
    int runs = star ? ne : 1, rc = 0;
    for (int run = 0; run < runs && rc == 0; run++) {
        struct deg_request req = {.op = DEG_OP_DECODE, .nerased = ne};
        deg_placement_default(&req.placement);
        memcpy(req.erased, erased, sizeof(int) * (size_t)ne);
        for (int c = 0; c < x->n; c++)
            req.placement.holder[c] = lost[c] ? home[c] : x->node[c];
        if (star)
            req.placement.reader = home[erased[run]];
        struct deg_graph *g = NULL;
        rc = deg_build(codec, &req, &g, err, errlen);
        if (rc == 0 && star)
            keep_result(g, home[erased[run]], erased[run]);
        struct node_client **cl = rc ? NULL : calloc((size_t)o->nnodes, sizeof(*cl));
        if (rc == 0 && !cl)
            rc = -ENOMEM;
        for (int v = 0; rc == 0 && v < g->nvertices; v++) {
            int nd = g->vertices[v].node;
            if (nd >= 0 && !cl[nd] && (rc = gw_client_get(o, nd, &cl[nd])))
                snprintf(err, errlen, "node %s: %s", o->nodes[nd].id, strerror(-rc));
        }
        if (rc == 0) {
            uint8_t *none[PLACE_MAX_CHUNKS] = {0};
            struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
            struct node_stripe ns = {.stripe = x->cs, .version = GW_CHUNK_VERSION};
            memcpy(ns.object, x->oid, sizeof(ns.object));
            rc = node_deg_run(g, x->L, none, cl, o->nnodes, &ns, &ro, NULL, NULL, err, errlen);
        }
        for (int i = 0; cl && i < o->nnodes; i++)
            if (cl[i])
                gw_client_put(o, i, cl[i], 0);
        free(cl);
        deg_graph_destroy(g);
    }
    return rc;
}

/* A draining node's chunk copied to its new home (a read and a write). */
static int move_chunk(struct stripe_ctx *x, int c, int to)
{
    struct gw_objects *o = x->o;
    struct node_chunk_id id = {.stripe = x->cs, .index = (uint32_t)c};
    memcpy(id.object, x->oid, sizeof(id.object));
    struct node_client *a = NULL, *b = NULL;
    void *data = NULL;
    size_t len = 0;
    int rc = gw_client_get(o, x->node[c], &a);
    if (rc == 0)
        rc = node_client_get_chunk(a, &id, &data, &len, NULL);
    gw_client_put(o, x->node[c], a, gw_chunk_read_evidence(rc));
    if (rc == 0 && (rc = gw_client_get(o, to, &b)) == 0) {
        rc = node_client_put_chunk(b, &id, GW_CHUNK_VERSION, data, len);
        gw_client_put(o, to, b, rc);
    }
    free(data);
    return rc;
}

static void delete_chunk(struct gw_objects *o, int node, const uint8_t *oid, uint64_t cs, int c)
{
    struct node_client *cl = NULL;
    if (node < 0 || gw_node_is_down(o, node) || gw_client_get(o, node, &cl))
        return;
    struct node_chunk_id id = {.stripe = cs, .index = (uint32_t)c};
    memcpy(id.object, oid, NODE_OBJECT_ID_BYTES);
    int rc = node_client_delete_chunk(cl, &id, GW_CHUNK_VERSION);
    gw_client_put(o, node, cl, rc == -ENOENT ? 0 : rc);
}

/* The stripe of rec whose chunks are {oid, cs}, or -1. */
static int find_stripe(const json_t *rec, const uint8_t *oid, uint64_t cs)
{
    size_t ns = json_array_size(json_object_get(rec, "stripes"));
    for (size_t s = 0; s < ns; s++) {
        uint8_t o2[NODE_OBJECT_ID_BYTES];
        uint64_t c2;
        if (gw_layout_chunk(rec, s, o2, &c2) == 0 && c2 == cs && !memcmp(o2, oid, sizeof(o2)))
            return (int)s;
    }
    return -1;
}

enum outcome { DONE, WAIT, FAILED };

/* Repairs the stripe of one queue entry; *bytes gets what it rebuilt or moved. */
static enum outcome repair_entry(struct gw_repair *r, const json_t *e, uint64_t *bytes)
{
    struct gw_objects *o = r->o;
    *bytes = 0;
    const char *bucket = json_string_value(json_object_get(e, "bucket"));
    const char *key = json_string_value(json_object_get(e, "key"));
    struct stripe_ctx x = {.o = o,
                           .cs = (uint64_t)json_integer_value(json_object_get(e, "stripe"))};
    if (!bucket || !key || gw_oid_parse(json_string_value(json_object_get(e, "oid")), x.oid))
        return DONE; /* malformed: nothing to do with it */
    json_t *rec = NULL;
    int rc = gw_meta_read(o, bucket, key, &rec);
    if (rc == -ENOENT)
        return DONE;
    if (rc)
        return WAIT;
    int s = gw_rec_deleted(rec) ? -1 : find_stripe(rec, x.oid, x.cs);
    enum outcome out = DONE;
    json_t *st = json_array_get(json_object_get(rec, "stripes"), (size_t)(s < 0 ? 0 : s));
    x.pool = gw_pool_find(o, json_string_value(json_object_get(rec, "pool")) ?: "");
    if (s < 0 || !x.pool)
        goto done; /* overwritten or deleted: its chunks are garbage, not lost */
    uint64_t version = gw_rec_version(rec);
    x.k = (int)json_integer_value(json_object_get(rec, "k"));
    x.n = (int)json_integer_value(json_object_get(rec, "n"));
    x.L = (size_t)json_integer_value(json_object_get(st, "len"));
    x.crc = json_object_get(st, "crc");
    if (x.k != x.pool->p.k || x.n != x.pool->p.n || !x.L)
        goto done;
    const json_t *nodes = json_object_get(st, "nodes"), *missing = json_object_get(st, "missing");
    bool lost[PLACE_MAX_CHUNKS] = {0}, move[PLACE_MAX_CHUNKS] = {0};
    int nlost = 0, nwait = 0, nmove = 0;
    for (int c = 0; c < x.n; c++) {
        const char *id = json_string_value(json_array_get(nodes, (size_t)c));
        x.node[c] = id ? place_map_node(o->map, id) : -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(missing, i, v)
    {
        int c = (int)json_integer_value(v);
        if (c >= 0 && c < x.n)
            lost[c] = true;
    }
    /* What the report names, and what sits on lost or draining nodes, checked. */
    bool suspect[PLACE_MAX_CHUNKS] = {0};
    json_array_foreach(json_object_get(e, "lost"), i, v)
    {
        int c = (int)json_integer_value(v);
        if (c >= 0 && c < x.n)
            suspect[c] = true;
    }
    int nc = 0;
    for (int c = 0; c < x.n; c++) {
        int nd = x.node[c];
        if (lost[c])
            continue;
        if (nd < 0 || gw_repair_node_lost(o, nd)) {
            lost[c] = true;
        } else if (suspect[c] || gw_node_draining(o, nd)) {
            x.which[nc++] = c;
        }
    }
    check_chunks(&x, nc);
    for (int j = 0; j < nc; j++) {
        int c = x.which[j];
        if (x.rc[j] == -ENOENT || x.rc[j] == -EBADMSG)
            lost[c] = true;
        else if (x.rc[j])
            nwait++; /* its node does not answer: down, not (yet) out */
        else if (gw_node_draining(o, x.node[c]))
            move[c] = true;
    }
    /* A missing chunk whose home is down but not out waits for it too. */
    for (int c = 0; c < x.n; c++) {
        if (lost[c] && x.node[c] >= 0 && !gw_repair_node_lost(o, x.node[c]) &&
            gw_node_is_down(o, x.node[c]) && !gw_node_draining(o, x.node[c])) {
            lost[c] = false;
            nwait++;
        }
        nlost += lost[c];
        nmove += move[c];
    }
    if (nlost == 0 && nmove == 0) {
        out = nwait ? WAIT : DONE;
        goto done;
    }
    int m = x.n - x.k;
    int home[PLACE_MAX_CHUNKS];
    bool *usable = calloc((size_t)o->nnodes, sizeof(bool));
    if (!usable) {
        out = WAIT;
        goto done;
    }
    for (int nd = 0; nd < o->nnodes; nd++)
        usable[nd] = gw_repair_node_usable(o, nd);
    int taken[PLACE_MAX_CHUNKS];
    for (int c = 0; c < x.n; c++)
        taken[c] = lost[c] || move[c] ? -1 : x.node[c];
    char err[512] = "";
    for (int c = 0; c < x.n; c++) {
        home[c] = x.node[c];
        if (!lost[c] && !move[c])
            continue;
        /* In place when its node is alive and in; else a new home. */
        if (lost[c] && x.node[c] >= 0 && usable[x.node[c]]) {
            taken[c] = home[c];
            continue;
        }
        home[c] = place_replacement(o->map, x.oid, sizeof(x.oid), x.cs, taken, x.n, usable);
        if (home[c] < 0) {
            free(usable);
            inec_log(INEC_LOG_WARN, "repair", "no node can take chunk %d of %s/%s stripe %llu", c,
                     bucket, key, (unsigned long long)x.cs);
            out = WAIT;
            goto done;
        }
        taken[c] = home[c];
    }
    free(usable);
    rc = 0;
    if (nlost > m) {
        r->unrecoverable++;
        inec_log(INEC_LOG_ERROR, "repair",
                 "%s/%s stripe %llu lost %d chunks, the code tolerates %d", bucket, key,
                 (unsigned long long)x.cs, nlost, m);
        out = FAILED;
        goto done;
    }
    if (nlost) {
        enum scheme sc = pool_scheme(r, x.pool, nlost, x.L);
        const struct codec *codec = repair_codec(r, x.pool, sc);
        for (int attempt = 0; attempt < 2; attempt++) {
            rc = rebuild(&x, codec, lost, home, err, sizeof(err));
            if (rc == 0 || attempt == 1)
                break;
            /* Which survivor failed it? */
            int nj = 0;
            for (int c = 0; c < x.n; c++)
                if (!lost[c])
                    x.which[nj++] = c;
            check_chunks(&x, nj);
            int more = 0;
            for (int j = 0; j < nj; j++) {
                int c = x.which[j];
                if (x.rc[j] == -ENOENT || x.rc[j] == -EBADMSG) {
                    lost[c] = true;
                    more++;
                    if (x.node[c] >= 0 && gw_repair_node_usable(o, x.node[c]))
                        home[c] = x.node[c];
                    else
                        more = -100; /* needs a new home: next time */
                } else if (x.rc[j]) {
                    more = -100; /* a survivor does not answer: wait */
                }
            }
            nlost = 0;
            for (int c = 0; c < x.n; c++)
                nlost += lost[c];
            if (more <= 0 || nlost > m)
                break;
        }
        if (rc) {
            inec_log(INEC_LOG_WARN, "repair", "%s/%s stripe %llu: %s", bucket, key,
                     (unsigned long long)x.cs, err);
            out = WAIT;
            goto done;
        }
    }
    for (int c = 0; c < x.n && rc == 0; c++)
        if (move[c] && (rc = move_chunk(&x, c, home[c])))
            move[c] = false;
    if (rc && !nlost) {
        out = WAIT;
        goto done;
    }
    /* Compare-and-set of the layout. */
    bool changed = false;
    for (int c = 0; c < x.n; c++)
        changed |= (lost[c] || move[c]) && home[c] != x.node[c];
    changed |= json_array_size(missing) > 0;
    if (changed) {
        json_t *now = NULL;
        rc = gw_meta_read(o, bucket, key, &now);
        if (rc == 0 && gw_rec_version(now) == version) {
            json_t *nrec = json_deep_copy(now);
            json_t *nst = json_array_get(json_object_get(nrec, "stripes"), (size_t)s);
            json_t *nn = json_object_get(nst, "nodes");
            for (int c = 0; c < x.n; c++)
                if (lost[c] || move[c])
                    json_array_set_new(nn, (size_t)c, json_string(o->nodes[home[c]].id));
            json_t *nm = json_array();
            json_array_foreach(missing, i, v)
            {
                int c = (int)json_integer_value(v);
                if (c >= 0 && c < x.n && !lost[c])
                    json_array_append(nm, v);
            }
            if (json_array_size(nm))
                json_object_set_new(nst, "missing", nm);
            else {
                json_object_del(nst, "missing");
                json_decref(nm);
            }
            json_object_set_new(nrec, "version", json_integer((json_int_t)(version + 1)));
            rc = gw_meta_write_at(o, bucket, key, nrec);
            json_decref(nrec);
        } else if (rc == 0) {
            rc = -EAGAIN; /* changed meanwhile: the next pass looks again */
        }
        json_decref(now);
        if (rc == GW_META_IN_DOUBT) { /* either layout may be read: keep both */
            out = WAIT;
            goto done;
        }
        if (rc) {
            /* What we rebuilt elsewhere is nobody's: free it now. */
            for (int c = 0; c < x.n; c++)
                if ((lost[c] || move[c]) && home[c] != x.node[c])
                    delete_chunk(o, home[c], x.oid, x.cs, c);
            out = WAIT;
            goto done;
        }
    }
    /* The old copies: moved ones, and stale ones on live nodes that no longer hold them. */
    for (int c = 0; c < x.n; c++)
        if ((lost[c] || move[c]) && home[c] != x.node[c] && x.node[c] >= 0 &&
            !gw_repair_node_lost(o, x.node[c]))
            delete_chunk(o, x.node[c], x.oid, x.cs, c);
    for (int c = 0; c < x.n; c++)
        *bytes += (lost[c] || move[c]) ? x.L : 0;
    r->chunks_moved += (uint64_t)nmove;
    inec_log(INEC_LOG_INFO, "repair", "repaired %s/%s stripe %llu: %d rebuilt, %d moved", bucket,
             key, (unsigned long long)x.cs, nlost, nmove);
    out = nwait ? WAIT : DONE;
done:
    json_decref(rec);
    return out;
}

/* --- the worker loop ---------------------------------------------------------------- */

struct pass {
    json_t *keys, *entries;
    uint64_t stripes, bytes;
    int64_t oldest_ns;
};

static int pass_cb(const char *qkey, json_t *e, void *arg)
{
    struct pass *p = arg;
    p->stripes++;
    p->bytes += (uint64_t)json_integer_value(json_object_get(e, "len")) *
                json_array_size(json_object_get(e, "lost"));
    int64_t q = json_integer_value(json_object_get(e, "queued_ns"));
    if (q && (!p->oldest_ns || q < p->oldest_ns))
        p->oldest_ns = q;
    if (json_array_size(p->keys) < PASS_MAX) {
        json_array_append_new(p->keys, json_string(qkey));
        json_array_append(p->entries, e);
    }
    return 0;
}

/* Waits ms (or until stopped or kicked when `kickable`); lock held. */
static void wait_locked(struct gw_repair *r, int64_t ms, bool kickable)
{
    struct timespec ts = gw_deadline_in_ms(ms);
    while (!r->stop && !(kickable && r->kick))
        if (pthread_cond_timedwait(&r->cond, &r->lock, &ts))
            break;
}

/* Paces rebuilt bytes to the throttle. */
static void pace(struct gw_repair *r, uint64_t bytes)
{
    pthread_mutex_lock(&r->lock);
    for (;;) {
        if (r->throttle_mbps <= 0 || r->stop || r->paused) {
            r->pace_start_ms = 0;
            break;
        }
        if (!r->pace_start_ms) {
            r->pace_start_ms = gw_now_ms();
            r->pace_bytes = 0;
        }
        int64_t due = r->pace_start_ms +
                      (int64_t)((double)(r->pace_bytes + bytes) / (r->throttle_mbps * 1e3));
        int64_t now = gw_now_ms();
        if (due <= now) {
            r->pace_bytes += bytes;
            break;
        }
        double mbps = r->throttle_mbps;
        wait_locked(r, due - now, false);
        if (r->throttle_mbps != mbps)
            r->pace_start_ms = 0;
    }
    pthread_mutex_unlock(&r->lock);
}

void *gw_repair_worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "repair");
    struct gw_repair *r = arg;
    struct gw_objects *o = r->o;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        bool stop = r->stop;
        r->kick = false;
        pthread_mutex_unlock(&r->lock);
        if (stop)
            break;
        int64_t now = gw_now_ms();
        if (now - r->admin_loaded_ms >= GW_REPAIR_ADMIN_EVERY_MS)
            gw_repair_admin_load(o);
        gw_repair_flush_pending(r);
        struct pass p = {.keys = json_array(), .entries = json_array()};
        int rc = gw_rq_list(o, pass_cb, &p);
        pthread_mutex_lock(&r->lock);
        if (rc == 0) {
            if (!r->running && p.stripes) {
                r->running = true;
                r->run_start_ms = gw_now_ms();
                r->run_paused_ms = 0;
                r->paused_since_ms = r->paused ? r->run_start_ms : 0;
                r->run_stripes_done = r->run_bytes_done = 0;
            }
            r->left_stripes = p.stripes;
            r->left_bytes = p.bytes;
            r->oldest_ns = p.oldest_ns;
        }
        bool paused = r->paused;
        pthread_mutex_unlock(&r->lock);
        uint64_t waiting = 0, done_here = 0;
        size_t i;
        json_t *e;
        json_array_foreach(p.entries, i, e)
        {
            pthread_mutex_lock(&r->lock);
            paused = r->paused;
            stop = r->stop;
            pthread_mutex_unlock(&r->lock);
            if (paused || stop)
                break;
            uint64_t bytes = 0;
            enum outcome out = repair_entry(r, e, &bytes);
            const char *qkey = json_string_value(json_array_get(p.keys, i));
            if (out == DONE) {
                /* Remembered before the entry goes: a scan report that finds
                 * it gone finds it here (one that finds it still queued does
                 * not look, so a failed removal leaves nothing wrong). */
                pthread_mutex_lock(&r->lock);
                if (r->scanning && json_object_size(r->removed) < GW_REPAIR_REMOVED_MAX)
                    json_object_set_new(r->removed, qkey, json_true());
                json_object_del(r->noted, qkey); /* a loss after this is news */
                pthread_mutex_unlock(&r->lock);
                if (gw_rq_remove(o, qkey) != 0)
                    out = WAIT;
            }
            uint64_t est = (uint64_t)json_integer_value(json_object_get(e, "len")) *
                           json_array_size(json_object_get(e, "lost"));
            pthread_mutex_lock(&r->lock);
            if (out == DONE) {
                r->run_stripes_done++;
                r->run_bytes_done += bytes;
                r->stripes_repaired += bytes > 0;
                r->bytes_repaired += bytes;
                r->left_stripes -= r->left_stripes > 0;
                r->left_bytes -= est < r->left_bytes ? est : r->left_bytes;
                done_here++;
            } else {
                waiting++;
                r->failed += out == FAILED;
            }
            pthread_mutex_unlock(&r->lock);
            if (bytes)
                pace(r, bytes);
        }
        pthread_mutex_lock(&r->lock);
        r->waiting_stripes = waiting;
        if (rc == 0 && p.stripes == 0 && r->running && json_object_size(r->pending) == 0) {
            r->running = false;
            r->pace_start_ms = 0;
        }
        /* Nothing done this pass: wait for news, or look again in a moment. */
        if (!r->stop && (done_here == 0 || r->paused) && !r->kick)
            wait_locked(r, rc ? 1000 : IDLE_WAIT_MS, true);
        pthread_mutex_unlock(&r->lock);
        json_decref(p.keys);
        json_decref(p.entries);
    }
    return NULL;
}
