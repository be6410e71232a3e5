/*
 * Metadata records, reads.
 *
 * Sent to R homes first (the first R that are not judged down: for an inline
 * record, the holders of its data shards first, so it needs no decode), and
 * to the rest when one of them fails, lacks what the read needs, or has not
 * answered within META_HEDGE_MS (to every home at once while the gateway is
 * in doubt, meta_heal.c); answered once R homes have answered (a
 * record or "none"). R + W > C, so some answer holds the newest acknowledged
 * record. Asking R homes rather than all C cuts a read's calls to R/C (4 of 7
 * by default); the homes it does not ask, it does not repair: a write that
 * missed a home has the heal give it the record (meta_heal.c). When the R
 * answers do not all hold the newest record they name, it is written back to
 * the ones that lack it before the read returns (so it is then on W homes and
 * no later read can return anything older: reads are monotonic even after a
 * commit that ended in doubt). Homes answering after the read returned are
 * repaired by the thread that got their answer. A write-back that fails
 * leaves the key to the heal.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"

/* How long the first R homes have to answer before the rest are asked too. A
 * metadata call takes well under a millisecond; this only bounds what a home
 * frozen, but not judged down yet, adds to a read. */
#define META_HEDGE_MS 20

struct read_job {
    struct gw_objects *o;
    char *bucket, *key;
    int n, nodes[PLACE_MAX_CHUNKS];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int posted, done, answered, refs;
    bool asked[PLACE_MAX_CHUNKS];
    json_t *best; /* once the caller returned: what it returned (NULL: nothing) */
    bool returned;
    bool back[PLACE_MAX_CHUNKS]; /* home i's call ended: rc[i] and rec[i] are its answer */
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
    /* Inline records (inline.c): the shard each home answered (index -1:
     * none, or one failing its crc), kept in its blob. */
    void *blob[PLACE_MAX_CHUNKS];
    int idx[PLACE_MAX_CHUNKS];
    const uint8_t *shard[PLACE_MAX_CHUNKS];
    /* Once best is decoded: its every shard (S bytes each), for the homes
     * that lack theirs. */
    uint8_t *shards;
    size_t S;
    struct gw_round_calls calls; /* those start_read sent from the reader's thread */
    bool fan;                    /* a call went to the fan-out: the reader waits on j->cond alone */
};

static void read_job_put(struct read_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    for (int i = 0; i < j->n; i++) {
        json_decref(j->rec[i]);
        free(j->blob[i]);
    }
    json_decref(j->best);
    free(j->shards);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j->bucket);
    free(j->key);
    free(j);
}

/* Home i answered best itself (or, best or its answer a conditional write's
 * vote, the object the vote copies: gw_rec_same), with a good shard of it
 * when best is inline. */
static bool holds(const struct read_job *j, int i, const json_t *best, bool inl)
{
    return j->back[i] && j->rec[i] && gw_rec_same(j->rec[i], best) &&
           (!inl || (j->idx[i] >= 0 && j->idx[i] < j->n));
}

/* Home i's call ended: does it lack best, or, inline, hold another shard
 * than its own position's? Every writer gives home i shard i (a PUT, a
 * migration, reads repairing side by side), so racing writers agree and none
 * can leave two homes with one shard; a home holding another (placed before a
 * membership change) gets its own. Homes past the k + m shards (more homes
 * than when it was written) have none to get. A home still silent is not
 * known to lack it, and writing to it could wait the whole peer timeout (a
 * hung node): if it answers late, read_one repairs it. */
static bool stale(const struct read_job *j, int i, const json_t *best)
{
    if (!j->back[i] || !best || (j->rc[i] != 0 && j->rc[i] != -ENOENT))
        return false;
    int k, m;
    bool inl = gw_rec_inline(best, &k, &m, NULL);
    return !holds(j, i, best, inl) || (inl && i < k + m && j->idx[i] != i);
}

/* Home i's blob of best (lock held): inline, with shard i. NULL: none to give. */
static char *home_blob(const struct read_job *j, int i, const json_t *best, size_t *len)
{
    char *json = gw_rec_dump(best);
    int k, m;
    if (!json || !gw_rec_inline(best, &k, &m, NULL)) {
        *len = json ? strlen(json) : 0;
        return json;
    }
    char *blob = j->shards && i < k + m
                     ? gw_inline_blob(json, i, j->shards + (size_t)i * j->S, j->S, len)
                     : NULL;
    free(json);
    return blob;
}

