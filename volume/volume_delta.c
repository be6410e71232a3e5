/*
 * Delta-parity updates of volume stripes, and their recovery.
 *
 * A write inside one data chunk c of a stripe that is stored whole (no chunk
 * missing, every node up) runs the pool's update DEG (deg_build op update)
 * in place, on the stripe object's own chunks: the gateway sends the new
 * chunk to c's node, which keeps it and sends g_j·(old ⊕ new) to each parity
 * j that depends on c, which adds it to its parity and keeps the sum. The
 * gateway moves one chunk (two when the write covers part of the chunk: it
 * reads the old one to fill the rest), the nodes m; a read-modify-write moves
 * k + n.
 *
 * The write hole. The store keeps one version per chunk, so the update
 * overwrites: a crash between the data chunk and the parities (or between
 * parities) leaves chunks that do not encode one stripe. Hence:
 *   1. an intent record (GW_VOLUME_INTENTS, "NAME/STRIPEKEY": the object id,
 *      the chunk, its new CRC) is durable on the metadata quorum first;
 *   2. the DEG runs;
 *   3. the stripe's record takes the chunk's new CRC (a new record version);
 *   4. the intent is removed, and only then is the write acknowledged.
 * Recovery (gw_volume_recover: when a volume is opened, so after a gateway
 * restart when the client attaches again, and at once when step 2 fails)
 * reads the k data chunks directly; each must match the record's CRC, or, for
 * the intent's chunk, the intent's: the data chunks are then exactly the old
 * or the new stripe, whatever the parities hold, and the stripe is rewritten
 * whole as a new object version (fresh parities), then the intent removed. A
 * crash at any step therefore leaves the last acknowledged content or the one
 * being written, never a mix; the parities of an interrupted update are never
 * trusted. Until recovery has run, a read of such a stripe may fail (-EIO:
 * its CRCs disagree), never return wrong bytes.
 *
 * Repair may rewrite the stripe's record (move or rebuild a chunk) while an
 * update runs: step 3 is a compare-and-set at the version read + 1 (as
 * repair's own), so it cannot undo repair's node list; when refused, the
 * stripe is recovered from the intent against repair's record and the write
 * applied by read-modify-write.
 *
 * Crash hooks for tests: INEC_VOLUME_CRASH=after-intent|after-deg|after-record
 * makes the gateway SIGKILL itself right after that step.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deg/deg.h"
#include "volume/volume_internal.h"
#include "inec/log.h"

static void crash_hook(const char *step)
{
    const char *at = getenv("INEC_VOLUME_CRASH");
    if (at && strcmp(at, step) == 0) {
        inec_log(INEC_LOG_WARN, "volume", "crash hook: SIGKILL after %s", step);
        raise(SIGKILL);
    }
}

/* Stripes whose interrupted update this process could not recover yet (a
 * data chunk's node down): their parities may not match their data, so every
 * later access of such a stripe recovers it first (gw_volume_settle). Without
 * this, the next delta update of the stripe would replace its intent and add
 * its delta to stale parities, leaving a stripe that reads right but cannot
 * be rebuilt. Intents left by an earlier process are found at open. Beyond
 * PENDING_MAX entries every access looks for an intent. */
#define PENDING_MAX 256

static struct {
    pthread_mutex_t lock;
    int n;
    bool overflow;
    struct {
        char name[GW_VOLUME_NAME_MAX + 1];
        uint64_t stripe;
    } e[PENDING_MAX];
} pending = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Finds (remove false) or removes (remove true) stripe s of v; true if it was there. */
static bool pending_take(const struct gw_volume *v, uint64_t s, bool remove)
{
    pthread_mutex_lock(&pending.lock);
    bool found = pending.overflow;
    for (int i = 0; i < pending.n; i++)
        if (pending.e[i].stripe == s && strcmp(pending.e[i].name, v->name) == 0) {
            found = true;
            if (remove)
                pending.e[i] = pending.e[--pending.n];
            break;
        }
    pthread_mutex_unlock(&pending.lock);
    return found;
}

static void pending_add(const struct gw_volume *v, uint64_t s)
{
    if (pending_take(v, s, false))
        return;
    pthread_mutex_lock(&pending.lock);
    if (pending.n == PENDING_MAX) {
        pending.overflow = true;
    } else {
        snprintf(pending.e[pending.n].name, sizeof(pending.e[0].name), "%s", v->name);
        pending.e[pending.n++].stripe = s;
    }
    pthread_mutex_unlock(&pending.lock);
}

