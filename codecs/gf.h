/*
 * GF(2^8) arithmetic (polynomial 0x11d) over ISA-L.
 *
 * Everything an EC calculator needs: expanded multiplication tables for a
 * coefficient matrix, a matrix-vector product over chunks, the same product
 * accumulated into existing chunks (a partial product), and plain XOR.
 * Lengths are any size >= 1; ISA-L's int lengths are handled here.
 * Pure: no I/O, no threads, no global state.
 */
#ifndef INEC_CODECS_GF_H
#define INEC_CODECS_GF_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of expanded table per coefficient (ISA-L's ec_init_tables layout). */
#define CODEC_GF_TABLE_BYTES 32

uint8_t codec_gf_mul(uint8_t a, uint8_t b);
uint8_t codec_gf_inv(uint8_t a);

/* Invert the n x n matrix `in` (row-major) into `out`; `in` is destroyed.
 * Returns 0, or -EDOM when the matrix is singular. */
int codec_gf_invert_matrix(uint8_t *in, uint8_t *out, int n);

/* Expand a rows x cols coefficient matrix (row-major) into `tables`, which
 * must hold rows * cols * CODEC_GF_TABLE_BYTES bytes. */
void codec_gf_init_tables(int rows, int cols, const uint8_t *coeffs, uint8_t *tables);

/* dsts[r] = sum over c of coeffs[r][c] * srcs[c], for r < rows. */
void codec_gf_encode(size_t len, int rows, int cols, const uint8_t *tables, uint8_t *const *srcs,
                     uint8_t *const *dsts);

/* dsts[r] ^= coeffs[r][col] * src: adds source `col` of the product into
 * dsts, so a sum can be built one source (or one node) at a time. */
void codec_gf_encode_update(size_t len, int rows, int cols, int col, const uint8_t *tables,
                            const uint8_t *src, uint8_t *const *dsts);

/* dst = srcs[0] ^ srcs[1] ^ ... ^ srcs[n-1]; n >= 1, dst may be one of srcs. */
void codec_xor(size_t len, int n, uint8_t *const *srcs, uint8_t *dst);

#endif
