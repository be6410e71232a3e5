#include "cli/dispatch.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out, const char *prog, const char *about, const struct cli_command *table)
{
    fprintf(out, "usage: %s <command> [options]\n\n", prog);
    if (about)
        fprintf(out, "%s\n\n", about);
    fprintf(out, "commands:\n");
    for (const struct cli_command *c = table; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n'%s <command> --help' describes a command.\n", prog);
}

int cli_dispatch(const char *prog, const char *about, const struct cli_command *table,
                 int (*fallback)(int argc, char **argv), int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr, prog, about, table);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout, prog, about, table);
        return 0;
    }
    for (const struct cli_command *c = table; c->name; c++)
        if (strcmp(argv[1], c->name) == 0)
            return c->run(argc - 1, argv + 1);
    if (fallback && argv[1][0] == '-')
        return fallback(argc, argv);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
    usage(stderr, prog, about, table);
    return 2;
}
