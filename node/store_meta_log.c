/*
 * The metadata log: how a metadata write is durable with one flush.
 *
 * A metadata write used to be an LMDB commit and a sync: two flushes of the
 * disk (LMDB's data pages, then its meta page), on every home of every PUT.
 * Now the group commit (store_meta.c) appends the batch's new values to
 * meta.log, flushes it once and acknowledges; the values wait in memory
 * (the pending map, store_meta.c) and reach LMDB together in one synced txn
 * once the log is full, or before a listing, a delete or a close. That txn
 * also records the log's epoch as applied; the log then starts over at
 * offset 0 with the next epoch.
 *
 * The file is META_LOG_BYTES, allocated once and then overwritten in place:
 * an fdatasync of an overwrite flushes data only, where an append would also
 * commit the file system's journal (the size changes). A record:
 *     magic "IML1" | crc32c of the rest (4) | epoch (8) | key length (4) |
 *     value length (4) | key ("bucket NUL key NUL") | value (as LMDB stores
 *     it; none: a delete)
 * big-endian. Recovery reads records from offset 0 while they check and
 * carry the first record's epoch; if that epoch is newer than the applied
 * one, it applies them in order (each a whole value: replaying any prefix
 * twice ends in the same state) in one synced txn. Whatever follows (a torn
 * batch, never acknowledged; an older epoch's records, applied) is ignored.
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
    ssize_t n = pwrite(s->mlog_fd, buf, len, (off_t)s->mlog_off);
    if (n != (ssize_t)len) /* a regular file writes short only when full */
        return n < 0 ? -errno : -ENOSPC;
    if (fdatasync(s->mlog_fd) != 0)
        return -errno;
    s->mlog_off += len;
    return 0;
}

int store_meta_log_applied(struct node_store *s, MDB_txn *txn)
{
    uint8_t e[8];
    store_putbe(e, s->mlog_epoch, 8);
    MDB_val k = applied_key, v = {8, e};
    return mdb_err(mdb_put(txn, s->info, &k, &v, 0));
}

void store_meta_log_restart(struct node_store *s)
{
    s->mlog_epoch++;
    s->mlog_off = 0;
}

/* Applies the log's unapplied records (see the top) in one synced txn. */
static int replay(struct node_store *s, const uint8_t *log, size_t size, uint64_t *epoch)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    uint64_t applied = 0, first = 0;
    MDB_val k = applied_key, v;
    if (mdb_get(txn, s->info, &k, &v) == 0 && v.mv_size == 8)
        applied = store_getbe(v.mv_data, 8);
    size_t off = 0, n = 0;
    while (rc == 0 && off + META_LOG_HDR <= size && memcmp(log + off, MAGIC, 4) == 0) {
        const uint8_t *h = log + off;
        uint64_t e = store_getbe(h + 8, 8), klen = store_getbe(h + 16, 4),
                 vlen = store_getbe(h + 20, 4);
        if (klen < 2 || klen > NODE_KEY_MAX + 1 || vlen > NODE_META_MAX + 64 ||
            off + META_LOG_HDR + klen + vlen > size || (first && e != first) ||
            store_getbe(h + 4, 4) != node_crc32c(h + 8, META_LOG_HDR - 8 + klen + vlen))
            break;
        if (!first && (first = e) <= applied)
            break; /* the log of an epoch already applied */
        const char *bucket = (const char *)h + META_LOG_HDR;
        if (memchr(bucket, 0, klen - 1) == NULL || bucket[klen - 1] != 0)
            break;
        const char *key = bucket + strlen(bucket) + 1;
        rc = vlen ? meta_index_put(txn, s->meta, bucket, key, h + META_LOG_HDR + klen, vlen)
                  : meta_index_del(txn, s->meta, bucket, key);
        rc = rc == -ENOENT ? 0 : rc;
        off += META_LOG_HDR + klen + vlen;
        n++;
    }
    *epoch = (first > applied ? first : applied) + 1;
    if (rc == 0 && n) {
        s->mlog_epoch = first;
        rc = store_meta_log_applied(s, txn);
        if (rc == 0)
            inec_log(INEC_LOG_INFO, "node", "metadata log: %zu writes replayed", n);
        return store_commit_synced(s, txn, rc);
    }
    mdb_txn_abort(txn);
    return rc;
}

int store_meta_log_open(struct node_store *s)
{
    int fd = openat(s->dirfd, "meta.log", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    s->mlog_fd = fd;
    uint64_t size = store_fd_size(fd);
    if (size < META_LOG_BYTES) { /* a new store, or one from before the log */
        int rc = posix_fallocate(fd, 0, META_LOG_BYTES);
        if (rc == EOPNOTSUPP || rc == EINVAL)
            rc = ftruncate(fd, META_LOG_BYTES) ? errno : 0;
        if (rc || fsync(fd) != 0 || fsync(s->dirfd) != 0)
            return -(rc ? rc : errno);
        size = META_LOG_BYTES;
    }
    uint8_t *log = malloc(size);
    if (!log)
        return -ENOMEM;
    ssize_t n = pread(fd, log, size, 0);
    int rc = n == (ssize_t)size ? 0 : n < 0 ? -errno : -EIO;
    uint64_t epoch = 1;
    if (rc == 0)
        rc = replay(s, log, size, &epoch);
    free(log);
    s->mlog_epoch = epoch;
    s->mlog_off = 0;
    return rc;
}
