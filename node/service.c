/*
 * The node service: an event loop over the CQ that gathers the receive
 * completions of every client connection (their send completions go to a
 * second CQ, reaped on each pass of the loop but never waited for) and a
 * handler per request type: the store's (service_store.c), DEG vertices
 * hosted on devices of their own (service_vertices.c), health here.
 *
 * Where the device's engine can call back after it received requests
 * (inec_cq_set_notify), it feeds them itself and the loop is not woken: one
 * thread switch less per request. The loop then takes what posting threads
 * delivered (mem) and closes what the engine must not.
 *
 * Handlers answer exactly once, with node_reply(): at once where they were fed
 * (metadata and chunk reads the page cache holds; on the loop also the rest
 * that does not block, which the engine hands to a worker), from the store's
 * writer thread when a chunk write is durable (node_store_put_chunk_async,
 * so concurrent writes share a flush), or from a worker thread for work that
 * blocks (other chunk reads, metadata writes, scrub, vertex runs).
 * `inflight` counts requests not yet answered; stopping waits for it to
 * drain.
 *
 * Workers: a pool that grows while a request waits with no idle worker, up to
 * MAX_WORKERS (a vertex run may wait its whole timeout for another node's
 * data, so a fixed few could stall a DEG behind reads), and keeps idle ones
 * for the next request: a small request must not pay for a thread's creation.
 *
 * Connections: the loop owns the list; a request holds a reference to its
 * connection so a late reply never touches a closed QP.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "codecs/errf.h"
#include "inec/inec.h"
#include "inec/log.h"
#include "node/cpus.h"
#include "node/service_internal.h"

#define MAX_WORKERS    64
#define KEEP_IDLE      8 /* idle workers kept past WORKER_IDLE_MS */
#define WORKER_IDLE_MS 2000

struct conn {
    struct conn *next;
    struct rpc_ep *ep;
    int refs; /* under svc->lock: the list's, and one per unanswered request */
};

/* Set while the device's engine feeds requests (on_requests). */
static _Thread_local bool on_engine;

static void conn_unref(struct node_service *s, struct conn *c)
{
    pthread_mutex_lock(&s->lock);
    bool last = --c->refs == 0;
    if (last && on_engine) {
        /* Closing a QP waits for the engine to let go of it. */
        c->next = s->closing;
        s->closing = c;
        last = false;
    }
    pthread_mutex_unlock(&s->lock);
    if (last) {
        rpc_ep_close(c->ep);
        free(c);
    }
}

/* Takes the connection out of the list (it failed, or the service stops). */
static void conn_drop(struct node_service *s, struct conn *c)
{
    pthread_mutex_lock(&s->lock);
    struct conn **pp = &s->conns;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    bool listed = *pp != NULL;
    if (listed)
        *pp = c->next;
    pthread_mutex_unlock(&s->lock);
    if (listed)
        conn_unref(s, c);
}

/* ---- answers (service_internal.h) ------------------------------------------- */

static void req_free(struct req *r)
{
    struct node_service *s = r->svc;
    conn_unref(s, r->conn);
    free(r->msg.data);
    free(r);
    pthread_mutex_lock(&s->lock);
    if (--s->inflight == 0)
        pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->lock);
}

void node_answer(struct req *r, int status, const void *head, size_t hlen, const void *data,
                 size_t dlen, const struct rpc_write_to *to, void (*done)(void *), void *arg)
{
    struct rpc_msg h = {
        .type = r->msg.type, .flags = RPC_F_RESPONSE, .req_id = r->msg.req_id, .status = status};
    int rc = to ? rpc_ep_send_write(r->conn->ep, &h, head, hlen, data, dlen, to, done, arg)
                : rpc_ep_send(r->conn->ep, &h, head, hlen, data, dlen, done, arg);
    if (rc == -EMSGSIZE) {
        static const char m[] = "response too large";
        h.status = -EMSGSIZE;
        rc = rpc_ep_send(r->conn->ep, &h, m, sizeof(m) - 1, NULL, 0, NULL, NULL);
        if (done)
            done(arg);
    } else if (rc && done) {
        done(arg);
    }
    if (rc)
        inec_log(INEC_LOG_WARN, "node", "reply failed type=%u err=%s", r->msg.type, strerror(-rc));
    req_free(r);
}

