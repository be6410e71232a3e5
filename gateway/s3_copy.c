/* CopyObject and UploadPartCopy. */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/s3_xml.h"

/* "bytes=first-last" of x-amz-copy-source-range within size. */
static bool copy_range(const char *h, uint64_t size, uint64_t *first, uint64_t *len)
{
    unsigned long long a, b;
    int end = 0;
    if (sscanf(h, "bytes=%llu-%llu%n", &a, &b, &end) != 2 || h[end] || a > b || b >= size)
        return false;
    *first = a;
    *len = b - a + 1;
    return true;
}

/* CopyObject and UploadPartCopy: the source is read through the object
 * layer and written again (re-encoded, its own chunks). */
void gw_s3_copy_object(struct gw_s3_req *r)
{
    struct gw_objects *o = r->srv->objects;
    bool part = r->op == GW_OP_UPLOAD_PART_COPY;
    if (part && !gw_s3_part_number(r))
        return;
    const char *src = gw_s3_header(r, "x-amz-copy-source");
    char path[GW_BUCKET_MAX + 3 * GW_KEY_MAX + 8];
    snprintf(path, sizeof(path), "/%s", src[0] == '/' ? src + 1 : src);
    char *version = strchr(path, '?');
    if (version && strcmp(version, "?versionId=null") == 0) {
        *version = '\0'; /* the one version an object has */
    } else if (version) {
        gw_s3_answer_error(r, GW_S3_NOT_IMPLEMENTED, "copying a version is not implemented");
        return;
    }
    struct gw_s3_target from;
    if (gw_s3_parse_target(NULL, NULL, path, &from, r->msg, sizeof(r->msg)) != GW_S3_OK ||
        !from.key[0]) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT, "x-amz-copy-source must be bucket/key");
        return;
    }
    const char *dir = gw_s3_header(r, "x-amz-metadata-directive");
    bool replace = dir && strcmp(dir, "REPLACE") == 0;
    if (dir && !replace && strcmp(dir, "COPY") != 0) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT,
                           "x-amz-metadata-directive is COPY or REPLACE");
        return;
    }
    if (!part && !replace && strcmp(from.bucket, r->t.bucket) == 0 &&
        strcmp(from.key, r->t.key) == 0) {
        gw_s3_answer_error(r, GW_S3_INVALID_REQUEST,
                           "copying an object onto itself needs x-amz-metadata-directive: REPLACE");
        return;
    }
    struct gw_object_info si = {0}, attrs = {0}, oi = {0};
    int rc = gw_object_head(o, from.bucket, from.key, &si);
    if (rc) {
        if (rc == -ENOENT && gw_bucket_head(o, from.bucket, NULL) == 0)
            gw_s3_answer_error(r, GW_S3_NO_SUCH_KEY, "the copy source does not exist");
        else if (rc == -ENOENT)
            gw_s3_answer_error(r, GW_S3_NO_SUCH_BUCKET, "the copy source's bucket does not exist");
        else
            gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    uint64_t first = 0, len = si.size;
    const char *range = part ? gw_s3_header(r, "x-amz-copy-source-range") : NULL;
    enum gw_s3_err e = GW_S3_OK;
    if (gw_s3_condition(r, true, &si) != GW_COND_OK) /* not modified, too, is 412 here */
        e = gw_s3_errorf(GW_S3_PRECONDITION_FAILED, r->msg, sizeof(r->msg),
                         "an x-amz-copy-source-if-* condition does not hold");
    else if (range && !copy_range(range, si.size, &first, &len))
        e = GW_S3_INVALID_RANGE;
    else if (len > GW_S3_MAX_OBJECT_SIZE)
        e = GW_S3_ENTITY_TOO_LARGE;
    else if (replace && !part)
        e = gw_s3_request_attrs(r, &attrs);
    else if (!part)
        e = gw_s3_request_acl(r, true, si.acl); /* a copy has its own ACL, never the source's */
    if (e) {
        gw_object_info_clear(&si);
        gw_object_info_clear(&attrs);
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    const char *uid = gw_s3_query_get(&r->q, "uploadId");
    struct gw_put *p = NULL;
    rc = part ? gw_mpu_part_begin(o, r->t.bucket, r->t.key, uid, &p)
              : gw_put_begin(o, r->t.bucket, r->t.key, replace ? &attrs : &si, &p);
    gw_object_info_clear(&attrs);
    if (rc == 0 && gw_s3_create_only(r))
        gw_put_create_only(p);
    if (rc == 0 && gw_s3_if_match(r) && gw_put_if_match(p, gw_s3_if_match(r)))
        rc = -EINVAL; /* not an ETag */
    struct gw_get *g = NULL;
    struct gw_object_info gi = {0};
    if (rc == 0 && len > 0) {
        rc = gw_get_begin(o, from.bucket, from.key, first, len, &gi, &g);
        if (rc == 0 && gi.version != si.version)
            rc = -EAGAIN; /* overwritten since the HEAD: its size may differ */
    }
    uint8_t *buf = rc == 0 ? malloc(GW_S3_READ_BLOCK) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    for (uint64_t left = g ? len : 0; rc == 0 && left > 0;) {
        ssize_t n = gw_get_read(g, buf, left < GW_S3_READ_BLOCK ? (size_t)left : GW_S3_READ_BLOCK);
        rc = n < 0 ? (int)n : n == 0 ? -EIO : gw_put_write(p, buf, (size_t)n);
        left -= n > 0 ? (uint64_t)n : 0;
    }
    free(buf);
    gw_get_end(g);
    gw_object_info_clear(&gi);
    gw_object_info_clear(&si);
    if (rc) {
        gw_put_abort(p);
    } else if (part) {
        struct gw_part_info pi;
        if ((rc = gw_mpu_part_commit(o, p, r->t.bucket, r->t.key, uid, r->part, &pi)) == 0) {
            snprintf(oi.etag, sizeof(oi.etag), "%s", pi.etag);
            oi.mtime_ns = pi.mtime_ns;
        }
    } else {
        rc = gw_put_commit(p, &oi);
    }
    if (rc) {
        gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    struct gw_buf b = {0};
    gw_s3_answer_doc(r, gw_xml_copy_result(&b, part, oi.etag, oi.mtime_ns / 1000000), &b);
    gw_object_info_clear(&oi);
}
