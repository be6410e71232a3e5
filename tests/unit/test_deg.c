/*
 * deg/: every scheme's graphs compute what the codecs layer computes (for
 * encode, every single loss and every multi-loss pattern the code recovers),
 * vertices pick the primitives of the paper's figures, validation names the
 * bad vertex, and JSON round-trips.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codecs/codec.h"
#include "deg/deg.h"
#include "inec/inec.h"

static const char *const profiles[] = {
    "rs:k=3,m=2",   "rs:k=6,m=3",     "rs:k=12,m=4",     "ppr:k=3,m=2",     "ppr:k=6,m=3",
    "ppr:k=12,m=4", "ecpipe:k=3,m=2", "ecpipe:k=6,m=3",  "ecpipe:k=12,m=4", "tri:k=3,m=2",
    "tri:k=6,m=3",  "tri:k=12,m=4",   "lrc:k=4,l=2,r=2", "lrc:k=6,l=2,r=2", "lrc:k=12,l=2,r=2",
};
#define NPROFILES (sizeof(profiles) / sizeof(profiles[0]))

/* Odd, so slices and word-wise loops get a ragged tail. */
#define LEN 203

/* Device options: mem (NULL), tcp over loopback, and both with the devices
 * sharing a pool of two engine threads. */
#define POOL_MEM "transport=mem,engine_threads=2"
#define TCP      "transport=tcp,listen=127.0.0.1:0"
#define POOL_TCP TCP ",engine_threads=2"

static struct codec *make_codec(const char *text)
{
    struct codec_profile p;
    struct codec *c;
    char err[128];
    assert_int_equal(codec_profile_parse(text, &p, err, sizeof(err)), 0);
    assert_int_equal(codec_create(&p, &c, err, sizeof(err)), 0);
    return c;
}

struct stripe {
    int n;
    uint8_t *chunks[CODEC_MAX_CHUNKS];
};

static void stripe_init(struct stripe *s, const struct codec *c, unsigned seed)
{
    s->n = codec_n(c);
    for (int i = 0; i < s->n; i++) {
        s->chunks[i] = malloc(LEN);
        for (size_t b = 0; b < LEN; b++) {
            seed = seed * 1103515245u + 12345u;
            s->chunks[i][b] = (uint8_t)(seed >> 16);
        }
    }
    assert_int_equal(codec_encode(c, LEN, s->chunks), 0);
}

static void stripe_free(struct stripe *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->chunks[i]);
}

struct check {
    const struct stripe *ref;
    int got[CODEC_MAX_CHUNKS]; /* full results seen per chunk */
    int bad;
};

static void on_result(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                      const uint8_t *data, size_t len)
{
    struct check *ck = arg;
    (void)g;
    (void)v;
    assert_int_equal(len, LEN);
    assert_false(label.partial);
    if (memcmp(data, ck->ref->chunks[label.chunk], LEN) != 0)
        ck->bad++;
    ck->got[label.chunk]++;
}

static void run_and_check(const struct deg_graph *g, const struct stripe *s, const int *erased,
                          int nerased)
{
    struct check ck = {.ref = s};
    /* Erased chunks are garbage in the input: a graph that reads one fails. */
    uint8_t *inputs[CODEC_MAX_CHUNKS];
    uint8_t junk[LEN];
    memset(junk, 0xA5, sizeof(junk));
    for (int i = 0; i < s->n; i++)
        inputs[i] = s->chunks[i];
    for (int e = 0; e < nerased; e++)
        inputs[erased[e]] = junk;
    char err[256] = "";
    int rc = deg_eval(g, LEN, inputs, on_result, &ck, err, sizeof(err));
    if (rc)
        fail_msg("%s: %s", g->desc, err);
    assert_int_equal(ck.bad, 0);
    if (nerased == 0) {
        for (int i = 0; i < s->n; i++)
            assert_true(ck.got[i] >= 1);
    } else {
        for (int e = 0; e < nerased; e++)
            assert_true(ck.got[erased[e]] >= 1);
    }
}

