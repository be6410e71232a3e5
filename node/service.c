/*
 * The node service: an event loop over the CQ that gathers the receive
 * completions of every client connection (their send completions go to a
 * second CQ, reaped on each pass of the loop but never waited for), a
 * handler per request type, and DEG vertices hosted on devices of their own.
 *
 * Where the device's engine can call back after it received requests
 * (inec_cq_set_notify), it feeds them itself and the loop is not woken: one
 * thread switch less per request. The loop then takes what posting threads
 * delivered (mem) and closes what the engine must not.
 *
 * Handlers answer exactly once, with reply(): at once where they were fed
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
#include "deg/deg.h"
#include "codecs/errf.h"
#include "node/service.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "inec/auth.h"
#include "inec/hostport.h"
#include "inec/inec.h"
#include "placement/placement.h"
#include "inec/log.h"
#include "node/client.h"
#include "node/cpus.h"
#include "node/rpc.h"

#define LIST_MAX_ENTRIES 1000
#define LIST_MAX_BYTES   (8u << 20)
#define MAX_WORKERS      64
#define KEEP_IDLE        8 /* idle workers kept past WORKER_IDLE_MS */
#define WORKER_IDLE_MS   2000
#define LOOP_READ_MAX    (1u << 20) /* chunks the loop reads from the page cache, at most */

struct conn {
    struct conn *next;
    struct rpc_ep *ep;
    int refs; /* under svc->lock: the list's, and one per unanswered request */
};

struct hosted {
    struct hosted *next;
    int handle, v;
    bool running;
    bool persist;   /* stays set up after a successful run, for the next stripe */
    int chunk;      /* persistent: the chunk this run's result is stored as (-1: the graph's) */
    time_t expires; /* set up but not run (again) by then: the runner is gone */
    struct deg_graph *g;
    struct deg_vx *x;
    int timeout_ms;
    size_t len;
    struct node_stripe stripe;
    uint8_t *chunks[CODEC_MAX_CHUNKS];
    /* run results */
    int rc;
    char err[256];
    int nres;
    struct deg_label labels[CODEC_MAX_CHUNKS];
    const uint8_t *data[CODEC_MAX_CHUNKS];
};

struct node_service {
    char id[NODE_ID_MAX], domain[NODE_ID_MAX];
    char listen[300];
    char dev_options[700];  /* vertex devices: they dial their edges' peers */
    char main_options[720]; /* the RPC device: passive, it never dials */
    char secret[256];       /* cluster secret file, "" = this process's random one */
    int timeout_ms, heartbeat_ms;
    struct timespec started;
    int64_t clock_offset_ns; /* INEC_CLOCK_OFFSET_MS: a test's skewed wall clock */
    struct node_store *store;
    struct node_compactor *compactor;
    struct inec_device *dev;
    /* The loop sleeps on cq (requests arriving); sends' completions go to
     * send_cq, reaped on each pass: an answer's completion only releases what
     * it held, which is not worth waking the loop for. */
    struct inec_cq *cq, *send_cq;
    /* Held while polling the CQs and feeding what they hold, so fragments
     * and requests are taken in order, by the loop or by the device's engine
     * (inec_cq_set_notify: then a request costs no wake-up of the loop). A
     * thread that finds it held sets feed_again and leaves the work to the
     * holder: the engine never waits for a handler of the loop. */
    pthread_mutex_t feed_lock;
    atomic_bool feed_again;
    pthread_t loop, cm;
    bool has_loop, has_cm;
    int cm_fd;
    atomic_bool stop, stopping;
    pthread_mutex_t lock;
    pthread_cond_t drained;
    int inflight;
    /* the worker pool, under lock */
    pthread_cond_t work;
    struct req *queue, *queue_tail;
    int workers, idle, queued;
    uint64_t workers_started;
    uint64_t fed_engine, fed_loop; /* requests fed by the engine, by the loop (health) */
    struct conn *conns;
    struct conn *closing; /* last reference dropped on the engine: the loop closes them */
    struct hosted *vertices;
    int next_handle;
};

