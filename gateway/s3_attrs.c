/*
 * What a request gives an object (or a bucket) to keep: the system
 * headers a client sets, Content-Type, x-amz-meta-* and a canned ACL; and
 * the response headers of a GET or HEAD that give them back.
 */
#include "gateway/s3_server_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/s3_checksum.h"

/* Headers an object keeps from its PUT (the system metadata a client sets),
 * and the GET/HEAD query parameters that override them for one response. */
static const struct stored_header {
    const char *name, *override;
} stored_headers[] = {
    {"Content-Type", "response-content-type"},
    {"Cache-Control", "response-cache-control"},
    {"Content-Disposition", "response-content-disposition"},
    {"Content-Encoding", "response-content-encoding"},
    {"Content-Language", "response-content-language"},
    {"Expires", "response-expires"},
};
#define STORED_HEADER_MAX 1024 /* bytes of one stored header's value */

/* Content-Encoding without aws-chunked, which only says how the body travelled. */
static void strip_aws_chunked(char *v)
{
    char out[STORED_HEADER_MAX + 1] = "";
    size_t n = 0;
    for (char *tok = v; *tok;) {
        size_t len = strcspn(tok, ",");
        char *a = tok, *b = tok + len;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if (b > a && !((size_t)(b - a) == 11 && strncasecmp(a, "aws-chunked", 11) == 0) &&
            n + (size_t)(b - a) + 1 < sizeof(out))
            n +=
                (size_t)snprintf(out + n, sizeof(out) - n, "%s%.*s", n ? "," : "", (int)(b - a), a);
        tok += len + (tok[len] == ',');
    }
    strcpy(v, out);
}

/* The stored headers of a PUT, CreateMultipartUpload or CopyObject (REPLACE). */
static enum gw_s3_err request_headers(struct gw_s3_req *r, json_t **out)
{
    *out = json_object();
    if (!*out)
        return GW_S3_INTERNAL_ERROR;
    for (size_t i = 1; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *v = gw_s3_header(r, stored_headers[i].name);
        if (!v)
            continue;
        if (strlen(v) > STORED_HEADER_MAX)
            return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg),
                                "%s is longer than %d bytes", stored_headers[i].name,
                                STORED_HEADER_MAX);
        char val[STORED_HEADER_MAX + 1];
        strcpy(val, v);
        if (strcasecmp(stored_headers[i].name, "Content-Encoding") == 0)
            strip_aws_chunked(val);
        json_t *js = val[0] ? json_string(val) : NULL;
        if (val[0] && !js)
            return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg), "%s is not UTF-8",
                                stored_headers[i].name);
        if (js && json_object_set_new(*out, stored_headers[i].name, js))
            return GW_S3_INTERNAL_ERROR;
    }
    return GW_S3_OK;
}

/* response-* overrides of a GET/HEAD: only signed requests may give them
 * (as in S3), and no value may hold what would end a header line. */
enum gw_s3_err gw_s3_check_overrides(struct gw_s3_req *r)
{
    for (size_t i = 0; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *v = gw_s3_query_get(&r->q, stored_headers[i].override);
        if (!v)
            continue;
        if (r->auth.anonymous)
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, r->msg, sizeof(r->msg),
                                "Request specific response headers cannot be used for "
                                "anonymous GET requests.");
        for (const char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg),
                                    "%s holds a control character", stored_headers[i].override);
    }
    return GW_S3_OK;
}

void gw_s3_object_headers(struct gw_s3_req *r, struct MHD_Response *resp,
                          const struct gw_object_info *oi)
{
    char v[64];
    snprintf(v, sizeof(v), "\"%s\"", oi->etag);
    MHD_add_response_header(resp, "ETag", v);
    gw_http_date(oi->mtime_ns, v);
    MHD_add_response_header(resp, "Last-Modified", v);
    for (size_t i = 0; i < sizeof(stored_headers) / sizeof(stored_headers[0]); i++) {
        const char *val = gw_s3_query_get(&r->q, stored_headers[i].override);
        if (!val && i == 0)
            val = oi->content_type[0] ? oi->content_type : "binary/octet-stream";
        if (!val)
            val = json_string_value(json_object_get(oi->headers, stored_headers[i].name));
        if (val && val[0])
            MHD_add_response_header(resp, stored_headers[i].name, val);
    }
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    const char *name;
    json_t *val;
    json_object_foreach(oi->user_meta, name, val)
    {
        char h[300];
        snprintf(h, sizeof(h), "x-amz-meta-%s", name);
        /* MHD refuses an empty value; a lone space is one (HTTP strips it) */
        const char *v = json_string_value(val);
        MHD_add_response_header(resp, h, v && v[0] ? v : " ");
    }
}

/* The stored x-amz-checksum-* of a whole object, when the client asks with
 * x-amz-checksum-mode: ENABLED (a range has no checksum of its own). */
void gw_s3_checksum_headers(struct gw_s3_req *r, struct MHD_Response *resp,
                            const struct gw_object_info *oi)
{
    const char *mode = gw_s3_header(r, "x-amz-checksum-mode");
    if (!mode || strcasecmp(mode, "ENABLED") != 0)
        return;
    for (int a = 0; a < GW_SUM_COUNT; a++) {
        const char *name = gw_checksum_header((enum gw_checksum_algo)a);
        const char *v = json_string_value(json_object_get(oi->headers, name));
        if (v)
            MHD_add_response_header(resp, name, v);
    }
}

