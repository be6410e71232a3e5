/*
 * Metadata records on the nodes. Every object (and every bucket, under the
 * store bucket ".") has one JSON record, kept by the nodes, not the gateway:
 *
 *   copies    C = 2M+1 nodes (M = the most parities of any pool, C at most the
 *             members), chosen by rendezvous hashing of bucket + key among the
 *             map's members, so any gateway finds them knowing only the name,
 *             and a node going down never moves them;
 *   versions  a hybrid logical clock per gateway (gw_hlc_next), no read first;
 *   write     a compare-and-set on every home (higher version wins, in the
 *             node's LMDB transaction), one round, done once W = C - M hold
 *             it (see "writes" below);
 *   read      from all C in parallel, answered once R = M+1 have answered
 *             (R + W > C: some answer holds the newest acknowledged record),
 *             the highest version wins and homes that lack it are repaired;
 *   delete    a tombstone record with a higher version, never a removal, so a
 *             stale copy on a node that was down cannot come back to life;
 *   list      every node's ordered index merged (k-way, by key), each key's
 *             newest record kept, tombstones dropped; with at most M nodes
 *             silent every key is still seen (it is on at least M+1 nodes).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/objects_internal.h"

uint64_t gw_rec_version(const json_t *rec)
{
    return (uint64_t)json_integer_value(json_object_get(rec, "version"));
}

bool gw_rec_deleted(const json_t *rec)
{
    return json_is_true(json_object_get(rec, "deleted"));
}

/* --- versions: a hybrid logical clock --------------------------------------------
 * A version is the wall clock in ns with its low 10 bits replaced by this
 * gateway's id, unless a version this gateway has seen (read, or a node's
 * refusal) is ahead of the wall clock: then one tick (1024 ns) past it. So a
 * gateway never needs to read a record to version the next one, versions of
 * one gateway only grow, and a gateway that learns of a newer version
 * (through any read) versions its next write above it. */

#define HLC_TICK 1024u

void gw_hlc_observe(struct gw_objects *o, uint64_t version)
{
    uint64_t v = version & ~(uint64_t)(HLC_TICK - 1), cur = atomic_load(&o->hlc);
    while (v > cur && !atomic_compare_exchange_weak(&o->hlc, &cur, v))
        ;
}

uint64_t gw_hlc_next(struct gw_objects *o)
{
    uint64_t cur = atomic_load(&o->hlc), next;
    do {
        uint64_t wall = (uint64_t)gw_realtime_ns() & ~(uint64_t)(HLC_TICK - 1);
        next = wall > cur ? wall : cur + HLC_TICK;
    } while (!atomic_compare_exchange_weak(&o->hlc, &cur, next));
    return next | o->gw_id;
}

/* The key's metadata homes: chosen among the map's members (every node not
 * out, and not one whose records moved away: gw_meta_migrated), whatever
 * their up or down state, so a node going down never moves a key's homes;
 * its copies are simply missing until it is back (and read repair, or the
 * next write, refreshes them). */
static int meta_nodes_excl(struct gw_objects *o, const char *bucket, const char *key,
                           const bool *excl, int *out);

static int meta_nodes(struct gw_objects *o, const char *bucket, const char *key, int *out)
{
    return meta_nodes_excl(o, bucket, key, NULL, out);
}

/* excl[i]: node i is not a member (NULL: the members as they are now). */
static int meta_nodes_excl(struct gw_objects *o, const char *bucket, const char *key,
                           const bool *excl, int *out)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    char *name = malloc(bl + kl + 2);
    if (!name)
        return -ENOMEM;
    memcpy(name, bucket, bl);
    name[bl] = '\0'; /* bucket and key cannot be confused: S3 buckets hold no NUL */
    memcpy(name + bl + 1, key, kl + 1);
    bool stack[64], *use = o->nnodes <= 64 ? stack : malloc((size_t)o->nnodes);
    int rc = use ? 0 : -ENOMEM;
    for (int i = 0; use && i < o->nnodes; i++)
        use[i] = o->map->nodes[i].state != PLACE_OUT &&
                 !(excl ? excl[i] : atomic_load(&o->nodes[i].meta_out));
    if (rc == 0)
        rc = place_stripe_among(o->map, use, name, bl + kl + 1, UINT64_MAX, o->meta_copies, out,
                                NULL);
    if (use != stack)
        free(use);
    free(name);
    return rc;
}

