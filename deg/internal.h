/*
 * Shared between deg/ files, not part of the API: one vertex run on one
 * device (runner.c), used by the in-process runner and by the tcp server.
 */
#ifndef INEC_DEG_INTERNAL_H
#define INEC_DEG_INTERNAL_H

#include <pthread.h>

#include "deg/deg.h"

struct deg_vx;

int deg_vx_open(const struct deg_graph *g, int v, size_t len, uint8_t *const *chunks,
                const struct deg_run_opts *opts, struct deg_vx **out, char *err, size_t errlen);
void deg_vx_close(struct deg_vx *x);
/* Device address, and QP numbers of in-edge slot / out-edge position. */
const char *deg_vx_addr(const struct deg_vx *x);
uint32_t deg_vx_in_qpn(const struct deg_vx *x, int slot);
uint32_t deg_vx_out_qpn(const struct deg_vx *x, int pos);
int deg_vx_connect_in(struct deg_vx *x, int slot, const char *addr, uint32_t qpn, char *err,
                      size_t errlen);
int deg_vx_connect_out(struct deg_vx *x, int pos, const char *addr, uint32_t qpn, char *err,
                       size_t errlen);
/* Posts the vertex's primitive for every slice, waits (bounded) for its
 * inputs, calculation and sends, then hands its results to result() under
 * result_lock (may be NULL). */
int deg_vx_run(struct deg_vx *x, deg_result_fn result, void *arg, pthread_mutex_t *result_lock,
               char *err, size_t errlen);

#endif
