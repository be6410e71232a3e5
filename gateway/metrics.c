/* Lock-free request counters and their Prometheus rendering. */
#include "gateway/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "node/prometheus.h"

/* Latency bucket bounds in seconds: S3 requests range from sub-millisecond
 * HEADs to multi-second large PUTs. */
const double gw_metrics_bounds[GW_METRICS_NBUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBOUNDS (GW_METRICS_NBUCKETS - 1)

/* The statuses the gateway answers with; anything else is counted as "other". */
static const int statuses[] = {200, 204, 206, 304, 400, 403, 404, 405,
                               409, 411, 412, 416, 500, 501, 503, 0};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

struct op_metrics {
    atomic_uint_fast64_t by_status[NSTATUS];
    atomic_uint_fast64_t buckets[NBOUNDS + 1]; /* last: +Inf */
    atomic_uint_fast64_t latency_sum_ns;
    atomic_uint_fast64_t bytes_in, bytes_out;
};

struct gw_metrics {
    const char *const *names;
    size_t nops;
    struct op_metrics ops[];
};

int gw_metrics_create(const char *const *op_names, size_t nops, struct gw_metrics **out)
{
    if (nops == 0)
        return -EINVAL;
    struct gw_metrics *m = calloc(1, sizeof(*m) + nops * sizeof(m->ops[0]));
    if (!m)
        return -ENOMEM;
    m->names = op_names;
    m->nops = nops;
    for (size_t i = 0; i < nops; i++) {
        struct op_metrics *o = &m->ops[i];
        for (size_t s = 0; s < NSTATUS; s++)
            atomic_init(&o->by_status[s], 0);
        for (size_t b = 0; b <= NBOUNDS; b++)
            atomic_init(&o->buckets[b], 0);
        atomic_init(&o->latency_sum_ns, 0);
        atomic_init(&o->bytes_in, 0);
        atomic_init(&o->bytes_out, 0);
    }
    *out = m;
    return 0;
}

void gw_metrics_destroy(struct gw_metrics *m)
{
    free(m);
}

void gw_metrics_record(struct gw_metrics *m, size_t op, int status, uint64_t latency_ns,
                       uint64_t bytes_in, uint64_t bytes_out)
{
    if (!m)
        return;
    struct op_metrics *o = &m->ops[op < m->nops ? op : m->nops - 1];
    size_t s = 0;
    while (statuses[s] && statuses[s] != status)
        s++;
    atomic_fetch_add_explicit(&o->by_status[s], 1, memory_order_relaxed);
    double secs = (double)latency_ns / 1e9;
    size_t b = 0;
    while (b < NBOUNDS && secs > gw_metrics_bounds[b])
        b++;
    atomic_fetch_add_explicit(&o->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&o->latency_sum_ns, latency_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&o->bytes_in, bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&o->bytes_out, bytes_out, memory_order_relaxed);
}

static uint64_t load(const atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

void gw_metrics_totals(const struct gw_metrics *m, struct gw_metrics_totals *t)
{
    *t = (struct gw_metrics_totals){0};
    for (size_t i = 0; i < m->nops; i++) {
        const struct op_metrics *o = &m->ops[i];
        for (size_t s = 0; s < NSTATUS; s++) {
            uint64_t v = load(&o->by_status[s]);
            t->requests += v;
            if (statuses[s] >= 500)
                t->server_errors += v;
        }
        for (size_t b = 0; b <= NBOUNDS; b++)
            t->buckets[b] += load(&o->buckets[b]);
        t->latency_sum_ns += load(&o->latency_sum_ns);
        t->received_bytes += load(&o->bytes_in);
        t->sent_bytes += load(&o->bytes_out);
    }
}

/* The object layer's counters and gauges of the cluster document. */
static void write_counters(const json_t *cluster, FILE *f)
{
    static const struct {
        const char *metric, *field, *type, *help;
    } counters[] = {
        {"inec_degraded_reads_total", "degraded_reads", "counter", "stripes read through a decode"},
        {"inec_degraded_writes_total", "degraded_writes", "counter",
         "stripes committed with chunks missing (at or above the write quorum)"},
        {"inec_corrupt_chunks_total", "corrupt_chunks", "counter",
         "chunks that failed a checksum when read"},
        {"inec_missing_chunks_total", "missing_chunks", "counter",
         "chunks not found, or on a node that did not answer"},
        {"inec_failed_reads_total", "failed_reads", "counter",
         "stripes that could not be rebuilt (the read failed)"},
        {"inec_hedged_reads_total", "hedged_reads", "counter",
         "stripes that read other chunks because one was late (hedged reads)"},
        {"inec_read_retries_total", "read_retries", "counter",
         "stripes whose failed chunk reads were tried again"},
        {"inec_decode_sessions_total", "decode_sessions", "counter",
         "decode sessions set up for degraded reads (each serves many stripes)"},
        {"inec_decode_runs_total", "decode_runs", "counter",
         "stripes rebuilt through a run of a decode session"},
        {"inec_repair_queue_chunks", "repair_queue", "gauge", "chunks waiting for repair"},
        {"inec_cluster_map_epoch", "epoch", "gauge", "the epoch of the cluster map"},
        {"inec_metadata_read_repairs_total", "metadata.read_repairs", "counter",
         "metadata copies rewritten by read repair, heals and sweeps"},
        {"inec_metadata_heal_pending", "metadata.heal_pending", "gauge",
         "keys a write left lacking on some home, waiting for the heal"},
        {"inec_metadata_doubt", "metadata.doubt", "gauge",
         "1 while metadata reads ask every home (the gateway started, or dropped a heal "
         "note) until a sweep found every inline record on every home"},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        const char *field = counters[i].field, *dot = strchr(field, '.');
        const json_t *v = dot ? json_object_getn(cluster, field, (size_t)(dot - field)) : cluster;
        v = json_object_get(v, dot ? dot + 1 : field);
        if (json_is_number(v) || json_is_boolean(v))
            fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", counters[i].metric,
                    counters[i].help, counters[i].metric, counters[i].type, counters[i].metric,
                    json_is_boolean(v) ? (double)json_is_true(v) : json_number_value(v));
    }
    /* Free space only where a node has a capacity (0: unlimited). */
    json_t *nodes = json_object_get(cluster, "nodes"), *n;
    size_t i;
    fputs("# HELP inec_node_free_bytes bytes the node can still store (capacity - used)\n"
          "# TYPE inec_node_free_bytes gauge\n",
          f);
    json_array_foreach(nodes, i, n)
    {
        const char *id = json_string_value(json_object_get(n, "id"));
        double cap = json_number_value(json_object_get(n, "capacity_bytes"));
        double used = json_number_value(json_object_get(n, "used_bytes"));
        if (!id || cap <= 0 || !json_is_true(json_object_get(n, "up")))
            continue;
        fputs("inec_node_free_bytes{node=\"", f);
        prometheus_label(f, id);
        fprintf(f, "\"} %.17g\n", cap > used ? cap - used : 0.0);
    }
}

struct gauge {
    const char *metric, *field, *help;
};

/* One series per element of items that has the field, labelled
 * `name`="<the element's key>" (a string or an integer). */
static void write_gauges(FILE *f, const json_t *items, const char *name, const char *key,
                         const struct gauge *gauges, size_t ngauges)
{
    for (size_t g = 0; g < ngauges; g++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", gauges[g].metric, gauges[g].help,
                gauges[g].metric);
        size_t i;
        json_t *n;
        json_array_foreach(items, i, n)
        {
            json_t *v = json_object_get(n, gauges[g].field);
            json_t *id = json_object_get(n, key);
            if (!v || !id)
                continue;
            fprintf(f, "%s{%s=\"", gauges[g].metric, name);
            if (json_is_string(id))
                prometheus_label(f, json_string_value(id));
            else
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
            fprintf(f, "\"} %.17g\n",
                    json_is_boolean(v) ? (json_is_true(v) ? 1.0 : 0.0) : json_number_value(v));
        }
    }
}

