/*
 * Erasure codes behind one small interface (Ceph's ErasureCodeInterface shape):
 * a profile of key=value pairs, chunk counts, encode, decode, and decode plans.
 * Pure: no I/O, no threads, no global state.
 *
 * Chunk numbering, the same in every layer:
 *   [0, k)            data chunks
 *   [k, n)            parity chunks, n = k + m
 *   LRC(k,l,r):       m = l + r; [k, k+l) the XOR local parity of each group
 *                     (group g = data chunks [g*k/l, (g+1)*k/l)), then r globals.
 *
 * Every code is systematic and linear: chunk i = sum over j of G[i][j] * data j,
 * with G the n x k generator (first k rows the identity). Decode plans express
 * a rebuilt chunk as sum_s coeff_s * survivor_s, which deg/ splits into partial
 * products computed on different nodes (PPR, ECPipe, TriEC) and combined by XOR.
 *
 * Errors: negative errno; functions that parse or validate take `err` (may be
 * NULL) and write a message naming the bad key or value.
 *   -EINVAL  bad argument or profile
 *   -EIO     the erasure pattern cannot be recovered
 */
#ifndef INEC_CODECS_CODEC_H
#define INEC_CODECS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CODEC_MAX_CHUNKS 255

/* RS-family schemes share RS math; they differ in the graph deg/ builds. */
enum codec_scheme {
    CODEC_RS,
    CODEC_LRC,
    CODEC_PPR,
    CODEC_ECPIPE,
    CODEC_TRIEC,
};

/* Written "rs:k=6,m=3", "lrc:k=6,l=2,r=2", "ppr:k=6,m=3", "ecpipe:k=6,m=3",
 * "tri:k=6,m=3". */
struct codec_profile {
    enum codec_scheme scheme;
    int k; /* data chunks */
    int m; /* parity chunks (LRC: l + r) */
    int l; /* LRC local groups, else 0 */
    int r; /* LRC global parities, else 0 */
};

int codec_profile_parse(const char *text, struct codec_profile *out, char *err, size_t errlen);
/* Canonical text of a profile; returns what snprintf returns. */
int codec_profile_format(const struct codec_profile *p, char *buf, size_t len);
const char *codec_scheme_name(enum codec_scheme scheme);

struct codec;

int codec_create(const struct codec_profile *p, struct codec **out, char *err, size_t errlen);
void codec_destroy(struct codec *c);

const struct codec_profile *codec_profile(const struct codec *c);
int codec_k(const struct codec *c);
int codec_m(const struct codec *c);
int codec_n(const struct codec *c);
/* The n x k generator, row-major; rows [k, n) are the coding matrix. */
const uint8_t *codec_generator(const struct codec *c);
/* For LRC: the local group of chunk i (data or local parity), -1 for a global
 * parity or a non-LRC code. */
int codec_group(const struct codec *c, int chunk);

/* chunks[0..n): fills the parity chunks [k, n) from the data chunks. */
int codec_encode(const struct codec *c, size_t len, uint8_t *const *chunks);

/* chunks[0..n): rebuilds chunks erased[0..nerased) in place from the others,
 * which must all hold valid data (use a plan to read fewer). */
int codec_decode(const struct codec *c, size_t len, uint8_t *const *chunks, const int *erased,
                 int nerased);

/*
 * A decode plan: which survivors to read and the coefficients that rebuild
 * each erased chunk from them,
 *     chunk erased[e] = sum over s of coeffs[e * nsurvivors + s] * chunk survivors[s].
 * It reads the minimum: an LRC single loss inside a group reads only that
 * group; otherwise k chunks, data chunks first.
 */
struct codec_plan {
    int nerased;
    int erased[CODEC_MAX_CHUNKS];
    int nsurvivors;
    int survivors[CODEC_MAX_CHUNKS]; /* ascending chunk indices */
    bool xor_only;                   /* every coefficient is 0 or 1: an XOR calculator suffices */
    uint8_t *coeffs;                 /* nerased x nsurvivors */
};

/* available[i] for i < n says whether chunk i can be read; erased chunks must
 * not be available. */
int codec_plan_create(const struct codec *c, const int *erased, int nerased, const bool *available,
                      struct codec_plan **out, char *err, size_t errlen);
void codec_plan_destroy(struct codec_plan *p);

/* outs[e] = the rebuilt chunk erased[e]; srcs[s] = chunk survivors[s]. */
int codec_plan_apply(const struct codec_plan *p, size_t len, uint8_t *const *srcs,
                     uint8_t *const *outs);

/* One share of a plan, for a node holding survivor position s:
 * accs[e] ^= coeffs[e][s] * src. Summing the shares of any partition of the
 * survivors, then XOR-combining them (codec_xor), gives codec_plan_apply. */
void codec_plan_partial(const struct codec_plan *p, int s, size_t len, const uint8_t *src,
                        uint8_t *const *accs);

#endif
