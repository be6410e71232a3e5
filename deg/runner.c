/*
 * The runner: each vertex of a graph posts its primitive on its own inec
 * device, and the data moves over one RC QP pair per edge.
 *
 * Per vertex: a CALC QP whose send CQ counts calculations; per in-edge a QP
 * and a CQ of its own, so the CQ's count is exactly the slices that edge has
 * delivered (WAIT targets per slice stay exact when edges run at different
 * speeds); per out-edge a QP and a CQ counting its signaled SENDs, so a
 * failure or a silent peer names the edge. A slice of a sliced graph (ECPipe)
 * is one primitive call over sub-ranges of the same buffers; all slices are
 * posted at once and the WAITs pipeline them.
 *
 * Every wait has a deadline (opts.timeout_ms from the start of the vertex's
 * run): a dead participant turns into an error naming the vertex and edge,
 * never a hang. After a failed run the runner holds requests that will never
 * complete; it refuses further runs and must be destroyed.
 */
#include "deg/deg.h"
#include "codecs/errf.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codecs/gf.h"
#include "inec/inec.h"

struct deg_vx {
    const struct deg_graph *g;
    const struct deg_vertex *v;
    int id;
    size_t len, slice, cap; /* cap: the length buffers were opened for */
    int nslices, max_slices;
    bool incoherent;
    int timeout_ms;
    struct inec_device *dev;
    struct inec_cq *calc_cq;
    struct inec_qp *calc_qp;
    struct inec_cq **in_cq, **out_cq;
    struct inec_qp **in_qp, **out_qp;
    /* out-edge pos sends over the connection opened for out-edge route[pos]
     * (deg_vx_route_out); out_qp/out_cq above are already routed. */
    int *route;
    struct inec_qp **out_qp0;
    struct inec_cq **out_cq0;
    uint8_t **local, **in_buf, **out_buf;
    struct inec_mr **local_mr, **in_mr, **out_mr;
    uint8_t *tables;
    enum inec_calc_kind kind;
    uint64_t *in_base, *in_errs, *out_errs, *out_target, calc_errs;
    /* scratch for one slice */
    struct inec_sge *sg_in, *sg_out;
    struct inec_stripe_send *sends;
    struct inec_cq **wait_cqs;
    uint64_t *wait_counts;
    bool (*give_up)(void *arg); /* deg_vx_set_give_up */
    void *give_up_arg;
};

static const char *from_name(const struct deg_vx *x, int slot)
{
    return x->g->vertices[x->g->edges[x->v->in[slot]].from].name;
}

static const char *to_name(const struct deg_vx *x, int pos)
{
    return x->g->vertices[x->g->edges[x->v->out[x->route[pos]]].to].name;
}

void deg_vx_close(struct deg_vx *x)
{
    if (!x)
        return;
    const struct deg_vertex *v = x->v;
    for (int j = 0; x->in_qp && j < v->nin; j++)
        inec_qp_destroy(x->in_qp[j]);
    for (int j = 0; x->out_qp0 && j < v->nout_edges; j++)
        inec_qp_destroy(x->out_qp0[j]);
    inec_qp_destroy(x->calc_qp);
    for (int j = 0; x->in_cq && j < v->nin; j++)
        inec_cq_destroy(x->in_cq[j]);
    for (int j = 0; x->out_cq0 && j < v->nout_edges; j++)
        inec_cq_destroy(x->out_cq0[j]);
    inec_cq_destroy(x->calc_cq);
    for (int j = 0; x->local_mr && j < v->nlocal; j++)
        inec_mr_dereg(x->local_mr[j]);
    for (int j = 0; x->in_mr && x->in_buf && j < v->nin; j++) {
        inec_mr_dereg(x->in_mr[j]);
        free(x->in_buf[j]);
    }
    for (int j = 0; x->out_mr && x->out_buf && j < v->nrows; j++) {
        inec_mr_dereg(x->out_mr[j]);
        free(x->out_buf[j]);
    }
    inec_device_close(x->dev);
    free(x->in_cq);
    free(x->out_cq);
    free(x->in_qp);
    free(x->out_qp);
    free(x->out_qp0);
    free(x->out_cq0);
    free(x->route);
    free(x->local);
    free(x->in_buf);
    free(x->out_buf);
    free(x->local_mr);
    free(x->in_mr);
    free(x->out_mr);
    free(x->tables);
    free(x->in_base);
    free(x->in_errs);
    free(x->out_errs);
    free(x->out_target);
    free(x->sg_in);
    free(x->sg_out);
    free(x->sends);
    free(x->wait_cqs);
    free(x->wait_counts);
    free(x);
}

