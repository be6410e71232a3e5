/*
 * The chunk store: segments of checksummed records + an LMDB index.
 * The invariants live in store.h; this file keeps to them as follows.
 *
 * Write path (commit_batch, always under write_mu):
 *   encode headers (callers, in parallel) -> io_uring writev at the active
 *   segment's tail -> io_uring fdatasync -> one LMDB txn with every index entry
 *   of the batch and the segment's new watermark -> acknowledge. With group
 *   commit a writer thread drains a queue and commits everything queued as one
 *   batch (one write, one flush, one txn); without, each caller commits alone.
 *   A failed batch is truncated away, so nothing of it is indexed later.
 *
 * LMDB runs with MDB_NOMETASYNC: a power failure may undo the last committed
 * txn, never corrupt. That is safe because an undone batch txn is redone by the
 * tail rescan (its records are durable and past the old watermark). Every txn
 * that cannot be redone from the log is synced explicitly: registering a segment
 * (before the first record goes into it), the compaction switch (before the old
 * segment is unlinked) and metadata writes. (A lost repair mark is found again
 * by the next read or scrub.)
 *
 * Segment lifetime: readers hold seg_lock shared from the index lookup until
 * the pread is done; compaction switches the index first, then takes seg_lock
 * exclusively to close the old segment. A reader therefore always finds open
 * the segment its snapshot points at.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <liburing.h>
#include <lmdb.h>

#include "inec/log.h"
#include "node/lmdb_err.h"
#include "node/meta_index.h"
#include "node/store.h"

#define REC_MAGIC   0x52434e49u /* "INCR" little-endian */
#define KEY_BYTES   28          /* object id, stripe (BE), index (BE): id order */
#define BATCH_MAX   510         /* two iovecs per record, under IOV_MAX */
#define SEG_NAME    "seg-%08" PRIx32 ".log"
#define DEFAULT_SEG (256ull << 20)

/* Index value of a chunk; host byte order (the index is not portable). */
struct loc {
    uint32_t seg;
    uint32_t len;
    uint64_t off; /* of the record header */
    uint64_t version;
    uint32_t crc;
    uint32_t flags; /* the record's (NODE_REC_ALIGNED): where its payload is; 0 in old indexes */
};

struct seg {
    uint32_t id;
    int fd;
};

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

struct node_store {
    struct node_store_options opt;
    int dirfd;
    int lockfd;
    MDB_env *env;
    MDB_dbi chunks, meta, segs, repair, info;

    pthread_rwlock_t seg_lock; /* the table below and next_seg */
    struct seg *seg;
    size_t nseg, capseg;
    uint32_t next_seg;
    _Atomic uint64_t used; /* bytes of all segment files */

    pthread_mutex_t write_mu; /* the active segment, the ring */
    struct io_uring ring;
    uint32_t active; /* 0: none yet */
    int active_fd;
    uint64_t active_off;
    int broken;              /* a failed batch could not be truncated away: refuse writes */
    int direct_fd;           /* the active segment opened O_DIRECT (-1: not open) */
    uint32_t direct_seg;     /* which segment direct_fd is */
    _Atomic bool direct_off; /* the file system refused O_DIRECT: every write buffered */
    _Atomic uint64_t direct_bytes;

    pthread_mutex_t mq_mu; /* metadata writes' group commit */
    pthread_cond_t mq_cond;
    struct meta_req *mq_head, *mq_tail;
    bool mq_busy; /* a writer runs a batch */

    pthread_mutex_t q_mu; /* group commit queue */
    pthread_cond_t q_cond, done_cond;
    struct wreq *q_head, *q_tail;
    int stop;
    int writer_running;
    pthread_t writer;

    pthread_mutex_t compact_mu;
    _Atomic int reads;         /* chunk reads in flight: compaction yields to them */
    _Atomic uint64_t appended; /* record bytes ever appended (tells auto compaction to look) */
    _Atomic uint64_t compacted_segments, compacted_bytes; /* freed by compaction, ever */

    char crash_at[32]; /* INEC_CRASH_AT=name[:n]: raise(SIGKILL) at the n-th hit */
    long crash_n;
    atomic_long crash_hits;
};

/* ---- encoding ------------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}
static void putbe(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}
static uint64_t getbe(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

uint32_t node_crc32c(const void *data, size_t len)
{
    return crc32_iscsi((unsigned char *)data, (int)len, 0xffffffffu);
}

void node_record_encode(const struct node_record *rec, uint8_t hdr[NODE_RECORD_HDR_BYTES])
{
    memset(hdr, 0, NODE_RECORD_HDR_BYTES);
    put32(hdr, REC_MAGIC);
    put16(hdr + 4, NODE_RECORD_HDR_BYTES);
    hdr[6] = (uint8_t)rec->type;
    hdr[7] = rec->flags;
    memcpy(hdr + 8, rec->id.object, NODE_OBJECT_ID_BYTES);
    put64(hdr + 24, rec->id.stripe);
    put32(hdr + 32, rec->id.index);
    put32(hdr + 36, rec->len);
    put64(hdr + 40, rec->version);
    put32(hdr + 48, rec->crc);
    put32(hdr + 60, node_crc32c(hdr, 60));
}

int node_record_decode(const uint8_t hdr[NODE_RECORD_HDR_BYTES], struct node_record *rec)
{
    if (get32(hdr) != REC_MAGIC || hdr[4] != NODE_RECORD_HDR_BYTES || hdr[5] != 0 ||
        (hdr[7] & ~NODE_REC_ALIGNED))
        return -EBADMSG;
    if (get32(hdr + 60) != node_crc32c(hdr, 60))
        return -EBADMSG;
    rec->type = (enum node_record_type)hdr[6];
    memcpy(rec->id.object, hdr + 8, NODE_OBJECT_ID_BYTES);
    rec->id.stripe = get64(hdr + 24);
    rec->id.index = get32(hdr + 32);
    rec->len = get32(hdr + 36);
    rec->version = get64(hdr + 40);
    rec->crc = get32(hdr + 48);
    rec->flags = hdr[7];
    if (rec->len > NODE_CHUNK_MAX)
        return -EBADMSG;
    if (rec->type != NODE_REC_PUT && !(rec->type == NODE_REC_TOMBSTONE && rec->len == 0))
        return -EBADMSG;
    return 0;
}

static uint64_t align_up(uint64_t v)
{
    return (v + NODE_RECORD_ALIGN - 1) / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN;
}

/* The file offset of the payload of a record at off. */
static uint64_t payload_at(uint64_t off, uint32_t flags)
{
    return flags & NODE_REC_ALIGNED ? align_up(off + NODE_RECORD_HDR_BYTES)
                                    : off + NODE_RECORD_HDR_BYTES;
}

