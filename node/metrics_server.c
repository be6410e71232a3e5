/* The node's /metrics: store statistics rendered on each scrape. */
#include "node/metrics_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "inec/hostport.h"
#include "node/prometheus.h"
#include "node/store.h"

struct node_metrics_server {
    struct MHD_Daemon *daemon;
    struct node_service *svc;
    struct timespec started;
    uint16_t port;
};

static int render(struct node_metrics_server *m, FILE *f)
{
    struct node_store_stats st;
    int rc = node_store_stats(node_service_store(m->svc), &st);
    if (rc)
        return rc;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double up =
        (double)(now.tv_sec - m->started.tv_sec) + (double)(now.tv_nsec - m->started.tv_nsec) / 1e9;
    fputs("# HELP inec_build_info the inec version serving, always 1\n"
          "# TYPE inec_build_info gauge\n"
          "inec_build_info{version=\"" INEC_VERSION "\"} 1\n",
          f);
    static const struct {
        const char *name, *help;
        size_t off;
    } gauges[] = {
        {"inec_store_segments", "segment files of the store",
         offsetof(struct node_store_stats, segments)},
        {"inec_store_segment_bytes", "bytes of every segment on disk",
         offsetof(struct node_store_stats, segment_bytes)},
        {"inec_store_live_bytes", "bytes of records the index points at",
         offsetof(struct node_store_stats, live_bytes)},
        {"inec_store_dead_bytes",
         "bytes overwritten, deleted or tombstones (compaction frees them)",
         offsetof(struct node_store_stats, dead_bytes)},
        {"inec_store_chunks", "chunks indexed", offsetof(struct node_store_stats, chunks)},
        {"inec_store_metadata_records", "object metadata records",
         offsetof(struct node_store_stats, metas)},
        {"inec_store_repair_list_chunks", "chunks found corrupt, waiting for repair",
         offsetof(struct node_store_stats, repair)},
        {"inec_store_capacity_bytes", "bytes the store may hold, 0 when unlimited",
         offsetof(struct node_store_stats, capacity)},
    };
    const char *id = node_service_id(m->svc);
    fputs("# HELP inec_node_uptime_seconds seconds since the node started serving metrics\n"
          "# TYPE inec_node_uptime_seconds gauge\ninec_node_uptime_seconds{node=\"",
          f);
    prometheus_label(f, id);
    fprintf(f, "\"} %.3f\n", up);
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n%s{node=\"", gauges[i].name, gauges[i].help,
                gauges[i].name, gauges[i].name);
        prometheus_label(f, id);
        fprintf(f, "\"} %" PRIu64 "\n", *(const uint64_t *)((const char *)&st + gauges[i].off));
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"inec_store_compacted_segments_total", "segments background compaction removed",
         offsetof(struct node_store_stats, compacted_segments)},
        {"inec_store_compacted_bytes_total", "segment bytes compaction gave back",
         offsetof(struct node_store_stats, compacted_bytes)},
        {"inec_store_direct_bytes_total", "chunk bytes written with O_DIRECT",
         offsetof(struct node_store_stats, direct_bytes)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        fprintf(f, "# HELP %s %s (since the node started)\n# TYPE %s counter\n%s{node=\"",
                counters[i].name, counters[i].help, counters[i].name, counters[i].name);
        prometheus_label(f, id);
        fprintf(f, "\"} %" PRIu64 "\n", *(const uint64_t *)((const char *)&st + counters[i].off));
    }
    return ferror(f) ? -EIO : 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *text, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            status == 200 ? "text/plain; version=0.0.4; charset=utf-8"
                                          : "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    (void)version, (void)upload_data, (void)con_cls;
    if (*upload_data_size) { /* no request here has a body: drop it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0)
        return reply(c, 404, strdup("GET /metrics\n"), 13);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, 405, strdup("GET /metrics\n"), 13);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = f ? render(cls, f) : -ENOMEM;
    if (f && fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc) {
        free(text);
        char *msg = NULL;
        int n = asprintf(&msg, "metrics: %s\n", node_store_strerror(rc));
        return reply(c, 500, n < 0 ? NULL : msg, n < 0 ? 0 : (size_t)n);
    }
    return reply(c, 200, text, len);
}

int node_metrics_start(struct node_service *svc, const char *listen,
                       struct node_metrics_server **out, char *err, size_t errlen)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    int rc = inec_hostport_resolve(listen, true, &sa, &salen);
    if (rc) {
        snprintf(err, errlen, "metrics listen address '%s': %s", listen ? listen : "",
                 rc == -EINVAL ? "want HOST:PORT (an IPv6 HOST in brackets)" : "does not resolve");
        return -EINVAL;
    }
    struct node_metrics_server *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->svc = svc;
    clock_gettime(CLOCK_MONOTONIC, &m->started);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handler, m, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                                 MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_END);
    if (!m->daemon) {
        snprintf(err, errlen, "cannot serve metrics on %s (in use?)", listen);
        free(m);
        return -EADDRINUSE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : 0;
    *out = m;
    return 0;
}

uint16_t node_metrics_port(const struct node_metrics_server *m)
{
    return m->port;
}

void node_metrics_stop(struct node_metrics_server *m)
{
    if (!m)
        return;
    MHD_stop_daemon(m->daemon);
    free(m);
}
