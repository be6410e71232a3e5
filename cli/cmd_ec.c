/*
 * `inec ec`: erasure-code a file into chunk files and back.
 *
 *   inec ec encode --profile rs:k=6,m=3 FILE -o DIR
 *   inec ec decode DIR -o FILE
 *   inec ec matrix --profile rs:k=6,m=3
 *
 * Chunk j < k is bytes [j*L, (j+1)*L) of the file (zero-padded), L the chunk
 * length, so the chunk files are raw payload. The file is streamed a stripe
 * of SEG bytes per chunk at a time, so memory stays n * SEG whatever its size.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <jansson.h>

#include "cli/commands.h"
#include "cli/dispatch.h"
#include "codecs/codec.h"

#define SEG      ((size_t)1 << 20)
#define MANIFEST "manifest.json"

struct args {
    const char *profile, *out, *pos;
    int help;
};

/* --profile P | --profile=P, -o X | --output X, one positional; 0 or 2. */
static int parse_args(const char *cmd, int argc, char **argv, struct args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **dst = NULL;
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            a->help = 1;
            continue;
        }
        if (strcmp(s, "--profile") == 0 || strcmp(s, "-p") == 0)
            dst = &a->profile;
        else if (strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0)
            dst = &a->out;
        else if (strncmp(s, "--profile=", 10) == 0) {
            a->profile = s + 10;
            continue;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "inec ec %s: unknown option '%s'\n", cmd, s);
            return 2;
        } else if (a->pos) {
            fprintf(stderr, "inec ec %s: unexpected argument '%s'\n", cmd, s);
            return 2;
        } else {
            a->pos = s;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "inec ec %s: option '%s' needs a value\n", cmd, s);
            return 2;
        }
        *dst = argv[++i];
    }
    return 0;
}

static int make_codec(const char *profile, struct codec **c)
{
    struct codec_profile p;
    char err[256];
    if (codec_profile_parse(profile, &p, err, sizeof(err)) < 0 ||
        codec_create(&p, c, err, sizeof(err)) < 0) {
        fprintf(stderr, "inec ec: %s\n", err);
        return -1;
    }
    return 0;
}

static void chunk_name(char *buf, size_t len, const char *dir, int i)
{
    snprintf(buf, len, "%s/chunk.%02d", dir, i);
}

