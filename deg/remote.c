/*
 * Vertices in other processes. A participant (deg_serve) accepts control
 * connections, one per vertex, each served by a thread:
 *
 *   runner -> participant  {"op":"setup","graph":{...},"vertex":"c3","len":N,
 *                           "incoherent":false,"timeout_ms":T}, then one
 *                           frame per local chunk (len bytes each)
 *   participant -> runner  {"addr":"tcp:H:P","in":[qpn...],"out":[qpn...]}
 *   runner -> participant  {"op":"connect","in":[{"addr":..,"qpn":..}...],"out":[...]}
 *   participant -> runner  {"ok":true}
 *   runner -> participant  {"op":"run"}
 *   participant -> runner  {"ok":true,"results":[{"chunk":c,"partial":b}...]},
 *                           then one frame per result (len bytes each)
 *   the runner hangs up once every vertex has answered; only then does a
 *   participant close its vertex's QPs
 * Any step may instead answer {"error":"..."}. Frames are a 4-byte
 * big-endian length and the bytes. The data itself moves between the
 * participants' inec devices (transport=tcp), never over this channel.
 *
 * Every socket has send and receive timeouts, so a participant that dies or
 * hangs turns into an error naming its vertex, never a hang. Each control
 * connection starts with the mutual HMAC handshake of inec/auth.h (ctx "deg")
 * under the cluster secret, and the participants' devices use it too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "deg/deg.h"
#include "codecs/errf.h"
#include "inec/auth.h"
#include "inec/hostport.h"
#include "inec/log.h"

#define MAX_FRAME ((uint32_t)1 << 30)

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? -ETIMEDOUT : -EPIPE;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -EPIPE;
        if (r == 0)
            return -EPIPE;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int send_frame(int fd, const void *p, size_t n)
{
    uint32_t len = htonl((uint32_t)n);
    int rc = write_all(fd, &len, 4);
    return rc ? rc : write_all(fd, p, n);
}

/* A frame of exactly `want` bytes into buf. */
static int recv_bytes(int fd, void *buf, size_t want)
{
    uint32_t len;
    int rc = read_all(fd, &len, 4);
    if (rc)
        return rc;
    if (ntohl(len) != want)
        return -EPROTO;
    return read_all(fd, buf, want);
}

static int send_json(int fd, json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!text)
        return -ENOMEM;
    int rc = send_frame(fd, text, strlen(text));
    free(text);
    return rc;
}

static int recv_json(int fd, json_t **out)
{
    uint32_t len;
    int rc = read_all(fd, &len, 4);
    if (rc)
        return rc;
    len = ntohl(len);
    if (len > MAX_FRAME)
        return -EPROTO;
    char *text = malloc((size_t)len + 1);
    if (!text)
        return -ENOMEM;
    rc = read_all(fd, text, len);
    text[len] = 0;
    *out = rc ? NULL : json_loads(text, 0, NULL);
    free(text);
    return rc ? rc : *out ? 0 : -EPROTO;
}

static void set_timeouts(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int dial(const char *addr, int timeout_ms)
{
    char host[256], port[16];
    if (inec_hostport_split(addr, host, sizeof(host), port, sizeof(port)))
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, port, &hints, &res))
        return -EHOSTUNREACH;
    int fd = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        set_timeouts(s, timeout_ms); /* SO_SNDTIMEO bounds connect() too */
        if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
            fd = s;
            break;
        }
        close(s);
    }
    freeaddrinfo(res);
    return fd;
}

/* ---- the participant ------------------------------------------------------ */

struct session {
    int fd;
    char host[256], bound[300], from[64];
    const char *secret; /* NULL: this process's random secret */
};

static json_t *error_msg(const char *text, int rc)
{
    return json_pack("{s:s,s:i}", "error", text, "errno", -rc);
}

