/*
 * `inec admin`: what the control API does, from the command line — nodes
 * (the table), pools (list, show, create), S3 key pairs (create, list,
 * revoke) and object layouts here; node states and repair in cmd_repair.c.
 * Every command takes the options of cli/control.h (--json prints the API's
 * answer as it is).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/control.h"
#include "cli/dispatch.h"

static const char usage[] =
    "usage: inec admin nodes [list]\n"
    "       inec admin node drain|remove|restore ID\n"
    "       inec admin pools [list]\n"
    "       inec admin pools show NAME\n"
    "       inec admin pools create NAME --profile PROFILE [--chunk-size SIZE]\n"
    "                                     [--write-quorum N]\n"
    "       inec admin keys [list]\n"
    "       inec admin keys create NAME\n"
    "       inec admin keys revoke ACCESS_KEY\n"
    "       inec admin repair [status|pause|resume|throttle MBPS|scan|queue]\n"
    "       inec admin object BUCKET KEY\n"
    "options of every command:\n" CTL_OPTIONS_HELP "\n"
    "drain moves a node's chunks elsewhere (it may then leave); remove takes it out for\n"
    "good (every chunk rebuilt elsewhere); restore brings it back up. A key pair is\n"
    "printed once, when it is created. PROFILE: rs:k=K,m=M, lrc:k=K,l=L,r=R, ppr:...,\n"
    "ecpipe:..., tri:...; SIZE with K/M/G suffixes.\n";

static int bad(const char *what)
{
    fprintf(stderr, "inec admin: %s\n%s", what, usage);
    return 2;
}

/* Prints the answer as JSON (--json) or through `human`. */
static int show(struct ctl *c, int rc, json_t *j, void (*human)(const json_t *))
{
    if (rc == 0)
        (c->json || !human ? ctl_print_json : human)(j);
    json_decref(j);
    return rc;
}

/* One call, its answer shown. */
static int call(struct ctl *c, const char *method, const char *path, const json_t *body,
                void (*human)(const json_t *))
{
    json_t *j = NULL;
    int rc = ctl_call(c, method, path, body, &j, NULL);
    return show(c, rc, j, human);
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* --- nodes ----------------------------------------------------------------- */

static void nodes_table(const json_t *cluster)
{
    const json_t *nodes = json_object_get(cluster, "nodes");
    printf("%-10s %-5s %-9s %-12s %-22s %10s %10s %8s\n", "ID", "UP", "STATE", "DOMAIN", "ADDRESS",
           "USED", "CAPACITY", "CHUNKS");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        const json_t *n = json_array_get(nodes, i);
        char used[32] = "-", cap[32] = "-", chunks[32] = "-";
        bool up = json_is_true(json_object_get(n, "up"));
        if (up) {
            ctl_bytes((uint64_t)ctl_num(n, "used_bytes"), used, sizeof(used));
            if (ctl_num(n, "capacity_bytes") > 0)
                ctl_bytes((uint64_t)ctl_num(n, "capacity_bytes"), cap, sizeof(cap));
            snprintf(chunks, sizeof(chunks), "%.0f", ctl_num(n, "chunks"));
        }
        printf("%-10s %-5s %-9s %-12s %-22s %10s %10s %8s\n", str(n, "id"), up ? "up" : "down",
               str(n, "state"), str(n, "domain"), str(n, "addr"), used, cap, chunks);
    }
}

static int nodes(struct ctl *c, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "list") == 0)
        return call(c, "GET", "/admin/v1/cluster", NULL, nodes_table);
    return bad("nodes lists the nodes; `inec admin node drain|remove|restore ID` changes one");
}

/* --- pools ----------------------------------------------------------------- */

static void pools_table(const json_t *pools)
{
    printf("%-16s %-24s %-7s %4s %4s %10s %6s %9s %10s\n", "NAME", "PROFILE", "SCHEME", "K", "N",
           "CHUNK", "QUORUM", "OBJECTS", "DATA");
    for (size_t i = 0; i < json_array_size(pools); i++) {
        const json_t *p = json_array_get(pools, i);
        char chunk[32], objects[32] = "-", data[32] = "-";
        ctl_bytes((uint64_t)ctl_num(p, "chunk_size"), chunk, sizeof(chunk));
        if (json_is_number(json_object_get(p, "objects"))) {
            snprintf(objects, sizeof(objects), "%.0f", ctl_num(p, "objects"));
            ctl_bytes((uint64_t)ctl_num(p, "logical_bytes"), data, sizeof(data));
        }
        printf("%-16s %-24s %-7s %4.0f %4.0f %10s %6.0f %9s %10s\n", str(p, "name"),
               str(p, "profile"), str(p, "scheme"), ctl_num(p, "k"), ctl_num(p, "n"), chunk,
               ctl_num(p, "write_quorum"), objects, data);
    }
}