static int read_full(int fd, uint8_t *buf, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const uint8_t *buf, size_t len, off_t off)
{
    size_t put = 0;
    while (put < len) {
        ssize_t w = pwrite(fd, buf + put, len - put, off + (off_t)put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        put += (size_t)w;
    }
    return 0;
}

static uint8_t **alloc_bufs(int n, size_t len)
{
    uint8_t **b = calloc((size_t)n, sizeof(*b));
    for (int i = 0; b && i < n; i++)
        if (!(b[i] = aligned_alloc(64, (len + 63) / 64 * 64))) {
            for (int j = 0; j < i; j++)
                free(b[j]);
            free(b);
            return NULL;
        }
    return b;
}

static void free_bufs(uint8_t **b, int n)
{
    for (int i = 0; b && i < n; i++)
        free(b[i]);
    free(b);
}

static int ec_encode(int argc, char **argv)
{
    struct args a;
    if (parse_args("encode", argc, argv, &a))
        return 2;
    if (a.help) {
        printf("usage: inec ec encode --profile PROFILE FILE -o DIR\n\n"
               "Splits FILE into k data chunks plus m parity chunks, written to DIR as\n"
               "chunk.00 ... (raw payload) with manifest.json (profile, length, chunk\n"
               "length, CRC32C of every chunk). PROFILE is e.g. rs:k=6,m=3 or\n"
               "lrc:k=6,l=2,r=2 (also ppr:, ecpipe:, tri: with k and m).\n");
        return 0;
    }
    if (!a.profile || !a.pos || !a.out) {
        fprintf(stderr, "usage: inec ec encode --profile PROFILE FILE -o DIR\n");
        return 2;
    }
    struct codec *c;
    if (make_codec(a.profile, &c) < 0)
        return 2;
    int k = codec_k(c), n = codec_n(c), rc = 1;
    int in = open(a.pos, O_RDONLY);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0) {
        fprintf(stderr, "inec ec encode: %s: %s\n", a.pos, strerror(errno));
        codec_destroy(c);
        if (in >= 0)
            close(in);
        return 1;
    }
    uint64_t length = (uint64_t)st.st_size;
    uint64_t clen = length ? (length + (uint64_t)k - 1) / (uint64_t)k : 1;
    size_t seg = clen < SEG ? (size_t)clen : SEG;
    int fds[CODEC_MAX_CHUNKS];
    uint32_t crc[CODEC_MAX_CHUNKS];
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    uint8_t **buf = alloc_bufs(n, seg);
    char path[4096];
    if (!buf) {
        fprintf(stderr, "inec ec encode: out of memory\n");
        goto out;
    }
    if (mkdir(a.out, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "inec ec encode: %s: %s\n", a.out, strerror(errno));
        goto out;
    }
    for (int i = 0; i < n; i++) {
        chunk_name(path, sizeof(path), a.out, i);
        fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fds[i] < 0) {
            fprintf(stderr, "inec ec encode: %s: %s\n", path, strerror(errno));
            goto out;
        }
        crc[i] = 0xffffffffu;
    }
    for (uint64_t off = 0; off < clen; off += seg) {
        size_t len = clen - off < seg ? (size_t)(clen - off) : seg;
        for (int j = 0; j < k; j++) {
            uint64_t start = (uint64_t)j * clen + off;
            size_t have = start >= length        ? 0
                          : length - start < len ? (size_t)(length - start)
                                                 : len;
            int r = read_full(in, buf[j], have, (off_t)start);
            if (r < 0) {
                fprintf(stderr, "inec ec encode: reading %s: %s\n", a.pos, strerror(-r));
                goto out;
            }
            memset(buf[j] + have, 0, len - have);
        }
        codec_encode(c, len, buf);
        for (int i = 0; i < n; i++) {
            int r = write_full(fds[i], buf[i], len, (off_t)off);
            if (r < 0) {
                fprintf(stderr, "inec ec encode: writing chunk %d: %s\n", i, strerror(-r));
                goto out;
            }
            crc[i] = crc32_iscsi(buf[i], (int)len, crc[i]);
        }
    }
    char ptext[64];
    codec_profile_format(codec_profile(c), ptext, sizeof(ptext));
    json_t *chunks = json_array();
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "chunk.%02d", i);
        json_array_append_new(chunks, json_pack("{s:i, s:s, s:I}", "index", i, "file", name,
                                                "crc32c", (json_int_t)(uint32_t)~crc[i]));
    }
    json_t *man = json_pack("{s:s, s:I, s:I, s:o}", "profile", ptext, "length", (json_int_t)length,
                            "chunk_length", (json_int_t)clen, "chunks", chunks);
    snprintf(path, sizeof(path), "%s/%s", a.out, MANIFEST);
    int jr = json_dump_file(man, path, JSON_INDENT(2));
    json_decref(man);
    if (jr < 0) {
        fprintf(stderr, "inec ec encode: cannot write %s\n", path);
        goto out;
    }
    printf("encoded %s (%" PRIu64 " bytes) as %s: %d chunks of %" PRIu64 " bytes in %s\n", a.pos,
           length, ptext, n, clen, a.out);
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0 && close(fds[i]) < 0 && rc == 0) {
            fprintf(stderr, "inec ec encode: closing chunk %d: %s\n", i, strerror(errno));
            rc = 1;
        }
    free_bufs(buf, n);
    close(in);
    codec_destroy(c);
    return rc;
}

/* Manifest fields, checked. */
struct manifest {
    struct codec *c;
    uint64_t length, clen;
    uint32_t crc[CODEC_MAX_CHUNKS];
    char file[CODEC_MAX_CHUNKS][64];
};

