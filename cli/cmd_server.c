/*
 * `inec server`: the whole system in one process (gateway + 9 nodes,
 * RS(6,3), data under ./inec-data), and `inec gateway --config cluster.json`:
 * a gateway in front of nodes running as their own processes over tcp.
 *
 * Both serve S3 and the control API until SIGINT or SIGTERM, then stop
 * accepting, let requests in flight finish (bounded), and close.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/commands.h"
#include "cli/control.h"
#include "gateway/admin_server.h"
#include "gateway/credentials.h"
#include "gateway/metrics.h"
#include "gateway/nbd_server.h"
#include "object/objects.h"
#include "gateway/s3_request.h"
#include "gateway/s3_server.h"
#include "inec/hostport.h"
#include "inec/log.h"

#define DRAIN_MS 30000 /* what a request in flight gets to finish at shutdown */

struct opts {
    const char *data, *listen, *admin_listen, *base_domain, *region, *config, *secret;
    const char *tls_cert, *tls_key, *header_timeout, *max_client_connections;
    const char *nbd_listen, *nbd_socket, *nbd_tls;
    unsigned header_timeout_s, max_per_client; /* parsed by check_options; 0: the default */
    bool nbd_default; /* nbd_listen not given: a port in use is a warning, not an error */
    bool help;
};

static int parse(const char *cmd, int argc, char **argv, struct opts *o)
{
    static const struct {
        const char *name;
        size_t off;
    } flags[] = {
        {"--data", offsetof(struct opts, data)},
        {"--listen", offsetof(struct opts, listen)},
        {"--admin-listen", offsetof(struct opts, admin_listen)},
        {"--base-domain", offsetof(struct opts, base_domain)},
        {"--region", offsetof(struct opts, region)},
        {"--config", offsetof(struct opts, config)},
        {"--tls-cert", offsetof(struct opts, tls_cert)},
        {"--tls-key", offsetof(struct opts, tls_key)},
        {"--header-timeout", offsetof(struct opts, header_timeout)},
        {"--max-client-connections", offsetof(struct opts, max_client_connections)},
        {"--secret", offsetof(struct opts, secret)},
        {"--nbd-listen", offsetof(struct opts, nbd_listen)},
        {"--nbd-socket", offsetof(struct opts, nbd_socket)},
        {"--nbd-tls", offsetof(struct opts, nbd_tls)},
    };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            o->help = true;
            continue;
        }
        size_t f = 0, nf = sizeof(flags) / sizeof(flags[0]);
        const char *value = NULL;
        for (; f < nf; f++) {
            size_t n = strlen(flags[f].name);
            if (strncmp(argv[i], flags[f].name, n) != 0)
                continue;
            if (argv[i][n] == '=') {
                value = argv[i] + n + 1;
                break;
            }
            if (argv[i][n] == '\0' && i + 1 < argc) {
                value = argv[++i];
                break;
            }
        }
        if (f == nf || !value) {
            fprintf(stderr, "inec %s: unknown option or missing value '%s'\n", cmd, argv[i]);
            return 2;
        }
        *(const char **)((char *)o + flags[f].off) = value;
    }
    return 0;
}

