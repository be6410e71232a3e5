/*
 * Pools: their codecs, the pool a bucket names, the usage the scanner
 * counted, and pools added through the control API (saved with the
 * embedded cluster's map).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deg/deg.h"
#include "object/objects_internal.h"

/* --- pools --------------------------------------------------------------- */

const struct gw_pool *gw_pool_find(struct gw_objects *o, const char *name)
{
    int n = atomic_load(&o->npools);
    for (int i = 0; i < n; i++)
        if (strcmp(o->pools[i].p.name, name) == 0)
            return &o->pools[i];
    return NULL;
}

const struct gw_pool *gw_pool_default(struct gw_objects *o)
{
    const struct gw_pool *p = gw_pool_find(o, "default");
    return p ? p : (atomic_load(&o->npools) ? &o->pools[0] : NULL);
}

/* Appends a pool (o->pool_lock held). */
int gw_pool_add(struct gw_objects *o, const struct place_pool *pp, char *msg, size_t msglen)
{
    int n = atomic_load(&o->npools);
    if (n == GW_MAX_POOLS)
        return snprintf(msg, msglen, "at most %d pools", GW_MAX_POOLS), -ENOSPC;
    if (pp->n > o->nnodes)
        return snprintf(msg, msglen, "pool %s needs %d nodes, the cluster has %d", pp->name, pp->n,
                        o->nnodes),
               -EINVAL;
    struct gw_pool *p = &o->pools[n];
    p->p = *pp;
    int rc = codec_create(&pp->codec, &p->codec, msg, msglen);
    if (rc)
        return rc;
    atomic_store(&o->npools, n + 1);
    return 0;
}

/* The map with the current pools, as JSON. */
json_t *gw_cluster_map_json(struct gw_objects *o)
{
    char *text = place_map_format(o->map);
    json_t *m = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!m)
        return NULL;
    json_t *pools = json_array();
    int n = atomic_load(&o->npools);
    for (int i = 0; i < n; i++) {
        const struct place_pool *p = &o->pools[i].p;
        json_array_append_new(pools, json_pack("{s:s,s:s,s:I,s:i}", "name", p->name, "profile",
                                               p->profile, "chunk_size", (json_int_t)p->chunk_size,
                                               "write_quorum", p->write_quorum));
    }
    json_object_set_new(m, "pools", pools);
    return m;
}

int gw_save_embedded_map(struct gw_objects *o)
{
    json_t *m = gw_cluster_map_json(o);
    if (!m)
        return -ENOMEM;
    char path[4200], tmp[4210];
    snprintf(path, sizeof(path), "%s/cluster.json", o->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    json_t *root = json_pack("{s:o}", "map", m);
    int rc = json_dump_file(root, tmp, JSON_INDENT(2)) ? -EIO : 0;
    json_decref(root);
    if (rc == 0) {
        int fd = open(tmp, O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        rc = rename(tmp, path) ? -errno : 0;
    }
    return rc;
}

void gw_pools_usage_set(struct gw_objects *o, const struct gw_pool_usage *usage)
{
    pthread_mutex_lock(&o->pool_lock);
    for (int i = 0; i < GW_MAX_POOLS; i++)
        o->pools[i].usage = usage[i];
    o->usage_ns = gw_realtime_ns();
    pthread_mutex_unlock(&o->pool_lock);
}

int gw_decode_graph(const struct gw_pool *p, const bool *erased, const bool *unavailable,
                    const int *holder, struct deg_graph **out, char *err, size_t errlen)
{
    /* The builders give a rebuilt chunk to a node (its new home, for repair);
     * a degraded read wants it at the gateway, so the homes of the erased
     * chunks get a participant id no node has, turned into the gateway after. */
    const int home = PLACE_MAX_CHUNKS + 1000;
    struct deg_request req = {.op = DEG_OP_DECODE};
    deg_placement_default(&req.placement);
    for (int c = 0; c < p->p.n; c++) {
        req.placement.holder[c] = erased[c] ? home : holder[c];
        if (erased[c])
            req.erased[req.nerased++] = c;
        req.unavailable[c] = unavailable && unavailable[c];
    }
    int rc = deg_build(p->codec, &req, out, err, errlen);
    for (int v = 0; rc == 0 && v < (*out)->nvertices; v++)
        if ((*out)->vertices[v].node == home)
            (*out)->vertices[v].node = DEG_GATEWAY;
    return rc;
}
