/*
 * Benchmark programs behind `inec bench NAME`. Each takes argv[0] = NAME,
 * prints an aligned text table (or JSON with --json) and returns an exit code.
 */
#ifndef INEC_BENCH_H
#define INEC_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
/* "4096", "64K", "1M", "1MiB", "2G", "1T" -> bytes in [1, max]; -1 when malformed. */
int bench_parse_size(const char *s, uint64_t max, uint64_t *out);
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
