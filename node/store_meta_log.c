/*
 * The metadata log: how a metadata write is durable with one flush.
 *
 * A metadata write used to be an LMDB commit and a sync: two flushes of the
 * disk (LMDB's data pages, then its meta page), on every home of every PUT.
 * Now the group commit (store_meta.c) appends the batch's new values to
 * meta.log, flushes it once and acknowledges; the values wait in memory
 * (the pending map, store_meta.c) until they reach LMDB together in one
 * synced txn, which also records their epoch as applied.
 *
 * The log has two halves of META_LOG_BYTES; one is active. When a batch
 * does not fit in it, the active half's map is frozen and the applier
 * thread puts it into LMDB while the writes go on in the other half, at the
 * next epoch, from offset 0. (Applied on the writer's path instead, it was
 * one synced txn of up to 8 MiB in the latency of the write that filled the
 * log.) A half is reused only once its values are applied, so the halves'
 * epochs differ by one at most. A close applies everything, and a batch
 * larger than a half is applied on its own path, the active half then
 * restarting at the next epoch.
 *
 * The file is allocated once and then overwritten in place: an fdatasync
 * of an overwrite flushes data only, where an append would also commit the
 * file system's journal (the size changes). A record:
 *     magic "IML1" | crc32c of the rest (4) | epoch (8) | key length (4) |
 *     value length (4) | key ("bucket NUL key NUL") | value (as LMDB stores
 *     it; none: a delete)
 * big-endian. Recovery reads each half's records from its start while they
 * check and carry its first record's epoch, and applies the halves whose
 * epoch is newer than the applied one, oldest first (each record a whole
 * value: replaying any prefix twice ends in the same state), in one synced
 * txn. Whatever follows in a half (a torn batch, never acknowledged; an
 * older epoch's records, applied) is ignored. A store from before the
 * halves has one, the first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/meta_index.h"
#include "node/store_internal.h"

#define MAGIC "IML1"

static const MDB_val applied_key = {15, "meta_log_epoch"};

size_t store_meta_log_encode(uint8_t *dst, uint64_t epoch, const char *k, size_t klen,
                             const void *v, size_t vlen)
{
    memcpy(dst, MAGIC, 4);
    store_putbe(dst + 8, epoch, 8);
    store_putbe(dst + 16, klen, 4);
    store_putbe(dst + 20, vlen, 4);
    memcpy(dst + META_LOG_HDR, k, klen);
    if (vlen) /* 0: a delete */
        memcpy(dst + META_LOG_HDR + klen, v, vlen);
    store_putbe(dst + 4, node_crc32c(dst + 8, META_LOG_HDR - 8 + klen + vlen), 4);
    return META_LOG_HDR + klen + vlen;
}

int store_meta_log_append(struct node_store *s, const void *buf, size_t len)
{
    if (s->mlog_off + len > META_LOG_BYTES)
        return -ENOSPC;
    off_t at = (off_t)s->mlog_half * META_LOG_BYTES + (off_t)s->mlog_off;
    ssize_t n = pwrite(s->mlog_fd, buf, len, at);
    if (n != (ssize_t)len) /* a regular file writes short only when full */
        return n < 0 ? -errno : -ENOSPC;
    if (fdatasync(s->mlog_fd) != 0)
        return -errno;
    s->mlog_off += len;
    return 0;
}

int store_meta_log_applied(MDB_txn *txn, MDB_dbi info, uint64_t epoch)
{
    uint8_t e[8];
    store_putbe(e, epoch, 8);
    MDB_val k = applied_key, v = {8, e};
    return mdb_err(mdb_put(txn, info, &k, &v, 0));
}

void store_meta_log_restart(struct node_store *s)
{
    s->mlog_epoch++;
    s->mlog_off = 0;
}

void store_meta_log_switch(struct node_store *s)
{
    store_meta_log_restart(s);
    s->mlog_half ^= 1;
}

/* The epoch of the records a half starts with (0: none), and their bytes. */
static uint64_t half_epoch(const uint8_t *log, size_t size, size_t *used)
{
    uint64_t first = 0;
    size_t off = 0;
    while (off + META_LOG_HDR <= size && memcmp(log + off, MAGIC, 4) == 0) {
        const uint8_t *h = log + off;
        uint64_t e = store_getbe(h + 8, 8), klen = store_getbe(h + 16, 4),
                 vlen = store_getbe(h + 20, 4);
        if (klen < 2 || klen > NODE_KEY_MAX + 1 || vlen > NODE_META_MAX + 64 ||
            off + META_LOG_HDR + klen + vlen > size || (first && e != first) ||
            store_getbe(h + 4, 4) != node_crc32c(h + 8, META_LOG_HDR - 8 + klen + vlen))
            break;
        const char *bucket = (const char *)h + META_LOG_HDR;
        if (memchr(bucket, 0, klen - 1) == NULL || bucket[klen - 1] != 0)
            break;
        first = e;
        off += META_LOG_HDR + klen + vlen;
    }
    *used = off;
    return first;
}

