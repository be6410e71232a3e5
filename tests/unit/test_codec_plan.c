/* Decode plans: minimal reads, apply == decode, and partial products over
 * any partition of the survivors XOR-combine to the same bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tests/unit/codec_test_util.h"

static struct codec_plan *plan_for(const struct codec *c, const int *erased, int ne)
{
    struct codec_plan *p = NULL;
    char err[256];
    int rc = codec_plan_create(c, erased, ne, NULL, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("plan: %d %s", rc, err);
    return p;
}

static void test_lrc_local_reads(void **state)
{
    (void)state;
    static const char *const profiles[] = {"lrc:k=4,l=2,r=2", "lrc:k=6,l=2,r=2", "lrc:k=12,l=2,r=2",
                                           "lrc:k=12,l=3,r=2"};
    for (size_t pi = 0; pi < sizeof(profiles) / sizeof(profiles[0]); pi++) {
        struct codec *c = tu_codec(profiles[pi]);
        const struct codec_profile *prof = codec_profile(c);
        int k = prof->k, gsize = k / prof->l;
        for (int lost = 0; lost < k + prof->l; lost++) {
            struct codec_plan *p = plan_for(c, &lost, 1);
            int g = codec_group(c, lost);
            assert_int_equal(p->nsurvivors, gsize);
            assert_true(p->xor_only);
            for (int s = 0; s < p->nsurvivors; s++) {
                assert_int_equal(codec_group(c, p->survivors[s]), g);
                assert_int_not_equal(p->survivors[s], lost);
                assert_int_equal(p->coeffs[s], 1);
                if (s)
                    assert_true(p->survivors[s] > p->survivors[s - 1]);
            }
            codec_plan_destroy(p);
        }
        /* A global parity needs all the data, with real coefficients. */
        int global = k + prof->l;
        struct codec_plan *p = plan_for(c, &global, 1);
        assert_int_equal(p->nsurvivors, k);
        assert_false(p->xor_only);
        for (int s = 0; s < k; s++)
            assert_int_equal(p->survivors[s], s);
        codec_plan_destroy(p);
        /* One loss in each of two groups: still only those groups. */
        int two[2] = {0, gsize};
        p = plan_for(c, two, 2);
        assert_int_equal(p->nsurvivors, 2 * gsize);
        assert_true(p->xor_only);
        codec_plan_destroy(p);
        codec_destroy(c);
    }
}

static void test_rs_reads_k_data_first(void **state)
{
    (void)state;
    struct codec *c = tu_codec("rs:k=6,m=3");
    int erased[2] = {1, 7};
    struct codec_plan *p = plan_for(c, erased, 2);
    static const int want[] = {0, 2, 3, 4, 5, 6};
    assert_int_equal(p->nsurvivors, 6);
    assert_memory_equal(p->survivors, want, sizeof(want));
    assert_false(p->xor_only);
    codec_plan_destroy(p);

    /* Unavailable chunks are never read. */
    bool avail[9] = {true, false, false, true, true, true, true, true, true};
    int lost = 1;
    assert_int_equal(codec_plan_create(c, &lost, 1, avail, &p, NULL, 0), 0);
    for (int s = 0; s < p->nsurvivors; s++)
        assert_true(avail[p->survivors[s]]);
    assert_int_equal(p->nsurvivors, 6);
    codec_plan_destroy(p);
    avail[3] = avail[4] = false;
    char err[256] = "";
    assert_int_equal(codec_plan_create(c, &lost, 1, avail, &p, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "cannot rebuild"));
    codec_destroy(c);
}

/* For the pattern: plan_apply rebuilds the original bytes, and random
 * partitions of the survivors into 2..nsurvivors groups give, via partial
 * products combined with codec_xor, exactly plan_apply's bytes. */
