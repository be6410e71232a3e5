/*
 * Recovery at open: the segment files matched against the index, each
 * segment's unindexed tail indexed (or cut at the first torn record), the
 * active segment found again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/store_internal.h"

/*
 * Indexes the whole records of [wm, size) of a segment, in file order, and
 * truncates it at the first torn or corrupt one. Nothing there was acknowledged.
 */
static int rescan(struct node_store *s, uint32_t id, int fd, uint64_t wm, uint64_t size)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    uint64_t off = wm;
    size_t applied = 0, cap = 0;
    uint8_t *buf = NULL;
    while (rc == 0 && off + NODE_RECORD_HDR_BYTES <= size) {
        uint8_t hdr[NODE_RECORD_HDR_BYTES];
        struct node_record rec;
        if (pread(fd, hdr, sizeof(hdr), (off_t)off) != (ssize_t)sizeof(hdr) ||
            node_record_decode(hdr, &rec) != 0 || node_record_end(off, rec.len, rec.flags) > size)
            break;
        if (cap < rec.len) {
            uint8_t *nb = realloc(buf, rec.len);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = rec.len;
        }
        if (pread(fd, buf, rec.len, (off_t)store_payload_at(off, rec.flags)) != (ssize_t)rec.len ||
            node_crc32c(buf, rec.len) != rec.crc)
            break;
        uint8_t k[KEY_BYTES];
        store_key_of(&rec.id, k);
        int arc =
            store_apply(s, txn, rec.type, k, rec.version, rec.len, rec.crc, rec.flags, id, off);
        if (arc && arc != -ENOENT && arc != -ESTALE)
            rc = arc;
        off = node_record_end(off, rec.len, rec.flags);
        applied++;
    }
    free(buf);
    if (rc == 0 && off < size) {
        inec_log(INEC_LOG_WARN, "node",
                 "torn tail truncated seg=%" PRIu32 " at=%" PRIu64 " size=%" PRIu64, id, off, size);
        if (ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0)
            rc = -errno;
    }
    if (rc == 0)
        rc = store_wm_put(s, txn, id, off);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    if (applied)
        inec_log(INEC_LOG_INFO, "node", "tail indexed seg=%" PRIu32 " records=%zu", id, applied);
    return mdb_err(mdb_txn_commit(txn));
}

/* A segment shorter than its watermark lost indexed records: they go on the repair list. */
static int cut_short(struct node_store *s, uint32_t id, uint64_t size, uint64_t wm)
{
    inec_log(INEC_LOG_ERROR, "node",
             "segment shorter than indexed seg=%" PRIu32 " size=%" PRIu64 " indexed=%" PRIu64, id,
             size, wm);
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    rc = mdb_err(mdb_cursor_open(txn, s->chunks, &cur));
    if (rc == 0) {
        MDB_val key, val;
        for (int g = mdb_cursor_get(cur, &key, &val, MDB_FIRST); g == 0 && rc == 0;
             g = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
            struct loc l;
            memcpy(&l, val.mv_data, sizeof(l));
            if (l.seg == id && node_record_end(l.off, l.len, (uint8_t)l.flags) > size)
                rc = store_repair_mark(s, txn, key.mv_data, l.version);
        }
        mdb_cursor_close(cur);
    }
    if (rc == 0)
        rc = store_wm_put(s, txn, id, size);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_err(mdb_txn_commit(txn));
}

int store_recover(struct node_store *s, char *err, size_t errlen)
{
    int dfd = dup(s->dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return -errno;
    }
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        uint32_t id;
        char tail;
        if (strlen(de->d_name) != 16 ||
            sscanf(de->d_name, "seg-%8" SCNx32 ".lo%c", &id, &tail) != 2 || tail != 'g' || id == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            uint32_t *p = realloc(ids, cap * sizeof(*p));
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            ids = p;
        }
        ids[n++] = id;
    }
    closedir(d);
    if (rc) {
        free(ids);
        return rc;
    }
    if (n)
        qsort(ids, n, sizeof(*ids), store_cmp_u32);

    /* An index that was never initialised next to non-empty segments was lost or
     * replaced: removing the "unregistered" segments would discard every chunk. */
    MDB_txn *txn;
    MDB_val fk = {6, "format"}, fv = {1, "1"}, old;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0 && mdb_get(txn, s->info, &fk, &old) == MDB_NOTFOUND) {
        for (size_t i = 0; rc == 0 && i < n; i++) {
            char name[32];
            struct stat st;
            snprintf(name, sizeof(name), SEG_NAME, ids[i]);
            if (fstatat(s->dirfd, name, &st, 0) == 0 && st.st_size > 0) {
                snprintf(err, errlen, "segment files but a new index: refusing to discard them");
                rc = -EUCLEAN;
            }
        }
        rc = store_commit_synced(s, txn, rc ? rc : mdb_err(mdb_put(txn, s->info, &fk, &fv, 0)));
    } else if (rc == 0) {
        mdb_txn_abort(txn);
    }
    if (rc) {
        free(ids);
        return rc;
    }

    uint32_t max_id = n ? ids[n - 1] : 0, last = 0;
    int removed = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char name[32];
        uint64_t wm;
        snprintf(name, sizeof(name), SEG_NAME, ids[i]);
        rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
        if (rc)
            break;
        int g = store_wm_get(s, txn, ids[i], &wm);
        mdb_txn_abort(txn);
        if (g == -ENOENT) { /* never registered or already dropped: nothing acknowledged */
            inec_log(INEC_LOG_INFO, "node", "removing unregistered segment %s", name);
            if (unlinkat(s->dirfd, name, 0) != 0)
                rc = -errno;
            removed = 1;
            continue;
        }
        if ((rc = g) != 0)
            break;
        int fd = openat(s->dirfd, name, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        uint64_t size = store_fd_size(fd);
        if (size < wm)
            rc = cut_short(s, ids[i], size, wm);
        else if (size > wm)
            rc = rescan(s, ids[i], fd, wm, size);
        if (rc == 0)
            rc = store_seg_insert(s, ids[i], fd);
        if (rc) {
            close(fd);
            snprintf(err, errlen, "recovering %s: %s", name, strerror(-rc));
            break;
        }
        atomic_fetch_add(&s->used, store_fd_size(fd));
        last = ids[i];
    }
    free(ids);
    if (rc == 0 && removed && fsync(s->dirfd) != 0)
        rc = -errno;
    if (rc)
        return rc;

    /* Registered segments whose file is gone: their chunks fail reads (-EBADMSG). */
    MDB_cursor *cur;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    if ((rc = mdb_err(mdb_cursor_open(txn, s->segs, &cur))) == 0) {
        MDB_val key, val;
        while (mdb_cursor_get(cur, &key, &val, MDB_NEXT) == 0) {
            uint32_t id = (uint32_t)store_getbe(key.mv_data, 4);
            if (id > max_id)
                max_id = id;
            if (store_seg_find(s, id) < 0)
                inec_log(INEC_LOG_ERROR, "node", "segment missing id=%" PRIu32, id);
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    s->next_seg = max_id + 1;
    if (last) { /* keep appending to the newest segment while it has room */
        int fd = store_seg_fd(s, last);
        uint64_t size = store_fd_size(fd);
        if (size < s->opt.segment_size) {
            s->active = last;
            s->active_fd = fd;
            s->active_off = size;
        }
    }
    return rc;
}
