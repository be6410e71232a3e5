/*
 * The S3 front end over libmicrohttpd.
 *
 * A request lives in one struct req from the URI log callback (which sees
 * the raw URI: SigV4 signs the path as sent, before MHD decodes it) to the
 * completion callback (which records metrics and frees it). The access
 * handler is called once with the headers (route, authenticate, and either
 * answer or open the body's sinks), once per piece of body, and once more
 * with no data (finish: verify the body, commit, answer). A PUT is committed
 * only after every check of its body passed; until then it can be aborted
 * and the previous version stays.
 *
 * Connections are kept alive. MHD closes a connection whose answer was
 * queued from the first call (an "early" answer: it cannot know the body was
 * read), so an answer made then is held (req.reply) and queued from the
 * last call instead, once the request has been read whole. Only an answer
 * refusing a body that will not be read is sent early, and closes: the
 * client waits for it before sending the body (Expect: 100-continue), or the
 * body is longer than DROP_MAX. A shorter refused body is read and dropped,
 * and the connection stays open.
 */
#include "gateway/s3_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "gateway/conn_guard.h"
#include "gateway/s3_xml_parse.h"
#include "gateway/s3_server_internal.h"
#include "volume/volume.h"
#include "inec/log.h"

#define SMALL_BODY_MAX   (64u << 10)  /* CreateBucket's configuration */
#define DROP_MAX         (8u << 20)   /* body bytes read after a refusal (handle) */
#define MEMORY_LIMIT     (128u << 10) /* per connection: bounds the request header */
#define CONN_TIMEOUT_SEC 60           /* idle: each connection holds a thread */
#define MAX_CONNECTIONS  256u         /* conn_guard.h: idle ones are closed to make room */
#define MAX_PER_CLIENT   64u          /* active connections from one address (conn_guard.h) */
#define CLOSING_SLACK    64u          /* connections the guard closed whose threads still run */
#define HEADER_TIMEOUT   30u          /* seconds to send a request's headers (conn_guard.h) */

static int64_t now_ns(int clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int secret_of(void *arg, const char *access_key, char *secret, size_t len)
{
    struct gw_s3_server *s = arg;
    if (s->keys)
        return gw_keys_secret(s->keys, access_key, secret, len);
    if (strcmp(access_key, s->access_key) != 0)
        return -ENOENT;
    snprintf(secret, len, "%s", s->secret_key);
    return 0;
}

static void send_reply(struct gw_s3_req *r)
{
    if (!r->reply)
        return;
    if (MHD_queue_response(r->conn, (unsigned)r->status, r->reply) != MHD_YES)
        inec_log(INEC_LOG_WARN, "s3", "MHD refused an answer (HTTP %d)", r->status);
    MHD_destroy_response(r->reply);
    r->reply = NULL;
}

/* After the first call answered: is the body, if any, read and dropped (the
 * connection lives on) rather than left unread (the answer goes now, early,
 * and MHD closes the connection)? */
static bool drain_body(struct gw_s3_req *r)
{
    const char *expect = gw_s3_header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0)
        return false; /* the client waits for this answer before sending it */
    const char *te = gw_s3_header(r, "Transfer-Encoding");
    if (te)
        return false; /* of unknown length */
    const char *cl = gw_s3_header(r, "Content-Length");
    char *end;
    errno = 0;
    unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
    return !cl || (*cl && !*end && !errno && *cl != '-' && n <= DROP_MAX);
}

/* ---- the request's first call: route, authenticate, answer or open the body ---- */

