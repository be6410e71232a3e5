/*
 * `inec bench codec`: encode and single-chunk decode bandwidth of the codecs,
 * against the same work done by raw ISA-L calls (tables built once, then
 * ec_encode_data) in the same run on the same buffers.
 *
 * The INEC paper's bandwidths, with file = k x chunk:
 *   encode = m x file / (k x time)   (parity generated per second)
 *   decode = file / (k x time)       (one erased chunk rebuilt per second)
 * plus "in" = bytes read per second (k chunks to encode, the plan's survivors
 * to decode). Each cell runs batches for at least --time seconds per side,
 * alternating ours and raw, and keeps each side's best batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <isa-l/erasure_code.h>
#include <jansson.h>

#include "bench/bench.h"
#include "codecs/codec.h"

#define MAX_SIZES    32
#define MAX_PROFILES 16
#define BATCHES      3

static const char *const default_profiles[] = {"rs:k=3,m=2",      "rs:k=6,m=3",
                                               "rs:k=12,m=4",     "lrc:k=4,l=2,r=2",
                                               "lrc:k=6,l=2,r=2", "lrc:k=12,l=2,r=2"};

/* One side of a cell: what to run, on which buffers. */
struct work {
    int kind; /* 0 ours encode, 1 raw encode, 2 codec_decode, 3 raw, 4 plan apply */
    const struct codec *c;
    size_t len;
    int k, rows;
    uint8_t *tables;
    uint8_t **bufs; /* n chunks */
    uint8_t **srcs, **dsts;
    int erased;
    const struct codec_plan *plan;
};

static void run_once(const struct work *w)
{
    switch (w->kind) {
    case 0:
        codec_encode(w->c, w->len, w->bufs);
        break;
    case 2:
        codec_decode(w->c, w->len, w->bufs, &w->erased, 1);
        break;
    case 4:
        codec_plan_apply(w->plan, w->len, w->srcs, w->dsts);
        break;
    default:
        ec_encode_data((int)w->len, w->k, w->rows, w->tables, w->srcs, w->dsts);
        break;
    }
}

/* Seconds per call, best batch; the two sides alternate so neither gets
 * the warmer cache or the quieter neighbour for long. */
static void measure(const struct work *a, const struct work *b, double min_time, double *ta,
                    double *tb)
{
    run_once(a);
    run_once(b);
    long iters = 1;
    for (;;) { /* calibrate a batch to ~min_time / BATCHES */
        double t0 = bench_now();
        for (long i = 0; i < iters; i++)
            run_once(a);
        double dt = bench_now() - t0;
        if (dt >= min_time / BATCHES / 4 || iters > (1L << 30))
            break;
        iters *= dt > 0 ? (long)(min_time / BATCHES / dt) + 1 : 16;
    }
    double best[2] = {1e30, 1e30};
    for (int batch = 0; batch < BATCHES; batch++)
        for (int side = 0; side < 2; side++) {
            const struct work *w = side ? b : a;
            long done = 0;
            double t0 = bench_now(), dt;
            do {
                for (long i = 0; i < iters; i++)
                    run_once(w);
                done += iters;
                dt = bench_now() - t0;
            } while (dt < min_time / BATCHES);
            if (dt / (double)done < best[side])
                best[side] = dt / (double)done;
        }
    *ta = best[0];
    *tb = best[1];
}

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench codec [--profile P]... [--size S,S,...] [--seconds SEC]\n"
               "                        [--quick] [--json] [--plot FILE.png]\n\n"
               "Encode and one-chunk decode bandwidth per profile and chunk size, against raw\n"
               "ISA-L doing the same work in the same run (ratio = ours / raw). Defaults: RS\n"
               "(3,2) (6,3) (12,4), LRC (4,2,2) (6,2,2) (12,2,2); chunks 128 B to 16 MiB in\n"
               "powers of 4 (and 16M); --seconds 0.2 per side per cell. --quick: 4K,64K,1M\n"
               "at 0.05 s. Sizes take K/M/G suffixes. GB/s = 1e9 bytes/s. --plot draws\n"
               "encode and decode bandwidth against chunk size, raw ISA-L dashed.\n"
               "  enc = m*chunk/time (parity out), dec = chunk/time (rebuilt chunk out),\n"
               "  in = bytes read per second, vsRS = LRC encode / RS(k, l+r) encode.\n"
               "  dec uses a plan made once; dec-api is codec_decode, planning every call.\n");
}

