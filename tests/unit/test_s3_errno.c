/* The object layer's errno as S3 answers it: a node's failure is a 503 on every
 * operation, never a 500; multipart's own codes only from multipart calls. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway/s3_errno.h"

static const enum gw_s3_op all_ops[] = {
    GW_OP_LIST_BUCKETS,
    GW_OP_CREATE_BUCKET,
    GW_OP_DELETE_BUCKET,
    GW_OP_LIST_OBJECTS_V2,
    GW_OP_DELETE_OBJECTS,
    GW_OP_PUT_OBJECT,
    GW_OP_GET_OBJECT,
    GW_OP_HEAD_OBJECT,
    GW_OP_DELETE_OBJECT,
    GW_OP_COPY_OBJECT,
    GW_OP_UPLOAD_PART,
    GW_OP_UPLOAD_PART_COPY,
    GW_OP_COMPLETE_MULTIPART_UPLOAD,
    GW_OP_ABORT_MULTIPART_UPLOAD,
    GW_OP_LIST_PARTS,
    GW_OP_LIST_MULTIPART_UPLOADS,
};
#define NOPS (sizeof(all_ops) / sizeof(all_ops[0]))

static void test_peer_failures_are_503(void **state)
{
    (void)state;
    static const int peer[] = {EHOSTDOWN, ETIMEDOUT,    ECONNREFUSED, ECONNRESET, ECONNABORTED,
                               ESHUTDOWN, EHOSTUNREACH, ENETUNREACH,  ENOTCONN,   EPIPE,
                               EBADMSG,   EOPNOTSUPP,   EIO};
    for (size_t o = 0; o < NOPS; o++)
        for (size_t i = 0; i < sizeof(peer) / sizeof(peer[0]); i++) {
            enum gw_s3_err e = gw_s3_errno(-peer[i], all_ops[o], true);
            if (e != GW_S3_SERVICE_UNAVAILABLE)
                fail_msg("op %s errno %d: %s, want ServiceUnavailable", gw_s3_op_name(all_ops[o]),
                         peer[i], gw_s3_error(e)->code);
            assert_int_equal(gw_s3_error(e)->status, 503);
        }
}

static void test_multipart_codes(void **state)
{
    (void)state;
    enum gw_s3_op c = GW_OP_COMPLETE_MULTIPART_UPLOAD;
    assert_int_equal(gw_s3_errno(-EPROTO, c, true), GW_S3_INVALID_PART);
    assert_int_equal(gw_s3_errno(-EDOM, c, true), GW_S3_INVALID_PART_ORDER);
    assert_int_equal(gw_s3_errno(-ERANGE, c, true), GW_S3_ENTITY_TOO_SMALL);
    assert_int_equal(gw_s3_errno(-ESRCH, c, true), GW_S3_NO_SUCH_UPLOAD);
    assert_int_equal(gw_s3_errno(-ESRCH, GW_OP_UPLOAD_PART, true), GW_S3_NO_SUCH_UPLOAD);
    assert_int_equal(gw_s3_errno(-ESRCH, GW_OP_LIST_PARTS, true), GW_S3_NO_SUCH_UPLOAD);
    /* From any other call a node sent them: a malformed answer, a 503. */
    enum gw_s3_op other[] = {GW_OP_GET_OBJECT, GW_OP_PUT_OBJECT, GW_OP_COPY_OBJECT,
                             GW_OP_UPLOAD_PART, GW_OP_LIST_OBJECTS_V2};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        assert_int_equal(gw_s3_errno(-EPROTO, other[i], true), GW_S3_SERVICE_UNAVAILABLE);
        assert_int_equal(gw_s3_errno(-EDOM, other[i], true), GW_S3_SERVICE_UNAVAILABLE);
        assert_int_equal(gw_s3_errno(-ERANGE, other[i], true), GW_S3_SERVICE_UNAVAILABLE);
    }
    assert_int_equal(gw_s3_errno(-ESRCH, GW_OP_GET_OBJECT, true), GW_S3_SERVICE_UNAVAILABLE);
}

static void test_client_and_gateway_errors(void **state)
{
    (void)state;
    assert_int_equal(gw_s3_errno(-EINVAL, GW_OP_PUT_OBJECT, true), GW_S3_INVALID_ARGUMENT);
    assert_int_equal(gw_s3_errno(-EINVAL, GW_OP_CREATE_BUCKET, false), GW_S3_INVALID_BUCKET_NAME);
    assert_int_equal(gw_s3_errno(-ENAMETOOLONG, GW_OP_PUT_OBJECT, true), GW_S3_KEY_TOO_LONG);
    assert_int_equal(gw_s3_errno(-EFBIG, GW_OP_PUT_OBJECT, true), GW_S3_ENTITY_TOO_LARGE);
    assert_int_equal(gw_s3_errno(-ENOTEMPTY, GW_OP_DELETE_BUCKET, false), GW_S3_BUCKET_NOT_EMPTY);
    assert_int_equal(gw_s3_errno(-EEXIST, GW_OP_CREATE_BUCKET, false), GW_S3_BUCKET_ALREADY_OWNED);
    assert_int_equal(gw_s3_errno(-ENOENT, GW_OP_LIST_OBJECTS_V2, false), GW_S3_NO_SUCH_BUCKET);
    assert_int_equal(gw_s3_errno(-ENOSPC, GW_OP_PUT_OBJECT, true), GW_S3_SERVICE_UNAVAILABLE);
    /* The gateway's own trouble stays a 500. */
    assert_int_equal(gw_s3_errno(-ENOMEM, GW_OP_GET_OBJECT, true), GW_S3_INTERNAL_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_failures_are_503),
        cmocka_unit_test(test_multipart_codes),
        cmocka_unit_test(test_client_and_gateway_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
