/* `inec`: dispatches to one subcommand from a table; nothing else lives here. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"bench", cmd_bench, "measure codec, primitive, EC graph, store and S3 performance"},
    {"deg", cmd_deg, "show, run and serve Dynamic EC Graphs"},
    {"node", cmd_node, "serve a storage node; store tools: scrub, stat"},
    {"ec", cmd_ec, "erasure-code a file into chunk files and back"},
    {"server", cmd_server, "run the S3 gateway with 9 embedded nodes (RS(6,3)) in one process"},
    {"gateway", cmd_gateway, "run the S3 gateway in front of node processes (--config)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: inec <command> [options]\n\n"
                 "inec is an erasure-coded object storage gateway.\n\ncommands:\n");
    for (const struct command *c = commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n'inec <command> --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("inec 0.1.0\n");
        return 0;
    }
    for (const struct command *c = commands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "inec: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
