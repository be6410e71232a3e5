/*
 * A node's own Prometheus endpoint (`inec node --metrics-listen HOST:PORT`):
 * GET /metrics over HTTP (libmicrohttpd), so a node is watched directly, not
 * only through a gateway. Off unless asked for; it serves numbers about the
 * store, never data, and answers only GET /metrics.
 *
 *   inec_build_info{version}                          1
 *   inec_node_uptime_seconds{node}
 *   inec_store_segments{node}, inec_store_segment_bytes{node},
 *   inec_store_live_bytes{node}, inec_store_dead_bytes{node},
 *   inec_store_chunks{node}, inec_store_metadata_records{node},
 *   inec_store_repair_list_chunks{node}, inec_store_capacity_bytes{node}
 *   (capacity 0: unlimited)
 */
#ifndef INEC_NODE_METRICS_SERVER_H
#define INEC_NODE_METRICS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "node/service.h"

struct node_metrics_server;

/* listen: "host:port" (port 0 picks one). Returns 0 or a negative errno with err. */
int node_metrics_start(struct node_service *svc, const char *listen,
                       struct node_metrics_server **out, char *err, size_t errlen);
/* The bound port. */
uint16_t node_metrics_port(const struct node_metrics_server *m);
void node_metrics_stop(struct node_metrics_server *m); /* NULL is a no-op */

#endif
