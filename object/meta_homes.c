/*
 * Metadata records on the nodes. Every object (and every bucket, under the
 * store bucket ".") has one JSON record, kept by the nodes, not the gateway:
 *
 *   copies    C = 2M+1 nodes (M = the most parities of any pool, C at most the
 *             members), chosen by rendezvous hashing of bucket + key among the
 *             map's members, so any gateway finds them knowing only the name,
 *             and a node going down never moves them;
 *   versions  a hybrid logical clock per gateway (gw_hlc_next), no read first;
 *   write     a compare-and-set on every home (higher version wins, in the
 *             node's LMDB transaction), one round, done once W = C - M hold
 *             it (see "writes" below);
 *   read      from R = M+1 homes (the rest when one fails or is late, all C
 *             while the gateway is in doubt: meta_heal.c), answered once R
 *             have answered (R + W > C: some answer holds the newest
 *             acknowledged record), the highest version wins and homes that
 *             lack it are repaired;
 *   delete    a tombstone record with a higher version, never a removal, so a
 *             stale copy on a node that was down cannot come back to life;
 *   list      every node's ordered index merged (k-way, by key), each key's
 *             newest record kept, tombstones dropped; with at most M nodes
 *             silent every key is still seen (it is on at least M+1 nodes).
 *
 * This file: which nodes are a record's homes. The others: meta_write.c,
 * meta_read.c, meta_decide.c, meta_list.c; versions: version_clock.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

bool gw_meta_member(struct gw_objects *o, int node)
{
    return o->map->nodes[node].state != PLACE_OUT && !atomic_load(&o->nodes[node].meta_out);
}

int gw_meta_homes(struct gw_objects *o, const char *bucket, const char *key, int *out)
{
    return gw_meta_homes_excl(o, bucket, key, NULL, out);
}

/* excl[i]: node i is not a member (NULL: the members as they are now). */
int gw_meta_homes_excl(struct gw_objects *o, const char *bucket, const char *key, const bool *excl,
                       int *out)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    char *name = malloc(bl + kl + 2);
    if (!name)
        return -ENOMEM;
    memcpy(name, bucket, bl);
    name[bl] = '\0'; /* bucket and key cannot be confused: S3 buckets hold no NUL */
    memcpy(name + bl + 1, key, kl + 1);
    bool stack[64], *use = o->nnodes <= 64 ? stack : malloc((size_t)o->nnodes);
    int rc = use ? 0 : -ENOMEM;
    for (int i = 0; use && i < o->nnodes; i++)
        use[i] = excl ? o->map->nodes[i].state != PLACE_OUT && !excl[i] : gw_meta_member(o, i);
    if (rc == 0)
        rc = place_stripe_among(o->map, use, name, bl + kl + 1, UINT64_MAX, o->meta_copies, out,
                                NULL);
    if (use != stack)
        free(use);
    free(name);
    return rc;
}
