/* S3's additional checksums against the catalogue's check values (the CRC
 * of "123456789"), streamed in pieces, and their base64 forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/checksum.h"

static void digest_of(enum gw_checksum_algo a, const char *s, size_t split, uint8_t *out, size_t *n)
{
    struct gw_checksum c;
    assert_int_equal(gw_checksum_init(&c, a), 0);
    gw_checksum_update(&c, s, split);
    gw_checksum_update(&c, s + split, strlen(s) - split);
    *n = gw_checksum_final(&c, out);
    gw_checksum_free(&c);
}

static uint64_t be(const uint8_t *d, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | d[i];
    return v;
}

static void test_check_values(void **state)
{
    (void)state;
    static const struct {
        enum gw_checksum_algo a;
        uint64_t check;
        size_t len;
    } crcs[] = {
        {GW_SUM_CRC32, 0xcbf43926u, 4},
        {GW_SUM_CRC32C, 0xe3069283u, 4},
        {GW_SUM_CRC64NVME, 0xae8b14860a799888ull, 8}, /* CRC-64/NVME */
    };
    uint8_t d[GW_CHECKSUM_MAX];
    size_t n;
    for (size_t i = 0; i < sizeof(crcs) / sizeof(crcs[0]); i++)
        for (size_t split = 0; split <= 9; split += 4) {
            digest_of(crcs[i].a, "123456789", split, d, &n);
            assert_int_equal(n, crcs[i].len);
            assert_true(be(d, n) == crcs[i].check);
        }
    char b64[GW_CHECKSUM_B64_MAX];
    assert_int_equal(gw_checksum_of(GW_SUM_SHA256, "", 0, b64), 0);
    assert_string_equal(b64, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    assert_int_equal(gw_checksum_of(GW_SUM_SHA1, "abc", 3, b64), 0);
    assert_string_equal(b64, "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
    assert_int_equal(gw_checksum_of(GW_SUM_CRC32, "", 0, b64), 0);
    assert_string_equal(b64, "AAAAAA==");
}

static void test_names_and_decode(void **state)
{
    (void)state;
    for (int a = 0; a < GW_SUM_COUNT; a++) {
        assert_int_equal(gw_checksum_from_header(gw_checksum_header(a)), a);
        assert_int_equal(gw_checksum_from_name(gw_checksum_name(a)), a);
    }
    assert_int_equal(gw_checksum_from_header("X-Amz-Checksum-CRC64NVME"), GW_SUM_CRC64NVME);
    assert_int_equal(gw_checksum_from_header("x-amz-checksum-md5"), GW_SUM_NONE);
    uint8_t d[GW_CHECKSUM_MAX];
    assert_int_equal(gw_checksum_decode(GW_SUM_CRC32, "y/Q5Jg==", d), 4);
    assert_true(be(d, 4) == 0xcbf43926u);
    assert_int_equal(gw_checksum_decode(GW_SUM_CRC32, "y/Q5", d), 0);         /* 3 bytes */
    assert_int_equal(gw_checksum_decode(GW_SUM_CRC64NVME, "y/Q5Jg==", d), 0); /* too short */
    assert_int_equal(gw_checksum_decode(GW_SUM_CRC32, "y/Q5Jh==", d), 0);     /* not canonical */
    assert_int_equal(gw_checksum_decode(GW_SUM_CRC32, "y/Q5J*==", d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_values),
        cmocka_unit_test(test_names_and_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
