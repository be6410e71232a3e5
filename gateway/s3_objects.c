/*
 * Objects: GET and HEAD streamed from the object layer, PUT and UploadPart
 * streamed into it as the body arrives (s3_body.c checks it), DELETE and
 * DeleteObjects.
 */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/s3_checksum.h"
#include "gateway/s3_errno.h"
#include "gateway/s3_range.h"
#include "gateway/s3_xml.h"
#include "gateway/s3_xml_parse.h"
#include "inec/log.h"

struct get_stream {
    struct gw_get *g;
    struct gw_s3_req *r;
    uint64_t left;
    char *first; /* the first block, read before the status line (get_object) */
    size_t nfirst, done;
};

static ssize_t get_read(struct get_stream *s, char *buf, size_t max)
{
    if (s->left == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (max > s->left)
        max = (size_t)s->left;
    ssize_t n;
    if (s->done < s->nfirst) {
        n = (ssize_t)(s->nfirst - s->done < max ? s->nfirst - s->done : max);
        memcpy(buf, s->first + s->done, (size_t)n);
        s->done += (size_t)n;
    } else {
        n = gw_get_read(s->g, buf, max);
    }
    if (n <= 0) {
        /* The status line has gone out: all that is left is to cut the
         * connection, so the client sees a short body, never wrong bytes. */
        inec_log(INEC_LOG_WARN, "s3", "read failed, connection cut bucket=%s key=%s err=%s",
                 s->r->t.bucket, s->r->t.key, n == 0 ? "short object" : strerror((int)-n));
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    s->left -= (uint64_t)n;
    s->r->bytes_out += (uint64_t)n;
    return n;
}

static ssize_t get_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct get_stream *s = cls;
    inec_log_context_set(s->r->id);
    ssize_t n = get_read(s, buf, max);
    inec_log_context_set(NULL);
    return n;
}

static void get_free(void *cls)
{
    struct get_stream *s = cls;
    gw_get_end(s->g);
    free(s->first);
    free(s);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The bytes of part `part` as a range (S3 answers them 206 with their
 * Content-Range; an empty part 200), and the object's part count. */
static enum gw_s3_err part_range(struct gw_get *g, int part, struct gw_range *out, int *parts)
{
    uint64_t off, len;
    if (gw_get_part(g, part, &off, &len, parts))
        return GW_S3_INVALID_PART_NUMBER;
    *out = (struct gw_range){.partial = len > 0, .first = off, .length = len};
    return GW_S3_OK;
}

void gw_s3_get_object(struct gw_s3_req *r, bool head)
{
    struct gw_objects *o = r->srv->objects;
    struct gw_object_info oi = {0};
    struct gw_range range;
    struct gw_get *g = NULL;
    int rc;
    enum gw_s3_err oe = gw_s3_check_overrides(r);
    if (oe) {
        gw_s3_answer_error(r, oe, r->msg);
        return;
    }
    /* ?partNumber=N: the bytes of part N (what the Java and Go SDKs'
     * download managers ask for), instead of a Range. */
    bool by_part = gw_s3_query_get(&r->q, "partNumber") != NULL;
    if (by_part && !gw_s3_part_number(r))
        return;
    if (by_part && gw_s3_header(r, "Range")) {
        gw_s3_answer_error(r, GW_S3_INVALID_REQUEST,
                           "Cannot specify both Range header and partNumber query parameter");
        return;
    }
    /* One read of the record: a GET opens the object whole, then narrows it
     * to the range parsed against that record's size (or to the part; a HEAD
     * by part opens it too, for its layout). */
    rc = head && !by_part ? gw_object_head(o, r->t.bucket, r->t.key, &oi)
                          : gw_get_begin(o, r->t.bucket, r->t.key, 0, UINT64_MAX, &oi, &g);
    if (rc) {
        gw_s3_answer_errno(r, rc, head ? "HeadObject" : "GetObject");
        return;
    }
    enum gw_condition cond = gw_s3_condition(r, false, &oi);
    if (cond != GW_COND_OK) {
        gw_get_end(g);
        if (cond == GW_COND_FAILED) {
            gw_s3_answer_error(r, GW_S3_PRECONDITION_FAILED, NULL);
        } else { /* 304: the validators, no body */
            struct MHD_Response *resp = gw_s3_buffer_response(NULL, 0, NULL);
            if (resp) {
                gw_s3_object_headers(r, resp, &oi);
                gw_s3_queue(r, 304, resp);
            }
        }
        gw_object_info_clear(&oi);
        return;
    }
    int parts = 0;
    enum gw_s3_err e = by_part ? part_range(g, r->part, &range, &parts)
                               : gw_range_parse(gw_s3_header(r, "Range"), oi.size, &range);
    if (by_part && head) { /* its layout was all it needed */
        gw_get_end(g);
        g = NULL;
    }
    if (e) {
        if (e == GW_S3_INVALID_RANGE)
            snprintf(r->content_range, sizeof(r->content_range), "bytes */%" PRIu64, oi.size);
        gw_object_info_clear(&oi);
        gw_get_end(g);
        gw_s3_answer_error(r, e, NULL);
        return;
    }
    if (g && range.length == 0) {
        gw_get_end(g);
        g = NULL;
    } else if (g) {
        gw_get_narrow(g, range.first, range.length);
    }

    struct MHD_Response *resp;
    if (g) {
        struct get_stream *s = malloc(sizeof(*s));
        if (!s) {
            gw_get_end(g);
            gw_object_info_clear(&oi);
            return;
        }
        *s = (struct get_stream){g, r, range.length, NULL, 0, 0};
        /* Read the first block before the status line goes out: an object
         * that cannot be read at all (more chunks lost than the code
         * tolerates) gets a 503, not a 200 with a cut body. */
        s->nfirst = range.length < GW_S3_READ_BLOCK ? (size_t)range.length : GW_S3_READ_BLOCK;
        s->first = malloc(s->nfirst);
        ssize_t n = s->first ? gw_get_read(g, s->first, s->nfirst) : -ENOMEM;
        if (n <= 0) {
            get_free(s);
            gw_object_info_clear(&oi);
            gw_s3_answer_errno(r, n == 0 ? -EIO : (int)n, "GetObject");
            return;
        }
        s->nfirst = (size_t)n;
        resp = MHD_create_response_from_callback(range.length, gw_s3_read_block(range.length),
                                                 get_reader, s, get_free);
        if (!resp)
            get_free(s);
    } else if (head) {
        /* MHD sends no body for HEAD, only this size as Content-Length. */
        resp = MHD_create_response_from_callback(range.length, 1, no_body, NULL, NULL);
    } else {
        resp = gw_s3_buffer_response(NULL, 0, NULL);
    }
    if (resp) {
        gw_s3_object_headers(r, resp, &oi);
        if (parts) {
            char v[16];
            snprintf(v, sizeof(v), "%d", parts);
            MHD_add_response_header(resp, "x-amz-mp-parts-count", v);
        }
        if (!range.partial)
            gw_s3_checksum_headers(r, resp, &oi);
        if (range.partial) {
            snprintf(r->content_range, sizeof(r->content_range),
                     "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, range.first,
                     range.first + range.length - 1, oi.size);
            MHD_add_response_header(resp, "Content-Range", r->content_range);
        }
        gw_s3_queue(r, range.partial ? 206 : 200, resp);
    }
    gw_object_info_clear(&oi);
}

enum gw_s3_err gw_s3_put_begin(struct gw_s3_req *r)
{
    enum gw_s3_err e = gw_s3_body_begin(r);
    if (e)
        return e;
    /* The size must be known before the body is read, so the limit holds:
     * a plain body needs Content-Length (not Transfer-Encoding: chunked), an
     * aws-chunked one x-amz-decoded-content-length, which the decoder enforces. */
    if (r->expect_len < 0) {
        snprintf(r->msg, sizeof(r->msg), "%s is required",
                 r->chunked ? "x-amz-decoded-content-length" : "Content-Length");
        return GW_S3_MISSING_CONTENT_LENGTH;
    }
    if (r->expect_len >= 0 && (uint64_t)r->expect_len > GW_S3_MAX_OBJECT_SIZE)
        return GW_S3_ENTITY_TOO_LARGE;
    int rc;
    if (r->op == GW_OP_UPLOAD_PART) {
        rc = gw_mpu_part_begin(r->srv->objects, r->t.bucket, r->t.key,
                               gw_s3_query_get(&r->q, "uploadId"), &r->put);
    } else {
        struct gw_object_info attrs = {0};
        e = gw_s3_request_attrs(r, &attrs);
        if (e == GW_S3_OK)
            rc = gw_put_begin(r->srv->objects, r->t.bucket, r->t.key, &attrs, &r->put);
        gw_object_info_clear(&attrs);
        if (e)
            return e;
    }
    if (rc) {
        gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
        return GW_S3_OK;
    }
    if (gw_s3_create_only(r))
        gw_put_create_only(r->put);
    const char *if_match = gw_s3_if_match(r);
    if (if_match && gw_put_if_match(r->put, if_match)) {
        gw_put_abort(r->put);
        r->put = NULL;
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, r->msg, sizeof(r->msg),
                            "If-Match is not an ETag");
    }
    if (r->md5) { /* checked by the put's own MD5, its ETag: one pass, not two */
        gw_put_expect_md5(r->put, r->md5_expect);
        EVP_MD_CTX_free(r->md5);
        r->md5 = NULL;
    }
    /* A signed payload's SHA-256 is the put's to take, where it costs the
     * least (object/put.c); the body's own check goes. */
    if (r->auth.payload == GW_PAYLOAD_SHA256) {
        if (gw_put_expect_sha256(r->put, r->auth.payload_sha256))
            return GW_S3_INTERNAL_ERROR;
        gw_payload_destroy(r->payload);
        r->payload = NULL;
    }
    return GW_S3_OK;
}

void gw_s3_put_end(struct gw_s3_req *r)
{
    enum gw_s3_err e = gw_s3_body_end(r);
    if (e) {
        gw_put_abort(r->put);
        r->put = NULL;
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    struct gw_object_info oi = {0};
    int rc = 0;
    if (r->sum_value && r->op == GW_OP_PUT_OBJECT)
        rc = gw_put_set_header(r->put, gw_checksum_header(r->sum.algo), r->sum_value);
    if (rc) {
        gw_put_abort(r->put);
    } else if (r->op == GW_OP_UPLOAD_PART) {
        struct gw_part_info pi;
        rc = gw_mpu_part_commit(r->srv->objects, r->put, r->t.bucket, r->t.key,
                                gw_s3_query_get(&r->q, "uploadId"), r->part, &pi);
        snprintf(oi.etag, sizeof(oi.etag), "%s", rc ? "" : pi.etag);
    } else {
        rc = gw_put_commit(r->put, &oi);
    }
    r->put = NULL;
    if (rc == GW_PUT_BAD_DIGEST || rc == GW_PUT_BAD_SHA256) {
        gw_s3_answer_error(
            r, rc == GW_PUT_BAD_DIGEST ? GW_S3_BAD_DIGEST : GW_S3_CONTENT_SHA256_MISMATCH, NULL);
        return;
    }
    if (rc) {
        gw_s3_answer_errno(r, rc, gw_s3_op_name(r->op));
        return;
    }
    struct MHD_Response *resp = gw_s3_buffer_response(NULL, 0, NULL);
    if (resp) {
        char v[64];
        snprintf(v, sizeof(v), "\"%s\"", oi.etag);
        MHD_add_response_header(resp, "ETag", v);
        if (r->sum_value)
            MHD_add_response_header(resp, gw_checksum_header(r->sum.algo), r->sum_value);
        gw_s3_queue(r, 200, resp);
    }
    gw_object_info_clear(&oi);
}

void gw_s3_delete_object(struct gw_s3_req *r)
{
    const char *if_match = gw_s3_if_match(r);
    int rc = if_match ? gw_object_delete_if(r->srv->objects, r->t.bucket, r->t.key, if_match)
                      : gw_object_delete(r->srv->objects, r->t.bucket, r->t.key);
    if (rc == -ENOENT && !if_match && gw_s3_map_errno(r, rc) == GW_S3_NO_SUCH_KEY)
        rc = 0; /* S3 answers 204 for a key that is not there */
    if (rc)
        gw_s3_answer_errno(r, rc, "DeleteObject");
    else
        gw_s3_answer_empty(r, 204);
}

void gw_s3_delete_objects(struct gw_s3_req *r)
{
    struct gw_delete_request *d = NULL;
    enum gw_s3_err e =
        gw_xml_parse_delete(r->body ? r->body : "", r->body_len, &d, r->msg, sizeof(r->msg));
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    struct gw_bucket_info bi;
    int rc = gw_bucket_head(r->srv->objects, r->t.bucket, &bi);
    if (rc) {
        gw_delete_request_free(d);
        gw_s3_answer_errno(r, rc, "DeleteObjects");
        return;
    }
    struct gw_delete_outcome *out = calloc(d->n, sizeof(*out));
    if (!out) {
        gw_delete_request_free(d);
        gw_s3_answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
        return;
    }
    for (size_t i = 0; i < d->n; i++) {
        out[i].key = d->keys[i].key;
        rc = gw_object_delete(r->srv->objects, r->t.bucket, d->keys[i].key);
        /* Deleting a missing key succeeds in S3. */
        if (rc && rc != -ENOENT) {
            out[i].err = gw_s3_errno(rc, r->op, true);
            inec_log(INEC_LOG_WARN, "s3", "DeleteObjects key failed bucket=%s key=%s err=%s",
                     r->t.bucket, d->keys[i].key, strerror(-rc));
        }
    }
    struct gw_buf b = {0};
    gw_s3_answer_doc(r, gw_xml_delete_result(&b, out, d->n, d->quiet), &b);
    free(out);
    gw_delete_request_free(d);
}

/* Always an empty tag set: the gateway keeps no tags. */
void gw_s3_get_object_tagging(struct gw_s3_req *r)
{
    struct gw_buf b = {0};
    int rc = gw_object_head(r->srv->objects, r->t.bucket, r->t.key, NULL);
    if (rc)
        gw_s3_answer_errno(r, rc, "GetObjectTagging");
    else
        gw_s3_answer_doc(r, gw_xml_empty_tagging(&b), &b);
}
