/*
 * The client side of the node RPCs, and node_deg_run: a DEG whose node
 * vertices run on their nodes, set up and started through RPCs.
 *
 * One call at a time per client (its lock): send the request, then poll the
 * client's own CQ until the response with this request id is there and the
 * request's sends have completed (so the caller may free its data), or the
 * deadline passes. A timeout or a broken QP closes the endpoint (the engine
 * then touches none of the caller's buffers); the next call reconnects.
 */
#include "deg/deg.h"
#include "node/client.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "node/rpc.h"

#define DEFAULT_TIMEOUT 5000

struct node_client {
    struct inec_device *dev;
    struct inec_cq *cq;  /* answers (waited on) */
    struct inec_cq *scq; /* send completions (polled; see call_timeout) */
    struct rpc_ep *ep;
    struct node_service *local; /* in-process node, or NULL */
    char addr[300];
    char secret[256], name[INEC_AUTH_NAME], node_id[NODE_ID_MAX]; /* see node_client_opts */
    int timeout_ms;
    uint64_t seq;
    pthread_mutex_t lock; /* busy */
    pthread_cond_t idle;
    bool busy;        /* a call is out (client_take) */
    bool plain_reads; /* the node predates NODE_RPC_GET_CHUNK_TO */
    char err[512];
};

static int cfail(struct node_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cfail(struct node_client *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return rc;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The connection manager exchange over TCP (see service.c). */
static int cm_exchange(struct node_client *c, uint32_t qpn, char *peer, size_t peerlen,
                       uint32_t *peer_qpn)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    int rc = inec_hostport_resolve(c->addr, false, &sa, &sl);
    if (rc == -EINVAL)
        return cfail(c, rc, "node address '%s' is not HOST:PORT (an IPv6 HOST in brackets)",
                     c->addr);
    if (rc)
        return cfail(c, rc, "cannot resolve %s", c->addr);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = c->timeout_ms / 1000, .tv_usec = c->timeout_ms % 1000 * 1000};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* bounds connect() too */
        /* The handshake's last message and the request line go out back to
         * back: with Nagle the line waited for the node's delayed ACK of the
         * first, 40 ms on every new connection. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    }
    rc = fd < 0 || connect(fd, (struct sockaddr *)&sa, sl) ? -errno : 0;
    if (rc) {
        if (fd >= 0)
            close(fd);
        if (rc == -EINPROGRESS || rc == -EAGAIN)
            rc = -ETIMEDOUT;
        return cfail(c, rc, "cannot connect to node %s: %s", c->addr, strerror(-rc));
    }
    /* Mutual proof of the cluster secret before anything else. */
    struct inec_keyring kr;
    char aerr[300], who[INEC_AUTH_NAME] = "";
    rc = inec_keyring_get(c->secret, &kr, aerr, sizeof(aerr));
    if (!rc)
        rc = inec_auth_initiate(fd, &kr, "cm", c->name, c->addr, who, c->timeout_ms, aerr,
                                sizeof(aerr));
    inec_keyring_clear(&kr);
    if (!rc && c->node_id[0] && strcmp(who, c->node_id) != 0)
        rc = -EACCES, snprintf(aerr, sizeof(aerr), "it is node '%s', not '%s'", who, c->node_id);
    if (rc) {
        close(fd);
        return cfail(c, rc == -EACCES || rc == -EPROTO ? -EACCES : rc, "node %s: %s", c->addr,
                     aerr);
    }
    char line[512];
    int n = snprintf(line, sizeof(line), "{\"addr\":\"%s\",\"qpn\":%u}\n", inec_device_addr(c->dev),
                     qpn);
    size_t got = 0;
    if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
        rc = -EHOSTDOWN;
    } else {
        while (got < sizeof(line) - 1 && !memchr(line, '\n', got)) {
            ssize_t r = recv(fd, line + got, sizeof(line) - 1 - got, 0);
            /* io_uring task work of this thread can interrupt a recv that has
             * a timeout (EINTR although no signal handler exists) */
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? -ETIMEDOUT : -EHOSTDOWN;
                break;
            }
            got += (size_t)r;
        }
    }
    close(fd);
    if (rc)
        return cfail(c, rc, "node %s: connection setup: %s", c->addr, strerror(-rc));
    line[got] = 0;
    json_t *j = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    const char *a = json_string_value(json_object_get(j, "addr"));
    if (!a) {
        int e = (int)json_integer_value(json_object_get(j, "errno"));
        json_decref(j);
        return cfail(c, e > 0 ? -e : -EPROTO, "node %s refused the connection: %s", c->addr,
                     e > 0 ? strerror(e) : "bad answer");
    }
    /* The node's device, at the host we reached the node on (the map's):
     * only its port comes from the answer. */
    const char *port = strrchr(a, ':');
    if (strncmp(a, "tcp:", 4) != 0 || !port) {
        json_decref(j);
        return cfail(c, -EPROTO, "node %s answered a bad device address", c->addr);
    }
    /* c->addr up to its port's colon: HOST or [V6] as the map writes it */
    snprintf(peer, peerlen, "tcp:%.*s%s", (int)(strrchr(c->addr, ':') - c->addr), c->addr, port);
    *peer_qpn = (uint32_t)json_integer_value(json_object_get(j, "qpn"));
    json_decref(j);
    return 0;
}

static int ep_setup(struct node_client *c)
{
    char peer[300];
    const char *local_addr = NULL;
    uint32_t peer_qpn = 0;
    int rc = rpc_ep_open(c->dev, c->scq, c->cq, &c->ep);
    if (rc)
        return cfail(c, rc, "rpc endpoint: %s", inec_errmsg());
    uint32_t qpn = rpc_ep_qpn(c->ep);
    if (c->local) {
        rc = node_service_accept(c->local, inec_device_addr(c->dev), qpn, &peer_qpn, &local_addr);
        if (rc)
            cfail(c, rc, "in-process node refused the connection: %s", strerror(-rc));
        else
            snprintf(peer, sizeof(peer), "%s", local_addr);
    } else {
        rc = cm_exchange(c, qpn, peer, sizeof(peer), &peer_qpn);
    }
    if (rc == 0 && (rc = rpc_ep_connect(c->ep, peer, peer_qpn)))
        cfail(c, rc, "connecting to node %s: %s", c->addr, inec_errmsg());
    if (rc) {
        rpc_ep_close(c->ep);
        c->ep = NULL;
    }
    return rc;
}

static int client_new(struct inec_device *dev, const struct node_client_opts *opts,
                      struct node_client **out)
{
    struct node_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT;
    snprintf(c->secret, sizeof(c->secret), "%s",
             opts && opts->secret_file ? opts->secret_file : "");
    snprintf(c->name, sizeof(c->name), "%s", opts && opts->name ? opts->name : "client");
    snprintf(c->node_id, sizeof(c->node_id), "%s", opts && opts->node_id ? opts->node_id : "");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->idle, NULL);
    int rc = inec_cq_create(dev, 4096, &c->cq);
    if (rc == 0 && (rc = inec_cq_create(dev, 4096, &c->scq)))
        inec_cq_destroy(c->cq);
    if (rc) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->idle);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int client_finish(struct node_client *c, struct node_client **out, char *err, size_t errlen)
{
    int rc = ep_setup(c);
    if (rc) {
        if (err && errlen)
            snprintf(err, errlen, "%s", c->err);
        node_client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int node_client_connect(struct inec_device *dev, const char *addr,
                        const struct node_client_opts *opts, struct node_client **out, char *err,
                        size_t errlen)
{
    struct node_client *c;
    int rc = client_new(dev, opts, &c);
    if (rc)
        return rc;
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    return client_finish(c, out, err, errlen);
}

int node_client_connect_local(struct inec_device *dev, struct node_service *svc,
                              const struct node_client_opts *opts, struct node_client **out,
                              char *err, size_t errlen)
{
    struct node_client *c;
    int rc = client_new(dev, opts, &c);
    if (rc)
        return rc;
    c->local = svc;
    snprintf(c->addr, sizeof(c->addr), "%s", node_service_id(svc));
    return client_finish(c, out, err, errlen);
}

void node_client_close(struct node_client *c)
{
    if (!c)
        return;
    rpc_ep_close(c->ep);
    inec_cq_destroy(c->cq);
    inec_cq_destroy(c->scq);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->idle);
    free(c);
}

const char *node_client_errmsg(const struct node_client *c)
{
    return c->err;
}

/* The client takes one call at a time: it is busy from a call's start to
 * its end, which may run on another thread (a metadata round hands the
 * calls still out to the fan-out). */
static void client_take(struct node_client *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->busy)
        pthread_cond_wait(&c->idle, &c->lock);
    c->busy = true;
    pthread_mutex_unlock(&c->lock);
}

