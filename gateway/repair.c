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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deg/deg.h"
#include "gateway/objects_internal.h"
#include "gateway/repair.h"
#include "inec/log.h"

#define IDLE_WAIT_MS     2000
#define ADMIN_EVERY_MS   3000
#define PASS_MAX         256 /* entries handled per listing */
#define PENDING_MAX      10000
#define REMOVED_MAX      100000 /* past it a scan may queue a repaired stripe again: a check */
#define ECPIPE_MIN_CHUNK (4u << 20)

enum scheme { SCHEME_AUTO, SCHEME_PPR, SCHEME_ECPIPE, SCHEME_RS, NSCHEMES };
static const char *const scheme_names[NSCHEMES] = {"auto", "ppr", "ecpipe", "rs"};

struct gw_repair {
    struct gw_objects *o;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    pthread_t worker, scanner;
    bool worker_started, scanner_started;

    /* settings (lock) */
    bool paused;
    double throttle_mbps; /* 0: unlimited */
    int scan_interval_ms; /* 0: no scanner */
    int64_t down_out_ms;
    int64_t orphan_grace_ms;
    enum scheme scheme_default;
    json_t *schemes; /* pool name -> scheme name */
    uint64_t admin_version;
    int64_t admin_loaded_ms;
    bool kick;     /* the worker has something new to do */
    bool scan_now; /* the scanner walks at once */
    bool scanning; /* a walk is under way */
    int64_t scrub_interval_ms, last_scrub_ms;
    bool scrub_now;

    json_t *pending; /* queue key -> entry, not yet on the nodes */
    json_t *removed; /* queue keys the worker removed since the scan under way began */

    /* progress of the current run (lock) */
    bool running;
    int64_t run_start_ms, run_paused_ms, paused_since_ms;
    uint64_t run_stripes_done, run_bytes_done;
    uint64_t left_stripes, left_bytes, waiting_stripes; /* at the last listing */
    int64_t oldest_ns;
    int64_t pace_start_ms;
    uint64_t pace_bytes;

    /* totals since start */
    uint64_t stripes_repaired, bytes_repaired, chunks_moved, failed, unrecoverable;
    /* the last scan */
    uint64_t degraded_by_lost[PLACE_MAX_CHUNKS + 1];
    int scan_maxlost;
    uint64_t scan_stripes, orphans_deleted, tombstones_deleted, scans;
    int64_t tombstone_grace_ms, tombstones_last_ms;
    int64_t scan_ms, scan_done_ns;

    struct codec *codecs[GW_MAX_POOLS][NSCHEMES];
};

static int64_t now_ms(void)
{
    return gw_now_ms();
}

static enum scheme scheme_parse(const char *s)
{
    for (int i = 0; s && i < NSCHEMES; i++)
        if (strcmp(s, scheme_names[i]) == 0)
            return (enum scheme)i;
    return NSCHEMES;
}

/* --- node states ------------------------------------------------------------------ */

/* Silent for this long (the failure detector's last answer), a down node. */
static int64_t silent_ms(struct gw_objects *o, int node)
{
    if (!gw_node_is_down(o, node))
        return 0;
    return now_ms() - atomic_load(&o->nodes[node].last_seen_ms);
}

bool gw_repair_node_lost(struct gw_objects *o, int node)
{
    if (atomic_load(&o->nodes[node].admin) == PLACE_OUT)
        return true;
    struct gw_repair *r = o->rep;
    return r && r->down_out_ms >= 0 && silent_ms(o, node) >= r->down_out_ms;
}

bool gw_repair_node_usable(struct gw_objects *o, int node)
{
    return atomic_load(&o->nodes[node].admin) == PLACE_UP &&
           o->map->nodes[node].state == PLACE_UP && !gw_node_is_down(o, node) &&
           !gw_repair_node_lost(o, node);
}

static bool node_draining(struct gw_objects *o, int node)
{
    return atomic_load(&o->nodes[node].admin) == PLACE_DRAINING ||
           o->map->nodes[node].state == PLACE_DRAINING;
}

