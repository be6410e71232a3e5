/*
 * `inec bench repair`: how long the repair service takes to rebuild every
 * chunk of a node removed for good, per repair scheme, on the mem transport
 * (embedded cluster) and on tcp (the same node services, each on its own
 * loopback socket), against the floor measured in the same run: one chunk's
 * transfer from one device to another over the same transport (a two-vertex
 * DEG: send, receive).
 *
 * Per transport and scheme: a fresh bucket of N one-stripe objects
 * (k x chunk bytes each), node 0 set out, one scan queues its stripes, and
 * the clock runs from resuming repair to an empty queue. Reported: the
 * total, the time per rebuilt chunk, and its ratio to the floor. "rs" is the
 * conventional star (k chunks to the new home), "ppr" the reduction tree,
 * "ecpipe" the sliced chain.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench.h"
#include "deg/deg.h"
#include "object/objects.h"
#include "node/service.h"

#define NODES 10

/* One chunk from one device to another: a sender and a receiver. */
static double floor_once(const char *options, size_t len, int reps)
{
    struct deg_graph *g = deg_graph_create(1, 2);
    int a = deg_add_vertex(g, "a", 0), b = deg_add_vertex(g, "b", 1);
    deg_add_local(g, a, 0);
    deg_add_edge(g, a, deg_local(0), b);
    deg_add_result(g, b, deg_in(0));
    uint8_t *chunk = malloc(len);
    uint8_t *chunks[2] = {chunk, NULL};
    double best = -1;
    struct deg_run_opts ro = {.timeout_ms = 30000, .options = options};
    struct deg_runner *r = NULL;
    char err[256];
    if (chunk && deg_runner_create(g, len, chunks, &ro, &r, err, sizeof(err)) == 0) {
        memset(chunk, 7, len);
        deg_runner_run(r, NULL, NULL, err, sizeof(err)); /* warm up */
        for (int i = 0; i < reps; i++) {
            double t = bench_now();
            if (deg_runner_run(r, NULL, NULL, err, sizeof(err)))
                break;
            t = bench_now() - t;
            if (best < 0 || t < best)
                best = t;
        }
    }
    deg_runner_destroy(r);
    deg_graph_destroy(g);
    free(chunk);
    return best;
}

static int put_object(struct gw_objects *o, const char *bucket, const char *key, const uint8_t *b,
                      size_t size)
{
    struct gw_put *p;
    int rc = gw_put_begin(o, bucket, key, NULL, &p);
    if (rc == 0 && (rc = gw_put_write(p, b, size)))
        gw_put_abort(p);
    return rc ? rc : gw_put_commit(p, NULL);
}