static void client_release(struct node_client *c)
{
    pthread_mutex_lock(&c->lock);
    c->busy = false;
    pthread_cond_signal(&c->idle);
    pthread_mutex_unlock(&c->lock);
}

/* Sends a request: 0 when it left (k is then out until call_step ends it),
 * else the error (the client free again). Without `connect` a client whose
 * connection is gone answers -ENOTCONN rather than dial (which may block). */
static int call_start(struct node_client *c, int type, const void *head, size_t hlen,
                      const void *data, size_t dlen, int timeout_ms, bool connect,
                      struct node_call *k)
{
    *k = (struct node_call){.c = c};
    client_take(c);
    c->err[0] = 0;
    int rc = 0;
    if (c->ep && rpc_ep_broken(c->ep)) {
        rpc_ep_close(c->ep);
        c->ep = NULL;
    }
    if (!c->ep) {
        if (c->local) /* the in-process node may be gone: do not touch it */
            rc = cfail(c, -EHOSTDOWN, "connection to node %s is broken", c->addr);
        else if (!connect)
            rc = -ENOTCONN;
        else
            rc = ep_setup(c);
        if (rc) {
            client_release(c);
            return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EINVAL || rc == -ENOTCONN
                       ? rc
                       : -EHOSTDOWN;
        }
    }
    struct rpc_msg h = {.type = (uint16_t)type, .req_id = ++c->seq};
    if ((rc = rpc_ep_send(c->ep, &h, head, hlen, data, dlen, NULL, NULL))) {
        client_release(c);
        return cfail(c, rc, "request to node %s: %s", c->addr, strerror(-rc));
    }
    k->req_id = h.req_id;
    k->deadline = now_ms() + timeout_ms;
    k->timeout_ms = timeout_ms;
    return 0;
}

/* The CQ k's call waits on now: its answer, or (once it has the answer) the
 * send of the caller's data if that went in place (the engine still reads
 * it). */
static struct inec_cq *call_cq(const struct node_call *k)
{
    return k->got && rpc_ep_sending_in_place(k->c->ep) ? k->c->scq : k->c->cq;
}

/*
 * Takes what arrived for k; with `block`, sleeps until the call is over.
 * Returns true once it is: k->rc is 0 or the node's status (< 0) with
 * k->got and the answer in k->data (the caller frees it), or a transport
 * failure (-ETIMEDOUT, -EHOSTDOWN, ...).
 *
 * Send completions have a CQ of their own, polled here rather than slept
 * on: on tcp the node acknowledges the request well before it answers, and
 * that would wake this thread once more per RPC. A connection that fails
 * flushes the receives too, so the wait for an answer learns of it.
 */
static bool call_step(struct node_call *k, bool block)
{
    struct node_client *c = k->c;
    int rc = 0;
    if (k->done)
        return true;
    for (;;) {
        struct inec_wc wc[16];
        struct rpc_msg m;
        int n = inec_poll_cq(c->scq, 16, wc);
        for (int i = 0; i < n; i++)
            if (rpc_ep_owns(c->ep, &wc[i]) && rpc_ep_complete(c->ep, &wc[i], &m) < 0 && !rc)
                rc = cfail(c, -EHOSTDOWN, "connection to node %s broke", c->addr);
        if (rc || (k->got && call_cq(k) == c->cq))
            break;
        int64_t left = k->deadline - now_ms();
        struct inec_cq *q = call_cq(k);
        n = block && left > 0 ? inec_cq_wait(q, 16, wc, (int)left) : inec_poll_cq(q, 16, wc);
        if (n < 0 || (n == 0 && left <= 0)) {
            rc =
                cfail(c, -ETIMEDOUT, "node %s did not answer within %d ms", c->addr, k->timeout_ms);
            break;
        }
        if (n == 0)
            return false;
        for (int i = 0; i < n; i++) {
            if (!rpc_ep_owns(c->ep, &wc[i]))
                continue; /* of an endpoint closed earlier */
            int r = rpc_ep_complete(c->ep, &wc[i], &m);
            if (r == 1 && (m.flags & RPC_F_RESPONSE) && m.req_id == k->req_id && !k->got) {
                k->rc = m.status;
                k->data = m.data;
                k->len = m.len;
                k->got = true;
            } else if (r == 1) {
                free(m.data); /* an answer to a request we gave up on */
            } else if (r == -EHOSTDOWN && rc == 0) {
                rc = cfail(c, -EHOSTDOWN, "connection to node %s broke", c->addr);
            }
        }
    }
    if (rc) {
        /* Closing the QP guarantees the engine no longer reads the caller's
         * data. An answer that came before the break still counts. */
        rpc_ep_close(c->ep);
        c->ep = NULL;
    }
    if (!k->got)
        k->rc = rc;
    else if (k->rc < 0 && k->len)
        cfail(c, k->rc, "node %s: %.*s", c->addr, (int)k->len, (char *)k->data);
    else if (k->rc < 0)
        cfail(c, k->rc, "node %s: %s", c->addr, strerror(-k->rc));
    k->done = true;
    client_release(c);
    return true;
}

bool node_call_poll(struct node_call *k)
{
    return call_step(k, false);
}

int node_calls_wait(struct node_call *const *ks, int n, int timeout_ms)
{
    struct inec_cq *cqs[INEC_WAIT_ANY_MAX];
    int m = 0;
    int64_t until = INT64_MAX;
    for (int i = 0; i < n && m < INEC_WAIT_ANY_MAX; i++) {
        if (ks[i]->done)
            continue;
        cqs[m++] = call_cq(ks[i]);
        if (ks[i]->deadline < until)
            until = ks[i]->deadline;
    }
    if (m == 0)
        return 0;
    int64_t left = until - now_ms();
    if (timeout_ms >= 0 && timeout_ms < left)
        left = timeout_ms;
    int rc = inec_cq_wait_any(cqs, m, left > 0 ? (int)left : 0);
    return rc == -ETIMEDOUT ? 0 : rc < 0 ? rc : 0;
}

/*
 * One RPC: *resp gets the response (caller frees resp->data) when it returns
 * 0 or the node's status (< 0, resp filled); transport failures return
 * -ETIMEDOUT / -EHOSTDOWN / ... with resp untouched.
 */
static int call_timeout(struct node_client *c, int type, const void *head, size_t hlen,
                        const void *data, size_t dlen, struct rpc_msg *resp, int timeout_ms)
{
    struct node_call k;
    int rc = call_start(c, type, head, hlen, data, dlen, timeout_ms, true, &k);
    if (rc)
        return rc;
    call_step(&k, true);
    if (k.got)
        *resp = (struct rpc_msg){.type = (uint16_t)type,
                                 .flags = RPC_F_RESPONSE,
                                 .req_id = k.req_id,
                                 .status = k.rc,
                                 .data = k.data,
                                 .len = k.len};
    return k.rc;
}

