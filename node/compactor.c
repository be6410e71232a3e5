/* Background compaction of a node's chunk store (compactor.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codecs/errf.h"
#include "inec/log.h"
#include "node/compactor.h"

#define YIELD_MS 10 /* longest wait per copied record for foreground work */

struct node_compactor {
    struct node_store *store;
    struct node_compaction_config cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    atomic_bool stop;
};

int node_compaction_from_json(const json_t *j, struct node_compaction_config *out, char *err,
                              size_t errlen)
{
    if (!j)
        return 0;
    if (!json_is_object(j))
        return codec_errf(err, errlen, -EINVAL, "compaction: not an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v)
    {
        if (!json_is_number(v) || json_number_value(v) < -1)
            return codec_errf(err, errlen, -EINVAL, "compaction.%s: not a number", k);
        double d = json_number_value(v);
        if (strcmp(k, "interval_ms") == 0)
            out->interval_ms = (int)d;
        else if (strcmp(k, "dead_ratio") == 0 && d >= 0 && d <= 1)
            out->dead_ratio = d;
        else if (strcmp(k, "seal_bytes") == 0 && d >= 0)
            out->seal_bytes = (uint64_t)d;
        else if (strcmp(k, "mbps") == 0)
            out->mbps = d;
        else
            return codec_errf(err, errlen, -EINVAL, "compaction.%s: unknown or out of range", k);
    }
    return 0;
}

int node_compaction_resolve(const struct node_compaction_config *cfg,
                            struct node_compaction_config *out)
{
    struct node_compaction_config c = cfg ? *cfg : (struct node_compaction_config){0};
    if (c.dead_ratio < 0 || c.dead_ratio > 1)
        return -EINVAL;
    if (c.interval_ms == 0)
        c.interval_ms = 1000;
    if (c.dead_ratio == 0)
        c.dead_ratio = 0.4;
    if (c.seal_bytes == 0)
        c.seal_bytes = 16u << 20;
    if (c.mbps == 0)
        c.mbps = 50;
    *out = c;
    return 0;
}

static int cancelled(void *arg)
{
    struct node_compactor *c = arg;
    return atomic_load(&c->stop);
}

static void *compactor_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-compactor");
    struct node_compactor *c = arg;
    uint64_t seen = UINT64_MAX; /* at start, look once: a store may open with dead bytes */
    struct node_compact_options o = {
        .min_dead = c->cfg.dead_ratio,
        .seal_active_bytes = c->cfg.seal_bytes,
        .rate_bytes = c->cfg.mbps > 0 ? (uint64_t)(c->cfg.mbps * 1e6) : 0,
        .yield_ms = YIELD_MS,
        .cancel = cancelled,
        .arg = c,
    };
    int64_t wait_ms = c->cfg.interval_ms;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->stop)) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += wait_ms / 1000;
        until.tv_nsec += (long)(wait_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while (!atomic_load(&c->stop) &&
               pthread_cond_timedwait(&c->cond, &c->mu, &until) != ETIMEDOUT)
            ;
        if (atomic_load(&c->stop))
            break;
        uint64_t now = node_store_appended(c->store);
        if (now == seen)
            continue;
        seen = now;
        pthread_mutex_unlock(&c->mu);
        struct node_compact_result r = {0};
        int rc = node_store_compact_opts(c->store, &o, &r);
        /* Each look scans the chunk index (~15-50 ns a chunk): on a node of
         * millions of chunks under steady writes, a look every second would
         * keep a core busy. Looks are spaced to NODE_SCAN_SPACING times it. */
        int64_t spaced_ms = (int64_t)(r.scan_ns / 1000000) * NODE_SCAN_SPACING;
        wait_ms = spaced_ms > c->cfg.interval_ms ? spaced_ms : c->cfg.interval_ms;
        if (rc && rc != -ECANCELED)
            inec_log(INEC_LOG_WARN, "node", "compaction failed err=%d", rc);
        else if (r.segments)
            inec_log(INEC_LOG_INFO, "node",
                     "compacted segments=%" PRIu64 " copied=%" PRIu64 " freed=%" PRIu64, r.segments,
                     r.bytes_copied, r.bytes_freed);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int node_compactor_start(struct node_store *s, const struct node_compaction_config *cfg,
                         struct node_compactor **out)
{
    *out = NULL;
    struct node_compaction_config r;
    int rc = node_compaction_resolve(cfg, &r);
    if (rc || r.interval_ms < 0)
        return rc;
    struct node_compactor *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->store = s;
    c->cfg = r;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = -pthread_create(&c->thread, NULL, compactor_main, c))) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void node_compactor_stop(struct node_compactor *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->stop, true);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
