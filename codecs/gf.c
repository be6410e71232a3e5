#include "codecs/gf.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

/* ISA-L takes int lengths; larger chunks are cut into steps of this size,
 * a multiple of 64 so every step but the last stays vector-aligned. */
#define STEP ((size_t)1 << 30)

#define MAX_VECS 256

uint8_t codec_gf_mul(uint8_t a, uint8_t b)
{
    return gf_mul(a, b);
}

uint8_t codec_gf_inv(uint8_t a)
{
    return gf_inv(a);
}

int codec_gf_invert_matrix(uint8_t *in, uint8_t *out, int n)
{
    return gf_invert_matrix(in, out, n) == 0 ? 0 : -EDOM;
}

void codec_gf_init_tables(int rows, int cols, const uint8_t *coeffs, uint8_t *tables)
{
    ec_init_tables(cols, rows, (unsigned char *)coeffs, tables);
}

void codec_gf_encode(size_t len, int rows, int cols, const uint8_t *tables,
                     uint8_t *const *srcs, uint8_t *const *dsts)
{
    uint8_t *s[MAX_VECS], *d[MAX_VECS];
    for (size_t off = 0; off < len; off += STEP) {
        size_t n = len - off < STEP ? len - off : STEP;
        for (int c = 0; c < cols; c++)
            s[c] = srcs[c] + off;
        for (int r = 0; r < rows; r++)
            d[r] = dsts[r] + off;
        ec_encode_data((int)n, cols, rows, (unsigned char *)tables, s, d);
    }
}

void codec_gf_encode_update(size_t len, int rows, int cols, int col, const uint8_t *tables,
                            const uint8_t *src, uint8_t *const *dsts)
{
    uint8_t *d[MAX_VECS];
    for (size_t off = 0; off < len; off += STEP) {
        size_t n = len - off < STEP ? len - off : STEP;
        for (int r = 0; r < rows; r++)
            d[r] = dsts[r] + off;
        ec_encode_data_update((int)n, cols, rows, col, (unsigned char *)tables,
                              (unsigned char *)src + off, d);
    }
}

static int aligned32(const void *p)
{
    return ((uintptr_t)p & 31) == 0;
}

void codec_xor(size_t len, int n, uint8_t *const *srcs, uint8_t *dst)
{
    if (n == 1) {
        if (dst != srcs[0])
            memmove(dst, srcs[0], len);
        return;
    }
    /* xor_gen wants >= 2 sources, 32-byte aligned pointers; do the aligned
     * bulk with it and the tail (or an unaligned call) byte-wise. */
    int ok = aligned32(dst);
    for (int i = 0; i < n && ok; i++)
        ok = aligned32(srcs[i]);
    size_t bulk = ok ? len & ~(size_t)63 : 0;
    void *v[MAX_VECS + 1];
    for (size_t off = 0; off < bulk; off += STEP) {
        size_t step = bulk - off < STEP ? bulk - off : STEP;
        for (int i = 0; i < n; i++)
            v[i] = srcs[i] + off;
        v[n] = dst + off;
        xor_gen(n + 1, (int)step, v);
    }
    for (size_t i = bulk; i < len; i++) {
        uint8_t x = 0;
        for (int j = 0; j < n; j++)
            x ^= srcs[j][i];
        dst[i] = x;
    }
}