/* Runs g on devices opened with `options`, coherent and incoherent, and
 * checks every result against the reference stripe; the erased chunks'
 * inputs are garbage. */
static void run_with(const struct deg_graph *g, const struct stripe *s, const int *erased,
                     int nerased, const char *options)
{
    uint8_t *inputs[CODEC_MAX_CHUNKS];
    uint8_t junk[LEN];
    memset(junk, 0x5A, sizeof(junk));
    for (int i = 0; i < s->n; i++)
        inputs[i] = s->chunks[i];
    for (int e = 0; e < nerased; e++)
        inputs[erased[e]] = junk;
    for (int mode = 0; mode < 2; mode++) {
        struct check ck = {.ref = s};
        struct deg_run_opts opts = {.incoherent = mode, .timeout_ms = 20000, .options = options};
        char err[512] = "";
        if (deg_run(g, LEN, inputs, &opts, on_result, &ck, err, sizeof(err)))
            fail_msg("%s %s: %s", g->desc, mode ? "incoherent" : "coherent", err);
        assert_int_equal(ck.bad, 0);
        for (int e = 0; e < nerased; e++)
            assert_true(ck.got[erased[e]] >= 1);
        for (int i = 0; nerased == 0 && i < s->n; i++)
            assert_true(ck.got[i] >= 1);
    }
}

static struct deg_request request(enum deg_op op)
{
    struct deg_request r = {.op = op};
    deg_placement_default(&r.placement);
    return r;
}

static void test_encode_all(void **state)
{
    (void)state;
    for (size_t p = 0; p < NPROFILES; p++) {
        struct codec *c = make_codec(profiles[p]);
        struct stripe s;
        stripe_init(&s, c, (unsigned)p);
        struct deg_request req = request(DEG_OP_ENCODE);
        struct deg_graph *g;
        char err[256];
        assert_int_equal(deg_build(c, &req, &g, err, sizeof(err)), 0);
        /* The encoder gets only the data chunks. */
        struct check ck = {.ref = &s};
        uint8_t *inputs[CODEC_MAX_CHUNKS];
        uint8_t junk[LEN] = {0};
        for (int i = 0; i < codec_n(c); i++)
            inputs[i] = i < codec_k(c) ? s.chunks[i] : junk;
        assert_int_equal(deg_eval(g, LEN, inputs, on_result, &ck, err, sizeof(err)), 0);
        assert_int_equal(ck.bad, 0);
        for (int i = 0; i < codec_n(c); i++)
            assert_int_equal(ck.got[i], 1);
        run_with(g, &s, NULL, 0, NULL);
        run_with(g, &s, NULL, 0, TCP);
        deg_graph_destroy(g);
        stripe_free(&s);
        codec_destroy(c);
    }
}

/* Calls fn for every subset of [0,n) of size 1..max (in lexicographic order). */
static int for_each_pattern(int n, int max, void (*fn)(const int *, int, void *), void *arg)
{
    int count = 0;
    for (int size = 1; size <= max; size++) {
        int idx[CODEC_MAX_CHUNKS];
        for (int i = 0; i < size; i++)
            idx[i] = i;
        for (;;) {
            fn(idx, size, arg);
            count++;
            int i = size - 1;
            while (i >= 0 && idx[i] == n - size + i)
                i--;
            if (i < 0)
                break;
            idx[i]++;
            for (int j = i + 1; j < size; j++)
                idx[j] = idx[j - 1] + 1;
        }
    }
    return count;
}