static int call(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
                size_t dlen, struct rpc_msg *resp)
{
    return call_timeout(c, type, head, hlen, data, dlen, resp, c->timeout_ms);
}

/* A call whose response carries nothing the caller needs. */
static int call0(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
                 size_t dlen)
{
    struct rpc_msg m = {0};
    int rc = call(c, type, head, hlen, data, dlen, &m);
    free(m.data);
    return rc;
}

/* ---- chunks ------------------------------------------------------------------ */

int node_client_put_chunk(struct node_client *c, const struct node_chunk_id *id, uint64_t version,
                          const void *data, size_t len)
{
    uint8_t head[RPC_CHUNK_HEAD];
    if (len > NODE_CHUNK_MAX)
        return cfail(c, -EMSGSIZE, "chunk of %zu bytes exceeds %u", len, NODE_CHUNK_MAX);
    rpc_chunk_head_encode(head, id, version);
    return call0(c, NODE_RPC_PUT_CHUNK, head, sizeof(head), data, len);
}

int node_client_get_chunk(struct node_client *c, const struct node_chunk_id *id, void **data,
                          size_t *len, uint64_t *version)
{
    uint8_t head[RPC_CHUNK_HEAD];
    rpc_chunk_head_encode(head, id, 0);
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_GET_CHUNK, head, sizeof(head), NULL, 0, &m);
    if (rc == 0 && m.len < 8)
        rc = cfail(c, -EPROTO, "node %s: short get response", c->addr);
    if (rc) {
        free(m.data);
        return rc;
    }
    if (version)
        *version = rpc_get64(m.data);
    *len = m.len - 8;
    memmove(m.data, m.data + 8, *len);
    *data = m.data;
    return 0;
}

static int get_chunk_to_start(struct node_client *c, const struct node_chunk_id *id, void *dst,
                              size_t cap, uint32_t rkey, bool connect, struct node_call *k)
{
    uint8_t head[RPC_CHUNK_TO_HEAD];
    rpc_chunk_head_encode(head, id, 0);
    rpc_put64(head + RPC_CHUNK_HEAD, (uint64_t)(uintptr_t)dst);
    rpc_put32(head + RPC_CHUNK_HEAD + 8, rkey);
    rpc_put64(head + RPC_CHUNK_HEAD + 12, cap);
    /* Set by an earlier call's end, maybe on another thread. */
    pthread_mutex_lock(&c->lock);
    bool plain = c->plain_reads;
    pthread_mutex_unlock(&c->lock);
    int rc = plain ? call_start(c, NODE_RPC_GET_CHUNK, head, RPC_CHUNK_HEAD, NULL, 0, c->timeout_ms,
                                connect, k)
                   : call_start(c, NODE_RPC_GET_CHUNK_TO, head, sizeof(head), NULL, 0,
                                c->timeout_ms, connect, k);
    k->chunk = *id;
    k->dst = dst;
    k->cap = cap;
    k->plain = plain;
    return rc;
}

int node_client_get_chunk_to_start(struct node_client *c, const struct node_chunk_id *id, void *dst,
                                   size_t cap, uint32_t rkey, struct node_call *k)
{
    return get_chunk_to_start(c, id, dst, cap, rkey, false, k);
}

int node_client_get_chunk_to_end(struct node_call *k, size_t *len, uint64_t *version)
{
    struct node_client *c = k->c;
    call_step(k, true);
    int rc = k->rc;
    if (rc == -EOPNOTSUPP && !k->plain) {
        /* An older node: plain reads from now on, this one too. */
        free(k->data);
        k->data = NULL;
        pthread_mutex_lock(&c->lock);
        c->plain_reads = true;
        pthread_mutex_unlock(&c->lock);
        struct node_call again;
        if ((rc = get_chunk_to_start(c, &k->chunk, k->dst, k->cap, 0, true, &again)))
            return rc;
        *k = again;
        call_step(k, true);
        rc = k->rc;
    }
    size_t n = 0;
    if (rc == 0 && (k->plain ? k->len < 8 : k->len != 16))
        rc = cfail(c, -EPROTO, "node %s: bad chunk read response", c->addr);
    else if (rc == 0 && (n = k->plain ? k->len - 8 : rpc_get64(k->data + 8)) > k->cap)
        rc = cfail(c, -EMSGSIZE, "node %s: chunk of %zu bytes exceeds %zu", c->addr, n, k->cap);
    if (rc == 0) {
        if (k->plain)
            memcpy(k->dst, k->data + 8, n);
        if (version)
            *version = rpc_get64(k->data);
        *len = n;
    }
    free(k->data);
    k->data = NULL;
    return rc;
}

int node_client_get_chunk_to(struct node_client *c, const struct node_chunk_id *id, void *dst,
                             size_t cap, uint32_t rkey, size_t *len, uint64_t *version)
{
    struct node_call k;
    int rc = get_chunk_to_start(c, id, dst, cap, rkey, true, &k);
    return rc ? rc : node_client_get_chunk_to_end(&k, len, version);
}

int node_client_delete_chunk(struct node_client *c, const struct node_chunk_id *id,
                             uint64_t version)
{
    uint8_t head[RPC_CHUNK_HEAD];
    rpc_chunk_head_encode(head, id, version);
    return call0(c, NODE_RPC_DELETE_CHUNK, head, sizeof(head), NULL, 0);
}

/* ---- metadata ------------------------------------------------------------------- */

/* "bucket\0key\0" in a malloc'ed buffer. */
/* "bucket\0key\0" and `extra` more bytes of head, uninitialized. */
static char *names(const char *bucket, const char *key, size_t extra, size_t *len)
{
    size_t b = strlen(bucket) + 1, k = strlen(key) + 1;
    char *p = malloc(b + k + extra);
    if (p) {
        memcpy(p, bucket, b);
        memcpy(p + b, key, k);
    }
    *len = b + k + extra;
    return p;
}

/* A metadata call's head: "bucket\0key\0", then for a write (`put` not
 * NULL) its version and flags. */
static char *meta_head(struct node_client *c, const char *bucket, const char *key,
                       const uint64_t *put, unsigned flags, size_t len, size_t *hlen, int *rc)
{
    *rc = 0;
    if (!bucket || !key)
        *rc = cfail(c, -EINVAL, "bucket and key are required");
    else if (len > NODE_META_MAX)
        *rc = cfail(c, -EMSGSIZE, "metadata of %zu bytes exceeds %u", len, NODE_META_MAX);
    if (*rc)
        return NULL;
    char *head = names(bucket, key, put ? RPC_META_HEAD : 0, hlen);
    if (!head) {
        *rc = -ENOMEM;
        return NULL;
    }
    if (put) {
        rpc_put64((uint8_t *)head + *hlen - RPC_META_HEAD, *put);
        rpc_put32((uint8_t *)head + *hlen - 4, flags);
    }
    return head;
}

static int meta_call(struct node_client *c, int type, const char *bucket, const char *key,
                     const void *blob, size_t len, struct rpc_msg *m)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, NULL, 0, len, &hlen, &rc);
    if (!head)
        return rc;
    rc = call(c, type, head, hlen, blob, len, m);
    free(head);
    return rc;
}

static int put_meta_start(struct node_client *c, const char *bucket, const char *key,
                          uint64_t version, unsigned flags, const void *blob, size_t len,
                          bool connect, struct node_call *k)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, &version, flags, len, &hlen, &rc);
    if (!head)
        return rc;
    rc = call_start(c, NODE_RPC_PUT_META, head, hlen, blob, len, c->timeout_ms, connect, k);
    free(head); /* copied into the send (rpc.h) */
    return rc;
}

int node_client_put_meta(struct node_client *c, const char *bucket, const char *key,
                         uint64_t version, unsigned flags, const void *blob, size_t len,
                         uint64_t *stored)
{
    return node_client_put_meta_old(c, bucket, key, version, flags & ~NODE_META_OLD, blob, len,
                                    stored, NULL, NULL);
}

