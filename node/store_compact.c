/*
 * Compaction: the live records of segments with enough dead bytes copied
 * into fresh segments, the index switched, the old segments removed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/store_internal.h"

struct live {
    uint8_t key[KEY_BYTES];
    struct loc old, new;
    int copied;
};

/* Live records of the segments in victims[nv] (sorted), in index order. */
static int collect_live(struct node_store *s, const uint32_t *victims, size_t nv, struct live **out,
                        size_t *n)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = store_read_cursor(s, s->chunks, &txn, &cur);
    if (rc)
        return rc;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    MDB_val key, val;
    for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        struct loc l;
        memcpy(&l, val.mv_data, sizeof(l));
        if (!bsearch(&l.seg, victims, nv, sizeof(*victims), store_cmp_u32))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            struct live *p = realloc(*out, cap * sizeof(*p));
            if (!p) {
                rc = ENOMEM;
                break;
            }
            *out = p;
        }
        struct live *e = &(*out)[(*n)++];
        memset(e, 0, sizeof(*e));
        memcpy(e->key, key.mv_data, KEY_BYTES);
        e->old = l;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

static bool cancelled(const struct node_compact_options *o)
{
    return o->cancel && o->cancel(o->arg);
}

/*
 * Foreground first: before each copied record, waits (up to yield_ms) while
 * reads are in flight or writes are queued, then keeps to the byte budget.
 */
static void pace(struct node_store *s, const struct node_compact_options *o, int64_t t0,
                 uint64_t copied)
{
    for (int waited = 0; waited < o->yield_ms && !cancelled(o); waited++) {
        pthread_mutex_lock(&s->q_mu);
        bool queued = s->q_head != NULL;
        pthread_mutex_unlock(&s->q_mu);
        if (!queued && atomic_load(&s->reads) == 0)
            break;
        usleep(1000);
    }
    if (!o->rate_bytes)
        return;
    int64_t due = t0 + (int64_t)((double)copied * 1e9 / (double)o->rate_bytes);
    for (int64_t now = store_now_ns(); now < due && !cancelled(o); now = store_now_ns()) {
        int64_t ns = due - now < 50000000 ? due - now : 50000000; /* cancel stays prompt */
        struct timespec ts = {0, (long)ns};
        nanosleep(&ts, NULL);
    }
}

/*
 * Copies the live records of the segments victims[nv] (sorted) into one fresh
 * segment, syncs it, switches the index in one synced txn (only entries still
 * pointing at the old places), then unlinks the victims. A crash before the
 * switch leaves an unregistered copy (removed at open); after it, unregistered
 * victims (removed at open).
 */
