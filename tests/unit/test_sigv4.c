/* SigV4 verification against the worked examples AWS publishes for S3
 * (sig-v4-header-based-auth, sigv4-query-string-auth, sigv4-streaming), and
 * the ways a request can be tampered with, expire or be malformed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "gateway/sigv4.h"

#define AKID         "AKIAIOSFODNN7EXAMPLE"
#define SECRET       "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define DATE         "20130524T000000Z"
#define T0           1369353600 /* 2013-05-24T00:00:00Z */
#define CRED         "Credential=" AKID "/20130524/us-east-1/s3/aws4_request"
#define HOST         "examplebucket.s3.amazonaws.com"

struct headers {
    int n;
    const char *name[16];
    const char *value[16];
};

static const char *lookup(void *arg, const char *name)
{
    struct headers *h = arg;
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->name[i], name) == 0)
            return h->value[i];
    return NULL;
}

static void set(struct headers *h, const char *name, const char *value)
{
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->name[i], name) == 0) {
            h->value[i] = value;
            return;
        }
    h->name[h->n] = name;
    h->value[h->n++] = value;
}

static int secrets(void *arg, const char *access_key, char *secret, size_t len)
{
    const char *s = arg;
    if (strcmp(access_key, AKID) != 0)
        return -ENOENT;
    snprintf(secret, len, "%s", s);
    return 0;
}

static enum gw_s3_err check(const char *method, const char *path, const char *query,
                            struct headers *h, int64_t now, const char *secret,
                            struct gw_sigv4_auth *auth)
{
    struct gw_sigv4_request req = {method, path, query, lookup, h, NULL};
    struct gw_sigv4_config cfg = {"us-east-1", secrets, (void *)secret, now};
    char msg[256];
    enum gw_s3_err e = gw_sigv4_verify(&req, &cfg, auth, msg, sizeof(msg));
    if (e)
        print_message("  %s %s?%.120s -> %s: %s\n", method, path, query ? query : "",
                      gw_s3_error(e)->code, msg);
    return e;
}

/* ---- GET Object with a Range header ---- */

