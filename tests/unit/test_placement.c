/* Cluster map parsing and rendezvous placement: determinism, failure domains,
 * spread, movement on membership changes, weights, and map errors. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "placement/placement.h"

#define STRIPES 100000

/* A map of `nodes` nodes n0.. spread round-robin over `domains` domains; node
 * `state_node` (if >= 0) gets `state`, `weights` (if not NULL) their weights. */
static struct place_map *make_map(int nodes, int domains, const double *weights, int state_node,
                                  const char *state)
{
    size_t cap = 256 + (size_t)nodes * 160;
    char *json = malloc(cap);
    size_t len = (size_t)snprintf(json, cap, "{\"epoch\": 3, \"nodes\": [");
    for (int i = 0; i < nodes; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"id\": \"n%d\", \"address\": \"127.0.0.1:%d\", "
                                "\"domain\": \"d%d\", \"weight\": %g, \"state\": \"%s\"}",
                                i ? ", " : "", i, 7000 + i, i % domains, weights ? weights[i] : 1.0,
                                i == state_node ? state : "up");
    snprintf(json + len, cap - len,
             "], \"pools\": [{\"name\": \"default\", \"profile\": \"rs:k=6,m=3\"}]}");
    char err[256] = "";
    struct place_map *m = NULL;
    int rc = place_map_parse(json, strlen(json), &m, err, sizeof(err));
    if (rc)
        fprintf(stderr, "make_map: %s\n", err);
    assert_int_equal(rc, 0);
    free(json);
    return m;
}

static void place(const struct place_map *m, uint64_t i, int n, int *out, int *maxd)
{
    char oid[32];
    int len = snprintf(oid, sizeof(oid), "bucket/object-%llu", (unsigned long long)(i / 4));
    assert_int_equal(place_stripe(m, oid, (size_t)len, i % 4, n, out, maxd), 0);
}

