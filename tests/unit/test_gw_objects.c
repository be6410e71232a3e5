/*
 * The object layer on the embedded cluster (gateway + 9 node services in this
 * process, RS(6,3) with small 4 KiB chunks so stripe boundaries are cheap to
 * cross): round trips, ranges, overwrite, delete, listing, lost and corrupt
 * chunks, a gateway restart, concurrent writers, every scheme's pool.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "inec/inec.h"
#include "object/objects.h"
#include "object/objects_internal.h"
#include "node/service.h"
#include "object/repair.h"

#define CHUNK  4096
#define STRIPE (6 * CHUNK)

static char dir[256];

/* inline_max: 0 for the tests of stripes (their small objects would go inline);
 * degraded_read: the gateway's "degraded_read" ("direct", "deg"). */
/* Opens the embedded cluster in `dir` with `opts` (a reference taken). */
static struct gw_objects *open_opts(json_t *opts)
{
    struct gw_objects *o = NULL;
    char msg[256];
    int rc = gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg));
    json_decref(opts);
    if (rc)
        fail_msg("open: %s (%d)", msg, rc);
    return o;
}

static json_t *cluster_opts(int chunk_size, int inline_max, const char *degraded_read)
{
    return json_pack("{s:i,s:i,s:i,s:i,s:{s:b},s:s}", "chunk_size", chunk_size, "gc_delay_ms", 0,
                     "timeout_ms", 3000, "inline_max", inline_max, "repair", "paused", 1,
                     "degraded_read", degraded_read);
}

static struct gw_objects *open_cluster_with(int chunk_size, int inline_max,
                                            const char *degraded_read)
{
    return open_opts(cluster_opts(chunk_size, inline_max, degraded_read));
}

static struct gw_objects *open_cluster(void)
{
    return open_cluster_with(CHUNK, 0, "direct");
}

/* For a commit that must reach the homes before the gateway knows they
 * stopped: no probe within the test. stop_unnoticed resets the gateway's
 * belief after the stops, but a probe falls due one heartbeat (500 ms) after
 * it, and a refused probe marks a node down at once: a stall that long
 * between the reset and the commit on a loaded machine would fail the test
 * for the wrong reason. */
static struct gw_objects *open_cluster_unprobed(void)
{
    json_t *opts = cluster_opts(CHUNK, 0, "direct");
    json_object_set_new(opts, "timeout_ms", json_integer(120000));
    json_object_set_new(opts, "heartbeat_ms", json_integer(60000));
    return open_opts(opts);
}

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

static int put(struct gw_objects *o, const char *b, const char *k, const uint8_t *d, size_t n)
{
    struct gw_put *p;
    struct gw_object_info attrs = {.content_type = "application/x-test"};
    attrs.user_meta = json_pack("{s:s}", "color", "blue");
    int rc = gw_put_begin(o, b, k, &attrs, &p);
    gw_object_info_clear(&attrs);
    if (rc)
        return rc;
    for (size_t off = 0; off < n;) { /* odd pieces: stripes never line up with writes */
        size_t c = n - off < 7777 ? n - off : 7777;
        if ((rc = gw_put_write(p, d + off, c))) {
            gw_put_abort(p);
            return rc;
        }
        off += c;
    }
    return gw_put_commit(p, NULL);
}

/* Reads [off, off+len) and compares with the one of the n bodies wants[i]
 * whose size sizes[i] the read found; returns the GET's error or 0. */
static int get_check_one_of(struct gw_objects *o, const char *b, const char *k, uint64_t off,
                            uint64_t len, const uint8_t *const *wants, const size_t *sizes, int n)
{
    struct gw_get *g;
    struct gw_object_info info;
    int rc = gw_get_begin(o, b, k, off, len, &info, &g);
    if (rc)
        return rc;
    int which = 0;
    while (which < n - 1 && sizes[which] != info.size)
        which++;
    assert_int_equal(info.size, sizes[which]);
    const uint8_t *want = wants[which];
    size_t size = sizes[which];
    uint64_t end = len == UINT64_MAX || off + len > size ? size : off + len;
    size_t got = 0;
    uint8_t *buf = malloc(size + 1);
    for (;;) {
        ssize_t r = gw_get_read(g, buf + got, 5000);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        assert_true(got <= end - off);
    }
    if (rc == 0) {
        assert_int_equal(got, end - off);
        assert_memory_equal(buf, want + off, got);
    }
    free(buf);
    gw_get_end(g);
    gw_object_info_clear(&info);
    return rc;
}

static int get_check(struct gw_objects *o, const char *b, const char *k, uint64_t off, uint64_t len,
                     const uint8_t *want, size_t size)
{
    return get_check_one_of(o, b, k, off, len, &want, &size, 1);
}

/* The body's MD5 in hex, as its ETag must be. */
static void md5_hex(const uint8_t *d, size_t n, char hex[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    assert_true(EVP_Digest(d, n, md, &len, EVP_md5(), NULL));
    for (unsigned i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_gw_objects.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd);
}

static const size_t sizes[] = {
    0, 1, 4095, 4096, STRIPE - 1, STRIPE, STRIPE + 1, 3 * STRIPE + 100, 1 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Small objects inline in their records (object/inline.c): no stripes, a
 * shard on each of the 7 homes, readable with 3 homes stopped, written with
 * them stopped and made whole again by a read; the default inline_max
 * is the bound; DELETE and listing. *ok: the homes holding a good
 * shard of their own position (home i, shard i). */
static void inline_homes(struct gw_objects *o, const char *key, char ids[7][16], int *ok)
{
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "inl", key, &j), 0);
    json_t *homes = json_object_get(json_object_get(j, "inline"), "homes");
    assert_int_equal(json_array_size(homes), 7);
    assert_int_equal(json_array_size(json_object_get(j, "stripes")), 0);
    *ok = 0;
    for (size_t i = 0; i < 7; i++) {
        json_t *h = json_array_get(homes, i);
        snprintf(ids[i], 16, "%s", json_string_value(json_object_get(h, "node")));
        *ok += strcmp(json_string_value(json_object_get(h, "state")), "ok") == 0 &&
               json_integer_value(json_object_get(h, "shard")) == (json_int_t)i;
    }
    json_decref(j);
}

/* Reads key (exact each time) until every one of its 7 homes holds its own
 * good shard: read repair, late answers included, made it whole. */
static void read_until_whole(struct gw_objects *o, const char *key, const uint8_t *body, size_t len,
                             char ids[7][16])
{
    int ok = 0;
    for (int t = 0; t < 200 && ok < 7; t++) {
        assert_int_equal(get_check(o, "inl", key, 0, UINT64_MAX, body, len), 0);
        inline_homes(o, key, ids, &ok);
        if (ok < 7)
            usleep(20000);
    }
    assert_int_equal(ok, 7);
}

/* Flips a bit of the shard home `node` holds of inl/key (the node takes it
 * as a new tail of the same record); *blob: what it holds now. */
static void corrupt_shard(struct gw_objects *o, int node, const char *key, void **blob, size_t *len)
{
    struct node_client *c;
    assert_int_equal(gw_client_get(o, node, &c), 0);
    assert_int_equal(node_client_get_meta(c, "inl", key, blob, len), 0);
    json_t *rec = gw_rec_load(*blob, *len);
    ((uint8_t *)*blob)[*len - 1] ^= 1;
    assert_int_equal(node_client_put_meta(c, "inl", key, gw_rec_version(rec), 0, *blob, *len, NULL),
                     0);
    gw_client_put(o, node, c, 0);
    json_decref(rec);
}

/* Whether home `node` still holds blob (the corrupt shard). */
static bool holds(struct gw_objects *o, int node, const char *key, const void *blob, size_t len)
{
    struct node_client *c;
    void *now;
    size_t nlen;
    assert_int_equal(gw_client_get(o, node, &c), 0);
    assert_int_equal(node_client_get_meta(c, "inl", key, &now, &nlen), 0);
    gw_client_put(o, node, c, 0);
    bool same = nlen == len && memcmp(now, blob, len) == 0;
    free(now);
    return same;
}

/* Until home `node` no longer holds blob: a scan's read may end at its
 * read quorum and rewrite a late home's shard when that home answers. */
static void wait_rewritten(struct gw_objects *o, int node, const char *key, const void *blob,
                           size_t len)
{
    for (int t = 0; t < 500 && holds(o, node, key, blob, len); t++)
        usleep(10000);
    assert_false(holds(o, node, key, blob, len));
}

struct fan_probe {
    pthread_t caller;
    atomic_int runs[8];
    atomic_int on_caller; /* jobs run on the caller's own thread */
};

static void fan_probe_job(void *arg, int i)
{
    struct fan_probe *p = arg;
    atomic_fetch_add(&p->runs[i], 1);
    if (pthread_equal(pthread_self(), p->caller))
        atomic_fetch_add(&p->on_caller, 1);
}

/* gw_fanout_run runs every job once, and the caller takes one share itself:
 * a single job costs no thread a wake-up, n jobs wake n - 1. */
static void test_fanout_run(void **state)
{
    (void)state;
    struct gw_objects o = {0};
    assert_int_equal(gw_fanout_create(4, &o.fan), 0);
    for (int n = 1; n <= 8; n++) {
        struct fan_probe p = {.caller = pthread_self()};
        gw_fanout_run(&o, n, fan_probe_job, &p);
        for (int i = 0; i < 8; i++)
            assert_int_equal(atomic_load(&p.runs[i]), i < n);
        assert_int_equal(atomic_load(&p.on_caller), 1);
    }
    gw_fanout_destroy(o.fan);
}

/* Jobs that all wait at a barrier until the last arrives: each needs a thread of its own. */
struct fan_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int in, n;
};

static void fan_gate_job(void *arg, int i)
{
    (void)i;
    struct fan_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    if (++g->in == g->n)
        pthread_cond_broadcast(&g->cond);
    while (g->in < g->n)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* The pool grows while jobs wait (12 at once, blocking each other until all
 * run: 11 threads beside the caller, or the test hangs) and shrinks back to
 * the threads it keeps once the extra ones were idle; it grows again after. */
static void test_fanout_grows_and_shrinks(void **state)
{
    (void)state;
    struct gw_objects o = {0};
    assert_int_equal(gw_fanout_create(2, &o.fan), 0);
    assert_int_equal(gw_fanout_threads(o.fan), 2);
    gw_fanout_idle_ms(o.fan, 100);
    for (int round = 0; round < 2; round++) {
        struct fan_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 12};
        gw_fanout_run(&o, 12, fan_gate_job, &g);
        assert_int_equal(g.in, 12);
        int n = 0;
        for (int waited = 0; waited < 5000 && (n = gw_fanout_threads(o.fan)) > 2; waited += 20)
            usleep(20 * 1000);
        assert_int_equal(n, 2);
    }
    gw_fanout_destroy(o.fan);
}

static int size_of_a(const char *key, const struct gw_object_info *info, void *arg)
{
    if (strcmp(key, "a") == 0)
        *(uint64_t *)arg = info->size;
    return 0;
}

static void test_inline_objects(void **state)
{
    (void)state;
    /* Out of bounds: refused, with a message naming the option. */
    char msg[256] = "";
    struct gw_objects *o = NULL;
    for (int i = 0; i < 2; i++) {
        json_t *bad = json_pack("{s:i}", "inline_max", i ? GW_INLINE_CAP + 1 : -1);
        assert_int_equal(gw_objects_open_embedded_opts(dir, bad, &o, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "inline_max"));
        json_decref(bad);
    }
    /* Chunks large enough that a body of inline_max fits in one stripe (a
     * body that fills a stripe is written as it arrives, never inline). */
    o = open_cluster_with(GW_INLINE_MAX, GW_INLINE_MAX, "direct");
    assert_int_equal(gw_bucket_create(o, "inl"), 0);
    uint8_t d[GW_INLINE_MAX + 1], e[3000];
    fill(d, sizeof(d), 7);
    fill(e, sizeof(e), 8);
    assert_int_equal(put(o, "inl", "a", d, 1000), 0);
    assert_int_equal(put(o, "inl", "max", d, GW_INLINE_MAX), 0);
    assert_int_equal(put(o, "inl", "over", d, sizeof(d)), 0);
    char ids[7][16];
    int ok;
    /* Each PUT returned at its write quorum: the last homes may take a moment. */
    read_until_whole(o, "a", d, 1000, ids);
    read_until_whole(o, "max", d, GW_INLINE_MAX, ids);
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "inl", "over", &j), 0);
    assert_null(json_object_get(j, "inline"));
    assert_int_equal(json_array_size(json_object_get(j, "stripes")), 1);
    json_decref(j);
    assert_int_equal(get_check(o, "inl", "max", 100, 200, d, GW_INLINE_MAX), 0);
    assert_int_equal(get_check(o, "inl", "over", 0, UINT64_MAX, d, sizeof(d)), 0);
    /* A put that asked for stripes (a volume's) has them, however small. */
    struct gw_put *p;
    assert_int_equal(gw_put_begin(o, "inl", "striped", NULL, &p), 0);
    gw_put_striped(p);
    assert_int_equal(gw_put_write(p, d, 1000), 0);
    assert_int_equal(gw_put_commit(p, NULL), 0);
    assert_int_equal(gw_objects_object_json(o, "inl", "striped", &j), 0);
    assert_null(json_object_get(j, "inline"));
    assert_int_equal(json_array_size(json_object_get(j, "stripes")), 1);
    json_decref(j);
    assert_int_equal(get_check(o, "inl", "striped", 0, UINT64_MAX, d, 1000), 0);
    /* 3 of a's homes stopped: read, then overwritten. */
    inline_homes(o, "a", ids, &ok);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[2 * i], false), 0);
    struct gw_objects_stats before, after;
    gw_objects_counters(o, &before);
    assert_int_equal(get_check(o, "inl", "a", 0, UINT64_MAX, d, 1000), 0);
    gw_objects_counters(o, &after); /* shards 0 and 2 (data) were stopped: parity rebuilt them */
    assert_int_equal(after.degraded_reads, before.degraded_reads + 1);
    assert_int_equal(put(o, "inl", "a", e, sizeof(e)), 0);
    assert_int_equal(get_check(o, "inl", "a", 10, 2000, e, sizeof(e)), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[2 * i], true), 0);
    /* A listing takes a key's newest record where its homes disagree (the
     * restarted ones still hold the one before). */
    uint64_t listed = 0;
    assert_int_equal(gw_object_list(o, "inl", "a", NULL, 0, size_of_a, &listed), 0);
    assert_int_equal(listed, sizeof(e));
    /* A read gives the restarted homes their shards (late answers too). */
    read_until_whole(o, "a", e, sizeof(e), ids);
    /* One home's shard corrupted (same record, a flipped shard bit: the node
     * takes it as a new tail): a read finds its crc wrong and rewrites it. */
    void *blob;
    size_t len;
    corrupt_shard(o, place_map_node(o->map, ids[1]), "a", &blob, &len);
    free(blob);
    uint64_t repairs = atomic_load(&o->meta_repairs);
    read_until_whole(o, "a", e, sizeof(e), ids);
    assert_true(atomic_load(&o->meta_repairs) > repairs);
    /* Home 1 given home 2's shard (placed before a membership change): two
     * homes hold shard 2, none shard 1, and a read gives home 1 its own.
     * Had it given a free shard instead, reads repairing side by side could
     * each pick one and leave two homes with one shard again (too few with 3
     * homes down: the inline_objects test's 503). */
    int from = place_map_node(o->map, ids[2]), to = place_map_node(o->map, ids[1]);
    struct node_client *c;
    assert_int_equal(gw_client_get(o, from, &c), 0);
    assert_int_equal(node_client_get_meta(c, "inl", "a", &blob, &len), 0);
    gw_client_put(o, from, c, 0);
    json_t *stored = gw_rec_load(blob, len);
    assert_int_equal(gw_client_get(o, to, &c), 0);
    assert_int_equal(
        node_client_put_meta(c, "inl", "a", gw_rec_version(stored), 0, blob, len, NULL), 0);
    gw_client_put(o, to, c, 0);
    json_decref(stored);
    free(blob);
    repairs = atomic_load(&o->meta_repairs);
    read_until_whole(o, "a", e, sizeof(e), ids);
    assert_true(atomic_load(&o->meta_repairs) > repairs);
    struct gw_object_info info;
    assert_int_equal(gw_object_head(o, "inl", "a", &info), 0);
    assert_int_equal(info.size, sizeof(e));
    gw_object_info_clear(&info);
    assert_int_equal(gw_object_delete(o, "inl", "a"), 0);
    assert_int_equal(get_check(o, "inl", "a", 0, UINT64_MAX, e, 0), -ENOENT);
    gw_objects_close(o);
}