int node_client_put_meta_old(struct node_client *c, const char *bucket, const char *key,
                             uint64_t version, unsigned flags, const void *blob, size_t len,
                             uint64_t *stored, void **old, size_t *old_len)
{
    struct node_call k;
    if (old)
        flags |= NODE_META_OLD;
    int rc = put_meta_start(c, bucket, key, version, flags, blob, len, true, &k);
    if (rc) {
        if (stored)
            *stored = 0;
        if (old) {
            *old = NULL;
            *old_len = 0;
        }
        return rc;
    }
    return node_client_put_meta_end(&k, stored, old, old_len);
}

int node_client_put_meta_start(struct node_client *c, const char *bucket, const char *key,
                               uint64_t version, unsigned flags, const void *blob, size_t len,
                               struct node_call *k)
{
    return put_meta_start(c, bucket, key, version, flags, blob, len, false, k);
}

int node_client_put_meta_end(struct node_call *k, uint64_t *stored, void **old, size_t *old_len)
{
    call_step(k, true);
    int rc = k->rc;
    if (old) {
        *old = NULL;
        *old_len = 0;
    }
    if (rc == 0 && old && k->len) {
        *old = k->data;
        *old_len = k->len;
        k->data = NULL;
    }
    size_t n = strlen(RPC_META_STORED);
    if (stored) {
        *stored = 0;
        if ((rc == -ESTALE || rc == -EEXIST) && k->len > n && k->len < n + 24 &&
            memcmp(k->data, RPC_META_STORED, n) == 0) {
            char num[24];
            memcpy(num, (char *)k->data + n, k->len - n);
            num[k->len - n] = '\0';
            *stored = strtoull(num, NULL, 10);
        }
    }
    free(k->data);
    k->data = NULL;
    return rc;
}

static int get_meta_start(struct node_client *c, const char *bucket, const char *key, bool connect,
                          struct node_call *k)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, NULL, 0, 0, &hlen, &rc);
    if (!head)
        return rc;
    rc = call_start(c, NODE_RPC_GET_META, head, hlen, NULL, 0, c->timeout_ms, connect, k);
    free(head);
    return rc;
}

int node_client_get_meta(struct node_client *c, const char *bucket, const char *key, void **blob,
                         size_t *len)
{
    struct node_call k;
    int rc = get_meta_start(c, bucket, key, true, &k);
    return rc ? rc : node_client_get_meta_end(&k, blob, len);
}

int node_client_get_meta_start(struct node_client *c, const char *bucket, const char *key,
                               struct node_call *k)
{
    return get_meta_start(c, bucket, key, false, k);
}

int node_client_get_meta_end(struct node_call *k, void **blob, size_t *len)
{
    call_step(k, true);
    *blob = NULL;
    *len = 0;
    if (k->rc) {
        free(k->data);
        k->data = NULL;
        return k->rc;
    }
    *blob = k->data ? k->data : malloc(1);
    *len = k->len;
    k->data = NULL;
    return *blob ? 0 : -ENOMEM;
}

int node_client_delete_meta(struct node_client *c, const char *bucket, const char *key)
{
    struct rpc_msg m = {0};
    int rc = meta_call(c, NODE_RPC_DELETE_META, bucket, key, NULL, 0, &m);
    free(m.data);
    return rc;
}

int node_client_delete_meta_if(struct node_client *c, const char *bucket, const char *key,
                               const void *expect, size_t len)
{
    if (!expect || !len)
        return cfail(c, -EINVAL, "the expected record is required");
    struct rpc_msg m = {0};
    int rc = meta_call(c, NODE_RPC_DELETE_META, bucket, key, expect, len, &m);
    free(m.data);
    return rc;
}

int node_client_list_meta(struct node_client *c, const char *bucket, const char *prefix,
                          const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                          int *more)
{
    const char *f[3] = {bucket ? bucket : "", prefix ? prefix : "", start_after ? start_after : ""};
    size_t l[3], hlen = 8;
    for (int i = 0; i < 3; i++)
        hlen += (l[i] = strlen(f[i]) + 1);
    uint8_t *head = malloc(hlen), *p = head + 8;
    if (!head)
        return -ENOMEM;
    rpc_put64(head, limit);
    for (int i = 0; i < 3; i++, p += l[i - 1])
        memcpy(p, f[i], l[i]);
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_LIST_META, head, hlen, NULL, 0, &m);
    free(head);
    if (rc == 0 && m.len < 1)
        rc = cfail(c, -EPROTO, "node %s: short list response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; n++) {
        if (m.len - off < 8) {
            rc = cfail(c, -EPROTO, "node %s: bad list response", c->addr);
            break;
        }
        uint64_t kb = rpc_get64(m.data + off);
        size_t klen = (uint32_t)kb, blen = kb >> 32;
        if (m.len - off - 8 < klen + blen) {
            rc = cfail(c, -EPROTO, "node %s: bad list response", c->addr);
            break;
        }
        char *key = strndup((char *)m.data + off + 8, klen);
        if (!key) {
            rc = -ENOMEM;
            break;
        }
        int stop = cb ? cb(key, m.data + off + 8 + klen, blen, arg) : 0;
        free(key);
        off += 8 + klen + blen;
        if (stop)
            break;
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

/* ---- node state ---------------------------------------------------------------------- */

int node_client_list_chunks(struct node_client *c, const struct node_chunk_id *after, size_t limit,
                            node_chunk_cb cb, void *arg, int *more)
{
    uint8_t head[8 + RPC_CHUNK_HEAD];
    rpc_put64(head, limit);
    if (after)
        rpc_chunk_head_encode(head + 8, after, 0);
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_LIST_CHUNKS, head, after ? sizeof(head) : 8, NULL, 0, &m);
    if (rc == 0 && (m.len < 1 || (m.len - 1) % NODE_INVENTORY_ENTRY))
        rc = cfail(c, -EPROTO, "node %s: bad inventory response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; off += NODE_INVENTORY_ENTRY, n++) {
        struct node_chunk_id id;
        uint64_t version;
        const uint8_t *p = m.data + off;
        rpc_chunk_head_decode(p, &id, &version);
        uint32_t len = (uint32_t)p[RPC_CHUNK_HEAD] | (uint32_t)p[RPC_CHUNK_HEAD + 1] << 8 |
                       (uint32_t)p[RPC_CHUNK_HEAD + 2] << 16 |
                       (uint32_t)p[RPC_CHUNK_HEAD + 3] << 24;
        if (cb(&id, version, len, arg)) {
            n++;
            break;
        }
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

int node_client_list_repair(struct node_client *c, node_repair_cb cb, void *arg, int *more)
{
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_LIST_REPAIR, NULL, 0, NULL, 0, &m);
    if (rc == 0 && (m.len < 1 || (m.len - 1) % RPC_CHUNK_HEAD))
        rc = cfail(c, -EPROTO, "node %s: bad repair list response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; off += RPC_CHUNK_HEAD, n++) {
        struct node_chunk_id id;
        uint64_t version;
        rpc_chunk_head_decode(m.data + off, &id, &version);
        if (cb(&id, version, arg)) {
            n++;
            break;
        }
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

int node_client_health(struct node_client *c, struct node_health *h)
{
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_HEALTH, NULL, 0, NULL, 0, &m);
    json_t *j = rc ? NULL : json_loadb((char *)m.data, m.len, 0, NULL);
    free(m.data);
    if (rc)
        return rc;
    if (!j)
        return cfail(c, -EPROTO, "node %s: bad health response", c->addr);
    memset(h, 0, sizeof(*h));
    snprintf(h->id, sizeof(h->id), "%s", json_string_value(json_object_get(j, "id")) ?: "");
    snprintf(h->domain, sizeof(h->domain), "%s",
             json_string_value(json_object_get(j, "domain")) ?: "");
    h->uptime_ms = (uint64_t)json_integer_value(json_object_get(j, "uptime_ms"));
    h->stopping = json_is_true(json_object_get(j, "stopping"));
    h->time_ns = (int64_t)json_integer_value(json_object_get(j, "time_ns"));
    h->workers = (uint64_t)json_integer_value(json_object_get(j, "workers"));
    h->workers_started = (uint64_t)json_integer_value(json_object_get(j, "workers_started"));
    h->requests_engine = (uint64_t)json_integer_value(json_object_get(j, "requests_engine"));
    h->requests_loop = (uint64_t)json_integer_value(json_object_get(j, "requests_loop"));
    json_decref(j);
    return 0;
}

int node_client_stats(struct node_client *c, struct node_store_stats *st)
{
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_STATS, NULL, 0, NULL, 0, &m);
    /* 64 bytes from a node without compaction counters, 80 with them */
    if (rc == 0 && m.len != 64 && m.len != 80)
        rc = cfail(c, -EPROTO, "node %s: bad stats response", c->addr);
    if (rc == 0) {
        uint64_t v[10] = {0};
        for (size_t i = 0; i < m.len / 8; i++)
            v[i] = rpc_get64(m.data + 8 * i);
        /* direct_bytes is the node's own: its /metrics */
        *st = (struct node_store_stats){v[0], v[1], v[2], v[3], v[4], v[5],
                                        v[6], v[7], v[8], v[9], 0};
    }
    free(m.data);
    return rc;
}

int node_client_scrub(struct node_client *c, struct node_scrub_result *res)
{
    struct rpc_msg m = {0};
    int rc = call(c, NODE_RPC_SCRUB, NULL, 0, NULL, 0, &m);
    if (rc == 0 && m.len != 24)
        rc = cfail(c, -EPROTO, "node %s: bad scrub response", c->addr);
    if (rc == 0)
        *res = (struct node_scrub_result){rpc_get64(m.data), rpc_get64(m.data + 8),
                                          rpc_get64(m.data + 16)};
    free(m.data);
    return rc;
}

/* ---- DEG vertices ------------------------------------------------------------------------ */

struct vstate {
    struct deg_vx *x;      /* a gateway vertex, run here */
    struct node_client *c; /* a node vertex, run there */
    int handle;            /* on its node, 0 when not set up */
    char addr[128];
    uint32_t *in_qpn, *out_qpn;
};

struct run_ctx {
    const struct deg_graph *g;
    struct vstate *vs;
    deg_result_fn result;
    void *arg;
    pthread_mutex_t lock;
    int timeout_ms;
    /* per thread */
    int rc;
    char err[512];
};

struct node_job {
    struct run_ctx *ctx;
    struct node_client *c; /* RUN of all vertices on this node */
    int v;                 /* or a gateway vertex run here */
    bool started;
    int rc;
    char err[512];
};

static json_t *call_json(struct node_client *c, int type, json_t *req, int timeout_ms, int *rc)
{
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text) {
        *rc = -ENOMEM;
        return NULL;
    }
    struct rpc_msg m = {0};
    *rc = call_timeout(c, type, text, strlen(text), NULL, 0, &m, timeout_ms);
    free(text);
    json_t *j = *rc == 0 && m.len ? json_loadb((char *)m.data, m.len, 0, NULL) : NULL;
    free(m.data);
    return j;
}