struct req {
    struct node_service *svc;
    struct conn *conn;
    struct rpc_msg msg;
    struct req *next; /* in the workers' queue */
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

/* ---- replies ---------------------------------------------------------------- */

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

/* Answers r (status 0 or -errno; head and data as in rpc_ep_send, the data
 * WRITTEN to the requester's memory first when `to` says where) and frees
 * it; done(arg) releases data once sent. */
static void answer(struct req *r, int status, const void *head, size_t hlen, const void *data,
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

static void reply_data(struct req *r, int status, const void *head, size_t hlen, const void *data,
                       size_t dlen, void (*done)(void *), void *arg)
{
    answer(r, status, head, hlen, data, dlen, NULL, done, arg);
}

static void reply(struct req *r, int status)
{
    reply_data(r, status, NULL, 0, NULL, 0, NULL, NULL);
}

/* An error with a message for the client's node_client_errmsg(). */
static void reply_err(struct req *r, int status, const char *msg)
{
    reply_data(r, status, msg, strlen(msg), NULL, 0, NULL, NULL);
}

static void reply_json(struct req *r, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        return reply(r, -ENOMEM);
    reply_data(r, 0, text, strlen(text), NULL, 0, NULL, NULL);
    free(text);
}

/* ---- chunk and metadata handlers ------------------------------------------------ */

static void put_done(int rc, void *arg)
{
    reply(arg, rc);
}

static void h_put_chunk(struct req *r)
{
    struct node_chunk_id id;
    uint64_t version;
    if (r->msg.len < RPC_CHUNK_HEAD)
        return reply(r, -EPROTO);
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    int rc = node_store_put_chunk_async(r->svc->store, &id, version, r->msg.data + RPC_CHUNK_HEAD,
                                        r->msg.len - RPC_CHUNK_HEAD, put_done, r);
    if (rc < 0)
        reply(r, rc);
}

/* A chunk read: a worker's, or (cached) on the loop, answered only when the
 * page cache holds the chunk (a worker costs the request two thread
 * switches). False when that read would block, the chunk is large (the loop
 * would copy and checksum it while others wait), or it needs the worker's
 * full read (a corrupt chunk is reported there). A GET_CHUNK answers the
 * bytes in its message; a GET_CHUNK_TO WRITEs them where the reader said,
 * so its end reassembles nothing. */
static bool get_chunk(struct req *r, bool cached)
{
    struct node_chunk_id id;
    uint64_t version;
    void *buf = NULL;
    size_t len = 0;
    bool to = r->msg.type == NODE_RPC_GET_CHUNK_TO;
    if (r->msg.len != (to ? RPC_CHUNK_TO_HEAD : RPC_CHUNK_HEAD)) {
        reply(r, -EPROTO);
        return true;
    }
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    int rc = cached ? node_store_get_chunk_cached(r->svc->store, &id, LOOP_READ_MAX, &buf, &len,
                                                  &version)
                    : node_store_get_chunk_alloc(r->svc->store, &id, &buf, &len, &version);
    if (cached && rc == -EAGAIN)
        return false;
    if (rc) {
        reply_err(r, rc, node_store_strerror(rc));
        return true;
    }
    uint8_t head[16];
    rpc_put64(head, version);
    if (!to) {
        reply_data(r, 0, head, 8, buf, len, free, buf);
        return true;
    }
    const uint8_t *p = r->msg.data + RPC_CHUNK_HEAD;
    struct rpc_write_to dst = {rpc_get64(p), rpc_get32(p + 8)};
    uint64_t cap = rpc_get64(p + 12);
    if (len > cap) {
        free(buf);
        char msg[96];
        snprintf(msg, sizeof(msg), "chunk of %zu bytes exceeds the reader's %" PRIu64, len, cap);
        reply_err(r, -EMSGSIZE, msg);
        return true;
    }
    rpc_put64(head + 8, len);
    answer(r, 0, head, 16, buf, len, &dst, free, buf);
    return true;
}

static void h_get_chunk(struct req *r)
{
    get_chunk(r, false);
}

static bool h_get_chunk_cached(struct req *r)
{
    return get_chunk(r, true);
}

static void h_delete_chunk(struct req *r)
{
    struct node_chunk_id id;
    uint64_t version;
    if (r->msg.len != RPC_CHUNK_HEAD)
        return reply(r, -EPROTO);
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    reply(r, node_store_delete_chunk(r->svc->store, &id, version));
}

/* "bucket\0key\0" then the rest; NULL when malformed. */
static const char *names(const struct req *r, const char **key, size_t *used)
{
    const char *b = (const char *)r->msg.data;
    const void *z1 = b ? memchr(b, 0, r->msg.len) : NULL;
    if (!z1)
        return NULL;
    *key = (const char *)z1 + 1;
    const char *z2 = memchr(*key, 0, r->msg.len - (size_t)(*key - b));
    if (!z2)
        return NULL;
    *used = (size_t)(z2 + 1 - b);
    return b;
}

static const char *msg_stored(char *buf, size_t len, uint64_t stored)
{
    snprintf(buf, len, RPC_META_STORED "%" PRIu64, stored);
    return buf;
}

static void h_put_meta(struct req *r)
{
    const char *key;
    size_t used;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return reply(r, -EPROTO);
    if (r->msg.len < used + RPC_META_HEAD)
        return reply(r, -EPROTO);
    const uint8_t *p = r->msg.data + used;
    uint64_t stored = 0;
    unsigned flags = rpc_get32(p + 8);
    void *old = NULL;
    size_t old_len = 0;
    int rc = node_store_put_meta_old(
        r->svc->store, bucket, key, rpc_get64(p), flags & ~NODE_META_OLD, p + RPC_META_HEAD,
        r->msg.len - used - RPC_META_HEAD, &stored, flags & NODE_META_OLD ? &old : NULL, &old_len);
    if (rc == 0 && old) /* the record this write replaced, for the writer's gc */
        return reply_data(r, 0, NULL, 0, old, old_len, free, old);
    if (rc != -ESTALE && rc != -EEXIST)
        return reply(r, rc);
    char msg[64]; /* the version that refused it, for the writer's clock */
    reply_err(r, rc, msg_stored(msg, sizeof(msg), stored));
}

static void h_get_meta(struct req *r)
{
    const char *key;
    size_t used, len;
    void *blob;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return reply(r, -EPROTO);
    int rc = node_store_get_meta(r->svc->store, bucket, key, &blob, &len);
    if (rc)
        return reply(r, rc);
    reply_data(r, 0, NULL, 0, blob, len, free, blob);
}

static void h_delete_meta(struct req *r)
{
    const char *key;
    size_t used;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return reply(r, -EPROTO);
    /* A blob after the names: delete only if the record is still that one. */
    reply(r, node_store_delete_meta_if(r->svc->store, bucket, key,
                                       r->msg.len > used ? r->msg.data + used : NULL,
                                       r->msg.len - used));
}

struct listing {
    uint8_t *buf;
    size_t len, cap;
    bool full;
};

/* Entries: u32 key bytes, u32 blob bytes, key, blob. */
static int list_add(const char *key, const void *blob, size_t len, void *arg)
{
    struct listing *l = arg;
    size_t klen = strlen(key), need = 8 + klen + len;
    if (l->len + need > LIST_MAX_BYTES && l->len > 1) {
        l->full = true;
        return 1;
    }
    if (l->len + need > l->cap) {
        size_t cap = (l->len + need) * 2;
        uint8_t *n = realloc(l->buf, cap);
        if (!n)
            return -ENOMEM;
        l->buf = n;
        l->cap = cap;
    }
    uint8_t h[8];
    rpc_put64(h, (uint64_t)klen | (uint64_t)len << 32);
    memcpy(l->buf + l->len, h, 8);
    memcpy(l->buf + l->len + 8, key, klen);
    memcpy(l->buf + l->len + 8 + klen, blob, len);
    l->len += need;
    return 0;
}

/* Request: u64 limit, then "bucket\0prefix\0start_after\0". Response: u8 more,
 * then the entries. */
static void h_list_meta(struct req *r)
{
    if (r->msg.len < 8)
        return reply(r, -EPROTO);
    uint64_t limit = rpc_get64(r->msg.data);
    const char *b = (const char *)r->msg.data + 8, *end = (const char *)r->msg.data + r->msg.len;
    const char *f[3];
    for (int i = 0; i < 3; i++) {
        const char *z = b < end ? memchr(b, 0, (size_t)(end - b)) : NULL;
        if (!z)
            return reply(r, -EPROTO);
        f[i] = b;
        b = z + 1;
    }
    if (limit == 0 || limit > LIST_MAX_ENTRIES)
        limit = LIST_MAX_ENTRIES;
    struct listing l = {.buf = calloc(1, 1), .len = 1, .cap = 1};
    int more = 0;
    int rc = l.buf
                 ? node_store_list_meta(r->svc->store, f[0], f[1], f[2], limit, list_add, &l, &more)
                 : -ENOMEM;
    if (rc < 0) {
        free(l.buf);
        return reply(r, rc);
    }
    l.buf[0] = more || l.full;
    reply_data(r, 0, NULL, 0, l.buf, l.len, free, l.buf);
}

static void h_stats(struct req *r)
{
    struct node_store_stats st;
    int rc = node_store_stats(r->svc->store, &st);
    if (rc)
        return reply(r, rc);
    uint64_t v[10] = {st.segments,           st.segment_bytes,  st.chunks, st.live_bytes,
                      st.dead_bytes,         st.metas,          st.repair, st.capacity,
                      st.compacted_segments, st.compacted_bytes};
    uint8_t out[80];
    for (int i = 0; i < 10; i++)
        rpc_put64(out + 8 * i, v[i]);
    reply_data(r, 0, out, sizeof(out), NULL, 0, NULL, NULL);
}

static void h_health(struct req *r)
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
    reply_json(r, json_pack("{s:s,s:s,s:I,s:b,s:I,s:I,s:I,s:I,s:I}", "id", s->id, "domain",
                            s->domain, "uptime_ms", up, "stopping", (int)atomic_load(&s->stopping),
                            "time_ns", time_ns, "workers", workers, "workers_started", started,
                            "requests_engine", fed_engine, "requests_loop", fed_loop));
}

static void h_scrub(struct req *r)
{
    struct node_scrub_result res = {0};
    int rc = node_store_scrub(r->svc->store, NULL, NULL, &res);
    if (rc)
        return reply(r, rc);
    uint8_t out[24];
    rpc_put64(out, res.checked);
    rpc_put64(out + 8, res.bytes);
    rpc_put64(out + 16, res.corrupt);
    reply_data(r, 0, out, sizeof(out), NULL, 0, NULL, NULL);
}

/* A page of the chunk inventory. Request: u64 limit, then nothing (from the
 * start) or a chunk head to list after. Response: u8 more, then per chunk its
 * head (id, version) and u32 length. */
struct inventory {
    uint8_t *buf;
    size_t len;
};

static int inventory_add(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    struct inventory *inv = arg;
    uint8_t *p = inv->buf + inv->len;
    rpc_chunk_head_encode(p, id, version);
    p[RPC_CHUNK_HEAD] = (uint8_t)len;
    p[RPC_CHUNK_HEAD + 1] = (uint8_t)(len >> 8);
    p[RPC_CHUNK_HEAD + 2] = (uint8_t)(len >> 16);
    p[RPC_CHUNK_HEAD + 3] = (uint8_t)(len >> 24);
    inv->len += NODE_INVENTORY_ENTRY;
    return 0;
}

static void h_list_chunks(struct req *r)
{
    if (r->msg.len != 8 && r->msg.len != 8 + RPC_CHUNK_HEAD)
        return reply(r, -EPROTO);
    uint64_t limit = rpc_get64(r->msg.data);
    if (limit == 0 || limit > NODE_INVENTORY_PAGE)
        limit = NODE_INVENTORY_PAGE;
    struct node_chunk_id after;
    uint64_t v;
    if (r->msg.len > 8)
        rpc_chunk_head_decode(r->msg.data + 8, &after, &v);
    /* One more than asked for says whether more follow. */
    struct inventory inv = {.buf = malloc(1 + (limit + 1) * NODE_INVENTORY_ENTRY), .len = 1};
    if (!inv.buf)
        return reply(r, -ENOMEM);
    int n = node_store_list_chunks(r->svc->store, r->msg.len > 8 ? &after : NULL, limit + 1,
                                   inventory_add, &inv);
    if (n < 0) {
        free(inv.buf);
        return reply(r, n);
    }
    inv.buf[0] = (uint64_t)n > limit;
    if (inv.buf[0])
        inv.len -= NODE_INVENTORY_ENTRY;
    reply_data(r, 0, NULL, 0, inv.buf, inv.len, free, inv.buf);
}

/* The repair list (chunks found corrupt), at most NODE_INVENTORY_PAGE:
 * u8 more, then chunk heads. */
static int repair_add(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    struct inventory *inv = arg;
    if ((inv->len - 1) / RPC_CHUNK_HEAD >= NODE_INVENTORY_PAGE) {
        inv->buf[0] = 1;
        return 1;
    }
    rpc_chunk_head_encode(inv->buf + inv->len, id, version);
    inv->len += RPC_CHUNK_HEAD;
    return 0;
}

static void h_list_repair(struct req *r)
{
    struct inventory inv = {.buf = calloc(1, 1 + (size_t)NODE_INVENTORY_PAGE * RPC_CHUNK_HEAD),
                            .len = 1};
    if (!inv.buf)
        return reply(r, -ENOMEM);
    int n = node_store_list_repair(r->svc->store, repair_add, &inv);
    if (n < 0) {
        free(inv.buf);
        return reply(r, n);
    }
    reply_data(r, 0, NULL, 0, inv.buf, inv.len, free, inv.buf);
}

/* ---- DEG vertices ------------------------------------------------------------------ */

static void hosted_free(struct hosted *h)
{
    if (!h)
        return;
    deg_vx_close(h->x);
    deg_graph_destroy(h->g);
    for (int i = 0; i < CODEC_MAX_CHUNKS; i++)
        free(h->chunks[i]);
    free(h);
}

/* Takes vertex `handle` out of the table (NULL if unknown or running). */
static struct hosted *hosted_take(struct node_service *s, int handle)
{
    pthread_mutex_lock(&s->lock);
    struct hosted **pp = &s->vertices;
    while (*pp && (*pp)->handle != handle)
        pp = &(*pp)->next;
    struct hosted *h = *pp;
    if (h && !h->running)
        *pp = h->next;
    else
        h = NULL;
    pthread_mutex_unlock(&s->lock);
    return h;
}

/* Vertex `handle`, marked busy (running) so nothing closes it meanwhile;
 * NULL if unknown or busy. hosted_release() ends that. */
static struct hosted *hosted_claim(struct node_service *s, int handle)
{
    pthread_mutex_lock(&s->lock);
    struct hosted *h = s->vertices;
    while (h && h->handle != handle)
        h = h->next;
    if (h && h->running)
        h = NULL;
    if (h)
        h->running = true;
    pthread_mutex_unlock(&s->lock);
    return h;
}

static void hosted_release(struct node_service *s, struct hosted *h)
{
    pthread_mutex_lock(&s->lock);
    h->running = false;
    pthread_mutex_unlock(&s->lock);
}

static json_t *req_json(struct req *r)
{
    return json_loadb((const char *)r->msg.data, r->msg.len, 0, NULL);
}

static void hosted_touch(struct hosted *h, int timeout_ms)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    h->expires = now.tv_sec + 2 * timeout_ms / 1000 + 5;
}