/* --- writes ----------------------------------------------------------------------
 * Every write is a compare-and-set on each home (node_store_put_meta): a home
 * keeps the record only if its version is above the one it holds, so copies
 * never go back in time whatever order concurrent writes arrive in.
 *
 * A round is sent to every home and returns once W homes took the record
 * (or once W can no longer be reached): a frozen home does not hold the
 * writer for the peer timeout. The homes still out finish on the fan-out
 * threads; the round's state is refcounted so it outlives the caller.
 *
 * gw_meta_write commits in one round: versions come from the clock, not from
 * a read, and each home that takes the record answers the one it replaced,
 * so the writer learns what to free without reading first. A home holding a
 * newer version refuses and names it: the writer's clock moves past it and
 * the record is sent again with a higher version (a write that starts after
 * another was acknowledged is ordered after it). When the homes keep
 * refusing (a race), the outcome is read off the answers:
 *   held by W   committed; what the homes answered as replaced is garbage;
 *   refused by W homes holding newer versions: lost for good, every R homes
 *               include one, so no read can return it (R + W > C);
 *   otherwise   in doubt (GW_META_IN_DOUBT) when any copy may have landed
 *               (a later read may return it, so what it names must be kept:
 *               the orphan scan frees it if it never wins), else failed with
 *               nothing sent anywhere that can be read. */

struct meta_round {
    struct gw_objects *o;
    char *bucket, *key, *blob;
    size_t len;
    uint64_t version;
    unsigned flags; /* NODE_META_CHECK: a prepare; NODE_META_OLD: answer the replaced */
    int n, nodes[PLACE_MAX_CHUNKS];
    bool skip[PLACE_MAX_CHUNKS]; /* not sent to */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs, done, held;
    bool back[PLACE_MAX_CHUNKS]; /* home i's call ended */
    bool sent[PLACE_MAX_CHUNKS]; /* the request left: a transport error may hide a write */
    int rc[PLACE_MAX_CHUNKS];
    uint64_t stored[PLACE_MAX_CHUNKS]; /* of a refusal */
    json_t *old[PLACE_MAX_CHUNKS];     /* NODE_META_OLD: the record home i replaced */
};

struct round {
    int ok;       /* homes that hold the record (or a newer one) */
    int held;     /* homes that answered they hold this very record */
    int landed;   /* homes that may hold this very record (still out included) */
    int refused;  /* homes holding a newer version (or this one with other bytes) */
    int newer;    /* homes holding a newer version: -ESTALE */
    uint64_t max; /* the newest version a refusal named */
    int err;      /* the most telling failure */
};

static void round_put(struct meta_round *m)
{
    pthread_mutex_lock(&m->lock);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&m->lock);
    if (!last)
        return;
    for (int i = 0; i < m->n; i++)
        json_decref(m->old[i]);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m->bucket);
    free(m->key);
    free(m->blob);
    free(m);
}