/* An acknowledged inline overwrite is never read as the version before it,
 * even when fewer than k of the homes that hold it answer (the chaos test
 * found a read falling back to the striped version before it while a holder
 * was down). */
static void test_inline_never_older(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_with(CHUNK, GW_INLINE_MAX, "direct");
    assert_int_equal(gw_bucket_create(o, "inl"), 0);
    uint8_t d[GW_INLINE_MAX + 4000], e[2000];
    fill(d, sizeof(d), 9);
    fill(e, sizeof(e), 10);
    assert_int_equal(put(o, "inl", "b", d, sizeof(d)), 0); /* striped */
    int homes[PLACE_MAX_CHUNKS];
    assert_int_equal(gw_meta_homes(o, "inl", "b", homes), 0);
    const char *ids[7];
    for (int i = 0; i < 7; i++)
        ids[i] = o->nodes[homes[i]].id;
    /* The inline overwrite lands on the 4 homes that are up (W = k = 4) ... */
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], false), 0);
    assert_int_equal(put(o, "inl", "b", e, sizeof(e)), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], true), 0);
    /* ... then one of them stops: 3 answer with it, 3 with the striped one. */
    assert_int_equal(gw_objects_node_set_running(o, ids[3], false), 0);
    int rc = get_check(o, "inl", "b", 0, UINT64_MAX, e, sizeof(e)); /* size 2000 or an error */
    assert_true(rc != 0 && rc != -ENOENT); /* not decodable now; not gone, not the old body */
    assert_int_equal(gw_objects_node_set_running(o, ids[3], true), 0);
    for (int t = 0; t < 200 && (rc = get_check(o, "inl", "b", 0, UINT64_MAX, e, sizeof(e))); t++)
        usleep(20000);
    assert_int_equal(rc, 0);
    gw_objects_close(o);
}

static void test_roundtrip(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "bkt"), 0);
    assert_int_equal(gw_bucket_create(o, "bkt"), -EEXIST);
    assert_int_equal(gw_bucket_create(o, "Bad_Name"), -EINVAL);
    uint8_t *d = malloc(1 << 20);
    for (size_t i = 0; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "obj-%zu", sizes[i]);
        fill(d, sizes[i], (uint32_t)i);
        assert_int_equal(put(o, "bkt", key, d, sizes[i]), 0);
        assert_int_equal(get_check(o, "bkt", key, 0, UINT64_MAX, d, sizes[i]), 0);
        if (sizes[i] > 10) { /* ranges: inside one chunk, across chunks and stripes, the tail */
            assert_int_equal(get_check(o, "bkt", key, 3, 5, d, sizes[i]), 0);
            assert_int_equal(get_check(o, "bkt", key, sizes[i] / 3, sizes[i] / 2, d, sizes[i]), 0);
            assert_int_equal(get_check(o, "bkt", key, sizes[i] - 1, 1, d, sizes[i]), 0);
        }
        struct gw_object_info info;
        assert_int_equal(gw_object_head(o, "bkt", key, &info), 0);
        assert_int_equal(info.size, sizes[i]);
        assert_string_equal(info.content_type, "application/x-test");
        assert_string_equal(json_string_value(json_object_get(info.user_meta, "color")), "blue");
        /* The MD5 is taken off the request thread, stripe after stripe:
         * still the whole body's, in order (3 * STRIPE + 100 and 1 MiB
         * cycle through the window). */
        char md5[33];
        md5_hex(d, sizes[i], md5);
        assert_string_equal(info.etag, md5);
        gw_object_info_clear(&info);
    }
    /* A small object costs small chunks. */
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "bkt", "obj-1", &j), 0);
    json_t *s0 = json_array_get(json_object_get(j, "stripes"), 0);
    assert_int_equal(json_integer_value(json_object_get(s0, "chunk_len")), 64);
    assert_int_equal(json_array_size(json_object_get(s0, "chunks")), 9);
    json_decref(j);
    assert_int_equal(gw_objects_object_json(o, "bkt", "obj-0", &j), 0);
    assert_int_equal(json_array_size(json_object_get(j, "stripes")), 0);
    json_decref(j);
    assert_int_equal(get_check(o, "bkt", "nope", 0, UINT64_MAX, d, 0), -ENOENT);
    assert_int_equal(get_check(o, "nobkt", "x", 0, UINT64_MAX, d, 0), -ENOENT);
    free(d);
    gw_objects_close(o);
}

/* A GET's chunks land in memory registered once and kept for the next
 * fetches (stripe_fetch.c's rooms): GETs after the first register nothing on
 * the gateway's device. */
static void test_fetch_rooms_kept(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "rooms"), 0);
    size_t n = 5 * STRIPE + 100; /* several stripes: the next one's reads go out early */
    uint8_t *d = malloc(n);
    fill(d, n, 77);
    assert_int_equal(put(o, "rooms", "k", d, n), 0);
    assert_int_equal(get_check(o, "rooms", "k", 0, UINT64_MAX, d, n), 0);
    struct inec_device_stats s0, s1;
    inec_device_stats(o->dev, &s0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(get_check(o, "rooms", "k", 0, UINT64_MAX, d, n), 0);
    inec_device_stats(o->dev, &s1);
    /* One room per stripe read would be 120 here. */
    assert_true(s1.registrations - s0.registrations < 5);
    free(d);
    gw_objects_close(o);
}

struct names {
    char keys[64][64];
    int n;
};

static int collect(const char *key, const struct gw_object_info *info, void *arg)
{
    (void)info;
    struct names *nm = arg;
    snprintf(nm->keys[nm->n++], sizeof(nm->keys[0]), "%s", key);
    return nm->n == 64;
}

static int collect_b(const struct gw_bucket_info *b, void *arg)
{
    struct names *nm = arg;
    snprintf(nm->keys[nm->n++], sizeof(nm->keys[0]), "%s", b->name);
    return 0;
}

static void test_overwrite_delete_list(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "list"), 0);
    uint8_t a[3000], b[50000];
    fill(a, sizeof(a), 1);
    fill(b, sizeof(b), 2);
    assert_int_equal(put(o, "list", "k", a, sizeof(a)), 0);
    struct gw_object_info i1, i2;
    assert_int_equal(gw_object_head(o, "list", "k", &i1), 0);
    assert_int_equal(put(o, "list", "k", b, sizeof(b)), 0);
    assert_int_equal(gw_object_head(o, "list", "k", &i2), 0);
    assert_true(i2.version > i1.version);
    assert_string_not_equal(i1.etag, i2.etag);
    gw_object_info_clear(&i1);
    gw_object_info_clear(&i2);
    assert_int_equal(get_check(o, "list", "k", 0, UINT64_MAX, b, sizeof(b)), 0);
    /* Keys land on different metadata nodes; the listing merges them in byte order. */
    const char *keys[] = {"z", "a/2", "a/1", "b", "a/10", "A", "a"};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(put(o, "list", keys[i], a, 10), 0);
    struct names nm = {0};
    assert_int_equal(gw_object_list(o, "list", NULL, NULL, 0, collect, &nm), 0);
    const char *want[] = {"A", "a", "a/1", "a/10", "a/2", "b", "k", "z"};
    assert_int_equal(nm.n, 8);
    for (int i = 0; i < 8; i++)
        assert_string_equal(nm.keys[i], want[i]);
    nm.n = 0;
    assert_int_equal(gw_object_list(o, "list", "a/", NULL, 0, collect, &nm), 0);
    assert_int_equal(nm.n, 3);
    assert_string_equal(nm.keys[2], "a/2");
    nm.n = 0;
    assert_int_equal(gw_object_list(o, "list", "a/", "a/1", 1, collect, &nm), 0);
    assert_int_equal(nm.n, 2);
    assert_string_equal(nm.keys[0], "a/10");
    assert_int_equal(gw_bucket_delete(o, "list"), -ENOTEMPTY);
    assert_int_equal(gw_object_delete(o, "list", "a/1"), 0);
    assert_int_equal(gw_object_delete(o, "list", "a/1"), -ENOENT);
    assert_int_equal(gw_object_head(o, "list", "a/1", NULL), -ENOENT);
    nm.n = 0;
    assert_int_equal(gw_object_list(o, "list", "a/", NULL, 0, collect, &nm), 0);
    assert_int_equal(nm.n, 2);
    /* A listing that said it wants few keys still lists them all when asked
     * for more: the nodes' small first pages (16) are followed by full ones. */
    char mk[16];
    for (int i = 0; i < 50; i++) {
        snprintf(mk, sizeof(mk), "m/%02d", i);
        assert_int_equal(put(o, "list", mk, a, 10), 0);
    }
    for (int i = 0; i < 50; i += 5) {
        snprintf(mk, sizeof(mk), "m/%02d", i);
        assert_int_equal(gw_object_delete(o, "list", mk), 0);
    }
    for (size_t w = 0; w < 3; w++) {
        nm.n = 0;
        assert_int_equal(gw_object_list(o, "list", "m/", NULL, w * 20, collect, &nm), 0);
        assert_int_equal(nm.n, 40);
        for (int i = 0, k = 0; i < 50; i++) {
            snprintf(mk, sizeof(mk), "m/%02d", i);
            if (i % 5)
                assert_string_equal(nm.keys[k++], mk);
        }
    }
    for (int i = 0; i < 50; i++) {
        snprintf(mk, sizeof(mk), "m/%02d", i);
        gw_object_delete(o, "list", mk);
    }
    for (int i = 0; i < 8; i++)
        gw_object_delete(o, "list", want[i]);
    assert_int_equal(gw_bucket_create(o, "other"), 0);
    nm.n = 0;
    assert_int_equal(gw_bucket_list(o, collect_b, &nm), 0);
    assert_int_equal(nm.n, 2);
    assert_string_equal(nm.keys[0], "list");
    assert_string_equal(nm.keys[1], "other");
    assert_int_equal(gw_bucket_delete(o, "list"), 0);
    assert_int_equal(gw_bucket_head(o, "list", NULL), -ENOENT);
    assert_int_equal(put(o, "list", "x", a, 1), -ENOENT);
    gw_objects_close(o);
}

static void test_lost_nodes(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "faults");
    uint8_t *d = malloc(1 << 20);
    for (size_t i = 0; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f-%zu", sizes[i]);
        fill(d, sizes[i], 100 + (uint32_t)i);
        assert_int_equal(put(o, "faults", key, d, sizes[i]), 0);
    }
    /* m = 3 nodes gone: every object still reads byte-exact, degraded. */
    assert_int_equal(gw_objects_node_set_running(o, "n1", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n4", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n7", false), 0);
    for (size_t i = 0; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f-%zu", sizes[i]);
        fill(d, sizes[i], 100 + (uint32_t)i);
        assert_int_equal(get_check(o, "faults", key, 0, UINT64_MAX, d, sizes[i]), 0);
        if (sizes[i] > 100)
            assert_int_equal(get_check(o, "faults", key, 50, sizes[i] / 2, d, sizes[i]), 0);
    }
    struct gw_objects_stats st;
    gw_objects_counters(o, &st);
    assert_true(st.degraded_reads > 0);
    assert_true(st.repair_queue > 0);
    assert_int_equal(st.failed_reads, 0);
    /* Writes need every node of a stripe: refused, and nothing half-visible. */
    assert_int_not_equal(put(o, "faults", "f-1", d, 100), 0);
    fill(d, 1, 101);
    assert_int_equal(get_check(o, "faults", "f-1", 0, UINT64_MAX, d, 1), 0);
    /* m + 1: every stripe with a chunk on all four is lost: -EIO, never wrong bytes. */
    assert_int_equal(gw_objects_node_set_running(o, "n2", false), 0);
    int eio = 0;
    for (size_t i = 1; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f-%zu", sizes[i]);
        fill(d, sizes[i], 100 + (uint32_t)i);
        int rc = get_check(o, "faults", key, 0, UINT64_MAX, d, sizes[i]);
        assert_true(rc == 0 || rc == -EIO || rc == -EHOSTDOWN);
        eio += rc != 0;
    }
    /* A GET reads only the data chunks it needs: a stripe whose needed chunks
     * all survive still reads; the 1 MiB object needs every node. */
    assert_true(eio >= 1);
    fill(d, 1 << 20, 100 + (uint32_t)(NSIZES - 1));
    int rc = get_check(o, "faults", "f-1048576", 0, UINT64_MAX, d, 1 << 20);
    assert_true(rc == -EIO || rc == -EHOSTDOWN); /* -EHOSTDOWN: its metadata quorum is gone */
    gw_objects_counters(o, &st);
    assert_true(st.failed_reads > 0);
    json_t *c;
    assert_int_equal(gw_objects_cluster_json(o, &c), 0);
    int up = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(c, "nodes"), i, n) up +=
        json_is_true(json_object_get(n, "up"));
    assert_int_equal(up, 5);
    json_decref(c);
    assert_int_equal(gw_objects_node_set_running(o, "n1", true), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n2", true), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n4", true), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n7", true), 0);
    free(d);
    gw_objects_close(o);
}