/* {"graph":{...},"vertex":name,"len":N,"timeout_ms":T,"incoherent":b,
 *  "object":hex,"stripe":S,"version":V,"persist":b} -> {"handle","addr","in":[qpn],"out":[qpn]}
 * A persistent vertex serves run after run; each run names its stripe,
 * length and chunk: the chunk a sink stores its result as, or the one chunk
 * a source (one local, no results: a decode's survivor) reads and sends. */
static void h_vertex_setup(struct req *r)
{
    struct node_service *s = r->svc;
    char err[256] = "";
    json_t *j = req_json(r);
    struct hosted *h = calloc(1, sizeof(*h));
    const char *vname = json_string_value(json_object_get(j, "vertex"));
    const char *obj = json_string_value(json_object_get(j, "object"));
    json_int_t len = json_integer_value(json_object_get(j, "len"));
    char *gtext = json_dumps(json_object_get(j, "graph"), JSON_COMPACT);
    int rc = 0;
    if (!h || !j) {
        rc = codec_errf(err, sizeof(err), h ? -EPROTO : -ENOMEM, "vertex setup: bad request");
        goto out;
    }
    if (!vname || !obj || strlen(obj) != 2 * NODE_OBJECT_ID_BYTES || !gtext || len <= 0 ||
        len > NODE_CHUNK_MAX) {
        rc =
            codec_errf(err, sizeof(err), -EPROTO, "vertex setup: needs graph, vertex, object, len");
        goto out;
    }
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        sscanf(obj + 2 * i, "%2hhx", &h->stripe.object[i]);
    h->stripe.stripe = (uint64_t)json_integer_value(json_object_get(j, "stripe"));
    h->stripe.version = (uint64_t)json_integer_value(json_object_get(j, "version"));
    h->len = (size_t)len;
    if ((rc = deg_from_json(gtext, &h->g, err, sizeof(err))))
        goto out;
    int v = deg_find_vertex(h->g, vname);
    if (v < 0) {
        rc = codec_errf(err, sizeof(err), -ENOENT, "vertex setup: the graph has no vertex %s",
                        vname);
        goto out;
    }
    h->v = v;
    h->chunk = -1;
    const struct deg_vertex *vx = &h->g->vertices[v];
    if ((h->persist = json_is_true(json_object_get(j, "persist"))) && vx->nlocal > 0 &&
        (vx->nlocal > 1 || vx->nresults > 0)) {
        rc = codec_errf(err, sizeof(err), -EINVAL,
                        "vertex %s: a persistent vertex reads at most one chunk and keeps nothing",
                        vname);
        goto out;
    }
    for (int i = 0; i < vx->nlocal && rc == 0 && !h->persist; i++) {
        int c = vx->local[i];
        struct node_chunk_id id = {.stripe = h->stripe.stripe, .index = (uint32_t)c};
        memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
        size_t got = 0;
        void *buf = NULL;
        if (h->chunks[c])
            continue;
        if ((rc = node_store_get_chunk_alloc(s->store, &id, &buf, &got, NULL)))
            codec_errf(err, sizeof(err), rc, "vertex %s: local chunk %d: %s", vname, c,
                       node_store_strerror(rc));
        else if (got != h->len)
            rc = codec_errf(err, sizeof(err), -EINVAL,
                            "vertex %s: local chunk %d has %zu bytes, not %zu", vname, c, got,
                            h->len);
        h->chunks[c] = buf;
    }
    if (rc)
        goto out;
    struct deg_run_opts o = {
        .incoherent = json_is_true(json_object_get(j, "incoherent")),
        .timeout_ms = (int)json_integer_value(json_object_get(j, "timeout_ms")),
        .options = s->dev_options,
    };
    if (o.timeout_ms <= 0)
        o.timeout_ms = s->timeout_ms;
    /* A persistent source reads its chunk run by run (rebind). */
    if ((rc = deg_vx_open(h->g, v, h->len, h->persist ? NULL : h->chunks, &o, &h->x, err,
                          sizeof(err))))
        goto out;
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < vx->nin; i++)
        json_array_append_new(ins, json_integer(deg_vx_in_qpn(h->x, i)));
    for (int i = 0; i < vx->nout_edges; i++)
        json_array_append_new(outs, json_integer(deg_vx_out_qpn(h->x, i)));
    h->timeout_ms = o.timeout_ms;
    hosted_touch(h, o.timeout_ms);
    pthread_mutex_lock(&s->lock);
    h->handle = ++s->next_handle;
    h->next = s->vertices;
    s->vertices = h;
    pthread_mutex_unlock(&s->lock);
    inec_log(INEC_LOG_DEBUG, "node", "vertex set up id=%s vertex=%s handle=%d", s->id, vname,
             h->handle);
    reply_json(r, json_pack("{s:i,s:s,s:o,s:o}", "handle", h->handle, "addr", deg_vx_addr(h->x),
                            "in", ins, "out", outs));
    h = NULL;