static double num(const json_t *j, const char *a, const char *b)
{
    const json_t *v = json_object_get(b ? json_object_get(j, a) : j, b ? b : a);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* Waits until the repair status satisfies `done` (bounded); 0 or -ETIMEDOUT. */
static int wait_status(struct gw_objects *o, bool (*done)(const json_t *st), double timeout_s)
{
    double end = bench_now() + timeout_s;
    while (bench_now() < end) {
        json_t *st = NULL;
        bool ok = gw_objects_repair_status(o, &st) == 0 && done(st);
        json_decref(st);
        if (ok)
            return 0;
        usleep(2000);
    }
    return -ETIMEDOUT;
}

static int64_t queued_goal, scans_before;

static bool queued(const json_t *st)
{
    return num(st, "scan", "scans") > (double)scans_before &&
           num(st, "queue", "stripes") >= (double)queued_goal;
}

static bool drained(const json_t *st)
{
    const char *s = json_string_value(json_object_get(st, "state"));
    return s && strcmp(s, "idle") == 0 && num(st, "queue", "stripes") == 0 &&
           num(st, "pending", NULL) == 0;
}

static bool started(const json_t *st)
{
    const char *s = json_string_value(json_object_get(st, "state"));
    return s && strcmp(s, "paused") != 0;
}

/* Repair of node 0's chunks of a fresh bucket with `scheme`; seconds and chunks. */
static int run_scheme(struct gw_objects *o, const char *scheme, int nobj, size_t osize,
                      const uint8_t *body, double *secs, int *chunks, char *msg, size_t msglen)
{
    char bucket[32];
    snprintf(bucket, sizeof(bucket), "bench-%s", scheme);
    int rc = gw_bucket_create(o, bucket);
    if (rc == -EEXIST)
        rc = 0;
    for (int i = 0; rc == 0 && i < nobj; i++) {
        char key[32];
        snprintf(key, sizeof(key), "o%05d", i);
        rc = put_object(o, bucket, key, body, osize);
    }
    /* How many chunks node 0 holds: the control API's view of each object. */
    *chunks = 0;
    for (int i = 0; rc == 0 && i < nobj; i++) {
        char key[32];
        snprintf(key, sizeof(key), "o%05d", i);
        json_t *j = NULL;
        if ((rc = gw_objects_object_json(o, bucket, key, &j)) == 0) {
            size_t s, c;
            json_t *st, *ch;
            json_array_foreach(json_object_get(j, "stripes"), s, st)
                json_array_foreach(json_object_get(st, "chunks"), c, ch) *chunks +=
                strcmp(json_string_value(json_object_get(ch, "node")), "n0") == 0;
        }
        json_decref(j);
    }
    json_t *st = NULL;
    if (rc == 0 && (rc = gw_objects_repair_status(o, &st)) == 0)
        scans_before = (int64_t)num(st, "scan", "scans");
    json_decref(st);
    queued_goal = *chunks;
    json_t *set = json_pack("{s:b,s:s}", "paused", 1, "scheme", scheme);
    if (rc == 0)
        rc = gw_objects_repair_set(o, set, msg, msglen);
    json_decref(set);
    if (rc == 0)
        rc = gw_objects_node_state(o, "n0", "out", msg, msglen); /* kicks a scan */
    if (rc == 0 && (rc = wait_status(o, queued, 120)))
        snprintf(msg, msglen, "the scan did not queue node n0's %d chunks", *chunks);
    double t = bench_now();
    set = json_pack("{s:b}", "paused", 0);
    if (rc == 0)
        rc = gw_objects_repair_set(o, set, msg, msglen);
    json_decref(set);
    if (rc == 0)
        rc = wait_status(o, started, 30);
    if (rc == 0 && (rc = wait_status(o, drained, 600)))
        snprintf(msg, msglen, "repair with %s did not finish", scheme);
    *secs = bench_now() - t;
    if (rc == 0)
        rc = gw_objects_node_state(o, "n0", "up", msg, msglen);
    return rc;
}

/* 10 node services on loopback tcp sockets and a gateway over tcp. */
static int open_tcp(const char *dir, const char *profile, size_t chunk, json_t *repair,
                    struct node_service **svc, struct gw_objects **out, char *msg, size_t msglen)
{
    json_t *nodes = json_array();
    for (int i = 0; i < NODES; i++) {
        char id[16], data[600];
        snprintf(id, sizeof(id), "n%d", i);
        snprintf(data, sizeof(data), "%s/node-%d", dir, i);
        struct node_service_config sc = {
            .id = id, .data_dir = data, .listen = "127.0.0.1:0", .timeout_ms = 10000};
        int rc = node_service_start(&sc, &svc[i], msg, msglen);
        if (rc) {
            json_decref(nodes);
            return rc;
        }
        json_array_append_new(
            nodes, json_pack("{s:s,s:s}", "id", id, "address", node_service_listen_addr(svc[i])));
    }
    json_t *cfg = json_pack("{s:{s:o,s:[{s:s,s:s,s:I}]},s:{s:O}}", "map", "nodes", nodes, "pools",
                            "name", "default", "profile", profile, "chunk_size", (json_int_t)chunk,
                            "gateway", "repair", repair);
    int rc = gw_objects_open(cfg, out, msg, msglen);
    json_decref(cfg);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench repair [--quick] [--json] [--objects N] [--size CHUNK]\n"
               "                         [--profile rs:k=6,m=3] [--transport mem|tcp|both]\n"
               "  time to rebuild every chunk of a node removed for good (10 nodes), by the\n"
               "  conventional RS star, PPR and ECPipe, against one chunk's transfer time\n"
               "  (default: 24 objects of k chunks of --size 1M; --quick: 8 objects, 256K)\n");
}

