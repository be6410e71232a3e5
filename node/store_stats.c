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

/* A scan that took this long is reused, though records were appended
 * since, until NODE_SCAN_SPACING times its length has passed. */
#define SCAN_SLOW_NS (20 * 1000000)

/* The chunk index's totals: txn, a read txn begun after `appended` and
 * `compacted` were read (the index then holds every record they count).
 * They are scanned again only when records were appended or compacted
 * since the last scan, and a slow scan (millions of chunks: ~15-50 ns each)
 * at most every NODE_SCAN_SPACING scans' time: every node's stats are read each
 * time the dashboard refreshes (2 s), and such a scan each time would keep
 * a core busy on a large node. */
static int chunk_totals(struct node_store *s, MDB_txn *txn, uint64_t appended, uint64_t compacted,
                        uint64_t *chunks, uint64_t *live)
{
    pthread_mutex_lock(&s->scan_mu);
    int64_t now = store_now_ns();
    bool same = s->scanned && s->scan_appended == appended && s->scan_compacted == compacted;
    bool spaced = s->scanned && s->scan_ns >= SCAN_SLOW_NS &&
                  now - s->scan_at_ns < NODE_SCAN_SPACING * s->scan_ns;
    int rc = 0;
    if (!same && !spaced) {
        uint64_t c = 0, l = 0;
        if ((rc = store_live_per_segment(s, txn, NULL, 0, NULL, &c, &l)) == 0) {
            s->scanned = true;
            s->scan_appended = appended;
            s->scan_compacted = compacted;
            s->scan_chunks = c;
            s->scan_live = l;
            s->scan_at_ns = now;
            s->scan_ns = store_now_ns() - now;
        }
    }
    *chunks = s->scan_chunks;
    *live = s->scan_live;
    pthread_mutex_unlock(&s->scan_mu);
    return rc;
}

int node_store_stats(struct node_store *s, struct node_store_stats *st)
{
    if (!s || !st)
        return -EINVAL;
    store_settle(s);
    memset(st, 0, sizeof(*st));
    st->capacity = s->opt.capacity;
    pthread_rwlock_rdlock(&s->seg_lock);
    st->segments = s->nseg;
    for (size_t i = 0; i < s->nseg; i++)
        st->segment_bytes += store_fd_size(s->seg[i].fd);
    pthread_rwlock_unlock(&s->seg_lock);
    MDB_txn *txn;
    struct meta_pending_entry *pk = NULL;
    size_t npk = 0;
    int rc = store_meta_pending_list(s, NULL, "", "", false, &pk, &npk); /* before the snapshot */
    uint64_t appended = atomic_load(&s->appended), compacted = atomic_load(&s->compacted_segments);
    if (rc == 0)
        rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc) {
        store_meta_pending_list_free(pk, npk);
        return rc;
    }
    rc = chunk_totals(s, txn, appended, compacted, &st->chunks, &st->live_bytes);
    MDB_stat ms;
    if (rc == 0 && (rc = mdb_err(mdb_stat(txn, s->meta, &ms))) == 0)
        st->metas = (uint64_t)((int64_t)ms.ms_entries + store_meta_pending_delta(s, txn, pk, npk));
    store_meta_pending_list_free(pk, npk);
    if (rc == 0 && (rc = mdb_err(mdb_stat(txn, s->repair, &ms))) == 0)
        st->repair = ms.ms_entries;
    mdb_txn_abort(txn);
    st->dead_bytes = st->segment_bytes > st->live_bytes ? st->segment_bytes - st->live_bytes : 0;
    st->compacted_segments = atomic_load(&s->compacted_segments);
    st->compacted_bytes = atomic_load(&s->compacted_bytes);
    st->direct_bytes = atomic_load(&s->direct_bytes);
    return rc;
}
