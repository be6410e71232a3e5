/*
 * Multipart uploads in the object layer on the embedded cluster (RS(6,3),
 * 64 KiB chunks, so a 5 MiB part is 14 stripes and a part's short last
 * stripe sits at every part boundary): completed objects read back whole and
 * by ranges across part boundaries, also degraded; the part list is judged;
 * parts left out, replaced parts, aborted uploads and deleted multipart
 * objects give their chunks back (the nodes' live bytes say so).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "object/objects.h"

#define CHUNK 65536
#define P1    (5u << 20)          /* exactly the minimum part size */
#define P2    ((5u << 20) + 1000) /* ends in a short stripe */
#define P3    3000u

static char dir[256];

static struct gw_objects *open_cluster(void)
{
    json_t *opts =
        json_pack("{s:i,s:i,s:i}", "chunk_size", CHUNK, "gc_delay_ms", 0, "timeout_ms", 3000);
    struct gw_objects *o = NULL;
    char msg[256];
    int rc = gw_objects_open_embedded_opts(dir, opts, &o, msg, sizeof(msg));
    json_decref(opts);
    if (rc)
        fail_msg("open: %s (%d)", msg, rc);
    return o;
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

/* Chunk bytes the nodes hold, once pending garbage is collected (close does it). */
static uint64_t live_bytes(struct gw_objects **o)
{
    gw_objects_close(*o);
    *o = open_cluster();
    json_t *c;
    assert_int_equal(gw_objects_cluster_json(*o, &c), 0);
    uint64_t sum = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(c, "nodes"), i, n) sum +=
        (uint64_t)json_integer_value(json_object_get(n, "live_bytes"));
    json_decref(c);
    return sum;
}

/* Until the garbage queued so far is deleted: a delete meant for a node that
 * is down is left to the scanner (orphans after orphan_grace_ms), so taking
 * nodes down while the end of an upload still frees its unused parts would
 * leave them for this test's live byte counts. */
static void wait_gc(struct gw_objects *o)
{
    struct gw_objects_stats st;
    for (int ms = 0;; ms += 10) {
        assert_int_equal(gw_objects_counters(o, &st), 0);
        if (st.gc_pending == 0)
            return;
        if (ms >= 60000)
            fail_msg("%llu stripes still wait for gc", (unsigned long long)st.gc_pending);
        usleep(10000);
    }
}

static int part(struct gw_objects *o, const char *key, const char *uid, int number,
                const uint8_t *d, size_t n, struct gw_part_info *out)
{
    struct gw_put *p;
    int rc = gw_mpu_part_begin(o, "mpt", key, uid, &p);
    if (rc)
        return rc;
    for (size_t off = 0; off < n;) {
        size_t c = n - off < 100000 ? n - off : 100000;
        if ((rc = gw_put_write(p, d + off, c))) {
            gw_put_abort(p);
            return rc;
        }
        off += c;
    }
    return gw_mpu_part_commit(o, p, "mpt", key, uid, number, out);
}

static void get_check(struct gw_objects *o, const char *key, uint64_t off, uint64_t len,
                      const uint8_t *want)
{
    struct gw_get *g;
    struct gw_object_info info;
    assert_int_equal(gw_get_begin(o, "mpt", key, off, len, &info, &g), 0);
    uint8_t *buf = malloc(len);
    size_t got = 0;
    ssize_t r;
    while (got < len && (r = gw_get_read(g, buf + got, len - got)) > 0)
        got += (size_t)r;
    assert_int_equal(got, len);
    assert_memory_equal(buf, want + off, len);
    free(buf);
    gw_get_end(g);
    gw_object_info_clear(&info);
}

static int count_part(const struct gw_part_info *p, void *arg)
{
    (void)p;
    (*(int *)arg)++;
    return 0;
}

static int count_upload(const char *key, const char *uid, int64_t t, void *arg)
{
    (void)key, (void)uid, (void)t;
    (*(int *)arg)++;
    return 0;
}

