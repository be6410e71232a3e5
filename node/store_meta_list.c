/*
 * Listing metadata records: LMDB's keys in order, merged with the values
 * still in the metadata log (store_meta.c's pending maps), which are newer.
 *
 * A listing used to apply the pending values to LMDB first (one synced txn,
 * two flushes), so a LIST after every few PUTs (a mounted bucket's
 * directory reads) cost each home that txn. The pending values are copied
 * before LMDB's snapshot is taken, as a read looks at them: a value leaves
 * the maps only once LMDB has it, so none acknowledged before the listing
 * is missed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "node/meta_index.h"
#include "node/store_internal.h"

struct merge {
    const struct meta_pending_entry *pe; /* sorted by key */
    size_t npe, next;
    size_t limit;
    int listed;
    int *more;
    node_meta_cb cb;
    void *arg;
    bool stopped; /* by the limit or the callback */
};

/* One record handed out; 1: stop (the limit reached, or the callback's say). */
static int give(struct merge *m, const char *key, const void *rec, size_t len)
{
    if (m->limit && (size_t)m->listed >= m->limit) {
        if (m->more)
            *m->more = 1;
        return 1;
    }
    m->listed++;
    return m->cb(key, rec, len, m->arg) ? 1 : 0;
}

/* The pending records that sort before key (NULL: all left); 1: stop. */
static int give_pending_before(struct merge *m, const char *key)
{
    while (m->next < m->npe && (!key || strcmp(m->pe[m->next].key, key) < 0)) {
        const struct meta_pending_entry *e = &m->pe[m->next++];
        if (e->put && give(m, e->key, e->v, e->vlen))
            return 1;
    }
    return 0;
}

/* LMDB's next key: the pending ones before it, then it, unless a pending
 * value (newer) or delete replaces it. */
static int merge_cb(const char *key, const void *value, size_t len, void *arg)
{
    struct merge *m = arg;
    int stop = give_pending_before(m, key);
    if (!stop && m->next < m->npe && strcmp(m->pe[m->next].key, key) == 0) {
        const struct meta_pending_entry *e = &m->pe[m->next++];
        stop = e->put && give(m, e->key, e->v, e->vlen);
    } else if (!stop) {
        MDB_val b = store_meta_blob(&(MDB_val){len, (void *)value});
        stop = give(m, key, b.mv_data, store_meta_record_part(b.mv_data, b.mv_size));
    }
    m->stopped = stop;
    return stop;
}

int node_store_list_meta(struct node_store *s, const char *bucket, const char *prefix,
                         const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                         int *more)
{
    if (!s || !cb)
        return -EINVAL;
    if (more)
        *more = 0;
    prefix = prefix ? prefix : "";
    start_after = start_after ? start_after : "";
    int rc = store_meta_key_check(bucket, prefix);
    if (rc)
        return rc;
    struct merge m = {.limit = limit, .more = more, .cb = cb, .arg = arg};
    struct meta_pending_entry *pe = NULL;
    rc = store_meta_pending_list(s, bucket, prefix, start_after, true, &pe, &m.npe);
    m.pe = pe;
    MDB_txn *txn = NULL;
    if (rc == 0)
        rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc == 0)
        rc = meta_index_list(txn, s->meta, bucket, prefix, start_after, 0, merge_cb, &m, NULL);
    if (txn)
        mdb_txn_abort(txn);
    if (rc >= 0 && !m.stopped)
        give_pending_before(&m, NULL);
    store_meta_pending_list_free(pe, m.npe);
    return rc < 0 ? rc : m.listed;
}
