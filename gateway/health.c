/* Health checks over the cluster document: counting and wording, no I/O. */
#include "gateway/health.h"

#include <errno.h>
#include <math.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct checks {
    json_t *err, *warn;
};

static void add(struct checks *c, bool err, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_array_append_new(
        err ? c->err : c->warn,
        json_pack("{s:s,s:s,s:s}", "severity", err ? "ERR" : "WARN", "code", code, "message", msg));
}

static json_int_t num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : (json_int_t)json_number_value(v);
}

/* "a, b, c" of up to 8 names, then "and N more". */
static void names(char *out, size_t len, const char *const *v, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < 8 && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%s", i ? ", " : "", v[i]);
    if (n > 8 && o < len)
        snprintf(out + o, len - o, " and %zu more", n - 8);
}

static void nodes(const json_t *cluster, struct checks *c, size_t *ndown)
{
    const json_t *a = json_object_get(cluster, "nodes");
    size_t n = json_array_size(a), nd = 0, nm = 0, nf = 0, nnf = 0;
    const char *down[256], *marked[256], *full[256], *nearfull[256];
    for (size_t i = 0; i < n; i++) {
        const json_t *node = json_array_get(a, i);
        const char *id = json_string_value(json_object_get(node, "id"));
        if (!id)
            id = "?";
        const char *state = json_string_value(json_object_get(node, "state"));
        if (!json_is_true(json_object_get(node, "up"))) {
            if (nd < 256)
                down[nd] = id;
            nd++;
            continue;
        }
        if (state && strcmp(state, "up") != 0 && nm < 256)
            marked[nm++] = id;
        json_int_t cap = num(node, "capacity_bytes"), used = num(node, "used_bytes");
        if (cap > 0 && (double)used >= GW_HEALTH_FULL * (double)cap) {
            if (nf < 256)
                full[nf++] = id;
        } else if (cap > 0 && (double)used >= GW_HEALTH_NEARFULL * (double)cap && nnf < 256) {
            nearfull[nnf++] = id;
        }
    }
    char list[512];
    if (nd) {
        names(list, sizeof(list), down, nd < 256 ? nd : 256);
        add(c, false, "NODE_DOWN", "%zu of %zu nodes down: %s", nd, n, list);
    }
    if (nm) {
        names(list, sizeof(list), marked, nm);
        add(c, false, "NODE_MARKED", "%zu nodes marked down or draining in the map: %s", nm, list);
    }
    if (nf) {
        names(list, sizeof(list), full, nf);
        add(c, true, "FULL", "%zu nodes at %.0f %% of their capacity or more: %s", nf,
            GW_HEALTH_FULL * 100, list);
    }
    if (nnf) {
        names(list, sizeof(list), nearfull, nnf);
        add(c, false, "NEARFULL", "%zu nodes at %.0f %% of their capacity or more: %s", nnf,
            GW_HEALTH_NEARFULL * 100, list);
    }
    *ndown = nd;
}

/* A pool spans every node (gw_objects_pools_json lists them): with more of
 * them down than its parities some stripes lost too many chunks. */
static void pools(const json_t *cluster, struct checks *c, size_t ndown)
{
    size_t nnodes = json_array_size(json_object_get(cluster, "nodes"));
    const json_t *a = json_object_get(cluster, "pools");
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *p = json_array_get(a, i);
        const char *name = json_string_value(json_object_get(p, "name"));
        json_int_t n = num(p, "n"), k = num(p, "k"), wq = num(p, "write_quorum");
        if (!name || n <= 0)
            continue;
        if ((json_int_t)ndown > n - k)
            add(c, true, "POOL_UNAVAILABLE",
                "pool %s: %zu nodes down, more than the %lld chunks a stripe may lose: objects "
                "with chunks on them are unreadable",
                name, ndown, (long long)(n - k));
        /* Placement puts a stripe on the n best up nodes when the cluster has
         * spares, so writes are refused only when fewer than the quorum are up. */
        if (wq > 0 && (json_int_t)(nnodes - ndown) < wq)
            add(c, true, "POOL_WRITES_REFUSED",
                "pool %s: %zu nodes up, fewer than its write quorum of %lld: writes fail", name,
                nnodes - ndown, (long long)wq);
    }
}