/*
 * What runs on the engine, besides deg_eval of every graph (every pattern of
 * 1..m losses; LRC: up to l+r, those the code recovers):
 *   encode of every profile and every single loss: mem (one engine thread per
 *     device) and tcp, both modes;
 *   multi-loss on mem (devices sharing a pool of engine threads), both modes:
 *     every pattern of the n <= 10 profiles ((3,2), (6,3), LRC (4,2,2) and
 *     (6,2,2)), every 2-loss pattern of the n = 16 ones ((12,4), LRC (12,2,2))
 *     and every 29th of their 3- and 4-loss patterns (a run sets up a device
 *     and a thread per vertex: all 2380 of them would take minutes);
 *     under the sanitizers (DEG_TEST_SAMPLE=N, set by meson) only every N-th
 *     of those, but still every (3,2) pattern;
 *   multi-loss on tcp, both modes: every (3,2) pattern, every 17th of the
 *     n <= 10 profiles, every 211th of the n = 16 ones.
 */
struct decode_ctx {
    struct codec *c;
    struct stripe s;
    int built, unrecoverable;
    int mem_full;               /* on mem, every pattern of up to this many losses */
    int mem_stride, tcp_stride; /* beyond that, every stride-th pattern */
    int mem_seen, tcp_seen;
};

static void decode_one(const int *erased, int nerased, void *arg)
{
    struct decode_ctx *d = arg;
    struct deg_request req = request(DEG_OP_DECODE);
    req.nerased = nerased;
    memcpy(req.erased, erased, (size_t)nerased * sizeof(int));
    req.slice = 64; /* several slices per LEN */
    struct deg_graph *g;
    char err[256];
    int rc = deg_build(d->c, &req, &g, err, sizeof(err));
    if (rc == -EIO) { /* LRC patterns beyond the code: codecs says so, so do we */
        assert_int_equal(codec_profile(d->c)->scheme, CODEC_LRC);
        d->unrecoverable++;
        return;
    }
    if (rc)
        fail_msg("build: %s", err);
    run_and_check(g, &d->s, erased, nerased);
    if (nerased == 1) {
        run_with(g, &d->s, erased, nerased, NULL);
        run_with(g, &d->s, erased, nerased, TCP);
    } else {
        if (nerased <= d->mem_full || d->mem_seen++ % d->mem_stride == 0)
            run_with(g, &d->s, erased, nerased, POOL_MEM);
        if (d->tcp_seen++ % d->tcp_stride == 0)
            run_with(g, &d->s, erased, nerased, POOL_TCP);
    }
    d->built++;
    deg_graph_destroy(g);
}

static void test_decode_every_pattern(void **state)
{
    (void)state;
    const char *env = getenv("DEG_TEST_SAMPLE");
    int sample = env && atoi(env) > 1 ? atoi(env) : 1;
    /* Devices of the pool share engine threads that live while any device
     * is open: this one keeps them for the whole test, instead of starting
     * them again for every graph. */
    struct inec_device *keep;
    assert_int_equal(inec_device_open(NULL, POOL_MEM, &keep), 0);
    for (size_t p = 0; p < NPROFILES; p++) {
        struct decode_ctx d = {.c = make_codec(profiles[p])};
        int n = codec_n(d.c);
        d.mem_full = n <= 5 ? n : sample > 1 ? 1 : n <= 10 ? n : 2;
        d.mem_stride = (n <= 10 ? 1 : 29) * sample;
        d.tcp_stride = n <= 5 ? 1 : n <= 10 ? 17 : 211;
        stripe_init(&d.s, d.c, 1000u + (unsigned)p);
        int total = for_each_pattern(codec_n(d.c), codec_m(d.c), decode_one, &d);
        assert_int_equal(d.built + d.unrecoverable, total);
        if (codec_profile(d.c)->scheme != CODEC_LRC)
            assert_int_equal(d.unrecoverable, 0);
        stripe_free(&d.s);
        codec_destroy(d.c);
    }
    inec_device_close(keep);
}

static const struct deg_vertex *vertex(const struct deg_graph *g, const char *name)
{
    int v = deg_find_vertex(g, name);
    if (v < 0)
        fail_msg("%s: no vertex %s", g->desc, name);
    return &g->vertices[v];
}

