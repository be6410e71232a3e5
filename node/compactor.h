/*
 * Background compaction of a node's chunk store: the space of overwritten and
 * deleted chunks (and of tombstones) comes back without an operator.
 *
 * A thread looks every interval_ms (on a store whose index takes long to
 * scan, every 20 times that scan), only when records were appended since it
 * last looked (dead bytes grow only then), and compacts the segments whose
 * dead share is at least dead_ratio (node_store_compact_opts): the active
 * segment too once it holds seal_bytes. Copies are paced to mbps and wait
 * for reads in flight and queued writes, so foreground I/O keeps priority.
 */
#ifndef INEC_NODE_COMPACTOR_H
#define INEC_NODE_COMPACTOR_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "node/store.h"

struct node_compaction_config {
    int interval_ms;     /* 0: the default (1000); < 0: no background compaction */
    double dead_ratio;   /* 0: the default (0.4); a segment's dead share to compact it */
    uint64_t seal_bytes; /* 0: the default (16 MiB); the active segment is compacted from this */
    double mbps;         /* 0: the default (50); MB/s copied at most; < 0: no limit */
};

/*
 * Reads {"interval_ms", "dead_ratio", "seal_bytes", "mbps"} (cluster.json's
 * "node" section's "compaction", each optional) over what *out holds; NULL
 * changes nothing. -EINVAL with a message for a wrong type or value.
 */
int node_compaction_from_json(const json_t *j, struct node_compaction_config *out, char *err,
                              size_t errlen);

/* The defaults above, filled in where cfg left 0; -EINVAL for a ratio past 1. */
int node_compaction_resolve(const struct node_compaction_config *cfg,
                            struct node_compaction_config *out);

struct node_compactor;

/* Starts the thread (nothing when interval_ms < 0: *out = NULL). */
int node_compactor_start(struct node_store *s, const struct node_compaction_config *cfg,
                         struct node_compactor **out);
/* Stops it (a compaction in progress is cancelled, losing nothing). NULL: no-op. */
void node_compactor_stop(struct node_compactor *c);

#endif
