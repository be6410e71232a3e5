/*
 * The repair scanner (repair.h): every scan_interval_ms, or when kicked,
 *
 *   0. every scrub_interval_ms (or when asked), has every node verify every
 *      chunk it holds: the corrupt ones land on its repair list (step 3);
 *   1. moves metadata when membership changed: a node set out leaves the
 *      metadata homes only after every record (tombstones too) was copied to
 *      the homes it will have without it; until then writes still go to the
 *      old homes, reads too, so no record is ever unreachable. This step
 *      also runs alone, periodic scans or not: when the gateway starts, and
 *      every MIGRATE_RETRY_MS while a copy fails;
 *   2. walks every record that names chunks (objects of every bucket, parts
 *      of multipart uploads) and lists what each stripe should have where;
 *   3. lists every live node's chunk inventory and repair list (chunks found
 *      corrupt by reads or by scrub) and merges them with that list (both in
 *      chunk id order): a chunk that should be there and is not, or is
 *      corrupt, or sits on a lost node, makes its stripe degraded and queued;
 *   4. a chunk that is there and that no record names is an orphan (a write
 *      that never committed, a delete that missed a node that was down, a
 *      chunk that repair moved off a node that came back); one seen as an
 *      orphan in scans at least orphan_grace_ms apart is deleted. The grace
 *      must exceed the longest upload (its chunks have no record until the
 *      commit). Nothing is collected after a scan that could not read every
 *      record, or from a node whose inventory failed;
 *   5. aborts the multipart uploads older than their bucket's lifecycle rule
 *      (AbortIncompleteMultipartUpload) or multipart_expire_ms (lifecycle.c);
 *   6. removes tombstones older than tombstone_grace_ms where no stale copy
 *      can outlive them (tombstones.c says why that is safe), and ACL records
 *      whose object was overwritten or deleted that long ago.
 *
 * Memory: about 90 bytes per stripe and 48 per chunk during a scan.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"
#include "object/repair.h"
#include "inec/log.h"

#define ORPHANS_MAX      (1u << 20) /* candidates remembered between scans */
#define MIGRATE_RETRY_MS 5000
#define LOST_WORDS       ((PLACE_MAX_CHUNKS + 63) / 64)

struct sstripe {
    uint32_t rec;
    uint32_t len;
    uint64_t cs;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint8_t n;
    uint8_t pool; /* index in o->pools, GW_MAX_POOLS: unknown */
    bool queued;
    uint64_t lost[LOST_WORDS];        /* to rebuild */
    uint64_t unavailable[LOST_WORDS]; /* on a node down (not yet out) */
};

struct expect {
    int32_t node;
    uint32_t stripe;
    uint32_t chunk;
    struct node_chunk_id id;
};

struct orphan {
    int32_t node;
    struct node_chunk_id id;
    int64_t first_seen_ms;
};

struct scan {
    struct gw_objects *o;
    char **recs; /* "bucket\0key" */
    size_t nrecs, caprecs;
    struct sstripe *st;
    size_t nst, capst;
    struct expect *ex;
    size_t nex, capex;
    bool incomplete;  /* a record could not be read or understood: collect nothing */
    bool read_inline; /* inline records are read whole from every home (scan_once) */
    const char *bucket;
    struct orphan *cand; /* orphans seen this scan */
    size_t ncand, capcand;
    struct gw_pool_usage usage[GW_MAX_POOLS]; /* published after a complete scan */
};

/* Orphans seen by earlier scans, sorted by (node, id). */
struct seen {
    struct orphan *v;
    size_t n;
};

/* Inventories of several nodes mark chunks of one stripe at once. */
static void set_bit(uint64_t *w, int c)
{
    __atomic_fetch_or(&w[c / 64], 1ull << (c % 64), __ATOMIC_RELAXED);
}

static bool get_bit(const uint64_t *w, int c)
{
    return w[c / 64] >> (c % 64) & 1;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * size);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

