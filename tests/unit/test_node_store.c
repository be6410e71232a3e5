/* The chunk store: records, index, corruption, torn tails, compaction, capacity. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "node/compactor.h"
#include "node/store.h"
#include "node/store_internal.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *tmpdir(void)
{
    char *d = strdup("/tmp/inec-store-test-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rmdir_all(char *d)
{
    nftw(d, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(d);
}

static struct node_chunk_id cid(uint64_t n)
{
    struct node_chunk_id id = {.stripe = n / 7, .index = (uint32_t)(n % 7)};
    memcpy(id.object, &n, sizeof(n));
    id.object[15] = 0xa5;
    return id;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
}

static struct node_store *open_store(const char *dir, uint64_t seg, uint64_t capacity, int gc)
{
    struct node_store_options o;
    node_store_options_default(&o);
    o.segment_size = seg;
    o.capacity = capacity;
    o.group_commit = gc;
    o.map_size = 64 << 20;
    struct node_store *s = NULL;
    char err[256];
    int rc = node_store_open(dir, &o, &s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "open: %s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

static void put_n(struct node_store *s, uint64_t n, uint64_t version, size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    fill(b, len, n * 1000 + version);
    struct node_chunk_id id = cid(n);
    assert_int_equal(node_store_put_chunk(s, &id, version, b, len), 0);
    free(b);
}

/* 0, or the get error; on success the bytes must be exactly what put_n wrote. */
static int check_n(struct node_store *s, uint64_t n, uint64_t version, size_t len)
{
    struct node_chunk_id id = cid(n);
    void *got;
    size_t glen;
    uint64_t gv;
    int rc = node_store_get_chunk_alloc(s, &id, &got, &glen, &gv);
    if (rc)
        return rc;
    uint8_t *want = malloc(len ? len : 1);
    fill(want, len, n * 1000 + version);
    assert_int_equal(glen, len);
    assert_int_equal(gv, version);
    assert_memory_equal(got, want, len);
    free(want);
    free(got);
    return 0;
}

static void test_record_format(void **state)
{
    (void)state;
    struct node_record r = {.type = NODE_REC_PUT, .id = cid(42), .version = 9, .len = 5};
    r.crc = node_crc32c("hello", 5);
    uint8_t h[NODE_RECORD_HDR_BYTES];
    node_record_encode(&r, h);
    struct node_record d;
    assert_int_equal(node_record_decode(h, &d), 0);
    assert_int_equal(d.type, NODE_REC_PUT);
    assert_memory_equal(&d.id.object, &r.id.object, NODE_OBJECT_ID_BYTES);
    assert_int_equal(d.id.stripe, r.id.stripe);
    assert_int_equal(d.id.index, r.id.index);
    assert_int_equal(d.version, 9);
    assert_int_equal(d.len, 5);
    assert_int_equal(d.crc, r.crc);
    /* Every single bit flip of the header is caught. */
    for (int bit = 0; bit < 8 * NODE_RECORD_HDR_BYTES; bit++) {
        h[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_equal(node_record_decode(h, &d), -EBADMSG);
        h[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    /* A tombstone carries no payload. */
    r.type = NODE_REC_TOMBSTONE;
    node_record_encode(&r, h);
    assert_int_equal(node_record_decode(h, &d), -EBADMSG);
    r.len = 0;
    node_record_encode(&r, h);
    assert_int_equal(node_record_decode(h, &d), 0);
    /* CRC32C (Castagnoli) check value. */
    assert_int_equal(node_crc32c("123456789", 9) ^ 0xffffffffu, 0xe3069283u);
}

static void run_basic(int gc)
{
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, gc);
    struct node_chunk_id id = cid(1), other = cid(2);
    uint8_t small[4];
    size_t len;
    uint64_t ver;
    assert_int_equal(node_store_get_chunk(s, &id, small, sizeof(small), &len, &ver), -ENOENT);
    put_n(s, 1, 1, 1000);
    assert_int_equal(node_store_get_chunk(s, &id, small, sizeof(small), &len, &ver), -EMSGSIZE);
    assert_int_equal(len, 1000);
    assert_int_equal(check_n(s, 1, 1, 1000), 0);
    put_n(s, 1, 3, 2000); /* newer replaces */
    assert_int_equal(check_n(s, 1, 3, 2000), 0);
    assert_int_equal(node_store_put_chunk(s, &id, 2, small, 4), -ESTALE);
    put_n(s, 1, 3, 300); /* same version: a repair rewrite */
    assert_int_equal(check_n(s, 1, 3, 300), 0);
    put_n(s, 2, 1, 0); /* empty chunk */
    assert_int_equal(check_n(s, 2, 1, 0), 0);
    assert_int_equal(node_store_put_chunk(s, &other, 1, small, (size_t)NODE_CHUNK_MAX + 1),
                     -EMSGSIZE);
    assert_int_equal(node_store_delete_chunk(s, &id, 2), -ESTALE);
    assert_int_equal(node_store_delete_chunk(s, &id, 3), 0);
    assert_int_equal(node_store_delete_chunk(s, &id, 3), -ENOENT);
    assert_int_equal(check_n(s, 1, 3, 300), -ENOENT);

    /* A second process (or open) is refused while the store is open. */
    struct node_store *again = NULL;
    assert_int_equal(node_store_open(dir, NULL, &again, NULL, 0), -EBUSY);
    assert_null(again);

    node_store_close(s);
    s = open_store(dir, 0, 0, !gc);
    assert_int_equal(check_n(s, 1, 3, 300), -ENOENT);
    assert_int_equal(check_n(s, 2, 1, 0), 0);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 1);
    assert_int_equal(st.live_bytes, NODE_RECORD_HDR_BYTES);
    assert_true(st.dead_bytes > 3000);
    /* The index's totals are kept between scans only while nothing changed. */
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 1);
    put_n(s, 3, 1, 100);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 2);
    struct node_chunk_id three = cid(3);
    assert_int_equal(node_store_delete_chunk(s, &three, 1), 0);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 1);
    /* A slow scan (as of millions of chunks: here its length is set to 1 s)
     * is reused, writes or not, until 20 times its length has passed. */
    s->scan_ns = 1000000000;
    put_n(s, 4, 1, 100);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 1);
    s->scan_at_ns -= NODE_SCAN_SPACING * s->scan_ns;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.chunks, 2);
    node_store_close(s);
    node_store_close(NULL);
    rmdir_all(dir);
}

static void test_basic_group_commit(void **state)
{
    (void)state;
    run_basic(1);
}

static void test_basic_direct(void **state)
{
    (void)state;
    run_basic(0);
}

struct writer_arg {
    struct node_store *s;
    int t;
};

enum { THREADS = 4, PER_THREAD = 40 };