static void write_one(void *arg, int i)
{
    struct meta_round *m = arg;
    struct gw_objects *o = m->o;
    int node = m->nodes[i];
    struct node_client *c = NULL;
    uint64_t stored = 0;
    void *ob = NULL;
    size_t olen = 0;
    bool sent = false;
    int rc = m->skip[i] || gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    if (rc == 0) {
        sent = true;
        rc = node_client_put_meta_old(c, m->bucket, m->key, m->version, m->flags & ~NODE_META_OLD,
                                      m->blob, m->len, &stored,
                                      m->flags & NODE_META_OLD ? &ob : NULL, &olen);
    }
    if (!m->skip[i])
        gw_client_put(o, node, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    json_t *old = ob ? json_loadb(ob, olen, 0, NULL) : NULL;
    free(ob);
    pthread_mutex_lock(&m->lock);
    m->rc[i] = rc;
    m->sent[i] = sent;
    m->stored[i] = stored;
    m->old[i] = old;
    m->back[i] = true;
    m->done++;
    m->held += rc == 0;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    round_put(m);
}

static struct meta_round *round_new(struct gw_objects *o, const char *bucket, const char *key,
                                    const bool *excl, int *err)
{
    struct meta_round *m = calloc(1, sizeof(*m));
    *err = -ENOMEM;
    if (!m)
        return NULL;
    m->o = o;
    m->n = o->meta_copies;
    m->bucket = strdup(bucket);
    m->key = strdup(key);
    if (m->bucket && m->key)
        *err = meta_nodes_excl(o, bucket, key, excl, m->nodes);
    if (*err) {
        free(m->bucket);
        free(m->key);
        free(m);
        if (*err == -ENOSPC)
            *err = -EHOSTDOWN;
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    return m;
}

/* Sends m's record (blob, version, flags set) to every home not skipped and
 * waits for W of them, or until W cannot be reached; *r is the count then,
 * homes still out counted as may-have-landed. olds (may be NULL) gets the
 * records replaced at the homes that answered. m is the caller's no more. */
static void round_run(struct meta_round *m, struct round *r, json_t *olds, int *rcs)
{
    struct gw_objects *o = m->o;
    /* Fewer than W homes the failure detector thinks up: nothing is sent (a
     * write that cannot commit then leaves no copy to doubt about). */
    int up = 0;
    for (int i = 0; i < m->n; i++)
        up += !m->skip[i] && !gw_node_is_down(o, m->nodes[i]);
    if (up < o->meta_wq)
        for (int i = 0; i < m->n; i++)
            m->skip[i] = true;
    m->refs = m->n + 1;
    for (int i = 0; i < m->n; i++)
        if (gw_fanout_post(o->fan, write_one, m, i))
            write_one(m, i);
    memset(r, 0, sizeof(*r));
    pthread_mutex_lock(&m->lock);
    while (m->held < o->meta_wq && m->done < m->n && m->held + (m->n - m->done) >= o->meta_wq)
        pthread_cond_wait(&m->cond, &m->lock);
    for (int i = 0; i < m->n; i++) {
        int rc = m->back[i] ? m->rc[i] : -EINPROGRESS;
        if (rcs)
            rcs[i] = rc;
        if (!m->back[i]) {
            r->landed += !m->skip[i];
            continue;
        }
        if (rc == -ESTALE || rc == -EEXIST) {
            r->refused++;
            if (m->stored[i] > r->max)
                r->max = m->stored[i];
        }
        if (rc == 0 || rc == -ESTALE)
            r->ok++;
        r->held += rc == 0;
        r->newer += rc == -ESTALE;
        if (rc == 0 || (m->sent[i] && gw_transport_error(rc)))
            r->landed++;
        if (rc && rc != -ESTALE && (!r->err || !gw_transport_error(rc)))
            r->err = rc; /* a store's own answer (-ENAMETOOLONG...) says more than "down" */
        if (olds && m->old[i])
            json_array_append(olds, m->old[i]);
    }
    pthread_mutex_unlock(&m->lock);
    if (r->max)
        gw_hlc_observe(o, r->max);
    round_put(m);
}

/* Byte-stable: a record sent twice is the same bytes (a retry is idempotent). */
static char *dump(const json_t *rec)
{
    return json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
}

static int failed(const struct round *r)
{
    return r->err && !gw_transport_error(r->err) ? r->err : -EHOSTDOWN;
}

/* One round of rec at its version to the key's homes (not excl, not skip). */
static int round_of(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                    unsigned flags, const bool *excl, const bool *skip, struct round *r,
                    json_t *olds, int *rcs)
{
    int rc;
    struct meta_round *m = round_new(o, bucket, key, excl, &rc);
    if (!m)
        return rc;
    m->version = gw_rec_version(rec);
    m->flags = flags;
    if (!(flags & NODE_META_CHECK)) {
        if (!(m->blob = dump(rec))) {
            m->refs = 1;
            round_put(m);
            return -ENOMEM;
        }
        m->len = strlen(m->blob);
    }
    if (skip)
        memcpy(m->skip, skip, sizeof(m->skip));
    round_run(m, r, olds, rcs);
    return 0;
}

#define COMMIT_ATTEMPTS 5

/* One round, again at a higher version while homes refuse (see above).
 * replaced (may be NULL): the distinct records the commit replaced (not its
 * own earlier attempts); *lost: refused by W homes. */
static int commit(struct gw_objects *o, const char *bucket, const char *key, json_t *rec,
                  json_t *replaced, bool *lost)
{
    uint64_t ours[COMMIT_ATTEMPTS];
    json_t *olds = json_array();
    struct round r;
    bool landed = false;
    int rc = olds ? 0 : -ENOMEM, n = 0;
    *lost = false;
    while (rc == 0) {
        ours[n++] = gw_rec_version(rec);
        if ((rc = round_of(o, bucket, key, rec, replaced ? NODE_META_OLD : 0, NULL, NULL, &r,
                           replaced ? olds : NULL, NULL)))
            break;
        landed |= r.landed > 0;
        if (r.held >= o->meta_wq || !r.refused || n == COMMIT_ATTEMPTS)
            break;
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_hlc_next(o)));
    }
    if (rc && landed)
        rc = GW_META_IN_DOUBT; /* an earlier attempt may have landed */
    else if (rc == 0 && r.held < o->meta_wq) {
        if (r.newer >= o->meta_wq)
            *lost = true; /* rc 0: superseded, as a later write would have done */
        else
            rc = landed ? GW_META_IN_DOUBT : failed(&r);
    }
    size_t i;
    json_t *old;
    json_array_foreach(olds, i, old)
    {
        uint64_t v = gw_rec_version(old);
        bool seen = false;
        for (int a = 0; a < n; a++)
            seen |= v == ours[a];
        for (size_t k = 0; k < json_array_size(replaced) && !seen; k++)
            seen = gw_rec_version(json_array_get(replaced, k)) == v;
        if (rc == 0 && !*lost && !seen)
            json_array_append(replaced, old);
    }
    json_decref(olds);
    return rc;
}

