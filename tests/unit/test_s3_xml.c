/* S3 XML writers (escaping, URL encoding, V1/V2 fields) and the strict
 * DeleteObjects parser, including hostile bodies. */
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

#include "gateway/s3_xml.h"
#include "gateway/s3_xml_parse.h"

#define HAS(buf, s)                                                                                \
    do {                                                                                           \
        if (!strstr((buf).data, (s)))                                                              \
            fail_msg("missing %s in\n%s", (s), (buf).data);                                        \
    } while (0)
#define HASNT(buf, s)                                                                              \
    do {                                                                                           \
        if (strstr((buf).data, (s)))                                                               \
            fail_msg("unexpected %s in\n%s", (s), (buf).data);                                     \
    } while (0)

static void test_list_buckets(void **state)
{
    (void)state;
    struct gw_xml_bucket b[] = {{"alpha", 1369353600123}, {"b<&>\"'", 0}};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_list_buckets(&out, "id1", "me", b, 2), 0);
    assert_true(strncmp(out.data, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39) == 0);
    HAS(out, "<ListAllMyBucketsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    HAS(out, "<Owner><ID>id1</ID><DisplayName>me</DisplayName></Owner>");
    HAS(out, "<Bucket><Name>alpha</Name><CreationDate>2013-05-24T00:00:00.123Z</CreationDate>"
             "</Bucket>");
    HAS(out, "<Name>b&lt;&amp;&gt;&quot;&apos;</Name>");
    HAS(out, "<CreationDate>1970-01-01T00:00:00.000Z</CreationDate>");
    HAS(out, "</Buckets></ListAllMyBucketsResult>");
    gw_buf_free(&out);
    gw_buf_free(&out);
    gw_buf_free(NULL);
    assert_int_equal(gw_xml_list_buckets(&out, "id", "me", NULL, 0), 0);
    HAS(out, "<Buckets></Buckets>");
    gw_buf_free(&out);
}

static const struct gw_xml_object objects[] = {
    {"photos/a b&c.jpg", 1700000000000, "d41d8cd98f00b204e9800998ecf8427e", 0, NULL},
    {"\xc3\xbc\x01+%", 1700000000999, "abc-2", 12345678901ull, "REDUCED_REDUNDANCY"},
};
static const char *const prefixes[] = {"photos/2006/", "p&q/"};

static void test_list_objects_v1(void **state)
{
    (void)state;
    struct gw_list_page p = {.version = 1,
                             .bucket = "bkt",
                             .prefix = "photos/",
                             .delimiter = "/",
                             .max_keys = 2,
                             .marker = "m<",
                             .next_marker = "photos/2006/",
                             .truncated = true,
                             .objects = objects,
                             .nobjects = 2,
                             .prefixes = prefixes,
                             .nprefixes = 2};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HAS(out, "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt</Name>"
             "<Prefix>photos/</Prefix><Marker>m&lt;</Marker><NextMarker>photos/2006/</NextMarker>"
             "<MaxKeys>2</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>");
    HAS(out, "<Contents><Key>photos/a b&amp;c.jpg</Key>"
             "<LastModified>2023-11-14T22:13:20.000Z</LastModified>"
             "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>"
             "<StorageClass>STANDARD</StorageClass></Contents>");
    HAS(out, "<Key>\xc3\xbc&#x1;+%</Key>");
    HAS(out, "<Size>12345678901</Size><StorageClass>REDUCED_REDUNDANCY</StorageClass>");
    HAS(out, "<CommonPrefixes><Prefix>photos/2006/</Prefix></CommonPrefixes>"
             "<CommonPrefixes><Prefix>p&amp;q/</Prefix></CommonPrefixes></ListBucketResult>");
    HASNT(out, "KeyCount");
    HASNT(out, "EncodingType");
    gw_buf_free(&out);

    /* Not truncated: no NextMarker even when the caller has one. */
    p.truncated = false;
    p.prefix = NULL;
    p.delimiter = NULL;
    p.marker = NULL;
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HAS(out, "<Prefix></Prefix><Marker></Marker><MaxKeys>2</MaxKeys><IsTruncated>false");
    HASNT(out, "NextMarker");
    HASNT(out, "<Delimiter>");
    gw_buf_free(&out);
}