uint64_t node_record_end(uint64_t off, uint32_t len, uint8_t flags)
{
    return payload_at(off, flags) + (flags & NODE_REC_ALIGNED ? align_up(len) : len);
}

static void key_of(const struct node_chunk_id *id, uint8_t k[KEY_BYTES])
{
    memcpy(k, id->object, NODE_OBJECT_ID_BYTES);
    putbe(k + 16, id->stripe, 8);
    putbe(k + 24, id->index, 4);
}

static void id_of(const uint8_t k[KEY_BYTES], struct node_chunk_id *id)
{
    memcpy(id->object, k, NODE_OBJECT_ID_BYTES);
    id->stripe = getbe(k + 16, 8);
    id->index = (uint32_t)getbe(k + 24, 4);
}

static int mdb_err(int rc)
{
    return node_lmdb_err(rc);
}

const char *node_store_strerror(int err)
{
    switch (err) {
    case -EBADMSG:
        return "chunk corrupt (checksum or identity mismatch), marked for repair";
    case -ESTALE:
        return "a newer version is stored";
    case -EMSGSIZE:
        return "chunk or buffer size out of range";
    case -ENOSPC:
        return "store full (disk or capacity)";
    case -EBUSY:
        return "store is open in another process";
    case -ENAMETOOLONG:
        return "bucket + key too long";
    case -EUCLEAN:
        return "index does not match the segments (index lost or replaced?)";
    default:
        return strerror(err < 0 ? -err : err);
    }
}

/* Test hook: is this the n-th time the process passes the named point? */
static int crash_due(struct node_store *s, const char *name)
{
    return s->crash_at[0] && strcmp(s->crash_at, name) == 0 &&
           atomic_fetch_add(&s->crash_hits, 1) + 1 >= s->crash_n;
}

static void crash_point(struct node_store *s, const char *name)
{
    if (crash_due(s, name))
        raise(SIGKILL);
}

/* ---- segment table ------------------------------------------------------- */

static int seg_find(struct node_store *s, uint32_t id) /* index or -1; under seg_lock */
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

static int seg_insert(struct node_store *s, uint32_t id, int fd) /* under seg_lock (write) */
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

static int seg_fd(struct node_store *s, uint32_t id) /* under seg_lock */
{
    int i = seg_find(s, id);
    return i < 0 ? -1 : s->seg[i].fd;
}

static uint64_t fd_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Creates an empty segment file (durable name) and puts it in the table. */
static int seg_create(struct node_store *s, uint32_t *id, int *fd)
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
    int rc = seg_insert(s, *id, *fd);
    pthread_rwlock_unlock(&s->seg_lock);
    if (rc) {
        close(*fd);
        unlinkat(s->dirfd, name, 0);
    }
    return rc;
}

static int wm_put(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t wm)
{
    uint8_t k[4];
    putbe(k, seg, 4);
    MDB_val key = {4, k}, val = {8, &wm};
    return mdb_err(mdb_put(txn, s->segs, &key, &val, 0));
}

static int wm_get(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t *wm)
{
    uint8_t k[4];
    putbe(k, seg, 4);
    MDB_val key = {4, k}, val;
    int rc = mdb_get(txn, s->segs, &key, &val);
    if (rc)
        return mdb_err(rc);
    memcpy(wm, val.mv_data, 8);
    return 0;
}

static void direct_close(struct node_store *s);

/* Registers a new active segment in a synced txn before any record enters it. */
static int roll(struct node_store *s)
{
    uint32_t id;
    int fd, rc = seg_create(s, &id, &fd);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0) {
        rc = wm_put(s, txn, id, 0);
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_err(mdb_txn_commit(txn));
    }
    if (rc == 0)
        rc = mdb_err(mdb_env_sync(s->env, 1));
    if (rc) /* the file stays, empty: it holds nothing, recovery or reuse is harmless */
        return rc;
    direct_close(s);
    s->active = id;
    s->active_fd = fd;
    s->active_off = 0;
    return 0;
}

/* ---- index helpers --------------------------------------------------------- */

static int loc_get(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES], struct loc *l)
{
    MDB_val key = {KEY_BYTES, (void *)k}, val;
    int rc = mdb_get(txn, s->chunks, &key, &val);
    if (rc)
        return mdb_err(rc);
    if (val.mv_size != sizeof(*l))
        return -EIO;
    memcpy(l, val.mv_data, sizeof(*l));
    return 0;
}

static int repair_mark(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES],
                       uint64_t version)
{
    MDB_val key = {KEY_BYTES, (void *)k}, val = {8, &version};
    return mdb_err(mdb_put(txn, s->repair, &key, &val, 0));
}

