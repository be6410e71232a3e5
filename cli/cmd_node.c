/* `inec node SUB ...`: the storage node's subcommands, one table entry each. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "node/store.h"

struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

/* Parses `--data DIR` (the only option the store tools take); 0, 1 (help) or 2. */
static int data_option(int argc, char **argv, const char *usage, const char **dir)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *dir = NULL;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1;) {
        if (c == 'd') {
            *dir = optarg;
        } else if (c == 'h') {
            printf("%s", usage);
            return 1;
        } else {
            fprintf(stderr, "%s", usage);
            return 2;
        }
    }
    if (!*dir || optind != argc) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    return 0;
}

static int open_store(const char *dir, struct node_store **s)
{
    char err[256];
    struct node_store_options o;
    node_store_options_default(&o);
    o.group_commit = 0; /* a tool writes nothing worth a writer thread */
    o.create = 0;
    int rc = node_store_open(dir, &o, s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "inec node: %s\n", err);
    return rc;
}

static void print_id(FILE *f, const struct node_chunk_id *id, uint64_t version)
{
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        fprintf(f, "%02x", id->object[i]);
    fprintf(f, " stripe=%" PRIu64 " index=%" PRIu32 " version=%" PRIu64, id->stripe, id->index,
            version);
}

static void scrub_report(const struct node_chunk_id *id, uint64_t version, int err, void *arg)
{
    (void)arg;
    printf("corrupt ");
    print_id(stdout, id, version);
    printf(" (%s)\n", node_store_strerror(err));
}

static int node_scrub(int argc, char **argv)
{
    const char *dir;
    int rc =
        data_option(argc, argv,
                    "usage: inec node scrub --data DIR\n\n"
                    "Re-reads and verifies every chunk of the store in DIR (which must not be\n"
                    "open elsewhere), lists corrupt ones and puts them on the repair list.\n"
                    "Exit status 0: all good, 1: corruption found or error.\n",
                    &dir);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct node_store *s;
    if (open_store(dir, &s))
        return 1;
    struct node_scrub_result r;
    rc = node_store_scrub(s, scrub_report, NULL, &r);
    node_store_close(s);
    if (rc) {
        fprintf(stderr, "inec node scrub: %s\n", node_store_strerror(rc));
        return 1;
    }
    printf("checked %" PRIu64 " chunks, %" PRIu64 " bytes, %" PRIu64 " corrupt\n", r.checked,
           r.bytes, r.corrupt);
    return r.corrupt ? 1 : 0;
}

static int repair_print(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    (void)arg;
    printf("repair     ");
    print_id(stdout, id, version);
    printf("\n");
    return 0;
}

static int node_stat(int argc, char **argv)
{
    const char *dir;
    int rc = data_option(argc, argv,
                         "usage: inec node stat --data DIR\n\n"
                         "Prints segment, chunk and metadata counts and live/dead bytes of the\n"
                         "store in DIR, and the chunks waiting for repair.\n",
                         &dir);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct node_store *s;
    if (open_store(dir, &s))
        return 1;
    struct node_store_stats st;
    rc = node_store_stats(s, &st);
    if (rc == 0) {
        printf("segments   %" PRIu64 "\n", st.segments);
        printf("bytes      %" PRIu64 "\n", st.segment_bytes);
        printf("chunks     %" PRIu64 "\n", st.chunks);
        printf("live       %" PRIu64 "\n", st.live_bytes);
        printf("dead       %" PRIu64 "\n", st.dead_bytes);
        printf("metadata   %" PRIu64 "\n", st.metas);
        printf("corrupt    %" PRIu64 "\n", st.repair);
        rc = node_store_list_repair(s, repair_print, NULL);
        rc = rc < 0 ? rc : 0;
    }
    node_store_close(s);
    if (rc) {
        fprintf(stderr, "inec node stat: %s\n", node_store_strerror(rc));
        return 1;
    }
    return 0;
}

static const struct subcommand subcommands[] = {
    {"scrub", node_scrub, "verify every chunk of a store, report corrupt ones"},
    {"stat", node_stat, "counts and bytes of a store: live, dead, corrupt"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: inec node <subcommand> [options]\n\nsubcommands:\n");
    for (const struct subcommand *c = subcommands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n'inec node <subcommand> --help' describes a subcommand.\n");
}

int cmd_node(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (const struct subcommand *c = subcommands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "inec node: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
