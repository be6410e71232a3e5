/*
 * `inec bench ec`: encode and decode latency and bandwidth of every scheme's
 * DEG on in-process devices, coherent primitives against the incoherent
 * baseline in the same run (INEC paper, Figures 6-8). Bandwidth follows the
 * paper: encode m * c / (k * t), decode of one erased chunk c / (k * t), with
 * c the chunk size and t the median latency of one whole graph run.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench/bench.h"
#include "codecs/codec.h"
#include "deg/deg.h"

struct job {
    const char *profile;
    enum deg_op op;
};

static const struct job full_jobs[] = {
    {"rs:k=3,m=2", DEG_OP_ENCODE},       {"rs:k=6,m=3", DEG_OP_ENCODE},
    {"rs:k=12,m=4", DEG_OP_ENCODE},      {"lrc:k=4,l=2,r=2", DEG_OP_ENCODE},
    {"lrc:k=6,l=2,r=2", DEG_OP_ENCODE},  {"lrc:k=12,l=2,r=2", DEG_OP_ENCODE},
    {"tri:k=3,m=2", DEG_OP_ENCODE},      {"tri:k=6,m=3", DEG_OP_ENCODE},
    {"tri:k=12,m=4", DEG_OP_ENCODE},     {"rs:k=3,m=2", DEG_OP_DECODE},
    {"rs:k=6,m=3", DEG_OP_DECODE},       {"rs:k=12,m=4", DEG_OP_DECODE},
    {"lrc:k=4,l=2,r=2", DEG_OP_DECODE},  {"lrc:k=6,l=2,r=2", DEG_OP_DECODE},
    {"lrc:k=12,l=2,r=2", DEG_OP_DECODE}, {"ppr:k=3,m=2", DEG_OP_DECODE},
    {"ppr:k=6,m=3", DEG_OP_DECODE},      {"ppr:k=12,m=4", DEG_OP_DECODE},
    {"ecpipe:k=3,m=2", DEG_OP_DECODE},   {"ecpipe:k=6,m=3", DEG_OP_DECODE},
    {"ecpipe:k=12,m=4", DEG_OP_DECODE},  {"tri:k=3,m=2", DEG_OP_DECODE},
    {"tri:k=6,m=3", DEG_OP_DECODE},      {"tri:k=12,m=4", DEG_OP_DECODE},
};

static const struct job quick_jobs[] = {
    {"rs:k=6,m=3", DEG_OP_ENCODE},  {"tri:k=6,m=3", DEG_OP_ENCODE},
    {"rs:k=6,m=3", DEG_OP_DECODE},  {"lrc:k=6,l=2,r=2", DEG_OP_DECODE},
    {"ppr:k=6,m=3", DEG_OP_DECODE}, {"ecpipe:k=6,m=3", DEG_OP_DECODE},
    {"tri:k=6,m=3", DEG_OP_DECODE},
};

/* 128 B ... 16 MiB, every factor of 4, and 16 MiB itself. */
static const size_t full_sizes[] = {128,    512,    2048,    8192,    32768,
                                    131072, 524288, 2097152, 8388608, 16777216};
static const size_t quick_sizes[] = {4096, 65536, 1048576};
enum { MAX_SIZES = 16 };

struct stats {
    double p50, p95, p99; /* microseconds */
    double mbps;
};