/* Stripes by how many of their chunks wait for repair. */
static void degraded(const json_t *cluster, const json_t *repair, struct checks *c)
{
    json_int_t queued = num(cluster, "repair_queue");
    size_t nq = json_array_size(repair);
    if (!queued && !nq)
        return;
    if (!nq || nq > 4096) { /* counting stripes is quadratic: only for a short queue */
        add(c, false, "DEGRADED_STRIPES", "%lld chunks wait for repair",
            (long long)(nq ? (json_int_t)nq : queued));
        return;
    }
    /* Count distinct (object, stripe) pairs and their lost chunks: the queue
     * is small (entries are chunks), a quadratic pass is enough. */
    size_t by_lost[8] = {0}, stripes = 0;
    for (size_t i = 0; i < nq; i++) {
        const json_t *e = json_array_get(repair, i);
        const char *obj = json_string_value(json_object_get(e, "object"));
        json_int_t st = num(e, "stripe");
        bool seen = false;
        size_t lost = 0;
        for (size_t j = 0; j < nq && !seen; j++) {
            const json_t *f = json_array_get(repair, j);
            const char *o2 = json_string_value(json_object_get(f, "object"));
            if (num(f, "stripe") != st || !obj || !o2 || strcmp(obj, o2) != 0)
                continue;
            if (j < i)
                seen = true;
            lost++;
        }
        if (seen)
            continue;
        stripes++;
        by_lost[lost < 8 ? lost : 7]++;
    }
    char detail[256] = "";
    size_t o = 0;
    for (size_t l = 1; l < 8 && o < sizeof(detail); l++)
        if (by_lost[l])
            o += (size_t)snprintf(detail + o, sizeof(detail) - o, "%s%zu lack %zu%s chunk%s",
                                  o ? ", " : "", by_lost[l], l, l == 7 ? "+" : "",
                                  l == 1 ? "" : "s");
    add(c, false, "DEGRADED_STRIPES", "%zu chunks of %zu stripes wait for repair (%s)", nq, stripes,
        detail);
}

/* The repair service (gw_objects_repair_status): what it is doing, and how
 * far along; degraded stripes its last scan found. */
static void repairing(const json_t *r, struct checks *c)
{
    if (!json_is_object(r))
        return;
    const char *state = json_string_value(json_object_get(r, "state"));
    const json_t *p = json_object_get(r, "progress"), *q = json_object_get(r, "queue");
    json_int_t queued = num(q, "stripes"), done = num(p, "stripes_done"),
               total = num(p, "stripes_total");
    if (state && strcmp(state, "paused") == 0 && queued > 0) {
        add(c, false, "REPAIR_PAUSED", "repair is paused with %lld stripes queued",
            (long long)queued);
    } else if (state && strcmp(state, "running") == 0 && total > 0) {
        double rate = json_number_value(json_object_get(p, "rate_bytes_per_s"));
        double eta = json_number_value(json_object_get(p, "eta_s"));
        char when[64] = "ETA unknown";
        if (eta >= 0)
            snprintf(when, sizeof(when), "ETA %.0f s", eta);
        add(c, false, "REPAIR_RUNNING",
            "repair: %lld of %lld stripes rebuilt (%.0f %%), %.1f MB/s, %s", (long long)done,
            (long long)total, 100.0 * (double)done / (double)total, rate / 1e6, when);
    }
    const json_t *by = json_object_get(json_object_get(r, "scan"), "degraded_by_lost");
    char detail[256] = "";
    size_t o = 0;
    json_int_t stripes = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)by, k, v)
    {
        json_int_t n = json_integer_value(v);
        if (n <= 0 || o >= sizeof(detail))
            continue;
        stripes += n;
        o += (size_t)snprintf(detail + o, sizeof(detail) - o, "%s%lld lack %s", o ? ", " : "",
                              (long long)n, k);
    }
    if (stripes)
        add(c, false, "DEGRADED_SCAN", "the last scan found %lld degraded stripes (%s chunks)",
            (long long)stripes, detail);
}