/* --- the admin record: node states and settings, on every node ---------------------------
 * Not placed by metadata homes (those depend on it): written to every node,
 * done at a majority; read from every node, the highest version of a
 * majority of answers (a majority read meets every majority write). */

struct all_job {
    struct gw_objects *o;
    const char *blob;
    size_t len;
    uint64_t version;
    int *rc;
    json_t **rec;
};

static void admin_get_one(void *arg, int i)
{
    struct all_job *j = arg;
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, i) ? -EHOSTDOWN : gw_client_get(j->o, i, &c);
    void *blob = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = node_client_get_meta(c, GW_ADMIN_BUCKET, GW_ADMIN_KEY, &blob, &len);
    gw_client_put(j->o, i, c, rc == -ENOENT ? 0 : rc);
    if (rc == 0 && !(j->rec[i] = json_loadb(blob, len, 0, NULL)))
        rc = -EBADMSG;
    free(blob);
    j->rc[i] = rc;
}

static void admin_put_one(void *arg, int i)
{
    struct all_job *j = arg;
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, i) ? -EHOSTDOWN : gw_client_get(j->o, i, &c);
    if (rc == 0)
        rc = node_client_put_meta(c, GW_ADMIN_BUCKET, GW_ADMIN_KEY, j->version, 0, j->blob, j->len,
                                  NULL);
    gw_client_put(j->o, i, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    j->rc[i] = rc;
}

/* The newest admin record in *out (NULL: none yet); -EHOSTDOWN without a majority. */
static int admin_read(struct gw_objects *o, json_t **out)
{
    *out = NULL;
    int n = o->nnodes;
    struct all_job j = {
        .o = o, .rc = calloc((size_t)n, sizeof(int)), .rec = calloc((size_t)n, sizeof(json_t *))};
    if (!j.rc || !j.rec) {
        free(j.rc);
        free(j.rec);
        return -ENOMEM;
    }
    gw_fanout_run(o, n, admin_get_one, &j);
    int answered = 0;
    for (int i = 0; i < n; i++) {
        answered += j.rc[i] == 0 || j.rc[i] == -ENOENT;
        if (j.rec[i] && (!*out || gw_rec_version(j.rec[i]) > gw_rec_version(*out)))
            *out = j.rec[i];
    }
    json_incref(*out);
    for (int i = 0; i < n; i++)
        json_decref(j.rec[i]);
    free(j.rc);
    free(j.rec);
    if (answered <= n / 2) {
        json_decref(*out);
        *out = NULL;
        return -EHOSTDOWN;
    }
    return 0;
}

static int admin_write(struct gw_objects *o, const json_t *rec)
{
    int n = o->nnodes;
    char *blob = json_dumps(rec, JSON_COMPACT);
    struct all_job j = {.o = o,
                        .blob = blob,
                        .len = blob ? strlen(blob) : 0,
                        .version = gw_rec_version(rec),
                        .rc = calloc((size_t)n, sizeof(int))};
    int rc = blob && j.rc ? 0 : -ENOMEM;
    if (rc == 0) {
        gw_fanout_run(o, n, admin_put_one, &j);
        int ok = 0;
        for (int i = 0; i < n; i++)
            ok += j.rc[i] == 0;
        rc = ok > n / 2 ? 0 : -EHOSTDOWN;
    }
    free(blob);
    free(j.rc);
    return rc;
}

/* Lock held (or not yet shared). */
static void settings_apply(struct gw_repair *r, const json_t *rep)
{
    json_t *v;
    if (json_is_boolean(v = json_object_get(rep, "paused")) && json_is_true(v) != r->paused) {
        r->paused = json_is_true(v);
        /* The run's rate counts active time only. */
        int64_t now = now_ms();
        if (r->paused)
            r->paused_since_ms = now;
        else if (r->paused_since_ms)
            r->run_paused_ms += now - r->paused_since_ms;
        if (!r->paused)
            r->paused_since_ms = 0;
    }
    if (json_is_number(v = json_object_get(rep, "throttle_mbps")) && json_number_value(v) >= 0)
        r->throttle_mbps = json_number_value(v);
}

