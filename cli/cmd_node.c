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
#include "cli/control.h"
#include "inec/auth.h"
#include "inec/hostport.h"
#include "inec/inec.h"
#include "inec/log.h"
#include "node/client.h"
#include "node/cpus.h"
#include "node/metrics_server.h"
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

/* A running node writes where it listens into its data directory, so `inec
 * node stat --data DIR` reaches it through its service while the store is
 * locked by it. */
#define LISTEN_FILE "node.listen"

static void print_stats(const struct node_store_stats *st)
{
    static const struct {
        const char *name;
        size_t off;
        bool bytes;
    } rows[] = {
        {"segments", offsetof(struct node_store_stats, segments), false},
        {"bytes", offsetof(struct node_store_stats, segment_bytes), true},
        {"chunks", offsetof(struct node_store_stats, chunks), false},
        {"live", offsetof(struct node_store_stats, live_bytes), true},
        {"dead", offsetof(struct node_store_stats, dead_bytes), true},
        {"metadata", offsetof(struct node_store_stats, metas), false},
        {"corrupt", offsetof(struct node_store_stats, repair), false},
        {"capacity", offsetof(struct node_store_stats, capacity), true},
        {"compacted", offsetof(struct node_store_stats, compacted_bytes), true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint64_t v = *(const uint64_t *)((const char *)st + rows[i].off);
        printf("%-10s %" PRIu64, rows[i].name, v);
        if (rows[i].bytes && v >= 1024) {
            char h[32];
            ctl_bytes(v, h, sizeof(h));
            printf(" (%s)", h);
        }
        printf("\n");
    }
}

/* Through the node's service: stats, health and the repair list over RPC. */
static int stat_remote(const char *addr, const char *secret)
{
    struct inec_device *dev = NULL;
    struct node_client *c = NULL;
    char err[512] = "", devopts[4200];
    struct node_client_opts o = {.timeout_ms = 10000, .secret_file = secret, .name = "node-stat"};
    struct inec_keyring kr;
    int lrc = inec_secret_load(secret, &kr, err, sizeof(err));
    inec_keyring_clear(&kr);
    if (lrc || strchr(secret, ',')) {
        fprintf(stderr, "inec node stat: %s\n", lrc ? err : "the secret's path has a comma");
        return 1;
    }
    /* Our device listens on loopback for a local node, every address otherwise. */
    bool local = strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10) == 0;
    snprintf(devopts, sizeof(devopts), "transport=tcp,listen=%s:0,timeout_ms=10000,secret=%s",
             local ? "127.0.0.1" : "0.0.0.0", secret);
    int rc = inec_device_open(NULL, devopts, &dev);
    if (rc)
        snprintf(err, sizeof(err), "%s", inec_errmsg());
    if (rc == 0)
        rc = node_client_connect(dev, addr, &o, &c, err, sizeof(err));
    struct node_health h;
    struct node_store_stats st;
    if (rc == 0 && (rc = node_client_health(c, &h)) == 0)
        rc = node_client_stats(c, &st);
    if (rc == 0) {
        printf("node       %s (domain %s) at %s, up %.0f s%s\n", h.id, h.domain, addr,
               (double)h.uptime_ms / 1000, h.stopping ? ", stopping" : "");
        print_stats(&st);
        int more = 0;
        rc = node_client_list_repair(c, repair_print, NULL, &more);
        rc = rc < 0 ? rc : 0; /* else: how many it listed */
        if (rc == 0 && more)
            printf("repair     ... (more)\n");
    }
    if (rc)
        fprintf(stderr, "inec node stat: %s: %s\n", addr,
                err[0] ? err
                       : (c && node_client_errmsg(c)[0] ? node_client_errmsg(c) : strerror(-rc)));
    node_client_close(c);
    inec_device_close(dev);
    return rc ? 1 : 0;
}

