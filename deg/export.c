/*
 * A graph as JSON (what a gateway sends a node to set up its vertex; parsed
 * back by deg_from_json), as Graphviz DOT, and as text.
 *
 * {"desc": "...", "k": 6, "n": 9, "slice": 0,
 *  "vertices": [{"name": "c1", "node": 1, "prim": "ec-send", "local": [1],
 *                "rows": [{"chunk": 2, "partial": true, "coeffs": [142]}],
 *                "results": ["out:0"]}, ...],
 *  "edges": [{"from": "c1", "src": "out:0", "to": "c2"}, ...]}
 *
 * "node" is a node id or "gateway". "prim" is informative (it follows from
 * the graph) and ignored when parsing. Edges are listed in id order, so each
 * destination sees its inputs in the same slots after a round trip.
 */
#include "deg/deg.h"
#include "codecs/errf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static json_t *vertex_json(const struct deg_vertex *v)
{
    json_t *o = json_object(), *local = json_array(), *rows = json_array(), *res = json_array();
    json_object_set_new(o, "name", json_string(v->name));
    json_object_set_new(o, "node",
                        v->node == DEG_GATEWAY ? json_string("gateway") : json_integer(v->node));
    json_object_set_new(o, "prim", json_string(deg_vertex_prim_name(v)));
    for (int i = 0; i < v->nlocal; i++)
        json_array_append_new(local, json_integer(v->local[i]));
    json_object_set_new(o, "local", local);
    int cols = v->ncols;
    for (int r = 0; r < v->nrows; r++) {
        json_t *row = json_object(), *coeffs = json_array();
        for (int c = 0; c < cols; c++)
            json_array_append_new(coeffs,
                                  json_integer(v->coeffs[(size_t)r * (size_t)cols + (size_t)c]));
        json_object_set_new(row, "chunk", json_integer(v->labels[r].chunk));
        json_object_set_new(row, "partial", json_boolean(v->labels[r].partial));
        json_object_set_new(row, "coeffs", coeffs);
        json_array_append_new(rows, row);
    }
    json_object_set_new(o, "rows", rows);
    for (int r = 0; r < v->nresults; r++) {
        char ref[32];
        deg_ref_format(v->results[r], ref, sizeof(ref));
        json_array_append_new(res, json_string(ref));
    }
    json_object_set_new(o, "results", res);
    return o;
}

char *deg_to_json(const struct deg_graph *g)
{
    json_t *root = json_object(), *vs = json_array(), *es = json_array();
    json_object_set_new(root, "desc", json_string(g->desc));
    json_object_set_new(root, "k", json_integer(g->k));
    json_object_set_new(root, "n", json_integer(g->n));
    json_object_set_new(root, "slice", json_integer((json_int_t)g->slice));
    for (int i = 0; i < g->nvertices; i++)
        json_array_append_new(vs, vertex_json(&g->vertices[i]));
    for (int i = 0; i < g->nedges; i++) {
        const struct deg_edge *e = &g->edges[i];
        char ref[32];
        deg_ref_format(e->src, ref, sizeof(ref));
        json_t *o = json_object();
        bool ok = e->from >= 0 && e->from < g->nvertices && e->to >= 0 && e->to < g->nvertices;
        json_object_set_new(o, "from", ok ? json_string(g->vertices[e->from].name) : json_null());
        json_object_set_new(o, "src", json_string(ref));
        json_object_set_new(o, "to", ok ? json_string(g->vertices[e->to].name) : json_null());
        json_array_append_new(es, o);
    }
    json_object_set_new(root, "vertices", vs);
    json_object_set_new(root, "edges", es);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

static int parse_vertex(struct deg_graph *g, json_t *o, int idx, char *err, size_t errlen)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *node = json_object_get(o, "node");
    if (!name)
        return codec_errf(err, errlen, -EINVAL, "vertex %d: no \"name\"", idx);
    int id;
    if (json_is_integer(node) && json_integer_value(node) >= 0 &&
        json_integer_value(node) < 1 << 30)
        id = (int)json_integer_value(node);
    else if (json_is_string(node) && strcmp(json_string_value(node), "gateway") == 0)
        id = DEG_GATEWAY;
    else
        return codec_errf(err, errlen, -EINVAL, "vertex %s: \"node\" must be an id or \"gateway\"",
                          name);
    int v = deg_add_vertex(g, name, id);
    if (v == -EEXIST)
        return codec_errf(err, errlen, v, "vertex %s: name used twice", name);
    if (v < 0)
        return codec_errf(err, errlen, v, "vertex %d: bad name", idx);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(o, "local"), i, x)
    {
        if (!json_is_integer(x) || deg_add_local(g, v, (int)json_integer_value(x)) < 0)
            return codec_errf(err, errlen, -EINVAL, "vertex %s: bad local chunk %zu", name, i);
    }
    return 0;
}