static int id_cmp(const struct node_chunk_id *a, const struct node_chunk_id *b)
{
    int c = memcmp(a->object, b->object, NODE_OBJECT_ID_BYTES);
    if (c)
        return c;
    if (a->stripe != b->stripe)
        return a->stripe < b->stripe ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static struct node_chunk_id expect_id(const struct scan *sc, const struct expect *e)
{
    (void)sc;
    return e->id;
}

static int expect_cmp(const void *a, const void *b)
{
    const struct expect *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return id_cmp(&x->id, &y->id);
}

static int orphan_cmp(const void *a, const void *b)
{
    const struct orphan *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return id_cmp(&x->id, &y->id);
}

/* --- 0. scrub -------------------------------------------------------------------------- */

#define SCRUB_TIMEOUT_MS (6 * 3600 * 1000) /* a whole node's chunks read and verified */

/* Node i verifies every chunk it holds (node_store_scrub); the corrupt ones go
 * on its repair list, which the inventory step reads. */
static void scrub_one(void *arg, int i)
{
    struct gw_objects *o = arg;
    struct node_client *c = NULL;
    if (!gw_repair_node_usable(o, i) || gw_client_open(o, i, SCRUB_TIMEOUT_MS, &c))
        return;
    struct node_scrub_result res = {0};
    int rc = node_client_scrub(c, &res);
    node_client_close(c);
    inec_log(rc ? INEC_LOG_WARN : INEC_LOG_INFO, "repair",
             "scrub node=%s rc=%d checked=%llu corrupt=%llu", o->nodes[i].id, rc,
             (unsigned long long)res.checked, (unsigned long long)res.corrupt);
}

/* --- 1. metadata migration ------------------------------------------------------------ */

struct migrate {
    struct gw_objects *o;
    const char *bucket;
    const bool *excl;
    int failed;
    json_t *buckets;
};

static int migrate_cb(const char *key, json_t *rec, void *arg)
{
    struct migrate *m = arg;
    /* An inline record moves with its body (listings carry no shards): the
     * key's record as read, this one or a newer one (each copy is a
     * compare-and-set). */
    json_t *whole = NULL;
    if (gw_rec_inline(rec, NULL, NULL, NULL) && gw_meta_read(m->o, m->bucket, key, &whole) == 0)
        rec = whole;
    if (gw_meta_copy(m->o, m->bucket, key, rec, m->excl))
        m->failed++;
    if (m->buckets && !gw_rec_deleted(rec))
        json_array_append_new(m->buckets, json_string(key));
    json_decref(whole);
    return gw_repair_stopping(m->o);
}

/* Copies every record to its homes without the out nodes, then makes that
 * the membership. False while a move is left to do (a copy failed). */
static bool migrate_metadata(struct gw_objects *o)
{
    bool *excl = calloc((size_t)o->nnodes, sizeof(bool));
    if (!excl)
        return false;
    bool change = false;
    for (int i = 0; i < o->nnodes; i++) {
        excl[i] = atomic_load(&o->nodes[i].admin) == PLACE_OUT;
        change |= excl[i] != atomic_load(&o->nodes[i].meta_out);
    }
    if (!change) {
        free(excl);
        return true;
    }
    int64_t t0 = gw_now_ms();
    struct migrate m = {.o = o, .excl = excl, .buckets = json_array()};
    m.bucket = GW_META_BUCKET;
    int rc = gw_meta_list_all(o, GW_META_BUCKET, migrate_cb, &m);
    json_array_append_new(m.buckets, json_string(GW_META_MPU));
    json_array_append_new(m.buckets, json_string(GW_REPAIR_BUCKET));
    size_t i;
    json_t *b;
    json_array_foreach(m.buckets, i, b)
    {
        if (rc)
            break;
        m.bucket = json_string_value(b);
        struct migrate mm = m;
        mm.buckets = NULL;
        rc = gw_meta_list_all(o, m.bucket, migrate_cb, &mm);
        m.failed += mm.failed;
    }
    if (rc == 0 && m.failed == 0 && !gw_repair_stopping(o))
        rc = gw_repair_meta_migrated(o, excl);
    inec_log(rc || m.failed ? INEC_LOG_WARN : INEC_LOG_INFO, "repair",
             "metadata migration rc=%d failed=%d in %lld ms", rc, m.failed,
             (long long)(gw_now_ms() - t0));
    json_decref(m.buckets);
    free(excl);
    return rc == 0 && m.failed == 0;
}

/* --- 2. the walk ---------------------------------------------------------------------- */

static int walk_cb(const char *space, const char *key, json_t *rec, void *arg)
{
    struct scan *sc = arg;
    sc->bucket = space;
    struct gw_objects *o = sc->o;
    const json_t *stripes = json_object_get(rec, "stripes");
    size_t ns = json_array_size(stripes);
    const struct gw_pool *pool =
        gw_pool_find(o, json_string_value(json_object_get(rec, "pool")) ?: "");
    uint8_t pi = pool ? (uint8_t)(pool - o->pools) : GW_MAX_POOLS;
    if (pool && strcmp(sc->bucket, GW_META_MPU) != 0) { /* parts are not objects yet */
        sc->usage[pi].objects++;
        sc->usage[pi].logical_bytes += (uint64_t)json_integer_value(json_object_get(rec, "size"));
    }
    int ik, im;
    size_t ilen;
    if (gw_rec_inline(rec, &ik, &im, &ilen)) {
        /* Its shards live in its records: a read of every home gives each
         * that lacks its shard (a missing or corrupt one) a new one. */
        if (pool)
            sc->usage[pi].stored_bytes += gw_inline_shard_len(ilen, ik) * (uint64_t)(ik + im);
        json_t *whole = NULL;
        if (sc->read_inline && gw_meta_read_all(o, sc->bucket, key, &whole, NULL) != 0)
            sc->incomplete = true; /* its homes were not all repaired */
        json_decref(whole);
        return gw_repair_stopping(o);
    }
    if (!ns)
        return gw_repair_stopping(o);
    int n = (int)json_integer_value(json_object_get(rec, "n"));
    if (n < 1 || n > PLACE_MAX_CHUNKS) {
        sc->incomplete = true;
        return 0;
    }
    size_t bl = strlen(sc->bucket), kl = strlen(key);
    char *name = malloc(bl + kl + 2);
    if (!name || grow((void **)&sc->recs, &sc->caprecs, sc->nrecs + 1, sizeof(char *)) ||
        grow((void **)&sc->st, &sc->capst, sc->nst + ns, sizeof(struct sstripe)) ||
        grow((void **)&sc->ex, &sc->capex, sc->nex + ns * (size_t)n, sizeof(struct expect))) {
        free(name);
        sc->incomplete = true;
        return 1;
    }
    memcpy(name, sc->bucket, bl + 1);
    memcpy(name + bl + 1, key, kl + 1);
    uint32_t ri = (uint32_t)sc->nrecs;
    sc->recs[sc->nrecs++] = name;
    for (size_t s = 0; s < ns; s++) {
        const json_t *st = json_array_get(stripes, s);
        struct sstripe *x = &sc->st[sc->nst];
        memset(x, 0, sizeof(*x));
        x->rec = ri;
        x->n = (uint8_t)n;
        x->len = (uint32_t)json_integer_value(json_object_get(st, "len"));
        x->pool = pi;
        if (pool)
            sc->usage[pi].stored_bytes += (uint64_t)x->len * (uint64_t)n;
        if (gw_layout_chunk(rec, s, x->oid, &x->cs)) {
            sc->incomplete = true;
            continue;
        }
        const json_t *nodes = json_object_get(st, "nodes");
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(st, "missing"), i, v)
        {
            json_int_t c = json_integer_value(v);
            if (c >= 0 && c < n)
                set_bit(x->lost, (int)c);
        }
        for (int c = 0; c < n; c++) {
            const char *id = json_string_value(json_array_get(nodes, (size_t)c));
            int node = id ? place_map_node(o->map, id) : -1;
            if (get_bit(x->lost, c))
                continue;
            if (node < 0 || gw_repair_node_lost(o, node)) {
                set_bit(x->lost, c);
                continue;
            }
            /* Draining: the worker moves it (it checks, then copies). */
            if (atomic_load(&o->nodes[node].admin) == PLACE_DRAINING)
                set_bit(x->lost, c);
            struct expect *e = &sc->ex[sc->nex++];
            *e = (struct expect){node, (uint32_t)sc->nst, (uint32_t)c, {.stripe = x->cs}};
            e->id.index = (uint32_t)c;
            memcpy(e->id.object, x->oid, NODE_OBJECT_ID_BYTES);
        }
        sc->nst++;
    }
    return gw_repair_stopping(o);
}