static int del_ok(int rc)
{
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

/*
 * Applies one durable record at seg/off to the index: the same rule for a fresh
 * batch and for the recovery rescan, so a redo reaches the same state.
 */
static int apply(struct node_store *s, MDB_txn *txn, enum node_record_type type,
                 const uint8_t k[KEY_BYTES], uint64_t version, uint32_t len, uint32_t crc,
                 uint32_t flags, uint32_t seg, uint64_t off)
{
    struct loc old;
    int rc = loc_get(s, txn, k, &old);
    if (rc && rc != -ENOENT)
        return rc;
    int exists = rc == 0;
    if (type == NODE_REC_TOMBSTONE && !exists)
        return -ENOENT;
    if (exists && old.version > version)
        return -ESTALE;
    MDB_val key = {KEY_BYTES, (void *)k};
    if (type == NODE_REC_PUT) {
        struct loc l = {
            .seg = seg, .len = len, .off = off, .version = version, .crc = crc, .flags = flags};
        MDB_val val = {sizeof(l), &l};
        rc = mdb_err(mdb_put(txn, s->chunks, &key, &val, 0));
    } else {
        rc = del_ok(mdb_del(txn, s->chunks, &key, NULL));
    }
    return rc ? rc : del_ok(mdb_del(txn, s->repair, &key, NULL));
}

/* ---- write path ------------------------------------------------------------ */

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
        struct io_uring_cqe *cqe;
        int rc = io_uring_submit_and_wait(ring, 1);
        if (rc >= 0)
            rc = io_uring_wait_cqe(ring, &cqe);
        if (rc < 0)
            return rc;
        int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
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
    struct io_uring_cqe *cqe;
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc >= 0)
        rc = io_uring_wait_cqe(ring, &cqe);
    if (rc < 0)
        return rc;
    rc = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return rc < 0 ? rc : 0;
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
static void direct_close(struct node_store *s)
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

static int index_batch(struct node_store *s, struct wreq **r, size_t n, uint64_t end)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!r[i]->placed)
            continue;
        int arc = apply(s, txn, r[i]->type, r[i]->key, r[i]->version, r[i]->len,
                        get32(r[i]->hdr + 48), r[i]->flags, s->active, r[i]->off);
        if (arc == -ENOENT || arc == -ESTALE)
            r[i]->rc = arc; /* a dead record, left for compaction */
        else
            rc = arc;
    }
    if (rc == 0)
        rc = wm_put(s, txn, s->active, end);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_err(mdb_txn_commit(txn));
}

/*
 * Commits a prefix of r[0..n) as one write + one flush + one txn, all into the
 * active segment. Returns how many requests it consumed (at least one); each
 * consumed request has its rc set.
 */
static size_t commit_batch(struct node_store *s, struct wreq **r, size_t n)
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
        uint64_t p = payload_at(at, r[i]->flags);
        piece_add(pc, &np, iov, &niov, false, at, r[i]->hdr, NODE_RECORD_HDR_BYTES);
        piece_add(pc, &np, iov, &niov, false, at, zeros, p - at - NODE_RECORD_HDR_BYTES);
        if (r[i]->flags & NODE_REC_ALIGNED) { /* the middle direct, the tail buffered */
            size_t mid = r[i]->len / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN;
            const uint8_t *d = r[i]->data;
            piece_add(pc, &np, iov, &niov, true, p, d, mid);
            piece_add(pc, &np, iov, &niov, false, p + mid, d + mid, r[i]->len - mid);
            piece_add(pc, &np, iov, &niov, false, p + mid, zeros, align_up(r[i]->len) - r[i]->len);
        } else {
            piece_add(pc, &np, iov, &niov, false, p, r[i]->data, r[i]->len);
        }
        bytes += rb;
        placed++;
    }
    if (placed == 0)
        return i;

    crash_point(s, "before_write");
    if (crash_due(s, "mid_write")) { /* a torn batch: half of it reaches the file */
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
    crash_point(s, "after_write");
    if (rc == 0)
        rc = uring_fdatasync(&s->ring, s->active_fd);
    crash_point(s, "after_flush");
    if (rc == 0)
        rc = index_batch(s, r, i, start + bytes);
    if (rc) {
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
    atomic_fetch_add(&s->appended, bytes);
    crash_point(s, "after_index");
    return i;
}

static void *writer_main(void *arg)
{
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
        /* Callbacks run unlocked: they may queue more writes. */
        for (size_t i = 0; i < n; i++)
            if (batch[i]->cb) {
                batch[i]->cb(batch[i]->rc, batch[i]->cb_arg);
                free(batch[i]);
                batch[i] = NULL;
            }
        pthread_mutex_lock(&s->q_mu);
        for (size_t i = 0; i < n; i++)
            if (batch[i])
                batch[i]->done = 1;
        pthread_cond_broadcast(&s->done_cond);
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
    id_of(r->key, &rec.id);
    node_record_encode(&rec, r->hdr);
    if (!s->opt.group_commit) {
        pthread_mutex_lock(&s->write_mu);
        commit_batch(s, &r, 1);
        pthread_mutex_unlock(&s->write_mu);
        if (r->cb) {
            r->cb(r->rc, r->cb_arg);
            free(r);
            return 0;
        }
        return r->rc;
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
    key_of(id, r.key);
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
    key_of(id, r->key);
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
    key_of(id, r.key);
    /* Skip the tombstone when there is nothing to delete; the batch rechecks. */
    MDB_txn *txn;
    struct loc l;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = loc_get(s, txn, r.key, &l);
    mdb_txn_abort(txn);
    if (rc)
        return rc;
    if (l.version > version)
        return -ESTALE;
    return submit(s, &r);
}

/* ---- read path ------------------------------------------------------------- */

/* Reads and verifies the record at l into buf[l->len]; under seg_lock (shared). */
static int read_record(struct node_store *s, const uint8_t k[KEY_BYTES], const struct loc *l,
                       void *buf)
{
    uint8_t hdr[NODE_RECORD_HDR_BYTES];
    int fd = seg_fd(s, l->seg);
    if (fd < 0)
        return -EBADMSG;
    /* An aligned record's gap between header and payload is read and dropped:
     * one read call either way. */
    uint8_t gap[NODE_RECORD_ALIGN];
    size_t skip = payload_at(l->off, l->flags) - l->off - sizeof(hdr);
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {gap, skip}, {buf, l->len}};
    int niov = 3;
    if (!skip)
        iov[1] = iov[2], niov = 2;
    if (!l->len)
        niov--;
    ssize_t got = preadv(fd, iov, niov, (off_t)l->off);
    if (got < 0)
        return -errno;
    if ((size_t)got != sizeof(hdr) + skip + l->len)
        return -EBADMSG; /* cut short */
    struct node_record rec;
    uint8_t rk[KEY_BYTES];
    if (node_record_decode(hdr, &rec) != 0)
        return -EBADMSG;
    key_of(&rec.id, rk);
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
    id_of(k, &id);
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
        rc = repair_mark(s, txn, k, version);
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_err(mdb_txn_commit(txn));
    }
    if (rc)
        inec_log(INEC_LOG_ERROR, "node", "cannot mark for repair err=%s", strerror(-rc));
}

