/* Reed-Solomon: every erasure pattern up to m decodes byte-exact; the
 * generator is MDS (every k x k submatrix invertible). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tests/unit/codec_test_util.h"

/* Encodes random data, then for each pattern wipes the erased chunks,
 * decodes and compares everything. sample < 0: every pattern of up to m
 * erasures; else that many random patterns of each size. */
static void roundtrip(const char *profile, size_t len, int skew, int sample)
{
    struct codec *c = tu_codec(profile);
    assert_non_null(c);
    int n = codec_n(c), k = codec_k(c), m = codec_m(c);
    struct tu_chunks ref, work;
    tu_alloc(&ref, n, len, skew);
    tu_alloc(&work, n, len, skew);
    for (int i = 0; i < k; i++)
        tu_fill(ref.c[i], len, (uint64_t)(i + 1) * 977 + len);
    assert_int_equal(codec_encode(c, len, ref.c), 0);
    uint64_t seed = 12345 + len;
    for (int size = 1; size <= m; size++) {
        int idx[CODEC_MAX_CHUNKS];
        tu_first_comb(idx, size);
        for (int t = 0;; t++) {
            if (sample >= 0) {
                if (t == sample)
                    break;
                tu_rand_comb(&seed, idx, size, n);
            }
            tu_copy(&work, &ref);
            for (int e = 0; e < size; e++)
                memset(work.c[idx[e]], 0xA5, len);
            int rc = codec_decode(c, len, work.c, idx, size);
            if (rc != 0)
                fail_msg("%s len %zu: decode of %d erasures failed: %d", profile, len, size, rc);
            for (int i = 0; i < n; i++)
                if (memcmp(work.c[i], ref.c[i], len) != 0)
                    fail_msg("%s len %zu: chunk %d differs after %d erasures", profile, len, i,
                             size);
            if (sample < 0 && !tu_next_comb(idx, size, n))
                break;
        }
    }
    tu_free(&ref);
    tu_free(&work);
    codec_destroy(c);
}

/* Parity equals the generator applied byte by byte (an independent product). */
static void test_encode_is_generator_product(void **state)
{
    (void)state;
    struct codec *c = tu_codec("rs:k=6,m=3");
    int n = codec_n(c), k = codec_k(c);
    const uint8_t *g = codec_generator(c);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            assert_int_equal(g[i * k + j], i == j);
    size_t len = 1000;
    struct tu_chunks t;
    tu_alloc(&t, n, len, 3);
    for (int i = 0; i < k; i++)
        tu_fill(t.c[i], len, (uint64_t)i + 7);
    assert_int_equal(codec_encode(c, len, t.c), 0);
    for (int r = k; r < n; r++)
        for (size_t b = 0; b < len; b++) {
            uint8_t x = 0;
            for (int j = 0; j < k; j++)
                x ^= codec_gf_mul(g[r * k + j], t.c[j][b]);
            assert_int_equal(t.c[r][b], x);
        }
    tu_free(&t);
    codec_destroy(c);
}

static void test_all_patterns_small(void **state)
{
    (void)state;
    static const char *const profiles[] = {"rs:k=3,m=2",  "rs:k=6,m=3",  "rs:k=12,m=4",
                                           "rs:k=10,m=4", "ppr:k=6,m=3", "tri:k=3,m=2"};
    static const size_t lens[] = {1, 65, 200};
    for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
            roundtrip(profiles[p], lens[l], (int)l, -1);
}

static void test_sample_20_8(void **state)
{
    (void)state;
    roundtrip("rs:k=20,m=8", 97, 1, 60);
    roundtrip("rs:k=20,m=8", 4096, 0, 10);
}

static void test_lengths(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 63, 64, 65, 4095, 4096, (1u << 20) + 7};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        int sample = lens[l] > 65536 ? 1 : 4;
        roundtrip("rs:k=6,m=3", lens[l], 0, sample);
        roundtrip("rs:k=6,m=3", lens[l], 5, sample);
        roundtrip("rs:k=10,m=4", lens[l], 33, sample);
    }
}

static void test_widest(void **state)
{
    (void)state;
    roundtrip("rs:k=200,m=55", 130, 0, 2);
}

/* Every k-subset of the n generator rows is invertible. */
static void mds_check(const char *profile, long sample)
{
    struct codec *c = tu_codec(profile);
    assert_non_null(c);
    int n = codec_n(c), k = codec_k(c);
    const uint8_t *g = codec_generator(c);
    uint8_t *a = malloc((size_t)k * (size_t)k), *inv = malloc((size_t)k * (size_t)k);
    int idx[CODEC_MAX_CHUNKS];
    uint64_t seed = 99;
    tu_first_comb(idx, k);
    long tried = 0;
    for (;;) {
        if (sample >= 0) {
            if (tried == sample)
                break;
            tu_rand_comb(&seed, idx, k, n);
        }
        for (int r = 0; r < k; r++)
            memcpy(a + (size_t)r * (size_t)k, g + (size_t)idx[r] * (size_t)k, (size_t)k);
        if (codec_gf_invert_matrix(a, inv, k) != 0)
            fail_msg("%s: rows starting %d,%d,... are singular", profile, idx[0], idx[1]);
        tried++;
        if (sample < 0 && !tu_next_comb(idx, k, n))
            break;
    }
    free(a);
    free(inv);
    codec_destroy(c);
}

static void test_mds(void **state)
{
    (void)state;
    mds_check("rs:k=3,m=2", -1);
    mds_check("rs:k=6,m=3", -1);
    mds_check("rs:k=10,m=4", -1);
    mds_check("rs:k=12,m=4", -1);
    mds_check("rs:k=20,m=8", 20000);
    mds_check("rs:k=128,m=127", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_is_generator_product),
        cmocka_unit_test(test_all_patterns_small),
        cmocka_unit_test(test_sample_20_8),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_widest),
        cmocka_unit_test(test_mds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
