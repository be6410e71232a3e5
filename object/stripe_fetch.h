/*
 * Reading one stripe's chunks straight from their nodes, around failures
 * (stripe_fetch.c): the GET path's reads (get.c).
 *
 * gw_fetch_start posts the reads of some chunks and returns at once, so a
 * GET can fetch the next stripe while it streams the current one (decode
 * ahead). gw_fetch_wait then waits for the data chunks a read needs and
 * routes around what goes wrong on the way: a chunk that fails, or is late
 * (not in after the hedge delay, a percentile of recent chunk reads), makes
 * it read other chunks of the stripe (parities, other data chunks: other
 * holders) and rebuild the missing ones at the gateway from any k that
 * answer (the pool's codec), while the late read may still win; when nothing
 * is left in flight and too few answered, the failed reads are tried again
 * (nodes judged down included: one may be back) before it gives up. Decoded chunks are checked
 * against the record's CRCs: never wrong bytes.
 */
#ifndef INEC_OBJECT_STRIPE_FETCH_H
#define INEC_OBJECT_STRIPE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "object/objects_internal.h"

struct gw_fetch;

/* What a fetch knows of its stripe (copied: reads outlive the caller's record). */
struct gw_fetch_stripe {
    char bucket[GW_BUCKET_MAX + 1], key[GW_KEY_MAX + 1]; /* for the repair queue */
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t stripe; /* the chunks are {oid, stripe, c} */
    size_t len;      /* of every chunk */
    int k, n;
    int node[PLACE_MAX_CHUNKS];     /* holder of chunk c (< 0: unknown) */
    bool missing[PLACE_MAX_CHUNKS]; /* never written (a degraded write) */
    uint32_t crc[PLACE_MAX_CHUNKS]; /* CRC32C of data chunk c < k */
    const struct codec *codec;
};

struct gw_fetch_result {
    int why[PLACE_MAX_CHUNKS]; /* chunk c's last read failed with this (0: fine or unread);
                                  -EAGAIN: it was late, not lost */
    bool decoded;              /* chunks rebuilt at the gateway */
    bool hedged;               /* other chunks read because one was late */
    int hedge_ms;              /* the hedge delay it used */
    int retries;               /* rounds of failed reads tried again */
};

/* The reads' threads and the chunk-read latency record; at open and close. */
int gw_fetcher_create(struct gw_objects *o);
void gw_fetcher_destroy(struct gw_objects *o); /* waits for the reads in flight */

/* Posts reads of the chunks want[c] (none: NULL) whose node is not down.
 * They leave from this thread, whose gw_fetch_wait takes their answers;
 * with later (decode ahead: the wait comes after other work) they go on
 * the fetcher's threads, which take the answers meanwhile. */
int gw_fetch_start(struct gw_objects *o, const struct gw_fetch_stripe *st, const bool *want,
                   bool later, struct gw_fetch **out);
/* Data chunks need[c] (c < k): at[c] is where chunk c's len bytes are, in
 * the fetch (valid until gw_fetch_release: not copied) or, rebuilt here, at
 * out + c * len. 0, or -EIO (err says why).
 * res->why says which chunks failed (the caller queues them for repair); a
 * read left behind that finds its chunk missing or corrupt later queues it
 * itself.
 * Failed reads are tried again RETRY_ROUNDS times within 2 peer timeouts; a
 * patient wait (a response already under way: giving up cuts it) tries again
 * until 3 peer timeouts have passed. */
int gw_fetch_wait(struct gw_fetch *f, const bool *need, bool patient, uint8_t *out,
                  const uint8_t **at, struct gw_fetch_result *res, char *err, size_t errlen);
void gw_fetch_release(
    struct gw_fetch *f); /* NULL is a no-op; reads in flight finish on their own */

#endif