static struct deg_graph *build(const char *profile, enum deg_op op, int nerased, const int *erased)
{
    struct codec *c = make_codec(profile);
    struct deg_request req = request(op);
    req.nerased = nerased;
    if (nerased)
        memcpy(req.erased, erased, (size_t)nerased * sizeof(int));
    struct deg_graph *g;
    char err[256];
    if (deg_build(c, &req, &g, err, sizeof(err)))
        fail_msg("%s: %s", profile, err);
    codec_destroy(c);
    return g;
}

static int ceil_log2(int x)
{
    int l = 0;
    while ((1 << l) < x)
        l++;
    return l;
}

static void test_primitives_match_paper(void **state)
{
    (void)state;
    /* RS / LRC encode: the reader ec-sends, every chunk's node receives. */
    struct deg_graph *g = build("rs:k=6,m=3", DEG_OP_ENCODE, 0, NULL);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "ec-send");
    for (int i = 0; i < 9; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        assert_string_equal(deg_vertex_prim_name(vertex(g, name)), "recv");
    }
    deg_graph_destroy(g);

    /* RS decode: recv-ec at one vertex. */
    int lost = 2;
    g = build("rs:k=6,m=3", DEG_OP_DECODE, 1, &lost);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "recv-ec");
    assert_int_equal(vertex(g, "gw")->nin, 6);
    deg_graph_destroy(g);

    /* LRC: a single loss in a group is an XOR over the rest of the group. */
    g = build("lrc:k=6,l=2,r=2", DEG_OP_DECODE, 1, &lost);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "recv-xor");
    assert_int_equal(vertex(g, "gw")->nin, 3);
    deg_graph_destroy(g);
    int two[] = {0, 1};
    g = build("lrc:k=6,l=2,r=2", DEG_OP_DECODE, 2, two);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "recv-ec");
    deg_graph_destroy(g);

    /* PPR (Figure 5): leaves ec-send, internal vertices recv-ec-send, the
     * root recv-xor; ceil(log2(k+1)) rounds, one per child of the root. */
    int ks[] = {3, 6, 12};
    const char *ppr[] = {"ppr:k=3,m=2", "ppr:k=6,m=3", "ppr:k=12,m=4"};
    for (int i = 0; i < 3; i++) {
        lost = 0;
        g = build(ppr[i], DEG_OP_DECODE, 1, &lost);
        const struct deg_vertex *root = vertex(g, "c0");
        assert_string_equal(deg_vertex_prim_name(root), "recv-xor");
        assert_int_equal(root->nin, ceil_log2(ks[i] + 1));
        assert_true(deg_depth(g) <= ceil_log2(ks[i] + 1));
        int leaves = 0, internal = 0;
        for (int v = 0; v < g->nvertices; v++) {
            const struct deg_vertex *x = &g->vertices[v];
            if (x == root)
                continue;
            assert_int_equal(x->nlocal, 1);
            assert_int_equal(deg_vertex_calc(x), DEG_CALC_EC);
            if (x->nin == 0) {
                assert_int_equal(deg_vertex_prim(x), DEG_PRIM_EC_SEND);
                leaves++;
            } else {
                assert_int_equal(deg_vertex_prim(x), DEG_PRIM_RECV_EC_SEND);
                internal++;
            }
        }
        assert_int_equal(leaves + internal, ks[i]);
        assert_true(internal >= 1);
        deg_graph_destroy(g);
    }

    /* ECPipe: a chain through the k survivors, sliced; the head ec-sends, the
     * middle recv-ec-sends, the new home receives. */
    lost = 1;
    g = build("ecpipe:k=6,m=3", DEG_OP_DECODE, 1, &lost);
    assert_int_equal(g->slice, DEG_DEFAULT_SLICE);
    assert_int_equal(deg_depth(g), 6);
    int sends = 0, mids = 0;
    for (int v = 0; v < g->nvertices; v++) {
        enum deg_prim p = deg_vertex_prim(&g->vertices[v]);
        sends += p == DEG_PRIM_EC_SEND;
        mids += p == DEG_PRIM_RECV_EC_SEND;
    }
    assert_int_equal(sends, 1);
    assert_int_equal(mids, 5);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c1")), "recv");
    deg_graph_destroy(g);

    /* TriEC encode (Figure 5): layer 1 sends data, layer 2 recv-ec-send,
     * layer 3 recv-xor. */
    g = build("tri:k=3,m=2", DEG_OP_ENCODE, 0, NULL);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "send");
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        assert_string_equal(deg_vertex_prim_name(vertex(g, name)), "recv-ec-send");
    }
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c3")), "recv-xor");
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c4")), "recv-xor");
    assert_int_equal(deg_depth(g), 2);
    deg_graph_destroy(g);

    /* TriEC decode: survivors ec-send, the rebuilt chunks' homes
     * recv-xor-send, the reader receives. */
    g = build("tri:k=3,m=2", DEG_OP_DECODE, 2, two);
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c2")), "ec-send");
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c0")), "recv-xor-send");
    assert_string_equal(deg_vertex_prim_name(vertex(g, "c1")), "recv-xor-send");
    assert_string_equal(deg_vertex_prim_name(vertex(g, "gw")), "recv");
    deg_graph_destroy(g);
}

