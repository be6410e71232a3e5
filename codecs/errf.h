/*
 * The error convention of every layer: return a negative errno and explain it
 * in a caller's buffer. One helper, so `return codec_errf(err, errlen, -EINVAL,
 * "vertex %s: ...", name);` reads the same everywhere.
 */
#ifndef INEC_CODECS_ERRF_H
#define INEC_CODECS_ERRF_H

#include <stddef.h>

/* Writes the message to err (when err and errlen are non-zero); returns rc. */
int codec_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
