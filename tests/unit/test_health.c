/* gw_health_eval: the verdict and each check from cluster documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/health.h"

/* 9 nodes, pool RS(6,3) with write quorum 7; `down` of them down. */
static json_t *cluster(int down, json_int_t used0, json_int_t cap0)
{
    json_t *nodes = json_array();
    for (int i = 0; i < 9; i++) {
        char id[8];
        snprintf(id, sizeof(id), "n%d", i);
        json_t *n = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I}", "id", id, "state", "up", "up", i >= down,
                              "used_bytes", (json_int_t)(i == 0 ? used0 : 100), "capacity_bytes",
                              (json_int_t)(i == 0 ? cap0 : 0), "repair_list", (json_int_t)0);
        json_array_append_new(nodes, n);
    }
    return json_pack("{s:o,s:[{s:s,s:i,s:i,s:i}],s:i,s:i,s:i}", "nodes", nodes, "pools", "name",
                     "default", "k", 6, "n", 9, "write_quorum", 7, "repair_queue", 0,
                     "corrupt_chunks", 0, "failed_reads", 0);
}

static const char *status(json_t *h)
{
    return json_string_value(json_object_get(h, "status"));
}

static bool has(json_t *h, const char *code, const char *severity, const char *text)
{
    json_t *checks = json_object_get(h, "checks");
    for (size_t i = 0; i < json_array_size(checks); i++) {
        json_t *c = json_array_get(checks, i);
        if (strcmp(json_string_value(json_object_get(c, "code")), code) == 0 &&
            strcmp(json_string_value(json_object_get(c, "severity")), severity) == 0 &&
            (!text || strstr(json_string_value(json_object_get(c, "message")), text)))
            return true;
    }
    return false;
}

static void healthy(void **state)
{
    (void)state;
    json_t *c = cluster(0, 10, 1000);
    json_t *h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_OK");
    assert_int_equal(json_array_size(json_object_get(h, "checks")), 0);
    json_decref(h);
    json_decref(c);
}

static void nodes_down(void **state)
{
    (void)state;
    json_t *c = cluster(1, 0, 0);
    json_t *h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(has(h, "NODE_DOWN", "WARN", "1 of 9 nodes down: n0"));
    json_decref(h);
    json_decref(c);
    /* Three down: still readable (m = 3), writes refused (6 up < 7). */
    c = cluster(3, 0, 0);
    h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_ERR");
    assert_true(has(h, "POOL_WRITES_REFUSED", "ERR", "6 nodes up"));
    assert_false(has(h, "POOL_UNAVAILABLE", "ERR", NULL));
    /* ERR checks come first. */
    json_t *first = json_array_get(json_object_get(h, "checks"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "severity")), "ERR");
    json_decref(h);
    json_decref(c);
    c = cluster(4, 0, 0);
    h = gw_health_eval(c, NULL, NULL);
    assert_true(has(h, "POOL_UNAVAILABLE", "ERR", "4 nodes down"));
    assert_true(has(h, "NODE_DOWN", "WARN", "n0, n1, n2, n3"));
    json_decref(h);
    json_decref(c);
}

static void capacity(void **state)
{
    (void)state;
    json_t *c = cluster(0, 860, 1000);
    json_t *h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(has(h, "NEARFULL", "WARN", "n0"));
    json_decref(h);
    json_decref(c);
    c = cluster(0, 960, 1000);
    h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_ERR");
    assert_true(has(h, "FULL", "ERR", "n0"));
    assert_false(has(h, "NEARFULL", "WARN", NULL));
    json_decref(h);
    json_decref(c);
}

static void degraded_stripes(void **state)
{
    (void)state;
    json_t *c = cluster(0, 0, 0);
    json_object_set_new(c, "repair_queue", json_integer(4));
    /* Object a: stripe 0 lacks 2 chunks, stripe 1 lacks 1; object b stripe 0 lacks 1. */
    json_t *q =
        json_pack("[{s:s,s:i,s:i},{s:s,s:i,s:i},{s:s,s:i,s:i},{s:s,s:i,s:i}]", "object", "a",
                  "stripe", 0, "chunk", 1, "object", "a", "stripe", 0, "chunk", 4, "object", "a",
                  "stripe", 1, "chunk", 4, "object", "b", "stripe", 0, "chunk", 2);
    json_t *h = gw_health_eval(c, q, NULL);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(has(h, "DEGRADED_STRIPES", "WARN",
                    "4 chunks of 3 stripes wait for repair (2 lack 1 chunk, 1 lack 2 chunks)"));
    json_decref(h);
    /* Without the queue itself, the count. */
    h = gw_health_eval(c, NULL, NULL);
    assert_true(has(h, "DEGRADED_STRIPES", "WARN", "4 chunks wait for repair"));
    json_decref(h);
    json_decref(q);
    json_decref(c);
}