/* A blob of best to one home (its compare-and-set keeps whatever is newer). */
static int repair_one(struct gw_objects *o, int node, const char *bucket, const char *key,
                      uint64_t version, char *blob, size_t len)
{
    struct node_client *c = NULL;
    int rc = !blob ? -ENOMEM : gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    if (rc == 0)
        rc = node_client_put_meta(c, bucket, key, version, 0, blob, len, NULL);
    if (blob)
        gw_client_put(o, node, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    free(blob);
    if (rc == 0)
        atomic_fetch_add(&o->meta_repairs, 1);
    return rc;
}

/* Home i's call ended with rc and blob (taken). The job's reference of the
 * call is the caller's to drop. */
static void read_ended(struct read_job *j, int i, int rc, void *blob, size_t len)
{
    struct gw_objects *o = j->o;
    int node = j->nodes[i];
    size_t slen;
    json_t *rec = NULL;
    int idx = -1;
    const uint8_t *shard = NULL;
    if (rc == 0 && !(rec = gw_rec_load(blob, len)))
        rc = -EBADMSG;
    int k, m;
    size_t blen;
    if (rc == 0 && gw_rec_inline(rec, &k, &m, &blen) &&
        gw_inline_tail(blob, len, &idx, &shard, &slen) == 0 &&
        slen == gw_inline_shard_len(blen, k) && idx < k + m) {
        /* a good shard of this record */
    } else {
        idx = -1; /* none, or a corrupt one: repaired like a missing record */
        shard = NULL;
    }
    pthread_mutex_lock(&j->lock);
    j->rc[i] = rc;
    j->rec[i] = rec;
    j->blob[i] = blob;
    j->idx[i] = idx;
    j->shard[i] = shard;
    j->back[i] = true;
    j->done++;
    j->answered += rc == 0 || rc == -ENOENT;
    bool late = j->returned && stale(j, i, j->best);
    char *rb = late ? home_blob(j, i, j->best, &len) : NULL;
    uint64_t version = j->best ? gw_rec_version(j->best) : 0;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    if (rb && repair_one(o, node, j->bucket, j->key, version, rb, len))
        gw_meta_heal_note(o, j->bucket, j->key);
}

/* Home i's whole call, on a fan-out thread. */
static void read_one(void *arg, int i)
{
    struct read_job *j = arg;
    void *blob;
    size_t len;
    int rc = gw_node_get_meta(j->o, j->nodes[i], j->bucket, j->key, &blob, &len);
    read_ended(j, i, rc, blob, len);
    read_job_put(j);
}

/* The end of home i's call, which the reader's thread started (start_read). */
static void read_end(void *arg, int i)
{
    struct read_job *j = arg;
    void *blob = NULL;
    size_t len = 0;
    int rc = node_client_get_meta_end(&j->calls.call[i], &blob, &len);
    gw_client_put(j->o, j->nodes[i], j->calls.client[i], rc == -ENOENT ? 0 : rc);
    read_ended(j, i, rc, blob, len);
    read_job_put(j);
}

/* Asks home i from the reader's own thread, over an idle client (j->calls);
 * false when that cannot be done without blocking: the fan-out's then. */
static bool start_read(struct read_job *j, int i)
{
    int node = j->nodes[i];
    struct node_client *c;
    if (gw_node_is_down(j->o, node)) {
        gw_client_put(j->o, node, NULL, -EHOSTDOWN);
        read_ended(j, i, -EHOSTDOWN, NULL, 0);
        read_job_put(j);
        return true;
    }
    if (j->fan || gw_client_idle(j->o, node, &c))
        return false;
    int rc = node_client_get_meta_start(c, j->bucket, j->key, &j->calls.call[i]);
    if (rc == -ENOTCONN) {
        node_client_close(c); /* read_one dials a new one */
        return false;
    }
    if (rc) {
        gw_client_put(j->o, node, c, rc);
        read_ended(j, i, rc, NULL, 0);
        read_job_put(j);
        return true;
    }
    j->calls.client[i] = c;
    j->calls.out[i] = true;
    return true;
}

struct writeback {
    struct read_job *j;
    uint64_t version;
    char *blob[PLACE_MAX_CHUNKS]; /* NULL: home i is not written */
    size_t len[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
};

static void writeback_one(void *arg, int i)
{
    struct writeback *w = arg;
    if (w->blob[i])
        w->rc[i] = repair_one(w->j->o, w->j->nodes[i], w->j->bucket, w->j->key, w->version,
                              w->blob[i], w->len[i]);
}

/* Distinct good shards of best answered so far (lock held). */
static int shards_of(const struct read_job *j, const json_t *best, const uint8_t **by_index)
{
    int have = 0;
    for (int i = 0; i < j->n; i++) {
        if (!holds(j, i, best, true) || by_index[j->idx[i]])
            continue;
        by_index[j->idx[i]] = j->shard[i];
        have++;
    }
    return have;
}

/* The record a read returns (lock held) in *out (NULL: none): the newest
 * answered, unless it is inline without k good shards answered: then
 * -EAGAIN (more homes may answer, or some are down: a 503 the client
 * retries), or, with fallback (every home answered, none down), the one
 * before it when fewer than k homes hold it at all (never acknowledged: a
 * commit holds W = k homes; an in-doubt or unfinished write) and -EIO when k
 * homes hold it but not k good shards (lost). */
static int readable(const struct read_job *j, bool fallback, json_t **out)
{
    uint64_t below = UINT64_MAX;
    for (;;) {
        json_t *best = NULL;
        for (int i = 0; i < j->n; i++)
            if (j->rec[i] && gw_rec_version(j->rec[i]) < below &&
                (!best || gw_rec_version(j->rec[i]) > gw_rec_version(best)))
                best = j->rec[i];
        *out = best;
        int k;
        const uint8_t *by_index[PLACE_MAX_CHUNKS] = {0};
        if (!best || !gw_rec_inline(best, &k, NULL, NULL) || shards_of(j, best, by_index) >= k)
            return 0;
        *out = NULL;
        if (!fallback)
            return -EAGAIN;
        int copies = 0;
        for (int i = 0; i < j->n; i++)
            copies += holds(j, i, best, false);
        if (copies >= k)
            return -EIO;
        below = gw_rec_version(best);
    }
}

/* Enough answered to return (lock held): R answers, and k distinct shards
 * when the newest record is inline (more homes are waited for). */
static bool answered_enough(const struct read_job *j)
{
    json_t *best;
    return j->answered >= j->o->meta_rq && readable(j, false, &best) == 0;
}

/* best's body from the shards answered, then every shard of it for the
 * homes that lack theirs (lock held); the body into out. */
static int decode_best(struct read_job *j, const json_t *best, json_t *out)
{
    int k, m;
    size_t len;
    gw_rec_inline(best, &k, &m, &len);
    const uint8_t *by_index[PLACE_MAX_CHUNKS] = {0};
    if (k + m > j->n || shards_of(j, best, by_index) < k)
        return j->done < j->n ? -EHOSTDOWN : -EIO; /* homes silent, or shards lost */
    uint8_t *body;
    int rc = gw_inline_decode(k, m, len, by_index, &body);
    bool degraded = false;
    for (int c = 0; c < k; c++)
        degraded |= !by_index[c];
    if (rc == 0 && degraded && json_object_set_new(out, GW_INLINE_REBUILT, json_true()))
        rc = -ENOMEM; /* a GET of it counts a degraded read (get.c) */
    if (rc == 0)
        rc = gw_rec_set_inline_body(out, body, len);
    if (rc == 0 && (rc = gw_inline_encode(k, m, body, len, &j->shards)) == 0)
        j->S = gw_inline_shard_len(len, k);
    free(body);
    return rc;
}

/* Why a read failed, home by home (a 503 or 500 to the client says little). */
static void log_unreadable(struct read_job *j, int rc)
{
    char why[PLACE_MAX_CHUNKS * 48] = "";
    size_t at = 0;
    pthread_mutex_lock(&j->lock);
    for (int i = 0; i < j->n && at < sizeof(why); i++)
        at += (size_t)snprintf(why + at, sizeof(why) - at, " %s=%s", j->o->nodes[j->nodes[i]].id,
                               !j->back[i]           ? "silent"
                               : j->rc[i] == -ENOENT ? "none"
                               : j->rc[i]            ? strerror(-j->rc[i])
                               : j->idx[i] >= 0      ? "shard"
                                                     : "record");
    pthread_mutex_unlock(&j->lock);
    inec_log(INEC_LOG_WARN, "gateway",
             "metadata of %s/%s unreadable: %s; %d of %d homes answered:%s", j->bucket, j->key,
             strerror(-rc), j->answered, j->n, why);
}

/* Ask homes not asked yet until `want` are: first those not judged down, in
 * home order, then (want = n) every one left. */
static void ask(struct read_job *j, int want)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < j->n; i++) {
            pthread_mutex_lock(&j->lock);
            bool go = !j->asked[i] && j->posted < want &&
                      (pass == 1 || !gw_node_is_down(j->o, j->nodes[i]));
            if (go) {
                atomic_fetch_add(&j->o->meta_read_calls, 1);
                j->asked[i] = true;
                j->posted++;
                j->refs++;
            }
            pthread_mutex_unlock(&j->lock);
            if (!go || start_read(j, i))
                continue;
            if (!j->fan) { /* the reader waits on j->cond from now on */
                j->fan = true;
                gw_round_calls_hand_over(j->o->fan, &j->calls, j->n);
            }
            if (gw_fanout_post(j->o->fan, read_one, j, i))
                read_one(j, i);
        }
}

