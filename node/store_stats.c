/* What the store holds: live bytes per segment, and the totals of node_store_stats. */
#include <errno.h>
#include <string.h>

#include "node/store_internal.h"

/* Sums live record bytes per segment id into live[] (indexed like ids[]). */
int store_live_per_segment(struct node_store *s, MDB_txn *txn, const uint32_t *ids, size_t n,
                           uint64_t *live, uint64_t *chunks, uint64_t *total)
{
    MDB_cursor *cur;
    int rc = mdb_err(mdb_cursor_open(txn, s->chunks, &cur));
    if (rc)
        return rc;
    MDB_val key, val;
    for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        struct loc l;
        memcpy(&l, val.mv_data, sizeof(l));
        uint64_t b = node_record_end(l.off, l.len, (uint8_t)l.flags) - l.off;
        if (chunks)
            (*chunks)++;
        if (total)
            *total += b;
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ids[mid] < l.seg)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && ids[lo] == l.seg)
            live[lo] += b;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

int node_store_stats(struct node_store *s, struct node_store_stats *st)
{
    if (!s || !st)
        return -EINVAL;
    memset(st, 0, sizeof(*st));
    st->capacity = s->opt.capacity;
    pthread_rwlock_rdlock(&s->seg_lock);
    st->segments = s->nseg;
    for (size_t i = 0; i < s->nseg; i++)
        st->segment_bytes += store_fd_size(s->seg[i].fd);
    pthread_rwlock_unlock(&s->seg_lock);
    MDB_txn *txn;
    int rc = s->npending ? store_meta_flush(s) : 0; /* metas counts LMDB's */
    if (rc == 0)
        rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = store_live_per_segment(s, txn, NULL, 0, NULL, &st->chunks, &st->live_bytes);
    MDB_stat ms;
    if (rc == 0 && (rc = mdb_err(mdb_stat(txn, s->meta, &ms))) == 0)
        st->metas = ms.ms_entries;
    if (rc == 0 && (rc = mdb_err(mdb_stat(txn, s->repair, &ms))) == 0)
        st->repair = ms.ms_entries;
    mdb_txn_abort(txn);
    st->dead_bytes = st->segment_bytes > st->live_bytes ? st->segment_bytes - st->live_bytes : 0;
    st->compacted_segments = atomic_load(&s->compacted_segments);
    st->compacted_bytes = atomic_load(&s->compacted_bytes);
    st->direct_bytes = atomic_load(&s->direct_bytes);
    return rc;
}