static int get_impl(struct node_store *s, const struct node_chunk_id *id, void *buf, size_t cap,
                    void **alloc, size_t *len, uint64_t *version)
{
    if (!s || !id)
        return -EINVAL;
    uint8_t k[KEY_BYTES];
    key_of(id, k);
    struct loc l;
    MDB_txn *txn;
    atomic_fetch_add(&s->reads, 1);
    pthread_rwlock_rdlock(&s->seg_lock);
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc == 0) {
        rc = loc_get(s, txn, k, &l);
        mdb_txn_abort(txn);
    }
    if (rc == 0) {
        if (len)
            *len = l.len;
        if (version)
            *version = l.version;
        if (alloc) {
            buf = *alloc = malloc(l.len ? l.len : 1);
            if (!buf)
                rc = -ENOMEM;
        } else if (cap < l.len) {
            rc = -EMSGSIZE;
        }
    }
    int rd = rc == 0 ? read_record(s, k, &l, buf) : 0;
    pthread_rwlock_unlock(&s->seg_lock);
    atomic_fetch_sub(&s->reads, 1);
    if (rd) {
        if (l.len)
            memset(buf, 0, l.len); /* never hand out what failed verification */
        if (alloc) {
            free(*alloc);
            *alloc = NULL;
        }
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
    return get_impl(s, id, buf, cap, NULL, len, version);
}

int node_store_get_chunk_alloc(struct node_store *s, const struct node_chunk_id *id, void **buf,
                               size_t *len, uint64_t *version)
{
    if (!buf)
        return -EINVAL;
    *buf = NULL;
    return get_impl(s, id, NULL, 0, buf, len, version);
}

int node_store_list_chunks(struct node_store *s, const struct node_chunk_id *start_after,
                           size_t limit, node_chunk_cb cb, void *arg)
{
    if (!s || !cb)
        return -EINVAL;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = mdb_err(mdb_cursor_open(txn, s->chunks, &cur));
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    uint8_t k[KEY_BYTES];
    MDB_val key, val;
    int op = MDB_FIRST;
    if (start_after) {
        key_of(start_after, k);
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
        id_of(key.mv_data, &id);
        memcpy(&l, val.mv_data, sizeof(l));
        n++;
        if (cb(&id, l.version, l.len, arg))
            break;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? n : mdb_err(rc);
}

/* ---- metadata ---------------------------------------------------------------- */

/* The bound store.h promises; meta_index.c lays the key out in the index. */
static int meta_key_check(const char *bucket, const char *key)
{
    if (!bucket || !bucket[0] || !key)
        return -EINVAL;
    return strlen(bucket) + 1 + strlen(key) > NODE_KEY_MAX ? -ENAMETOOLONG : 0;
}

/* A write txn that must survive power loss (it cannot be redone from the log). */
static int commit_synced(struct node_store *s, MDB_txn *txn, int rc)
{
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_err(mdb_txn_commit(txn));
    return rc ? rc : mdb_err(mdb_env_sync(s->env, 1));
}

/* A metadata value (what node/meta_index.h stores as the entry's blob):
 * META_FORMAT, the version (little-endian), the blob. A value without the
 * format byte (written before versions were kept) is all blob at version 0,
 * so any versioned write replaces it. */
#define META_FORMAT 0x01
#define META_HEAD   9

static uint64_t meta_version(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    uint64_t ver = 0;
    if (v->mv_size >= META_HEAD && p[0] == META_FORMAT)
        for (int i = 8; i >= 1; i--)
            ver = ver << 8 | p[i];
    return ver;
}

static MDB_val meta_blob(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size >= META_HEAD && p[0] == META_FORMAT)
        return (MDB_val){v->mv_size - META_HEAD, (uint8_t *)v->mv_data + META_HEAD};
    return *v;
}

int node_store_put_meta(struct node_store *s, const char *bucket, const char *key, uint64_t version,
                        unsigned flags, const void *blob, size_t len, uint64_t *stored)
{
    return node_store_put_meta_old(s, bucket, key, version, flags, blob, len, stored, NULL, NULL);
}

/* A metadata write waiting for its group commit (see node_store_put_meta_old). */
struct meta_req {
    const char *bucket, *key;
    uint64_t version;
    unsigned flags;
    const void *blob;
    size_t len;
    uint64_t stored;
    bool want_old;
    void *old; /* want_old: the replaced blob (malloc'ed), once written */
    size_t old_len;
    int rc;
    bool done, wrote;
    struct meta_req *next;
};

/* The record part of a blob: up to its first NUL (after it, the gateway may
 * keep a binary tail of its own, different on each node). */
static size_t record_part(const void *blob, size_t len)
{
    const void *nul = len ? memchr(blob, 0, len) : NULL;
    return nul ? (size_t)((const char *)nul - (const char *)blob) : len;
}

/* The same record with another tail: the tail is replaced (a repair of it),
 * the version's record is not. */
static bool same_record(const MDB_val *have, const void *blob, size_t len)
{
    size_t a = record_part(have->mv_data, have->mv_size), b = record_part(blob, len);
    return a == b && a < len && memcmp(have->mv_data, blob, a) == 0;
}

