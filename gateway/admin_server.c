/* The control API over libmicrohttpd, JSON via jansson. */
#include "gateway/admin_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "gateway/s3_request.h"
#include "inec/log.h"

#define BODY_MAX (64u << 10)
#define MAX_LOST 64

struct gw_admin_server {
    struct MHD_Daemon *daemon;
    struct gw_objects *objects;
    struct gw_metrics *metrics;
    char *token;
    uint16_t port;
};

struct areq {
    char *body;
    size_t len;
    bool too_large;
};

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, char *text, size_t len,
                                 const char *ctype)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"inec\"");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Takes the reference. */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text)
        return MHD_NO;
    size_t len = strlen(text);
    return send_text(c, status, text, len, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *code,
                                  const char *message)
{
    return send_json(c, status, json_pack("{ssss}", "code", code, "message", message));
}

static enum MHD_Result send_errno(struct MHD_Connection *c, int rc, const char *what)
{
    switch (rc) {
    case -ENOENT:
        return send_error(c, 404, "NotFound", what);
    case -EEXIST:
        return send_error(c, 409, "AlreadyExists", what);
    case -EINVAL:
        return send_error(c, 400, "InvalidArgument", what);
    case -ENOSYS:
    case -EOPNOTSUPP:
        return send_error(c, 501, "NotImplemented", what);
    default: {
        char m[256];
        snprintf(m, sizeof(m), "%s: %s", what, strerror(-rc));
        return send_error(c, rc == -EIO || rc == -EHOSTDOWN ? 503 : 500, "InternalError", m);
    }
    }
}

static bool authorized(struct gw_admin_server *s, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    size_t n = strlen(h), t = strlen(s->token);
    return n == t && CRYPTO_memcmp(h, s->token, t) == 0;
}

static enum MHD_Result metrics(struct gw_admin_server *s, struct MHD_Connection *c)
{
    json_t *cluster = NULL;
    if (gw_objects_cluster_json(s->objects, &cluster) != 0)
        cluster = NULL; /* the request counters are still worth serving */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = f ? gw_metrics_write(s->metrics, cluster, f) : -ENOMEM;
    json_decref(cluster);
    if (f && fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc) {
        free(text);
        return send_errno(c, rc, "rendering metrics");
    }
    return send_text(c, 200, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result deg(struct gw_admin_server *s, struct MHD_Connection *c)
{
    const char *pool = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pool");
    const char *op = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "op");
    const char *lost_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "lost");
    const char *format = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
    if (!pool || !op)
        return send_error(c, 400, "InvalidArgument", "pool and op are required");
    if (strcmp(op, "encode") != 0 && strcmp(op, "decode") != 0)
        return send_error(c, 400, "InvalidArgument", "op is encode or decode");
    bool dot = false;
    if (format && strcmp(format, "dot") == 0)
        dot = true;
    else if (format && strcmp(format, "json") != 0)
        return send_error(c, 400, "InvalidArgument", "format is json or dot");
    int lost[MAX_LOST];
    size_t nlost = 0;
    for (const char *p = lost_s; p && *p;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 255 || (*end && *end != ',') || nlost == MAX_LOST)
            return send_error(c, 400, "InvalidArgument",
                              "lost is a comma-separated list of chunk indices");
        lost[nlost++] = (int)v;
        p = *end ? end + 1 : end;
    }
    json_t *j = NULL;
    char *text = NULL;
    int rc = gw_objects_deg(s->objects, pool, op, lost, nlost, dot ? NULL : &j, dot ? &text : NULL);
    if (rc)
        return send_errno(c, rc, "no such pool, or a graph it cannot build");
    if (dot)
        return send_text(c, 200, text, strlen(text), "text/vnd.graphviz");
    return send_json(c, 200, j);
}