static void *job_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-client");
    struct node_job *jb = arg;
    struct run_ctx *x = jb->ctx;
    if (!jb->c) {
        jb->rc = deg_vx_run(x->vs[jb->v].x, x->result, x->arg, &x->lock, jb->err, sizeof(jb->err));
        return NULL;
    }
    json_t *hs = json_array();
    for (int v = 0; v < x->g->nvertices; v++)
        if (x->vs[v].c == jb->c)
            json_array_append_new(hs, json_integer(x->vs[v].handle));
    /* The node's own bound on the run, plus room for storing the results. */
    json_decref(call_json(jb->c, NODE_RPC_VERTEX_RUN, json_pack("{s:o}", "handles", hs),
                          x->timeout_ms * 2 + 2000, &jb->rc));
    if (jb->rc)
        snprintf(jb->err, sizeof(jb->err), "%s", node_client_errmsg(jb->c));
    for (int v = 0; v < x->g->nvertices; v++)
        if (x->vs[v].c == jb->c)
            x->vs[v].handle = 0; /* the node closes a vertex once run */
    return NULL;
}

static int out_pos(const struct deg_graph *g, int from, int edge)
{
    int pos = 0;
    while (g->vertices[from].out[pos] != edge)
        pos++;
    return pos;
}

static void obj_hex(const struct node_stripe *stripe, char *obj)
{
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        snprintf(obj + 2 * i, 3, "%02x", stripe->object[i]);
}

/* Sets up every vertex: gateway ones here, node ones on their nodes
 * (persistent ones when persist), then connects every edge at both ends. */
static int setup_connect(struct run_ctx *ctx, size_t len, uint8_t *const *chunks,
                         struct node_client *const *nodes, int nnodes,
                         const struct node_stripe *stripe, const struct deg_run_opts *vo,
                         bool persist, char *err, size_t errlen)
{
    const struct deg_graph *g = ctx->g;
    int rc = 0;
    char obj[2 * NODE_OBJECT_ID_BYTES + 1];
    obj_hex(stripe, obj);
    char *gtext = deg_to_json(g);
    json_t *gjson = gtext ? json_loads(gtext, 0, NULL) : NULL;
    free(gtext);
    if (!gjson) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        struct vstate *s = &ctx->vs[v];
        s->in_qpn = calloc((size_t)vx->nin + 1, sizeof(uint32_t));
        s->out_qpn = calloc((size_t)vx->nout_edges + 1, sizeof(uint32_t));
        if (!s->in_qpn || !s->out_qpn) {
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            break;
        }
        if (vx->node == DEG_GATEWAY) {
            if ((rc = deg_vx_open(g, v, len, chunks, vo, &s->x, err, errlen)))
                break;
            snprintf(s->addr, sizeof(s->addr), "%s", deg_vx_addr(s->x));
            for (int i = 0; i < vx->nin; i++)
                s->in_qpn[i] = deg_vx_in_qpn(s->x, i);
            for (int i = 0; i < vx->nout_edges; i++)
                s->out_qpn[i] = deg_vx_out_qpn(s->x, i);
            continue;
        }
        if (vx->node < 0 || vx->node >= nnodes || !nodes[vx->node]) {
            rc = -EHOSTDOWN;
            snprintf(err, errlen, "vertex %s: node %d has no connection", vx->name, vx->node);
            break;
        }
        s->c = nodes[vx->node];
        json_t *req =
            json_pack("{s:O,s:s,s:I,s:i,s:b,s:s,s:I,s:I,s:b}", "graph", gjson, "vertex", vx->name,
                      "len", (json_int_t)len, "timeout_ms", ctx->timeout_ms, "incoherent",
                      vo->incoherent, "object", obj, "stripe", (json_int_t)stripe->stripe,
                      "version", (json_int_t)stripe->version, "persist", persist);
        json_t *ans = call_json(s->c, NODE_RPC_VERTEX_SETUP, req, s->c->timeout_ms, &rc);
        if (rc) {
            snprintf(err, errlen, "vertex %s: setup: %s", vx->name, node_client_errmsg(s->c));
            break;
        }
        s->handle = (int)json_integer_value(json_object_get(ans, "handle"));
        snprintf(s->addr, sizeof(s->addr), "%s",
                 json_string_value(json_object_get(ans, "addr")) ?: "");
        for (int i = 0; i < vx->nin; i++)
            s->in_qpn[i] =
                (uint32_t)json_integer_value(json_array_get(json_object_get(ans, "in"), (size_t)i));
        for (int i = 0; i < vx->nout_edges; i++)
            s->out_qpn[i] = (uint32_t)json_integer_value(
                json_array_get(json_object_get(ans, "out"), (size_t)i));
        json_decref(ans);
    }
    json_decref(gjson);
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        struct vstate *s = &ctx->vs[v];
        json_t *ins = json_array(), *outs = json_array();
        for (int i = 0; i < vx->nin && rc == 0; i++) {
            const struct deg_edge *e = &g->edges[vx->in[i]];
            const struct vstate *f = &ctx->vs[e->from];
            uint32_t qpn = f->out_qpn[out_pos(g, e->from, vx->in[i])];
            if (s->x)
                rc = deg_vx_connect_in(s->x, i, f->addr, qpn, err, errlen);
            json_array_append_new(ins,
                                  json_pack("{s:s,s:I}", "addr", f->addr, "qpn", (json_int_t)qpn));
        }
        for (int i = 0; i < vx->nout_edges && rc == 0; i++) {
            const struct deg_edge *e = &g->edges[vx->out[i]];
            const struct vstate *t = &ctx->vs[e->to];
            if (s->x)
                rc = deg_vx_connect_out(s->x, i, t->addr, t->in_qpn[e->slot], err, errlen);
            json_array_append_new(outs, json_pack("{s:s,s:I}", "addr", t->addr, "qpn",
                                                  (json_int_t)t->in_qpn[e->slot]));
        }
        if (rc == 0 && s->c) {
            json_decref(
                call_json(s->c, NODE_RPC_VERTEX_CONNECT,
                          json_pack("{s:i,s:o,s:o}", "handle", s->handle, "in", ins, "out", outs),
                          s->c->timeout_ms, &rc));
            if (rc)
                snprintf(err, errlen, "vertex %s: connect: %s", vx->name, node_client_errmsg(s->c));
        } else {
            json_decref(ins);
            json_decref(outs);
        }
    }
    return rc;
}