static void expect_invalid(struct deg_graph *g, const char *needle)
{
    char err[256] = "";
    assert_true(deg_validate(g, err, sizeof(err)) < 0);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not mention '%s'", err, needle);
}

static void test_validation(void **state)
{
    (void)state;
    uint8_t one[4] = {1, 1, 1, 1};
    struct deg_label l = {0, false};

    /* A cycle: a -> b -> c -> b. */
    struct deg_graph *g = deg_graph_create(2, 3);
    int a = deg_add_vertex(g, "a", 0), b = deg_add_vertex(g, "b", 1), c = deg_add_vertex(g, "c", 2);
    deg_add_local(g, a, 0);
    deg_add_edge(g, a, deg_local(0), b);
    deg_add_edge(g, c, deg_out(0), b);
    deg_add_edge(g, b, deg_out(0), c);
    deg_set_calc(g, b, 1, one, &l);
    deg_set_calc(g, c, 1, one, &l);
    deg_add_result(g, c, deg_out(0));
    char msg[64];
    assert_int_equal(deg_validate(g, msg, sizeof(msg)), -ELOOP);
    assert_true(strcmp(msg, "cycle through vertex b") == 0 ||
                strcmp(msg, "cycle through vertex c") == 0);
    int order[3];
    assert_int_equal(deg_topo_order(g, order), -ELOOP);
    deg_graph_destroy(g);

    /* Calculation narrower than the inputs. */
    g = deg_graph_create(2, 3);
    a = deg_add_vertex(g, "src", 0);
    b = deg_add_vertex(g, "sink", DEG_GATEWAY);
    deg_add_local(g, a, 0);
    deg_add_local(g, a, 1);
    deg_add_edge(g, a, deg_local(0), b);
    deg_set_calc(g, b, 1, one, &l);
    deg_add_result(g, b, deg_out(0));
    deg_add_edge(g, a, deg_local(1), b); /* after the row was set: 1 column for 2 inputs */
    expect_invalid(g, "vertex sink: calculation takes 1 inputs but the vertex has 2");
    deg_graph_destroy(g);

    /* An edge from a value that does not exist. */
    g = deg_graph_create(2, 3);
    a = deg_add_vertex(g, "src", 0);
    b = deg_add_vertex(g, "sink", 1);
    deg_add_local(g, a, 0);
    deg_add_edge(g, a, deg_out(0), b);
    deg_add_result(g, b, deg_in(0));
    expect_invalid(g, "vertex src has no value out:0");
    deg_graph_destroy(g);

    /* A vertex that forwards without computing, and one with nothing to do. */
    g = deg_graph_create(2, 3);
    a = deg_add_vertex(g, "src", 0);
    b = deg_add_vertex(g, "relay", 1);
    c = deg_add_vertex(g, "sink", 2);
    deg_add_local(g, a, 0);
    deg_add_edge(g, a, deg_local(0), b);
    deg_add_edge(g, b, deg_in(0), c);
    deg_add_result(g, b, deg_in(0));
    deg_add_result(g, c, deg_in(0));
    expect_invalid(g, "vertex relay receives and sends without computing");
    deg_graph_destroy(g);
    g = deg_graph_create(2, 3);
    deg_add_vertex(g, "lonely", 0);
    expect_invalid(g, "vertex lonely has no edges");
    deg_graph_destroy(g);

    /* A dangling edge: refused when added, caught if a graph is edited. */
    g = deg_graph_create(2, 3);
    a = deg_add_vertex(g, "src", 0);
    b = deg_add_vertex(g, "sink", 1);
    deg_add_local(g, a, 0);
    assert_int_equal(deg_add_edge(g, a, deg_local(0), 7), -EINVAL);
    deg_add_edge(g, a, deg_local(0), b);
    deg_add_result(g, b, deg_in(0));
    assert_int_equal(deg_validate(g, NULL, 0), 0);
    g->edges[0].to = 7;
    expect_invalid(g, "edge 0 from vertex src goes to no vertex");
    g->edges[0].to = b;
    deg_graph_destroy(g);

    /* Dangling edges and mismatched rows are caught while parsing JSON. */
    const char *dangling =
        "{\"k\":2,\"n\":3,\"vertices\":[{\"name\":\"a\",\"node\":0,\"local\":[0]}],"
        "\"edges\":[{\"from\":\"a\",\"src\":\"local:0\",\"to\":\"ghost\"}]}";
    char err[256];
    struct deg_graph *out;
    assert_int_equal(deg_from_json(dangling, &out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "vertex ghost does not exist"));
    const char *wide =
        "{\"k\":2,\"n\":3,\"vertices\":[{\"name\":\"a\",\"node\":0,\"local\":[0]},"
        "{\"name\":\"b\",\"node\":\"gateway\",\"rows\":[{\"chunk\":1,\"coeffs\":[3,4]}],"
        "\"results\":[\"out:0\"]}],\"edges\":[{\"from\":\"a\",\"src\":\"local:0\",\"to\":\"b\"}]}";
    assert_int_equal(deg_from_json(wide, &out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "vertex b: row 0 has 2 coefficients for 1 inputs"));
    assert_int_equal(deg_from_json("{\"k\":", &out, err, sizeof(err)), -EINVAL);
    assert_null(out);

    /* Builders reject bad requests with a reason. */
    struct codec *cod = make_codec("rs:k=3,m=2");
    struct deg_request req = request(DEG_OP_DECODE);
    req.nerased = 3;
    req.erased[0] = 0, req.erased[1] = 1, req.erased[2] = 2;
    assert_int_equal(deg_build(cod, &req, &out, err, sizeof(err)), -EIO);
    req.nerased = 1;
    req.erased[0] = 7;
    assert_int_equal(deg_build(cod, &req, &out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "erased chunk 7"));
    codec_destroy(cod);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    int two[] = {1, 4};
    for (size_t p = 0; p < NPROFILES; p++) {
        for (int op = 0; op < 2; op++) {
            struct codec *c = make_codec(profiles[p]);
            struct deg_graph *g = build(profiles[p], op, op ? 2 : 0, two);
            char *text = deg_to_json(g), err[256];
            struct deg_graph *back;
            if (deg_from_json(text, &back, err, sizeof(err)))
                fail_msg("%s: %s", g->desc, err);
            char *again = deg_to_json(back);
            assert_string_equal(text, again);
            /* The parsed graph computes the same bytes. */
            struct stripe s;
            stripe_init(&s, c, 77);
            run_and_check(back, &s, two, op ? 2 : 0);
            stripe_free(&s);
            char *dot = deg_to_dot(g), *txt = deg_to_text(g);
            assert_non_null(strstr(dot, "digraph deg {"));
            assert_non_null(strstr(txt, g->vertices[0].name));
            free(dot);
            free(txt);
            free(text);
            free(again);
            deg_graph_destroy(back);
            deg_graph_destroy(g);
            codec_destroy(c);
        }
    }
}