/* A vertex's buffer, page aligned: a node stores what a sink received or
 * computed straight from it, and a store writes a large aligned chunk with
 * O_DIRECT (node/store.h). NULL when out of memory. */
static uint8_t *page_alloc(size_t len)
{
    void *p = NULL;
    return posix_memalign(&p, 4096, len ? len : 1) == 0 ? p : NULL;
}

/* A zeroed array of n elements (at least one, so n == 0 is not a failure). */
static void *array(size_t n, size_t elem)
{
    return calloc(n ? n : 1, elem);
}

int deg_vx_open(const struct deg_graph *g, int v, size_t len, uint8_t *const *chunks,
                const struct deg_run_opts *opts, struct deg_vx **out, char *err, size_t errlen)
{
    const struct deg_vertex *vx = &g->vertices[v];
    struct deg_vx *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    *x = (struct deg_vx){.g = g,
                         .v = vx,
                         .id = v,
                         .len = len,
                         .cap = len,
                         .slice = g->slice && g->slice < len ? g->slice : len,
                         .incoherent = opts && opts->incoherent,
                         .timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 10000};
    x->nslices = x->max_slices = (int)((len + x->slice - 1) / x->slice);
    size_t nin = (size_t)vx->nin, nout = (size_t)vx->nout_edges, nrows = (size_t)vx->nrows;
    size_t nloc = (size_t)vx->nlocal, ncols = nloc + nin;
    bool oom = false;
#define ALLOC(field, n) (oom |= !(x->field = array((n), sizeof(*x->field))))
    ALLOC(in_cq, nin), ALLOC(in_qp, nin), ALLOC(in_buf, nin), ALLOC(in_mr, nin);
    ALLOC(in_base, nin), ALLOC(in_errs, nin), ALLOC(wait_cqs, nin), ALLOC(wait_counts, nin);
    ALLOC(out_cq, nout), ALLOC(out_qp, nout), ALLOC(out_errs, nout), ALLOC(out_target, nout);
    ALLOC(out_qp0, nout), ALLOC(out_cq0, nout), ALLOC(route, nout);
    ALLOC(sends, nout), ALLOC(local, nloc), ALLOC(local_mr, nloc), ALLOC(sg_in, ncols);
    ALLOC(out_buf, nrows), ALLOC(out_mr, nrows), ALLOC(sg_out, nrows);
#undef ALLOC
    int rc = 0;
    if (oom) {
        rc = -ENOMEM;
        goto fail;
    }
    const char *options = opts && opts->options ? opts->options : "transport=mem";
    rc = inec_device_open(NULL, options, &x->dev);
    if (rc) {
        x->dev = NULL;
        goto inec_fail;
    }
    struct inec_device_attr attr;
    inec_device_query(x->dev, &attr);
    /* Per slice: a SEND and its WAIT on an out QP, a RECV on an in QP, and
     * up to nin WAITs and a CALC on the calculator. */
    uint32_t depth = (uint32_t)x->nslices * (uint32_t)(ncols + 2);
    if (depth > attr.max_qp_wr || ncols + nrows > attr.max_sge || nin > attr.max_wait) {
        rc = codec_errf(err, errlen, -E2BIG,
                        "vertex %s: %d slices of %zu bytes, %zu inputs and %zu outputs exceed the "
                        "device (queues of %u, %u SGEs, %u WAITs)",
                        vx->name, x->nslices, x->slice, ncols, nrows, attr.max_qp_wr, attr.max_sge,
                        attr.max_wait);
        goto fail;
    }
    /* CQs hold a run's completions of their queue (depth), not max_cqe:
     * a ring of max_cqe is megabytes per CQ, for every vertex of every run. */
    if ((rc = inec_cq_create(x->dev, depth, &x->calc_cq)))
        goto inec_fail;
    struct inec_qp_attr qa = {.type = INEC_QP_CALC, .send_cq = x->calc_cq, .sq_depth = depth};
    if ((rc = inec_qp_create(x->dev, &qa, &x->calc_qp)))
        goto inec_fail;
    for (size_t j = 0; j < nin; j++) {
        if ((rc = inec_cq_create(x->dev, depth, &x->in_cq[j])))
            goto inec_fail;
        qa = (struct inec_qp_attr){INEC_QP_RC, x->in_cq[j], x->in_cq[j], 1, depth};
        if ((rc = inec_qp_create(x->dev, &qa, &x->in_qp[j])))
            goto inec_fail;
        if (!(x->in_buf[j] = page_alloc(len))) {
            rc = -ENOMEM;
            goto fail;
        }
        if ((rc = inec_mr_reg(x->dev, x->in_buf[j], len, &x->in_mr[j])))
            goto inec_fail;
    }
    for (size_t j = 0; j < nout; j++) {
        if ((rc = inec_cq_create(x->dev, depth, &x->out_cq0[j])))
            goto inec_fail;
        qa = (struct inec_qp_attr){INEC_QP_RC, x->out_cq0[j], x->out_cq0[j], depth, 1};
        if ((rc = inec_qp_create(x->dev, &qa, &x->out_qp0[j])))
            goto inec_fail;
        x->out_cq[j] = x->out_cq0[j];
        x->out_qp[j] = x->out_qp0[j];
        x->route[j] = (int)j;
    }
    for (size_t j = 0; chunks && j < nloc; j++) {
        x->local[j] = chunks[vx->local[j]];
        if ((rc = inec_mr_reg(x->dev, x->local[j], len, &x->local_mr[j])))
            goto inec_fail;
    }
    for (size_t r = 0; r < nrows; r++) {
        if (!(x->out_buf[r] = page_alloc(len))) {
            rc = -ENOMEM;
            goto fail;
        }
        if ((rc = inec_mr_reg(x->dev, x->out_buf[r], len, &x->out_mr[r])))
            goto inec_fail;
    }
    x->kind = deg_vertex_calc(vx) == DEG_CALC_XOR ? INEC_CALC_XOR : INEC_CALC_EC;
    if (nrows && x->kind == INEC_CALC_EC) {
        if (!(x->tables = malloc(nrows * ncols * CODEC_GF_TABLE_BYTES))) {
            rc = -ENOMEM;
            goto fail;
        }
        codec_gf_init_tables((int)nrows, (int)ncols, vx->coeffs, x->tables);
    }
    *out = x;
    return 0;
inec_fail:
    codec_errf(err, errlen, rc, "vertex %s: %s", vx->name, inec_errmsg());
fail:
    if (rc == -ENOMEM)
        codec_errf(err, errlen, rc, "vertex %s: out of memory", vx->name);
    deg_vx_close(x);
    return rc;
}