/* Closes what setup_connect set up (node vertices still set up on their nodes). */
static void teardown(struct run_ctx *ctx)
{
    for (int v = 0; ctx->vs && v < ctx->g->nvertices; v++) {
        struct vstate *s = &ctx->vs[v];
        if (s->c && s->handle) {
            int crc;
            json_decref(call_json(s->c, NODE_RPC_VERTEX_CLOSE,
                                  json_pack("{s:i}", "handle", s->handle), s->c->timeout_ms, &crc));
        }
        deg_vx_close(s->x);
        free(s->in_qpn);
        free(s->out_qpn);
    }
    free(ctx->vs);
    ctx->vs = NULL;
}

int node_deg_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                 struct node_client *const *nodes, int nnodes, const struct node_stripe *stripe,
                 const struct deg_run_opts *opts, deg_result_fn result, void *arg, char *err,
                 size_t errlen)
{
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    struct run_ctx ctx = {.g = g, .result = result, .arg = arg};
    ctx.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    struct deg_run_opts vo = {.incoherent = opts && opts->incoherent,
                              .timeout_ms = ctx.timeout_ms,
                              .options = opts ? opts->options : NULL};
    pthread_mutex_init(&ctx.lock, NULL);
    ctx.vs = calloc((size_t)g->nvertices, sizeof(*ctx.vs));
    struct node_job *jobs = calloc((size_t)g->nvertices, sizeof(*jobs));
    pthread_t *threads = calloc((size_t)g->nvertices, sizeof(*threads));
    if (!ctx.vs || !jobs || !threads) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if ((rc = setup_connect(&ctx, len, chunks, nodes, nnodes, stripe, &vo, false, err, errlen)))
        goto out;
    /* 3. run: one thread per node (all its vertices in one RUN) and per gateway vertex. */
    int njobs = 0;
    for (int v = 0; v < g->nvertices; v++) {
        struct vstate *s = &ctx.vs[v];
        bool first = true;
        for (int u = 0; u < v && s->c; u++)
            first &= ctx.vs[u].c != s->c;
        if (s->c && !first)
            continue;
        jobs[njobs] = (struct node_job){.ctx = &ctx, .c = s->c, .v = v};
        jobs[njobs].started = pthread_create(&threads[njobs], NULL, job_main, &jobs[njobs]) == 0;
        if (!jobs[njobs].started) {
            jobs[njobs].rc = -EAGAIN;
            snprintf(jobs[njobs].err, sizeof(jobs[njobs].err), "no thread for vertex %s",
                     g->vertices[v].name);
        }
        njobs++;
    }
    /* The root cause first: a failure other than a timeout (timeouts are
     * usually echoes of a failure upstream). */
    int best = 0;
    for (int i = 0; i < njobs; i++) {
        if (jobs[i].started)
            pthread_join(threads[i], NULL);
        int rank = !jobs[i].rc ? 0 : jobs[i].rc == -ETIMEDOUT ? 1 : 2;
        if (rank > best) {
            best = rank;
            rc = jobs[i].rc;
            snprintf(err, errlen, "%s", jobs[i].err);
        }
    }
out:
    teardown(&ctx);
    free(jobs);
    free(threads);
    pthread_mutex_destroy(&ctx.lock);
    return rc;
}

/* ---- persistent sessions ------------------------------------------------------------------ */

struct sess_worker {
    struct node_deg_session *s;
    int v; /* the node vertex this worker runs */
    pthread_t thread;
    bool started;
    bool late; /* left running by the last run (a quorum's): rc and err are its own */
    int rc;    /* of its last RUN (s->lock) */
    char err[512];
};

struct node_deg_session {
    struct deg_graph *g;
    struct run_ctx ctx;
    int gv; /* the gateway vertex */
    int nworkers;
    struct sess_worker *w;
    pthread_mutex_t lock;
    /* Two conditions, so a worker's answer wakes the run's waiter alone, not
     * every idle worker too (each rechecking gen and sleeping again: up to
     * 8 wake-ups for each of 9 answers of an RS(6,3) stripe). */
    pthread_cond_t go; /* to the workers: a run started (gen), or stop */
    pthread_cond_t cv; /* to the run: a worker answered (pending) */
    uint64_t gen;
    int pending;
    bool stop, broken;
    bool unsettled; /* a decode returned before its workers' answers */
    bool refused;   /* the last run did not start: no sink stored */
    /* the run in progress */
    char *run_head; /* JSON of the per-run fields, without the handles */
    int *chunk_of;  /* per vertex: the chunk its result is stored as */
};

/* Whether g fits a session: one gateway vertex, and every other vertex on
 * a node of its own, either (encode) a sink of one input from the gateway,
 * the only source, or (decode) a source sending its one chunk to the
 * gateway, the only sink (RS and LRC decodes). */
static bool fits(const struct deg_graph *g, bool decode)
{
    int gw = 0;
    bool seen[CODEC_MAX_CHUNKS * 4] = {false};
    for (int v = 0; v < g->nvertices; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        if (vx->node == DEG_GATEWAY) {
            gw++;
            if (decode ? vx->nout_edges || vx->nlocal || !vx->nresults : vx->nin || vx->nresults)
                return false;
            continue;
        }
        if (vx->node < 0 || vx->node >= (int)sizeof(seen) || seen[vx->node])
            return false;
        bool ok = decode ? !vx->nin && vx->nlocal == 1 && vx->nout_edges == 1 && !vx->nrows &&
                               !vx->nresults && g->edges[vx->out[0]].src.kind == DEG_LOCAL &&
                               g->vertices[g->edges[vx->out[0]].to].node == DEG_GATEWAY
                         : vx->nin == 1 && !vx->nout_edges && !vx->nlocal && vx->nresults == 1 &&
                               g->vertices[g->edges[vx->in[0]].from].node == DEG_GATEWAY;
        if (!ok)
            return false;
        seen[vx->node] = true;
    }
    return gw == 1;
}

