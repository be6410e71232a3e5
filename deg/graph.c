/* The graph: construction, validation, and the primitive picker. */
#include "deg/deg.h"
#include "codecs/errf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, int count, size_t elem)
{
    if (count < *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return -ENOMEM;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Appends x to a vertex's int array (their capacity is their count rounded
 * up to a power of two, so no separate capacity field is needed). */
static int push_int(int **arr, int *count, int x)
{
    int n = *count;
    if (n == 0 || (n & (n - 1)) == 0) {
        int *p = realloc(*arr, (size_t)(n ? 2 * n : 1) * sizeof(int));
        if (!p)
            return -ENOMEM;
        *arr = p;
    }
    (*arr)[n] = x;
    *count = n + 1;
    return n;
}

struct deg_graph *deg_graph_create(int k, int n)
{
    if (k < 1 || n < k || n > CODEC_MAX_CHUNKS)
        return NULL;
    struct deg_graph *g = calloc(1, sizeof(*g));
    if (g) {
        g->k = k;
        g->n = n;
    }
    return g;
}

void deg_graph_destroy(struct deg_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nvertices; i++) {
        struct deg_vertex *v = &g->vertices[i];
        free(v->local);
        free(v->in);
        free(v->out);
        free(v->coeffs);
        free(v->labels);
        free(v->results);
    }
    free(g->vertices);
    free(g->edges);
    free(g);
}

int deg_add_vertex(struct deg_graph *g, const char *name, int node)
{
    if (!name || !*name || strlen(name) >= DEG_NAME_MAX || node < DEG_GATEWAY)
        return -EINVAL;
    if (deg_find_vertex(g, name) >= 0)
        return -EEXIST;
    if (grow((void **)&g->vertices, &g->cap_vertices, g->nvertices, sizeof(*g->vertices)))
        return -ENOMEM;
    struct deg_vertex *v = &g->vertices[g->nvertices];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->node = node;
    return g->nvertices++;
}

int deg_add_local(struct deg_graph *g, int v, int chunk)
{
    if (v < 0 || v >= g->nvertices || chunk < 0 || chunk >= g->n)
        return -EINVAL;
    struct deg_vertex *x = &g->vertices[v];
    return push_int(&x->local, &x->nlocal, chunk);
}

int deg_add_edge(struct deg_graph *g, int from, struct deg_ref src, int to)
{
    if (from < 0 || from >= g->nvertices || to < 0 || to >= g->nvertices)
        return -EINVAL;
    if (grow((void **)&g->edges, &g->cap_edges, g->nedges, sizeof(*g->edges)))
        return -ENOMEM;
    struct deg_vertex *f = &g->vertices[from], *t = &g->vertices[to];
    int id = g->nedges;
    int slot = push_int(&t->in, &t->nin, id);
    if (slot < 0 || push_int(&f->out, &f->nout_edges, id) < 0)
        return -ENOMEM;
    g->edges[id] = (struct deg_edge){.from = from, .to = to, .src = src, .slot = slot};
    g->nedges++;
    return id;
}

int deg_set_calc(struct deg_graph *g, int v, int nrows, const uint8_t *coeffs,
                 const struct deg_label *labels)
{
    if (v < 0 || v >= g->nvertices || nrows < 0 || nrows > CODEC_MAX_CHUNKS)
        return -EINVAL;
    struct deg_vertex *x = &g->vertices[v];
    int cols = x->nlocal + x->nin;
    uint8_t *c = NULL;
    struct deg_label *l = NULL;
    if (nrows) {
        c = malloc((size_t)nrows * (size_t)(cols ? cols : 1));
        l = malloc((size_t)nrows * sizeof(*l));
        if (!c || !l) {
            free(c);
            free(l);
            return -ENOMEM;
        }
        memcpy(c, coeffs, (size_t)nrows * (size_t)cols);
        memcpy(l, labels, (size_t)nrows * sizeof(*l));
    }
    free(x->coeffs);
    free(x->labels);
    x->coeffs = c;
    x->labels = l;
    x->nrows = nrows;
    x->ncols = nrows ? cols : 0;
    return 0;
}