int deg_vx_rebind(struct deg_vx *x, size_t len, uint8_t *const *chunks, char *err, size_t errlen)
{
    const struct deg_vertex *v = x->v;
    size_t slice = x->g->slice && x->g->slice < len ? x->g->slice : len;
    int nslices = len ? (int)((len + slice - 1) / slice) : 0;
    if (len == 0 || len > x->cap || nslices > x->max_slices)
        return codec_errf(err, errlen, -EINVAL, "vertex %s: %zu bytes do not fit buffers of %zu",
                          v->name, len, x->cap);
    x->len = len;
    x->slice = slice;
    x->nslices = nslices;
    for (int j = 0; chunks && j < v->nlocal; j++) {
        inec_mr_dereg(x->local_mr[j]);
        x->local_mr[j] = NULL;
        x->local[j] = chunks[v->local[j]];
        int rc = inec_mr_reg(x->dev, x->local[j], len, &x->local_mr[j]);
        if (rc)
            return codec_errf(err, errlen, rc, "vertex %s: %s", v->name, inec_errmsg());
    }
    return 0;
}

int deg_vx_route_out(struct deg_vx *x, const int *route)
{
    int n = x->v->nout_edges;
    bool seen[n + 1];
    memset(seen, 0, sizeof(seen));
    for (int e = 0; route && e < n; e++) {
        if (route[e] < 0 || route[e] >= n || seen[route[e]])
            return -EINVAL;
        seen[route[e]] = true;
    }
    for (int e = 0; e < n; e++) {
        x->route[e] = route ? route[e] : e;
        x->out_qp[e] = x->out_qp0[x->route[e]];
        x->out_cq[e] = x->out_cq0[x->route[e]];
    }
    return 0;
}