/* --- 3. inventories ---------------------------------------------------------------------- */

struct inv {
    struct scan *sc;
    int node;
    size_t pos, end; /* the node's expects [pos, end) not yet matched */
    struct node_chunk_id last;
    bool any;
    int rc;
};

static void add_candidate(struct scan *sc, int node, const struct node_chunk_id *id)
{
    if (sc->ncand >= ORPHANS_MAX ||
        grow((void **)&sc->cand, &sc->capcand, sc->ncand + 1, sizeof(struct orphan)))
        return;
    sc->cand[sc->ncand++] = (struct orphan){node, *id, 0};
}

static int inv_cb(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    (void)version;
    struct inv *v = arg;
    struct scan *sc = v->sc;
    v->last = *id;
    v->any = true;
    for (;;) {
        if (v->pos == v->end) {
            add_candidate(sc, v->node, id);
            return 0;
        }
        const struct expect *e = &sc->ex[v->pos];
        struct node_chunk_id want = expect_id(sc, e);
        int c = id_cmp(&want, id);
        if (c < 0) { /* expected, and not there */
            set_bit(sc->st[e->stripe].lost, (int)e->chunk);
            v->pos++;
            continue;
        }
        if (c > 0) {
            add_candidate(sc, v->node, id);
            return 0;
        }
        if (len != sc->st[e->stripe].len)
            set_bit(sc->st[e->stripe].lost, (int)e->chunk);
        v->pos++;
        return 0;
    }
}