static void test_list_objects_v2_url(void **state)
{
    (void)state;
    struct gw_list_page p = {.version = 2,
                             .bucket = "bkt",
                             .prefix = "a b/",
                             .delimiter = "/",
                             .max_keys = 1000,
                             .url_encode = true,
                             .start_after = "a b/+",
                             .continuation_token = "azpm+/=",
                             .next_continuation_token = "azpn",
                             .truncated = true,
                             .objects = objects,
                             .nobjects = 2,
                             .prefixes = prefixes,
                             .nprefixes = 2};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HAS(out, "<Prefix>a%20b/</Prefix><StartAfter>a%20b/%2B</StartAfter>"
             "<ContinuationToken>azpm+/=</ContinuationToken>"
             "<NextContinuationToken>azpn</NextContinuationToken><KeyCount>4</KeyCount>"
             "<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
             "<EncodingType>url</EncodingType>");
    HAS(out, "<Key>photos/a%20b%26c.jpg</Key>");
    HAS(out, "<Key>%C3%BC%01%2B%25</Key>");
    HAS(out, "<Prefix>p%26q/</Prefix>");
    HASNT(out, "<Marker>");
    gw_buf_free(&out);
}

/* V1 with encoding-type=url echoes the top-level Prefix as sent (as S3 does:
 * botocore decodes everything else); the owner when asked for. */
static void test_list_objects_v1_url_owner(void **state)
{
    (void)state;
    struct gw_list_page p = {.version = 1,
                             .bucket = "bkt",
                             .prefix = "a b+/",
                             .delimiter = "/",
                             .max_keys = 10,
                             .url_encode = true,
                             .owner_id = "0a1b",
                             .owner_name = "inec",
                             .marker = "a b+/0",
                             .objects = objects,
                             .nobjects = 1,
                             .prefixes = prefixes,
                             .nprefixes = 1};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HAS(out, "<Prefix>a b+/</Prefix><Marker>a%20b%2B/0</Marker>");
    HAS(out, "<Delimiter>/</Delimiter>");
    HAS(out, "<Key>photos/a%20b%26c.jpg</Key>");
    HAS(out, "<Size>0</Size><Owner><ID>0a1b</ID><DisplayName>inec</DisplayName></Owner>"
             "<StorageClass>STANDARD</StorageClass>");
    HAS(out, "<CommonPrefixes><Prefix>photos/2006/</Prefix></CommonPrefixes>");
    gw_buf_free(&out);
}

/* ListObjectVersions: each object is its one null version, the latest. */
static void test_list_versions(void **state)
{
    (void)state;
    struct gw_list_page p = {.version = 3,
                             .bucket = "bkt",
                             .max_keys = 1,
                             .owner_id = "0a1b",
                             .key_marker = "k&",
                             .version_id_marker = "null",
                             .next_key_marker = "photos/a b&c.jpg",
                             .truncated = true,
                             .objects = objects,
                             .nobjects = 1};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HAS(out, "<ListVersionsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt"
             "</Name><Prefix></Prefix><KeyMarker>k&amp;</KeyMarker><VersionIdMarker>null"
             "</VersionIdMarker><NextKeyMarker>photos/a b&amp;c.jpg</NextKeyMarker>"
             "<NextVersionIdMarker>null</NextVersionIdMarker><MaxKeys>1</MaxKeys>"
             "<IsTruncated>true</IsTruncated><Version><Key>photos/a b&amp;c.jpg</Key><VersionId>"
             "null</VersionId><IsLatest>true</IsLatest>");
    HAS(out, "</Version></ListVersionsResult>");
    HASNT(out, "<Contents>");
    HASNT(out, "<Delimiter>");
    gw_buf_free(&out);
    p.truncated = false;
    assert_int_equal(gw_xml_list_objects(&out, &p), 0);
    HASNT(out, "NextKeyMarker");
    gw_buf_free(&out);
}