static int load_manifest(const char *dir, struct manifest *mf)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, MANIFEST);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        fprintf(stderr, "inec ec decode: %s: %s (line %d)\n", path, jerr.text, jerr.line);
        return -1;
    }
    const char *profile;
    json_int_t length, clen;
    json_t *chunks;
    int rc = -1;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:I, s:I, s:o}", "profile", &profile, "length",
                       &length, "chunk_length", &clen, "chunks", &chunks) < 0) {
        fprintf(stderr, "inec ec decode: %s: %s\n", path, jerr.text);
        goto out;
    }
    if (make_codec(profile, &mf->c) < 0)
        goto out;
    int n = codec_n(mf->c), k = codec_k(mf->c);
    if (length < 0 || clen < 1 || (uint64_t)clen * (uint64_t)k < (uint64_t)length ||
        !json_is_array(chunks) || (int)json_array_size(chunks) != n) {
        fprintf(stderr, "inec ec decode: %s: inconsistent lengths or chunk list\n", path);
        goto out;
    }
    mf->length = (uint64_t)length;
    mf->clen = (uint64_t)clen;
    for (int i = 0; i < n; i++) {
        const char *file;
        json_int_t crc;
        int index;
        if (json_unpack_ex(json_array_get(chunks, (size_t)i), &jerr, 0, "{s:i, s:s, s:I}", "index",
                           &index, "file", &file, "crc32c", &crc) < 0 ||
            index != i || strchr(file, '/') || strlen(file) >= sizeof(mf->file[i])) {
            fprintf(stderr, "inec ec decode: %s: bad entry for chunk %d\n", path, i);
            goto out;
        }
        mf->crc[i] = (uint32_t)crc;
        snprintf(mf->file[i], sizeof(mf->file[i]), "%s", file);
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* Opens chunk i and checks its size and CRC; returns the fd or -1 after
 * saying what is wrong with it. */
static int check_chunk(const char *dir, const struct manifest *mf, int i, uint8_t *buf)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, mf->file[i]);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) {
        printf("chunk %2d %s: missing (%s)\n", i, mf->file[i], strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != mf->clen) {
        printf("chunk %2d %s: corrupt (size %lld, expected %" PRIu64 ")\n", i, mf->file[i],
               (long long)st.st_size, mf->clen);
        close(fd);
        return -1;
    }
    uint32_t crc = 0xffffffffu;
    for (uint64_t off = 0; off < mf->clen; off += SEG) {
        size_t len = mf->clen - off < SEG ? (size_t)(mf->clen - off) : SEG;
        if (read_full(fd, buf, len, (off_t)off) < 0) {
            printf("chunk %2d %s: unreadable\n", i, mf->file[i]);
            close(fd);
            return -1;
        }
        crc = crc32_iscsi(buf, (int)len, crc);
    }
    if (~crc != mf->crc[i]) {
        printf("chunk %2d %s: corrupt (crc32c %08x, manifest says %08x)\n", i, mf->file[i], ~crc,
               mf->crc[i]);
        close(fd);
        return -1;
    }
    return fd;
}

