/* `inec bench NAME ...`: one entry per benchmark program in bench/. */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/dispatch.h"

static const struct cli_command benches[] = {
    {"store", bench_store, "chunk store put/get vs raw io_uring write+fdatasync"},
    {"codec", bench_codec, "codec encode/decode bandwidth vs raw ISA-L"},
    {"primitive", bench_primitive, "INEC primitives: coherent vs incoherent vs raw"},
    {"ec", bench_ec, "DEG encode/decode per scheme: coherent vs incoherent primitives"},
    {"objects", bench_objects, "object PUT/GET (embedded cluster) vs GET and raw encode"},
    {"repair", bench_repair, "rebuild a removed node: RS, PPR, ECPipe vs one chunk transfer"},
    {"volume", bench_volume, "NBD block I/O with fio (4K IOPS, 1M MB/s) vs qemu-nbd on a file"},
    {"s3", bench_s3, "S3 PUT/GET over HTTP vs the same server with no storage"},
    {NULL, NULL, NULL},
};

int cmd_bench(int argc, char **argv)
{
    return cli_dispatch("inec bench",
                        "Each benchmark measures a floor in the same run and prints the ratio.",
                        benches, NULL, argc, argv);
}