static void begin(struct gw_s3_req *r, const char *method)
{
    struct gw_s3_server *s = r->srv;
    char *q = strchr(r->uri, '?');
    if (q) {
        *q = '\0';
        r->raw_query = q + 1;
    }
    enum gw_s3_err e = gw_s3_parse_target(gw_s3_header(r, "Host"), s->base_domain, r->uri, &r->t,
                                          r->msg, sizeof(r->msg));
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    if (gw_volume_bucket(r->t.bucket)) { /* an S3 write there would corrupt a disk */
        gw_s3_answer_error(r, GW_S3_ACCESS_DENIED,
                           "buckets " GW_VOLUME_BUCKET_PREFIX "* hold block volumes: use NBD");
        return;
    }
    if (gw_s3_query_parse(r->raw_query, &r->q) != 0) {
        gw_s3_answer_error(r, GW_S3_INVALID_ARGUMENT, "the query string is malformed");
        return;
    }
    r->op = gw_s3_route(method, &r->t, &r->q, gw_s3_header, r);

    struct gw_sigv4_request sreq = {method,       r->uri, r->raw_query,
                                    gw_s3_header, r,      gw_s3_header_each};
    struct gw_sigv4_config scfg = {s->region, secret_of, s, now_ns(CLOCK_REALTIME) / 1000000000};
    e = gw_sigv4_verify(&sreq, &scfg, &r->auth, r->msg, sizeof(r->msg));
    if (e && !(e == GW_S3_ACCESS_DENIED && r->auth.anonymous && !s->floor &&
               gw_s3_anonymous_allowed(r))) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    if (s->floor) {
        gw_s3_floor_begin(r);
        return;
    }

    if ((e = gw_s3_write_unkept(r))) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    switch (r->op) {
    case GW_OP_LIST_BUCKETS:
        gw_s3_list_buckets(r);
        return;
    case GW_OP_HEAD_BUCKET:
        gw_s3_head_bucket(r);
        return;
    case GW_OP_DELETE_BUCKET:
        gw_s3_delete_bucket(r);
        return;
    case GW_OP_GET_BUCKET_LOCATION:
        gw_s3_bucket_location(r);
        return;
    case GW_OP_LIST_OBJECTS:
        gw_s3_list_objects(r, 1);
        return;
    case GW_OP_LIST_OBJECTS_V2:
        gw_s3_list_objects(r, 2);
        return;
    case GW_OP_GET_OBJECT:
        gw_s3_get_object(r, false);
        return;
    case GW_OP_HEAD_OBJECT:
        gw_s3_get_object(r, true);
        return;
    case GW_OP_DELETE_OBJECT:
        gw_s3_delete_object(r);
        return;
    case GW_OP_UPLOAD_PART:
        if (!gw_s3_part_number(r))
            return;
        /* fall through */
    case GW_OP_PUT_OBJECT:
        e = gw_s3_put_begin(r);
        if (e)
            gw_s3_answer_error(r, e, r->msg);
        return;
    case GW_OP_COPY_OBJECT:
    case GW_OP_UPLOAD_PART_COPY:
        gw_s3_copy_object(r);
        return;
    case GW_OP_CREATE_MULTIPART_UPLOAD:
        gw_s3_create_multipart(r);
        return;
    case GW_OP_ABORT_MULTIPART_UPLOAD:
        gw_s3_abort_multipart(r);
        return;
    case GW_OP_LIST_PARTS:
        gw_s3_list_parts(r);
        return;
    case GW_OP_LIST_MULTIPART_UPLOADS:
        gw_s3_list_uploads(r);
        return;
    case GW_OP_GET_OBJECT_TAGGING:
        gw_s3_get_object_tagging(r);
        return;
    case GW_OP_GET_BUCKET_ACL:
    case GW_OP_GET_OBJECT_ACL:
        gw_s3_get_acl(r);
        return;
    case GW_OP_LIST_OBJECT_VERSIONS:
        gw_s3_list_objects(r, 3);
        return;
    case GW_OP_GET_BUCKET_VERSIONING:
        gw_s3_bucket_versioning(r);
        return;
    case GW_OP_GET_BUCKET_LIFECYCLE:
        gw_s3_get_lifecycle(r);
        return;
    case GW_OP_DELETE_BUCKET_LIFECYCLE:
        gw_s3_delete_lifecycle(r);
        return;
    case GW_OP_CREATE_BUCKET:
    case GW_OP_DELETE_OBJECTS:
    case GW_OP_COMPLETE_MULTIPART_UPLOAD:
    case GW_OP_PUT_BUCKET_ACL:
    case GW_OP_PUT_OBJECT_ACL:
    case GW_OP_PUT_BUCKET_LIFECYCLE:
        r->body_max = r->op == GW_OP_DELETE_OBJECTS              ? GW_S3_DELETE_MAX_BODY
                      : r->op == GW_OP_COMPLETE_MULTIPART_UPLOAD ? GW_S3_COMPLETE_MAX_BODY
                      : r->op == GW_OP_PUT_BUCKET_LIFECYCLE      ? GW_S3_LIFECYCLE_MAX_BODY
                      : r->op == GW_OP_CREATE_BUCKET             ? SMALL_BODY_MAX
                                                                 : GW_ACL_MAX_BODY;
        e = gw_s3_body_begin(r);
        if (e)
            gw_s3_answer_error(r, e, r->msg);
        else if (r->expect_len > (int64_t)r->body_max)
            gw_s3_answer_error(
                r, r->op != GW_OP_CREATE_BUCKET ? GW_S3_MALFORMED_XML : GW_S3_ENTITY_TOO_LARGE,
                "the request body is too large");
        return;
    case GW_OP_NOT_IMPLEMENTED:
        gw_s3_answer_error(r, GW_S3_NOT_IMPLEMENTED, "this operation is not implemented by inec");
        return;
    case GW_OP_METHOD_NOT_ALLOWED:
    case GW_OP_COUNT:
        gw_s3_answer_error(r, GW_S3_METHOD_NOT_ALLOWED, NULL);
        return;
    }
}