static void *writer(void *p)
{
    struct writer_arg *a = p;
    for (int i = 0; i < PER_THREAD; i++)
        put_n(a->s, (uint64_t)(a->t * PER_THREAD + i), 1, (size_t)(100 + 37 * i));
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    char *dir = tmpdir();
    /* small segments: batches also cross segment boundaries */
    struct node_store *s = open_store(dir, 8192, 0, 1);
    pthread_t th[THREADS];
    struct writer_arg a[THREADS];
    for (int t = 0; t < THREADS; t++) {
        a[t] = (struct writer_arg){s, t};
        assert_int_equal(pthread_create(&th[t], NULL, writer, &a[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    node_store_close(s);
    s = open_store(dir, 8192, 0, 1);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < PER_THREAD; i++)
            assert_int_equal(check_n(s, (uint64_t)(t * PER_THREAD + i), 1, (size_t)(100 + 37 * i)),
                             0);
    struct node_scrub_result r;
    assert_int_equal(node_store_scrub(s, NULL, NULL, &r), 0);
    assert_int_equal(r.checked, THREADS * PER_THREAD);
    assert_int_equal(r.corrupt, 0);
    node_store_close(s);
    rmdir_all(dir);
}

struct names {
    char buf[16][64];
    int n;
};

static int name_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct names *n = arg;
    assert_int_equal(len, strlen(key));
    assert_memory_equal(blob, key, len); /* the tests store the key as its own blob */
    snprintf(n->buf[n->n++], 64, "%s", key);
    return 0;
}

struct async_state {
    int done, failed;
    pthread_mutex_t mu;
};

static void async_done(int rc, void *arg)
{
    struct async_state *a = arg;
    pthread_mutex_lock(&a->mu);
    a->done++;
    a->failed += rc != 0;
    pthread_mutex_unlock(&a->mu);
}

/* Async puts complete through the callback; close waits for every one of them. */
static void test_async_put(void **state)
{
    (void)state;
    enum { N = 50, LEN = 1234 };
    for (int gc = 0; gc < 2; gc++) {
        char *dir = tmpdir();
        struct node_store *s = open_store(dir, 16384, 0, gc);
        static uint8_t bufs[N][LEN];
        struct async_state a = {.mu = PTHREAD_MUTEX_INITIALIZER};
        for (uint64_t i = 0; i < N; i++) {
            fill(bufs[i], LEN, i * 1000 + 1);
            struct node_chunk_id id = cid(i);
            assert_int_equal(node_store_put_chunk_async(s, &id, 1, bufs[i], LEN, async_done, &a),
                             0);
        }
        struct node_chunk_id id = cid(0);
        assert_int_equal(node_store_put_chunk_async(s, &id, 1, bufs[0], LEN, NULL, NULL), -EINVAL);
        node_store_close(s);
        assert_int_equal(a.done, N);
        assert_int_equal(a.failed, 0);
        s = open_store(dir, 16384, 0, 1);
        for (uint64_t i = 0; i < N; i++)
            assert_int_equal(check_n(s, i, 1, LEN), 0);
        node_store_close(s);
        rmdir_all(dir);
    }
}

/* A write is acknowledged once durable, before its index txn commits (a
 * second flush): its callback runs in between, and a read there finds it. */
struct read_back {
    struct node_store *s;
    uint64_t n;
    int put_rc, get_rc, same;
    atomic_int done;
};

static void read_back_done(int rc, void *arg)
{
    struct read_back *b = arg;
    struct node_chunk_id id = cid(b->n);
    void *got = NULL;
    size_t len = 0;
    uint64_t version = 0;
    uint8_t want[777];
    fill(want, sizeof(want), b->n * 1000 + 1);
    b->put_rc = rc;
    b->get_rc = node_store_get_chunk_alloc(b->s, &id, &got, &len, &version);
    b->same = b->get_rc == 0 && len == sizeof(want) && version == 1 &&
              memcmp(got, want, sizeof(want)) == 0;
    free(got);
    atomic_store(&b->done, 1);
}

static void test_read_before_index(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    static uint8_t buf[777];
    for (uint64_t n = 0; n < 3; n++) {
        fill(buf, sizeof(buf), n * 1000 + 1);
        struct read_back b = {.s = s, .n = n};
        struct node_chunk_id id = cid(n);
        assert_int_equal(
            node_store_put_chunk_async(s, &id, 1, buf, sizeof(buf), read_back_done, &b), 0);
        while (!atomic_load(&b.done))
            usleep(1000);
        assert_int_equal(b.put_rc, 0);
        assert_int_equal(b.get_rc, 0);
        assert_true(b.same);
    }
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0); /* after the last txn: it waits for it */
    assert_int_equal(st.chunks, 3);
    node_store_close(s);
    rmdir_all(dir);
}

static void test_meta(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    const char *keys[] = {"b/2", "a", "b/1", "b/10", "c", "b/"};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(
            node_store_put_meta(s, "bk", keys[i], 1, 0, keys[i], strlen(keys[i]), NULL), 0);
    /* A bucket that extends "bk" must not mix in, before or after. */
    assert_int_equal(node_store_put_meta(s, "bk2", "a", 1, 0, "x", 1, NULL), 0);
    assert_int_equal(node_store_put_meta(s, "b", "zz", 1, 0, "y", 1, NULL), 0);

    void *blob;
    size_t len;
    assert_int_equal(node_store_get_meta(s, "bk", "b/10", &blob, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(blob, "b/10", 4);
    free(blob);
    assert_int_equal(node_store_get_meta(s, "bk", "zz", &blob, &len), -ENOENT);
    assert_int_equal(node_store_put_meta(s, "", "k", 1, 0, "x", 1, NULL), -EINVAL);
    char toolong[NODE_KEY_MAX];
    memset(toolong, 'b', sizeof(toolong) - 1); /* "bk" + NUL + this: one byte over */
    toolong[sizeof(toolong) - 1] = 0;
    assert_int_equal(node_store_put_meta(s, "bk", toolong, 1, 0, "x", 1, NULL), -ENAMETOOLONG);
    char longkey[600];
    memset(longkey, 'b', sizeof(longkey) - 1); /* sorts between "b/..." and "c" */
    longkey[599] = 0;

    struct names n = {0};
    int more;
    assert_int_equal(node_store_list_meta(s, "bk", NULL, NULL, 0, name_cb, &n, &more), 6);
    assert_int_equal(more, 0);
    const char *all[] = {"a", "b/", "b/1", "b/10", "b/2", "c"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(n.buf[i], all[i]);

    n.n = 0;
    assert_int_equal(node_store_list_meta(s, "bk", "b/", NULL, 2, name_cb, &n, &more), 2);
    assert_int_equal(more, 1);
    assert_string_equal(n.buf[1], "b/1");
    n.n = 0; /* resume after the marker */
    assert_int_equal(node_store_list_meta(s, "bk", "b/", "b/1", 2, name_cb, &n, &more), 2);
    assert_string_equal(n.buf[0], "b/10");
    assert_string_equal(n.buf[1], "b/2");
    assert_int_equal(more, 0);
    n.n = 0; /* a marker before the prefix starts at the prefix */
    assert_int_equal(node_store_list_meta(s, "bk", "b/1", "a", 0, name_cb, &n, &more), 2);
    n.n = 0; /* a marker past everything, and an overlong one */
    assert_int_equal(node_store_list_meta(s, "bk", "", "zzz", 0, name_cb, &n, &more), 0);
    assert_int_equal(node_store_list_meta(s, "bk", "", longkey, 0, name_cb, &n, &more), 1);
    assert_string_equal(n.buf[0], "c");

    assert_int_equal(node_store_delete_meta(s, "bk", "b/1"), 0);
    assert_int_equal(node_store_delete_meta(s, "bk", "b/1"), -ENOENT);
    node_store_close(s);
    s = open_store(dir, 0, 0, 1);
    n.n = 0;
    assert_int_equal(node_store_list_meta(s, "bk", "b", NULL, 0, name_cb, &n, &more), 3);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.metas, 7);
    node_store_close(s);
    rmdir_all(dir);
}

static int blob_cb(const char *key, const void *blob, size_t len, void *arg)
{
    (void)key;
    snprintf(arg, 8, "%.*s", (int)len, (const char *)blob);
    return 0;
}

/* The stored record of bk/k as a string ("" when none). */
static char *meta_str(struct node_store *s, const char *key)
{
    void *blob;
    size_t len;
    static char out[64];
    out[0] = 0;
    if (node_store_get_meta(s, "bk", key, &blob, &len) == 0) {
        snprintf(out, sizeof(out), "%.*s", (int)len, (char *)blob);
        free(blob);
    }
    return out;
}

static void test_meta_cas(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    uint64_t stored = 99;
    assert_int_equal(node_store_put_meta(s, "bk", "k", 0, 0, "v0", 2, NULL), -EINVAL);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, NODE_META_CHECK, NULL, 0, &stored), 0);
    assert_string_equal(meta_str(s, "k"), ""); /* a check stores nothing */
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "v5", 2, &stored), 0);
    /* Higher wins. */
    assert_int_equal(node_store_put_meta(s, "bk", "k", 7, 0, "v7", 2, &stored), 0);
    assert_string_equal(meta_str(s, "k"), "v7");
    /* Lower is refused and names what the key holds. */
    assert_int_equal(node_store_put_meta(s, "bk", "k", 6, 0, "v6", 2, &stored), -ESTALE);
    assert_int_equal(stored, 7);
    assert_string_equal(meta_str(s, "k"), "v7");
    assert_int_equal(node_store_put_meta(s, "bk", "k", 6, NODE_META_CHECK, NULL, 0, &stored),
                     -ESTALE);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 8, NODE_META_CHECK, NULL, 0, &stored), 0);
    /* The same record again is a success; the same version with other bytes is not. */
    assert_int_equal(node_store_put_meta(s, "bk", "k", 7, 0, "v7", 2, &stored), 0);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 7, 0, "vX", 2, &stored), -EEXIST);
    assert_int_equal(stored, 7);
    assert_string_equal(meta_str(s, "k"), "v7");
    /* It lasts a reopen, and listing sees the record, not its version. */
    node_store_close(s);
    s = open_store(dir, 0, 0, 1);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 6, 0, "v6", 2, &stored), -ESTALE);
    char seen[8] = "";
    assert_int_equal(node_store_list_meta(s, "bk", NULL, NULL, 0, blob_cb, seen, NULL), 1);
    assert_string_equal(seen, "v7");
    node_store_close(s);
    rmdir_all(dir);
}

static int len_cb(const char *key, const void *blob, size_t len, void *arg)
{
    (void)key;
    (void)blob;
    *(size_t *)arg = len;
    return 0;
}

/* A blob's tail after a NUL (an inline object's shard): the same version with
 * the same record part replaces the tail, other record bytes are still
 * EEXIST, and listings hand out the record part only. */
static void test_meta_tail(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    uint64_t stored;
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "rec\0AB", 6, &stored), 0);
    void *blob;
    size_t len;
    assert_int_equal(node_store_get_meta(s, "bk", "k", &blob, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(blob, "rec\0AB", 6);
    free(blob);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "rec\0AB", 6, &stored), 0); /* retry */
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "rec\0XYZ", 7, &stored), 0);
    assert_int_equal(node_store_get_meta(s, "bk", "k", &blob, &len), 0);
    assert_int_equal(len, 7);
    assert_memory_equal(blob, "rec\0XYZ", 7);
    free(blob);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "reX\0XYZ", 7, &stored), -EEXIST);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, 0, "rec", 3, &stored), -EEXIST);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 5, NODE_META_CHECK, NULL, 0, &stored),
                     -EEXIST);
    size_t listed = 0;
    assert_int_equal(node_store_list_meta(s, "bk", NULL, NULL, 0, len_cb, &listed, NULL), 1);
    assert_int_equal(listed, 3); /* "rec", not its tail */
    node_store_close(s);
    rmdir_all(dir);
}

/* A write answers the record it replaced (what the gateway frees without
 * reading first): none for a new key, a refusal or a retry of the same record. */