int gw_meta_write(struct gw_objects *o, const char *bucket, const char *key, json_t *rec)
{
    bool lost;
    return commit(o, bucket, key, rec, NULL, &lost);
}

int gw_meta_commit(struct gw_objects *o, const char *bucket, const char *key, json_t *rec,
                   json_t *replaced, bool *lost)
{
    return commit(o, bucket, key, rec, replaced, lost);
}

/* At rec's own version, in two rounds: the first (a prepare) writes nothing
 * and only asks each home whether it would keep the version, so a refusal
 * leaves nothing anywhere (-ESTALE), and a home dying between the rounds is
 * the only way to end in doubt. */
int gw_meta_write_at(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec)
{
    struct round r;
    int rcs[PLACE_MAX_CHUNKS];
    int rc = round_of(o, bucket, key, rec, NODE_META_CHECK, NULL, NULL, &r, NULL, rcs);
    if (rc)
        return rc;
    if (r.refused)
        return -ESTALE;
    if (r.ok < o->meta_wq)
        return failed(&r); /* nothing was sent: nothing can shadow */
    bool skip[PLACE_MAX_CHUNKS] = {false};
    for (int i = 0; i < o->meta_copies; i++) /* a home still silent may yet take it */
        skip[i] = rcs[i] != 0 && rcs[i] != -EINPROGRESS;
    if ((rc = round_of(o, bucket, key, rec, 0, NULL, skip, &r, NULL, NULL)))
        return rc;
    if (r.ok >= o->meta_wq)
        return 0;
    return r.landed ? GW_META_IN_DOUBT : failed(&r);
}