struct row {
    const char *profile;
    enum deg_op op;
    size_t size;
    struct stats mode[2]; /* coherent, incoherent */
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct verify {
    uint8_t *const *ref;
    int results, bad;
};

static void on_result(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                      const uint8_t *data, size_t len)
{
    struct verify *vf = arg;
    (void)g;
    (void)v;
    vf->results++;
    if (vf->ref && memcmp(data, vf->ref[label.chunk], len) != 0)
        vf->bad++;
}

/* Runs g repeatedly for about budget_us (at least min_iters), after one
 * checked warm-up run. */
static int measure(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                   uint8_t *const *ref, bool incoherent, double budget_us, int min_iters,
                   int max_iters, double *lat, int *niters, char *err, size_t errlen)
{
    struct deg_run_opts opts = {.incoherent = incoherent, .timeout_ms = 60000};
    struct deg_runner *r;
    int rc = deg_runner_create(g, len, chunks, &opts, &r, err, errlen);
    if (rc)
        return rc;
    struct verify vf = {.ref = ref};
    rc = deg_runner_run(r, on_result, &vf, err, errlen);
    if (rc == 0 && (vf.bad || vf.results == 0)) {
        snprintf(err, errlen, "%s: wrong result in the warm-up run", g->desc);
        rc = -EIO;
    }
    double start = now_us();
    int n = 0;
    vf.ref = NULL;
    while (rc == 0 && n < max_iters && (n < min_iters || now_us() - start < budget_us)) {
        double t0 = now_us();
        rc = deg_runner_run(r, on_result, &vf, err, errlen);
        lat[n++] = now_us() - t0;
    }
    deg_runner_destroy(r);
    *niters = n;
    return rc;
}

static void summarize(double *lat, int n, const struct codec *c, enum deg_op op, size_t size,
                      struct stats *st)
{
    qsort(lat, (size_t)n, sizeof(double), cmp_double);
    st->p50 = lat[n / 2];
    st->p95 = lat[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1];
    st->p99 = lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    double k = codec_k(c), m = codec_m(c),
           bytes = op == DEG_OP_ENCODE ? m * (double)size / k : (double)size / k;
    st->mbps = bytes / st->p50; /* bytes per microsecond = MB/s */
}

static void size_text(size_t s, char *buf, size_t len)
{
    if (s >= 1 << 20)
        snprintf(buf, len, "%zuM", s >> 20);
    else if (s >= 1 << 10)
        snprintf(buf, len, "%zuK", s >> 10);
    else
        snprintf(buf, len, "%zuB", s);
}

static int plot(const char *file, const struct row *rows, int nrows)
{
    /* One curve per graph (a run of rows of one job) and mode. */
    struct bench_series *ser = calloc((size_t)(2 * nrows), sizeof(*ser));
    int ns = 0, rc = ser ? 0 : -ENOMEM;
    for (int i = 0; i < nrows && rc == 0; i++) {
        bool first = !i || rows[i].profile != rows[i - 1].profile || rows[i].op != rows[i - 1].op;
        if (first) {
            for (int mode = 0; mode < 2; mode++) {
                snprintf(ser[ns + mode].title, sizeof(ser[ns + mode].title), "%s %s %s",
                         rows[i].profile, rows[i].op == DEG_OP_ENCODE ? "encode" : "decode",
                         mode ? "incoherent" : "coherent");
                ser[ns + mode].dashed = mode;
                ser[ns + mode].color = ns / 2 + 1;
            }
            ns += 2;
        }
        for (int mode = 0; mode < 2 && rc == 0; mode++)
            rc = bench_series_add(&ser[ns - 2 + mode], (double)rows[i].size,
                                  rows[i].mode[mode].mbps);
    }
    if (rc == 0)
        rc = bench_plot(file, "inec bench ec: coherent (solid) vs incoherent (dashed)",
                        "chunk size (bytes)", "bandwidth (MB/s)", BENCH_LOG2_X, ser, ns);
    bench_series_free(ser, ns);
    free(ser);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: inec bench ec [--quick] [--json] [--plot FILE.png] [--scheme NAME]\n"
                 "                     [--op encode|decode] [--size S,S,...] [--seconds S]\n"
                 "                     [--profile P | --scheme NAME --k K --m M]\n\n"
                 "Latency (p50/p95/p99, microseconds per whole graph run) and bandwidth of each\n"
                 "scheme's DEG on in-process devices, coherent vs incoherent. --scheme keeps the\n"
                 "profiles of one scheme (rs, lrc, ppr, ecpipe, tri); --size picks the chunk\n"
                 "sizes (K/M suffixes, up to 64M; default 128 B..16M, --quick 4K,64K,1M);\n"
                 "--seconds is the time budget per measurement (default 0.2, --quick 0.05).\n"
                 "--profile (e.g. lrc:k=6,l=2,r=2), or --scheme with --k and --m, runs one\n"
                 "configuration, encode and decode.\n");
}