void deg_vx_retable(struct deg_vx *x)
{
    const struct deg_vertex *v = x->v;
    if (x->tables)
        codec_gf_init_tables(v->nrows, v->nlocal + v->nin, v->coeffs, x->tables);
}

const char *deg_vx_addr(const struct deg_vx *x)
{
    return inec_device_addr(x->dev);
}

uint32_t deg_vx_in_qpn(const struct deg_vx *x, int slot)
{
    return inec_qp_num(x->in_qp[slot]);
}

uint32_t deg_vx_out_qpn(const struct deg_vx *x, int pos)
{
    return inec_qp_num(x->out_qp0[pos]);
}

int deg_vx_connect_in(struct deg_vx *x, int slot, const char *addr, uint32_t qpn, char *err,
                      size_t errlen)
{
    int rc = inec_qp_connect(x->in_qp[slot], addr, qpn);
    return rc ? codec_errf(err, errlen, rc, "vertex %s: edge %d from %s: connect: %s", x->v->name,
                           x->v->in[slot], from_name(x, slot), inec_errmsg())
              : 0;
}

int deg_vx_connect_out(struct deg_vx *x, int pos, const char *addr, uint32_t qpn, char *err,
                       size_t errlen)
{
    int rc = inec_qp_connect(x->out_qp0[pos], addr, qpn);
    return rc ? codec_errf(err, errlen, rc, "vertex %s: edge %d to %s: connect: %s", x->v->name,
                           x->v->out[pos], to_name(x, pos), inec_errmsg())
              : 0;
}

static struct inec_sge value_sge(struct deg_vx *x, struct deg_ref ref, size_t off, size_t n)
{
    switch (ref.kind) {
    case DEG_LOCAL:
        return (struct inec_sge){x->local[ref.index] + off, n, x->local_mr[ref.index]};
    case DEG_IN:
        return (struct inec_sge){x->in_buf[ref.index] + off, n, x->in_mr[ref.index]};
    case DEG_OUT:
        break;
    }
    return (struct inec_sge){x->out_buf[ref.index] + off, n, x->out_mr[ref.index]};
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline)
{
    int64_t left = deadline - now_ms();
    return left > 0 ? (int)left : 0;
}

/* The status of an error completion on cq, for the message. */
static const char *error_status(struct inec_cq *cq)
{
    struct inec_wc wc[64];
    int n;
    while ((n = inec_poll_cq(cq, 64, wc)) > 0)
        for (int i = 0; i < n; i++)
            if (wc[i].status != INEC_WC_SUCCESS)
                return inec_wc_status_str(wc[i].status);
    return "error";
}

/* Posts this slice's RECVs on every in-edge, in chains no longer than the
 * device allows. */
