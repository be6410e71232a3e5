/* GF(2^8) wrappers: products against a scalar reference, any length, any alignment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codecs/gf.h"

static const size_t lengths[] = {1, 63, 64, 65, 4095, 4096, (1u << 20) + 7};

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static void test_encode_matches_scalar(void **state)
{
    (void)state;
    enum { ROWS = 3, COLS = 5 };
    uint8_t coeffs[ROWS * COLS];
    fill(coeffs, sizeof(coeffs), 7);
    uint8_t tables[ROWS * COLS * CODEC_GF_TABLE_BYTES];
    codec_gf_init_tables(ROWS, COLS, coeffs, tables);
    for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
        size_t len = lengths[li];
        uint8_t *srcs[COLS], *dsts[ROWS], *acc[ROWS];
        for (int c = 0; c < COLS; c++) {
            srcs[c] = malloc(len + 1) + 1; /* deliberately unaligned */
            fill(srcs[c], len, (unsigned)(c + 100 * li));
        }
        for (int r = 0; r < ROWS; r++) {
            dsts[r] = malloc(len);
            acc[r] = calloc(1, len);
        }
        codec_gf_encode(len, ROWS, COLS, tables, srcs, dsts);
        for (int c = 0; c < COLS; c++)
            codec_gf_encode_update(len, ROWS, COLS, c, tables, srcs[c], acc);
        for (int r = 0; r < ROWS; r++) {
            for (size_t i = 0; i < len; i++) {
                uint8_t x = 0;
                for (int c = 0; c < COLS; c++)
                    x ^= codec_gf_mul(coeffs[r * COLS + c], srcs[c][i]);
                assert_int_equal(dsts[r][i], x);
            }
            assert_memory_equal(dsts[r], acc[r], len);
        }
        for (int c = 0; c < COLS; c++)
            free(srcs[c] - 1);
        for (int r = 0; r < ROWS; r++) {
            free(dsts[r]);
            free(acc[r]);
        }
    }
}

static void test_xor_any_alignment(void **state)
{
    (void)state;
    for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
        size_t len = lengths[li];
        for (int shift = 0; shift < 2; shift++) {
            uint8_t *bufs[4], *dst = aligned_alloc(64, (len + 127) & ~(size_t)63);
            for (int i = 0; i < 4; i++) {
                bufs[i] = (uint8_t *)aligned_alloc(64, (len + 127) & ~(size_t)63) + shift;
                fill(bufs[i], len, (unsigned)(i + 1));
            }
            codec_xor(len, 4, bufs, dst + shift);
            for (size_t i = 0; i < len; i++)
                assert_int_equal(dst[shift + i], bufs[0][i] ^ bufs[1][i] ^ bufs[2][i] ^ bufs[3][i]);
            for (int i = 0; i < 4; i++)
                free(bufs[i] - shift);
            free(dst);
        }
    }
}

static void test_invert_singular(void **state)
{
    (void)state;
    uint8_t m[4] = {1, 2, 1, 2}, out[4];
    assert_int_equal(codec_gf_invert_matrix(m, out, 2), -EDOM);
    uint8_t id[4] = {1, 0, 0, 1};
    assert_int_equal(codec_gf_invert_matrix(id, out, 2), 0);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
    assert_int_equal(codec_gf_mul(codec_gf_inv(0x53), 0x53), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_matches_scalar),
        cmocka_unit_test(test_xor_any_alignment),
        cmocka_unit_test(test_invert_singular),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