/* Rows and results, once every input edge of the vertex is known. */
static int parse_calc(struct deg_graph *g, json_t *o, int v, char *err, size_t errlen)
{
    const struct deg_vertex *x = &g->vertices[v];
    json_t *rows = json_object_get(o, "rows");
    size_t nrows = json_array_size(rows), cols = (size_t)(x->nlocal + x->nin);
    if (nrows > CODEC_MAX_CHUNKS)
        return codec_errf(err, errlen, -EINVAL, "vertex %s: too many rows", x->name);
    uint8_t *coeffs = calloc(nrows * cols + 1, 1);
    struct deg_label *labels = calloc(nrows + 1, sizeof(*labels));
    int rc = coeffs && labels ? 0 : -ENOMEM;
    for (size_t r = 0; r < nrows && rc == 0; r++) {
        json_t *row = json_array_get(rows, r), *cs = json_object_get(row, "coeffs");
        json_t *chunk = json_object_get(row, "chunk");
        if (!json_is_integer(chunk) || !json_is_array(cs))
            rc = codec_errf(err, errlen, -EINVAL,
                            "vertex %s: row %zu needs \"chunk\" and \"coeffs\"", x->name, r);
        else if (json_array_size(cs) != cols)
            rc = codec_errf(err, errlen, -EINVAL,
                            "vertex %s: row %zu has %zu coefficients for %zu inputs (%d local, %d "
                            "received)",
                            x->name, r, json_array_size(cs), cols, x->nlocal, x->nin);
        for (size_t c = 0; c < cols && rc == 0; c++) {
            json_t *cv = json_array_get(cs, c);
            if (!json_is_integer(cv) || json_integer_value(cv) < 0 || json_integer_value(cv) > 255)
                rc = codec_errf(err, errlen, -EINVAL,
                                "vertex %s: row %zu coefficient %zu is not a byte", x->name, r, c);
            else
                coeffs[r * cols + c] = (uint8_t)json_integer_value(cv);
        }
        if (rc == 0)
            labels[r] = (struct deg_label){(int)json_integer_value(chunk),
                                           json_is_true(json_object_get(row, "partial"))};
    }
    if (rc == 0)
        rc = deg_set_calc(g, v, (int)nrows, coeffs, labels);
    free(coeffs);
    free(labels);
    size_t i;
    json_t *res;
    json_array_foreach(json_object_get(o, "results"), i, res)
    {
        struct deg_ref ref;
        if (rc)
            break;
        if (!json_is_string(res) || deg_ref_parse(json_string_value(res), &ref))
            rc = codec_errf(err, errlen, -EINVAL, "vertex %s: result %zu is not like \"out:0\"",
                            g->vertices[v].name, i);
        else
            rc = deg_add_result(g, v, ref) < 0 ? -ENOMEM : 0;
    }
    return rc;
}

static int parse_edge(struct deg_graph *g, json_t *o, size_t idx, char *err, size_t errlen)
{
    const char *from = json_string_value(json_object_get(o, "from"));
    const char *to = json_string_value(json_object_get(o, "to"));
    const char *src = json_string_value(json_object_get(o, "src"));
    struct deg_ref ref;
    if (!from || !to || !src)
        return codec_errf(err, errlen, -EINVAL, "edge %zu: needs \"from\", \"src\" and \"to\"",
                          idx);
    if (deg_ref_parse(src, &ref))
        return codec_errf(err, errlen, -EINVAL, "edge %zu from vertex %s: bad \"src\" '%s'", idx,
                          from, src);
    int f = deg_find_vertex(g, from), t = deg_find_vertex(g, to);
    if (f < 0 || t < 0)
        return codec_errf(err, errlen, -EINVAL, "edge %zu: dangling, vertex %s does not exist", idx,
                          f < 0 ? from : to);
    return deg_add_edge(g, f, ref, t) < 0 ? -ENOMEM : 0;
}

