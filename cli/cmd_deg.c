/*
 * `inec deg show|run|serve`: print a scheme's Dynamic EC Graph, run one on a
 * random stripe and check it against the codecs layer, serve vertices.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "deg/deg.h"
#include "inec/auth.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inec deg show  GRAPH [--format text|json|dot]\n"
            "       inec deg run   GRAPH [--size BYTES] [--incoherent] [--timeout MS]\n"
            "                            [--peers HOST:PORT,... [--gateway HOST:PORT]\n"
            "                             --secret FILE]\n"
            "       inec deg serve --listen HOST:PORT --secret FILE\n\n"
            "GRAPH: [--scheme rs|lrc|ppr|ecpipe|tri --k K --m M [--l L --r R] | --profile TEXT]\n"
            "       [--op encode|decode|update] [--lost I[,J...]] [--chunk I] [--slice BYTES]\n"
            "(default rs:k=6,m=3 encode; --lost implies decode; chunk i lives on node i;\n"
            " update: delta parity for a write of data chunk --chunk (0), show only)\n\n"
            "show  prints the graph of one stripe. Render it with\n"
            "      inec deg show ... --format dot | dot -Tpng -o deg.png\n"
            "run   runs the graph on a random stripe, in this process (mem devices) or on the\n"
            "      participants given by --peers (node i = i-th address), and checks every\n"
            "      result against the codecs layer; exit 0 only if all are equal.\n"
            "serve waits for vertices sent by `inec deg run --peers`, runs each on a tcp device\n"
            "      and serves again; prints 'listening HOST:PORT' once ready.\n"
            "--secret: the cluster secret file (`inec secret init FILE`) runner and\n"
            "      participants prove to each other on every connection.\n");
}

struct args {
    const char *scheme, *profile, *op, *lost, *format, *peers, *gateway, *listen, *secret;
    int k, m, l, r, timeout_ms, chunk;
    long slice, size;
    bool incoherent;
};

static int parse_num(const char *s, long max, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(const char *cmd, int argc, char **argv, struct args *a)
{
    static const struct option opts[] = {
        {"scheme", required_argument, NULL, 's'},
        {"k", required_argument, NULL, 'k'},
        {"m", required_argument, NULL, 'm'},
        {"l", required_argument, NULL, 'l'},
        {"r", required_argument, NULL, 'r'},
        {"profile", required_argument, NULL, 'p'},
        {"op", required_argument, NULL, 'o'},
        {"lost", required_argument, NULL, 'x'},
        {"slice", required_argument, NULL, 'z'},
        {"format", required_argument, NULL, 'f'},
        {"size", required_argument, NULL, 'S'},
        {"incoherent", no_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},
        {"peers", required_argument, NULL, 'P'},
        {"gateway", required_argument, NULL, 'g'},
        {"listen", required_argument, NULL, 'L'},
        {"secret", required_argument, NULL, 'K'},
        {"chunk", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){
        .scheme = "rs", .format = "text", .k = 6, .m = 3, .l = 2, .r = 2, .size = 65536};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        long v = 0;
        int bad = 0;
        switch (c) {
        case 's':
            a->scheme = optarg;
            break;
        case 'k':
        case 'm':
        case 'l':
        case 'r':
            bad = parse_num(optarg, CODEC_MAX_CHUNKS, &v);
            *(c == 'k' ? &a->k : c == 'm' ? &a->m : c == 'l' ? &a->l : &a->r) = (int)v;
            break;
        case 'p':
            a->profile = optarg;
            break;
        case 'o':
            a->op = optarg;
            break;
        case 'x':
            a->lost = optarg;
            break;
        case 'c':
            bad = parse_num(optarg, CODEC_MAX_CHUNKS, &v);
            a->chunk = (int)v;
            break;
        case 'z':
            bad = parse_num(optarg, 1L << 30, &a->slice) || a->slice == 0;
            break;
        case 'f':
            a->format = optarg;
            break;
        case 'S':
            bad = parse_num(optarg, 1L << 30, &a->size) || a->size == 0;
            break;
        case 'i':
            a->incoherent = true;
            break;
        case 't':
            bad = parse_num(optarg, 3600000, &v) || v == 0;
            a->timeout_ms = (int)v;
            break;
        case 'P':
            a->peers = optarg;
            break;
        case 'g':
            a->gateway = optarg;
            break;
        case 'L':
            a->listen = optarg;
            break;
        case 'K':
            a->secret = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "inec deg %s: bad value '%s'\n", cmd, optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "inec deg %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return 2;
    }
    return -1;
}

/* The codec and graph the arguments describe; exit code on failure. */
static int build_graph(const char *cmd, const struct args *a, struct codec **codec,
                       struct deg_graph **g)
{
    char text[128], err[256];
    const char *profile = a->profile;
    if (!profile) {
        if (strcmp(a->scheme, "lrc") == 0)
            snprintf(text, sizeof(text), "lrc:k=%d,l=%d,r=%d", a->k, a->l, a->r);
        else
            snprintf(text, sizeof(text), "%s:k=%d,m=%d", a->scheme, a->k, a->m);
        profile = text;
    }
    struct codec_profile prof;
    if (codec_profile_parse(profile, &prof, err, sizeof(err)) ||
        codec_create(&prof, codec, err, sizeof(err))) {
        fprintf(stderr, "inec deg %s: %s\n", cmd, err);
        return 2;
    }
    struct deg_request req = {.op = a->lost ? DEG_OP_DECODE : DEG_OP_ENCODE,
                              .slice = (size_t)a->slice};
    deg_placement_default(&req.placement);
    if (a->op && strcmp(a->op, "encode") == 0)
        req.op = DEG_OP_ENCODE;
    else if (a->op && strcmp(a->op, "decode") == 0)
        req.op = DEG_OP_DECODE;
    else if (a->op && strcmp(a->op, "update") == 0 && strcmp(cmd, "show") == 0)
        req.op = DEG_OP_UPDATE;
    else if (a->op && strcmp(a->op, "update") == 0) {
        /* One process reads one chunks[] for every vertex: the reader's new
         * bytes and the holder's old ones cannot differ (see deg.h). */
        fprintf(stderr,
                "inec deg %s: --op update is shown, not run here (its test is "
                "tests/unit/test_deg.c)\n",
                cmd);
        return 2;
    } else if (a->op) {
        fprintf(stderr, "inec deg %s: --op is encode, decode or update\n", cmd);
        return 2;
    }
    req.updated = a->chunk;
    if (req.op == DEG_OP_DECODE) {
        const char *p = a->lost ? a->lost : "0";
        while (*p && req.nerased < CODEC_MAX_CHUNKS) {
            char *end;
            long e = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',')) {
                fprintf(stderr, "inec deg %s: --lost is a list of chunk indices, like 1,4\n", cmd);
                return 2;
            }
            req.erased[req.nerased++] = (int)e;
            p = *end ? end + 1 : end;
        }
    }
    if (deg_build(*codec, &req, g, err, sizeof(err))) {
        fprintf(stderr, "inec deg %s: %s\n", cmd, err);
        return 1;
    }
    return 0;
}