static void test_parse_fields_and_defaults(void **state)
{
    (void)state;
    const char *json = "{\"nodes\": [{\"id\": \"a\", \"address\": \"[::1]:80\"},"
                       " {\"id\": \"b.2\", \"address\": \"host-b:9\", \"domain\": \"r1\","
                       "  \"weight\": 2.5, \"state\": \"draining\", \"device\": \"mlx5_1\"}],"
                       " \"pools\": [{\"name\": \"p\", \"profile\": \"lrc:k=6,l=2,r=2\","
                       "  \"chunk_size\": 4096, \"write_quorum\": 8}]}";
    struct place_map *m;
    char err[256];
    assert_int_equal(place_map_parse(json, strlen(json), &m, err, sizeof(err)), 0);
    assert_int_equal(m->epoch, 0);
    assert_int_equal(m->heartbeat_ms, PLACE_HEARTBEAT_MS);
    assert_int_equal(m->peer_timeout_ms, PLACE_PEER_TIMEOUT_MS);
    assert_int_equal(m->nnodes, 2);
    assert_string_equal(m->nodes[0].domain, "a"); /* default: its own domain */
    assert_true(m->nodes[0].weight == 1.0);
    assert_int_equal(m->nodes[0].state, PLACE_UP);
    assert_string_equal(m->nodes[1].address, "host-b:9");
    assert_true(m->nodes[1].weight == 2.5);
    assert_int_equal(m->nodes[1].state, PLACE_DRAINING);
    assert_string_equal(m->nodes[0].device, ""); /* not set: the process decides */
    assert_string_equal(m->nodes[1].device, "mlx5_1");
    assert_int_equal(m->ndomains, 2);
    assert_int_equal(place_map_node(m, "b.2"), 1);
    assert_int_equal(place_map_node(m, "zz"), -ENOENT);
    assert_int_equal(place_map_nodes_on_host(m, "host-b"), 1);
    assert_int_equal(place_map_nodes_on_host(m, "host-b:7000"), 1);
    assert_int_equal(place_map_nodes_on_host(m, "[::1]:9"), 1);
    assert_int_equal(place_map_nodes_on_host(m, "host"), 0);
    assert_int_equal(place_map_nodes_on_host(m, "127.0.0.1"), 0);
    const struct place_pool *p = place_map_pool(m, "p");
    assert_non_null(p);
    assert_null(place_map_pool(m, "q"));
    assert_string_equal(p->profile, "lrc:k=6,l=2,r=2");
    assert_int_equal(p->k, 6);
    assert_int_equal(p->n, 10);
    assert_int_equal(p->chunk_size, 4096);
    assert_int_equal(p->write_quorum, 8);

    /* format -> parse gives the same map */
    char *text = place_map_format(m);
    struct place_map *m2;
    assert_int_equal(place_map_parse(text, strlen(text), &m2, err, sizeof(err)), 0);
    assert_int_equal(m2->nnodes, 2);
    assert_string_equal(m2->nodes[1].domain, "r1");
    assert_true(m2->nodes[1].weight == 2.5);
    assert_int_equal(m2->nodes[1].state, PLACE_DRAINING);
    assert_string_equal(m2->nodes[0].device, "");
    assert_string_equal(m2->nodes[1].device, "mlx5_1");
    assert_null(strstr(text, "\"device\": \"\"")); /* an unset device is not written */
    assert_int_equal(m2->pools[0].n, 10);
    assert_int_equal(m2->pools[0].write_quorum, 8);
    assert_int_equal(m2->peer_timeout_ms, PLACE_PEER_TIMEOUT_MS);
    free(text);
    place_map_destroy(m2);
    const char *tj = "{\"peer_timeout_ms\": 800, \"heartbeat_ms\": 40, \"nodes\": []}";
    assert_int_equal(place_map_parse(tj, strlen(tj), &m2, err, sizeof(err)), 0);
    text = place_map_format(m2);
    place_map_destroy(m2);
    assert_int_equal(place_map_parse(text, strlen(text), &m2, err, sizeof(err)), 0);
    assert_int_equal(m2->peer_timeout_ms, 800);
    assert_int_equal(m2->heartbeat_ms, 40);
    free(text);
    place_map_destroy(m2);
    place_map_destroy(m);
    place_map_destroy(NULL);
}

static void test_profiles(void **state)
{
    (void)state;
    static const struct {
        const char *profile;
        int k, n;
    } cases[] = {
        {"rs:k=6,m=3", 6, 9},  {"ppr:k=4,m=2", 4, 6},        {"ecpipe:k=10,m=4", 10, 14},
        {"tri:k=3,m=2", 3, 5}, {"lrc:k=12,l=2,r=2", 12, 16},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[256], err[256];
        snprintf(json, sizeof(json),
                 "{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"%s\"}]}",
                 cases[i].profile);
        struct place_map *m;
        assert_int_equal(place_map_parse(json, strlen(json), &m, err, sizeof(err)), 0);
        const char *scheme = codec_scheme_name(m->pools[0].codec.scheme);
        assert_int_equal(strncmp(cases[i].profile, scheme, strlen(scheme)), 0);
        assert_int_equal(m->pools[0].k, cases[i].k);
        assert_int_equal(m->pools[0].n, cases[i].n);
        assert_int_equal(m->pools[0].write_quorum, cases[i].k + 1); /* Ceph's min_size */
        assert_int_equal(m->pools[0].chunk_size, PLACE_CHUNK_SIZE);
        place_map_destroy(m);
    }
}

