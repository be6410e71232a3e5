/* A request's headers as the handlers read them (s3_server_internal.h). */
#include "gateway/s3_server_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct join {
    const char *name;
    char *buf;
    size_t len;
    int n;
    bool nomem;
};

static enum MHD_Result join_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct join *j = cls;
    if (strcasecmp(key, j->name) != 0)
        return MHD_YES;
    size_t vlen = value ? strlen(value) : 0;
    char *nb = realloc(j->buf, j->len + vlen + 2);
    if (!nb) {
        j->nomem = true;
        return MHD_NO;
    }
    j->buf = nb;
    if (j->n++)
        j->buf[j->len++] = ',';
    memcpy(j->buf + j->len, value ? value : "", vlen);
    j->len += vlen;
    j->buf[j->len] = '\0';
    return MHD_YES;
}

/* A header's value; a repeated header's values joined by ",", as SigV4
 * canonicalises them (the joined string lives as long as the request). */
const char *gw_s3_header(void *arg, const char *name)
{
    struct gw_s3_req *r = arg;
    struct join j = {name, NULL, 0, 0, false};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, join_one, &j);
    if (j.n <= 1 || j.nomem || r->njoined == sizeof(r->joined) / sizeof(r->joined[0])) {
        free(j.buf);
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
    }
    return r->joined[r->njoined++] = j.buf;
}

struct each_ctx {
    void (*cb)(void *, const char *, const char *);
    void *cbarg;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct each_ctx *e = cls;
    e->cb(e->cbarg, key, value ? value : "");
    return MHD_YES;
}

void gw_s3_header_each(void *arg, void (*cb)(void *, const char *, const char *), void *cbarg)
{
    struct gw_s3_req *r = arg;
    struct each_ctx e = {cb, cbarg};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, each_header, &e);
}

enum gw_condition gw_s3_condition(struct gw_s3_req *r, bool copy_source,
                                  const struct gw_object_info *oi)
{
    static const char *const names[2][4] = {
        {"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"},
        {"x-amz-copy-source-if-match", "x-amz-copy-source-if-none-match",
         "x-amz-copy-source-if-modified-since", "x-amz-copy-source-if-unmodified-since"}};
    const char *const *n = names[copy_source];
    struct gw_conditions c = {gw_s3_header(r, n[0]), gw_s3_header(r, n[1]), gw_s3_header(r, n[2]),
                              gw_s3_header(r, n[3])};
    return gw_conditions_eval(&c, oi->etag, oi->mtime_ns / 1000000000);
}