int deg_add_result(struct deg_graph *g, int v, struct deg_ref ref)
{
    if (v < 0 || v >= g->nvertices)
        return -EINVAL;
    struct deg_vertex *x = &g->vertices[v];
    int n = x->nresults;
    if (n == 0 || (n & (n - 1)) == 0) {
        struct deg_ref *p = realloc(x->results, (size_t)(n ? 2 * n : 1) * sizeof(*p));
        if (!p)
            return -ENOMEM;
        x->results = p;
    }
    x->results[n] = ref;
    x->nresults = n + 1;
    return n;
}

int deg_find_vertex(const struct deg_graph *g, const char *name)
{
    for (int i = 0; i < g->nvertices; i++)
        if (strcmp(g->vertices[i].name, name) == 0)
            return i;
    return -ENOENT;
}

static bool ref_valid(const struct deg_vertex *v, struct deg_ref ref)
{
    switch (ref.kind) {
    case DEG_LOCAL:
        return ref.index >= 0 && ref.index < v->nlocal;
    case DEG_IN:
        return ref.index >= 0 && ref.index < v->nin;
    case DEG_OUT:
        return ref.index >= 0 && ref.index < v->nrows;
    }
    return false;
}

/* Kahn's algorithm: returns how many vertices it could order (all of them
 * unless there is a cycle). Every edge's endpoints must exist. */