static void test_bad_maps(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"", "map: line"},
        {"{\"nodes\": [", "map: line"},
        {"[]", "map: must be a JSON object"},
        {"{}", "nodes: missing"},
        {"{\"nodes\": {}}", "nodes: missing or not an array"},
        {"{\"nodes\": [], \"nodez\": 1}", "unknown field \"nodez\""},
        {"{\"nodes\": [], \"epoch\": -1}", "epoch"},
        {"{\"nodes\": [], \"peer_timeout_ms\": 99}", "peer_timeout_ms: must be"},
        {"{\"nodes\": [], \"peer_timeout_ms\": \"5s\"}", "peer_timeout_ms: must be"},
        {"{\"nodes\": [], \"heartbeat_ms\": 9}", "heartbeat_ms: must be"},
        {"{\"nodes\": [], \"peer_timeout_ms\": 1000, \"heartbeat_ms\": 501}",
         "heartbeat_ms: must be an integer in [10, peer_timeout_ms / 2 = 500]"},
        {"{\"nodes\": [], \"nodes\": []}", "duplicate"},
        {"{\"nodes\": [7]}", "nodes[0]: must be an object"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"a:1\", \"device\": \"mlx5 0\"}]}",
         "nodes[0].device: \"mlx5 0\" must be 1-63"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"a:1\", \"device\": 3}]}",
         "nodes[0].device: must be a string"},
        {"{\"nodes\": [{\"address\": \"a:1\"}]}", "nodes[0].id: missing"},
        {"{\"nodes\": [{\"id\": 5, \"address\": \"a:1\"}]}", "nodes[0].id: must be a string"},
        {"{\"nodes\": [{\"id\": \"a b\", \"address\": \"a:1\"}]}", "nodes[0].id"},
        {"{\"nodes\": [{\"id\": \"a\"}]}", "nodes[0].address: missing"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"nohost\"}]}", "nodes[0].address"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:0\"}]}", "nodes[0].address"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:65536\"}]}", "nodes[0].address"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \":80\"}]}", "nodes[0].address"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"[::1:80\"}]}", "nodes[0].address"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\", \"weight\": 0}]}",
         "nodes[0].weight: must be a number > 0"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\", \"weight\": \"1\"}]}",
         "nodes[0].weight"},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\", \"state\": \"sleepy\"}]}",
         "nodes[0].state: \"sleepy\""},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\", \"wieght\": 1}]}",
         "nodes[0]: unknown field \"wieght\""},
        {"{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\"}, {\"id\": \"a\", \"address\": "
         "\"h:2\"}]}",
         "nodes[1].id: \"a\" repeats nodes[0]"},
        {"{\"nodes\": [], \"pools\": [{\"profile\": \"rs:k=2,m=1\"}]}", "pools[0].name: missing"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\"}]}", "pools[0].profile: missing"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"xx:k=1\"}]}",
         "pools[0].profile: unknown scheme 'xx'"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=6\"}]}",
         "pools[0].profile: profile 'rs:k=6': missing key 'm'"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=6,k=3\"}]}",
         "pools[0].profile: profile 'rs:k=6,k=3': key 'k' given twice"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=200,m=100\"}]}",
         "pools[0].profile: k+m=300: at most 255 chunks"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"lrc:k=5,l=2,r=2\"}]}",
         "pools[0].profile: lrc: k=5 is not a multiple of l=2"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=2,m=1\", "
         "\"chunk_size\": 0}]}",
         "pools[0].chunk_size"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=6,m=3\", "
         "\"write_quorum\": 5}]}",
         "pools[0].write_quorum: must be an integer in [k=6, n=9]"},
        {"{\"nodes\": [], \"pools\": [{\"name\": \"p\", \"profile\": \"rs:k=1,m=1\"}, "
         "{\"name\": \"p\", \"profile\": \"rs:k=1,m=1\"}]}",
         "pools[1].name: \"p\" repeats pools[0]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        struct place_map *m = (struct place_map *)1;
        int rc = place_map_parse(cases[i].json, strlen(cases[i].json), &m, err, sizeof(err));
        if (rc != -EINVAL || !strstr(err, cases[i].want))
            fail_msg("case %zu (%s): rc=%d err=\"%s\", want \"%s\"", i, cases[i].json, rc, err,
                     cases[i].want);
        assert_null(m);
    }
}

