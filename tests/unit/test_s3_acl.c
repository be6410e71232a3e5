/* Canned ACLs: names, what anonymous requests may do, the policy documents
 * Get*Acl writes and the ones Put*Acl accepts (as botocore serialises them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/s3_acl.h"

#define OWNER "0123abcd"
#define ALL   "http://acs.amazonaws.com/groups/global/AllUsers"
#define AUTH  "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#define XSI   "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""

static void test_names(void **state)
{
    (void)state;
    enum gw_acl a;
    for (int i = 0; i < GW_ACL_COUNT; i++) {
        assert_int_equal(gw_acl_parse(gw_acl_name((enum gw_acl)i), false, &a, NULL, 0), GW_S3_OK);
        assert_int_equal(a, i);
    }
    assert_int_equal(gw_acl_parse("", false, &a, NULL, 0), GW_S3_OK); /* stored private */
    assert_int_equal(a, GW_ACL_PRIVATE);
    assert_int_equal(gw_acl_parse(NULL, false, &a, NULL, 0), GW_S3_OK);
    assert_int_equal(gw_acl_parse("bucket-owner-full-control", true, &a, NULL, 0), GW_S3_OK);
    assert_int_equal(a, GW_ACL_PRIVATE);
    char msg[128];
    assert_int_equal(gw_acl_parse("bucket-owner-read", false, &a, msg, sizeof(msg)),
                     GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(gw_acl_parse("log-delivery-write", false, &a, msg, sizeof(msg)),
                     GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(gw_acl_parse("Public-Read", true, &a, msg, sizeof(msg)),
                     GW_S3_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "Public-Read"));
    assert_false(gw_acl_anonymous_read(GW_ACL_PRIVATE));
    assert_true(gw_acl_anonymous_read(GW_ACL_PUBLIC_READ));
    assert_true(gw_acl_anonymous_read(GW_ACL_PUBLIC_READ_WRITE));
    assert_false(gw_acl_anonymous_read(GW_ACL_AUTHENTICATED_READ));
}

static void test_documents(void **state)
{
    (void)state;
    /* every canned ACL's document reads back as itself */
    for (int i = 0; i < GW_ACL_COUNT; i++) {
        struct gw_buf b = {0};
        assert_int_equal(gw_xml_acl(&b, OWNER, "inec", (enum gw_acl)i), 0);
        assert_non_null(strstr(b.data, "<Owner><ID>" OWNER "</ID>"));
        enum gw_acl a = GW_ACL_COUNT;
        char msg[256];
        assert_int_equal(gw_acl_parse_policy(b.data, b.len, OWNER, &a, msg, sizeof(msg)), GW_S3_OK);
        assert_int_equal(a, i);
        gw_buf_free(&b);
    }
    struct gw_buf b = {0};
    assert_int_equal(gw_xml_acl(&b, OWNER, "inec", GW_ACL_PUBLIC_READ_WRITE), 0);
    assert_non_null(strstr(b.data, "xsi:type=\"Group\"><URI>" ALL "</URI></Grantee><Permission>"
                                   "WRITE</Permission>"));
    gw_buf_free(&b);
}

static enum gw_s3_err policy(const char *grants, enum gw_acl *a)
{
    char doc[2048], msg[256];
    snprintf(doc, sizeof(doc),
             "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>"
             "%s</ID></Owner><AccessControlList>%s</AccessControlList></AccessControlPolicy>",
             OWNER, grants);
    enum gw_s3_err e = gw_acl_parse_policy(doc, strlen(doc), OWNER, a, msg, sizeof(msg));
    if (e)
        assert_true(msg[0] != '\0');
    return e;
}

#define OWNER_FULL                                                                                 \
    "<Grant><Grantee " XSI " xsi:type=\"CanonicalUser\"><ID>" OWNER "</ID></Grantee>"              \
    "<Permission>FULL_CONTROL</Permission></Grant>"
#define GROUP(uri, perm)                                                                           \
    "<Grant><Grantee " XSI " xsi:type=\"Group\"><URI>" uri "</URI></Grantee><Permission>" perm     \
    "</Permission></Grant>"

static void test_policies(void **state)
{
    (void)state;
    enum gw_acl a;
    assert_int_equal(policy(OWNER_FULL, &a), GW_S3_OK);
    assert_int_equal(a, GW_ACL_PRIVATE);
    assert_int_equal(policy(GROUP(ALL, "READ") OWNER_FULL, &a), GW_S3_OK); /* any order */
    assert_int_equal(a, GW_ACL_PUBLIC_READ);
    assert_int_equal(policy(OWNER_FULL GROUP(ALL, "WRITE") GROUP(ALL, "READ"), &a), GW_S3_OK);
    assert_int_equal(a, GW_ACL_PUBLIC_READ_WRITE);
    assert_int_equal(policy(OWNER_FULL GROUP(AUTH, "READ"), &a), GW_S3_OK);
    assert_int_equal(a, GW_ACL_AUTHENTICATED_READ);
    /* what no canned ACL spells */
    assert_int_equal(policy(OWNER_FULL GROUP(ALL, "WRITE"), &a), GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(policy(GROUP(ALL, "READ"), &a), GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(policy("", &a), GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(
        policy(OWNER_FULL GROUP("http://acs.amazonaws.com/groups/s3/LogDelivery", "WRITE"), &a),
        GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(policy(OWNER_FULL "<Grant><Grantee " XSI " xsi:type=\"CanonicalUser\"><ID>"
                                       "other</ID></Grantee><Permission>READ</Permission></Grant>",
                            &a),
                     GW_S3_NOT_IMPLEMENTED);
    assert_int_equal(policy(OWNER_FULL OWNER_FULL OWNER_FULL OWNER_FULL OWNER_FULL, &a),
                     GW_S3_NOT_IMPLEMENTED);
    /* malformed */
    assert_int_equal(policy(OWNER_FULL GROUP(ALL, "READ_EVERYTHING"), &a), GW_S3_MALFORMED_XML);
    assert_int_equal(policy("<Grant><Grantee><ID>" OWNER "</ID></Grantee><Permission>FULL_CONTROL"
                            "</Permission></Grant>",
                            &a),
                     GW_S3_MALFORMED_XML); /* no xsi:type */
    assert_int_equal(policy("<Grant><Permission>READ</Permission></Grant>", &a),
                     GW_S3_MALFORMED_XML);
    assert_int_equal(policy("<Other/>", &a), GW_S3_MALFORMED_XML);
    const char *doctype = "<!DOCTYPE a [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
                          "<AccessControlPolicy><AccessControlList/></AccessControlPolicy>";
    assert_int_equal(gw_acl_parse_policy(doctype, strlen(doctype), OWNER, &a, NULL, 0),
                     GW_S3_MALFORMED_XML);
    assert_int_equal(gw_acl_parse_policy("<Policy/>", 9, OWNER, &a, NULL, 0), GW_S3_MALFORMED_XML);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_policies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