static void test_meta_old(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    void *old = (void *)1;
    size_t olen = 99;
    uint64_t stored;
    assert_int_equal(node_store_put_meta_old(s, "bk", "k", 5, 0, "v5", 2, &stored, &old, &olen), 0);
    assert_null(old);
    assert_int_equal(olen, 0);
    assert_int_equal(node_store_put_meta_old(s, "bk", "k", 7, 0, "v7!", 3, &stored, &old, &olen),
                     0);
    assert_non_null(old);
    assert_int_equal(olen, 2);
    assert_memory_equal(old, "v5", 2);
    free(old);
    assert_int_equal(node_store_put_meta_old(s, "bk", "k", 6, 0, "v6", 2, &stored, &old, &olen),
                     -ESTALE);
    assert_null(old);
    assert_int_equal(stored, 7);
    assert_int_equal(node_store_put_meta_old(s, "bk", "k", 7, 0, "v7!", 3, &stored, &old, &olen),
                     0);
    assert_null(old); /* a retry replaced nothing */
    assert_string_equal(meta_str(s, "k"), "v7!");
    node_store_close(s);
    rmdir_all(dir);
}

/* Writers racing on one key, each with its own versions: the key ends at the
 * highest version any of them sent, never a lower one that came later. */
#define CAS_THREADS 4
#define CAS_ROUNDS  300

struct cas_writer {
    struct node_store *s;
    int id;
    uint64_t top; /* highest version this writer had accepted */
    int refused;
};

static void *cas_main(void *arg)
{
    struct cas_writer *w = arg;
    for (int r = 1; r <= CAS_ROUNDS; r++) {
        /* Interleaved versions: writer w sends r * CAS_THREADS + w, in a shuffled order. */
        uint64_t v = (uint64_t)((r * 7919) % CAS_ROUNDS + 1) * CAS_THREADS + (uint64_t)w->id;
        char blob[32];
        int len = snprintf(blob, sizeof(blob), "%llu", (unsigned long long)v);
        uint64_t stored = 0;
        int rc = node_store_put_meta(w->s, "bk", "hot", v, 0, blob, (size_t)len, &stored);
        if (rc == 0 && v > w->top)
            w->top = v;
        else if (rc == -ESTALE && stored > v)
            w->refused++;
        else if (rc)
            return (void *)1;
    }
    return NULL;
}

struct long_names {
    char *key[16];
    int n;
};

static int long_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct long_names *n = arg;
    assert_int_equal(len, strlen(key));
    assert_memory_equal(blob, key, len);
    n->key[n->n++] = strdup(key);
    return 0;
}

