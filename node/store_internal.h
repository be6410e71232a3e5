/*
 * Shared by the files of the chunk store (node/store*.c): the store's state,
 * the index's value, and the few helpers more than one of them calls.
 * Nothing outside node/store*.c includes it; the API is node/store.h.
 */
#ifndef INEC_NODE_STORE_INTERNAL_H
#define INEC_NODE_STORE_INTERNAL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <liburing.h>
#include <lmdb.h>

#include "node/lmdb_err.h"
#include "node/store.h"

#define KEY_BYTES 28  /* object id, stripe (BE), index (BE): id order */
#define BATCH_MAX 510 /* records per write batch: two iovecs each, under IOV_MAX */
#define SEG_NAME  "seg-%08" PRIx32 ".log"

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

/* A record of the batch acknowledged ahead of its index txn (store_write.c). */
struct acked {
    uint8_t key[KEY_BYTES];
    struct loc loc;
    bool tombstone;
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
    int broken;              /* refuse writes: a failed batch could not be truncated away, or an
                              * acknowledged one not indexed */
    int direct_fd;           /* the active segment opened O_DIRECT (-1: not open) */
    uint32_t direct_seg;     /* which segment direct_fd is */
    _Atomic bool direct_off; /* the file system refused O_DIRECT: every write buffered */
    _Atomic uint64_t direct_bytes;

    /* The batch between its flush and its index txn's commit: acknowledged
     * once its records are durable (the txn is a second flush, and one lost
     * is redone by the tail rescan), so a lookup tries it before the index
     * (store_acked_get). Written by the write_mu holder, under acked_mu;
     * empty whenever write_mu is free, unless the commit failed (`broken`). */
    pthread_mutex_t acked_mu;
    pthread_cond_t acked_cond; /* nacked went to 0 */
    struct acked acked[BATCH_MAX];
    size_t nacked;

    pthread_mutex_t mq_mu; /* metadata writes' group commit */
    pthread_cond_t mq_cond;
    struct meta_req *mq_head, *mq_tail;
    bool mq_busy; /* a writer runs a batch, or the pending map is being applied */

    /* Metadata written to the log, not yet to LMDB (store_meta.c,
     * store_meta_log.c): tsearch trees of struct pending by "bucket NUL key
     * NUL". `pending` holds the active half of the log's values; `frozen`,
     * once that half filled, the other half's, which the applier thread puts
     * into LMDB meanwhile. The trees change only under pend_mu, by the holder
     * of mq_busy (the applier only reads `frozen` and sets frozen_done);
     * readers look under pend_mu: pending, then frozen, then LMDB. */
    pthread_mutex_t pend_mu;
    pthread_cond_t pend_cond; /* a map frozen, frozen_done or frozen_rc set, applier_stop */
    void *pending, *frozen;
    _Atomic size_t npending; /* values in both trees */
    size_t nfrozen;
    uint64_t frozen_epoch; /* the frozen half's */
    bool frozen_done;      /* the frozen map is in LMDB: the next batch drops it */
    int frozen_rc;         /* the applier's last failure (it tries again) */
    bool applier_on, applier_stop;
    pthread_t applier;
    int mlog_fd;
    int mlog_half;                 /* the active half of meta.log */
    uint64_t mlog_epoch, mlog_off; /* its epoch; where its next record goes */

    pthread_mutex_t q_mu; /* group commit queue */
    pthread_cond_t q_cond, done_cond;
    struct wreq *q_head, *q_tail;
    int stop;
    int writer_running;
    pthread_t writer;

    pthread_mutex_t compact_mu;
    _Atomic int reads;         /* chunk reads in flight: compaction yields to them */
    _Atomic uint64_t appended; /* record bytes ever appended and indexed (tells auto
                                * compaction and the stats' scan to look) */
    _Atomic uint64_t compacted_segments, compacted_bytes; /* freed by compaction, ever */

    /* node_store_stats' scan of the chunk index (store_stats.c): its totals,
     * what had been appended and compacted then, when and how long it took. */
    pthread_mutex_t scan_mu;
    bool scanned;
    uint64_t scan_appended, scan_compacted, scan_chunks, scan_live;
    int64_t scan_at_ns, scan_ns;

    char crash_at[32]; /* INEC_CRASH_AT=name[:n]: raise(SIGKILL) at the n-th hit */
    long crash_n;
    atomic_long crash_hits;
};

static inline int mdb_err(int rc)
{
    return node_lmdb_err(rc);
}

/* store_record.c: byte order, and where a record's payload lies. */
uint32_t store_get32(const uint8_t *p);
void store_putbe(uint8_t *p, uint64_t v, int n);
uint64_t store_getbe(const uint8_t *p, int n);
uint64_t store_align_up(uint64_t v);
uint64_t store_payload_at(uint64_t off, uint32_t flags);

/* store_index.c: the chunks index's keys and entries. */
void store_key_of(const struct node_chunk_id *id, uint8_t k[KEY_BYTES]);
void store_id_of(const uint8_t k[KEY_BYTES], struct node_chunk_id *id);
int store_loc_get(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES], struct loc *l);
int store_repair_mark(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES],
                      uint64_t version);
int store_del_ok(int rc);
int store_apply(struct node_store *s, MDB_txn *txn, enum node_record_type type,
                const uint8_t k[KEY_BYTES], uint64_t version, uint32_t len, uint32_t crc,
                uint32_t flags, uint32_t seg, uint64_t off);
