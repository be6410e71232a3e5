/*
 * The segment table: the open segment files by id, their creation and
 * removal, and each one's watermark (how far it is indexed).
 *
 * Segment lifetime: readers hold seg_lock shared from the index lookup until
 * the pread is done; compaction switches the index first, then takes seg_lock
 * exclusively to close the old segment. A reader therefore always finds open
 * the segment its snapshot points at.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/store_internal.h"

int store_seg_find(struct node_store *s, uint32_t id) /* index or -1; under seg_lock */
{
    size_t lo = 0, hi = s->nseg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->seg[mid].id == id)
            return (int)mid;
        if (s->seg[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int store_seg_insert(struct node_store *s, uint32_t id, int fd) /* under seg_lock (write) */
{
    if (s->nseg == s->capseg) {
        size_t cap = s->capseg ? 2 * s->capseg : 16;
        struct seg *p = realloc(s->seg, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        s->seg = p;
        s->capseg = cap;
    }
    size_t i = s->nseg;
    while (i > 0 && s->seg[i - 1].id > id) {
        s->seg[i] = s->seg[i - 1];
        i--;
    }
    s->seg[i] = (struct seg){id, fd};
    s->nseg++;
    return 0;
}

int store_seg_fd(struct node_store *s, uint32_t id) /* under seg_lock */
{
    int i = store_seg_find(s, id);
    return i < 0 ? -1 : s->seg[i].fd;
}

uint64_t store_fd_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Creates an empty segment file (durable name) and puts it in the table. */
int store_seg_create(struct node_store *s, uint32_t *id, int *fd)
{
    char name[32];
    pthread_rwlock_wrlock(&s->seg_lock);
    *id = s->next_seg++;
    pthread_rwlock_unlock(&s->seg_lock);
    snprintf(name, sizeof(name), SEG_NAME, *id);
    *fd = openat(s->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (*fd < 0)
        return -errno;
    if (fsync(s->dirfd) != 0) {
        int rc = -errno;
        close(*fd);
        unlinkat(s->dirfd, name, 0);
        return rc;
    }
    pthread_rwlock_wrlock(&s->seg_lock);
    int rc = store_seg_insert(s, *id, *fd);
    pthread_rwlock_unlock(&s->seg_lock);
    if (rc) {
        close(*fd);
        unlinkat(s->dirfd, name, 0);
    }
    return rc;
}

int store_wm_put(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t wm)
{
    uint8_t k[4];
    store_putbe(k, seg, 4);
    MDB_val key = {4, k}, val = {8, &wm};
    return mdb_err(mdb_put(txn, s->segs, &key, &val, 0));
}

int store_wm_get(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t *wm)
{
    uint8_t k[4];
    store_putbe(k, seg, 4);
    MDB_val key = {4, k}, val;
    int rc = mdb_get(txn, s->segs, &key, &val);
    if (rc)
        return mdb_err(rc);
    memcpy(wm, val.mv_data, 8);
    return 0;
}

void store_seg_remove(struct node_store *s, uint32_t id)
{
    char name[32];
    pthread_rwlock_wrlock(&s->seg_lock);
    int i = store_seg_find(s, id);
    if (i >= 0) {
        close(s->seg[i].fd);
        memmove(&s->seg[i], &s->seg[i + 1], (s->nseg - (size_t)i - 1) * sizeof(s->seg[0]));
        s->nseg--;
    }
    pthread_rwlock_unlock(&s->seg_lock);
    snprintf(name, sizeof(name), SEG_NAME, id);
    unlinkat(s->dirfd, name, 0);
}

/* Orders segment ids (qsort, bsearch). */
int store_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}