static void write_cluster(const json_t *cluster, FILE *f)
{
    static const struct gauge nodes[] = {
        {"inec_node_up", "up", "1 when the node answers, 0 when it is down"},
        {"inec_node_capacity_bytes", "capacity_bytes", "bytes the node can store"},
        {"inec_node_used_bytes", "used_bytes", "bytes the node stores"},
        {"inec_node_live_bytes", "live_bytes", "bytes of records the node's index points at"},
        {"inec_node_dead_bytes", "dead_bytes",
         "bytes overwritten, deleted or tombstones, until compaction frees them"},
        {"inec_node_chunks", "chunks", "chunks the node stores"},
        {"inec_node_repair_list_chunks", "repair_list",
         "chunks on the node's repair list (failed a checksum on read or scrub)"},
        {"inec_node_suspect", "suspect",
         "1 while the failure detector doubts the node (suspect or down)"},
        {"inec_node_last_seen_age_seconds", "last_seen_age_seconds",
         "seconds since the node last answered a call or a probe"},
        {"inec_node_peer_failures_total", "peer_failures",
         "calls and probes the node failed at the transport"},
        {"inec_node_late_writes", "late_writes",
         "chunk writes to the node a stripe's write quorum left behind, still running (the "
         "node takes no new chunks meanwhile)"},
        {"inec_node_clock_offset_seconds", "clock_offset_s",
         "the node's wall clock minus the gateway's (midpoint of a health call's round trip)"},
    };
    /* What each pool holds, as the repair scanner's last complete walk counted
     * it (absent before one). */
    static const struct gauge pools[] = {
        {"inec_pool_objects", "objects", "objects in the pool at the last complete scan"},
        {"inec_pool_logical_bytes", "logical_bytes",
         "bytes clients stored in the pool at the last complete scan"},
        {"inec_pool_stored_bytes", "stored_bytes",
         "bytes of the pool's chunks, parity included, at the last complete scan"},
        {"inec_pool_degraded_stripes", "degraded_stripes",
         "stripes of the pool lacking a chunk at the last complete scan"},
    };
    if (json_is_array(json_object_get(cluster, "nodes")))
        write_gauges(f, json_object_get(cluster, "nodes"), "node", "id", nodes,
                     sizeof(nodes) / sizeof(nodes[0]));
    write_counters(cluster, f);
    write_gauges(f, json_object_get(cluster, "pools"), "pool", "name", pools,
                 sizeof(pools) / sizeof(pools[0]));
}