static void test_multipart(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "mpt"), 0);
    uint64_t base = live_bytes(&o);
    size_t size = P1 + P2 + P3;
    uint8_t *d = malloc(size), *junk = malloc(P1);
    fill(d, size, 1);
    fill(junk, P1, 2);

    char uid[GW_UPLOAD_ID_LEN + 1];
    struct gw_object_info attrs = {.content_type = "x/y"};
    assert_int_equal(gw_mpu_create(o, "mpt", "obj", &attrs, uid), 0);
    struct gw_part_info parts[3], spare;
    assert_int_equal(part(o, "obj", uid, 1, junk, P1, &parts[0]), 0); /* replaced below */
    assert_int_equal(part(o, "obj", uid, 1, d, P1, &parts[0]), 0);
    assert_int_equal(part(o, "obj", uid, 2, d + P1, P2, &parts[1]), 0);
    assert_int_equal(part(o, "obj", uid, 3, d + P1 + P2, P3, &parts[2]), 0);
    assert_int_equal(part(o, "obj", uid, 7, junk, 100, &spare), 0); /* left out */
    assert_int_equal(part(o, "obj", uid, 0, junk, 1, NULL), -EINVAL);
    assert_int_equal(part(o, "obj", "0123", 1, junk, 1, NULL), -ESRCH);
    assert_int_equal(part(o, "other", uid, 1, junk, 1, NULL), -ESRCH);
    int n = 0;
    assert_int_equal(gw_mpu_list_parts(o, "mpt", "obj", uid, 0, count_part, &n), 0);
    assert_int_equal(n, 4);
    n = 0;
    assert_int_equal(gw_mpu_list_parts(o, "mpt", "obj", uid, 2, count_part, &n), 0);
    assert_int_equal(n, 2);
    n = 0;
    assert_int_equal(gw_mpu_list(o, "mpt", "ob", count_upload, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gw_object_head(o, "mpt", "obj", NULL), -ENOENT); /* not yet visible */

    struct gw_part_info swapped[2] = {parts[1], parts[0]},
                        wrong[3] = {parts[0], parts[1], parts[2]};
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, swapped, 2, false, NULL), -EDOM);
    wrong[1].etag[0] ^= 1;
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, wrong, 3, false, NULL), -EPROTO);
    struct gw_part_info small[2] = {parts[2], spare};
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, small, 2, false, NULL), -ERANGE);
    struct gw_object_info info;
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, parts, 3, false, &info), 0);
    assert_int_equal(info.size, size);
    assert_string_equal(info.content_type, "x/y");
    /* ETag: MD5 of the three binary MD5s, then -3 */
    uint8_t cat[48], md[EVP_MAX_MD_SIZE];
    unsigned mdlen;
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 16; b++) {
            unsigned v;
            sscanf(parts[i].etag + 2 * b, "%2x", &v);
            cat[16 * i + b] = (uint8_t)v;
        }
    EVP_Digest(cat, sizeof(cat), md, &mdlen, EVP_md5(), NULL);
    char want[48];
    for (int b = 0; b < 16; b++)
        snprintf(want + 2 * b, 3, "%02x", md[b]);
    strcat(want, "-3");
    assert_string_equal(info.etag, want);
    gw_object_info_clear(&info);
    /* the same Complete again (its answer was lost): the same object, once more */
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, parts, 3, false, &info), 0);
    assert_string_equal(info.etag, want);
    gw_object_info_clear(&info);
    assert_int_equal(gw_mpu_complete(o, "mpt", "obj", uid, parts, 2, false, NULL), -ESRCH);
    n = 0;
    assert_int_equal(gw_mpu_list(o, "mpt", NULL, count_upload, &n), 0);
    assert_int_equal(n, 0);

    get_check(o, "obj", 0, size, d);
    /* each part's bytes, by number (part 2 ends in a padded stripe) */
    struct gw_get *g;
    assert_int_equal(gw_get_begin(o, "mpt", "obj", 0, UINT64_MAX, NULL, &g), 0);
    uint64_t want_off[] = {0, P1, P1 + P2}, want_len[] = {P1, P2, P3}, off, len;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gw_get_part(g, i + 1, &off, &len, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(off, want_off[i]);
        assert_int_equal(len, want_len[i]);
    }
    assert_int_equal(gw_get_part(g, 4, &off, &len, &n), -ERANGE);
    assert_int_equal(gw_get_part(g, 0, &off, &len, &n), -ERANGE);
    gw_get_end(g);
    /* around both part boundaries, and within part 2's short last stripe */
    uint64_t at[] = {P1 - 1, P1 - 5000, P1 + P2 - 1, P1 + P2 - 700, size - 1};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
        get_check(o, "obj", at[i], size - at[i] < 9000 ? size - at[i] : 9000, d);
    /* a node down: the stripes at the boundaries are rebuilt from their part's
     * chunks. Placement follows the upload's random id, so take each node down
     * in turn: the ones holding data chunks of these ranges force decodes. */
    struct gw_objects_stats before, after;
    wait_gc(o);
    gw_objects_counters(o, &before);
    for (int i = 0; i < 9; i++) {
        char id[8];
        snprintf(id, sizeof(id), "n%d", i);
        assert_int_equal(gw_objects_node_set_running(o, id, false), 0);
        get_check(o, "obj", P1 - 30000, 60000, d);
        get_check(o, "obj", P1 + P2 - 30000, 30000 + P3, d);
        assert_int_equal(gw_objects_node_set_running(o, id, true), 0);
    }
    gw_objects_counters(o, &after);
    assert_true(after.degraded_reads > before.degraded_reads);

    /* the object holds its bytes; the replaced and the left-out parts are gone */
    uint64_t held = live_bytes(&o) - base;
    assert_true(held >= size * 3 / 2);           /* RS(6,3): 1.5x at least */
    assert_true(held < size * 3 / 2 + (P1 / 4)); /* not the replaced 5 MiB part */

    /* an aborted upload frees its parts; deleting the object frees it */
    assert_int_equal(gw_mpu_create(o, "mpt", "gone", NULL, uid), 0);
    assert_int_equal(part(o, "gone", uid, 1, junk, P1, NULL), 0);
    assert_int_equal(gw_object_delete(o, "mpt", "obj"), 0);
    assert_int_equal(gw_bucket_delete(o, "mpt"), -ENOTEMPTY); /* an upload in progress */
    assert_int_equal(gw_mpu_abort(o, "mpt", "gone", uid), 0);
    assert_int_equal(gw_mpu_abort(o, "mpt", "gone", uid), -ESRCH);
    assert_int_equal(part(o, "gone", uid, 2, junk, 10, NULL), -ESRCH);
    uint64_t left = live_bytes(&o) - base;
    assert_true(left < 64 << 10); /* records only */
    assert_int_equal(gw_bucket_delete(o, "mpt"), 0);
    assert_int_equal(gw_mpu_create(o, "mpt", "x", NULL, uid), -ENOENT);
    free(d);
    free(junk);
    gw_objects_close(o);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_gw_multipart.XXXXXX");
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