static void pool_detail(const json_t *p)
{
    char chunk[32];
    ctl_bytes((uint64_t)ctl_num(p, "chunk_size"), chunk, sizeof(chunk));
    printf("pool %s\n  profile: %s (scheme %s, k=%.0f of n=%.0f chunks)\n  chunk size: %s\n"
           "  write quorum: %.0f chunks of a stripe durable before a PUT is acknowledged\n"
           "  nodes:",
           str(p, "name"), str(p, "profile"), str(p, "scheme"), ctl_num(p, "k"), ctl_num(p, "n"),
           chunk, ctl_num(p, "write_quorum"));
    const json_t *nodes = json_object_get(p, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++)
        printf(" %s", json_string_value(json_array_get(nodes, i)));
    printf("\n");
    if (!json_is_number(json_object_get(p, "objects"))) {
        printf("  usage: no complete scan yet\n");
        return;
    }
    char data[32], stored[32];
    ctl_bytes((uint64_t)ctl_num(p, "logical_bytes"), data, sizeof(data));
    ctl_bytes((uint64_t)ctl_num(p, "stored_bytes"), stored, sizeof(stored));
    printf("  usage (as of the last scan, %.0f s ago): %.0f objects, %s of data, %s stored "
           "(parity included), %.0f degraded stripes\n",
           ctl_num(p, "usage_age_s"), ctl_num(p, "objects"), data, stored,
           ctl_num(p, "degraded_stripes"));
}

static int pools(struct ctl *c, int argc, char **argv)
{
    json_t *j = NULL;
    if (argc < 2 || strcmp(argv[1], "list") == 0)
        return call(c, "GET", "/admin/v1/pools", NULL, pools_table);
    if (strcmp(argv[1], "show") == 0) {
        if (argc != 3)
            return bad("which pool?");
        int rc = ctl_call(c, "GET", "/admin/v1/pools", NULL, &j, NULL);
        if (rc)
            return rc;
        for (size_t i = 0; i < json_array_size(j); i++) {
            json_t *p = json_array_get(j, i);
            if (strcmp(str(p, "name"), argv[2]) == 0) {
                json_incref(p);
                json_decref(j);
                return show(c, 0, p, pool_detail);
            }
        }
        json_decref(j);
        fprintf(stderr, "inec admin: no pool named '%s'\n", argv[2]);
        return 1;
    }
    if (strcmp(argv[1], "create") != 0)
        return bad("pools: list, show or create");
    if (argc < 3 || argv[2][0] == '-')
        return bad("pools create: which name?");
    json_t *spec = json_pack("{s:s}", "name", argv[2]);
    for (int i = 3; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (strcmp(argv[i], "--profile") == 0 && v) {
            json_object_set_new(spec, "profile", json_string(v));
        } else if (strcmp(argv[i], "--chunk-size") == 0 && v &&
                   bench_parse_size(v, 1ull << 30, &n) == 0) {
            json_object_set_new(spec, "chunk_size", json_integer((json_int_t)n));
        } else if (strcmp(argv[i], "--write-quorum") == 0 && v && atoi(v) > 0) {
            json_object_set_new(spec, "write_quorum", json_integer(atoi(v)));
        } else {
            json_decref(spec);
            return bad("pools create: unknown option, or a bad value");
        }
        i++;
    }
    if (!json_object_get(spec, "profile")) {
        json_decref(spec);
        return bad("pools create: --profile is required");
    }
    int rc = ctl_call(c, "POST", "/admin/v1/pools", spec, &j, NULL);
    json_decref(spec);
    return show(c, rc, j, pool_detail);
}

/* --- keys ------------------------------------------------------------------ */

static void keys_table(const json_t *keys)
{
    printf("%-22s %-22s %s\n", "ACCESS KEY", "CREATED", "NAME");
    for (size_t i = 0; i < json_array_size(keys); i++) {
        const json_t *k = json_array_get(keys, i);
        printf("%-22s %-22s %s\n", str(k, "access_key"),
               json_is_true(json_object_get(k, "primary")) ? "-" : str(k, "created"),
               str(k, "name"));
    }
}

static void key_created(const json_t *k)
{
    printf("created key pair '%s' (the secret is shown only now):\n"
           "  export AWS_ACCESS_KEY_ID=%s\n"
           "  export AWS_SECRET_ACCESS_KEY=%s\n",
           str(k, "name"), str(k, "access_key"), str(k, "secret_key"));
}

static void key_revoked(const json_t *j)
{
    (void)j;
    printf("revoked\n");
}

static int keys(struct ctl *c, int argc, char **argv)
{
    json_t *j = NULL;
    if (argc < 2 || strcmp(argv[1], "list") == 0)
        return call(c, "GET", "/admin/v1/keys", NULL, keys_table);
    if (strcmp(argv[1], "create") == 0) {
        if (argc != 3)
            return bad("keys create: give the key pair a name");
        json_t *spec = json_pack("{s:s}", "name", argv[2]);
        int rc = ctl_call(c, "POST", "/admin/v1/keys", spec, &j, NULL);
        json_decref(spec);
        return show(c, rc, j, key_created);
    }
    if (strcmp(argv[1], "revoke") == 0) {
        if (argc != 3)
            return bad("keys revoke: which access key?");
        char *k = ctl_escape(c, argv[2]), path[512];
        snprintf(path, sizeof(path), "/admin/v1/keys/%s", k);
        free(k);
        return call(c, "DELETE", path, NULL, key_revoked);
    }
    return bad("keys: list, create or revoke");
}

