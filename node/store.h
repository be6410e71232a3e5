/*
 * The chunk store of a peer storage node: append-only segment files of
 * self-describing, checksummed records, plus an ordered LMDB index.
 *
 * On disk, under the node's data directory:
 *   seg-XXXXXXXX.log   segments; each is a sequence of records (header + payload)
 *   index.mdb          LMDB: chunk id -> location, per-object metadata, per-segment
 *                      "indexed up to" watermarks, the repair list
 *   meta.log           metadata writes durable before LMDB has them
 *                      (store_meta_log.c), applied at open
 *   LOCK               flock'ed by the one process that has the store open
 *
 * Invariants (the files of the store, node/store*.c, rely on them):
 *  - A record is durable (written and fdatasync'ed) before its index entry is
 *    committed, and a write is acknowledged (put/delete returns 0) only after
 *    the index commit. The segment's watermark moves in that same LMDB txn.
 *  - The index is the truth for everything it holds. Bytes of a segment past its
 *    watermark were never acknowledged; recovery rescans them, indexes the whole
 *    records (they are durable, so indexing them is harmless: an interrupted write
 *    may take effect, as with any timeout) and truncates at the first torn one.
 *  - A segment file with no watermark in LMDB holds nothing acknowledged (a
 *    fresh segment whose first batch never indexed, or an abandoned compaction
 *    output) and is removed at open.
 *  - A read never returns bytes whose CRC32C or identity does not match: it fails
 *    with -EBADMSG and the chunk goes on the repair list.
 *
 * All functions are safe to call from several threads at once.
 *
 * Crash tests: INEC_CRASH_AT=name[:n] in the environment makes the store
 * raise(SIGKILL) the n-th time it passes the named point: before_write,
 * mid_write (half the batch written), after_write, after_flush, after_index,
 * compact_copied, compact_switched, meta_logged (a metadata batch flushed to
 * the log, not acknowledged), meta_applied (the log applied to LMDB, not
 * restarted).
 */
#ifndef INEC_NODE_STORE_H
#define INEC_NODE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define NODE_CHUNK_MAX        (64u << 20) /* largest chunk payload */
#define NODE_OBJECT_ID_BYTES  16
#define NODE_RECORD_HDR_BYTES 64
#define NODE_KEY_MAX          2048       /* bucket + key bytes (S3: 63 + 1024) */
#define NODE_META_MAX         (1u << 20) /* metadata blob bytes */
#define NODE_RECORD_ALIGN     4096u      /* an aligned record's payload: offset, padding */
#define NODE_DIRECT_MIN       (256u << 10)
#define NODE_DIRECT_NEVER     UINT64_MAX

/* A chunk's identity. The object id is opaque to the node (the gateway names it). */
struct node_chunk_id {
    uint8_t object[NODE_OBJECT_ID_BYTES];
    uint64_t stripe;
    uint32_t index;
};

struct node_store_options {
    uint64_t segment_size; /* roll over to a new segment beyond this (default 256 MiB) */
    uint64_t capacity;     /* segment bytes for chunk data, 0 = unlimited: acts as a full disk
                              (tombstones and compaction may exceed it, to free space) */
    uint64_t map_size;     /* LMDB map size (default 4 GiB, sparse) */
    int group_commit;      /* 1: a writer thread batches concurrent writes into one flush */
    uint64_t direct_min;   /* a chunk of at least this many bytes, in a buffer aligned to
                              NODE_RECORD_ALIGN, is written with O_DIRECT (no copy into the
                              page cache) where the file system takes it; 0: the default
                              (NODE_DIRECT_MIN), NODE_DIRECT_NEVER: never */
    int create;            /* 1: create the directory and store when missing (default) */
};

void node_store_options_default(struct node_store_options *opt);

struct node_store;

/*
 * Opens (creating if needed) the store in `dir` and runs recovery. `opt` may be
 * NULL for the defaults. On failure returns a negative errno and, if `err` is not
 * NULL, a message in err[errlen]. -EBUSY: another process has the store open;
 * -EUCLEAN: segments exist but the index is new (lost?): nothing is discarded.
 */
int node_store_open(const char *dir, const struct node_store_options *opt, struct node_store **out,
                    char *err, size_t errlen);
void node_store_close(struct node_store *s); /* NULL is a no-op */

/*
 * Writes one chunk durably. A version lower than the stored one fails with
 * -ESTALE; an equal one replaces it (repair rewrites). -EMSGSIZE beyond
 * NODE_CHUNK_MAX, -ENOSPC when the disk or the capacity is full (nothing indexed).
 */
int node_store_put_chunk(struct node_store *s, const struct node_chunk_id *id, uint64_t version,
                         const void *data, size_t len);

/*
 * The same without blocking the caller (for an event loop): returns 0 once the
 * write is queued, and cb(rc, arg) later reports what put_chunk would have
 * returned; data must stay valid and unchanged until then. cb runs once, on the
 * store's writer thread (inline, before returning, without group commit), and
 * must not call the blocking put/delete. A negative return: not queued, no cb.
 * node_store_close() completes every queued write first.
 */
