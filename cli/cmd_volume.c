/*
 * `inec volume`: block volumes (volume/volume.h) through the control API
 * (/admin/v1/volumes): create, list, info, resize (grow), delete. Every
 * command takes the options of cli/control.h (--json prints the API's answer
 * as it is). The volumes are served over NBD by the gateway.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/control.h"

#define SIZE_MAX_BYTES (1ull << 50) /* GW_VOLUME_SIZE_MAX */

static const char usage[] =
    "usage: inec volume create NAME --size SIZE [--pool POOL] [--no-secret]\n"
    "                          [--update delta|rmw] [--chains coherent|incoherent]\n"
    "       inec volume list\n"
    "       inec volume info NAME\n"
    "       inec volume resize NAME --size SIZE\n"
    "       inec volume delete NAME\n"
    "options of every command:\n" CTL_OPTIONS_HELP "\n"
    "SIZE in bytes, or with K/M/G/T suffixes (powers of 1024), a multiple of 512.\n"
    "A volume is attached over NBD with the export name `info` prints: NAME/SECRET\n"
    "(NAME alone for a volume created with --no-secret), e.g.\n"
    "  qemu-img info nbd://127.0.0.1:10809/NAME/SECRET\n"
    "--update: how a write inside one data chunk reaches the parities: rmw (the\n"
    "default: the stripe is read, modified and written whole) or delta (the data node\n"
    "sends the change to the parity nodes; fewer bytes moved, but slower today: its\n"
    "graph is set up for every write). --chains: the update graph's primitives, the\n"
    "INEC paper's coherent ones (the default) or its incoherent baseline (for\n"
    "benchmarks). Volumes only grow; delete frees every stripe.\n";

static int bad(const char *what)
{
    fprintf(stderr, "inec volume: %s\n%s", what, usage);
    return 2;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void list_table(const json_t *vols)
{
    printf("%-32s %12s %-16s %10s %-9s\n", "NAME", "SIZE", "POOL", "STRIPE", "SECRET");
    for (size_t i = 0; i < json_array_size(vols); i++) {
        const json_t *v = json_array_get(vols, i);
        char size[32], stripe[32];
        ctl_bytes((uint64_t)ctl_num(v, "size"), size, sizeof(size));
        ctl_bytes((uint64_t)ctl_num(v, "stripe_bytes"), stripe, sizeof(stripe));
        printf("%-32s %12s %-16s %10s %-9s\n", str(v, "name"), size, str(v, "pool"), stripe,
               json_is_true(json_object_get(v, "protected")) ? "yes" : "no");
    }
}

static void detail(const json_t *v)
{
    char size[32], stripe[32];
    ctl_bytes((uint64_t)ctl_num(v, "size"), size, sizeof(size));
    ctl_bytes((uint64_t)ctl_num(v, "stripe_bytes"), stripe, sizeof(stripe));
    printf("volume %s\n  size: %s (%.0f bytes)\n  pool: %s\n  stripe: %s\n  partial writes: %s "
           "(%s)\n  NBD export: %s\n",
           str(v, "name"), size, ctl_num(v, "size"), str(v, "pool"), stripe, str(v, "update"),
           str(v, "chains"), str(v, "export"));
}

/* --size SIZE (and, for create, --pool, --no-secret) after the name. */
static int options(int argc, char **argv, bool create, json_t *body)
{
    for (int i = 3; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (strcmp(argv[i], "--size") == 0 && v) {
            if (bench_parse_size(v, SIZE_MAX_BYTES, &n) || n == 0 || n % 512)
                return bad("--size wants a positive multiple of 512 bytes, at most 1P");
            json_object_set_new(body, "size", json_integer((json_int_t)n));
            i++;
        } else if (create && strcmp(argv[i], "--pool") == 0 && v) {
            json_object_set_new(body, "pool", json_string(v));
            i++;
        } else if (create && strcmp(argv[i], "--update") == 0 && v) {
            json_object_set_new(body, "update", json_string(v));
            i++;
        } else if (create && strcmp(argv[i], "--chains") == 0 && v) {
            json_object_set_new(body, "chains", json_string(v));
            i++;
        } else if (create && strcmp(argv[i], "--no-secret") == 0) {
            json_object_set_new(body, "secret", json_false());
        } else {
            char m[128];
            snprintf(m, sizeof(m), "unknown option or missing value '%s'", argv[i]);
            return bad(m);
        }
    }
    return json_object_get(body, "size") ? 0 : bad("--size is required");
}

static int run(struct ctl *c, int argc, char **argv)
{
    const char *cmd = argv[1];
    json_t *j = NULL;
    int rc;
    if (strcmp(cmd, "list") == 0) {
        if (argc != 2)
            return bad("list takes no arguments");
        rc = ctl_call(c, "GET", "/admin/v1/volumes", NULL, &j, NULL);
        if (rc == 0)
            (c->json ? ctl_print_json : list_table)(j);
        json_decref(j);
        return rc;
    }
    if (argc < 3)
        return bad("a volume name is required");
    char *name = ctl_escape(c, argv[2]);
    char path[512];
    snprintf(path, sizeof(path), "/admin/v1/volumes/%s", name ? name : "");
    free(name);
    if (strcmp(cmd, "create") == 0 || strcmp(cmd, "resize") == 0) {
        bool create = cmd[0] == 'c';
        json_t *body = create ? json_pack("{s:s}", "name", argv[2]) : json_object();
        if ((rc = options(argc, argv, create, body)) == 0)
            rc = create ? ctl_call(c, "POST", "/admin/v1/volumes", body, &j, NULL)
                        : ctl_call(c, "POST", strcat(path, "/resize"), body, &j, NULL);
        json_decref(body);
    } else if (strcmp(cmd, "info") == 0 || strcmp(cmd, "delete") == 0) {
        if (argc != 3)
            return bad("info and delete take only the volume name");
        rc = ctl_call(c, cmd[0] == 'i' ? "GET" : "DELETE", path, NULL, &j, NULL);
    } else {
        return bad("the commands are create, list, info, resize and delete");
    }
    if (rc == 0 && c->json)
        ctl_print_json(j);
    else if (rc == 0 && cmd[0] == 'd')
        printf("volume %s deleted\n", argv[2]);
    else if (rc == 0)
        detail(j);
    json_decref(j);
    return rc;
}

int cmd_volume(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const char *const cmds[] = {"create", "list", "info", "resize", "delete"};
    bool known = false;
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        known |= strcmp(argv[1], cmds[i]) == 0;
    if (!known)
        return bad("the commands are create, list, info, resize and delete");
    struct ctl c;
    int rc = ctl_open(&c, "inec volume", &argc, argv);
    if (rc == 0)
        rc = run(&c, argc, argv);
    ctl_close(&c);
    return rc;
}
