/* `inec deg show|serve`: print a scheme's Dynamic EC Graph; serve a vertex. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "deg/deg.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: inec deg show [--scheme rs|lrc|ppr|ecpipe|tri --k K --m M [--l L --r R]]\n"
        "                     [--profile TEXT] [--op encode|decode] [--lost I[,J...]]\n"
        "                     [--slice BYTES] [--format text|json|dot]\n\n"
        "show prints the graph of one stripe (default rs:k=6,m=3 encode); --lost implies\n"
        "decode. Render a DOT graph with: inec deg show ... --format dot | dot -Tpng -o g.png\n");
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > CODEC_MAX_CHUNKS)
        return -1;
    *out = (int)v;
    return 0;
}

static int show(int argc, char **argv)
{
    static const struct option opts[] = {
        {"scheme", required_argument, NULL, 's'}, {"k", required_argument, NULL, 'k'},
        {"m", required_argument, NULL, 'm'},      {"l", required_argument, NULL, 'l'},
        {"r", required_argument, NULL, 'r'},      {"profile", required_argument, NULL, 'p'},
        {"op", required_argument, NULL, 'o'},     {"lost", required_argument, NULL, 'x'},
        {"slice", required_argument, NULL, 'z'},  {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *scheme = "rs", *profile = NULL, *format = "text", *op = NULL, *lost = NULL;
    int k = 6, m = 3, l = 2, r = 2, c;
    long slice = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 's':
            scheme = optarg;
            break;
        case 'k':
            bad = parse_int(optarg, &k);
            break;
        case 'm':
            bad = parse_int(optarg, &m);
            break;
        case 'l':
            bad = parse_int(optarg, &l);
            break;
        case 'r':
            bad = parse_int(optarg, &r);
            break;
        case 'p':
            profile = optarg;
            break;
        case 'o':
            op = optarg;
            break;
        case 'x':
            lost = optarg;
            break;
        case 'z':
            slice = strtol(optarg, NULL, 10);
            bad = slice <= 0;
            break;
        case 'f':
            format = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "inec deg show: bad value '%s'\n", optarg);
            return 2;
        }
    }
    char text[128], err[256];
    if (!profile) {
        if (strcmp(scheme, "lrc") == 0)
            snprintf(text, sizeof(text), "lrc:k=%d,l=%d,r=%d", k, l, r);
        else
            snprintf(text, sizeof(text), "%s:k=%d,m=%d", scheme, k, m);
        profile = text;
    }
    struct codec_profile prof;
    struct codec *codec;
    if (codec_profile_parse(profile, &prof, err, sizeof(err)) ||
        codec_create(&prof, &codec, err, sizeof(err))) {
        fprintf(stderr, "inec deg show: %s\n", err);
        return 2;
    }
    struct deg_request req = {.op = lost ? DEG_OP_DECODE : DEG_OP_ENCODE, .slice = (size_t)slice};
    deg_placement_default(&req.placement);
    if (op && strcmp(op, "encode") == 0)
        req.op = DEG_OP_ENCODE;
    else if (op && strcmp(op, "decode") == 0)
        req.op = DEG_OP_DECODE;
    else if (op) {
        fprintf(stderr, "inec deg show: --op is encode or decode\n");
        codec_destroy(codec);
        return 2;
    }
    if (req.op == DEG_OP_DECODE) {
        const char *p = lost ? lost : "0";
        while (*p && req.nerased < CODEC_MAX_CHUNKS) {
            char *end;
            long e = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',')) {
                fprintf(stderr, "inec deg show: --lost is a list of chunk indices, like 1,4\n");
                codec_destroy(codec);
                return 2;
            }
            req.erased[req.nerased++] = (int)e;
            p = *end ? end + 1 : end;
        }
    }
    struct deg_graph *g;
    int rc = deg_build(codec, &req, &g, err, sizeof(err));
    codec_destroy(codec);
    if (rc) {
        fprintf(stderr, "inec deg show: %s\n", err);
        return 1;
    }
    char *out = NULL;
    if (strcmp(format, "json") == 0)
        out = deg_to_json(g);
    else if (strcmp(format, "dot") == 0)
        out = deg_to_dot(g);
    else if (strcmp(format, "text") == 0)
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
    if (strcmp(format, "json") == 0)
        putchar('\n');
    free(out);
    return 0;
}

int cmd_deg(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "show") == 0)
        return show(argc - 1, argv + 1);
    fprintf(stderr, "inec deg: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