/* cluster.json's "gateway" section: listen addresses and credentials. */
static int apply_config(json_t *cfg, struct opts *o, struct gw_credentials *c)
{
    json_t *g = json_object_get(cfg, "gateway");
    if (!g)
        return 0;
    if (!json_is_object(g))
        return -EINVAL;
    const char *s;
    if (!o->listen && (s = json_string_value(json_object_get(g, "listen"))))
        o->listen = s;
    if (!o->admin_listen && (s = json_string_value(json_object_get(g, "admin_listen"))))
        o->admin_listen = s;
    if (!o->base_domain && (s = json_string_value(json_object_get(g, "base_domain"))))
        o->base_domain = s;
    if (!o->region && (s = json_string_value(json_object_get(g, "region"))))
        o->region = s;
    if (!o->data && (s = json_string_value(json_object_get(g, "data"))))
        o->data = s;
    if (!o->tls_cert && (s = json_string_value(json_object_get(g, "tls_cert"))))
        o->tls_cert = s;
    if (!o->tls_key && (s = json_string_value(json_object_get(g, "tls_key"))))
        o->tls_key = s;
    json_t *n;
    if (!o->header_timeout && json_is_integer(n = json_object_get(g, "header_timeout")))
        o->header_timeout_s = json_integer_value(n) > 0 ? (unsigned)json_integer_value(n) : 0;
    if (!o->max_client_connections &&
        json_is_integer(n = json_object_get(g, "max_client_connections")))
        o->max_per_client = json_integer_value(n) > 0 ? (unsigned)json_integer_value(n) : 0;
    if (!o->nbd_listen && (s = json_string_value(json_object_get(g, "nbd_listen"))))
        o->nbd_listen = s;
    if (!o->nbd_socket && (s = json_string_value(json_object_get(g, "nbd_socket"))))
        o->nbd_socket = s;
    if (!o->nbd_tls && (s = json_string_value(json_object_get(g, "nbd_tls"))))
        o->nbd_tls = s;
    static const struct {
        const char *name;
        size_t off;
    } keys[] = {
        {"access_key", offsetof(struct gw_credentials, access_key)},
        {"secret_key", offsetof(struct gw_credentials, secret_key)},
        {"admin_token", offsetof(struct gw_credentials, admin_token)},
    };
    for (size_t i = 0; i < 3; i++)
        if ((s = json_string_value(json_object_get(g, keys[i].name))))
            snprintf((char *)c + keys[i].off, sizeof(c->access_key), "%s", s);
    return 0;
}

/* The URL a client on this host uses to reach a listen address: a wildcard
 * (IPv4 or dual-stack IPv6) is reached on 127.0.0.1. */
static void client_url(const char *listen, uint16_t port, bool tls, char *out, size_t len)
{
    char host[64], p[8], at[80];
    if (inec_hostport_split(listen, host, sizeof(host), p, sizeof(p)) || !host[0] ||
        strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
        strcpy(host, "127.0.0.1");
    inec_hostport_join(host, port, at, sizeof(at));
    snprintf(out, len, "%s://%s", tls ? "https" : "http", at);
}

static void banner(const struct opts *o, const struct gw_credentials *c, const char *s3url,
                   const char *adminurl, const char *nbdurl, const char *mode)
{
    const char *region = o->region ? o->region : "us-east-1";
    printf("inec %s\n"
           "S3 endpoint: %s\n"
           "control API: %s\n"
           "NBD (block volumes): %s%s%s\n"
           "dashboard: %s/ (log in with the admin token)\n"
           "data: %s\n\n"
           "S3 credentials%s:\n"
           "  export AWS_ACCESS_KEY_ID=%s\n"
           "  export AWS_SECRET_ACCESS_KEY=%s\n"
           "  export AWS_DEFAULT_REGION=%s\n"
           "or: aws configure set aws_access_key_id %s; "
           "aws configure set aws_secret_access_key %s; aws configure set region %s\n\n"
           "try:\n"
           "  inec status --data %s\n"
           "  aws --endpoint-url %s s3 mb s3://demo\n"
           "  aws --endpoint-url %s s3 cp FILE s3://demo/\n"
           "  curl -H 'Authorization: Bearer %s' %s/admin/v1/cluster\n\n",
           mode, s3url, adminurl, nbdurl,
           o->nbd_socket[0] ? (o->nbd_listen[0] ? " and unix:" : "unix:") : "", o->nbd_socket,
           adminurl, o->data, c->generated ? " (generated, stored in " GW_CREDENTIALS_FILE ")" : "",
           c->access_key, c->secret_key, region, c->access_key, c->secret_key, region, o->data,
           s3url, s3url, c->admin_token, adminurl);
    fflush(stdout);
}

/* DATA/CTL_ADMIN_CERT: the certificate the control API presents, which
 * `inec status --data DATA` then trusts (cli/control.h); removed without TLS. */
static int note_admin_cert(const char *data, const struct gw_tls *tls, char *msg, size_t msglen)
{
    char path[4096], tmp[4100];
    snprintf(path, sizeof(path), "%s/" CTL_ADMIN_CERT, data);
    if (!tls)
        return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    size_t n = strlen(tls->cert_pem);
    bool ok = f && fwrite(tls->cert_pem, 1, n, f) == n;
    ok = f && fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(msg, msglen, "cannot write %.200s: %s", path, strerror(errno));
        unlink(tmp);
        return -EIO;
    }
    return 0;
}

