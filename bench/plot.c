/* --plot: every benchmark whose figures are a curve draws it the same way, with gnuplot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

int bench_series_add(struct bench_series *s, double x, double y)
{
    double *nx = realloc(s->x, (size_t)(s->n + 1) * sizeof(*nx));
    if (!nx)
        return -ENOMEM;
    s->x = nx;
    double *ny = realloc(s->y, (size_t)(s->n + 1) * sizeof(*ny));
    if (!ny)
        return -ENOMEM;
    s->y = ny;
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return 0;
}

void bench_series_free(struct bench_series *s, int ns)
{
    for (int i = 0; s && i < ns; i++) {
        free(s[i].x);
        free(s[i].y);
        s[i].x = s[i].y = NULL;
        s[i].n = 0;
    }
}

/* gnuplot takes single-quoted strings: a quote inside one would end it. */
static void quoted(FILE *gp, const char *text)
{
    fputc('\'', gp);
    for (const char *c = text; *c; c++) {
        if (*c == '\'')
            fputc('\'', gp);
        fputc(*c, gp);
    }
    fputc('\'', gp);
}

int bench_plot(const char *file, const char *title, const char *xlabel, const char *ylabel,
               int scales, const struct bench_series *s, int ns)
{
    /* Inline data ('-') keeps it one pipe; gnuplot says nothing on our stdout (--json). */
    FILE *gp = popen("gnuplot 1>&2", "w");
    if (!gp)
        return -errno;
    fputs("set terminal pngcairo size 1200,800\nset output ", gp);
    quoted(gp, file);
    fputs("\nset key outside right\nset grid\nset title ", gp);
    quoted(gp, title);
    fputs("\nset xlabel ", gp);
    quoted(gp, xlabel);
    fputs("\nset ylabel ", gp);
    quoted(gp, ylabel);
    fputc('\n', gp);
    if (scales & BENCH_LOG2_X)
        fputs("set logscale x 2\nset format x \"%.0b%B\"\n", gp);
    if (scales & BENCH_LOG_Y)
        fputs("set logscale y 10\n", gp);
    fputs("plot ", gp);
    for (int i = 0; i < ns; i++) {
        fprintf(gp, "%s'-' with linespoints dt %d lc %d title ", i ? ", " : "", s[i].dashed ? 2 : 1,
                s[i].color > 0 ? s[i].color : i + 1);
        quoted(gp, s[i].title);
    }
    fputc('\n', gp);
    for (int i = 0; i < ns; i++) {
        for (int p = 0; p < s[i].n; p++)
            fprintf(gp, "%.6g %.6g\n", s[i].x[p], s[i].y[p]);
        fputs("e\n", gp);
    }
    return pclose(gp) == 0 ? 0 : -EIO;
}

static const char *group_name(json_t *row, const char *const *group, int ngroup, char *buf,
                              size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int g = 0; g < ngroup && at < len; g++) {
        json_t *v = json_object_get(row, group[g]);
        if (json_is_string(v))
            at += (size_t)snprintf(buf + at, len - at, "%s%s", g ? " " : "", json_string_value(v));
        else if (json_is_integer(v))
            at += (size_t)snprintf(buf + at, len - at, "%s%s=%lld", g ? " " : "", group[g],
                                   (long long)json_integer_value(v));
    }
    return buf;
}

int bench_plot_rows(const char *file, const char *title, const char *xlabel, const char *ylabel,
                    int scales, json_t *rows, const char *const *group, int ngroup, const char *x,
                    const char *const *ys, const char *const *ynames, int ny, int nsolid)
{
    enum { MAX_SERIES = 64 };
    struct bench_series ser[MAX_SERIES] = {0};
    char keys[MAX_SERIES][96];
    int ngroups = 0, ns = 0, rc = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        char name[96];
        group_name(row, group, ngroup, name, sizeof(name));
        int gi = 0;
        while (gi < ngroups && strcmp(keys[gi], name) != 0)
            gi++;
        if (gi == ngroups) {
            if ((ngroups + 1) * ny > MAX_SERIES)
                continue; /* more curves than a picture can show: the first ones */
            snprintf(keys[ngroups++], sizeof(keys[0]), "%s", name);
            for (int y = 0; y < ny; y++) {
                struct bench_series *s = &ser[gi * ny + y];
                snprintf(s->title, sizeof(s->title), "%s%s%s", name, name[0] ? " " : "", ynames[y]);
                s->dashed = y >= nsolid;
                s->color = ngroup ? gi + 1 : y + 1;
            }
            ns = ngroups * ny;
        }
        for (int y = 0; y < ny && rc == 0; y++)
            rc = bench_series_add(&ser[gi * ny + y], json_number_value(json_object_get(row, x)),
                                  json_number_value(json_object_get(row, ys[y])));
    }
    if (rc == 0)
        rc = bench_plot(file, title, xlabel, ylabel, scales, ser, ns);
    bench_series_free(ser, ns);
    return rc;
}
