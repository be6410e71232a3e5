/* The control API over libmicrohttpd, JSON via jansson. */
#include "gateway/admin_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "gateway/dashboard.h"
#include "gateway/graphviz.h"
#include "gateway/health.h"
#include "gateway/rates.h"
#include "gateway/s3_request.h"
#include "volume/volume.h"
#include "inec/log.h"

#define BODY_MAX (64u << 10)
#define MAX_LOST 64

struct gw_admin_server {
    struct MHD_Daemon *daemon;
    struct gw_objects *objects;
    struct gw_metrics *metrics;
    struct gw_rates *rates;
    struct gw_keys *keys;
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

/* The DEG as a picture, graphviz on the server (graphviz.h). Takes dot. */
static enum MHD_Result send_svg(struct MHD_Connection *c, char *dot)
{
    char *svg = NULL, m[256] = "";
    size_t len = 0;
    int rc = gw_dot_to_svg(dot, &svg, &len, m, sizeof(m));
    free(dot);
    if (rc == -ENOENT)
        return send_error(c, 501, "NotImplemented", m);
    if (rc)
        return send_error(c, 500, "InternalError", m);
    return send_text(c, 200, svg, len, "image/svg+xml");
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
    bool dot = false, svg = false;
    if (format && (strcmp(format, "dot") == 0 || strcmp(format, "svg") == 0))
        dot = true, svg = format[0] == 's';
    else if (format && strcmp(format, "json") != 0)
        return send_error(c, 400, "InvalidArgument", "format is json, dot or svg");
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
    if (svg)
        return send_svg(c, text);
    if (dot)
        return send_text(c, 200, text, strlen(text), "text/vnd.graphviz");
    return send_json(c, 200, j);
}

/* The body as a JSON object, or an error already sent (*out NULL). */
static enum MHD_Result body_json(struct MHD_Connection *c, struct areq *a, json_t **out)
{
    *out = NULL;
    if (a->too_large)
        return send_error(c, 413, "TooLarge", "the body is larger than 64 KiB");
    json_error_t jerr;
    json_t *j = json_loadb(a->body ? a->body : "", a->len, 0, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        char m[256];
        snprintf(m, sizeof(m), "the body must be a JSON object: %s", jerr.text);
        return send_error(c, 400, "MalformedJSON", m);
    }
    *out = j;
    return MHD_YES;
}

/* GET|POST /admin/v1/repair, GET /admin/v1/repair/queue. */
static enum MHD_Result repair(struct gw_admin_server *s, struct MHD_Connection *c, bool get,
                              bool queue, struct areq *a)
{
    json_t *j = NULL;
    int rc;
    if (queue) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/repair/queue");
        rc = gw_objects_repair_json(s->objects, &j);
        return rc ? send_errno(c, rc, "repair queue") : send_json(c, 200, j);
    }
    if (!get) {
        json_t *in;
        enum MHD_Result r = body_json(c, a, &in);
        if (!in)
            return r;
        char m[256] = "";
        rc = gw_objects_repair_set(s->objects, in, m, sizeof(m));
        json_decref(in);
        if (rc)
            return send_errno(c, rc, m[0] ? m : "repair settings");
    }
    rc = gw_objects_repair_status(s->objects, &j);
    return rc ? send_errno(c, rc, "repair status") : send_json(c, 200, j);
}

/* POST /admin/v1/nodes/{id}/remove | drain | restore */
static enum MHD_Result node_action(struct gw_admin_server *s, struct MHD_Connection *c,
                                   const char *rest)
{
    static const struct {
        const char *action, *state;
    } actions[] = {{"remove", "out"}, {"drain", "draining"}, {"restore", "up"}};
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest || (size_t)(slash - rest) >= 64)
        return send_error(c, 400, "InvalidArgument",
                          "want POST /admin/v1/nodes/{id}/remove|drain|restore");
    char id[64];
    memcpy(id, rest, (size_t)(slash - rest));
    id[slash - rest] = '\0';
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        if (strcmp(slash + 1, actions[i].action) != 0)
            continue;
        char m[256] = "";
        int rc = gw_objects_node_state(s->objects, id, actions[i].state, m, sizeof(m));
        if (rc)
            return send_errno(c, rc, m[0] ? m : "node state");
        json_t *j = NULL;
        rc = gw_objects_repair_status(s->objects, &j);
        return rc ? send_errno(c, rc, "repair status") : send_json(c, 200, j);
    }
    return send_error(c, 400, "InvalidArgument", "the action is remove, drain or restore");
}