void node_reply_data(struct req *r, int status, const void *head, size_t hlen, const void *data,
                     size_t dlen, void (*done)(void *), void *arg)
{
    node_answer(r, status, head, hlen, data, dlen, NULL, done, arg);
}

void node_reply(struct req *r, int status)
{
    node_reply_data(r, status, NULL, 0, NULL, 0, NULL, NULL);
}

void node_reply_err(struct req *r, int status, const char *msg)
{
    node_reply_data(r, status, msg, strlen(msg), NULL, 0, NULL, NULL);
}

void node_reply_json(struct req *r, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        return node_reply(r, -ENOMEM);
    node_reply_data(r, 0, text, strlen(text), NULL, 0, NULL, NULL);
    free(text);
}

/* ---- requests: health here, the rest in service_store.c, service_vertices.c -- */

static void node_req_health(struct req *r)
{
    struct node_service *s = r->svc;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    json_int_t up = (json_int_t)(now.tv_sec - s->started.tv_sec) * 1000 +
                    (now.tv_nsec - s->started.tv_nsec) / 1000000;
    /* The wall clock, for the gateway's clock skew check (it takes the
     * midpoint of its round trip); older gateways ignore the field. */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    json_int_t time_ns = (json_int_t)wall.tv_sec * 1000000000 + wall.tv_nsec + s->clock_offset_ns;
    pthread_mutex_lock(&s->lock);
    json_int_t workers = s->workers, started = (json_int_t)s->workers_started;
    json_int_t fed_engine = (json_int_t)s->fed_engine, fed_loop = (json_int_t)s->fed_loop;
    pthread_mutex_unlock(&s->lock);
    node_reply_json(r, json_pack("{s:s,s:s,s:I,s:b,s:I,s:I,s:I,s:I,s:I}", "id", s->id, "domain",
                                 s->domain, "uptime_ms", up, "stopping",
                                 (int)atomic_load(&s->stopping), "time_ns", time_ns, "workers",
                                 workers, "workers_started", started, "requests_engine", fed_engine,
                                 "requests_loop", fed_loop));
}

/* Blocking handlers (disk reads and syncs, vertex runs) run on a worker
 * thread so the loop keeps serving, unless their `nowait` answers at once;
 * chunk writes need none (the store's writer thread answers them). On the
 * engine only the quick ones run: the rest may block, connect or close
 * devices of that very engine, and go to a worker. */
static const struct {
    void (*fn)(struct req *);
    bool blocking;
    bool (*nowait)(struct req *); /* true: answered where it was fed */
    bool quick;                   /* fn may run on the engine */
} handlers[NODE_RPC_NTYPES] = {
    [NODE_RPC_PUT_CHUNK] = {node_req_put_chunk, false},
    [NODE_RPC_GET_CHUNK] = {node_req_get_chunk, true, node_req_get_chunk_cached},
    [NODE_RPC_GET_CHUNK_TO] = {node_req_get_chunk, true, node_req_get_chunk_cached},
    [NODE_RPC_DELETE_CHUNK] = {node_req_delete_chunk, true},
    [NODE_RPC_PUT_META] = {node_req_put_meta, true},
    [NODE_RPC_GET_META] = {node_req_get_meta, false, NULL, true},
    [NODE_RPC_DELETE_META] = {node_req_delete_meta, true},
    [NODE_RPC_LIST_META] = {node_req_list_meta, true},
    [NODE_RPC_STATS] = {node_req_stats, false},
    [NODE_RPC_HEALTH] = {node_req_health, false},
    [NODE_RPC_SCRUB] = {node_req_scrub, true},
    [NODE_RPC_VERTEX_SETUP] = {node_req_vertex_setup, true},
    [NODE_RPC_VERTEX_CONNECT] = {node_req_vertex_connect, false},
    [NODE_RPC_VERTEX_RUN] = {node_req_vertex_run, true},
    [NODE_RPC_VERTEX_CLOSE] = {node_req_vertex_close, false},
    [NODE_RPC_LIST_CHUNKS] = {node_req_list_chunks, true},
    [NODE_RPC_LIST_REPAIR] = {node_req_list_repair, true},
};

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-worker");
    struct node_service *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->queue && !atomic_load(&s->stopping)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += WORKER_IDLE_MS / 1000;
            s->idle++;
            int rc = pthread_cond_timedwait(&s->work, &s->lock, &until);
            s->idle--;
            if (rc == ETIMEDOUT && !s->queue && s->idle >= KEEP_IDLE)
                goto out;
        }
        struct req *r = s->queue;
        if (!r)
            break; /* stopping, and nothing left to do */
        s->queue = r->next;
        if (!s->queue)
            s->queue_tail = NULL;
        s->queued--;
        pthread_mutex_unlock(&s->lock);
        handlers[r->msg.type].fn(r);
        pthread_mutex_lock(&s->lock);
    }
