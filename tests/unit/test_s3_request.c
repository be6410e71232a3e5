/* S3 request parsing without storage: targets (path-style and virtual-host),
 * bucket rules, key limits, queries, the routing table, dates, user metadata,
 * Content-MD5 and listen addresses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "gateway/s3_request.h"

static enum gw_s3_err target(const char *host, const char *domain, const char *path,
                             struct gw_s3_target *t)
{
    char msg[256];
    return gw_s3_parse_target(host, domain, path, t, msg, sizeof(msg));
}

static void test_path_style(void **state)
{
    (void)state;
    struct gw_s3_target t;
    assert_int_equal(target("127.0.0.1:9000", NULL, "/", &t), GW_S3_OK);
    assert_string_equal(t.bucket, "");
    assert_string_equal(t.key, "");
    assert_int_equal(target("127.0.0.1:9000", NULL, "/photos", &t), GW_S3_OK);
    assert_string_equal(t.bucket, "photos");
    assert_string_equal(t.key, "");
    assert_int_equal(target("127.0.0.1:9000", NULL, "/photos/", &t), GW_S3_OK);
    assert_string_equal(t.key, "");
    assert_int_equal(target(NULL, NULL, "/photos/2024/a%20b%2Bc.jpg", &t), GW_S3_OK);
    assert_string_equal(t.bucket, "photos");
    assert_string_equal(t.key, "2024/a b+c.jpg");
    assert_false(t.virtual_host);
    /* '+' in a path is a plus, not a space; a key may hold "//" */
    assert_int_equal(target(NULL, NULL, "/b-1/x+y//z", &t), GW_S3_OK);
    assert_string_equal(t.key, "x+y//z");
    /* a base domain does not apply to an IP host */
    assert_int_equal(target("127.0.0.1:9000", "s3.local", "/bkt/k", &t), GW_S3_OK);
    assert_string_equal(t.bucket, "bkt");
    assert_string_equal(t.key, "k");
}

static void test_virtual_host(void **state)
{
    (void)state;
    struct gw_s3_target t;
    assert_int_equal(target("photos.s3.local:9000", "s3.local", "/2024/x.jpg", &t), GW_S3_OK);
    assert_true(t.virtual_host);
    assert_string_equal(t.bucket, "photos");
    assert_string_equal(t.key, "2024/x.jpg");
    assert_int_equal(target("My.Bucket.S3.LOCAL", "s3.local", "/", &t), GW_S3_INVALID_BUCKET_NAME);
    assert_int_equal(target("a.b.c.s3.local", "s3.local", "/k", &t), GW_S3_OK);
    assert_string_equal(t.bucket, "a.b.c");
    /* the base domain itself is path-style */
    assert_int_equal(target("s3.local:9000", "s3.local", "/bkt/k", &t), GW_S3_OK);
    assert_false(t.virtual_host);
    assert_string_equal(t.bucket, "bkt");
    /* a host merely ending in the domain's letters is not under it */
    assert_int_equal(target("xs3.local", "s3.local", "/bkt", &t), GW_S3_OK);
    assert_false(t.virtual_host);
    assert_int_equal(target("[::1]:9000", "s3.local", "/bkt", &t), GW_S3_OK);
    assert_false(t.virtual_host);
}

static void test_bucket_rules(void **state)
{
    (void)state;
    const char *good[] = {"abc", "a-b.c", "123", "my.bucket.name", "a1-b2", NULL};
    const char *bad[] = {"ab",      "ABC",       "-abc",        "abc-",    "a..b", "a.-b", "a_b",
                         "xn--abc", "b-s3alias", "192.168.1.1", "bucket!", "",     NULL};
    for (int i = 0; good[i]; i++)
        assert_true(gw_s3_bucket_name_valid(good[i]));
    for (int i = 0; bad[i]; i++)
        assert_false(gw_s3_bucket_name_valid(bad[i]));
    char name[80];
    memset(name, 'a', 63);
    name[63] = '\0';
    assert_true(gw_s3_bucket_name_valid(name));
    name[63] = 'a';
    name[64] = '\0';
    assert_false(gw_s3_bucket_name_valid(name));
    struct gw_s3_target t;
    char path[100];
    snprintf(path, sizeof(path), "/%s/k", name);
    assert_int_equal(target(NULL, NULL, path, &t), GW_S3_INVALID_BUCKET_NAME);
    assert_int_equal(target(NULL, NULL, "/UPPER/k", &t), GW_S3_INVALID_BUCKET_NAME);
}

