/*
 * Opening and closing the object layer (embedded: nine node services in
 * this process; or node processes over tcp named by a cluster map), and the
 * control API's cluster queries: the top of the layer, the one file that
 * starts and stops gc, sessions, repair and the detector.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deg/deg.h"
#include "inec/inec.h"
#include "inec/log.h"
#include "node/cpus.h"
#include "node/service.h"
#include "object/decode_sessions.h"
#include "object/objects_internal.h"
#include "object/repair.h"
#include "object/stripe_fetch.h"

/* --- open / close --------------------------------------------------------- */

static int opt_int(const json_t *opts, const char *name, int dflt)
{
    json_t *v = json_object_get(opts, name);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static int64_t opt_i64(const json_t *opts, const char *name, int64_t dflt)
{
    json_t *v = json_object_get(opts, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* Everything but the node services: map, pools, device, threads. */
static int open_common(struct gw_objects *o, const json_t *map, const json_t *opts, char *msg,
                       size_t msglen)
{
    char *text = json_dumps(map, JSON_COMPACT);
    if (!text)
        return snprintf(msg, msglen, "no cluster map"), -EINVAL;
    gw_session_pool_init(&o->sessions, GW_SESSIONS_IDLE);
    int rc = place_map_parse(text, strlen(text), &o->map, msg, msglen);
    free(text);
    if (rc)
        return rc;
    o->nnodes = o->map->nnodes;
    if (o->nnodes < 1)
        return snprintf(msg, msglen, "the cluster map has no nodes"), -EINVAL;
    o->nodes = calloc((size_t)o->nnodes, sizeof(*o->nodes));
    if (!o->nodes)
        return -ENOMEM;
    for (int i = 0; i < o->nnodes; i++) {
        snprintf(o->nodes[i].id, sizeof(o->nodes[i].id), "%s", o->map->nodes[i].id);
        snprintf(o->nodes[i].address, sizeof(o->nodes[i].address), "%s", o->map->nodes[i].address);
        pthread_mutex_init(&o->nodes[i].lock, NULL);
        pthread_cond_init(&o->nodes[i].opened, NULL);
    }
    if (o->map->npools == 0)
        return snprintf(msg, msglen, "the cluster map has no pools"), -EINVAL;
    int maxm = 0;
    for (int i = 0; i < o->map->npools; i++) {
        if ((rc = gw_pool_add(o, &o->map->pools[i], msg, msglen)))
            return rc;
        if (o->map->pools[i].n - o->map->pools[i].k > maxm)
            maxm = o->map->pools[i].n - o->map->pools[i].k;
    }
    /* Metadata: 2M+1 copies, written to a majority and read from M+1, so any M
     * nodes may be down for both (M = the most parities of any pool). Homes
     * are members (not out), up or not: meta_homes.c. */
    int members = 0;
    for (int i = 0; i < o->nnodes; i++)
        members += o->map->nodes[i].state != PLACE_OUT;
    o->meta_copies = 2 * maxm + 1 < members ? 2 * maxm + 1 : members;
    if (o->meta_copies < 1)
        return snprintf(msg, msglen, "every node is out"), -EHOSTDOWN;
    int tol = (o->meta_copies - 1) / 2;
    o->meta_wq = o->meta_copies - tol;
    o->meta_rq = tol + 1;
    /* The map's failure detector is the one clock of every peer link. */
    if (!o->embedded && json_object_get(opts, "timeout_ms"))
        return snprintf(msg, msglen, "gateway.timeout_ms: set map.peer_timeout_ms instead"),
               -EINVAL;
    o->timeout_ms = o->map->peer_timeout_ms;
    o->heartbeat_ms = o->map->heartbeat_ms;
    /* A version's chunks outlive every GET that began before it was replaced:
     * no GET streams longer than max_get_ms (on any gateway sharing this
     * configuration), and the chunks go gc_delay_ms after the change. */
    o->max_get_ms = opt_int(opts, "max_get_ms", GW_MAX_GET_MS);
    o->clock_skew_warn_ms = opt_int(opts, "clock_skew_warn_ms", 500);
    if (o->clock_skew_warn_ms <= 0)
        return snprintf(msg, msglen, "gateway.clock_skew_warn_ms must be > 0"), -EINVAL;
    o->mpu_expire_ms = opt_i64(opts, "multipart_expire_ms", 7 * 24 * 3600000LL);
    o->lifecycle_day_ms = opt_i64(opts, "lifecycle_day_ms", 24 * 3600000LL);
    if (o->mpu_expire_ms < 0 || o->lifecycle_day_ms <= 0)
        return snprintf(msg, msglen,
                        "gateway.multipart_expire_ms must be >= 0, lifecycle_day_ms > 0"),
               -EINVAL;
    o->gc_delay_ms = opt_int(opts, "gc_delay_ms", o->max_get_ms + GW_GC_MARGIN_MS);
    if (o->max_get_ms <= 0 || o->gc_delay_ms < 0)
        return snprintf(msg, msglen, "gateway.max_get_ms must be > 0, gc_delay_ms >= 0"), -EINVAL;
    if (o->gc_delay_ms <= o->max_get_ms)
        inec_log(INEC_LOG_WARN, "gateway",
                 "gc_delay_ms=%d <= max_get_ms=%d: a slow GET may lose the chunks it reads",
                 o->gc_delay_ms, o->max_get_ms);
    o->heal_max = opt_int(opts, "heal_max", 65536);
    if (o->heal_max < 1)
        return snprintf(msg, msglen, "gateway.heal_max must be > 0"), -EINVAL;
    /* Inline needs a parity among the homes: RS(W, C - W). */
    int inline_max = opt_int(opts, "inline_max", GW_INLINE_MAX);
    if (inline_max < 0 || inline_max > GW_INLINE_CAP)
        return snprintf(msg, msglen, "gateway.inline_max must be in [0, %d]", GW_INLINE_CAP),
               -EINVAL;
    o->inline_max = o->meta_copies > o->meta_wq ? (size_t)inline_max : 0;
    /* A degraded GET rebuilds a star decode (RS, LRC) from direct reads of k
     * chunks (get.c); "deg" runs it through the decode DEG's sessions. */
    const char *dr = json_string_value(json_object_get(opts, "degraded_read"));
    if (json_object_get(opts, "degraded_read") &&
        (!dr || (strcmp(dr, "direct") && strcmp(dr, "deg"))))
        return snprintf(msg, msglen, "gateway.degraded_read must be \"direct\" or \"deg\""),
               -EINVAL;
    o->degraded_read_deg = dr && !strcmp(dr, "deg");
    o->bucket_cache_ms = opt_int(opts, "bucket_cache_ms", GW_BUCKET_CACHE_MS);
    if (o->bucket_cache_ms < 0)
        return snprintf(msg, msglen, "gateway.bucket_cache_ms must be >= 0"), -EINVAL;
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint32_t)gw_realtime_ns() ^ (uint32_t)getpid();
    o->gw_id = r & 1023;
    pthread_mutex_init(&o->pool_lock, NULL);
    pthread_mutex_init(&o->gc_lock, NULL);
    pthread_cond_init(&o->gc_cond, NULL);
    o->gc = json_array();
    pthread_mutex_init(&o->bucket_lock, NULL);
    if (!(o->buckets = json_object()))
        return snprintf(msg, msglen, "out of memory"), -ENOMEM;
    if ((rc = gw_fanout_create(GW_FAN_THREADS, &o->fan)) ||
        (rc = gw_fanout_create(GW_PUT_THREADS, &o->put_fan)) || (rc = gw_fetcher_create(o)) ||
        (rc = gw_decoder_create(o)))
        return snprintf(msg, msglen, "cannot start threads"), rc;
    if (pthread_create(&o->gc_thread, NULL, gw_gc_main, o) == 0)
        o->gc_started = true;
    return 0;
}

/* What runs on its own once the nodes can be reached: the metadata heal
 * (whose first sweep starts at once), the failure detector, repair. */
static int start_services(struct gw_objects *o, const json_t *opts, char *msg, size_t msglen)
{
    int rc = gw_meta_heal_start(o);
    if (rc)
        snprintf(msg, msglen, "cannot start threads");
    else if ((rc = gw_detector_start(o)))
        snprintf(msg, msglen, "cannot start the failure detector");
    else if ((rc = gw_repair_start(o, json_object_get(opts, "repair"))))
        snprintf(msg, msglen, "the repair service did not start: bad \"repair\" options?");
    return rc;
}

static int open_device(struct gw_objects *o, const char *options, char *msg, size_t msglen)
{
    int rc = inec_device_open(NULL, options, &o->dev);
    if (rc)
        snprintf(msg, msglen, "gateway device (%s): %s", options, inec_errmsg());
    return rc;
}

int gw_objects_open(const json_t *cfg, struct gw_objects **out, char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_objects *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    msg[0] = '\0';
    const json_t *opts = json_object_get(cfg, "gateway");
    int rc = open_common(o, json_object_get(cfg, "map"), opts, msg, msglen);
    /* The cluster secret (inec/auth.h) every node connection proves; the CLI
     * resolves "secret_file" against cluster.json's directory. */
    const char *secret = json_string_value(json_object_get(cfg, "secret_file"));
    if (rc == 0 && secret && (strchr(secret, ',') || strlen(secret) >= sizeof(o->secret)))
        rc = -EINVAL, snprintf(msg, msglen, "secret_file '%s': too long or has a comma", secret);
    if (rc == 0) {
        snprintf(o->secret, sizeof(o->secret), "%s", secret ? secret : "");
        /* A HOST; an IPv6 one with or without its brackets. */
        const char *h = json_string_value(json_object_get(opts, "deg_listen"));
        char host[300], listen[310];
        snprintf(host, sizeof(host), strchr(h ? h : "", ':') && h[0] != '[' ? "[%s]" : "%s",
                 h ? h : "127.0.0.1");
        snprintf(listen, sizeof(listen), "%s:0", host);
        bool crowded = node_host_crowded(o->map, host);
        if (crowded)
            inec_log(INEC_LOG_INFO, "gateway",
                     "as many nodes on %s as CPUs this process may use (%d): engines do not spin",
                     host, node_usable_cpus());
        char devopts[sizeof(o->deg_options)];
        snprintf(devopts, sizeof(devopts),
                 "transport=tcp,listen=%s,timeout_ms=%d,heartbeat_ms=%d%s%s%s", listen,
                 o->timeout_ms, o->heartbeat_ms, crowded ? ",spin=0" : "", secret ? ",secret=" : "",
                 secret ? secret : "");
        snprintf(o->deg_options, sizeof(o->deg_options), "%s", devopts);
        rc = open_device(o, devopts, msg, msglen);
    }
    if (rc == 0)
        rc = start_services(o, opts, msg, msglen);
    if (rc) {
        gw_objects_close(o);
        return rc;
    }
    inec_log(INEC_LOG_INFO, "gateway", "cluster open nodes=%d pools=%d meta_copies=%d", o->nnodes,
             atomic_load(&o->npools), o->meta_copies);
    *out = o;
    return 0;
}

static json_t *embedded_map(const json_t *opts)
{
    int n = opt_int(opts, "nodes", 9);
    const char *profile = json_string_value(json_object_get(opts, "profile"));
    json_t *nodes = json_array();
    for (int i = 0; i < n; i++) {
        char id[16], addr[32];
        snprintf(id, sizeof(id), "n%d", i);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", 1 + i); /* never dialled: mem transport */
        json_array_append_new(nodes, json_pack("{s:s,s:s}", "id", id, "address", addr));
    }
    json_t *map = json_pack("{s:i,s:o,s:[{s:s,s:s,s:i}]}", "peer_timeout_ms",
                            opt_int(opts, "timeout_ms", PLACE_PEER_TIMEOUT_MS), "nodes", nodes,
                            "pools", "name", "default", "profile", profile ? profile : "rs:k=6,m=3",
                            "chunk_size", opt_int(opts, "chunk_size", PLACE_CHUNK_SIZE));
    if (map && json_object_get(opts, "heartbeat_ms"))
        json_object_set(map, "heartbeat_ms", json_object_get(opts, "heartbeat_ms"));
    return map;
}

static int start_node(struct gw_objects *o, int i, char *msg, size_t msglen)
{
    char dir[4300];
    snprintf(dir, sizeof(dir), "%s/node-%d", o->dir, i);
    struct node_service_config sc = {.id = o->nodes[i].id,
                                     .domain = o->map->nodes[i].domain,
                                     .data_dir = dir,
                                     .device_options = o->node_devopts,
                                     .timeout_ms = o->timeout_ms,
                                     .direct_min = o->node_direct_min};
    struct node_service *svc;
    int rc = node_service_start(&sc, &svc, msg, msglen);
    if (rc)
        return rc;
    pthread_mutex_lock(&o->nodes[i].lock);
    o->nodes[i].svc = svc;
    pthread_mutex_unlock(&o->nodes[i].lock);
    gw_peer_answered(o, i);
    return 0;
}

int gw_objects_open_embedded_opts(const char *dir, const json_t *opts, struct gw_objects **out,
                                  char *msg, size_t msglen)
{
    *out = NULL;
    msg[0] = '\0';
    if (mkdir(dir, 0755) && errno != EEXIST)
        return snprintf(msg, msglen, "%s: %s", dir, strerror(errno)), -errno;
    struct gw_objects *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    o->embedded = true;
    snprintf(o->dir, sizeof(o->dir), "%s", dir);
    int rc = node_direct_min_from_json(json_object_get(opts, "direct_min"), &o->node_direct_min,
                                       msg, msglen);
    if (rc) {
        free(o);
        return rc;
    }
    int threads = opt_int(opts, "engine_threads", 2);
    snprintf(o->node_devopts, sizeof(o->node_devopts), "transport=mem,engine_threads=%d", threads);
    snprintf(o->deg_options, sizeof(o->deg_options), "%s", o->node_devopts);
    /* The map is made once and kept in DIR/cluster.json (pools added later live there too). */
    char path[4200];
    snprintf(path, sizeof(path), "%s/cluster.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *map = NULL;
    bool fresh = !root;
    if (root)
        map = json_incref(json_object_get(root, "map"));
    else if (access(path, F_OK) == 0) {
        snprintf(msg, msglen, "%s:%d: %s", path, je.line, je.text);
        free(o);
        return -EINVAL;
    } else
        map = embedded_map(opts);
    json_decref(root);
    rc = open_common(o, map, opts, msg, msglen);
    json_decref(map);
    if (rc == 0)
        rc = open_device(o, o->node_devopts, msg, msglen);
    for (int i = 0; rc == 0 && i < o->nnodes; i++)
        rc = start_node(o, i, msg, msglen);
    if (rc == 0 && fresh && (rc = gw_save_embedded_map(o)))
        snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
    if (rc == 0)
        rc = start_services(o, opts, msg, msglen);
    if (rc) {
        gw_objects_close(o);
        return rc;
    }
    *out = o;
    return 0;
}

int gw_objects_open_embedded(const char *dir, struct gw_objects **out, char *msg, size_t msglen)
{
    return gw_objects_open_embedded_opts(dir, NULL, out, msg, msglen);
}

int gw_objects_node_set_running(struct gw_objects *o, const char *id, bool running)
{
    int i = place_map_node(o->map, id);
    if (i < 0)
        return -ENOENT;
    if (!o->embedded)
        return -EOPNOTSUPP;
    struct gw_node *nd = &o->nodes[i];
    if (running) {
        if (nd->svc)
            return 0;
        char msg[256];
        return start_node(o, i, msg, sizeof(msg));
    }
    /* A connect that read svc before it went uses it until it returns: the
     * service is freed only after (else a stop freed it under a fan-out
     * thread opening a client, which crashed the process at random). */
    pthread_mutex_lock(&nd->lock);
    struct node_service *svc = nd->svc;
    nd->svc = NULL;
    while (nd->opening > 0)
        pthread_cond_wait(&nd->opened, &nd->lock);
    pthread_mutex_unlock(&nd->lock);
    gw_drop_clients(nd);
    node_service_stop(svc);
    return 0;
}

void gw_objects_close(struct gw_objects *o)
{
    if (!o)
        return;
    gw_repair_stop(o);
    gw_meta_heal_stop(o);
    gw_detector_stop(o);
    if (o->gc_started) {
        pthread_mutex_lock(&o->gc_lock);
        o->gc_stop = true;
        pthread_cond_broadcast(&o->gc_cond);
        pthread_mutex_unlock(&o->gc_lock);
        pthread_join(o->gc_thread, NULL);
    }
    /* What is left of the garbage: embedded, no other gateway can be reading
     * it, so it goes now; otherwise a GET on another gateway may be, and the
     * scanner collects it as orphans (orphan_grace_ms >= max_get_ms). */
    if (o->fan && o->nodes && o->embedded)
        gw_gc_run(o, true);
    gw_fanout_destroy(o->fan);
    /* Every PUT ended: none of its stripes is queued. */
    gw_fanout_destroy(o->put_fan);
    gw_fetcher_destroy(o); /* reads a GET left behind (late, not needed) */
    gw_repair_free(o);     /* after the reads left behind: they may report */
    gw_session_pool_destroy(o, &o->sessions);
    gw_decoder_destroy(o);
    for (int i = 0; o->nodes && i < o->nnodes; i++)
        gw_drop_clients(&o->nodes[i]);
    for (int i = 0; o->nodes && i < o->nnodes; i++) {
        node_service_stop(o->nodes[i].svc);
        pthread_mutex_destroy(&o->nodes[i].lock);
        pthread_cond_destroy(&o->nodes[i].opened);
    }
    inec_device_close(o->dev);
    int np = atomic_load(&o->npools);
    for (int i = 0; i < np; i++)
        codec_destroy(o->pools[i].codec);
    json_decref(o->gc);
    json_decref(o->buckets);
    free(o->nodes);
    place_map_destroy(o->map);
    free(o);
}

/* --- control API queries ------------------------------------------------------ */

struct health_job {
    struct gw_objects *o;
    json_t **out;
};

static void health_one(void *arg, int i)
{
    struct health_job *h = arg;
    struct gw_objects *o = h->o;
    const struct place_node *pn = &o->map->nodes[i];
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:f}", "id", pn->id, "addr",
                          o->embedded ? "embedded" : pn->address, "domain", pn->domain, "state",
                          place_state_name(pn->state), "weight", pn->weight);
    struct node_client *c;
    int rc = gw_client_get(o, i, &c);
    struct node_health nh;
    struct node_store_stats st;
    int64_t sent_ns = gw_realtime_ns(), back_ns = 0;
    if (rc == 0 && (rc = node_client_health(c, &nh)) == 0) {
        back_ns = gw_realtime_ns();
        rc = node_client_stats(c, &st);
    }
    gw_client_put(o, i, c, rc);
    json_object_set_new(j, "up", json_boolean(rc == 0));
    json_object_update_new(j, gw_peer_json(o, i));
    if (rc == 0) {
        json_object_set_new(j, "capacity_bytes", json_integer((json_int_t)st.capacity));
        json_object_set_new(j, "used_bytes", json_integer((json_int_t)st.segment_bytes));
        json_object_set_new(j, "live_bytes", json_integer((json_int_t)st.live_bytes));
        json_object_set_new(j, "dead_bytes", json_integer((json_int_t)st.dead_bytes));
        json_object_set_new(j, "compacted_bytes", json_integer((json_int_t)st.compacted_bytes));
        json_object_set_new(j, "chunks", json_integer((json_int_t)st.chunks));
        json_object_set_new(j, "metas", json_integer((json_int_t)st.metas));
        json_object_set_new(j, "repair_list", json_integer((json_int_t)st.repair));
        json_object_set_new(j, "uptime_ms", json_integer((json_int_t)nh.uptime_ms));
        /* The node read its clock somewhere in the round trip: its midpoint is
         * the best guess of our clock then (NTP's), off by half the trip at most. */
        if (nh.time_ns) {
            json_object_set_new(
                j, "clock_offset_s",
                json_real((double)(nh.time_ns - (sent_ns + (back_ns - sent_ns) / 2)) / 1e9));
            json_object_set_new(j, "clock_rtt_s", json_real((double)(back_ns - sent_ns) / 1e9));
        }
    } else {
        json_object_set_new(j, "error", json_string(strerror(-rc)));
    }
    h->out[i] = j;
}

int gw_objects_pools_json(struct gw_objects *o, json_t **out)
{
    json_t *a = json_array();
    pthread_mutex_lock(&o->pool_lock);
    int n = atomic_load(&o->npools);
    for (int i = 0; i < n; i++) {
        const struct place_pool *p = &o->pools[i].p;
        json_t *nodes = json_array();
        for (int j = 0; j < o->nnodes; j++)
            json_array_append_new(nodes, json_string(o->nodes[j].id));
        json_t *pj = json_pack("{s:s,s:s,s:s,s:i,s:i,s:I,s:i,s:o}", "name", p->name, "profile",
                               p->profile, "scheme", codec_scheme_name(p->codec.scheme), "k", p->k,
                               "n", p->n, "chunk_size", (json_int_t)p->chunk_size, "write_quorum",
                               p->write_quorum, "nodes", nodes);
        /* Counted by the repair scanner: absent until its first complete walk. */
        const struct gw_pool_usage *u = &o->pools[i].usage;
        if (pj && o->usage_ns) {
            json_object_set_new(pj, "objects", json_integer((json_int_t)u->objects));
            json_object_set_new(pj, "logical_bytes", json_integer((json_int_t)u->logical_bytes));
            json_object_set_new(pj, "stored_bytes", json_integer((json_int_t)u->stored_bytes));
            json_object_set_new(pj, "degraded_stripes",
                                json_integer((json_int_t)u->degraded_stripes));
            json_object_set_new(pj, "usage_age_s",
                                json_real((double)(gw_realtime_ns() - o->usage_ns) / 1e9));
        }
        json_array_append_new(a, pj);
    }
    pthread_mutex_unlock(&o->pool_lock);
    *out = a;
    return 0;
}

int gw_objects_counters(struct gw_objects *o, struct gw_objects_stats *st)
{
    st->degraded_reads = atomic_load(&o->degraded_reads);
    st->corrupt_chunks = atomic_load(&o->corrupt_chunks);
    st->missing_chunks = atomic_load(&o->missing_chunks);
    st->failed_reads = atomic_load(&o->failed_reads);
    st->sessions_opened = atomic_load(&o->sessions_opened);
    st->degraded_writes = atomic_load(&o->degraded_writes);
    st->hedged_reads = atomic_load(&o->hedged_reads);
    st->read_retries = atomic_load(&o->read_retries);
    gw_decoder_counters(o, &st->decode_sessions, &st->decode_runs);
    st->repair_queue = gw_repair_queue_length(o);
    pthread_mutex_lock(&o->gc_lock);
    st->gc_pending = o->gc_stripes;
    pthread_mutex_unlock(&o->gc_lock);
    return 0;
}

int gw_objects_cluster_json(struct gw_objects *o, json_t **out)
{
    json_t **nodes = calloc((size_t)o->nnodes, sizeof(*nodes));
    if (!nodes)
        return -ENOMEM;
    struct health_job h = {o, nodes};
    gw_fanout_run(o, o->nnodes, health_one, &h);
    json_t *a = json_array();
    for (int i = 0; i < o->nnodes; i++)
        json_array_append_new(a, nodes[i]);
    free(nodes);
    json_t *pools;
    gw_objects_pools_json(o, &pools);
    struct gw_objects_stats st;
    gw_objects_counters(o, &st);
    *out =
        json_pack("{s:s,s:I,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:{s:i,s:i,s:i,s:i,s:I}}", "mode",
                  o->embedded ? "embedded" : "tcp", "epoch", (json_int_t)o->map->epoch, "nodes", a,
                  "pools", pools, "degraded_reads", (json_int_t)st.degraded_reads,
                  "degraded_writes", (json_int_t)st.degraded_writes, "corrupt_chunks",
                  (json_int_t)st.corrupt_chunks, "missing_chunks", (json_int_t)st.missing_chunks,
                  "failed_reads", (json_int_t)st.failed_reads, "repair_queue",
                  (json_int_t)st.repair_queue, "metadata", "copies", o->meta_copies, "write_quorum",
                  o->meta_wq, "inline_quorum", gw_meta_inline_quorum(o), "read_quorum", o->meta_rq,
                  "read_repairs", (json_int_t)atomic_load(&o->meta_repairs));
    if (*out) {
        json_t *meta = json_object_get(*out, "metadata");
        json_object_set_new(meta, "heal_pending",
                            json_integer((json_int_t)gw_meta_heal_pending(o)));
        json_object_set_new(meta, "heal_dropped",
                            json_integer((json_int_t)atomic_load(&o->heal_dropped)));
        json_object_set_new(meta, "doubt", json_boolean(gw_meta_heal_doubt(o)));
        json_object_set_new(meta, "read_calls",
                            json_integer((json_int_t)atomic_load(&o->meta_read_calls)));
        json_object_set_new(*out, "hedged_reads", json_integer((json_int_t)st.hedged_reads));
        json_object_set_new(*out, "read_retries", json_integer((json_int_t)st.read_retries));
        json_object_set_new(*out, "decode_sessions", json_integer((json_int_t)st.decode_sessions));
        json_object_set_new(*out, "decode_runs", json_integer((json_int_t)st.decode_runs));
        json_object_set_new(*out, "gc_pending", json_integer((json_int_t)st.gc_pending));
        json_object_set_new(*out, "clock_skew_warn_s", json_real(o->clock_skew_warn_ms / 1e3));
    }
    json_t *rep = NULL;
    if (*out && gw_objects_repair_status(o, &rep) == 0)
        json_object_set_new(*out, "repair", rep);
    return *out ? 0 : -ENOMEM;
}

int gw_objects_pool_create(struct gw_objects *o, const json_t *spec, json_t **out, char *msg,
                           size_t msglen)
{
    msg[0] = '\0';
    const char *name = json_string_value(json_object_get(spec, "name"));
    const char *profile = json_string_value(json_object_get(spec, "profile"));
    if (!name || !profile)
        return snprintf(msg, msglen, "a pool needs \"name\" and \"profile\""), -EINVAL;
    if (json_object_get(spec, "nodes"))
        return snprintf(msg, msglen, "pools span every node: \"nodes\" is not supported"), -EINVAL;
    /* The map parser checks the pool as it checks one in cluster.json. */
    json_t *m = gw_cluster_map_json(o);
    json_t *pool = json_deep_copy(spec);
    if (!m || !pool) {
        json_decref(m);
        json_decref(pool);
        return -ENOMEM;
    }
    json_array_clear(json_object_get(m, "pools"));
    json_array_append_new(json_object_get(m, "pools"), pool);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    struct place_map *pm = NULL;
    int rc = text ? place_map_parse(text, strlen(text), &pm, msg, msglen) : -ENOMEM;
    free(text);
    if (rc)
        return rc;
    pthread_mutex_lock(&o->pool_lock);
    if (gw_pool_find(o, name)) {
        rc = -EEXIST;
        snprintf(msg, msglen, "pool %s exists", name);
    } else {
        rc = gw_pool_add(o, &pm->pools[0], msg, msglen);
    }
    if (rc == 0 && o->embedded && (rc = gw_save_embedded_map(o)))
        snprintf(msg, msglen, "saving cluster.json: %s", strerror(-rc));
    pthread_mutex_unlock(&o->pool_lock);
    place_map_destroy(pm);
    if (rc)
        return rc;
    json_t *pools;
    gw_objects_pools_json(o, &pools);
    size_t i;
    json_t *p;
    json_array_foreach(pools, i, p) if (strcmp(json_string_value(json_object_get(p, "name")),
                                               name) == 0) *out = json_incref(p);
    json_decref(pools);
    return 0;
}

int gw_objects_deg(struct gw_objects *o, const char *pool, const char *op, const int *lost,
                   size_t nlost, json_t **json, char **dot)
{
    const struct gw_pool *p = gw_pool_find(o, pool);
    if (!p)
        return -ENOENT;
    struct deg_graph *g = NULL;
    char err[256];
    int rc;
    if (strcmp(op, "encode") == 0) {
        struct deg_request req = {.op = DEG_OP_ENCODE};
        deg_placement_default(&req.placement);
        rc = deg_build(p->codec, &req, &g, err, sizeof(err));
    } else if (strcmp(op, "decode") == 0) {
        if (nlost < 1 || nlost > (size_t)(p->p.n - p->p.k))
            return -EINVAL;
        bool erased[PLACE_MAX_CHUNKS] = {0};
        int holder[PLACE_MAX_CHUNKS];
        for (int i = 0; i < p->p.n; i++)
            holder[i] = i;
        for (size_t i = 0; i < nlost; i++) {
            if (lost[i] < 0 || lost[i] >= p->p.n)
                return -EINVAL;
            erased[lost[i]] = true;
        }
        rc = gw_decode_graph(p, erased, NULL, holder, &g, err, sizeof(err));
    } else {
        return -EINVAL;
    }
    if (rc)
        return rc == -ENOMEM ? rc : -EINVAL;
    char *text = dot ? deg_to_dot(g) : deg_to_json(g);
    deg_graph_destroy(g);
    if (!text)
        return -ENOMEM;
    if (dot) {
        *dot = text;
        return 0;
    }
    *json = json_loads(text, 0, NULL);
    free(text);
    return *json ? 0 : -ENOMEM;
}
