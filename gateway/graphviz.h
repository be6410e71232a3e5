/*
 * Renders Graphviz DOT (deg_to_dot's DEGs) to SVG with graphviz's `dot`
 * program, for the dashboard: run as a child process with the DOT on stdin,
 * bounded in time (10 s) and output (8 MiB), so a picture can never hang or
 * bloat the control API.
 */
#ifndef INEC_GATEWAY_GRAPHVIZ_H
#define INEC_GATEWAY_GRAPHVIZ_H

#include <stddef.h>

/* 0 and *svg (free()), or -ENOENT (dot is not installed), -ETIMEDOUT,
 * -EFBIG, -EIO (dot failed; msg says how). */
int gw_dot_to_svg(const char *dot, char **svg, size_t *len, char *msg, size_t msglen);

#endif
