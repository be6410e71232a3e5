/*
 * Crash-test workload for the chunk store (driven by store_crash.py).
 *
 *   store_crash_helper write DIR BASEVER THREADS OPS SEED GROUP_COMMIT
 *     puts, overwrites, deletes and compacts from several threads, and puts,
 *     deletes and lists metadata; prints "B P n ver len" / "B D n ver"
 *     (chunks), "B M n ver len" / "B X n ver" (metadata) before each
 *     operation and "A ..." after it is acknowledged, "F D|X n" when a delete
 *     found nothing. INEC_CRASH_AT makes the store SIGKILL itself at a named
 *     point; the parent may also kill it anytime.
 *   store_crash_helper fill DIR N
 *     puts chunks 0..N-1, 1000 bytes each, version 1.
 *   store_crash_helper check DIR
 *     recovers the store and prints "C n ver len ok|BAD" for every chunk (the
 *     bytes of chunk n at version v are a function of n, v and len), "M n ver
 *     len ok|BAD" for every metadata record, then
 *     "S corrupt" from a scrub.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/store.h"
#include "node/store_internal.h"

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&out_mu);
    /* one write per line: a line is out whole or not at all when we are killed */
    if (write(1, line, (size_t)n) != n)
        abort();
    pthread_mutex_unlock(&out_mu);
}

static struct node_chunk_id cid(uint64_t n)
{
    struct node_chunk_id id = {.stripe = n % 5, .index = (uint32_t)(n % 3)};
    memcpy(id.object, &n, sizeof(n));
    return id;
}

static void fill(uint8_t *p, size_t len, uint64_t n, uint64_t ver)
{
    uint64_t x = n * 0x9e3779b97f4a7c15ull ^ ver ^ len;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

/* A metadata blob: its version in 20 digits, then letters, a function of n,
 * ver and len (no NUL: listings hand out a blob up to its first NUL). */
static void meta_blob(char *p, size_t len, uint64_t n, uint64_t ver)
{
    char v[21];
    snprintf(v, sizeof(v), "%020" PRIu64, ver);
    memcpy(p, v, 20);
    for (size_t i = 20; i < len; i++)
        p[i] = (char)('a' + (n * 31 + ver * 7 + i + len) % 26);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int list_one(const char *key, const void *blob, size_t len, void *arg)
{
    (void)key, (void)blob, (void)len, (void)arg;
    return 0;
}

struct job {
    struct node_store *s;
    int t, threads, ops;
    uint64_t basever, seed;
};

static void *worker(void *p)
{
    struct job *j = p;
    uint64_t r = j->seed * 2654435761u + (uint64_t)j->t + 1, ver = j->basever;
    /* Page aligned: chunks of direct_min bytes and more are aligned records
     * written with O_DIRECT (where the file system takes it), the rest plain. */
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, NODE_RECORD_ALIGN, 40000) != 0)
        exit(3);
    for (int op = 0; op < j->ops; op++) {
        uint64_t n = (uint64_t)j->t + (uint64_t)j->threads * (rnd(&r) % 12); /* ids per thread */
        struct node_chunk_id id = cid(n);
        uint64_t dice = rnd(&r) % 10;
        ver++;
        if (j->t == 1 && op % 8 == 3) { /* a listing, and the metadata log into LMDB */
            int rc = node_store_list_meta(j->s, "b", NULL, NULL, 1, list_one, NULL, NULL);
            if (rc < 0 || (rc = store_meta_flush(j->s))) {
                say("E list_meta or apply %d\n", rc);
                exit(3);
            }
        } else if (j->t == 0 && op % 8 == 7) {
            struct node_compact_result cr;
            int rc = node_store_compact(j->s, 0.25, &cr);
            if (rc) {
                say("E compact %d\n", rc);
                exit(3);
            }
        } else if (dice >= 7) { /* metadata: puts, and a delete in three */
            char key[32];
            snprintf(key, sizeof(key), "m%" PRIu64, n);
            if (dice == 9) {
                say("B X %" PRIu64 " %" PRIu64 "\n", n, ver);
                int rc = node_store_delete_meta(j->s, "b", key);
                if (rc && rc != -ENOENT) {
                    say("E delete_meta %d\n", rc);
                    exit(3);
                }
                say("%s X %" PRIu64 " %" PRIu64 "\n", rc ? "F" : "A", n, ver);
                continue;
            }
            size_t len = 20 + rnd(&r) % 3000;
            meta_blob((char *)buf, len, n, ver);
            say("B M %" PRIu64 " %" PRIu64 " %zu\n", n, ver, len);
            int rc = node_store_put_meta(j->s, "b", key, ver, 0, buf, len, NULL);
            if (rc) {
                say("E put_meta %d\n", rc);
                exit(3);
            }
            say("A M %" PRIu64 " %" PRIu64 " %zu\n", n, ver, len);
        } else if (dice < 6) {
            size_t len = rnd(&r) % 40000;
            fill(buf, len, n, ver);
            say("B P %" PRIu64 " %" PRIu64 " %zu\n", n, ver, len);
            int rc = node_store_put_chunk(j->s, &id, ver, buf, len);
            if (rc) {
                say("E put %d\n", rc);
                exit(3);
            }
            say("A P %" PRIu64 " %" PRIu64 " %zu\n", n, ver, len);
        } else {
            say("B D %" PRIu64 " %" PRIu64 "\n", n, ver);
            int rc = node_store_delete_chunk(j->s, &id, ver);
            if (rc && rc != -ENOENT) {
                say("E delete %d\n", rc);
                exit(3);
            }
            say("%s D %" PRIu64 " %" PRIu64 "\n", rc ? "F" : "A", n, ver);
        }
    }
    free(buf);
    return NULL;
}