/*
 * Serves until SIGINT/SIGTERM; SIGHUP reloads the TLS certificate and key
 * from their files. The signals are blocked in every thread (the servers'
 * threads inherit the mask) and taken here with sigwait, so shutdown and
 * reload run in ordinary code, not in a handler.
 */
static int serve(const char *cmd, struct opts *o, struct gw_objects *objects,
                 struct gw_credentials *c, const char *mode)
{
    struct gw_metrics *m = NULL;
    struct gw_s3_server *s3 = NULL;
    struct gw_admin_server *admin = NULL;
    struct gw_nbd_server *nbd = NULL;
    char msg[256] = "";
    int rc = gw_metrics_create(gw_s3_op_names, GW_OP_COUNT, &m);
    struct gw_keys *keys = NULL;
    if (rc == 0)
        rc = gw_keys_open(o->data, c->access_key, c->secret_key, &keys, msg, sizeof(msg));
    struct gw_tls tls = {0};
    if (rc == 0 && (o->tls_cert || o->tls_key))
        rc = gw_tls_load(o->tls_cert, o->tls_key, &tls, msg, sizeof(msg));
    struct gw_s3_config s3cfg = {.listen = o->listen,
                                 .base_domain = o->base_domain,
                                 .region = o->region,
                                 .access_key = c->access_key,
                                 .secret_key = c->secret_key,
                                 .max_per_client = o->max_per_client,
                                 .header_timeout_s = o->header_timeout_s,
                                 .tls = tls.cert_pem ? &tls : NULL,
                                 .keys = keys};
    if (rc == 0)
        rc = gw_s3_server_start(&s3cfg, objects, m, &s3, msg, sizeof(msg));
    struct gw_admin_config acfg = {o->admin_listen, c->admin_token, keys, s3cfg.tls};
    if (rc == 0)
        rc = gw_admin_server_start(&acfg, objects, m, &admin, msg, sizeof(msg));
    struct gw_nbd_config ncfg = {o->nbd_listen, o->nbd_socket, s3cfg.tls,
                                 o->nbd_tls && strcmp(o->nbd_tls, "require") == 0};
    if (rc == 0 && (rc = gw_nbd_server_start(&ncfg, objects, &nbd, msg, sizeof(msg))) &&
        o->nbd_default) {
        inec_log(INEC_LOG_WARN, "server", "%s: NBD only on the Unix socket (see --nbd-listen)",
                 msg);
        o->nbd_listen = ncfg.listen = "";
        rc = gw_nbd_server_start(&ncfg, objects, &nbd, msg, sizeof(msg));
    }
    if (rc) {
        fprintf(stderr, "inec %s: %s\n", cmd, msg[0] ? msg : strerror(-rc));
        gw_admin_server_stop(admin);
        gw_s3_server_stop(s3, 0);
        gw_tls_free(&tls);
        gw_keys_close(keys);
        gw_metrics_destroy(m);
        return 1;
    }
    char s3url[96], adminurl[96];
    client_url(o->listen, gw_s3_server_port(s3), s3cfg.tls != NULL, s3url, sizeof(s3url));
    client_url(o->admin_listen, gw_admin_server_port(admin), acfg.tls != NULL, adminurl,
               sizeof(adminurl));
    char nbdurl[96] = "";
    if (!o->nbd_listen[0] && !o->nbd_socket[0])
        strcpy(nbdurl, "off");
    if (o->nbd_listen[0]) {
        client_url(o->nbd_listen, gw_nbd_server_port(nbd), false, nbdurl, sizeof(nbdurl));
        memcpy(nbdurl, "nbd:", 4); /* http://host:port -> nbd://host:port */
        memmove(nbdurl + 4, nbdurl + 5, strlen(nbdurl + 5) + 1);
        if (ncfg.tls_required) { /* -> nbds://host:port */
            memmove(nbdurl + 4, nbdurl + 3, strlen(nbdurl + 3) + 1);
            nbdurl[3] = 's';
        }
    }
    if (gw_credentials_note_endpoints(o->data, s3url, adminurl, msg, sizeof(msg)) ||
        note_admin_cert(o->data, acfg.tls, msg, sizeof(msg)))
        inec_log(INEC_LOG_WARN, "server", "%s", msg);
    banner(o, c, s3url, adminurl, nbdurl, mode);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        if (!tls.cert_pem) {
            inec_log(INEC_LOG_INFO, "server", "SIGHUP: no TLS certificate to reload");
        } else if (gw_tls_reload(&tls, msg, sizeof(msg))) {
            inec_log(INEC_LOG_WARN, "server", "SIGHUP: %s; still serving the one before", msg);
        } else {
            inec_log(INEC_LOG_INFO, "server", "SIGHUP: TLS certificate %s reloaded", o->tls_cert);
            if (note_admin_cert(o->data, &tls, msg, sizeof(msg)))
                inec_log(INEC_LOG_WARN, "server", "%s", msg);
        }
    }
    inec_log(INEC_LOG_INFO, "server", "shutting down signal=%s", strsignal(sig));
    gw_nbd_server_stop(nbd);
    gw_s3_server_stop(s3, DRAIN_MS);
    gw_admin_server_stop(admin);
    gw_tls_free(&tls); /* after every server that hands its certificate out */
    gw_keys_close(keys);
    gw_metrics_destroy(m);
    return 0;
}

