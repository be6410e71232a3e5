/*
 * The repair service, internal to the object layer (repair*.c, scanner.c,
 * tombstones.c; the put and get paths and open.c call in through these
 * functions).
 *
 * Pieces:
 *   queue    durable, on the nodes: one metadata record per degraded stripe in
 *            the store bucket ".repair" (replicated like every record), so a
 *            stripe noticed by a gateway that then died is still repaired by
 *            the next one. Keys sort the stripes with the most lost chunks
 *            first. Reports from reads and degraded writes are buffered for a
 *            moment and flushed by the worker (a crash then loses at most the
 *            reports of that moment, which the scanner finds again).
 *   worker   drains the queue: each stripe's lost chunks are rebuilt by the
 *            pool's repair DEG node to node (one loss: PPR, more or large
 *            chunks: ECPipe, or what the pool's scheme says), stored on new
 *            homes chosen by placement, then the object record is updated by
 *            compare-and-set (repair.c).
 *   scanner  walks every record's layout against the nodes' chunk
 *            inventories and repair lists, queues what is lost and collects
 *            orphan chunks (scanner.c).
 *   admin    node states set through the control API (out = gone for good,
 *            draining, up) and the repair settings (pause, throttle) live in
 *            the record ".cluster"/"admin" on the nodes, so every gateway
 *            and every restart sees them.
 */
#ifndef INEC_OBJECT_REPAIR_H
#define INEC_OBJECT_REPAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "object/objects_internal.h"

struct gw_objects;

#define GW_REPAIR_BUCKET ".repair"
#define GW_ADMIN_BUCKET  ".cluster"
#define GW_ADMIN_KEY     "admin"
/* Used by repair.c and repair_admin.c. */
#define GW_REPAIR_ADMIN_EVERY_MS 3000
/* Used by repair_note.c and repair_state.c. */
#define GW_REPAIR_PENDING_MAX 10000
/* A read's report of the same chunks of a stripe again within this long is
 * dropped (repair_note.c): it is queued already, and each report would wake
 * the worker into a pass over the queue. */
#define GW_REPAIR_NOTE_REPEAT_MS 10000
/* Used by repair.c and repair_state.c. */
/* past it a scan may queue a repaired stripe again: a check */
#define GW_REPAIR_REMOVED_MAX 100000

/* Used by repair.c, repair_admin.c, repair_service.c and repair_state.c. */
enum scheme { SCHEME_AUTO, SCHEME_PPR, SCHEME_ECPIPE, SCHEME_RS, NSCHEMES };

/* Used by repair.c, repair_admin.c, repair_note.c, repair_service.c, repair_state.c and
 * repair_status.c. */
struct gw_repair {
    struct gw_objects *o;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    pthread_t worker, scanner;
    bool worker_started, scanner_started;

    /* settings (lock) */
    bool paused;
    double throttle_mbps; /* 0: unlimited */
    int scan_interval_ms; /* 0: no periodic scan (still on a kick, and metadata still moves) */
    int64_t scan_at_ms;   /* when the next periodic scan is due (0: not counted yet) */
    int64_t down_out_ms;
    int64_t orphan_grace_ms;
    enum scheme scheme_default;
    json_t *schemes; /* pool name -> scheme name */
    uint64_t admin_version;
    int64_t admin_loaded_ms;
    bool kick;           /* the worker has something new to do */
    uint64_t note_wakes; /* reports that set kick (the worker clears kick, not this) */
    bool scan_now;       /* the scanner walks at once */
    bool scanning;       /* a walk is under way */
    int64_t scrub_interval_ms, last_scrub_ms;
    bool scrub_now;

    json_t *pending; /* queue key -> entry, not yet on the nodes */
    json_t *removed; /* queue keys the worker removed since the scan under way began */
    json_t *noted;   /* queue key -> {"lost", "ms"}: reads' reports lately (repair_note.c) */

    /* progress of the current run (lock) */
    bool running;
    int64_t run_start_ms, run_paused_ms, paused_since_ms;
    uint64_t run_stripes_done, run_bytes_done;
    uint64_t left_stripes, left_bytes, waiting_stripes; /* at the last listing */
    int64_t oldest_ns;
    int64_t pace_start_ms;
    uint64_t pace_bytes;

    /* totals since start */
    uint64_t stripes_repaired, bytes_repaired, chunks_moved, failed, unrecoverable;
    /* the last scan */
    uint64_t degraded_by_lost[PLACE_MAX_CHUNKS + 1];
    int scan_maxlost;
    uint64_t scan_stripes, orphans_deleted, tombstones_deleted, scans;
    int64_t tombstone_grace_ms, tombstones_last_ms;
    int64_t scan_ms, scan_done_ns;

    struct codec *codecs[GW_MAX_POOLS][NSCHEMES];
};

/* repair_state.c: The repair service's shared state */

/* Asks the scanner for a walk now. */
void gw_scanner_kick(struct gw_objects *o);

/* For the scanner: node i counts as lost (out, or down past the
 * configured time); node i may take new chunks. */