static void test_delete_result_and_error(void **state)
{
    (void)state;
    struct gw_delete_outcome r[] = {{"gone", GW_S3_OK, NULL},
                                    {"a&b", GW_S3_ACCESS_DENIED, NULL},
                                    {"c", GW_S3_INTERNAL_ERROR, "disk <on> fire"}};
    struct gw_buf out = {0};
    assert_int_equal(gw_xml_delete_result(&out, r, 3, false), 0);
    HAS(out, "<DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
             "<Deleted><Key>gone</Key></Deleted>"
             "<Error><Key>a&amp;b</Key><Code>AccessDenied</Code><Message>Access Denied</Message>"
             "</Error><Error><Key>c</Key><Code>InternalError</Code>"
             "<Message>disk &lt;on&gt; fire</Message></Error></DeleteResult>");
    gw_buf_free(&out);
    assert_int_equal(gw_xml_delete_result(&out, r, 3, true), 0);
    HASNT(out, "Deleted");
    HAS(out, "<Key>a&amp;b</Key>");
    gw_buf_free(&out);

    assert_int_equal(gw_xml_error(&out, GW_S3_NO_SUCH_KEY, NULL, "/bkt/a&b", "4442587FB7D0A2F9"),
                     0);
    assert_string_equal(out.data, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>"
                                  "<Code>NoSuchKey</Code>"
                                  "<Message>The specified key does not exist.</Message>"
                                  "<Resource>/bkt/a&amp;b</Resource>"
                                  "<RequestId>4442587FB7D0A2F9</RequestId></Error>\n");
    gw_buf_free(&out);
    assert_int_equal(gw_xml_error(&out, GW_S3_SIGNATURE_DOES_NOT_MATCH, "", NULL, NULL), 0);
    HAS(out, "<Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated");
    HAS(out, "<Resource></Resource><RequestId></RequestId>");
    gw_buf_free(&out);
}

static enum gw_s3_err parse(const char *xml, struct gw_delete_request **r)
{
    char msg[200];
    enum gw_s3_err e = gw_xml_parse_delete(xml, strlen(xml), r, msg, sizeof(msg));
    if (e)
        assert_true(msg[0] != '\0'); /* every refusal says why */
    return e;
}

static void test_parse_delete(void **state)
{
    (void)state;
    const char *xml =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
        "  <Object><Key>a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;</Key></Object>\n"
        "  <Object>\n    <Key>&#65;&#x42;&#x65E5;&#128512;</Key>\n"
        "    <VersionId>v1</VersionId>\n  </Object>\n"
        "  <Object><Key>x</Key><ETag>\"e\"</ETag><Size>5</Size></Object>\n"
        "  <Quiet>true</Quiet>\n</Delete>\n";
    struct gw_delete_request *r;
    assert_int_equal(parse(xml, &r), GW_S3_OK);
    assert_true(r->quiet);
    assert_int_equal(r->n, 3);
    assert_string_equal(r->keys[0].key, "a&b <c> \"d\" 'e'");
    assert_null(r->keys[0].version_id);
    assert_string_equal(r->keys[1].key, "AB\xe6\x97\xa5\xf0\x9f\x98\x80");
    assert_string_equal(r->keys[1].version_id, "v1");
    assert_string_equal(r->keys[2].key, "x");
    gw_delete_request_free(r);
    gw_delete_request_free(NULL);

    /* What botocore sends (no declaration, Quiet first or absent). */
    assert_int_equal(parse("<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>"
                           "false</Quiet><Object><Key>k</Key></Object></Delete>",
                           &r),
                     GW_S3_OK);
    assert_false(r->quiet);
    assert_int_equal(r->n, 1);
    gw_delete_request_free(r);

    /* '>' may stand unescaped in text, and a key may be exactly 1024 bytes. */
    char *big = malloc(2048);
    int n = sprintf(big, "<Delete><Object><Key>");
    memset(big + n, 'k', GW_S3_KEY_MAX - 1);
    n += GW_S3_KEY_MAX - 1;
    sprintf(big + n, "></Key></Object></Delete>");
    assert_int_equal(parse(big, &r), GW_S3_OK);
    assert_int_equal(strlen(r->keys[0].key), GW_S3_KEY_MAX);
    gw_delete_request_free(r);
    n = sprintf(big, "<Delete><Object><Key>");
    memset(big + n, 'k', GW_S3_KEY_MAX - 4);
    n += GW_S3_KEY_MAX - 4;
    sprintf(big + n, "&#x65E5;</Key></Object></Delete>"); /* 1020 + 3 bytes decoded: fits */
    assert_int_equal(parse(big, &r), GW_S3_OK);
    gw_delete_request_free(r);
    n = sprintf(big, "<Delete><Object><Key>");
    memset(big + n, 'k', GW_S3_KEY_MAX + 1);
    n += GW_S3_KEY_MAX + 1;
    sprintf(big + n, "</Key></Object></Delete>");
    r = (void *)1;
    assert_int_equal(parse(big, &r), GW_S3_KEY_TOO_LONG);
    assert_null(r);
    free(big);
}

