/* A sampler thread and a ring of metric totals; rates are differences. */
#include "gateway/rates.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct sample {
    double t; /* CLOCK_REALTIME seconds */
    struct gw_metrics_totals tot;
};

struct gw_rates {
    struct gw_metrics *m;
    unsigned interval_ms, cap;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    unsigned head, count; /* ring: oldest at (head - count) mod cap */
    struct sample ring[];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void take(struct gw_rates *r)
{
    struct sample s = {now_s(), {0}};
    gw_metrics_totals(r->m, &s.tot);
    r->ring[r->head] = s;
    r->head = (r->head + 1) % r->cap;
    if (r->count < r->cap)
        r->count++;
}

static void *sampler(void *arg)
{
    pthread_setname_np(pthread_self(), "rates");
    struct gw_rates *r = arg;
    pthread_mutex_lock(&r->lock);
    while (!r->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += r->interval_ms / 1000;
        dl.tv_nsec += (long)(r->interval_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        while (!r->stop && pthread_cond_timedwait(&r->cond, &r->lock, &dl) != ETIMEDOUT)
            ;
        if (!r->stop)
            take(r);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

int gw_rates_start(struct gw_metrics *m, unsigned interval_ms, unsigned samples,
                   struct gw_rates **out)
{
    if (!m || interval_ms == 0 || samples < 2)
        return -EINVAL;
    struct gw_rates *r = calloc(1, sizeof(*r) + (samples + 1) * sizeof(r->ring[0]));
    if (!r)
        return -ENOMEM;
    r->m = m;
    r->interval_ms = interval_ms;
    r->cap = samples + 1; /* n rates need n + 1 totals */
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);
    take(r);
    int rc = pthread_create(&r->thread, NULL, sampler, r);
    if (rc) {
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return -rc;
    }
    *out = r;
    return 0;
}

void gw_rates_stop(struct gw_rates *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* The upper bound of the bucket holding quantile q of the requests in d. */
static double quantile(const struct gw_metrics_totals *d, double q)
{
    if (!d->requests)
        return 0;
    uint64_t want = (uint64_t)((double)d->requests * q + 0.999999), cum = 0;
    for (size_t b = 0; b < GW_METRICS_NBUCKETS - 1; b++) {
        cum += d->buckets[b];
        if (cum >= want)
            return gw_metrics_bounds[b];
    }
    return gw_metrics_bounds[GW_METRICS_NBUCKETS - 2] * 2; /* beyond the last bound */
}

static json_t *rate(const struct sample *a, const struct sample *b)
{
    double dt = b->t - a->t > 1e-3 ? b->t - a->t : 1e-3;
    struct gw_metrics_totals d = {
        b->tot.requests - a->tot.requests,
        b->tot.server_errors - a->tot.server_errors,
        b->tot.received_bytes - a->tot.received_bytes,
        b->tot.sent_bytes - a->tot.sent_bytes,
        b->tot.latency_sum_ns - a->tot.latency_sum_ns,
        {0},
    };
    for (size_t i = 0; i < GW_METRICS_NBUCKETS; i++)
        d.buckets[i] = b->tot.buckets[i] - a->tot.buckets[i];
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "t", b->t, "requests_per_s",
                     (double)d.requests / dt, "errors_per_s", (double)d.server_errors / dt,
                     "received_bytes_per_s", (double)d.received_bytes / dt, "sent_bytes_per_s",
                     (double)d.sent_bytes / dt, "latency_mean_s",
                     d.requests ? (double)d.latency_sum_ns / 1e9 / (double)d.requests : 0.0,
                     "latency_p50_s", quantile(&d, 0.5), "latency_p99_s", quantile(&d, 0.99));
}

int gw_rates_json(struct gw_rates *r, json_t **out)
{
    json_t *a = json_array();
    if (!a)
        return -ENOMEM;
    pthread_mutex_lock(&r->lock);
    unsigned first = (r->head + r->cap - r->count) % r->cap;
    for (unsigned i = 1; i < r->count; i++)
        json_array_append_new(
            a, rate(&r->ring[(first + i - 1) % r->cap], &r->ring[(first + i) % r->cap]));
    /* "recent": over the last RECENT intervals, steadier than one sample. */
    enum { RECENT = 10 };
    unsigned k = r->count - 1 < RECENT ? r->count - 1 : RECENT;
    struct sample last = r->ring[(first + r->count - 1) % r->cap];
    struct sample from = r->ring[(first + r->count - 1 - k) % r->cap];
    unsigned interval = r->interval_ms, cap = r->cap;
    pthread_mutex_unlock(&r->lock);
    if (k == 0)
        last.t = now_s(); /* no interval yet: zero rates */
    json_t *recent = rate(&from, &last);
    *out = json_pack("{s:f,s:f,s:o,s:o,s:f}", "interval_s", interval / 1000.0, "window_s",
                     interval / 1000.0 * (cap - 1), "samples", a, "recent", recent,
                     "recent_window_s", last.t - from.t);
    return *out ? 0 : -ENOMEM;
}