/* GET|POST /admin/v1/keys, DELETE /admin/v1/keys/{access_key}. */
static enum MHD_Result keys(struct gw_admin_server *s, struct MHD_Connection *c, const char *method,
                            const char *url, struct areq *a)
{
    if (!s->keys)
        return send_error(c, 501, "NotImplemented", "this gateway has no key store");
    json_t *j = NULL;
    int rc;
    if (strcmp(url, "/admin/v1/keys") == 0) {
        if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
            rc = gw_keys_list(s->keys, &j);
            return rc ? send_errno(c, rc, "keys") : send_json(c, 200, j);
        }
        if (strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "GET or POST /admin/v1/keys");
        json_t *spec;
        enum MHD_Result r = body_json(c, a, &spec);
        if (!spec)
            return r;
        const char *name = json_string_value(json_object_get(spec, "name"));
        rc = name ? gw_keys_create(s->keys, name, &j) : -EINVAL;
        json_decref(spec);
        if (rc == -EINVAL)
            return send_error(c, 400, "InvalidArgument",
                              "want {\"name\": NAME}, 1 to 64 printable characters");
        if (rc == -ENOSPC)
            return send_error(c, 409, "TooManyKeys", "revoke a key pair first");
        return rc ? send_errno(c, rc, "storing the key pair") : send_json(c, 201, j);
    }
    if (strcmp(method, "DELETE") != 0)
        return send_error(c, 405, "MethodNotAllowed", "DELETE /admin/v1/keys/{access_key}");
    rc = gw_keys_revoke(s->keys, url + strlen("/admin/v1/keys/"));
    if (rc == -EPERM)
        return send_error(c, 409, "PrimaryKey",
                          "the primary key pair comes from credentials.json: change it there");
    if (rc == -ENOENT)
        return send_error(c, 404, "NoSuchKey", "no such access key");
    return rc ? send_errno(c, rc, "revoking the key pair")
              : send_json(c, 200, json_pack("{s:b}", "revoked", 1));
}

/* GET|POST /admin/v1/volumes, GET|DELETE /admin/v1/volumes/{name},
 * POST /admin/v1/volumes/{name}/resize {"size": bytes}. */