/* One round of rec as it is (a copy, a repair): no new version. */
static int put_as_is(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                     const bool *excl, struct round *r)
{
    return round_of(o, bucket, key, rec, 0, excl, NULL, r, NULL, NULL);
}

int gw_meta_copy(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                 const bool *excl)
{
    struct round r;
    int rc = put_as_is(o, bucket, key, rec, excl, &r);
    return rc ? rc : r.ok >= o->meta_wq ? 0 : -EHOSTDOWN;
}

struct remove_job {
    struct gw_objects *o;
    const char *bucket, *key;
    int nodes[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
};

static void remove_one(void *arg, int i)
{
    struct remove_job *j = arg;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, node) ? -EHOSTDOWN : gw_client_get(j->o, node, &c);
    if (rc == 0)
        rc = node_client_delete_meta(c, j->bucket, j->key);
    gw_client_put(j->o, node, c, rc == -ENOENT ? 0 : rc);
    j->rc[i] = rc == -ENOENT ? 0 : rc;
}

int gw_meta_remove(struct gw_objects *o, const char *bucket, const char *key)
{
    struct remove_job j = {.o = o, .bucket = bucket, .key = key};
    int rc = meta_nodes(o, bucket, key, j.nodes);
    if (rc)
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    gw_fanout_run(o, o->meta_copies, remove_one, &j);
    int ok = 0;
    for (int i = 0; i < o->meta_copies; i++)
        ok += j.rc[i] == 0;
    return ok >= o->meta_wq ? 0 : -EHOSTDOWN;
}

/* Every member's copy, not only the homes': a copy on a node that is not a
 * home now (written before a membership change, a migration cut short, a
 * home judged down at the removal) would stay in listings for ever, and a
 * queue walked by listing would meet it again at every pass. Each member is
 * asked, whatever the failure detector thinks of it (a removal is
 * background work; a call is bounded by the peer timeout). */
struct remove_all {
    struct gw_objects *o;
    const char *bucket, *key;
};

static void remove_member(void *arg, int i)
{
    struct remove_all *a = arg;
    if (a->o->map->nodes[i].state == PLACE_OUT)
        return;
    struct node_client *c = NULL;
    int rc = gw_client_get(a->o, i, &c);
    if (rc == 0)
        rc = node_client_delete_meta(c, a->bucket, a->key);
    gw_client_put(a->o, i, c, rc == -ENOENT ? 0 : rc);
}

int gw_meta_remove_all(struct gw_objects *o, const char *bucket, const char *key)
{
    int rc = gw_meta_remove(o, bucket, key);
    if (rc == 0) {
        struct remove_all a = {o, bucket, key};
        gw_fanout_run(o, o->nnodes, remove_member, &a);
    }
    return rc;
}

/* --- decisions -------------------------------------------------------------------
 * One decision among racers (Complete against Abort of an upload): each
 * racer sends its vote at the same version, the slot. A home keeps the first
 * record of a version it gets and refuses that version with other bytes, so
 * a home never changes its vote, and since two sets of W homes always share
 * one, at most one vote is ever held by W homes: that one is decided, for
 * good. Read repair may spread either vote to homes that have none, which
 * changes nothing of that. Records of a higher version (the outcome, written
 * once a decision is known) end the slot. */

struct get_job {
    struct gw_objects *o;
    const char *bucket, *key;
    int nodes[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
};

static void get_one(void *arg, int i)
{
    struct get_job *j = arg;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, node) ? -EHOSTDOWN : gw_client_get(j->o, node, &c);
    void *blob = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = node_client_get_meta(c, j->bucket, j->key, &blob, &len);
    gw_client_put(j->o, node, c, rc == -ENOENT ? 0 : rc);
    if (rc == 0 && !(j->rec[i] = json_loadb(blob, len, 0, NULL)))
        rc = -EBADMSG;
    free(blob);
    j->rc[i] = rc;
}