static void long_names_clear(struct long_names *n)
{
    for (int i = 0; i < n->n; i++)
        free(n->key[i]);
    n->n = 0;
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *repeat(char c, size_t n, const char *tail)
{
    char *s = malloc(n + strlen(tail) + 1);
    memset(s, c, n);
    strcpy(s + n, tail);
    return s;
}

/* Keys beyond the LMDB key size: stored, found, listed in exact key order
 * (long keys sharing their indexed first bytes are ordered by hash in the
 * index), paged by marker and filtered by a prefix longer than the index holds. */
static void test_meta_long_keys(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    size_t p = 480 - 3; /* the key bytes "bk" NUL leaves in the index's short form */
    char *keys[] = {
        repeat('x', p, "b"),      repeat('x', p, "a"),          repeat('x', p, ""),
        repeat('x', p - 1, "y"),  repeat('x', p, "aaaaaaaaaa"), repeat('w', 1000, ""),
        repeat('x', 1021, "zzz"), repeat('x', p, "a\x01"),      strdup("z"),
        repeat('x', p, "ab"),
    };
    const int nk = (int)(sizeof(keys) / sizeof(keys[0]));
    for (int i = 0; i < nk; i++)
        assert_int_equal(
            node_store_put_meta(s, "bk", keys[i], 1, 0, keys[i], strlen(keys[i]), NULL), 0);
    assert_int_equal(node_store_put_meta(s, "bk", keys[0], 2, 0, "new", 3, NULL), 0); /* replaced */
    void *blob;
    size_t len;
    assert_int_equal(node_store_get_meta(s, "bk", keys[0], &blob, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(blob, "new", 3);
    free(blob);
    assert_int_equal(node_store_put_meta(s, "bk", keys[0], 3, 0, keys[0], strlen(keys[0]), NULL),
                     0);
    for (int i = 0; i < nk; i++) {
        assert_int_equal(node_store_get_meta(s, "bk", keys[i], &blob, &len), 0);
        assert_int_equal(len, strlen(keys[i]));
        assert_memory_equal(blob, keys[i], len);
        free(blob);
    }
    char *other = repeat('x', p, "c"); /* shares the indexed bytes, not stored */
    assert_int_equal(node_store_get_meta(s, "bk", other, &blob, &len), -ENOENT);
    assert_int_equal(node_store_delete_meta(s, "bk", other), -ENOENT);

    char *sorted[sizeof(keys) / sizeof(keys[0])];
    memcpy(sorted, keys, sizeof(keys));
    qsort(sorted, (size_t)nk, sizeof(char *), strp_cmp);
    struct long_names n = {0};
    int more;
    assert_int_equal(node_store_list_meta(s, "bk", NULL, NULL, 0, long_cb, &n, &more), nk);
    for (int i = 0; i < nk; i++)
        assert_string_equal(n.key[i], sorted[i]);
    long_names_clear(&n);
    /* one at a time, each page after the last key listed */
    char *marker = NULL;
    for (int i = 0; i < nk; i++) {
        assert_int_equal(node_store_list_meta(s, "bk", NULL, marker, 1, long_cb, &n, &more), 1);
        assert_string_equal(n.key[0], sorted[i]);
        assert_int_equal(more, i < nk - 1);
        free(marker);
        marker = n.key[0];
        n.n = 0;
    }
    free(marker);
    /* a prefix longer than the indexed bytes */
    char *pre = repeat('x', p, "a");
    assert_int_equal(node_store_list_meta(s, "bk", pre, NULL, 0, long_cb, &n, &more), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(strncmp(n.key[i], pre, strlen(pre)), 0);
    assert_true(strcmp(n.key[0], n.key[1]) < 0 && strcmp(n.key[1], n.key[2]) < 0 &&
                strcmp(n.key[2], n.key[3]) < 0);
    long_names_clear(&n);
    assert_int_equal(node_store_delete_meta(s, "bk", keys[1]), 0);
    assert_int_equal(node_store_get_meta(s, "bk", keys[1], &blob, &len), -ENOENT);
    assert_int_equal(node_store_list_meta(s, "bk", pre, NULL, 0, long_cb, &n, &more), 3);
    long_names_clear(&n);
    node_store_close(s);
    for (int i = 0; i < nk; i++)
        free(keys[i]);
    free(other);
    free(pre);
    rmdir_all(dir);
}

/* Readers beside the writers: every read finds a version at least the one
 * before (pending values, then LMDB's once applied), and listings go on. */
struct cas_reader {
    struct node_store *s;
    atomic_bool stop;
    int bad;
    atomic_long reads;
};

static int ignore_cb(const char *key, const void *blob, size_t len, void *arg)
{
    (void)key, (void)blob, (void)len, (void)arg;
    return 0;
}

/* The version "hot" holds (its value is the version, as text) into *v. */
static int hot_version(struct node_store *s, uint64_t *v)
{
    void *b;
    size_t len;
    int rc = node_store_get_meta(s, "bk", "hot", &b, &len);
    if (rc == 0) {
        char t[32];
        snprintf(t, sizeof(t), "%.*s", (int)len, (const char *)b);
        free(b);
        *v = strtoull(t, NULL, 10);
    }
    return rc;
}

static void *cas_read_main(void *arg)
{
    struct cas_reader *r = arg;
    uint64_t last = 0;
    while (!atomic_load(&r->stop)) {
        uint64_t v;
        int rc = hot_version(r->s, &v);
        if (rc == 0) {
            r->bad += v < last;
            last = v;
        } else if (rc != -ENOENT) {
            r->bad++;
        }
        if (++r->reads % 32 == 0) {
            r->bad += node_store_list_meta(r->s, "bk", NULL, NULL, 0, ignore_cb, NULL, NULL) != 1;
            r->bad += store_meta_flush(r->s) != 0; /* the pending values into LMDB */
        }
    }
    return NULL;
}

static void test_meta_cas_concurrent(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    assert_int_equal(node_store_put_meta(s, "bk", "hot", 1, 0, "1", 1, NULL), 0);
    struct cas_reader rd[2] = {{.s = s},
                               {.s = s}}; /* each one's applies free what the other reads */
    pthread_t reader[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&reader[i], NULL, cas_read_main, &rd[i]), 0);
    for (int i = 0; i < 2; i++) /* reading before the writers start (they may be quick) */
        while (atomic_load(&rd[i].reads) == 0)
            usleep(1000);
    pthread_t t[CAS_THREADS];
    struct cas_writer w[CAS_THREADS];
    for (int i = 0; i < CAS_THREADS; i++) {
        w[i] = (struct cas_writer){.s = s, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, cas_main, &w[i]), 0);
    }
    uint64_t top = 0;
    int refused = 0;
    for (int i = 0; i < CAS_THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        assert_null(ret);
        top = w[i].top > top ? w[i].top : top;
        refused += w[i].refused;
    }
    /* The highest version sent was accepted and is what the key holds. */
    uint64_t max = (uint64_t)CAS_ROUNDS * CAS_THREADS + CAS_THREADS - 1;
    assert_int_equal(top, max);
    assert_int_equal(strtoull(meta_str(s, "hot"), NULL, 10), max);
    assert_true(refused > 0); /* shuffled versions: lower ones came after higher ones */
    for (int i = 0; i < 2; i++) {
        atomic_store(&rd[i].stop, true);
        pthread_join(reader[i], NULL);
        assert_int_equal(rd[i].bad, 0);
        assert_true(rd[i].reads > 0);
    }
    node_store_close(s);
    rmdir_all(dir);
}

/* A read that starts after a write was acknowledged finds that write or a
 * later one, also while the write moves from the pending map to LMDB: one
 * thread writes a new version and applies it in turn, readers read all
 * along. */
#define APPLY_ROUNDS 400

struct applied_reader {
    struct node_store *s;
    _Atomic uint64_t *acked;
    atomic_bool *stop;
    int bad;
    long reads;
};

static void *applied_read_main(void *arg)
{
    struct applied_reader *r = arg;
    while (!atomic_load(r->stop)) {
        uint64_t least = atomic_load(r->acked), v;
        r->bad += hot_version(r->s, &v) != 0 || v < least;
        r->reads++;
    }
    return NULL;
}

static void test_meta_read_while_applied(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    assert_int_equal(node_store_put_meta(s, "bk", "hot", 1, 0, "1", 1, NULL), 0);
    _Atomic uint64_t acked = 1;
    atomic_bool stop = false;
    struct applied_reader rd[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        rd[i] = (struct applied_reader){.s = s, .acked = &acked, .stop = &stop};
        assert_int_equal(pthread_create(&t[i], NULL, applied_read_main, &rd[i]), 0);
    }
    for (uint64_t v = 2; v <= APPLY_ROUNDS; v++) {
        char b[32];
        int n = snprintf(b, sizeof(b), "%" PRIu64, v);
        assert_int_equal(node_store_put_meta(s, "bk", "hot", v, 0, b, (size_t)n, NULL), 0);
        atomic_store(&acked, v);
        assert_int_equal(store_meta_flush(s), 0);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(rd[i].bad, 0);
        assert_true(rd[i].reads > 0);
    }
    node_store_close(s);
    rmdir_all(dir);
}

struct idlist {
    struct node_chunk_id id[64];
    int n;
};

static int collect_cb(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    (void)version;
    (void)len;
    struct idlist *l = arg;
    l->id[l->n++] = *id;
    return 0;
}

static void test_list_chunks(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 0);
    for (uint64_t i = 0; i < 20; i++)
        put_n(s, i, 1, 10);
    struct idlist l = {.n = 0};
    assert_int_equal(node_store_list_chunks(s, NULL, 0, collect_cb, &l), 20);
    struct idlist page = {.n = 0};
    assert_int_equal(node_store_list_chunks(s, &l.id[4], 3, collect_cb, &page), 3);
    assert_memory_equal(&page.id[0], &l.id[5], sizeof(page.id[0]));
    assert_memory_equal(&page.id[2], &l.id[7], sizeof(page.id[0]));
    page.n = 0;
    assert_int_equal(node_store_list_chunks(s, &l.id[19], 0, collect_cb, &page), 0);
    node_store_close(s);
    rmdir_all(dir);
}

static char *seg_path(const char *dir, unsigned id)
{
    char *p = malloc(strlen(dir) + 32);
    sprintf(p, "%s/seg-%08x.log", dir, id);
    return p;
}

static void flip(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static int repair_cb(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    (void)version;
    struct idlist *l = arg;
    l->id[l->n++] = *id;
    return 0;
}

static int scrub_n;
static void scrub_cb(const struct node_chunk_id *id, uint64_t version, int err, void *arg)
{
    (void)id;
    (void)version;
    (void)arg;
    assert_int_equal(err, -EBADMSG);
    scrub_n++;
}

/* Swaps the index values of two chunks: each then points at the other's record. */
static void swap_index(const char *dir, struct node_chunk_id a, struct node_chunk_id b)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    char path[512];
    snprintf(path, sizeof(path), "%s/index.mdb", dir);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 64 << 20), 0);
    assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "chunks", 0, &dbi), 0);
    uint8_t ka[28], kb[28], va[64], vb[64];
    struct node_chunk_id *ids[2] = {&a, &b};
    uint8_t *keys[2] = {ka, kb};
    for (int i = 0; i < 2; i++) { /* the key layout is part of the index format */
        memcpy(keys[i], ids[i]->object, 16);
        for (int j = 0; j < 8; j++)
            keys[i][16 + j] = (uint8_t)(ids[i]->stripe >> (56 - 8 * j));
        for (int j = 0; j < 4; j++)
            keys[i][24 + j] = (uint8_t)(ids[i]->index >> (24 - 8 * j));
    }
    MDB_val k1 = {28, ka}, k2 = {28, kb}, v1, v2;
    assert_int_equal(mdb_get(txn, dbi, &k1, &v1), 0);
    assert_int_equal(mdb_get(txn, dbi, &k2, &v2), 0);
    size_t n1 = v1.mv_size, n2 = v2.mv_size;
    memcpy(va, v1.mv_data, n1);
    memcpy(vb, v2.mv_data, n2);
    v1 = (MDB_val){n2, vb};
    v2 = (MDB_val){n1, va};
    assert_int_equal(mdb_put(txn, dbi, &k1, &v1, 0), 0);
    assert_int_equal(mdb_put(txn, dbi, &k2, &v2, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void test_corruption(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    enum { LEN = 500, REC = NODE_RECORD_HDR_BYTES + LEN };
    for (uint64_t i = 0; i < 6; i++)
        put_n(s, i, 1, LEN);
    node_store_close(s);
    char *seg = seg_path(dir, 1);
    flip(seg, 1 * REC + NODE_RECORD_HDR_BYTES + 100); /* payload of chunk 1 */
    flip(seg, 2 * REC + 30);                          /* header (stripe) of chunk 2 */
    swap_index(dir, cid(3), cid(4));                  /* index points at the wrong record */

    s = open_store(dir, 0, 0, 1);
    assert_int_equal(check_n(s, 0, 1, LEN), 0);
    uint8_t buf[LEN];
    struct node_chunk_id id = cid(1);

    /* The event loop's read (page cache only, never blocking): a good chunk
     * as the blocking read gives it; a large one, and a corrupt one, left to
     * the blocking read (-EAGAIN), which alone marks it for repair. */
    struct node_chunk_id id0 = cid(0), none = cid(99);
    void *cached = NULL;
    size_t clen = 0;
    uint64_t cver = 0;
    assert_int_equal(node_store_get_chunk(s, &id0, buf, sizeof(buf), NULL, NULL), 0);
    assert_int_equal(node_store_get_chunk_cached(s, &id0, LEN, &cached, &clen, &cver), 0);
    assert_int_equal(clen, LEN);
    assert_int_equal(cver, 1);
    assert_memory_equal(cached, buf, LEN);
    free(cached);
    assert_int_equal(node_store_get_chunk_cached(s, &id0, LEN - 1, &cached, &clen, &cver), -EAGAIN);
    assert_null(cached);
    assert_int_equal(node_store_get_chunk_cached(s, &none, LEN, &cached, &clen, &cver), -ENOENT);
    for (int i = 1; i <= 4; i++) {
        struct node_chunk_id bad = cid((uint64_t)i);
        assert_int_equal(node_store_get_chunk_cached(s, &bad, LEN, &cached, &clen, &cver), -EAGAIN);
        assert_null(cached);
    }
    struct idlist none_marked = {.n = 0};
    assert_int_equal(node_store_list_repair(s, repair_cb, &none_marked), 0);

    memset(buf, 0x77, sizeof(buf));
    assert_int_equal(node_store_get_chunk(s, &id, buf, sizeof(buf), NULL, NULL), -EBADMSG);
    for (int i = 0; i < LEN; i++) /* nothing of the corrupt record reaches the caller */
        assert_int_equal(buf[i], 0);
    assert_int_equal(check_n(s, 2, 1, LEN), -EBADMSG);
    assert_int_equal(check_n(s, 3, 1, LEN), -EBADMSG);
    assert_int_equal(check_n(s, 4, 1, LEN), -EBADMSG);
    assert_int_equal(check_n(s, 5, 1, LEN), 0);

    struct idlist l = {.n = 0};
    assert_int_equal(node_store_list_repair(s, repair_cb, &l), 4);
    scrub_n = 0;
    struct node_scrub_result r;
    assert_int_equal(node_store_scrub(s, scrub_cb, NULL, &r), 0);
    assert_int_equal(r.checked, 6);
    assert_int_equal(r.corrupt, 4);
    assert_int_equal(scrub_n, 4);

    /* A rewrite (the repair) clears the mark and reads again. */
    put_n(s, 1, 1, LEN);
    assert_int_equal(check_n(s, 1, 1, LEN), 0);
    l.n = 0;
    assert_int_equal(node_store_list_repair(s, repair_cb, &l), 3);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.repair, 3);
    node_store_close(s);
    free(seg);
    rmdir_all(dir);
}

static void test_compaction(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { N = 60, LEN = 700 };
    struct node_store *s = open_store(dir, 4096, 0, 1);
    for (uint64_t i = 0; i < N; i++)
        put_n(s, i, 1, LEN);
    for (uint64_t i = 0; i < N; i += 2)
        put_n(s, i, 2, LEN / 2); /* overwrite half */
    for (uint64_t i = 1; i < N; i += 6) {
        struct node_chunk_id id = cid(i);
        assert_int_equal(node_store_delete_chunk(s, &id, 1), 0);
    }
    struct node_store_stats before, after;
    assert_int_equal(node_store_stats(s, &before), 0);
    assert_true(before.dead_bytes > 0);
    struct node_compact_result cr;
    assert_int_equal(node_store_compact(s, 0.0, &cr), 0);
    assert_true(cr.segments > 0);
    assert_int_equal(node_store_stats(s, &after), 0);
    assert_true(after.segment_bytes < before.segment_bytes);
    assert_int_equal(after.live_bytes, before.live_bytes);
    assert_int_equal(before.segment_bytes - after.segment_bytes, cr.bytes_freed - cr.bytes_copied);

    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < N; i++) {
            if (i % 6 == 1)
                assert_int_equal(check_n(s, i, 1, LEN), -ENOENT);
            else if (i % 2 == 0)
                assert_int_equal(check_n(s, i, 2, LEN / 2), 0);
            else
                assert_int_equal(check_n(s, i, 1, LEN), 0);
        }
        node_store_close(s);
        s = open_store(dir, 4096, 0, 0);
    }
    /* compaction again has (nearly) nothing left to do and loses nothing */
    assert_int_equal(node_store_compact(s, 0.5, &cr), 0);
    struct node_scrub_result r;
    assert_int_equal(node_store_scrub(s, NULL, NULL, &r), 0);
    assert_int_equal(r.corrupt, 0);
    assert_int_equal(r.checked, after.chunks);
    node_store_close(s);
    rmdir_all(dir);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *b = malloc((size_t)st.st_size + 1);
    assert_int_equal(read(fd, b, (size_t)st.st_size), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, len), (ssize_t)len);
    close(fd);
}

