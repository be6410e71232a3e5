/*
 * The write path (commit_batch, always under write_mu):
 *   encode headers (callers, in parallel) -> io_uring writev at the active
 *   segment's tail -> io_uring fdatasync -> one LMDB txn with every index entry
 *   of the batch and the segment's new watermark, filled -> acknowledge -> the
 *   txn committed. With group commit a writer thread drains a queue and commits
 *   everything queued as one batch (one write, one flush, one txn); without,
 *   each caller commits alone. A batch that fails before its acknowledgement
 *   is truncated away, so nothing of it is indexed later.
 *
 * The acknowledgement does not wait for the txn's commit, which is a second
 * flush (of index.mdb): the records are durable, and a txn lost in a crash is
 * redone by the recovery's rescan past the watermark (store.c). Until the
 * commit, reads find the batch's records in s->acked (store_acked_get). A
 * commit that fails leaves them there and stops the writes (`broken`): the
 * next open indexes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/store_internal.h"

/* How long the readers of the whole index wait for an acknowledged batch's
 * commit (store_settle): past it, a disk that stalls shows them the index as
 * it is rather than hanging a node's stats behind it. */
#define SETTLE_MAX_S 1

struct wreq {
    enum node_record_type type;
    uint8_t key[KEY_BYTES];
    uint64_t version;
    const void *data;
    uint32_t len;
    uint8_t flags; /* NODE_REC_ALIGNED: written with O_DIRECT (see commit_batch) */
    uint8_t hdr[NODE_RECORD_HDR_BYTES];
    uint64_t off; /* where it went, valid when placed */
    int placed;
    int rc;
    int done;
    node_done_cb cb; /* async: called once from the writer thread, then freed */
    void *cb_arg;
    struct wreq *next;
};

/* Registers a new active segment in a synced txn before any record enters it. */
static int roll(struct node_store *s)
{
    uint32_t id;
    int fd, rc = store_seg_create(s, &id, &fd);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0) {
        rc = store_wm_put(s, txn, id, 0);
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_err(mdb_txn_commit(txn));
    }
    if (rc == 0)
        rc = mdb_err(mdb_env_sync(s->env, 1));
    if (rc) /* the file stays, empty: it holds nothing, recovery or reuse is harmless */
        return rc;
    store_direct_close(s);
    s->active = id;
    s->active_fd = fd;
    s->active_off = 0;
    return 0;
}

/* Submits the prepared sqe and waits for its completion: 0 and its result in
 * *res, or the submit's or wait's -errno. */
static int uring_wait_one(struct io_uring *ring, int *res)
{
    struct io_uring_cqe *cqe;
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc >= 0)
        rc = io_uring_wait_cqe(ring, &cqe);
    if (rc < 0)
        return rc;
    *res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return 0;
}

/* Writes iov (consumed) at off until `total` bytes are down. */
static int uring_write(struct io_uring *ring, int fd, struct iovec *iov, int niov, uint64_t off,
                       size_t total)
{
    size_t done = 0;
    while (done < total) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (!sqe)
            return -EBUSY;
        io_uring_prep_writev(sqe, fd, iov, (unsigned)niov, off + done);
        int res, rc = uring_wait_one(ring, &res);
        if (rc < 0)
            return rc;
        if (res == -EINTR || res == -EAGAIN)
            continue;
        if (res < 0)
            return res;
        if (res == 0)
            return -ENOSPC;
        done += (size_t)res;
        for (size_t n = (size_t)res; n > 0 && niov > 0;) { /* skip what went out */
            if (n >= iov->iov_len) {
                n -= iov->iov_len;
                iov++;
                niov--;
            } else {
                iov->iov_base = (char *)iov->iov_base + n;
                iov->iov_len -= n;
                n = 0;
            }
        }
    }
    return 0;
}

static int uring_fdatasync(struct io_uring *ring, int fd)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    int res, rc = uring_wait_one(ring, &res);
    if (rc < 0)
        return rc;
    return res < 0 ? res : 0;
}

/* The bytes r takes in a segment when it goes at off. */
static uint64_t rec_bytes(const struct wreq *r, uint64_t off)
{
    return node_record_end(off, r->len, r->flags) - off;
}

/* The active segment opened O_DIRECT, for the payloads of aligned records
 * (under write_mu); -errno when it cannot be (EINVAL: the file system
 * refuses O_DIRECT). */
