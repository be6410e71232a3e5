/*
 * Decode plans: which survivors to read, and the coefficients that rebuild
 * each erased chunk from them. The planner takes survivors in the scheme's
 * preferred order, keeps those that add rank (Gaussian elimination), and stops
 * as soon as every erased generator row lies in their span; a pattern whose
 * erased rows never do is unrecoverable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "codecs/gf.h"
#include "codecs/internal.h"

struct plan {
    struct codec_plan pub; /* first: codec_plan pointers are plan pointers */
    uint8_t *tables;       /* expanded coeffs, for the non-XOR paths */
};

/* Elimination state. Basis row b has its pivot column at piv[b] normalised
 * to 1, zeros at the pivots of earlier rows, and equals sum_t comb[b][t] *
 * gen[sel[t]]. Remainders of the erased rows are kept reduced the same way. */
struct elim {
    int k, rank;
    int sel[CODEC_MAX_CHUNKS];
    int piv[CODEC_MAX_CHUNKS];
    uint8_t *row;   /* rank x k */
    uint8_t *comb;  /* rank x k: over sel */
    uint8_t *rem;   /* nerased x k */
    uint8_t *rcomb; /* nerased x k */
};

/* Rows are mostly sparse (identity rows, unit combinations): skip zeros. */
static void axpy(uint8_t *y, uint8_t a, const uint8_t *x, int n)
{
    for (int i = 0; i < n; i++)
        if (x[i])
            y[i] ^= a == 1 ? x[i] : codec_gf_mul(a, x[i]);
}

static bool is_zero(const uint8_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i])
            return false;
    return true;
}

/* Reduces v (with combination vc) against every basis row. */
static void reduce(const struct elim *el, uint8_t *v, uint8_t *vc)
{
    for (int b = 0; b < el->rank; b++) {
        uint8_t f = v[el->piv[b]];
        if (f) {
            axpy(v, f, el->row + (size_t)b * (size_t)el->k, el->k);
            axpy(vc, f, el->comb + (size_t)b * (size_t)el->k, el->k);
        }
    }
}

/* Adds chunk `chunk` (generator row g) if it raises the rank. */
static bool try_add(struct elim *el, int chunk, const uint8_t *g, int nerased)
{
    int k = el->k, b = el->rank;
    uint8_t *v = el->row + (size_t)b * (size_t)k, *vc = el->comb + (size_t)b * (size_t)k;
    memcpy(v, g, (size_t)k);
    memset(vc, 0, (size_t)k);
    vc[b] = 1;
    reduce(el, v, vc);
    int p = 0;
    while (p < k && !v[p])
        p++;
    if (p == k)
        return false;
    uint8_t inv = codec_gf_inv(v[p]);
    for (int i = 0; i < k; i++) {
        v[i] = codec_gf_mul(inv, v[i]);
        vc[i] = codec_gf_mul(inv, vc[i]);
    }
    el->piv[b] = p;
    el->sel[b] = chunk;
    el->rank++;
    for (int e = 0; e < nerased; e++) {
        uint8_t *r = el->rem + (size_t)e * (size_t)k;
        uint8_t f = r[p];
        if (f) {
            axpy(r, f, v, k);
            axpy(el->rcomb + (size_t)e * (size_t)k, f, vc, k);
        }
    }
    return true;
}

static bool all_in_span(const struct elim *el, int nerased)
{
    for (int e = 0; e < nerased; e++)
        if (!is_zero(el->rem + (size_t)e * (size_t)el->k, el->k))
            return false;
    return true;
}

static int validate(const struct codec *c, const int *erased, int nerased, const bool *available,
                    struct codec_plan **out, char *err, size_t errlen)
{
    if (!c || !out || !erased)
        return codec_errf(err, errlen, -EINVAL, "plan: NULL codec, erased list or output");
    if (nerased < 1)
        return codec_errf(err, errlen, -EINVAL, "plan: nothing to rebuild (nerased=%d)", nerased);
    if (nerased > c->n)
        return codec_errf(err, errlen, -EINVAL, "plan: %d erasures but only %d chunks", nerased,
                          c->n);
    bool seen[CODEC_MAX_CHUNKS] = {false};
    for (int e = 0; e < nerased; e++) {
        int i = erased[e];
        if (i < 0 || i >= c->n)
            return codec_errf(err, errlen, -EINVAL, "plan: erased chunk %d out of range [0,%d)", i,
                              c->n);
        if (seen[i])
            return codec_errf(err, errlen, -EINVAL, "plan: chunk %d erased twice", i);
        if (available && available[i])
            return codec_errf(err, errlen, -EINVAL, "plan: chunk %d both erased and available", i);
        seen[i] = true;
    }
    if (nerased > c->m)
        return codec_errf(err, errlen, -EIO,
                          "plan: %d chunks erased, more than the %d parities can rebuild", nerased,
                          c->m);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int codec_plan_create(const struct codec *c, const int *erased, int nerased, const bool *available,
                      struct codec_plan **out, char *err, size_t errlen)
{
    int rc = validate(c, erased, nerased, available, out, err, errlen);
    if (rc < 0)
        return rc;
    *out = NULL;
    bool avail[CODEC_MAX_CHUNKS];
    for (int i = 0; i < c->n; i++)
        avail[i] = available ? available[i] : true;
    for (int e = 0; e < nerased; e++)
        avail[erased[e]] = false;