static int serve_vertex(struct session *s, char *err, size_t errlen)
{
    json_t *msg = NULL;
    struct deg_graph *g = NULL;
    struct deg_vx *x = NULL;
    uint8_t *chunks[CODEC_MAX_CHUNKS] = {0};
    int rc = recv_json(s->fd, &msg);
    if (rc == -EPIPE)
        return 0; /* the runner hung up: nothing to serve */
    if (rc)
        return codec_errf(err, errlen, rc, "setup: %s", strerror(-rc));
    char vname[DEG_NAME_MAX] = "?";
    const char *name = json_string_value(json_object_get(msg, "vertex"));
    if (name)
        snprintf(vname, sizeof(vname), "%s", name);
    json_int_t len = json_integer_value(json_object_get(msg, "len"));
    struct deg_run_opts opts = {
        .incoherent = json_is_true(json_object_get(msg, "incoherent")),
        .timeout_ms = (int)json_integer_value(json_object_get(msg, "timeout_ms")),
    };
    char options[640], listen[300];
    inec_hostport_join(s->host, 0, listen, sizeof(listen));
    snprintf(options, sizeof(options), "transport=tcp,listen=%s,timeout_ms=%d%s%s", listen,
             opts.timeout_ms > 0 ? opts.timeout_ms : 10000, s->secret ? ",secret=" : "",
             s->secret ? s->secret : "");
    opts.options = options;
    char *gtext = json_dumps(json_object_get(msg, "graph"), JSON_COMPACT);
    if (!name || len <= 0 || len > MAX_FRAME || !gtext) {
        rc = codec_errf(err, errlen, -EPROTO, "setup: needs graph, vertex and len");
        free(gtext);
        goto out;
    }
    rc = deg_from_json(gtext, &g, err, errlen);
    free(gtext);
    if (rc)
        goto out;
    int v = deg_find_vertex(g, vname);
    if (v < 0) {
        rc = codec_errf(err, errlen, -ENOENT, "setup: the graph has no vertex %s", vname);
        goto out;
    }
    const struct deg_vertex *vx = &g->vertices[v];
    for (int i = 0; i < vx->nlocal && rc == 0; i++) {
        int c = vx->local[i];
        if (chunks[c])
            continue;
        if (!(chunks[c] = malloc((size_t)len)))
            rc = -ENOMEM;
        else if ((rc = recv_bytes(s->fd, chunks[c], (size_t)len)))
            codec_errf(err, errlen, rc, "vertex %s: receiving local chunk %d failed", vname, c);
    }
    if (rc == 0)
        rc = deg_vx_open(g, v, (size_t)len, chunks, &opts, &x, err, errlen);
    if (rc)
        goto out;
    json_t *ins = json_array(), *outs = json_array();
    for (int j = 0; j < vx->nin; j++)
        json_array_append_new(ins, json_integer(deg_vx_in_qpn(x, j)));
    for (int j = 0; j < vx->nout_edges; j++)
        json_array_append_new(outs, json_integer(deg_vx_out_qpn(x, j)));
    if ((rc = send_json(
             s->fd, json_pack("{s:s,s:o,s:o}", "addr", deg_vx_addr(x), "in", ins, "out", outs))))
        goto out_quiet;
    json_decref(msg);
    msg = NULL;
    if ((rc = recv_json(s->fd, &msg)))
        goto out_quiet;
    for (int j = 0; j < vx->nin && rc == 0; j++) {
        json_t *p = json_array_get(json_object_get(msg, "in"), (size_t)j);
        const char *addr = json_string_value(json_object_get(p, "addr"));
        if (json_is_null(json_object_get(p, "addr")))
            continue; /* that peer failed: the run will name this edge */
        rc = addr ? deg_vx_connect_in(x, j, addr,
                                      (uint32_t)json_integer_value(json_object_get(p, "qpn")), err,
                                      errlen)
                  : codec_errf(err, errlen, -EPROTO, "connect: no peer for input %d", j);
    }
    for (int j = 0; j < vx->nout_edges && rc == 0; j++) {
        json_t *p = json_array_get(json_object_get(msg, "out"), (size_t)j);
        const char *addr = json_string_value(json_object_get(p, "addr"));
        if (json_is_null(json_object_get(p, "addr")))
            continue;
        rc = addr ? deg_vx_connect_out(x, j, addr,
                                       (uint32_t)json_integer_value(json_object_get(p, "qpn")), err,
                                       errlen)
                  : codec_errf(err, errlen, -EPROTO, "connect: no peer for output %d", j);
    }
    if (rc)
        goto out;
    if ((rc = send_json(s->fd, json_pack("{s:b}", "ok", 1))))
        goto out_quiet;
    json_decref(msg);
    msg = NULL;
    if ((rc = recv_json(s->fd, &msg)))
        goto out_quiet;
    struct deg_results got = {0};
    if ((rc = deg_vx_run(x, deg_collect, &got, NULL, err, errlen)))
        goto out;
    json_t *res = json_array();
    for (int i = 0; i < got.n; i++)
        json_array_append_new(res, json_pack("{s:i,s:b}", "chunk", got.labels[i].chunk, "partial",
                                             got.labels[i].partial));
    rc = send_json(s->fd, json_pack("{s:b,s:o}", "ok", 1, "results", res));
    for (int i = 0; i < got.n && rc == 0; i++)
        rc = send_frame(s->fd, got.data[i], (size_t)len);
    goto out_quiet;
out:
    inec_log(INEC_LOG_WARN, "deg", "serve failed vertex=%s err=\"%s\"", vname, err);
    send_json(s->fd, error_msg(err, rc));
out_quiet:
    /* Keep the vertex (its QPs) until the runner hangs up: a peer may still
     * be waiting for the acknowledgement of what it sent here, and closing a
     * QP fails the peer's outstanding requests. */
    if (x) {
        json_t *bye = NULL;
        recv_json(s->fd, &bye);
        json_decref(bye);
    }
    deg_vx_close(x);
    deg_graph_destroy(g);
    for (int i = 0; i < CODEC_MAX_CHUNKS; i++)
        free(chunks[i]);
    json_decref(msg);
    return rc;
}

