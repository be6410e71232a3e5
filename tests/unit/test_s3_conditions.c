/* Preconditions (gateway/s3_conditions.h): ETag lists, the three HTTP date
 * forms, what is ignored, and the order S3 evaluates them in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway/s3_conditions.h"

#define ETAG "5d41402abc4b2a76b9719d911017c592"
#define T    784111777 /* Sun, 06 Nov 1994 08:49:37 GMT */

static enum gw_condition eval(const char *m, const char *nm, const char *ms, const char *us)
{
    struct gw_conditions c = {m, nm, ms, us};
    return gw_conditions_eval(&c, ETAG, T);
}

static void test_etags(void **state)
{
    (void)state;
    assert_int_equal(eval(NULL, NULL, NULL, NULL), GW_COND_OK);
    assert_int_equal(eval("\"" ETAG "\"", NULL, NULL, NULL), GW_COND_OK);
    assert_int_equal(eval(ETAG, NULL, NULL, NULL), GW_COND_OK); /* unquoted, as some send */
    assert_int_equal(eval("*", NULL, NULL, NULL), GW_COND_OK);
    assert_int_equal(eval("\"aa\" , W/\"" ETAG "\"", NULL, NULL, NULL), GW_COND_OK);
    assert_int_equal(eval("\"aa\", \"bb\"", NULL, NULL, NULL), GW_COND_FAILED);
    assert_int_equal(eval("\"" ETAG "0\"", NULL, NULL, NULL), GW_COND_FAILED); /* a longer one */
    assert_int_equal(eval("\"\"", NULL, NULL, NULL), GW_COND_FAILED);
    assert_int_equal(eval("", NULL, NULL, NULL), GW_COND_FAILED);
    assert_int_equal(eval(NULL, "\"" ETAG "\"", NULL, NULL), GW_COND_NOT_MODIFIED);
    assert_int_equal(eval(NULL, "*", NULL, NULL), GW_COND_NOT_MODIFIED);
    assert_int_equal(eval(NULL, "\"aa\"", NULL, NULL), GW_COND_OK);
}

static void test_dates(void **state)
{
    (void)state;
    /* the same instant in the three forms HTTP allows */
    const char *at[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                        "Sun Nov  6 08:49:37 1994"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eval(NULL, NULL, at[i], NULL), GW_COND_NOT_MODIFIED); /* not after */
        assert_int_equal(eval(NULL, NULL, NULL, at[i]), GW_COND_OK);
    }
    assert_int_equal(eval(NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", NULL), GW_COND_OK);
    assert_int_equal(eval(NULL, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT"), GW_COND_FAILED);
    /* not a date: ignored */
    assert_int_equal(eval(NULL, NULL, "yesterday", NULL), GW_COND_OK);
    assert_int_equal(eval(NULL, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT trailing"), GW_COND_OK);
}

static void test_order(void **state)
{
    (void)state;
    const char *before = "Sun, 06 Nov 1994 08:00:00 GMT", *after = "Mon, 07 Nov 1994 08:00:00 GMT";
    /* If-Match holding wins over a failing If-Unmodified-Since */
    assert_int_equal(eval(ETAG, NULL, NULL, before), GW_COND_OK);
    /* a failing If-Match is 412 even where If-None-Match would be 304 */
    assert_int_equal(eval("\"aa\"", ETAG, NULL, NULL), GW_COND_FAILED);
    /* a matching If-None-Match is 304 whatever If-Modified-Since says */
    assert_int_equal(eval(NULL, ETAG, before, NULL), GW_COND_NOT_MODIFIED);
    /* If-None-Match not matching: If-Modified-Since is not looked at */
    assert_int_equal(eval(NULL, "\"aa\"", after, NULL), GW_COND_OK);
    assert_int_equal(eval(NULL, NULL, after, NULL), GW_COND_NOT_MODIFIED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etags),
        cmocka_unit_test(test_dates),
        cmocka_unit_test(test_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