/* The repair service's gauges and counters (the "repair" of the cluster document). */
static void write_repair(const json_t *rep, FILE *f)
{
    const json_t *by = json_object_get(json_object_get(rep, "scan"), "degraded_by_lost");
    fputs("# HELP inec_stripes_degraded stripes missing chunks at the last scan, by chunks lost\n"
          "# TYPE inec_stripes_degraded gauge\n",
          f);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)by, k, v)
    {
        fprintf(f, "inec_stripes_degraded{lost=\"");
        prometheus_label(f, k);
        fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
    }
    const json_t *t = json_object_get(rep, "totals"), *q = json_object_get(rep, "queue");
    static const struct {
        const char *metric, *type, *help, *obj, *field;
    } vals[] = {
        {"inec_repair_bytes_total", "counter", "bytes rebuilt or moved by repair", "totals",
         "bytes_repaired"},
        {"inec_repair_stripes_total", "counter", "stripes repaired", "totals", "stripes_repaired"},
        {"inec_repair_orphans_deleted_total", "counter", "orphan chunks collected", "totals",
         "orphans_deleted"},
        {"inec_repair_queue_length", "gauge", "degraded stripes in the repair queue", "queue",
         "stripes"},
        {"inec_repair_oldest_degraded_seconds", "gauge",
         "age of the oldest stripe in the repair queue", "queue", "oldest_age_s"},
    };
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        const json_t *x = json_object_get(strcmp(vals[i].obj, "totals") ? q : t, vals[i].field);
        if (json_is_integer(x))
            fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %" JSON_INTEGER_FORMAT "\n", vals[i].metric,
                    vals[i].help, vals[i].metric, vals[i].type, vals[i].metric,
                    json_integer_value(x));
    }
    const json_t *rate = json_object_get(json_object_get(rep, "progress"), "rate_bytes_per_s");
    if (json_is_number(rate))
        fprintf(f,
                "# HELP inec_repair_rate_bytes_per_second repair rate of the current run\n"
                "# TYPE inec_repair_rate_bytes_per_second gauge\n"
                "inec_repair_rate_bytes_per_second %.17g\n",
                json_number_value(rate));
}