static int post_recvs(struct deg_vx *x, char *err, size_t errlen)
{
    struct inec_wr wrs[64];
    struct inec_sge sges[64];
    for (int j = 0; j < x->v->nin; j++) {
        x->in_base[j] = inec_cq_expected(x->in_cq[j]);
        x->in_errs[j] = inec_cq_errors(x->in_cq[j]);
        for (int s = 0; s < x->nslices; s += 64) {
            int n = x->nslices - s < 64 ? x->nslices - s : 64;
            for (int i = 0; i < n; i++) {
                size_t off = (size_t)(s + i) * x->slice;
                size_t len = x->len - off < x->slice ? x->len - off : x->slice;
                sges[i] = (struct inec_sge){x->in_buf[j] + off, len, x->in_mr[j]};
                wrs[i] = (struct inec_wr){.next = i + 1 < n ? &wrs[i + 1] : NULL,
                                          .wr_id = (uint64_t)x->v->in[j],
                                          .opcode = INEC_WR_RECV,
                                          .sg_list = &sges[i],
                                          .num_sge = 1};
            }
            int rc = inec_post_recv(x->in_qp[j], wrs, NULL);
            if (rc)
                return codec_errf(err, errlen, rc, "vertex %s: edge %d from %s: post RECV: %s",
                                  x->v->name, x->v->in[j], from_name(x, j), inec_errmsg());
        }
    }
    return 0;
}

/* Which input has not delivered slice `upto` yet: the message of a timeout. */
static int blame_inputs(struct deg_vx *x, int upto, int rc, char *err, size_t errlen)
{
    for (int j = 0; j < x->v->nin; j++) {
        if (inec_cq_errors(x->in_cq[j]) != x->in_errs[j])
            return codec_errf(err, errlen, -EIO, "vertex %s: edge %d from %s failed: %s",
                              x->v->name, x->v->in[j], from_name(x, j), error_status(x->in_cq[j]));
        uint64_t got = inec_cq_count(x->in_cq[j]) - x->in_base[j];
        if (got < (uint64_t)upto)
            return codec_errf(err, errlen, -ETIMEDOUT,
                              "vertex %s: edge %d from %s delivered %llu of %d slices within %d ms",
                              x->v->name, x->v->in[j], from_name(x, j), (unsigned long long)got,
                              x->nslices, x->timeout_ms);
    }
    return rc;
}

static int post_slice(struct deg_vx *x, int s, uint64_t *calc_done, char *err, size_t errlen)
{
    const struct deg_vertex *v = x->v;
    size_t off = (size_t)s * x->slice;
    size_t n = x->len - off < x->slice ? x->len - off : x->slice;
    for (int c = 0; c < v->nlocal; c++)
        x->sg_in[c] = value_sge(x, deg_local(c), off, n);
    for (int j = 0; j < v->nin; j++) {
        x->sg_in[v->nlocal + j] = value_sge(x, deg_in(j), off, n);
        x->wait_cqs[j] = x->in_cq[j];
        x->wait_counts[j] = x->in_base[j] + (uint64_t)s + 1;
    }
    for (int r = 0; r < v->nrows; r++)
        x->sg_out[r] = value_sge(x, deg_out(r), off, n);
    for (int e = 0; e < v->nout_edges; e++) {
        const struct deg_edge *ed = &x->g->edges[v->out[e]];
        x->sends[e] = (struct inec_stripe_send){
            .qp = x->out_qp[e],
            .buf = value_sge(x, ed->src, off, n),
            .wr_id = (uint64_t)v->out[e],
            .send_flags = INEC_SIGNALED,
            /* A local chunk does not wait for the calculation. */
            .flags = ed->src.kind == DEG_LOCAL ? INEC_STRIPE_NOWAIT : 0,
        };
    }
    struct inec_calc_desc calc = {
        .qp = x->calc_qp,
        .kind = x->kind,
        .tables = x->tables,
        .wr_id = (uint64_t)x->id,
        .flags = x->incoherent ? INEC_PRIM_INCOHERENT : 0,
        .timeout_ms = x->timeout_ms,
    };
    struct inec_mem_desc mem = {x->sg_in, v->nlocal + v->nin, x->sg_out, v->nrows};
    struct inec_stripe_desc stripe = {x->sends, v->nout_edges};
    struct inec_wait_desc wait = {x->wait_cqs, x->wait_counts, v->nin};
    int rc = 0;
    const char *what = deg_vertex_prim_name(v);
    switch (deg_vertex_prim(v)) {
    case DEG_PRIM_SEND:
        for (int e = 0; e < v->nout_edges && rc == 0; e++) {
            struct inec_wr wr = {.wr_id = x->sends[e].wr_id,
                                 .opcode = INEC_WR_SEND,
                                 .flags = INEC_SIGNALED,
                                 .sg_list = &x->sends[e].buf,
                                 .num_sge = 1};
            rc = inec_post_send(x->out_qp[e], &wr, NULL);
        }
        break;
    case DEG_PRIM_EC_SEND:
        rc = inec_ec_send(&calc, &mem, &stripe);
        break;
    case DEG_PRIM_RECV_EC_SEND:
        rc = inec_recv_ec_send(&wait, &calc, &mem, &stripe);
        break;
    case DEG_PRIM_RECV_EC:
        rc = inec_recv_ec(&wait, &calc, &mem);
        break;
    case DEG_PRIM_RECV:
    case DEG_PRIM_NONE:
        return 0;
    }
    if (rc == -ETIMEDOUT && v->nin)
        return blame_inputs(x, s + 1, rc, err, errlen);
    if (rc)
        return codec_errf(err, errlen, rc, "vertex %s: %s (slice %d): %s", v->name, what, s,
                          inec_errmsg());
    *calc_done = calc.done_count;
    return 0;
}

