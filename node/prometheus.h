/*
 * The Prometheus text exposition format's one rule both /metrics pages (a
 * node's, node/metrics_server.c, and the gateway's, gateway/metrics.c) share.
 */
#ifndef INEC_NODE_PROMETHEUS_H
#define INEC_NODE_PROMETHEUS_H

#include <stdio.h>

/* Writes v as a label value: backslash, double quote and newline escaped. */
void prometheus_label(FILE *f, const char *v);

#endif