int gw_meta_decide(struct gw_objects *o, const char *bucket, const char *key, const json_t *vote,
                   json_t **out)
{
    *out = NULL;
    struct round r;
    int rc = put_as_is(o, bucket, key, vote, NULL, &r);
    if (rc)
        return rc;
    if (r.held >= o->meta_wq) { /* held by W homes: ours is the decision */
        *out = json_incref((json_t *)vote);
        return 0;
    }
    uint64_t slot = gw_rec_version(vote);
    struct get_job j = {.o = o, .bucket = bucket, .key = key};
    if ((rc = meta_nodes(o, bucket, key, j.nodes)))
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    gw_fanout_run(o, o->meta_copies, get_one, &j);
    for (int i = 0; i < o->meta_copies && !*out; i++) {
        if (!j.rec[i])
            continue;
        if (gw_rec_version(j.rec[i]) > slot) {
            *out = json_incref(j.rec[i]); /* the outcome is out already */
            break;
        }
        int same = 0;
        for (int k = 0; gw_rec_version(j.rec[i]) == slot && k < o->meta_copies; k++)
            same += j.rec[k] && gw_rec_version(j.rec[k]) == slot && json_equal(j.rec[k], j.rec[i]);
        if (same >= o->meta_wq)
            *out = json_incref(j.rec[i]);
    }
    for (int i = 0; i < o->meta_copies; i++)
        json_decref(j.rec[i]);
    return *out ? 0 : -EAGAIN; /* split, or homes silent: undecided for now */
}

/* --- reads -----------------------------------------------------------------------
 * Sent to every home, answered once R homes have answered (a record or "none").
 * R + W > C, so some answer holds the newest acknowledged record. When the R
 * answers do not all hold the newest record they name, it is written back to
 * the ones that lack it before the read returns (so it is then on W homes and
 * no later read can return anything older: reads are monotonic even after a
 * commit that ended in doubt). Homes answering after the read returned are
 * repaired by the thread that got their answer. */

struct read_job {
    struct gw_objects *o;
    char *bucket, *key;
    int n, nodes[PLACE_MAX_CHUNKS];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, answered, refs;
    json_t *best; /* once the caller returned: what it returned (NULL: nothing) */
    bool returned;
    bool back[PLACE_MAX_CHUNKS]; /* home i's call ended: rc[i] and rec[i] are its answer */
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
};

static void read_job_put(struct read_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    for (int i = 0; i < j->n; i++)
        json_decref(j->rec[i]);
    json_decref(j->best);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j->bucket);
    free(j->key);
    free(j);
}

/* Home i's call ended (back) with rc and rec: does it lack best? A home
 * still silent is not known to lack it, and writing to it could wait the
 * whole peer timeout (a hung node): if it answers late, read_one repairs it. */
static bool stale(bool back, int rc, const json_t *rec, const json_t *best)
{
    if (!back || !best || (rc != 0 && rc != -ENOENT))
        return false;
    return !rec || gw_rec_version(rec) < gw_rec_version(best) ||
           (gw_rec_version(rec) == gw_rec_version(best) && !json_equal(rec, best));
}

