/*
 * Answers: every one carries the request id and is held in the request
 * until MHD may send it (s3_server.c); errors as S3's XML documents.
 */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <string.h>

#include "gateway/s3_errno.h"
#include "inec/log.h"

static void common_headers(struct gw_s3_req *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "x-amz-request-id", r->id);
    MHD_add_response_header(resp, "Server", "inec");
}

/* The answer, held until MHD may send it without closing the connection
 * (s3_server.c's send_reply). */
void gw_s3_queue(struct gw_s3_req *r, int status, struct MHD_Response *resp)
{
    common_headers(r, resp);
    r->status = status;
    r->answered = true;
    r->reply = resp;
}

struct MHD_Response *gw_s3_buffer_response(char *data, size_t len, const char *content_type)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, data, data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (resp && content_type)
        MHD_add_response_header(resp, "Content-Type", content_type);
    return resp;
}

void gw_s3_answer_empty(struct gw_s3_req *r, int status)
{
    struct MHD_Response *resp = gw_s3_buffer_response(NULL, 0, NULL);
    if (resp)
        gw_s3_queue(r, status, resp);
}

/* Takes the gw_buf's memory. */
void gw_s3_answer_xml(struct gw_s3_req *r, int status, struct gw_buf *b)
{
    r->bytes_out += b->len;
    struct MHD_Response *resp = gw_s3_buffer_response(b->data, b->len, "application/xml");
    if (!resp) {
        gw_buf_free(b);
        return;
    }
    *b = (struct gw_buf){0};
    gw_s3_queue(r, status, resp);
}

/* The document a gw_xml_* call built into b (built: what it returned), or
 * InternalError when it could not; b is freed either way. */
void gw_s3_answer_doc(struct gw_s3_req *r, int built, struct gw_buf *b)
{
    if (built == 0)
        gw_s3_answer_xml(r, 200, b);
    else
        gw_s3_answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    gw_buf_free(b);
}

void gw_s3_answer_error(struct gw_s3_req *r, enum gw_s3_err e, const char *message)
{
    const struct gw_s3_error_info *info = gw_s3_error(e);
    struct gw_buf b = {0};
    if (message && !message[0])
        message = NULL;
    if (e != GW_S3_ACCESS_DENIED || r->t.bucket[0] || r->t.key[0])
        inec_log(INEC_LOG_DEBUG, "s3", "error op=%s code=%s msg=%s", gw_s3_op_name(r->op),
                 info->code, message ? message : info->message);
    if (gw_xml_error(&b, e, message, r->uri, r->id) != 0) {
        gw_buf_free(&b);
        gw_s3_answer_empty(r, 500);
        return;
    }
    r->bytes_out += b.len;
    struct MHD_Response *resp = gw_s3_buffer_response(b.data, b.len, "application/xml");
    if (!resp) {
        gw_buf_free(&b);
        return;
    }
    if (r->content_range[0])
        MHD_add_response_header(resp, "Content-Range", r->content_range);
    if (info->status == 503) /* a transient cluster condition: when to try again */
        MHD_add_response_header(resp, "Retry-After", "1");
    gw_s3_queue(r, info->status, resp);
}

/* The object layer's errno as S3 answers it (s3_errno.h); key-level ENOENT
 * is NoSuchKey unless the bucket itself is missing. */
enum gw_s3_err gw_s3_map_errno(struct gw_s3_req *r, int rc)
{
    if (rc == -ENOENT && r->t.key[0]) {
        struct gw_bucket_info bi;
        if (gw_bucket_head(r->srv->objects, r->t.bucket, &bi) == 0)
            return GW_S3_NO_SUCH_KEY;
    }
    return gw_s3_errno(rc, r->op, r->t.key[0] != 0);
}

void gw_s3_answer_errno(struct gw_s3_req *r, int rc, const char *what)
{
    enum gw_s3_err e = gw_s3_map_errno(r, rc);
    if (e == GW_S3_INTERNAL_ERROR || e == GW_S3_SERVICE_UNAVAILABLE)
        inec_log(INEC_LOG_WARN, "s3", "%s failed bucket=%s key=%s err=%s", what, r->t.bucket,
                 r->t.key, strerror(-rc));
    gw_s3_answer_error(r, e, NULL);
}