int gw_metrics_write(const struct gw_metrics *m, const json_t *cluster, FILE *f)
{
    fputs("# HELP inec_build_info the inec version serving, always 1\n"
          "# TYPE inec_build_info gauge\n"
          "inec_build_info{version=\"" INEC_VERSION "\"} 1\n",
          f);
    fputs("# HELP inec_s3_requests_total S3 requests by operation and HTTP status\n"
          "# TYPE inec_s3_requests_total counter\n",
          f);
    for (size_t i = 0; i < m->nops; i++)
        for (size_t s = 0; s < NSTATUS; s++) {
            uint64_t v = load(&m->ops[i].by_status[s]);
            if (!v)
                continue;
            fprintf(f, "inec_s3_requests_total{op=\"%s\",status=\"", m->names[i]);
            if (statuses[s])
                fprintf(f, "%d", statuses[s]);
            else
                fputs("other", f);
            fprintf(f, "\"} %" PRIu64 "\n", v);
        }
    static const struct {
        const char *name, *help;
        size_t off;
    } bytes[] = {
        {"inec_s3_received_bytes_total", "request body bytes received",
         offsetof(struct op_metrics, bytes_in)},
        {"inec_s3_sent_bytes_total", "response body bytes sent",
         offsetof(struct op_metrics, bytes_out)},
    };
    for (size_t b = 0; b < 2; b++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", bytes[b].name, bytes[b].help,
                bytes[b].name);
        for (size_t i = 0; i < m->nops; i++)
            fprintf(f, "%s{op=\"%s\"} %" PRIu64 "\n", bytes[b].name, m->names[i],
                    load((const atomic_uint_fast64_t *)((const char *)&m->ops[i] + bytes[b].off)));
    }
    fputs("# HELP inec_s3_request_duration_seconds S3 request latency, first byte in to last "
          "byte out\n"
          "# TYPE inec_s3_request_duration_seconds histogram\n",
          f);
    for (size_t i = 0; i < m->nops; i++) {
        const struct op_metrics *o = &m->ops[i];
        uint64_t cum = 0;
        for (size_t b = 0; b <= NBOUNDS; b++) {
            cum += load(&o->buckets[b]);
            if (b < NBOUNDS)
                fprintf(
                    f, "inec_s3_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %" PRIu64 "\n",
                    m->names[i], gw_metrics_bounds[b], cum);
            else
                fprintf(f,
                        "inec_s3_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64
                        "\n",
                        m->names[i], cum);
        }
        fprintf(f, "inec_s3_request_duration_seconds_sum{op=\"%s\"} %.9f\n", m->names[i],
                (double)load(&o->latency_sum_ns) / 1e9);
        fprintf(f, "inec_s3_request_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n", m->names[i],
                cum);
    }
    if (cluster)
        write_cluster(cluster, f);
    if (json_is_object(json_object_get(cluster, "repair")))
        write_repair(json_object_get(cluster, "repair"), f);
    return ferror(f) ? -EIO : 0;
}
