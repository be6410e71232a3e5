/*
 * RPC clients of the nodes: an idle one per call, or a new connection; every
 * call's outcome is the failure detector's evidence (peer_state.c).
 */
#include <errno.h>

#include "object/objects_internal.h"

int gw_client_idle(struct gw_objects *o, int node, struct node_client **out)
{
    struct gw_node *nd = &o->nodes[node];
    *out = NULL;
    pthread_mutex_lock(&nd->lock);
    if (nd->nidle > 0)
        *out = nd->idle[--nd->nidle];
    pthread_mutex_unlock(&nd->lock);
    return *out ? 0 : -EAGAIN;
}

int gw_client_get(struct gw_objects *o, int node, struct node_client **out)
{
    if (gw_client_idle(o, node, out) == 0)
        return 0;
    return gw_client_open(o, node, o->timeout_ms, out);
}

int gw_client_open(struct gw_objects *o, int node, int timeout_ms, struct node_client **out)
{
    struct gw_node *nd = &o->nodes[node];
    pthread_mutex_lock(&nd->lock);
    struct node_service *svc = nd->svc;
    nd->opening += svc != NULL; /* svc is not stopped while we connect to it */
    pthread_mutex_unlock(&nd->lock);
    struct node_client_opts co = {.timeout_ms = timeout_ms,
                                  .secret_file = o->secret[0] ? o->secret : NULL,
                                  .name = "gateway",
                                  .node_id = nd->id};
    char err[256];
    int rc;
    if (o->embedded)
        rc = svc ? node_client_connect_local(o->dev, svc, &co, out, err, sizeof(err)) : -EHOSTDOWN;
    else
        rc = node_client_connect(o->dev, nd->address, &co, out, err, sizeof(err));
    if (svc) {
        pthread_mutex_lock(&nd->lock);
        if (--nd->opening == 0)
            pthread_cond_broadcast(&nd->opened);
        pthread_mutex_unlock(&nd->lock);
    }
    if (rc) {
        *out = NULL;
        gw_peer_failed(o, node, rc, true);
    }
    return rc;
}

void gw_client_put(struct gw_objects *o, int node, struct node_client *c, int rc)
{
    struct gw_node *nd = &o->nodes[node];
    if (gw_transport_error(rc)) {
        gw_peer_failed(o, node, rc, false);
        /* They share its connection: broken too, most likely. */
        gw_drop_clients(nd);
    } else if (rc == 0) {
        gw_peer_answered(o, node);
    }
    if (!c)
        return;
    pthread_mutex_lock(&nd->lock);
    if (nd->nidle < GW_NODE_CLIENTS && !gw_transport_error(rc)) {
        nd->idle[nd->nidle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&nd->lock);
    node_client_close(c); /* a broken client is replaced by a fresh connection */
}

void gw_drop_clients(struct gw_node *nd)
{
    pthread_mutex_lock(&nd->lock);
    while (nd->nidle > 0)
        node_client_close(nd->idle[--nd->nidle]);
    pthread_mutex_unlock(&nd->lock);
}

int gw_node_get_meta(struct gw_objects *o, int node, const char *bucket, const char *key,
                     void **blob, size_t *len)
{
    struct node_client *c = NULL;
    *blob = NULL;
    *len = 0;
    int rc = gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    if (rc == 0)
        rc = node_client_get_meta(c, bucket, key, blob, len);
    gw_client_put(o, node, c, rc == -ENOENT ? 0 : rc);
    return rc;
}