static void get_object(struct headers *h)
{
    *h = (struct headers){0};
    set(h, "Host", HOST);
    set(h, "Range", "bytes=0-9");
    set(h, "x-amz-content-sha256", EMPTY_SHA256);
    set(h, "x-amz-date", DATE);
    set(h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_get_object(void **state)
{
    (void)state;
    struct headers h;
    struct gw_sigv4_auth a;
    get_object(&h);
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_OK);
    assert_string_equal(a.access_key, AKID);
    assert_false(a.presigned);
    assert_false(a.anonymous);
    assert_int_equal(a.payload, GW_PAYLOAD_SHA256);
    assert_string_equal(a.scope, "20130524/us-east-1/s3/aws4_request");

    /* Blanks around a value and runs inside it do not change the signature. */
    set(&h, "Range", "  bytes=0-9\t ");
    assert_int_equal(check("GET", "/test.txt", "", &h, T0, SECRET, &a), GW_S3_OK);
    /* Components may be separated by ", " as most SDKs write them. */
    set(&h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ", SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    assert_int_equal(check("GET", "/test.txt", "", &h, T0, SECRET, &a), GW_S3_OK);
    /* The clock may be 15 minutes off either way, not more. */
    assert_int_equal(check("GET", "/test.txt", "", &h, T0 + 900, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/test.txt", "", &h, T0 - 900, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/test.txt", "", &h, T0 + 901, SECRET, &a),
                     GW_S3_REQUEST_TIME_TOO_SKEWED);
    assert_int_equal(check("GET", "/test.txt", "", &h, T0 - 901, SECRET, &a),
                     GW_S3_REQUEST_TIME_TOO_SKEWED);
}

/* The signer writes AWS's published signature for the same request, and
 * what it signs (here with a query) the verifier accepts. */
static void test_sign(void **state)
{
    (void)state;
    struct headers h;
    get_object(&h);
    struct gw_sigv4_request req = {"GET", "/test.txt", NULL, lookup, &h, NULL};
    struct gw_sigv4_signer s = {AKID, SECRET, NULL, "host;range;x-amz-content-sha256;x-amz-date",
                                DATE};
    char authz[512];
    assert_int_equal(gw_sigv4_sign(&req, &s, authz, sizeof(authz)), 0);
    assert_string_equal(authz, "AWS4-HMAC-SHA256 " CRED
                               ", SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                               "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c"
                               "6036bdb41");
    char date[17];
    gw_sigv4_amz_date(T0, date);
    assert_string_equal(date, DATE);

    req = (struct gw_sigv4_request){"PUT", "/bucket/a%20key", "b=2&a=1", lookup, &h, NULL};
    set(&h, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    s.signed_headers = "host;x-amz-content-sha256;x-amz-date";
    assert_int_equal(gw_sigv4_sign(&req, &s, authz, sizeof(authz)), 0);
    set(&h, "Authorization", authz);
    struct gw_sigv4_auth a;
    assert_int_equal(check("PUT", "/bucket/a%20key", "b=2&a=1", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(a.payload, GW_PAYLOAD_UNSIGNED);
    assert_int_equal(check("PUT", "/bucket/a%20key", "b=3&a=1", &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);

    s.signed_headers = "Host;x-amz-date"; /* not lowercase */
    assert_int_equal(gw_sigv4_sign(&req, &s, authz, sizeof(authz)), -EINVAL);
    s.signed_headers = "host;x-amz-date";
    assert_int_equal(gw_sigv4_sign(&req, &s, authz, 40), -ENOSPC);
}

static void test_get_object_tampered(void **state)
{
    (void)state;
    struct headers h;
    struct gw_sigv4_auth a;
    get_object(&h);
    set(&h, "Range", "bytes=0-10");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    get_object(&h);
    assert_int_equal(check("GET", "/test.txT", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(check("HEAD", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(check("GET", "/test.txt", "x=1", &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(
        check("GET", "/test.txt", NULL, &h, T0, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ", &a),
        GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(a.seed_signature[0], '\0'); /* a failed verdict leaves nothing usable */
    set(&h, "Host", "otherbucket.s3.amazonaws.com");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    get_object(&h);
    set(&h, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
}

static void test_malformed_authorization(void **state)
{
    (void)state;
    static const struct {
        const char *authorization;
        enum gw_s3_err want;
    } cases[] = {
        {"AWS " AKID ":frJIUN8DYpKDtOLCwo//yllqDzg=", GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host;range",
         GW_S3_AUTH_HEADER_MALFORMED}, /* no Signature */
        {"AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host,Signature=abc", GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host,Signature="
         "F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41",
         GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 " CRED ",SignedHeaders=Host;range,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 " CRED ",SignedHeaders=range;x-amz-date,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED}, /* host must be signed */
        {"AWS4-HMAC-SHA256 " CRED "," CRED ",SignedHeaders=host,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 Credential=" AKID "/20130524/eu-west-1/s3/aws4_request,"
         "SignedHeaders=host,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED}, /* wrong region */
        {"AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/iam/aws4_request,"
         "SignedHeaders=host,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 Credential=" AKID "/20130525/us-east-1/s3/aws4_request,"
         "SignedHeaders=host,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED}, /* scope date is not the request date */
        {"AWS4-HMAC-SHA256 Credential=" AKID "/us-east-1/s3/aws4_request,"
         "SignedHeaders=host,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_AUTH_HEADER_MALFORMED},
        {"AWS4-HMAC-SHA256 Credential=AKIDUNKNOWN/20130524/us-east-1/s3/aws4_request,"
         "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
         GW_S3_INVALID_ACCESS_KEY_ID},
        {"", GW_S3_AUTH_HEADER_MALFORMED},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct headers h;
        struct gw_sigv4_auth a;
        get_object(&h);
        set(&h, "Authorization", cases[i].authorization);
        enum gw_s3_err e = check("GET", "/test.txt", NULL, &h, T0, SECRET, &a);
        if (e != cases[i].want)
            fail_msg("case %zu: got %s, want %s", i, gw_s3_error(e)->code,
                     gw_s3_error(cases[i].want)->code);
    }

    struct headers h;
    struct gw_sigv4_auth a;
    get_object(&h);
    set(&h, "x-amz-date", "2013-05-24T00:00:00Z");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_ACCESS_DENIED);
    get_object(&h);
    set(&h, "x-amz-content-sha256", "abc");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_INVALID_ARGUMENT);
    get_object(&h);
    h.n = 3; /* drop Authorization: anonymous */
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_ACCESS_DENIED);
    assert_true(a.anonymous);
    get_object(&h);
    assert_int_equal(
        check("GET", "/test.txt", "X-Amz-Algorithm=AWS4-HMAC-SHA256", &h, T0, SECRET, &a),
        GW_S3_INVALID_ARGUMENT);
    assert_string_equal(gw_s3_error(GW_S3_AUTH_HEADER_MALFORMED)->code,
                        "AuthorizationHeaderMalformed");
    assert_int_equal(gw_s3_error(GW_S3_SIGNATURE_DOES_NOT_MATCH)->status, 403);
    assert_int_equal(gw_s3_error(GW_S3_REQUEST_TIME_TOO_SKEWED)->status, 403);
    assert_string_equal(gw_s3_error(GW_S3_REQUEST_EXPIRED)->code, "AccessDenied");
    assert_string_equal(gw_s3_error(GW_S3_REQUEST_EXPIRED)->message, "Request has expired");
    assert_string_equal(gw_s3_error((enum gw_s3_err)9999)->code, "InternalError");
}

/* ---- PUT Object: a '$' in the key, a Date header, a signed payload ---- */

static void put_object(struct headers *h)
{
    *h = (struct headers){0};
    set(h, "Host", HOST);
    set(h, "Date", "Fri, 24 May 2013 00:00:00 GMT");
    set(h, "x-amz-date", DATE);
    set(h, "x-amz-storage-class", "REDUCED_REDUNDANCY");
    set(h, "x-amz-content-sha256",
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    set(h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-storage-class,Signature="
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_put_object(void **state)
{
    (void)state;
    struct headers h;
    struct gw_sigv4_auth a;
    put_object(&h);
    /* "%24", "%24" in lowercase hex, and a raw '$' are one canonical path. */
    const char *paths[] = {"/test%24file.text", "/test$file.text", "/test%24file%2etext"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(check("PUT", paths[i], NULL, &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("PUT", "/test%2524file.text", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH); /* decoded once only */
    assert_int_equal(a.payload, GW_PAYLOAD_SHA256);

    assert_int_equal(check("PUT", "/test%24file.text", NULL, &h, T0, SECRET, &a), GW_S3_OK);
    const char *body = "Welcome to Amazon S3.";
    for (size_t split = 0; split <= strlen(body); split += 7) {
        struct gw_payload_check *p;
        assert_int_equal(gw_payload_create(&a, &p), 0);
        gw_payload_update(p, body, split);
        gw_payload_update(p, body + split, strlen(body) - split);
        assert_int_equal(gw_payload_final(p), GW_S3_OK);
        gw_payload_destroy(p);
    }
    struct gw_payload_check *p;
    assert_int_equal(gw_payload_create(&a, &p), 0);
    gw_payload_update(p, "Welcome to Amazon S3!", 21);
    assert_int_equal(gw_payload_final(p), GW_S3_CONTENT_SHA256_MISMATCH);
    gw_payload_destroy(p);
    gw_payload_destroy(NULL);
    assert_string_equal(gw_s3_error(GW_S3_CONTENT_SHA256_MISMATCH)->code,
                        "XAmzContentSHA256Mismatch");

    /* Without x-amz-date the Date header dates the request. */
    h.n = 0;
    set(&h, "Host", HOST);
    set(&h, "Date", "Fri, 24 May 2013 00:00:00 GMT");
    set(&h, "x-amz-content-sha256", EMPTY_SHA256);
    set(&h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=date;host,Signature="
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    assert_int_equal(check("PUT", "/k", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH); /* dated and checked, then no match */
    assert_string_equal(a.amz_date, DATE);
    set(&h, "Date", "Fri, 24 Mayo 2013 00:00:00 GMT");
    assert_int_equal(check("PUT", "/k", NULL, &h, T0, SECRET, &a), GW_S3_ACCESS_DENIED);

    put_object(&h);
    h.n--; /* no Authorization... */
    h.n--; /* ...nor x-amz-content-sha256, then Authorization back without the hash */
    set(&h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=date;host;x-amz-date;x-amz-storage-class,"
        "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    assert_int_equal(check("PUT", "/test%24file.text", NULL, &h, T0, SECRET, &a),
                     GW_S3_INVALID_REQUEST);
}

/* ---- GET Bucket lifecycle and List Objects: query strings ---- */

static void bucket_get(struct headers *h, const char *signature)
{
    *h = (struct headers){0};
    set(h, "Host", HOST);
    set(h, "x-amz-date", DATE);
    set(h, "x-amz-content-sha256", EMPTY_SHA256);
    set(h, "Authorization", signature);
}

static void test_bucket_queries(void **state)
{
    (void)state;
    struct headers h;
    struct gw_sigv4_auth a;
    bucket_get(&h, "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
                   "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    assert_int_equal(check("GET", "/", "lifecycle", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "lifecycle=", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "", "lifecycle", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "lifecycle&", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "policy", &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);

    bucket_get(&h, "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
                   "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    assert_int_equal(check("GET", "/", "max-keys=2&prefix=J", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "prefix=J&max-keys=2", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "prefix=%4A&max-keys=2", &h, T0, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/", "prefix=K&max-keys=2", &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(check("GET", "/", "max-keys=2&prefix=J&prefix=J", &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);

    /* Thousands of parameters are refused before any work scales with them. */
    size_t n = 2000 * 4 + 1;
    char *q = malloc(n);
    for (int i = 0; i < 2000; i++)
        memcpy(q + 4 * i, "a=1&", 4);
    q[n - 1] = '\0';
    assert_int_equal(check("GET", "/", q, &h, T0, SECRET, &a), GW_S3_INVALID_ARGUMENT);
    free(q);
}

/* ---- presigned URL ---- */

#define PRESIGN_Q(expires, sig)                                                                    \
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AKID                                      \
    "%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=" DATE "&X-Amz-Expires=" expires       \
    "&X-Amz-SignedHeaders=host&X-Amz-Signature=" sig
#define PRESIGN_SIG "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static void test_presigned(void **state)
{
    (void)state;
    struct headers h = {0};
    struct gw_sigv4_auth a;
    set(&h, "Host", HOST);
    const char *q = PRESIGN_Q("86400", PRESIGN_SIG);
    assert_int_equal(check("GET", "/test.txt", q, &h, T0, SECRET, &a), GW_S3_OK);
    assert_true(a.presigned);
    assert_int_equal(a.payload, GW_PAYLOAD_UNSIGNED);
    assert_int_equal(check("GET", "/test.txt", q, &h, T0 + 86400, SECRET, &a), GW_S3_OK);
    assert_int_equal(check("GET", "/test.txt", q, &h, T0 + 86401, SECRET, &a),
                     GW_S3_REQUEST_EXPIRED);
    assert_int_equal(check("GET", "/test.txt", q, &h, T0 - 901, SECRET, &a),
                     GW_S3_ACCESS_DENIED); /* not valid yet */
    assert_int_equal(check("PUT", "/test.txt", q, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(check("GET", "/test.txt", PRESIGN_Q("86401", PRESIGN_SIG), &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    assert_int_equal(
        check("GET", "/test.txt", PRESIGN_Q("604801", PRESIGN_SIG), &h, T0, SECRET, &a),
        GW_S3_ACCESS_DENIED); /* a week at most: 403, as S3 */
    assert_int_equal(check("GET", "/test.txt", PRESIGN_Q("0", PRESIGN_SIG), &h, T0, SECRET, &a),
                     GW_S3_ACCESS_DENIED);
    assert_int_equal(check("GET", "/test.txt", PRESIGN_Q("99999999999999999999", PRESIGN_SIG), &h,
                           T0, SECRET, &a),
                     GW_S3_ACCESS_DENIED);
    assert_int_equal(check("GET", "/test.txt", PRESIGN_Q("-5", PRESIGN_SIG), &h, T0, SECRET, &a),
                     GW_S3_AUTH_QUERY_ERROR);
    assert_int_equal(
        check("GET", "/test.txt", "X-Amz-Algorithm=AWS4-HMAC-SHA256", &h, T0, SECRET, &a),
        GW_S3_AUTH_QUERY_ERROR);
    assert_int_equal(check("GET", "/test.txt", q, &h, T0, "not the secret", &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    set(&h, "Host", "evil.example.com");
    assert_int_equal(check("GET", "/test.txt", q, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
}

/* ---- streaming (aws-chunked) upload ---- */

static const char *const chunk_sigs[3] = {
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
};

static void streaming_headers(struct headers *h)
{
    *h = (struct headers){0};
    set(h, "Host", "s3.amazonaws.com");
    set(h, "x-amz-date", DATE);
    set(h, "x-amz-storage-class", "REDUCED_REDUNDANCY");
    set(h, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    set(h, "Content-Encoding", "aws-chunked");
    set(h, "x-amz-decoded-content-length", "66560");
    set(h, "Content-Length", "66824");
    set(h, "Authorization",
        "AWS4-HMAC-SHA256 " CRED ",SignedHeaders=content-encoding;content-length;host;"
        "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,"
        "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
}

/* The published body: 64 KiB of 'a', 1 KiB of 'a', then the final empty chunk. */
static uint8_t *streaming_body(size_t *len)
{
    uint8_t *b = malloc(70000);
    size_t n = 0;
    const size_t sizes[3] = {65536, 1024, 0};
    for (int i = 0; i < 3; i++) {
        n += (size_t)sprintf((char *)b + n, "%zx;chunk-signature=%s\r\n", sizes[i], chunk_sigs[i]);
        memset(b + n, 'a', sizes[i]);
        n += sizes[i];
        memcpy(b + n, "\r\n", 2);
        n += 2;
    }
    *len = n;
    return b;
}

/* Feeds body in pieces of `step`; returns the first error, or OK. */
static enum gw_s3_err feed(struct gw_chunked *c, const uint8_t *body, size_t len, size_t step,
                           size_t *decoded, int *all_a)
{
    uint8_t *piece = malloc(step);
    *decoded = 0;
    *all_a = 1;
    for (size_t off = 0; off < len; off += step) {
        size_t n = len - off < step ? len - off : step, out;
        memcpy(piece, body + off, n);
        char msg[200];
        enum gw_s3_err e = gw_chunked_feed(c, piece, n, &out, msg, sizeof(msg));
        if (e) {
            free(piece);
            return e;
        }
        for (size_t i = 0; i < out; i++)
            *all_a &= piece[i] == 'a';
        *decoded += out;
    }
    free(piece);
    return GW_S3_OK;
}

static void test_streaming(void **state)
{
    (void)state;
    struct headers h;
    struct gw_sigv4_auth a;
    streaming_headers(&h);
    assert_int_equal(check("PUT", "/examplebucket/chunkObject.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_OK);
    assert_int_equal(a.payload, GW_PAYLOAD_STREAMING);
    assert_int_equal(a.decoded_length, 66560);
    assert_string_equal(a.seed_signature,
                        "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
    struct gw_payload_check *p;
    assert_int_equal(gw_payload_create(&a, &p), -EINVAL);

    size_t len;
    uint8_t *body = streaming_body(&len);
    assert_int_equal(len, 66824); /* the published Content-Length */
    const size_t steps[] = {len, 1, 2, 7, 100, 4096, 65536 + 90};
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        struct gw_chunked *c;
        assert_int_equal(gw_chunked_create(&a, &c), 0);
        size_t decoded;
        int all_a;
        assert_int_equal(feed(c, body, len, steps[s], &decoded, &all_a), GW_S3_OK);
        assert_int_equal(decoded, 66560);
        assert_true(all_a);
        assert_true(gw_chunked_done(c));
        /* Anything after the final chunk is an error. */
        uint8_t extra[1] = {'x'};
        size_t out;
        assert_int_not_equal(gw_chunked_feed(c, extra, 1, &out, NULL, 0), GW_S3_OK);
        gw_chunked_destroy(c);
    }
    gw_chunked_destroy(NULL);
    free(body);
}

/* Applies `edit` to a fresh copy of the published body and expects `want`
 * (or, with want == OK, a body that decodes but never completes). */
static void streaming_case(const char *name, void (*edit)(uint8_t *, size_t *), enum gw_s3_err want)
{
    struct headers h;
    struct gw_sigv4_auth a;
    streaming_headers(&h);
    assert_int_equal(check("PUT", "/examplebucket/chunkObject.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_OK);
    size_t len;
    uint8_t *body = streaming_body(&len);
    edit(body, &len);
    for (size_t step = 1; step <= 4096; step *= 4096) {
        struct gw_chunked *c;
        assert_int_equal(gw_chunked_create(&a, &c), 0);
        size_t decoded;
        int all_a;
        enum gw_s3_err e = feed(c, body, len, step, &decoded, &all_a);
        if (e != want || (want == GW_S3_OK && gw_chunked_done(c)))
            fail_msg("%s (step %zu): got %s, done %d", name, step, gw_s3_error(e)->code,
                     gw_chunked_done(c));
        gw_chunked_destroy(c);
    }
    free(body);
}

static size_t header_len(const uint8_t *b)
{
    return (size_t)((const uint8_t *)strstr((const char *)b, "\r\n") - b) + 2;
}
static void flip_data(uint8_t *b, size_t *len)
{
    (void)len;
    b[header_len(b) + 1000] = 'b';
}
static void flip_last_data(uint8_t *b, size_t *len)
{
    b[*len - 89] = 'b'; /* last byte of the 1 KiB chunk */
}
static void flip_signature(uint8_t *b, size_t *len)
{
    (void)len;
    b[25] = b[25] == '0' ? '1' : '0'; /* inside "10000;chunk-signature=<sig>" */
}
static void flip_final_signature(uint8_t *b, size_t *len)
{
    b[*len - 5] = b[*len - 5] == '0' ? '1' : '0';
}
static void truncate_body(uint8_t *b, size_t *len)
{
    (void)b;
    *len -= 2; /* the final CRLF never arrives */
}
static void drop_first_chunk(uint8_t *b, size_t *len)
{
    size_t first = header_len(b) + 65536 + 2;
    memmove(b, b + first, *len - first);
    *len -= first;
}
static void no_crlf_after_data(uint8_t *b, size_t *len)
{
    (void)len;
    b[header_len(b) + 65536] = 'X';
}
static void bad_size(uint8_t *b, size_t *len)
{
    (void)len;
    b[0] = 'g';
}
static void no_extension(uint8_t *b, size_t *len)
{
    (void)len;
    memcpy(b + 5, ";chunk-signaturX", 16);
}
static void huge_header(uint8_t *b, size_t *len)
{
    memset(b, '1', 500);
    *len = 500;
}
static void bare_lf(uint8_t *b, size_t *len)
{
    (void)len;
    size_t h = header_len(b);
    b[h - 2] = ' ';
}
static void bigger_than_declared(uint8_t *b, size_t *len)
{
    (void)len;
    b[0] = '2'; /* 0x20000 bytes, more than x-amz-decoded-content-length */
}

static void test_streaming_tampered(void **state)
{
    (void)state;
    streaming_case("data byte", flip_data, GW_S3_SIGNATURE_DOES_NOT_MATCH);
    streaming_case("last data byte", flip_last_data, GW_S3_SIGNATURE_DOES_NOT_MATCH);
    streaming_case("chunk signature", flip_signature, GW_S3_SIGNATURE_DOES_NOT_MATCH);
    streaming_case("final signature", flip_final_signature, GW_S3_SIGNATURE_DOES_NOT_MATCH);
    streaming_case("dropped chunk", drop_first_chunk, GW_S3_SIGNATURE_DOES_NOT_MATCH);
    streaming_case("truncated", truncate_body, GW_S3_OK);
    streaming_case("no CRLF after data", no_crlf_after_data, GW_S3_INVALID_REQUEST);
    streaming_case("bad size", bad_size, GW_S3_INVALID_REQUEST);
    streaming_case("no signature extension", no_extension, GW_S3_INVALID_REQUEST);
    streaming_case("huge header", huge_header, GW_S3_INVALID_REQUEST);
    streaming_case("bare LF", bare_lf, GW_S3_INVALID_REQUEST);
    streaming_case("more than declared", bigger_than_declared, GW_S3_INCOMPLETE_BODY);

    /* A wrong secret gives a wrong seed, and the chain fails at the first chunk. */
    struct headers h;
    struct gw_sigv4_auth a;
    streaming_headers(&h);
    set(&h, "x-amz-decoded-content-length", "66561");
    assert_int_equal(check("PUT", "/examplebucket/chunkObject.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    struct gw_chunked *c;
    assert_int_equal(gw_chunked_create(&a, &c), -EINVAL);
    set(&h, "x-amz-decoded-content-length", "lots");
    assert_int_equal(check("PUT", "/examplebucket/chunkObject.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_MISSING_CONTENT_LENGTH);
}

/* ---- unsigned aws-chunked bodies with a checksum trailer ---- */

static enum gw_s3_err decode_unsigned(const char *trailer, int64_t decoded_length, const char *body,
                                      size_t step, char *out, bool *done)
{
    struct gw_sigv4_auth a = {.payload = GW_PAYLOAD_STREAMING_UNSIGNED,
                              .decoded_length = decoded_length};
    snprintf(a.trailer, sizeof(a.trailer), "%s", trailer);
    struct gw_chunked *c;
    assert_int_equal(gw_chunked_create(&a, &c), 0);
    size_t len = strlen(body), total = 0;
    enum gw_s3_err e = GW_S3_OK;
    for (size_t off = 0; off < len && !e; off += step) {
        uint8_t piece[256];
        size_t n = len - off < step ? len - off : step, got;
        memcpy(piece, body + off, n);
        e = gw_chunked_feed(c, piece, n, &got, NULL, 0);
        memcpy(out + total, piece, got);
        total += got;
    }
    out[total] = '\0';
    *done = gw_chunked_done(c);
    gw_chunked_destroy(c);
    return e;
}

static void test_unsigned_trailer(void **state)
{
    (void)state;
    static const struct {
        const char *trailer;
        int64_t length;
        const char *body, *payload;
        enum gw_s3_err err;
        bool done;
    } cases[] = {
        /* what botocore sends for put_object(Body=b"hello") over TLS */
        {"x-amz-checksum-crc32", 5, "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n",
         "hello", GW_S3_OK, true},
        {"x-amz-checksum-crc32", 5,
         "3\r\nhel\r\n2\r\nlo\r\n0\r\nX-Amz-Checksum-CRC32: NhCmhg== \r\nother:x\r\n\r\n", "hello",
         GW_S3_OK, true},
        {"x-amz-checksum-crc32c", 9,
         "9\r\n123456789\r\n0\r\nx-amz-checksum-crc32c:4waSgw==\r\n\r\n", "123456789", GW_S3_OK,
         true},
        {"x-amz-checksum-sha256", 5,
         "5\r\nhello\r\n0\r\nx-amz-checksum-sha256:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ="
         "\r\n\r\n",
         "hello", GW_S3_OK, true},
        {"x-amz-checksum-sha1", 5,
         "5\r\nhello\r\n0\r\nx-amz-checksum-sha1:qvTGHdzF6KLavt4PO0gs2a6pQ00=\r\n\r\n", "hello",
         GW_S3_OK, true},
        {"", 5, "5\r\nhello\r\n0\r\n\r\n", "hello", GW_S3_OK, true},
        {"", 0, "0\r\n\r\n", "", GW_S3_OK, true},
        /* refused */
        {"x-amz-checksum-crc32", 5, "5\r\nhellO\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n",
         "hellO", GW_S3_BAD_DIGEST, false},
        {"x-amz-checksum-crc32", 5, "5\r\nhello\r\n0\r\n\r\n", "hello", GW_S3_INVALID_REQUEST,
         false},
        {"x-amz-checksum-crc32", 5,
         "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\nx-amz-checksum-crc32:NhCmhg=="
         "\r\n\r\n",
         "hello", GW_S3_INVALID_REQUEST, false},
        {"", 6, "5\r\nhello\r\n0\r\n\r\n", "hello", GW_S3_INCOMPLETE_BODY, false},
        {"", 4, "5\r\nhello\r\n0\r\n\r\n", "", GW_S3_INCOMPLETE_BODY, false},
        {"", 5, "5;chunk-signature=00\r\nhello\r\n0\r\n\r\n", "", GW_S3_INVALID_REQUEST, false},
        {"", 5, "5\r\nhello0\r\n\r\n", "hello", GW_S3_INVALID_REQUEST, false},
        {"", 5, "5\r\nhello\r\n0\r\nno colon\r\n\r\n", "hello", GW_S3_INVALID_REQUEST, false},
        {"", 5, "5\r\nhello\r\n0\r\n\r\nextra", "hello", GW_S3_INVALID_REQUEST, false},
        {"", 5, "5\r\nhello\r\n0\r\n", "hello", GW_S3_OK, false}, /* truncated: never done */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t step = 1; step <= 256; step *= 256) {
            char out[64];
            bool done;
            enum gw_s3_err e =
                decode_unsigned(cases[i].trailer, cases[i].length, cases[i].body, step, out, &done);
            /* On an error the payload is void, so it is compared only on success. */
            if (e != cases[i].err || done != cases[i].done ||
                (!e && strcmp(out, cases[i].payload) != 0))
                fail_msg("case %zu step %zu: %s done=%d payload \"%s\"", i, step,
                         gw_s3_error(e)->code, done, out);
        }
    }

    /* The verdict on the request head: which trailers and modes are supported. */
    struct headers h;
    struct gw_sigv4_auth a;
    get_object(&h);
    set(&h, "x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
    set(&h, "x-amz-decoded-content-length", "5");
    set(&h, "x-amz-trailer", "x-amz-checksum-md5"); /* not an S3 checksum */
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_INVALID_REQUEST);
    /* every algorithm is accepted (then the unsigned headers fail the signature) */
    set(&h, "x-amz-trailer", "x-amz-checksum-crc64nvme");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    set(&h, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a),
                     GW_S3_SIGNATURE_DOES_NOT_MATCH);
    /* a trailer needs a -TRAILER payload */
    set(&h, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    set(&h, "x-amz-trailer", "x-amz-checksum-crc32");
    assert_int_equal(check("GET", "/test.txt", NULL, &h, T0, SECRET, &a), GW_S3_INVALID_REQUEST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_object),
        cmocka_unit_test(test_get_object_tampered),
        cmocka_unit_test(test_sign),
        cmocka_unit_test(test_malformed_authorization),
        cmocka_unit_test(test_put_object),
        cmocka_unit_test(test_bucket_queries),
        cmocka_unit_test(test_presigned),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_streaming_tampered),
        cmocka_unit_test(test_unsigned_trailer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
