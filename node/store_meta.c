/*
 * Metadata records: versioned blobs per bucket and key, written by
 * compare-and-set in group commits: a batch of concurrent writes is decided
 * against the pending maps and LMDB, appended to the metadata log with one
 * flush (store_meta_log.c) and kept in the pending map until the map is
 * applied to LMDB in one synced txn: by the applier thread once the log's
 * half is full (the writes go on in the other half), or at a close.
 * Listings merge the maps into LMDB's keys (store_meta_list.c), the stats
 * count them in (store_meta_pending_delta).
 */
#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/meta_index.h"
#include "node/store_internal.h"

/* The bound store.h promises; meta_index.c lays the key out in the index. */
int store_meta_key_check(const char *bucket, const char *key)
{
    if (!bucket || !bucket[0] || !key)
        return -EINVAL;
    return strlen(bucket) + 1 + strlen(key) > NODE_KEY_MAX ? -ENAMETOOLONG : 0;
}

/* A metadata value (what node/meta_index.h stores as the entry's blob):
 * META_FORMAT, the version (little-endian), the blob. A value without the
 * format byte (written before versions were kept) is all blob at version 0,
 * so any versioned write replaces it. */
#define META_FORMAT 0x01
#define META_HEAD   9

static uint64_t meta_version(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    uint64_t ver = 0;
    if (v->mv_size >= META_HEAD && p[0] == META_FORMAT)
        for (int i = 8; i >= 1; i--)
            ver = ver << 8 | p[i];
    return ver;
}

MDB_val store_meta_blob(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size >= META_HEAD && p[0] == META_FORMAT)
        return (MDB_val){v->mv_size - META_HEAD, (uint8_t *)v->mv_data + META_HEAD};
    return *v;
}

/* A value written to the log and not yet to LMDB. */
struct pending {
    char *k; /* "bucket NUL key NUL" */
    size_t klen;
    uint8_t *v; /* as LMDB stores it: META_FORMAT, version, blob; NULL: deleted */
    size_t vlen;
};

static int pending_cmp(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    int c = memcmp(x->k, y->k, x->klen < y->klen ? x->klen : y->klen);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void pending_free(void *p)
{
    struct pending *e = p;
    free(e->k);
    free(e->v);
    free(e);
}

/* The pending value of k, the active half's or else the frozen one's
 * (caller: under pend_mu, or the holder of mq_busy). */
static const struct pending *pending_find(struct node_store *s, const char *k, size_t klen)
{
    struct pending key = {.k = (char *)k, .klen = klen};
    void *hit = tfind(&key, &s->pending, pending_cmp);
    if (!hit)
        hit = tfind(&key, &s->frozen, pending_cmp);
    return hit ? *(struct pending **)hit : NULL;
}

/* "bucket NUL key NUL", malloc'ed. */
static char *pending_key(const char *bucket, const char *key, size_t *klen)
{
    size_t b = strlen(bucket) + 1, k = strlen(key) + 1;
    char *p = malloc(b + k);
    if (p) {
        memcpy(p, bucket, b);
        memcpy(p + b, key, k);
    }
    *klen = b + k;
    return p;
}

/* Sets k's pending value to v (taking both; v NULL: deleted) under pend_mu. */
static int pending_set(struct node_store *s, char *k, size_t klen, uint8_t *v, size_t vlen)
{
    struct pending *e = malloc(sizeof(*e));
    if (!e) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    *e = (struct pending){k, klen, v, vlen};
    pthread_mutex_lock(&s->pend_mu);
    void *slot = tsearch(e, &s->pending, pending_cmp);
    if (slot && *(struct pending **)slot != e) { /* replaces the older pending value */
        struct pending *old = *(struct pending **)slot;
        *(struct pending **)slot = e;
        pending_free(old);
    } else if (slot) {
        s->npending++;
    }
    pthread_mutex_unlock(&s->pend_mu);
    if (!slot) {
        pending_free(e);
        return -ENOMEM;
    }
    return 0;
}

struct apply_walk {
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc; /* the first failure: the rest is skipped */
};

static void pending_put_one(const void *node, VISIT which, void *arg)
{
    struct apply_walk *w = arg;
    const struct pending *e = *(struct pending *const *)node;
    if ((which != postorder && which != leaf) || w->rc)
        return;
    const char *key = e->k + strlen(e->k) + 1;
    int rc = e->v ? meta_index_put(w->txn, w->dbi, e->k, key, e->v, e->vlen)
                  : meta_index_del(w->txn, w->dbi, e->k, key);
    w->rc = rc == -ENOENT ? 0 : rc;
}

/* The values of tree (a half of the log, `epoch`) into LMDB in one synced
 * txn that records the epoch applied. */
static int apply_tree(struct node_store *s, void *tree, uint64_t epoch)
{
    struct apply_walk w = {.dbi = s->meta};
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &w.txn));
    if (rc)
        return rc;
    twalk_r(tree, pending_put_one, &w);
    rc = store_commit_synced(s, w.txn, w.rc ? w.rc : store_meta_log_applied(w.txn, s->info, epoch));
    store_crash_point(s, "meta_applied");
    return rc;
}

