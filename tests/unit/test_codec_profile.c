/* Profiles parse and format both ways; every kind of bad input gets a
 * negative errno and a message naming what was wrong. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tests/unit/codec_test_util.h"

static void test_parse_format(void **state)
{
    (void)state;
    static const char *const good[] = {"rs:k=6,m=3",      "lrc:k=6,l=2,r=2", "ppr:k=6,m=3",
                                       "ecpipe:k=10,m=4", "tri:k=3,m=2",     "rs:k=200,m=55"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct codec_profile p;
        char err[128] = "", buf[64];
        assert_int_equal(codec_profile_parse(good[i], &p, err, sizeof(err)), 0);
        assert_int_equal(codec_profile_format(&p, buf, sizeof(buf)), (int)strlen(good[i]));
        assert_string_equal(buf, good[i]);
    }
    struct codec_profile p;
    assert_int_equal(codec_profile_parse("lrc:r=2,l=2,k=12", &p, NULL, 0), 0);
    assert_int_equal(p.scheme, CODEC_LRC);
    assert_int_equal(p.m, 4);
    assert_string_equal(codec_scheme_name(CODEC_TRIEC), "tri");
}

static void test_bad_profiles(void **state)
{
    (void)state;
    static const struct {
        const char *text, *names;
    } bad[] = {
        {"xx:k=6,m=3", "xx"},
        {"rs:k=6,q=3", "q"},
        {"rs:k=0,m=3", "0"},
        {"rs:k=6", "m"},
        {"rs:k=200,m=56", "k+m=256"},
        {"rs:k=six,m=3", "six"},
        {"lrc:k=7,l=2,r=2", "k=7"},
        {"rs:k=6,m=3,m=2", "m"},
        {"lrc:k=6,l=2,m=2", "m"},
        {"rs:k6,m=3", "k6"},
        {"rs:k=-1,m=3", "-1"},
        {"rs:k=6,m=", "m"},
        {"", "''"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct codec_profile p;
        char err[256] = "";
        assert_int_equal(codec_profile_parse(bad[i].text, &p, err, sizeof(err)), -EINVAL);
        if (!strstr(err, bad[i].names))
            fail_msg("'%s': message '%s' does not name '%s'", bad[i].text, err, bad[i].names);
    }
    assert_int_equal(codec_profile_parse(NULL, NULL, NULL, 0), -EINVAL);
}

static void test_bad_create(void **state)
{
    (void)state;
    struct codec *c = (struct codec *)1;
    char err[256] = "";
    struct codec_profile p = {.scheme = CODEC_RS, .k = 0, .m = 3};
    assert_int_equal(codec_create(&p, &c, err, sizeof(err)), -EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "k=0"));
    p = (struct codec_profile){.scheme = CODEC_RS, .k = 250, .m = 10};
    assert_int_equal(codec_create(&p, &c, err, sizeof(err)), -EINVAL);
    p = (struct codec_profile){.scheme = CODEC_LRC, .k = 6, .m = 4, .l = 4, .r = 0};
    assert_int_equal(codec_create(&p, &c, err, sizeof(err)), -EINVAL);
    assert_int_equal(codec_create(NULL, &c, err, sizeof(err)), -EINVAL);
    p = (struct codec_profile){.scheme = CODEC_RS, .k = 2, .m = 1};
    assert_int_equal(codec_create(&p, NULL, err, sizeof(err)), -EINVAL);
    codec_destroy(NULL);
    codec_plan_destroy(NULL);
}

static void test_bad_buffers_and_patterns(void **state)
{
    (void)state;
    struct codec *c = tu_codec("rs:k=3,m=2");
    struct tu_chunks t;
    tu_alloc(&t, 5, 64, 0);
    for (int i = 0; i < 3; i++)
        tu_fill(t.c[i], 64, (uint64_t)i);
    assert_int_equal(codec_encode(c, 64, t.c), 0);
    uint8_t *holes[5] = {t.c[0], NULL, t.c[2], t.c[3], t.c[4]};
    assert_int_equal(codec_encode(c, 64, holes), -EINVAL);
    assert_int_equal(codec_encode(c, 64, NULL), -EINVAL);
    int erased3[3] = {0, 1, 2};
    assert_int_equal(codec_decode(c, 64, t.c, erased3, 3), -EIO);
    int dup[2] = {1, 1};
    assert_int_equal(codec_decode(c, 64, t.c, dup, 2), -EINVAL);
    int range[1] = {5};
    assert_int_equal(codec_decode(c, 64, t.c, range, 1), -EINVAL);
    assert_int_equal(codec_decode(c, 64, t.c, NULL, 1), -EINVAL);
    assert_int_equal(codec_decode(c, 64, holes, range, 1), -EINVAL);

    struct codec_plan *p = NULL;
    char err[256] = "";
    assert_int_equal(codec_plan_create(c, erased3, 3, NULL, &p, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "3 chunks erased"));
    bool avail[5] = {true, true, true, true, true};
    int one = 1;
    assert_int_equal(codec_plan_create(c, &one, 1, avail, &p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "both erased and available"));
    assert_int_equal(codec_plan_create(c, &one, 0, NULL, &p, err, sizeof(err)), -EINVAL);
    assert_int_equal(codec_plan_create(NULL, &one, 1, NULL, &p, err, sizeof(err)), -EINVAL);
    assert_int_equal(codec_plan_create(c, &one, 1, NULL, &p, err, sizeof(err)), 0);
    uint8_t *outs[1] = {NULL};
    assert_int_equal(codec_plan_apply(p, 64, t.c, outs), -EINVAL);
    assert_int_equal(codec_plan_apply(p, 64, NULL, outs), -EINVAL);
    codec_plan_partial(p, 99, 64, t.c[0], t.c); /* ignored, no crash */
    codec_plan_destroy(p);
    tu_free(&t);
    codec_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_bad_profiles),
        cmocka_unit_test(test_bad_create),
        cmocka_unit_test(test_bad_buffers_and_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