static void test_deterministic_and_order_independent(void **state)
{
    (void)state;
    struct place_map *m = make_map(12, 12, NULL, -1, NULL);
    /* The same nodes listed in reverse order must give the same node ids. */
    char json[4096];
    size_t len = (size_t)snprintf(json, sizeof(json), "{\"nodes\": [");
    for (int i = 11; i >= 0; i--)
        len += (size_t)snprintf(json + len, sizeof(json) - len,
                                "%s{\"id\": \"n%d\", \"address\": \"h:%d\", \"domain\": \"d%d\"}",
                                i < 11 ? ", " : "", i, 1 + i, i);
    snprintf(json + len, sizeof(json) - len, "]}");
    struct place_map *r;
    char err[256];
    assert_int_equal(place_map_parse(json, strlen(json), &r, err, sizeof(err)), 0);
    for (uint64_t s = 0; s < 2000; s++) {
        int a[9], b[9], c[9];
        place(m, s, 9, a, NULL);
        place(m, s, 9, b, NULL);
        place(r, s, 9, c, NULL);
        for (int i = 0; i < 9; i++) {
            assert_int_equal(a[i], b[i]);
            assert_string_equal(m->nodes[a[i]].id, r->nodes[c[i]].id);
        }
    }
    /* Known answers pin the hash: a change here silently remaps every stored stripe. */
    assert_true(place_hash("inec", 4, 0) == 0xadfe3f2b881e7cbdull);
    assert_true(place_hash("bucket/object-12345", 19, 7) == 0xd0e3e0b368bd5796ull);
    assert_true(place_hash("a", 1, 0) != place_hash("b", 1, 0));
    assert_true(place_hash("a", 1, 0) != place_hash("a", 1, 1));
    assert_true(place_hash("abcdefgh", 8, 0) != place_hash("abcdefgh\0", 9, 0));
    place_map_destroy(r);
    place_map_destroy(m);
}

static void test_distinct_domains(void **state)
{
    (void)state;
    /* 12 nodes in 6 domains, 6 chunks: one per domain, always. */
    struct place_map *m = make_map(12, 6, NULL, -1, NULL);
    for (uint64_t s = 0; s < 5000; s++) {
        int out[6], maxd;
        place(m, s, 6, out, &maxd);
        assert_int_equal(maxd, 1);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < i; j++)
                assert_int_not_equal(m->nodes[out[i]].domain_index, m->nodes[out[j]].domain_index);
    }
    place_map_destroy(m);

    /* 12 nodes in 3 domains, 9 chunks: exactly 3 per domain, and it says so. */
    m = make_map(12, 3, NULL, -1, NULL);
    for (uint64_t s = 0; s < 5000; s++) {
        int out[9], maxd, per[3] = {0};
        place(m, s, 9, out, &maxd);
        assert_int_equal(maxd, 3);
        for (int i = 0; i < 9; i++) {
            per[m->nodes[out[i]].domain_index]++;
            for (int j = 0; j < i; j++)
                assert_int_not_equal(out[i], out[j]);
        }
        assert_int_equal(per[0], 3);
        assert_int_equal(per[1], 3);
        assert_int_equal(per[2], 3);
    }
    place_map_destroy(m);

    /* Uneven domains (5 + 1 nodes), 4 chunks: the small domain holds one, the
     * big one three. */
    const char *json = "{\"nodes\": [{\"id\": \"a\", \"address\": \"h:1\", \"domain\": \"x\"},"
                       "{\"id\": \"b\", \"address\": \"h:2\", \"domain\": \"x\"},"
                       "{\"id\": \"c\", \"address\": \"h:3\", \"domain\": \"x\"},"
                       "{\"id\": \"d\", \"address\": \"h:4\", \"domain\": \"x\"},"
                       "{\"id\": \"e\", \"address\": \"h:5\", \"domain\": \"x\"},"
                       "{\"id\": \"f\", \"address\": \"h:6\", \"domain\": \"y\"}]}";
    char err[256];
    assert_int_equal(place_map_parse(json, strlen(json), &m, err, sizeof(err)), 0);
    for (uint64_t s = 0; s < 1000; s++) {
        int out[4], maxd, f = 0;
        place(m, s, 4, out, &maxd);
        assert_int_equal(maxd, 3);
        for (int i = 0; i < 4; i++)
            f += out[i] == 5;
        assert_int_equal(f, 1);
    }
    place_map_destroy(m);
}

