/* Layout math of object records (object/layout.c): offsets to stripes and
 * chunk identities, for single-PUT records and multipart ones. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "object/objects_internal.h"

#define OID_A "000102030405060708090a0b0c0d0e0f"
#define OID_B "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

static json_t *rec(const char *text)
{
    json_error_t err;
    json_t *r = json_loads(text, 0, &err);
    if (!r)
        fail_msg("bad test JSON: %s", err.text);
    return r;
}

static void test_single_put(void **state)
{
    (void)state;
    /* k = 2: two full stripes of 2 x 100 bytes, then a short one of 2 x 64 holding 50 bytes */
    json_t *r = rec("{\"k\": 2, \"size\": 450, \"oid\": \"" OID_A "\", \"stripes\": "
                    "[{\"len\": 100}, {\"len\": 100}, {\"len\": 64}]}");
    uint64_t *st;
    assert_int_equal(gw_layout_starts(r, &st), 0);
    assert_int_equal(st[0], 0);
    assert_int_equal(st[1], 200);
    assert_int_equal(st[2], 400);
    assert_int_equal(st[3], 450);
    assert_int_equal(gw_layout_find(st, 3, 0), 0);
    assert_int_equal(gw_layout_find(st, 3, 199), 0);
    assert_int_equal(gw_layout_find(st, 3, 200), 1);
    assert_int_equal(gw_layout_find(st, 3, 449), 2);
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t s;
    assert_int_equal(gw_layout_chunk(r, 2, oid, &s), 0);
    assert_int_equal(s, 2);
    assert_int_equal(oid[0], 0x00);
    assert_int_equal(oid[15], 0x0f);
    assert_int_equal(gw_layout_chunk(r, 3, oid, &s), -EINVAL);
    free(st);
    json_decref(r);
}

static void test_multipart(void **state)
{
    (void)state;
    /* part 1 (OID_A): 250 bytes = a full stripe of 200 and a short one (2 x 64, 50 used);
     * part 2 (OID_B): 30 bytes in one short stripe. The padding of part 1's last
     * stripe is not object bytes: part 2 starts at 250. */
    json_t *r = rec("{\"k\": 2, \"size\": 280, \"oid\": \"" OID_A "\", \"stripes\": ["
                    "{\"len\": 100, \"oid\": \"" OID_A "\", \"i\": 0, \"off\": 0},"
                    "{\"len\": 64, \"oid\": \"" OID_A "\", \"i\": 1, \"off\": 200},"
                    "{\"len\": 64, \"oid\": \"" OID_B "\", \"i\": 0, \"off\": 250}]}");
    uint64_t *st;
    assert_int_equal(gw_layout_starts(r, &st), 0);
    assert_int_equal(st[2], 250);
    assert_int_equal(st[3], 280);
    assert_int_equal(gw_layout_find(st, 3, 249), 1); /* the last byte of part 1 */
    assert_int_equal(gw_layout_find(st, 3, 250), 2); /* the first of part 2 */
    assert_int_equal(gw_layout_find(st, 3, 279), 2);
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t s;
    assert_int_equal(gw_layout_chunk(r, 2, oid, &s), 0);
    assert_int_equal(s, 0); /* stripe 0 of part 2's own chunks */
    assert_int_equal(oid[0], 0xf0);
    assert_int_equal(gw_layout_chunk(r, 1, oid, &s), 0);
    assert_int_equal(s, 1);
    assert_int_equal(oid[0], 0x00);
    /* many stripes: the binary search agrees with a linear walk everywhere */
    uint64_t big[1001];
    for (int i = 0; i <= 1000; i++)
        big[i] = (uint64_t)i * 7 + (uint64_t)(i % 3);
    for (uint64_t off = 0; off < big[1000]; off++) {
        size_t lin = 0;
        while (lin + 1 < 1000 && big[lin + 1] <= off)
            lin++;
        assert_int_equal(gw_layout_find(big, 1000, off), lin);
    }
    free(st);
    json_decref(r);
}

static void test_damaged(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 100, \"off\": 0}, "
        "{\"len\": 100, \"off\": 250}]}", /* a hole after stripe 0 */
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 100, \"off\": 10}]}",
        "{\"k\": 2, \"size\": 500, \"stripes\": [{\"len\": 100}, {\"len\": 100}]}", /* too big */
        "{\"k\": 2, \"size\": 100, \"stripes\": [{\"len\": 0}]}",
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 100}, {\"len\": 100, \"off\": 300}]}",
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 100, \"off\": -1}]}",
        /* found by fuzz/fuzz_meta_record: stripe 1 holds no byte (stripe 2 starts with it) */
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 100}, {\"len\": 100}, "
        "{\"len\": 100, \"off\": 200}]}",
        /* k * len so large that the end of a stripe would wrap */
        "{\"k\": 2, \"size\": 300, \"stripes\": [{\"len\": 9223372036854775807}, "
        "{\"len\": 100, \"off\": 1}]}",
        "{\"k\": 100000, \"size\": 300, \"stripes\": [{\"len\": 100}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *r = rec(bad[i]);
        uint64_t *st = (void *)1;
        if (gw_layout_starts(r, &st) != -EIO)
            fail_msg("case %zu accepted: %s", i, bad[i]);
        assert_null(st);
        json_decref(r);
    }
    json_t *r = rec("{\"k\": 2, \"size\": 0, \"stripes\": []}"); /* an empty object */
    uint64_t *st;
    assert_int_equal(gw_layout_starts(r, &st), 0);
    assert_int_equal(st[0], 0);
    free(st);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_put),
        cmocka_unit_test(test_multipart),
        cmocka_unit_test(test_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