bool node_deg_session_fits(const struct deg_graph *g)
{
    return fits(g, false) || fits(g, true);
}

static void *sess_main(void *p)
{
    pthread_setname_np(pthread_self(), "sess-vertex");
    struct sess_worker *w = p;
    struct node_deg_session *s = w->s;
    struct vstate *vs = &s->ctx.vs[w->v];
    uint64_t seen = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stop && s->gen == seen)
            pthread_cond_wait(&s->go, &s->lock);
        if (s->stop)
            break;
        seen = s->gen;
        pthread_mutex_unlock(&s->lock);
        json_t *req = json_loads(s->run_head, 0, NULL);
        int rc = req ? 0 : -ENOMEM;
        if (req) {
            json_object_set_new(req, "handles", json_pack("[i]", vs->handle));
            json_object_set_new(req, "chunks", json_pack("[i]", s->chunk_of[w->v]));
            json_decref(
                call_json(vs->c, NODE_RPC_VERTEX_RUN, req, s->ctx.timeout_ms * 2 + 2000, &rc));
        }
        if (rc)
            snprintf(w->err, sizeof(w->err), "vertex %s: %s", s->g->vertices[w->v].name,
                     node_client_errmsg(vs->c));
        pthread_mutex_lock(&s->lock);
        w->rc = rc; /* under the lock: a run waiting for a quorum reads it */
        s->pending--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void node_deg_session_close(struct node_deg_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->nworkers; i++)
        if (s->w[i].started)
            pthread_join(s->w[i].thread, NULL);
    free(s->run_head);
    if (s->ctx.vs)
        teardown(&s->ctx);
    pthread_mutex_destroy(&s->ctx.lock);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->cv);
    deg_graph_destroy(s->g);
    free(s->w);
    free(s->chunk_of);
    free(s);
}

int node_deg_session_open(const struct deg_graph *g, size_t len, struct node_client *const *nodes,
                          int nnodes, const struct deg_run_opts *opts,
                          struct node_deg_session **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    if (!node_deg_session_fits(g)) {
        snprintf(err, errlen, "graph %s: neither a gateway source with node sinks nor the reverse",
                 g->desc);
        return -EINVAL;
    }
    struct node_deg_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->ctx.lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->go, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* The session keeps its own copy: the caller's graph is per stripe. */
    char *text = deg_to_json(g);
    if (text)
        rc = deg_from_json(text, &s->g, err, errlen);
    free(text);
    if (!text || rc) {
        node_deg_session_close(s);
        return rc ? rc : -ENOMEM;
    }
    s->ctx.g = s->g;
    s->ctx.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    s->ctx.vs = calloc((size_t)g->nvertices, sizeof(*s->ctx.vs));
    s->w = calloc((size_t)g->nvertices, sizeof(*s->w));
    s->chunk_of = calloc((size_t)g->nvertices, sizeof(int));
    if (!s->ctx.vs || !s->w || !s->chunk_of) {
        node_deg_session_close(s);
        return -ENOMEM;
    }
    struct deg_run_opts vo = {.incoherent = opts && opts->incoherent,
                              .timeout_ms = s->ctx.timeout_ms,
                              .options = opts ? opts->options : NULL};
    struct node_stripe none = {0};
    rc = setup_connect(&s->ctx, len, NULL, nodes, nnodes, &none, &vo, true, err, errlen);
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        if (g->vertices[v].node == DEG_GATEWAY) {
            s->gv = v;
            continue;
        }
        s->chunk_of[v] = g->vertices[v].nlocal ? g->vertices[v].local[0] : -1;
        struct sess_worker *w = &s->w[s->nworkers];
        *w = (struct sess_worker){.s = s, .v = v};
        if ((rc = -pthread_create(&w->thread, NULL, sess_main, w)))
            snprintf(err, errlen, "no thread for vertex %s", g->vertices[v].name);
        w->started = rc == 0;
        s->nworkers += rc == 0;
    }
    if (rc) {
        node_deg_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int node_deg_session_sink_rc(const struct node_deg_session *s, int node)
{
    for (int i = 0; i < s->nworkers; i++)
        if (s->g->vertices[s->w[i].v].node == node)
            return s->w[i].late ? -EINPROGRESS : s->refused ? -EIO : s->w[i].rc;
    return -ENOENT;
}

static int run_all(struct node_deg_session *s, size_t len, const struct node_stripe *stripe,
                   deg_result_fn result, void *arg, bool early, const struct node_deg_quorum *q,
                   char *err, size_t errlen);

/* Waits for the workers of a run that returned before them: one that
 * failed there breaks the session (its node dropped its vertex). */
static bool settle(struct node_deg_session *s, char *err, size_t errlen)
{
    if (!s->unsettled)
        return false;
    pthread_mutex_lock(&s->lock);
    while (s->pending > 0)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    s->unsettled = false;
    for (int i = 0; i < s->nworkers && !s->broken; i++)
        if (s->w[i].rc) {
            s->broken = true;
            snprintf(err, errlen, "%s", s->w[i].err);
            return true;
        }
    return false;
}

int node_deg_session_run(struct node_deg_session *s, const struct deg_graph *g, size_t len,
                         uint8_t *const *chunks, const struct node_stripe *stripe,
                         const struct node_deg_quorum *quorum, char *err, size_t errlen)
{
    bool failed = settle(s, err, errlen);
    s->refused = true; /* until a run starts: nothing stored */
    if (s->broken) {
        if (!failed)
            snprintf(err, errlen, "an earlier run of this session failed");
        return -EIO;
    }
    /* g's vertex on node N is the session's vertex on N; the gateway's
     * out-edge to N goes over the session's connection to N. */
    const struct deg_vertex *sgv = &s->g->vertices[s->gv], *ggv = NULL;
    bool same = node_deg_session_fits(g) && g->nvertices == s->g->nvertices;
    for (int v = 0; same && v < g->nvertices; v++)
        if (g->vertices[v].node == DEG_GATEWAY)
            ggv = &g->vertices[v];
    same = same && ggv && ggv->nlocal == sgv->nlocal && ggv->nrows == sgv->nrows &&
           ggv->nout_edges == sgv->nout_edges &&
           !memcmp(ggv->local, sgv->local, (size_t)sgv->nlocal * sizeof(int)) &&
           (!sgv->nrows || !memcmp(ggv->coeffs, sgv->coeffs,
                                   (size_t)sgv->nrows * (size_t)(sgv->nlocal + sgv->nin)));
    int route[CODEC_MAX_CHUNKS * 4];
    same = same && sgv->nout_edges <= (int)(sizeof(route) / sizeof(route[0]));
    for (int e = 0; same && e < ggv->nout_edges; e++) {
        const struct deg_edge *ed = &g->edges[ggv->out[e]];
        int node = g->vertices[ed->to].node, q = 0;
        while (q < sgv->nout_edges && s->g->vertices[s->g->edges[sgv->out[q]].to].node != node)
            q++;
        /* Out-edge e sends the session's edge e's value, over route[e]. */
        const struct deg_edge *sed = &s->g->edges[sgv->out[e]];
        same =
            q < sgv->nout_edges && ed->src.kind == sed->src.kind && ed->src.index == sed->src.index;
        if (!same)
            break;
        route[e] = q;
        struct deg_label label;
        deg_value_label(g, ed->from, ed->src, &label);
        s->chunk_of[s->g->edges[sgv->out[q]].to] = label.chunk;
    }
    if (!same) {
        snprintf(err, errlen, "graph %s does not match the session's %s", g->desc, s->g->desc);
        return -EINVAL;
    }
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    int rc = deg_vx_rebind(x, len, chunks, err, errlen);
    if (rc == 0)
        rc = deg_vx_route_out(x, route);
    if (rc)
        return rc;
    return run_all(s, len, stripe, NULL, NULL, false, quorum, err, errlen);
}

/* An encode's grace: once its quorum (q) stored their chunks, the others
 * have as long again as that took, at least q->grace_min_ms. */
struct grace {
    const struct node_deg_quorum *q;
    struct node_deg_session *s;
    int64_t started_ms, until_ms; /* -1 until the quorum */
};

/* s->lock held: when the grace ends, or -1 while there is no quorum. */
static int64_t grace_until(struct grace *g)
{
    if (g->until_ms < 0 && g->q->enough(g->q->arg, g->s)) {
        int64_t now = now_ms(), took = now - g->started_ms;
        g->until_ms = now + (took > g->q->grace_min_ms ? took : g->q->grace_min_ms);
    }
    return g->until_ms;
}

/* The gateway vertex's give-up (deg_vx_set_give_up): a sink whose
 * transport does not take its chunk (a frozen process) holds the run no
 * longer than the grace, as a sink that does not answer does. */
static bool grace_over(void *arg)
{
    struct grace *g = arg;
    pthread_mutex_lock(&g->s->lock);
    int64_t until = grace_until(g);
    pthread_mutex_unlock(&g->s->lock);
    return until >= 0 && now_ms() >= until;
}

/* Until every worker answered, or (g) the grace after a quorum of them
 * has passed: the others are then left running (s->lock held). */
static void wait_workers(struct node_deg_session *s, struct grace *g)
{
    while (s->pending > 0) {
        int64_t until = g ? grace_until(g) : -1;
        if (until < 0) {
            pthread_cond_wait(&s->cv, &s->lock);
            continue;
        }
        int64_t left = until - now_ms();
        if (left <= 0)
            break;
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += left / 1000;
        t.tv_nsec += (left % 1000) * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->lock, &t);
    }
}