static void *session_main(void *p)
{
    pthread_setname_np(pthread_self(), "deg-session");
    struct session *s = p;
    char err[512] = "";
    struct inec_keyring kr;
    int rc = inec_keyring_get(s->secret, &kr, err, sizeof(err));
    if (!rc)
        rc = inec_auth_respond(s->fd, &kr, "deg", s->bound, "participant", NULL, 10000, err,
                               sizeof(err));
    inec_keyring_clear(&kr);
    if (rc)
        inec_log(INEC_LOG_WARN, "deg", "connection refused from=%s why=%s", s->from, err);
    else
        serve_vertex(s, err, sizeof(err));
    close(s->fd);
    free(s);
    return NULL;
}

int deg_serve(const char *listen_addr, const char *secret_file,
              void (*ready)(void *arg, const char *addr), void *arg, char *err, size_t errlen)
{
    char bound[300], host[256], port[8];
    int fd = inec_tcp_listen_bound(listen_addr, 64, bound, sizeof(bound), err, errlen);
    if (fd < 0)
        return fd;
    inec_hostport_split(bound, host, sizeof(host), port, sizeof(port));
    if (ready)
        ready(arg, bound);
    for (;;) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        int c = accept4(fd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            int e = errno;
            close(fd);
            return codec_errf(err, errlen, -e, "accept: %s", strerror(e));
        }
        struct session *s = calloc(1, sizeof(*s));
        pthread_t t;
        if (!s) {
            close(c);
            continue;
        }
        s->fd = c;
        s->secret = secret_file;
        snprintf(s->host, sizeof(s->host), "%s", host);
        snprintf(s->bound, sizeof(s->bound), "%s", bound);
        inec_sockaddr_str((struct sockaddr *)&from, false, s->from, sizeof(s->from));
        /* A runner that goes silent between messages costs a session at
         * most this long. */
        set_timeouts(c, 60000);
        if (pthread_create(&t, NULL, session_main, s)) {
            close(c);
            free(s);
            continue;
        }
        pthread_detach(t);
    }
}

/* ---- the runner side -------------------------------------------------------- */

struct remote_vx {
    int fd;
    const char *peer;
    char addr[128];
    uint32_t *in_qpn, *out_qpn;
    char err[512];
    int rc;
    bool reported; /* rc came from the participant, not from losing it */
};

static const char *peer_of(const struct deg_peers *peers, int node)
{
    if (node == DEG_GATEWAY)
        return peers->gateway;
    return node < peers->nnodes ? peers->nodes[node] : NULL;
}

