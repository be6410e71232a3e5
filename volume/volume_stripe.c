/*
 * A volume's stripes as objects: the key of stripe s, the lock that
 * serialises writes to one stripe in this gateway, and storing a whole
 * stripe as a new object version (or none, when it is all zeros).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "volume/volume_internal.h"

#define LOCK_SLOTS 256 /* stripe locks, hashed by volume and stripe */

/* Serialises the read-modify-writes of one stripe in this process. */
static pthread_mutex_t stripe_locks[LOCK_SLOTS] = {[0 ... LOCK_SLOTS - 1] =
                                                       PTHREAD_MUTEX_INITIALIZER};

pthread_mutex_t *gw_volume_stripe_lock(const struct gw_volume *v, uint64_t s)
{
    uint64_t h = (s + v->name_hash) * 0x9e3779b97f4a7c15ull;
    return &stripe_locks[(h >> 56) % LOCK_SLOTS];
}

void gw_volume_stripe_key(uint64_t s, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, s);
}

static bool all_zero(const uint8_t *b, size_t n)
{
    return n == 0 || (b[0] == 0 && memcmp(b, b + 1, n - 1) == 0);
}

/* Stores the whole stripe (a new object version), or frees it when all zeros. */
int gw_volume_stripe_store(struct gw_volume *v, uint64_t s, const uint8_t *stripe)
{
    char key[17];
    gw_volume_stripe_key(s, key);
    if (all_zero(stripe, v->stripe_bytes)) {
        int rc = gw_object_delete(v->o, v->bucket, key);
        return rc == -ENOENT ? 0 : rc;
    }
    struct gw_put *p;
    int rc = gw_put_begin(v->o, v->bucket, key, NULL, &p);
    if (rc)
        return rc;
    gw_put_striped(p); /* delta updates rewrite its chunks (volume_delta.c) */
    if ((rc = gw_put_write(p, stripe, v->stripe_bytes))) {
        gw_put_abort(p);
        return rc;
    }
    return gw_put_commit(p, NULL);
}
