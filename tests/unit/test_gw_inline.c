/* Inline objects (object/inline.c): the blob tail a home keeps, the body's
 * RS(k, m) shards decoded from any k of them, a corrupt shard found by its
 * crc32c, and records that carry the body without ever storing it as JSON. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "object/objects_internal.h"

#define K 4
#define M 3
#define N (K + M)

static uint8_t *random_body(size_t len, unsigned seed)
{
    uint8_t *b = malloc(len ? len : 1);
    srand(seed);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)rand();
    return b;
}

static void test_tail_roundtrip(void **state)
{
    (void)state;
    const char *json = "{\"inline\":{\"k\":4,\"len\":10,\"m\":3},\"version\":7}";
    const uint8_t shard[3] = {1, 0, 2}; /* a NUL inside the shard is data */
    size_t len;
    char *blob = gw_inline_blob(json, 5, shard, sizeof(shard), &len);
    assert_non_null(blob);
    assert_int_equal(len, strlen(json) + 1 + 13 + sizeof(shard));
    int idx;
    const uint8_t *got;
    size_t glen;
    assert_int_equal(gw_inline_tail(blob, len, &idx, &got, &glen), 0);
    assert_int_equal(idx, 5);
    assert_int_equal(glen, sizeof(shard));
    assert_memory_equal(got, shard, sizeof(shard));
    /* The JSON part loads as the record, the tail ignored. */
    json_t *rec = gw_rec_load(blob, len);
    assert_non_null(rec);
    assert_int_equal(gw_rec_version(rec), 7);
    int k, m;
    size_t blen;
    assert_true(gw_rec_inline(rec, &k, &m, &blen));
    assert_int_equal(k, 4);
    assert_int_equal(m, 3);
    assert_int_equal(blen, 10);
    json_decref(rec);
    /* A record with no tail, and a malformed tail. */
    assert_int_equal(gw_inline_tail(json, strlen(json), &idx, &got, &glen), -ENODATA);
    assert_int_equal(gw_inline_tail(blob, len - 1, &idx, &got, &glen), -EBADMSG);
    blob[strlen(json) + 1] = 'X'; /* magic */
    assert_int_equal(gw_inline_tail(blob, len, &idx, &got, &glen), -EBADMSG);
    free(blob);
}

static void test_corrupt_shard(void **state)
{
    (void)state;
    const uint8_t shard[64] = {9, 9, 9};
    size_t len;
    char *blob = gw_inline_blob("{}", 2, shard, sizeof(shard), &len);
    blob[len - 10] ^= 0x40; /* one bit of the shard */
    int idx;
    const uint8_t *got;
    size_t glen;
    assert_int_equal(gw_inline_tail(blob, len, &idx, &got, &glen), -EILSEQ);
    free(blob);
}

/* Every way to keep K of N shards rebuilds the body, for several lengths. */
static void test_decode_any_k(void **state)
{
    (void)state;
    const size_t lens[] = {1, 3, 4, 5, 100, 4096, 16383, 16384};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        size_t L = lens[l], S = gw_inline_shard_len(L, K);
        uint8_t *body = random_body(L, (unsigned)L), *shards;
        assert_int_equal(gw_inline_encode(K, M, body, L, &shards), 0);
        int sets = 0;
        for (unsigned mask = 0; mask < 1u << N; mask++) {
            if (__builtin_popcount(mask) != K)
                continue;
            const uint8_t *have[N] = {0};
            for (int i = 0; i < N; i++)
                if (mask & 1u << i)
                    have[i] = shards + (size_t)i * S;
            uint8_t *out;
            assert_int_equal(gw_inline_decode(K, M, L, have, &out), 0);
            assert_memory_equal(out, body, L);
            free(out);
            sets++;
        }
        assert_int_equal(sets, 35); /* C(7, 4) */
        /* K - 1 shards are not enough. */
        const uint8_t *few[N] = {shards, shards + S, shards + 2 * S};
        uint8_t *out;
        assert_int_equal(gw_inline_decode(K, M, L, few, &out), -EIO);
        assert_null(out);
        free(shards);
        free(body);
    }
}

/* The body rides with the record in memory, never in its stored JSON. */
static void test_body_not_dumped(void **state)
{
    (void)state;
    json_t *rec = json_pack("{s:I,s:{s:i,s:i,s:i}}", "version", (json_int_t)3, "inline", "k", K,
                            "m", M, "len", 5);
    const uint8_t body[5] = {'a', 0, 'b', 0xff, 'c'};
    assert_int_equal(gw_rec_set_inline_body(rec, body, sizeof(body)), 0);
    json_object_set_new(rec, GW_INLINE_REBUILT, json_true());
    size_t len;
    const uint8_t *got = gw_rec_inline_body(rec, &len);
    assert_int_equal(len, sizeof(body));
    assert_memory_equal(got, body, sizeof(body));
    char *text = gw_rec_dump(rec);
    assert_null(strstr(text, GW_INLINE_BODY));
    assert_string_equal(text, "{\"inline\":{\"k\":4,\"len\":5,\"m\":3},\"version\":3}");
    free(text);
    assert_non_null(gw_rec_inline_body(rec, &len)); /* the caller's record keeps it */
    json_decref(rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail_roundtrip),
        cmocka_unit_test(test_corrupt_shard),
        cmocka_unit_test(test_decode_any_k),
        cmocka_unit_test(test_body_not_dumped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