out:
    if (--s->workers == 0)
        pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Queues r for a worker, starting one if none is idle: false when the pool is
 * at MAX_WORKERS and busy (the caller then does the work itself: backpressure).
 * On the engine, which must not, r waits for a busy worker instead. */
static bool work_submit(struct node_service *s, struct req *r)
{
    pthread_mutex_lock(&s->lock);
    bool spawn = s->queued >= s->idle;
    if (spawn && s->workers >= MAX_WORKERS && !on_engine) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    pthread_t t;
    if (spawn && s->workers < MAX_WORKERS && pthread_create(&t, NULL, worker_main, s) == 0) {
        pthread_detach(t);
        s->workers++;
        s->workers_started++;
    } else if (spawn && (!on_engine || s->workers == 0)) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    r->next = NULL;
    if (s->queue_tail)
        s->queue_tail->next = r;
    else
        s->queue = r;
    s->queue_tail = r;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return true;
}

/* ---- the event loop ------------------------------------------------------------------ */

static void dispatch(struct node_service *s, struct conn *c, struct rpc_msg *m, int status)
{
    if (m->flags & RPC_F_RESPONSE) {
        free(m->data);
        return;
    }
    struct req *r = calloc(1, sizeof(*r));
    if (!r) {
        free(m->data);
        return;
    }
    r->svc = s;
    r->conn = c;
    r->msg = *m;
    pthread_mutex_lock(&s->lock);
    c->refs++;
    s->inflight++;
    if (on_engine)
        s->fed_engine++;
    else
        s->fed_loop++;
    pthread_mutex_unlock(&s->lock);
    if (status)
        return node_reply_err(r, status, "request too large");
    if (atomic_load(&s->stopping))
        return node_reply_err(r, -ESHUTDOWN, "node is shutting down");
    if (m->type >= NODE_RPC_NTYPES || !handlers[m->type].fn)
        return node_reply_err(r, -EOPNOTSUPP, "unknown request type");
    if (handlers[m->type].nowait && handlers[m->type].nowait(r))
        return;
    bool here = on_engine ? handlers[m->type].quick : !handlers[m->type].blocking;
    if (!here && work_submit(s, r))
        return;
    if (!here && on_engine)
        return node_reply_err(r, -EAGAIN, "node has no worker thread");
    handlers[m->type].fn(r);
}

/* Feeds completions to their connections: requests are dispatched, broken
 * connections dropped. */
static void feed(struct node_service *s, const struct inec_wc *wc, int n)
{
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&s->lock);
        struct conn *c = s->conns;
        while (c && !rpc_ep_owns(c->ep, &wc[i]))
            c = c->next;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&s->lock);
        if (!c)
            continue; /* of a connection already closed */
        struct rpc_msg m = {0};
        int rc = rpc_ep_complete(c->ep, &wc[i], &m);
        if (rc == 1 || rc == -EMSGSIZE) {
            dispatch(s, c, &m, rc == 1 ? 0 : rc);
        } else if (rc == -EHOSTDOWN) {
            inec_log(INEC_LOG_INFO, "node", "client gone id=%s qpn=%u", s->id, rpc_ep_qpn(c->ep));
            conn_drop(s, c);
        }
        conn_unref(s, c);
    }
}

/* Feeds what the CQs hold, or leaves it to the thread feeding now (see
 * feed_lock). */
static void drain(struct node_service *s)
{
    struct inec_wc wc[32];
    atomic_store(&s->feed_again, true);
    while (atomic_load(&s->feed_again) && pthread_mutex_trylock(&s->feed_lock) == 0) {
        atomic_store(&s->feed_again, false);
        int n;
        while ((n = inec_poll_cq(s->cq, 32, wc)) > 0)
            feed(s, wc, n);
        while ((n = inec_poll_cq(s->send_cq, 32, wc)) > 0)
            feed(s, wc, n);
        pthread_mutex_unlock(&s->feed_lock);
    }
}