typedef void (*node_done_cb)(int rc, void *arg);
int node_store_put_chunk_async(struct node_store *s, const struct node_chunk_id *id,
                               uint64_t version, const void *data, size_t len, node_done_cb cb,
                               void *arg);

/*
 * Reads a chunk into buf[cap]; *len and *version (either may be NULL) receive its
 * length and version. -ENOENT: not stored. -EMSGSIZE: cap too small (*len says how
 * big). -EBADMSG: stored but corrupt (now on the repair list); buf holds no data.
 */
int node_store_get_chunk(struct node_store *s, const struct node_chunk_id *id, void *buf,
                         size_t cap, size_t *len, uint64_t *version);
/* As above into a malloc'ed buffer the caller frees. */
int node_store_get_chunk_alloc(struct node_store *s, const struct node_chunk_id *id, void **buf,
                               size_t *len, uint64_t *version);
/* The same without blocking, for an event loop: -EAGAIN (and nothing else
 * done, a corrupt chunk included: the blocking read reports it) unless the
 * chunk is at most `max` (> 0) bytes, entirely in the page cache and verified. */
int node_store_get_chunk_cached(struct node_store *s, const struct node_chunk_id *id, size_t max,
                                void **buf, size_t *len, uint64_t *version);

/* Deletes (durable tombstone) a chunk whose version is <= `version`; -ENOENT, -ESTALE. */
int node_store_delete_chunk(struct node_store *s, const struct node_chunk_id *id, uint64_t version);

/*
 * Lists stored chunks in id order after `start_after` (NULL: from the start), at
 * most `limit` (0: no limit). The callback returns 0 to go on, non-zero to stop.
 * Returns the number listed or a negative errno.
 */
typedef int (*node_chunk_cb)(const struct node_chunk_id *id, uint64_t version, uint32_t len,
                             void *arg);
int node_store_list_chunks(struct node_store *s, const struct node_chunk_id *start_after,
                           size_t limit, node_chunk_cb cb, void *arg);

/*
 * Per-object metadata: bucket + key -> an opaque blob the gateway defines. Index
 * order is bucket, then key bytes. Buckets are non-empty and hold no NUL;
 * bucket + key must fit NODE_KEY_MAX (-ENAMETOOLONG), a blob NODE_META_MAX
 * (-EMSGSIZE). Keys beyond LMDB's key size are indexed by their first bytes
 * and a hash (node/meta_index.h), in the same order. Writes are durable on return.
 *
 * Every record carries a version (> 0) and a write is a compare-and-set by
 * the store's one metadata writer (store_meta.c): the record is kept only if
 * its version is above the stored one's. The same version with the same
 * bytes again is a success that
 * writes nothing (a retry); a lower version is -ESTALE, the same version with
 * other bytes -EEXIST, and either way *stored (may be NULL) is the version the
 * key holds. A blob may end in a tail of the gateway's after a NUL (a shard of
 * an inline object): the same version whose bytes before the NUL are the same
 * replaces the tail (a repair), and listings hand out only the part before it.
 * NODE_META_CHECK stores nothing and answers what a write of that version
 * would (0, -ESTALE, or -EEXIST for an equal version).
 */
#define NODE_META_CHECK 1u
/* Of the RPC only (node/rpc.h): answer the record the write replaced. */
#define NODE_META_OLD 2u
int node_store_put_meta(struct node_store *s, const char *bucket, const char *key, uint64_t version,
                        unsigned flags, const void *blob, size_t len, uint64_t *stored);
/* The same, and when the write replaced a record, that record's blob in *old
 * (malloc'ed; NULL when the key held none or nothing was written): a writer
 * frees what its write replaced without reading the key first. */
int node_store_put_meta_old(struct node_store *s, const char *bucket, const char *key,
                            uint64_t version, unsigned flags, const void *blob, size_t len,
                            uint64_t *stored, void **old, size_t *old_len);
int node_store_get_meta(struct node_store *s, const char *bucket, const char *key, void **blob,
                        size_t *len); /* malloc'ed; -ENOENT */
int node_store_delete_meta(struct node_store *s, const char *bucket, const char *key);
/* Deletes it only if the stored blob is still expect[len] (NULL: any): -ESTALE
 * when it differs, so a record written since the caller read it survives. */
int node_store_delete_meta_if(struct node_store *s, const char *bucket, const char *key,
                              const void *expect, size_t len);

/*
 * Lists metadata of `bucket` whose key starts with `prefix` (NULL or "" for all),
 * in key order, strictly after `start_after` (NULL or "" for none), at most `limit`
 * (0: no limit). *more (may be NULL) is set when further keys match. Returns the
 * number listed or a negative errno.
 */
typedef int (*node_meta_cb)(const char *key, const void *blob, size_t len, void *arg);
int node_store_list_meta(struct node_store *s, const char *bucket, const char *prefix,
                         const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                         int *more);