static int compact_group(struct node_store *s, const uint32_t *victims, const uint64_t *vsize,
                         size_t nv, const struct node_compact_options *opt,
                         struct node_compact_result *res)
{
    struct live *e;
    size_t n;
    int rc = collect_live(s, victims, nv, &e, &n);
    if (rc)
        return rc;
    uint32_t out = 0;
    int ofd = -1;
    uint64_t off = 0;
    void *buf = NULL;
    size_t cap = 0;
    int64_t t0 = store_now_ns();
    if (n > 0)
        rc = store_seg_create(s, &out, &ofd);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (cancelled(opt)) {
            rc = -ECANCELED;
            break;
        }
        pace(s, opt, t0, off);
        if (cap < e[i].old.len) {
            void *nb = realloc(buf, e[i].old.len);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = e[i].old.len;
        }
        pthread_rwlock_rdlock(&s->seg_lock);
        int rd = store_read_record(s, e[i].key, &e[i].old, buf, 0);
        pthread_rwlock_unlock(&s->seg_lock);
        if (rd) /* marked for repair in the switch txn, if still current then */
            continue;
        struct node_record rec = {.type = NODE_REC_PUT,
                                  .version = e[i].old.version,
                                  .len = e[i].old.len,
                                  .crc = e[i].old.crc};
        uint8_t hdr[NODE_RECORD_HDR_BYTES];
        store_id_of(e[i].key, &rec.id);
        node_record_encode(&rec, hdr);
        struct iovec iov[2] = {{hdr, sizeof(hdr)}, {buf, e[i].old.len}};
        size_t want = sizeof(hdr) + e[i].old.len;
        ssize_t w = pwritev(ofd, iov, 2, (off_t)off);
        if (w < 0 || (size_t)w != want) {
            rc = w < 0 ? -errno : -ENOSPC;
            break;
        }
        e[i].new = e[i].old;
        e[i].new.seg = out;
        e[i].new.off = off;
        e[i].new.flags = 0; /* copied as a plain record (buffered) */
        e[i].copied = 1;
        off += want;
    }
    free(buf);
    if (rc == 0 && ofd >= 0 && fdatasync(ofd) != 0)
        rc = -errno;
    if (ofd >= 0)
        atomic_fetch_add(&s->used, store_fd_size(ofd));
    if (rc) {
        if (ofd >= 0) {
            atomic_fetch_sub(&s->used, store_fd_size(ofd));
            store_seg_remove(s, out);
        }
        free(e);
        return rc;
    }
    store_crash_point(s, "compact_copied");

    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct loc cur;
            int g = store_loc_get(s, txn, e[i].key, &cur);
            if (g == -ENOENT || (g == 0 && (cur.seg != e[i].old.seg || cur.off != e[i].old.off)))
                continue; /* overwritten or deleted meanwhile: the copy is dead */
            if (g) {
                rc = g;
            } else if (e[i].copied) {
                MDB_val key = {KEY_BYTES, e[i].key}, val = {sizeof(e[i].new), &e[i].new};
                rc = mdb_err(mdb_put(txn, s->chunks, &key, &val, 0));
            } else { /* corrupt: nothing valid left to point at */
                MDB_val key = {KEY_BYTES, e[i].key};
                rc = store_del_ok(mdb_del(txn, s->chunks, &key, NULL));
                if (rc == 0)
                    rc = store_repair_mark(s, txn, e[i].key, e[i].old.version);
                inec_log(INEC_LOG_WARN, "node",
                         "compaction dropped a corrupt chunk seg=%" PRIu32 " off=%" PRIu64,
                         e[i].old.seg, e[i].old.off);
            }
        }
        for (size_t v = 0; v < nv && rc == 0; v++) {
            uint8_t k[4];
            store_putbe(k, victims[v], 4);
            MDB_val key = {4, k};
            rc = store_del_ok(mdb_del(txn, s->segs, &key, NULL));
        }
        if (rc == 0 && ofd >= 0)
            rc = store_wm_put(s, txn, out, off);
        rc = store_commit_synced(s, txn, rc);
    }
    free(e);
    if (rc) {
        if (ofd >= 0) {
            atomic_fetch_sub(&s->used, store_fd_size(ofd));
            store_seg_remove(s, out);
        }
        return rc;
    }
    store_crash_point(s, "compact_switched");
    uint64_t freed = 0;
    for (size_t v = 0; v < nv; v++) {
        store_seg_remove(s, victims[v]);
        freed += vsize[v];
    }
    if (fsync(s->dirfd) != 0)
        inec_log(INEC_LOG_WARN, "node", "fsync dir err=%s", strerror(errno));
    atomic_fetch_sub(&s->used, freed);
    atomic_fetch_add(&s->compacted_segments, nv);
    atomic_fetch_add(&s->compacted_bytes, freed > off ? freed - off : 0);
    res->segments += nv;
    res->bytes_copied += off;
    res->bytes_freed += freed;
    return 0;
}

/* The store's segments (ids ascending), their sizes and live bytes, and the
 * active one; the ids of segments not fully indexed (or unregistered) are 0.
 * Under write_mu no roll happens: every segment but *active is sealed for good
 * (appends only ever go to a new segment), so its size is final. */