/* Forgets the frozen map, which LMDB has (the holder of mq_busy). */
static void frozen_drop(struct node_store *s)
{
    pthread_mutex_lock(&s->pend_mu);
    tdestroy(s->frozen, pending_free);
    s->frozen = NULL;
    s->npending -= s->nfrozen;
    s->nfrozen = 0;
    s->frozen_done = false;
    pthread_mutex_unlock(&s->pend_mu);
}

/* Until no map is frozen: the applier put it into LMDB (0), or failed
 * (its error; it tries again). The holder of mq_busy. */
static int frozen_wait(struct node_store *s)
{
    pthread_mutex_lock(&s->pend_mu);
    while (s->frozen && !s->frozen_done && !s->frozen_rc)
        pthread_cond_wait(&s->pend_cond, &s->pend_mu);
    int rc = !s->frozen || s->frozen_done ? 0 : s->frozen_rc;
    pthread_mutex_unlock(&s->pend_mu);
    if (rc == 0 && s->frozen)
        frozen_drop(s);
    return rc;
}

/* The active half's map frozen for the applier, the writes going on in the
 * other half (the holder of mq_busy). */
static int pending_freeze(struct node_store *s)
{
    int rc = frozen_wait(s);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->pend_mu);
    s->frozen = s->pending;
    s->nfrozen = s->npending;
    s->frozen_epoch = s->mlog_epoch;
    s->frozen_rc = 0;
    s->pending = NULL;
    pthread_cond_broadcast(&s->pend_cond);
    pthread_mutex_unlock(&s->pend_mu);
    store_meta_log_switch(s);
    return 0;
}

/* Applies every pending value to LMDB, the frozen map's first, on the
 * caller's path; the active half then restarts (the holder of mq_busy, or
 * the closer once the applier stopped). */
static int pending_apply(struct node_store *s)
{
    int rc = 0;
    if (s->applier_on)
        rc = frozen_wait(s);
    else if (s->frozen && !s->frozen_done) /* a close: the applier stopped */
        rc = apply_tree(s, s->frozen, s->frozen_epoch);
    if (rc)
        return rc;
    if (s->frozen)
        frozen_drop(s);
    if (!s->npending)
        return 0;
    if ((rc = apply_tree(s, s->pending, s->mlog_epoch)))
        return rc;
    pthread_mutex_lock(&s->pend_mu);
    tdestroy(s->pending, pending_free);
    s->pending = NULL;
    s->npending = 0;
    pthread_mutex_unlock(&s->pend_mu);
    store_meta_log_restart(s);
    return 0;
}

/* The applier thread: each frozen map into LMDB, off the writers' path. A
 * failure is logged and tried again a second later; a writer that needs the
 * half meanwhile fails with it (frozen_wait). */
static void *applier_main(void *arg)
{
    struct node_store *s = arg;
    pthread_setname_np(pthread_self(), "meta-apply");
    pthread_mutex_lock(&s->pend_mu);
    while (!s->applier_stop) {
        if (!s->frozen || s->frozen_done) {
            pthread_cond_wait(&s->pend_cond, &s->pend_mu);
            continue;
        }
        void *tree = s->frozen; /* no one changes it until frozen_done */
        uint64_t epoch = s->frozen_epoch;
        pthread_mutex_unlock(&s->pend_mu);
        int rc = apply_tree(s, tree, epoch);
        pthread_mutex_lock(&s->pend_mu);
        s->frozen_done = rc == 0;
        s->frozen_rc = rc;
        pthread_cond_broadcast(&s->pend_cond);
        if (rc) {
            inec_log(INEC_LOG_WARN, "node", "metadata log: applying to the index: %s",
                     node_store_strerror(rc));
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_sec++;
            pthread_cond_timedwait(&s->pend_cond, &s->pend_mu, &t);
        }
    }
    pthread_mutex_unlock(&s->pend_mu);
    return NULL;
}