static int ec_decode(int argc, char **argv)
{
    struct args a;
    if (parse_args("decode", argc, argv, &a))
        return 2;
    if (a.help) {
        printf("usage: inec ec decode DIR -o FILE\n\n"
               "Rebuilds FILE from the chunks in DIR (written by 'inec ec encode'). Every\n"
               "chunk is checked against manifest.json; missing ones and corrupt ones (wrong\n"
               "size or CRC32C) are listed and left out. If too few good chunks remain, it\n"
               "says so, writes nothing and exits 1.\n");
        return 0;
    }
    if (!a.pos || !a.out) {
        fprintf(stderr, "usage: inec ec decode DIR -o FILE\n");
        return 2;
    }
    struct manifest mf = {0};
    if (load_manifest(a.pos, &mf) < 0) {
        codec_destroy(mf.c);
        return 1;
    }
    struct codec *c = mf.c;
    int k = codec_k(c), n = codec_n(c), rc = 1, out = -1, nbad = 0;
    size_t seg = mf.clen < SEG ? (size_t)mf.clen : SEG;
    int fds[CODEC_MAX_CHUNKS], erased[CODEC_MAX_CHUNKS], nerased = 0;
    bool avail[CODEC_MAX_CHUNKS];
    struct codec_plan *plan = NULL;
    char tmp[4096] = "";
    uint8_t **buf = alloc_bufs(n, seg);
    if (!buf) {
        fprintf(stderr, "inec ec decode: out of memory\n");
        codec_destroy(c);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        fds[i] = check_chunk(a.pos, &mf, i, buf[0]);
        avail[i] = fds[i] >= 0;
        nbad += !avail[i];
        if (!avail[i] && i < k)
            erased[nerased++] = i;
    }
    if (nerased) {
        char err[256];
        if (codec_plan_create(c, erased, nerased, avail, &plan, err, sizeof(err)) < 0) {
            printf("NOT recoverable: %d of %d chunks lost (%d data); %s\n", nbad, n, nerased, err);
            fprintf(stderr, "inec ec decode: not recoverable, %s not written\n", a.out);
            goto out;
        }
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", a.out);
    out = mkstemp(tmp);
    if (out < 0) {
        fprintf(stderr, "inec ec decode: %s: %s\n", a.out, strerror(errno));
        tmp[0] = 0;
        goto out;
    }
    uint8_t *srcs[CODEC_MAX_CHUNKS], *outs[CODEC_MAX_CHUNKS];
    for (uint64_t off = 0; off < mf.clen; off += seg) {
        size_t len = mf.clen - off < seg ? (size_t)(mf.clen - off) : seg;
        /* Data chunks we have, and whatever else the plan reads. */
        bool need[CODEC_MAX_CHUNKS] = {false};
        for (int j = 0; j < k; j++)
            need[j] = avail[j];
        for (int s = 0; plan && s < plan->nsurvivors; s++)
            need[plan->survivors[s]] = true;
        for (int i = 0; i < n; i++)
            if (need[i] && read_full(fds[i], buf[i], len, (off_t)off) < 0) {
                fprintf(stderr, "inec ec decode: chunk %d became unreadable\n", i);
                goto out;
            }
        if (plan) {
            for (int s = 0; s < plan->nsurvivors; s++)
                srcs[s] = buf[plan->survivors[s]];
            for (int e = 0; e < plan->nerased; e++)
                outs[e] = buf[plan->erased[e]];
            codec_plan_apply(plan, len, srcs, outs);
        }
        for (int j = 0; j < k; j++) {
            uint64_t start = (uint64_t)j * mf.clen + off;
            size_t put = start >= mf.length        ? 0
                         : mf.length - start < len ? (size_t)(mf.length - start)
                                                   : len;
            int r = write_full(out, buf[j], put, (off_t)start);
            if (r < 0) {
                fprintf(stderr, "inec ec decode: writing %s: %s\n", tmp, strerror(-r));
                goto out;
            }
        }
    }
    if (ftruncate(out, (off_t)mf.length) < 0 || fsync(out) < 0 || close(out) < 0) {
        fprintf(stderr, "inec ec decode: %s: %s\n", tmp, strerror(errno));
        out = -1;
        goto out;
    }
    out = -1;
    if (rename(tmp, a.out) < 0) {
        fprintf(stderr, "inec ec decode: %s: %s\n", a.out, strerror(errno));
        goto out;
    }
    tmp[0] = 0;
    printf("recovered %s (%" PRIu64 " bytes): %d of %d chunks good, %d rebuilt\n", a.out, mf.length,
           n - nbad, n, nerased);
    rc = 0;
out:
    if (out >= 0)
        close(out);
    if (tmp[0])
        unlink(tmp);
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    codec_plan_destroy(plan);
    free_bufs(buf, n);
    codec_destroy(c);
    return rc;
}

static int ec_matrix(int argc, char **argv)
{
    struct args a;
    if (parse_args("matrix", argc, argv, &a))
        return 2;
    if (a.help) {
        printf("usage: inec ec matrix --profile PROFILE\n\n"
               "Prints the m x k coding part of the generator (rows k..n-1): parity row i\n"
               "is sum over j of G[i][j] * data j in GF(2^8), polynomial 0x11d. One row per\n"
               "line, decimal bytes separated by spaces.\n");
        return 0;
    }
    if (!a.profile || a.pos || a.out) {
        fprintf(stderr, "usage: inec ec matrix --profile PROFILE\n");
        return 2;
    }
    struct codec *c;
    if (make_codec(a.profile, &c) < 0)
        return 2;
    int k = codec_k(c), n = codec_n(c);
    const uint8_t *g = codec_generator(c);
    for (int i = k; i < n; i++)
        for (int j = 0; j < k; j++)
            printf("%d%c", g[i * k + j], j + 1 < k ? ' ' : '\n');
    codec_destroy(c);
    return 0;
}

int cmd_ec(int argc, char **argv)
{
    static const struct cli_command subcommands[] = {
        {"encode", ec_encode, "--profile PROFILE FILE -o DIR: split FILE into chunk files"},
        {"decode", ec_decode, "DIR -o FILE: rebuild FILE from the surviving chunks"},
        {"matrix", ec_matrix, "--profile PROFILE: print the coding matrix"},
        {NULL, NULL, NULL},
    };
    return cli_dispatch("inec ec", NULL, subcommands, NULL, argc, argv);
}