void deg_vx_set_give_up(struct deg_vx *x, bool (*give_up)(void *arg), void *arg)
{
    x->give_up = give_up;
    x->give_up_arg = arg;
}

#define GIVE_UP_POLL_MS 10

/* Out-edge e's sends taken, or the time or the caller's patience out
 * (-EINPROGRESS: deg_vx_set_give_up). */
static int wait_sent(struct deg_vx *x, int e, int64_t deadline)
{
    for (;;) {
        int left = left_ms(deadline);
        int step = x->give_up && left > GIVE_UP_POLL_MS ? GIVE_UP_POLL_MS : left;
        int rc = inec_cq_wait_count(x->out_cq[e], x->out_target[e], step);
        if (rc != -ETIMEDOUT || step == left)
            return rc;
        if (x->give_up(x->give_up_arg))
            return -EINPROGRESS;
    }
}

/* Closes the QPs of the out-edges whose sends were not all taken: once
 * closed, nothing reads the vertex's memory for them any more (the provider
 * drops what it had not sent). The vertex cannot run again. */
static void abandon_sends(struct deg_vx *x)
{
    for (int e = 0; e < x->v->nout_edges; e++) {
        if (!x->out_qp[e] || inec_cq_count(x->out_cq[e]) >= x->out_target[e])
            continue;
        for (int j = 0; j < x->v->nout_edges; j++)
            if (x->out_qp0[j] == x->out_qp[e])
                x->out_qp0[j] = NULL;
        inec_qp_destroy(x->out_qp[e]);
        x->out_qp[e] = NULL;
    }
}

void deg_collect(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                 const uint8_t *data, size_t len)
{
    struct deg_results *r = arg;
    (void)g;
    (void)v;
    (void)len;
    if (r->n < CODEC_MAX_CHUNKS) {
        r->labels[r->n] = label;
        r->data[r->n++] = data;
    }
}