int store_meta_start(struct node_store *s)
{
    int rc = -pthread_create(&s->applier, NULL, applier_main, s);
    s->applier_on = rc == 0;
    return rc;
}

/* In the metadata writer's turn (mq_busy), as a batch would be. */
int store_meta_flush(struct node_store *s)
{
    pthread_mutex_lock(&s->mq_mu);
    while (s->mq_busy)
        pthread_cond_wait(&s->mq_cond, &s->mq_mu);
    s->mq_busy = true;
    pthread_mutex_unlock(&s->mq_mu);
    int rc = pending_apply(s);
    pthread_mutex_lock(&s->mq_mu);
    s->mq_busy = false;
    pthread_cond_broadcast(&s->mq_cond);
    pthread_mutex_unlock(&s->mq_mu);
    return rc;
}

void store_meta_close(struct node_store *s)
{
    if (s->applier_on) {
        pthread_mutex_lock(&s->pend_mu);
        s->applier_stop = true;
        pthread_cond_broadcast(&s->pend_cond);
        pthread_mutex_unlock(&s->pend_mu);
        pthread_join(s->applier, NULL);
        s->applier_on = false;
    }
    if (s->env && s->npending) {
        int rc = pending_apply(s);
        if (rc) /* still in the log: the next open applies it */
            inec_log(INEC_LOG_WARN, "node", "metadata not applied at close: %s",
                     node_store_strerror(rc));
    }
    tdestroy(s->frozen, pending_free);
    tdestroy(s->pending, pending_free);
    s->frozen = s->pending = NULL;
    s->npending = s->nfrozen = 0;
    if (s->mlog_fd >= 0)
        close(s->mlog_fd);
    s->mlog_fd = -1;
}

int node_store_put_meta(struct node_store *s, const char *bucket, const char *key, uint64_t version,
                        unsigned flags, const void *blob, size_t len, uint64_t *stored)
{
    return node_store_put_meta_old(s, bucket, key, version, flags, blob, len, stored, NULL, NULL);
}

/* A metadata write waiting for its group commit (see node_store_put_meta_old). */
struct meta_req {
    const char *bucket, *key;
    uint64_t version;
    unsigned flags;
    const void *blob;
    size_t len;
    uint64_t stored;
    bool want_old;
    bool del; /* a delete: only if the blob is still blob[len] (blob NULL: any) */
    char *k;  /* "bucket NUL key NUL" (pending_key); the pending map takes it */
    size_t klen;
    void *old; /* want_old: the replaced blob (malloc'ed), once written */
    size_t old_len;
    int rc;
    bool done, wrote;
    struct meta_req *next;
};

size_t store_meta_record_part(const void *blob, size_t len)
{
    const void *nul = len ? memchr(blob, 0, len) : NULL;
    return nul ? (size_t)((const char *)nul - (const char *)blob) : len;
}

/* The same record with another tail: the tail is replaced (a repair of it),
 * the version's record is not. */
static bool same_record(const MDB_val *have, const void *blob, size_t len)
{
    size_t a = store_meta_record_part(have->mv_data, have->mv_size),
           b = store_meta_record_part(blob, len);
    return a == b && a < len && memcmp(have->mv_data, blob, a) == 0;
}

/* The batch's records for the log, growing. */
struct log_buf {
    uint8_t *p;
    size_t len, cap;
};

/* r's new value v (taken; NULL: deleted) into the batch's log records and
 * the pending map (which takes r->k). */
static int meta_log_one(struct node_store *s, struct meta_req *r, uint8_t *v, size_t vlen,
                        struct log_buf *lb)
{
    size_t rec = META_LOG_HDR + r->klen + vlen;
    if (lb->len + rec > lb->cap) {
        size_t cap = lb->cap ? lb->cap : 4096;
        while (cap < lb->len + rec)
            cap *= 2;
        uint8_t *np = realloc(lb->p, cap);
        if (!np) {
            free(v);
            return -ENOMEM;
        }
        lb->p = np;
        lb->cap = cap;
    }
    size_t at = lb->len;
    lb->len += store_meta_log_encode(lb->p + at, s->mlog_epoch, r->k, r->klen, v, vlen);
    int rc = pending_set(s, r->k, r->klen, v, vlen);
    r->k = NULL; /* the pending map's now */
    if (rc)
        lb->len = at;
    return rc;
}