/* ---- the body, and the last call ---- */

static void body(struct gw_s3_req *r, const char *data, size_t len)
{
    if (r->err)
        return; /* the rest of a failed body is read and dropped */
    enum gw_s3_err e = gw_s3_body_feed(r, &data, &len);
    if (r->srv->floor) {
        /* dropped: the floor stores nothing */
    } else if (!e && r->put && len) {
        int rc = gw_put_write(r->put, data, len);
        if (rc) {
            e = gw_s3_map_errno(r, rc);
            snprintf(r->msg, sizeof(r->msg), "storing the body failed: %s", strerror(-rc));
        }
    } else if (!e && !r->put && len) {
        if (r->body_len + len > r->body_max) {
            e = r->op != GW_OP_CREATE_BUCKET ? GW_S3_MALFORMED_XML : GW_S3_ENTITY_TOO_LARGE;
            snprintf(r->msg, sizeof(r->msg), "the request body is too large");
        } else {
            char *nb = realloc(r->body, r->body_len + len + 1);
            if (!nb) {
                e = GW_S3_INTERNAL_ERROR;
            } else {
                r->body = nb;
                memcpy(r->body + r->body_len, data, len);
                r->body_len += len;
                r->body[r->body_len] = '\0';
            }
        }
    }
    if (e) {
        r->err = e;
        if (r->put) {
            gw_put_abort(r->put);
            r->put = NULL;
        }
    }
}

static void small_body_end(struct gw_s3_req *r)
{
    enum gw_s3_err e = gw_s3_body_end(r);
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    if (r->op == GW_OP_DELETE_OBJECTS) {
        gw_s3_delete_objects(r);
        return;
    }
    if (r->op == GW_OP_COMPLETE_MULTIPART_UPLOAD) {
        gw_s3_complete_multipart(r);
        return;
    }
    if (r->op == GW_OP_PUT_BUCKET_ACL || r->op == GW_OP_PUT_OBJECT_ACL) {
        gw_s3_put_acl(r);
        return;
    }
    if (r->op == GW_OP_PUT_BUCKET_LIFECYCLE) {
        gw_s3_put_lifecycle(r);
        return;
    }
    gw_s3_create_bucket(r);
}

