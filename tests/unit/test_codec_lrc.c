/* LRC: every pattern up to l + r losses either decodes byte-exact (the
 * surviving generator rows have rank k) or fails with -EIO; local repair. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tests/unit/codec_test_util.h"

static void test_generator_shape(void **state)
{
    (void)state;
    struct codec *c = tu_codec("lrc:k=6,l=2,r=2");
    assert_non_null(c);
    assert_int_equal(codec_n(c), 10);
    assert_int_equal(codec_m(c), 4);
    const uint8_t *g = codec_generator(c);
    for (int j = 0; j < 6; j++) {
        assert_int_equal(g[6 * 6 + j], j < 3);  /* local parity of group 0 */
        assert_int_equal(g[7 * 6 + j], j >= 3); /* local parity of group 1 */
        assert_int_equal(codec_group(c, j), j / 3);
        assert_int_not_equal(g[8 * 6 + j], 0); /* globals cover all data */
        assert_int_not_equal(g[9 * 6 + j], 0);
    }
    assert_int_equal(codec_group(c, 6), 0);
    assert_int_equal(codec_group(c, 7), 1);
    assert_int_equal(codec_group(c, 8), -1);
    assert_int_equal(codec_group(c, 9), -1);
    codec_destroy(c);
}

/* What any code of LRC shape can decode: each group fixes one of its losses
 * locally, every other loss needs a surviving global parity. */
static bool shape_recoverable(const struct codec *c, const bool *use)
{
    const struct codec_profile *p = codec_profile(c);
    int need = 0, globals = 0;
    for (int g = 0; g < p->l; g++) {
        int lost = 0;
        for (int i = 0; i < p->k + p->l; i++)
            lost += codec_group(c, i) == g && !use[i];
        need += lost > 1 ? lost - 1 : 0;
    }
    for (int i = p->k + p->l; i < p->k + p->m; i++)
        globals += use[i];
    return need <= globals;
}

/* Returns how many patterns of each size were recoverable in rec[size]. */
static void all_patterns(const char *profile, size_t len, int skew, long *rec, long *total)
{
    struct codec *c = tu_codec(profile);
    assert_non_null(c);
    int n = codec_n(c), k = codec_k(c), m = codec_m(c);
    const uint8_t *g = codec_generator(c);
    struct tu_chunks ref, work;
    tu_alloc(&ref, n, len, skew);
    tu_alloc(&work, n, len, skew);
    for (int i = 0; i < k; i++)
        tu_fill(ref.c[i], len, (uint64_t)i * 31 + len);
    assert_int_equal(codec_encode(c, len, ref.c), 0);
    for (int size = 1; size <= m; size++) {
        int idx[CODEC_MAX_CHUNKS];
        tu_first_comb(idx, size);
        do {
            bool use[CODEC_MAX_CHUNKS];
            for (int i = 0; i < n; i++)
                use[i] = true;
            for (int e = 0; e < size; e++)
                use[idx[e]] = false;
            bool recoverable = tu_rank(g, n, k, use) == k;
            /* Our globals are as good as the shape allows. */
            if (recoverable != shape_recoverable(c, use))
                fail_msg("%s: pattern of %d (first %d): rank says %d, shape says %d", profile, size,
                         idx[0], recoverable, !recoverable);
            tu_copy(&work, &ref);
            for (int e = 0; e < size; e++)
                memset(work.c[idx[e]], 0x5A, len);
            int rc = codec_decode(c, len, work.c, idx, size);
            total[size]++;
            if (recoverable) {
                rec[size]++;
                if (rc != 0)
                    fail_msg("%s: recoverable pattern of %d (first %d) failed: %d", profile, size,
                             idx[0], rc);
                for (int i = 0; i < n; i++)
                    if (memcmp(work.c[i], ref.c[i], len) != 0)
                        fail_msg("%s: chunk %d wrong after %d erasures", profile, i, size);
            } else {
                if (rc != -EIO)
                    fail_msg("%s: unrecoverable pattern of %d (first %d) gave %d, not -EIO",
                             profile, size, idx[0], rc);
                for (int i = 0; i < n; i++) /* survivors untouched */
                    if (use[i] && memcmp(work.c[i], ref.c[i], len) != 0)
                        fail_msg("%s: failed decode touched chunk %d", profile, i);
            }
        } while (tu_next_comb(idx, size, n));
    }
    tu_free(&ref);
    tu_free(&work);
    codec_destroy(c);
}

static void check_profile(const char *profile, int r)
{
    static const size_t lens[] = {1, 100};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        long rec[CODEC_MAX_CHUNKS] = {0}, total[CODEC_MAX_CHUNKS] = {0};
        all_patterns(profile, lens[l], (int)l, rec, total);
        /* Like Azure's LRC: any r + 1 losses are recoverable. */
        for (int s = 1; s <= r + 1; s++)
            assert_int_equal(rec[s], total[s]);
        if (l == 0)
            print_message("%s: recoverable patterns of l+r losses: %ld of %ld\n", profile,
                          rec[r + 2], total[r + 2]);
    }
}

static void test_all_patterns(void **state)
{
    (void)state;
    check_profile("lrc:k=4,l=2,r=2", 2);
    check_profile("lrc:k=6,l=2,r=2", 2);
    check_profile("lrc:k=12,l=2,r=2", 2);
    check_profile("lrc:k=6,l=3,r=1", 1);
}

static void test_lengths(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 63, 64, 65, 4095, 4096, (1u << 20) + 7};
    struct codec *c = tu_codec("lrc:k=6,l=2,r=2");
    static const int patterns[][4] = {{1, -1}, {6, -1}, {0, 4, -1}, {0, 1, 2, -1}, {8, 9, 0, 3}};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        size_t len = lens[l];
        struct tu_chunks ref, work;
        tu_alloc(&ref, 10, len, (int)l * 7 % 64);
        tu_alloc(&work, 10, len, (int)l * 7 % 64);
        for (int i = 0; i < 6; i++)
            tu_fill(ref.c[i], len, (uint64_t)i + len);
        assert_int_equal(codec_encode(c, len, ref.c), 0);
        for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
            int ne = 0;
            while (ne < 4 && patterns[p][ne] >= 0)
                ne++;
            tu_copy(&work, &ref);
            for (int e = 0; e < ne; e++)
                memset(work.c[patterns[p][e]], 0, len);
            assert_int_equal(codec_decode(c, len, work.c, patterns[p], ne), 0);
            for (int i = 0; i < 10; i++)
                assert_memory_equal(work.c[i], ref.c[i], len);
        }
        tu_free(&ref);
        tu_free(&work);
    }
    codec_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator_shape),
        cmocka_unit_test(test_all_patterns),
        cmocka_unit_test(test_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
