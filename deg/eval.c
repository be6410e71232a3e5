/* deg_eval: a graph's meaning, computed in place with the codecs layer's math. */
#include "deg/deg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/gf.h"

/* The buffer holding value `ref` of vertex v; outs[v] are that vertex's rows. */
static uint8_t *value(const struct deg_graph *g, uint8_t *const *chunks, uint8_t ***outs, int v,
                      struct deg_ref ref)
{
    const struct deg_vertex *x = &g->vertices[v];
    switch (ref.kind) {
    case DEG_LOCAL:
        return chunks[x->local[ref.index]];
    case DEG_OUT:
        return outs[v][ref.index];
    case DEG_IN: {
        const struct deg_edge *e = &g->edges[x->in[ref.index]];
        return value(g, chunks, outs, e->from, e->src);
    }
    }
    return NULL;
}

int deg_eval(const struct deg_graph *g, size_t len, uint8_t *const *chunks, deg_result_fn result,
             void *arg, char *err, size_t errlen)
{
    int rc = deg_validate(g, err, errlen);
    if (rc)
        return rc;
    int *order = malloc((size_t)g->nvertices * sizeof(int));
    uint8_t ***outs = calloc((size_t)g->nvertices, sizeof(*outs));
    if (!order || !outs) {
        rc = -ENOMEM;
        goto out;
    }
    deg_topo_order(g, order);
    for (int i = 0; i < g->nvertices && rc == 0; i++) {
        int v = order[i];
        const struct deg_vertex *x = &g->vertices[v];
        int cols = x->nlocal + x->nin;
        if (x->nrows) {
            uint8_t **srcs = malloc((size_t)cols * sizeof(*srcs));
            uint8_t *tables = malloc((size_t)x->nrows * (size_t)cols * CODEC_GF_TABLE_BYTES);
            outs[v] = calloc((size_t)x->nrows, sizeof(**outs));
            if (!srcs || !tables || !outs[v]) {
                free(srcs);
                free(tables);
                rc = -ENOMEM;
                break;
            }
            for (int r = 0; r < x->nrows && rc == 0; r++)
                if (!(outs[v][r] = malloc(len ? len : 1)))
                    rc = -ENOMEM;
            for (int c = 0; c < x->nlocal; c++)
                srcs[c] = value(g, chunks, outs, v, deg_local(c));
            for (int c = 0; c < x->nin; c++)
                srcs[x->nlocal + c] = value(g, chunks, outs, v, deg_in(c));
            if (rc == 0) {
                codec_gf_init_tables(x->nrows, cols, x->coeffs, tables);
                codec_gf_encode(len, x->nrows, cols, tables, srcs, outs[v]);
            }
            free(srcs);
            free(tables);
        }
        for (int r = 0; r < x->nresults && rc == 0; r++) {
            struct deg_label label;
            deg_value_label(g, v, x->results[r], &label);
            result(arg, g, v, label, value(g, chunks, outs, v, x->results[r]), len);
        }
    }
out:
    for (int v = 0; outs && v < g->nvertices; v++) {
        for (int r = 0; outs[v] && r < g->vertices[v].nrows; r++)
            free(outs[v][r]);
        free(outs[v]);
    }
    free(outs);
    free(order);
    return rc;
}