static int direct_open(struct node_store *s)
{
    if (s->direct_fd >= 0 && s->direct_seg == s->active)
        return s->direct_fd;
    if (s->direct_fd >= 0)
        close(s->direct_fd);
    s->direct_fd = -1;
    char name[32];
    snprintf(name, sizeof(name), SEG_NAME, s->active);
    int fd = openat(s->dirfd, name, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    s->direct_fd = fd;
    s->direct_seg = s->active;
    return fd;
}

/* Once the active segment changes (under write_mu): an open file of a segment
 * compaction removes would keep its space. */
void store_direct_close(struct node_store *s)
{
    if (s->direct_fd >= 0)
        close(s->direct_fd);
    s->direct_fd = -1;
}

/* A batch in file order: runs of iovecs for the buffered fd, and the
 * block-aligned middles of aligned records' payloads for the O_DIRECT one. */
struct piece {
    struct iovec *iov;
    int niov;
    bool direct;
    uint64_t off;
    size_t bytes;
};

/* Writes the pieces. A direct write the file system refuses (EINVAL) goes
 * through the page cache instead, as every later one; one whose O_DIRECT
 * descriptor cannot be opened, this once: the bytes and their places are the
 * same either way. */
static int write_pieces(struct node_store *s, struct piece *pc, size_t np)
{
    for (size_t i = 0; i < np; i++) {
        int rc = -EINVAL;
        if (pc[i].direct && !atomic_load(&s->direct_off)) {
            struct iovec one = pc[i].iov[0]; /* uring_write consumes it */
            int fd = direct_open(s);
            rc = fd < 0 ? fd : uring_write(&s->ring, fd, &one, 1, pc[i].off, pc[i].bytes);
            if (rc == 0) {
                atomic_fetch_add(&s->direct_bytes, pc[i].bytes);
                continue;
            }
            if (fd >= 0 && rc != -EINVAL)
                return rc; /* a write error: the batch fails */
            if (rc == -EINVAL) {
                atomic_store(&s->direct_off, true);
                inec_log(INEC_LOG_INFO, "node",
                         "O_DIRECT refused by the file system: chunks go through the page cache");
            } /* else the open failed (EMFILE...): this piece buffered, the next tries again */
        }
        rc = uring_write(&s->ring, s->active_fd, pc[i].iov, pc[i].niov, pc[i].off, pc[i].bytes);
        if (rc)
            return rc;
    }
    return 0;
}

/* Adds iov {p, len} to the piece being built (a new one when its kind
 * changes). */
static void piece_add(struct piece *pc, size_t *np, struct iovec *iov, size_t *niov, bool direct,
                      uint64_t off, const void *p, size_t len)
{
    if (!len)
        return;
    struct piece *last = *np ? &pc[*np - 1] : NULL;
    if (!last || last->direct || direct) {
        last = &pc[(*np)++];
        *last = (struct piece){.iov = &iov[*niov], .direct = direct, .off = off};
    }
    iov[(*niov)++] = (struct iovec){(void *)p, len};
    last->niov++;
    last->bytes += len;
}

/* The batch's index entries and the segment's new watermark in a write txn
 * left open for the caller to commit (*txn); each request's rc says whether
 * its record is alive or dead (left for compaction). */
static int index_batch(struct node_store *s, struct wreq **r, size_t n, uint64_t end, MDB_txn **txn)
{
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, txn));
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!r[i]->placed)
            continue;
        int arc = store_apply(s, *txn, r[i]->type, r[i]->key, r[i]->version, r[i]->len,
                              store_get32(r[i]->hdr + 48), r[i]->flags, s->active, r[i]->off);
        if (arc == -ENOENT || arc == -ESTALE)
            r[i]->rc = arc; /* a dead record, left for compaction */
        else
            rc = arc;
    }
    if (rc == 0)
        rc = store_wm_put(s, *txn, s->active, end);
    if (rc)
        mdb_txn_abort(*txn);
    return rc;
}

int store_acked_get(struct node_store *s, const uint8_t k[KEY_BYTES], struct loc *l)
{
    int rc = 1;
    pthread_mutex_lock(&s->acked_mu);
    /* A batch is at most BATCH_MAX records and usually a few: a scan from its
     * end (the last record of a key is the one indexed). */
    for (size_t i = s->nacked; i-- > 0 && rc == 1;) {
        if (memcmp(s->acked[i].key, k, KEY_BYTES) != 0)
            continue;
        rc = s->acked[i].tombstone ? -ENOENT : 0;
        if (rc == 0)
            *l = s->acked[i].loc;
    }
    pthread_mutex_unlock(&s->acked_mu);
    return rc;
}

