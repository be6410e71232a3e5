/*
 * The read path: a chunk found in the index, read from its segment and
 * verified against the index entry; a chunk that fails goes on the repair list.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "inec/log.h"
#include "node/store_internal.h"

/* Reads and verifies the record at l into buf[l->len]; under seg_lock (shared). */
int store_read_record(struct node_store *s, const uint8_t k[KEY_BYTES], const struct loc *l,
                      void *buf, int rwf)
{
    uint8_t hdr[NODE_RECORD_HDR_BYTES];
    int fd = store_seg_fd(s, l->seg);
    if (fd < 0)
        return -EBADMSG;
    /* An aligned record's gap between header and payload is read and dropped:
     * one read call either way. */
    uint8_t gap[NODE_RECORD_ALIGN];
    size_t skip = store_payload_at(l->off, l->flags) - l->off - sizeof(hdr);
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {gap, skip}, {buf, l->len}};
    int niov = 3;
    if (!skip)
        iov[1] = iov[2], niov = 2;
    if (!l->len)
        niov--;
    ssize_t got = preadv2(fd, iov, niov, (off_t)l->off, rwf);
    if (got < 0)
        return -errno;
    if ((size_t)got != sizeof(hdr) + skip + l->len)
        return rwf ? -EAGAIN : -EBADMSG; /* partly cached, or cut short */
    struct node_record rec;
    uint8_t rk[KEY_BYTES];
    if (node_record_decode(hdr, &rec) != 0)
        return -EBADMSG;
    store_key_of(&rec.id, rk);
    if (rec.type != NODE_REC_PUT || memcmp(rk, k, KEY_BYTES) != 0 || rec.version != l->version ||
        rec.len != l->len || rec.crc != l->crc || rec.flags != l->flags ||
        node_crc32c(buf, l->len) != rec.crc)
        return -EBADMSG;
    return 0;
}

static void mark_corrupt(struct node_store *s, const uint8_t k[KEY_BYTES], uint64_t version,
                         int err)
{
    struct node_chunk_id id;
    store_id_of(k, &id);
    char hex[2 * NODE_OBJECT_ID_BYTES + 1];
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", id.object[i]);
    inec_log(INEC_LOG_WARN, "node",
             "chunk corrupt object=%s stripe=%" PRIu64 " index=%" PRIu32 " version=%" PRIu64
             " err=%s",
             hex, id.stripe, id.index, version, strerror(-err));
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0) {
        rc = store_repair_mark(s, txn, k, version);
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_err(mdb_txn_commit(txn));
    }
    if (rc)
        inec_log(INEC_LOG_ERROR, "node", "cannot mark for repair err=%s", strerror(-rc));
}

/* nowait > 0: the event loop's read (node_store_get_chunk_cached): a chunk
 * of at most nowait bytes, from the page cache only, and a failed check
 * marks nothing (-EAGAIN: the blocking read reports it). */
static int get_impl(struct node_store *s, const struct node_chunk_id *id, void *buf, size_t cap,
                    void **alloc, size_t *len, uint64_t *version, size_t nowait)
{
    if (!s || !id)
        return -EINVAL;
    uint8_t k[KEY_BYTES];
    store_key_of(id, k);
    struct loc l;
    MDB_txn *txn;
    if (nowait && pthread_rwlock_tryrdlock(&s->seg_lock))
        return -EAGAIN; /* a compaction swaps segments */
    if (!nowait)
        pthread_rwlock_rdlock(&s->seg_lock);
    atomic_fetch_add(&s->reads, 1);
    int rc = store_acked_get(s, k, &l);
    if (rc == 1 && (rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))) == 0) {
        rc = store_loc_get(s, txn, k, &l);
        mdb_txn_abort(txn);
    }
    if (rc == 0) {
        if (len)
            *len = l.len;
        if (version)
            *version = l.version;
        if (nowait && l.len > nowait) {
            rc = -EAGAIN;
        } else if (alloc) {
            buf = *alloc = malloc(l.len ? l.len : 1);
            if (!buf)
                rc = -ENOMEM;
        } else if (cap < l.len) {
            rc = -EMSGSIZE;
        }
    }
    int rd = rc == 0 ? store_read_record(s, k, &l, buf, nowait ? RWF_NOWAIT : 0) : 0;
    pthread_rwlock_unlock(&s->seg_lock);
    atomic_fetch_sub(&s->reads, 1);
    if (rd) {
        if (l.len)
            memset(buf, 0, l.len); /* never hand out what failed verification */
        if (alloc) {
            free(*alloc);
            *alloc = NULL;
        }
        if (nowait)
            return -EAGAIN;
        mark_corrupt(s, k, l.version, rd);
        rc = rd;
    }
    return rc;
}

int node_store_get_chunk(struct node_store *s, const struct node_chunk_id *id, void *buf,
                         size_t cap, size_t *len, uint64_t *version)
{
    if (!buf && cap)
        return -EINVAL;
    return get_impl(s, id, buf, cap, NULL, len, version, 0);
}

int node_store_get_chunk_alloc(struct node_store *s, const struct node_chunk_id *id, void **buf,
                               size_t *len, uint64_t *version)
{
    if (!buf)
        return -EINVAL;
    *buf = NULL;
    return get_impl(s, id, NULL, 0, buf, len, version, 0);
}

int node_store_get_chunk_cached(struct node_store *s, const struct node_chunk_id *id, size_t max,
                                void **buf, size_t *len, uint64_t *version)
{
    if (!buf || !max)
        return -EINVAL;
    *buf = NULL;
    int rc = get_impl(s, id, NULL, 0, buf, len, version, max);
    return rc == 0 || rc == -ENOENT ? rc : -EAGAIN;
}

int node_store_list_chunks(struct node_store *s, const struct node_chunk_id *start_after,
                           size_t limit, node_chunk_cb cb, void *arg)
{
    if (!s || !cb)
        return -EINVAL;
    store_settle(s);
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = store_read_cursor(s, s->chunks, &txn, &cur);
    if (rc)
        return rc;
    uint8_t k[KEY_BYTES];
    MDB_val key, val;
    int op = MDB_FIRST;
    if (start_after) {
        store_key_of(start_after, k);
        key = (MDB_val){KEY_BYTES, k};
        op = MDB_SET_RANGE;
    }
    int n = 0;
    for (rc = mdb_cursor_get(cur, &key, &val, op); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        if (start_after && n == 0 && memcmp(key.mv_data, k, KEY_BYTES) == 0)
            continue;
        if (limit && (size_t)n >= limit)
            break;
        struct node_chunk_id id;
        struct loc l;
        store_id_of(key.mv_data, &id);
        memcpy(&l, val.mv_data, sizeof(l));
        n++;
        if (cb(&id, l.version, l.len, arg))
            break;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? n : mdb_err(rc);
}