int store_read_cursor(struct node_store *s, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur);
int store_commit_synced(struct node_store *s, MDB_txn *txn, int rc);

/* store_segments.c: the segment table and each segment's watermark. */
int store_seg_find(struct node_store *s, uint32_t id);
int store_seg_insert(struct node_store *s, uint32_t id, int fd);
int store_seg_fd(struct node_store *s, uint32_t id);
uint64_t store_fd_size(int fd);
int store_seg_create(struct node_store *s, uint32_t *id, int *fd);
void store_seg_remove(struct node_store *s, uint32_t id);
int store_wm_put(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t wm);
int store_wm_get(struct node_store *s, MDB_txn *txn, uint32_t seg, uint64_t *wm);
int store_cmp_u32(const void *a, const void *b);

/* store_write.c */
void store_direct_close(struct node_store *s);
/* k in the acknowledged batch not yet indexed: 0 and *l, -ENOENT (deleted
 * there), or 1 (not there: the index says). Called before the index is
 * read, so a record leaves the batch only once the index has it. */
int store_acked_get(struct node_store *s, const uint8_t k[KEY_BYTES], struct loc *l);
/* Returns once no batch is acknowledged and not yet indexed, or after at
 * most SETTLE_MAX_S: for the readers of the whole index (stats, listings,
 * scrub), which do not look at that batch. */
void store_settle(struct node_store *s);
void *store_writer_main(void *arg);

/* store_read.c */
/* rwf: 0, or RWF_NOWAIT (-EAGAIN unless every byte is in the page cache). */
int store_read_record(struct node_store *s, const uint8_t k[KEY_BYTES], const struct loc *l,
                      void *buf, int rwf);

/* store_stats.c */
int store_live_per_segment(struct node_store *s, MDB_txn *txn, const uint32_t *ids, size_t n,
                           uint64_t *live, uint64_t *chunks, uint64_t *total);

/* store_meta_log.c: the metadata log, two halves of META_LOG_BYTES. */
#define META_LOG_BYTES (8u << 20) /* a half: holds several NODE_META_MAX values */
#define META_LOG_HDR   24
size_t store_meta_log_encode(uint8_t *dst, uint64_t epoch, const char *k, size_t klen,
                             const void *v, size_t vlen);
/* Appends and flushes len bytes of records to the active half: 0, -ENOSPC
 * (it is full) or -errno. */
int store_meta_log_append(struct node_store *s, const void *buf, size_t len);
/* In the txn that applies a half's values: that epoch and those before it
 * are applied. */
int store_meta_log_applied(MDB_txn *txn, MDB_dbi info, uint64_t epoch);
/* Once the active half's values are durable in LMDB: the next epoch, in
 * the same half from offset 0. */
void store_meta_log_restart(struct node_store *s);
/* The next epoch in the other half (whose values LMDB has), from offset 0. */
void store_meta_log_switch(struct node_store *s);
/* Opens (creates) meta.log and applies what it holds that LMDB lacks. */
int store_meta_log_open(struct node_store *s);

/* store_meta.c: -EINVAL without a bucket or key, -ENAMETOOLONG past
 * NODE_KEY_MAX. */
int store_meta_key_check(const char *bucket, const char *key);
/* A stored metadata value's blob (after its format byte and version), and
 * a blob's record part: up to its first NUL (after it, the gateway may keep
 * a binary tail of its own, different on each node). */
MDB_val store_meta_blob(const MDB_val *v);
size_t store_meta_record_part(const void *blob, size_t len);
/* The values not in LMDB yet (the active half's, else the frozen one's) of
 * bucket's keys (bucket NULL: every bucket's) that start with prefix and
 * sort after `after` ("": any), copied; sorted by key when a bucket is
 * given; with `records`, their record parts too (what a listing hands
 * out). */
struct meta_pending_entry {
    char *k;         /* "bucket NUL key NUL" */
    const char *key; /* into k */
    bool put;        /* else a delete */
    uint8_t *v;      /* the record part, when asked for */
    size_t vlen;
};
int store_meta_pending_list(struct node_store *s, const char *bucket, const char *prefix,
                            const char *after, bool records, struct meta_pending_entry **out,
                            size_t *n);
void store_meta_pending_list_free(struct meta_pending_entry *e, size_t n);
/* What the pending values e add to LMDB's count of records (node_store_stats):
 * the puts of keys it lacks, less the deletes of keys it has. txn: a snapshot
 * taken after e was copied, as a read looks (a value leaves the maps only once
 * LMDB has it). */
int64_t store_meta_pending_delta(struct node_store *s, MDB_txn *txn,
                                 const struct meta_pending_entry *e, size_t n);
/* The applier thread, started once the log is replayed. */
int store_meta_start(struct node_store *s);
/* Applies every value of the log to LMDB now, in the metadata writer's
 * turn (the tests move values from the log under their readers with it). */
int store_meta_flush(struct node_store *s);
void store_meta_close(struct node_store *s);

/* store_recover.c */
int store_recover(struct node_store *s, char *err, size_t errlen);

/* store.c: CLOCK_MONOTONIC in ns. */
int64_t store_now_ns(void);

/* store.c: the INEC_CRASH_AT test hook. */
int store_crash_due(struct node_store *s, const char *name);
void store_crash_point(struct node_store *s, const char *name);

#endif