/* CompleteMultipartUpload with If-None-Match: *: the upload completes only
 * if its key holds no object; a loser's upload stays open, to abort. */
static void test_complete_create_only(void **state)
{
    (void)state;
    struct gw_objects *o = open_cluster();
    assert_int_equal(gw_bucket_create(o, "mpt"), 0);
    uint8_t d[P3];
    fill(d, sizeof(d), 3);
    char uid[2][GW_UPLOAD_ID_LEN + 1];
    struct gw_part_info parts[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gw_mpu_create(o, "mpt", "once", NULL, uid[i]), 0);
        assert_int_equal(part(o, "once", uid[i], 1, d, sizeof(d), &parts[i]), 0);
    }
    assert_int_equal(gw_mpu_complete(o, "mpt", "once", uid[0], &parts[0], 1, true, NULL), 0);
    get_check(o, "once", 0, sizeof(d), d);
    assert_int_equal(gw_mpu_complete(o, "mpt", "once", uid[1], &parts[1], 1, true, NULL),
                     GW_PUT_PRECONDITION);
    int n = 0;
    assert_int_equal(gw_mpu_list(o, "mpt", NULL, count_upload, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gw_mpu_abort(o, "mpt", "once", uid[1]), 0);
    gw_objects_close(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_create_only, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