static int check_meta(const char *key, const void *blob, size_t len, void *arg)
{
    (void)arg;
    uint64_t n = strtoull(key + 1, NULL, 10), ver = 0;
    bool ok = len >= 20 && len <= 3020;
    char want[3020];
    if (ok) {
        char v[21] = {0};
        memcpy(v, blob, 20);
        ver = strtoull(v, NULL, 10);
        meta_blob(want, len, n, ver);
        ok = memcmp(want, blob, len) == 0;
    }
    say("M %" PRIu64 " %" PRIu64 " %zu %s\n", n, ver, len, ok ? "ok" : "BAD");
    return 0;
}

static struct node_store *open_or_die(const char *dir, int gc)
{
    struct node_store_options o;
    node_store_options_default(&o);
    o.segment_size = 128 << 10; /* many rollovers and compactions */
    o.map_size = 64 << 20;
    o.group_commit = gc;
    o.direct_min = 16 << 10; /* half the puts are aligned records */
    struct node_store *s;
    char err[256];
    if (node_store_open(dir, &o, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "open: %s\n", err);
        exit(3);
    }
    return s;
}

static int check_one(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    struct node_store *s = arg;
    uint64_t n;
    memcpy(&n, id->object, sizeof(n));
    void *got;
    size_t glen;
    uint64_t gver;
    int rc = node_store_get_chunk_alloc(s, id, &got, &glen, &gver);
    int ok = rc == 0 && glen == len && gver == version;
    if (ok) {
        uint8_t *want = malloc(len ? len : 1);
        fill(want, len, n, version);
        ok = memcmp(want, got, len) == 0;
        free(want);
        free(got);
    }
    say("C %" PRIu64 " %" PRIu64 " %" PRIu32 " %s\n", n, version, len, ok ? "ok" : "BAD");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 8 && strcmp(argv[1], "write") == 0) {
        int threads = atoi(argv[4]);
        struct node_store *s = open_or_die(argv[2], atoi(argv[7]));
        pthread_t th[16];
        struct job jobs[16];
        if (threads < 1 || threads > 16)
            return 2;
        for (int t = 0; t < threads; t++) {
            jobs[t] = (struct job){s,
                                   t,
                                   threads,
                                   atoi(argv[5]),
                                   strtoull(argv[3], NULL, 10),
                                   strtoull(argv[6], NULL, 10)};
            pthread_create(&th[t], NULL, worker, &jobs[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
        node_store_close(s);
        say("DONE\n");
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "fill") == 0) { /* N chunks of 1000 bytes, version 1 */
        struct node_store *s = open_or_die(argv[2], 1);
        uint8_t buf[1000];
        for (uint64_t n = 0; n < strtoull(argv[3], NULL, 10); n++) {
            struct node_chunk_id id = cid(n);
            fill(buf, sizeof(buf), n, 1);
            if (node_store_put_chunk(s, &id, 1, buf, sizeof(buf)) != 0)
                return 3;
        }
        node_store_close(s);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "check") == 0) {
        struct node_store *s = open_or_die(argv[2], 0);
        int n = node_store_list_chunks(s, NULL, 0, check_one, s);
        if (n >= 0)
            n = node_store_list_meta(s, "b", NULL, NULL, 0, check_meta, NULL, NULL);
        struct node_scrub_result r;
        int rc = node_store_scrub(s, NULL, NULL, &r);
        node_store_close(s);
        if (n < 0 || rc)
            return 3;
        say("S %" PRIu64 "\n", r.corrupt);
        return 0;
    }
    fprintf(stderr, "usage: store_crash_helper write DIR BASEVER THREADS OPS SEED GC | fill DIR N "
                    "| check DIR\n");
    return 2;
}