static void test_spread(void **state)
{
    (void)state;
    struct place_map *m = make_map(12, 12, NULL, -1, NULL);
    long count[12] = {0};
    for (uint64_t s = 0; s < STRIPES; s++) {
        int out[9];
        place(m, s, 9, out, NULL);
        for (int i = 0; i < 9; i++)
            count[out[i]]++;
    }
    long max = 0, total = 0;
    for (int i = 0; i < 12; i++) {
        total += count[i];
        max = count[i] > max ? count[i] : max;
    }
    double ratio = (double)max / ((double)total / 12);
    print_message("spread RS(6,3) over 12 nodes, %d stripes: max/mean = %.4f\n", STRIPES, ratio);
    assert_true(ratio <= 1.1);

    /* The first chunk (a data chunk) alone must spread too, not only the set. */
    long first[12] = {0};
    for (uint64_t s = 0; s < STRIPES; s++) {
        int out[9];
        place(m, s, 9, out, NULL);
        first[out[0]]++;
    }
    for (int i = 0; i < 12; i++)
        assert_true(first[i] < 1.1 * STRIPES / 12 && first[i] > 0.9 * STRIPES / 12);
    place_map_destroy(m);
}

static bool contains(const int *set, int n, const char *id, const struct place_map *m)
{
    for (int i = 0; i < n; i++)
        if (strcmp(m->nodes[set[i]].id, id) == 0)
            return true;
    return false;
}

/* Compares placements before and after a map change over STRIPES stripes;
 * `changed` is the node that joined or left. Returns the fraction of stripes
 * whose node set changed, and checks that each such stripe involved `changed`
 * and swapped exactly one node. */
static double moved_fraction(const struct place_map *before, const struct place_map *after, int n,
                             const char *changed, double *chunk_fraction)
{
    long moved = 0, chunks = 0;
    for (uint64_t s = 0; s < STRIPES; s++) {
        int a[16], b[16];
        place(before, s, n, a, NULL);
        place(after, s, n, b, NULL);
        int differ = 0;
        for (int i = 0; i < n; i++) {
            differ += !contains(b, n, before->nodes[a[i]].id, after);
            chunks += strcmp(before->nodes[a[i]].id, after->nodes[b[i]].id) != 0;
        }
        if (differ) {
            moved++;
            assert_int_equal(differ, 1);
            assert_true(contains(a, n, changed, before) || contains(b, n, changed, after));
        }
    }
    *chunk_fraction = (double)chunks / ((double)STRIPES * n);
    return (double)moved / STRIPES;
}

static void test_minimal_movement(void **state)
{
    (void)state;
    enum { N = 20, K = 9 };
    struct place_map *full = make_map(N, N, NULL, -1, NULL);
    struct place_map *gone = make_map(N, N, NULL, 7, "down");
    struct place_map *less = make_map(N - 1, N - 1, NULL, -1, NULL);
    double chunks;

    /* Leave: a stripe moves iff it had n7: expected fraction n/N. */
    double f = moved_fraction(full, gone, K, "n7", &chunks);
    print_message("leave: %.4f of stripes moved (theory %.4f), %.4f of chunks renumbered\n", f,
                  (double)K / N, chunks);
    assert_true(fabs(f - (double)K / N) < 0.01);

    /* Draining takes no new stripes, exactly like down for placement. */
    struct place_map *drain = make_map(N, N, NULL, 7, "draining");
    for (uint64_t s = 0; s < 1000; s++) {
        int a[K], b[K];
        place(gone, s, K, a, NULL);
        place(drain, s, K, b, NULL);
        assert_memory_equal(a, b, sizeof(a));
        assert_false(contains(b, K, "n7", drain));
    }

    /* Join: n19 added to 19 nodes; a stripe moves iff it takes n19: n/(N). */
    f = moved_fraction(less, full, K, "n19", &chunks);
    print_message("join: %.4f of stripes moved (theory %.4f), %.4f of chunks renumbered\n", f,
                  (double)K / N, chunks);
    assert_true(fabs(f - (double)K / N) < 0.01);
    place_map_destroy(drain);
    place_map_destroy(less);
    place_map_destroy(gone);
    place_map_destroy(full);
}