int bench_repair(int argc, char **argv)
{
    static const struct option lo[] = {
        {"quick", no_argument, NULL, 'q'},         {"json", no_argument, NULL, 'j'},
        {"objects", required_argument, NULL, 'n'}, {"size", required_argument, NULL, 'c'},
        {"profile", required_argument, NULL, 'p'}, {"transport", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    int quick = 0, json = 0, nobj = 0, ch;
    uint64_t chunk = 0;
    const char *profile = "rs:k=6,m=3", *transport = "both";
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'q':
            quick = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'n':
            nobj = atoi(optarg);
            break;
        case 'c':
            if (bench_parse_size_list("repair", optarg, 64u << 20, &chunk, 1) < 0)
                return 2;
            break;
        case 'p':
            profile = optarg;
            break;
        case 't':
            transport = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!nobj)
        nobj = quick ? 8 : 24;
    if (!chunk)
        chunk = quick ? 256 << 10 : 1 << 20;
    int k = 0, m = 0;
    if (sscanf(strchr(profile, ':') ? strchr(profile, ':') + 1 : "", "k=%d,m=%d", &k, &m) != 2 ||
        k < 1 || m < 1 || k + m >= NODES || nobj < 1 || nobj > 10000 ||
        (strcmp(transport, "mem") && strcmp(transport, "tcp") && strcmp(transport, "both"))) {
        usage(stderr);
        return 2;
    }
    size_t osize = (size_t)k * chunk;
    uint8_t *body = malloc(osize);
    if (!body)
        return 1;
    for (size_t i = 0; i < osize; i++)
        body[i] = (uint8_t)(i * 2654435761u >> 11);
    static const char *const schemes[] = {"rs", "ppr", "ecpipe"};
    static const char *const transports[] = {"mem", "tcp"};
    char msg[512] = "";
    int rc = 0;
    json_t *rows = json_array();
    if (!json)
        printf("%-9s %-7s %7s %9s %11s %11s %8s\n", "transport", "scheme", "chunks", "total_s",
               "per_chunk_ms", "floor_ms", "x_floor");
    for (int t = 0; t < 2 && rc == 0; t++) {
        if (strcmp(transport, "both") && strcmp(transport, transports[t]))
            continue;
        char dir[] = "/tmp/inec-bench-repair-XXXXXX";
        if (!mkdtemp(dir)) {
            rc = -errno;
            break;
        }
        json_t *repair = json_pack("{s:b,s:i,s:I}", "paused", 1, "scan_interval_ms", 3600000,
                                   "orphan_grace_ms", (json_int_t)3600000);
        struct gw_objects *o = NULL;
        struct node_service *svc[NODES] = {0};
        if (t == 0) {
            json_t *opts = json_pack("{s:i,s:s,s:I,s:O}", "nodes", NODES, "profile", profile,
                                     "chunk_size", (json_int_t)chunk, "repair", repair);
            rc = gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg));
            json_decref(opts);
        } else {
            rc = open_tcp(dir, profile, chunk, repair, svc, &o, msg, sizeof(msg));
        }
        json_decref(repair);
        double fl = rc ? -1
                       : floor_once(t == 0 ? "transport=mem" : "transport=tcp,listen=127.0.0.1:0",
                                    chunk, quick ? 5 : 20);
        for (int s = 0; s < 3 && rc == 0; s++) {
            double secs = 0;
            int chunks = 0;
            rc = run_scheme(o, schemes[s], nobj, osize, body, &secs, &chunks, msg, sizeof(msg));
            if (rc)
                break;
            double per = chunks ? secs / chunks : 0;
            json_array_append_new(rows,
                                  json_pack("{s:s,s:s,s:i,s:f,s:f,s:f,s:f}", "transport",
                                            transports[t], "scheme", schemes[s], "chunks", chunks,
                                            "total_s", secs, "per_chunk_ms", per * 1e3, "floor_ms",
                                            fl * 1e3, "x_floor", fl > 0 ? per / fl : 0));
            if (!json)
                printf("%-9s %-7s %7d %9.3f %11.2f %11.3f %8.2f\n", transports[t], schemes[s],
                       chunks, secs, per * 1e3, fl * 1e3, fl > 0 ? per / fl : 0);
            fflush(stdout);
        }
        gw_objects_close(o);
        for (int i = 0; i < NODES; i++)
            node_service_stop(svc[i]);
        bench_rmtree(dir);
    }
    if (json && rc == 0)
        bench_json_print(json_pack("{s:s,s:s,s:I,s:i,s:O}", "bench", "repair", "profile", profile,
                                   "chunk_bytes", (json_int_t)chunk, "objects", nobj, "results",
                                   rows));
    json_decref(rows);
    free(body);
    if (rc) {
        fprintf(stderr, "inec bench repair: %s (%s)\n", msg[0] ? msg : "failed", strerror(-rc));
        return 1;
    }
    return 0;
}