static int count_state(json_t *obj, const char *state, const char *node)
{
    int n = 0;
    size_t i, c;
    json_t *st, *ch;
    json_array_foreach(json_object_get(obj, "stripes"), i, st)
    {
        json_array_foreach(json_object_get(st, "chunks"), c, ch)
        {
            if (strcmp(json_string_value(json_object_get(ch, "state")), state) == 0) {
                assert_string_equal(json_string_value(json_object_get(ch, "node")), node);
                n++;
            }
        }
    }
    return n;
}

/* Writes with nodes down honour the write quorum (default k + 1 = 7 of 9):
 * one or two nodes down, PUTs succeed with those chunks missing (recorded,
 * queued for repair, read degraded, also once the node is back); three down,
 * PUTs fail 503 and the previous version stays. */
static void test_degraded_writes(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "dwrite");
    uint8_t *d = malloc(1 << 20);
    fill(d, 3 * STRIPE, 1);
    assert_int_equal(put(o, "dwrite", "old", d, 3 * STRIPE), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n4", false), 0);
    for (size_t i = 1; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "w-%zu", sizes[i]);
        fill(d, sizes[i], 200 + (uint32_t)i);
        assert_int_equal(put(o, "dwrite", key, d, sizes[i]), 0);
        assert_int_equal(get_check(o, "dwrite", key, 0, UINT64_MAX, d, sizes[i]), 0);
    }
    struct gw_objects_stats st;
    gw_objects_counters(o, &st);
    assert_true(st.degraded_writes >= NSIZES - 1); /* every stripe uses all 9 nodes */
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "dwrite", "w-1048576", &j), 0);
    size_t nstripes = json_array_size(json_object_get(j, "stripes"));
    assert_int_equal(count_state(j, "missing", "n4"), (int)nstripes);
    json_decref(j);
    assert_int_equal(gw_objects_repair_json(o, &j), 0);
    size_t i, queued = 0;
    json_t *e;
    json_array_foreach(j, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "reason")), "write-missing") == 0) {
            assert_string_equal(json_string_value(json_object_get(e, "node")), "n4");
            queued++;
        }
    }
    assert_true(queued >= nstripes);
    json_decref(j);
    /* The node is back: the chunks it missed are still lost, reads still exact. */
    assert_int_equal(gw_objects_node_set_running(o, "n4", true), 0);
    for (size_t i = 1; i < NSIZES; i++) {
        char key[32];
        snprintf(key, sizeof(key), "w-%zu", sizes[i]);
        fill(d, sizes[i], 200 + (uint32_t)i);
        assert_int_equal(get_check(o, "dwrite", key, 0, UINT64_MAX, d, sizes[i]), 0);
    }
    /* n - write quorum = 2 nodes down: still written. */
    assert_int_equal(gw_objects_node_set_running(o, "n1", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n7", false), 0);
    fill(d, 2 * STRIPE + 5, 300);
    assert_int_equal(put(o, "dwrite", "two", d, 2 * STRIPE + 5), 0);
    assert_int_equal(get_check(o, "dwrite", "two", 0, UINT64_MAX, d, 2 * STRIPE + 5), 0);
    /* A third: below the quorum, refused (503), the old version intact. */
    assert_int_equal(gw_objects_node_set_running(o, "n4", false), 0);
    fill(d, 100, 301);
    assert_int_equal(put(o, "dwrite", "old", d, 100), -EHOSTDOWN);
    assert_int_equal(put(o, "dwrite", "old", d, 2 * STRIPE), -EHOSTDOWN);
    fill(d, 3 * STRIPE, 1);
    assert_int_equal(get_check(o, "dwrite", "old", 0, UINT64_MAX, d, 3 * STRIPE), 0);
    for (const char *id = "n1"; id; id = strcmp(id, "n1") == 0   ? "n4"
                                         : strcmp(id, "n4") == 0 ? "n7"
                                                                 : NULL)
        assert_int_equal(gw_objects_node_set_running(o, id, true), 0);
    assert_int_equal(get_check(o, "dwrite", "old", 0, UINT64_MAX, d, 3 * STRIPE), 0);

    /* write_quorum is the pool's knob: n makes one node down refuse writes;
     * out of [k, n] it is refused with a clear message. */
    char m[256];
    json_t *spec = json_pack("{s:s,s:s,s:i,s:i}", "name", "strict", "profile", "rs:k=6,m=3",
                             "chunk_size", CHUNK, "write_quorum", 9),
           *out = NULL;
    assert_int_equal(gw_objects_pool_create(o, spec, &out, m, sizeof(m)), 0);
    assert_int_equal(json_integer_value(json_object_get(out, "write_quorum")), 9);
    json_decref(out);
    json_decref(spec);
    assert_int_equal(gw_bucket_create_in_pool(o, "strict", "strict"), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n2", false), 0);
    assert_int_equal(put(o, "strict", "x", d, 1000), -EHOSTDOWN);
    assert_int_equal(put(o, "dwrite", "x", d, 1000), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n2", true), 0);
    assert_int_equal(put(o, "strict", "x", d, 1000), 0);
    assert_int_equal(get_check(o, "strict", "x", 0, UINT64_MAX, d, 1000), 0);
    for (int q = 5; q <= 10; q += 5) {
        spec =
            json_pack("{s:s,s:s,s:i}", "name", "bad", "profile", "rs:k=6,m=3", "write_quorum", q);
        assert_int_equal(gw_objects_pool_create(o, spec, &out, m, sizeof(m)), -EINVAL);
        assert_non_null(strstr(m, "write_quorum: must be an integer in [k=6, n=9]"));
        json_decref(spec);
    }
    free(d);
    gw_objects_close(o);
}

/* Encode sessions are set up once and reused stripe after stripe; a node
 * stopped in the middle of a PUT costs its stripes one chunk each (the write
 * quorum k + 1 still holds): the PUT succeeds and reads back exact; after the
 * node's restart the idle session's first run fails and a new session takes
 * over the same stripe with every node. */
static void test_session_reuse(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "sess");
    size_t n = 5 * STRIPE + 123;
    uint8_t *d = malloc(n), *e = malloc(n);
    fill(d, n, 7);
    fill(e, n, 8);
    struct gw_objects_stats st;
    assert_int_equal(put(o, "sess", "a", d, n), 0);
    assert_int_equal(put(o, "sess", "b", e, 100), 0);
    assert_int_equal(put(o, "sess", "c", e, n), 0);
    /* 13 stripes, all on the same nine nodes: at most one session per stripe in flight */
    gw_objects_counters(o, &st);
    assert_true(st.sessions_opened >= 1 && st.sessions_opened <= 3);
    uint64_t opened = st.sessions_opened;
    assert_int_equal(get_check(o, "sess", "a", 0, UINT64_MAX, d, n), 0);
    assert_int_equal(get_check(o, "sess", "b", 0, UINT64_MAX, e, 100), 0);

    struct gw_put *p;
    assert_int_equal(gw_put_begin(o, "sess", "a", NULL, &p), 0);
    assert_int_equal(gw_put_write(p, e, 2 * STRIPE), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n3", false), 0);
    /* bounded by timeout_ms: the suite's timeout would catch a hang */
    assert_int_equal(gw_put_write(p, e + 2 * STRIPE, n - 2 * STRIPE), 0);
    assert_int_equal(gw_put_commit(p, NULL), 0);
    assert_int_equal(get_check(o, "sess", "a", 0, UINT64_MAX, e, n), 0); /* degraded */
    gw_objects_counters(o, &st);
    assert_true(st.degraded_writes >= 4); /* every stripe after the stop, at least */
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "sess", "a", &j), 0);
    size_t si;
    json_t *stripe;
    int missing = 0;
    json_array_foreach(json_object_get(j, "stripes"), si, stripe)
    {
        json_t *ch = json_array_get(json_object_get(stripe, "chunks"), 0);
        for (size_t c = 0; ch; ch = json_array_get(json_object_get(stripe, "chunks"), ++c))
            if (!strcmp(json_string_value(json_object_get(ch, "state")), "missing")) {
                assert_string_equal(json_string_value(json_object_get(ch, "node")), "n3");
                missing++;
            }
    }
    assert_true(missing >= 4);
    json_decref(j);
    assert_int_equal(gw_objects_node_set_running(o, "n3", true), 0);
    assert_int_equal(get_check(o, "sess", "a", 0, UINT64_MAX, e, n), 0);
    assert_int_equal(put(o, "sess", "a", d, n), 0);
    assert_int_equal(get_check(o, "sess", "a", 0, UINT64_MAX, d, n), 0);
    gw_objects_counters(o, &st);
    assert_true(st.sessions_opened > opened);
    free(d);
    free(e);
    gw_objects_close(o);
}

/* Flips one byte of the first stored copy of `pattern` in any node's segments. */
static int flip_on_disk(const uint8_t *pattern, size_t plen)
{
    for (int nd = 0; nd < 9; nd++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/node-%d", dir, nd);
        DIR *dd = opendir(path);
        struct dirent *e;
        while (dd && (e = readdir(dd))) {
            if (strncmp(e->d_name, "seg-", 4) != 0)
                continue;
            char f[700];
            snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
            int fd = open(f, O_RDWR);
            struct stat sb;
            fstat(fd, &sb);
            uint8_t *buf = malloc((size_t)sb.st_size);
            ssize_t r = pread(fd, buf, (size_t)sb.st_size, 0);
            uint8_t *hit = r > 0 ? memmem(buf, (size_t)r, pattern, plen) : NULL;
            if (hit) {
                uint8_t x = (uint8_t)(hit[plen / 2] ^ 0x40);
                assert_int_equal(pwrite(fd, &x, 1, hit - buf + (off_t)plen / 2), 1);
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

static void test_corrupt_chunk(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "corrupt");
    uint8_t d[STRIPE + 500];
    fill(d, sizeof(d), 77);
    assert_int_equal(put(o, "corrupt", "c", d, sizeof(d)), 0);
    assert_int_equal(flip_on_disk(d + CHUNK, 64), 0); /* data chunk 1 of stripe 0 */
    struct gw_objects_stats before, after;
    gw_objects_counters(o, &before);
    assert_int_equal(get_check(o, "corrupt", "c", 0, UINT64_MAX, d, sizeof(d)), 0);
    gw_objects_counters(o, &after);
    assert_int_equal(after.corrupt_chunks, before.corrupt_chunks + 1);
    /* The corrupt stripe decoded; a healthy one only if a read of it was
     * late enough to be hedged (a loaded machine). */
    uint64_t degraded = after.degraded_reads - before.degraded_reads;
    assert_true(degraded >= 1 && degraded <= 1 + after.hedged_reads - before.hedged_reads);
    json_t *q;
    assert_int_equal(gw_objects_repair_json(o, &q), 0);
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(q, i, e) found |=
        strcmp(json_string_value(json_object_get(e, "key")), "c") == 0 &&
        json_integer_value(json_object_get(e, "chunk")) == 1 &&
        strcmp(json_string_value(json_object_get(e, "reason")), "corrupt") == 0;
    assert_true(found);
    json_decref(q);
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "corrupt", "c", &j), 0);
    json_t *c1 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "stripes"), 0), "chunks"), 1);
    assert_string_equal(json_string_value(json_object_get(c1, "state")), "corrupt");
    json_decref(j);
    gw_objects_close(o);
}

/* --- the repair service ----------------------------------------------------------- */

/* Until a scan after `scans` scans ran and the repair queue is empty. */
static void wait_repaired(struct gw_objects *o, int64_t scans)
{
    for (int i = 0; i < 6000; i++) {
        json_t *st;
        assert_int_equal(gw_objects_repair_status(o, &st), 0);
        const char *state = json_string_value(json_object_get(st, "state"));
        const json_t *scan = json_object_get(st, "scan");
        bool done =
            json_integer_value(json_object_get(scan, "scans")) > scans &&
            !json_is_true(json_object_get(scan, "running")) && strcmp(state, "idle") == 0 &&
            json_integer_value(json_object_get(json_object_get(st, "queue"), "stripes")) == 0 &&
            json_integer_value(json_object_get(st, "pending")) == 0;
        json_decref(st);
        if (done)
            return;
        usleep(10000);
    }
    fail_msg("the repair service did not finish");
}

static int64_t scans_now(struct gw_objects *o)
{
    json_t *st;
    assert_int_equal(gw_objects_repair_status(o, &st), 0);
    int64_t n = json_integer_value(json_object_get(json_object_get(st, "scan"), "scans"));
    json_decref(st);
    return n;
}

/* Until `more` scans after this call have completed (not one begun before it). */
static void wait_scans(struct gw_objects *o, int more)
{
    int64_t until = scans_now(o) + more + 1;
    for (int t = 0; t < 1000 && scans_now(o) < until; t++)
        usleep(10000);
    assert_true(scans_now(o) >= until);
}

/* The scanner reads inline records whole from every home (so repairs their
 * shards) only on the scans where a home may lack one or hold a bad one:
 * one asked for, and the next after a node's down or suspect verdict. The
 * periodic scans between them leave a bad parity shard (which no GET asks
 * for while the data shards' homes answer) for those. */