static void test_key_limits(void **state)
{
    (void)state;
    struct gw_s3_target t;
    char path[4 * GW_KEY_MAX];
    strcpy(path, "/bkt/");
    memset(path + 5, 'k', GW_KEY_MAX);
    path[5 + GW_KEY_MAX] = '\0';
    assert_int_equal(target(NULL, NULL, path, &t), GW_S3_OK);
    assert_int_equal(strlen(t.key), GW_KEY_MAX);
    strcat(path, "k");
    assert_int_equal(target(NULL, NULL, path, &t), GW_S3_KEY_TOO_LONG);
    /* escapes count as the bytes they decode to */
    strcpy(path, "/bkt/");
    for (int i = 0; i < GW_KEY_MAX; i++)
        strcat(path, "%41");
    assert_int_equal(target(NULL, NULL, path, &t), GW_S3_OK);
    assert_int_equal(strlen(t.key), GW_KEY_MAX);
    assert_int_equal(target(NULL, NULL, "/bkt/a%00b", &t), GW_S3_INVALID_ARGUMENT);
    assert_int_equal(target(NULL, NULL, "/bkt/a%zz", &t), GW_S3_INVALID_ARGUMENT);
    assert_int_equal(target(NULL, NULL, "/bkt/a%4", &t), GW_S3_INVALID_ARGUMENT);
    /* keys are UTF-8: a Latin-1 byte is refused by name, not a 500 later */
    char msg[256];
    assert_int_equal(gw_s3_parse_target(NULL, NULL, "/bkt/caf%E9", &t, msg, sizeof(msg)),
                     GW_S3_INVALID_ARGUMENT);
    assert_string_equal(msg, "key is not UTF-8");
    assert_int_equal(target(NULL, NULL, "/bkt/caf%C3%A9", &t), GW_S3_OK);
    assert_string_equal(t.key, "caf\xc3\xa9");
    assert_int_equal(target(NULL, NULL, "bkt/a", &t), GW_S3_INVALID_ARGUMENT);
    assert_int_equal(target(NULL, NULL, "", &t), GW_S3_INVALID_ARGUMENT);
}

static void test_query(void **state)
{
    (void)state;
    struct gw_s3_query q;
    assert_int_equal(gw_s3_query_parse("list-type=2&prefix=a%2Fb+c&delete&&max-keys=", &q), 0);
    assert_int_equal(q.n, 4);
    assert_string_equal(gw_s3_query_get(&q, "list-type"), "2");
    assert_string_equal(gw_s3_query_get(&q, "prefix"), "a/b c");
    assert_string_equal(gw_s3_query_get(&q, "delete"), "");
    assert_string_equal(gw_s3_query_get(&q, "max-keys"), "");
    assert_null(gw_s3_query_get(&q, "marker"));
    gw_s3_query_free(&q);
    assert_int_equal(gw_s3_query_parse(NULL, &q), 0);
    assert_int_equal(q.n, 0);
    assert_int_equal(gw_s3_query_parse("a=%G0", &q), -EINVAL);
    gw_s3_query_free(&q);
    /* text, so UTF-8: a Latin-1 prefix, an overlong slash, a surrogate */
    assert_int_equal(gw_s3_query_parse("prefix=caf%E9", &q), -EINVAL);
    gw_s3_query_free(&q);
    assert_int_equal(gw_s3_query_parse("prefix=%C0%AF", &q), -EINVAL);
    gw_s3_query_free(&q);
    assert_int_equal(gw_s3_query_parse("marker=%ED%A0%80", &q), -EINVAL);
    gw_s3_query_free(&q);
    assert_int_equal(gw_s3_query_parse("prefix=caf%C3%A9", &q), 0);
    assert_string_equal(gw_s3_query_get(&q, "prefix"), "caf\xc3\xa9");
    gw_s3_query_free(&q);
    char many[1024] = "";
    for (int i = 0; i <= GW_S3_QUERY_MAX_PARAMS; i++)
        strcat(many, "x=1&");
    assert_int_equal(gw_s3_query_parse(many, &q), -EINVAL);
    gw_s3_query_free(&q);
}