static void check_pattern(const struct codec *c, const struct tu_chunks *ref, const int *erased,
                          int ne, uint64_t *seed)
{
    size_t len = ref->len;
    struct codec_plan *p = plan_for(c, erased, ne);
    uint8_t *srcs[CODEC_MAX_CHUNKS];
    for (int s = 0; s < p->nsurvivors; s++)
        srcs[s] = ref->c[p->survivors[s]];
    struct tu_chunks out;
    tu_alloc(&out, ne, len, 1);
    assert_int_equal(codec_plan_apply(p, len, srcs, out.c), 0);
    for (int e = 0; e < ne; e++)
        assert_memory_equal(out.c[e], ref->c[erased[e]], len);

    int ns = p->nsurvivors;
    for (int trial = 0; trial < 4 && ns >= 2; trial++) {
        int ngroups = 2 + (int)(tu_rand(seed) % (uint32_t)(ns - 1));
        int grp[CODEC_MAX_CHUNKS];
        for (int s = 0; s < ns; s++) /* every group non-empty */
            grp[s] = s < ngroups ? s : (int)(tu_rand(seed) % (uint32_t)ngroups);
        for (int s = ns - 1; s > 0; s--) {
            int j = (int)(tu_rand(seed) % (uint32_t)(s + 1)), t = grp[s];
            grp[s] = grp[j];
            grp[j] = t;
        }
        struct tu_chunks acc[CODEC_MAX_CHUNKS];
        for (int g = 0; g < ngroups; g++) {
            tu_alloc(&acc[g], ne, len, g % 3);
            for (int e = 0; e < ne; e++)
                memset(acc[g].c[e], 0, len);
            for (int s = 0; s < ns; s++)
                if (grp[s] == g)
                    codec_plan_partial(p, s, len, srcs[s], acc[g].c);
        }
        for (int e = 0; e < ne; e++) {
            uint8_t *parts[CODEC_MAX_CHUNKS];
            for (int g = 0; g < ngroups; g++)
                parts[g] = acc[g].c[e];
            codec_xor(len, ngroups, parts, parts[0]);
            assert_memory_equal(parts[0], out.c[e], len);
        }
        for (int g = 0; g < ngroups; g++)
            tu_free(&acc[g]);
    }
    tu_free(&out);
    codec_plan_destroy(p);
}

static void partial_profile(const char *profile, size_t len, int patterns)
{
    struct codec *c = tu_codec(profile);
    int n = codec_n(c), k = codec_k(c), m = codec_m(c);
    const uint8_t *g = codec_generator(c);
    struct tu_chunks ref;
    tu_alloc(&ref, n, len, 0);
    for (int i = 0; i < k; i++)
        tu_fill(ref.c[i], len, (uint64_t)i * 5 + len);
    assert_int_equal(codec_encode(c, len, ref.c), 0);
    uint64_t seed = 777 + len;
    for (int t = 0; t < patterns; t++) {
        int ne = 1 + (int)(tu_rand(&seed) % (uint32_t)m), idx[CODEC_MAX_CHUNKS];
        tu_rand_comb(&seed, idx, ne, n);
        bool use[CODEC_MAX_CHUNKS];
        for (int i = 0; i < n; i++)
            use[i] = true;
        for (int e = 0; e < ne; e++)
            use[idx[e]] = false;
        if (tu_rank(g, n, k, use) == k)
            check_pattern(c, &ref, idx, ne, &seed);
    }
    tu_free(&ref);
    codec_destroy(c);
}

static void test_partials(void **state)
{
    (void)state;
    partial_profile("rs:k=3,m=2", 77, 30);
    partial_profile("rs:k=6,m=3", 4096, 30);
    partial_profile("rs:k=12,m=4", 1000, 30);
    partial_profile("rs:k=20,m=8", 65, 20);
    partial_profile("lrc:k=6,l=2,r=2", 4095, 40);
    partial_profile("lrc:k=12,l=2,r=2", 129, 40);
    partial_profile("rs:k=6,m=3", (1u << 20) + 7, 2);
    partial_profile("lrc:k=6,l=2,r=2", (1u << 20) + 7, 3);
}

static void test_xor_any_alignment(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 63, 64, 65, 511, 512, 4095, 4096, 70001};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
        for (int skew = 0; skew < 3; skew++) {
            size_t len = lens[l];
            struct tu_chunks t;
            tu_alloc(&t, 5, len, skew * 17);
            for (int i = 0; i < 4; i++)
                tu_fill(t.c[i], len, (uint64_t)i + len);
            codec_xor(len, 4, t.c, t.c[4]);
            for (size_t b = 0; b < len; b++)
                assert_int_equal(t.c[4][b], t.c[0][b] ^ t.c[1][b] ^ t.c[2][b] ^ t.c[3][b]);
            tu_free(&t);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lrc_local_reads),
        cmocka_unit_test(test_rs_reads_k_data_first),
        cmocka_unit_test(test_partials),
        cmocka_unit_test(test_xor_any_alignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
