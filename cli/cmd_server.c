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

#include <jansson.h>

#include "cli/commands.h"
#include "gateway/admin_server.h"
#include "gateway/credentials.h"
#include "gateway/metrics.h"
#include "gateway/nbd_server.h"
#include "gateway/objects.h"
#include "gateway/s3_request.h"
#include "gateway/s3_server.h"
#include "inec/log.h"

#define DRAIN_MS 30000 /* what a request in flight gets to finish at shutdown */

struct opts {
    const char *data, *listen, *admin_listen, *base_domain, *region, *config;
    const char *nbd_listen, *nbd_socket;
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
        {"--nbd-listen", offsetof(struct opts, nbd_listen)},
        {"--nbd-socket", offsetof(struct opts, nbd_socket)},
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
    if (!o->nbd_listen && (s = json_string_value(json_object_get(g, "nbd_listen"))))
        o->nbd_listen = s;
    if (!o->nbd_socket && (s = json_string_value(json_object_get(g, "nbd_socket"))))
        o->nbd_socket = s;
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
 * or IPv6 listen address is reached on 127.0.0.1. */
static void client_url(const char *listen, uint16_t port, char *out, size_t len)
{
    char host[64];
    snprintf(host, sizeof(host), "%.*s", (int)strcspn(listen, ":"), listen);
    if (listen[0] == '[' || !host[0] || strcmp(host, "0.0.0.0") == 0)
        strcpy(host, "127.0.0.1");
    snprintf(out, len, "http://%s:%u", host, port);
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

/*
 * Serves until SIGINT/SIGTERM. The signals are blocked in every thread
 * (the servers' threads inherit the mask) and taken here with sigwait, so
 * shutdown runs in ordinary code, not in a handler.
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
    struct gw_s3_config s3cfg = {o->listen, o->base_domain, o->region, c->access_key, c->secret_key,
                                 0,         false,          keys};
    if (rc == 0)
        rc = gw_s3_server_start(&s3cfg, objects, m, &s3, msg, sizeof(msg));
    struct gw_admin_config acfg = {o->admin_listen, c->admin_token, keys};
    if (rc == 0)
        rc = gw_admin_server_start(&acfg, objects, m, &admin, msg, sizeof(msg));
    struct gw_nbd_config ncfg = {o->nbd_listen, o->nbd_socket};
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
        gw_keys_close(keys);
        gw_metrics_destroy(m);
        return 1;
    }
    char s3url[96], adminurl[96];
    client_url(o->listen, gw_s3_server_port(s3), s3url, sizeof(s3url));
    client_url(o->admin_listen, gw_admin_server_port(admin), adminurl, sizeof(adminurl));
    char nbdurl[96] = "";
    if (!o->nbd_listen[0] && !o->nbd_socket[0])
        strcpy(nbdurl, "off");
    if (o->nbd_listen[0]) {
        client_url(o->nbd_listen, gw_nbd_server_port(nbd), nbdurl, sizeof(nbdurl));
        memcpy(nbdurl, "nbd:", 4); /* http://host:port -> nbd://host:port */
        memmove(nbdurl + 4, nbdurl + 5, strlen(nbdurl + 5) + 1);
    }
    if (gw_credentials_note_endpoints(o->data, s3url, adminurl, msg, sizeof(msg)))
        inec_log(INEC_LOG_WARN, "server", "%s", msg);
    banner(o, c, s3url, adminurl, nbdurl, mode);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    inec_log(INEC_LOG_INFO, "server", "shutting down signal=%s", strsignal(sig));
    gw_nbd_server_stop(nbd);
    gw_s3_server_stop(s3, DRAIN_MS);
    gw_admin_server_stop(admin);
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

/* Listen addresses are checked before anything starts: a typo is bad usage. */
static int check_listen(const char *cmd, const struct opts *o)
{
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
               "                   [--base-domain DOMAIN] [--region REGION]\n\n"
               "Runs a gateway and 9 storage nodes (RS(6,3)) in this process.\n"
               "  --data          where everything is stored (./inec-data)\n"
               "  --listen        the S3 endpoint (127.0.0.1:9000; port 0 picks one)\n"
               "  --admin-listen  the control API (127.0.0.1:9001)\n"
               "  --base-domain   serve virtual-host style requests under this domain\n"
               "  --nbd-listen    NBD for block volumes (127.0.0.1:10809; off: none)\n"
               "  --nbd-socket    NBD on a Unix socket too (DATA/nbd.sock; off: none)\n"
               "Credentials come from INEC_ACCESS_KEY / INEC_SECRET_KEY / INEC_ADMIN_TOKEN,\n"
               "else DATA/" GW_CREDENTIALS_FILE ", generated on first start.\n");
        return 0;
    }
    if (o.config) {
        fprintf(stderr, "inec server: --config belongs to 'inec gateway'\n");
        return 2;
    }
    if (!o.data)
        o.data = "./inec-data";
    if (!o.listen)
        o.listen = "127.0.0.1:9000";
    if (!o.admin_listen)
        o.admin_listen = "127.0.0.1:9001";
    nbd_defaults(&o);
    if (check_listen("server", &o))
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
                "                    [--nbd-listen HOST:PORT|off] [--nbd-socket PATH|off]\n\n"
                "Runs a gateway in front of storage nodes that run as their own processes.\n"
                "cluster.json names the nodes and pools, and optionally a \"gateway\" object\n"
                "with listen, admin_listen, nbd_listen, nbd_socket, base_domain, region,\n"
                "data, access_key,\n"
                "secret_key, admin_token.\n");
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
    if (check_listen("gateway", &o)) {
        json_decref(cfg);
        return 2;
    }
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
