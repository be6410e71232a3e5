/*
 * Metadata records: versioned blobs per bucket and key, written by
 * compare-and-set in synced LMDB txns, concurrent writes sharing one sync.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/meta_index.h"
#include "node/store_internal.h"

/* The bound store.h promises; meta_index.c lays the key out in the index. */
static int meta_key_check(const char *bucket, const char *key)
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

static MDB_val meta_blob(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size >= META_HEAD && p[0] == META_FORMAT)
        return (MDB_val){v->mv_size - META_HEAD, (uint8_t *)v->mv_data + META_HEAD};
    return *v;
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
    void *old; /* want_old: the replaced blob (malloc'ed), once written */
    size_t old_len;
    int rc;
    bool done, wrote;
    struct meta_req *next;
};

/* The record part of a blob: up to its first NUL (after it, the gateway may
 * keep a binary tail of its own, different on each node). */
static size_t record_part(const void *blob, size_t len)
{
    const void *nul = len ? memchr(blob, 0, len) : NULL;
    return nul ? (size_t)((const char *)nul - (const char *)blob) : len;
}

/* The same record with another tail: the tail is replaced (a repair of it),
 * the version's record is not. */
static bool same_record(const MDB_val *have, const void *blob, size_t len)
{
    size_t a = record_part(have->mv_data, have->mv_size), b = record_part(blob, len);
    return a == b && a < len && memcmp(have->mv_data, blob, a) == 0;
}

/* r's compare-and-set inside txn (a child of the batch's): 0 written, 1
 * nothing to write (a retry, or a check that would keep it), or -errno. */
static int meta_put_in(struct node_store *s, MDB_txn *txn, struct meta_req *r)
{
    MDB_val cur, ob = {0, NULL};
    int rc = meta_index_get(txn, s->meta, r->bucket, r->key, &cur);
    if (rc == 0) {
        uint64_t have = meta_version(&cur);
        ob = meta_blob(&cur);
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
    /* Copied before the put: LMDB's pointer into the old page dies with it. */
    void *prev = r->want_old && ob.mv_data ? malloc(ob.mv_size ? ob.mv_size : 1) : NULL;
    uint8_t *v = malloc(META_HEAD + r->len);
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
    rc = meta_index_put(txn, s->meta, r->bucket, r->key, v, META_HEAD + r->len);
    free(v);
    if (rc) {
        free(prev);
        return rc;
    }
    r->old = prev;
    r->old_len = ob.mv_size;
    return 0;
}

/* Every request of the batch in one LMDB txn, each in a child txn of its own
 * (a failed one leaves the others), then one commit and one sync. */
static void meta_batch(struct node_store *s, struct meta_req *batch)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn)), wrote = 0;
    for (struct meta_req *r = batch; r; r = r->next) {
        MDB_txn *child = NULL;
        r->rc = rc ? rc : mdb_err(mdb_txn_begin(s->env, txn, 0, &child));
        if (r->rc == 0)
            r->rc = meta_put_in(s, child, r);
        if (r->rc == 0)
            r->rc = mdb_err(mdb_txn_commit(child));
        else if (child)
            mdb_txn_abort(child);
        r->wrote = r->rc == 0;
        wrote += r->wrote;
        if (r->rc == 1)
            r->rc = 0;
    }
    if (rc)
        return;
    if (!wrote) {
        mdb_txn_abort(txn);
        return;
    }
    rc = store_commit_synced(s, txn, 0);
    for (struct meta_req *r = batch; rc && r; r = r->next)
        if (r->wrote) {
            r->rc = rc;
            r->wrote = false;
        }
}

/* Group commit of metadata writes: a writer queues its request; one that
 * finds no batch running runs every request queued so far as one batch
 * (one txn, one sync) and wakes their writers, so concurrent writes share a
 * sync instead of queueing for LMDB's write lock one sync each. */
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
    int rc = meta_key_check(bucket, key);
    if (rc)
        return rc;
    struct meta_req r = {.bucket = bucket,
                         .key = key,
                         .version = version,
                         .flags = flags,
                         .blob = blob,
                         .len = len,
                         .want_old = old != NULL};
    pthread_mutex_lock(&s->mq_mu);
    if (s->mq_tail)
        s->mq_tail->next = &r;
    else
        s->mq_head = &r;
    s->mq_tail = &r;
    while (!r.done) {
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
    if (stored)
        *stored = r.stored;
    if (r.rc == 0 && r.old) {
        *old = r.old;
        *old_len = r.old_len;
    } else {
        free(r.old);
    }
    return r.rc;
}

/* A read transaction on the metadata index, once bucket and key are valid. */
static int meta_read_begin(struct node_store *s, const char *bucket, const char *key, MDB_txn **txn)
{
    int rc = meta_key_check(bucket, key);
    return rc ? rc : mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, txn));
}

int node_store_get_meta(struct node_store *s, const char *bucket, const char *key, void **blob,
                        size_t *len)
{
    if (!s || !blob || !len)
        return -EINVAL;
    *blob = NULL;
    MDB_txn *txn;
    int rc = meta_read_begin(s, bucket, key, &txn);
    if (rc)
        return rc;
    MDB_val mv;
    rc = meta_index_get(txn, s->meta, bucket, key, &mv);
    if (rc == 0) {
        mv = meta_blob(&mv);
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
    if (!s)
        return -EINVAL;
    int rc = meta_key_check(bucket, key);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    MDB_val cur;
    if (expect && (rc = meta_index_get(txn, s->meta, bucket, key, &cur)) == 0) {
        MDB_val b = meta_blob(&cur); /* the caller read the record, not its version */
        if (b.mv_size != len || memcmp(b.mv_data, expect, len) != 0)
            rc = -ESTALE; /* changed since the caller read it: kept */
    }
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return store_commit_synced(s, txn, meta_index_del(txn, s->meta, bucket, key));
}

/* Listings hand out the blob, never the version in front of it. */
struct unversioned {
    node_meta_cb cb;
    void *arg;
};

static int unversioned_cb(const char *key, const void *value, size_t len, void *arg)
{
    struct unversioned *u = arg;
    MDB_val b = meta_blob(&(MDB_val){len, (void *)value});
    return u->cb(key, b.mv_data, record_part(b.mv_data, b.mv_size), u->arg);
}

int node_store_list_meta(struct node_store *s, const char *bucket, const char *prefix,
                         const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                         int *more)
{
    if (!s || !cb)
        return -EINVAL;
    if (more)
        *more = 0;
    MDB_txn *txn;
    int rc = meta_read_begin(s, bucket, prefix ? prefix : "", &txn);
    if (rc)
        return rc;
    struct unversioned u = {cb, arg};
    rc =
        meta_index_list(txn, s->meta, bucket, prefix, start_after, limit, unversioned_cb, &u, more);
    mdb_txn_abort(txn);
    return rc;
}