/* --- objects --------------------------------------------------------------- */

static void object_layout(const json_t *o)
{
    char size[32];
    ctl_bytes((uint64_t)ctl_num(o, "size"), size, sizeof(size));
    printf("%s/%s: %s, ETag %s, pool %s, version %.0f\n", str(o, "bucket"), str(o, "key"), size,
           str(o, "etag"), str(o, "pool"), ctl_num(o, "version"));
    const json_t *stripes = json_object_get(o, "stripes");
    for (size_t i = 0; i < json_array_size(stripes); i++) {
        const json_t *s = json_array_get(stripes, i), *chunks = json_object_get(s, "chunks");
        printf("  stripe %.0f:", ctl_num(s, "index"));
        for (size_t k = 0; k < json_array_size(chunks); k++) {
            const json_t *ch = json_array_get(chunks, k);
            const char *st = str(ch, "state");
            printf(" %.0f@%s%s%s", ctl_num(ch, "index"), str(ch, "node"),
                   strcmp(st, "ok") ? ":" : "", strcmp(st, "ok") ? st : "");
        }
        printf("\n");
    }
    const json_t *in = json_object_get(o, "inline"), *homes = json_object_get(in, "homes");
    if (in) /* shard@home, as for chunks; a home without a good shard says why */
        printf("  inline RS(%.0f,%.0f) in its records:", ctl_num(in, "k"), ctl_num(in, "m"));
    for (size_t i = 0; i < json_array_size(homes); i++) {
        const json_t *h = json_array_get(homes, i);
        const char *st = str(h, "state");
        if (json_object_get(h, "shard"))
            printf(" %.0f@%s", ctl_num(h, "shard"), str(h, "node"));
        else
            printf(" -@%s", str(h, "node"));
        printf("%s%s", strcmp(st, "ok") ? ":" : "", strcmp(st, "ok") ? st : "");
    }
    if (in)
        printf("\n");
}

static int object(struct ctl *c, int argc, char **argv)
{
    if (argc != 3)
        return bad("object BUCKET KEY");
    char *b = ctl_escape(c, argv[1]), *k = ctl_escape(c, argv[2]);
    size_t n = strlen(b) + strlen(k) + 32;
    char *path = malloc(n);
    snprintf(path, n, "/admin/v1/objects/%s/%s", b, k);
    free(b);
    free(k);
    json_t *j = NULL;
    int rc = ctl_call(c, "GET", path, NULL, &j, NULL);
    free(path);
    return show(c, rc, j, object_layout);
}

/* Runs one of the groups above with the control API open. */
static int with_ctl(int (*run)(struct ctl *c, int argc, char **argv), const char *prog, int argc,
                    char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        }
    struct ctl c;
    int rc = ctl_open(&c, prog, &argc, argv);
    if (rc)
        return rc;
    rc = run(&c, argc, argv);
    ctl_close(&c);
    return rc;
}

static int admin_nodes(int argc, char **argv)
{
    return with_ctl(nodes, "inec admin nodes", argc, argv);
}

static int admin_pools(int argc, char **argv)
{
    return with_ctl(pools, "inec admin pools", argc, argv);
}

static int admin_keys(int argc, char **argv)
{
    return with_ctl(keys, "inec admin keys", argc, argv);
}

static int admin_object(int argc, char **argv)
{
    return with_ctl(object, "inec admin object", argc, argv);
}

static const struct cli_command admin_commands[] = {
    {"nodes", admin_nodes, "the nodes: up/down, state, domain, used/capacity, chunks"},
    {"node", cmd_admin_node, "remove, drain or restore a node"},
    {"pools", admin_pools, "list, show or create pools"},
    {"keys", admin_keys, "create, list or revoke S3 key pairs"},
    {"repair", cmd_admin_repair, "repair progress, pause/resume, throttle, scan, queue"},
    {"object", admin_object, "an object's stripes and where each chunk is"},
    {NULL, NULL, NULL},
};

int cmd_admin(int argc, char **argv)
{
    /* Options may come before the command (`inec admin --json keys`): the
     * first word that names a command moves to the front. */
    for (int i = 1; i < argc && argv[1][0] == '-'; i++) {
        bool named = false;
        for (const struct cli_command *c = admin_commands; c->name && !named; c++)
            named = strcmp(argv[i], c->name) == 0;
        if (!named)
            continue;
        char *cmd = argv[i];
        memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof(argv[0]));
        argv[1] = cmd;
        break;
    }
    return cli_dispatch("inec admin", "Operator actions through the control API.", admin_commands,
                        NULL, argc, argv);
}