static int kahn(const struct deg_graph *g, int *order)
{
    int *indeg = calloc((size_t)g->nvertices + 1, sizeof(int));
    if (!indeg)
        return -ENOMEM;
    for (int i = 0; i < g->nvertices; i++)
        indeg[i] = g->vertices[i].nin;
    int head = 0, tail = 0;
    for (int i = 0; i < g->nvertices; i++)
        if (indeg[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        const struct deg_vertex *v = &g->vertices[order[head++]];
        for (int j = 0; j < v->nout_edges; j++) {
            int to = g->edges[v->out[j]].to;
            if (--indeg[to] == 0)
                order[tail++] = to;
        }
    }
    free(indeg);
    return tail;
}

int deg_topo_order(const struct deg_graph *g, int *order)
{
    int n = kahn(g, order);
    return n < 0 ? n : n == g->nvertices ? 0 : -ELOOP;
}

bool deg_value_label(const struct deg_graph *g, int v, struct deg_ref ref, struct deg_label *out)
{
    /* Inputs are followed back along their edges; a cycle cannot loop
     * forever because each step needs a distinct edge. */
    for (int steps = 0; steps <= g->nedges; steps++) {
        if (v < 0 || v >= g->nvertices)
            return false;
        const struct deg_vertex *x = &g->vertices[v];
        if (!ref_valid(x, ref))
            return false;
        switch (ref.kind) {
        case DEG_LOCAL:
            *out = (struct deg_label){x->local[ref.index], false};
            return true;
        case DEG_OUT:
            *out = x->labels[ref.index];
            return true;
        case DEG_IN: {
            const struct deg_edge *e = &g->edges[x->in[ref.index]];
            v = e->from;
            ref = e->src;
            break;
        }
        }
    }
    return false;
}

/* The XOR calculator computes one sum of its inputs; anything else (several
 * rows, any coefficient but 1) needs the EC calculator. */
enum deg_calc deg_vertex_calc(const struct deg_vertex *v)
{
    if (v->nrows == 0)
        return DEG_CALC_NONE;
    if (v->nrows > 1)
        return DEG_CALC_EC;
    for (int c = 0; c < v->ncols; c++)
        if (v->coeffs[c] != 1)
            return DEG_CALC_EC;
    return DEG_CALC_XOR;
}

enum deg_prim deg_vertex_prim(const struct deg_vertex *v)
{
    bool calc = v->nrows > 0;
    if (v->nin == 0 && v->nout_edges == 0)
        return DEG_PRIM_NONE;
    if (v->nin == 0)
        return calc ? DEG_PRIM_EC_SEND : DEG_PRIM_SEND;
    if (v->nout_edges == 0)
        return calc ? DEG_PRIM_RECV_EC : DEG_PRIM_RECV;
    return calc ? DEG_PRIM_RECV_EC_SEND : DEG_PRIM_NONE;
}

const char *deg_calc_name(enum deg_calc calc)
{
    switch (calc) {
    case DEG_CALC_NONE:
        return "none";
    case DEG_CALC_EC:
        return "ec";
    case DEG_CALC_XOR:
        return "xor";
    }
    return "?";
}

const char *deg_vertex_prim_name(const struct deg_vertex *v)
{
    bool x = deg_vertex_calc(v) == DEG_CALC_XOR;
    switch (deg_vertex_prim(v)) {
    case DEG_PRIM_NONE:
        return "none";
    case DEG_PRIM_SEND:
        return "send";
    case DEG_PRIM_EC_SEND:
        return x ? "xor-send" : "ec-send";
    case DEG_PRIM_RECV_EC_SEND:
        return x ? "recv-xor-send" : "recv-ec-send";
    case DEG_PRIM_RECV_EC:
        return x ? "recv-xor" : "recv-ec";
    case DEG_PRIM_RECV:
        return "recv";
    }
    return "?";
}

static const char *const kind_names[] = {"local", "in", "out"};

int deg_ref_format(struct deg_ref ref, char *buf, size_t len)
{
    if ((unsigned)ref.kind > DEG_OUT)
        return snprintf(buf, len, "?:%d", ref.index);
    return snprintf(buf, len, "%s:%d", kind_names[ref.kind], ref.index);
}

int deg_ref_parse(const char *text, struct deg_ref *out)
{
    for (int k = DEG_LOCAL; k <= DEG_OUT; k++) {
        size_t n = strlen(kind_names[k]);
        if (strncmp(text, kind_names[k], n) == 0 && text[n] == ':') {
            char *end;
            long i = strtol(text + n + 1, &end, 10);
            if (end == text + n + 1 || *end || i < 0 || i > 1000000)
                return -EINVAL;
            *out = (struct deg_ref){(enum deg_value)k, (int)i};
            return 0;
        }
    }
    return -EINVAL;
}

int deg_validate(const struct deg_graph *g, char *err, size_t errlen)
{
    if (g->nvertices == 0)
        return codec_errf(err, errlen, -EINVAL, "graph has no vertices");
    for (int i = 0; i < g->nedges; i++) {
        const struct deg_edge *e = &g->edges[i];
        char ref[32];
        deg_ref_format(e->src, ref, sizeof(ref));
        if (e->from < 0 || e->from >= g->nvertices)
            return codec_errf(err, errlen, -EINVAL, "edge %d comes from no vertex (%d)", i,
                              e->from);
        const char *from = g->vertices[e->from].name;
        if (e->to < 0 || e->to >= g->nvertices)
            return codec_errf(err, errlen, -EINVAL, "edge %d from vertex %s goes to no vertex (%d)",
                              i, from, e->to);
        if (e->slot < 0)
            return codec_errf(err, errlen, -EINVAL,
                              "edge %d from vertex %s: added before vertex %s", i, from,
                              g->vertices[e->to].name);
        if (e->from == e->to)
            return codec_errf(err, errlen, -ELOOP, "edge %d: vertex %s sends to itself", i, from);
        if (!ref_valid(&g->vertices[e->from], e->src))
            return codec_errf(err, errlen, -EINVAL, "edge %d: vertex %s has no value %s", i, from,
                              ref);
    }
    for (int i = 0; i < g->nvertices; i++) {
        const struct deg_vertex *v = &g->vertices[i];
        int cols = v->nlocal + v->nin;
        for (int j = 0; j < v->nlocal; j++)
            if (v->local[j] < 0 || v->local[j] >= g->n)
                return codec_errf(err, errlen, -EINVAL,
                                  "vertex %s: local chunk %d out of range [0,%d)", v->name,
                                  v->local[j], g->n);
        if (v->nrows > 0 && cols == 0)
            return codec_errf(err, errlen, -EINVAL, "vertex %s: calculation has no inputs",
                              v->name);
        if (v->nrows > 0 && v->ncols != cols)
            return codec_errf(
                err, errlen, -EINVAL,
                "vertex %s: calculation takes %d inputs but the vertex has %d (%d local, "
                "%d received)",
                v->name, v->ncols, cols, v->nlocal, v->nin);
        for (int r = 0; r < v->nrows; r++) {
            bool any = false;
            for (int c = 0; c < cols; c++)
                any |= v->coeffs[(size_t)r * (size_t)cols + (size_t)c] != 0;
            if (!any)
                return codec_errf(err, errlen, -EINVAL,
                                  "vertex %s: row %d of its calculation is all zero", v->name, r);
            if (v->labels[r].chunk < 0 || v->labels[r].chunk >= g->n)
                return codec_errf(err, errlen, -EINVAL,
                                  "vertex %s: row %d labelled chunk %d, out of range", v->name, r,
                                  v->labels[r].chunk);
        }
        /* Every received value must feed the calculation or be kept. */
        for (int j = 0; j < v->nin; j++) {
            bool used = false;
            for (int r = 0; r < v->nrows; r++)
                used |= v->coeffs[(size_t)r * (size_t)cols + (size_t)(v->nlocal + j)] != 0;
            for (int r = 0; r < v->nresults; r++)
                used |= v->results[r].kind == DEG_IN && v->results[r].index == j;
            if (!used)
                return codec_errf(
                    err, errlen, -EINVAL,
                    "vertex %s: input %d (edge %d from %s) is not used by its calculation", v->name,
                    j, v->in[j], g->vertices[g->edges[v->in[j]].from].name);
        }
        for (int r = 0; r < v->nresults; r++)
            if (!ref_valid(v, v->results[r])) {
                char ref[32];
                deg_ref_format(v->results[r], ref, sizeof(ref));
                return codec_errf(err, errlen, -EINVAL, "vertex %s: result %s does not exist",
                                  v->name, ref);
            }
        if (deg_vertex_prim(v) == DEG_PRIM_NONE)
            return codec_errf(err, errlen, -EINVAL,
                              v->nin ? "vertex %s receives and sends without computing"
                                     : "vertex %s has no edges",
                              v->name);
        /* A plain receiver that keeps nothing would receive into the void. */
        if (v->nout_edges == 0 && v->nresults == 0)
            return codec_errf(err, errlen, -EINVAL, "vertex %s is a sink with no results", v->name);
    }
    int *order = malloc((size_t)g->nvertices * sizeof(int));
    if (!order)
        return -ENOMEM;
    int rc = kahn(g, order);
    if (rc >= 0 && rc < g->nvertices) {
        /* Every vertex Kahn never released has an unreleased predecessor;
         * walking back n steps through them must land on the cycle. */
        bool *released = calloc((size_t)g->nvertices, 1);
        if (!released) {
            free(order);
            return -ENOMEM;
        }
        for (int i = 0; i < rc; i++)
            released[order[i]] = true;
        int bad = 0;
        while (released[bad])
            bad++;
        for (int step = 0; step < g->nvertices; step++) {
            const struct deg_vertex *v = &g->vertices[bad];
            for (int j = 0; j < v->nin; j++)
                if (!released[g->edges[v->in[j]].from]) {
                    bad = g->edges[v->in[j]].from;
                    break;
                }
        }
        free(released);
        rc = codec_errf(err, errlen, -ELOOP, "cycle through vertex %s", g->vertices[bad].name);
    }
    free(order);
    return rc < 0 ? rc : 0;
}

int deg_depth(const struct deg_graph *g)
{
    int *order = malloc((size_t)g->nvertices * sizeof(int));
    int *depth = calloc((size_t)g->nvertices, sizeof(int));
    int max = -1;
    if (order && depth && deg_topo_order(g, order) == 0) {
        max = 0;
        for (int i = 0; i < g->nvertices; i++) {
            const struct deg_vertex *v = &g->vertices[order[i]];
            for (int j = 0; j < v->nout_edges; j++) {
                int to = g->edges[v->out[j]].to;
                if (depth[to] < depth[order[i]] + 1)
                    depth[to] = depth[order[i]] + 1;
                if (depth[to] > max)
                    max = depth[to];
            }
        }
    }
    free(order);
    free(depth);
    return max;
}