/* A participant that never shows up: every other vertex gives up in bounded
 * time and the error names the edge to or from the missing one. */
static void test_dead_participant(void **state)
{
    (void)state;
    struct codec *c = make_codec("ppr:k=6,m=3");
    struct stripe s;
    stripe_init(&s, c, 5);
    int lost = 2;
    struct deg_graph *g = build("ppr:k=6,m=3", DEG_OP_DECODE, 1, &lost);
    /* c3 is a leaf under c1; c2 is the root. */
    const char *dead[] = {"c3", "c2"};
    const char *blame[] = {"from c3", "to c2"};
    for (int d = 0; d < 2; d++) {
        for (int mode = 0; mode < 2; mode++) {
            /* Each vertex's deadline runs from its own start: with 300 ms,
             * one started that late under load timed out first and was
             * blamed instead of the dead vertex. */
            struct deg_run_opts opts = {.incoherent = mode, .timeout_ms = 1500, .skip = dead[d]};
            char err[512] = "";
            int rc = deg_run(g, LEN, s.chunks, &opts, NULL, NULL, err, sizeof(err));
            assert_true(rc < 0);
            if (!strstr(err, blame[d]) || !strstr(err, "vertex c"))
                fail_msg("skip %s: error '%s' does not say '%s'", dead[d], err, blame[d]);
        }
    }
    deg_graph_destroy(g);
    stripe_free(&s);
    codec_destroy(c);
}

