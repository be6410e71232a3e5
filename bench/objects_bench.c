/*
 * `inec bench objects`: object PUT and GET through the object layer of an
 * embedded cluster (gateway + 9 nodes over the mem transport, RS(6,3), 1 MiB
 * chunks: what `inec server` runs, without HTTP), against two floors measured
 * in the same run: GET of the same object, and the raw encode of the same
 * bytes (codec_encode stripe by stripe, no transfer, no disk).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "codecs/codec.h"
#include "object/objects.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static int put_once(struct gw_objects *o, const uint8_t *body, size_t size)
{
    struct gw_put *p;
    int rc = gw_put_begin(o, "bench", "obj", NULL, &p);
    /* In 1 MiB pieces, as an HTTP front end hands them over. */
    for (size_t off = 0; rc == 0 && off < size; off += 1 << 20)
        rc = gw_put_write(p, body + off, size - off < (1 << 20) ? size - off : 1 << 20);
    if (rc) {
        gw_put_abort(p);
        return rc;
    }
    return gw_put_commit(p, NULL);
}

static int get_once(struct gw_objects *o, uint8_t *out, size_t size)
{
    struct gw_get *g;
    int rc = gw_get_begin(o, "bench", "obj", 0, UINT64_MAX, NULL, &g);
    size_t got = 0;
    while (rc == 0 && got < size) {
        ssize_t n = gw_get_read(g, out + got, size - got);
        if (n <= 0)
            rc = n ? (int)n : -EIO;
        else
            got += (size_t)n;
    }
    if (rc == 0)
        gw_get_end(g);
    return rc;
}

/* The floor: RS(6,3) parity of every 6 MiB stripe, in memory. */
static double encode_once(const struct codec *c, const uint8_t *body, size_t size, uint8_t *work)
{
    size_t L = 1 << 20;
    uint8_t *chunks[9];
    double t = bench_now();
    for (size_t off = 0; off < size; off += 6 * L) {
        size_t n = size - off < 6 * L ? size - off : 6 * L;
        size_t l = (n + 6 - 1) / 6;
        for (int i = 0; i < 9; i++)
            chunks[i] = work + (size_t)i * L;
        memcpy(work, body + off, n);
        codec_encode(c, l, chunks);
    }
    return bench_now() - t;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench objects [--quick] [--json] [--dir DIR] [--reps N]\n"
               "                          [--size S,S,...]\n"
               "  object PUT/GET through an embedded cluster (RS(6,3), 1 MiB chunks) vs GET and\n"
               "  vs raw RS encode of the same bytes; --size: object sizes, K/M/G suffixes\n"
               "  (default 4K,1M,64M; --quick 4K,1M,16M)\n");
}

int bench_objects(int argc, char **argv)
{
    static const struct option lo[] = {{"quick", no_argument, NULL, 'q'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"dir", required_argument, NULL, 'd'},
                                       {"reps", required_argument, NULL, 'r'},
                                       {"size", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int quick = 0, json = 0, reps = 5, ch, nsizes = 0;
    uint64_t sizes[8];
    char dir[256] = "";
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'q':
            quick = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'd':
            snprintf(dir, sizeof(dir), "%s", optarg);
            break;
        case 'r':
            reps = atoi(optarg) > 0 ? atoi(optarg) : 1;
            break;
        case 's':
            if ((nsizes = bench_parse_size_list("objects", optarg, (uint64_t)1 << 30, sizes, 8)) <
                0)
                return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    bool own_dir = !dir[0];
    if (own_dir) {
        snprintf(dir, sizeof(dir), "/tmp/inec-bench-objects-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
    }
    char msg[512] = "";
    struct gw_objects *o = NULL;
    struct codec_profile prof;
    struct codec *c = NULL;
    int rc = gw_objects_open_embedded(dir, &o, msg, sizeof(msg));
    if (rc == 0)
        rc = codec_profile_parse("rs:k=6,m=3", &prof, msg, sizeof(msg));
    if (rc == 0)
        rc = codec_create(&prof, &c, msg, sizeof(msg));
    if (rc == 0 && (rc = gw_bucket_create(o, "bench")) == -EEXIST)
        rc = 0;
    if (!nsizes) {
        const uint64_t d[] = {4096, 1 << 20, quick ? 16 << 20 : 64 << 20};
        memcpy(sizes, d, sizeof(d));
        nsizes = 3;
    }
    size_t max = 0;
    for (int s = 0; s < nsizes; s++)
        max = sizes[s] > max ? (size_t)sizes[s] : max;
    uint8_t *body = malloc(max), *back = malloc(max), *work = malloc(9 << 20);
    if (!body || !back || !work)
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < max; i++)
        body[i] = (uint8_t)(i * 2654435761u >> 13);
    if (!json && rc == 0)
        printf("%-9s %10s %9s %10s %9s %10s %8s %8s\n", "size", "put_ms", "put_MB/s", "get_ms",
               "get_MB/s", "enc_MB/s", "put/get", "put/enc");
    json_t *rows = json_array();
    for (int s = 0; rc == 0 && s < nsizes; s++) {
        size_t size = sizes[s];
        int n = size > (8 << 20) ? (quick ? 2 : 3) : reps * (size < 65536 ? 4 : 1);
        double pt[64], gt[64], et[64];
        n = n > 64 ? 64 : n;
        for (int i = 0; rc == 0 && i < n; i++) {
            double t = bench_now();
            rc = put_once(o, body, size);
            pt[i] = bench_now() - t;
            t = bench_now();
            if (rc == 0)
                rc = get_once(o, back, size);
            gt[i] = bench_now() - t;
            if (rc == 0 && memcmp(body, back, size) != 0)
                rc = -EIO;
            et[i] = encode_once(c, body, size, work);
        }
        if (rc)
            break;
        double p = median(pt, n), g = median(gt, n), e = median(et, n);
        json_array_append_new(rows,
                              json_pack("{s:I,s:f,s:f,s:f,s:f,s:f}", "size_bytes", (json_int_t)size,
                                        "put_ms", p * 1e3, "get_ms", g * 1e3, "encode_ms", e * 1e3,
                                        "put_over_get", p / g, "put_over_encode", p / e));
        if (!json)
            printf("%-9zu %10.2f %9.1f %10.2f %9.1f %10.1f %8.2f %8.2f\n", size, p * 1e3,
                   (double)size / p / 1e6, g * 1e3, (double)size / g / 1e6, (double)size / e / 1e6,
                   p / g, p / e);
    }
    if (json && rc == 0)
        bench_json_print(json_pack("{s:s,s:s,s:O}", "bench", "objects", "profile", "rs:k=6,m=3",
                                   "results", rows));
    json_decref(rows);
    free(body);
    free(back);
    free(work);
    codec_destroy(c);
    gw_objects_close(o);
    if (own_dir)
        bench_rmtree(dir);
    if (rc) {
        fprintf(stderr, "inec bench objects: %s (%s)\n", msg[0] ? msg : "failed", strerror(-rc));
        return 1;
    }
    return 0;
}