/* What AWS accepts besides the plain form: comments, CDATA, processing
 * instructions, namespace prefixes, attributes (ignored), CRLF. */
static void test_parse_delete_lenient(void **state)
{
    (void)state;
    static const struct {
        const char *xml, *key;
    } ok[] = {
        {"<Delete><Object><Key><![CDATA[a<b>&c]]></Key></Object></Delete>", "a<b>&c"},
        {"<!-- first --><Delete><!-- c --><Object><Key>a<!-- in -->b</Key></Object></Delete>",
         "ab"},
        {"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<?pi x?><Delete><Object><Key>k&amp;"
         "<![CDATA[&amp;]]></Key></Object></Delete>\r\n",
         "k&&amp;"},
        {"<s3:Delete xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\"><s3:Object><s3:Key>p"
         "</s3:Key></s3:Object></s3:Delete>",
         "p"},
        {"<Delete foo=\"x\"><Object id=\"1\"><Key>a</Key></Object></Delete>", "a"},
        {"<Delete><Object><Key>  spaced  </Key></Object></Delete>", "  spaced  "},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct gw_delete_request *r = NULL;
        enum gw_s3_err e = parse(ok[i].xml, &r);
        if (e != GW_S3_OK)
            fail_msg("case %zu refused (%d): %s", i, e, ok[i].xml);
        assert_int_equal(r->n, 1);
        assert_string_equal(r->keys[0].key, ok[i].key);
        gw_delete_request_free(r);
    }
}