static int show(const struct args *a)
{
    struct codec *codec = NULL;
    struct deg_graph *g = NULL;
    int rc = build_graph("show", a, &codec, &g);
    codec_destroy(codec);
    if (rc)
        return rc;
    char *out = NULL;
    if (strcmp(a->format, "json") == 0)
        out = deg_to_json(g);
    else if (strcmp(a->format, "dot") == 0)
        out = deg_to_dot(g);
    else if (strcmp(a->format, "text") == 0)
        out = deg_to_text(g);
    else {
        fprintf(stderr, "inec deg show: --format is text, json or dot\n");
        deg_graph_destroy(g);
        return 2;
    }
    deg_graph_destroy(g);
    if (!out) {
        fprintf(stderr, "inec deg show: out of memory\n");
        return 1;
    }
    fputs(out, stdout);
    if (strcmp(a->format, "json") == 0)
        putchar('\n');
    free(out);
    return 0;
}

struct tally {
    uint8_t *const *ref;
    int results, bad;
};

static void check_result(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                         const uint8_t *data, size_t len)
{
    struct tally *t = arg;
    bool ok = !label.partial && memcmp(data, t->ref[label.chunk], len) == 0;
    t->results++;
    t->bad += !ok;
    printf("  %-8s chunk %-3d %s\n", g->vertices[v].name, label.chunk,
           ok ? "equal to the reference" : "DIFFERS from the reference");
}