static int seg_snapshot(struct node_store *s, uint32_t **ids, uint64_t **size, uint64_t **live,
                        size_t *n, uint32_t *active)
{
    pthread_mutex_lock(&s->write_mu);
    *active = s->active;
    pthread_rwlock_rdlock(&s->seg_lock);
    *n = s->nseg;
    *ids = calloc(*n ? *n : 1, sizeof(**ids));
    *size = calloc(*n ? *n : 1, sizeof(**size));
    *live = calloc(*n ? *n : 1, sizeof(**live));
    for (size_t i = 0; *ids && *size && i < *n; i++) {
        (*ids)[i] = s->seg[i].id;
        (*size)[i] = store_fd_size(s->seg[i].fd);
    }
    pthread_rwlock_unlock(&s->seg_lock);
    pthread_mutex_unlock(&s->write_mu);
    int rc = *ids && *size && *live ? 0 : -ENOMEM;
    MDB_txn *txn;
    if (rc == 0 && (rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))) == 0) {
        rc = store_live_per_segment(s, txn, *ids, *n, *live, NULL, NULL);
        for (size_t i = 0; rc == 0 && i < *n; i++) {
            uint64_t wm;
            if (store_wm_get(s, txn, (*ids)[i], &wm) != 0 || wm != (*size)[i])
                (*ids)[i] = 0;
        }
        mdb_txn_abort(txn);
    }
    return rc;
}

static bool worth(uint64_t size, uint64_t live, double min_dead)
{
    uint64_t dead = size > live ? size - live : 0;
    return dead > 0 && (double)dead >= min_dead * (double)size;
}

int node_store_compact_opts(struct node_store *s, const struct node_compact_options *opt,
                            struct node_compact_result *res)
{
    struct node_compact_result r = {0};
    if (!s || !opt || opt->min_dead < 0 || opt->min_dead > 1)
        return -EINVAL;
    pthread_mutex_lock(&s->compact_mu);
    uint32_t *ids = NULL;
    uint64_t *size = NULL, *live = NULL;
    size_t n = 0;
    uint32_t active = 0;
    int64_t t0 = store_now_ns();
    int rc = seg_snapshot(s, &ids, &size, &live, &n, &active);
    r.scan_ns = (uint64_t)(store_now_ns() - t0);
    /* The active segment takes every new record; sealing it (the next write
     * rolls to a new one) lets a store that never fills a segment, or a
     * small one that churns, give its dead bytes back too. Only if nothing
     * was appended since the snapshot: then its live bytes are current. */
    pthread_mutex_lock(&s->write_mu);
    for (size_t i = 0; rc == 0 && opt->seal_active_bytes && i < n; i++)
        if (ids[i] && ids[i] == active && s->active == active && size[i] == s->active_off &&
            size[i] >= opt->seal_active_bytes && worth(size[i], live[i], opt->min_dead)) {
            s->active = 0; /* sealed: every batch of it is indexed (we hold write_mu) */
            store_direct_close(s);
            active = 0;
        }
    pthread_mutex_unlock(&s->write_mu);
    /* Victims are compacted in groups whose live bytes fit one segment. */
    uint32_t *grp = calloc(n ? n : 1, sizeof(*grp));
    uint64_t *gsize = calloc(n ? n : 1, sizeof(*gsize));
    if (rc == 0 && (!grp || !gsize))
        rc = -ENOMEM;
    size_t ng = 0;
    uint64_t glive = 0;
    for (size_t i = 0; rc == 0 && i <= n; i++) {
        bool take = i < n && ids[i] && ids[i] != active && worth(size[i], live[i], opt->min_dead);
        if (ng && (i == n || (take && glive + live[i] > s->opt.segment_size))) {
            rc = compact_group(s, grp, gsize, ng, opt, &r);
            ng = 0;
            glive = 0;
        }
        if (take && rc == 0) {
            grp[ng] = ids[i]; /* ids ascend: grp stays sorted */
            gsize[ng++] = size[i];
            glive += live[i];
        }
    }
    free(grp);
    free(gsize);
    free(ids);
    free(size);
    free(live);
    pthread_mutex_unlock(&s->compact_mu);
    if (res)
        *res = r;
    return rc;
}

int node_store_compact(struct node_store *s, double min_dead, struct node_compact_result *res)
{
    struct node_compact_options o = {.min_dead = min_dead};
    return node_store_compact_opts(s, &o, res);
}

uint64_t node_store_appended(struct node_store *s)
{
    return s ? atomic_load(&s->appended) : 0;
}
