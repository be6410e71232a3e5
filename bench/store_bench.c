/*
 * `inec bench store`: chunk store write and read bandwidth against a raw floor
 * measured in the same run on the same file system: io_uring write + fdatasync
 * of the same bytes, chunk by chunk (every chunk durable, as every put is), and
 * pread of them back for reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "node/store.h"

enum { ROUNDS = 3 };

struct cfg {
    const char *dir;
    uint64_t bytes; /* per configuration */
    int threads;
    int json;
};

static struct node_chunk_id cid(uint64_t n)
{
    struct node_chunk_id id = {.stripe = n};
    memcpy(id.object, "bench-store-obj", 15);
    return id;
}

/* Raw floor: one file, io_uring write then fdatasync per chunk; then pread back. */
static int raw_run(const struct cfg *c, const uint8_t *buf, size_t chunk, uint64_t n, double *wsec,
                   double *rsec)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/raw.dat", c->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    struct io_uring ring;
    int rc = io_uring_queue_init(4, &ring, 0);
    if (rc) {
        close(fd);
        return rc;
    }
    double t0 = bench_now();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        for (size_t done = 0; done < chunk && rc == 0;) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_write(sqe, fd, buf + done, (unsigned)(chunk - done), i * chunk + done);
            struct io_uring_cqe *cqe;
            rc = io_uring_submit_and_wait(&ring, 1);
            if (rc >= 0 && (rc = io_uring_wait_cqe(&ring, &cqe)) == 0) {
                if (cqe->res > 0)
                    done += (size_t)cqe->res;
                else
                    rc = cqe->res ? cqe->res : -EIO;
                io_uring_cqe_seen(&ring, cqe);
            }
        }
        if (rc == 0) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
            struct io_uring_cqe *cqe;
            rc = io_uring_submit_and_wait(&ring, 1);
            if (rc >= 0 && (rc = io_uring_wait_cqe(&ring, &cqe)) == 0) {
                rc = cqe->res;
                io_uring_cqe_seen(&ring, cqe);
            }
        }
    }
    *wsec = bench_now() - t0;
    io_uring_queue_exit(&ring);
    uint8_t *rb = malloc(chunk);
    t0 = bench_now();
    for (uint64_t i = 0; i < n && rc == 0 && rb; i++)
        if (pread(fd, rb, chunk, (off_t)(i * chunk)) != (ssize_t)chunk)
            rc = -EIO;
    *rsec = bench_now() - t0;
    free(rb);
    close(fd);
    unlink(path);
    return rc;
}

struct put_job {
    struct node_store *s;
    const uint8_t *buf;
    size_t chunk;
    uint64_t first, n;
    int rc;
};

static void *put_worker(void *p)
{
    struct put_job *j = p;
    for (uint64_t i = j->first; i < j->first + j->n && j->rc == 0; i++) {
        struct node_chunk_id id = cid(i);
        j->rc = node_store_put_chunk(j->s, &id, 1, j->buf, j->chunk);
    }
    return NULL;
}

/* Writes n chunks with `threads` writers, then (if rsec) reads them back. */
static int store_run(const struct cfg *c, const uint8_t *buf, size_t chunk, uint64_t n, int gc,
                     int threads, double *wsec, double *rsec)
{
    char path[4200], err[256];
    snprintf(path, sizeof(path), "%s/store", c->dir);
    bench_rmtree(path);
    struct node_store_options o;
    node_store_options_default(&o);
    o.group_commit = gc;
    struct node_store *s;
    int rc = node_store_open(path, &o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "inec bench store: %s\n", err);
        return rc;
    }
    struct put_job jobs[64];
    pthread_t th[64];
    double t0 = bench_now();
    for (int t = 0; t < threads; t++) {
        uint64_t per = n / (uint64_t)threads;
        jobs[t] = (struct put_job){
            s, buf, chunk, (uint64_t)t * per, t == threads - 1 ? n - (uint64_t)t * per : per, 0};
        pthread_create(&th[t], NULL, put_worker, &jobs[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].rc)
            rc = jobs[t].rc;
    }
    *wsec = bench_now() - t0;
    if (rc == 0 && rsec) {
        uint8_t *rb = malloc(chunk);
        t0 = bench_now();
        for (uint64_t i = 0; i < n && rc == 0 && rb; i++) {
            struct node_chunk_id id = cid(i);
            rc = node_store_get_chunk(s, &id, rb, chunk, NULL, NULL);
        }
        *rsec = bench_now() - t0;
        free(rb);
    }
    node_store_close(s);
    bench_rmtree(path);
    if (rc)
        fprintf(stderr, "inec bench store: %s\n", node_store_strerror(rc));
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench store [--quick] [--json] [--plot FILE.png] [--dir DIR]\n"
               "                        [--size S,S,...] [--bytes N] [--threads N]\n\n"
               "Chunk store put/get bandwidth for 64 KiB .. 16 MiB chunks, without and with\n"
               "group commit (N writer threads), against io_uring write + fdatasync per chunk\n"
               "(and pread) of the same bytes on the same file system.\n\n"
               "  --dir DIR     where to write (default /var/tmp); removed afterwards\n"
               "  --size S,..   chunk sizes, K/M suffixes (default 64K,256K,1M,4M,16M;\n"
               "                quick 64K,1M,16M)\n"
               "  --bytes N     bytes per configuration over 3 rounds (best counts), suffix K/M/G\n"
               "                (default 384M, quick 48M)\n"
               "  --threads N   writer threads with group commit (default 4)\n"
               "  --quick       fewer sizes and bytes\n"
               "  --json        JSON instead of a table\n"
               "  --plot FILE   MB/s against chunk size, raw write/read dashed (gnuplot)\n");
}