static enum MHD_Result route(struct gw_admin_server *s, struct MHD_Connection *c,
                             const char *method, const char *url, struct areq *a)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    json_t *j = NULL;
    int rc;
    if (strcmp(url, "/metrics") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /metrics");
        return metrics(s, c);
    }
    if (strcmp(url, "/admin/v1/cluster") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/cluster");
        rc = gw_objects_cluster_json(s->objects, &j);
        return rc ? send_errno(c, rc, "cluster state") : send_json(c, 200, j);
    }
    if (strcmp(url, "/admin/v1/pools") == 0) {
        if (get) {
            rc = gw_objects_pools_json(s->objects, &j);
            return rc ? send_errno(c, rc, "pools") : send_json(c, 200, j);
        }
        if (strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "GET or POST /admin/v1/pools");
        if (a->too_large)
            return send_error(c, 413, "TooLarge", "the body is larger than 64 KiB");
        json_error_t jerr;
        json_t *spec = json_loadb(a->body ? a->body : "", a->len, 0, &jerr);
        if (!json_is_object(spec)) {
            json_decref(spec);
            char m[256];
            snprintf(m, sizeof(m), "the body must be a JSON object: %s", jerr.text);
            return send_error(c, 400, "MalformedJSON", m);
        }
        char m[256] = "";
        rc = gw_objects_pool_create(s->objects, spec, &j, m, sizeof(m));
        json_decref(spec);
        return rc ? send_errno(c, rc, m[0] ? m : "creating the pool") : send_json(c, 201, j);
    }
    static const char objects[] = "/admin/v1/objects/";
    if (strncmp(url, objects, sizeof(objects) - 1) == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/objects/{bucket}/{key}");
        const char *bk = url + sizeof(objects) - 1;
        const char *slash = strchr(bk, '/');
        if (!slash || slash == bk || !slash[1] || (size_t)(slash - bk) > GW_BUCKET_MAX)
            return send_error(c, 400, "InvalidArgument", "want /admin/v1/objects/{bucket}/{key}");
        char bucket[GW_BUCKET_MAX + 1];
        memcpy(bucket, bk, (size_t)(slash - bk));
        bucket[slash - bk] = '\0';
        rc = gw_objects_object_json(s->objects, bucket, slash + 1, &j);
        return rc ? send_errno(c, rc, "no such object") : send_json(c, 200, j);
    }
    if (strcmp(url, "/admin/v1/deg") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/deg");
        return deg(s, c);
    }
    return send_error(c, 404, "NotFound", "no such endpoint");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct gw_admin_server *s = cls;
    struct areq *a = *con_cls;
    if (!a) {
        if (!(a = calloc(1, sizeof(*a))))
            return MHD_NO;
        *con_cls = a;
        if (!authorized(s, c))
            return send_error(c, 401, "Unauthorized", "send Authorization: Bearer <admin token>");
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (a->len + *upload_data_size > BODY_MAX) {
            a->too_large = true;
        } else if (!a->too_large) {
            char *nb = realloc(a->body, a->len + *upload_data_size + 1);
            if (!nb)
                return MHD_NO;
            a->body = nb;
            memcpy(a->body + a->len, upload_data, *upload_data_size);
            a->len += *upload_data_size;
            a->body[a->len] = '\0';
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    return route(s, c, method, url, a);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct areq *a = *con_cls;
    if (a) {
        free(a->body);
        free(a);
    }
    *con_cls = NULL;
}

int gw_admin_server_start(const struct gw_admin_config *cfg, struct gw_objects *o,
                          struct gw_metrics *m, struct gw_admin_server **out, char *msg,
                          size_t msglen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (gw_parse_listen(cfg->listen, &ss, &sslen) != 0) {
        snprintf(msg, msglen, "cannot parse admin listen address '%s' (want host:port)",
                 cfg->listen ? cfg->listen : "");
        return -EINVAL;
    }
    if (!cfg->token || !cfg->token[0] || !m) {
        snprintf(msg, msglen, "the control API needs a token and metrics");
        return -EINVAL;
    }
    struct gw_admin_server *s = calloc(1, sizeof(*s));
    if (!s || !(s->token = strdup(cfg->token))) {
        free(s);
        return -ENOMEM;
    }
    s->objects = o;
    s->metrics = m;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                 MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_CONNECTION_TIMEOUT,
                                 30u, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                 MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(msg, msglen, "cannot listen on %s (in use, or not an address of this host)",
                 cfg->listen);
        gw_admin_server_stop(s);
        return -EADDRINUSE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
}

uint16_t gw_admin_server_port(const struct gw_admin_server *s)
{
    return s->port;
}

void gw_admin_server_stop(struct gw_admin_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    free(s->token);
    free(s);
}