/*
 * Durable but unindexed records at the tail (what a crash between flush and
 * index leaves), cut at every offset: recovery keeps every acknowledged chunk,
 * indexes the whole unindexed records and drops the torn one.
 */
static void test_torn_tail(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { ACKED = 5, EXTRA = 3, LEN = 90, REC = NODE_RECORD_HDR_BYTES + LEN };
    struct node_store *s = open_store(dir, 0, 0, 0);
    for (uint64_t i = 0; i < ACKED; i++)
        put_n(s, i, 1, LEN);
    node_store_close(s);

    char *seg = seg_path(dir, 1), idx[512];
    snprintf(idx, sizeof(idx), "%s/index.mdb", dir);
    size_t seglen, idxlen;
    uint8_t *segb = slurp(seg, &seglen), *idxb = slurp(idx, &idxlen);
    assert_int_equal(seglen, ACKED * REC);
    segb = realloc(segb, seglen + EXTRA * REC);
    for (uint64_t e = 0; e < EXTRA; e++) {
        uint8_t *p = segb + seglen + e * REC;
        struct node_record r = {.type = NODE_REC_PUT, .id = cid(100 + e), .version = 1, .len = LEN};
        fill(p + NODE_RECORD_HDR_BYTES, LEN, (100 + e) * 1000 + 1);
        r.crc = node_crc32c(p + NODE_RECORD_HDR_BYTES, LEN);
        node_record_encode(&r, p);
    }
    for (size_t cut = seglen; cut <= seglen + EXTRA * REC; cut++) {
        spit(seg, segb, cut);
        spit(idx, idxb, idxlen);
        s = open_store(dir, 0, 0, 1);
        for (uint64_t i = 0; i < ACKED; i++)
            assert_int_equal(check_n(s, i, 1, LEN), 0);
        size_t whole = (cut - seglen) / REC;
        for (uint64_t e = 0; e < EXTRA; e++)
            assert_int_equal(check_n(s, 100 + e, 1, LEN), e < whole ? 0 : -ENOENT);
        struct node_store_stats st;
        assert_int_equal(node_store_stats(s, &st), 0);
        assert_int_equal(st.segment_bytes, seglen + whole * REC); /* torn bytes are gone */
        put_n(s, 200, 1, LEN);                                    /* and appends go on from there */
        assert_int_equal(check_n(s, 200, 1, LEN), 0);
        node_store_close(s);
    }

    /* Cut into indexed records: those before the cut stay, the cut ones are reported. */
    for (size_t cut = seglen - 2 * REC; cut < seglen; cut += 7) {
        spit(seg, segb, cut);
        spit(idx, idxb, idxlen);
        s = open_store(dir, 0, 0, 1);
        size_t whole = cut / REC;
        for (uint64_t i = 0; i < ACKED; i++)
            assert_int_equal(check_n(s, i, 1, LEN), i < whole ? 0 : -EBADMSG);
        struct idlist l = {.n = 0};
        assert_int_equal(node_store_list_repair(s, repair_cb, &l), ACKED - (int)whole);
        node_store_close(s);
    }
    free(segb);
    free(idxb);
    free(seg);
    rmdir_all(dir);
}