/* One run of every vertex: the node ones by their workers' RUN messages,
 * the gateway's here. early: back as soon as the gateway's vertex is done
 * (a decode: it has every input then, so every source sent, and the RUN
 * answers are waited for by the next run, settle()). q: an encode's quorum
 * (node_deg_session_run). */
static int run_all(struct node_deg_session *s, size_t len, const struct node_stripe *stripe,
                   deg_result_fn result, void *arg, bool early, const struct node_deg_quorum *q,
                   char *err, size_t errlen)
{
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    int rc;
    int64_t started = now_ms();
    char obj[2 * NODE_OBJECT_ID_BYTES + 1];
    obj_hex(stripe, obj);
    json_t *head = json_pack("{s:I,s:s,s:I,s:I}", "len", (json_int_t)len, "object", obj, "stripe",
                             (json_int_t)stripe->stripe, "version", (json_int_t)stripe->version);
    s->run_head = head ? json_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    if (!s->run_head)
        return -ENOMEM;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->nworkers; i++) /* nothing stored until a worker says so */
        s->w[i].rc = -EINPROGRESS;
    s->refused = false;
    s->pending = s->nworkers;
    s->gen++;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    char gerr[512] = "";
    struct grace gr = {q, s, started, -1};
    if (q)
        deg_vx_set_give_up(x, grace_over, &gr);
    int grc = deg_vx_run(x, result, arg, NULL, gerr, sizeof(gerr));
    deg_vx_set_give_up(x, NULL, NULL);
    /* Given up after the grace: the quorum stored its chunks, the sinks
     * still out are late, and the vertex's connections to them are closed. */
    bool gave_up = grc == -EINPROGRESS;
    if (gave_up)
        grc = 0;
    if (grc == 0 && q && q->sent)
        q->sent(q->sent_arg);
    if (early && grc == 0) {
        /* Every worker read run_head before its source could send. */
        free(s->run_head);
        s->run_head = NULL;
        s->unsettled = true;
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    /* Every worker's call is bounded, so this wait is too. */
    wait_workers(s, grc || !q ? NULL : &gr);
    bool late = s->pending > 0;
    for (int i = 0; i < s->nworkers; i++)
        s->w[i].late = s->w[i].rc == -EINPROGRESS;
    pthread_mutex_unlock(&s->lock);
    if (late) { /* the workers left running still read run_head: freed at close */
        s->broken = true;
        return 0;
    }
    free(s->run_head);
    s->run_head = NULL;
    /* The root cause first: a failure other than a timeout. */
    int best = grc ? (grc == -ETIMEDOUT ? 1 : 2) : 0;
    rc = grc;
    if (grc)
        snprintf(err, errlen, "%s", gerr);
    for (int i = 0; i < s->nworkers; i++) {
        int r = s->w[i].rc, rank = !r ? 0 : r == -ETIMEDOUT ? 1 : 2;
        if (rank > best) {
            best = rank;
            rc = r;
            snprintf(err, errlen, "%s", s->w[i].err);
        }
    }
    s->broken = rc != 0 || gave_up; /* given up, its vertex cannot run again */
    return rc;
}

int node_deg_session_decode(struct node_deg_session *s, const struct deg_graph *g,
                            const int *node_of, size_t len, const struct node_stripe *stripe,
                            deg_result_fn result, void *arg, char *err, size_t errlen)
{
    bool failed = settle(s, err, errlen);
    s->refused = true;
    if (s->broken) {
        if (!failed)
            snprintf(err, errlen, "an earlier run of this session failed");
        return -EIO;
    }
    /* g's source on node N is the session's source on N, reading g's chunk;
     * the gateway's input from N is the session's input slot from N, so the
     * coefficients of g's slot go to that slot. */
    struct deg_vertex *sgv = &s->g->vertices[s->gv];
    const struct deg_vertex *ggv = NULL;
    bool same = fits(s->g, true) && fits(g, true) && g->nvertices == s->g->nvertices;
    for (int v = 0; same && v < g->nvertices; v++)
        if (g->vertices[v].node == DEG_GATEWAY)
            ggv = &g->vertices[v];
    same = same && ggv && ggv->nin == sgv->nin && ggv->nrows == sgv->nrows &&
           ggv->nresults == sgv->nresults && deg_vertex_calc(ggv) == deg_vertex_calc(sgv) &&
           !memcmp(ggv->results, sgv->results, (size_t)sgv->nresults * sizeof(*sgv->results));
    int perm[CODEC_MAX_CHUNKS * 4];
    same = same && sgv->nin <= (int)(sizeof(perm) / sizeof(perm[0]));
    for (int q = 0; same && q < sgv->nin; q++) {
        int sv = s->g->edges[sgv->in[q]].from, i = 0, node = -1;
        for (; i < ggv->nin; i++) {
            const struct deg_vertex *u = &g->vertices[g->edges[ggv->in[i]].from];
            node = node_of ? node_of[u->node] : u->node;
            if (node == s->g->vertices[sv].node)
                break;
        }
        if (!(same = i < ggv->nin))
            break;
        perm[q] = i;
        /* The session's graph says what its source sends this run: the
         * labels of the gateway's results that are its inputs. */
        s->chunk_of[sv] = s->g->vertices[sv].local[0] =
            g->vertices[g->edges[ggv->in[i]].from].local[0];
    }
    if (!same) {
        snprintf(err, errlen, "graph %s does not match the session's %s", g->desc, s->g->desc);
        return -EINVAL;
    }
    int ncols = sgv->nin;
    for (int r = 0; r < sgv->nrows; r++) {
        for (int q = 0; q < ncols; q++)
            sgv->coeffs[r * ncols + q] = ggv->coeffs[r * ncols + perm[q]];
        sgv->labels[r] = ggv->labels[r];
    }
    struct deg_vx *x = s->ctx.vs[s->gv].x;
    deg_vx_retable(x);
    int rc = deg_vx_rebind(x, len, NULL, err, errlen);
    if (rc)
        return rc;
    return run_all(s, len, stripe, result, arg, true, NULL, err, errlen);
}