/* A half's checked records (half_epoch) into txn; how many. */
static int replay_half(struct node_store *s, MDB_txn *txn, const uint8_t *log, size_t used,
                       size_t *n)
{
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < used; (*n)++) {
        const uint8_t *h = log + off;
        uint64_t klen = store_getbe(h + 16, 4), vlen = store_getbe(h + 20, 4);
        const char *bucket = (const char *)h + META_LOG_HDR;
        const char *key = bucket + strlen(bucket) + 1;
        rc = vlen ? meta_index_put(txn, s->meta, bucket, key, h + META_LOG_HDR + klen, vlen)
                  : meta_index_del(txn, s->meta, bucket, key);
        rc = rc == -ENOENT ? 0 : rc;
        off += META_LOG_HDR + klen + vlen;
    }
    return rc;
}

/* Applies the halves' unapplied records (see the top) in one synced txn;
 * *epoch: the next one, newer than any seen. */
static int replay(struct node_store *s, const uint8_t *log, uint64_t *epoch)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    uint64_t applied = 0, e[2];
    size_t used[2], n = 0;
    MDB_val k = applied_key, v;
    if (mdb_get(txn, s->info, &k, &v) == 0 && v.mv_size == 8)
        applied = store_getbe(v.mv_data, 8);
    for (size_t h = 0; h < 2; h++)
        e[h] = half_epoch(log + h * META_LOG_BYTES, META_LOG_BYTES, &used[h]);
    int order[2] = {0, 1};
    if (e[1] < e[0])
        order[0] = 1, order[1] = 0;
    uint64_t newest = applied;
    for (int i = 0; i < 2 && rc == 0; i++) {
        int h = order[i];
        if (e[h] <= applied)
            continue; /* none, or applied */
        rc = replay_half(s, txn, log + (size_t)h * META_LOG_BYTES, used[h], &n);
        newest = e[h];
    }
    /* Past every epoch seen: a half's stale records never pass for new ones. */
    uint64_t top = e[0] > e[1] ? e[0] : e[1];
    *epoch = (top > newest ? top : newest) + 1;
    if (rc == 0 && n) {
        rc = store_meta_log_applied(txn, s->info, newest);
        if (rc == 0)
            inec_log(INEC_LOG_INFO, "node", "metadata log: %zu writes replayed", n);
        return store_commit_synced(s, txn, rc);
    }
    mdb_txn_abort(txn);
    return rc;
}

/* Zeros written over [from, to), not fallocate(2)'d: ext4 and xfs allocate
 * unwritten extents, whose first write is a metadata change, so until the
 * log had wrapped every write's fdatasync would commit the journal too (a
 * new node's metadata write during 16 MiB PUTs: ~0.8 ms, ~0.5 ms written
 * through). PostgreSQL zero-fills its WAL segments for the same reason. */
static int zero_fill(int fd, uint64_t from, uint64_t to)
{
    static const uint8_t zeros[64 << 10];
    for (uint64_t at = from; at < to;) {
        size_t n = to - at < sizeof(zeros) ? (size_t)(to - at) : sizeof(zeros);
        ssize_t w = pwrite(fd, zeros, n, (off_t)at);
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        at += (uint64_t)w;
    }
    return 0;
}

int store_meta_log_open(struct node_store *s)
{
    int fd = openat(s->dirfd, "meta.log", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    s->mlog_fd = fd;
    uint64_t size = store_fd_size(fd);
    if (size < 2 * META_LOG_BYTES) { /* a new store, or one from before the halves */
        int rc = zero_fill(fd, size, 2 * META_LOG_BYTES);
        if (rc || fsync(fd) != 0 || fsync(s->dirfd) != 0)
            return rc ? rc : -errno;
    }
    size = 2 * META_LOG_BYTES;
    uint8_t *log = malloc(size);
    if (!log)
        return -ENOMEM;
    ssize_t n = pread(fd, log, size, 0);
    int rc = n == (ssize_t)size ? 0 : n < 0 ? -errno : -EIO;
    uint64_t epoch = 1;
    if (rc == 0)
        rc = replay(s, log, &epoch);
    free(log);
    s->mlog_epoch = epoch;
    s->mlog_half = 0;
    s->mlog_off = 0;
    return rc;
}