static void test_scan_inline_when_due(void **state)
{
    (void)state;
    struct gw_objects *o =
        open_opts(json_pack("{s:i,s:i,s:{s:b,s:i}}", "chunk_size", CHUNK, "timeout_ms", 3000,
                            "repair", "paused", 1, "scan_interval_ms", 20));
    assert_int_equal(gw_bucket_create(o, "inl"), 0);
    uint8_t d[3000];
    fill(d, sizeof(d), 9);
    assert_int_equal(put(o, "inl", "a", d, sizeof(d)), 0);
    char ids[7][16];
    int ok;
    read_until_whole(o, "a", d, sizeof(d), ids); /* the PUT returned at its write quorum */
    int parity = place_map_node(o->map, ids[6]);
    /* Taken before the wait: a scan that begins after it has made its
     * pass for this count, so only a verdict moving after it makes one due. */
    uint64_t troubles = gw_peer_troubles(o);
    wait_scans(o, 2); /* the first scan's pass is over */
    void *blob;
    size_t len;
    corrupt_shard(o, parity, "a", &blob, &len);
    wait_scans(o, 3);
    if (gw_peer_troubles(o) == troubles) /* else a node's verdict moved: a pass was due */
        assert_true(holds(o, parity, "a", blob, len));
    /* A scan asked for reads it whole: the shard is rewritten. */
    json_t *scan = json_pack("{s:b}", "scan", 1);
    char msg[128];
    assert_int_equal(gw_objects_repair_set(o, scan, msg, sizeof(msg)), 0);
    json_decref(scan);
    wait_scans(o, 1);
    wait_rewritten(o, parity, "a", blob, len);
    free(blob);
    /* So does the next periodic scan after a node failed a call. */
    corrupt_shard(o, parity, "a", &blob, &len);
    gw_peer_failed(o, place_map_node(o->map, ids[0]), -ETIMEDOUT, false);
    wait_scans(o, 1);
    wait_rewritten(o, parity, "a", blob, len);
    free(blob);
    inline_homes(o, "a", ids, &ok);
    assert_int_equal(ok, 7);
    assert_int_equal(get_check(o, "inl", "a", 0, UINT64_MAX, d, sizeof(d)), 0);
    gw_objects_close(o);
}

/* Every chunk of the object reads back ok (the control API reads them all) and none is on `off`. */
static void assert_whole(struct gw_objects *o, const char *key, const char *off)
{
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, "rep", key, &j), 0);
    size_t i, c;
    json_t *st, *ch;
    json_array_foreach(json_object_get(j, "stripes"), i, st)
    {
        json_array_foreach(json_object_get(st, "chunks"), c, ch)
        {
            assert_string_equal(json_string_value(json_object_get(ch, "state")), "ok");
            if (off)
                assert_string_not_equal(json_string_value(json_object_get(ch, "node")), off);
        }
    }
    json_decref(j);
}

static int64_t node_chunks(struct gw_objects *o, const char *id)
{
    json_t *cl;
    assert_int_equal(gw_objects_cluster_json(o, &cl), 0);
    size_t i;
    json_t *n;
    int64_t chunks = -1;
    json_array_foreach(json_object_get(cl, "nodes"), i,
                       n) if (strcmp(json_string_value(json_object_get(n, "id")), id) == 0) chunks =
        json_integer_value(json_object_get(n, "chunks"));
    json_decref(cl);
    return chunks;
}

/* The node holding chunk c of stripe si of bucket/key (its index in the map: "n3" is 3). */
static int chunk_node(struct gw_objects *o, const char *b, const char *k, size_t si, int c)
{
    json_t *j;
    assert_int_equal(gw_objects_object_json(o, b, k, &j), 0);
    json_t *ch = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "stripes"), si), "chunks"), (size_t)c);
    int node = atoi(json_string_value(json_object_get(ch, "node")) + 1);
    json_decref(j);
    return node;
}

/* A degraded GET rebuilds an RS stripe at the gateway from k chunks read
 * straight from their nodes, not through the decode DEG (degraded_read
 * "direct", the default): exact bytes for every pattern of up to m = 3 of
 * the 9 nodes down, for a one-stripe object and a many-stripe one, whole and
 * in ranges across stripe boundaries, with no decode run, and the lost
 * chunks still queued for repair. */
static void test_degraded_direct(void **state)
{
    (void)state;
    json_t *bad = json_pack("{s:s}", "degraded_read", "fast");
    struct gw_objects *o = NULL;
    char msg[256] = "";
    assert_int_equal(gw_objects_open_embedded_opts(dir, bad, &o, msg, sizeof(msg)), -EINVAL);
    assert_non_null(strstr(msg, "degraded_read"));
    json_decref(bad);
    o = open_cluster();
    gw_bucket_create(o, "direct");
    size_t n1 = STRIPE - 1000, nm = 7 * STRIPE + 555;
    uint8_t *one = malloc(n1), *many = malloc(nm);
    fill(one, n1, 31);
    fill(many, nm, 32);
    assert_int_equal(put(o, "direct", "one", one, n1), 0);
    assert_int_equal(put(o, "direct", "many", many, nm), 0);
    struct gw_objects_stats st0, st;
    gw_objects_counters(o, &st0);
    int patterns = 0;
    for (unsigned set = 1; set < 1u << 9; set++) {
        if (__builtin_popcount(set) > 3)
            continue;
        char id[8];
        for (int i = 0; i < 9; i++)
            if (set & 1u << i) {
                snprintf(id, sizeof(id), "n%d", i);
                assert_int_equal(gw_objects_node_set_running(o, id, false), 0);
            }
        assert_int_equal(get_check(o, "direct", "one", 0, UINT64_MAX, one, n1), 0);
        assert_int_equal(get_check(o, "direct", "one", CHUNK + 7, 2 * CHUNK, one, n1), 0);
        assert_int_equal(get_check(o, "direct", "many", 0, UINT64_MAX, many, nm), 0);
        /* From inside stripe 2 to inside stripe 5, and the short last stripe. */
        assert_int_equal(
            get_check(o, "direct", "many", 2 * STRIPE + CHUNK + 3, 3 * STRIPE, many, nm), 0);
        assert_int_equal(get_check(o, "direct", "many", 7 * STRIPE - 10, 100, many, nm), 0);
        for (int i = 0; i < 9; i++)
            if (set & 1u << i) {
                snprintf(id, sizeof(id), "n%d", i);
                assert_int_equal(gw_objects_node_set_running(o, id, true), 0);
            }
        patterns++;
    }
    assert_int_equal(patterns, 9 + 36 + 84);
    gw_objects_counters(o, &st);
    assert_true(st.degraded_reads - st0.degraded_reads >= (uint64_t)patterns);
    assert_int_equal(st.decode_runs, st0.decode_runs);
    assert_int_equal(st.decode_sessions, st0.decode_sessions);
    assert_int_equal(st.failed_reads, st0.failed_reads);
    assert_true(st.repair_queue > 0);
    free(one);
    free(many);
    gw_objects_close(o);
}

/* A read reports a stripe's lost chunks to the repair queue once: the same
 * report again within GW_REPAIR_NOTE_REPEAT_MS does not wake the worker
 * (each wake is a queue write, a listing and a repair attempt), other lost
 * chunks of the stripe do. */
static bool note_kicks(struct gw_objects *o, int *lost, int nlost)
{
    struct gw_repair *r = o->rep;
    /* Counted, not kick itself: the worker clears kick each time round. */
    pthread_mutex_lock(&r->lock);
    uint64_t wakes = r->note_wakes;
    pthread_mutex_unlock(&r->lock);
    const char *at[2] = {"n1", "n2"}, *reason[2] = {"node-down", "node-down"};
    gw_repair_note(o, "note", "k", "00112233445566778899aabbccddeeff", 3, CHUNK, lost, at, reason,
                   nlost, false, false);
    pthread_mutex_lock(&r->lock);
    bool kicked = r->note_wakes != wakes;
    pthread_mutex_unlock(&r->lock);
    return kicked;
}

static void test_repair_note_once(void **state)
{
    (void)state;
    /* No periodic scans: the end of a scan wakes the worker too. */
    json_t *opts = json_pack("{s:i,s:i,s:{s:b,s:i}}", "chunk_size", CHUNK, "timeout_ms", 3000,
                             "repair", "paused", 1, "scan_interval_ms", 0);
    struct gw_objects *o = NULL;
    char msg[256];
    assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
    json_decref(opts);
    int one[] = {1}, two[] = {1, 2};
    assert_true(note_kicks(o, one, 1));
    for (int i = 0; i < 20; i++)
        assert_false(note_kicks(o, one, 1));
    assert_true(note_kicks(o, two, 2));
    assert_false(note_kicks(o, two, 2));
    gw_objects_close(o);
}

/* Degraded GETs run the decode DEG through sessions kept from stripe to
 * stripe and object to object, whatever order a stripe's chunks sit on the
 * nodes in: many stripes, few sessions. The bytes stay exact when the loss
 * pattern changes in the middle of a GET (a node stopped, another
 * restarted: a kept session must not be trusted) and when a chunk a session
 * reads is corrupt (its run fails, the stripe is read around it). */
static void test_decode_sessions(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_with(CHUNK, 0, "deg"); /* RS star decodes through the DEG */
    gw_bucket_create(o, "dec");
    size_t n = 12 * STRIPE + 321;
    uint8_t *d = malloc(n), *e = malloc(n), *buf = malloc(n);
    fill(d, n, 21);
    fill(e, n, 22);
    assert_int_equal(put(o, "dec", "a", d, n), 0);
    assert_int_equal(put(o, "dec", "b", e, n), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n2", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n5", false), 0);
    struct gw_objects_stats st0, st;
    gw_objects_counters(o, &st0);
    assert_int_equal(get_check(o, "dec", "a", 0, UINT64_MAX, d, n), 0);
    assert_int_equal(get_check(o, "dec", "b", 0, UINT64_MAX, e, n), 0);
    gw_objects_counters(o, &st);
    /* Most of the 26 stripes lose a data chunk; the same six nodes send for
     * all of them, rebuilding one or two chunks: at most two sessions. */
    assert_true(st.decode_runs - st0.decode_runs >= 15);
    assert_true(st.decode_sessions - st0.decode_sessions >= 1);
    assert_true(st.decode_sessions - st0.decode_sessions <= 2);
    assert_int_equal(st.failed_reads, 0);

    /* One GET; n7 stops after 3 stripes, n2 comes back after 7. */
    struct gw_get *g;
    assert_int_equal(gw_get_begin(o, "dec", "a", 0, UINT64_MAX, NULL, &g), 0);
    size_t got = 0;
    for (;;) {
        if (got == 3 * STRIPE)
            assert_int_equal(gw_objects_node_set_running(o, "n7", false), 0);
        if (got == 7 * STRIPE)
            assert_int_equal(gw_objects_node_set_running(o, "n2", true), 0);
        ssize_t r = gw_get_read(g, buf + got, STRIPE - got % STRIPE);
        assert_true(r >= 0);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    gw_get_end(g);
    assert_int_equal(got, n);
    assert_memory_equal(buf, d, n);
    assert_int_equal(get_check(o, "dec", "b", 0, UINT64_MAX, e, n), 0);
    gw_objects_counters(o, &st0);
    assert_true(st0.decode_runs > st.decode_runs);
    assert_int_equal(st0.failed_reads, 0);

    /* n5 and n7 down: in a stripe of b that lost a data chunk, the data
     * chunk on the lowest node up is one the decode session reads; corrupt
     * it. The run fails, and so does one on a fresh session; the direct
     * reads route around it. */
    int victim = -1, low = 99;
    size_t si = 0;
    for (; si < 12 && victim < 0; si++) {
        bool hit = false;
        int v = -1, lo = 99;
        for (int c = 0; c < 6; c++) {
            int node = chunk_node(o, "dec", "b", si, c);
            hit |= node == 5 || node == 7;
            if (node != 5 && node != 7 && node < lo) {
                lo = node;
                v = c;
            }
        }
        if (hit) {
            victim = v;
            low = lo;
        }
    }
    si--;
    assert_true(victim >= 0 && low < 99);
    /* Warm: every session this GET needs is kept, none is opened again. */
    assert_int_equal(get_check(o, "dec", "b", 0, UINT64_MAX, e, n), 0);
    gw_objects_counters(o, &st0);
    assert_int_equal(flip_on_disk(e + si * STRIPE + (size_t)victim * CHUNK, 64), 0);
    assert_int_equal(get_check(o, "dec", "b", 0, UINT64_MAX, e, n), 0);
    gw_objects_counters(o, &st);
    assert_true(st.decode_sessions > st0.decode_sessions);
    assert_int_equal(st.failed_reads, 0);
    free(d);
    free(e);
    free(buf);
    gw_objects_close(o);
}

/* RS(4,2) on 9 nodes (spares for new homes), repair running, orphans collected at once:
 * a corrupt chunk a read found is rewritten in place; a draining node's chunks move and,
 * once it is back, what stayed there is collected as orphans; a node set out has its
 * chunks rebuilt elsewhere; every object reads back exact after each step. */