void store_settle(struct node_store *s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SETTLE_MAX_S;
    pthread_mutex_lock(&s->acked_mu);
    while (s->nacked && pthread_cond_timedwait(&s->acked_cond, &s->acked_mu, &until) == 0)
        ;
    pthread_mutex_unlock(&s->acked_mu);
}

/* The batch's live records, where reads find them until the txn commits. */
static void acked_set(struct node_store *s, struct wreq **r, size_t n)
{
    pthread_mutex_lock(&s->acked_mu);
    s->nacked = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i]->placed || r[i]->rc)
            continue;
        struct acked *a = &s->acked[s->nacked++];
        memcpy(a->key, r[i]->key, KEY_BYTES);
        a->tombstone = r[i]->type == NODE_REC_TOMBSTONE;
        a->loc = (struct loc){.seg = s->active,
                              .len = r[i]->len,
                              .off = r[i]->off,
                              .version = r[i]->version,
                              .crc = store_get32(r[i]->hdr + 48),
                              .flags = r[i]->flags};
    }
    pthread_mutex_unlock(&s->acked_mu);
}

/* Answers r[0..n) with their rc: an async request is called back and freed,
 * a waiter woken (with group commit; without, its own thread is here). After
 * this none of them may be touched. Runs under write_mu: a callback may queue
 * writes, never wait for one. */