struct cell {
    double enc, enc_raw, dec, dec_raw, rs_enc, dec_api; /* seconds per call */
    int dec_reads;
};

/* Buffers and the raw-ISA-L side of one profile, then every size. */
static int bench_profile(const char *ptext, const size_t *sizes, int nsizes, double min_time,
                         bool json, json_t *rows)
{
    struct codec_profile prof;
    struct codec *c = NULL, *rs = NULL;
    char err[256];
    if (codec_profile_parse(ptext, &prof, err, sizeof(err)) < 0 ||
        codec_create(&prof, &c, err, sizeof(err)) < 0) {
        fprintf(stderr, "inec bench codec: %s\n", err);
        return -1;
    }
    int k = prof.k, m = prof.m, n = k + m;
    if (prof.scheme == CODEC_LRC) { /* the RS code with as many parities */
        struct codec_profile rp = {.scheme = CODEC_RS, .k = k, .m = m};
        codec_create(&rp, &rs, NULL, 0);
    }
    size_t maxlen = 0;
    for (int s = 0; s < nsizes; s++)
        maxlen = sizes[s] > maxlen ? sizes[s] : maxlen;
    uint8_t *bufs[CODEC_MAX_CHUNKS], *spare = NULL;
    int rc = -1;
    for (int i = 0; i < n; i++)
        bufs[i] = NULL;
    for (int i = 0; i < n; i++)
        if (!(bufs[i] = aligned_alloc(64, (maxlen + 63) / 64 * 64)))
            goto out;
    if (!(spare = aligned_alloc(64, (maxlen + 63) / 64 * 64)))
        goto out;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < k; i++)
        for (size_t b = 0; b < maxlen; b++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bufs[i][b] = (uint8_t)x;
        }

    /* Raw encode: ISA-L's own Cauchy matrix for RS; LRC's coding rows are
     * just data, taken from the codec. */
    uint8_t *gen = malloc((size_t)n * (size_t)k);
    uint8_t *enc_tables = malloc((size_t)m * (size_t)k * 32);
    uint8_t *dec_tables = malloc((size_t)k * 32);
    if (!gen || !enc_tables || !dec_tables) {
        free(gen);
        free(enc_tables);
        free(dec_tables);
        goto out;
    }
    if (prof.scheme == CODEC_LRC)
        memcpy(gen, codec_generator(c), (size_t)n * (size_t)k);
    else
        gf_gen_cauchy1_matrix(gen, n, k);
    ec_init_tables(k, m, gen + (size_t)k * (size_t)k, enc_tables);

    /* Raw decode of chunk 0: LRC XORs the rest of group 0 and its local
     * parity; RS inverts rows 1..k and takes row 0 of the inverse. */
    uint8_t *dsrc[CODEC_MAX_CHUNKS], *ddst[1] = {bufs[0]};
    int dk;
    if (prof.scheme == CODEC_LRC) {
        int gsize = k / prof.l;
        uint8_t ones[CODEC_MAX_CHUNKS];
        dk = 0;
        for (int j = 1; j < gsize; j++)
            dsrc[dk++] = bufs[j];
        dsrc[dk++] = bufs[k];
        memset(ones, 1, sizeof(ones));
        ec_init_tables(dk, 1, ones, dec_tables);
    } else {
        uint8_t *sub = malloc((size_t)k * (size_t)k), *inv = malloc((size_t)k * (size_t)k);
        memcpy(sub, gen + k, (size_t)k * (size_t)k);
        gf_invert_matrix(sub, inv, k);
        ec_init_tables(k, 1, inv, dec_tables);
        free(sub);
        free(inv);
        dk = k;
        for (int j = 0; j < k; j++)
            dsrc[j] = bufs[j + 1];
    }

    for (int s = 0; s < nsizes; s++) {
        size_t len = sizes[s];
        struct cell cl = {0};
        struct work ours = {.kind = 0, .c = c, .len = len, .bufs = bufs};
        struct work raw = {.kind = 1,
                           .len = len,
                           .k = k,
                           .rows = m,
                           .tables = enc_tables,
                           .srcs = bufs,
                           .dsts = bufs + k};
        measure(&ours, &raw, min_time, &cl.enc, &cl.enc_raw);
        if (rs) {
            struct work rsw = {.kind = 0, .c = rs, .len = len, .bufs = bufs};
            double dummy;
            measure(&rsw, &ours, min_time, &cl.rs_enc, &dummy);
            codec_encode(c, len, bufs); /* parity back to this codec's */
        }
        /* Ours decodes through a plan made once (as deg/ does, and as raw
         * builds its tables once); "api" is codec_decode, planning each call. */
        int zero = 0;
        struct codec_plan *plan;
        if (codec_plan_create(c, &zero, 1, NULL, &plan, err, sizeof(err)) < 0) {
            fprintf(stderr, "inec bench codec: %s\n", err);
            goto out_tables;
        }
        uint8_t *psrc[CODEC_MAX_CHUNKS];
        for (int i = 0; i < plan->nsurvivors; i++)
            psrc[i] = bufs[plan->survivors[i]];
        struct work ourd = {.kind = 4, .len = len, .plan = plan, .srcs = psrc, .dsts = ddst};
        struct work api = {.kind = 2, .c = c, .len = len, .bufs = bufs, .erased = 0};
        struct work rawd = {.kind = 3,
                            .len = len,
                            .k = dk,
                            .rows = 1,
                            .tables = dec_tables,
                            .srcs = dsrc,
                            .dsts = ddst};
        /* Every side rebuilds chunk 0 in place: it must still be the data. */
        memcpy(spare, bufs[0], len);
        measure(&ourd, &rawd, min_time, &cl.dec, &cl.dec_raw);
        double dummy;
        measure(&api, &rawd, min_time / 2, &cl.dec_api, &dummy);
        codec_plan_destroy(plan);
        if (memcmp(spare, bufs[0], len) != 0) {
            fprintf(stderr, "inec bench codec: %s: decode and raw decode disagree\n", ptext);
            goto out_tables;
        }
        cl.dec_reads = dk;

        double gb = 1e9, L = (double)len;
        double enc = m * L / cl.enc / gb, enc_in = k * L / cl.enc / gb;
        double enc_raw = m * L / cl.enc_raw / gb, dec = L / cl.dec / gb;
        double dec_in = dk * L / cl.dec / gb, dec_raw = L / cl.dec_raw / gb;
        double vs_rs = rs ? cl.rs_enc / cl.enc : 0, dec_api = L / cl.dec_api / gb;
        char st[32];
        bench_size_text(len, st, sizeof(st));
        {
            json_t *row = json_pack(
                "{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f}", "profile", ptext,
                "chunk_bytes", (json_int_t)len, "encode_gbps", enc, "encode_in_gbps", enc_in,
                "raw_encode_gbps", enc_raw, "encode_ratio", enc / enc_raw, "decode_gbps", dec,
                "decode_in_gbps", dec_in, "raw_decode_gbps", dec_raw, "decode_ratio", dec / dec_raw,
                "decode_reads", dk, "codec_decode_gbps", dec_api);
            if (rs)
                json_object_set_new(row, "lrc_vs_rs_encode", json_real(vs_rs));
            json_array_append_new(rows, row);
        }
        if (!json) {
            char vs[16] = "-";
            if (rs)
                snprintf(vs, sizeof(vs), "%.3f", vs_rs);
            printf("%-17s %6s %8.2f %8.2f %8.2f %6.3f %8.2f %8.2f %8.2f %6.3f %8.2f %6s\n", ptext,
                   st, enc, enc_in, enc_raw, enc / enc_raw, dec, dec_in, dec_raw, dec / dec_raw,
                   dec_api, vs);
            fflush(stdout);
        }
    }
    rc = 0;