static void test_weights(void **state)
{
    (void)state;
    /* One chunk per stripe: node i wins with probability w_i / sum(w). */
    const double w[4] = {1, 2, 3, 4};
    struct place_map *m = make_map(4, 4, w, -1, NULL);
    long count[4] = {0};
    for (uint64_t s = 0; s < STRIPES; s++) {
        int out[1];
        place(m, s, 1, out, NULL);
        count[out[0]]++;
    }
    for (int i = 0; i < 4; i++) {
        double share = (double)count[i] / STRIPES;
        print_message("weight %g: share %.4f (expected %.4f)\n", w[i], share, w[i] / 10);
        assert_true(fabs(share - w[i] / 10) < 0.01);
    }
    place_map_destroy(m);

    /* Three chunks over 12 nodes, two of weight 2: they hold clearly more. */
    double w12[12];
    for (int i = 0; i < 12; i++)
        w12[i] = i < 2 ? 2 : 1;
    m = make_map(12, 12, w12, -1, NULL);
    long c12[12] = {0};
    for (uint64_t s = 0; s < STRIPES; s++) {
        int out[3];
        place(m, s, 3, out, NULL);
        for (int i = 0; i < 3; i++)
            c12[out[i]]++;
    }
    double heavy = (c12[0] + c12[1]) / 2.0, light = 0;
    for (int i = 2; i < 12; i++)
        light += c12[i] / 10.0;
    print_message("n=3 of 12, weight 2 vs 1: chunk ratio %.3f\n", heavy / light);
    assert_true(heavy / light > 1.6 && heavy / light < 2.05);
    place_map_destroy(m);
}

static void test_not_enough_nodes(void **state)
{
    (void)state;
    struct place_map *m = make_map(9, 9, NULL, 3, "down");
    int out[9];
    assert_int_equal(place_stripe(m, "o", 1, 0, 9, out, NULL), -ENOSPC);
    assert_int_equal(place_stripe(m, "o", 1, 0, 8, out, NULL), 0);
    assert_int_equal(place_stripe(m, "o", 1, 0, 0, out, NULL), -EINVAL);
    assert_int_equal(place_stripe(m, "o", 1, 0, 256, out, NULL), -EINVAL);
    for (int i = 0; i < 8; i++)
        assert_int_not_equal(out[i], 3);
    place_map_destroy(m);

    /* More nodes than the stack scratch of place_stripe. */
    m = make_map(100, 10, NULL, -1, NULL);
    int maxd;
    assert_int_equal(place_stripe(m, "o", 1, 0, 9, out, &maxd), 0);
    assert_int_equal(maxd, 1);
    place_map_destroy(m);
}

/* Writes with nodes down: a spare up node in a new domain replaces a down one;
 * without spares the stripe keeps its home nodes and the down ones are missing. */
/* A new home for lost chunks: never a node of the stripe, a fresh failure domain
 * while one is left, deterministic, spread over the candidates; "out" nodes
 * are parsed and are no stripe's home. */
