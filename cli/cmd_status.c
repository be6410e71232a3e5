/*
 * `inec status`: the cluster at a glance, from the control API's
 * GET /admin/v1/status — the health verdict with one line per reason, the
 * nodes, the pools and the gateway's recent rates. `-w` redraws it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/control.h"

static void print_rates(const json_t *r)
{
    if (!json_is_object(r))
        return;
    char in[32], out[32];
    ctl_bytes((uint64_t)ctl_num(r, "received_bytes_per_s"), in, sizeof(in));
    ctl_bytes((uint64_t)ctl_num(r, "sent_bytes_per_s"), out, sizeof(out));
    printf("\ngateway (last %.0f s):\n"
           "  %.1f requests/s, %.1f errors/s, received %s/s, sent %s/s\n"
           "  latency mean %.1f ms, p50 <= %.1f ms, p99 <= %.1f ms\n",
           ctl_num(r, "window_s"), ctl_num(r, "requests_per_s"), ctl_num(r, "errors_per_s"), in,
           out, ctl_num(r, "latency_mean_s") * 1e3, ctl_num(r, "latency_p50_s") * 1e3,
           ctl_num(r, "latency_p99_s") * 1e3);
}

static void print_nodes(const json_t *nodes)
{
    size_t n = json_array_size(nodes), up = 0;
    for (size_t i = 0; i < n; i++)
        up += json_is_true(json_object_get(json_array_get(nodes, i), "up"));
    printf("\nnodes: %zu up, %zu down\n", up, n - up);
    printf("  %-10s %-6s %-9s %-12s %10s %10s %6s %9s %9s\n", "ID", "UP", "STATE", "DOMAIN", "USED",
           "CAPACITY", "USE%", "CHUNKS", "CLOCK");
    for (size_t i = 0; i < n; i++) {
        const json_t *node = json_array_get(nodes, i);
        const char *id = json_string_value(json_object_get(node, "id"));
        const char *state = json_string_value(json_object_get(node, "state"));
        const char *domain = json_string_value(json_object_get(node, "domain"));
        bool isup = json_is_true(json_object_get(node, "up"));
        if (!isup) {
            const char *err = json_string_value(json_object_get(node, "error"));
            printf("  %-10s %-6s %-9s %-12s %s\n", id ? id : "?", "down", state ? state : "",
                   domain ? domain : "", err ? err : "");
            continue;
        }
        double used = ctl_num(node, "used_bytes"), cap = ctl_num(node, "capacity_bytes");
        char u[32], c[32], pct[16] = "-";
        ctl_bytes((uint64_t)used, u, sizeof(u));
        if (cap > 0) {
            ctl_bytes((uint64_t)cap, c, sizeof(c));
            snprintf(pct, sizeof(pct), "%.1f", 100 * used / cap);
        } else {
            strcpy(c, "-");
        }
        /* The node's clock minus the gateway's (an older node does not say). */
        char clock[32] = "-";
        double off = ctl_num(node, "clock_offset_s");
        if (json_is_number(json_object_get(node, "clock_offset_s")))
            snprintf(clock, sizeof(clock), "%+.3fs", fabs(off) < 0.0005 ? 0.0 : off);
        printf("  %-10s %-6s %-9s %-12s %10s %10s %6s %9.0f %9s\n", id ? id : "?", "up",
               state ? state : "", domain ? domain : "", u, c, pct, ctl_num(node, "chunks"), clock);
    }
}