int deg_from_json(const char *text, struct deg_graph **out, char *err, size_t errlen)
{
    json_error_t jerr;
    *out = NULL;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root)
        return codec_errf(err, errlen, -EINVAL, "graph JSON, line %d: %s", jerr.line, jerr.text);
    json_t *k = json_object_get(root, "k"), *n = json_object_get(root, "n");
    json_t *vs = json_object_get(root, "vertices"), *es = json_object_get(root, "edges");
    json_t *slice = json_object_get(root, "slice");
    struct deg_graph *g = NULL;
    int rc = 0;
    if (!json_is_integer(k) || !json_is_integer(n) || !json_is_array(vs) || !json_is_array(es) ||
        (slice && (!json_is_integer(slice) || json_integer_value(slice) < 0)))
        rc = codec_errf(err, errlen, -EINVAL,
                        "graph JSON needs integers k, n, slice and arrays "
                        "vertices, edges");
    else if (!(g = deg_graph_create((int)json_integer_value(k), (int)json_integer_value(n))))
        rc = codec_errf(err, errlen, -EINVAL, "graph JSON: bad k or n");
    if (rc == 0) {
        snprintf(g->desc, sizeof(g->desc), "%s",
                 json_string_value(json_object_get(root, "desc")) ?: "");
        g->slice = slice ? (size_t)json_integer_value(slice) : 0;
    }
    size_t i;
    json_t *x;
    json_array_foreach(vs, i, x)
    {
        if (rc == 0)
            rc = parse_vertex(g, x, (int)i, err, errlen);
    }
    json_array_foreach(es, i, x)
    {
        if (rc == 0)
            rc = parse_edge(g, x, i, err, errlen);
    }
    json_array_foreach(vs, i, x)
    {
        if (rc == 0)
            rc = parse_calc(g, x, (int)i, err, errlen);
    }
    json_decref(root);
    if (rc == 0)
        rc = deg_validate(g, err, errlen);
    if (rc) {
        deg_graph_destroy(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* A growing heap string. */
struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0 || b->oom)
            return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static char *done(struct buf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static void label_text(char *buf, size_t len, struct deg_label l)
{
    snprintf(buf, len, l.partial ? "part c%d" : "c%d", l.chunk);
}

static void node_text(char *buf, size_t len, int node)
{
    if (node == DEG_GATEWAY)
        snprintf(buf, len, "gateway");
    else
        snprintf(buf, len, "node %d", node);
}

char *deg_to_dot(const struct deg_graph *g)
{
    struct buf b = {0};
    put(&b, "digraph deg {\n  rankdir=LR;\n  label=\"%s\";\n  node [shape=box];\n", g->desc);
    for (int i = 0; i < g->nvertices; i++) {
        const struct deg_vertex *v = &g->vertices[i];
        char where[32];
        node_text(where, sizeof(where), v->node);
        put(&b, "  \"%s\" [label=\"%s\\n%s\\n%s\"%s];\n", v->name, v->name, where,
            deg_vertex_prim_name(v), v->nresults ? ", peripheries=2" : "");
    }
    for (int i = 0; i < g->nedges; i++) {
        const struct deg_edge *e = &g->edges[i];
        struct deg_label l = {0, false};
        char text[32] = "?";
        if (deg_value_label(g, e->from, e->src, &l))
            label_text(text, sizeof(text), l);
        put(&b, "  \"%s\" -> \"%s\" [label=\"%s%s\"%s];\n", g->vertices[e->from].name,
            g->vertices[e->to].name, text, g->slice ? " (sliced)" : "",
            l.partial ? ", style=dashed" : "");
    }
    put(&b, "}\n");
    return done(&b);
}

char *deg_to_text(const struct deg_graph *g)
{
    struct buf b = {0};
    put(&b, "%s: %d vertices, %d edges, depth %d", g->desc, g->nvertices, g->nedges, deg_depth(g));
    if (g->slice)
        put(&b, ", slices of %zu bytes", g->slice);
    put(&b, "\n%-8s %-9s %-14s %-7s %-22s %s\n", "vertex", "where", "primitive", "local",
        "receives from", "sends to / keeps");
    for (int i = 0; i < g->nvertices; i++) {
        const struct deg_vertex *v = &g->vertices[i];
        char where[32], text[32];
        struct buf loc = {0}, in = {0}, out = {0};
        node_text(where, sizeof(where), v->node);
        for (int j = 0; j < v->nlocal; j++)
            put(&loc, "%sc%d", j ? "," : "", v->local[j]);
        for (int j = 0; j < v->nin; j++) {
            struct deg_label l;
            deg_value_label(g, i, deg_in(j), &l);
            label_text(text, sizeof(text), l);
            put(&in, "%s%s(%s)", j ? " " : "", g->vertices[g->edges[v->in[j]].from].name, text);
        }
        for (int j = 0; j < v->nout_edges; j++) {
            const struct deg_edge *e = &g->edges[v->out[j]];
            struct deg_label l;
            deg_value_label(g, i, e->src, &l);
            label_text(text, sizeof(text), l);
            put(&out, "%s%s(%s)", j ? " " : "", g->vertices[e->to].name, text);
        }
        for (int j = 0; j < v->nresults; j++) {
            struct deg_label l;
            deg_value_label(g, i, v->results[j], &l);
            label_text(text, sizeof(text), l);
            put(&out, "%skeep %s", out.len ? " " : "", text);
        }
        put(&b, "%-8s %-9s %-14s %-7s %-22s %s\n", v->name, where, deg_vertex_prim_name(v),
            loc.len ? loc.p : "-", in.len ? in.p : "-", out.len ? out.p : "-");
        free(loc.p);
        free(in.p);
        free(out.p);
    }
    return done(&b);
}
