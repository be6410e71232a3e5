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

void codec_gf_encode(size_t len, int rows, int cols, const uint8_t *tables, uint8_t *const *srcs,
                     uint8_t *const *dsts)
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

/* dst[0, len) = XOR of the sources, in blocks small enough to stay in L1:
 * the first source is copied into a word buffer, the others XORed in word by
 * word (memcpy keeps unaligned loads legal; the compiler vectorises them). */
static void xor_words(size_t len, int n, uint8_t *const *srcs, uint8_t *dst)
{
    enum { WORDS = 64 };
    uint64_t acc[WORDS];
    for (size_t off = 0; off < len; off += sizeof(acc)) {
        size_t b = len - off < sizeof(acc) ? len - off : sizeof(acc);
        acc[(b - 1) / 8] = 0; /* a partial last word is XORed whole */
        memcpy(acc, srcs[0] + off, b);
        for (int j = 1; j < n; j++) {
            uint64_t w[WORDS];
            w[(b - 1) / 8] = 0;
            memcpy(w, srcs[j] + off, b);
            for (size_t i = 0; i < (b + 7) / 8; i++)
                acc[i] ^= w[i];
        }
        memcpy(dst + off, acc, b);
    }
}

void codec_xor(size_t len, int n, uint8_t *const *srcs, uint8_t *dst)
{
    if (n == 1) {
        if (dst != srcs[0])
            memmove(dst, srcs[0], len);
        return;
    }
    /* xor_gen wants >= 2 sources and 32-byte aligned pointers: the aligned
     * bulk goes to it, the tail (or an unaligned call) word-wise. */
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
    if (bulk < len) {
        uint8_t *tail[MAX_VECS];
        for (int i = 0; i < n; i++)
            tail[i] = srcs[i] + bulk;
        xor_words(len - bulk, n, tail, dst + bulk);
    }
}