struct node_store_stats {
    uint64_t segments;
    uint64_t segment_bytes; /* on disk, all segments */
    uint64_t chunks;        /* indexed chunks */
    uint64_t live_bytes;    /* records (header + payload) the index points at */
    uint64_t dead_bytes;    /* segment_bytes - live_bytes: overwritten, deleted, tombstones */
    uint64_t metas;
    uint64_t repair; /* chunks on the repair list */
    uint64_t capacity;
    uint64_t compacted_segments; /* segments compaction removed since the store opened */
    uint64_t compacted_bytes;    /* segment bytes compaction gave back since then */
    uint64_t direct_bytes;       /* chunk payload bytes written with O_DIRECT since then */
};
int node_store_stats(struct node_store *s, struct node_store_stats *st);

/*
 * Re-reads and verifies every indexed chunk. Corrupt ones go on the repair list
 * and, if cb is not NULL, are reported to it with the error (-EBADMSG).
 */
struct node_scrub_result {
    uint64_t checked;
    uint64_t bytes;
    uint64_t corrupt;
};
typedef void (*node_scrub_cb)(const struct node_chunk_id *id, uint64_t version, int err, void *arg);
int node_store_scrub(struct node_store *s, node_scrub_cb cb, void *arg,
                     struct node_scrub_result *res);

/*
 * Garbage collection: every sealed segment whose dead share is at least
 * `min_dead` (0..1; 0 means any dead byte) has its live records copied to a new
 * segment, which is made durable, the index switched over in one LMDB txn, then
 * the old segment unlinked. Crash-safe at every step. Live records that fail
 * verification are dropped from the index and left on the repair list.
 */
struct node_compact_result {
    uint64_t segments;     /* segments removed */
    uint64_t bytes_copied; /* live record bytes rewritten */
    uint64_t bytes_freed;  /* segment bytes released */
    uint64_t scan_ns;      /* finding each segment's live bytes: a scan of the chunk index */
};
/* A scan of the chunk index (~15-50 ns a chunk) repeats, by the compactor or
 * node_store_stats, at most once per this many times its length. */
#define NODE_SCAN_SPACING 20
int node_store_compact(struct node_store *s, double min_dead, struct node_compact_result *res);

/*
 * The same with the knobs of background compaction (the node service's):
 *  - seal_active_bytes: the active segment, once at least this big and past
 *    min_dead, is sealed (the next write rolls to a new segment) and compacted
 *    too; 0 leaves it alone (it is sealed only when it fills);
 *  - rate_bytes: live bytes copied per second at most (0: no limit);
 *  - yield_ms: before each record copied, waits up to this long while reads
 *    are in flight or writes queued, so foreground I/O goes first;
 *  - cancel(arg): polled between records; non-zero stops with -ECANCELED
 *    (nothing half done stays: the copy so far is dropped).
 * Victims are merged: their live records go to one new segment per
 * segment_size of live bytes.
 */
struct node_compact_options {
    double min_dead;
    uint64_t seal_active_bytes;
    uint64_t rate_bytes;
    int yield_ms;
    int (*cancel)(void *arg);
    void *arg;
};
int node_store_compact_opts(struct node_store *s, const struct node_compact_options *opt,
                            struct node_compact_result *res);

/* Record bytes appended since open (puts, tombstones): dead bytes can only
 * grow when this does, so a background compactor looks only then. */
uint64_t node_store_appended(struct node_store *s);

/* The repair list: chunks found corrupt; a successful put or delete clears an entry. */
typedef int (*node_repair_cb)(const struct node_chunk_id *id, uint64_t version, void *arg);
int node_store_list_repair(struct node_store *s, node_repair_cb cb, void *arg);

const char *node_store_strerror(int err);

/*
 * The record format, public for tests and tools. A record is a 64-byte header then
 * the payload. Header (little-endian): magic "INCR", u16 header bytes, u8 type,
 * u8 flags, object id[16], u64 stripe, u32 index, u32 payload bytes, u64 version,
 * u32 payload crc32c, 8 zero bytes, u32 crc32c of bytes 0..59.
 * Flag NODE_REC_ALIGNED (a chunk written with O_DIRECT): zeros follow the header
 * up to the next NODE_RECORD_ALIGN boundary of the file, where the payload starts,
 * and zeros pad the payload to a multiple of NODE_RECORD_ALIGN; the next record
 * starts after them. Without it the payload follows the header and the next
 * record follows the payload.
 */
#define NODE_REC_ALIGNED 1u
enum node_record_type { NODE_REC_PUT = 1, NODE_REC_TOMBSTONE = 2 };
struct node_record {
    enum node_record_type type;
    struct node_chunk_id id;
    uint64_t version;
    uint32_t len;
    uint32_t crc;  /* of the payload */
    uint8_t flags; /* NODE_REC_ALIGNED or 0 */
};
/* Where a record at file offset `off` ends (the next record's offset). */
uint64_t node_record_end(uint64_t off, uint32_t len, uint8_t flags);
/* Fills hdr from rec (rec->crc must already be the payload's crc32c). */
void node_record_encode(const struct node_record *rec, uint8_t hdr[NODE_RECORD_HDR_BYTES]);
/* Parses and checks a header: -EBADMSG on bad magic, size, type or header crc. */
int node_record_decode(const uint8_t hdr[NODE_RECORD_HDR_BYTES], struct node_record *rec);
uint32_t node_crc32c(const void *data, size_t len);

#endif