static void test_parse_delete_hostile(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "   ",
        "not xml",
        "<Delete>",
        "<Delete></Delete>", /* no objects */
        "<Remove><Object><Key>a</Key></Object></Remove>",
        "<Delete><Object><Key>a</Key></Object>",
        "<Delete><Object><Key>a</Key></Object></Delet>",
        "<Delete><Object><Key>a</Key></Object></Delete>trailing",
        "<Delete><Object><Key>a</Key></Object></Delete><Delete/>",
        "<Delete><Object><Key>a</Key></Objects></Delete>",
        "<Delete><Object><Key>a</key></Object></Delete>",
        "<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>",
        "<Delete><Object></Object></Delete>",
        "<Delete><Object><Key></Key></Object></Delete>",
        "<Delete><Object><VersionId>v</VersionId></Object></Delete>",
        "<Delete><Object><Key>a</Key><Owner>x</Owner></Object></Delete>",
        "<Delete><Object><Key><b>a</b></Key></Object></Delete>",
        "<Delete><Object><Object><Key>a</Key></Object></Object></Delete>",
        "<Delete><Object><Key/></Object></Delete>",
        "<Delete><Quiet>yes</Quiet><Object><Key>a</Key></Object></Delete>",
        "<Delete><Quiet>true</Quiet><Quiet>true</Quiet><Object><Key>a</Key></Object></Delete>",
        "<Delete>text<Object><Key>a</Key></Object></Delete>",
        "<Delete><Object><Key>a&foo;</Key></Object></Delete>",
        "<Delete><Object><Key>a&amp</Key></Object></Delete>",
        "<Delete><Object><Key>a&#0;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#x;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#xD800;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#x110000;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#99999999999999999999;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#xZZ;</Key></Object></Delete>",
        "<Delete><Object><Key>a&#-1;</Key></Object></Delete>",
        "<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;\">]>"
        "<Delete><Object><Key>&b;</Key></Object></Delete>",
        "<!DOCTYPE Delete SYSTEM \"file:///etc/passwd\"><Delete><Object><Key>a</Key></Object>"
        "</Delete>",
        "<!DOCTYPE d [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><Delete><Object><Key>&x;</Key>"
        "</Object></Delete>",
        "<!DOCTYPE d [<!ENTITY % p SYSTEM \"http://127.0.0.1:1/x\"> %p;]><Delete/>",
        "<Delete><Object><Key>a<!-- c -->b<x/></Key></Object></Delete>",
        "<Delete><Object><Key><![CDATA[a]]><![CDATA[]]></Key></Object></Delete><!DOCTYPE x>",
        "<?xml version=\"1.0\"",
        "<Delete xmlns=\"unterminated><Object><Key>a</Key></Object></Delete>",
        "<Delete xmlns><Object><Key>a</Key></Object></Delete>",
        "<Delete xmlns=x><Object><Key>a</Key></Object></Delete>",
        "<><Object><Key>a</Key></Object></Delete>",
        "<Delete><Object><Key>a</Key></Object></Delete",
        "<Delete><Object><Key>a",
        "<Delete><Object><Key>a</Key></Object><Object></Delete>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_delete_request *r = (void *)1;
        enum gw_s3_err e = parse(bad[i], &r);
        if (e != GW_S3_MALFORMED_XML)
            fail_msg("case %zu accepted or misjudged (%d): %s", i, e, bad[i]);
        assert_null(r);
    }

    /* A NUL inside the body, and a body that is not NUL-terminated at all. */
    const char nul[] = "<Delete><Object><Key>a\0b</Key></Object></Delete>";
    struct gw_delete_request *r;
    assert_int_equal(gw_xml_parse_delete(nul, sizeof(nul) - 1, &r, NULL, 0), GW_S3_MALFORMED_XML);
    const char *ok = "<Delete><Object><Key>a</Key></Object></Delete>";
    size_t oklen = strlen(ok);
    char *exact = malloc(oklen); /* ASan flags any read past the end */
    memcpy(exact, ok, oklen);
    assert_int_equal(gw_xml_parse_delete(exact, oklen, &r, NULL, 0), GW_S3_OK);
    gw_delete_request_free(r);
    /* Every proper prefix of a valid body is refused cleanly. */
    for (size_t len = 0; len < oklen; len++) {
        char *cut = malloc(len + 1);
        memcpy(cut, ok, len);
        assert_int_equal(gw_xml_parse_delete(cut, len, &r, NULL, 0), GW_S3_MALFORMED_XML);
        free(cut);
    }
    free(exact);

    /* Random single-byte mutations: accepted or refused, never a crash or leak. */
    const char *doc = "<?xml version=\"1.0\"?><Delete xmlns=\"x\"><Object><Key>k&amp;&#x41;</Key>"
                      "<VersionId>v</VersionId></Object><Quiet>true</Quiet></Delete>";
    size_t dlen = strlen(doc);
    uint32_t seed = 1;
    for (int i = 0; i < 20000; i++) {
        char *m = malloc(dlen);
        memcpy(m, doc, dlen);
        for (int j = 0; j < 1 + i % 3; j++) {
            seed = seed * 1103515245u + 12345u;
            m[(seed >> 8) % dlen] = (char)(seed >> 20);
        }
        enum gw_s3_err e = gw_xml_parse_delete(m, dlen, &r, NULL, 0);
        assert_true(e == GW_S3_OK || e == GW_S3_MALFORMED_XML || e == GW_S3_KEY_TOO_LONG);
        if (e == GW_S3_OK)
            gw_delete_request_free(r);
        free(m);
    }

    /* 1000 objects pass, 1001 do not; bodies over 2 MiB are refused unread; deep
     * nesting stops at the first unexpected element. */
    size_t cap = 40 + 1001 * 32;
    char *many = malloc(cap);
    for (int count = 1000; count <= 1001; count++) {
        size_t len = (size_t)sprintf(many, "<Delete>");
        for (int i = 0; i < count; i++)
            len += (size_t)sprintf(many + len, "<Object><Key>k%d</Key></Object>", i);
        sprintf(many + len, "</Delete>");
        enum gw_s3_err e = parse(many, &r);
        if (count == 1000) {
            assert_int_equal(e, GW_S3_OK);
            assert_int_equal(r->n, 1000);
            assert_string_equal(r->keys[999].key, "k999");
            gw_delete_request_free(r);
        } else {
            assert_int_equal(e, GW_S3_MALFORMED_XML);
        }
    }
    free(many);
    size_t huge = GW_S3_DELETE_MAX_BODY + 1;
    char *h = malloc(huge);
    memset(h, ' ', huge);
    assert_int_equal(gw_xml_parse_delete(h, huge, &r, NULL, 0), GW_S3_MALFORMED_XML);
    size_t len = 0;
    for (int i = 0; i < 100000; i++)
        len += (size_t)sprintf(h + len, "<a>");
    assert_int_equal(gw_xml_parse_delete(h, len, &r, NULL, 0), GW_S3_MALFORMED_XML);
    len = (size_t)sprintf(h, "<Delete><Object><Key>");
    for (int i = 0; i < 100000; i++)
        len += (size_t)sprintf(h + len, "<Key>");
    assert_int_equal(gw_xml_parse_delete(h, len, &r, NULL, 0), GW_S3_MALFORMED_XML);
    free(h);
}

