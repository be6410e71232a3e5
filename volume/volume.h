/*
 * Block volumes: virtual disks of a fixed size over the object layer, served
 * to block clients by the NBD server (nbd_server.c).
 *
 * A volume is a sequence of stripes of stripe_bytes = k x 64 KiB (k of its
 * pool; the pool's chunk size when that is smaller). Stripe s is an object of
 * exactly stripe_bytes in the volume's own bucket (GW_VOLUME_BUCKET_PREFIX +
 * name, in the volume's pool), key "%016x" of s: placed, encoded, read
 * (degraded through the decode DEG when chunks are lost), repaired and
 * garbage-collected as every object is. A stripe never written, or zeroed
 * whole, has no object: it reads as zeros and costs nothing.
 *
 * Contract:
 * - gw_volume_write / gw_volume_zero return 0 only once every stripe they
 *   touched is durable on the pool's write quorum (an object commit), so an
 *   acknowledged write survives any failure the pool tolerates: FLUSH has
 *   nothing left to do and FUA holds for every write.
 * - A partial-stripe write is a read-modify-write of the whole stripe into a
 *   new object version (new chunks, then the record): a crash at any point
 *   leaves the stripe's old or new content, never a mix (no write hole). On a
 *   volume created with "update": "delta", a write inside one data chunk is a
 *   delta-parity update in place behind an intent record; after a crash the
 *   stripe is old or new once gw_volume_open has recovered it, and may fail
 *   to read (never read wrong) until then.
 * - Writes to one stripe are serialised in this process (two clients or a
 *   queue depth above 1 cannot lose an update); two gateways writing one
 *   volume at once are not coordinated (serve a volume from one gateway).
 *
 * The volume record (metadata bucket ".volumes", key = name):
 *   {"version", "deleted", "size", "pool", "stripe_bytes", "created", "secret"}
 * "secret" (32 hex digits, or "" for none) is what an NBD client appends to
 * the export name ("NAME/SECRET") to attach the volume.
 *
 * Errors: -EINVAL (bad name or size; msg says why), -ENOENT (no such volume
 * or pool), -EEXIST, -ENOSPC (beyond the end), and the object layer's.
 */
#ifndef INEC_VOLUME_VOLUME_H
#define INEC_VOLUME_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "object/objects.h"

#define GW_VOLUME_NAME_MAX      54 /* the bucket name (prefix + name) within S3's 63 */
#define GW_VOLUME_BUCKET_PREFIX "inec-vol-"
#define GW_VOLUME_UNIT          (64u << 10) /* chunk bytes of a volume stripe */
#define GW_VOLUME_SIZE_MAX      (1ull << 50)
#define GW_VOLUME_SECRET_HEX    32

/* Whether `bucket` is a volume's (its name has the prefix): S3 neither lists
 * nor serves these (s3_server.c), so no S3 client can write into a disk. */
static inline bool gw_volume_bucket(const char *bucket)
{
    return strncmp(bucket, GW_VOLUME_BUCKET_PREFIX, sizeof(GW_VOLUME_BUCKET_PREFIX) - 1) == 0;
}

struct gw_volume;

/* spec: {"name", "size" (bytes, > 0, a multiple of 512), "pool" (optional:
 * the default pool), "secret" (optional: true = generate one (the default),
 * false = none), "update" (optional: "rmw" (the default): every partial write
 * is a read-modify-write of its stripe; "delta": a write inside one data chunk
 * updates the parities by delta (volume_delta.c), today slower than rmw: the
 * update DEG is set up on the nodes for every write), "chains" (optional:
 * "coherent" (the default) or "incoherent": how the update DEG's primitives
 * run, the INEC paper's coherent ones or its baseline of host-driven chains;
 * for benchmarks)}. *out = the volume as gw_volume_info gives it. */
int gw_volume_create(struct gw_objects *o, const json_t *spec, json_t **out, char *msg,
                     size_t msglen);
/* [{"name", "size", "pool", "stripe_bytes", "created_ns", "protected"}] in name order. */
int gw_volume_list(struct gw_objects *o, json_t **out);
/* As a list element, with "secret", "export" (the NBD export name) and
 * "gateway_stripe_updates": {"delta", "rmw"}, the partial-stripe updates this
 * gateway process made each way, all volumes together. */
int gw_volume_info(struct gw_objects *o, const char *name, json_t **out);
/* Grows the volume to `size` (shrinking is -EINVAL: it would cut data). */
int gw_volume_resize(struct gw_objects *o, const char *name, uint64_t size, char *msg,
                     size_t msglen);
/* Frees every stripe, then the volume. */
int gw_volume_delete(struct gw_objects *o, const char *name);

/* An open volume: the size and stripe layout as they were at open. */
int gw_volume_open(struct gw_objects *o, const char *name, struct gw_volume **out);
void gw_volume_close(struct gw_volume *v); /* NULL is a no-op */
uint64_t gw_volume_size(const struct gw_volume *v);
/* True if the volume has no secret, or `secret` is it (constant time). */
bool gw_volume_secret_ok(const struct gw_volume *v, const char *secret);
size_t gw_volume_stripe_bytes(const struct gw_volume *v);
/* Which stripes hold data (the others read as zeros and cost nothing):
 * present[i] for stripe first + i, i < n; one listing. */
int gw_volume_allocated(struct gw_volume *v, uint64_t first, size_t n, bool *present);
int gw_volume_read(struct gw_volume *v, uint64_t off, size_t len, void *buf);
int gw_volume_write(struct gw_volume *v, uint64_t off, size_t len, const void *buf);
/* Zeros [off, off + len); whole stripes become sparse (TRIM and WRITE_ZEROES). */
int gw_volume_zero(struct gw_volume *v, uint64_t off, uint64_t len);

#endif
