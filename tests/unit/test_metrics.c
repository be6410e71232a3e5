/* The Prometheus text the control API serves: every sample line parses as
 * the exposition format says, histograms are cumulative and agree with
 * their count and sum, and cluster gauges follow the object layer's document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/metrics.h"

static const char *const ops[] = {"GetObject", "PutObject"};

static char *render(struct gw_metrics *m, json_t *cluster)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(gw_metrics_write(m, cluster, f), 0);
    fclose(f);
    return text;
}

/* The value of the sample line that starts with `series` followed by a space. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    fail_msg("no sample %s", series);
    return -1;
}

/* Every line is a comment (# HELP/# TYPE) or `name{labels} value`. */
static void check_format(const char *text)
{
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        assert_non_null(end); /* the last line ends in a newline too */
        if (*l == '#') {
            assert_true(strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0);
        } else {
            const char *sp = memchr(l, ' ', (size_t)(end - l));
            assert_non_null(sp);
            for (const char *c = l; c < sp && *c != '{'; c++)
                assert_true((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
            char *num_end;
            strtod(sp + 1, &num_end);
            assert_ptr_equal(num_end, end);
        }
        l = end + 1;
    }
}

static void test_counters_and_histogram(void **state)
{
    (void)state;
    struct gw_metrics *m;
    assert_int_equal(gw_metrics_create(ops, 2, &m), 0);
    gw_metrics_record(m, 0, 200, 300000, 0, 100);       /* 0.3 ms */
    gw_metrics_record(m, 0, 206, 2000000, 0, 50);       /* 2 ms */
    gw_metrics_record(m, 0, 404, 20000000000ULL, 0, 0); /* 20 s: only +Inf */
    gw_metrics_record(m, 1, 200, 1000000, 4096, 0);
    gw_metrics_record(m, 1, 299, 1000000, 1, 0); /* an unusual status */
    gw_metrics_record(m, 7, 500, 1000000, 0, 0); /* out of range: the last op */
    char *t = render(m, NULL);
    check_format(t);
    assert_int_equal(sample(t, "inec_s3_requests_total{op=\"GetObject\",status=\"200\"}"), 1);
    assert_int_equal(sample(t, "inec_s3_requests_total{op=\"GetObject\",status=\"206\"}"), 1);
    assert_int_equal(sample(t, "inec_s3_requests_total{op=\"PutObject\",status=\"other\"}"), 1);
    assert_int_equal(sample(t, "inec_s3_requests_total{op=\"PutObject\",status=\"500\"}"), 1);
    assert_null(strstr(t, "op=\"GetObject\",status=\"500\""));
    assert_int_equal(sample(t, "inec_s3_sent_bytes_total{op=\"GetObject\"}"), 150);
    assert_int_equal(sample(t, "inec_s3_received_bytes_total{op=\"PutObject\"}"), 4097);
    const char *b = "inec_s3_request_duration_seconds_bucket{op=\"GetObject\",le=";
    char s[128];
    snprintf(s, sizeof(s), "%s\"0.0005\"}", b);
    assert_int_equal(sample(t, s), 1);
    snprintf(s, sizeof(s), "%s\"0.0025\"}", b);
    assert_int_equal(sample(t, s), 2);
    snprintf(s, sizeof(s), "%s\"10\"}", b);
    assert_int_equal(sample(t, s), 2);
    snprintf(s, sizeof(s), "%s\"+Inf\"}", b);
    assert_int_equal(sample(t, s), 3);
    assert_int_equal(sample(t, "inec_s3_request_duration_seconds_count{op=\"GetObject\"}"), 3);
    assert_float_equal(sample(t, "inec_s3_request_duration_seconds_sum{op=\"GetObject\"}"), 20.0023,
                       1e-9);
    free(t);
    gw_metrics_destroy(m);
    gw_metrics_destroy(NULL);
}

static void test_cluster_gauges(void **state)
{
    (void)state;
    struct gw_metrics *m;
    assert_int_equal(gw_metrics_create(ops, 2, &m), 0);
    json_t *c = json_pack("{s[{sisbsIsI}{sssbsIsI}]sI}", "nodes", "id", 0, "up", 1,
                          "capacity_bytes", (json_int_t)1000, "used_bytes", (json_int_t)10, "id",
                          "n\"1", "up", 0, "capacity_bytes", (json_int_t)2000, "used_bytes",
                          (json_int_t)0, "degraded_reads", (json_int_t)7);
    json_object_set_new(c, "degraded_writes", json_integer(3));
    json_object_set_new(c, "corrupt_chunks", json_integer(2));
    json_object_set_new(c, "missing_chunks", json_integer(5));
    json_object_set_new(c, "failed_reads", json_integer(1));
    json_object_set_new(c, "repair_queue", json_integer(9));
    json_object_set_new(c, "metadata",
                        json_pack("{sIsIsb}", "read_repairs", (json_int_t)6, "heal_pending",
                                  (json_int_t)8, "doubt", 1));
    json_array_append_new(json_object_get(c, "nodes"),
                          json_pack("{sssbsIsIsI}", "id", "n2", "up", 1, "capacity_bytes",
                                    (json_int_t)500, "used_bytes", (json_int_t)200, "chunks",
                                    (json_int_t)4));
    json_object_set_new(json_array_get(json_object_get(c, "nodes"), 2), "clock_offset_s",
                        json_real(-0.25));
    /* Pools: usage only once a scan counted it. */
    json_object_set_new(c, "pools",
                        json_pack("[{ss sI sI sI sI}{ss}]", "name", "default", "objects",
                                  (json_int_t)4, "logical_bytes", (json_int_t)4096, "stored_bytes",
                                  (json_int_t)6144, "degraded_stripes", (json_int_t)2, "name",
                                  "unscanned"));
    assert_non_null(c);
    char *t = render(m, c);
    check_format(t);
    assert_int_equal(sample(t, "inec_node_up{node=\"0\"}"), 1);
    assert_int_equal(sample(t, "inec_node_up{node=\"n\\\"1\"}"), 0);
    assert_int_equal(sample(t, "inec_node_capacity_bytes{node=\"n\\\"1\"}"), 2000);
    assert_int_equal(sample(t, "inec_node_used_bytes{node=\"0\"}"), 10);
    assert_int_equal(sample(t, "inec_degraded_reads_total"), 7);
    assert_int_equal(sample(t, "inec_degraded_writes_total"), 3);
    assert_int_equal(sample(t, "inec_corrupt_chunks_total"), 2);
    assert_int_equal(sample(t, "inec_missing_chunks_total"), 5);
    assert_int_equal(sample(t, "inec_failed_reads_total"), 1);
    assert_int_equal(sample(t, "inec_repair_queue_chunks"), 9);
    assert_int_equal(sample(t, "inec_metadata_read_repairs_total"), 6);
    assert_int_equal(sample(t, "inec_metadata_heal_pending"), 8);
    assert_int_equal(sample(t, "inec_metadata_doubt"), 1);
    assert_int_equal(sample(t, "inec_node_free_bytes{node=\"n2\"}"), 300);
    assert_int_equal(sample(t, "inec_node_chunks{node=\"n2\"}"), 4);
    assert_true(sample(t, "inec_node_clock_offset_seconds{node=\"n2\"}") == -0.25);
    assert_null(strstr(t, "inec_node_clock_offset_seconds{node=\"0\"}"));
    assert_int_equal(sample(t, "inec_pool_objects{pool=\"default\"}"), 4);
    assert_int_equal(sample(t, "inec_pool_logical_bytes{pool=\"default\"}"), 4096);
    assert_int_equal(sample(t, "inec_pool_stored_bytes{pool=\"default\"}"), 6144);
    assert_int_equal(sample(t, "inec_pool_degraded_stripes{pool=\"default\"}"), 2);
    assert_null(strstr(t, "pool=\"unscanned\""));
    assert_int_equal(sample(t, "inec_build_info{version=\"" INEC_VERSION "\"}"), 1);
    free(t);
    json_decref(c);
    gw_metrics_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_histogram),
        cmocka_unit_test(test_cluster_gauges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