/* Applies the record (lock not held). */
static void admin_apply(struct gw_objects *o, const json_t *rec)
{
    struct gw_repair *r = o->rep;
    const json_t *states = json_object_get(rec, "nodes");
    for (int i = 0; i < o->nnodes; i++) {
        const char *s = json_string_value(json_object_get(states, o->nodes[i].id));
        int st = !s                           ? (int)o->map->nodes[i].state
                 : strcmp(s, "out") == 0      ? PLACE_OUT
                 : strcmp(s, "draining") == 0 ? PLACE_DRAINING
                                              : PLACE_UP;
        if (atomic_exchange(&o->nodes[i].admin, st) != st)
            inec_log(INEC_LOG_INFO, "repair", "node %s is now %s", o->nodes[i].id,
                     place_state_name((enum place_state)st));
    }
    const json_t *mout = json_object_get(rec, "meta_out");
    for (int i = 0; i < o->nnodes; i++) {
        bool out = false;
        size_t k;
        json_t *v;
        json_array_foreach(mout, k, v) out |=
            json_is_string(v) && strcmp(json_string_value(v), o->nodes[i].id) == 0;
        atomic_store(&o->nodes[i].meta_out, out);
    }
    pthread_mutex_lock(&r->lock);
    settings_apply(r, json_object_get(rec, "repair"));
    r->admin_version = gw_rec_version(rec);
    r->kick = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

static void admin_load(struct gw_objects *o)
{
    json_t *rec = NULL;
    if (admin_read(o, &rec) == 0 && rec) {
        pthread_mutex_lock(&o->rep->lock);
        bool newer = gw_rec_version(rec) > o->rep->admin_version;
        pthread_mutex_unlock(&o->rep->lock);
        if (newer)
            admin_apply(o, rec);
    }
    json_decref(rec);
    o->rep->admin_loaded_ms = now_ms();
}

/* Read, change, write the admin record: fn edits it. */
static int admin_update(struct gw_objects *o, void (*fn)(json_t *rec, const void *arg),
                        const void *arg)
{
    json_t *rec = NULL;
    int rc = admin_read(o, &rec);
    if (rc == 0 && !rec) {
        rec = json_pack("{s:I,s:{},s:{},s:[]}", "version", (json_int_t)0, "nodes", "repair",
                        "meta_out");
        rc = rec ? 0 : -ENOMEM;
    }
    if (rc)
        return rc;
    if (!json_is_object(json_object_get(rec, "nodes")))
        json_object_set_new(rec, "nodes", json_object());
    if (!json_is_object(json_object_get(rec, "repair")))
        json_object_set_new(rec, "repair", json_object());
    fn(rec, arg);
    json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, rec)));
    rc = admin_write(o, rec);
    if (rc == 0)
        admin_apply(o, rec);
    json_decref(rec);
    return rc;
}

static void set_meta_out(json_t *rec, const void *arg)
{
    json_object_set(rec, "meta_out", (json_t *)arg);
}

int gw_repair_meta_migrated(struct gw_objects *o, const bool *excl)
{
    json_t *a = json_array();
    for (int i = 0; i < o->nnodes; i++)
        if (excl[i])
            json_array_append_new(a, json_string(o->nodes[i].id));
    int rc = admin_update(o, set_meta_out, a);
    json_decref(a);
    return rc;
}

struct node_change {
    const char *id, *state;
};

static void set_node_state(json_t *rec, const void *arg)
{
    const struct node_change *c = arg;
    json_t *nodes = json_object_get(rec, "nodes");
    if (strcmp(c->state, "up") == 0)
        json_object_del(nodes, c->id);
    else
        json_object_set_new(nodes, c->id, json_string(c->state));
}

