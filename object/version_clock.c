/*
 * Metadata records, versions: a hybrid logical clock.
 *
 * A version is the wall clock in ns with its low 10 bits replaced by this
 * gateway's id, unless a version this gateway has seen (read, or a node's
 * refusal) is ahead of the wall clock: then one tick (1024 ns) past it. So a
 * gateway never needs to read a record to version the next one, versions of
 * one gateway only grow, and a gateway that learns of a newer version
 * (through any read) versions its next write above it.
 */
#include "object/objects_internal.h"

#define HLC_TICK 1024u

void gw_hlc_observe(struct gw_objects *o, uint64_t version)
{
    uint64_t v = version & ~(uint64_t)(HLC_TICK - 1), cur = atomic_load(&o->hlc);
    while (v > cur && !atomic_compare_exchange_weak(&o->hlc, &cur, v))
        ;
}

uint64_t gw_hlc_next(struct gw_objects *o)
{
    uint64_t cur = atomic_load(&o->hlc), next;
    do {
        uint64_t wall = (uint64_t)gw_realtime_ns() & ~(uint64_t)(HLC_TICK - 1);
        next = wall > cur ? wall : cur + HLC_TICK;
    } while (!atomic_compare_exchange_weak(&o->hlc, &cur, next));
    return next | o->gw_id;
}
