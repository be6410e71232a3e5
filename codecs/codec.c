/* codec_create and the accessors: one function table per scheme, the
 * encode/decode every linear code shares. */
#include <errno.h>
#include <stdlib.h>

#include "codecs/codec.h"
#include "codecs/gf.h"
#include "codecs/internal.h"

static const struct codec_ops *ops_for(enum codec_scheme s)
{
    /* PPR, ECPipe and TriEC are RS math; they differ in the graph deg/ builds. */
    return s == CODEC_LRC ? &codec_lrc_ops : &codec_rs_ops;
}

int codec_create(const struct codec_profile *p, struct codec **out, char *err, size_t errlen)
{
    if (!out)
        return codec_errf(err, errlen, -EINVAL, "codec_create: no output pointer");
    *out = NULL;
    int rc = codec_profile_check(p, err, errlen);
    if (rc < 0)
        return rc;
    struct codec *c = calloc(1, sizeof(*c));
    if (!c)
        return codec_errf(err, errlen, -ENOMEM, "codec_create: out of memory");
    c->prof = *p;
    c->k = p->k;
    c->m = p->m;
    c->n = p->k + p->m;
    c->ops = ops_for(p->scheme);
    c->gen = calloc((size_t)c->n, (size_t)c->k);
    c->enc_tables = malloc((size_t)c->m * (size_t)c->k * CODEC_GF_TABLE_BYTES);
    if (!c->gen || !c->enc_tables) {
        codec_destroy(c);
        return codec_errf(err, errlen, -ENOMEM, "codec_create: out of memory");
    }
    rc = c->ops->init(c, err, errlen);
    if (rc < 0) {
        codec_destroy(c);
        return rc;
    }
    codec_gf_init_tables(c->m, c->k, c->gen + (size_t)c->k * (size_t)c->k, c->enc_tables);
    *out = c;
    return 0;
}

void codec_destroy(struct codec *c)
{
    if (!c)
        return;
    free(c->gen);
    free(c->enc_tables);
    free(c);
}

const struct codec_profile *codec_profile(const struct codec *c)
{
    return &c->prof;
}

int codec_k(const struct codec *c)
{
    return c->k;
}

int codec_m(const struct codec *c)
{
    return c->m;
}

int codec_n(const struct codec *c)
{
    return c->n;
}

const uint8_t *codec_generator(const struct codec *c)
{
    return c->gen;
}

int codec_group(const struct codec *c, int chunk)
{
    return c->ops->group(c, chunk);
}

int codec_encode(const struct codec *c, size_t len, uint8_t *const *chunks)
{
    if (!c || !chunks)
        return -EINVAL;
    for (int i = 0; i < c->n; i++)
        if (!chunks[i])
            return -EINVAL;
    if (len == 0)
        return 0;
    return c->ops->encode(c, len, chunks);
}

int codec_decode(const struct codec *c, size_t len, uint8_t *const *chunks, const int *erased,
                 int nerased)
{
    if (!c || !chunks || (!erased && nerased > 0) || nerased < 0)
        return -EINVAL;
    for (int i = 0; i < c->n; i++)
        if (!chunks[i])
            return -EINVAL;
    if (nerased == 0 || len == 0)
        return 0;
    return c->ops->decode(c, len, chunks, erased, nerased);
}

int codec_linear_encode(const struct codec *c, size_t len, uint8_t *const *chunks)
{
    codec_gf_encode(len, c->m, c->k, c->enc_tables, chunks, chunks + c->k);
    return 0;
}

int codec_linear_decode(const struct codec *c, size_t len, uint8_t *const *chunks,
                        const int *erased, int nerased)
{
    bool available[CODEC_MAX_CHUNKS];
    for (int i = 0; i < c->n; i++)
        available[i] = true;
    for (int e = 0; e < nerased; e++)
        if (erased[e] >= 0 && erased[e] < c->n)
            available[erased[e]] = false;
    struct codec_plan *p;
    int rc = codec_plan_create(c, erased, nerased, available, &p, NULL, 0);
    if (rc < 0)
        return rc;
    uint8_t *srcs[CODEC_MAX_CHUNKS], *outs[CODEC_MAX_CHUNKS];
    for (int s = 0; s < p->nsurvivors; s++)
        srcs[s] = chunks[p->survivors[s]];
    for (int e = 0; e < p->nerased; e++)
        outs[e] = chunks[p->erased[e]];
    rc = codec_plan_apply(p, len, srcs, outs);
    codec_plan_destroy(p);
    return rc;
}