static int node_stat(int argc, char **argv)
{
    static const char usage[] =
        "usage: inec node stat --data DIR\n"
        "       inec node stat --connect HOST:PORT --secret FILE\n\n"
        "Prints segment, chunk and metadata counts, live/dead bytes and capacity of a\n"
        "node's store, and the chunks waiting for repair. A running node is asked\n"
        "through its service (found from DIR/" LISTEN_FILE ", with its cluster secret,\n"
        "or --connect and --secret); a stopped one's store is opened directly.\n";
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"connect", required_argument, NULL, 'c'},
        {"secret", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *connect = NULL, *secret = NULL;
    optind = 1;
    for (int o; (o = getopt_long(argc, argv, "d:c:h", opts, NULL)) != -1;) {
        if (o == 'h')
            return printf("%s", usage), 0;
        if (o != 'd' && o != 'c' && o != 'K')
            return fprintf(stderr, "%s", usage), 2;
        *(o == 'd' ? &dir : o == 'c' ? &connect : &secret) = optarg;
    }
    if ((!dir == !connect) || (connect && !secret) || optind != argc)
        return fprintf(stderr, "%s", usage), 2;
    if (connect)
        return stat_remote(connect, secret);
    char err[256];
    struct node_store_options so;
    node_store_options_default(&so);
    so.group_commit = 0;
    so.create = 0;
    struct node_store *s;
    int rc = node_store_open(dir, &so, &s, err, sizeof(err));
    if (rc == -EBUSY) {
        char path[4096], addr[256] = "", line[4200] = "";
        snprintf(path, sizeof(path), "%s/%s", dir, LISTEN_FILE);
        FILE *f = fopen(path, "r");
        if (f && fgets(addr, sizeof(addr), f))
            addr[strcspn(addr, "\n")] = '\0';
        if (f && fgets(line, sizeof(line), f))
            line[strcspn(line, "\n")] = '\0';
        if (f)
            fclose(f);
        if (addr[0] && (secret || strncmp(line, "secret ", 7) == 0))
            return stat_remote(addr, secret ? secret : line + 7);
        fprintf(stderr,
                "inec node stat: %s is in use by a running node whose address is not "
                "known: give --connect HOST:PORT\n",
                dir);
        return 1;
    }
    if (rc) {
        fprintf(stderr, "inec node: %s\n", err);
        return 1;
    }
    struct node_store_stats st;
    rc = node_store_stats(s, &st);
    if (rc == 0) {
        print_stats(&st);
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

/* DIR/node.listen, written whole (temporary file, rename) once the node
 * listens: its address, then "secret PATH" (the file, never the secret). */
static void note_listen(const char *dir, const char *addr, const char *secret)
{
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, LISTEN_FILE);
    snprintf(path, sizeof(path), "%s/%s", dir, LISTEN_FILE);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\nsecret %s\n", addr, secret) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        inec_log(INEC_LOG_WARN, "node", "cannot record the listen address in %s", path);
}

static const char run_usage[] =
    "usage: inec node [run] --config FILE --id ID [--data DIR] [--capacity BYTES]\n"
    "       inec node [run] --listen HOST:PORT --data DIR [--id ID] [--domain D]\n"
    "                       [--capacity BYTES] [--timeout-ms N]\n"
    "       (both) [--metrics-listen HOST:PORT] [--secret FILE]\n\n"
    "Serves a storage node: its chunk store in DIR, RPCs and DEG vertices over inec\n"
    "(tcp transport) through a connection manager on HOST:PORT (port 0 = any; the\n"
    "bound address is printed as 'listening HOST:PORT'). FILE is\n"
    "  {\"map\": <cluster map, see placement/placement.h>,\n"
    "   \"nodes\": {\"ID\": {\"data\": DIR, \"capacity\": BYTES}, ...},\n"
    "   \"node\": {\"compaction\": {\"interval_ms\": 1000, \"dead_ratio\": 0.4,\n"
    "                            \"seal_bytes\": 16777216, \"mbps\": 50},\n"
    "            \"direct_min\": 262144}}\n"
    "and gives this node's address and failure domain (from the map) and its data\n"
    "directory, and the failure detector's peer_timeout_ms and heartbeat_ms (the\n"
    "map's; --timeout-ms overrides). SIGTERM or SIGINT stops it cleanly: requests in\n"
    "flight finish, writes are acknowledged only once durable.\n"
    "--metrics-listen (or \"metrics_listen\" of the node in FILE) serves the node's\n"
    "Prometheus metrics at http://HOST:PORT/metrics (printed as 'metrics HOST:PORT').\n"
    "Background compaction (defaults above; a node's own \"compaction\" in \"nodes\"\n"
    "overrides): every interval_ms after writes, segments at least dead_ratio dead\n"
    "(the active one once seal_bytes big) are rewritten at mbps MB/s at most, after\n"
    "reads and writes in flight; interval_ms -1 turns it off, mbps -1 unlimits it.\n"
    "direct_min (default above; a node's own in \"nodes\" overrides): chunks of at\n"
    "least that many bytes are written with O_DIRECT, past the page cache (faster\n"
    "large writes; a read right after goes to the disk); -1: never.\n"
    "--secret FILE (or \"secret_file\" in FILE, relative to its directory; default\n"
    "cluster.secret beside it) is the cluster secret every peer must prove before\n"
    "anything is served; created (mode 0600) if missing, refused if group or others\n"
    "may read it. See `inec secret`.\n";

struct run_args {
    char id[PLACE_ID_MAX], domain[PLACE_ID_MAX], listen[PLACE_ADDRESS_MAX], data[4096];
    char metrics_listen[PLACE_ADDRESS_MAX];
    char secret[4096], secret_cfg[4096]; /* --secret; the config's "secret_file" */
    unsigned long long capacity;
    int timeout_ms, heartbeat_ms;
    struct node_compaction_config compaction;
    uint64_t direct_min;
    bool crowded;
};

/* Fills what the config gives for node `a->id`; options given on the command
 * line win. */
static int load_config(const char *path, struct run_args *a, int have_data, int have_cap,
                       int have_timeout)
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
    a->crowded = node_host_crowded(m, a->listen);
    /* The map's device for this node picks its provider (inec_device_open);
     * set before the service starts any thread. */
    const char *device = m->nodes[i].device;
    if (device[0]) {
        char provider[PLACE_ID_MAX + 8];
        snprintf(provider, sizeof(provider), "%s%s", strcmp(device, "soft") ? "verbs:" : "",
                 device);
        setenv("INEC_PROVIDER", provider, 1);
    }
    if (!have_timeout) { /* the map's failure detector, as the gateway's */
        a->timeout_ms = m->peer_timeout_ms;
        a->heartbeat_ms = m->heartbeat_ms;
    }
    json_t *local = json_object_get(json_object_get(root, "nodes"), a->id);
    const char *data = json_string_value(json_object_get(local, "data"));
    json_t *cap = json_object_get(local, "capacity");
    if (!have_data && data)
        snprintf(a->data, sizeof(a->data), "%s", data);
    if (!have_cap && cap)
        a->capacity = (unsigned long long)json_integer_value(cap);
    /* Every node's settings (the "node" section), then this node's own. */
    json_t *every = json_object_get(root, "node");
    if (node_compaction_from_json(json_object_get(every, "compaction"), &a->compaction, err,
                                  sizeof(err)) ||
        node_compaction_from_json(json_object_get(local, "compaction"), &a->compaction, err,
                                  sizeof(err)) ||
        node_direct_min_from_json(json_object_get(every, "direct_min"), &a->direct_min, err,
                                  sizeof(err)) ||
        node_direct_min_from_json(json_object_get(local, "direct_min"), &a->direct_min, err,
                                  sizeof(err))) {
        fprintf(stderr, "inec node: %s: %s\n", path, err);
        goto out;
    }
    const char *sf = json_string_value(json_object_get(root, "secret_file"));
    if (sf)
        snprintf(a->secret_cfg, sizeof(a->secret_cfg), "%s", sf);
    const char *ml = json_string_value(json_object_get(local, "metrics_listen"));
    if (!a->metrics_listen[0] && ml)
        snprintf(a->metrics_listen, sizeof(a->metrics_listen), "%s", ml);
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
        {"metrics-listen", required_argument, NULL, 'M'},
        {"secret", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct run_args a = {.id = "node", .timeout_ms = 10000};
    const char *config = NULL;
    int have_id = 0, have_data = 0, have_cap = 0, have_listen = 0, have_domain = 0,
        have_timeout = 0;
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
            have_timeout = 1;
            break;
        case 'M':
            snprintf(a.metrics_listen, sizeof(a.metrics_listen), "%s", optarg);
            break;
        case 'K':
            snprintf(a.secret, sizeof(a.secret), "%s", optarg);
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
    if (config && load_config(config, &a, have_data, have_cap, have_timeout))
        return 1;
    if (have_listen)
        snprintf(a.listen, sizeof(a.listen), "%s", listen);
    if (have_domain)
        snprintf(a.domain, sizeof(a.domain), "%s", domain);
    if (!a.data[0]) {
        fprintf(stderr, "inec node: no data directory for node '%s' (--data)\n", a.id);
        return 2;
    }
    char secret[4096];
    if (cli_secret_file(a.secret[0] ? a.secret : NULL, config,
                        a.secret_cfg[0] ? a.secret_cfg : NULL, secret, sizeof(secret)))
        return 1;
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
        .heartbeat_ms = a.heartbeat_ms,
        .compaction = a.compaction,
        .direct_min = a.direct_min,
        .secret_file = secret,
        .crowded = a.crowded,
    };
    struct node_service *svc;
    char err[512];
    int rc = node_service_start(&cfg, &svc, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "inec node: %s\n", err);
        return 1;
    }
    printf("listening %s\n", node_service_listen_addr(svc));
    struct node_metrics_server *metrics = NULL;
    if (a.metrics_listen[0]) {
        rc = node_metrics_start(svc, a.metrics_listen, &metrics, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "inec node: %s\n", err);
            node_service_stop(svc);
            return 1;
        }
        char host[PLACE_ADDRESS_MAX], port[8], at[PLACE_ADDRESS_MAX + 8];
        inec_hostport_split(a.metrics_listen, host, sizeof(host), port, sizeof(port));
        inec_hostport_join(host, node_metrics_port(metrics), at, sizeof(at));
        printf("metrics %s\n", at);
    }
    fflush(stdout);
    note_listen(a.data, node_service_listen_addr(svc), secret);
    int sig = 0;
    sigwait(&set, &sig);
    inec_log(INEC_LOG_INFO, "node", "signal=%s: stopping id=%s", sig == SIGTERM ? "TERM" : "INT",
             a.id);
    node_metrics_stop(metrics);
    node_service_stop(svc);
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", a.data, LISTEN_FILE);
    unlink(path);
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
