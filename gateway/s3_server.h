/*
 * The S3 HTTP front end: libmicrohttpd serving path-style and virtual-host
 * style requests, every one verified with SigV4 (sigv4.h), routed by
 * s3_request.h, served by the object layer (objects.h), recorded in metrics.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION).
 * gw_put_write and gw_get_read block while stripes move to and from the
 * nodes; with a fixed pool of polling threads one slow PUT would stall every
 * connection that thread serves, while a thread per connection stalls only
 * its own client. Connections are capped (max_connections, and
 * max_per_client from one address), so the number of threads is bounded, and
 * a client that is slow to send its headers is cut off (header_timeout_s),
 * so a few slow clients cannot hold every connection.
 */
#ifndef INEC_GATEWAY_S3_SERVER_H
#define INEC_GATEWAY_S3_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/keys.h"
#include "gateway/metrics.h"
#include "object/objects.h"
#include "gateway/tls.h"

struct gw_s3_config {
    const char *listen;      /* "host:port", "[v6]:port"; port 0 picks a free one */
    const char *base_domain; /* virtual-host style under this domain; NULL: path-style only */
    const char *region;      /* NULL: "us-east-1" */
    const char *access_key, *secret_key;
    unsigned max_connections;  /* 0: 256 */
    unsigned max_per_client;   /* connections from one client address; 0: 64 */
    unsigned header_timeout_s; /* to send a request's headers (conn_guard.h); 0: 30 */
    const struct gw_tls *tls;  /* HTTPS with this certificate; NULL: plain HTTP. Borrowed */
    /* Benchmarks only (bench/s3_bench.c's floor): the same HTTP stack and
     * SigV4 checks with no storage behind them. PUT bodies are read, checked
     * and dropped, and the key's size remembered; GET streams that many
     * gw_s3_floor_bytes from memory; CreateBucket succeeds; nothing else is
     * served. The object layer is never called (o may be NULL). */
    bool floor;
    /* More key pairs than access_key/secret_key (gateway/keys.h); NULL: that
     * pair only. Borrowed: must outlive the server. */
    struct gw_keys *keys;
};

struct gw_s3_server;

/* metrics may be NULL. Returns 0 or a negative errno with msg. */
int gw_s3_server_start(const struct gw_s3_config *cfg, struct gw_objects *o, struct gw_metrics *m,
                       struct gw_s3_server **out, char *msg, size_t msglen);
uint16_t gw_s3_server_port(const struct gw_s3_server *s);
/* Stops accepting, lets requests in flight finish (at most drain_ms), then
 * closes every connection and frees the server. NULL is a no-op. */
void gw_s3_server_stop(struct gw_s3_server *s, int drain_ms);

/* The bytes a floor server answers for `key` from offset off: a pointer
 * into a static pattern and *len contiguous bytes there (at least 1 MiB).
 * A benchmark stores the same bytes in a real gateway, so one check of
 * every GET body serves both. The pattern's period is not a power of two,
 * so chunks or stripes swapped by a broken server do not read back alike. */
const uint8_t *gw_s3_floor_bytes(const char *key, uint64_t off, size_t *len);

#endif