static void counters(void **state)
{
    (void)state;
    json_t *c = cluster(0, 0, 0);
    json_object_set_new(c, "corrupt_chunks", json_integer(2));
    json_object_set_new(c, "failed_reads", json_integer(1));
    json_t *h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(has(h, "CORRUPT_CHUNKS", "WARN", "2 corrupt chunks"));
    assert_true(has(h, "FAILED_READS", "WARN", "1 stripe reads"));
    json_decref(h);
    json_decref(c);
}

static void repair_status(void **state)
{
    (void)state;
    json_t *c = cluster(0, 0, 0);
    json_t *r = json_pack("{s:s,s:{s:i,s:i,s:f,s:f},s:{s:i},s:{s:{s:i,s:i}}}", "state", "running",
                          "progress", "stripes_done", 10, "stripes_total", 40, "rate_bytes_per_s",
                          2e6, "eta_s", 90.0, "queue", "stripes", 30, "scan", "degraded_by_lost",
                          "1", 25, "2", 5);
    json_t *h = gw_health_eval(c, NULL, r);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(
        has(h, "REPAIR_RUNNING", "WARN", "10 of 40 stripes rebuilt (25 %), 2.0 MB/s, ETA 90 s"));
    assert_true(
        has(h, "DEGRADED_SCAN", "WARN", "30 degraded stripes (25 lack 1, 5 lack 2 chunks)"));
    json_decref(h);
    json_object_set_new(r, "state", json_string("paused"));
    h = gw_health_eval(c, NULL, r);
    assert_true(has(h, "REPAIR_PAUSED", "WARN", "30 stripes queued"));
    json_decref(h);
    json_decref(r);
    json_decref(c);
}

/* A node's clock beyond the threshold (default or the cluster's) is a
 * CLOCK_SKEW warning naming it, whichever way it is off; nodes that do not
 * report a clock (older ones) are never flagged. */
static void clock_skew(void **state)
{
    (void)state;
    json_t *c = cluster(0, 0, 0);
    json_t *nodes = json_object_get(c, "nodes");
    json_object_set_new(json_array_get(nodes, 1), "clock_offset_s", json_real(0.4));
    json_object_set_new(json_array_get(nodes, 2), "clock_offset_s", json_real(-0.45));
    json_t *h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_OK");
    json_decref(h);
    json_object_set_new(json_array_get(nodes, 4), "clock_offset_s", json_real(-2.5));
    json_object_set_new(json_array_get(nodes, 7), "clock_offset_s", json_real(0.75));
    h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_WARN");
    assert_true(has(h, "CLOCK_SKEW", "WARN",
                    "clocks off the gateway's by more than 0.500 s on 2 of 9 nodes: n4 -2.500 s, "
                    "n7 +0.750 s"));
    json_decref(h);
    /* The gateway's own threshold (clock_skew_warn_ms) wins. */
    json_object_set_new(c, "clock_skew_warn_s", json_real(3.0));
    h = gw_health_eval(c, NULL, NULL);
    assert_string_equal(status(h), "HEALTH_OK");
    json_decref(h);
    json_object_set_new(c, "clock_skew_warn_s", json_real(0.3));
    h = gw_health_eval(c, NULL, NULL);
    assert_true(has(h, "CLOCK_SKEW", "WARN", "more than 0.300 s on 4 of 9 nodes"));
    assert_true(has(h, "CLOCK_SKEW", "WARN", "n1 +0.400 s, n2 -0.450 s, n4 -2.500 s"));
    json_decref(h);
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthy),    cmocka_unit_test(nodes_down),
        cmocka_unit_test(capacity),   cmocka_unit_test(degraded_stripes),
        cmocka_unit_test(counters),   cmocka_unit_test(repair_status),
        cmocka_unit_test(clock_skew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