static void test_repair_service(void **state)
{
    (void)state;
    json_t *opts = json_pack("{s:i,s:i,s:i,s:s,s:{s:i,s:i}}", "chunk_size", CHUNK, "gc_delay_ms", 0,
                             "timeout_ms", 3000, "profile", "rs:k=4,m=2", "repair",
                             "scan_interval_ms", 3600000, "orphan_grace_ms", 0);
    struct gw_objects *o = NULL;
    char msg[256];
    assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
    json_decref(opts);
    assert_int_equal(gw_bucket_create(o, "rep"), 0);
    enum { NOBJ = 6, SIZE = 3 * 4 * CHUNK + 1000 };
    uint8_t *d[NOBJ];
    char key[NOBJ][8];
    for (int i = 0; i < NOBJ; i++) {
        d[i] = malloc(SIZE);
        fill(d[i], SIZE, 900 + (uint32_t)i);
        snprintf(key[i], sizeof(key[i]), "r%d", i);
        assert_int_equal(put(o, "rep", key[i], d[i], SIZE), 0);
    }
    /* A corrupt data chunk: the read that finds it reports it, repair rewrites it. */
    int64_t sc = scans_now(o);
    assert_int_equal(flip_on_disk(d[0] + CHUNK, 64), 0);
    assert_int_equal(get_check(o, "rep", key[0], 0, UINT64_MAX, d[0], SIZE), 0);
    json_t *scan = json_pack("{s:b}", "scan", 1);
    assert_int_equal(gw_objects_repair_set(o, scan, msg, sizeof(msg)), 0);
    wait_repaired(o, sc);
    assert_whole(o, key[0], NULL);
    /* A corrupt chunk nobody reads: the scrub finds it, the scan queues it. */
    sc = scans_now(o);
    assert_int_equal(flip_on_disk(d[1] + 2 * CHUNK, 64), 0);
    json_t *scrub = json_pack("{s:b}", "scrub", 1);
    assert_int_equal(gw_objects_repair_set(o, scrub, msg, sizeof(msg)), 0);
    json_decref(scrub);
    wait_repaired(o, sc);
    assert_whole(o, key[1], NULL);
    /* Draining n2: its chunks move; back up, the copies it kept are orphans. */
    sc = scans_now(o);
    assert_int_equal(gw_objects_node_state(o, "n2", "draining", msg, sizeof(msg)), 0);
    wait_repaired(o, sc);
    for (int i = 0; i < NOBJ; i++) {
        assert_whole(o, key[i], "n2");
        assert_int_equal(get_check(o, "rep", key[i], 0, UINT64_MAX, d[i], SIZE), 0);
    }
    sc = scans_now(o);
    assert_int_equal(gw_objects_node_state(o, "n2", "up", msg, sizeof(msg)), 0);
    wait_repaired(o, sc);
    assert_int_equal(node_chunks(o, "n2"), 0);
    /* n5 out for good: rebuilt elsewhere (its service still runs: nothing is read from it). */
    sc = scans_now(o);
    assert_int_equal(gw_objects_node_state(o, "n5", "out", msg, sizeof(msg)), 0);
    wait_repaired(o, sc);
    for (int i = 0; i < NOBJ; i++) {
        assert_whole(o, key[i], "n5");
        assert_int_equal(get_check(o, "rep", key[i], 0, UINT64_MAX, d[i], SIZE), 0);
    }
    /* Bad requests: an unknown node or state, a setting of the wrong type. */
    assert_int_equal(gw_objects_node_state(o, "n9", "out", msg, sizeof(msg)), -ENOENT);
    assert_int_equal(gw_objects_node_state(o, "n1", "gone", msg, sizeof(msg)), -EINVAL);
    assert_int_equal(gw_objects_repair_set(o, scan, msg, sizeof(msg)), 0);
    json_t *bad = json_pack("{s:s}", "paused", "yes");
    assert_int_equal(gw_objects_repair_set(o, bad, msg, sizeof(msg)), -EINVAL);
    json_decref(bad);
    json_decref(scan);
    for (int i = 0; i < NOBJ; i++)
        free(d[i]);
    gw_objects_close(o);
}

/* Node `id`'s records were moved off it: the repair status no longer counts
 * it a metadata member (waits up to 60 s). */
static void wait_meta_moved(struct gw_objects *o, const char *id)
{
    for (int i = 0; i < 600; i++) {
        json_t *st;
        assert_int_equal(gw_objects_repair_status(o, &st), 0);
        bool member = true;
        size_t k;
        json_t *n;
        json_array_foreach(json_object_get(st, "nodes"), k, n)
        {
            if (strcmp(json_string_value(json_object_get(n, "id")), id) == 0)
                member = json_is_true(json_object_get(n, "meta_member"));
        }
        json_decref(st);
        if (!member)
            return;
        usleep(100000);
    }
    fail_msg("the records of %s were not moved off it in 60 s", id);
}

/* With periodic scans off (and repair paused), a node set out still leaves
 * the metadata homes: every record is copied to the homes it has without
 * it. A gateway opened afterwards knows, and with that node and two more
 * down (M + 1 = 3 of 9, R = 3 of C = 5 homes) every record still reads. */
static void test_meta_moves_without_scans(void **state)
{
    (void)state;
    json_t *opts = json_pack("{s:i,s:i,s:s,s:i,s:{s:b,s:i}}", "chunk_size", CHUNK, "timeout_ms",
                             3000, "profile", "rs:k=4,m=2", "inline_max", 0, "repair", "paused", 1,
                             "scan_interval_ms", 0);
    struct gw_objects *o = NULL;
    char msg[256];
    assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
    assert_int_equal(gw_bucket_create(o, "mov"), 0);
    enum { NOBJ = 24 };
    uint8_t d[1000];
    char key[16];
    for (int i = 0; i < NOBJ; i++) {
        snprintf(key, sizeof(key), "m%02d", i);
        fill(d, sizeof(d), 700 + (uint32_t)i);
        assert_int_equal(put(o, "mov", key, d, sizeof(d) - (size_t)i), 0);
    }
    assert_int_equal(gw_objects_node_state(o, "n3", "out", msg, sizeof(msg)), 0);
    wait_meta_moved(o, "n3");
    gw_objects_close(o);
    assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
    json_decref(opts);
    wait_meta_moved(o, "n3");
    assert_int_equal(gw_objects_node_set_running(o, "n3", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n5", false), 0);
    assert_int_equal(gw_objects_node_set_running(o, "n7", false), 0);
    for (int i = 0; i < NOBJ; i++) {
        struct gw_object_info info;
        snprintf(key, sizeof(key), "m%02d", i);
        assert_int_equal(gw_object_head(o, "mov", key, &info), 0);
        assert_int_equal(info.size, sizeof(d) - (size_t)i);
        gw_object_info_clear(&info);
    }
    gw_objects_close(o);
}

static void test_restart_gateway(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "restart");
    uint8_t d[40000];
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof(key), "r%d", i);
        fill(d, sizeof(d) - (size_t)i * 1000, 300 + (uint32_t)i);
        assert_int_equal(put(o, "restart", key, d, sizeof(d) - (size_t)i * 1000), 0);
        if (i == 2) { /* mid-workload: everything acknowledged so far survives */
            gw_objects_close(o);
            o = open_cluster();
        }
    }
    /* An upload in flight when the gateway goes away was never acknowledged. */
    struct gw_put *p;
    assert_int_equal(gw_put_begin(o, "restart", "r0", NULL, &p), 0);
    assert_int_equal(gw_put_write(p, d, STRIPE + 10), 0);
    gw_put_abort(p);
    gw_objects_close(o);
    o = open_cluster();
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof(key), "r%d", i);
        fill(d, sizeof(d) - (size_t)i * 1000, 300 + (uint32_t)i);
        assert_int_equal(
            get_check(o, "restart", key, 0, UINT64_MAX, d, sizeof(d) - (size_t)i * 1000), 0);
    }
    gw_objects_close(o);
}

struct writer {
    struct gw_objects *o;
    int id;
    int done;
    int rc; /* the first failed PUT's */
};

#define CW_SIZE (STRIPE * 2 + 333)

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint8_t *d = malloc(CW_SIZE);
    for (int i = 0; i < 6; i++) {
        memset(d, 'a' + w->id * 8 + i, CW_SIZE);
        int rc = put(w->o, "race", "one", d, CW_SIZE - (size_t)w->id);
        if (rc && !w->rc)
            w->rc = rc; /* asserted by the test's thread (cmocka cannot fail from another) */
    }
    free(d);
    return NULL;
}

/* Stripes larger than the hasher's step (256 KiB chunks, 1.5 MiB stripes):
 * the MD5 follows the body inside the stripe being filled, then over the
 * window's buffers; the ETag is the body's MD5 and every byte reads back,
 * for uploads hashed by their caller (100 KiB, 1 MiB), one stripe hashed
 * before it is full (1400 KiB) and 6 full stripes with a short last one. */
static void test_large_stripes_md5(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_with(256 << 10, 0, "direct");
    assert_int_equal(gw_bucket_create(o, "big"), 0);
    const size_t big[] = {100 << 10, 1 << 20, 1400 << 10, (9 << 20) + (700 << 10) + 13};
    uint8_t *d = malloc(big[3]);
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        char key[32], md5[33];
        snprintf(key, sizeof(key), "big-%zu", big[i]);
        fill(d, big[i], (uint32_t)(100 + i));
        assert_int_equal(put(o, "big", key, d, big[i]), 0);
        struct gw_object_info info;
        assert_int_equal(gw_object_head(o, "big", key, &info), 0);
        md5_hex(d, big[i], md5);
        assert_string_equal(info.etag, md5);
        gw_object_info_clear(&info);
        assert_int_equal(get_check(o, "big", key, 0, UINT64_MAX, d, big[i]), 0);
        assert_int_equal(get_check(o, "big", key, big[i] / 3, big[i] / 2, d, big[i]), 0);
    }
    free(d);
    gw_objects_close(o);
}

/* A signed payload's SHA-256 (gw_put_expect_sha256) on each path the put
 * hashes it on: one stripe and no hasher (after the send), one stripe a
 * hasher follows (after the send, the hasher taking the MD5), full stripes
 * (as each goes to its writer) then the short last one. The right hash
 * commits; a wrong one fails with GW_PUT_BAD_SHA256 and the object before
 * it stays. */
static void test_signed_payload_sha256(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_with(256 << 10, 0, "direct");
    assert_int_equal(gw_bucket_create(o, "sig"), 0);
    const size_t sizes[] = {100 << 10, 1400 << 10, (9 << 20) + (700 << 10) + 13};
    uint8_t *d = malloc(sizes[2]);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        fill(d, sizes[i], (uint32_t)(300 + i));
        uint8_t sha[32];
        unsigned len = 0;
        assert_true(EVP_Digest(d, sizes[i], sha, &len, EVP_sha256(), NULL));
        for (int wrong = 0; wrong < 2; wrong++) {
            struct gw_put *p;
            assert_int_equal(gw_put_begin(o, "sig", "k", NULL, &p), 0);
            assert_int_equal(gw_put_expect_sha256(p, sha), 0);
            d[sizes[i] - 1] ^= (uint8_t)wrong; /* the body the hash was not taken of */
            for (size_t off = 0; off < sizes[i]; off += 7777)
                assert_int_equal(
                    gw_put_write(p, d + off, sizes[i] - off < 7777 ? sizes[i] - off : 7777), 0);
            d[sizes[i] - 1] ^= (uint8_t)wrong;
            assert_int_equal(gw_put_commit(p, NULL), wrong ? GW_PUT_BAD_SHA256 : 0);
            assert_int_equal(get_check(o, "sig", "k", 0, UINT64_MAX, d, sizes[i]), 0);
        }
    }
    free(d);
    gw_objects_close(o);
}

/* The default pool's chunks (PLACE_CHUNK_SIZE, 4 MiB): an object's chunks are
 * ceil(size / k) bytes up to it, so a 7 MiB object is one stripe of ~1.2 MiB
 * chunks (two stripes at 1 MiB) and a 30 MiB one a full stripe of 4 MiB
 * chunks plus a short one; both read back whole, in ranges across the stripe
 * boundary and degraded (m nodes down) through the gateway's decode and
 * through decode DEG sessions, whose buffers take the large chunks. */
static void test_default_large_chunks(void **state)
{
    (void)state;
    const size_t sizes[] = {(7 << 20) + 13, (30 << 20) + 4097};
    const size_t stripes[] = {1, 2};
    const size_t len0[] = {((7 << 20) + 13 + 6 * 64 - 1) / (6 * 64) * 64, PLACE_CHUNK_SIZE};
    uint8_t *d = malloc(sizes[1]);
    const char *modes[] = {"direct", "deg"};
    for (int m = 0; m < 2; m++) {
        json_t *opts = json_pack("{s:i,s:i,s:i,s:{s:b},s:s}", "gc_delay_ms", 0, "timeout_ms", 3000,
                                 "inline_max", 0, "repair", "paused", 1, "degraded_read", modes[m]);
        struct gw_objects *o = NULL;
        char msg[256];
        assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
        json_decref(opts);
        gw_bucket_create(o, "large");
        for (size_t i = 0; i < 2; i++) {
            char key[32];
            snprintf(key, sizeof(key), "large-%zu", i);
            fill(d, sizes[i], 700 + (uint32_t)i);
            assert_int_equal(put(o, "large", key, d, sizes[i]), 0);
            json_t *j;
            assert_int_equal(gw_objects_object_json(o, "large", key, &j), 0);
            json_t *st = json_object_get(j, "stripes");
            assert_int_equal(json_array_size(st), stripes[i]);
            assert_int_equal(
                json_integer_value(json_object_get(json_array_get(st, 0), "chunk_len")), len0[i]);
            json_decref(j);
            assert_int_equal(get_check(o, "large", key, 0, UINT64_MAX, d, sizes[i]), 0);
            uint64_t at = i ? (24 << 20) - 5000 : len0[0] * 6 / 2; /* i = 1: across stripes */
            assert_int_equal(get_check(o, "large", key, at, 10000, d, sizes[i]), 0);
        }
        const char *down[] = {"n0", "n4", "n8"};
        for (int k = 0; k < 3; k++)
            assert_int_equal(gw_objects_node_set_running(o, down[k], false), 0);
        for (size_t i = 0; i < 2; i++) {
            char key[32];
            snprintf(key, sizeof(key), "large-%zu", i);
            fill(d, sizes[i], 700 + (uint32_t)i);
            assert_int_equal(get_check(o, "large", key, 0, UINT64_MAX, d, sizes[i]), 0);
            assert_int_equal(get_check(o, "large", key, sizes[i] / 3, sizes[i] / 2, d, sizes[i]),
                             0);
        }
        struct gw_objects_stats cs;
        gw_objects_counters(o, &cs);
        assert_true(cs.degraded_reads > 0);
        assert_int_equal(cs.failed_reads, 0);
        for (int k = 0; k < 3; k++)
            assert_int_equal(gw_objects_node_set_running(o, down[k], true), 0);
        gw_objects_close(o);
    }
    free(d);
}

/* Chunk bytes the embedded nodes wrote with O_DIRECT since they opened. */
static uint64_t direct_bytes(struct gw_objects *o)
{
    uint64_t n = 0;
    for (int i = 0; i < o->nnodes; i++) {
        struct node_store_stats st = {0};
        pthread_mutex_lock(&o->nodes[i].lock);
        if (o->nodes[i].svc)
            assert_int_equal(node_store_stats(node_service_store(o->nodes[i].svc), &st), 0);
        pthread_mutex_unlock(&o->nodes[i].lock);
        n += st.direct_bytes;
    }
    return n;
}

/* The embedded nodes' "direct_min": -1 keeps every chunk in the page cache
 * (the default writes large ones past it); a value out of bounds is refused. */
