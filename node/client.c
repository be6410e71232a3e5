/*
 * The client side of the node RPCs: connecting (through the node's
 * connection manager, or to an in-process node) and calls. The calls
 * themselves are in client_store.c (chunks, metadata, node state) and
 * client_deg.c (DEG vertices run on their nodes).
 *
 * One call at a time per client (its lock): send the request, then poll the
 * client's own CQ until the response with this request id is there and the
 * request's sends have completed (so the caller may free its data), or the
 * deadline passes. A timeout or a broken QP closes the endpoint (the engine
 * then touches none of the caller's buffers); the next call reconnects.
 */
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
#include "node/client_internal.h"
#include "node/rpc.h"

#define DEFAULT_TIMEOUT 5000

int node_client_fail(struct node_client *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return rc;
}

/* The connection manager exchange over TCP (see service_cm.c). */
static int cm_exchange(struct node_client *c, uint32_t qpn, char *peer, size_t peerlen,
                       uint32_t *peer_qpn)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    int rc = inec_hostport_resolve(c->addr, false, &sa, &sl);
    if (rc == -EINVAL)
        return node_client_fail(
            c, rc, "node address '%s' is not HOST:PORT (an IPv6 HOST in brackets)", c->addr);
    if (rc)
        return node_client_fail(c, rc, "cannot resolve %s", c->addr);
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
        return node_client_fail(c, rc, "cannot connect to node %s: %s", c->addr, strerror(-rc));
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
        return node_client_fail(c, rc == -EACCES || rc == -EPROTO ? -EACCES : rc, "node %s: %s",
                                c->addr, aerr);
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
        return node_client_fail(c, rc, "node %s: connection setup: %s", c->addr, strerror(-rc));
    line[got] = 0;
    json_t *j = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    const char *a = json_string_value(json_object_get(j, "addr"));
    if (!a) {
        int e = (int)json_integer_value(json_object_get(j, "errno"));
        json_decref(j);
        return node_client_fail(c, e > 0 ? -e : -EPROTO, "node %s refused the connection: %s",
                                c->addr, e > 0 ? strerror(e) : "bad answer");
    }
    /* The node's device, at the host we reached the node on (the map's):
     * only its port comes from the answer. */
    const char *port = strrchr(a, ':');
    if (strncmp(a, "tcp:", 4) != 0 || !port) {
        json_decref(j);
        return node_client_fail(c, -EPROTO, "node %s answered a bad device address", c->addr);
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
        return node_client_fail(c, rc, "rpc endpoint: %s", inec_errmsg());
    uint32_t qpn = rpc_ep_qpn(c->ep);
    if (c->local) {
        rc = node_service_accept(c->local, inec_device_addr(c->dev), qpn, &peer_qpn, &local_addr);
        if (rc)
            node_client_fail(c, rc, "in-process node refused the connection: %s", strerror(-rc));
        else
            snprintf(peer, sizeof(peer), "%s", local_addr);
    } else {
        rc = cm_exchange(c, qpn, peer, sizeof(peer), &peer_qpn);
    }
    if (rc == 0 && (rc = rpc_ep_connect(c->ep, peer, peer_qpn)))
        node_client_fail(c, rc, "connecting to node %s: %s", c->addr, inec_errmsg());
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

int node_call_start(struct node_client *c, int type, const void *head, size_t hlen,
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
            rc = node_client_fail(c, -EHOSTDOWN, "connection to node %s is broken", c->addr);
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
        return node_client_fail(c, rc, "request to node %s: %s", c->addr, strerror(-rc));
    }
    k->req_id = h.req_id;
    k->deadline = node_now_ms() + timeout_ms;
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
 * Send completions have a CQ of their own, polled here rather than slept
 * on: on tcp the node acknowledges the request well before it answers, and
 * that would wake this thread once more per RPC. A connection that fails
 * flushes the receives too, so the wait for an answer learns of it.
 */
bool node_call_step(struct node_call *k, bool block)
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
                rc = node_client_fail(c, -EHOSTDOWN, "connection to node %s broke", c->addr);
        if (rc || (k->got && call_cq(k) == c->cq))
            break;
        int64_t left = k->deadline - node_now_ms();
        struct inec_cq *q = call_cq(k);
        n = block && left > 0 ? inec_cq_wait(q, 16, wc, (int)left) : inec_poll_cq(q, 16, wc);
        if (n < 0 || (n == 0 && left <= 0)) {
            rc = node_client_fail(c, -ETIMEDOUT, "node %s did not answer within %d ms", c->addr,
                                  k->timeout_ms);
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
                rc = node_client_fail(c, -EHOSTDOWN, "connection to node %s broke", c->addr);
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
        node_client_fail(c, k->rc, "node %s: %.*s", c->addr, (int)k->len, (char *)k->data);
    else if (k->rc < 0)
        node_client_fail(c, k->rc, "node %s: %s", c->addr, strerror(-k->rc));
    k->done = true;
    client_release(c);
    return true;
}

bool node_call_poll(struct node_call *k)
{
    return node_call_step(k, false);
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
    int64_t left = until - node_now_ms();
    if (timeout_ms >= 0 && timeout_ms < left)
        left = timeout_ms;
    int rc = inec_cq_wait_any(cqs, m, left > 0 ? (int)left : 0);
    return rc == -ETIMEDOUT ? 0 : rc < 0 ? rc : 0;
}

int node_call_timeout(struct node_client *c, int type, const void *head, size_t hlen,
                      const void *data, size_t dlen, struct rpc_msg *resp, int timeout_ms)
{
    struct node_call k;
    int rc = node_call_start(c, type, head, hlen, data, dlen, timeout_ms, true, &k);
    if (rc)
        return rc;
    node_call_step(&k, true);
    if (k.got)
        *resp = (struct rpc_msg){.type = (uint16_t)type,
                                 .flags = RPC_F_RESPONSE,
                                 .req_id = k.req_id,
                                 .status = k.rc,
                                 .data = k.data,
                                 .len = k.len};
    return k.rc;
}

int node_call(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
              size_t dlen, struct rpc_msg *resp)
{
    return node_call_timeout(c, type, head, hlen, data, dlen, resp, c->timeout_ms);
}

int node_call0(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
               size_t dlen)
{
    struct rpc_msg m = {0};
    int rc = node_call(c, type, head, hlen, data, dlen, &m);
    free(m.data);
    return rc;
}
