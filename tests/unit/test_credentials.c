/* Credentials on real files: generated once with mode 0600 and reused,
 * configuration and environment win over the file, unsafe files refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/credentials.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/inec-cred-XXXXXX");
    unsetenv("INEC_ACCESS_KEY");
    unsetenv("INEC_SECRET_KEY");
    unsetenv("INEC_ADMIN_TOKEN");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, GW_CREDENTIALS_FILE);
    unlink(p);
    snprintf(p, sizeof(p), "%s/sub/%s", dir, GW_CREDENTIALS_FILE);
    unlink(p);
    snprintf(p, sizeof(p), "%s/sub", dir);
    rmdir(p);
    return rmdir(dir);
}

static void test_generate_then_reuse(void **state)
{
    (void)state;
    char msg[256], sub[128], path[160];
    snprintf(sub, sizeof(sub), "%s/sub", dir); /* created on demand */
    struct gw_credentials a = {0}, b = {0};
    assert_int_equal(gw_credentials_load(sub, &a, msg, sizeof(msg)), 0);
    assert_true(a.generated);
    assert_int_equal(strlen(a.access_key), 20);
    assert_int_equal(strlen(a.secret_key), 40);
    assert_int_equal(strlen(a.admin_token), 48);
    assert_string_not_equal(a.secret_key, a.admin_token);
    snprintf(path, sizeof(path), "%s/%s", sub, GW_CREDENTIALS_FILE);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    assert_int_equal(gw_credentials_load(sub, &b, msg, sizeof(msg)), 0);
    assert_false(b.generated);
    assert_true(b.from_file);
    assert_string_equal(a.access_key, b.access_key);
    assert_string_equal(a.secret_key, b.secret_key);
    assert_string_equal(a.admin_token, b.admin_token);

    /* configuration, then the environment, win over the file */
    struct gw_credentials c = {0};
    strcpy(c.access_key, "CONFIGKEY");
    setenv("INEC_ACCESS_KEY", "ENVKEY", 1);
    setenv("INEC_SECRET_KEY", "envsecret", 1);
    assert_int_equal(gw_credentials_load(sub, &c, msg, sizeof(msg)), 0);
    unsetenv("INEC_ACCESS_KEY");
    unsetenv("INEC_SECRET_KEY");
    assert_string_equal(c.access_key, "CONFIGKEY");
    assert_string_equal(c.secret_key, "envsecret");
    assert_string_equal(c.admin_token, a.admin_token);

    /* a file others can read is refused, not used */
    assert_int_equal(chmod(path, 0644), 0);
    struct gw_credentials d = {0};
    assert_int_equal(gw_credentials_load(sub, &d, msg, sizeof(msg)), -EPERM);
    assert_non_null(strstr(msg, "chmod 600"));
}

static void test_everything_from_env(void **state)
{
    (void)state;
    char msg[256], path[160];
    setenv("INEC_ACCESS_KEY", "AK", 1);
    setenv("INEC_SECRET_KEY", "SK", 1);
    setenv("INEC_ADMIN_TOKEN", "TOK", 1);
    struct gw_credentials c = {0};
    assert_int_equal(gw_credentials_load(dir, &c, msg, sizeof(msg)), 0);
    unsetenv("INEC_ACCESS_KEY");
    unsetenv("INEC_SECRET_KEY");
    unsetenv("INEC_ADMIN_TOKEN");
    assert_false(c.generated);
    assert_string_equal(c.admin_token, "TOK");
    snprintf(path, sizeof(path), "%s/%s", dir, GW_CREDENTIALS_FILE);
    assert_int_equal(access(path, F_OK), -1); /* nothing generated, nothing stored */
}

static void test_corrupt_file(void **state)
{
    (void)state;
    char msg[256], path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, GW_CREDENTIALS_FILE);
    FILE *f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    chmod(path, 0600);
    struct gw_credentials c = {0};
    assert_int_equal(gw_credentials_load(dir, &c, msg, sizeof(msg)), -EINVAL);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_generate_then_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_everything_from_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
