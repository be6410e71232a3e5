/* Systematic Reed-Solomon over a Cauchy matrix: every k x k submatrix of the
 * generator is invertible for any k + m <= 255 (ISA-L's Vandermonde is not). */
#include <isa-l/erasure_code.h>

#include "codecs/internal.h"

static int rs_init(struct codec *c, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    gf_gen_cauchy1_matrix(c->gen, c->n, c->k);
    return 0;
}

/* Data first, then parity: any k of them rebuild everything. */
static int rs_read_order(const struct codec *c, const int *erased, int nerased,
                         const bool *available, int *order)
{
    (void)erased;
    (void)nerased;
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (available[i])
            order[n++] = i;
    return n;
}

static int rs_group(const struct codec *c, int chunk)
{
    (void)c;
    (void)chunk;
    return -1;
}

const struct codec_ops codec_rs_ops = {
    .init = rs_init,
    .encode = codec_linear_encode,
    .decode = codec_linear_decode,
    .read_order = rs_read_order,
    .group = rs_group,
};