static int repair_list_cb(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    (void)version;
    struct inv *v = arg;
    struct scan *sc = v->sc;
    /* The node's expects are sorted: binary search among them. */
    size_t lo = v->pos, hi = v->end;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct node_chunk_id want = expect_id(sc, &sc->ex[mid]);
        int c = id_cmp(&want, id);
        if (c == 0) {
            set_bit(sc->st[sc->ex[mid].stripe].lost, (int)sc->ex[mid].chunk);
            break;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

struct inv_job {
    struct scan *sc;
    size_t *first; /* first expect of node i; first[nnodes] = nex */
    bool *ok;
    struct orphan **cand; /* node i's orphan candidates */
    size_t *ncand;
};

/* Node i's inventory against its expects; on any failure nothing is concluded. */
static void inventory_one(void *arg, int i)
{
    struct inv_job *j = arg;
    struct scan *sc = j->sc;
    struct gw_objects *o = sc->o;
    j->ok[i] = false;
    if (gw_repair_node_lost(o, i) || gw_node_is_down(o, i)) {
        for (size_t k = j->first[i]; k < j->first[i + 1]; k++)
            set_bit(sc->st[sc->ex[k].stripe].unavailable, (int)sc->ex[k].chunk);
        return;
    }
    struct node_client *c = NULL;
    int rc = gw_client_get(o, i, &c);
    /* Expects of this node only; the candidates go to a per-node scan copy. */
    struct scan mine = *sc;
    mine.cand = NULL;
    mine.ncand = mine.capcand = 0;
    struct inv v = {.sc = &mine, .node = i, .pos = j->first[i], .end = j->first[i + 1]};
    int more = 1;
    while (rc == 0 && more) {
        more = 0;
        rc = node_client_list_chunks(c, v.any ? &v.last : NULL, 0, inv_cb, &v, &more);
        rc = rc < 0 ? rc : 0;
    }
    if (rc == 0) {
        for (; v.pos < v.end; v.pos++) /* expected past the last one listed */
            set_bit(sc->st[sc->ex[v.pos].stripe].lost, (int)sc->ex[v.pos].chunk);
        v.pos = j->first[i];
        rc = node_client_list_repair(c, repair_list_cb, &v, &more);
        rc = rc < 0 ? rc : 0;
    }
    gw_client_put(o, i, c, rc);
    if (rc) {
        free(mine.cand);
        inec_log(INEC_LOG_INFO, "repair", "scan: node %s inventory failed: %s", o->nodes[i].id,
                 strerror(-rc));
        return;
    }
    j->ok[i] = true;
    j->cand[i] = mine.cand;
    j->ncand[i] = mine.ncand;
}

/* --- 4. orphans ----------------------------------------------------------------------------- */

struct del_job {
    struct gw_objects *o;
    struct orphan *v;
    size_t n;
    uint64_t deleted;
    pthread_mutex_t lock;
};

static void delete_one(void *arg, int i)
{
    struct del_job *j = arg;
    struct gw_objects *o = j->o;
    /* Job i deletes every due orphan of node i. */
    struct node_client *c = NULL;
    uint64_t n = 0;
    for (size_t k = 0; k < j->n; k++) {
        if (j->v[k].node != i)
            continue;
        if (!c && gw_client_get(o, i, &c))
            return;
        int rc = node_client_delete_chunk(c, &j->v[k].id, GW_CHUNK_VERSION);
        if (rc && rc != -ENOENT && rc != -ESTALE) {
            gw_client_put(o, i, c, rc);
            c = NULL;
            break;
        }
        n++;
    }
    if (c)
        gw_client_put(o, i, c, 0);
    pthread_mutex_lock(&j->lock);
    j->deleted += n;
    pthread_mutex_unlock(&j->lock);
}

/* Carries first sightings over; deletes candidates seen for grace_ms. */
static uint64_t collect_orphans(struct scan *sc, struct seen *seen, int64_t grace_ms,
                                const bool *ok)
{
    int64_t now = gw_now_ms();
    if (sc->ncand)
        qsort(sc->cand, sc->ncand, sizeof(*sc->cand), orphan_cmp);
    struct del_job dj = {.o = sc->o, .v = malloc((sc->ncand + 1) * sizeof(struct orphan))};
    pthread_mutex_init(&dj.lock, NULL);
    size_t keep = 0;
    for (size_t k = 0; k < sc->ncand; k++) {
        struct orphan *c = &sc->cand[k];
        struct orphan *old =
            seen->n ? bsearch(c, seen->v, seen->n, sizeof(*seen->v), orphan_cmp) : NULL;
        c->first_seen_ms = old ? old->first_seen_ms : now;
        if (now - c->first_seen_ms >= grace_ms && !sc->incomplete && ok[c->node] && dj.v)
            dj.v[dj.n++] = *c;
        else
            sc->cand[keep++] = *c;
    }
    if (dj.n)
        gw_fanout_run(sc->o, sc->o->nnodes, delete_one, &dj);
    free(dj.v);
    pthread_mutex_destroy(&dj.lock);
    free(seen->v);
    seen->v = sc->cand; /* still orphans, not yet due: remembered */
    seen->n = keep;
    sc->cand = NULL;
    sc->ncand = sc->capcand = 0;
    if (dj.deleted)
        inec_log(INEC_LOG_INFO, "repair", "scan: %llu orphan chunks deleted",
                 (unsigned long long)dj.deleted);
    return dj.deleted;
}

/* --- one scan ---------------------------------------------------------------------------- */

static void scan_once(struct gw_objects *o, struct seen *seen, json_t **tombs, int64_t grace_ms,
                      bool asked, uint64_t *inline_checked)
{
    int64_t t0 = gw_now_ms();
    bool scrub = gw_repair_scrub_due(o);
    if (scrub)
        gw_fanout_run(o, o->nnodes, scrub_one, o);
    /* Whether inline records are read whole from every home. Where a
     * stripe's chunks are checked by the nodes' inventories (ids only), an
     * inline record's shards can only be checked by reading them: up to C/k
     * of the body's bytes, for every small object, every scan_interval_ms.
     * So only when a home may lack a record or hold a bad shard: on the
     * first scan, on one asked for (a node state change or an operator), on
     * the scrub's (bit rot), and when a node failed or went silent since the
     * last complete pass (it may have missed writes or come back empty). A
     * commit that left homes without the record notes them for heal
     * (meta_heal.c). */
    uint64_t troubles = gw_peer_troubles(o);
    struct scan sc = {.o = o, .read_inline = asked || scrub || troubles != *inline_checked};
    int rc = gw_meta_walk_objects(o, walk_cb, &sc);
    if (rc || gw_repair_stopping(o))
        sc.incomplete = true;
    if (sc.read_inline && !sc.incomplete)
        *inline_checked = troubles;
    if (sc.nex)
        qsort(sc.ex, sc.nex, sizeof(*sc.ex), expect_cmp);
    size_t *first = calloc((size_t)o->nnodes + 1, sizeof(size_t));
    bool *ok = calloc((size_t)o->nnodes, sizeof(bool));
    struct orphan **cf = calloc((size_t)o->nnodes, sizeof(*cf));
    size_t *ct = calloc((size_t)o->nnodes, sizeof(size_t));
    uint64_t orphans = 0;
    uint64_t by_lost[PLACE_MAX_CHUNKS + 1] = {0};
    int maxlost = 0;
    if (first && ok && cf && ct && !gw_repair_stopping(o)) {
        for (size_t k = 0, i = 0; i <= (size_t)o->nnodes; i++) {
            while (k < sc.nex && sc.ex[k].node < (int32_t)i)
                k++;
            first[i] = k;
        }
        first[o->nnodes] = sc.nex;
        struct inv_job ij = {&sc, first, ok, cf, ct};
        gw_fanout_run(o, o->nnodes, inventory_one, &ij);
        for (int i = 0; i < o->nnodes; i++) {
            for (size_t k = 0; cf[i] && k < ct[i]; k++)
                add_candidate(&sc, cf[i][k].node, &cf[i][k].id);
            free(cf[i]);
        }
        orphans = collect_orphans(&sc, seen, grace_ms, ok);
        /* Queue what is lost; count what is degraded. */
        for (size_t s = 0; s < sc.nst && !gw_repair_stopping(o); s++) {
            struct sstripe *x = &sc.st[s];
            int lc[PLACE_MAX_CHUNKS], nl = 0, nd = 0;
            const char *at[PLACE_MAX_CHUNKS], *why[PLACE_MAX_CHUNKS];
            for (int c = 0; c < x->n; c++) {
                bool l = get_bit(x->lost, c);
                nd += l || get_bit(x->unavailable, c);
                if (l) {
                    lc[nl] = c;
                    at[nl] = NULL;
                    why[nl++] = "scan";
                }
            }
            if (nd) {
                by_lost[nd]++;
                if (nd > maxlost)
                    maxlost = nd;
                if (x->pool < GW_MAX_POOLS)
                    sc.usage[x->pool].degraded_stripes++;
            }
            if (!nl)
                continue;
            const char *name = sc.recs[x->rec];
            char oid[2 * NODE_OBJECT_ID_BYTES + 1];
            for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
                snprintf(oid + 2 * i, 3, "%02x", x->oid[i]);
            gw_repair_note(o, name, name + strlen(name) + 1, oid, x->cs, x->len, lc, at, why, nl,
                           true, true);
        }
        /* Figures of a scan that missed records would undercount: keep the last. */
        if (!sc.incomplete && !gw_repair_stopping(o))
            gw_pools_usage_set(o, sc.usage);
    }
    /* 5. multipart uploads past their bucket's lifecycle rule or the default age */
    if (!gw_repair_stopping(o))
        gw_mpu_expire(o);
    /* 6. tombstones past their grace, where no stale copy can outlive them;
     * ACL records of objects gone */
    uint64_t tombstones = 0;
    int64_t tgrace = gw_repair_stopping(o) ? -1 : gw_repair_tombstones_due(o);
    if (tgrace >= 0)
        tombstones = gw_tombstones_collect(o, tombs, tgrace);
    gw_repair_scan_done(o, by_lost, maxlost, sc.nst, orphans, tombstones, gw_now_ms() - t0);
    inec_log(INEC_LOG_INFO, "repair", "scan: %zu records, %zu stripes, %s, %lld ms", sc.nrecs,
             sc.nst, sc.incomplete ? "incomplete" : "complete", (long long)(gw_now_ms() - t0));
    for (size_t i = 0; i < sc.nrecs; i++)
        free(sc.recs[i]);
    free(sc.recs);
    free(sc.st);
    free(sc.ex);
    free(sc.cand);
    free(first);
    free(ok);
    free(cf);
    free(ct);
}

void *gw_scanner_main(void *arg)
{
    pthread_setname_np(pthread_self(), "scanner");
    struct gw_objects *o = arg;
    struct seen seen = {0};
    json_t *tombs = NULL;
    int64_t grace_ms;
    /* Metadata moves (step 1) with or without periodic scans: at once when
     * the gateway starts (a move a gateway died in is finished by the next),
     * before every scan, and again every MIGRATE_RETRY_MS while a copy fails. */
    int64_t migrate_at = 0;
    bool full, asked;
    uint64_t inline_checked = UINT64_MAX; /* none yet: the first scan reads them */
    while (gw_repair_wait_scan(o, migrate_at, &grace_ms, &full, &asked)) {
        migrate_at = migrate_metadata(o) ? INT64_MAX : gw_now_ms() + MIGRATE_RETRY_MS;
        if (full && !gw_repair_stopping(o))
            scan_once(o, &seen, &tombs, grace_ms, asked, &inline_checked);
    }
    free(seen.v);
    json_decref(tombs);
    return NULL;
}