out:
    if (rc) {
        inec_log(INEC_LOG_WARN, "node", "vertex setup failed id=%s err=\"%s\"", s->id, err);
        reply_err(r, rc, err);
    }
    hosted_free(h);
    free(gtext);
    json_decref(j);
}

/* {"handle":H,"in":[{"addr","qpn"}|null...],"out":[...]} */
static void h_vertex_connect(struct req *r)
{
    char err[256] = "";
    json_t *j = req_json(r);
    struct hosted *h = hosted_claim(r->svc, (int)json_integer_value(json_object_get(j, "handle")));
    int rc = h ? 0 : codec_errf(err, sizeof(err), -ENOENT, "vertex connect: no such vertex");
    for (int d = 0; d < 2 && rc == 0; d++) {
        json_t *a = json_object_get(j, d ? "out" : "in");
        for (size_t i = 0; i < json_array_size(a) && rc == 0; i++) {
            json_t *p = json_array_get(a, i);
            const char *addr = json_string_value(json_object_get(p, "addr"));
            uint32_t qpn = (uint32_t)json_integer_value(json_object_get(p, "qpn"));
            if (!addr)
                continue; /* that peer failed: the run will name this edge */
            rc = d ? deg_vx_connect_out(h->x, (int)i, addr, qpn, err, sizeof(err))
                   : deg_vx_connect_in(h->x, (int)i, addr, qpn, err, sizeof(err));
        }
    }
    json_decref(j);
    if (h)
        hosted_release(r->svc, h);
    if (rc)
        return reply_err(r, rc, err);
    reply(r, 0);
}

