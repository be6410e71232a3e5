/*
 * Azure-style LRC(k, l, r): the k data chunks in l groups of k/l, one XOR
 * local parity per group, and r global parities over all data. Global row t
 * (1..r) has coefficient a_j^t on data chunk j, a_j = 2^(j+1) all distinct,
 * so the globals alone are MDS (each r x r minor is a scaled Vandermonde) and,
 * like Azure's choice, every tested profile decodes every pattern a code of
 * this shape can decode at all (any r + 1 losses, and e.g. 1568 of 1820
 * patterns of 4 losses for (12,2,2); Cauchy globals managed 1555). A loss
 * inside a group is rebuilt from that group alone.
 */
#include "codecs/gf.h"
#include "codecs/internal.h"

static int lrc_group(const struct codec *c, int chunk)
{
    int gsize = c->k / c->prof.l;
    if (chunk >= 0 && chunk < c->k)
        return chunk / gsize;
    if (chunk >= c->k && chunk < c->k + c->prof.l)
        return chunk - c->k;
    return -1;
}

static int lrc_init(struct codec *c, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    int k = c->k, l = c->prof.l, r = c->prof.r;
    for (int i = 0; i < k; i++)
        c->gen[(size_t)i * (size_t)k + (size_t)i] = 1;
    for (int g = 0; g < l; g++)
        for (int j = 0; j < k; j++)
            c->gen[(size_t)(k + g) * (size_t)k + (size_t)j] = lrc_group(c, j) == g;
    for (int j = 0; j < k; j++) {
        uint8_t a = 1;
        for (int e = 0; e <= j; e++)
            a = codec_gf_mul(a, 2);
        uint8_t x = a;
        for (int t = 0; t < r; t++) {
            c->gen[(size_t)(k + l + t) * (size_t)k + (size_t)j] = x;
            x = codec_gf_mul(x, a);
        }
    }
    return 0;
}

static void add(const struct codec *c, const bool *available, bool *taken, int *order, int *n,
                int chunk)
{
    (void)c;
    if (available[chunk] && !taken[chunk]) {
        taken[chunk] = true;
        order[(*n)++] = chunk;
    }
}

/* The groups that lost something first (a lone loss needs nothing else),
 * then the other data, local parities, and globals last. */
static int lrc_read_order(const struct codec *c, const int *erased, int nerased,
                          const bool *available, int *order)
{
    bool taken[CODEC_MAX_CHUNKS] = {false};
    int n = 0;
    for (int e = 0; e < nerased; e++) {
        int g = lrc_group(c, erased[e]);
        if (g < 0)
            continue;
        int gsize = c->k / c->prof.l;
        for (int j = g * gsize; j < (g + 1) * gsize; j++)
            add(c, available, taken, order, &n, j);
        add(c, available, taken, order, &n, c->k + g);
    }
    for (int i = 0; i < c->n; i++)
        add(c, available, taken, order, &n, i);
    return n;
}

const struct codec_ops codec_lrc_ops = {
    .init = lrc_init,
    .encode = codec_linear_encode,
    .decode = codec_linear_decode,
    .read_order = lrc_read_order,
    .group = lrc_group,
};