/* The canned ACL of x-amz-acl (private when absent) into acl ("" = private);
 * x-amz-grant-* headers (ACLs beyond the canned ones) are not implemented. */
enum gw_s3_err gw_s3_request_acl(struct gw_s3_req *r, bool object, char acl[GW_ACL_MAX])
{
    static const char *const grants[] = {"x-amz-grant-read", "x-amz-grant-write",
                                         "x-amz-grant-read-acp", "x-amz-grant-write-acp",
                                         "x-amz-grant-full-control"};
    for (size_t i = 0; i < sizeof(grants) / sizeof(grants[0]); i++)
        if (gw_s3_header(r, grants[i]))
            return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, r->msg, sizeof(r->msg),
                                "%s is not implemented by inec: use a canned x-amz-acl", grants[i]);
    enum gw_acl a;
    enum gw_s3_err e =
        gw_acl_parse(gw_s3_header(r, "x-amz-acl"), object, &a, r->msg, sizeof(r->msg));
    if (e == GW_S3_OK)
        snprintf(acl, GW_ACL_MAX, "%s", a == GW_ACL_PRIVATE ? "" : gw_acl_name(a));
    return e;
}

bool gw_s3_create_only(struct gw_s3_req *r)
{
    const char *v = gw_s3_header(r, "If-None-Match");
    enum gw_s3_op op = r->op;
    return (op == GW_OP_PUT_OBJECT || op == GW_OP_COPY_OBJECT ||
            op == GW_OP_COMPLETE_MULTIPART_UPLOAD) &&
           v && strcmp(v, "*") == 0 && !gw_s3_header(r, "If-Match");
}

const char *gw_s3_if_match(struct gw_s3_req *r)
{
    enum gw_s3_op op = r->op;
    bool kept = op == GW_OP_PUT_OBJECT || op == GW_OP_COPY_OBJECT || op == GW_OP_DELETE_OBJECT;
    return kept && !gw_s3_header(r, "If-None-Match") ? gw_s3_header(r, "If-Match") : NULL;
}

/* A write that asks for what inec does not keep is refused (501), not
 * served without it: the client would believe its object encrypted (SSE,
 * SSE-C: readable without the key), locked against deletion (Object Lock),
 * tagged, or written only on a condition (a conditional write whose
 * overwrite breaks the client's lock or commit protocol). Kept: If-None-Match: *
 * on PutObject, CopyObject and CompleteMultipartUpload, If-Match on PutObject,
 * CopyObject and DeleteObject, one of them at a time (object/write_if.c). */
enum gw_s3_err gw_s3_write_unkept(struct gw_s3_req *r)
{
    static const struct {
        const char *header, *what;
        bool condition; /* of a write of a whole object, or of a delete */
    } unkept[] = {
        {"If-Match", "conditional writes", true},
        {"If-None-Match", "conditional writes", true},
        {"x-amz-server-side-encryption", "server-side encryption", false},
        {"x-amz-server-side-encryption-aws-kms-key-id", "server-side encryption", false},
        {"x-amz-server-side-encryption-customer-algorithm", "server-side encryption (SSE-C)",
         false},
        {"x-amz-object-lock-mode", "Object Lock", false},
        {"x-amz-object-lock-retain-until-date", "Object Lock", false},
        {"x-amz-object-lock-legal-hold", "Object Lock", false},
        {"x-amz-tagging", "object tags", false},
    };
    enum gw_s3_op op = r->op;
    bool whole = op == GW_OP_PUT_OBJECT || op == GW_OP_COPY_OBJECT;
    bool conditioned = whole || op == GW_OP_COMPLETE_MULTIPART_UPLOAD || op == GW_OP_DELETE_OBJECT;
    bool stored = whole || op == GW_OP_CREATE_MULTIPART_UPLOAD || op == GW_OP_UPLOAD_PART ||
                  op == GW_OP_UPLOAD_PART_COPY;
    for (size_t i = 0; i < sizeof(unkept) / sizeof(unkept[0]); i++)
        if ((unkept[i].condition ? conditioned : stored) && gw_s3_header(r, unkept[i].header) &&
            !(strcmp(unkept[i].header, "If-None-Match") == 0 && gw_s3_create_only(r)) &&
            !(strcmp(unkept[i].header, "If-Match") == 0 && gw_s3_if_match(r)))
            return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, r->msg, sizeof(r->msg),
                                "%s (%s) is not implemented by inec", unkept[i].what,
                                unkept[i].header);
    return GW_S3_OK;
}

/* Content-Type, the other stored headers, x-amz-meta-* and x-amz-acl of the
 * request (user_meta and headers are the caller's to free). */
enum gw_s3_err gw_s3_request_attrs(struct gw_s3_req *r, struct gw_object_info *attrs)
{
    enum gw_s3_err e = request_headers(r, &attrs->headers);
    if (e == GW_S3_OK)
        e = gw_s3_request_acl(r, true, attrs->acl);
    if (e)
        return e;
    const char *ct = r->auth.unsigned_content_type ? NULL : gw_s3_header(r, "Content-Type");
    if (ct) {
        if (strlen(ct) >= sizeof(attrs->content_type)) {
            snprintf(r->msg, sizeof(r->msg), "Content-Type longer than %zu bytes",
                     sizeof(attrs->content_type) - 1);
            return GW_S3_INVALID_ARGUMENT;
        }
        strcpy(attrs->content_type, ct);
    }
    return gw_s3_user_meta(gw_s3_header_each, r, &attrs->user_meta, r->msg, sizeof(r->msg));
}