static void collect(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                    const uint8_t *data, size_t len)
{
    struct hosted *h = arg;
    (void)g;
    (void)v;
    (void)len;
    if (h->nres < CODEC_MAX_CHUNKS) {
        h->labels[h->nres] = label;
        h->data[h->nres++] = data;
    }
}

static void vertex_run(struct hosted *h)
{
    h->rc = deg_vx_run(h->x, collect, h, NULL, h->err, sizeof(h->err));
}

/* Named here, not in vertex_run: a lone vertex runs on the worker itself,
 * which must keep its name. */
static void *vertex_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-vertex");
    vertex_run(arg);
    return NULL;
}

/* Crash hooks for the write-hole tests (tests/integration/volume_crash.py).
 * With INEC_NODE_CRASH_FILE set, the file's first line names a step of a
 * delta-parity update (a graph built with op update), "update-ROLE-WHEN":
 * ROLE "data" (the vertex holding the written chunk: it sends the deltas) or
 * "parity" (a vertex adding a delta to its parity); WHEN "run" (before the
 * vertex runs), "computed" (ran: deltas sent or the new parity in memory,
 * nothing stored) or "stored" (its new chunk durable, no reply yet). The
 * first node of the cluster to reach that step renames the file to
 * FILE.fired (so exactly one node fires) and SIGKILLs itself. */