bool gw_repair_node_lost(struct gw_objects *o, int node);

/* For the queue: the worker removed the entry qkey since the scan
 * under way began. */
bool gw_repair_removed_in_scan(struct gw_objects *o, const char *qkey);

bool gw_repair_node_usable(struct gw_objects *o, int node);

/* A scrub of every node is due (scrub_interval_ms passed, or one was asked
 * for); true marks it done now. */
bool gw_repair_scrub_due(struct gw_objects *o);

/* The scanner's sleep, until a scan is due (the interval passed, or a
 * kick: *full; *asked: it was a kick) or until migrate_at_ms (gw_now_ms: a
 * metadata move to try again; INT64_MAX: none). False when the service stops. */
bool gw_repair_wait_scan(struct gw_objects *o, int64_t migrate_at_ms, int64_t *grace_ms, bool *full,
                         bool *asked);

bool gw_repair_stopping(struct gw_objects *o);

/* The tombstone grace (tombstone_grace_ms, default 1 day) when a collection
 * of tombstones is due (once per grace / 24 at most), else -1. */
int64_t gw_repair_tombstones_due(struct gw_objects *o);

extern const char *const gw_repair_scheme_names[NSCHEMES];
enum scheme gw_repair_scheme_parse(const char *s);
int64_t gw_node_silent_ms(struct gw_objects *o, int node);
bool gw_node_draining(struct gw_objects *o, int node);

/* repair_queue.c: The durable repair queue */

int gw_rq_put(struct gw_objects *o, json_t *entry); /* entry: as gw_repair_note makes it */

/* A report of the scan under way: as gw_rq_put, unless the stripe is queued
 * under the entry's key for the same lost chunks (then it is left as it is)
 * or the worker removed that key since the scan began (then nothing is
 * queued). 1 when the entry is new in the queue, 0 when it was there already
 * or is not queued, or -errno. */
int gw_rq_add_scanned(struct gw_objects *o, json_t *entry);

/* Every entry in key order (most losses first); cb returns non-zero to stop. */
int gw_rq_list(struct gw_objects *o, int (*cb)(const char *qkey, json_t *entry, void *arg),
               void *arg);

int gw_rq_remove(struct gw_objects *o, const char *qkey);

/* The queue key of an entry. */
void gw_rq_key(const json_t *entry, char *out, size_t outlen);

/* repair_note.c: Reports of degraded stripes */

/* A degraded stripe seen by a read, a write or the scanner: chunk lost[i]
 * (on node at[i], may be NULL; why: reason[i]) of the stripe {oid_hex,
 * stripe} of the record bucket/key, chunk length len. sync: on the nodes
 * before this returns (else flushed by the worker within a moment).
 * scan: a report of the scan under way (sync), dropped when the worker
 * removed the stripe's entry since the scan began (gw_rq_add_scanned). */
void gw_repair_note(struct gw_objects *o, const char *bucket, const char *key, const char *oid_hex,
                    uint64_t stripe, uint64_t len, const int *lost, const char *const *at,
                    const char *const *reason, int nlost, bool sync, bool scan);

void gw_repair_flush_pending(struct gw_repair *r);

/* repair_admin.c: The admin record */

/* The records moved to the homes of members excl[] leaves out: from now on
 * they are the metadata homes (persisted in the admin record). */
int gw_repair_meta_migrated(struct gw_objects *o, const bool *excl);

void gw_repair_settings_apply(struct gw_repair *r, const json_t *rep);
void gw_repair_admin_load(struct gw_objects *o);

/* repair.c: The repair worker */

void *gw_repair_worker_main(void *arg);

/* repair_status.c: Repair status for the control API and metrics */

/* Scan results for status and metrics. */
void gw_repair_scan_done(struct gw_objects *o, const uint64_t *degraded_by_lost, int maxlost,
                         uint64_t stripes, uint64_t orphans_deleted, uint64_t tombstones_deleted,
                         int64_t duration_ms);

/* tombstones.c: Collecting old tombstones and dead ACL records */

/* Removes the tombstones seen in scans grace_ms apart from every node, when
 * that is safe (tombstones.c says when), and the ACL records of objects
 * overwritten or deleted that long; *seen carries sightings between calls
 * (a JSON object the caller frees). Returns how many tombstones it removed. */
uint64_t gw_tombstones_collect(struct gw_objects *o, json_t **seen, int64_t grace_ms);

/* scanner.c: The repair scanner */

void *gw_scanner_main(void *arg);

/* repair_service.c: Starts and stops the repair service */

/* Starts the worker and the scanner; opts is the "repair" section of the
 * gateway options (may be NULL). */
int gw_repair_start(struct gw_objects *o, const json_t *opts);

/* Stops both threads (a repair in progress finishes first) and flushes the
 * reports buffered so far. Reports may still come (a read left behind on
 * the fetcher): they are taken, and dropped by gw_repair_free, which comes
 * once nothing can report any more (the scanner finds those stripes again). */
void gw_repair_stop(struct gw_objects *o);
void gw_repair_free(struct gw_objects *o);

#endif