/* --- delta parity (DEG_OP_UPDATE) ----------------------------------------------- */

struct vx_job {
    struct deg_vx *x;
    struct check *ck;
    pthread_mutex_t *lock;
    int rc;
    char err[256];
};

static void *vx_main(void *arg)
{
    struct vx_job *j = arg;
    j->rc = deg_vx_run(j->x, on_result, j->ck, j->lock, j->err, sizeof(j->err));
    return NULL;
}

/* Runs the update graph of data chunk d with each vertex on a device of its
 * own: the gateway reads the new stripe's chunk d, the nodes their old
 * chunks; every result must equal the re-encoded new stripe. */
static void run_update(const struct deg_graph *g, const struct stripe *old,
                       const struct stripe *new, bool incoherent)
{
    struct deg_run_opts opts = {.incoherent = incoherent, .timeout_ms = 20000};
    struct deg_vx *vx[CODEC_MAX_CHUNKS + 1];
    char err[256] = "";
    for (int v = 0; v < g->nvertices; v++) {
        const struct stripe *s = g->vertices[v].node == DEG_GATEWAY ? new : old;
        if (deg_vx_open(g, v, LEN, s->chunks, &opts, &vx[v], err, sizeof(err)))
            fail_msg("%s: open %s: %s", g->desc, g->vertices[v].name, err);
    }
    for (int e = 0; e < g->nedges; e++) {
        const struct deg_edge *ed = &g->edges[e];
        int pos = 0;
        while (g->vertices[ed->from].out[pos] != e)
            pos++;
        struct deg_vx *x = vx[ed->from], *y = vx[ed->to];
        assert_int_equal(deg_vx_connect_out(x, pos, deg_vx_addr(y), deg_vx_in_qpn(y, ed->slot), err,
                                            sizeof(err)),
                         0);
        assert_int_equal(deg_vx_connect_in(y, ed->slot, deg_vx_addr(x), deg_vx_out_qpn(x, pos), err,
                                           sizeof(err)),
                         0);
    }
    struct check ck = {.ref = new};
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct vx_job jobs[CODEC_MAX_CHUNKS + 1];
    pthread_t threads[CODEC_MAX_CHUNKS + 1];
    for (int v = 0; v < g->nvertices; v++) {
        jobs[v] = (struct vx_job){.x = vx[v], .ck = &ck, .lock = &lock};
        assert_int_equal(pthread_create(&threads[v], NULL, vx_main, &jobs[v]), 0);
    }
    for (int v = 0; v < g->nvertices; v++) {
        pthread_join(threads[v], NULL);
        if (jobs[v].rc)
            fail_msg("%s: %s: %s", g->desc, g->vertices[v].name, jobs[v].err);
        deg_vx_close(vx[v]);
    }
    assert_int_equal(ck.bad, 0);
    /* The written chunk and every parity that depends on it, each once. */
    int results = 0;
    for (int i = 0; i < g->n; i++)
        results += ck.got[i];
    assert_int_equal(results, g->nvertices - 1);
    for (int v = 1; v < g->nvertices; v++)
        assert_int_equal(ck.got[g->vertices[v].local[0]], 1);
}