/* A test hook: with INEC_VOLUME_PAUSE_FILE set, an update waits after its
 * DEG (before its record) while that file exists, at most 60 s, so that a
 * test can change the stripe's record meanwhile (volume_crash.py). */
static void pause_hook(void)
{
    const char *path = getenv("INEC_VOLUME_PAUSE_FILE");
    if (path && access(path, F_OK) == 0)
        inec_log(INEC_LOG_WARN, "volume", "test hook: update paused after its DEG");
    for (int i = 0; path && i < 600 && access(path, F_OK) == 0; i++)
        usleep(100000);
}

static void intent_key(const struct gw_volume *v, uint64_t s, char *out, size_t len)
{
    char key[17];
    gw_volume_stripe_key(s, key);
    snprintf(out, len, "%s/%s", v->name, key);
}

/* Chunk c of the stripe object (stripe 0 of its record) into *data (malloc'd). */
static int chunk_get(struct gw_objects *o, const json_t *rec, int c, void **data, size_t *len)
{
    const json_t *st = json_array_get(json_object_get(rec, "stripes"), 0);
    const char *id = json_string_value(json_array_get(json_object_get(st, "nodes"), (size_t)c));
    int node = id ? place_map_node(o->map, id) : -ENOENT;
    if (node < 0 || gw_node_is_down(o, node))
        return -EHOSTDOWN;
    struct node_chunk_id cid = {.index = (uint32_t)c};
    int rc = gw_layout_chunk(rec, 0, cid.object, &cid.stripe);
    struct node_client *cl = NULL;
    if (rc == 0 && (rc = gw_client_get(o, node, &cl)) == 0) {
        rc = node_client_get_chunk(cl, &cid, data, len, NULL);
        gw_client_put(o, node, cl, rc);
    }
    return rc;
}

static uint32_t rec_crc(const json_t *rec, int c)
{
    const json_t *st = json_array_get(json_object_get(rec, "stripes"), 0);
    return (uint32_t)json_integer_value(json_array_get(json_object_get(st, "crc"), (size_t)c));
}

/* Recovers stripe s from its intent (the stripe lock held). */
static int recover_one(struct gw_volume *v, uint64_t s, const json_t *intent)
{
    struct gw_objects *o = v->o;
    char key[17], ikey[GW_VOLUME_NAME_MAX + 20];
    gw_volume_stripe_key(s, key);
    intent_key(v, s, ikey, sizeof(ikey));
    json_t *rec = NULL;
    int rc = gw_meta_read(o, v->bucket, key, &rec);
    const char *oid = json_string_value(json_object_get(rec, "oid"));
    const char *ioid = json_string_value(json_object_get(intent, "oid"));
    if (rc == -ENOENT || (rc == 0 && (gw_rec_deleted(rec) || !oid || !ioid || strcmp(oid, ioid))))
        rc = 1; /* the stripe was rewritten or freed since: nothing to finish */
    const json_t *st = json_array_get(json_object_get(rec, "stripes"), 0);
    int k = (int)json_integer_value(json_object_get(rec, "k"));
    size_t L = (size_t)json_integer_value(json_object_get(st, "len"));
    int ic = (int)json_integer_value(json_object_get(intent, "chunk"));
    uint32_t icrc = (uint32_t)json_integer_value(json_object_get(intent, "crc"));
    uint8_t *buf = NULL;
    if (rc == 0 && ((size_t)k * L != v->stripe_bytes || !(buf = malloc(v->stripe_bytes))))
        rc = buf ? -EIO : -ENOMEM;
    for (int c = 0; rc == 0 && c < k; c++) {
        void *data = NULL;
        size_t len = 0;
        rc = chunk_get(o, rec, c, &data, &len);
        if (rc == 0 && len != L)
            rc = -EIO;
        if (rc == 0) {
            uint32_t crc = node_crc32c(data, L);
            if (crc != rec_crc(rec, c) && !(c == ic && crc == icrc))
                rc = -EIO; /* neither the old nor the new bytes */
            memcpy(buf + (size_t)c * L, data, L);
        }
        free(data);
    }
    if (rc == 0)
        rc = gw_volume_stripe_store(v, s, buf); /* fresh parities, a new object version */
    free(buf);
    json_decref(rec);
    if (rc >= 0 && (rc = gw_meta_remove(o, GW_VOLUME_INTENTS, ikey)) == -ENOENT)
        rc = 0;
    if (rc) {
        pending_add(v, s);
        inec_log(INEC_LOG_WARN, "volume", "recovery of volume=%s stripe=%s failed: %s", v->name,
                 key, strerror(-rc));
    } else {
        pending_take(v, s, true);
        inec_log(INEC_LOG_INFO, "volume", "recovered an interrupted update volume=%s stripe=%s",
                 v->name, key);
    }
    return rc;
}