static void block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client hanging up is an error return, not a death */
}

/* NBD on 127.0.0.1:10809 and DATA/nbd.sock unless told otherwise ("off": none). */
static void nbd_defaults(struct opts *o)
{
    static char sock[128];
    if (!o->nbd_listen) {
        o->nbd_listen = GW_NBD_DEFAULT_LISTEN;
        o->nbd_default = true;
    }
    if (strcmp(o->nbd_listen, "off") == 0)
        o->nbd_listen = "";
    if (!o->nbd_socket) {
        int n = snprintf(sock, sizeof(sock), "%s/nbd.sock", o->data);
        o->nbd_socket = n > 0 && n < 108 ? sock : ""; /* a socket path holds 107 bytes */
    }
    if (strcmp(o->nbd_socket, "off") == 0)
        o->nbd_socket = "";
}

static bool parse_count(const char *s, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v == 0 || v > max || *s == '-')
        return false;
    *out = (unsigned)v;
    return true;
}

/* Listen addresses and limits are checked before anything starts: a typo is
 * bad usage. */
static int check_options(const char *cmd, struct opts *o)
{
    if (o->header_timeout && !parse_count(o->header_timeout, 3600, &o->header_timeout_s)) {
        fprintf(stderr, "inec %s: --header-timeout wants seconds from 1 to 3600, not '%s'\n", cmd,
                o->header_timeout);
        return 2;
    }
    if (o->max_client_connections &&
        !parse_count(o->max_client_connections, 100000, &o->max_per_client)) {
        fprintf(stderr, "inec %s: --max-client-connections wants a count from 1, not '%s'\n", cmd,
                o->max_client_connections);
        return 2;
    }
    if (o->nbd_tls && strcmp(o->nbd_tls, "optional") != 0 && strcmp(o->nbd_tls, "require") != 0) {
        fprintf(stderr, "inec %s: --nbd-tls is optional or require, not '%s'\n", cmd, o->nbd_tls);
        return 2;
    }
    if (!o->tls_cert != !o->tls_key) {
        fprintf(stderr, "inec %s: --tls-cert and --tls-key go together\n", cmd);
        return 2;
    }
    struct sockaddr_storage ss;
    socklen_t len;
    const char *bad = gw_parse_listen(o->listen, &ss, &len) != 0         ? o->listen
                      : gw_parse_listen(o->admin_listen, &ss, &len) != 0 ? o->admin_listen
                      : o->nbd_listen[0] && gw_parse_listen(o->nbd_listen, &ss, &len) != 0
                          ? o->nbd_listen
                          : NULL;
    if (bad)
        fprintf(stderr, "inec %s: '%s' is not a listen address (want HOST:PORT)\n", cmd, bad);
    return bad ? 2 : 0;
}