out_tables:
    free(gen);
    free(enc_tables);
    free(dec_tables);
out:
    if (rc < 0 && !err[0])
        fprintf(stderr, "inec bench codec: out of memory\n");
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(spare);
    codec_destroy(rs);
    codec_destroy(c);
    return rc;
}

int bench_codec(int argc, char **argv)
{
    const char *profiles[MAX_PROFILES];
    int nprofiles = 0, nsizes = 0;
    size_t sizes[MAX_SIZES];
    double min_time = 0.2;
    bool json = false, quick = false, timed = false;
    const char *plot_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--quick") == 0) {
            quick = true;
        } else if (strcmp(a, "--profile") == 0 && v) {
            if (nprofiles == MAX_PROFILES) {
                fprintf(stderr, "inec bench codec: at most %d profiles\n", MAX_PROFILES);
                return 2;
            }
            profiles[nprofiles++] = v;
            i++;
        } else if (strcmp(a, "--size") == 0 && v) {
            uint64_t chosen[MAX_SIZES];
            if ((nsizes = bench_parse_size_list("codec", v, (uint64_t)1 << 30, chosen, MAX_SIZES)) <
                0)
                return 2;
            for (int s = 0; s < nsizes; s++)
                sizes[s] = (size_t)chosen[s];
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            if (bench_parse_seconds("codec", v, 60, &min_time) < 0)
                return 2;
            timed = true;
            i++;
        } else if (strcmp(a, "--plot") == 0 && v) {
            plot_file = v;
            i++;
        } else {
            fprintf(stderr, "inec bench codec: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (quick && !timed)
        min_time = 0.05;
    if (!nsizes) {
        static const size_t full[] = {128,    512,    2048,    8192,    32768,
                                      131072, 524288, 2 << 20, 8 << 20, 16 << 20};
        static const size_t brief[] = {4096, 65536, 1 << 20};
        const size_t *d = quick ? brief : full;
        nsizes = quick ? 3 : 10;
        memcpy(sizes, d, (size_t)nsizes * sizeof(size_t));
    }
    if (!nprofiles)
        for (size_t i = 0; i < sizeof(default_profiles) / sizeof(default_profiles[0]); i++)
            profiles[nprofiles++] = default_profiles[i];

    json_t *rows = json_array();
    if (!json)
        printf("%-17s %6s %8s %8s %8s %6s %8s %8s %8s %6s %8s %6s\n", "profile", "chunk", "enc",
               "enc-in", "raw-enc", "ratio", "dec", "dec-in", "raw-dec", "ratio", "dec-api",
               "vsRS");
    int rc = 0;
    for (int p = 0; p < nprofiles && rc == 0; p++)
        rc = bench_profile(profiles[p], sizes, nsizes, min_time, json, rows);
    if (rc == 0 && plot_file) {
        static const char *const group[] = {"profile"};
        static const char *const ys[] = {"encode_gbps", "decode_gbps", "raw_encode_gbps",
                                         "raw_decode_gbps"};
        static const char *const names[] = {"encode", "decode", "raw ISA-L encode",
                                            "raw ISA-L decode"};
        if (bench_plot_rows(plot_file, "inec bench codec: ours (solid) vs raw ISA-L (dashed)",
                            "chunk size (bytes)", "GB/s", BENCH_LOG2_X, rows, group, 1,
                            "chunk_bytes", ys, names, 4, 2) < 0) {
            fprintf(stderr, "inec bench codec: gnuplot failed writing %s\n", plot_file);
            rc = -EIO;
        }
    }
    if (json && rc == 0)
        bench_json_print(
            json_pack("{s:s, s:f, s:O}", "bench", "codec", "seconds", min_time, "results", rows));
    json_decref(rows);
    return rc == 0 ? 0 : 1;
}