struct hdrs {
    const char *names[4], *values[4];
};

static const char *hdr(void *arg, const char *name)
{
    struct hdrs *h = arg;
    for (int i = 0; i < 4 && h->names[i]; i++)
        if (strcasecmp(h->names[i], name) == 0)
            return h->values[i];
    return NULL;
}

static enum gw_s3_op route(const char *method, const char *path, const char *query, struct hdrs *h)
{
    struct gw_s3_target t;
    struct gw_s3_query q;
    assert_int_equal(target(NULL, NULL, path, &t), GW_S3_OK);
    assert_int_equal(gw_s3_query_parse(query, &q), 0);
    enum gw_s3_op op = gw_s3_route(method, &t, &q, hdr, h);
    gw_s3_query_free(&q);
    return op;
}

static void test_routing(void **state)
{
    (void)state;
    struct hdrs none = {{NULL}, {NULL}};
    struct hdrs copy = {{"X-Amz-Copy-Source", NULL}, {"/a/b", NULL}};
    assert_int_equal(route("GET", "/", NULL, &none), GW_OP_LIST_BUCKETS);
    assert_int_equal(route("PUT", "/bkt", NULL, &none), GW_OP_CREATE_BUCKET);
    assert_int_equal(route("HEAD", "/bkt", NULL, &none), GW_OP_HEAD_BUCKET);
    assert_int_equal(route("DELETE", "/bkt", NULL, &none), GW_OP_DELETE_BUCKET);
    assert_int_equal(route("GET", "/bkt", "prefix=a&delimiter=/", &none), GW_OP_LIST_OBJECTS);
    assert_int_equal(route("GET", "/bkt", "list-type=2&prefix=a", &none), GW_OP_LIST_OBJECTS_V2);
    assert_int_equal(route("GET", "/bkt", "location", &none), GW_OP_GET_BUCKET_LOCATION);
    assert_int_equal(route("POST", "/bkt", "delete", &none), GW_OP_DELETE_OBJECTS);
    assert_int_equal(route("PUT", "/bkt/k", NULL, &none), GW_OP_PUT_OBJECT);
    assert_int_equal(route("GET", "/bkt/k", NULL, &none), GW_OP_GET_OBJECT);
    /* presigned URLs carry X-Amz-* parameters, which are not sub-resources */
    assert_int_equal(route("GET", "/bkt/k", "X-Amz-Signature=ab&response-content-type=x", &none),
                     GW_OP_GET_OBJECT);
    assert_int_equal(route("HEAD", "/bkt/k", NULL, &none), GW_OP_HEAD_OBJECT);
    assert_int_equal(route("DELETE", "/bkt/k", NULL, &none), GW_OP_DELETE_OBJECT);
    /* multipart and copy */
    assert_int_equal(route("PUT", "/bkt/k", NULL, &copy), GW_OP_COPY_OBJECT);
    assert_int_equal(route("POST", "/bkt/k", "uploads", &none), GW_OP_CREATE_MULTIPART_UPLOAD);
    assert_int_equal(route("PUT", "/bkt/k", "partNumber=1&uploadId=x", &none), GW_OP_UPLOAD_PART);
    assert_int_equal(route("PUT", "/bkt/k", "partNumber=1&uploadId=x", &copy),
                     GW_OP_UPLOAD_PART_COPY);
    assert_int_equal(route("POST", "/bkt/k", "uploadId=x", &none), GW_OP_COMPLETE_MULTIPART_UPLOAD);
    assert_int_equal(route("DELETE", "/bkt/k", "uploadId=x", &none), GW_OP_ABORT_MULTIPART_UPLOAD);
    assert_int_equal(route("GET", "/bkt/k", "uploadId=x", &none), GW_OP_LIST_PARTS);
    assert_int_equal(route("GET", "/bkt", "uploads", &none), GW_OP_LIST_MULTIPART_UPLOADS);
    /* what S3 has and the gateway does not */
    assert_int_equal(route("GET", "/bkt/k", "tagging", &none), GW_OP_GET_OBJECT_TAGGING);
    assert_int_equal(route("PUT", "/bkt/k", "partNumber=1", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("GET", "/bkt/k", "acl", &none), GW_OP_GET_OBJECT_ACL);
    assert_int_equal(route("PUT", "/bkt/k", "acl", &none), GW_OP_PUT_OBJECT_ACL);
    assert_int_equal(route("GET", "/bkt", "acl", &none), GW_OP_GET_BUCKET_ACL);
    assert_int_equal(route("PUT", "/bkt", "acl", &none), GW_OP_PUT_BUCKET_ACL);
    assert_int_equal(route("DELETE", "/bkt", "acl", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("GET", "/bkt", "versions", &none), GW_OP_LIST_OBJECT_VERSIONS);
    assert_int_equal(route("GET", "/bkt", "versions&prefix=a", &none), GW_OP_LIST_OBJECT_VERSIONS);
    /* versionId=null is the one version of an unversioned object, any other a sub-resource */
    assert_int_equal(route("GET", "/bkt/k", "versionId=null", &none), GW_OP_GET_OBJECT);
    assert_int_equal(route("HEAD", "/bkt/k", "versionId=null", &none), GW_OP_HEAD_OBJECT);
    assert_int_equal(route("DELETE", "/bkt/k", "versionId=null", &none), GW_OP_DELETE_OBJECT);
    assert_int_equal(route("GET", "/bkt/k", "versionId=3HL4kqtJ", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("GET", "/bkt", "versioning", &none), GW_OP_GET_BUCKET_VERSIONING);
    assert_int_equal(route("PUT", "/bkt", "versioning", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("GET", "/bkt", "lifecycle", &none), GW_OP_GET_BUCKET_LIFECYCLE);
    assert_int_equal(route("PUT", "/bkt", "lifecycle", &none), GW_OP_PUT_BUCKET_LIFECYCLE);
    assert_int_equal(route("DELETE", "/bkt", "lifecycle", &none), GW_OP_DELETE_BUCKET_LIFECYCLE);
    assert_int_equal(route("GET", "/bkt/k", "lifecycle", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("PUT", "/bkt", "tagging", &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("PATCH", "/bkt/k", NULL, &none), GW_OP_NOT_IMPLEMENTED);
    assert_int_equal(route("POST", "/bkt/k", NULL, &none), GW_OP_METHOD_NOT_ALLOWED);
    assert_int_equal(route("DELETE", "/", NULL, &none), GW_OP_METHOD_NOT_ALLOWED);
    for (int op = 0; op < GW_OP_COUNT; op++)
        assert_non_null(gw_s3_op_names[op]);
    assert_string_equal(gw_s3_op_name(GW_OP_PUT_OBJECT), "PutObject");
}

static void test_http_date(void **state)
{
    (void)state;
    char d[30];
    gw_http_date(784111777LL * 1000000000, d); /* RFC 9110's example */
    assert_string_equal(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    gw_http_date(0, d);
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    gw_http_date(951782400LL * 1000000000 + 999999999, d); /* leap day, fraction dropped */
    assert_string_equal(d, "Tue, 29 Feb 2000 00:00:00 GMT");
    gw_http_date(4102444799LL * 1000000000, d);
    assert_string_equal(d, "Thu, 31 Dec 2099 23:59:59 GMT");
}

struct hlist {
    const char *const *kv; /* name, value, ..., NULL */
};

static void each(void *arg, void (*cb)(void *, const char *, const char *), void *cbarg)
{
    struct hlist *h = arg;
    for (int i = 0; h->kv[i]; i += 2)
        cb(cbarg, h->kv[i], h->kv[i + 1]);
}

static void test_user_meta(void **state)
{
    (void)state;
    char msg[256];
    json_t *m;
    const char *kv[] = {
        "Host", "x",           "X-Amz-Meta-Color", "blue", "x-amz-meta-n", "1", "x-amz-date",
        "y",    "x-amz-meta-", "ignored",          NULL};
    struct hlist h = {kv};
    assert_int_equal(gw_s3_user_meta(each, &h, &m, msg, sizeof(msg)), GW_S3_OK);
    assert_int_equal(json_object_size(m), 2);
    assert_string_equal(json_string_value(json_object_get(m, "color")), "blue");
    assert_string_equal(json_string_value(json_object_get(m, "n")), "1");
    json_decref(m);

    char big[GW_S3_META_MAX];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    const char *kv2[] = {"x-amz-meta-a", big, NULL};
    h.kv = kv2;
    assert_int_equal(gw_s3_user_meta(each, &h, &m, msg, sizeof(msg)), GW_S3_OK);
    json_decref(m);
    const char *kv3[] = {"x-amz-meta-ab", big, NULL}; /* one byte over */
    h.kv = kv3;
    assert_int_equal(gw_s3_user_meta(each, &h, &m, msg, sizeof(msg)), GW_S3_METADATA_TOO_LARGE);
    assert_null(m);
    const char *kv4[] = {"x-amz-meta-a", "\xff\xfe", NULL};
    h.kv = kv4;
    assert_int_equal(gw_s3_user_meta(each, &h, &m, msg, sizeof(msg)), GW_S3_INVALID_ARGUMENT);
}

static void test_content_md5(void **state)
{
    (void)state;
    uint8_t md5[16];
    /* MD5("") = d41d8cd98f00b204e9800998ecf8427e */
    assert_int_equal(gw_s3_content_md5("1B2M2Y8AsgTpgAmY7PhCfg==", md5), 0);
    assert_int_equal(md5[0], 0xd4);
    assert_int_equal(md5[15], 0x7e);
    assert_int_equal(gw_s3_content_md5("1B2M2Y8AsgTpgAmY7PhCfg", md5), -EINVAL);
    assert_int_equal(gw_s3_content_md5("not base64 at all!!!!!==", md5), -EINVAL);
    assert_int_equal(gw_s3_content_md5(NULL, md5), -EINVAL);
}

static void test_listen(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    assert_int_equal(gw_parse_listen("127.0.0.1:9000", &ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9000);
    assert_int_equal(gw_parse_listen("[::1]:0", &ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(gw_parse_listen("localhost:1", &ss, &len), 0);
    assert_int_equal(gw_parse_listen(":9000", &ss, &len), 0);
    assert_int_equal(gw_parse_listen("127.0.0.1", &ss, &len), -EINVAL);
    assert_int_equal(gw_parse_listen("127.0.0.1:65536", &ss, &len), -EINVAL);
    assert_int_equal(gw_parse_listen("127.0.0.1:", &ss, &len), -EINVAL);
    assert_int_equal(gw_parse_listen("example.com:80", &ss, &len), -EINVAL);
    /* a link-local address with its scope */
    assert_int_equal(gw_parse_listen("[fe80::1%lo]:80", &ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_scope_id, if_nametoindex("lo"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_style),   cmocka_unit_test(test_virtual_host),
        cmocka_unit_test(test_bucket_rules), cmocka_unit_test(test_key_limits),
        cmocka_unit_test(test_query),        cmocka_unit_test(test_routing),
        cmocka_unit_test(test_http_date),    cmocka_unit_test(test_user_meta),
        cmocka_unit_test(test_content_md5),  cmocka_unit_test(test_listen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
