/* S3 listing rules against a brute-force model over random key sets, the
 * S3 documentation's delimiter example, pagination without loss or
 * repetition, continuation tokens, and Range parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/s3_list.h"
#include "gateway/s3_range.h"

struct page {
    char **entries; /* "K:key" or "P:prefix" */
    int n;
    bool truncated;
    char next[GW_S3_KEY_MAX + 1];
};

static void page_free(struct page *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->entries[i]);
    free(p->entries);
}

static char *tagged(char tag, const char *s, size_t len)
{
    char *e = malloc(len + 3);
    e[0] = tag;
    e[1] = ':';
    memcpy(e + 2, s, len);
    e[len + 2] = '\0';
    return e;
}

/* The lister over keys[0..n) (sorted), the way the gateway will drive it. */
static struct page run(char **keys, int n, const char *prefix, const char *delim, const char *after,
                       int max)
{
    struct gw_list l;
    struct gw_list_params p = {prefix, delim, after, max};
    assert_int_equal(gw_list_begin(&l, &p), 0);
    struct page pg = {calloc((size_t)n + 1, sizeof(char *)), 0, false, ""};
    for (int i = 0; i < n; i++) {
        enum gw_list_step s = gw_list_offer(&l, keys[i]);
        if (s == GW_LIST_STOP)
            break;
        if (s == GW_LIST_CONTENTS)
            pg.entries[pg.n++] = tagged('K', keys[i], strlen(keys[i]));
        else if (s == GW_LIST_PREFIX)
            pg.entries[pg.n++] = tagged('P', gw_list_prefix(&l), strlen(gw_list_prefix(&l)));
    }
    assert_true(pg.n <= (max > GW_LIST_MAX_KEYS ? GW_LIST_MAX_KEYS : max));
    pg.truncated = l.truncated;
    snprintf(pg.next, sizeof(pg.next), "%s", l.next);
    return pg;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a + 2, *(char *const *)b + 2);
}

/* The model: every entry S3 would list with no page limit, in order. */
static struct page model(char **keys, int n, const char *prefix, const char *delim,
                         const char *after)
{
    struct page pg = {calloc((size_t)n + 1, sizeof(char *)), 0, false, ""};
    size_t pl = prefix ? strlen(prefix) : 0;
    for (int i = 0; i < n; i++) {
        const char *k = keys[i];
        if (strncmp(k, prefix ? prefix : "", pl) != 0 || (after && strcmp(k, after) <= 0))
            continue;
        const char *d = delim && *delim ? strstr(k + pl, delim) : NULL;
        char *e = d ? tagged('P', k, (size_t)(d - k) + strlen(delim)) : tagged('K', k, strlen(k));
        bool dup = false;
        for (int j = 0; j < pg.n && !dup; j++)
            dup = strcmp(pg.entries[j], e) == 0;
        if (dup || (after && d && strcmp(e + 2, after) <= 0)) {
            free(e);
            continue;
        }
        pg.entries[pg.n++] = e;
    }
    qsort(pg.entries, (size_t)pg.n, sizeof(char *), cmp_str);
    return pg;
}

static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Random keys over a small alphabet so that prefixes and delimiters collide. */
static char **random_keys(int *n)
{
    static const char alphabet[] = "ab/-.";
    int want = 20 + (int)(next_rand() % 120), got = 0;
    char **keys = calloc((size_t)want, sizeof(char *));
    for (int i = 0; i < want; i++) {
        char k[12];
        int len = 1 + (int)(next_rand() % 8);
        for (int j = 0; j < len; j++)
            k[j] = alphabet[next_rand() % 5];
        k[len] = '\0';
        bool dup = false;
        for (int j = 0; j < got && !dup; j++)
            dup = strcmp(keys[j], k) == 0;
        if (!dup)
            keys[got++] = strdup(k);
    }
    qsort(keys, (size_t)got, sizeof(char *), cmp_key);
    *n = got;
    return keys;
}

static void test_matches_model_and_pages(void **state)
{
    (void)state;
    static const char *const prefixes[] = {NULL, "", "a", "a/", "b-", "zz"};
    static const char *const delims[] = {NULL, "/", "-", "b/", ""};
    for (int round = 0; round < 300; round++) {
        int n;
        char **keys = random_keys(&n);
        const char *prefix = prefixes[next_rand() % 6];
        const char *delim = delims[next_rand() % 5];
        const char *after = next_rand() % 3 ? NULL : keys[next_rand() % (uint32_t)n];
        struct page want = model(keys, n, prefix, delim, after);

        /* Unlimited page: exactly the model, not truncated. */
        struct page all = run(keys, n, prefix, delim, after, 1000);
        assert_int_equal(all.n, want.n);
        for (int i = 0; i < want.n; i++)
            assert_string_equal(all.entries[i], want.entries[i]);
        assert_false(all.truncated);

        /* Paging with max-keys m and marker = the last entry reproduces it. */
        int m = 1 + (int)(next_rand() % 7), seen = 0;
        char marker[GW_S3_KEY_MAX + 1];
        snprintf(marker, sizeof(marker), "%s", after ? after : "");
        for (;;) {
            struct page pg = run(keys, n, prefix, delim, *marker ? marker : NULL, m);
            for (int i = 0; i < pg.n; i++) {
                assert_true(seen < want.n);
                assert_string_equal(pg.entries[i], want.entries[seen]);
                seen++;
            }
            bool more = pg.truncated;
            assert_int_equal(more, seen < want.n); /* truncated iff entries remain */
            if (more) {
                assert_int_equal(pg.n, m);
                assert_string_equal(pg.next, pg.entries[pg.n - 1] + 2);
                snprintf(marker, sizeof(marker), "%s", pg.next);
            }
            page_free(&pg);
            if (!more)
                break;
        }
        assert_int_equal(seen, want.n);
        page_free(&all);
        page_free(&want);
        for (int i = 0; i < n; i++)
            free(keys[i]);
        free(keys);
    }
}