static enum gw_s3_err complete(const char *xml, struct gw_complete_request **r)
{
    char msg[256];
    enum gw_s3_err e = gw_xml_parse_complete(xml, strlen(xml), r, msg, sizeof(msg));
    if (e)
        assert_true(msg[0] != '\0'); /* every refusal says why */
    return e;
}

static void test_parse_complete(void **state)
{
    (void)state;
    struct gw_complete_request *r;
    assert_int_equal(
        complete(
            "<?xml version=\"1.0\"?>\n<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/"
            "doc/2006-03-01/\"> <Part><ETag>&quot;abc&quot;</ETag><PartNumber>3</PartNumber>"
            "<ChecksumCRC32>x</ChecksumCRC32></Part><Part><PartNumber>1</PartNumber><ETag>"
            "def</ETag></Part></CompleteMultipartUpload>\n",
            &r),
        GW_S3_OK);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->parts[0].number, 3); /* the client's order is kept */
    assert_string_equal(r->parts[0].etag, "\"abc\"");
    assert_int_equal(r->parts[1].number, 1);
    assert_string_equal(r->parts[1].etag, "def");
    gw_complete_request_free(r);
    gw_complete_request_free(NULL);

    static const struct {
        const char *xml;
        enum gw_s3_err err;
    } bad[] = {
        {"<CompleteMultipartUpload></CompleteMultipartUpload>", GW_S3_MALFORMED_XML},
        {"<Delete><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part></Delete>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
         "</CompleteMultipartUpload>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><ETag>a</ETag></Part></CompleteMultipartUpload>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber>"
         "<ETag>a</ETag></Part></CompleteMultipartUpload>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part>"
         "</CompleteMultipartUpload>",
         GW_S3_INVALID_ARGUMENT},
        {"<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>a</ETag></Part>"
         "</CompleteMultipartUpload>",
         GW_S3_INVALID_ARGUMENT},
        {"<CompleteMultipartUpload><Part><PartNumber>1x</PartNumber><ETag>a</ETag></Part>"
         "</CompleteMultipartUpload>",
         GW_S3_INVALID_ARGUMENT},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag><Size>1</Size>"
         "</Part></CompleteMultipartUpload>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"
         "0123456789012345678901234567890123456789012345678</ETag></Part>"
         "</CompleteMultipartUpload>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part>"
         "</CompleteMultipartUpload><x/>",
         GW_S3_MALFORMED_XML},
        {"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part>",
         GW_S3_MALFORMED_XML},
        {"", GW_S3_MALFORMED_XML},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = (void *)1;
        if (complete(bad[i].xml, &r) != bad[i].err)
            fail_msg("case %zu: %s", i, bad[i].xml);
        assert_null(r);
    }
    /* the part count is bounded: 10001 parts are refused */
    const char *one = "<Part><PartNumber>1</PartNumber><ETag>a</ETag></Part>";
    size_t n = strlen(one), len = 64 + (GW_S3_MAX_PARTS + 1) * n;
    char *h = malloc(len + 1);
    strcpy(h, "<CompleteMultipartUpload>");
    size_t at = strlen(h);
    for (int i = 0; i <= GW_S3_MAX_PARTS; i++, at += n)
        memcpy(h + at, one, n);
    strcpy(h + at, "</CompleteMultipartUpload>");
    assert_int_equal(gw_xml_parse_complete(h, strlen(h), &r, NULL, 0), GW_S3_MALFORMED_XML);
    strcpy(h + at - n, "</CompleteMultipartUpload>");
    assert_int_equal(gw_xml_parse_complete(h, strlen(h), &r, NULL, 0), GW_S3_OK);
    assert_int_equal(r->n, GW_S3_MAX_PARTS);
    gw_complete_request_free(r);
    free(h);
}

