/*
 * Request metrics of a gateway, kept as relaxed atomic counters so that the
 * S3 server's connection threads record without locks, and rendered in
 * Prometheus' text exposition format (version 0.0.4) for GET /metrics.
 *
 * Per operation: requests by HTTP status, a latency histogram, bytes in and
 * out. Cluster gauges (node state, degraded reads) come from the object
 * layer's cluster document and are rendered beside them.
 */
#ifndef INEC_GATEWAY_METRICS_H
#define INEC_GATEWAY_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

struct gw_metrics;

/* op_names[0, nops): the values of the "op" label; borrowed, must outlive m. */
int gw_metrics_create(const char *const *op_names, size_t nops, struct gw_metrics **out);
void gw_metrics_destroy(struct gw_metrics *m);

/* One finished request; op out of range counts under the last op. */
void gw_metrics_record(struct gw_metrics *m, size_t op, int status, uint64_t latency_ns,
                       uint64_t bytes_in, uint64_t bytes_out);

/*
 * Sums over every operation, for the rates the control API computes
 * (gateway/rates.h): requests, requests answered 5xx, body bytes, and the
 * latency histogram (GW_METRICS_NBUCKETS bounds in gw_metrics_bounds, the
 * last bucket +Inf).
 */
#define GW_METRICS_NBUCKETS 15
extern const double gw_metrics_bounds[GW_METRICS_NBUCKETS - 1];
struct gw_metrics_totals {
    uint64_t requests, server_errors, received_bytes, sent_bytes;
    uint64_t latency_sum_ns;
    uint64_t buckets[GW_METRICS_NBUCKETS]; /* not cumulative */
};
void gw_metrics_totals(const struct gw_metrics *m, struct gw_metrics_totals *t);

/*
 * Writes every metric to f. cluster may be NULL, else the object layer's
 * cluster document (gw_objects_cluster_json): its nodes become
 * inec_node_up / inec_node_capacity_bytes / inec_node_used_bytes gauges, its
 * degraded_reads a counter. Returns 0 or -EIO.
 */
int gw_metrics_write(const struct gw_metrics *m, const json_t *cluster, FILE *f);

#endif