static void update_crash_hook(const struct hosted *h, const char *when)
{
    const char *path = getenv("INEC_NODE_CRASH_FILE");
    if (!path || !strstr(h->g->desc, " update chunk="))
        return;
    char want[64] = "", step[64], fired[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(want, sizeof(want), f))
        want[0] = '\0';
    fclose(f);
    want[strcspn(want, "\n")] = '\0';
    snprintf(step, sizeof(step), "update-%s-%s",
             h->g->vertices[h->v].nout_edges > 0 ? "data" : "parity", when);
    snprintf(fired, sizeof(fired), "%s.fired", path);
    if (strcmp(want, step) == 0 && rename(path, fired) == 0) {
        inec_log(INEC_LOG_WARN, "node", "crash hook: SIGKILL at %s", step);
        raise(SIGKILL);
    }
}

/* A persistent vertex's next run: {"len","object","stripe","version",
 * "chunks":[c per handle]} of the run request. */
static int rebind(struct node_service *svc, struct hosted *h, json_t *j, size_t i, char *err,
                  size_t errlen)
{
    json_t *len = json_object_get(j, "len");
    const char *obj = json_string_value(json_object_get(j, "object"));
    if (!len && !obj)
        return 0;
    if (!h->persist || !obj || strlen(obj) != 2 * NODE_OBJECT_ID_BYTES)
        return codec_errf(err, errlen, -EPROTO,
                          "vertex run: stripe fields for a vertex set up once");
    for (int b = 0; b < NODE_OBJECT_ID_BYTES; b++)
        sscanf(obj + 2 * b, "%2hhx", &h->stripe.object[b]);
    h->stripe.stripe = (uint64_t)json_integer_value(json_object_get(j, "stripe"));
    h->stripe.version = (uint64_t)json_integer_value(json_object_get(j, "version"));
    json_t *c = json_array_get(json_object_get(j, "chunks"), i);
    h->chunk = c ? (int)json_integer_value(c) : -1;
    size_t n = (size_t)json_integer_value(len);
    const struct deg_vertex *vx = &h->g->vertices[h->v];
    if (vx->nlocal == 0) {
        int rc = deg_vx_rebind(h->x, n, NULL, err, errlen);
        if (rc == 0)
            h->len = n;
        return rc;
    }
    /* A source: this run's chunk, read now (the store checks its CRC). */
    if (h->chunk < 0 || h->chunk >= h->g->n)
        return codec_errf(err, errlen, -EPROTO, "vertex run: no chunk for source %s", vx->name);
    struct node_chunk_id id = {.stripe = h->stripe.stripe, .index = (uint32_t)h->chunk};
    memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
    void *buf = NULL;
    size_t got = 0;
    int rc = node_store_get_chunk_alloc(svc->store, &id, &buf, &got, NULL);
    if (rc)
        return codec_errf(err, errlen, rc, "vertex %s: local chunk %d: %s", vx->name, h->chunk,
                          node_store_strerror(rc));
    if (got != n) {
        free(buf);
        return codec_errf(err, errlen, -EINVAL, "vertex %s: local chunk %d has %zu bytes, not %zu",
                          vx->name, h->chunk, got, n);
    }
    int slot = vx->local[0];
    uint8_t *chunks[CODEC_MAX_CHUNKS] = {0};
    chunks[slot] = buf;
    if ((rc = deg_vx_rebind(h->x, n, chunks, err, errlen))) {
        free(buf);
        return rc;
    }
    free(h->chunks[slot]); /* the last run's, no longer registered */
    h->chunks[slot] = buf;
    h->len = n;
    return 0;
}

/* {"handles":[H...]} (+ rebind's fields for persistent vertices): runs them
 * all at once (they may feed each other), then stores every whole-chunk
 * result durably. -> {"vertices":[{"handle","results":
 * [{"chunk","partial","stored"}]}]}, or an error naming the first failure. */
static void h_vertex_run(struct req *r)
{
    struct node_service *s = r->svc;
    json_t *j = req_json(r), *hs = json_object_get(j, "handles");
    size_t n = json_array_size(hs);
    struct hosted **v = calloc(n + 1, sizeof(*v));
    pthread_t *t = calloc(n + 1, sizeof(*t));
    bool *started = calloc(n + 1, sizeof(*started));
    int rc = v && t && started ? 0 : -ENOMEM;
    char err[300] = "";
    for (size_t i = 0; i < n && rc == 0; i++) {
        int handle = (int)json_integer_value(json_array_get(hs, i));
        if (!(v[i] = hosted_claim(s, handle)))
            rc = codec_errf(err, sizeof(err), -ENOENT, "vertex run: no vertex %d", handle);
        else if ((rc = rebind(s, v[i], j, i, err, sizeof(err))) == 0)
            v[i]->nres = 0;
        if (rc == 0)
            update_crash_hook(v[i], "run");
    }
    /* One vertex (a sink of an encode) runs on this worker: no thread to start. */
    if (n == 1 && rc == 0)
        vertex_run(v[0]);
    for (size_t i = 0; i < n && rc == 0 && n > 1; i++)
        started[i] = pthread_create(&t[i], NULL, vertex_main, v[i]) == 0;
    for (size_t i = 0; i < n && rc == 0 && n > 1; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        else
            v[i]->rc = codec_errf(v[i]->err, sizeof(v[i]->err), -EAGAIN, "no thread for a vertex");
    }
    json_t *out = json_array();
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct hosted *h = v[i];
        json_t *res = json_array();
        if (h->rc == 0)
            update_crash_hook(h, "computed");
        for (int k = 0; k < h->nres && h->rc == 0; k++) {
            bool store = !h->labels[k].partial;
            if (store) {
                if (h->chunk >= 0)
                    h->labels[k].chunk = h->chunk;
                struct node_chunk_id id = {.stripe = h->stripe.stripe,
                                           .index = (uint32_t)h->labels[k].chunk};
                memcpy(id.object, h->stripe.object, NODE_OBJECT_ID_BYTES);
                int src =
                    node_store_put_chunk(s->store, &id, h->stripe.version, h->data[k], h->len);
                if (src)
                    h->rc = codec_errf(h->err, sizeof(h->err), src,
                                       "vertex %s: storing chunk %d: %s", h->g->vertices[h->v].name,
                                       h->labels[k].chunk, node_store_strerror(src));
            }
            json_array_append_new(res, json_pack("{s:i,s:b,s:b}", "chunk", h->labels[k].chunk,
                                                 "partial", h->labels[k].partial, "stored", store));
        }
        if (h->rc == 0)
            update_crash_hook(h, "stored");
        if (h->rc && !rc) {
            rc = h->rc;
            snprintf(err, sizeof(err), "%s", h->err);
        }
        json_array_append_new(out, json_pack("{s:i,s:o}", "handle", h->handle, "results", res));
    }
    /* A vertex runs once, a persistent one until a run fails: after a failure
     * its QPs hold requests that will never complete. */
    for (size_t i = 0; i < n && v && v[i]; i++) {
        int handle = v[i]->handle;
        bool keep = v[i]->persist && rc == 0;
        if (keep)
            hosted_touch(v[i], v[i]->timeout_ms);
        hosted_release(s, v[i]);
        if (!keep)
            hosted_free(hosted_take(s, handle));
    }
    free(v);
    free(t);
    free(started);
    json_decref(j);
    if (rc) {
        json_decref(out);
        inec_log(INEC_LOG_WARN, "node", "vertex run failed id=%s err=\"%s\"", s->id, err);
        reply_err(r, rc, err);
    } else {
        reply_json(r, json_pack("{s:o}", "vertices", out));
    }
}

