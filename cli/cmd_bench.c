/* `inec bench NAME ...`: one entry per benchmark program in bench/. */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"

struct bench {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct bench benches[] = {
    {"store", bench_store, "chunk store put/get vs raw io_uring write+fdatasync"},
    {"codec", bench_codec, "codec encode/decode bandwidth vs raw ISA-L"},
    {"primitive", bench_primitive, "INEC primitives: coherent vs incoherent vs raw"},
    {"ec", bench_ec, "DEG encode/decode per scheme: coherent vs incoherent primitives"},
    {"objects", bench_objects, "object PUT/GET (embedded cluster) vs GET and raw encode"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: inec bench <name> [options]\n\nbenchmarks:\n");
    for (const struct bench *b = benches; b->name; b++)
        fprintf(out, "  %-10s %s\n", b->name, b->summary);
    fprintf(out, "\n'inec bench <name> --help' lists a benchmark's options.\n");
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (const struct bench *b = benches; b->name; b++)
        if (strcmp(argv[1], b->name) == 0)
            return b->run(argc - 1, argv + 1);
    fprintf(stderr, "inec bench: unknown benchmark '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