    int k = c->k;
    struct elim el = {.k = k};
    uint8_t *scratch = calloc(2 * ((size_t)k + (size_t)nerased), (size_t)k);
    el.row = scratch;
    el.comb = el.row + (size_t)k * (size_t)k;
    el.rem = el.comb + (size_t)k * (size_t)k;
    el.rcomb = el.rem + (size_t)nerased * (size_t)k;
    struct plan *pl = calloc(1, sizeof(*pl));
    if (!scratch || !pl) {
        rc = codec_errf(err, errlen, -ENOMEM, "plan: out of memory");
        goto out;
    }
    for (int e = 0; e < nerased; e++)
        memcpy(el.rem + (size_t)e * (size_t)k, c->gen + (size_t)erased[e] * (size_t)k, (size_t)k);

    int order[CODEC_MAX_CHUNKS];
    int norder = c->ops->read_order(c, erased, nerased, avail, order);
    for (int o = 0; o < norder && !all_in_span(&el, nerased); o++)
        try_add(&el, order[o], c->gen + (size_t)order[o] * (size_t)k, nerased);
    if (!all_in_span(&el, nerased)) {
        char what[64];
        codec_profile_format(&c->prof, what, sizeof(what));
        rc = codec_errf(err, errlen, -EIO,
                        "plan: %s cannot rebuild this pattern: the %d readable chunks span "
                        "rank %d of %d",
                        what, norder, el.rank, k);
        goto out;
    }

    struct codec_plan *p = &pl->pub;
    p->nerased = nerased;
    memcpy(p->erased, erased, (size_t)nerased * sizeof(int));
    p->nsurvivors = el.rank;
    memcpy(p->survivors, el.sel, (size_t)el.rank * sizeof(int));
    qsort(p->survivors, (size_t)el.rank, sizeof(int), cmp_int);
    p->coeffs = calloc((size_t)nerased * (size_t)el.rank + 1, 1);
    pl->tables = malloc(((size_t)nerased * (size_t)el.rank + 1) * CODEC_GF_TABLE_BYTES);
    if (!p->coeffs || !pl->tables) {
        rc = codec_errf(err, errlen, -ENOMEM, "plan: out of memory");
        goto out;
    }
    p->xor_only = true;
    for (int t = 0; t < el.rank; t++) {
        int s = 0;
        while (p->survivors[s] != el.sel[t])
            s++;
        for (int e = 0; e < nerased; e++) {
            uint8_t v = el.rcomb[(size_t)e * (size_t)k + (size_t)t];
            p->coeffs[(size_t)e * (size_t)el.rank + (size_t)s] = v;
            if (v > 1)
                p->xor_only = false;
        }
    }
    codec_gf_init_tables(nerased, el.rank, p->coeffs, pl->tables);
    *out = p;
    pl = NULL;
    rc = 0;
out:
    if (pl)
        codec_plan_destroy(&pl->pub);
    free(scratch);
    return rc;
}

void codec_plan_destroy(struct codec_plan *p)
{
    if (!p)
        return;
    struct plan *pl = (struct plan *)p;
    free(pl->tables);
    free(p->coeffs);
    free(pl);
}

int codec_plan_apply(const struct codec_plan *p, size_t len, uint8_t *const *srcs,
                     uint8_t *const *outs)
{
    if (!p || !srcs || !outs)
        return -EINVAL;
    for (int s = 0; s < p->nsurvivors; s++)
        if (!srcs[s])
            return -EINVAL;
    for (int e = 0; e < p->nerased; e++)
        if (!outs[e])
            return -EINVAL;
    if (len == 0)
        return 0;
    if (!p->xor_only) {
        codec_gf_encode(len, p->nerased, p->nsurvivors, ((const struct plan *)p)->tables, srcs,
                        outs);
        return 0;
    }
    for (int e = 0; e < p->nerased; e++) {
        uint8_t *v[CODEC_MAX_CHUNKS];
        int nv = 0;
        for (int s = 0; s < p->nsurvivors; s++)
            if (p->coeffs[(size_t)e * (size_t)p->nsurvivors + (size_t)s])
                v[nv++] = srcs[s];
        if (nv == 0)
            memset(outs[e], 0, len);
        else
            codec_xor(len, nv, v, outs[e]);
    }
    return 0;
}

void codec_plan_partial(const struct codec_plan *p, int s, size_t len, const uint8_t *src,
                        uint8_t *const *accs)
{
    if (!p || !src || !accs || s < 0 || s >= p->nsurvivors || len == 0)
        return;
    if (!p->xor_only) {
        codec_gf_encode_update(len, p->nerased, p->nsurvivors, s, ((const struct plan *)p)->tables,
                               src, accs);
        return;
    }
    for (int e = 0; e < p->nerased; e++)
        if (p->coeffs[(size_t)e * (size_t)p->nsurvivors + (size_t)s]) {
            uint8_t *v[2] = {accs[e], (uint8_t *)src};
            codec_xor(len, 2, v, accs[e]);
        }
}