static void test_direct_min(void **state)
{
    (void)state;
    const size_t size = 7 << 20; /* one stripe of ~1.2 MB chunks */
    uint8_t *d = malloc(size);
    fill(d, size, 77);
    uint64_t written[2];
    for (int never = 0; never < 2; never++) {
        json_t *opts = json_pack("{s:i,s:i}", "gc_delay_ms", 0, "inline_max", 0);
        if (never)
            json_object_set_new(opts, "direct_min", json_integer(-1));
        struct gw_objects *o = NULL;
        char msg[256];
        assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
        json_decref(opts);
        gw_bucket_create(o, "direct");
        assert_int_equal(put(o, "direct", "seven", d, size), 0);
        assert_int_equal(get_check(o, "direct", "seven", 0, UINT64_MAX, d, size), 0);
        written[never] = direct_bytes(o);
        gw_objects_close(o);
    }
    assert_int_equal(written[1], 0);
    if (written[0] == 0) /* the file system refuses O_DIRECT: nothing to compare */
        print_message("O_DIRECT refused here: the default wrote no direct bytes either\n");
    const int bad[] = {5, -2, 1 << 30};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *opts = json_pack("{s:i}", "direct_min", bad[i]);
        struct gw_objects *o = NULL;
        char msg[256];
        assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "direct_min"));
        assert_null(o);
        json_decref(opts);
    }
    free(d);
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    gw_bucket_create(o, "race");
    uint8_t *d = malloc(CW_SIZE);
    memset(d, 'A', CW_SIZE);
    assert_int_equal(put(o, "race", "one", d, CW_SIZE), 0);
    struct writer w[2] = {{o, 0, 0, 0}, {o, 1, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    /* Readers meanwhile: each GET is one whole version (one byte value, its size). */
    for (int r = 0; r < 10; r++) {
        struct gw_get *g;
        struct gw_object_info info;
        assert_int_equal(gw_get_begin(o, "race", "one", 0, UINT64_MAX, &info, &g), 0);
        size_t got = 0;
        ssize_t n;
        while ((n = gw_get_read(g, d + got, 4000)) > 0)
            got += (size_t)n;
        assert_true(n == 0 || n == -EIO); /* old chunks may be collected under a slow reader */
        if (n == 0) {
            assert_int_equal(got, info.size);
            for (size_t i = 1; i < got; i++)
                assert_int_equal(d[i], d[0]);
        }
        gw_get_end(g);
        gw_object_info_clear(&info);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    /* The last commit won: the winner's last body, whole. */
    struct gw_object_info info;
    assert_int_equal(gw_object_head(o, "race", "one", &info), 0);
    int winner = (int)(CW_SIZE - info.size);
    assert_true(winner == 0 || winner == 1);
    memset(d, 'a' + winner * 8 + 5, CW_SIZE);
    assert_int_equal(get_check(o, "race", "one", 0, UINT64_MAX, d, info.size), 0);
    gw_object_info_clear(&info);
    free(d);
    gw_objects_close(o);
}

/* Stored headers and ACLs: a bucket's in its record; an object's from its PUT,
 * or set later beside the record, surviving a rewrite of the record (as repair
 * does, version + 1) but not an overwrite. */
static void test_acls_and_headers(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "acl"), 0);
    struct gw_bucket_info bi;
    assert_int_equal(gw_bucket_head(o, "acl", &bi), 0);
    assert_string_equal(bi.acl, "");
    assert_int_equal(gw_bucket_acl_set(o, "acl", "public-read"), 0);
    assert_int_equal(gw_bucket_head(o, "acl", &bi), 0);
    assert_string_equal(bi.acl, "public-read");
    assert_int_equal(gw_bucket_acl_set(o, "acl", "private"), 0);
    assert_int_equal(gw_bucket_head(o, "acl", &bi), 0);
    assert_string_equal(bi.acl, "");
    assert_int_equal(gw_bucket_acl_set(o, "none", "public-read"), -ENOENT);

    struct gw_object_info attrs = {.acl = "public-read"};
    attrs.headers = json_pack("{s:s}", "Cache-Control", "no-store");
    struct gw_put *p;
    assert_int_equal(gw_put_begin(o, "acl", "k", &attrs, &p), 0);
    gw_object_info_clear(&attrs);
    assert_int_equal(gw_put_write(p, "abc", 3), 0);
    assert_int_equal(gw_put_commit(p, NULL), 0);
    struct gw_object_info info = {0};
    assert_int_equal(gw_object_head(o, "acl", "k", &info), 0);
    assert_string_equal(info.acl, "public-read");
    assert_string_equal(json_string_value(json_object_get(info.headers, "Cache-Control")),
                        "no-store");
    gw_object_info_clear(&info);
    char acl[GW_ACL_MAX];
    assert_int_equal(gw_object_acl_get(o, "acl", "k", acl), 0);
    assert_string_equal(acl, "public-read");
    assert_int_equal(gw_object_acl_set(o, "acl", "k", "authenticated-read"), 0);
    assert_int_equal(gw_object_acl_get(o, "acl", "k", acl), 0);
    assert_string_equal(acl, "authenticated-read");
    /* the record rewritten with a higher version, as repair does */
    json_t *rec;
    assert_int_equal(gw_meta_read(o, "acl", "k", &rec), 0);
    json_t *again = json_deep_copy(rec);
    json_object_set_new(again, "version", json_integer((json_int_t)gw_rec_version(rec) + 1));
    assert_int_equal(gw_meta_write(o, "acl", "k", again), 0);
    json_decref(again);
    json_decref(rec);
    assert_int_equal(gw_object_acl_get(o, "acl", "k", acl), 0);
    assert_string_equal(acl, "authenticated-read");
    /* an overwrite brings its own ACL (none: private) */
    uint8_t d[10] = {0};
    assert_int_equal(put(o, "acl", "k", d, sizeof(d)), 0);
    assert_int_equal(gw_object_acl_get(o, "acl", "k", acl), 0);
    assert_string_equal(acl, "");
    assert_int_equal(gw_object_acl_set(o, "acl", "nope", "public-read"), -ENOENT);
    assert_int_equal(gw_object_acl_get(o, "acl", "nope", acl), -ENOENT);
    gw_objects_close(o);
}

/* An ACL record whose object was overwritten or deleted is collected once
 * seen so for the grace; the ACL of the object as it is stays. */
static void test_acl_collect(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "acl"), 0);
    uint8_t d[10] = {0};
    const char *keys[] = {"acl/over", "acl/gone", "acl/kept"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(put(o, "acl", keys[i] + 4, d, sizeof(d)), 0);
        assert_int_equal(gw_object_acl_set(o, "acl", keys[i] + 4, "public-read"), 0);
    }
    assert_int_equal(put(o, "acl", "over", d, sizeof(d)), 0);
    assert_int_equal(gw_object_delete(o, "acl", "gone"), 0);
    json_t *seen = NULL, *rec;
    gw_tombstones_collect(o, &seen, 3600000); /* seen dead, not for long enough */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gw_meta_read(o, GW_META_ACL, keys[i], &rec), 0);
        json_decref(rec);
    }
    gw_tombstones_collect(o, &seen, 0);
    assert_int_equal(gw_meta_read(o, GW_META_ACL, "acl/over", &rec), -ENOENT);
    assert_int_equal(gw_meta_read(o, GW_META_ACL, "acl/gone", &rec), -ENOENT);
    assert_int_equal(gw_meta_read(o, GW_META_ACL, "acl/kept", &rec), 0);
    json_decref(rec);
    char acl[GW_ACL_MAX];
    assert_int_equal(gw_object_acl_get(o, "acl", "kept", acl), 0);
    assert_string_equal(acl, "public-read");
    /* the overwrite's own ACL, set after the collection, is alive */
    assert_int_equal(gw_object_acl_set(o, "acl", "over", "authenticated-read"), 0);
    gw_tombstones_collect(o, &seen, 0);
    assert_int_equal(gw_object_acl_get(o, "acl", "over", acl), 0);
    assert_string_equal(acl, "authenticated-read");
    json_decref(seen);
    gw_objects_close(o);
}

static void test_schemes(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    const char *profiles[] = {"lrc:k=4,l=2,r=2", "ppr:k=6,m=3", "ecpipe:k=4,m=2", "tri:k=4,m=2"};
    uint8_t d[20000];
    fill(d, sizeof(d), 9);
    for (int i = 0; i < 4; i++) {
        char name[16], bucket[16], m[256];
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(bucket, sizeof(bucket), "bucket-p%d", i);
        json_t *spec = json_pack("{s:s,s:s,s:i}", "name", name, "profile", profiles[i],
                                 "chunk_size", 2048),
               *out = NULL;
        int rc = gw_objects_pool_create(o, spec, &out, m, sizeof(m));
        if (rc)
            fail_msg("pool %s: %s", profiles[i], m);
        json_decref(spec);
        json_decref(out);
        assert_int_equal(gw_bucket_create_in_pool(o, bucket, name), 0);
        assert_int_equal(put(o, bucket, "x", d, sizeof(d)), 0);
        assert_int_equal(get_check(o, bucket, "x", 0, UINT64_MAX, d, sizeof(d)), 0);
        /* Lose two chunks of every stripe (on two of the nodes): still exact. */
        gw_objects_node_set_running(o, "n0", false);
        gw_objects_node_set_running(o, "n5", false);
        rc = get_check(o, bucket, "x", 0, UINT64_MAX, d, sizeof(d));
        if (rc)
            fail_msg("degraded read %s: %d", profiles[i], rc);
        gw_objects_node_set_running(o, "n0", true);
        gw_objects_node_set_running(o, "n5", true);
        json_t *j = NULL;
        char *dot = NULL;
        int lost[] = {0, 1};
        assert_int_equal(gw_objects_deg(o, name, "decode", lost, 2, &j, NULL), 0);
        assert_non_null(json_object_get(j, "vertices"));
        json_decref(j);
        assert_int_equal(gw_objects_deg(o, name, "encode", NULL, 0, NULL, &dot), 0);
        assert_non_null(strstr(dot, "digraph"));
        free(dot);
    }
    json_t *spec = json_pack("{s:s,s:s}", "name", "p0", "profile", "rs:k=2,m=1"), *out = NULL;
    char m[256];
    assert_int_equal(gw_objects_pool_create(o, spec, &out, m, sizeof(m)), -EEXIST);
    json_decref(spec);
    spec = json_pack("{s:s,s:s}", "name", "big", "profile", "rs:k=8,m=4");
    assert_int_equal(gw_objects_pool_create(o, spec, &out, m, sizeof(m)), -EINVAL);
    json_decref(spec);
    gw_objects_close(o);
    /* Pools live in cluster.json: a reopened gateway still reads those buckets. */
    o = open_cluster();
    assert_int_equal(get_check(o, "bucket-p3", "x", 0, UINT64_MAX, d, sizeof(d)), 0);
    gw_objects_close(o);
}

/* gc_pending counts the replaced versions' stripes until their chunks are
 * deleted, not only until they leave the queue. */
static void test_gc_pending(void **state)
{
    (void)state;
    struct gw_objects *o = open_opts(json_pack("{s:i,s:i,s:{s:b}}", "chunk_size", CHUNK,
                                               "gc_delay_ms", 600000, "repair", "paused", 1));
    assert_int_equal(gw_bucket_create(o, "gcb"), 0);
    uint8_t d[2 * STRIPE + 100];
    fill(d, sizeof(d), 5);
    struct gw_objects_stats st;
    assert_int_equal(put(o, "gcb", "k", d, sizeof(d)), 0);
    assert_int_equal(gw_objects_counters(o, &st), 0);
    assert_int_equal(st.gc_pending, 0);
    assert_int_equal(put(o, "gcb", "k", d, 100), 0); /* replaces 3 stripes, due in 10 min */
    assert_int_equal(gw_objects_counters(o, &st), 0);
    assert_int_equal(st.gc_pending, 3);
    gw_gc_run(o, true);
    assert_int_equal(gw_objects_counters(o, &st), 0);
    assert_int_equal(st.gc_pending, 0);
    gw_objects_close(o);
}

/* Stopping an embedded node while other threads open clients to it: a
 * connect that had read the node's service must not find it freed (a random
 * crash in a fan-out thread, exit status 255 with no message under cmocka). */
static atomic_bool probing;

static void *prober_main(void *arg)
{
    struct gw_objects *o = arg;
    while (atomic_load(&probing)) {
        json_t *c = NULL;
        if (gw_objects_cluster_json(o, &c) == 0) /* calls every node, n0 included */
            json_decref(c);
    }
    return NULL;
}

static void test_stop_while_connecting(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    pthread_t t[2];
    atomic_store(&probing, true);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, prober_main, o), 0);
    /* Each restart drops n0's idle clients: the probers connect anew, and
     * the next stop meets their connects. */
    for (int i = 0; i < 60; i++) {
        assert_int_equal(gw_objects_node_set_running(o, "n0", false), 0);
        usleep(1000);
        assert_int_equal(gw_objects_node_set_running(o, "n0", true), 0);
        usleep(2000);
    }
    atomic_store(&probing, false);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    json_t *c = NULL;
    assert_int_equal(gw_objects_cluster_json(o, &c), 0);
    json_decref(c);
    gw_objects_close(o);
}

/* Homes of ".t"/key holding version v: asks every node directly. */
static int holders(struct gw_objects *o, const char *key, uint64_t v)
{
    int n = 0;
    for (int i = 0; i < o->nnodes; i++) {
        struct node_client *c;
        void *blob;
        size_t len;
        if (gw_client_get(o, i, &c))
            continue;
        int rc = node_client_get_meta(c, ".t", key, &blob, &len);
        gw_client_put(o, i, c, rc == -ENOENT ? 0 : rc);
        if (rc == 0) {
            json_t *r = json_loadb(blob, len, 0, NULL);
            n += gw_rec_version(r) == v;
            json_decref(r);
            free(blob);
        }
    }
    return n;
}

/* Stops nodes ids[0..n) and leaves the gateway believing them up: what
 * comes next reaches them before anything noticed. Besides the detector's
 * probes, background calls (the repair worker lists its queue every 2 s,
 * paused or not; gc; the scanner) find a stopped node refused and mark it
 * down, and stopping nodes one by one may take a second under load. */
static void stop_unnoticed(struct gw_objects *o, const char *const *ids, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], false), 0);
    for (int i = 0; i < n; i++)
        gw_peer_answered(o, place_map_node(o->map, ids[i]));
    usleep(2000); /* a refusal counts only after the last answer's millisecond */
}