int gw_objects_node_state(struct gw_objects *o, const char *id, const char *state, char *msg,
                          size_t msglen)
{
    msg[0] = '\0';
    int i = place_map_node(o->map, id);
    if (i < 0)
        return snprintf(msg, msglen, "no node %s in the map", id), -ENOENT;
    if (strcmp(state, "out") && strcmp(state, "draining") && strcmp(state, "up"))
        return snprintf(msg, msglen, "state is out, draining or up"), -EINVAL;
    if (!o->rep)
        return snprintf(msg, msglen, "the repair service is not running"), -EOPNOTSUPP;
    if (strcmp(state, "up")) {
        /* Every stripe must still find n nodes: refuse what would leave too few. */
        int left = 0, maxn = 0;
        for (int j = 0; j < o->nnodes; j++)
            left += j != i && atomic_load(&o->nodes[j].admin) == PLACE_UP &&
                    o->map->nodes[j].state != PLACE_OUT;
        for (int p = 0; p < atomic_load(&o->npools); p++)
            if (o->pools[p].p.n > maxn)
                maxn = o->pools[p].p.n;
        if (left < maxn)
            return snprintf(msg, msglen,
                            "only %d nodes would be left in, a pool needs %d for its stripes", left,
                            maxn),
                   -EINVAL;
    }
    struct node_change c = {id, state};
    int rc = admin_update(o, set_node_state, &c);
    if (rc)
        snprintf(msg, msglen, "saving the node state: %s", strerror(-rc));
    else
        gw_scanner_kick(o);
    inec_log(INEC_LOG_INFO, "repair", "node %s set %s rc=%d", id, state, rc);
    return rc;
}

static void set_settings(json_t *rec, const void *arg)
{
    json_t *rep = json_object_get(rec, "repair");
    const json_t *in = arg;
    json_t *v;
    if ((v = json_object_get(in, "paused")))
        json_object_set(rep, "paused", v);
    if ((v = json_object_get(in, "throttle_mbps")))
        json_object_set(rep, "throttle_mbps", v);
}