bool gw_volume_pending(const struct gw_volume *v, uint64_t s)
{
    return pending_take(v, s, false);
}

/* Recovers stripe s if it has an intent (the stripe lock held): read under
 * the lock, as a write in flight may have finished its intent since. */
static int recover_stripe(struct gw_volume *v, uint64_t s)
{
    char ikey[GW_VOLUME_NAME_MAX + 20];
    intent_key(v, s, ikey, sizeof(ikey));
    json_t *intent = NULL;
    int rc = gw_meta_read(v->o, GW_VOLUME_INTENTS, ikey, &intent);
    if (rc == 0)
        rc = recover_one(v, s, intent);
    else if (rc == -ENOENT)
        rc = 0, pending_take(v, s, true);
    json_decref(intent);
    return rc;
}

int gw_volume_settle(struct gw_volume *v, uint64_t s)
{
    return pending_take(v, s, false) ? recover_stripe(v, s) : 0;
}

struct intents {
    json_t *list; /* [[stripe, intent], ...] */
};

static int intent_cb(const char *key, json_t *rec, void *arg)
{
    const char *slash = strrchr(key, '/');
    if (slash)
        json_array_append_new(((struct intents *)arg)->list,
                              json_pack("[I,O]", (json_int_t)strtoull(slash + 1, NULL, 16), rec));
    return 0;
}

int gw_volume_recover(struct gw_volume *v)
{
    struct intents in = {json_array()};
    char prefix[GW_VOLUME_NAME_MAX + 2];
    snprintf(prefix, sizeof(prefix), "%s/", v->name);
    int rc =
        in.list ? gw_meta_list(v->o, GW_VOLUME_INTENTS, prefix, NULL, 0, intent_cb, &in) : -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(in.list, i, e)
    {
        uint64_t s = (uint64_t)json_integer_value(json_array_get(e, 0));
        pthread_mutex_t *lock = gw_volume_stripe_lock(v, s);
        pthread_mutex_lock(lock);
        int r = recover_stripe(v, s);
        pthread_mutex_unlock(lock);
        if (r && rc == 0)
            rc = r;
    }
    json_decref(in.list);
    return rc;
}

static void no_result(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                      const uint8_t *data, size_t len)
{
    (void)arg, (void)g, (void)v, (void)label, (void)data, (void)len;
}

/* Runs the update DEG of chunk c over the stripe's nodes. */
static int run_update(struct gw_objects *o, const struct gw_pool *pool, const json_t *rec,
                      const int *holder, int c, uint8_t *chunk, size_t L, bool incoherent)
{
    int n = pool->p.n;
    struct deg_request req = {.op = DEG_OP_UPDATE, .updated = c};
    for (int i = 0; i < n; i++)
        req.placement.holder[i] = holder[i];
    req.placement.reader = DEG_GATEWAY;
    struct deg_graph *g = NULL;
    char err[512] = "";
    int rc = deg_build(pool->codec, &req, &g, err, sizeof(err));
    struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
    if (!cl)
        rc = rc ? rc : -ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++)
        if (!cl[holder[i]] && (rc = gw_client_get(o, holder[i], &cl[holder[i]])))
            snprintf(err, sizeof(err), "no connection to node %s", o->nodes[holder[i]].id);
    if (rc == 0) {
        uint8_t *chunks[PLACE_MAX_CHUNKS] = {0};
        chunks[c] = chunk;
        struct node_stripe ns = {.version = GW_CHUNK_VERSION};
        rc = gw_layout_chunk(rec, 0, ns.object, &ns.stripe);
        struct deg_run_opts ro = {
            .incoherent = incoherent, .timeout_ms = o->timeout_ms, .options = o->deg_options};
        if (rc == 0)
            rc = node_deg_run(g, L, chunks, cl, o->nnodes, &ns, &ro, no_result, NULL, err,
                              sizeof(err));
    }
    for (int i = 0; cl && i < o->nnodes; i++)
        if (cl[i])
            gw_client_put(o, i, cl[i], rc);
    free(cl);
    deg_graph_destroy(g);
    if (rc)
        inec_log(INEC_LOG_WARN, "volume", "update DEG failed: %s", err);
    return rc;
}