/* best to one home, as is (its compare-and-set keeps whatever is newer). */
static int repair_one(struct gw_objects *o, int node, const char *bucket, const char *key,
                      const json_t *best)
{
    char *blob = dump(best);
    struct node_client *c = NULL;
    int rc = !blob ? -ENOMEM : gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    if (rc == 0)
        rc =
            node_client_put_meta(c, bucket, key, gw_rec_version(best), 0, blob, strlen(blob), NULL);
    if (blob)
        gw_client_put(o, node, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    free(blob);
    if (rc == 0)
        atomic_fetch_add(&o->meta_repairs, 1);
    return rc;
}

static void read_one(void *arg, int i)
{
    struct read_job *j = arg;
    struct gw_objects *o = j->o;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    void *blob = NULL;
    size_t len = 0;
    json_t *rec = NULL;
    if (rc == 0)
        rc = node_client_get_meta(c, j->bucket, j->key, &blob, &len);
    gw_client_put(o, node, c, rc == -ENOENT ? 0 : rc);
    if (rc == 0 && !(rec = json_loadb(blob, len, 0, NULL)))
        rc = -EBADMSG;
    free(blob);
    pthread_mutex_lock(&j->lock);
    j->rc[i] = rc;
    j->rec[i] = rec;
    j->back[i] = true;
    j->done++;
    j->answered += rc == 0 || rc == -ENOENT;
    bool late = j->returned && stale(true, rc, rec, j->best);
    json_t *best = late ? json_incref(j->best) : NULL;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    if (late)
        repair_one(o, node, j->bucket, j->key, best);
    json_decref(best);
    read_job_put(j);
}

struct writeback {
    struct read_job *j;
    const json_t *best;
    bool want[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
};

static void writeback_one(void *arg, int i)
{
    struct writeback *w = arg;
    w->rc[i] = w->want[i] ? repair_one(w->j->o, w->j->nodes[i], w->j->bucket, w->j->key, w->best)
                          : -ECANCELED;
}

int gw_meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    *out = NULL;
    struct read_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->o = o;
    j->n = o->meta_copies;
    j->bucket = strdup(bucket);
    j->key = strdup(key);
    int rc = j->bucket && j->key ? meta_nodes(o, bucket, key, j->nodes) : -ENOMEM;
    if (rc) {
        free(j->bucket);
        free(j->key);
        free(j);
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->refs = j->n + 1;
    for (int i = 0; i < j->n; i++)
        if (gw_fanout_post(o->fan, read_one, j, i))
            read_one(j, i);
    pthread_mutex_lock(&j->lock);
    while (j->answered < o->meta_rq && j->done < j->n)
        pthread_cond_wait(&j->cond, &j->lock);
    json_t *best = NULL;
    int err = 0;
    for (int i = 0; i < j->n; i++) {
        if (j->rec[i] && (!best || gw_rec_version(j->rec[i]) > gw_rec_version(best)))
            best = j->rec[i];
        if (j->rc[i] && j->rc[i] != -ENOENT && (!err || !gw_transport_error(j->rc[i])))
            err = j->rc[i];
    }
    bool enough = j->answered >= o->meta_rq;
    struct writeback w = {.j = j, .best = best};
    int lacking = 0;
    for (int i = 0; enough && best && i < j->n; i++)
        lacking += w.want[i] = stale(j->back[i], j->rc[i], j->rec[i], best);
    j->best = enough ? json_incref(best) : NULL;
    j->returned = true;
    *out = json_incref(j->best);
    pthread_mutex_unlock(&j->lock);
    if (lacking)
        gw_fanout_run(o, j->n, writeback_one, &w);
    if (enough) {
        rc = best ? 0 : -ENOENT;
        if (best)
            gw_hlc_observe(o, gw_rec_version(best));
    } else {
        rc = err == -ENAMETOOLONG ? err : -EHOSTDOWN;
    }
    read_job_put(j);
    return rc;
}

/* --- listing: a k-way merge of every node's ordered index ------------------ */

#define PAGE 256

struct entry {
    char *key;
    json_t *rec;
};

struct cursor {
    int node;
    struct entry *e; /* this page */
    int n, pos;
    bool more, failed;
    char *after; /* last key fetched */
};

struct list_job {
    struct gw_objects *o;
    const char *bucket, *prefix;
    struct cursor *cur;
};

static int page_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct cursor *c = arg;
    json_t *rec = json_loadb(blob, len, 0, NULL);
    char *k = strdup(key);
    if (!rec || !k) {
        json_decref(rec);
        free(k);
        return -ENOMEM;
    }
    c->e[c->n++] = (struct entry){k, rec};
    return 0;
}

static void page_free(struct cursor *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        json_decref(c->e[i].rec);
    }
    c->n = c->pos = 0;
}