/* r's compare-and-set against the pending map, else LMDB (txn, a read txn):
 * 0 written (into the pending map and log), 1 nothing to write (a retry, or
 * a check that would keep it), or -errno. */
static int meta_put_in(struct node_store *s, MDB_txn *txn, struct meta_req *r, struct log_buf *lb)
{
    MDB_val cur, ob = {0, NULL};
    const struct pending *p = pending_find(s, r->k, r->klen);
    int rc = p ? (p->v ? (cur = (MDB_val){p->vlen, p->v}, 0) : -ENOENT)
               : meta_index_get(txn, s->meta, r->bucket, r->key, &cur);
    if (r->del) {
        ob = rc ? ob : store_meta_blob(&cur); /* the caller read the record, not its version */
        if (rc == 0 && r->blob && (ob.mv_size != r->len || memcmp(ob.mv_data, r->blob, r->len)))
            rc = -ESTALE; /* changed since the caller read it: kept */
        return rc ? rc : meta_log_one(s, r, NULL, 0, lb);
    }
    if (rc == 0) {
        uint64_t have = meta_version(&cur);
        ob = store_meta_blob(&cur);
        r->stored = have;
        if (have > r->version)
            rc = -ESTALE;
        else if (have == r->version && !(r->flags & NODE_META_CHECK) && ob.mv_size == r->len &&
                 (r->len == 0 || memcmp(ob.mv_data, r->blob, r->len) == 0))
            rc = 1; /* the same record again: done, nothing to write */
        else if (have == r->version)
            rc = same_record(&ob, r->blob, r->len) ? 0 : -EEXIST;
    } else if (rc == -ENOENT) {
        rc = 0;
    }
    if (rc || (r->flags & NODE_META_CHECK))
        return rc ? rc : 1;
    size_t vlen = META_HEAD + r->len;
    /* Copied before the pending value is replaced (and freed). */
    void *prev = r->want_old && ob.mv_data ? malloc(ob.mv_size ? ob.mv_size : 1) : NULL;
    uint8_t *v = malloc(vlen);
    if (!v || (r->want_old && ob.mv_data && !prev)) {
        free(v);
        free(prev);
        return -ENOMEM;
    }
    if (prev)
        memcpy(prev, ob.mv_data, ob.mv_size);
    v[0] = META_FORMAT;
    for (int i = 1; i <= 8; i++)
        v[i] = (uint8_t)(r->version >> (8 * (i - 1)));
    if (r->len)
        memcpy(v + META_HEAD, r->blob, r->len);
    if ((rc = meta_log_one(s, r, v, vlen, lb))) {
        free(prev);
        return rc;
    }
    r->old = prev;
    r->old_len = ob.mv_size;
    return 0;
}

/* Before a batch: a frozen map LMDB has is dropped, and a half that may
 * not take the batch's records is frozen (pending_freeze). */
static void log_make_room(struct node_store *s, const struct meta_req *batch)
{
    pthread_mutex_lock(&s->pend_mu);
    bool applied = s->frozen && s->frozen_done;
    pthread_mutex_unlock(&s->pend_mu);
    if (applied)
        frozen_drop(s);
    size_t need = 0; /* at most */
    for (const struct meta_req *r = batch; r; r = r->next)
        need += META_LOG_HDR + r->klen + (r->del ? 0 : META_HEAD + r->len);
    /* A failure here shows again where the batch needs the room. */
    if (s->mlog_off + need > META_LOG_BYTES && need <= META_LOG_BYTES && s->applier_on)
        (void)pending_freeze(s);
}

/* Every request of the batch decided in turn, then the written ones logged
 * with one flush. When the log has no room for them even in a fresh half
 * (or fails), every pending value, this batch's with them, is applied to
 * LMDB instead. */
static void meta_batch(struct node_store *s, struct meta_req *batch)
{
    log_make_room(s, batch);
    MDB_txn *txn;
    struct log_buf lb = {0};
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn)), wrote = 0;
    for (struct meta_req *r = batch; r; r = r->next) {
        r->rc = rc ? rc : meta_put_in(s, txn, r, &lb);
        r->wrote = r->rc == 0;
        wrote += r->wrote;
        if (r->rc == 1)
            r->rc = 0;
    }
    if (rc)
        return;
    mdb_txn_abort(txn);
    if (wrote) {
        rc = store_meta_log_append(s, lb.p, lb.len);
        if (rc && rc != -ENOSPC)
            inec_log(INEC_LOG_WARN, "node", "metadata log: %s; applying to the index instead",
                     node_store_strerror(rc));
        else if (rc == 0)
            store_crash_point(s, "meta_logged");
        if (rc)
            rc = pending_apply(s);
    }
    free(lb.p);
    for (struct meta_req *r = batch; rc && r; r = r->next)
        if (r->wrote) {
            r->rc = rc;
            r->wrote = false;
        }
}

