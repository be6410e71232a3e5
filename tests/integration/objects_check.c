/*
 * The object layer against node processes over tcp (scripts/cluster.sh),
 * driven step by step by objects_tcp.sh:
 *   objects_check CONFIG write     bucket, objects of many sizes, ranges, overwrite,
 *                                  delete, listing; leaves f-SIZE objects behind
 *   objects_check CONFIG verify    every f-SIZE object reads back byte-exact
 *   objects_check CONFIG lost      too many nodes gone: the 1 MiB object fails with
 *                                  -EIO, the rest read exact or fail, never wrong bytes
 *   objects_check CONFIG corrupt   flips a stored byte on disk (a node's segment
 *                                  file); the GET is still exact and the chunk queued
 * Exit 0 on success; a message on stderr otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "object/objects.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "objects_check: %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const size_t sizes[] = {0, 1, 4095, 4096, 24575, 24576, 24577, 100000, 1 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (uint8_t)x;
    }
}

static int put(struct gw_objects *o, const char *k, const uint8_t *d, size_t n)
{
    struct gw_put *p;
    int rc = gw_put_begin(o, "mpb", k, NULL, &p);
    for (size_t off = 0; rc == 0 && off < n; off += 10007)
        rc = gw_put_write(p, d + off, n - off < 10007 ? n - off : 10007);
    if (rc) {
        gw_put_abort(p);
        return rc;
    }
    return gw_put_commit(p, NULL);
}

static int get(struct gw_objects *o, const char *k, uint64_t off, uint64_t len, const uint8_t *want,
               size_t size)
{
    struct gw_get *g;
    struct gw_object_info info;
    int rc = gw_get_begin(o, "mpb", k, off, len, &info, &g);
    if (rc)
        return rc;
    gw_object_info_clear(&info);
    uint64_t end = len == UINT64_MAX || off + len > size ? size : off + len;
    uint8_t *buf = malloc(size + 1);
    size_t got = 0;
    ssize_t r;
    while ((r = gw_get_read(g, buf + got, 65536)) > 0)
        got += (size_t)r;
    if (r == 0) {
        CHECK(got == end - off);
        CHECK(memcmp(buf, want + off, got) == 0);
    }
    free(buf);
    gw_get_end(g);
    return r < 0 ? (int)r : 0;
}

static int names(const char *key, const struct gw_object_info *info, void *arg)
{
    (void)info;
    strcat(arg, key);
    strcat(arg, ",");
    return 0;
}

/* Flips a byte inside the first copy of pattern in any node's segment files. */
static int flip(json_t *cfg, const uint8_t *pattern, size_t plen)
{
    const char *id;
    json_t *nd;
    json_object_foreach(json_object_get(cfg, "nodes"), id, nd)
    {
        const char *dir = json_string_value(json_object_get(nd, "data"));
        DIR *dd = dir ? opendir(dir) : NULL;
        struct dirent *e;
        while (dd && (e = readdir(dd))) {
            if (strncmp(e->d_name, "seg-", 4) != 0)
                continue;
            char f[4500];
            snprintf(f, sizeof(f), "%s/%s", dir, e->d_name);
            int fd = open(f, O_RDWR);
            struct stat sb;
            if (fd < 0 || fstat(fd, &sb))
                continue;
            uint8_t *buf = malloc((size_t)sb.st_size + 1);
            ssize_t r = pread(fd, buf, (size_t)sb.st_size, 0);
            uint8_t *hit = r > 0 ? memmem(buf, (size_t)r, pattern, plen) : NULL;
            if (hit) {
                uint8_t x = (uint8_t)(hit[plen / 2] ^ 0x10);
                CHECK(pwrite(fd, &x, 1, hit - buf + (off_t)plen / 2) == 1);
            }
            free(buf);
            close(fd);
            if (hit) {
                closedir(dd);
                return 0;
            }
        }
        if (dd)
            closedir(dd);
    }
    return -ENOENT;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: objects_check CONFIG write|verify|lost|corrupt\n");
        return 2;
    }
    json_error_t je;
    json_t *cfg = json_load_file(argv[1], 0, &je);
    CHECK(cfg);
    /* The nodes' cluster secret: "secret_file" is relative to the config. */
    const char *sf = json_string_value(json_object_get(cfg, "secret_file"));
    if (sf && sf[0] != '/') {
        char path[4200];
        const char *slash = strrchr(argv[1], '/');
        snprintf(path, sizeof(path), "%.*s/%s", slash ? (int)(slash - argv[1]) : 1,
                 slash ? argv[1] : ".", sf);
        json_object_set_new(cfg, "secret_file", json_string(path));
    }
    struct gw_objects *o;
    char msg[256];
    if (gw_objects_open(cfg, &o, msg, sizeof(msg))) {
        fprintf(stderr, "objects_check: open: %s\n", msg);
        return 1;
    }
    const char *step = argv[2];
    uint8_t *d = malloc(1 << 20);
    if (strcmp(step, "write") == 0) {
        int rc = gw_bucket_create(o, "mpb");
        if (rc && rc != -EEXIST)
            fprintf(stderr, "objects_check: bucket: %s\n", strerror(-rc));
        CHECK(rc == 0 || rc == -EEXIST);
        for (size_t i = 0; i < NSIZES; i++) {
            char key[32];
            snprintf(key, sizeof(key), "f-%zu", sizes[i]);
            fill(d, sizes[i], (uint32_t)i);
            CHECK(put(o, key, d, sizes[i]) == 0);
            CHECK(get(o, key, 0, UINT64_MAX, d, sizes[i]) == 0);
            if (sizes[i] > 10) {
                CHECK(get(o, key, sizes[i] / 3, sizes[i] / 3 + 7, d, sizes[i]) == 0);
                CHECK(get(o, key, sizes[i] - 2, 2, d, sizes[i]) == 0);
            }
        }
        fill(d, 5000, 42);
        CHECK(put(o, "tmp/b", d, 5000) == 0);
        CHECK(put(o, "tmp/a", d, 10) == 0);
        CHECK(put(o, "tmp/a", d, 5000) == 0); /* overwrite */
        CHECK(get(o, "tmp/a", 0, UINT64_MAX, d, 5000) == 0);
        char list[4096] = "";
        CHECK(gw_object_list(o, "mpb", "tmp/", NULL, 0, names, list) == 0);
        CHECK(strcmp(list, "tmp/a,tmp/b,") == 0);
        CHECK(gw_object_delete(o, "mpb", "tmp/a") == 0);
        CHECK(gw_object_delete(o, "mpb", "tmp/b") == 0);
        list[0] = 0;
        CHECK(gw_object_list(o, "mpb", NULL, NULL, 0, names, list) == 0);
        CHECK(strcmp(list, "f-0,f-1,f-100000,f-1048576,f-24575,f-24576,f-24577,f-4095,f-4096,") ==
              0);
    } else if (strcmp(step, "verify") == 0 || strcmp(step, "lost") == 0) {
        bool lost = strcmp(step, "lost") == 0;
        for (size_t i = 0; i < NSIZES; i++) {
            char key[32];
            snprintf(key, sizeof(key), "f-%zu", sizes[i]);
            fill(d, sizes[i], (uint32_t)i);
            int rc = get(o, key, 0, UINT64_MAX, d, sizes[i]);
            if (lost) {
                CHECK(rc == 0 || rc == -EIO || rc == -EHOSTDOWN); /* data, or metadata, lost */
                if (sizes[i] == 1 << 20)
                    CHECK(rc != 0);
            } else if (rc) {
                fprintf(stderr, "objects_check: %s: %s\n", key, strerror(-rc));
                return 1;
            }
        }
        struct gw_objects_stats st;
        gw_objects_counters(o, &st);
        printf("degraded_reads=%llu failed_reads=%llu repair_queue=%llu\n",
               (unsigned long long)st.degraded_reads, (unsigned long long)st.failed_reads,
               (unsigned long long)st.repair_queue);
    } else if (strcmp(step, "corrupt") == 0) {
        fill(d, 100000, 7); /* f-100000: data chunk 2 of stripe 0 starts at 2 * 4096 */
        CHECK(flip(cfg, d + 2 * 4096, 64) == 0);
        CHECK(get(o, "f-100000", 0, UINT64_MAX, d, 100000) == 0);
        struct gw_objects_stats st;
        gw_objects_counters(o, &st);
        /* the corrupt stripe decoded; others only if hedged (a late read under load) */
        CHECK(st.corrupt_chunks == 1 && st.degraded_reads >= 1 &&
              st.degraded_reads <= 1 + st.hedged_reads && st.repair_queue >= 1);
    } else {
        fprintf(stderr, "objects_check: unknown step %s\n", step);
        return 2;
    }
    free(d);
    gw_objects_close(o);
    json_decref(cfg);
    return 0;
}