static void test_s3_documentation_example(void **state)
{
    (void)state;
    char *keys[] = {"photos/2006/February/sample2.jpg",
                    "photos/2006/February/sample3.jpg",
                    "photos/2006/February/sample4.jpg",
                    "photos/2006/January/sample.jpg",
                    "photos/2006/sample5.jpg",
                    "sample.jpg",
                    "zebra/1"};
    struct page pg = run(keys, 7, "photos/2006/", "/", NULL, 1000);
    assert_int_equal(pg.n, 3);
    assert_string_equal(pg.entries[0], "P:photos/2006/February/");
    assert_string_equal(pg.entries[1], "P:photos/2006/January/");
    assert_string_equal(pg.entries[2], "K:photos/2006/sample5.jpg");
    assert_false(pg.truncated);
    page_free(&pg);

    pg = run(keys, 7, NULL, "/", NULL, 1000);
    assert_int_equal(pg.n, 3);
    assert_string_equal(pg.entries[0], "P:photos/");
    assert_string_equal(pg.entries[1], "K:sample.jpg");
    assert_string_equal(pg.entries[2], "P:zebra/");
    page_free(&pg);

    /* Two per page: the last entry of a full page is the next marker; a
     * common prefix as marker does not come back. */
    pg = run(keys, 7, NULL, "/", NULL, 2);
    assert_true(pg.truncated);
    assert_string_equal(pg.next, "sample.jpg");
    page_free(&pg);
    pg = run(keys, 7, NULL, "/", "photos/", 2);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.entries[0], "K:sample.jpg");
    assert_false(pg.truncated); /* zebra/ was the last entry: nothing remains */
    page_free(&pg);

    /* Exactly max-keys entries left: not truncated. */
    pg = run(keys, 7, "photos/2006/", "/", NULL, 3);
    assert_false(pg.truncated);
    page_free(&pg);
    pg = run(keys, 7, "photos/2006/", "/", NULL, 2);
    assert_true(pg.truncated);
    assert_string_equal(pg.next, "photos/2006/January/");
    page_free(&pg);
}

static void test_limits(void **state)
{
    (void)state;
    struct gw_list l;
    struct gw_list_params p = {NULL, NULL, NULL, -1};
    assert_int_equal(gw_list_begin(&l, &p), -EINVAL);
    p.max_keys = 0;
    assert_int_equal(gw_list_begin(&l, &p), 0);
    assert_int_equal(gw_list_offer(&l, "a"), GW_LIST_STOP);
    assert_false(l.truncated);

    /* max-keys above 1000 is 1000. */
    p.max_keys = 5000;
    assert_int_equal(gw_list_begin(&l, &p), 0);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "k%05d", i);
        assert_int_equal(gw_list_offer(&l, key), GW_LIST_CONTENTS);
    }
    assert_int_equal(gw_list_offer(&l, "k99999"), GW_LIST_STOP);
    assert_true(l.truncated);

    /* Keys past the prefix end the listing without truncation. */
    p = (struct gw_list_params){"b", NULL, NULL, 10};
    assert_int_equal(gw_list_begin(&l, &p), 0);
    assert_int_equal(gw_list_offer(&l, "a"), GW_LIST_SKIP);
    assert_int_equal(gw_list_offer(&l, "b"), GW_LIST_CONTENTS);
    assert_int_equal(gw_list_offer(&l, "c"), GW_LIST_STOP);
    assert_false(l.truncated);

    /* An over-long key (which PUT refuses) is skipped, not truncated into another. */
    char *huge = malloc(GW_S3_KEY_MAX + 2);
    memset(huge, 'x', GW_S3_KEY_MAX + 1);
    huge[GW_S3_KEY_MAX + 1] = '\0';
    p = (struct gw_list_params){NULL, NULL, NULL, 10};
    assert_int_equal(gw_list_begin(&l, &p), 0);
    assert_int_equal(gw_list_offer(&l, huge), GW_LIST_SKIP);
    huge[GW_S3_KEY_MAX] = '\0';
    assert_int_equal(gw_list_offer(&l, huge), GW_LIST_CONTENTS);
    assert_string_equal(l.next, huge);
    free(huge);
}

