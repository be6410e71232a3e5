/*
 * Cluster health as an operator reads it, Ceph's way: one verdict,
 * HEALTH_OK, HEALTH_WARN (redundancy or capacity reduced, data still whole)
 * or HEALTH_ERR (data unreadable or writes refused), and one check per
 * reason. The control API serves it (GET /admin/v1/status) to `inec status`
 * and the dashboard, so both say the same.
 *
 * gw_health_eval is pure: from the object layer's cluster document
 * (gw_objects_cluster_json), repair queue (gw_objects_repair_json) and repair
 * status (gw_objects_repair_status; both may be NULL) to
 *   {"status": "HEALTH_WARN",
 *    "checks": [{"severity": "WARN" | "ERR", "code": "NODE_DOWN",
 *                "message": "1 of 9 nodes down: n3"}, ...]}
 * with checks ERR first. Codes: NODE_DOWN, NODE_MARKED (a node the map says
 * is down or draining), POOL_UNAVAILABLE (more nodes down than a pool's
 * parities: its objects may be unreadable), POOL_WRITES_REFUSED (fewer up
 * nodes than its write quorum), DEGRADED_STRIPES (chunks queued for repair,
 * by how many chunks their stripes lack), NEARFULL (a node at 85 % of its
 * capacity) and FULL (95 %), CORRUPT_CHUNKS (checksum failures seen by reads
 * or scrub), FAILED_READS (stripes that could not be rebuilt since the gateway
 * started), REPAIR_RUNNING (progress, rate and ETA), REPAIR_PAUSED (with work
 * queued), DEGRADED_SCAN (stripes by chunks lost, from the last scan),
 * CLOCK_SKEW (a node's "clock_offset_s" beyond the cluster document's
 * "clock_skew_warn_s", else GW_HEALTH_CLOCK_SKEW_S).
 */
#ifndef INEC_GATEWAY_HEALTH_H
#define INEC_GATEWAY_HEALTH_H

#include <jansson.h>

#include "object/objects.h"
#include "gateway/rates.h"

#define GW_HEALTH_NEARFULL     0.85
#define GW_HEALTH_FULL         0.95
#define GW_HEALTH_CLOCK_SKEW_S 0.5

json_t *gw_health_eval(const json_t *cluster, const json_t *repair, const json_t *status);

/* GET /admin/v1/status: {"health": gw_health_eval, "cluster": the cluster
 * document, "rates": the gateway's recent rates (rates.h) or null}. */
int gw_health_status_json(struct gw_objects *o, struct gw_rates *rates, json_t **out);

#endif
