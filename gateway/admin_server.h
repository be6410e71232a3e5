/*
 * The control API: REST/JSON on its own listen address, every request
 * carrying "Authorization: Bearer <token>".
 *
 *   GET  /admin/v1/cluster                 nodes, health, capacity, usage
 *   GET  /admin/v1/pools                   pools and their profiles
 *   POST /admin/v1/pools                   {"name", "profile", "nodes"}: a new pool
 *   GET  /admin/v1/objects/{bucket}/{key}  stripes, placement, chunk health
 *   GET  /admin/v1/deg?pool=P&op=encode|decode[&lost=1,4][&format=dot]
 *   GET  /admin/v1/keys                    S3 key pairs, no secrets (keys.h)
 *   POST /admin/v1/keys                    {"name"}: a new pair, its secret shown once
 *   DELETE /admin/v1/keys/{access_key}     revokes a pair (not the primary one)
 *   GET  /metrics                          Prometheus text format
 *
 * Errors are {"code": "...", "message": "..."} with a matching status.
 * Requests are short and never stream, so a small polling thread pool serves
 * them.
 */
#ifndef INEC_GATEWAY_ADMIN_SERVER_H
#define INEC_GATEWAY_ADMIN_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/keys.h"
#include "gateway/metrics.h"
#include "object/objects.h"
#include "gateway/tls.h"

struct gw_admin_config {
    const char *listen;       /* "host:port"; port 0 picks a free one */
    const char *token;        /* required, non-empty */
    struct gw_keys *keys;     /* the S3 key pairs /admin/v1/keys manages; NULL: 501 */
    const struct gw_tls *tls; /* HTTPS with this certificate (tls.h); NULL: HTTP. Borrowed */
};

struct gw_admin_server;

int gw_admin_server_start(const struct gw_admin_config *cfg, struct gw_objects *o,
                          struct gw_metrics *m, struct gw_admin_server **out, char *msg,
                          size_t msglen);
uint16_t gw_admin_server_port(const struct gw_admin_server *s);
void gw_admin_server_stop(struct gw_admin_server *s); /* NULL is a no-op */

#endif