static void print_pools(const json_t *pools)
{
    /* Objects and bytes come from the repair scanner's last complete walk. */
    double age = -1;
    for (size_t i = 0; i < json_array_size(pools); i++)
        if (json_is_number(json_object_get(json_array_get(pools, i), "usage_age_s")))
            age = ctl_num(json_array_get(pools, i), "usage_age_s");
    if (age >= 0)
        printf("\npools (objects and bytes as of the last scan, %.0f s ago):\n", age);
    else
        printf("\npools (objects and bytes: no complete scan yet):\n");
    printf("  %-16s %-20s %-6s %8s %7s %10s %10s %10s %9s\n", "NAME", "PROFILE", "SCHEME", "CHUNK",
           "QUORUM", "OBJECTS", "DATA", "STORED", "DEGRADED");
    for (size_t i = 0; i < json_array_size(pools); i++) {
        const json_t *p = json_array_get(pools, i);
        char chunk[32], quorum[32], objects[32] = "-", data[32] = "-", stored[32] = "-",
                                    degraded[32] = "-";
        ctl_bytes((uint64_t)ctl_num(p, "chunk_size"), chunk, sizeof(chunk));
        snprintf(quorum, sizeof(quorum), "%.0f/%.0f", ctl_num(p, "write_quorum"), ctl_num(p, "n"));
        if (json_is_number(json_object_get(p, "objects"))) {
            snprintf(objects, sizeof(objects), "%.0f", ctl_num(p, "objects"));
            ctl_bytes((uint64_t)ctl_num(p, "logical_bytes"), data, sizeof(data));
            ctl_bytes((uint64_t)ctl_num(p, "stored_bytes"), stored, sizeof(stored));
            snprintf(degraded, sizeof(degraded), "%.0f", ctl_num(p, "degraded_stripes"));
        }
        printf("  %-16s %-20s %-6s %8s %7s %10s %10s %10s %9s\n",
               json_string_value(json_object_get(p, "name")),
               json_string_value(json_object_get(p, "profile")),
               json_string_value(json_object_get(p, "scheme")), chunk, quorum, objects, data,
               stored, degraded);
    }
}

static void print_status(const json_t *st)
{
    const json_t *health = json_object_get(st, "health");
    const json_t *cluster = json_object_get(st, "cluster");
    const char *verdict = json_string_value(json_object_get(health, "status"));
    printf("health: %s\n", verdict ? verdict : "unknown");
    const json_t *checks = json_object_get(health, "checks");
    for (size_t i = 0; i < json_array_size(checks); i++) {
        const json_t *c = json_array_get(checks, i);
        printf("  [%s] %s: %s\n", json_string_value(json_object_get(c, "severity")),
               json_string_value(json_object_get(c, "code")),
               json_string_value(json_object_get(c, "message")));
    }
    printf("\ncluster: %s, map epoch %.0f, repair queue %.0f chunks; since the gateway started: "
           "%.0f degraded reads, %.0f corrupt and %.0f missing chunks, %.0f failed reads\n",
           json_string_value(json_object_get(cluster, "mode")), ctl_num(cluster, "epoch"),
           ctl_num(cluster, "repair_queue"), ctl_num(cluster, "degraded_reads"),
           ctl_num(cluster, "corrupt_chunks"), ctl_num(cluster, "missing_chunks"),
           ctl_num(cluster, "failed_reads"));
    print_nodes(json_object_get(cluster, "nodes"));
    print_pools(json_object_get(cluster, "pools"));
    print_rates(json_object_get(st, "rates"));
}

int cmd_status(int argc, char **argv)
{
    struct ctl c;
    double watch = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: inec status [-w [SECONDS]] [--json] [--endpoint URL] [--token TOKEN]\n"
                   "                   [--data DIR]\n\n"
                   "The cluster at a glance: HEALTH_OK, HEALTH_WARN or HEALTH_ERR with one line\n"
                   "per reason, then the nodes, the pools and the gateway's recent rates.\n"
                   "  -w, --watch [S] redraw every S seconds (2) until "
                   "interrupted\n" CTL_OPTIONS_HELP);
            return 0;
        }
    int rc = ctl_open(&c, "inec status", &argc, argv);
    if (rc)
        return rc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-w") == 0 || strcmp(argv[i], "--watch") == 0) {
            watch = 2;
            char *end;
            double s = i + 1 < argc ? strtod(argv[i + 1], &end) : 0;
            if (i + 1 < argc && !*end && s >= 0.5 && s <= 3600) {
                watch = s;
                i++;
            }
            continue;
        }
        fprintf(stderr, "inec status: unknown argument '%s' (see --help)\n", argv[i]);
        ctl_close(&c);
        return 2;
    }
    bool tty = isatty(STDOUT_FILENO);
    for (;;) {
        json_t *st = NULL;
        rc = ctl_call(&c, "GET", "/admin/v1/status", NULL, &st, NULL);
        if (rc && !watch)
            break;
        if (watch && tty)
            fputs("\033[H\033[2J", stdout);
        if (st && c.json) {
            ctl_print_json(st);
        } else if (st) {
            if (watch) {
                time_t now = time(NULL);
                char ts[64];
                strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", localtime(&now));
                printf("%s (every %.1f s, %s)\n\n", ts, watch, c.endpoint);
            }
            print_status(st);
        }
        json_decref(st);
        fflush(stdout);
        if (!watch)
            break;
        struct timespec ts = {(time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9)};
        nanosleep(&ts, NULL);
    }
    ctl_close(&c);
    return rc;
}