/* all: ask every home at once; whole (all only): wait for each too, and
 * tell whether each answered and holds the record now. */
static int meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out,
                     bool all, bool *whole)
{
    *out = NULL;
    struct read_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->o = o;
    j->n = o->meta_copies;
    j->bucket = strdup(bucket);
    j->key = strdup(key);
    int rc = j->bucket && j->key ? gw_meta_homes(o, bucket, key, j->nodes) : -ENOMEM;
    if (rc) {
        free(j->bucket);
        free(j->key);
        free(j);
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->refs = 1;
    j->calls.end = read_end;
    j->calls.arg = j;
    ask(j, all || gw_meta_heal_doubt(o) ? j->n : o->meta_rq);
    int64_t hedge_at = gw_now_ms() + META_HEDGE_MS;
    pthread_mutex_lock(&j->lock);
    while ((whole || !answered_enough(j)) && j->done < j->n) {
        pthread_mutex_unlock(&j->lock);
        struct node_call *out[PLACE_MAX_CHUNKS];
        int nout = gw_round_calls_reap(&j->calls, j->n, out);
        pthread_mutex_lock(&j->lock);
        if (!(whole || !answered_enough(j)) || j->done == j->n)
            break;
        if (j->posted < j->n && (j->done == j->posted || gw_now_ms() >= hedge_at)) {
            pthread_mutex_unlock(&j->lock);
            ask(j, j->n);
            pthread_mutex_lock(&j->lock);
        } else if (nout) {
            int64_t left = hedge_at - gw_now_ms();
            int wait = j->posted == j->n ? -1 : left > 0 ? (int)left : 0;
            pthread_mutex_unlock(&j->lock);
            node_calls_wait(out, nout, wait);
            pthread_mutex_lock(&j->lock);
        } else if (j->posted < j->n) {
            struct timespec until = gw_deadline_in_ms(hedge_at - gw_now_ms());
            pthread_cond_timedwait(&j->cond, &j->lock, &until);
        } else {
            pthread_cond_wait(&j->cond, &j->lock);
        }
    }
    pthread_mutex_unlock(&j->lock);
    gw_round_calls_hand_over(o->fan, &j->calls, j->n); /* the homes still out: the fan-out's */
    pthread_mutex_lock(&j->lock);
    json_t *best = NULL, *ret = NULL;
    /* Fallback only once every home ANSWERED: a home that is down may hold
     * the newest record, so its silence does not show that fewer than k
     * homes took it (an acknowledged inline object would read as the
     * version before it). */
    int err = 0, derr = readable(j, j->answered == j->n, &best);
    for (int i = 0; i < j->n; i++)
        if (j->rc[i] && j->rc[i] != -ENOENT && (!err || !gw_transport_error(j->rc[i])))
            err = j->rc[i];
    bool enough = j->answered >= o->meta_rq && !derr;
    if (enough && best && gw_rec_inline(best, NULL, NULL, NULL)) {
        /* The caller gets the body with the record; no home is written
         * without the shards to give it. */
        if (!(ret = json_copy(best)))
            derr = -ENOMEM;
        else if ((derr = decode_best(j, best, ret)))
            json_decref(ret), ret = NULL;
        if (derr)
            enough = false;
    } else if (enough && best) {
        ret = json_incref(best);
    }
    struct writeback w = {.j = j, .version = best ? gw_rec_version(best) : 0};
    int lacking = 0;
    for (int i = 0; enough && best && i < j->n; i++)
        if (stale(j, i, best))
            lacking += (w.blob[i] = home_blob(j, i, best, &w.len[i])) != NULL;
    j->best = enough ? json_incref(best) : NULL;
    j->returned = true;
    *out = ret;
    pthread_mutex_unlock(&j->lock);
    if (lacking)
        gw_fanout_run(o, j->n, writeback_one, &w);
    bool wrote = true; /* every home that lacked it took it (or holds a newer one) */
    for (int i = 0; i < j->n; i++)
        wrote &= !w.blob[i] || w.rc[i] == 0 || w.rc[i] == -ESTALE || w.rc[i] == -EEXIST;
    if (whole) /* the heal's and the sweep's: they try again themselves */
        *whole = enough && j->answered == j->n && wrote;
    else if (!wrote)
        gw_meta_heal_note(o, bucket, key);
    if (enough) {
        rc = best ? 0 : -ENOENT;
        if (best)
            gw_hlc_observe(o, gw_rec_version(best));
    } else {
        rc = derr && j->answered >= o->meta_rq ? derr : err == -ENAMETOOLONG ? err : -EHOSTDOWN;
        log_unreadable(j, rc);
    }
    read_job_put(j);
    return rc;
}

int gw_meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    return meta_read(o, bucket, key, out, false, NULL);
}

int gw_meta_read_all(struct gw_objects *o, const char *bucket, const char *key, json_t **out,
                     bool *whole)
{
    if (whole)
        *whole = false;
    return meta_read(o, bucket, key, out, true, whole);
}
