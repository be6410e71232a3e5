/* Helpers shared by the codec test programs: data, chunk sets, an independent
 * GF(2^8) rank, and erasure-pattern enumeration. */
#ifndef INEC_TESTS_CODEC_TEST_UTIL_H
#define INEC_TESTS_CODEC_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "codecs/gf.h"

static inline uint32_t tu_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

static inline void tu_fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)tu_rand(&s);
}

/* n chunks of len bytes; `skew` bytes past a 64-byte boundary to exercise
 * unaligned paths. */
struct tu_chunks {
    int n;
    size_t len;
    uint8_t *raw[CODEC_MAX_CHUNKS];
    uint8_t *c[CODEC_MAX_CHUNKS];
};

static inline void tu_alloc(struct tu_chunks *t, int n, size_t len, int skew)
{
    t->n = n;
    t->len = len;
    for (int i = 0; i < n; i++) {
        t->raw[i] = aligned_alloc(64, (len + 64 + 63) / 64 * 64);
        t->c[i] = t->raw[i] + skew;
    }
}

static inline void tu_free(struct tu_chunks *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->raw[i]);
}

static inline void tu_copy(struct tu_chunks *dst, const struct tu_chunks *src)
{
    for (int i = 0; i < src->n; i++)
        memcpy(dst->c[i], src->c[i], src->len);
}

/* Rank over GF(2^8) of the generator rows where use[i], computed here by
 * plain Gaussian elimination so it does not share the planner's code. */
static inline int tu_rank(const uint8_t *gen, int n, int k, const bool *use)
{
    uint8_t a[CODEC_MAX_CHUNKS][CODEC_MAX_CHUNKS];
    int rows = 0;
    for (int i = 0; i < n; i++)
        if (use[i])
            memcpy(a[rows++], gen + (size_t)i * (size_t)k, (size_t)k);
    int rank = 0;
    for (int col = 0; col < k && rank < rows; col++) {
        int p = rank;
        while (p < rows && !a[p][col])
            p++;
        if (p == rows)
            continue;
        uint8_t tmp[CODEC_MAX_CHUNKS];
        memcpy(tmp, a[p], (size_t)k);
        memcpy(a[p], a[rank], (size_t)k);
        memcpy(a[rank], tmp, (size_t)k);
        uint8_t inv = codec_gf_inv(a[rank][col]);
        for (int r = 0; r < rows; r++) {
            if (r == rank || !a[r][col])
                continue;
            uint8_t f = codec_gf_mul(a[r][col], inv);
            for (int j = 0; j < k; j++)
                a[r][j] ^= codec_gf_mul(f, a[rank][j]);
        }
        rank++;
    }
    return rank;
}

/* Next combination of `size` indices out of n in idx (lexicographic). */
static inline bool tu_next_comb(int *idx, int size, int n)
{
    int i = size - 1;
    while (i >= 0 && idx[i] == n - size + i)
        i--;
    if (i < 0)
        return false;
    idx[i]++;
    for (int j = i + 1; j < size; j++)
        idx[j] = idx[j - 1] + 1;
    return true;
}

static inline void tu_first_comb(int *idx, int size)
{
    for (int i = 0; i < size; i++)
        idx[i] = i;
}

/* A random `size`-subset of [0, n) in idx, ascending. */
static inline void tu_rand_comb(uint64_t *s, int *idx, int size, int n)
{
    bool pick[CODEC_MAX_CHUNKS] = {false};
    for (int got = 0; got < size;) {
        int i = (int)(tu_rand(s) % (uint32_t)n);
        if (!pick[i]) {
            pick[i] = true;
            got++;
        }
    }
    int j = 0;
    for (int i = 0; i < n; i++)
        if (pick[i])
            idx[j++] = i;
}

static inline struct codec *tu_codec(const char *profile)
{
    struct codec_profile p;
    char err[256];
    if (codec_profile_parse(profile, &p, err, sizeof(err)) < 0)
        return NULL;
    struct codec *c = NULL;
    codec_create(&p, &c, err, sizeof(err));
    return c;
}

#endif