static json_t *rec_of(uint64_t version, const char *what)
{
    return json_pack("{s:I,s:b,s:s}", "version", (json_int_t)version, "deleted", 0, "what", what);
}

/* Notes the heal took, and those it dropped past heal_max. */
static size_t heal_notes(struct gw_objects *o)
{
    return gw_meta_heal_pending(o) + atomic_load(&o->heal_dropped);
}

/* Reads ask every home while the gateway is in doubt (meta_heal.c): from
 * its start, and again once a note was dropped past heal_max, until a sweep
 * found every inline record on every home. */
static void test_meta_heal_doubt(void **state)
{
    (void)state;
    char msg[256] = "";
    struct gw_objects *o = NULL;
    json_t *bad = json_pack("{s:i}", "heal_max", 0);
    assert_int_equal(gw_objects_open_embedded_opts(dir, bad, &o, msg, sizeof(msg)), -EINVAL);
    assert_non_null(strstr(msg, "heal_max"));
    json_decref(bad);
    json_t *opts = cluster_opts(CHUNK, GW_INLINE_MAX, "direct");
    json_object_set_new(opts, "heal_max", json_integer(2));
    o = open_opts(opts);
    assert_int_equal(gw_bucket_create(o, "doubt"), 0);
    uint8_t body[1000];
    fill(body, sizeof(body), 5);
    assert_int_equal(put(o, "doubt", "inline", body, sizeof(body)), 0);
    for (int t = 0; t < 500 && gw_meta_heal_doubt(o); t++)
        usleep(20000);
    assert_false(gw_meta_heal_doubt(o)); /* the start's sweep */

    /* 3 of 9 nodes stopped: every key has a home among them, so each of 3
     * writes leaves a note, and the third is one past the bound. A note is
     * left once the write's round ended, after the write returned: each write
     * waits for the one before's, so d2 is the one dropped. */
    const char *ids[] = {"n0", "n1", "n2"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], false), 0);
    const char *keys[] = {"d0", "d1", "d2"};
    for (int i = 0; i < 3; i++) {
        json_t *r = rec_of(gw_hlc_next(o), keys[i]);
        assert_int_equal(gw_meta_write(o, ".t", keys[i], r), 0);
        json_decref(r);
        for (int t = 0; t < 500 && heal_notes(o) <= (size_t)i; t++)
            usleep(20000);
    }
    assert_int_equal(gw_meta_heal_pending(o), 2);
    assert_int_equal(atomic_load(&o->heal_dropped), 1);
    /* The inline object lacks its stopped homes' shards: no sweep settles it. */
    usleep(100000);
    assert_true(gw_meta_heal_doubt(o));
    uint64_t calls = atomic_load(&o->meta_read_calls);
    json_t *got;
    for (int r = 0; r < 10; r++) {
        assert_int_equal(gw_meta_read(o, ".t", "d2", &got), 0);
        json_decref(got);
    }
    assert_int_equal(atomic_load(&o->meta_read_calls) - calls, 10 * (uint64_t)o->meta_copies);

    /* Back up: the notes heal, and a sweep ends the doubt. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], true), 0);
    for (int t = 0; t < 1500 && (gw_meta_heal_doubt(o) || gw_meta_heal_pending(o)); t++)
        usleep(20000);
    assert_false(gw_meta_heal_doubt(o));
    assert_int_equal(gw_meta_heal_pending(o), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gw_meta_read(o, ".t", keys[i], &got), 0);
        assert_int_equal(holders(o, keys[i], gw_rec_version(got)), o->meta_copies);
        json_decref(got);
    }
    calls = atomic_load(&o->meta_read_calls);
    for (int r = 0; r < 10; r++) {
        assert_int_equal(gw_meta_read(o, ".t", "d2", &got), 0);
        json_decref(got);
    }
    assert_true(atomic_load(&o->meta_read_calls) - calls < 10 * (uint64_t)o->meta_copies);
    gw_objects_close(o);
}

static void test_meta_versions(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_unprobed();
    const char *ids[] = {"n0", "n1", "n2", "n3", "n4", "n5"};
    /* The clock: past any version seen. */
    uint64_t ahead = (uint64_t)gw_realtime_ns() + 3600ull * 1000000000ull;
    gw_hlc_observe(o, ahead);
    assert_true(gw_hlc_next(o) > ahead);
    assert_true(gw_hlc_next(o) < ahead + 1000000ull); /* one tick past, not a jump */

    json_t *v1 = rec_of(gw_hlc_next(o), "v1");
    assert_int_equal(gw_meta_write(o, ".t", "k", v1), 0);
    assert_true(holders(o, "k", gw_rec_version(v1)) >= o->meta_wq); /* done at W... */
    for (int t = 0; t < 500 && holders(o, "k", gw_rec_version(v1)) < o->meta_copies; t++)
        usleep(10000); /* ...the other homes in the background */
    assert_int_equal(holders(o, "k", gw_rec_version(v1)), o->meta_copies);

    /* A commit that cannot reach W homes (6 of 9 nodes stopped: at most 3 of
     * the 7 homes are up) is in doubt when it was sent (one round: the homes
     * still up took it); once the failure detector knows the homes are down,
     * it fails having sent nothing. */
    stop_unnoticed(o, ids, 6);
    json_t *v2 = rec_of(gw_hlc_next(o), "v2");
    assert_int_equal(gw_meta_write(o, ".t", "k", v2), GW_META_IN_DOUBT);
    assert_true(holders(o, "k", gw_rec_version(v2)) <= 3);
    json_t *v2b = rec_of(gw_hlc_next(o), "v2b");
    assert_int_equal(gw_meta_write(o, ".t", "k", v2b), -EHOSTDOWN);
    assert_int_equal(holders(o, "k", gw_rec_version(v2b)), 0);
    json_decref(v2b);
    for (int i = 0; i < 6; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], true), 0);
    json_t *got = NULL;
    assert_int_equal(gw_meta_read(o, ".t", "k", &got), 0); /* in doubt: either may be read */
    const char *what = json_string_value(json_object_get(got, "what"));
    assert_true(strcmp(what, "v1") == 0 || strcmp(what, "v2") == 0);
    json_decref(got);

    /* Three nodes down for a commit: they come back stale, and the commit's
     * heal note (meta_heal.c) gives them the newest record once they are
     * judged up again; reads asking them repair them too. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], false), 0);
    json_t *v3 = rec_of(gw_hlc_next(o), "v3");
    assert_int_equal(gw_meta_write(o, ".t", "k", v3), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], true), 0);
    uint64_t repairs = atomic_load(&o->meta_repairs);
    int held = 0;
    /* Up to 10 s: a home is asked again only once the failure detector saw it
     * back (a commit's calls to the stopped homes may end after the restart). */
    for (int t = 0; t < 500 && held < o->meta_copies; t++) {
        assert_int_equal(gw_meta_read(o, ".t", "k", &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "what")), "v3");
        json_decref(got);
        usleep(20000);
        held = holders(o, "k", gw_rec_version(v3));
    }
    assert_int_equal(held, o->meta_copies);
    assert_true(atomic_load(&o->meta_repairs) > repairs);
    for (int t = 0; t < 500 && gw_meta_heal_pending(o); t++)
        usleep(20000);
    assert_int_equal(gw_meta_heal_pending(o), 0);

    /* With every home up and holding it, and the start's sweep done
     * (meta_heal.c), a read asks R homes, not all C: the rest only when one
     * is late (then the late one is counted too). */
    for (int t = 0; t < 500 && gw_meta_heal_doubt(o); t++)
        usleep(20000);
    assert_false(gw_meta_heal_doubt(o));
    uint64_t calls = atomic_load(&o->meta_read_calls);
    for (int r = 0; r < 50; r++) {
        assert_int_equal(gw_meta_read(o, ".t", "k", &got), 0);
        json_decref(got);
    }
    calls = atomic_load(&o->meta_read_calls) - calls;
    assert_true(calls >= 50 * (uint64_t)o->meta_rq && calls < 50 * (uint64_t)o->meta_copies);

    /* A home holding a newer version (a gateway whose clock runs ahead)
     * re-versions the commit past it: the write started later wins. */
    json_t *future = rec_of(ahead + 7777 * 1024, "future");
    assert_int_equal(gw_meta_write_at(o, ".t", "k", future), 0);
    json_t *v4 = rec_of(gw_rec_version(v3) + 1024, "v4");
    assert_int_equal(gw_meta_write(o, ".t", "k", v4), 0);
    assert_true(gw_rec_version(v4) > gw_rec_version(future));
    assert_int_equal(gw_meta_read(o, ".t", "k", &got), 0);
    assert_string_equal(json_string_value(json_object_get(got, "what")), "v4");
    json_decref(got);
    /* The same version at once (a repair's compare-and-set) is refused, not re-versioned. */
    assert_int_equal(gw_meta_write_at(o, ".t", "k", v3), -ESTALE);

    json_decref(v1);
    json_decref(v2);
    json_decref(v3);
    json_decref(v4);
    json_decref(future);
    gw_objects_close(o);
}

static int64_t all_chunks(struct gw_objects *o)
{
    int64_t sum = 0;
    char id[16];
    for (int i = 0; i < o->nnodes; i++) {
        snprintf(id, sizeof(id), "n%d", i);
        sum += node_chunks(o, id);
    }
    return sum;
}

/* One metadata round per commit: the homes answer the record a commit
 * replaced, and the commit frees its chunks without reading the key first
 * (overwrites leave only the last version's chunks). A commit that reaches
 * fewer than W homes after the record may have landed is in doubt: its
 * chunks stay, and a later read returns either version, whole. */
static void test_commit_replaced_and_in_doubt(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster_unprobed();
    assert_int_equal(gw_bucket_create(o, "one"), 0);
    uint8_t d[3000], e[6 * CHUNK];
    int64_t base = all_chunks(o);
    for (int v = 0; v < 4; v++) {
        fill(d, sizeof(d), 40 + (uint32_t)v);
        assert_int_equal(put(o, "one", "a", d, sizeof(d)), 0);
    }
    gw_gc_run(o, true); /* gc_delay_ms 0: due now (the gc thread may hold some) */
    for (int t = 0; t < 500 && all_chunks(o) > base + 9; t++)
        usleep(10000);
    assert_int_equal(all_chunks(o), base + 9); /* one stripe of 9 chunks left */
    assert_int_equal(get_check(o, "one", "a", 0, UINT64_MAX, d, sizeof(d)), 0);

    /* In doubt: one whole stripe written, then 6 of 9 nodes stop before the commit. */
    base = all_chunks(o);
    fill(e, sizeof(e), 77);
    struct gw_put *p;
    assert_int_equal(gw_put_begin(o, "one", "a", NULL, &p), 0);
    assert_int_equal(gw_put_write(p, e, sizeof(e)), 0); /* a full stripe: written now */
    for (int t = 0; t < 500 && all_chunks(o) < base + 9; t++)
        usleep(10000);
    assert_int_equal(all_chunks(o), base + 9);
    const char *ids[] = {"n0", "n1", "n2", "n3", "n4", "n5"};
    stop_unnoticed(o, ids, 6);
    assert_int_equal(gw_put_commit(p, NULL), GW_META_IN_DOUBT);
    for (int i = 0; i < 6; i++)
        assert_int_equal(gw_objects_node_set_running(o, ids[i], true), 0);
    gw_gc_run(o, true);
    usleep(300 * 1000);                        /* a discard would be due at once */
    assert_int_equal(all_chunks(o), base + 9); /* kept: readers may take the record */
    /* Either version reads exact. Not by a HEAD first: a read whose R homes
     * lack the record in doubt returns the one before, and a later read whose
     * homes include one that has it returns it (then never the older again). */
    const uint8_t *bodies[] = {d, e};
    const size_t sizes[] = {sizeof(d), sizeof(e)};
    assert_int_equal(get_check_one_of(o, "one", "a", 0, UINT64_MAX, bodies, sizes, 2), 0);
    gw_objects_close(o);
}

/* Bucket records cached for bucket_cache_ms: a PUT does not read its bucket's
 * record each time, so a delete made elsewhere (here: the tombstone written
 * under the gateway, as another gateway would) is seen by PUTs only once the
 * entry expires; HEAD reads the record, and this gateway's own delete is
 * seen at once. */
static void test_bucket_cache(void **state)
{
    (void)state;
    json_t *opts = json_pack("{s:i,s:i,s:i,s:i,s:{s:b}}", "chunk_size", CHUNK, "gc_delay_ms", 0,
                             "timeout_ms", 3000, "bucket_cache_ms", 3000, "repair", "paused", 1);
    struct gw_objects *o = NULL;
    char msg[256];
    assert_int_equal(gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg)), 0);
    json_decref(opts);
    uint8_t d[100];
    fill(d, sizeof(d), 5);
    assert_int_equal(gw_bucket_create(o, "bcache"), 0);
    assert_int_equal(put(o, "bcache", "x", d, sizeof(d)), 0); /* cached now */
    json_t *tomb = json_pack("{s:I,s:b}", "version", (json_int_t)gw_hlc_next(o), "deleted", 1);
    assert_int_equal(gw_meta_write(o, GW_META_BUCKET, "bcache", tomb), 0);
    json_decref(tomb);
    assert_int_equal(gw_bucket_head(o, "bcache", NULL), -ENOENT);
    /* Inside the TTL (3 s: put x's commit, the tombstone's round and the
     * HEAD fit in it under load): the cached record. */
    assert_int_equal(put(o, "bcache", "y", d, sizeof(d)), 0);
    usleep(3200 * 1000);
    assert_int_equal(put(o, "bcache", "z", d, sizeof(d)), -ENOENT);

    assert_int_equal(gw_bucket_create(o, "bdelete"), 0);
    assert_int_equal(put(o, "bdelete", "x", d, sizeof(d)), 0);
    assert_int_equal(gw_object_delete(o, "bdelete", "x"), 0);
    assert_int_equal(gw_bucket_delete(o, "bdelete"), 0);
    assert_int_equal(put(o, "bdelete", "y", d, sizeof(d)), -ENOENT); /* dropped by the delete */
    assert_int_equal(gw_bucket_create(o, "bdelete"), 0);
    assert_int_equal(gw_bucket_acl_set(o, "bdelete", "public-read"), 0);
    assert_int_equal(put(o, "bdelete", "y", d, sizeof(d)), 0);

    /* A PUT whose bucket is deleted (and created again) while its body
     * streams fails at its commit: nothing lands in the new bucket, or in
     * none. Striped and inline bodies. */
    size_t big = (200 << 10) + 5; /* over inline_max */
    uint8_t *b = malloc(big);
    assert_non_null(b);
    fill(b, big, 6);
    for (int again = 0; again < 2; again++) {
        for (size_t len = sizeof(d); len <= big; len += big - sizeof(d)) {
            struct gw_put *p;
            assert_int_equal(gw_bucket_create(o, "bagain"), 0);
            assert_int_equal(gw_put_begin(o, "bagain", "k", NULL, &p), 0);
            assert_int_equal(gw_put_write(p, b, len), 0);
            assert_int_equal(gw_bucket_delete(o, "bagain"), 0);
            if (again)
                assert_int_equal(gw_bucket_create(o, "bagain"), 0);
            assert_int_equal(gw_put_commit(p, NULL), GW_PUT_BUCKET_GONE);
            struct gw_object_info info;
            assert_int_equal(gw_object_head(o, "bagain", "k", &info), -ENOENT);
            if (again)
                assert_int_equal(gw_bucket_delete(o, "bagain"), 0); /* empty */
        }
    }
    free(b);
    gw_objects_close(o);
}