int deg_vx_run(struct deg_vx *x, deg_result_fn result, void *arg, pthread_mutex_t *result_lock,
               char *err, size_t errlen)
{
    const struct deg_vertex *v = x->v;
    int64_t deadline = now_ms() + x->timeout_ms;
    uint64_t calc_done = 0;
    x->calc_errs = inec_cq_errors(x->calc_cq);
    for (int e = 0; e < v->nout_edges; e++)
        x->out_errs[e] = inec_cq_errors(x->out_cq[e]);
    int rc = post_recvs(x, err, errlen);
    for (int s = 0; s < x->nslices && rc == 0; s++)
        rc = post_slice(x, s, &calc_done, err, errlen);
    if (rc)
        return rc;
    for (int e = 0; e < v->nout_edges; e++)
        x->out_target[e] = inec_cq_expected(x->out_cq[e]);

    /* Inputs first: a missing input explains everything that follows. */
    for (int j = 0; j < v->nin; j++) {
        rc = inec_cq_wait_count(x->in_cq[j], x->in_base[j] + (uint64_t)x->nslices,
                                left_ms(deadline));
        if (rc || inec_cq_errors(x->in_cq[j]) != x->in_errs[j])
            return blame_inputs(x, x->nslices, rc ? rc : -EIO, err, errlen);
    }
    if (v->nrows) {
        rc = inec_cq_wait_count(x->calc_cq, calc_done, left_ms(deadline));
        if (rc == 0 && inec_cq_errors(x->calc_cq) != x->calc_errs)
            return codec_errf(err, errlen, -EIO, "vertex %s: calculation failed: %s", v->name,
                              error_status(x->calc_cq));
        if (rc)
            return codec_errf(err, errlen, rc, "vertex %s: calculation not done within %d ms",
                              v->name, x->timeout_ms);
    }
    for (int e = 0; e < v->nout_edges; e++) {
        rc = wait_sent(x, e, deadline);
        if (rc == -EINPROGRESS) {
            abandon_sends(x);
            return codec_errf(err, errlen, rc,
                              "vertex %s: edge %d to %s: not taken when the caller gave up",
                              v->name, v->out[e], to_name(x, e));
        }
        if (rc == 0 && inec_cq_errors(x->out_cq[e]) != x->out_errs[e])
            return codec_errf(err, errlen, -EIO, "vertex %s: edge %d to %s failed: %s", v->name,
                              v->out[e], to_name(x, e), error_status(x->out_cq[e]));
        if (rc)
            return codec_errf(err, errlen, rc,
                              "vertex %s: edge %d to %s: not taken within %d ms (receiver gone?)",
                              v->name, v->out[e], to_name(x, e), x->timeout_ms);
    }
    if (result_lock)
        pthread_mutex_lock(result_lock);
    for (int r = 0; r < v->nresults && result; r++) {
        struct deg_label label;
        deg_value_label(x->g, x->id, v->results[r], &label);
        struct inec_sge sge = value_sge(x, v->results[r], 0, x->len);
        result(arg, x->g, x->id, label, sge.addr, x->len);
    }
    if (result_lock)
        pthread_mutex_unlock(result_lock);
    return 0;
}

/* ---- every vertex of a graph in this process ----------------------------- */

struct worker {
    struct deg_runner *r;
    struct deg_vx *x;
    pthread_t thread;
    bool started;
    int rc;
    char err[256];
};

struct deg_runner {
    const struct deg_graph *g;
    int nworkers;
    struct worker *workers;
    pthread_mutex_t lock, result_lock;
    pthread_cond_t cv;
    uint64_t gen;
    int pending;
    bool stop, broken;
    deg_result_fn result;
    void *arg;
};

static void *worker_main(void *p)
{
    pthread_setname_np(pthread_self(), "deg-vertex");
    struct worker *w = p;
    struct deg_runner *r = w->r;
    uint64_t seen = 0;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->stop && r->gen == seen)
            pthread_cond_wait(&r->cv, &r->lock);
        if (r->stop)
            break;
        seen = r->gen;
        pthread_mutex_unlock(&r->lock);
        w->err[0] = 0;
        w->rc = deg_vx_run(w->x, r->result, r->arg, &r->result_lock, w->err, sizeof(w->err));
        pthread_mutex_lock(&r->lock);
        if (--r->pending == 0)
            pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

void deg_runner_destroy(struct deg_runner *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->lock);
    for (int i = 0; i < r->nworkers; i++)
        if (r->workers[i].started)
            pthread_join(r->workers[i].thread, NULL);
    for (int i = 0; i < r->nworkers; i++)
        deg_vx_close(r->workers[i].x);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->result_lock);
    pthread_cond_destroy(&r->cv);
    free(r->workers);
    free(r);
}