/* Group commit of metadata writes and deletes: a writer queues its request;
 * one that finds no batch running runs every request queued so far as one
 * batch (one log append, one flush) and wakes their writers, so concurrent
 * writes share a flush. r's result. */
static int meta_submit(struct node_store *s, struct meta_req *r)
{
    if (!(r->k = pending_key(r->bucket, r->key, &r->klen)))
        return -ENOMEM;
    pthread_mutex_lock(&s->mq_mu);
    if (s->mq_tail)
        s->mq_tail->next = r;
    else
        s->mq_head = r;
    s->mq_tail = r;
    while (!r->done) {
        if (s->mq_busy) {
            pthread_cond_wait(&s->mq_cond, &s->mq_mu);
            continue;
        }
        struct meta_req *batch = s->mq_head;
        s->mq_head = s->mq_tail = NULL;
        s->mq_busy = true;
        pthread_mutex_unlock(&s->mq_mu);
        meta_batch(s, batch);
        pthread_mutex_lock(&s->mq_mu);
        for (struct meta_req *q = batch, *next; q; q = next) {
            next = q->next; /* q belongs to its writer once done */
            q->done = true;
        }
        s->mq_busy = false;
        pthread_cond_broadcast(&s->mq_cond);
    }
    pthread_mutex_unlock(&s->mq_mu);
    free(r->k);
    return r->rc;
}

int node_store_put_meta_old(struct node_store *s, const char *bucket, const char *key,
                            uint64_t version, unsigned flags, const void *blob, size_t len,
                            uint64_t *stored, void **old, size_t *old_len)
{
    if (stored)
        *stored = 0;
    if (old)
        *old = NULL;
    if (old_len)
        *old_len = 0;
    if (!s || (!blob && len) || version == 0 || (flags & ~NODE_META_CHECK))
        return -EINVAL;
    if (len > NODE_META_MAX)
        return -EMSGSIZE;
    int rc = store_meta_key_check(bucket, key);
    if (rc)
        return rc;
    struct meta_req r = {.bucket = bucket,
                         .key = key,
                         .version = version,
                         .flags = flags,
                         .blob = blob,
                         .len = len,
                         .want_old = old != NULL};
    rc = meta_submit(s, &r);
    if (stored)
        *stored = r.stored;
    if (rc == 0 && r.old) {
        *old = r.old;
        *old_len = r.old_len;
    } else {
        free(r.old);
    }
    return rc;
}