/* Reads a reply; an {"error":...} reply or a broken connection becomes rv->rc. */
static json_t *reply(struct remote_vx *rv, const struct deg_vertex *v, const char *step)
{
    json_t *msg = NULL;
    if (rv->rc)
        return NULL;
    int rc = recv_json(rv->fd, &msg);
    if (rc) {
        rv->rc = codec_errf(rv->err, sizeof(rv->err), rc == -ETIMEDOUT ? rc : -EPIPE,
                            "vertex %s: participant %s %s during %s", v->name, rv->peer,
                            rc == -ETIMEDOUT ? "did not answer in time" : "went away", step);
        return NULL;
    }
    const char *e = json_string_value(json_object_get(msg, "error"));
    if (e) {
        /* The participant's message names vertex and edge; keep its errno
         * class coarse: timeouts are echoes of failures elsewhere. */
        int no = (int)json_integer_value(json_object_get(msg, "errno"));
        rv->rc = no > 0 ? -no : -EIO;
        rv->reported = true;
        codec_errf(rv->err, sizeof(rv->err), rv->rc, "%s (participant %s)", e, rv->peer);
        json_decref(msg);
        return NULL;
    }
    return msg;
}

int deg_remote_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                   const struct deg_peers *peers, const struct deg_run_opts *opts,
                   deg_result_fn result, void *arg, char *err, size_t errlen)
{
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    int timeout = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    struct remote_vx *rv = calloc((size_t)g->nvertices, sizeof(*rv));
    char *gtext = deg_to_json(g);
    json_t *gjson = gtext ? json_loads(gtext, 0, NULL) : NULL;
    free(gtext);
    uint8_t *buf = malloc(len);
    if (!rv || !gjson || !buf) {
        free(rv);
        free(buf);
        json_decref(gjson);
        return -ENOMEM;
    }
    for (int v = 0; v < g->nvertices; v++)
        rv[v].fd = -1;
    /* 1. setup: every vertex to its participant, with its local chunks. */
    for (int v = 0; v < g->nvertices; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        struct remote_vx *r = &rv[v];
        r->peer = peer_of(peers, vx->node);
        r->in_qpn = calloc((size_t)vx->nin + 1, sizeof(uint32_t));
        r->out_qpn = calloc((size_t)vx->nout_edges + 1, sizeof(uint32_t));
        if (!r->peer) {
            r->rc = codec_errf(r->err, sizeof(r->err), -EINVAL, "vertex %s: no address for its %s",
                               vx->name, vx->node == DEG_GATEWAY ? "gateway" : "node");
            continue;
        }
        /* Control messages wait at most for a whole vertex run plus slack. */
        if ((r->fd = dial(r->peer, timeout * 2 + 1000)) < 0) {
            r->rc = codec_errf(r->err, sizeof(r->err), r->fd,
                               "vertex %s: cannot reach participant %s", vx->name, r->peer);
            continue;
        }
        struct inec_keyring kr;
        char aerr[300];
        int arc = inec_keyring_get(peers->secret_file, &kr, aerr, sizeof(aerr));
        if (!arc)
            arc = inec_auth_initiate(r->fd, &kr, "deg", "runner", r->peer, NULL, timeout, aerr,
                                     sizeof(aerr));
        inec_keyring_clear(&kr);
        if (arc) {
            r->rc = codec_errf(r->err, sizeof(r->err), arc, "vertex %s: participant %s: %s",
                               vx->name, r->peer, aerr);
            continue;
        }
        json_t *m = json_pack("{s:s,s:O,s:s,s:I,s:b,s:i}", "op", "setup", "graph", gjson, "vertex",
                              vx->name, "len", (json_int_t)len, "incoherent",
                              opts && opts->incoherent, "timeout_ms", timeout);
        int src = send_json(r->fd, m);
        for (int i = 0; i < vx->nlocal && src == 0; i++)
            src = send_frame(r->fd, chunks[vx->local[i]], len);
        if (src)
            r->rc = codec_errf(r->err, sizeof(r->err), -EPIPE,
                               "vertex %s: participant %s went away", vx->name, r->peer);
    }
    for (int v = 0; v < g->nvertices; v++) {
        json_t *m = reply(&rv[v], &g->vertices[v], "setup");
        if (!m)
            continue;
        snprintf(rv[v].addr, sizeof(rv[v].addr), "%s",
                 json_string_value(json_object_get(m, "addr")) ?: "");
        for (int j = 0; j < g->vertices[v].nin; j++)
            rv[v].in_qpn[j] =
                (uint32_t)json_integer_value(json_array_get(json_object_get(m, "in"), (size_t)j));
        for (int j = 0; j < g->vertices[v].nout_edges; j++)
            rv[v].out_qpn[j] =
                (uint32_t)json_integer_value(json_array_get(json_object_get(m, "out"), (size_t)j));
        json_decref(m);
    }
    /* 2. connect: each side learns its peers (all sent before any reply is
     * read, since a QP connect may need both sides). Vertices whose peer
     * failed still run, so their failure names the edge. */
    for (int v = 0; v < g->nvertices; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        if (rv[v].rc)
            continue;
        json_t *ins = json_array(), *outs = json_array();
        for (int j = 0; j < vx->nin; j++) {
            const struct deg_edge *e = &g->edges[vx->in[j]];
            const struct remote_vx *f = &rv[e->from];
            int pos = 0;
            while (g->vertices[e->from].out[pos] != vx->in[j])
                pos++;
            json_array_append_new(ins, f->rc ? json_pack("{s:n}", "addr")
                                             : json_pack("{s:s,s:I}", "addr", f->addr, "qpn",
                                                         (json_int_t)f->out_qpn[pos]));
        }
        for (int j = 0; j < vx->nout_edges; j++) {
            const struct deg_edge *e = &g->edges[vx->out[j]];
            const struct remote_vx *t = &rv[e->to];
            json_array_append_new(outs, t->rc ? json_pack("{s:n}", "addr")
                                              : json_pack("{s:s,s:I}", "addr", t->addr, "qpn",
                                                          (json_int_t)t->in_qpn[e->slot]));
        }
        if (send_json(rv[v].fd,
                      json_pack("{s:s,s:o,s:o}", "op", "connect", "in", ins, "out", outs)))
            rv[v].rc = codec_errf(rv[v].err, sizeof(rv[v].err), -EPIPE,
                                  "vertex %s: participant %s went away", vx->name, rv[v].peer);
    }
    for (int v = 0; v < g->nvertices; v++)
        json_decref(reply(&rv[v], &g->vertices[v], "connect"));
    /* 3. run, then collect results. */
    for (int v = 0; v < g->nvertices; v++)
        if (!rv[v].rc && send_json(rv[v].fd, json_pack("{s:s}", "op", "run")))
            rv[v].rc =
                codec_errf(rv[v].err, sizeof(rv[v].err), -EPIPE,
                           "vertex %s: participant %s went away", g->vertices[v].name, rv[v].peer);
    for (int v = 0; v < g->nvertices; v++) {
        json_t *m = reply(&rv[v], &g->vertices[v], "run");
        json_t *res = json_object_get(m, "results");
        for (size_t i = 0; m && i < json_array_size(res); i++) {
            json_t *o = json_array_get(res, i);
            struct deg_label label = {(int)json_integer_value(json_object_get(o, "chunk")),
                                      json_is_true(json_object_get(o, "partial"))};
            if (recv_bytes(rv[v].fd, buf, len)) {
                rv[v].rc = codec_errf(rv[v].err, sizeof(rv[v].err), -EPIPE,
                                      "vertex %s: participant %s went away sending results",
                                      g->vertices[v].name, rv[v].peer);
                break;
            }
            if (result)
                result(arg, g, v, label, buf, len);
        }
        json_decref(m);
    }
    /* The root cause: a participant lost outright first, then failures its
     * vertex reported, then timeouts (echoes of a failure upstream); among
     * equals the vertex furthest upstream. */
    int *order = malloc((size_t)g->nvertices * sizeof(int));
    rc = 0;
    int best = -1;
    if (order && deg_topo_order(g, order) == 0)
        for (int i = 0; i < g->nvertices; i++) {
            const struct remote_vx *x = &rv[order[i]];
            int rank = !x->rc ? -1 : !x->reported ? 2 : x->rc != -ETIMEDOUT;
            if (rank > best) {
                best = rank;
                rc = x->rc;
                codec_errf(err, errlen, rc, "%s", x->err);
            }
        }
    if (!order)
        rc = -ENOMEM;
    free(order);
    /* Hanging up releases every participant's vertex at once (see
     * serve_vertex), now that none of them has anything in flight. */
    for (int v = 0; v < g->nvertices; v++) {
        if (rv[v].fd >= 0)
            close(rv[v].fd);
        free(rv[v].in_qpn);
        free(rv[v].out_qpn);
    }
    free(rv);
    free(buf);
    json_decref(gjson);
    return rc;
}