static void fetch(struct list_job *lj, struct cursor *c)
{
    page_free(c);
    if (c->failed || !c->more)
        return;
    struct gw_objects *o = lj->o;
    struct node_client *cl = NULL;
    int more = 0;
    int rc = gw_node_is_down(o, c->node) ? -EHOSTDOWN : gw_client_get(o, c->node, &cl);
    if (rc == 0)
        rc = node_client_list_meta(cl, lj->bucket, lj->prefix, c->after, PAGE, page_cb, c, &more);
    gw_client_put(o, c->node, cl, rc < 0 ? rc : 0);
    if (rc < 0) {
        page_free(c);
        c->failed = true;
        c->more = false;
        return;
    }
    c->more = more != 0;
    if (c->n > 0) {
        free(c->after);
        c->after = strdup(c->e[c->n - 1].key);
        if (!c->after) {
            c->failed = true;
            c->more = false;
        }
    }
}

static void fetch_one(void *arg, int i)
{
    struct list_job *lj = arg;
    fetch(lj, &lj->cur[i]);
}

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg);

int gw_meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                 const char *start_after, int (*cb)(const char *key, json_t *rec, void *arg),
                 void *arg)
{
    return meta_list(o, bucket, prefix, start_after, false, cb, arg);
}

int gw_meta_list_all(struct gw_objects *o, const char *bucket,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    return meta_list(o, bucket, NULL, NULL, true, cb, arg);
}

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    struct list_job lj = {o, bucket, prefix && *prefix ? prefix : NULL, NULL};
    lj.cur = calloc((size_t)o->nnodes, sizeof(*lj.cur));
    if (!lj.cur)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < o->nnodes; i++) {
        struct cursor *c = &lj.cur[i];
        c->node = i;
        c->more = o->map->nodes[i].state != PLACE_OUT &&
                  !atomic_load(&o->nodes[i].meta_out); /* not a member: holds nothing live */
        c->e = malloc(PAGE * sizeof(*c->e));
        c->after = start_after && *start_after ? strdup(start_after) : NULL;
        if (!c->e || (start_after && *start_after && !c->after))
            rc = -ENOMEM;
    }
    if (rc == 0)
        gw_fanout_run(o, o->nnodes, fetch_one, &lj);
    int failed = 0;
    for (int i = 0; i < o->nnodes; i++)
        failed += lj.cur[i].failed;
    int tolerate = o->meta_copies - o->meta_wq; /* a key is on W nodes at least */
    if (rc == 0 && failed > tolerate)
        rc = -EHOSTDOWN;
    while (rc == 0) {
        /* The smallest key at the heads; its newest record among them. */
        const char *min = NULL;
        for (int i = 0; i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos == c->n && c->more) {
                fetch(&lj, c);
                if (c->failed && ++failed > tolerate) {
                    rc = -EHOSTDOWN;
                    break;
                }
            }
            if (c->pos < c->n && (!min || strcmp(c->e[c->pos].key, min) < 0))
                min = c->e[c->pos].key;
        }
        if (rc || !min)
            break;
        char *key = strdup(min);
        json_t *best = NULL;
        for (int i = 0; key && i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos < c->n && strcmp(c->e[c->pos].key, key) == 0) {
                json_t *r = c->e[c->pos].rec;
                if (!best || gw_rec_version(r) > gw_rec_version(best)) {
                    json_decref(best);
                    best = json_incref(r);
                }
                c->pos++;
            }
        }
        if (!key)
            rc = -ENOMEM;
        else if (best && (tombstones || !gw_rec_deleted(best)) && cb(key, best, arg))
            rc = 1;
        json_decref(best);
        free(key);
    }
    for (int i = 0; i < o->nnodes; i++) {
        page_free(&lj.cur[i]);
        free(lj.cur[i].e);
        free(lj.cur[i].after);
    }
    free(lj.cur);
    return rc == 1 ? 0 : rc;
}
