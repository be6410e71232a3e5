/*
 * Shared between volume.c (the volume layer, read-modify-write) and
 * volume_delta.c (delta-parity updates and their recovery); nothing else
 * includes it.
 */
#ifndef INEC_VOLUME_VOLUME_INTERNAL_H
#define INEC_VOLUME_VOLUME_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "object/objects_internal.h"
#include "volume/volume.h"

#define GW_VOLUME_INTENTS ".volintent" /* metadata bucket of delta intents: "NAME/STRIPEKEY" */

struct gw_volume {
    struct gw_objects *o;
    char name[GW_VOLUME_NAME_MAX + 1];
    char bucket[GW_BUCKET_MAX + 1];
    char secret[GW_VOLUME_SECRET_HEX + 1];
    uint64_t size;
    size_t stripe_bytes;
    uint32_t name_hash;
    bool delta;      /* partial writes of one chunk by delta parity (else read-modify-write) */
    bool incoherent; /* the update DEG with incoherent primitives (the paper's baseline) */
};

void gw_volume_stripe_key(uint64_t s, char out[17]);
/* Serialises the updates of stripe s of v within this process. */
pthread_mutex_t *gw_volume_stripe_lock(const struct gw_volume *v, uint64_t s);
/* Stores the whole stripe as a new object version (or frees it when all zeros). */
int gw_volume_stripe_store(struct gw_volume *v, uint64_t s, const uint8_t *stripe);

/* volume_delta.c. Writes [off, off + len) of stripe s (inside one data chunk)
 * by delta parity, the stripe lock held: 0 when durable; -EAGAIN when this
 * stripe cannot take it now (not stored yet, a chunk missing or its node not
 * up, more than one chunk touched): use read-modify-write; other errors fail. */
int gw_volume_delta_write(struct gw_volume *v, uint64_t s, size_t off, size_t len,
                          const uint8_t *src);
/* Finishes every delta update of the volume a crash interrupted (each stripe
 * rewritten whole from its data chunks); 0, or the first failure (those
 * intents stay for the next attempt). */
int gw_volume_recover(struct gw_volume *v);
/* Before any access of stripe s (its lock held): recovers it if an update of
 * it failed in this process and was not recovered yet; 0 when the stripe is
 * consistent, else the recovery's error (the stripe's parities may be stale:
 * write nothing into it). */
int gw_volume_settle(struct gw_volume *v, uint64_t s);
/* Whether stripe s may need gw_volume_settle (no lock needed). */
bool gw_volume_pending(const struct gw_volume *v, uint64_t s);

#endif