static void acknowledge(struct node_store *s, struct wreq **r, size_t n)
{
    bool async[BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        async[i] = r[i]->cb != NULL;
    if (s->opt.group_commit) {
        pthread_mutex_lock(&s->q_mu);
        for (size_t i = 0; i < n; i++)
            if (!async[i])
                r[i]->done = 1;
        pthread_cond_broadcast(&s->done_cond);
        pthread_mutex_unlock(&s->q_mu);
    }
    for (size_t i = 0; i < n; i++)
        if (async[i]) {
            r[i]->cb(r[i]->rc, r[i]->cb_arg);
            free(r[i]);
        }
}

/*
 * Writes and flushes a prefix of r[0..n) into the active segment and fills
 * its index txn (*txn, left open; NULL when nothing went in), whose records
 * take *appended bytes. Returns how many requests it consumed (at least
 * one); each consumed request has its rc set.
 */
static size_t write_batch(struct node_store *s, struct wreq **r, size_t n, MDB_txn **txn,
                          uint64_t *appended)
{
    static const uint8_t zeros[NODE_RECORD_ALIGN];
    /* Per record at most 4 buffered iovecs (header, gap; the payload's tail,
     * its padding) and a direct one; pieces alternate at most twice per record. */
    struct iovec iov[5 * BATCH_MAX];
    struct piece pc[2 * BATCH_MAX + 1];
    size_t niov = 0, np = 0;
    if (n > BATCH_MAX)
        n = BATCH_MAX;
    for (size_t i = 0; i < n; i++)
        r[i]->placed = 0;
    if (s->broken) {
        r[0]->rc = s->broken;
        return 1;
    }
    int rc = 0;
    if (!s->active ||
        (s->active_off > 0 && s->active_off + rec_bytes(r[0], s->active_off) > s->opt.segment_size))
        rc = roll(s);
    if (rc) {
        r[0]->rc = rc;
        return 1;
    }
    uint64_t start = s->active_off, bytes = 0, used = atomic_load(&s->used);
    size_t i, placed = 0;
    for (i = 0; i < n; i++) {
        uint64_t at = start + bytes, rb = rec_bytes(r[i], at);
        if (placed > 0 && at + rb > s->opt.segment_size)
            break;
        /* Tombstones are exempt: a full store must still be able to free space. */
        if (s->opt.capacity && r[i]->type == NODE_REC_PUT && used + bytes + rb > s->opt.capacity) {
            r[i]->rc = -ENOSPC;
            continue;
        }
        r[i]->rc = 0;
        r[i]->placed = 1;
        r[i]->off = at;
        uint64_t p = store_payload_at(at, r[i]->flags);
        piece_add(pc, &np, iov, &niov, false, at, r[i]->hdr, NODE_RECORD_HDR_BYTES);
        piece_add(pc, &np, iov, &niov, false, at, zeros, p - at - NODE_RECORD_HDR_BYTES);
        if (r[i]->flags & NODE_REC_ALIGNED) { /* the middle direct, the tail buffered */
            size_t mid = r[i]->len / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN;
            const uint8_t *d = r[i]->data;
            piece_add(pc, &np, iov, &niov, true, p, d, mid);
            piece_add(pc, &np, iov, &niov, false, p + mid, d + mid, r[i]->len - mid);
            piece_add(pc, &np, iov, &niov, false, p + mid, zeros,
                      store_align_up(r[i]->len) - r[i]->len);
        } else {
            piece_add(pc, &np, iov, &niov, false, p, r[i]->data, r[i]->len);
        }
        bytes += rb;
        placed++;
    }
    if (placed == 0)
        return i;

    store_crash_point(s, "before_write");
    if (store_crash_due(s, "mid_write")) { /* a torn batch: half of it reaches the file */
        uint64_t half = bytes / 2;
        for (size_t j = 0; j < np && half > 0; j++) {
            uint64_t take = pc[j].bytes < half ? pc[j].bytes : half;
            size_t keep = 0; /* its iovecs, cut at take */
            for (uint64_t t = take; keep < (size_t)pc[j].niov && t > 0; keep++) {
                if (pc[j].iov[keep].iov_len > t)
                    pc[j].iov[keep].iov_len = t;
                t -= pc[j].iov[keep].iov_len;
            }
            uring_write(&s->ring, s->active_fd, pc[j].iov, (int)keep, pc[j].off, take);
            half -= take;
        }
        raise(SIGKILL);
    }
    rc = write_pieces(s, pc, np);
    store_crash_point(s, "after_write");
    if (rc == 0)
        rc = uring_fdatasync(&s->ring, s->active_fd);
    store_crash_point(s, "after_flush");
    if (rc == 0)
        rc = index_batch(s, r, i, start + bytes, txn);
    if (rc) {
        *txn = NULL;
        /* Nothing of the batch may be found by a later rescan. */
        if (ftruncate(s->active_fd, (off_t)start) != 0 || fdatasync(s->active_fd) != 0) {
            inec_log(INEC_LOG_ERROR, "node", "cannot drop failed batch seg=%" PRIu32 " err=%s",
                     s->active, strerror(errno));
            s->broken = -EIO;
        }
        for (size_t j = 0; j < i; j++)
            if (r[j]->placed)
                r[j]->rc = rc;
        return i;
    }
    s->active_off += bytes;
    atomic_fetch_add(&s->used, bytes);
    *appended = bytes;
    return i;
}

/*
 * Commits a prefix of r[0..n) as one write + one flush + one txn and
 * acknowledges it once it is durable, before the txn's commit. Returns how
 * many requests it consumed (at least one), none of which may be touched
 * after.
 */
static size_t commit_batch(struct node_store *s, struct wreq **r, size_t n)
{
    MDB_txn *txn = NULL;
    uint64_t appended = 0;
    size_t used = write_batch(s, r, n, &txn, &appended);
    if (txn)
        acked_set(s, r, used);
    acknowledge(s, r, used);
    if (!txn)
        return used;
    store_crash_point(s, "after_ack");
    int rc = mdb_err(mdb_txn_commit(txn));
    if (rc) { /* acknowledged: kept in s->acked for reads, indexed by the next open */
        inec_log(INEC_LOG_ERROR, "node",
                 "cannot index a durable batch seg=%" PRIu32 " err=%s: writes stop until a restart",
                 s->active, strerror(-rc));
        s->broken = rc;
    } else {
        atomic_fetch_add(&s->appended, appended); /* now the index has them (store_stats.c) */
        pthread_mutex_lock(&s->acked_mu);
        s->nacked = 0;
        pthread_cond_broadcast(&s->acked_cond);
        pthread_mutex_unlock(&s->acked_mu);
    }
    store_crash_point(s, "after_index");
    return used;
}

void *store_writer_main(void *arg)
{
    pthread_setname_np(pthread_self(), "store-writer");
    struct node_store *s = arg;
    struct wreq *batch[BATCH_MAX];
    pthread_mutex_lock(&s->q_mu);
    for (;;) {
        while (!s->q_head && !s->stop)
            pthread_cond_wait(&s->q_cond, &s->q_mu);
        if (!s->q_head)
            break;
        size_t n = 0;
        while (s->q_head && n < BATCH_MAX) {
            batch[n++] = s->q_head;
            s->q_head = s->q_head->next;
        }
        if (!s->q_head)
            s->q_tail = NULL;
        pthread_mutex_unlock(&s->q_mu);
        pthread_mutex_lock(&s->write_mu);
        for (size_t i = 0; i < n;)
            i += commit_batch(s, batch + i, n - i);
        pthread_mutex_unlock(&s->write_mu);
        pthread_mutex_lock(&s->q_mu);
    }
    pthread_mutex_unlock(&s->q_mu);
    return NULL;
}

/*
 * Commits r: inline without group commit, else through the writer's queue,
 * waiting for it unless r is async (r->cb set, r heap-allocated). An async
 * request that is refused (returned error) is neither called back nor freed.
 */
static int submit(struct node_store *s, struct wreq *r)
{
    static const uint8_t empty[1];
    struct node_record rec = {.type = r->type,
                              .version = r->version,
                              .len = r->len,
                              .crc = node_crc32c(r->len ? r->data : empty, r->len)};
    /* A large chunk in an aligned buffer skips the page cache (commit_batch). */
    if (r->type == NODE_REC_PUT && r->len >= s->opt.direct_min && !atomic_load(&s->direct_off) &&
        (uintptr_t)r->data % NODE_RECORD_ALIGN == 0)
        r->flags = NODE_REC_ALIGNED;
    rec.flags = r->flags;
    store_id_of(r->key, &rec.id);
    node_record_encode(&rec, r->hdr);
    if (!s->opt.group_commit) {
        bool async = r->cb != NULL; /* then r is answered and freed in the commit */
        pthread_mutex_lock(&s->write_mu);
        commit_batch(s, &r, 1);
        pthread_mutex_unlock(&s->write_mu);
        return async ? 0 : r->rc;
    }
    pthread_mutex_lock(&s->q_mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->q_mu);
        return -ESHUTDOWN;
    }
    r->next = NULL;
    if (s->q_tail)
        s->q_tail->next = r;
    else
        s->q_head = r;
    s->q_tail = r;
    pthread_cond_signal(&s->q_cond);
    if (r->cb) {
        pthread_mutex_unlock(&s->q_mu);
        return 0;
    }
    /* The writer completes every queued request, failed or not. */
    while (!r->done)
        pthread_cond_wait(&s->done_cond, &s->q_mu);
    pthread_mutex_unlock(&s->q_mu);
    return r->rc;
}

