/*
 * Degraded reads through the pool's decode DEG without a per-stripe set-up
 * (decode_sessions.c): the GET path's rebuild of lost data chunks
 * (get.c).
 *
 * Decode graphs are compiled once per (pool, chunks rebuilt, chunks left
 * out) over abstract participants (participant c holds chunk c) and cached;
 * a stripe maps them onto its holders. RS and LRC decodes (sources sending
 * their chunk to the gateway) run through long-lived DEG sessions
 * (node_deg_session_decode: one RUN message per node per stripe, no device
 * or vertex set-up), kept idle in a small pool keyed by (pool, source
 * nodes, rows): the chunks a node reads and the coefficients change from
 * stripe to stripe, the connections do not. The survivors read are the
 * ones on the lowest node ids, so stripe after stripe (whose chunks sit on
 * the nodes in another order) the same nodes send and a session serves
 * them all. Other decodes (PPR, ECPipe, TriEC) run as a whole
 * (node_deg_run).
 *
 * A session is dropped when a run on it fails, when one of its nodes
 * failed a call since it opened (a restart, a verdict), when it idles
 * longer than the peer timeout, or when the pool holds too many; a run on
 * a kept session that fails is tried once more on a fresh one.
 */
#ifndef INEC_OBJECT_DECODE_SESSIONS_H
#define INEC_OBJECT_DECODE_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "object/objects_internal.h"

/* At open and close of the object layer. */
int gw_decoder_create(struct gw_objects *o);
void gw_decoder_destroy(struct gw_objects *o);

/*
 * Rebuilds the data chunks rebuild[c] (lost, c < k) of a stripe of `pool`
 * whose chunk c is on node holder[c], without reading the chunks lost[c]:
 * result() gets each rebuilt chunk (label.chunk) before this returns 0.
 * Chunks of len bytes, {ns->object, ns->stripe, c} on their nodes. -errno
 * and err on failure (the caller reads around it).
 */
int gw_decode_stripe(struct gw_objects *o, const struct gw_pool *pool, const int *holder,
                     const bool *lost, const bool *rebuild, const struct node_stripe *ns,
                     size_t len, deg_result_fn result, void *arg, char *err, size_t errlen);

/* Whether the decode of these losses is a star into the gateway (RS, LRC):
 * each survivor it reads sends its chunk whole and the gateway computes.
 * Direct reads of the same k chunks, rebuilt at the gateway with the codec
 * (stripe_fetch.c), move the same bytes and do the same work without the
 * DEG's per-stripe RUN round. False for decodes whose nodes compute (PPR,
 * ECPipe, TriEC), or when no graph can be built. */
bool gw_decode_at_gateway(struct gw_objects *o, const struct gw_pool *pool, const bool *lost,
                          const bool *rebuild);

/* gw_decode_stripe on the decoder's threads, so that a GET decodes the next
 * stripe while it streams one (decode ahead). The arrays are copied; ns and
 * arg must live until gw_decode_finish, which waits for the run, returns
 * its result and frees the job. */
struct gw_decode_job;
int gw_decode_start(struct gw_objects *o, const struct gw_pool *pool, const int *holder,
                    const bool *lost, const bool *rebuild, const struct node_stripe *ns, size_t len,
                    deg_result_fn result, void *arg, struct gw_decode_job **out);
int gw_decode_finish(struct gw_decode_job *j, char *err, size_t errlen);

/* Sessions opened so far, and stripes their runs rebuilt. */
void gw_decoder_counters(struct gw_objects *o, uint64_t *opened, uint64_t *runs);

#endif