static int load_credentials(const char *cmd, const char *dir, struct gw_credentials *c)
{
    char msg[256];
    int rc = gw_credentials_load(dir, c, msg, sizeof(msg));
    if (rc)
        fprintf(stderr, "inec %s: credentials: %s\n", cmd, msg);
    return rc;
}

int cmd_server(int argc, char **argv)
{
    struct opts o = {0};
    if (parse("server", argc, argv, &o))
        return 2;
    if (o.help) {
        printf("usage: inec server [--data DIR] [--listen HOST:PORT] [--admin-listen HOST:PORT]\n"
               "                   [--base-domain DOMAIN] [--region REGION]\n"
               "                   [--tls-cert FILE --tls-key FILE] [--header-timeout SECONDS]\n"
               "                   [--max-client-connections N] [--nbd-listen HOST:PORT|off]\n"
               "                   [--nbd-socket PATH|off] [--nbd-tls optional|require]\n\n"
               "Runs a gateway and 9 storage nodes (RS(6,3)) in this process.\n"
               "  --data          where everything is stored (./inec-data)\n"
               "  --listen        the S3 endpoint (127.0.0.1:9000; port 0 picks one)\n"
               "  --admin-listen  the control API (127.0.0.1:9001)\n"
               "  --base-domain   serve virtual-host style requests under this domain\n"
               "  --tls-cert FILE, --tls-key FILE\n"
               "                  serve S3 and the control API over HTTPS with this PEM\n"
               "                  certificate (chain) and key; SIGHUP reads them again\n"
               "  --header-timeout SECONDS\n"
               "                  a client must send a request's headers within this (30)\n"
               "  --max-client-connections N\n"
               "                  active connections one client address may hold (64 of\n"
               "                  256; kept-alive ones waiting for a request not counted)\n"
               "  --nbd-listen    NBD for block volumes (127.0.0.1:10809; off: none)\n"
               "  --nbd-socket    NBD on a Unix socket too (DATA/nbd.sock; off: none)\n"
               "  --nbd-tls       require: NBD over TCP only after STARTTLS (optional)\n"
               "Credentials come from INEC_ACCESS_KEY / INEC_SECRET_KEY / INEC_ADMIN_TOKEN,\n"
               "else DATA/" GW_CREDENTIALS_FILE ", generated on first start.\n");
        return 0;
    }
    if (o.config || o.secret) {
        fprintf(stderr, "inec server: --config and --secret belong to 'inec gateway' (the\n"
                        "embedded nodes talk in-process, over no network)\n");
        return 2;
    }
    if (!o.data)
        o.data = "./inec-data";
    if (!o.listen)
        o.listen = "127.0.0.1:9000";
    if (!o.admin_listen)
        o.admin_listen = "127.0.0.1:9001";
    nbd_defaults(&o);
    if (check_options("server", &o))
        return 2;
    block_signals();
    struct gw_credentials c = {0};
    if (load_credentials("server", o.data, &c))
        return 1;
    struct gw_objects *objects = NULL;
    char msg[256] = "";
    int rc = gw_objects_open_embedded(o.data, &objects, msg, sizeof(msg));
    if (rc) {
        fprintf(stderr, "inec server: starting the embedded cluster: %s\n",
                msg[0] ? msg : strerror(-rc));
        return 1;
    }
    rc = serve("server", &o, objects, &c, "server (embedded: gateway + 9 nodes, RS(6,3))");
    gw_objects_close(objects);
    return rc;
}