static enum MHD_Result handle(struct gw_s3_req *r, struct MHD_Connection *conn, const char *method,
                              const char *upload_data, size_t *upload_data_size)
{
    if (!r->started) {
        r->started = true;
        r->conn = conn;
        gw_conn_guard_headers_done(conn);
        begin(r, method);
        if (r->reply && !drain_body(r))
            send_reply(r);
        return MHD_YES;
    }
    if (*upload_data_size && (r->answered || r->err)) {
        /* Answered before the body, or the body failed: the rest is read and
         * dropped so the client can read the answer, but only so much of it:
         * its length may be anything the client claimed (chunked), and MHD
         * cannot send an answer before the body has ended. Beyond that, the
         * connection is closed. */
        r->dropped += *upload_data_size;
        *upload_data_size = 0;
        if (r->dropped > DROP_MAX) {
            inec_log(INEC_LOG_INFO, "s3", "closing a connection whose refused body goes on");
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->answered) {
        send_reply(r);
        return MHD_YES;
    }
    if (r->err)
        gw_s3_answer_error(r, r->err, r->msg);
    else if (r->srv->floor)
        gw_s3_floor_put_end(r);
    else if (r->op == GW_OP_PUT_OBJECT || r->op == GW_OP_UPLOAD_PART)
        gw_s3_put_end(r);
    else
        small_body_end(r);
    send_reply(r);
    return r->answered ? MHD_YES : MHD_NO;
}

/* ---- libmicrohttpd: callbacks, start and stop ---- */

/* Every log line written while serving the request, here or on the fan-out
 * threads working for it, names the request's id (inec/log.h). */
static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    (void)cls, (void)url, (void)version;
    struct gw_s3_req *r = *con_cls;
    if (!r)
        return MHD_NO;
    inec_log_context_set(r->id);
    enum MHD_Result res = handle(r, conn, method, upload_data, upload_data_size);
    inec_log_context_set(NULL);
    return res;
}

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    struct gw_s3_server *s = cls;
    struct gw_s3_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    if (!(r->uri = strdup(uri ? uri : "/"))) {
        free(r);
        return NULL;
    }
    r->srv = s;
    r->sum.algo = r->sum.sum.algo = GW_SUM_NONE;
    r->t0 = now_ns(CLOCK_MONOTONIC);
    r->op = GW_OP_NOT_IMPLEMENTED;
    snprintf(r->id, sizeof(r->id), "%016" PRIxFAST64,
             atomic_fetch_add_explicit(&s->next_id, 1, memory_order_relaxed));
    atomic_fetch_add(&s->inflight, 1);
    return r;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct gw_s3_server *s = cls;
    gw_conn_guard_request_done(conn);
    struct gw_s3_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    inec_log_context_set(r->id);
    if (r->put) /* the client went away mid-body, or the body failed */
        gw_put_abort(r->put);
    if (r->reply) /* the client went away before its answer could go */
        MHD_destroy_response(r->reply);
    int status = r->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status >= 200 && status < 300)
        status = 0; /* cut short: counted as "other" */
    gw_metrics_record(s->metrics, r->op, status, (uint64_t)(now_ns(CLOCK_MONOTONIC) - r->t0),
                      r->bytes_in, r->bytes_out);
    gw_s3_query_free(&r->q);
    gw_payload_destroy(r->payload);
    gw_chunked_destroy(r->chunked);
    EVP_MD_CTX_free(r->md5);
    gw_s3_checksum_free(&r->sum);
    free(r->scratch);
    free(r->body);
    for (size_t i = 0; i < r->njoined; i++)
        free(r->joined[i]);
    free(r->uri);
    free(r);
    inec_log_context_set(NULL);
    atomic_fetch_sub(&s->inflight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    inec_log(INEC_LOG_DEBUG, "s3", "httpd: %s", line);
}

