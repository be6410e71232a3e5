/* `inec node SUB ...`: the storage node's subcommands, one table entry each. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "cli/dispatch.h"
#include "inec/log.h"
#include "node/service.h"
#include "node/store.h"
#include "placement/placement.h"

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

static const char run_usage[] =
    "usage: inec node [run] --config FILE --id ID [--data DIR] [--capacity BYTES]\n"
    "       inec node [run] --listen HOST:PORT --data DIR [--id ID] [--domain D]\n"
    "                       [--capacity BYTES] [--timeout-ms N]\n\n"
    "Serves a storage node: its chunk store in DIR, RPCs and DEG vertices over inec\n"
    "(tcp transport) through a connection manager on HOST:PORT (port 0 = any; the\n"
    "bound address is printed as 'listening HOST:PORT'). FILE is\n"
    "  {\"map\": <cluster map, see placement/placement.h>,\n"
    "   \"nodes\": {\"ID\": {\"data\": DIR, \"capacity\": BYTES}, ...}}\n"
    "and gives this node's address and failure domain (from the map) and its data\n"
    "directory. SIGTERM or SIGINT stops it cleanly: requests in flight finish, writes\n"
    "are acknowledged only once durable.\n";

struct run_args {
    char id[PLACE_ID_MAX], domain[PLACE_ID_MAX], listen[PLACE_ADDRESS_MAX], data[4096];
    unsigned long long capacity;
    int timeout_ms;
};

/* Fills what the config gives for node `a->id`; options given on the command
 * line win. */
static int load_config(const char *path, struct run_args *a, int have_data, int have_cap)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "inec node: %s:%d: %s\n", path, je.line, je.text);
        return -1;
    }
    int rc = -1;
    char *map_text = json_dumps(json_object_get(root, "map"), JSON_COMPACT);
    struct place_map *m = NULL;
    char err[256];
    if (!map_text) {
        fprintf(stderr, "inec node: %s: no \"map\" (the cluster map)\n", path);
        goto out;
    }
    if (place_map_parse(map_text, strlen(map_text), &m, err, sizeof(err))) {
        fprintf(stderr, "inec node: %s: map: %s\n", path, err);
        goto out;
    }
    int i = place_map_node(m, a->id);
    if (i < 0) {
        fprintf(stderr, "inec node: %s: the map has no node '%s'\n", path, a->id);
        goto out;
    }
    snprintf(a->listen, sizeof(a->listen), "%s", m->nodes[i].address);
    snprintf(a->domain, sizeof(a->domain), "%s", m->nodes[i].domain);
    json_t *local = json_object_get(json_object_get(root, "nodes"), a->id);
    const char *data = json_string_value(json_object_get(local, "data"));
    json_t *cap = json_object_get(local, "capacity");
    if (!have_data && data)
        snprintf(a->data, sizeof(a->data), "%s", data);
    if (!have_cap && cap)
        a->capacity = (unsigned long long)json_integer_value(cap);
    rc = 0;
out:
    place_map_destroy(m);
    free(map_text);
    json_decref(root);
    return rc;
}

static int node_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"id", required_argument, NULL, 'i'},
        {"listen", required_argument, NULL, 'l'},
        {"data", required_argument, NULL, 'd'},
        {"domain", required_argument, NULL, 'D'},
        {"capacity", required_argument, NULL, 'C'},
        {"timeout-ms", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct run_args a = {.id = "node", .timeout_ms = 10000};
    const char *config = NULL;
    int have_id = 0, have_data = 0, have_cap = 0, have_listen = 0, have_domain = 0;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "c:i:l:d:h", opts, NULL)) != -1;) {
        char *end = NULL;
        switch (c) {
        case 'c':
            config = optarg;
            break;
        case 'i':
            snprintf(a.id, sizeof(a.id), "%s", optarg);
            have_id = 1;
            break;
        case 'l':
            snprintf(a.listen, sizeof(a.listen), "%s", optarg);
            have_listen = 1;
            break;
        case 'd':
            snprintf(a.data, sizeof(a.data), "%s", optarg);
            have_data = 1;
            break;
        case 'D':
            snprintf(a.domain, sizeof(a.domain), "%s", optarg);
            have_domain = 1;
            break;
        case 'C':
            a.capacity = strtoull(optarg, &end, 10);
            have_cap = 1;
            if (!*optarg || *end) {
                fprintf(stderr, "inec node: --capacity takes a number of bytes\n");
                return 2;
            }
            break;
        case 't':
            a.timeout_ms = atoi(optarg);
            break;
        case 'h':
            printf("%s", run_usage);
            return 0;
        default:
            fprintf(stderr, "%s", run_usage);
            return 2;
        }
    }
    if (optind != argc || (config && !have_id) || (!config && (!have_listen || !have_data))) {
        fprintf(stderr, "%s", run_usage);
        return 2;
    }
    char listen[PLACE_ADDRESS_MAX], domain[PLACE_ID_MAX];
    snprintf(listen, sizeof(listen), "%s", a.listen);
    snprintf(domain, sizeof(domain), "%s", a.domain);
    if (config && load_config(config, &a, have_data, have_cap))
        return 1;
    if (have_listen)
        snprintf(a.listen, sizeof(a.listen), "%s", listen);
    if (have_domain)
        snprintf(a.domain, sizeof(a.domain), "%s", domain);
    if (!a.data[0]) {
        fprintf(stderr, "inec node: no data directory for node '%s' (--data)\n", a.id);
        return 2;
    }
    /* Every thread the service starts inherits the mask: only sigwait below
     * sees SIGTERM/SIGINT. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct node_service_config cfg = {
        .id = a.id,
        .domain = a.domain[0] ? a.domain : NULL,
        .data_dir = a.data,
        .listen = a.listen,
        .capacity = a.capacity,
        .timeout_ms = a.timeout_ms,
    };
    struct node_service *svc;
    char err[512];
    int rc = node_service_start(&cfg, &svc, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "inec node: %s\n", err);
        return 1;
    }
    printf("listening %s\n", node_service_listen_addr(svc));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    inec_log(INEC_LOG_INFO, "node", "signal=%s: stopping id=%s", sig == SIGTERM ? "TERM" : "INT",
             a.id);
    node_service_stop(svc);
    return 0;
}

static const struct cli_command subcommands[] = {
    {"run", node_run, "serve a storage node (the default subcommand)"},
    {"scrub", node_scrub, "verify every chunk of a store, report corrupt ones"},
    {"stat", node_stat, "counts and bytes of a store: live, dead, corrupt"},
    {NULL, NULL, NULL},
};

int cmd_node(int argc, char **argv)
{
    /* `inec node --listen ...`: run is the default subcommand. */
    return cli_dispatch("inec node", NULL, subcommands, node_run, argc, argv);
}
