/*
 * Private to codecs/: the function table behind every scheme, in the shape
 * of Ceph's ErasureCodeInterface (init, encode, decode, minimum_to_decode).
 */
#ifndef INEC_CODECS_INTERNAL_H
#define INEC_CODECS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "codecs/codec.h"
#include "codecs/errf.h"

struct codec;

struct codec_ops {
    /* Fills c->gen (n x k, identity on top) from c->prof. */
    int (*init)(struct codec *c, char *err, size_t errlen);
    int (*encode)(const struct codec *c, size_t len, uint8_t *const *chunks);
    int (*decode)(const struct codec *c, size_t len, uint8_t *const *chunks, const int *erased,
                  int nerased);
    /* minimum_to_decode, as a preference: writes the available chunks in the
     * order the planner should try them; it reads a prefix, stopping as soon
     * as every erased chunk is in the span of what it has read. */
    int (*read_order)(const struct codec *c, const int *erased, int nerased, const bool *available,
                      int *order);
    int (*group)(const struct codec *c, int chunk);
};

struct codec {
    struct codec_profile prof;
    int k, m, n;
    const struct codec_ops *ops;
    uint8_t *gen;        /* n x k generator */
    uint8_t *enc_tables; /* expanded rows [k, n) of gen */
};

extern const struct codec_ops codec_rs_ops;
extern const struct codec_ops codec_lrc_ops;

/* Linear encode/decode shared by every scheme (codec.c). */
int codec_linear_encode(const struct codec *c, size_t len, uint8_t *const *chunks);
int codec_linear_decode(const struct codec *c, size_t len, uint8_t *const *chunks,
                        const int *erased, int nerased);

int codec_profile_check(const struct codec_profile *p, char *err, size_t errlen);

#endif