static void test_capacity(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { LEN = 1000, REC = NODE_RECORD_HDR_BYTES + LEN, CAP = 20 * REC + 10 };
    struct node_store *s = open_store(dir, 8 * REC, CAP, 1);
    uint8_t b[LEN];
    uint64_t n = 0;
    int rc;
    for (;; n++) {
        struct node_chunk_id id = cid(n);
        fill(b, LEN, n * 1000 + 1);
        if ((rc = node_store_put_chunk(s, &id, 1, b, LEN)) != 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_int_equal(n, 20);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_true(st.segment_bytes <= CAP);
    /* A big chunk fails as cleanly; a delete (a small tombstone) still fits. */
    assert_int_equal(node_store_put_chunk(s, &(struct node_chunk_id){0}, 1, b, LEN), -ENOSPC);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(check_n(s, i, 1, LEN), 0);
    node_store_close(s);

    /* Still full after a restart; deletes still work (tombstones are exempt from
     * the cap, or a full store could never be emptied) and compaction frees room. */
    s = open_store(dir, 8 * REC, CAP, 0);
    assert_int_equal(node_store_put_chunk(s, &(struct node_chunk_id){0}, 1, b, LEN), -ENOSPC);
    for (uint64_t i = 0; i < 8; i++) {
        struct node_chunk_id id = cid(i);
        assert_int_equal(node_store_delete_chunk(s, &id, 1), 0);
    }
    struct node_compact_result cr;
    assert_int_equal(node_store_compact(s, 0.0, &cr), 0);
    assert_true(cr.bytes_freed > 0);
    struct node_chunk_id id = cid(1000);
    assert_int_equal(node_store_put_chunk(s, &id, 1, b, LEN), 0);
    for (uint64_t i = 8; i < n; i++)
        assert_int_equal(check_n(s, i, 1, LEN), 0);
    node_store_close(s);
    rmdir_all(dir);
}

/*
 * A compaction output that never got registered (crash before the switch) holds
 * valid copies; they must not come back, even for a chunk deleted since.
 */
static void test_orphan_segment_removed(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    put_n(s, 1, 1, 10);
    put_n(s, 2, 1, 10);
    struct node_chunk_id two = cid(2);
    assert_int_equal(node_store_delete_chunk(s, &two, 1), 0);
    node_store_close(s);

    uint8_t rec[NODE_RECORD_HDR_BYTES + 10];
    struct node_record r = {.type = NODE_REC_PUT, .id = two, .version = 1, .len = 10};
    fill(rec + NODE_RECORD_HDR_BYTES, 10, 2 * 1000 + 1);
    r.crc = node_crc32c(rec + NODE_RECORD_HDR_BYTES, 10);
    node_record_encode(&r, rec);
    char *orphan = seg_path(dir, 0x42);
    spit(orphan, rec, sizeof(rec));

    s = open_store(dir, 0, 0, 1);
    assert_int_equal(access(orphan, F_OK), -1);
    assert_int_equal(check_n(s, 1, 1, 10), 0);
    assert_int_equal(check_n(s, 2, 1, 10), -ENOENT);
    put_n(s, 3, 1, 10);
    node_store_close(s);

    /* A lost index is not a crash: the segments are kept and the open refused. */
    char idx[512];
    snprintf(idx, sizeof(idx), "%s/index.mdb", dir);
    assert_int_equal(unlink(idx), 0);
    struct node_store *again = NULL;
    char err[256];
    assert_int_equal(node_store_open(dir, NULL, &again, err, sizeof(err)), -EUCLEAN);
    assert_non_null(strstr(err, "refusing"));
    free(orphan);
    orphan = seg_path(dir, 1);
    assert_int_equal(access(orphan, F_OK), 0);
    free(orphan);
    rmdir_all(dir);
}

/* A live record that fails verification during compaction is not copied. */
static void test_compaction_skips_corrupt(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { LEN = 400, REC = NODE_RECORD_HDR_BYTES + LEN };
    struct node_store *s = open_store(dir, 4 * REC, 0, 1);
    for (uint64_t i = 0; i < 8; i++) /* segments 1 and 2, four records each */
        put_n(s, i, 1, LEN);
    put_n(s, 0, 2, LEN); /* chunk 0 v1 in segment 1 is dead now */
    node_store_close(s);
    char *seg = seg_path(dir, 1);
    flip(seg, 2 * REC + NODE_RECORD_HDR_BYTES + 5); /* chunk 2, live */
    s = open_store(dir, 4 * REC, 0, 1);
    struct node_compact_result cr;
    assert_int_equal(node_store_compact(s, 0.0, &cr), 0);
    assert_int_equal(cr.segments, 1);
    assert_int_equal(cr.bytes_copied, 2 * REC); /* chunks 1 and 3 */
    assert_int_equal(access(seg, F_OK), -1);
    assert_int_equal(check_n(s, 2, 1, LEN), -ENOENT);
    struct idlist l = {.n = 0};
    assert_int_equal(node_store_list_repair(s, repair_cb, &l), 1);
    struct node_chunk_id two = cid(2);
    assert_memory_equal(l.id[0].object, two.object, NODE_OBJECT_ID_BYTES);
    for (uint64_t i = 1; i < 8; i++)
        if (i != 2)
            assert_int_equal(check_n(s, i, 1, LEN), 0);
    assert_int_equal(check_n(s, 0, 2, LEN), 0);
    node_store_close(s);
    free(seg);
    rmdir_all(dir);
}

/*
 * A write that the file system refuses halfway (here RLIMIT_FSIZE, the way to
 * make a real write fail without root) fails the put and leaves nothing behind.
 */
static void test_write_error(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { LEN = 3000, REC = NODE_RECORD_HDR_BYTES + LEN };
    struct node_store *s = open_store(dir, 0, 0, 0);
    for (uint64_t i = 0; i < 4; i++)
        put_n(s, i, 1, LEN);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4 * REC + LEN / 2; /* the next record fits only in part */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint8_t b[LEN];
    fill(b, LEN, 4 * 1000 + 1);
    struct node_chunk_id id = cid(4);
    int rc = node_store_put_chunk(s, &id, 1, b, LEN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_true(rc == -EFBIG || rc == -ENOSPC);
    assert_int_equal(check_n(s, 4, 1, LEN), -ENOENT);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.segment_bytes, 4 * REC); /* the partial record is gone */
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(check_n(s, i, 1, LEN), 0);
    put_n(s, 4, 1, LEN); /* and writing goes on once there is room */
    node_store_close(s);
    s = open_store(dir, 0, 0, 1);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(check_n(s, i, 1, LEN), 0);
    node_store_close(s);
    rmdir_all(dir);
}

/* Listings merge LMDB's records with those still in the metadata log:
 * random puts and deletes of short keys and of long ones (past the index's
 * inline bytes, sharing them), listed with prefixes, markers and limits
 * while pending, once applied, and after a reopen, each time against a
 * model; so are the stats' counts. */
#define LIST_KEYS 12

struct list_seen {
    char key[LIST_KEYS][700];
    char val[LIST_KEYS][32];
    int n;
};

static int list_seen_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct list_seen *l = arg;
    assert_true(l->n < LIST_KEYS && strlen(key) < sizeof(l->key[0]) && len < sizeof(l->val[0]));
    snprintf(l->key[l->n], sizeof(l->key[0]), "%s", key);
    snprintf(l->val[l->n], sizeof(l->val[0]), "%.*s", (int)len, (const char *)blob);
    l->n++;
    return 0;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_check(struct node_store *s, char **keys, char (*model)[32], const char *prefix,
                       const char *after, size_t limit)
{
    const char *want[LIST_KEYS];
    int nw = 0, match = 0;
    for (int i = 0; i < LIST_KEYS; i++) /* keys[] is sorted */
        if (model[i][0] && strncmp(keys[i], prefix, strlen(prefix)) == 0 &&
            strcmp(keys[i], after) > 0 && match++ < (int)(limit ? limit : LIST_KEYS))
            want[nw++] = keys[i];
    struct list_seen got = {.n = 0};
    int more = -1;
    assert_int_equal(node_store_list_meta(s, "bk", prefix, after, limit, list_seen_cb, &got, &more),
                     nw);
    assert_int_equal(got.n, nw);
    assert_int_equal(more, match > nw);
    for (int i = 0; i < nw; i++) {
        assert_string_equal(got.key[i], want[i]);
        int k = 0;
        while (strcmp(keys[k], want[i]) != 0)
            k++;
        assert_string_equal(got.val[i], model[k]);
    }
}

static void test_meta_list_pending(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    char *keys[LIST_KEYS], lp[601];
    memset(lp, 'p', 600);
    lp[600] = 0;
    static const char *const shorts[] = {"a", "a/1", "a/2", "a/10", "b", "b/x", "c"};
    for (int i = 0; i < 7; i++)
        keys[i] = strdup(shorts[i]);
    for (int i = 7; i < LIST_KEYS; i++) { /* lp + "0" .. lp + "4": one index group */
        keys[i] = malloc(sizeof(lp) + 2);
        snprintf(keys[i], sizeof(lp) + 2, "%s%d", lp, i - 7);
    }
    qsort(keys, LIST_KEYS, sizeof(keys[0]), str_cmp);
    char model[LIST_KEYS][32] = {{0}};
    char lp490[491];
    memcpy(lp490, lp, 490);
    lp490[490] = 0;
    const char *prefixes[] = {"", "a", "a/", "b", "zz", lp490, lp};
    const char *afters[] = {"", "a", "a/1", "b/x", lp, keys[LIST_KEYS - 2]};
    const size_t limits[] = {0, 1, 2, 5};
    uint64_t r = 7, version = 1;
    /* A listing or the stats leave what is pending in the log (they once
     * applied it). */
    snprintf(model[0], sizeof(model[0]), "v1");
    assert_int_equal(node_store_put_meta(s, "bk", keys[0], 1, 0, "v1", 2, NULL), 0);
    list_check(s, keys, model, "", "", 0);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.metas, 1);
    assert_int_equal(s->npending, 1); /* neither applies it */
    for (int op = 0; op < 1500; op++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)(r >> 33) % LIST_KEYS, what = (int)(r >> 45) % 20;
        if (what < 10) {
            version++;
            snprintf(model[k], sizeof(model[k]), "v%" PRIu64, version);
            assert_int_equal(
                node_store_put_meta(s, "bk", keys[k], version, 0, model[k], strlen(model[k]), NULL),
                0);
        } else if (what < 14) {
            assert_int_equal(node_store_delete_meta(s, "bk", keys[k]), model[k][0] ? 0 : -ENOENT);
            model[k][0] = 0;
        } else if (what < 19) {
            list_check(s, keys, model, prefixes[(r >> 20) % 7], afters[(r >> 24) % 6],
                       limits[(r >> 28) % 4]);
        } else {
            int n = 0; /* the stats count what is pending too */
            for (int i = 0; i < LIST_KEYS; i++)
                n += model[i][0] != 0;
            struct node_store_stats st;
            assert_int_equal(node_store_stats(s, &st), 0);
            assert_int_equal(st.metas, n);
            assert_int_equal(store_meta_flush(s), 0);
        }
        if (op == 1000) { /* and after a reopen, which applies the log */
            node_store_close(s);
            s = open_store(dir, 0, 0, 1);
        }
    }
    for (size_t p = 0; p < 7; p++)
        for (size_t a = 0; a < 6; a++)
            list_check(s, keys, model, prefixes[p], afters[a], 0);
    node_store_close(s);
    for (int i = 0; i < LIST_KEYS; i++)
        free(keys[i]);
    rmdir_all(dir);
}

/* The metadata log (node/store_meta_log.c): a process that dies with writes
 * and deletes acknowledged but not yet in LMDB loses none of them, whether
 * they were still pending or applied because a half of the log filled up. */
static void big_blob(uint8_t *p, int i)
{
    for (size_t j = 0; j < NODE_META_MAX; j++)
        p[j] = (uint8_t)('a' + (j * 7 + (size_t)i) % 26);
}

/* Keys big<from>..big<to - 1> of bucket b written with big_blob(i) at
 * version 1: 0, or the first failure (a child reports it). */
static int put_bigs(struct node_store *s, int from, int to)
{
    uint8_t *big = malloc(NODE_META_MAX);
    int rc = big ? 0 : -ENOMEM;
    for (int i = from; i < to && rc == 0; i++) {
        char key[16];
        snprintf(key, sizeof(key), "big%d", i);
        big_blob(big, i);
        rc = node_store_put_meta(s, "b", key, 1, 0, big, NODE_META_MAX, NULL);
    }
    free(big);
    return rc;
}

/* Keys big<from>..big<to - 1> hold big_blob(i). */
static void assert_bigs(struct node_store *s, int from, int to)
{
    uint8_t *want = malloc(NODE_META_MAX);
    assert_non_null(want);
    for (int i = from; i < to; i++) {
        char key[16];
        void *got;
        size_t len;
        snprintf(key, sizeof(key), "big%d", i);
        big_blob(want, i);
        assert_int_equal(node_store_get_meta(s, "b", key, &got, &len), 0);
        assert_int_equal(len, NODE_META_MAX);
        assert_memory_equal(got, want, len);
        free(got);
    }
    free(want);
}

/* In a forked child (no cmocka there): the store at dir, or _exit(1). */
static struct node_store *child_open(const char *dir)
{
    struct node_store_options o;
    node_store_options_default(&o);
    o.map_size = 64 << 20;
    struct node_store *s;
    if (node_store_open(dir, &o, &s, NULL, 0))
        _exit(1);
    return s;
}

