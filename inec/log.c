#include "inec/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -1: not read from the environment yet. */
static atomic_int current = -1;

static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

static _Thread_local char context[INEC_LOG_CONTEXT_MAX];

void inec_log_context_set(const char *ctx)
{
    snprintf(context, sizeof(context), "%s", ctx ? ctx : "");
}

const char *inec_log_context(void)
{
    return context;
}

void inec_log_set_level(enum inec_log_level level)
{
    atomic_store(&current, (int)level);
}

int inec_log_enabled(enum inec_log_level level)
{
    int cur = atomic_load(&current);
    if (cur < 0) {
        const char *env = getenv("INEC_LOG");
        cur = INEC_LOG_INFO;
        for (int i = 0; env && i < 4; i++)
            if (strcasecmp(env, names[i]) == 0)
                cur = i;
        atomic_store(&current, cur);
    }
    return (int)level <= cur;
}

void inec_log(enum inec_log_level level, const char *module, const char *fmt, ...)
{
    if (!inec_log_enabled(level))
        return;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char line[1024];
    int n = snprintf(
        line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s%s%s: ", tm.tm_year + 1900,
        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
        names[level], module, context[0] ? " req=" : "", context);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* Messages carry what clients chose (object keys, header values): a
     * control character is written as \xNN, so no message can end its line
     * and forge another one. */
    char safe[4 * sizeof(line)];
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)line; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            o += (size_t)snprintf(safe + o, sizeof(safe) - o, "\\x%02x", *c);
        else
            safe[o++] = (char)*c;
    }
    safe[o] = '\0';
    /* One fprintf per line so lines of concurrent threads do not interleave. */
    fprintf(stderr, "%s\n", safe);
}