static int run(const struct args *a)
{
    struct codec *codec = NULL;
    struct deg_graph *g = NULL;
    int rc = build_graph("run", a, &codec, &g);
    if (rc) {
        codec_destroy(codec);
        return rc;
    }
    size_t len = (size_t)a->size;
    int n = codec_n(codec);
    uint8_t *ref[CODEC_MAX_CHUNKS] = {0}, *inputs[CODEC_MAX_CHUNKS] = {0};
    uint8_t *junk = calloc(1, len);
    unsigned seed = 12345;
    for (int i = 0; i < n; i++) {
        ref[i] = malloc(len);
        for (size_t b = 0; ref[i] && b < len; b++) {
            seed = seed * 1103515245u + 12345u;
            ref[i][b] = (uint8_t)(seed >> 16);
        }
    }
    for (int i = 0; i < n && junk; i++)
        if (!ref[i]) {
            free(junk);
            junk = NULL;
        }
    if (!junk) {
        fprintf(stderr, "inec deg run: out of memory for %d chunks of %zu bytes\n", n, len);
        for (int i = 0; i < n; i++)
            free(ref[i]);
        deg_graph_destroy(g);
        codec_destroy(codec);
        return 1;
    }
    codec_encode(codec, len, ref);
    /* Vertices get only the chunks they hold (data chunks for an encode,
     * survivors for a decode); every other chunk reads as zeros. */
    bool known[CODEC_MAX_CHUNKS] = {0};
    for (int v = 0; v < g->nvertices; v++)
        for (int j = 0; j < g->vertices[v].nlocal; j++)
            known[g->vertices[v].local[j]] = true;
    for (int i = 0; i < n; i++)
        inputs[i] = known[i] ? ref[i] : junk;

    struct deg_run_opts opts = {.incoherent = a->incoherent, .timeout_ms = a->timeout_ms};
    struct tally t = {.ref = ref};
    char err[512] = "";
    printf("%s, %zu-byte chunks, %s, %s:\n", g->desc, len,
           a->incoherent ? "incoherent" : "coherent", a->peers ? "participants" : "in process");
    if (a->peers) {
        char *list = strdup(a->peers);
        const char *nodes[CODEC_MAX_CHUNKS];
        int nn = 0;
        for (char *save, *tok = strtok_r(list, ",", &save); tok && nn < CODEC_MAX_CHUNKS;
             tok = strtok_r(NULL, ",", &save))
            nodes[nn++] = tok;
        struct deg_peers peers = {
            .gateway = a->gateway, .nnodes = nn, .nodes = nodes, .secret_file = a->secret};
        rc = deg_remote_run(g, len, inputs, &peers, &opts, check_result, &t, err, sizeof(err));
        free(list);
    } else {
        rc = deg_run(g, len, inputs, &opts, check_result, &t, err, sizeof(err));
    }
    if (rc)
        fprintf(stderr, "inec deg run: %s\n", err);
    else if (t.bad || t.results == 0)
        fprintf(stderr, "inec deg run: %d of %d results differ\n", t.bad, t.results);
    else
        printf("ok: %d results equal to the codecs reference\n", t.results);
    for (int i = 0; i < n; i++)
        free(ref[i]);
    free(junk);
    deg_graph_destroy(g);
    codec_destroy(codec);
    return rc || t.bad || t.results == 0 ? 1 : 0;
}

static void ready(void *arg, const char *addr)
{
    (void)arg;
    printf("listening %s\n", addr);
    fflush(stdout);
}

static int serve(const struct args *a)
{
    if (!a->listen) {
        fprintf(stderr, "inec deg serve: --listen HOST:PORT is required\n");
        return 2;
    }
    if (!a->secret) {
        fprintf(stderr, "inec deg serve: --secret FILE is required (the cluster secret; "
                        "`inec secret init FILE` makes one)\n");
        return 2;
    }
    char err[512];
    struct inec_keyring kr;
    int rc = inec_secret_load(a->secret, &kr, err, sizeof(err));
    inec_keyring_clear(&kr);
    if (rc) {
        fprintf(stderr, "inec deg serve: %s\n", err);
        return 1;
    }
    deg_serve(a->listen, a->secret, ready, NULL, err, sizeof(err));
    fprintf(stderr, "inec deg serve: %s\n", err);
    return 1;
}

int cmd_deg(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct {
        const char *name;
        int (*fn)(const struct args *);
    } subs[] = {{"show", show}, {"run", run}, {"serve", serve}};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (strcmp(argv[1], subs[i].name) != 0)
            continue;
        struct args a;
        int rc = parse_args(subs[i].name, argc - 1, argv + 1, &a);
        return rc >= 0 ? rc : subs[i].fn(&a);
    }
    fprintf(stderr, "inec deg: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
