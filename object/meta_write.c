/*
 * Metadata records, writes.
 *
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
 *               nothing sent anywhere that can be read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

struct meta_round {
    struct gw_objects *o;
    char *bucket, *key, *blob;
    size_t len;
    char *hblob[PLACE_MAX_CHUNKS]; /* an inline record's: home i's blob, with shard i */
    size_t hlen[PLACE_MAX_CHUNKS];
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
    struct gw_round_calls calls;       /* those start_one sent from the round's thread */
    json_t *old[PLACE_MAX_CHUNKS];     /* NODE_META_OLD: the record home i replaced */
};

static void round_put(struct meta_round *m)
{
    pthread_mutex_lock(&m->lock);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&m->lock);
    if (!last)
        return;
    /* Every home answered: one that took no part of a round that landed
     * somewhere still lacks the record (a prepare holds none to give). */
    bool landed = m->held > 0 && !(m->flags & NODE_META_CHECK), lacking = false;
    for (int i = 0; landed && i < m->n; i++)
        lacking |= m->rc[i] != 0 && m->rc[i] != -ESTALE && m->rc[i] != -EEXIST;
    if (lacking)
        gw_meta_heal_note(m->o, m->bucket, m->key);
    for (int i = 0; i < m->n; i++) {
        json_decref(m->old[i]);
        free(m->hblob[i]);
    }
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m->bucket);
    free(m->key);
    free(m->blob);
    free(m);
}

/* Home i's call ended with rc; c (may be NULL) was its client, ob (taken)
 * the record it replaced. The round's reference of the call is the
 * caller's to drop. */
static void home_ended(struct meta_round *m, int i, struct node_client *c, int rc, bool sent,
                       uint64_t stored, void *ob, size_t olen)
{
    if (!m->skip[i])
        gw_client_put(m->o, m->nodes[i], c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    json_t *old = ob ? gw_rec_load(ob, olen) : NULL;
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
}

/* Home i's whole call, on a fan-out thread. */
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
                                      m->hblob[i] ? m->hblob[i] : m->blob,
                                      m->hblob[i] ? m->hlen[i] : m->len, &stored,
                                      m->flags & NODE_META_OLD ? &ob : NULL, &olen);
    }
    home_ended(m, i, c, rc, sent, stored, ob, olen);
    round_put(m);
}

/* The end of home i's call, which the round's thread started (start_one). */
static void end_one(void *arg, int i)
{
    struct meta_round *m = arg;
    uint64_t stored = 0;
    void *ob = NULL;
    size_t olen = 0;
    int rc = node_client_put_meta_end(&m->calls.call[i], &stored,
                                      m->flags & NODE_META_OLD ? &ob : NULL, &olen);
    home_ended(m, i, m->calls.client[i], rc, true, stored, ob, olen);
    round_put(m);
}

/* Sends home i its record from the round's own thread, over an idle client
 * (m->calls); false when that cannot be done without blocking (no idle or
 * connected client): the call is then the fan-out's. */
static bool start_one(struct meta_round *m, int i)
{
    struct gw_objects *o = m->o;
    int node = m->nodes[i];
    if (m->skip[i] || gw_node_is_down(o, node)) {
        home_ended(m, i, NULL, -EHOSTDOWN, false, 0, NULL, 0);
        round_put(m);
        return true;
    }
    struct node_client *c;
    if (gw_client_idle(o, node, &c))
        return false;
    int rc = node_client_put_meta_start(c, m->bucket, m->key, m->version, m->flags,
                                        m->hblob[i] ? m->hblob[i] : m->blob,
                                        m->hblob[i] ? m->hlen[i] : m->len, &m->calls.call[i]);
    if (rc == -ENOTCONN) {
        node_client_close(c); /* write_one dials a new one */
        return false;
    }
    if (rc) {
        home_ended(m, i, c, rc, false, 0, NULL, 0);
        round_put(m);
        return true;
    }
    m->calls.client[i] = c;
    m->calls.out[i] = true;
    return true;
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
        *err = gw_meta_homes_excl(o, bucket, key, excl, m->nodes);
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
    m->calls.end = end_one;
    m->calls.arg = m;
    return m;
}

int gw_meta_inline_quorum(const struct gw_objects *o)
{
    return o->meta_wq < o->meta_copies ? o->meta_wq + 1 : o->meta_wq;
}

/* Fewer than `need` homes took m's record so far, and `need` still can (lock held). */
static bool round_waits(const struct meta_round *m, int need)
{
    return m->held < need && m->done < m->n && m->held + (m->n - m->done) >= need;
}