int gw_s3_server_start(const struct gw_s3_config *cfg, struct gw_objects *o, struct gw_metrics *m,
                       struct gw_s3_server **out, char *msg, size_t msglen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (gw_parse_listen(cfg->listen, &ss, &sslen) != 0) {
        snprintf(msg, msglen, "cannot parse listen address '%s' (want host:port)",
                 cfg->listen ? cfg->listen : "");
        return -EINVAL;
    }
    if (!cfg->access_key || !cfg->secret_key || !cfg->access_key[0] || !cfg->secret_key[0]) {
        snprintf(msg, msglen, "the S3 server needs an access key and a secret key");
        return -EINVAL;
    }
    struct gw_s3_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->objects = o;
    s->metrics = m;
    s->base_domain = cfg->base_domain ? strdup(cfg->base_domain) : NULL;
    s->region = strdup(cfg->region ? cfg->region : "us-east-1");
    s->access_key = strdup(cfg->access_key);
    s->secret_key = strdup(cfg->secret_key);
    s->floor = cfg->floor;
    s->keys = cfg->keys;
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(cfg->access_key, strlen(cfg->access_key), md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < mdlen && i < 32; i++)
        snprintf(s->owner_id + 2 * i, 3, "%02x", md[i]);
    pthread_mutex_init(&s->floor_lock, NULL);
    s->floor_sizes = json_object();
    atomic_init(&s->inflight, 0);
    uint64_t seed = 0;
    RAND_bytes((unsigned char *)&seed, sizeof(seed));
    atomic_init(&s->next_id, seed >> 16 << 16); /* ids unique across restarts */
    if ((cfg->base_domain && !s->base_domain) || !s->region || !s->access_key || !s->secret_key ||
        !s->floor_sizes) {
        gw_s3_server_stop(s, 0);
        return -ENOMEM;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    unsigned maxc = cfg->max_connections ? cfg->max_connections : MAX_CONNECTIONS;
    unsigned per_client = cfg->max_per_client ? cfg->max_per_client : MAX_PER_CLIENT;
    struct MHD_OptionItem tls[3];
    gw_tls_mhd_options(cfg->tls, tls, &flags);
    int rc = gw_conn_guard_start(cfg->header_timeout_s ? cfg->header_timeout_s : HEADER_TIMEOUT,
                                 maxc, per_client < maxc ? per_client : maxc, &s->guard);
    if (rc) {
        gw_s3_server_stop(s, 0);
        return rc;
    }
    /* The guard applies the limits (it tells idle connections from active
     * ones); MHD's own limit only bounds the threads in all. The listening
     * socket is MHD's default, SO_REUSEADDR (a restart binds at once), not
     * MHD_OPTION_LISTENING_ADDRESS_REUSE: its SO_REUSEPORT would let a
     * second gateway bind the port and take half the connections. */
    s->daemon = MHD_start_daemon(
        flags, 0, gw_conn_guard_accept, s->guard, handler, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_URI_LOG_CALLBACK, uri_log, s,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        gw_conn_guard_notify, s->guard, MHD_OPTION_CONNECTION_LIMIT, maxc + CLOSING_SLACK,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_SEC,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(msg, msglen, "cannot listen on %s (in use, or not an address of this host)",
                 cfg->listen);
        gw_s3_server_stop(s, 0);
        return -EADDRINUSE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
}

uint16_t gw_s3_server_port(const struct gw_s3_server *s)
{
    return s->port;
}

void gw_s3_server_stop(struct gw_s3_server *s, int drain_ms)
{
    if (!s)
        return;
    if (s->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t)drain_ms * 1000000;
        while (atomic_load(&s->inflight) > 0 && now_ns(CLOCK_MONOTONIC) < deadline)
            usleep(10000);
        MHD_stop_daemon(s->daemon);
    }
    gw_conn_guard_stop(s->guard);
    free(s->base_domain);
    free(s->region);
    free(s->access_key);
    free(s->secret_key);
    json_decref(s->floor_sizes);
    pthread_mutex_destroy(&s->floor_lock);
    free(s);
}