static void test_replacement(void **state)
{
    (void)state;
    struct place_map *m = make_map(12, 6, NULL, 4, "out"); /* domains d0..d5, two nodes each */
    assert_int_equal(m->nodes[4].state, PLACE_OUT);
    bool usable[12];
    for (int i = 0; i < 12; i++)
        usable[i] = m->nodes[i].state == PLACE_UP;
    int hits[12] = {0};
    for (uint64_t s = 0; s < 2000; s++) {
        int home[9];
        bool missing[9];
        assert_int_equal(place_stripe_write(m, "o", 1, s, 5, NULL, home, missing), 0);
        for (int c = 0; c < 5; c++)
            assert_int_not_equal(home[c], 4);
        int taken[5];
        memcpy(taken, home, sizeof(taken));
        taken[0] = -1; /* chunk 0 lost */
        int r = place_replacement(m, "o", 1, s, taken, 5, usable);
        assert_true(r >= 0 && r != 4);
        assert_int_equal(place_replacement(m, "o", 1, s, taken, 5, usable), r);
        for (int c = 1; c < 5; c++) {
            assert_int_not_equal(r, home[c]);
            /* 4 domains used by the other chunks, 5 domains up: a fresh one. */
            assert_int_not_equal(m->nodes[r].domain_index, m->nodes[home[c]].domain_index);
        }
        hits[r]++;
    }
    for (int i = 0; i < 12; i++)
        assert_true(i == 4 ? hits[i] == 0 : hits[i] > 2000 / 11 / 3);
    /* No usable node left: -ENOSPC. */
    memset(usable, 0, sizeof(usable));
    int taken[1] = {0};
    assert_int_equal(place_replacement(m, "o", 1, 0, taken, 1, usable), -ENOSPC);
    place_map_destroy(m);
}

static void test_write_placement(void **state)
{
    (void)state;
    int out[9], home[9];
    bool missing[9], down[12] = {false};
    /* 9 nodes, n = 9, node 3 down in the map: no spare, one missing chunk. */
    struct place_map *all = make_map(9, 9, NULL, -1, NULL);
    struct place_map *m = make_map(9, 9, NULL, 3, "down");
    for (uint64_t s = 0; s < 50; s++) {
        assert_int_equal(place_stripe(all, "o", 1, s, 9, home, NULL), 0);
        assert_int_equal(place_stripe_write(m, "o", 1, s, 9, NULL, out, missing), 0);
        assert_memory_equal(out, home, sizeof(out));
        for (int c = 0; c < 9; c++)
            assert_int_equal(missing[c], out[c] == 3);
    }
    /* the same with node 5 known down by the caller: two missing */
    down[5] = true;
    assert_int_equal(place_stripe_write(m, "o", 1, 0, 9, down, out, missing), 0);
    int nmiss = 0;
    for (int c = 0; c < 9; c++) {
        nmiss += missing[c];
        assert_int_equal(missing[c], out[c] == 3 || out[c] == 5);
    }
    assert_int_equal(nmiss, 2);
    place_map_destroy(m);
    place_map_destroy(all);
    /* 12 nodes in 12 domains, node 5 known down: a spare replaces it, and a
     * stripe that did not use it keeps its nodes. */
    m = make_map(12, 12, NULL, -1, NULL);
    int replaced = 0;
    for (uint64_t s = 0; s < 50; s++) {
        assert_int_equal(place_stripe(m, "o", 1, s, 9, home, NULL), 0);
        assert_int_equal(place_stripe_write(m, "o", 1, s, 9, down, out, missing), 0);
        bool used = false;
        for (int c = 0; c < 9; c++) {
            assert_false(missing[c]);
            assert_int_not_equal(out[c], 5);
            used |= home[c] == 5;
        }
        if (!used)
            assert_memory_equal(out, home, sizeof(out));
        replaced += used;
    }
    assert_true(replaced > 0);
    place_map_destroy(m);
    /* 12 nodes but only 9 domains: a spare would double up a domain, so the
     * down node's chunk is missing instead. */
    m = make_map(12, 9, NULL, -1, NULL);
    for (uint64_t s = 0; s < 50; s++) {
        assert_int_equal(place_stripe_write(m, "o", 1, s, 9, down, out, missing), 0);
        for (int c = 0; c < 9; c++)
            assert_int_equal(missing[c], out[c] == 5);
    }
    place_map_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fields_and_defaults),
        cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_bad_maps),
        cmocka_unit_test(test_deterministic_and_order_independent),
        cmocka_unit_test(test_distinct_domains),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_minimal_movement),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_not_enough_nodes),
        cmocka_unit_test(test_replacement),
        cmocka_unit_test(test_write_placement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
