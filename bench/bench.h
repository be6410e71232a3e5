/*
 * Benchmark programs behind `inec bench NAME`. Each takes argv[0] = NAME,
 * prints an aligned text table (or JSON with --json) and returns an exit code.
 */
#ifndef INEC_BENCH_H
#define INEC_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
/* "4096", "64K", "1M", "1MiB", "2G", "1T" -> bytes in [1, max]; -1 when malformed. */
int bench_parse_size(const char *s, uint64_t max, uint64_t *out);
/*
 * The flags every benchmark shares, parsed one way (`name` is the benchmark's,
 * for the error line on stderr; each returns -1 after printing it):
 *   --size S[,S...]   sizes with K/M/G suffixes, each in [1, max]: the count
 *   --clients N[,N]   plain counts in [1, max]: the count
 *   --seconds S       a time budget in (0, max]
 */
int bench_parse_size_list(const char *name, const char *list, uint64_t max, uint64_t *out, int cap);
int bench_parse_count_list(const char *name, const char *flag, const char *list, uint64_t max,
                           uint64_t *out, int cap);
int bench_parse_seconds(const char *name, const char *v, double max, double *out);
/* Prints a --json document (indented, one trailing newline) and frees it. */
void bench_json_print(json_t *doc);

/* One curve of a --plot: n points (x[i], y[i]); dashed for a baseline. */
struct bench_series {
    char title[96];
    int n;
    double *x, *y;
    bool dashed;
    int color; /* gnuplot line colour index, 1.. */
};
/*
 * Draws the curves into a PNG with gnuplot (gnuplot-nox, pngcairo); axes
 * linear unless scales says BENCH_LOG2_X (a size axis: log2, K/M suffixes)
 * or BENCH_LOG_Y. Returns 0, or -errno / -EIO when gnuplot is missing or fails.
 */
enum { BENCH_LOG2_X = 1, BENCH_LOG_Y = 2 };
int bench_plot(const char *file, const char *title, const char *xlabel, const char *ylabel,
               int scales, const struct bench_series *s, int ns);
/*
 * The same from a benchmark's --json rows: one curve per field of ys[] (named
 * ynames[] in the key; the first nsolid are ours, drawn solid, the rest are
 * baselines, dashed) and per group (the distinct values of the fields named
 * in group[], e.g. {"profile"}; one colour each, or one colour per curve when
 * ngroup is 0), x from the field x.
 */
int bench_plot_rows(const char *file, const char *title, const char *xlabel, const char *ylabel,
                    int scales, json_t *rows, const char *const *group, int ngroup, const char *x,
                    const char *const *ys, const char *const *ynames, int ny, int nsolid);
/* Appends (x, y) to a series (grows its arrays); -ENOMEM on failure. */
int bench_series_add(struct bench_series *s, double x, double y);
void bench_series_free(struct bench_series *s, int ns);

/*
 * The disk under `dir`: sequential 1 MiB writes of `bytes` in all, with an
 * fdatasync after every 16 MiB (what a node does with a large object's
 * chunks, at best), into MB/s: the best of `rounds` passes, as a ceiling is
 * (a shared disk's passes here varied up to 5x). The file is removed
 * afterwards.
 */
int bench_disk_write_mbps(const char *dir, uint64_t bytes, int rounds, double *mbps, char *err,
                          size_t errlen);

/*
 * The disk under `dir` as a small write's commit sees it: `files` files,
 * each written 4 KiB and flushed (fdatasync) at once by a thread of its own,
 * until `need` of them are durable (a metadata round waiting for its
 * quorum); the median of `rounds` such waits into *p50_ms. The files are
 * removed afterwards.
 */
int bench_disk_flush_ms(const char *dir, int files, int need, int rounds, double *p50_ms, char *err,
                        size_t errlen);

/*
 * Node processes on loopback tcp, as scripts/cluster.sh starts them: `inec
 * node run` of this very binary, one per node, with DIR/cluster.json (nodes
 * n0..n{n-1} on free ports, pool "default" of `profile` with 1 MiB chunks,
 * DIR/cluster.secret) into *cfg, ready for gw_objects_open. Each node's
 * output goes to DIR/nI.log. bench_nodes_stop_one / start_one stop (SIGTERM)
 * and restart node i on its port (a degraded read's failed nodes).
 */
#define BENCH_NODES_MAX 32
struct bench_nodes;
int bench_nodes_start(const char *dir, int n, const char *profile, json_t **cfg,
                      struct bench_nodes **out, char *err, size_t errlen);
int bench_nodes_start_one(struct bench_nodes *c, int i, char *err, size_t errlen);
void bench_nodes_stop_one(struct bench_nodes *c, int i);
void bench_nodes_stop(struct bench_nodes *c); /* every node; NULL is a no-op */

/* Removes a directory tree (a benchmark's scratch data). */
void bench_rmtree(const char *dir);
/* 4096 -> "4K", 1048576 -> "1M", 1000 -> "1000". */
void bench_size_text(uint64_t s, char *buf, size_t len);

/* Chunk store put/get bandwidth against io_uring write+fdatasync and pread. */
int bench_store(int argc, char **argv);
/* Codec encode/decode bandwidth against raw ISA-L. */
int bench_codec(int argc, char **argv);
/* DEG encode/decode per scheme: coherent vs incoherent primitives. */
int bench_ec(int argc, char **argv);

/* INEC primitives, coherent vs incoherent, against raw transfer and ISA-L. */
int bench_primitive(int argc, char **argv);
/* Object PUT/GET through an embedded cluster vs GET and raw encode. */
int bench_objects(int argc, char **argv);

/* Rebuilding a removed node's chunks per repair scheme vs one chunk's transfer. */
int bench_repair(int argc, char **argv);

/* S3 PUT/GET throughput and latency over HTTP against a no-storage floor. */
int bench_s3(int argc, char **argv);

/* Block I/O through the NBD server with fio vs qemu-nbd on a local file. */
int bench_volume(int argc, char **argv);

#endif