int bench_store(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quick", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'j'},
        {"dir", required_argument, NULL, 'd'},
        {"bytes", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"size", required_argument, NULL, 's'},
        {"plot", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cfg c = {.dir = "/var/tmp", .bytes = 0, .threads = 4};
    int quick = 0, nchosen = 0;
    uint64_t chosen[16];
    const char *plot_file = NULL;
    optind = 1;
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'q':
            quick = 1;
            break;
        case 'j':
            c.json = 1;
            break;
        case 'd':
            c.dir = optarg;
            break;
        case 'b':
            if (bench_parse_size(optarg, (uint64_t)1 << 40, &c.bytes) < 0) {
                fprintf(stderr, "inec bench store: bad --bytes '%s' (e.g. 256M, 2G)\n", optarg);
                return 2;
            }
            break;
        case 't':
            c.threads = atoi(optarg);
            break;
        case 's':
            if ((nchosen = bench_parse_size_list("store", optarg, 16u << 20, chosen, 16)) < 0)
                return 2;
            break;
        case 'p':
            plot_file = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || c.threads < 1 || c.threads > 64) {
        usage(stderr);
        return 2;
    }
    if (!c.bytes)
        c.bytes = quick ? 48ull << 20 : 384ull << 20;
    static const size_t all[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
    static const size_t fast[] = {64 << 10, 1 << 20, 16 << 20};
    size_t sizes[16], nsizes = nchosen ? (size_t)nchosen : quick ? 3 : 5;
    for (size_t i = 0; i < nsizes; i++)
        sizes[i] = nchosen ? (size_t)chosen[i] : quick ? fast[i] : all[i];

    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/inec-bench-store-XXXXXX", c.dir);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "inec bench store: %s: %s\n", c.dir, strerror(errno));
        return 1;
    }
    c.dir = dir;
    uint8_t *buf = malloc(16 << 20);
    for (size_t i = 0; buf && i < (16u << 20); i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);

    json_t *rows = json_array();
    if (!c.json)
        printf("%-8s %10s %10s %6s %10s %6s %10s %10s %6s\n", "chunk", "raw_w MB/s", "put MB/s",
               "ratio", "gc MB/s", "ratio", "raw_r MB/s", "get MB/s", "ratio");
    int rc = buf ? 0 : -ENOMEM;
    for (size_t i = 0; i < nsizes && rc == 0; i++) {
        size_t chunk = sizes[i];
        uint64_t n = c.bytes / ROUNDS / chunk;
        if (n < (uint64_t)c.threads)
            n = (uint64_t)c.threads;
        /* Best of ROUNDS, the three writers interleaved: the disk is shared and
         * bursty, so a single run says more about the neighbours than the code. */
        double mb = (double)(n * chunk) / 1e6, rw = 1e9, rr = 1e9, sw = 1e9, sr = 1e9, gw = 1e9;
        for (int round = 0; round < ROUNDS && rc == 0; round++) {
            double w, r;
            if ((rc = raw_run(&c, buf, chunk, n, &w, &r)) != 0)
                break;
            rw = w < rw ? w : rw;
            rr = r < rr ? r : rr;
            if ((rc = store_run(&c, buf, chunk, n, 0, 1, &w, &r)) != 0)
                break;
            sw = w < sw ? w : sw;
            sr = r < sr ? r : sr;
            if ((rc = store_run(&c, buf, chunk, n, 1, c.threads, &w, NULL)) != 0)
                break;
            gw = w < gw ? w : gw;
        }
        if (rc)
            break;
        double raw_w = mb / rw, put = mb / sw, gcw = mb / gw, raw_r = mb / rr, get = mb / sr;
        json_array_append_new(rows, json_pack("{s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                                              "chunk_bytes", (json_int_t)chunk, "chunks",
                                              (json_int_t)n, "raw_write_mbps", raw_w, "put_mbps",
                                              put, "put_ratio", put / raw_w, "gc_put_mbps", gcw,
                                              "gc_put_ratio", gcw / raw_w, "raw_read_mbps", raw_r,
                                              "get_mbps", get, "get_ratio", get / raw_r));
        if (!c.json) {
            char label[32];
            snprintf(label, sizeof(label), "%zu%s", chunk >= (1 << 20) ? chunk >> 20 : chunk >> 10,
                     chunk >= (1 << 20) ? "MiB" : "KiB");
            printf("%-8s %10.1f %10.1f %6.2f %10.1f %6.2f %10.1f %10.1f %6.2f\n", label, raw_w, put,
                   put / raw_w, gcw, gcw / raw_w, raw_r, get, get / raw_r);
        }
        fflush(stdout);
    }
    if (rc == 0 && plot_file) {
        static const char *const ys[] = {"put_mbps", "gc_put_mbps", "get_mbps", "raw_write_mbps",
                                         "raw_read_mbps"};
        static const char *const names[] = {"put", "put, group commit", "get",
                                            "raw write+fdatasync", "raw pread"};
        if (bench_plot_rows(plot_file, "inec bench store", "chunk size (bytes)", "MB/s",
                            BENCH_LOG2_X, rows, NULL, 0, "chunk_bytes", ys, names, 5, 3) < 0) {
            fprintf(stderr, "inec bench store: gnuplot failed writing %s\n", plot_file);
            rc = -EIO;
        }
    }
    if (rc == 0 && c.json)
        bench_json_print(json_pack("{s:s,s:i,s:I,s:O}", "bench", "store", "threads", c.threads,
                                   "bytes", (json_int_t)c.bytes, "results", rows));
    json_decref(rows);
    free(buf);
    bench_rmtree(dir);
    if (rc) {
        fprintf(stderr, "inec bench store: %s\n", node_store_strerror(rc));
        return 1;
    }
    return 0;
}