int node_store_get_meta(struct node_store *s, const char *bucket, const char *key, void **blob,
                        size_t *len)
{
    if (!s || !blob || !len)
        return -EINVAL;
    *blob = NULL;
    int rc = store_meta_key_check(bucket, key);
    if (rc)
        return rc;
    /* The pending map first, LMDB's snapshot only after: a value leaves the
     * map once LMDB has it, so a snapshot taken before the map was looked at
     * could miss a value applied in between (and answer an older one). */
    size_t klen;
    char *k = pending_key(bucket, key, &klen);
    if (!k)
        return -ENOMEM;
    MDB_val mv;
    pthread_mutex_lock(&s->pend_mu);
    const struct pending *p = pending_find(s, k, klen);
    rc = !p ? 1 : !p->v ? -ENOENT : 0; /* 1: not pending (p is only valid under pend_mu) */
    if (rc == 0) {
        mv = store_meta_blob(&(MDB_val){p->vlen, p->v});
        if ((*blob = malloc(mv.mv_size ? mv.mv_size : 1))) {
            memcpy(*blob, mv.mv_data, mv.mv_size);
            *len = mv.mv_size;
        } else {
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&s->pend_mu);
    free(k);
    if (rc != 1)
        return rc;
    MDB_txn *txn;
    if ((rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))))
        return rc;
    rc = meta_index_get(txn, s->meta, bucket, key, &mv);
    if (rc == 0) {
        mv = store_meta_blob(&mv);
        *blob = malloc(mv.mv_size ? mv.mv_size : 1);
        if (*blob) {
            memcpy(*blob, mv.mv_data, mv.mv_size);
            *len = mv.mv_size;
        } else {
            rc = -ENOMEM;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

int node_store_delete_meta(struct node_store *s, const char *bucket, const char *key)
{
    return node_store_delete_meta_if(s, bucket, key, NULL, 0);
}

int node_store_delete_meta_if(struct node_store *s, const char *bucket, const char *key,
                              const void *expect, size_t len)
{
    if (!s || (!expect && len))
        return -EINVAL;
    int rc = store_meta_key_check(bucket, key);
    if (rc)
        return rc;
    struct meta_req r = {.bucket = bucket, .key = key, .blob = expect, .len = len, .del = true};
    return meta_submit(s, &r);
}

/* One pending value for store_meta_pending_list (c: its filter, its output). */
struct pending_collect {
    const char *bucket, *prefix, *after; /* bucket NULL: every bucket's */
    size_t blen, plen;                   /* blen: with the bucket's NUL */
    bool records;                        /* the record parts copied too */
    void *newer;                         /* the active tree, while the frozen one is walked */
    struct meta_pending_entry *e;
    size_t n, cap;
    int rc;
};

static void collect_one(const void *node, VISIT which, void *arg)
{
    struct pending_collect *c = arg;
    const struct pending *p = *(struct pending *const *)node;
    if ((which != postorder && which != leaf) || c->rc ||
        (c->bucket && (p->klen < c->blen || memcmp(p->k, c->bucket, c->blen) != 0)))
        return;
    const char *key = p->k + strlen(p->k) + 1;
    if (strncmp(key, c->prefix, c->plen) != 0 || (c->after[0] && strcmp(key, c->after) <= 0) ||
        (c->newer && tfind(p, &c->newer, pending_cmp)))
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct meta_pending_entry *e = realloc(c->e, cap * sizeof(*e));
        if (!e) {
            c->rc = -ENOMEM;
            return;
        }
        c->e = e;
        c->cap = cap;
    }
    struct meta_pending_entry *e = &c->e[c->n];
    *e = (struct meta_pending_entry){.k = malloc(p->klen), .put = p->v != NULL};
    if (e->k) {
        memcpy(e->k, p->k, p->klen);
        e->key = e->k + (key - p->k);
    }
    if (e->k && p->v && c->records) { /* the record part: what a listing hands out */
        MDB_val b = store_meta_blob(&(MDB_val){p->vlen, p->v});
        e->vlen = store_meta_record_part(b.mv_data, b.mv_size);
        if ((e->v = malloc(e->vlen ? e->vlen : 1)))
            memcpy(e->v, b.mv_data, e->vlen);
    }
    if (!e->k || (p->v && c->records && !e->v)) {
        free(e->k);
        free(e->v);
        c->rc = -ENOMEM;
        return;
    }
    c->n++;
}

static int entry_key_cmp(const void *a, const void *b)
{
    return strcmp(((const struct meta_pending_entry *)a)->key,
                  ((const struct meta_pending_entry *)b)->key);
}

int store_meta_pending_list(struct node_store *s, const char *bucket, const char *prefix,
                            const char *after, bool records, struct meta_pending_entry **out,
                            size_t *n)
{
    struct pending_collect c = {.bucket = bucket,
                                .prefix = prefix,
                                .after = after,
                                .blen = bucket ? strlen(bucket) + 1 : 0,
                                .plen = strlen(prefix),
                                .records = records};
    pthread_mutex_lock(&s->pend_mu);
    twalk_r(s->pending, collect_one, &c);
    c.newer = s->pending;
    twalk_r(s->frozen, collect_one, &c);
    pthread_mutex_unlock(&s->pend_mu);
    if (c.rc) {
        store_meta_pending_list_free(c.e, c.n);
        return c.rc;
    }
    if (bucket && c.n)
        qsort(c.e, c.n, sizeof(*c.e), entry_key_cmp);
    *out = c.e;
    *n = c.n;
    return 0;
}

void store_meta_pending_list_free(struct meta_pending_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].k);
        free(e[i].v);
    }
    free(e);
}

int64_t store_meta_pending_delta(struct node_store *s, MDB_txn *txn,
                                 const struct meta_pending_entry *e, size_t n)
{
    int64_t delta = 0;
    for (size_t i = 0; i < n; i++) {
        MDB_val v;
        bool has = meta_index_get(txn, s->meta, e[i].k, e[i].key, &v) == 0;
        delta += e[i].put && !has ? 1 : !e[i].put && has ? -1 : 0;
    }
    return delta;
}