static void test_meta_log_replay(void **state)
{
    (void)state;
    char *dir = tmpdir();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct node_store *s = child_open(dir);
        char key[16], blob[32];
        for (int v = 1; v <= 3; v++)
            for (int i = 0; i < 50; i++) {
                snprintf(key, sizeof(key), "k%d", i);
                int n = snprintf(blob, sizeof(blob), "v%d-%d", v, i);
                if (node_store_put_meta(s, "b", key, (uint64_t)v, 0, blob, (size_t)n, NULL))
                    _exit(2);
            }
        if (put_bigs(s, 0, 12)) /* 12 MiB: more than a half of the log holds */
            _exit(3);
        if (node_store_delete_meta(s, "b", "k0"))
            _exit(4);
        if (node_store_put_meta(s, "b", "k1", 4, 0, "v4-1", 4, NULL))
            _exit(5);
        _exit(0); /* no close: what is pending dies with the process */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    for (int round = 0; round < 2; round++) { /* the second open finds the log applied */
        struct node_store *s = open_store(dir, 0, 0, 1);
        void *got;
        size_t len;
        assert_int_equal(node_store_get_meta(s, "b", "k0", &got, &len), -ENOENT);
        for (int i = 1; i < 50; i++) {
            char key[16], blob[32];
            snprintf(key, sizeof(key), "k%d", i);
            int n = snprintf(blob, sizeof(blob), "v%d-%d", i == 1 ? 4 : 3, i);
            assert_int_equal(node_store_get_meta(s, "b", key, &got, &len), 0);
            assert_int_equal(len, n);
            assert_memory_equal(got, blob, len);
            free(got);
        }
        assert_bigs(s, 0, 12);
        uint64_t stored;
        assert_int_equal(node_store_put_meta(s, "b", "k1", 3, 0, "x", 1, &stored), -ESTALE);
        assert_int_equal(stored, 4);
        struct node_store_stats ss;
        assert_int_equal(node_store_stats(s, &ss), 0);
        assert_int_equal(ss.metas, 49 + 12);
        node_store_close(s);
    }
    rmdir_all(dir);
}

/* A half of the metadata log that fills is applied to LMDB by the applier
 * thread while the writes go on in the other half: here the applier is held
 * (this test keeps LMDB's one write txn open) and the writes after the
 * switch still complete and read back, through the frozen map too. The
 * process dies with both halves unapplied: recovery applies them oldest
 * first, so x's later version and big0's delete (in the newer half) win. */
static void test_meta_log_halves(void **state)
{
    (void)state;
    char *dir = tmpdir();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30); /* a write that waited for the apply would hang here */
        struct node_store *s = child_open(dir);
        MDB_txn *hold;
        uint8_t *big = malloc(NODE_META_MAX);
        if (!big || mdb_txn_begin(s->env, NULL, 0, &hold))
            _exit(1);
        if (node_store_put_meta(s, "b", "x", 1, 0, "one", 3, NULL))
            _exit(2);
        if (put_bigs(s, 0, 8)) /* the 8th does not fit in the first half */
            _exit(3);
        if (node_store_put_meta(s, "b", "x", 2, 0, "two", 3, NULL) ||
            node_store_delete_meta(s, "b", "big0"))
            _exit(4);
        void *got;
        size_t len;
        big_blob(big, 3);
        if (node_store_get_meta(s, "b", "big3", &got, &len) || len != NODE_META_MAX ||
            memcmp(got, big, len))
            _exit(5); /* frozen, not applied */
        free(got);
        uint64_t stored;
        if (node_store_put_meta(s, "b", "big3", 1, 0, "zz", 2, &stored) != -EEXIST || stored != 1)
            _exit(6); /* the compare-and-set sees the frozen value too */
        _exit(0);     /* the applier never got LMDB: both halves are in the log only */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int round = 0; round < 2; round++) {
        struct node_store *s = open_store(dir, 0, 0, 1);
        void *got;
        size_t len;
        assert_int_equal(node_store_get_meta(s, "b", "x", &got, &len), 0);
        assert_int_equal(len, 3);
        assert_memory_equal(got, "two", 3);
        free(got);
        assert_int_equal(node_store_get_meta(s, "b", "big0", &got, &len), -ENOENT);
        assert_bigs(s, 1, 8);
        struct node_store_stats ss;
        assert_int_equal(node_store_stats(s, &ss), 0);
        assert_int_equal(ss.metas, 8);
        node_store_close(s);
    }
    rmdir_all(dir);
}

/* The metadata log is written through when made, so no extent of it is
 * unwritten: overwriting one would change file system metadata, and every
 * flush would commit the journal (store_meta_log.c). FIEMAP says it on
 * ext4, xfs and btrfs; a file system without it (tmpfs) has no journal. */
static void test_meta_log_written_through(void **state)
{
    (void)state;
    char *dir = tmpdir();
    node_store_close(open_store(dir, 0, 0, 1));
    char path[512];
    snprintf(path, sizeof(path), "%s/meta.log", dir);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    enum { MAX = 256 };
    struct fiemap *fm = calloc(1, sizeof(*fm) + MAX * sizeof(struct fiemap_extent));
    fm->fm_length = FIEMAP_MAX_OFFSET;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = MAX;
    if (ioctl(fd, FS_IOC_FIEMAP, fm) != 0) {
        print_message("no FIEMAP here (%s): nothing to check\n", strerror(errno));
    } else {
        uint64_t mapped = 0;
        for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
            assert_false(fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN);
            mapped += fm->fm_extents[i].fe_length;
        }
        assert_int_equal(mapped, 2 * META_LOG_BYTES); /* all of it, no hole */
    }
    free(fm);
    close(fd);
    rmdir_all(dir);
}

/* A conditional delete (tombstone collection) never removes a record written since. */
static void test_meta_delete_if(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct node_store *s = open_store(dir, 0, 0, 1);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 1, 0, "tomb-1", 6, NULL), 0);
    assert_int_equal(node_store_put_meta(s, "bk", "k", 2, 0, "live-2", 6, NULL), 0);
    assert_int_equal(node_store_delete_meta_if(s, "bk", "k", "tomb-1", 6), -ESTALE);
    assert_int_equal(node_store_delete_meta_if(s, "bk", "k", "live-", 5), -ESTALE);
    void *blob;
    size_t len;
    assert_int_equal(node_store_get_meta(s, "bk", "k", &blob, &len), 0);
    assert_memory_equal(blob, "live-2", 6);
    free(blob);
    assert_int_equal(node_store_delete_meta_if(s, "bk", "k", "live-2", 6), 0);
    assert_int_equal(node_store_get_meta(s, "bk", "k", &blob, &len), -ENOENT);
    assert_int_equal(node_store_delete_meta_if(s, "bk", "k", "live-2", 6), -ENOENT);
    node_store_close(s);
    rmdir_all(dir);
}

/* cluster.json's "compaction": defaults, overrides, clear refusals. */
static void test_compaction_config(void **state)
{
    (void)state;
    struct node_compaction_config c = {0}, r;
    char err[256];
    assert_int_equal(node_compaction_resolve(&c, &r), 0);
    assert_int_equal(r.interval_ms, 1000);
    assert_true(r.dead_ratio == 0.4 && r.mbps == 50 && r.seal_bytes == 16u << 20);
    json_t *j = json_pack("{s:i,s:f,s:i,s:i}", "interval_ms", -1, "dead_ratio", 0.25, "seal_bytes",
                          65536, "mbps", -1);
    assert_int_equal(node_compaction_from_json(j, &c, err, sizeof(err)), 0);
    json_decref(j);
    assert_int_equal(node_compaction_resolve(&c, &r), 0);
    assert_true(r.interval_ms == -1 && r.dead_ratio == 0.25 && r.seal_bytes == 65536 &&
                r.mbps == -1);
    static const char *const bad[] = {"{\"dead_ratio\": 1.5}", "{\"interval\": 5}",
                                      "{\"mbps\": \"fast\"}", "[1]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        j = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        assert_int_equal(node_compaction_from_json(j, &c, err, sizeof(err)), -EINVAL);
        assert_true(err[0] != 0);
        json_decref(j);
    }
    struct node_compactor *none;
    c.interval_ms = -1;
    assert_int_equal(node_compactor_start(NULL, &c, &none), 0); /* off: no thread */
    assert_null(none);
}

static int cancel_now(void *arg)
{
    return ++*(int *)arg > 3;
}

/*
 * Background compaction's knobs: a store whose churn never fills a segment
 * (all of it in the active one) gets its dead bytes back only by sealing the
 * active segment; victims merge into one output; cancel loses nothing; the
 * byte budget paces the copy.
 */
static void test_compaction_seal_active(void **state)
{
    (void)state;
    char *dir = tmpdir();
    enum { N = 200, LEN = 900 };
    struct node_store *s = open_store(dir, 1 << 20, 0, 1);
    for (uint64_t i = 0; i < N; i++)
        put_n(s, i, 1, LEN);
    for (uint64_t i = 0; i < N; i++)
        if (i % 4) {
            struct node_chunk_id id = cid(i);
            assert_int_equal(node_store_delete_chunk(s, &id, 1), 0);
        }
    struct node_store_stats st;
    struct node_compact_result cr;
    assert_int_equal(node_store_compact(s, 0.0, &cr), 0); /* the active one is left alone */
    assert_int_equal(cr.segments, 0);
    int calls = 0;
    struct node_compact_options o = {
        .min_dead = 0.5, .seal_active_bytes = 4096, .cancel = cancel_now, .arg = &calls};
    assert_int_equal(node_store_compact_opts(s, &o, &cr), -ECANCELED);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_true(st.dead_bytes > 3 * st.live_bytes); /* nothing freed, nothing lost */
    for (uint64_t i = 0; i < N; i += 4)
        assert_int_equal(check_n(s, i, 1, LEN), 0);

    /* 50 live records of ~1 KiB at 200 KB/s: about a quarter of a second */
    o.cancel = NULL;
    o.rate_bytes = 200000;
    o.yield_ms = 5;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(node_store_compact_opts(s, &o, &cr), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_int_equal(cr.segments, 1);
    assert_true(secs >= 0.9 * (double)cr.bytes_copied / 200000.0);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.segment_bytes, st.live_bytes);
    assert_int_equal(st.compacted_segments, 1);
    /* the next write rolls to a new segment; the old data still reads */
    put_n(s, N, 1, LEN);
    for (uint64_t i = 0; i <= N; i++)
        assert_int_equal(check_n(s, i, 1, LEN), i % 4 && i != N ? -ENOENT : 0);
    /* several sealed victims merge into one output segment */
    node_store_close(s);
    s = open_store(dir, 8192, 0, 1);
    for (uint64_t i = 1000; i < 1100; i++)
        put_n(s, i, 1, LEN);
    for (uint64_t i = 1000; i < 1100; i++)
        if (i % 5) {
            struct node_chunk_id id = cid(i);
            assert_int_equal(node_store_delete_chunk(s, &id, 1), 0);
        }
    struct node_store_stats before;
    assert_int_equal(node_store_stats(s, &before), 0);
    o.rate_bytes = 0;
    assert_int_equal(node_store_compact_opts(s, &o, &cr), 0);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_true(cr.segments > 3);
    assert_true(st.segments < before.segments - cr.segments / 2);
    node_store_close(s);
    s = open_store(dir, 8192, 0, 0);
    for (uint64_t i = 1000; i < 1100; i++)
        assert_int_equal(check_n(s, i, 1, LEN), i % 5 ? -ENOENT : 0);
    node_store_close(s);
    rmdir_all(dir);
}

