/*
 * One builder per scheme shape. Vertices are named after the chunk their
 * participant holds or rebuilds ("c3"), the encoder/reader is "gw" (or "r<id>"
 * when a node reads); repair schemes build one tree or chain per erased chunk
 * and then suffix its vertices with "/<erased chunk>".
 */
#include "deg/deg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
    const struct codec *c;
    const struct deg_request *req;
    struct deg_graph *g;
    char *err;
    size_t errlen;
};

static int fail(struct ctx *x, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct ctx *x, int rc, const char *fmt, ...)
{
    if (x->err && x->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

void deg_placement_default(struct deg_placement *p)
{
    for (int i = 0; i < CODEC_MAX_CHUNKS; i++)
        p->holder[i] = i;
    p->reader = DEG_GATEWAY;
}

static int reader_vertex(struct ctx *x)
{
    int node = x->req->placement.reader;
    char name[DEG_NAME_MAX];
    if (node == DEG_GATEWAY)
        snprintf(name, sizeof(name), "gw");
    else
        snprintf(name, sizeof(name), "r%d", node);
    return deg_add_vertex(x->g, name, node);
}

/* The vertex of the participant holding chunk i; tree/chain suffix if any. */
static int chunk_vertex(struct ctx *x, int chunk, int suffix)
{
    char name[DEG_NAME_MAX];
    if (suffix < 0)
        snprintf(name, sizeof(name), "c%d", chunk);
    else
        snprintf(name, sizeof(name), "c%d/%d", chunk, suffix);
    return deg_add_vertex(x->g, name, x->req->placement.holder[chunk]);
}

/* A sink that keeps what its single input delivers. */
static int keeper(struct ctx *x, int chunk, int suffix, int from, struct deg_ref src)
{
    int v = chunk_vertex(x, chunk, suffix);
    if (v < 0)
        return v;
    int rc = deg_add_edge(x->g, from, src, v);
    return rc < 0 ? rc : deg_add_result(x->g, v, deg_in(0));
}

/* RS, LRC, PPR, ECPipe: the reader ec-sends data chunks and parities. */
static int encode_bipartite(struct ctx *x)
{
    int k = codec_k(x->c), n = codec_n(x->c), m = n - k;
    const uint8_t *gen = codec_generator(x->c);
    int src = reader_vertex(x), rc = src;
    for (int i = 0; i < k && rc >= 0; i++)
        rc = deg_add_local(x->g, src, i);
    struct deg_label labels[CODEC_MAX_CHUNKS];
    for (int j = 0; j < m; j++)
        labels[j] = (struct deg_label){k + j, false};
    if (rc >= 0)
        rc = deg_set_calc(x->g, src, m, gen + (size_t)k * (size_t)k, labels);
    for (int i = 0; i < n && rc >= 0; i++)
        rc = keeper(x, i, -1, src, i < k ? deg_local(i) : deg_out(i - k));
    return rc;
}

/* TriEC: the reader sends data chunks; each data node keeps its chunk and
 * sends its share of every parity; parity nodes XOR the shares. */
static int encode_tripartite(struct ctx *x)
{
    int k = codec_k(x->c), n = codec_n(x->c), m = n - k;
    const uint8_t *gen = codec_generator(x->c);
    int src = reader_vertex(x), rc = src;
    int data[CODEC_MAX_CHUNKS], parity[CODEC_MAX_CHUNKS];
    for (int i = 0; i < k && rc >= 0; i++)
        rc = deg_add_local(x->g, src, i);
    for (int i = 0; i < k && rc >= 0; i++) {
        rc = data[i] = chunk_vertex(x, i, -1);
        if (rc >= 0)
            rc = deg_add_edge(x->g, src, deg_local(i), data[i]);
        if (rc >= 0)
            rc = deg_add_result(x->g, data[i], deg_in(0));
        uint8_t coeffs[CODEC_MAX_CHUNKS];
        struct deg_label labels[CODEC_MAX_CHUNKS];
        for (int j = 0; j < m; j++) {
            coeffs[j] = gen[(size_t)(k + j) * (size_t)k + (size_t)i];
            labels[j] = (struct deg_label){k + j, true};
        }
        if (rc >= 0)
            rc = deg_set_calc(x->g, data[i], m, coeffs, labels);
    }
    for (int j = 0; j < m && rc >= 0; j++) {
        rc = parity[j] = chunk_vertex(x, k + j, -1);
        for (int i = 0; i < k && rc >= 0; i++)
            rc = deg_add_edge(x->g, data[i], deg_out(j), parity[j]);
        uint8_t ones[CODEC_MAX_CHUNKS];
        memset(ones, 1, sizeof(ones));
        struct deg_label label = {k + j, false};
        if (rc >= 0)
            rc = deg_set_calc(x->g, parity[j], 1, ones, &label);
        if (rc >= 0)
            rc = deg_add_result(x->g, parity[j], deg_out(0));
    }
    return rc;
}

static uint8_t coeff(const struct codec_plan *p, int e, int s)
{
    return p->coeffs[(size_t)e * (size_t)p->nsurvivors + (size_t)s];
}

/* RS and LRC: survivors send their chunks, the reader recv-ec's (recv-xor
 * for an LRC local group). */
static int decode_star(struct ctx *x, const struct codec_plan *p)
{
    int dst = reader_vertex(x), rc = dst;
    for (int s = 0; s < p->nsurvivors && rc >= 0; s++) {
        int v = rc = chunk_vertex(x, p->survivors[s], -1);
        if (rc >= 0)
            rc = deg_add_local(x->g, v, p->survivors[s]);
        if (rc >= 0)
            rc = deg_add_edge(x->g, v, deg_local(0), dst);
    }
    struct deg_label labels[CODEC_MAX_CHUNKS];
    for (int e = 0; e < p->nerased; e++)
        labels[e] = (struct deg_label){p->erased[e], false};
    if (rc >= 0)
        rc = deg_set_calc(x->g, dst, p->nerased, p->coeffs, labels);
    for (int e = 0; e < p->nerased && rc >= 0; e++)
        rc = deg_add_result(x->g, dst, deg_out(e));
    return rc;
}

/* The survivors that contribute to erased chunk e (a zero coefficient
 * contributes nothing and would leave a vertex with nothing to compute). */
static int contributors(const struct codec_plan *p, int e, int *pos)
{
    int n = 0;
    for (int s = 0; s < p->nsurvivors; s++)
        if (coeff(p, e, s))
            pos[n++] = s;
    return n;
}

/* PPR: per erased chunk, a binomial reduction tree rooted at its new home.
 * Tree index 0 is the root, 1..n the contributing survivors; the parent of i
 * is i with its lowest set bit cleared, so the repair takes ceil(log2(n+1))
 * transfer rounds. Each survivor adds its product to its children's sums. */
static int decode_tree(struct ctx *x, const struct codec_plan *p)
{
    int rc = 0;
    for (int e = 0; e < p->nerased && rc >= 0; e++) {
        int suffix = p->nerased > 1 ? p->erased[e] : -1;
        int pos[CODEC_MAX_CHUNKS], n = contributors(p, e, pos);
        int vid[CODEC_MAX_CHUNKS + 1];
        rc = vid[0] = chunk_vertex(x, p->erased[e], suffix);
        for (int i = 1; i <= n && rc >= 0; i++) {
            rc = vid[i] = chunk_vertex(x, p->survivors[pos[i - 1]], suffix);
            if (rc >= 0)
                rc = deg_add_local(x->g, vid[i], p->survivors[pos[i - 1]]);
        }
        /* Edges before rows: a row is as wide as its vertex's inputs. */
        for (int i = n; i >= 1 && rc >= 0; i--)
            rc = deg_add_edge(x->g, vid[i], deg_out(0), vid[i & (i - 1)]);
        for (int i = 0; i <= n && rc >= 0; i++) {
            uint8_t row[CODEC_MAX_CHUNKS + 1];
            memset(row, 1, sizeof(row));
            if (i > 0)
                row[0] = coeff(p, e, pos[i - 1]);
            struct deg_label label = {p->erased[e], i > 0};
            rc = deg_set_calc(x->g, vid[i], 1, row, &label);
        }
        if (rc >= 0)
            rc = deg_add_result(x->g, vid[0], deg_out(0));
    }
    return rc;
}

/* ECPipe: per erased chunk, a chain through the contributing survivors,
 * streamed slice by slice; the last survivor's sum is the chunk, which its
 * new home receives. */
static int decode_chain(struct ctx *x, const struct codec_plan *p)
{
    int rc = 0;
    x->g->slice = x->req->slice ? x->req->slice : DEG_DEFAULT_SLICE;
    for (int e = 0; e < p->nerased && rc >= 0; e++) {
        int suffix = p->nerased > 1 ? p->erased[e] : -1;
        int pos[CODEC_MAX_CHUNKS], n = contributors(p, e, pos);
        int prev = -1;
        for (int i = 0; i < n && rc >= 0; i++) {
            int v = rc = chunk_vertex(x, p->survivors[pos[i]], suffix);
            if (rc >= 0)
                rc = deg_add_local(x->g, v, p->survivors[pos[i]]);
            if (rc >= 0 && prev >= 0)
                rc = deg_add_edge(x->g, prev, deg_out(0), v);
            uint8_t row[2] = {coeff(p, e, pos[i]), 1};
            struct deg_label label = {p->erased[e], i < n - 1};
            if (rc >= 0)
                rc = deg_set_calc(x->g, v, 1, row, &label);
            prev = v;
        }
        if (rc >= 0)
            rc = keeper(x, p->erased[e], suffix, prev, deg_out(0));
    }
    return rc;
}

/* TriEC: survivors ec-send their share of every erased chunk, each erased
 * chunk's new home recv-xor-sends the sum (keeping it), the reader receives. */
static int decode_tripartite(struct ctx *x, const struct codec_plan *p)
{
    int rc = 0, home[CODEC_MAX_CHUNKS];
    for (int e = 0; e < p->nerased && rc >= 0; e++)
        rc = home[e] = chunk_vertex(x, p->erased[e], -1);
    for (int s = 0; s < p->nsurvivors && rc >= 0; s++) {
        uint8_t coeffs[CODEC_MAX_CHUNKS];
        struct deg_label labels[CODEC_MAX_CHUNKS];
        int rows = 0, dst[CODEC_MAX_CHUNKS];
        for (int e = 0; e < p->nerased; e++)
            if (coeff(p, e, s)) {
                coeffs[rows] = coeff(p, e, s);
                labels[rows] = (struct deg_label){p->erased[e], true};
                dst[rows++] = home[e];
            }
        if (rows == 0)
            continue;
        int v = rc = chunk_vertex(x, p->survivors[s], -1);
        if (rc >= 0)
            rc = deg_add_local(x->g, v, p->survivors[s]);
        if (rc >= 0)
            rc = deg_set_calc(x->g, v, rows, coeffs, labels);
        for (int r = 0; r < rows && rc >= 0; r++)
            rc = deg_add_edge(x->g, v, deg_out(r), dst[r]);
    }
    int reader = rc >= 0 ? reader_vertex(x) : rc;
    rc = reader;
    for (int e = 0; e < p->nerased && rc >= 0; e++) {
        uint8_t ones[CODEC_MAX_CHUNKS];
        memset(ones, 1, sizeof(ones));
        struct deg_label label = {p->erased[e], false};
        rc = deg_set_calc(x->g, home[e], 1, ones, &label);
        if (rc >= 0)
            rc = deg_add_result(x->g, home[e], deg_out(0));
        if (rc >= 0)
            rc = deg_add_edge(x->g, home[e], deg_out(0), reader);
        if (rc >= 0)
            rc = deg_add_result(x->g, reader, deg_in(e));
    }
    return rc;
}

/* Delta parity (DEG_OP_UPDATE, see deg.h): reader -> holder of the data
 * chunk -> every parity that depends on it. */
static int update_delta(struct ctx *x)
{
    int k = codec_k(x->c), n = codec_n(x->c), d = x->req->updated;
    const uint8_t *gen = codec_generator(x->c);
    int src = reader_vertex(x), rc = src;
    if (rc >= 0)
        rc = deg_add_local(x->g, src, d); /* the new bytes */
    int dv = rc < 0 ? rc : chunk_vertex(x, d, -1);
    if ((rc = dv) >= 0)
        rc = deg_add_local(x->g, dv, d); /* the stored, old bytes */
    if (rc >= 0)
        rc = deg_add_edge(x->g, src, deg_local(0), dv);
    uint8_t coeffs[CODEC_MAX_CHUNKS * 2];
    struct deg_label labels[CODEC_MAX_CHUNKS];
    int parity[CODEC_MAX_CHUNKS], np = 0;
    for (int p = k; p < n; p++) {
        uint8_t g = gen[(size_t)p * (size_t)k + (size_t)d];
        if (!g)
            continue;                            /* an LRC local parity of another group */
        coeffs[2 * np] = coeffs[2 * np + 1] = g; /* g·old + g·new = g·Δ */
        labels[np] = (struct deg_label){p, true};
        parity[np++] = p;
    }
    if (rc >= 0)
        rc = deg_set_calc(x->g, dv, np, coeffs, labels);
    if (rc >= 0)
        rc = deg_add_result(x->g, dv, deg_in(0));
    static const uint8_t sum[2] = {1, 1};
    for (int j = 0; j < np && rc >= 0; j++) {
        int pv = chunk_vertex(x, parity[j], -1);
        struct deg_label whole = {parity[j], false};
        if ((rc = pv) >= 0)
            rc = deg_add_local(x->g, pv, parity[j]);
        if (rc >= 0)
            rc = deg_add_edge(x->g, dv, deg_out(j), pv);
        if (rc >= 0)
            rc = deg_set_calc(x->g, pv, 1, sum, &whole);
        if (rc >= 0)
            rc = deg_add_result(x->g, pv, deg_out(0));
    }
    return rc;
}

int deg_build(const struct codec *c, const struct deg_request *req, struct deg_graph **out,
              char *err, size_t errlen)
{
    struct ctx x = {.c = c, .req = req, .err = err, .errlen = errlen};
    const struct codec_profile *prof = codec_profile(c);
    int n = codec_n(c);
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (req->placement.holder[i] < 0)
            return fail(&x, -EINVAL, "placement: chunk %d has no holder", i);
    if (req->placement.reader < DEG_GATEWAY)
        return fail(&x, -EINVAL, "placement: bad reader %d", req->placement.reader);
    x.g = deg_graph_create(codec_k(c), n);
    if (!x.g)
        return -ENOMEM;
    char prof_text[64];
    codec_profile_format(prof, prof_text, sizeof(prof_text));
    int rc;
    if (req->op == DEG_OP_ENCODE) {
        snprintf(x.g->desc, sizeof(x.g->desc), "%s encode", prof_text);
        rc = prof->scheme == CODEC_TRIEC ? encode_tripartite(&x) : encode_bipartite(&x);
    } else if (req->op == DEG_OP_UPDATE) {
        if (req->updated < 0 || req->updated >= codec_k(c)) {
            deg_graph_destroy(x.g);
            return fail(&x, -EINVAL, "update: data chunk %d out of range [0,%d)", req->updated,
                        codec_k(c));
        }
        snprintf(x.g->desc, sizeof(x.g->desc), "%s update chunk=%d", prof_text, req->updated);
        rc = update_delta(&x);
    } else {
        if (req->nerased < 1 || req->nerased > n) {
            deg_graph_destroy(x.g);
            return fail(&x, -EINVAL, "decode: give 1 to %d erased chunks", n);
        }
        bool available[CODEC_MAX_CHUNKS];
        for (int i = 0; i < n; i++)
            available[i] = !req->unavailable[i];
        size_t off = (size_t)snprintf(x.g->desc, sizeof(x.g->desc), "%s decode lost=", prof_text);
        for (int e = 0; e < req->nerased; e++) {
            if (req->erased[e] < 0 || req->erased[e] >= n) {
                deg_graph_destroy(x.g);
                return fail(&x, -EINVAL, "decode: erased chunk %d out of range [0,%d)",
                            req->erased[e], n);
            }
            available[req->erased[e]] = false;
            if (off < sizeof(x.g->desc))
                off += (size_t)snprintf(x.g->desc + off, sizeof(x.g->desc) - off, "%s%d",
                                        e ? "," : "", req->erased[e]);
        }
        struct codec_plan *plan;
        rc = codec_plan_create(c, req->erased, req->nerased, available, &plan, err, errlen);
        if (rc) {
            deg_graph_destroy(x.g);
            return rc;
        }
        switch (prof->scheme) {
        case CODEC_PPR:
            rc = decode_tree(&x, plan);
            break;
        case CODEC_ECPIPE:
            rc = decode_chain(&x, plan);
            break;
        case CODEC_TRIEC:
            rc = decode_tripartite(&x, plan);
            break;
        default:
            rc = decode_star(&x, plan);
        }
        codec_plan_destroy(plan);
    }
    if (rc < 0)
        rc = fail(&x, rc, "building the graph failed: %s", strerror(-rc));
    else
        rc = deg_validate(x.g, err, errlen);
    if (rc < 0) {
        deg_graph_destroy(x.g);
        return rc;
    }
    *out = x.g;
    return 0;
}