static void h_vertex_close(struct req *r)
{
    json_t *j = req_json(r);
    struct hosted *h = hosted_take(r->svc, (int)json_integer_value(json_object_get(j, "handle")));
    json_decref(j);
    reply(r, h ? 0 : -ENOENT);
    hosted_free(h);
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
    [NODE_RPC_PUT_CHUNK] = {h_put_chunk, false},
    [NODE_RPC_GET_CHUNK] = {h_get_chunk, true, h_get_chunk_cached},
    [NODE_RPC_GET_CHUNK_TO] = {h_get_chunk, true, h_get_chunk_cached},
    [NODE_RPC_DELETE_CHUNK] = {h_delete_chunk, true},
    [NODE_RPC_PUT_META] = {h_put_meta, true},
    [NODE_RPC_GET_META] = {h_get_meta, false, NULL, true},
    [NODE_RPC_DELETE_META] = {h_delete_meta, true},
    [NODE_RPC_LIST_META] = {h_list_meta, true},
    [NODE_RPC_STATS] = {h_stats, false},
    [NODE_RPC_HEALTH] = {h_health, false},
    [NODE_RPC_SCRUB] = {h_scrub, true},
    [NODE_RPC_VERTEX_SETUP] = {h_vertex_setup, true},
    [NODE_RPC_VERTEX_CONNECT] = {h_vertex_connect, false},
    [NODE_RPC_VERTEX_RUN] = {h_vertex_run, true},
    [NODE_RPC_VERTEX_CLOSE] = {h_vertex_close, false},
    [NODE_RPC_LIST_CHUNKS] = {h_list_chunks, true},
    [NODE_RPC_LIST_REPAIR] = {h_list_repair, true},
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
        return reply_err(r, status, "request too large");
    if (atomic_load(&s->stopping))
        return reply_err(r, -ESHUTDOWN, "node is shutting down");
    if (m->type >= NODE_RPC_NTYPES || !handlers[m->type].fn)
        return reply_err(r, -EOPNOTSUPP, "unknown request type");
    if (handlers[m->type].nowait && handlers[m->type].nowait(r))
        return;
    bool here = on_engine ? handlers[m->type].quick : !handlers[m->type].blocking;
    if (!here && work_submit(s, r))
        return;
    if (!here && on_engine)
        return reply_err(r, -EAGAIN, "node has no worker thread");
    handlers[m->type].fn(r);
}