int gw_volume_delta_write(struct gw_volume *v, uint64_t s, size_t off, size_t len,
                          const uint8_t *src)
{
    struct gw_objects *o = v->o;
    char key[17], ikey[GW_VOLUME_NAME_MAX + 20];
    gw_volume_stripe_key(s, key);
    intent_key(v, s, ikey, sizeof(ikey));
    json_t *rec = NULL;
    int rc = gw_meta_read(o, v->bucket, key, &rec);
    if (rc == -ENOENT || (rc == 0 && gw_rec_deleted(rec))) {
        json_decref(rec);
        return -EAGAIN; /* a sparse stripe: written whole */
    }
    if (rc)
        return rc;
    const struct gw_pool *pool =
        gw_pool_find(o, json_string_value(json_object_get(rec, "pool")) ?: "");
    json_t *stripes = json_object_get(rec, "stripes");
    json_t *st = json_array_get(stripes, 0);
    size_t L = (size_t)json_integer_value(json_object_get(st, "len"));
    int c = L ? (int)(off / L) : -1;
    int holder[PLACE_MAX_CHUNKS];
    rc = -EAGAIN;
    if (pool && json_array_size(stripes) == 1 && !json_object_get(st, "missing") && L &&
        (size_t)pool->p.k * L == v->stripe_bytes && (off + len - 1) / L == (size_t)c)
        rc = 0;
    for (int i = 0; rc == 0 && i < pool->p.n; i++) {
        const char *id = json_string_value(json_array_get(json_object_get(st, "nodes"), (size_t)i));
        holder[i] = id ? place_map_node(o->map, id) : -1;
        if (holder[i] < 0 || !gw_node_takes_chunks(o, holder[i]))
            rc = -EAGAIN; /* a degraded stripe: read-modify-write follows the write quorum */
    }
    /* The new chunk: the old one with the write in it (read only for a part). */
    uint8_t *chunk = NULL;
    size_t in = off - (size_t)c * L;
    if (rc == 0 && len < L) {
        void *old = NULL;
        size_t olen = 0;
        rc = chunk_get(o, rec, c, &old, &olen);
        if (rc == 0 && (olen != L || node_crc32c(old, L) != rec_crc(rec, c)))
            rc = -EIO;
        chunk = old;
        if (rc) /* unreadable here: read-modify-write decodes it */
            rc = -EAGAIN;
    } else if (rc == 0 && !(chunk = malloc(L))) {
        rc = -ENOMEM;
    }
    uint32_t crc = 0;
    if (rc == 0) {
        memcpy(chunk + in, src, len);
        crc = node_crc32c(chunk, L);
        json_t *intent = json_pack("{s:I,s:b,s:O,s:i,s:I}", "version",
                                   (json_int_t)gw_next_version(o, NULL), "deleted", 0, "oid",
                                   json_object_get(rec, "oid"), "chunk", c, "crc", (json_int_t)crc);
        rc = intent ? gw_meta_write(o, GW_VOLUME_INTENTS, ikey, intent) : -ENOMEM;
        json_decref(intent);
    }
    bool redo = false; /* finish the update by recovery, then apply the write by RMW */
    if (rc == 0) {
        crash_hook("after-intent");
        rc = run_update(o, pool, rec, holder, c, chunk, L, v->incoherent);
        redo = rc != 0; /* some chunks may hold new bytes: finish it the safe way, now */
    }
    if (rc == 0) {
        crash_hook("after-deg");
        pause_hook();
        /* Compare-and-set, as repair does (repair.c): at the read version + 1,
         * refused if the record changed since (repair moved or rebuilt a
         * chunk: its record must not be undone by this one, which names the
         * old homes). */
        uint64_t read_version = gw_rec_version(rec);
        json_array_set_new(json_object_get(st, "crc"), (size_t)c, json_integer((json_int_t)crc));
        json_object_set_new(rec, "version", json_integer((json_int_t)(read_version + 1)));
        rc = gw_meta_write_at(o, v->bucket, key, rec);
        if (rc == -ESTALE) {
            inec_log(INEC_LOG_INFO, "volume",
                     "stripe record changed during a delta update volume=%s stripe=%s: "
                     "recovering it",
                     v->name, key);
            redo = true;
        }
    }
    if (redo) {
        json_t *intent = json_pack("{s:O,s:i,s:I}", "oid", json_object_get(rec, "oid"), "chunk", c,
                                   "crc", (json_int_t)crc);
        rc = intent ? recover_one(v, s, intent) : -ENOMEM;
        json_decref(intent);
        if (rc == 0) {
            free(chunk);
            json_decref(rec);
            return -EAGAIN; /* whole again (old or new chunk): apply the write by RMW */
        }
    }
    if (rc == 0) {
        crash_hook("after-record");
        rc = gw_meta_remove(o, GW_VOLUME_INTENTS, ikey);
    }
    free(chunk);
    json_decref(rec);
    return rc;
}