/* Objects committed into a bucket deleted meanwhile (here: through the
 * bucket cache, the delete written under the gateway as another gateway
 * would) belong to no bucket: they stay out of the bucket created again
 * under the name (reads, lists, its emptiness), and the collector removes
 * them and hands their chunks to the gc. A deleted bucket's tombstone waits
 * until nothing is left under its name. */
static void bucket_cached(struct gw_objects *o, const char *name)
{
    uint8_t d[10] = {0};
    assert_int_equal(gw_bucket_create(o, name), 0);
    assert_int_equal(put(o, name, "warm", d, sizeof(d)), 0);
    assert_int_equal(gw_object_delete(o, name, "warm"), 0);
}

static void bucket_gone_elsewhere(struct gw_objects *o, const char *name)
{
    json_t *tomb = json_pack("{s:I,s:b}", "version", (json_int_t)gw_hlc_next(o), "deleted", 1);
    assert_int_equal(gw_meta_write(o, GW_META_BUCKET, name, tomb), 0);
    json_decref(tomb);
}

static void test_bucket_outlived(void **state)
{
    (void)state;
    struct gw_objects *o =
        open_opts(json_pack("{s:i,s:i,s:i,s:{s:b}}", "chunk_size", CHUNK, "gc_delay_ms", 600000,
                            "bucket_cache_ms", 600000, "repair", "paused", 1));
    uint8_t small[100], big[2 * STRIPE + 100];
    fill(small, sizeof(small), 1);
    fill(big, sizeof(big), 2);
    bucket_cached(o, "ghost");
    char uid[GW_UPLOAD_ID_LEN + 1];
    struct gw_put *p;
    struct gw_part_info part;
    assert_int_equal(gw_mpu_create(o, "ghost", "mp", NULL, uid), 0);
    assert_int_equal(gw_mpu_part_begin(o, "ghost", "mp", uid, &p), 0);
    assert_int_equal(gw_put_write(p, small, sizeof(small)), 0);
    assert_int_equal(gw_mpu_part_commit(o, p, "ghost", "mp", uid, 1, &part), 0);
    bucket_gone_elsewhere(o, "ghost");
    assert_int_equal(put(o, "ghost", "small", small, sizeof(small)), 0);
    assert_int_equal(put(o, "ghost", "big", big, sizeof(big)), 0);
    assert_int_equal(gw_mpu_complete(o, "ghost", "mp", uid, &part, 1, false, NULL), 0);
    gw_bucket_cache_drop(o, "ghost");
    struct gw_object_info info;
    assert_int_equal(gw_object_head(o, "ghost", "small", &info), -ENOENT);

    assert_int_equal(gw_bucket_create(o, "ghost"), 0);
    struct names nm = {.n = 0};
    assert_int_equal(gw_object_list(o, "ghost", NULL, NULL, 0, collect, &nm), 0);
    assert_int_equal(nm.n, 0);
    assert_int_equal(gw_object_head(o, "ghost", "small", &info), -ENOENT);
    assert_int_equal(gw_object_head(o, "ghost", "big", &info), -ENOENT);
    assert_int_equal(gw_object_head(o, "ghost", "mp", &info), -ENOENT);
    assert_int_equal(gw_bucket_delete(o, "ghost"), 0); /* empty: nothing of its own */
    assert_int_equal(gw_bucket_create(o, "ghost"), 0);
    assert_int_equal(put(o, "ghost", "new", small, sizeof(small)), 0);
    assert_int_equal(gw_object_list(o, "ghost", NULL, NULL, 0, collect, &nm), 0);
    assert_int_equal(nm.n, 1);
    assert_string_equal(nm.keys[0], "new");

    struct gw_objects_stats before, after;
    assert_int_equal(gw_objects_counters(o, &before), 0);
    json_t *seen = NULL, *rec;
    gw_tombstones_collect(o, &seen, 3600000); /* seen, not for long enough */
    assert_int_equal(gw_meta_read(o, "ghost", "big", &rec), 0);
    json_decref(rec);
    gw_tombstones_collect(o, &seen, 0);
    assert_int_equal(gw_meta_read(o, "ghost", "small", &rec), -ENOENT);
    assert_int_equal(gw_meta_read(o, "ghost", "big", &rec), -ENOENT);
    assert_int_equal(gw_meta_read(o, "ghost", "mp", &rec), -ENOENT);
    assert_int_equal(gw_objects_counters(o, &after), 0);
    assert_int_equal(after.gc_pending, before.gc_pending + 4); /* big's 3 stripes, mp's 1 */
    assert_int_equal(get_check(o, "ghost", "new", 0, UINT64_MAX, small, sizeof(small)), 0);

    /* Deleted and never created again: what was committed into it goes, then its tombstone. */
    bucket_cached(o, "gone");
    bucket_gone_elsewhere(o, "gone");
    assert_int_equal(put(o, "gone", "k", small, sizeof(small)), 0);
    gw_tombstones_collect(o, &seen, 0);
    assert_int_equal(gw_meta_read(o, "gone", "k", &rec), -ENOENT);
    assert_int_equal(gw_meta_read(o, GW_META_BUCKET, "gone", &rec), 0); /* k was still there */
    assert_true(gw_rec_deleted(rec));
    json_decref(rec);
    gw_tombstones_collect(o, &seen, 0);
    assert_int_equal(gw_meta_read(o, GW_META_BUCKET, "gone", &rec), -ENOENT);
    json_decref(seen);
    gw_objects_close(o);
}

/* Conditional writes. Only if absent (If-None-Match: *): over an object it
 * fails, over a tombstone or nothing it stores. If-Match: only over the
 * object of that ETag. Among writers racing on one key with one condition,
 * at most one wins and the key holds its body; a vote left by a writer that
 * won and never committed reads as what it follows. */
#define CREATORS 6

struct creator {
    struct gw_objects *o;
    const char *key;
    const char *if_match; /* NULL: only if absent */
    uint8_t body[64];
    pthread_barrier_t *go;
    int rc;
};

static void *creator_main(void *arg)
{
    struct creator *c = arg;
    struct gw_put *p;
    c->rc = gw_put_begin(c->o, "once", c->key, NULL, &p);
    if (c->rc == 0) {
        if (c->if_match)
            c->rc = gw_put_if_match(p, c->if_match);
        else
            gw_put_create_only(p);
        if (c->rc || (c->rc = gw_put_write(p, c->body, sizeof(c->body))))
            gw_put_abort(p);
    }
    pthread_barrier_wait(c->go);
    if (c->rc == 0)
        c->rc = gw_put_commit(p, NULL);
    return NULL;
}

/* if_match NULL: only if absent */
static int put_if(struct gw_objects *o, const char *key, const char *if_match, const uint8_t *d,
                  size_t n)
{
    struct gw_put *p;
    int rc = gw_put_begin(o, "once", key, NULL, &p);
    if (rc)
        return rc;
    if (!if_match)
        gw_put_create_only(p);
    else if ((rc = gw_put_if_match(p, if_match))) {
        gw_put_abort(p);
        return rc;
    }
    if ((rc = gw_put_write(p, d, n))) {
        gw_put_abort(p);
        return rc;
    }
    return gw_put_commit(p, NULL);
}

static void test_write_if(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "once"), 0);
    uint8_t a[100], big[2 * STRIPE + 100];
    fill(a, sizeof(a), 1);
    fill(big, sizeof(big), 2);
    assert_int_equal(put_if(o, "k", NULL, a, sizeof(a)), 0);
    assert_int_equal(put_if(o, "k", NULL, big, sizeof(big)), GW_PUT_PRECONDITION);
    assert_int_equal(get_check(o, "once", "k", 0, UINT64_MAX, a, sizeof(a)), 0);
    assert_int_equal(gw_object_delete(o, "once", "k"), 0);
    assert_int_equal(put_if(o, "k", NULL, big, sizeof(big)), 0); /* over its tombstone */
    assert_int_equal(get_check(o, "once", "k", 0, UINT64_MAX, big, sizeof(big)), 0);
    assert_int_equal(put(o, "once", "k", a, sizeof(a)), 0); /* no condition: overwrites */

    /* A creator's vote, young: it may be committing; older: it is gone. */
    for (int old = 0; old < 2; old++) {
        json_t *vote = json_pack("{s:I,s:b,s:s,s:I}", "version", (json_int_t)gw_hlc_next(o),
                                 "deleted", 1, GW_VOTE_BY, "0123", GW_VOTE_AT,
                                 (json_int_t)(gw_realtime_ns() - old * 60000000000LL));
        assert_int_equal(gw_meta_write(o, "once", "v", vote), 0);
        json_decref(vote);
        assert_int_equal(put_if(o, "v", NULL, a, sizeof(a)), old ? 0 : GW_PUT_CONFLICT);
    }
    assert_int_equal(get_check(o, "once", "v", 0, UINT64_MAX, a, sizeof(a)), 0);

    /* If-Match */
    char ea[33], eb[33], quoted[36];
    md5_hex(a, sizeof(a), ea);
    md5_hex(big, sizeof(big), eb);
    snprintf(quoted, sizeof(quoted), "\"%s\"", ea);
    assert_int_equal(put_if(o, "k", eb, big, sizeof(big)), GW_PUT_PRECONDITION);
    assert_int_equal(put_if(o, "k", quoted, big, sizeof(big)), 0);
    assert_int_equal(get_check(o, "once", "k", 0, UINT64_MAX, big, sizeof(big)), 0);
    assert_int_equal(put_if(o, "k", ea, a, sizeof(a)), GW_PUT_PRECONDITION);
    assert_int_equal(put_if(o, "k", "*", a, sizeof(a)), 0);
    assert_int_equal(put_if(o, "none", "*", a, sizeof(a)), -ENOENT);
    assert_int_equal(put(o, "once", "del", a, sizeof(a)), 0); /* DeleteObject's If-Match */
    assert_int_equal(gw_object_delete_if(o, "once", "del", eb), GW_PUT_PRECONDITION);
    assert_int_equal(gw_object_delete_if(o, "once", "del", quoted), 0);
    assert_int_equal(gw_object_head(o, "once", "del", NULL), -ENOENT);
    assert_int_equal(gw_object_delete_if(o, "once", "del", "*"), -ENOENT);
    /* A vote of an If-Match writer that never committed (an inline object's
     * copy, shards and all): the object reads as before; young, it holds
     * other conditional writers off, old it does not. */
    for (int old = 0; old < 2; old++) {
        json_t *rec;
        assert_int_equal(gw_meta_read(o, "once", "k", &rec), 0);
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_hlc_next(o)));
        json_object_set_new(rec, GW_VOTE_BY, json_string("0123"));
        json_object_set_new(rec, GW_VOTE_AT, json_integer(gw_realtime_ns() - old * 60000000000LL));
        assert_int_equal(gw_meta_write(o, "once", "k", rec), 0);
        json_decref(rec);
        assert_int_equal(get_check(o, "once", "k", 0, UINT64_MAX, a, sizeof(a)), 0);
        assert_int_equal(put_if(o, "k", ea, a, sizeof(a)), old ? 0 : GW_PUT_CONFLICT);
    }

    for (int round = 0; round < 20; round++) {
        char key[16];
        bool cas = round % 2; /* If-Match on an object, else only if absent */
        snprintf(key, sizeof(key), "race%d", round);
        if (cas)
            assert_int_equal(put(o, "once", key, a, sizeof(a)), 0);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, CREATORS);
        struct creator c[CREATORS];
        pthread_t t[CREATORS];
        for (int i = 0; i < CREATORS; i++) {
            c[i] = (struct creator){.o = o, .key = key, .if_match = cas ? ea : NULL, .go = &go};
            fill(c[i].body, sizeof(c[i].body), (uint32_t)(100 * round + i));
            assert_int_equal(pthread_create(&t[i], NULL, creator_main, &c[i]), 0);
        }
        int won = -1;
        for (int i = 0; i < CREATORS; i++) {
            pthread_join(t[i], NULL);
            if (c[i].rc == 0) {
                if (won >= 0)
                    fail_msg("round %d: writers %d and %d both wrote %s", round, won, i, key);
                won = i;
            } else if (c[i].rc != GW_PUT_PRECONDITION && c[i].rc != GW_PUT_CONFLICT) {
                fail_msg("round %d: writer %d: %d", round, i, c[i].rc);
            }
        }
        pthread_barrier_destroy(&go);
        if (won >= 0)
            assert_int_equal(
                get_check(o, "once", key, 0, UINT64_MAX, c[won].body, sizeof(c[won].body)), 0);
        else /* a split fails them all: the key is as it was, a vote younger than the settle */
            assert_int_equal(put_if(o, key, cas ? ea : NULL, a, sizeof(a)), GW_PUT_CONFLICT);
    }
    gw_objects_close(o);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fanout_run),
        cmocka_unit_test(test_fanout_grows_and_shrinks),
        cmocka_unit_test_setup_teardown(test_inline_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_never_older, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_inline_when_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_rooms_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_delete_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_degraded_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_degraded_direct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repair_note_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repair_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_moves_without_scans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_gateway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_stripes_md5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signed_payload_sha256, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_large_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_min, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acls_and_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_collect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schemes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_heal_doubt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_replaced_and_in_doubt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bucket_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bucket_outlived, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_if, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_while_connecting, setup, teardown),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
