/* What every benchmark program needs: a clock, and sizes as people write them. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_parse_size(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
    case 'm':
        shift = 20;
        break;
    case 'G':
    case 'g':
        shift = 30;
        break;
    case 'T':
    case 't':
        shift = 40;
        break;
    }
    if (shift) {
        if (v > (max >> shift))
            return -1;
        v <<= shift;
        end++;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    if (*end || v < 1 || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_list(const char *name, const char *flag, const char *list, uint64_t max,
                      bool sizes, uint64_t *out, int cap)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -1;
    int n = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long long c = sizes ? 0 : strtoull(t, &end, 10);
        bool ok = n < cap && (sizes ? bench_parse_size(t, max, &out[n]) == 0
                                    : !errno && end != t && !*end && c >= 1 && c <= max);
        if (!ok) {
            if (n == cap)
                fprintf(stderr, "inec bench %s: at most %d values for %s\n", name, cap, flag);
            else
                fprintf(stderr, "inec bench %s: bad %s '%s' (1..%llu%s)\n", name, flag, t,
                        (unsigned long long)max, sizes ? " bytes, K/M/G suffixes" : "");
            free(copy);
            return -1;
        }
        if (!sizes)
            out[n] = c;
        n++;
    }
    free(copy);
    if (n == 0)
        fprintf(stderr, "inec bench %s: %s needs a value\n", name, flag);
    return n ? n : -1;
}

int bench_parse_size_list(const char *name, const char *list, uint64_t max, uint64_t *out, int cap)
{
    return parse_list(name, "--size", list, max, true, out, cap);
}

int bench_parse_count_list(const char *name, const char *flag, const char *list, uint64_t max,
                           uint64_t *out, int cap)
{
    return parse_list(name, flag, list, max, false, out, cap);
}

int bench_parse_seconds(const char *name, const char *v, double max, double *out)
{
    char *end;
    errno = 0;
    double s = strtod(v, &end);
    if (errno || end == v || *end || !(s > 0 && s <= max)) {
        fprintf(stderr, "inec bench %s: bad --seconds '%s' (0..%g)\n", name, v, max);
        return -1;
    }
    *out = s;
    return 0;
}

void bench_json_print(json_t *doc)
{
    json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("\n");
    fflush(stdout);
    json_decref(doc);
}

void bench_size_text(uint64_t s, char *buf, size_t len)
{
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, len, "%lluM", (unsigned long long)(s >> 20));
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, len, "%lluK", (unsigned long long)(s >> 10));
    else
        snprintf(buf, len, "%llu", (unsigned long long)s);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void bench_rmtree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