/* r's compare-and-set inside txn (a child of the batch's): 0 written, 1
 * nothing to write (a retry, or a check that would keep it), or -errno. */
static int meta_put_in(struct node_store *s, MDB_txn *txn, struct meta_req *r)
{
    MDB_val cur, ob = {0, NULL};
    int rc = meta_index_get(txn, s->meta, r->bucket, r->key, &cur);
    if (rc == 0) {
        uint64_t have = meta_version(&cur);
        ob = meta_blob(&cur);
        r->stored = have;
        if (have > r->version)
            rc = -ESTALE;
        else if (have == r->version && !(r->flags & NODE_META_CHECK) && ob.mv_size == r->len &&
                 (r->len == 0 || memcmp(ob.mv_data, r->blob, r->len) == 0))
            rc = 1; /* the same record again: done, nothing to write */
        else if (have == r->version)
            rc = same_record(&ob, r->blob, r->len) ? 0 : -EEXIST;
    } else if (rc == -ENOENT) {
        rc = 0;
    }
    if (rc || (r->flags & NODE_META_CHECK))
        return rc ? rc : 1;
    /* Copied before the put: LMDB's pointer into the old page dies with it. */
    void *prev = r->want_old && ob.mv_data ? malloc(ob.mv_size ? ob.mv_size : 1) : NULL;
    uint8_t *v = malloc(META_HEAD + r->len);
    if (!v || (r->want_old && ob.mv_data && !prev)) {
        free(v);
        free(prev);
        return -ENOMEM;
    }
    if (prev)
        memcpy(prev, ob.mv_data, ob.mv_size);
    v[0] = META_FORMAT;
    for (int i = 1; i <= 8; i++)
        v[i] = (uint8_t)(r->version >> (8 * (i - 1)));
    if (r->len)
        memcpy(v + META_HEAD, r->blob, r->len);
    rc = meta_index_put(txn, s->meta, r->bucket, r->key, v, META_HEAD + r->len);
    free(v);
    if (rc) {
        free(prev);
        return rc;
    }
    r->old = prev;
    r->old_len = ob.mv_size;
    return 0;
}

/* Every request of the batch in one LMDB txn, each in a child txn of its own
 * (a failed one leaves the others), then one commit and one sync. */
static void meta_batch(struct node_store *s, struct meta_req *batch)
{
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn)), wrote = 0;
    for (struct meta_req *r = batch; r; r = r->next) {
        MDB_txn *child = NULL;
        r->rc = rc ? rc : mdb_err(mdb_txn_begin(s->env, txn, 0, &child));
        if (r->rc == 0)
            r->rc = meta_put_in(s, child, r);
        if (r->rc == 0)
            r->rc = mdb_err(mdb_txn_commit(child));
        else if (child)
            mdb_txn_abort(child);
        r->wrote = r->rc == 0;
        wrote += r->wrote;
        if (r->rc == 1)
            r->rc = 0;
    }
    if (rc)
        return;
    if (!wrote) {
        mdb_txn_abort(txn);
        return;
    }
    rc = commit_synced(s, txn, 0);
    for (struct meta_req *r = batch; rc && r; r = r->next)
        if (r->wrote) {
            r->rc = rc;
            r->wrote = false;
        }
}

/* Group commit of metadata writes: a writer queues its request; one that
 * finds no batch running runs every request queued so far as one batch
 * (one txn, one sync) and wakes their writers, so concurrent writes share a
 * sync instead of queueing for LMDB's write lock one sync each. */
int node_store_put_meta_old(struct node_store *s, const char *bucket, const char *key,
                            uint64_t version, unsigned flags, const void *blob, size_t len,
                            uint64_t *stored, void **old, size_t *old_len)
{
    if (stored)
        *stored = 0;
    if (old)
        *old = NULL;
    if (old_len)
        *old_len = 0;
    if (!s || (!blob && len) || version == 0 || (flags & ~NODE_META_CHECK))
        return -EINVAL;
    if (len > NODE_META_MAX)
        return -EMSGSIZE;
    int rc = meta_key_check(bucket, key);
    if (rc)
        return rc;
    struct meta_req r = {.bucket = bucket,
                         .key = key,
                         .version = version,
                         .flags = flags,
                         .blob = blob,
                         .len = len,
                         .want_old = old != NULL};
    pthread_mutex_lock(&s->mq_mu);
    if (s->mq_tail)
        s->mq_tail->next = &r;
    else
        s->mq_head = &r;
    s->mq_tail = &r;
    while (!r.done) {
        if (s->mq_busy) {
            pthread_cond_wait(&s->mq_cond, &s->mq_mu);
            continue;
        }
        struct meta_req *batch = s->mq_head;
        s->mq_head = s->mq_tail = NULL;
        s->mq_busy = true;
        pthread_mutex_unlock(&s->mq_mu);
        meta_batch(s, batch);
        pthread_mutex_lock(&s->mq_mu);
        for (struct meta_req *q = batch, *next; q; q = next) {
            next = q->next; /* q belongs to its writer once done */
            q->done = true;
        }
        s->mq_busy = false;
        pthread_cond_broadcast(&s->mq_cond);
    }
    pthread_mutex_unlock(&s->mq_mu);
    if (stored)
        *stored = r.stored;
    if (r.rc == 0 && r.old) {
        *old = r.old;
        *old_len = r.old_len;
    } else {
        free(r.old);
    }
    return r.rc;
}