/* Versions are hybrid logical clocks, so skew does not reorder writes; but
 * lifecycle ages, logs and presigned URL expiry read wall clocks. */
static void clocks(const json_t *cluster, struct checks *c)
{
    const json_t *limit = json_object_get(cluster, "clock_skew_warn_s");
    double max = json_is_number(limit) ? json_number_value(limit) : GW_HEALTH_CLOCK_SKEW_S;
    const json_t *a = json_object_get(cluster, "nodes");
    char detail[512] = "";
    size_t o = 0, n = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *node = json_array_get(a, i);
        const json_t *off = json_object_get(node, "clock_offset_s");
        const char *id = json_string_value(json_object_get(node, "id"));
        if (!json_is_number(off) || fabs(json_number_value(off)) <= max)
            continue;
        if (n++ < 8 && o < sizeof(detail))
            o += (size_t)snprintf(detail + o, sizeof(detail) - o, "%s%s %+.3f s", o ? ", " : "",
                                  id ? id : "?", json_number_value(off));
    }
    if (n > 8 && o < sizeof(detail))
        snprintf(detail + o, sizeof(detail) - o, " and %zu more", n - 8);
    if (n)
        add(c, false, "CLOCK_SKEW",
            "clocks off the gateway's by more than %.3f s on %zu of %zu nodes: %s", max, n,
            json_array_size(a), detail);
}

static void counters(const json_t *cluster, struct checks *c)
{
    json_int_t corrupt = num(cluster, "corrupt_chunks"), listed = 0;
    const json_t *a = json_object_get(cluster, "nodes");
    for (size_t i = 0; i < json_array_size(a); i++)
        listed += num(json_array_get(a, i), "repair_list");
    if (corrupt || listed)
        add(c, false, "CORRUPT_CHUNKS",
            "%lld corrupt chunks seen by reads since the gateway started; %lld on the nodes' "
            "repair lists (reads and scrub)",
            (long long)corrupt, (long long)listed);
    json_int_t failed = num(cluster, "failed_reads");
    if (failed)
        add(c, false, "FAILED_READS",
            "%lld stripe reads could not be rebuilt since the gateway started", (long long)failed);
}

json_t *gw_health_eval(const json_t *cluster, const json_t *repair, const json_t *status)
{
    struct checks c = {json_array(), json_array()};
    size_t ndown = 0;
    nodes(cluster, &c, &ndown);
    pools(cluster, &c, ndown);
    degraded(cluster, repair, &c);
    repairing(status, &c);
    counters(cluster, &c);
    clocks(cluster, &c);
    const char *verdict = json_array_size(c.err)    ? "HEALTH_ERR"
                          : json_array_size(c.warn) ? "HEALTH_WARN"
                                                    : "HEALTH_OK";
    json_array_extend(c.err, c.warn);
    json_decref(c.warn);
    return json_pack("{s:s,s:o}", "status", verdict, "checks", c.err);
}

int gw_health_status_json(struct gw_objects *o, struct gw_rates *rates, json_t **out)
{
    json_t *cluster = NULL, *repair = NULL, *r = NULL;
    int rc = gw_objects_cluster_json(o, &cluster);
    if (rc)
        return rc;
    if (gw_objects_repair_json(o, &repair) != 0)
        repair = NULL;
    if (rates && gw_rates_json(rates, &r) == 0) {
        json_t *recent = json_incref(json_object_get(r, "recent"));
        json_object_set_new(recent, "window_s", json_incref(json_object_get(r, "recent_window_s")));
        json_decref(r);
        r = recent;
    }
    json_t *status = NULL;
    if (gw_objects_repair_status(o, &status) != 0)
        status = NULL;
    json_t *health = gw_health_eval(cluster, repair, status);
    json_decref(repair);
    json_decref(status);
    *out = json_pack("{s:o,s:o,s:o*}", "health", health, "cluster", cluster, "rates", r);
    return *out ? 0 : -ENOMEM;
}