/* Whether dir's file system takes O_DIRECT (older tmpfs did not). */
static bool takes_o_direct(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/o-direct-probe", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_DIRECT, 0600);
    if (fd >= 0)
        close(fd);
    unlink(p);
    return fd >= 0;
}

/* put_n from a page-aligned buffer (aligned), or from one byte past one. */
static void put_from(struct node_store *s, uint64_t n, uint64_t version, size_t len, bool aligned)
{
    uint8_t *b = NULL;
    assert_int_equal(posix_memalign((void **)&b, NODE_RECORD_ALIGN, len + 1), 0);
    uint8_t *p = aligned ? b : b + 1;
    fill(p, len, n * 1000 + version);
    struct node_chunk_id id = cid(n);
    assert_int_equal(node_store_put_chunk(s, &id, version, p, len), 0);
    free(b);
}

/* Walks the records of a segment file; the flags of each in flags[], their
 * count returned. Each aligned one's payload starts and ends on the
 * alignment, and every payload matches its CRC. */
static int walk_records(const char *seg, uint8_t *flags, int max)
{
    size_t len;
    uint8_t *b = slurp(seg, &len);
    uint64_t off = 0;
    int n = 0;
    while (off < len) {
        struct node_record r;
        assert_true(n < max);
        assert_int_equal(node_record_decode(b + off, &r), 0);
        uint64_t end = node_record_end(off, r.len, r.flags);
        uint64_t at =
            r.flags ? end - (r.len + NODE_RECORD_ALIGN - 1) / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN
                    : off + NODE_RECORD_HDR_BYTES;
        if (r.flags)
            assert_int_equal(at % NODE_RECORD_ALIGN, 0);
        assert_true(end <= len);
        assert_int_equal(node_crc32c(b + at, r.len), r.crc);
        flags[n++] = r.flags;
        off = end;
    }
    free(b);
    return n;
}

/*
 * Large chunks in aligned buffers are aligned records written with O_DIRECT
 * (where the file system takes it): laid out on the alignment between plain
 * records, read back, caught when corrupt, found again by the tail rescan
 * after the index lost them, cut cleanly when torn, copied plain by
 * compaction; unaligned buffers, small chunks and NODE_DIRECT_NEVER stay plain.
 */
static void test_aligned_records(void **state)
{
    (void)state;
    char *dir = tmpdir(), idx[512];
    snprintf(idx, sizeof(idx), "%s/index.mdb", dir);
    bool direct = takes_o_direct(dir);
    enum { SMALL = 500, BIG = 1 << 20, ODD = 300001 };
    struct node_store *s = open_store(dir, 0, 0, 1);
    put_n(s, 0, 1, SMALL); /* leaves the tail off the alignment */
    node_store_close(s);
    size_t len0, len1;
    uint8_t *idx0 = slurp(idx, &len0); /* the index before the large chunks */

    s = open_store(dir, 0, 0, 1);
    put_from(s, 1, 1, BIG, true);
    put_from(s, 2, 1, ODD, true);  /* the payload padded to the alignment */
    put_from(s, 3, 1, BIG, false); /* unaligned buffer: plain */
    put_n(s, 4, 1, SMALL);
    const size_t lens[] = {SMALL, BIG, ODD, BIG, SMALL};
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(check_n(s, i, 1, lens[i]), 0);
    struct node_store_stats st;
    assert_int_equal(node_store_stats(s, &st), 0);
    uint64_t mid = BIG + ODD / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN; /* the tails go buffered */
    assert_int_equal(st.direct_bytes, direct ? mid : 0);
    node_store_close(s);

    char *seg = seg_path(dir, 1);
    uint8_t flags[8];
    assert_int_equal(walk_records(seg, flags, 8), 5);
    const uint8_t want[] = {0, NODE_REC_ALIGNED, NODE_REC_ALIGNED, 0, 0};
    assert_memory_equal(flags, want, 5);

    /* The index lost the batch (a crash between flush and index): the tail
     * rescan finds the aligned records again. */
    size_t seglen;
    uint8_t *seg1 = slurp(seg, &seglen), *idx1 = slurp(idx, &len1);
    spit(idx, idx0, len0);
    s = open_store(dir, 0, 0, 1);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(check_n(s, i, 1, lens[i]), 0);
    node_store_close(s);
    /* Torn inside the second aligned payload: it and what follows are gone. */
    size_t cut = NODE_RECORD_HDR_BYTES + SMALL;
    cut = (cut + NODE_RECORD_HDR_BYTES + NODE_RECORD_ALIGN - 1) / NODE_RECORD_ALIGN *
              NODE_RECORD_ALIGN +
          BIG; /* record 2's header */
    spit(seg, seg1, cut + NODE_RECORD_ALIGN + 4096 * 10);
    spit(idx, idx0, len0);
    s = open_store(dir, 0, 0, 1);
    assert_int_equal(check_n(s, 1, 1, BIG), 0);
    assert_int_equal(check_n(s, 2, 1, ODD), -ENOENT);
    assert_int_equal(check_n(s, 4, 1, SMALL), -ENOENT);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.segment_bytes, cut);
    node_store_close(s);

    /* Every record whole again; a flipped byte of an aligned payload is caught. */
    spit(seg, seg1, seglen);
    spit(idx, idx1, len1);
    flip(seg, (off_t)cut + NODE_RECORD_ALIGN + 1000);
    s = open_store(dir, 0, 0, 1);
    assert_int_equal(check_n(s, 2, 1, ODD), -EBADMSG);
    put_from(s, 2, 2, ODD, true); /* the repair rewrites it */
    put_n(s, 0, 2, SMALL);
    /* Compaction copies the live aligned records as plain ones. */
    struct node_compact_options co = {.min_dead = 0, .seal_active_bytes = 1};
    struct node_compact_result cr;
    assert_int_equal(node_store_compact_opts(s, &co, &cr), 0);
    assert_true(cr.segments >= 1);
    node_store_close(s);
    s = open_store(dir, 0, 0, 1);
    const uint64_t vers[] = {2, 1, 2, 1, 1};
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(check_n(s, i, vers[i], lens[i]), 0);
    node_store_close(s);
    free(seg1);
    free(idx1);
    free(idx0);
    free(seg);
    rmdir_all(dir);

    /* NODE_DIRECT_NEVER: every record plain. */
    dir = tmpdir();
    struct node_store_options o;
    node_store_options_default(&o);
    o.map_size = 64 << 20;
    o.direct_min = NODE_DIRECT_NEVER;
    char err[256];
    assert_int_equal(node_store_open(dir, &o, &s, err, sizeof(err)), 0);
    put_from(s, 1, 1, BIG, true);
    assert_int_equal(check_n(s, 1, 1, BIG), 0);
    assert_int_equal(node_store_stats(s, &st), 0);
    assert_int_equal(st.direct_bytes, 0);
    node_store_close(s);
    seg = seg_path(dir, 1);
    assert_int_equal(walk_records(seg, flags, 8), 1);
    assert_int_equal(flags[0], 0);
    free(seg);
    rmdir_all(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_format),
        cmocka_unit_test(test_basic_group_commit),
        cmocka_unit_test(test_basic_direct),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_async_put),
        cmocka_unit_test(test_read_before_index),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_meta_long_keys),
        cmocka_unit_test(test_meta_cas),
        cmocka_unit_test(test_meta_tail),
        cmocka_unit_test(test_meta_cas_concurrent),
        cmocka_unit_test(test_meta_read_while_applied),
        cmocka_unit_test(test_list_chunks),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_write_error),
        cmocka_unit_test(test_orphan_segment_removed),
        cmocka_unit_test(test_compaction_skips_corrupt),
        cmocka_unit_test(test_compaction_seal_active),
        cmocka_unit_test(test_meta_delete_if),
        cmocka_unit_test(test_meta_log_replay),
        cmocka_unit_test(test_meta_log_halves),
        cmocka_unit_test(test_meta_log_written_through),
        cmocka_unit_test(test_meta_list_pending),
        cmocka_unit_test(test_meta_old),
        cmocka_unit_test(test_compaction_config),
        cmocka_unit_test(test_aligned_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
