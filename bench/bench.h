/*
 * Benchmark programs behind `inec bench NAME`. Each takes argv[0] = NAME,
 * prints an aligned text table (or JSON with --json) and returns an exit code.
 */
#ifndef INEC_BENCH_H
#define INEC_BENCH_H

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

#endif