static enum gw_s3_err lifecycle(const char *rules, struct gw_lifecycle_rule **r, size_t *n)
{
    char xml[4096], msg[256];
    snprintf(xml, sizeof(xml),
             "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s"
             "</LifecycleConfiguration>",
             rules);
    *r = NULL;
    enum gw_s3_err e = gw_xml_parse_lifecycle(xml, strlen(xml), r, n, msg, sizeof(msg));
    if (e)
        assert_true(msg[0] != '\0'); /* every refusal says why */
    return e;
}

#define ABORT1                                                                                     \
    "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"                 \
    "</AbortIncompleteMultipartUpload>"

static void test_parse_lifecycle(void **state)
{
    (void)state;
    struct gw_lifecycle_rule *r;
    size_t n;
    assert_int_equal(lifecycle("<Rule><ID>a</ID><Filter><Prefix>tmp/</Prefix></Filter>"
                               "<Status>Enabled</Status>" ABORT1 "</Rule>"
                               "<Rule><Prefix>x</Prefix><Status>Disabled</Status>"
                               "<AbortIncompleteMultipartUpload><DaysAfterInitiation>30"
                               "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
                               "<Rule><Filter/><Status>Enabled</Status>" ABORT1 "</Rule>",
                               &r, &n),
                     GW_S3_OK);
    assert_int_equal(n, 3);
    assert_string_equal(r[0].id, "a");
    assert_string_equal(r[0].prefix, "tmp/");
    assert_true(r[0].enabled);
    assert_int_equal(r[0].abort_days, 1);
    assert_string_equal(r[1].id, "");
    assert_string_equal(r[1].prefix, "x");
    assert_false(r[1].enabled);
    assert_int_equal(r[1].abort_days, 30);
    assert_string_equal(r[2].prefix, "");
    struct gw_buf b = {0};
    assert_int_equal(gw_xml_lifecycle(&b, r, n), 0);
    HAS(b, "<Rule><ID>a</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status>"
           "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>");
    HAS(b, "<Rule><Filter><Prefix>x</Prefix></Filter><Status>Disabled</Status>");
    gw_buf_free(&b);
    gw_lifecycle_rules_free(r, n);

    /* what inec cannot honour is NotImplemented, never silently ignored */
    static const char *const not_impl[] = {
        "<Rule><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>",
        "<Rule><Status>Enabled</Status>" ABORT1 "<Transition><Days>1</Days></Transition></Rule>",
        "<Rule><Status>Enabled</Status><NoncurrentVersionExpiration/></Rule>",
        "<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
        "<Status>Enabled</Status>" ABORT1 "</Rule>",
        "<Rule><Filter><And><Prefix>a</Prefix></And></Filter><Status>Enabled</Status>" ABORT1
        "</Rule>",
        "<Rule><Filter><ObjectSizeGreaterThan>5</ObjectSizeGreaterThan></Filter>"
        "<Status>Enabled</Status>" ABORT1 "</Rule>",
    };
    for (size_t i = 0; i < sizeof(not_impl) / sizeof(not_impl[0]); i++)
        assert_int_equal(lifecycle(not_impl[i], &r, &n), GW_S3_NOT_IMPLEMENTED);
    static const struct {
        const char *xml;
        enum gw_s3_err e;
    } bad[] = {
        {"", GW_S3_MALFORMED_XML},
        {"<Rule><Status>On</Status>" ABORT1 "</Rule>", GW_S3_MALFORMED_XML},
        {"<Rule>" ABORT1 "</Rule>", GW_S3_MALFORMED_XML},
        {"<Rule><Status>Enabled</Status></Rule>", GW_S3_INVALID_REQUEST},
        {"<Rule><Prefix>a</Prefix><Filter/><Status>Enabled</Status>" ABORT1 "</Rule>",
         GW_S3_MALFORMED_XML},
        {"<Rule><Status>Enabled</Status><Bogus/>" ABORT1 "</Rule>", GW_S3_MALFORMED_XML},
        {"<Rule><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>0"
         "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>",
         GW_S3_INVALID_ARGUMENT},
        {"<Rule><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>x"
         "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>",
         GW_S3_INVALID_ARGUMENT},
        {"<Rule><Status>Enabled</Status><AbortIncompleteMultipartUpload/></Rule>",
         GW_S3_MALFORMED_XML},
        {"<Rule><ID>d</ID><Status>Enabled</Status>" ABORT1 "</Rule>"
         "<Rule><ID>d</ID><Status>Enabled</Status>" ABORT1 "</Rule>",
         GW_S3_INVALID_ARGUMENT},
        {"<Other/>", GW_S3_MALFORMED_XML},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(lifecycle(bad[i].xml, &r, &n), bad[i].e);
}

static void test_multipart_results(void **state)
{
    (void)state;
    struct gw_buf b = {0};
    assert_int_equal(gw_xml_initiate_multipart(&b, "bkt", "a&b", "0123abcd"), 0);
    HAS(b, "<InitiateMultipartUploadResult xmlns=");
    HAS(b, "<Bucket>bkt</Bucket><Key>a&amp;b</Key><UploadId>0123abcd</UploadId>");
    gw_buf_free(&b);
    assert_int_equal(gw_xml_complete_multipart(&b, "/bkt/k", "bkt", "k", "ff-3"), 0);
    HAS(b, "<Location>/bkt/k</Location><Bucket>bkt</Bucket><Key>k</Key>"
           "<ETag>&quot;ff-3&quot;</ETag>");
    gw_buf_free(&b);
    struct gw_xml_part parts[] = {{1, 0, "aa", 5242880}, {2, 1000, "bb", 7}};
    struct gw_parts_page pp = {"bkt", "k", "u1", 0, 2, 2, true, parts, 2};
    assert_int_equal(gw_xml_list_parts(&b, &pp), 0);
    HAS(b, "<PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>2</NextPartNumberMarker>"
           "<MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>");
    HAS(b, "<Part><PartNumber>1</PartNumber><LastModified>1970-01-01T00:00:00.000Z</LastModified>"
           "<ETag>&quot;aa&quot;</ETag><Size>5242880</Size></Part>");
    HAS(b, "<PartNumber>2</PartNumber><LastModified>1970-01-01T00:00:01.000Z");
    gw_buf_free(&b);
    struct gw_xml_upload ups[] = {{"x<y", "u1", 0}};
    struct gw_uploads_page up = {
        .bucket = "bkt", .prefix = "x", .max_uploads = 10, .uploads = ups, .n = 1};
    assert_int_equal(gw_xml_list_uploads(&b, &up), 0);
    HAS(b, "<KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><Prefix>x</Prefix>"
           "<MaxUploads>10</MaxUploads><IsTruncated>false</IsTruncated>");
    HAS(b, "<Upload><Key>x&lt;y</Key><UploadId>u1</UploadId>");
    HASNT(b, "NextKeyMarker");
    gw_buf_free(&b);
    assert_int_equal(gw_xml_copy_result(&b, false, "e1", 2000), 0);
    HAS(b, "<CopyObjectResult xmlns=");
    HAS(b, "<LastModified>1970-01-01T00:00:02.000Z</LastModified><ETag>&quot;e1&quot;</ETag>"
           "</CopyObjectResult>");
    gw_buf_free(&b);
    assert_int_equal(gw_xml_copy_result(&b, true, "e2", 0), 0);
    HAS(b, "<CopyPartResult");
    gw_buf_free(&b);
    assert_int_equal(gw_xml_empty_tagging(&b), 0);
    HAS(b, "<TagSet></TagSet></Tagging>");
    gw_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_buckets),
        cmocka_unit_test(test_list_objects_v1),
        cmocka_unit_test(test_list_objects_v2_url),
        cmocka_unit_test(test_delete_result_and_error),
        cmocka_unit_test(test_parse_delete),
        cmocka_unit_test(test_list_objects_v1_url_owner),
        cmocka_unit_test(test_list_versions),
        cmocka_unit_test(test_parse_delete_hostile),
        cmocka_unit_test(test_parse_delete_lenient),
        cmocka_unit_test(test_parse_complete),
        cmocka_unit_test(test_multipart_results),
        cmocka_unit_test(test_parse_lifecycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
