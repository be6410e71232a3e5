/* ACLs: Get/Put{Bucket,Object}Acl, and which unsigned requests they let in. */
#include "gateway/s3_server_internal.h"

#include <stdio.h>

#include "gateway/s3_acl.h"
#include "gateway/s3_xml.h"

/* The canned ACL of the bucket (and, for an object request, of the object);
 * -ENOENT names which is missing through answer_errno. */
static int current_acl(struct gw_s3_req *r, bool object, enum gw_acl *out)
{
    struct gw_objects *o = r->srv->objects;
    char name[GW_ACL_MAX];
    int rc;
    if (object) {
        rc = gw_object_acl_get(o, r->t.bucket, r->t.key, name);
    } else {
        struct gw_bucket_info bi;
        rc = gw_bucket_head(o, r->t.bucket, &bi);
        snprintf(name, sizeof(name), "%s", rc == 0 ? bi.acl : "");
    }
    if (rc == 0 && gw_acl_parse(name, object, out, NULL, 0) != GW_S3_OK)
        *out = GW_ACL_PRIVATE; /* a name this gateway does not know grants nothing */
    return rc;
}

void gw_s3_get_acl(struct gw_s3_req *r)
{
    enum gw_acl a;
    int rc = current_acl(r, r->op == GW_OP_GET_OBJECT_ACL, &a);
    struct gw_buf b = {0};
    if (rc)
        gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
    else
        gw_s3_answer_doc(r, gw_xml_acl(&b, r->srv->owner_id, "inec", a), &b);
}

/* Put{Bucket,Object}Acl: x-amz-acl or an AccessControlPolicy body, not both. */
void gw_s3_put_acl(struct gw_s3_req *r)
{
    bool object = r->op == GW_OP_PUT_OBJECT_ACL;
    char acl[GW_ACL_MAX];
    enum gw_s3_err e = GW_S3_OK;
    if (gw_s3_header(r, "x-amz-acl") && r->body_len) {
        e = gw_s3_errorf(GW_S3_INVALID_REQUEST, r->msg, sizeof(r->msg),
                         "give x-amz-acl or an AccessControlPolicy body, not both");
    } else if (r->body_len) {
        enum gw_acl a;
        e = gw_acl_parse_policy(r->body, r->body_len, r->srv->owner_id, &a, r->msg, sizeof(r->msg));
        snprintf(acl, sizeof(acl), "%s", a == GW_ACL_PRIVATE ? "" : gw_acl_name(a));
    } else if (gw_s3_header(r, "x-amz-acl") || gw_s3_header(r, "x-amz-grant-read") ||
               gw_s3_header(r, "x-amz-grant-full-control") ||
               gw_s3_header(r, "x-amz-grant-write") || gw_s3_header(r, "x-amz-grant-read-acp") ||
               gw_s3_header(r, "x-amz-grant-write-acp")) {
        e = gw_s3_request_acl(r, object, acl);
    } else {
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, r->msg, sizeof(r->msg),
                         "neither x-amz-acl nor an AccessControlPolicy body");
    }
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    int rc = object ? gw_object_acl_set(r->srv->objects, r->t.bucket, r->t.key, acl)
                    : gw_bucket_acl_set(r->srv->objects, r->t.bucket, acl);
    if (rc)
        gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
    else
        gw_s3_answer_empty(r, 200);
}

/* An unsigned request: GET/HEAD of an object whose ACL lets anyone read it,
 * or a listing of (or HEAD on) a bucket whose ACL does; anything else stays
 * AccessDenied. A missing key of a bucket anyone may list is a 404 (its
 * absence is public); otherwise 403, saying nothing about what exists. */
bool gw_s3_anonymous_allowed(struct gw_s3_req *r)
{
    enum gw_acl a;
    switch (r->op) {
    case GW_OP_GET_OBJECT:
    case GW_OP_HEAD_OBJECT:
        if (current_acl(r, true, &a) == 0)
            return gw_acl_anonymous_read(a);
        return current_acl(r, false, &a) == 0 && gw_acl_anonymous_read(a);
    case GW_OP_LIST_OBJECTS:
    case GW_OP_LIST_OBJECTS_V2:
    case GW_OP_LIST_OBJECT_VERSIONS:
    case GW_OP_HEAD_BUCKET:
        return current_acl(r, false, &a) == 0 && gw_acl_anonymous_read(a);
    default:
        return false;
    }
}