int gw_objects_repair_set(struct gw_objects *o, const json_t *in, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (!o->rep)
        return snprintf(msg, msglen, "the repair service is not running"), -EOPNOTSUPP;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)in, k, v)
    {
        if (strcmp(k, "paused") == 0 && json_is_boolean(v))
            continue;
        if (strcmp(k, "throttle_mbps") == 0 && json_is_number(v) && json_number_value(v) >= 0 &&
            json_number_value(v) < 1e6)
            continue;
        if ((strcmp(k, "scan") == 0 || strcmp(k, "scrub") == 0) && json_is_true(v))
            continue;
        if (strcmp(k, "scheme") == 0 && scheme_parse(json_string_value(v)) != NSCHEMES)
            continue;
        return snprintf(msg, msglen,
                        "%s: want {\"paused\": bool, \"throttle_mbps\": MB/s (0 = unlimited), "
                        "\"scan\": true, \"scrub\": true, \"scheme\": \"auto|ppr|ecpipe|rs\"}",
                        k),
               -EINVAL;
    }
    int rc = 0;
    if (json_object_get(in, "scheme")) { /* this gateway's default, until it restarts */
        pthread_mutex_lock(&o->rep->lock);
        o->rep->scheme_default = scheme_parse(json_string_value(json_object_get(in, "scheme")));
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (json_object_get(in, "paused") || json_object_get(in, "throttle_mbps")) {
        rc = admin_update(o, set_settings, in);
        if (rc)
            snprintf(msg, msglen, "saving the settings: %s", strerror(-rc));
        pthread_mutex_lock(&o->rep->lock);
        o->rep->pace_start_ms = 0; /* a new throttle paces from now */
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (rc == 0 && json_is_true(json_object_get(in, "scrub"))) {
        pthread_mutex_lock(&o->rep->lock);
        o->rep->scrub_now = true;
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (rc == 0 &&
        (json_is_true(json_object_get(in, "scan")) || json_is_true(json_object_get(in, "scrub"))))
        gw_scanner_kick(o);
    return rc;
}

/* --- reports ------------------------------------------------------------------------- */

void gw_repair_note(struct gw_objects *o, const char *bucket, const char *key, const char *oid_hex,
                    uint64_t stripe, uint64_t len, const int *lost, const char *const *at,
                    const char *const *reason, int nlost, bool sync, bool scan)
{
    struct gw_repair *r = o->rep;
    if (!r || nlost <= 0)
        return;
    json_t *lj = json_array(), *aj = json_array(), *rj = json_array();
    for (int i = 0; i < nlost; i++) {
        json_array_append_new(lj, json_integer(lost[i]));
        json_array_append_new(aj, json_string(at && at[i] ? at[i] : "?"));
        json_array_append_new(rj, json_string(reason[i]));
    }
    json_t *e =
        json_pack("{s:s,s:s,s:s,s:I,s:I,s:o,s:o,s:o,s:I}", "bucket", bucket, "key", key, "oid",
                  oid_hex, "stripe", (json_int_t)stripe, "len", (json_int_t)len, "lost", lj, "at",
                  aj, "reason", rj, "queued_ns", (json_int_t)gw_realtime_ns());
    if (!e)
        return;
    /* A write reports stripes it has just written, new to the queue (no
     * lookup in its path); the scanner reports every queued stripe at every
     * scan. */
    int added = -1;
    if (sync)
        added = scan ? gw_rq_add_scanned(o, e) : gw_rq_put(o, e) == 0 ? 1 : -1;
    if (added >= 0) {
        json_decref(e);
        pthread_mutex_lock(&r->lock);
        /* A new entry is counted as left now: the status never says idle
         * with it queued (the worker's next listing counts exactly). One
         * queued already is counted, by the listing or by its first report:
         * counting each scan's report again made the totals grow. */
        if (added) {
            r->left_stripes++;
            r->left_bytes += len * (uint64_t)nlost;
        }
        r->kick = true;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        return;
    }
    char qkey[128];
    gw_rq_key(e, qkey, sizeof(qkey));
    pthread_mutex_lock(&r->lock);
    if (json_object_size(r->pending) < PENDING_MAX && !json_object_get(r->pending, qkey))
        json_object_set(r->pending, qkey, e);
    r->kick = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    json_decref(e);
}

/* Pending reports to the nodes; each stays pending (and listed) until it is
 * written, what fails stays pending. */
static void flush_pending(struct gw_repair *r)
{
    pthread_mutex_lock(&r->lock);
    json_t *p = json_copy(r->pending);
    pthread_mutex_unlock(&r->lock);
    const char *k;
    json_t *e;
    json_object_foreach(p, k, e)
    {
        json_t *c = json_deep_copy(e); /* gw_rq_put versions it; e is shared with listers */
        if (c && gw_rq_put(r->o, c) == 0) {
            pthread_mutex_lock(&r->lock);
            if (json_object_get(r->pending, k) == e)
                json_object_del(r->pending, k);
            pthread_mutex_unlock(&r->lock);
        }
        json_decref(c);
    }
    json_decref(p);
}

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
    enum scheme s = scheme_parse(json_string_value(json_object_get(r->schemes, pool->p.name)));
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
        gw_client_put(x->o, node, cl, rc == -ENOENT || rc == -EBADMSG ? 0 : rc);
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
    gw_client_put(o, x->node[c], a, rc == -ENOENT || rc == -EBADMSG ? 0 : rc);
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
        } else if (suspect[c] || node_draining(o, nd)) {
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
        else if (node_draining(o, x.node[c]))
            move[c] = true;
    }
    /* A missing chunk whose home is down but not out waits for it too. */
    for (int c = 0; c < x.n; c++) {
        if (lost[c] && x.node[c] >= 0 && !gw_repair_node_lost(o, x.node[c]) &&
            gw_node_is_down(o, x.node[c]) && !node_draining(o, x.node[c])) {
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

/* CLOCK_REALTIME ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_after(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* Waits ms (or until stopped or kicked when `kickable`); lock held. */
static void wait_locked(struct gw_repair *r, int64_t ms, bool kickable)
{
    struct timespec ts = deadline_after(ms);
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
            r->pace_start_ms = now_ms();
            r->pace_bytes = 0;
        }
        int64_t due = r->pace_start_ms +
                      (int64_t)((double)(r->pace_bytes + bytes) / (r->throttle_mbps * 1e3));
        int64_t now = now_ms();
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

static void *worker_main(void *arg)
{
    struct gw_repair *r = arg;
    struct gw_objects *o = r->o;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        bool stop = r->stop;
        r->kick = false;
        pthread_mutex_unlock(&r->lock);
        if (stop)
            break;
        int64_t now = now_ms();
        if (now - r->admin_loaded_ms >= ADMIN_EVERY_MS)
            admin_load(o);
        flush_pending(r);
        struct pass p = {.keys = json_array(), .entries = json_array()};
        int rc = gw_rq_list(o, pass_cb, &p);
        pthread_mutex_lock(&r->lock);
        if (rc == 0) {
            if (!r->running && p.stripes) {
                r->running = true;
                r->run_start_ms = now_ms();
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
                if (r->scanning && json_object_size(r->removed) < REMOVED_MAX)
                    json_object_set_new(r->removed, qkey, json_true());
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

/* --- status --------------------------------------------------------------------------- */

void gw_repair_scan_done(struct gw_objects *o, const uint64_t *degraded_by_lost, int maxlost,
                         uint64_t stripes, uint64_t orphans_deleted, uint64_t tombstones_deleted,
                         int64_t duration_ms)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    memset(r->degraded_by_lost, 0, sizeof(r->degraded_by_lost));
    for (int i = 0; i <= maxlost && i <= PLACE_MAX_CHUNKS; i++)
        r->degraded_by_lost[i] = degraded_by_lost[i];
    r->scan_maxlost = maxlost;
    r->scan_stripes = stripes;
    r->orphans_deleted += orphans_deleted;
    r->tombstones_deleted += tombstones_deleted;
    r->scans++;
    r->scanning = false;
    json_object_clear(r->removed); /* the next scan sees the stripes after these removals */
    r->scan_ms = duration_ms;
    r->scan_done_ns = gw_realtime_ns();
    r->kick = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

int gw_objects_repair_status(struct gw_objects *o, json_t **out)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return -EOPNOTSUPP;
    pthread_mutex_lock(&r->lock);
    int64_t now = now_ms();
    double active_s = 0, rate = 0, eta = -1;
    if (r->running) {
        int64_t paused = r->run_paused_ms + (r->paused_since_ms ? now - r->paused_since_ms : 0);
        active_s = (double)(now - r->run_start_ms - paused) / 1e3;
        if (active_s > 0.5)
            rate = (double)r->run_bytes_done / active_s;
        /* Early in a throttled run the pace is known better than measured. */
        if (r->throttle_mbps > 0 && (active_s < 3 || rate > r->throttle_mbps * 1e6))
            rate = r->throttle_mbps * 1e6;
        if (rate > 0)
            eta = (double)r->left_bytes / rate;
    }
    json_t *by_lost = json_object();
    for (int i = 1; i <= r->scan_maxlost; i++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", i);
        json_object_set_new(by_lost, k, json_integer((json_int_t)r->degraded_by_lost[i]));
    }
    json_t *nodes = json_array();
    for (int i = 0; i < o->nnodes; i++) {
        int st = atomic_load(&o->nodes[i].admin);
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:b,s:I}", "id", o->nodes[i].id, "state",
                                               place_state_name((enum place_state)st), "lost",
                                               gw_repair_node_lost(o, i), "down_ms",
                                               (json_int_t)silent_ms(o, i)));
    }
    json_int_t oldest_s =
        r->oldest_ns ? (json_int_t)((gw_realtime_ns() - r->oldest_ns) / 1000000000) : 0;
    *out = json_pack(
        "{s:s,s:b,s:f,s:b,s:{s:I,s:I,s:I,s:I,s:f,s:f,s:f},s:{s:I,s:I,s:I,s:I},"
        "s:{s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I,s:o,s:I,s:I},s:o,s:I,s:I,s:I}",
        "state",
        r->paused    ? "paused"
        : r->running ? "running"
                     : "idle",
        "paused", r->paused, "throttle_mbps", r->throttle_mbps, "running", r->running, "progress",
        "stripes_done", (json_int_t)r->run_stripes_done, "stripes_total",
        (json_int_t)(r->run_stripes_done + r->left_stripes), "bytes_done",
        (json_int_t)r->run_bytes_done, "bytes_total",
        (json_int_t)(r->run_bytes_done + r->left_bytes), "rate_bytes_per_s", rate, "eta_s", eta,
        "elapsed_s", active_s, "queue", "stripes", (json_int_t)r->left_stripes, "bytes",
        (json_int_t)r->left_bytes, "waiting", (json_int_t)r->waiting_stripes, "oldest_age_s",
        oldest_s, "totals", "stripes_repaired", (json_int_t)r->stripes_repaired, "bytes_repaired",
        (json_int_t)r->bytes_repaired, "chunks_moved", (json_int_t)r->chunks_moved, "failed",
        (json_int_t)r->failed, "unrecoverable", (json_int_t)r->unrecoverable, "orphans_deleted",
        (json_int_t)r->orphans_deleted, "scan", "scans", (json_int_t)r->scans, "stripes",
        (json_int_t)r->scan_stripes, "degraded_by_lost", by_lost, "duration_ms",
        (json_int_t)r->scan_ms, "interval_ms", (json_int_t)r->scan_interval_ms, "nodes", nodes,
        "down_out_ms", (json_int_t)r->down_out_ms, "orphan_grace_ms",
        (json_int_t)r->orphan_grace_ms, "pending", (json_int_t)json_object_size(r->pending));
    if (*out) {
        json_object_set_new(*out, "scrub_interval_ms", json_integer(r->scrub_interval_ms));
        json_object_set_new(*out, "tombstone_grace_ms", json_integer(r->tombstone_grace_ms));
        json_object_set_new(json_object_get(*out, "totals"), "tombstones_deleted",
                            json_integer((json_int_t)r->tombstones_deleted));
        json_object_set_new(json_object_get(*out, "scan"), "running",
                            json_boolean(r->scanning || r->scan_now));
    }
    if (*out)
        json_object_set_new(*out, "scheme", json_string(scheme_names[r->scheme_default]));
    pthread_mutex_unlock(&r->lock);
    return *out ? 0 : -ENOMEM;
}

/* The queue, one element per lost chunk (what the control API lists). */
struct qlist {
    json_t *out;
};

static void expand(json_t *out, const json_t *e)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(e, "lost"), i, c)
    {
        json_array_append_new(
            out,
            json_pack("{s:O,s:O,s:O,s:O,s:O,s:s,s:s,s:O}", "bucket", json_object_get(e, "bucket"),
                      "key", json_object_get(e, "key"), "object", json_object_get(e, "oid"),
                      "stripe", json_object_get(e, "stripe"), "chunk", c, "node",
                      json_string_value(json_array_get(json_object_get(e, "at"), i)) ?: "?",
                      "reason",
                      json_string_value(json_array_get(json_object_get(e, "reason"), i)) ?: "?",
                      "queued_ns", json_object_get(e, "queued_ns")));
    }
}