static void test_update_delta(void **state)
{
    (void)state;
    static const char *const upd[] = {"rs:k=6,m=3", "rs:k=3,m=2", "lrc:k=4,l=2,r=2", "tri:k=3,m=2"};
    for (size_t i = 0; i < sizeof(upd) / sizeof(upd[0]); i++) {
        struct codec *c = make_codec(upd[i]);
        int k = codec_k(c);
        for (int d = 0; d < k; d += k - 1) {
            struct stripe old, new;
            stripe_init(&old, c, 7);
            stripe_init(&new, c, 7);
            for (size_t b = 0; b < LEN; b++)
                new.chunks[d][b] = (uint8_t)(b * 31 + 5 + d);
            assert_int_equal(codec_encode(c, LEN, new.chunks), 0);
            struct deg_request req = request(DEG_OP_UPDATE);
            req.updated = d;
            struct deg_graph *g;
            char err[256] = "";
            if (deg_build(c, &req, &g, err, sizeof(err)))
                fail_msg("%s update %d: %s", upd[i], d, err);
            /* reader send -> holder recv-ec-send -> parities recv-xor */
            assert_string_equal(deg_vertex_prim_name(&g->vertices[0]), "send");
            assert_string_equal(deg_vertex_prim_name(&g->vertices[1]), "recv-ec-send");
            for (int v = 2; v < g->nvertices; v++)
                assert_string_equal(deg_vertex_prim_name(&g->vertices[v]), "recv-xor");
            run_update(g, &old, &new, false);
            run_update(g, &old, &new, true);
            deg_graph_destroy(g);
            stripe_free(&old);
            stripe_free(&new);
        }
        struct deg_request bad = request(DEG_OP_UPDATE);
        bad.updated = k;
        struct deg_graph *g = NULL;
        assert_int_equal(deg_build(c, &bad, &g, NULL, 0), -EINVAL);
        codec_destroy(c);
    }
}

static void test_placement(void **state)
{
    (void)state;
    /* Same graph shape anywhere: chunk i on node 10 + i, a node reads. */
    struct codec *c = make_codec("ppr:k=6,m=3");
    struct deg_request req = request(DEG_OP_DECODE);
    for (int i = 0; i < 9; i++)
        req.placement.holder[i] = 10 + i;
    req.placement.reader = 5;
    req.nerased = 1;
    req.erased[0] = 3;
    struct deg_graph *g;
    char err[256];
    assert_int_equal(deg_build(c, &req, &g, err, sizeof(err)), 0);
    assert_int_equal(vertex(g, "c3")->node, 13);
    assert_int_equal(vertex(g, "c0")->node, 10);
    deg_graph_destroy(g);
    req.placement.holder[2] = -4;
    assert_int_equal(deg_build(c, &req, &g, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "chunk 2"));
    codec_destroy(c);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* e.g. test_deg 'test_dead*' */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_all),
        cmocka_unit_test(test_decode_every_pattern),
        cmocka_unit_test(test_primitives_match_paper),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_update_delta),
        cmocka_unit_test(test_dead_participant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
