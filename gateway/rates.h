/*
 * Gateway rates over time: a thread samples the request metrics' totals
 * (gw_metrics_totals) once per interval into a ring, so `inec status` can
 * show rates from one request and the dashboard can draw the last minutes
 * the moment it opens, without either client keeping state.
 *
 * gw_rates_json: {"interval_s": 1, "window_s": N, "samples": [{"t": unix s,
 *   "requests_per_s", "errors_per_s", "received_bytes_per_s",
 *   "sent_bytes_per_s", "latency_mean_s", "latency_p50_s", "latency_p99_s"}],
 *   "recent": the same over the last 10 intervals (fewer just after start),
 *   "recent_window_s"}
 * samples oldest first; latency quantiles are the upper bound of the histogram bucket
 * that holds them (0 when the interval served nothing).
 */
#ifndef INEC_GATEWAY_RATES_H
#define INEC_GATEWAY_RATES_H

#include <jansson.h>

#include "gateway/metrics.h"

struct gw_rates;

/* interval_ms > 0; keeps `samples` intervals (at least 2). */
int gw_rates_start(struct gw_metrics *m, unsigned interval_ms, unsigned samples,
                   struct gw_rates **out);
void gw_rates_stop(struct gw_rates *r); /* NULL is a no-op */
int gw_rates_json(struct gw_rates *r, json_t **out);

#endif