int node_store_put_chunk(struct node_store *s, const struct node_chunk_id *id, uint64_t version,
                         const void *data, size_t len)
{
    if (!s || !id || (!data && len))
        return -EINVAL;
    if (len > NODE_CHUNK_MAX)
        return -EMSGSIZE;
    struct wreq r = {.type = NODE_REC_PUT, .version = version, .data = data, .len = (uint32_t)len};
    store_key_of(id, r.key);
    return submit(s, &r);
}

int node_store_put_chunk_async(struct node_store *s, const struct node_chunk_id *id,
                               uint64_t version, const void *data, size_t len, node_done_cb cb,
                               void *arg)
{
    if (!s || !id || (!data && len) || !cb)
        return -EINVAL;
    if (len > NODE_CHUNK_MAX)
        return -EMSGSIZE;
    struct wreq *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    *r = (struct wreq){.type = NODE_REC_PUT,
                       .version = version,
                       .data = data,
                       .len = (uint32_t)len,
                       .cb = cb,
                       .cb_arg = arg};
    store_key_of(id, r->key);
    int rc = submit(s, r);
    if (rc)
        free(r);
    return rc;
}

int node_store_delete_chunk(struct node_store *s, const struct node_chunk_id *id, uint64_t version)
{
    if (!s || !id)
        return -EINVAL;
    struct wreq r = {.type = NODE_REC_TOMBSTONE, .version = version};
    store_key_of(id, r.key);
    /* Skip the tombstone when there is nothing to delete; the batch rechecks. */
    MDB_txn *txn;
    struct loc l;
    int rc = store_acked_get(s, r.key, &l);
    if (rc == 1) {
        if ((rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))))
            return rc;
        rc = store_loc_get(s, txn, r.key, &l);
        mdb_txn_abort(txn);
    }
    if (rc)
        return rc;
    if (l.version > version)
        return -ESTALE;
    return submit(s, &r);
}