int node_store_get_meta(struct node_store *s, const char *bucket, const char *key, void **blob,
                        size_t *len)
{
    if (!s || !blob || !len)
        return -EINVAL;
    *blob = NULL;
    int rc = meta_key_check(bucket, key);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    MDB_val mv;
    rc = meta_index_get(txn, s->meta, bucket, key, &mv);
    if (rc == 0) {
        mv = meta_blob(&mv);
        *blob = malloc(mv.mv_size ? mv.mv_size : 1);
        if (*blob) {
            memcpy(*blob, mv.mv_data, mv.mv_size);
            *len = mv.mv_size;
        } else {
            rc = -ENOMEM;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

int node_store_delete_meta(struct node_store *s, const char *bucket, const char *key)
{
    return node_store_delete_meta_if(s, bucket, key, NULL, 0);
}

int node_store_delete_meta_if(struct node_store *s, const char *bucket, const char *key,
                              const void *expect, size_t len)
{
    if (!s)
        return -EINVAL;
    int rc = meta_key_check(bucket, key);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc)
        return rc;
    MDB_val cur;
    if (expect && (rc = meta_index_get(txn, s->meta, bucket, key, &cur)) == 0) {
        MDB_val b = meta_blob(&cur); /* the caller read the record, not its version */
        if (b.mv_size != len || memcmp(b.mv_data, expect, len) != 0)
            rc = -ESTALE; /* changed since the caller read it: kept */
    }
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return commit_synced(s, txn, meta_index_del(txn, s->meta, bucket, key));
}

/* Listings hand out the blob, never the version in front of it. */
struct unversioned {
    node_meta_cb cb;
    void *arg;
};

static int unversioned_cb(const char *key, const void *value, size_t len, void *arg)
{
    struct unversioned *u = arg;
    MDB_val b = meta_blob(&(MDB_val){len, (void *)value});
    return u->cb(key, b.mv_data, record_part(b.mv_data, b.mv_size), u->arg);
}

int node_store_list_meta(struct node_store *s, const char *bucket, const char *prefix,
                         const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                         int *more)
{
    if (!s || !cb)
        return -EINVAL;
    if (more)
        *more = 0;
    int rc = meta_key_check(bucket, prefix ? prefix : "");
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    struct unversioned u = {cb, arg};
    rc =
        meta_index_list(txn, s->meta, bucket, prefix, start_after, limit, unversioned_cb, &u, more);
    mdb_txn_abort(txn);
    return rc;
}

/* ---- stats, repair list, scrub ---------------------------------------------- */

/* Sums live record bytes per segment id into live[] (indexed like ids[]). */
static int live_per_segment(struct node_store *s, MDB_txn *txn, const uint32_t *ids, size_t n,
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
        st->segment_bytes += fd_size(s->seg[i].fd);
    pthread_rwlock_unlock(&s->seg_lock);
    MDB_txn *txn;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = live_per_segment(s, txn, NULL, 0, NULL, &st->chunks, &st->live_bytes);
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

int node_store_list_repair(struct node_store *s, node_repair_cb cb, void *arg)
{
    if (!s || !cb)
        return -EINVAL;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = mdb_err(mdb_cursor_open(txn, s->repair, &cur));
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    MDB_val key, val;
    int n = 0;
    for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        struct node_chunk_id id;
        uint64_t v;
        id_of(key.mv_data, &id);
        memcpy(&v, val.mv_data, 8);
        n++;
        if (cb(&id, v, arg))
            break;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? n : mdb_err(rc);
}

struct idpage {
    struct node_chunk_id id[256];
    size_t n;
};

static int page_cb(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    (void)version;
    (void)len;
    struct idpage *p = arg;
    p->id[p->n++] = *id;
    return 0;
}

int node_store_scrub(struct node_store *s, node_scrub_cb cb, void *arg,
                     struct node_scrub_result *res)
{
    if (!s)
        return -EINVAL;
    struct node_scrub_result r = {0};
    struct idpage *page = malloc(sizeof(*page));
    if (!page)
        return -ENOMEM;
    void *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    /* In pages, so no read txn stays open for the whole scrub. */
    struct node_chunk_id last;
    int have_last = 0;
    for (;;) {
        page->n = 0;
        int n = node_store_list_chunks(s, have_last ? &last : NULL, 256, page_cb, page);
        if (n < 0) {
            rc = n;
            break;
        }
        for (size_t i = 0; i < page->n && rc == 0; i++) {
            size_t len = 0;
            uint64_t ver = 0;
            int g;
            while ((g = node_store_get_chunk(s, &page->id[i], buf, cap, &len, &ver)) == -EMSGSIZE) {
                void *nb = realloc(buf, len);
                if (!nb) {
                    g = -ENOMEM;
                    break;
                }
                buf = nb;
                cap = len;
            }
            if (g == 0) {
                r.checked++;
                r.bytes += len;
            } else if (g == -EBADMSG || g == -EIO) {
                r.checked++;
                r.corrupt++;
                if (cb)
                    cb(&page->id[i], ver, g, arg);
            } else if (g != -ENOENT) {
                rc = g;
            }
        }
        if (rc || page->n < 256)
            break;
        last = page->id[page->n - 1];
        have_last = 1;
    }
    free(buf);
    free(page);
    if (res)
        *res = r;
    return rc;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- compaction ------------------------------------------------------------- */

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
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = mdb_err(mdb_cursor_open(txn, s->chunks, &cur));
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    MDB_val key, val;
    for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        struct loc l;
        memcpy(&l, val.mv_data, sizeof(l));
        if (!bsearch(&l.seg, victims, nv, sizeof(*victims), cmp_u32))
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

static void seg_remove(struct node_store *s, uint32_t id)
{
    char name[32];
    pthread_rwlock_wrlock(&s->seg_lock);
    int i = seg_find(s, id);
    if (i >= 0) {
        close(s->seg[i].fd);
        memmove(&s->seg[i], &s->seg[i + 1], (s->nseg - (size_t)i - 1) * sizeof(s->seg[0]));
        s->nseg--;
    }
    pthread_rwlock_unlock(&s->seg_lock);
    snprintf(name, sizeof(name), SEG_NAME, id);
    unlinkat(s->dirfd, name, 0);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
    for (int64_t now = mono_ns(); now < due && !cancelled(o); now = mono_ns()) {
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
    int64_t t0 = mono_ns();
    if (n > 0)
        rc = seg_create(s, &out, &ofd);
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
        int rd = read_record(s, e[i].key, &e[i].old, buf);
        pthread_rwlock_unlock(&s->seg_lock);
        if (rd) /* marked for repair in the switch txn, if still current then */
            continue;
        struct node_record rec = {.type = NODE_REC_PUT,
                                  .version = e[i].old.version,
                                  .len = e[i].old.len,
                                  .crc = e[i].old.crc};
        uint8_t hdr[NODE_RECORD_HDR_BYTES];
        id_of(e[i].key, &rec.id);
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
        atomic_fetch_add(&s->used, fd_size(ofd));
    if (rc) {
        if (ofd >= 0) {
            atomic_fetch_sub(&s->used, fd_size(ofd));
            seg_remove(s, out);
        }
        free(e);
        return rc;
    }
    crash_point(s, "compact_copied");

    MDB_txn *txn;
    rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
    if (rc == 0) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct loc cur;
            int g = loc_get(s, txn, e[i].key, &cur);
            if (g == -ENOENT || (g == 0 && (cur.seg != e[i].old.seg || cur.off != e[i].old.off)))
                continue; /* overwritten or deleted meanwhile: the copy is dead */
            if (g) {
                rc = g;
            } else if (e[i].copied) {
                MDB_val key = {KEY_BYTES, e[i].key}, val = {sizeof(e[i].new), &e[i].new};
                rc = mdb_err(mdb_put(txn, s->chunks, &key, &val, 0));
            } else { /* corrupt: nothing valid left to point at */
                MDB_val key = {KEY_BYTES, e[i].key};
                rc = del_ok(mdb_del(txn, s->chunks, &key, NULL));
                if (rc == 0)
                    rc = repair_mark(s, txn, e[i].key, e[i].old.version);
                inec_log(INEC_LOG_WARN, "node",
                         "compaction dropped a corrupt chunk seg=%" PRIu32 " off=%" PRIu64,
                         e[i].old.seg, e[i].old.off);
            }
        }
        for (size_t v = 0; v < nv && rc == 0; v++) {
            uint8_t k[4];
            putbe(k, victims[v], 4);
            MDB_val key = {4, k};
            rc = del_ok(mdb_del(txn, s->segs, &key, NULL));
        }
        if (rc == 0 && ofd >= 0)
            rc = wm_put(s, txn, out, off);
        rc = commit_synced(s, txn, rc);
    }
    free(e);
    if (rc) {
        if (ofd >= 0) {
            atomic_fetch_sub(&s->used, fd_size(ofd));
            seg_remove(s, out);
        }
        return rc;
    }
    crash_point(s, "compact_switched");
    uint64_t freed = 0;
    for (size_t v = 0; v < nv; v++) {
        seg_remove(s, victims[v]);
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
        (*size)[i] = fd_size(s->seg[i].fd);
    }
    pthread_rwlock_unlock(&s->seg_lock);
    pthread_mutex_unlock(&s->write_mu);
    int rc = *ids && *size && *live ? 0 : -ENOMEM;
    MDB_txn *txn;
    if (rc == 0 && (rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))) == 0) {
        rc = live_per_segment(s, txn, *ids, *n, *live, NULL, NULL);
        for (size_t i = 0; rc == 0 && i < *n; i++) {
            uint64_t wm;
            if (wm_get(s, txn, (*ids)[i], &wm) != 0 || wm != (*size)[i])
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
    int rc = seg_snapshot(s, &ids, &size, &live, &n, &active);
    /* The active segment takes every new record; sealing it (the next write
     * rolls to a new one) lets a store that never fills a segment, or a
     * small one that churns, give its dead bytes back too. Only if nothing
     * was appended since the snapshot: then its live bytes are current. */
    pthread_mutex_lock(&s->write_mu);
    for (size_t i = 0; rc == 0 && opt->seal_active_bytes && i < n; i++)
        if (ids[i] && ids[i] == active && s->active == active && size[i] == s->active_off &&
            size[i] >= opt->seal_active_bytes && worth(size[i], live[i], opt->min_dead)) {
            s->active = 0; /* sealed: every batch of it is indexed (we hold write_mu) */
            direct_close(s);
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

/* ---- open, recovery, close --------------------------------------------------- */

void node_store_options_default(struct node_store_options *opt)
{
    *opt = (struct node_store_options){
        .segment_size = DEFAULT_SEG,
        .capacity = 0,
        .map_size = 4ull << 30,
        .group_commit = 1,
        .create = 1,
        .direct_min = NODE_DIRECT_MIN,
    };
}

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
        if (pread(fd, buf, rec.len, (off_t)payload_at(off, rec.flags)) != (ssize_t)rec.len ||
            node_crc32c(buf, rec.len) != rec.crc)
            break;
        uint8_t k[KEY_BYTES];
        key_of(&rec.id, k);
        int arc = apply(s, txn, rec.type, k, rec.version, rec.len, rec.crc, rec.flags, id, off);
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
        rc = wm_put(s, txn, id, off);
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
                rc = repair_mark(s, txn, key.mv_data, l.version);
        }
        mdb_cursor_close(cur);
    }
    if (rc == 0)
        rc = wm_put(s, txn, id, size);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_err(mdb_txn_commit(txn));
}

static int recover(struct node_store *s, char *err, size_t errlen)
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
        qsort(ids, n, sizeof(*ids), cmp_u32);

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
        rc = commit_synced(s, txn, rc ? rc : mdb_err(mdb_put(txn, s->info, &fk, &fv, 0)));
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
        int g = wm_get(s, txn, ids[i], &wm);
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
        uint64_t size = fd_size(fd);
        if (size < wm)
            rc = cut_short(s, ids[i], size, wm);
        else if (size > wm)
            rc = rescan(s, ids[i], fd, wm, size);
        if (rc == 0)
            rc = seg_insert(s, ids[i], fd);
        if (rc) {
            close(fd);
            snprintf(err, errlen, "recovering %s: %s", name, strerror(-rc));
            break;
        }
        atomic_fetch_add(&s->used, fd_size(fd));
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
            uint32_t id = (uint32_t)getbe(key.mv_data, 4);
            if (id > max_id)
                max_id = id;
            if (seg_find(s, id) < 0)
                inec_log(INEC_LOG_ERROR, "node", "segment missing id=%" PRIu32, id);
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    s->next_seg = max_id + 1;
    if (last) { /* keep appending to the newest segment while it has room */
        int fd = seg_fd(s, last);
        uint64_t size = fd_size(fd);
        if (size < s->opt.segment_size) {
            s->active = last;
            s->active_fd = fd;
            s->active_off = size;
        }
    }
    return rc;
}

int node_store_open(const char *dir, const struct node_store_options *opt, struct node_store **out,
                    char *err, size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    if (errlen)
        err[0] = 0;
    if (!dir || !out)
        return -EINVAL;
    *out = NULL;
    struct node_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    node_store_options_default(&s->opt);
    if (opt) {
        s->opt.capacity = opt->capacity;
        s->opt.group_commit = opt->group_commit;
        s->opt.create = opt->create;
        if (opt->direct_min)
            s->opt.direct_min = opt->direct_min;
        if (opt->segment_size)
            s->opt.segment_size = opt->segment_size;
        if (opt->map_size)
            s->opt.map_size = opt->map_size;
    }
    s->dirfd = s->lockfd = -1;
    pthread_rwlock_init(&s->seg_lock, NULL);
    pthread_mutex_init(&s->write_mu, NULL);
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_mutex_init(&s->mq_mu, NULL);
    pthread_cond_init(&s->mq_cond, NULL);
    pthread_mutex_init(&s->compact_mu, NULL);
    pthread_cond_init(&s->q_cond, NULL);
    pthread_cond_init(&s->done_cond, NULL);
    s->ring.ring_fd = -1;
    s->direct_fd = -1;

    const char *crash = getenv("INEC_CRASH_AT");
    if (crash && *crash) {
        snprintf(s->crash_at, sizeof(s->crash_at), "%s", crash);
        char *colon = strchr(s->crash_at, ':');
        s->crash_n = 1;
        if (colon) {
            *colon = 0;
            s->crash_n = strtol(colon + 1, NULL, 10);
        }
    }

    int rc = 0;
    const char *what = "data directory";
    if (s->opt.create && mkdir(dir, 0755) != 0 && errno != EEXIST)
        rc = -errno;
    if (rc == 0 && (s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0 && (s->lockfd = openat(s->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
        rc = -errno;
    if (rc == 0 && flock(s->lockfd, LOCK_EX | LOCK_NB) != 0)
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
    if (rc == 0) {
        what = "index";
        char path[4096];
        snprintf(path, sizeof(path), "%s/index.mdb", dir);
        rc = mdb_err(mdb_env_create(&s->env));
        if (rc == 0)
            rc = mdb_err(mdb_env_set_maxdbs(s->env, 5));
        if (rc == 0)
            rc = mdb_err(mdb_env_set_mapsize(s->env, s->opt.map_size));
        if (rc == 0) /* one read txn per concurrent reader thread */
            rc = mdb_err(mdb_env_set_maxreaders(s->env, 1024));
        if (rc == 0)
            rc = mdb_err(
                mdb_env_open(s->env, path, MDB_NOSUBDIR | MDB_NOTLS | MDB_NOMETASYNC, 0644));
        if (rc == 0)
            rc = mdb_err(mdb_reader_check(s->env, NULL));
    }
    if (rc == 0) {
        MDB_txn *txn;
        rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
        if (rc == 0) {
            rc = mdb_err(mdb_dbi_open(txn, "chunks", MDB_CREATE, &s->chunks));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "segments", MDB_CREATE, &s->segs));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "repair", MDB_CREATE, &s->repair));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "info", MDB_CREATE, &s->info));
            rc = commit_synced(s, txn, rc);
        }
    }
    if (rc == 0) {
        what = "io_uring";
        rc = io_uring_queue_init(8, &s->ring, 0);
        if (rc)
            s->ring.ring_fd = -1;
    }
    if (rc == 0) {
        what = "recovery";
        rc = recover(s, err, errlen);
    }
    if (rc == 0 && s->opt.group_commit) {
        what = "writer thread";
        rc = -pthread_create(&s->writer, NULL, writer_main, s);
        s->writer_running = rc == 0;
    }
    if (rc) {
        if (errlen && !err[0])
            snprintf(err, errlen, "%s: %s: %s", dir, what, node_store_strerror(rc));
        node_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void node_store_close(struct node_store *s)
{
    if (!s)
        return;
    if (s->writer_running) {
        pthread_mutex_lock(&s->q_mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->q_cond);
        pthread_mutex_unlock(&s->q_mu);
        pthread_join(s->writer, NULL);
    }
    direct_close(s);
    for (size_t i = 0; i < s->nseg; i++)
        close(s->seg[i].fd);
    free(s->seg);
    if (s->env)
        mdb_env_close(s->env);
    if (s->ring.ring_fd >= 0)
        io_uring_queue_exit(&s->ring);
    if (s->lockfd >= 0)
        close(s->lockfd);
    if (s->dirfd >= 0)
        close(s->dirfd);
    pthread_rwlock_destroy(&s->seg_lock);
    pthread_mutex_destroy(&s->write_mu);
    pthread_mutex_destroy(&s->q_mu);
    pthread_mutex_destroy(&s->mq_mu);
    pthread_cond_destroy(&s->mq_cond);
    pthread_mutex_destroy(&s->compact_mu);
    pthread_cond_destroy(&s->q_cond);
    pthread_cond_destroy(&s->done_cond);
    free(s);
}