static enum MHD_Result volumes(struct gw_admin_server *s, struct MHD_Connection *c,
                               const char *method, const char *rest, struct areq *a)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    json_t *j = NULL, *spec = NULL;
    char m[256] = "";
    int rc;
    if (!rest[0]) {
        if (get) {
            rc = gw_volume_list(s->objects, &j);
            return rc ? send_errno(c, rc, "volumes") : send_json(c, 200, j);
        }
        if (strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "GET or POST /admin/v1/volumes");
        enum MHD_Result r = body_json(c, a, &spec);
        if (!spec)
            return r;
        rc = gw_volume_create(s->objects, spec, &j, m, sizeof(m));
        json_decref(spec);
        return rc ? send_errno(c, rc, m[0] ? m : "creating the volume") : send_json(c, 201, j);
    }
    char name[GW_VOLUME_NAME_MAX + 1];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n > GW_VOLUME_NAME_MAX)
        return send_error(c, 404, "NotFound", "no such volume");
    memcpy(name, rest, n);
    name[n] = '\0';
    const char *action = rest + n;
    if (strcmp(action, "/resize") == 0) {
        if (strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "POST /admin/v1/volumes/{name}/resize");
        enum MHD_Result r = body_json(c, a, &spec);
        if (!spec)
            return r;
        json_t *size = json_object_get(spec, "size");
        rc = json_is_integer(size) && json_integer_value(size) > 0
                 ? gw_volume_resize(s->objects, name, (uint64_t)json_integer_value(size), m,
                                    sizeof(m))
                 : (snprintf(m, sizeof(m), "want {\"size\": bytes}"), -EINVAL);
        json_decref(spec);
        if (rc == 0)
            rc = gw_volume_info(s->objects, name, &j);
        return rc ? send_errno(c, rc, m[0] ? m : "no such volume") : send_json(c, 200, j);
    }
    if (action[0])
        return send_error(c, 404, "NotFound", "no such endpoint");
    if (get) {
        rc = gw_volume_info(s->objects, name, &j);
        return rc ? send_errno(c, rc, "no such volume") : send_json(c, 200, j);
    }
    if (strcmp(method, "DELETE") != 0)
        return send_error(c, 405, "MethodNotAllowed", "GET or DELETE /admin/v1/volumes/{name}");
    rc = gw_volume_delete(s->objects, name);
    return rc ? send_errno(c, rc, "no such volume")
              : send_json(c, 200, json_pack("{s:s,s:b}", "name", name, "deleted", 1));
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
        json_t *spec;
        enum MHD_Result r = body_json(c, a, &spec);
        if (!spec)
            return r;
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
    if (strcmp(url, "/admin/v1/keys") == 0 || strncmp(url, "/admin/v1/keys/", 15) == 0)
        return keys(s, c, method, url, a);
    if (strcmp(url, "/admin/v1/status") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/status");
        rc = gw_health_status_json(s->objects, s->rates, &j);
        return rc ? send_errno(c, rc, "cluster status") : send_json(c, 200, j);
    }
    if (strcmp(url, "/admin/v1/rates") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/rates");
        rc = gw_rates_json(s->rates, &j);
        return rc ? send_errno(c, rc, "rates") : send_json(c, 200, j);
    }
    if (strcmp(url, "/admin/v1/repair") == 0 || strcmp(url, "/admin/v1/repair/queue") == 0) {
        if (!get && strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "GET or POST /admin/v1/repair");
        return repair(s, c, get, strcmp(url, "/admin/v1/repair/queue") == 0, a);
    }
    static const char nodes[] = "/admin/v1/nodes/";
    if (strncmp(url, nodes, sizeof(nodes) - 1) == 0) {
        if (strcmp(method, "POST") != 0)
            return send_error(c, 405, "MethodNotAllowed", "POST /admin/v1/nodes/{id}/ACTION");
        return node_action(s, c, url + sizeof(nodes) - 1);
    }
    if (strcmp(url, "/admin/v1/volumes") == 0 || strncmp(url, "/admin/v1/volumes/", 18) == 0)
        return volumes(s, c, method, url + (url[17] ? 18 : 17), a);
    if (strcmp(url, "/admin/v1/deg") == 0) {
        if (!get)
            return send_error(c, 405, "MethodNotAllowed", "GET /admin/v1/deg");
        return deg(s, c);
    }
    return send_error(c, 404, "NotFound", "no such endpoint");
}

/* The dashboard's files need no token: they hold no data (dashboard.h). */
static enum MHD_Result send_asset(struct MHD_Connection *c, const struct gw_dashboard_asset *a)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->content_type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    for (const char *const *h = gw_dashboard_headers; *h; h += 2)
        MHD_add_response_header(r, h[0], h[1]);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
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
        if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
            const struct gw_dashboard_asset *asset = gw_dashboard_find(url);
            if (asset)
                return send_asset(c, asset);
        }
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
    s->keys = cfg->keys;
    /* One sample a second, five minutes kept: the dashboard's charts. */
    int rc = gw_rates_start(m, 1000, 300, &s->rates);
    if (rc) {
        snprintf(msg, msglen, "starting the rate sampler: %s", strerror(-rc));
        gw_admin_server_stop(s);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem tls[3];
    gw_tls_mhd_options(cfg->tls, tls, &flags);
    s->daemon =
        MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                         MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                         MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
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
    gw_rates_stop(s->rates);
    free(s->token);
    free(s);
}