/* The engine's call when requests came (inec_cq_set_notify). */
static void on_requests(void *arg)
{
    on_engine = true;
    drain(arg);
    on_engine = false;
}

static void close_deferred(struct node_service *s)
{
    pthread_mutex_lock(&s->lock);
    struct conn *c = s->closing;
    s->closing = NULL;
    pthread_mutex_unlock(&s->lock);
    for (struct conn *n; c; c = n) {
        n = c->next;
        rpc_ep_close(c->ep);
        free(c);
    }
}

static void *loop_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-loop");
    struct node_service *s = arg;
    while (!atomic_load(&s->stop)) {
        /* At most 100 ms without a pass: what sent answers held is released
         * by then even when no request comes. */
        if (inec_cq_wait_any(&s->cq, 1, 100) < 0)
            node_vertices_reap(s);
        drain(s);
        close_deferred(s);
    }
    return NULL;
}

int node_service_accept(struct node_service *s, const char *addr, uint32_t qpn, uint32_t *out_qpn,
                        const char **dev_addr)
{
    if (atomic_load(&s->stopping))
        return -ESHUTDOWN;
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = rpc_ep_open(s->dev, s->send_cq, s->cq, &c->ep);
    if (rc == 0)
        rc = rpc_ep_connect(c->ep, addr, qpn);
    if (rc) {
        rpc_ep_close(c->ep);
        free(c);
        return rc;
    }
    c->refs = 1;
    *out_qpn = rpc_ep_qpn(c->ep);
    *dev_addr = inec_device_addr(s->dev);
    pthread_mutex_lock(&s->lock);
    c->next = s->conns;
    s->conns = c;
    pthread_mutex_unlock(&s->lock);
    inec_log(INEC_LOG_DEBUG, "node", "client connected id=%s peer=%s qpn=%u", s->id, addr,
             *out_qpn);
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

int node_direct_min_from_json(const json_t *j, uint64_t *out, char *err, size_t errlen)
{
    if (!j)
        return 0;
    json_int_t v = json_is_integer(j) ? json_integer_value(j) : 0;
    if (v == -1) {
        *out = NODE_DIRECT_NEVER;
        return 0;
    }
    if (v < (json_int_t)NODE_RECORD_ALIGN || v > (json_int_t)NODE_CHUNK_MAX)
        return codec_errf(err, errlen, -EINVAL,
                          "direct_min: -1 (never O_DIRECT) or bytes in [%u, %u]", NODE_RECORD_ALIGN,
                          (unsigned)NODE_CHUNK_MAX);
    *out = (uint64_t)v;
    return 0;
}

int node_service_start(const struct node_service_config *cfg, struct node_service **out, char *err,
                       size_t errlen)
{
    struct node_service *s = calloc(1, sizeof(*s));
    if (!s)
        return codec_errf(err, errlen, -ENOMEM, "out of memory");
    snprintf(s->id, sizeof(s->id), "%s", cfg->id ? cfg->id : "node");
    snprintf(s->domain, sizeof(s->domain), "%s", cfg->domain ? cfg->domain : s->id);
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
    s->heartbeat_ms = cfg->heartbeat_ms;
    s->cm_fd = -1;
    if (cfg->secret_file &&
        (strchr(cfg->secret_file, ',') || strlen(cfg->secret_file) >= sizeof(s->secret))) {
        free(s);
        return codec_errf(err, errlen, -EINVAL, "cluster secret path '%s': too long or has a comma",
                          cfg->secret_file);
    }
    snprintf(s->secret, sizeof(s->secret), "%s", cfg->secret_file ? cfg->secret_file : "");
    clock_gettime(CLOCK_MONOTONIC, &s->started);
    /* Test hook (like the store's INEC_CRASH_AT): the clock this node reports
     * is off by this many ms, so a test can show the skew check on one node. */
    const char *skew = getenv("INEC_CLOCK_OFFSET_MS");
    if (skew)
        s->clock_offset_ns = strtoll(skew, NULL, 10) * 1000000;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->feed_lock, NULL);
    pthread_cond_init(&s->drained, NULL);
    pthread_cond_init(&s->work, NULL);
    snprintf(s->dev_options, sizeof(s->dev_options), "%s",
             cfg->device_options ? cfg->device_options : "transport=mem");
    int rc = 0;
    if (cfg->listen && (rc = node_cm_listen(s, cfg->listen, err, errlen)))
        goto fail;
    if (cfg->listen && cfg->device_options)
        snprintf(s->dev_options, sizeof(s->dev_options), "%s", cfg->device_options);
    if (cfg->crowded) {
        size_t dl = strlen(s->dev_options);
        snprintf(s->dev_options + dl, sizeof(s->dev_options) - dl, ",spin=0");
        inec_log(INEC_LOG_INFO, "node",
                 "as many nodes on this host as CPUs this process may use (%d): engines do not "
                 "spin",
                 node_usable_cpus());
    }
    snprintf(s->main_options, sizeof(s->main_options), "%s%s", s->dev_options,
             strstr(s->dev_options, "transport=tcp") ? ",passive=1" : "");
    struct node_store_options so;
    node_store_options_default(&so);
    so.capacity = cfg->capacity;
    so.direct_min = cfg->direct_min;
    if ((rc = node_store_open(cfg->data_dir, &so, &s->store, err, errlen)))
        goto fail;
    if ((rc = node_compactor_start(s->store, &cfg->compaction, &s->compactor))) {
        codec_errf(err, errlen, rc, "compaction: %s", strerror(-rc));
        goto fail;
    }
    if ((rc = inec_device_open(NULL, s->main_options, &s->dev))) {
        codec_errf(err, errlen, rc, "device (%s): %s", s->main_options, inec_errmsg());
        goto fail;
    }
    if ((rc = inec_cq_create(s->dev, 0, &s->cq)) || (rc = inec_cq_create(s->dev, 0, &s->send_cq))) {
        codec_errf(err, errlen, rc, "cq: %s", inec_errmsg());
        goto fail;
    }
    /* Without it (verbs) the loop takes every request. */
    inec_cq_set_notify(s->cq, on_requests, s);
    if ((rc = -pthread_create(&s->loop, NULL, loop_main, s))) {
        codec_errf(err, errlen, rc, "no thread");
        goto fail;
    }
    s->has_loop = true;
    if (s->cm_fd >= 0) {
        if ((rc = -pthread_create(&s->cm, NULL, node_cm_main, s))) {
            codec_errf(err, errlen, rc, "no thread");
            goto fail;
        }
        s->has_cm = true;
    }
    inec_log(INEC_LOG_INFO, "node", "started id=%s domain=%s data=%s listen=%s device=%s", s->id,
             s->domain, cfg->data_dir, s->listen[0] ? s->listen : "-", inec_device_addr(s->dev));
    *out = s;
    return 0;
fail:
    node_service_stop(s);
    return rc;
}

