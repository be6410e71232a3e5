/*
 * `inec admin repair` and `inec admin node`: the repair service of the
 * control API (GET|POST /admin/v1/repair, POST /admin/v1/nodes/{id}/ACTION)
 * from the command line: status with a progress bar (`-w` redraws it until
 * the run ends), pause, resume, throttle, scan, the queue, and node states.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/control.h"

static void duration(double s, char *buf, size_t len)
{
    if (s < 0)
        snprintf(buf, len, "?");
    else if (s < 60)
        snprintf(buf, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void print_repair(const json_t *st)
{
    const json_t *p = json_object_get(st, "progress"), *q = json_object_get(st, "queue");
    const char *state = json_string_value(json_object_get(st, "state"));
    double thr = ctl_num(st, "throttle_mbps");
    double done = ctl_num(p, "bytes_done"), total = ctl_num(p, "bytes_total");
    double frac = total > 0 ? done / total : state && strcmp(state, "idle") == 0 ? 1 : 0;
    char bar[41], d[32], t[32], rate[32], eta[32], qb[32];
    int fill = (int)(frac * 40 + 0.5);
    for (int i = 0; i < 40; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[40] = '\0';
    ctl_bytes((uint64_t)done, d, sizeof(d));
    ctl_bytes((uint64_t)total, t, sizeof(t));
    ctl_bytes((uint64_t)ctl_num(p, "rate_bytes_per_s"), rate, sizeof(rate));
    ctl_bytes((uint64_t)ctl_num(q, "bytes"), qb, sizeof(qb));
    duration(ctl_num(p, "eta_s"), eta, sizeof(eta));
    char throttle[32] = "none";
    if (thr > 0)
        snprintf(throttle, sizeof(throttle), "%.3g MB/s", thr);
    printf("repair: %s, throttle %s\n", state ? state : "?", throttle);
    printf("[%s] %3.0f%%  %.0f/%.0f stripes  %s/%s  %s/s  ETA %s\n", bar, frac * 100,
           ctl_num(p, "stripes_done"), ctl_num(p, "stripes_total"), d, t, rate, eta);
    printf("queue: %.0f stripes (%s), %.0f waiting for a node, oldest %.0f s\n",
           ctl_num(q, "stripes"), qb, ctl_num(q, "waiting"), ctl_num(q, "oldest_age_s"));
    const json_t *by = json_object_get(json_object_get(st, "scan"), "degraded_by_lost");
    if (json_object_size(by)) {
        printf("degraded at the last scan:");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)by, k, v)
        {
            printf(" %" JSON_INTEGER_FORMAT " stripes lacking %s", json_integer_value(v), k);
        }
        printf("\n");
    }
    const json_t *nodes = json_object_get(st, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        const json_t *n = json_array_get(nodes, i);
        const char *s = json_string_value(json_object_get(n, "state"));
        bool moving = s && strcmp(s, "out") == 0 && json_is_true(json_object_get(n, "meta_member"));
        if ((s && strcmp(s, "up")) || json_is_true(json_object_get(n, "lost")))
            printf("node %s: %s%s%s\n", json_string_value(json_object_get(n, "id")), s ? s : "?",
                   json_is_true(json_object_get(n, "lost")) ? ", its chunks are rebuilt" : "",
                   moving ? ", its metadata is being moved" : "");
    }
}

static int usage_repair(FILE *f)
{
    fprintf(f, "usage: inec admin repair [status|pause|resume|throttle MBPS|scan|queue] "
               "[options]\n\n"
               "The repair service: progress of the current run (stripes and bytes done of\n"
               "the total, rate, ETA), the queue of degraded stripes, node states.\n"
               "  status          (default) progress bar; -w SEC redraws until the run ends\n"
               "  pause, resume   stop and go on (kept on the nodes, every gateway obeys)\n"
               "  throttle MBPS   pace repair to MBPS megabytes per second, 0 = no limit\n"
               "  scan            walk every object against the nodes' chunks now\n"
               "  queue           the degraded chunks waiting, one per line\n\n"
               "options:\n" CTL_OPTIONS_HELP "  -w SEC          redraw every SEC seconds\n");
    return f == stdout ? 0 : 2;
}

int cmd_admin_repair(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_repair(stdout);
    struct ctl c;
    int rc = ctl_open(&c, "inec admin repair", &argc, argv);
    if (rc)
        return rc;
    double watch = 0;
    int nargs = 0;
    char *args[3] = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
            watch = atof(argv[++i]);
            if (watch <= 0) {
                ctl_close(&c);
                return usage_repair(stderr);
            }
        } else if (nargs < 3) {
            args[nargs++] = argv[i];
        } else {
            ctl_close(&c);
            return usage_repair(stderr);
        }
    }
    const char *what = nargs ? args[0] : "status";
    json_t *body = NULL, *out = NULL;
    const char *path = "/admin/v1/repair";
    if (strcmp(what, "pause") == 0 && nargs == 1) {
        body = json_pack("{s:b}", "paused", 1);
    } else if (strcmp(what, "resume") == 0 && nargs == 1) {
        body = json_pack("{s:b}", "paused", 0);
    } else if (strcmp(what, "scan") == 0 && nargs == 1) {
        body = json_pack("{s:b}", "scan", 1);
    } else if (strcmp(what, "throttle") == 0 && nargs == 2) {
        char *end;
        double v = strtod(args[1], &end);
        if (*end || end == args[1] || v < 0) {
            fprintf(stderr, "inec admin repair: throttle wants MB/s >= 0, not '%s'\n", args[1]);
            ctl_close(&c);
            return 2;
        }
        body = json_pack("{s:f}", "throttle_mbps", v);
    } else if (strcmp(what, "queue") == 0 && nargs == 1) {
        path = "/admin/v1/repair/queue";
    } else if (strcmp(what, "status") != 0 || nargs > 1) {
        ctl_close(&c);
        return usage_repair(stderr);
    }
    for (;;) {
        rc = ctl_call(&c, body ? "POST" : "GET", path, body, &out, NULL);
        if (rc)
            break;
        if (c.json) {
            ctl_print_json(out);
        } else if (strcmp(what, "queue") == 0) {
            for (size_t i = 0; i < json_array_size(out); i++) {
                const json_t *e = json_array_get(out, i);
                printf("%s/%s stripe %" JSON_INTEGER_FORMAT " chunk %" JSON_INTEGER_FORMAT
                       " on %s: %s\n",
                       json_string_value(json_object_get(e, "bucket")),
                       json_string_value(json_object_get(e, "key")),
                       json_integer_value(json_object_get(e, "stripe")),
                       json_integer_value(json_object_get(e, "chunk")),
                       json_string_value(json_object_get(e, "node")),
                       json_string_value(json_object_get(e, "reason")));
            }
        } else {
            print_repair(out);
        }
        const char *state = json_string_value(json_object_get(out, "state"));
        bool busy = state && strcmp(state, "idle") != 0;
        json_decref(out);
        out = NULL;
        json_decref(body);
        body = NULL; /* a change is made once; a watch then only reads */
        if (watch <= 0 || !busy || strcmp(what, "queue") == 0)
            break;
        fflush(stdout);
        usleep((useconds_t)(watch * 1e6));
        if (!c.json)
            printf("\n");
    }
    json_decref(body);
    ctl_close(&c);
    return rc;
}