int cmd_gateway(int argc, char **argv)
{
    struct opts o = {0};
    if (parse("gateway", argc, argv, &o))
        return 2;
    if (o.help || !o.config) {
        fprintf(o.help ? stdout : stderr,
                "usage: inec gateway --config cluster.json [--data DIR] [--listen HOST:PORT]\n"
                "                    [--admin-listen HOST:PORT] [--base-domain DOMAIN]\n"
                "                    [--tls-cert FILE --tls-key FILE] [--header-timeout SECONDS]\n"
                "                    [--max-client-connections N] [--secret FILE]\n"
                "                    [--nbd-listen HOST:PORT|off] [--nbd-socket PATH|off]\n"
                "                    [--nbd-tls optional|require]\n\n"
                "Runs a gateway in front of storage nodes that run as their own processes.\n"
                "cluster.json names the nodes and pools, and optionally a \"gateway\" object\n"
                "with listen, admin_listen, nbd_listen, nbd_socket, nbd_tls, base_domain,\n"
                "region, data, access_key, secret_key, admin_token, tls_cert, tls_key (files),\n"
                "header_timeout and max_client_connections (numbers). The flags are as for\n"
                "'inec server'. --secret FILE (or \"secret_file\" in cluster.json, relative to\n"
                "it; default cluster.secret beside it; created 0600 if missing) is the cluster\n"
                "secret the gateway and the nodes prove to each other.\n");
        return o.help ? 0 : 2;
    }
    json_error_t jerr;
    json_t *cfg = json_load_file(o.config, 0, &jerr);
    if (!json_is_object(cfg)) {
        fprintf(stderr, "inec gateway: %s: %s\n", o.config, cfg ? "not a JSON object" : jerr.text);
        json_decref(cfg);
        return 2;
    }
    struct gw_credentials c = {0};
    if (apply_config(cfg, &o, &c)) {
        fprintf(stderr, "inec gateway: %s: \"gateway\" must be an object\n", o.config);
        json_decref(cfg);
        return 2;
    }
    if (!o.data)
        o.data = "./inec-gateway";
    if (!o.listen)
        o.listen = "127.0.0.1:9000";
    if (!o.admin_listen)
        o.admin_listen = "127.0.0.1:9001";
    nbd_defaults(&o);
    if (check_options("gateway", &o)) {
        json_decref(cfg);
        return 2;
    }
    char secret[4096];
    if (cli_secret_file(o.secret, o.config, json_string_value(json_object_get(cfg, "secret_file")),
                        secret, sizeof(secret))) {
        json_decref(cfg);
        return 1;
    }
    json_object_set_new(cfg, "secret_file", json_string(secret));
    block_signals();
    int rc = 1;
    struct gw_objects *objects = NULL;
    char msg[256] = "";
    if (load_credentials("gateway", o.data, &c) == 0) {
        int orc = gw_objects_open(cfg, &objects, msg, sizeof(msg));
        if (orc)
            fprintf(stderr, "inec gateway: connecting to the cluster: %s\n",
                    msg[0] ? msg : strerror(-orc));
        else
            rc = serve("gateway", &o, objects, &c, "gateway");
    }
    gw_objects_close(objects);
    json_decref(cfg);
    return rc;
}