/* Closes vertices whose runner set them up and went away. */
static void reap_vertices(struct node_service *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct hosted *dead = NULL;
    pthread_mutex_lock(&s->lock);
    for (struct hosted **pp = &s->vertices; *pp;) {
        struct hosted *h = *pp;
        if (!h->running && h->expires < now.tv_sec) {
            *pp = h->next;
            h->next = dead;
            dead = h;
        } else {
            pp = &h->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (struct hosted *h = dead, *n; h; h = n) {
        n = h->next;
        inec_log(INEC_LOG_WARN, "node", "vertex never run, closed id=%s handle=%d", s->id,
                 h->handle);
        hosted_free(h);
    }
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
            reap_vertices(s);
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

/* ---- the connection manager (tcp) ------------------------------------------------- */

/* One exchange per TCP connection, after the client proved the cluster secret
 * (inec/auth.h, ctx "cm"): the client's {"addr","qpn"} line, our
 * {"addr","qpn","id"} or {"error","errno"} line. The QP waits for the
 * client's device to connect to ours (authenticated too): a node never dials
 * an address a peer names. */
static void cm_serve(struct node_service *s, int fd, const char *from)
{
    struct inec_keyring kr;
    char aerr[300] = "", peer[INEC_AUTH_NAME];
    int arc = inec_keyring_get(s->secret, &kr, aerr, sizeof(aerr));
    if (!arc)
        arc = inec_auth_respond(fd, &kr, "cm", s->listen, s->id, peer, 5000, aerr, sizeof(aerr));
    inec_keyring_clear(&kr);
    if (arc) {
        inec_log(INEC_LOG_WARN, "node", "connection refused id=%s from=%s why=%s", s->id, from,
                 aerr);
        return;
    }
    inec_log(INEC_LOG_DEBUG, "node", "peer authenticated id=%s peer=%s from=%s", s->id, peer, from);
    char buf[1024];
    size_t got = 0;
    while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        got += (size_t)n;
    }
    buf[got] = 0;
    json_t *j = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL), *ans;
    const char *addr = json_string_value(json_object_get(j, "addr"));
    uint32_t qpn = 0;
    const char *dev_addr = NULL;
    int rc =
        addr ? node_service_accept(s, addr, (uint32_t)json_integer_value(json_object_get(j, "qpn")),
                                   &qpn, &dev_addr)
             : -EPROTO;
    if (rc)
        ans = json_pack("{s:s,s:i}", "error", strerror(-rc), "errno", -rc);
    else
        ans = json_pack("{s:s,s:i,s:s}", "addr", dev_addr, "qpn", (int)qpn, "id", s->id);
    char *text = json_dumps(ans, JSON_COMPACT);
    if (text) {
        size_t len = strlen(text);
        text[len] = '\n'; /* overwrites the NUL; send exactly len + 1 */
        if (send(fd, text, len + 1, MSG_NOSIGNAL) < 0)
            inec_log(INEC_LOG_WARN, "node", "cm reply failed err=%s", strerror(errno));
    }
    free(text);
    json_decref(ans);
    json_decref(j);
}

static void *cm_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-cm");
    struct node_service *s = arg;
    while (!atomic_load(&s->stop)) {
        struct sockaddr_storage sa = {0};
        socklen_t sl = sizeof(sa);
        int fd = accept4(s->cm_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* shut down */
        }
        char from[64];
        inec_sockaddr_str((struct sockaddr *)&sa, true, from, sizeof(from));
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        cm_serve(s, fd, from);
        close(fd);
    }
    return NULL;
}

static int cm_listen(struct node_service *s, const char *listen_addr, char *err, size_t errlen)
{
    char host[256], port[8];
    if (inec_hostport_split(listen_addr, host, sizeof(host), port, sizeof(port)))
        return codec_errf(err, errlen, -EINVAL,
                          "listen address '%s' is not HOST:PORT (an IPv6 HOST in brackets)",
                          listen_addr);
    int fd = inec_tcp_listen(listen_addr, 64);
    if (fd < 0)
        return codec_errf(err, errlen, fd, "listen on %s: %s", listen_addr,
                          fd == -EHOSTUNREACH ? "cannot resolve the host" : strerror(-fd));
    struct sockaddr_storage sa = {0};
    socklen_t sl = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    inec_hostport_join(host, inec_sockaddr_port((struct sockaddr *)&sa), s->listen,
                       sizeof(s->listen));
    char dev_listen[300];
    inec_hostport_join(host, 0, dev_listen, sizeof(dev_listen));
    s->cm_fd = fd;
    int n = snprintf(s->dev_options, sizeof(s->dev_options),
                     "transport=tcp,listen=%s,timeout_ms=%d", dev_listen, s->timeout_ms);
    if (s->heartbeat_ms > 0 && n > 0 && (size_t)n < sizeof(s->dev_options))
        n += snprintf(s->dev_options + n, sizeof(s->dev_options) - (size_t)n, ",heartbeat_ms=%d",
                      s->heartbeat_ms);
    if (s->secret[0] && n > 0 && (size_t)n < sizeof(s->dev_options))
        snprintf(s->dev_options + n, sizeof(s->dev_options) - (size_t)n, ",secret=%s", s->secret);
    return 0;
}

/* A wildcard listen address ("0.0.0.0:P", "[::]:P", ":P"): every address of
 * this machine. */
static bool wildcard_host(const char *host)
{
    return host[0] == ':' || (strncmp(host, "0.0.0.0", 7) == 0 && (!host[7] || host[7] == ':')) ||
           strcmp(host, "::") == 0 || strncmp(host, "[::]", 4) == 0;
}

/* The map's nodes on any address of this machine's interfaces, or "localhost". */
static int nodes_on_this_machine(const struct place_map *m)
{
    int n = place_map_nodes_on_host(m, "localhost");
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs))
        return n;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        char a[INET6_ADDRSTRLEN + 2] = "[";
        if (!i->ifa_addr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)i->ifa_addr;
            if (!inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a)))
                continue;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)i->ifa_addr;
            if (!inet_ntop(AF_INET6, &in6->sin6_addr, a + 1, sizeof(a) - 2))
                continue;
            strcat(a, "]"); /* as a map writes it: [v6]:port */
        } else {
            continue;
        }
        n += place_map_nodes_on_host(m, a);
    }
    freeifaddrs(ifs);
    return n;
}

bool node_host_crowded(const struct place_map *m, const char *host)
{
    int here = wildcard_host(host) ? nodes_on_this_machine(m) : place_map_nodes_on_host(m, host);
    return here >= node_usable_cpus();
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
    if (cfg->listen && (rc = cm_listen(s, cfg->listen, err, errlen)))
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
        if ((rc = -pthread_create(&s->cm, NULL, cm_main, s))) {
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
    for (struct hosted *h = s->vertices, *n; h; h = n) {
        n = h->next;
        if (!h->running)
            hosted_free(h);
    }
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