static int usage_node(FILE *f)
{
    fprintf(f, "usage: inec admin node remove|drain|restore ID [options]\n\n"
               "  remove ID   the node is gone for good: every chunk it held is rebuilt\n"
               "              elsewhere and its metadata moves to the other nodes\n"
               "  drain ID    its chunks are copied to other nodes before it leaves\n"
               "  restore ID  back in: it takes new chunks again\n\n"
               "options:\n" CTL_OPTIONS_HELP);
    return f == stdout ? 0 : 2;
}

int cmd_admin_node(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_node(stdout);
    struct ctl c;
    int rc = ctl_open(&c, "inec admin node", &argc, argv);
    if (rc)
        return rc;
    if (argc != 3 ||
        (strcmp(argv[1], "remove") && strcmp(argv[1], "drain") && strcmp(argv[1], "restore"))) {
        ctl_close(&c);
        return usage_node(stderr);
    }
    char path[200];
    snprintf(path, sizeof(path), "/admin/v1/nodes/%s/%s", argv[2], argv[1]);
    json_t *body = json_object(), *out = NULL;
    rc = ctl_call(&c, "POST", path, body, &out, NULL);
    json_decref(body);
    if (rc == 0) {
        if (c.json)
            ctl_print_json(out);
        else
            printf("node %s: %s; `inec admin repair -w 2` follows the repair\n", argv[2],
                   strcmp(argv[1], "remove") == 0  ? "out, its chunks are rebuilt elsewhere"
                   : strcmp(argv[1], "drain") == 0 ? "draining, its chunks move"
                                                   : "in again");
    }
    json_decref(out);
    ctl_close(&c);
    return rc;
}