int bench_ec(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quick", no_argument, NULL, 'q'},         {"json", no_argument, NULL, 'j'},
        {"plot", required_argument, NULL, 'p'},    {"scheme", required_argument, NULL, 's'},
        {"op", required_argument, NULL, 'o'},      {"size", required_argument, NULL, 'z'},
        {"seconds", required_argument, NULL, 't'}, {"profile", required_argument, NULL, 'P'},
        {"k", required_argument, NULL, 'k'},       {"m", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    bool quick = false, json = false;
    const char *plot_file = NULL, *scheme = NULL, *op = NULL, *profile = NULL;
    int k = 0, m = 0;
    uint64_t chosen[MAX_SIZES];
    int nchosen = 0;
    double seconds = -1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'q':
            quick = true;
            break;
        case 'j':
            json = true;
            break;
        case 'p':
            plot_file = optarg;
            break;
        case 's':
            scheme = optarg;
            break;
        case 'o':
            op = optarg;
            break;
        case 'z':
            if ((nchosen = bench_parse_size_list("ec", optarg, (uint64_t)64 << 20, chosen,
                                                 MAX_SIZES)) < 0)
                return 2;
            break;
        case 't':
            if (bench_parse_seconds("ec", optarg, 600, &seconds) < 0)
                return 2;
            break;
        case 'P':
            profile = optarg;
            break;
        case 'k':
            k = atoi(optarg);
            break;
        case 'm':
            m = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if ((op && strcmp(op, "encode") && strcmp(op, "decode")) || optind < argc) {
        usage(stderr);
        return 2;
    }
    if (seconds < 0)
        seconds = quick ? 0.05 : 0.2;
    const struct job *jobs = quick ? quick_jobs : full_jobs;
    int njobs = quick ? (int)(sizeof(quick_jobs) / sizeof(*jobs))
                      : (int)(sizeof(full_jobs) / sizeof(*jobs));
    char one_profile[64];
    if ((k || m) && !(scheme && k > 0 && m > 0 && !profile)) {
        fprintf(stderr, "inec bench ec: --k and --m go together, with --scheme\n");
        return 2;
    }
    if (k) {
        snprintf(one_profile, sizeof(one_profile), "%s:k=%d,m=%d", scheme, k, m);
        profile = one_profile;
        scheme = NULL;
    }
    const struct job one_jobs[] = {{profile, DEG_OP_ENCODE}, {profile, DEG_OP_DECODE}};
    if (profile) {
        jobs = one_jobs;
        njobs = 2;
    }
    size_t sizes[MAX_SIZES];
    int nsizes = quick ? 3 : (int)(sizeof(full_sizes) / sizeof(*full_sizes));
    for (int i = 0; i < nsizes; i++)
        sizes[i] = quick ? quick_sizes[i] : full_sizes[i];
    if (nchosen) {
        nsizes = nchosen;
        for (int i = 0; i < nsizes; i++)
            sizes[i] = (size_t)chosen[i];
    }
    enum { MAX_ITERS = 2000 };
    double *lat = malloc(MAX_ITERS * sizeof(double));
    struct row *rows = calloc((size_t)(njobs * nsizes), sizeof(*rows));
    int nrows = 0, rc = 0;
    char err[512] = "";
    if (!json)
        printf("%-17s %-6s %5s | %28s | %28s | %9s %9s %6s\n", "profile", "op", "chunk",
               "coherent p50/p95/p99 us", "incoherent p50/p95/p99 us", "coh MB/s", "inc MB/s",
               "ratio");
    for (int j = 0; j < njobs && rc == 0 && lat && rows; j++) {
        const struct job *jb = &jobs[j];
        if (scheme && strncmp(jb->profile, scheme, strlen(scheme)) != 0)
            continue;
        if (scheme && jb->profile[strlen(scheme)] != ':')
            continue;
        if (op && (jb->op == DEG_OP_ENCODE) != (strcmp(op, "encode") == 0))
            continue;
        struct codec_profile prof;
        struct codec *codec;
        if ((rc = codec_profile_parse(jb->profile, &prof, err, sizeof(err))) ||
            (rc = codec_create(&prof, &codec, err, sizeof(err))))
            break;
        struct deg_request req = {.op = jb->op, .nerased = 1, .erased = {0}};
        deg_placement_default(&req.placement);
        struct deg_graph *g;
        if ((rc = deg_build(codec, &req, &g, err, sizeof(err)))) {
            codec_destroy(codec);
            break;
        }
        for (int s = 0; s < nsizes && rc == 0; s++) {
            size_t len = sizes[s];
            uint8_t *chunks[CODEC_MAX_CHUNKS] = {0};
            for (int i = 0; i < codec_n(codec) && rc == 0; i++) {
                if (!(chunks[i] = malloc(len)))
                    rc = -ENOMEM;
                for (size_t b = 0; chunks[i] && b < len; b++)
                    chunks[i][b] = (uint8_t)(b * 131 + (size_t)i * 7 + (b >> 9));
            }
            if (rc == 0)
                codec_encode(codec, len, chunks);
            struct row *rw = &rows[nrows];
            *rw = (struct row){.profile = jb->profile, .op = jb->op, .size = len};
            for (int mode = 0; mode < 2 && rc == 0; mode++) {
                int n = 0;
                rc = measure(g, len, chunks, chunks, mode, seconds * 1e6, quick ? 3 : 5, MAX_ITERS,
                             lat, &n, err, sizeof(err));
                if (rc == 0)
                    summarize(lat, n, codec, jb->op, len, &rw->mode[mode]);
            }
            for (int i = 0; i < codec_n(codec); i++)
                free(chunks[i]);
            if (rc)
                break;
            nrows++;
            if (!json) {
                char st[16];
                size_text(len, st, sizeof(st));
                printf("%-17s %-6s %5s | %8.1f %9.1f %9.1f | %8.1f %9.1f %9.1f | %9.1f %9.1f "
                       "%5.2fx\n",
                       jb->profile, jb->op == DEG_OP_ENCODE ? "encode" : "decode", st,
                       rw->mode[0].p50, rw->mode[0].p95, rw->mode[0].p99, rw->mode[1].p50,
                       rw->mode[1].p95, rw->mode[1].p99, rw->mode[0].mbps, rw->mode[1].mbps,
                       rw->mode[0].mbps / rw->mode[1].mbps);
                fflush(stdout);
            }
        }
        deg_graph_destroy(g);
        codec_destroy(codec);
    }
    if (!lat || !rows)
        rc = -ENOMEM;
    if (rc == 0 && json) {
        json_t *arr = json_array(),
               *doc = json_pack("{s:s,s:f,s:o}", "bench", "ec", "seconds", seconds, "results", arr);
        for (int i = 0; i < nrows; i++) {
            const struct row *rw = &rows[i];
            json_t *o = json_pack("{s:s,s:s,s:I}", "profile", rw->profile, "op",
                                  rw->op == DEG_OP_ENCODE ? "encode" : "decode", "chunk_bytes",
                                  (json_int_t)rw->size);
            for (int mode = 0; mode < 2; mode++)
                json_object_set_new(o, mode ? "incoherent" : "coherent",
                                    json_pack("{s:f,s:f,s:f,s:f}", "p50_us", rw->mode[mode].p50,
                                              "p95_us", rw->mode[mode].p95, "p99_us",
                                              rw->mode[mode].p99, "mb_per_s", rw->mode[mode].mbps));
            json_object_set_new(o, "ratio", json_real(rw->mode[0].mbps / rw->mode[1].mbps));
            json_array_append_new(arr, o);
        }
        bench_json_print(doc);
    }
    if (rc == 0 && plot_file && (rc = plot(plot_file, rows, nrows)))
        snprintf(err, sizeof(err), "gnuplot failed writing %s", plot_file);
    if (rc == 0 && nrows == 0) {
        snprintf(err, sizeof(err), "no profile matches --scheme/--op");
        rc = -EINVAL;
    }
    free(lat);
    free(rows);
    if (rc) {
        fprintf(stderr, "inec bench ec: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    return 0;
}