static int qlist_cb(const char *qkey, json_t *e, void *arg)
{
    (void)qkey;
    struct qlist *q = arg;
    expand(q->out, e);
    return json_array_size(q->out) >= 10000;
}

int gw_objects_repair_json(struct gw_objects *o, json_t **out)
{
    struct qlist q = {json_array()};
    if (o->rep) {
        pthread_mutex_lock(&o->rep->lock);
        const char *k;
        json_t *e;
        json_object_foreach(o->rep->pending, k, e) expand(q.out, e);
        pthread_mutex_unlock(&o->rep->lock);
    }
    int rc = gw_rq_list(o, qlist_cb, &q);
    if (rc) {
        json_decref(q.out);
        return rc;
    }
    *out = q.out;
    return 0;
}

uint64_t gw_repair_queue_length(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->left_stripes + json_object_size(r->pending);
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* --- start / stop --------------------------------------------------------------------- */

static int64_t opt_ms(const json_t *opts, const char *name, int64_t dflt)
{
    json_t *v = json_object_get(opts, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

int gw_repair_start(struct gw_objects *o, const json_t *opts)
{
    struct gw_repair *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->o = o;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->pending = json_object();
    r->removed = json_object();
    r->scan_interval_ms = (int)opt_ms(opts, "scan_interval_ms", 60000);
    r->down_out_ms = opt_ms(opts, "down_out_ms", 600000);
    r->orphan_grace_ms = opt_ms(opts, "orphan_grace_ms", 3600000);
    r->tombstone_grace_ms = opt_ms(opts, "tombstone_grace_ms", 24 * 3600000LL);
    r->scrub_interval_ms = opt_ms(opts, "scrub_interval_ms", 7 * 24 * 3600000LL);
    r->last_scrub_ms = now_ms();
    r->scheme_default = scheme_parse(json_string_value(json_object_get(opts, "scheme")) ?: "auto");
    r->schemes = json_object_get(opts, "schemes") ? json_deep_copy(json_object_get(opts, "schemes"))
                                                  : json_object();
    settings_apply(r, opts);
    if (!r->pending || !r->removed || r->scheme_default == NSCHEMES) {
        json_decref(r->pending);
        json_decref(r->removed);
        json_decref(r->schemes);
        free(r);
        return -EINVAL;
    }
    for (int i = 0; i < o->nnodes; i++)
        atomic_store(&o->nodes[i].admin,
                     o->map->nodes[i].state == PLACE_UP ? PLACE_UP : o->map->nodes[i].state);
    o->rep = r;
    admin_load(o);
    if (pthread_create(&r->worker, NULL, worker_main, r) == 0)
        r->worker_started = true;
    if (r->scan_interval_ms > 0 && pthread_create(&r->scanner, NULL, gw_scanner_main, o) == 0)
        r->scanner_started = true;
    return 0;
}

void gw_repair_stop(struct gw_objects *o)
{
    struct gw_repair *r = o->rep;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    if (r->worker_started)
        pthread_join(r->worker, NULL);
    if (r->scanner_started)
        pthread_join(r->scanner, NULL);
    flush_pending(r); /* reports are not lost by a clean stop */
    o->rep = NULL;
    for (int p = 0; p < GW_MAX_POOLS; p++)
        for (int s = 0; s < NSCHEMES; s++)
            codec_destroy(r->codecs[p][s]);
    json_decref(r->pending);
    json_decref(r->removed);
    json_decref(r->schemes);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* The scanner's wake-up (interval, or a kick) and its view of the settings. */
bool gw_repair_wait_scan(struct gw_objects *o, int64_t *grace_ms)
{
    struct gw_repair *r = o->rep;
    pthread_mutex_lock(&r->lock);
    struct timespec ts = deadline_after(r->scan_interval_ms);
    while (!r->stop && !r->scan_now)
        if (pthread_cond_timedwait(&r->cond, &r->lock, &ts))
            break;
    r->scan_now = false;
    bool stop = r->stop;
    r->scanning = !stop;
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
    int64_t now = now_ms(), grace = -1;
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
    int64_t now = now_ms();
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