void node_service_stop(struct node_service *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    if (s->cm_fd >= 0)
        shutdown(s->cm_fd, SHUT_RDWR); /* wakes accept() */
    if (s->has_cm)
        pthread_join(s->cm, NULL);
    /* Let in-flight requests finish (writes become durable and are answered);
     * vertex runs are bounded by their timeout. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s->timeout_ms / 1000 * 2 + 2;
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->work); /* idle workers see stopping and leave */
    while (s->inflight > 0 || s->workers > 0)
        if (pthread_cond_timedwait(&s->drained, &s->lock, &until)) {
            inec_log(INEC_LOG_WARN, "node", "stopping with requests in flight id=%s n=%d", s->id,
                     s->inflight);
            break;
        }
    pthread_mutex_unlock(&s->lock);
    atomic_store(&s->stop, true);
    if (s->cq)
        inec_cq_set_notify(s->cq, NULL, NULL);
    if (s->has_loop)
        pthread_join(s->loop, NULL);
    while (s->conns)
        conn_drop(s, s->conns);
    close_deferred(s);
    node_vertices_close(s);
    if (s->cm_fd >= 0)
        close(s->cm_fd);
    node_compactor_stop(s->compactor);
    node_store_close(s->store); /* completes every queued write first */
    inec_cq_destroy(s->cq);
    inec_cq_destroy(s->send_cq);
    inec_device_close(s->dev);
    if (s->has_loop)
        inec_log(INEC_LOG_INFO, "node", "stopped id=%s", s->id);
    pthread_cond_destroy(&s->drained);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->feed_lock);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const char *node_service_listen_addr(const struct node_service *s)
{
    return s->listen[0] ? s->listen : NULL;
}

const char *node_service_id(const struct node_service *s)
{
    return s->id;
}

struct node_store *node_service_store(struct node_service *s)
{
    return s->store;
}