/* Sends m's record (blob, version, flags set) to every home not skipped and
 * waits for W of them (W + 1 for an inline record), or until W cannot be
 * reached; *r is the count then, homes still out counted as may-have-landed.
 * olds (may be NULL) gets the records replaced at the homes that answered.
 * m is the caller's no more. */
static void round_run(struct meta_round *m, struct gw_meta_round *r, json_t *olds, int *rcs)
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
    /* The requests leave from this thread, which then takes the answers as
     * they come: a call costs no fan-out thread's wake-ups, there and back.
     * A home that needs a new connection goes to the fan-out, and so do the
     * calls still out once the round has its answers (or it has one on the
     * fan-out to wait for). */
    bool fan = false;
    for (int i = 0; i < m->n; i++)
        if (!start_one(m, i)) {
            fan = true;
            if (gw_fanout_post(o->fan, write_one, m, i))
                write_one(m, i);
        }
    if (fan)
        gw_round_calls_hand_over(o->fan, &m->calls, m->n);
    memset(r, 0, sizeof(*r));
    /* An inline record's round waits for its spare home while that many can
     * still take it, and settles for W only when they cannot. */
    int spare = m->hblob[0] ? gw_meta_inline_quorum(o) : o->meta_wq;
    for (;;) {
        struct node_call *out[PLACE_MAX_CHUNKS];
        int nout = gw_round_calls_reap(&m->calls, m->n, out);
        pthread_mutex_lock(&m->lock);
        bool wait = round_waits(m, spare) || round_waits(m, o->meta_wq);
        pthread_mutex_unlock(&m->lock);
        if (!wait || !nout)
            break;
        node_calls_wait(out, nout, -1);
    }
    gw_round_calls_hand_over(o->fan, &m->calls, m->n);
    pthread_mutex_lock(&m->lock);
    while (round_waits(m, spare) || round_waits(m, o->meta_wq))
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

static int failed(const struct gw_meta_round *r)
{
    return r->err && !gw_transport_error(r->err) ? r->err : -EHOSTDOWN;
}

/* An inline record goes to home i with shard i of its body (inline.c): a
 * whole round leaves every home that takes it holding a distinct shard. A
 * record without its body (read from a listing) cannot be written: that
 * would leave homes without shards. */
static int inline_blobs(struct meta_round *m, const json_t *rec, int k, int mm, size_t len)
{
    size_t blen, S = gw_inline_shard_len(len, k);
    const uint8_t *body = gw_rec_inline_body(rec, &blen);
    if (!body || blen != len || k + mm != m->n)
        return -EINVAL;
    uint8_t *shards;
    int rc = gw_inline_encode(k, mm, body, len, &shards);
    for (int i = 0; i < m->n && rc == 0; i++)
        if (!(m->hblob[i] = gw_inline_blob(m->blob, i, shards + (size_t)i * S, S, &m->hlen[i])))
            rc = -ENOMEM;
    free(shards);
    return rc;
}

/* One round of rec at its version to the key's homes (not excl, not skip). */
static int round_of(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                    unsigned flags, const bool *excl, const bool *skip, struct gw_meta_round *r,
                    json_t *olds, int *rcs)
{
    int rc;
    struct meta_round *m = round_new(o, bucket, key, excl, &rc);
    if (!m)
        return rc;
    m->version = gw_rec_version(rec);
    m->flags = flags;
    if (!(flags & NODE_META_CHECK)) {
        if (!(m->blob = gw_rec_dump(rec))) {
            m->refs = 1;
            round_put(m);
            return -ENOMEM;
        }
        m->len = strlen(m->blob);
        int k, mm;
        size_t len;
        if (gw_rec_inline(rec, &k, &mm, &len) && (rc = inline_blobs(m, rec, k, mm, len))) {
            m->refs = 1;
            round_put(m);
            return rc;
        }
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
    struct gw_meta_round r;
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
    struct gw_meta_round r;
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
int gw_meta_put_as_is(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                      const bool *excl, struct gw_meta_round *r)
{
    return round_of(o, bucket, key, rec, 0, excl, NULL, r, NULL, NULL);
}

int gw_meta_copy(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                 const bool *excl)
{
    struct gw_meta_round r;
    int rc = gw_meta_put_as_is(o, bucket, key, rec, excl, &r);
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
    int rc = gw_meta_homes(o, bucket, key, j.nodes);
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
