#include "gateway/s3_checksum.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct scan {
    struct gw_s3_checksum *c;
    enum gw_s3_err err;
    char *msg;
    size_t msglen;
};

static void scan_one(void *arg, const char *name, const char *value)
{
    struct scan *s = arg;
    if (s->err || strncasecmp(name, "x-amz-checksum-", 15) != 0 ||
        strcasecmp(name, "x-amz-checksum-mode") == 0 ||
        strcasecmp(name, "x-amz-checksum-type") == 0)
        return;
    enum gw_checksum_algo a = gw_checksum_from_header(name);
    if (a == GW_SUM_NONE) {
        s->err = gw_s3_errorf(GW_S3_INVALID_REQUEST, s->msg, s->msglen,
                              "%.60s is not a checksum algorithm S3 knows (CRC32, CRC32C, "
                              "CRC64NVME, SHA1, SHA256)",
                              name);
        return;
    }
    uint8_t raw[GW_CHECKSUM_MAX];
    if (++s->c->headers > 1) {
        s->err = gw_s3_errorf(GW_S3_INVALID_REQUEST, s->msg, s->msglen,
                              "Expecting a single x-amz-checksum- header. Multiple checksum "
                              "Types are not allowed.");
    } else if (strlen(value) >= sizeof(s->c->want) || !gw_checksum_decode(a, value, raw)) {
        s->err = gw_s3_errorf(GW_S3_INVALID_REQUEST, s->msg, s->msglen,
                              "Value for %s header is invalid.", gw_checksum_header(a));
    } else {
        s->c->algo = a;
        strcpy(s->c->want, value);
    }
}

enum gw_s3_err gw_s3_checksum_begin(struct gw_s3_checksum *c, gw_header_each_fn each, void *arg,
                                    const struct gw_sigv4_auth *auth, char *msg, size_t msglen)
{
    memset(c, 0, sizeof(*c));
    c->algo = GW_SUM_NONE;
    c->sum.algo = GW_SUM_NONE;
    struct scan s = {c, GW_S3_OK, msg, msglen};
    each(arg, scan_one, &s);
    if (s.err)
        return s.err;
    if (auth->trailer[0]) {
        /* A checksum header next to a trailer: the trailer is what was computed. */
        if (c->headers)
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                                "Expecting a single x-amz-checksum- header. Multiple checksum "
                                "Types are not allowed.");
        c->algo = gw_checksum_from_header(auth->trailer);
        c->trailer = true;
        return GW_S3_OK;
    }
    if (c->algo != GW_SUM_NONE && gw_checksum_init(&c->sum, c->algo) != 0)
        return GW_S3_INTERNAL_ERROR;
    return GW_S3_OK;
}

void gw_s3_checksum_update(struct gw_s3_checksum *c, const void *data, size_t len)
{
    if (c->algo != GW_SUM_NONE && !c->trailer)
        gw_checksum_update(&c->sum, data, len);
}

enum gw_s3_err gw_s3_checksum_end(struct gw_s3_checksum *c, const char *trailer_value,
                                  const char **value, char *msg, size_t msglen)
{
    *value = NULL;
    if (c->algo == GW_SUM_NONE)
        return GW_S3_OK;
    if (c->trailer) {
        if (!trailer_value)
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                                "the body ended without its checksum trailer");
        snprintf(c->want, sizeof(c->want), "%s", trailer_value);
        *value = c->want;
        return GW_S3_OK;
    }
    uint8_t d[GW_CHECKSUM_MAX];
    char got[GW_CHECKSUM_B64_MAX];
    gw_checksum_base64(d, gw_checksum_final(&c->sum, d), got);
    gw_checksum_free(&c->sum);
    c->sum.algo = GW_SUM_NONE;
    if (strcmp(got, c->want) != 0)
        return gw_s3_errorf(GW_S3_BAD_DIGEST, msg, msglen,
                            "The %s you specified did not match the calculated checksum.",
                            gw_checksum_name(c->algo));
    *value = c->want;
    return GW_S3_OK;
}

void gw_s3_checksum_free(struct gw_s3_checksum *c)
{
    gw_checksum_free(&c->sum);
}