static void test_tokens(void **state)
{
    (void)state;
    const char *keys[] = {"a", "photos/2006/", "\xc3\xbc/\xe6\x97\xa5 +&=", "ab", "abc"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char token[2048], back[GW_S3_KEY_MAX + 1];
        assert_int_equal(gw_list_token_encode(keys[i], token, sizeof(token)), 0);
        assert_null(strchr(token, '&'));
        assert_int_equal(gw_list_token_decode(token, back, sizeof(back)), 0);
        assert_string_equal(back, keys[i]);
    }
    char *longest = malloc(GW_S3_KEY_MAX + 1);
    memset(longest, 'q', GW_S3_KEY_MAX);
    longest[GW_S3_KEY_MAX] = '\0';
    char token[2048], back[GW_S3_KEY_MAX + 1];
    assert_int_equal(gw_list_token_encode(longest, token, sizeof(token)), 0);
    assert_int_equal(gw_list_token_decode(token, back, sizeof(back)), 0);
    assert_string_equal(back, longest);
    assert_int_equal(gw_list_token_encode(longest, token, 100), -ENOSPC);
    free(longest);

    const char *bad[] = {"", "abc", "a2V5", "!!!!", "azo=", "YQ==YQ==", "bjpmb28=" /* n:foo */};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gw_list_token_decode(bad[i], back, sizeof(back)), -EINVAL);
    assert_int_equal(gw_list_token_encode("abc", token, sizeof(token)), 0);
    assert_int_equal(gw_list_token_decode(token, back, 3), -EINVAL); /* no room */
}

static void test_ranges(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        uint64_t size;
        enum gw_s3_err err;
        bool partial;
        uint64_t first, length;
    } cases[] = {
        {NULL, 100, GW_S3_OK, false, 0, 100},
        {"bytes=0-9", 100, GW_S3_OK, true, 0, 10},
        {"bytes=10-10", 100, GW_S3_OK, true, 10, 1},
        {"bytes=90-199", 100, GW_S3_OK, true, 90, 10}, /* end clamped */
        {"bytes=99-", 100, GW_S3_OK, true, 99, 1},
        {"bytes=0-", 100, GW_S3_OK, true, 0, 100},
        {"bytes=-10", 100, GW_S3_OK, true, 90, 10},
        {"bytes=-1000", 100, GW_S3_OK, true, 0, 100}, /* suffix longer than the object */
        {" bytes=1-2 ", 100, GW_S3_OK, true, 1, 2},
        {"bytes=0-99999999999999999999999", 100, GW_S3_OK, true, 0, 100},
        {"bytes=100-", 100, GW_S3_INVALID_RANGE, false, 0, 0},
        {"bytes=100-200", 100, GW_S3_INVALID_RANGE, false, 0, 0},
        {"bytes=99999999999999999999999-", 100, GW_S3_INVALID_RANGE, false, 0, 0},
        {"bytes=-0", 100, GW_S3_INVALID_RANGE, false, 0, 0},
        {"bytes=0-0", 0, GW_S3_INVALID_RANGE, false, 0, 0}, /* empty object */
        {"bytes=-5", 0, GW_S3_INVALID_RANGE, false, 0, 0},
        /* ignored: whole object */
        {"bytes=5-1", 100, GW_S3_OK, false, 0, 100},
        {"bytes=0-1,4-5", 100, GW_S3_OK, false, 0, 100},
        {"bytes=-", 100, GW_S3_OK, false, 0, 100},
        {"bytes=", 100, GW_S3_OK, false, 0, 100},
        {"bytes=a-b", 100, GW_S3_OK, false, 0, 100},
        {"bytes=1-2x", 100, GW_S3_OK, false, 0, 100},
        {"bytes=--1", 100, GW_S3_OK, false, 0, 100},
        {"bytes=+1-2", 100, GW_S3_OK, false, 0, 100},
        {"items=0-9", 100, GW_S3_OK, false, 0, 100},
        {"", 100, GW_S3_OK, false, 0, 100},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_range r;
        enum gw_s3_err e = gw_range_parse(cases[i].header, cases[i].size, &r);
        if (e != cases[i].err ||
            (e == GW_S3_OK && (r.partial != cases[i].partial || r.first != cases[i].first ||
                               r.length != cases[i].length)))
            fail_msg("case %zu \"%s\" size %llu: err %d partial %d %llu+%llu", i,
                     cases[i].header ? cases[i].header : "(none)",
                     (unsigned long long)cases[i].size, e, r.partial, (unsigned long long)r.first,
                     (unsigned long long)r.length);
    }
    assert_int_equal(gw_s3_error(GW_S3_INVALID_RANGE)->status, 416);
    assert_string_equal(gw_s3_error(GW_S3_INVALID_RANGE)->code, "InvalidRange");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_model_and_pages),
        cmocka_unit_test(test_s3_documentation_example),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
