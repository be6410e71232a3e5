/*
 * One small logger for every layer above codecs: levels, stderr, and
 * structured key=value fields, e.g.
 *   inec_log(INEC_LOG_WARN, "node", "chunk corrupt id=%s crc=%08x", id, crc);
 * prints
 *   2026-11-22T05:40:01.123Z WARN node: chunk corrupt id=... crc=...
 * The level comes from INEC_LOG (error|warn|info|debug), default info.
 *
 * A thread may carry a context (the S3 request it works for): while set, each
 * of its lines names it after the module,
 *   2026-11-22T05:40:01.123Z WARN gateway req=0123456789abcdef: decode failed ...
 * so every line of one request can be found by its id. Threads that work for
 * another (the gateway's fan-out) take the context of the thread that queued
 * the work (inec_log_context / inec_log_context_set).
 */
#ifndef INEC_LOG_H
#define INEC_LOG_H

enum inec_log_level {
    INEC_LOG_ERROR,
    INEC_LOG_WARN,
    INEC_LOG_INFO,
    INEC_LOG_DEBUG,
};

void inec_log_set_level(enum inec_log_level level);
int inec_log_enabled(enum inec_log_level level);
/* ctx NULL or "": none. Kept per thread; at most INEC_LOG_CONTEXT_MAX - 1 bytes. */
#define INEC_LOG_CONTEXT_MAX 40
void inec_log_context_set(const char *ctx);
const char *inec_log_context(void); /* "" when none */
void inec_log(enum inec_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