int deg_runner_create(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                      const struct deg_run_opts *opts, struct deg_runner **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    if (len == 0)
        return codec_errf(err, errlen, -EINVAL, "chunk length 0");
    struct deg_runner *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->g = g;
    r->workers = calloc((size_t)g->nvertices, sizeof(*r->workers));
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->result_lock, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (!r->workers) {
        deg_runner_destroy(r);
        return -ENOMEM;
    }
    /* Workers in topological order, so the first failure reported is the
     * one furthest upstream. */
    int *order = malloc((size_t)g->nvertices * sizeof(int));
    if (!order) {
        deg_runner_destroy(r);
        return -ENOMEM;
    }
    deg_topo_order(g, order);
    for (int i = 0; i < g->nvertices; i++) {
        int v = order[i];
        if (opts && opts->skip && strcmp(opts->skip, g->vertices[v].name) == 0)
            continue;
        struct worker *w = &r->workers[r->nworkers];
        w->r = r;
        if ((rc = deg_vx_open(g, v, len, chunks, opts, &w->x, err, errlen))) {
            free(order);
            goto fail;
        }
        r->nworkers++;
    }
    free(order);
    /* Wire every edge whose two ends run here. */
    for (int a = 0; a < r->nworkers; a++) {
        struct deg_vx *x = r->workers[a].x;
        for (int e = 0; e < x->v->nout_edges; e++) {
            const struct deg_edge *ed = &g->edges[x->v->out[e]];
            for (int b = 0; b < r->nworkers; b++) {
                struct deg_vx *y = r->workers[b].x;
                if (y->id != ed->to)
                    continue;
                if ((rc = deg_vx_connect_out(x, e, deg_vx_addr(y), deg_vx_in_qpn(y, ed->slot), err,
                                             errlen)) ||
                    (rc = deg_vx_connect_in(y, ed->slot, deg_vx_addr(x), deg_vx_out_qpn(x, e), err,
                                            errlen)))
                    goto fail;
            }
        }
    }
    for (int i = 0; i < r->nworkers; i++) {
        if ((rc = -pthread_create(&r->workers[i].thread, NULL, worker_main, &r->workers[i]))) {
            codec_errf(err, errlen, rc, "starting a vertex thread: %s", strerror(-rc));
            goto fail;
        }
        r->workers[i].started = true;
    }
    *out = r;
    return 0;
fail:
    deg_runner_destroy(r);
    return rc;
}

int deg_runner_run(struct deg_runner *r, deg_result_fn result, void *arg, char *err, size_t errlen)
{
    if (r->broken)
        return codec_errf(err, errlen, -EIO, "an earlier run failed; destroy this runner");
    pthread_mutex_lock(&r->lock);
    r->result = result;
    r->arg = arg;
    r->pending = r->nworkers;
    r->gen++;
    pthread_cond_broadcast(&r->cv);
    /* Every vertex's waits are bounded, so this wait is too. */
    while (r->pending > 0)
        pthread_cond_wait(&r->cv, &r->lock);
    pthread_mutex_unlock(&r->lock);
    /* Report the root cause: a timeout is usually the echo of another
     * vertex's failure, so prefer any other error. */
    int rc = 0;
    const char *msg = NULL;
    for (int i = 0; i < r->nworkers; i++) {
        struct worker *w = &r->workers[i];
        if (w->rc && (!rc || (rc == -ETIMEDOUT && w->rc != -ETIMEDOUT))) {
            rc = w->rc;
            msg = w->err;
        }
    }
    if (rc) {
        r->broken = true;
        codec_errf(err, errlen, rc, "%s", msg);
    }
    return rc;
}

int deg_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
            const struct deg_run_opts *opts, deg_result_fn result, void *arg, char *err,
            size_t errlen)
{
    struct deg_runner *r;
    int rc = deg_runner_create(g, len, chunks, opts, &r, err, errlen);
    if (rc == 0)
        rc = deg_runner_run(r, result, arg, err, errlen);
    deg_runner_destroy(r);
    return rc;
}
