/*
 * The NBD server (the contract is in nbd_server.h; the protocol is
 * doc/proto.md of github.com/NetworkBlockDevice/nbd).
 *
 * Threads: one accept thread polls the listening sockets; each connection has
 * its own thread for the handshake and for reading requests, and, once an
 * export is attached, NBD_WORKERS threads that run the requests, so a client
 * with a queue depth above 1 has several stripes in flight. Replies go out
 * whole under the connection's send lock, in completion order (NBD allows
 * any order: the cookie matches them). Over TLS this is GnuTLS's supported
 * sharing of a session: one thread receiving, one (at a time) sending.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <endian.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "gateway/nbd_proto.h"
#include "gateway/tls.h"
#include "gateway/nbd_server.h"
#include "gateway/s3_request.h"
#include "volume/volume.h"
#include "inec/log.h"

/* Handshake */
#define NBDMAGIC             0x4e42444d41474943ull
#define IHAVEOPT             0x49484156454F5054ull
#define OPT_REPLY_MAGIC      0x3e889045565a9ull
#define FLAG_FIXED_NEWSTYLE  (1u << 0)
#define FLAG_NO_ZEROES       (1u << 1)
#define OPT_EXPORT_NAME      1
#define OPT_ABORT            2
#define OPT_LIST             3
#define OPT_STARTTLS         5
#define OPT_INFO             6
#define OPT_GO               7
#define OPT_STRUCTURED_REPLY 8
#define OPT_LIST_META        9
#define OPT_SET_META         10
#define REP_ACK              1
#define REP_SERVER           2
#define REP_INFO             3
#define REP_META_CONTEXT     4
#define REP_ERR_UNSUP        (0x80000000u + 1)
#define REP_ERR_INVALID      (0x80000000u + 3)
#define REP_ERR_TLS_REQD     (0x80000000u + 5)
#define REP_ERR_UNKNOWN      (0x80000000u + 6)
/* Transmission flags */
#define TF_HAS_FLAGS         (1u << 0)
#define TF_SEND_FLUSH        (1u << 2)
#define TF_SEND_FUA          (1u << 3)
#define TF_SEND_TRIM         (1u << 5)
#define TF_SEND_WRITE_ZEROES (1u << 6)
#define TF_CAN_MULTI_CONN    (1u << 8)
/* Requests and replies */
#define REQUEST_MAGIC           0x25609513u
#define SIMPLE_REPLY_MAGIC      0x67446698u
#define STRUCTURED_MAGIC        0x668e33efu
#define REPLY_FLAG_DONE         1
#define REPLY_TYPE_OFFSET_DATA  1
#define REPLY_TYPE_BLOCK_STATUS 5
#define REPLY_TYPE_ERROR        ((1u << 15) + 1)
#define STATE_HOLE              (1u << 0)
#define STATE_ZERO              (1u << 1)
#define ALLOCATION_ID           1    /* the context id of base:allocation */
#define STATUS_MAX_STRIPES      4096 /* stripes one BLOCK_STATUS answer covers */
#define NBD_EPERM               1
#define NBD_EIO                 5
#define NBD_ENOMEM              12
#define NBD_EINVAL              22
#define NBD_ENOSPC              28

#define OPTION_MAX      (64u << 10) /* bytes of one option's data */
#define OPTIONS_MAX     64          /* options of one handshake */
#define HANDSHAKE_S     30          /* a handshake slower than this is dropped */
#define CONNECTIONS_MAX 256
#define NBD_WORKERS     16
#define INFLIGHT_MAX    16

struct gw_nbd_server {
    struct gw_objects *o;
    int tcp_fd, unix_fd, wake[2];
    uint16_t port;
    char unix_path[108];
    pthread_t accept_thread;
    bool started;
    pthread_mutex_t lock;
    bool stop;
    struct conn *conns;
    int nconns;
    gnutls_psk_server_credentials_t psk;
    gnutls_certificate_credentials_t x509; /* the gateway's certificate, NULL: PSK only */
    bool tls_required;                     /* on tcp_fd (gw_nbd_config) */
};

struct job {
    struct job *next;
    struct nbd_request r;
    uint64_t cookie;
    uint8_t *data; /* a WRITE's payload */
};

struct conn {
    struct conn *next;
    struct gw_nbd_server *srv;
    int fd;
    bool tls_required; /* a TCP client while the server requires TLS */
    pthread_t thread;
    _Atomic bool done;
    bool structured, no_zeroes;
    char meta_export[NBD_EXPORT_NAME_MAX + 1]; /* base:allocation was set for this export */
    struct gw_volume *vol;
    gnutls_session_t tls;                  /* after STARTTLS, NULL before */
    bool tls_psk;                          /* the client proved a volume's secret as its PSK */
    char tls_user[GW_VOLUME_NAME_MAX + 1]; /* its PSK identity: the one volume it may attach */
    pthread_mutex_t send_lock;
    /* The request queue between the reading thread and the workers. */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct job *head, *tail;
    int inflight; /* queued or running */
    bool closing;
    pthread_t workers[NBD_WORKERS];
    int nworkers;
};

/* --- socket helpers -------------------------------------------------------------- */

/* Bytes from the client: through TLS once STARTTLS is done. */
static int read_full(struct conn *c, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n;
        if (c->tls) {
            n = gnutls_record_recv(c->tls, p, len);
            if (n == GNUTLS_E_INTERRUPTED)
                continue;
            if (n == GNUTLS_E_AGAIN)
                return -EAGAIN; /* SO_RCVTIMEO: the handshake's time is up */
            if (n < 0)
                return -ECONNRESET;
        } else {
            n = recv(c->fd, p, len, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
        }
        if (n == 0)
            return -ECONNRESET;
        p += n, len -= (size_t)n;
    }
    return 0;
}

static int write_full(struct conn *c, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n;
        if (c->tls) {
            n = gnutls_record_send(c->tls, p, len);
            if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
                continue;
            if (n < 0)
                return -ECONNRESET;
        } else {
            n = send(c->fd, p, len, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
        }
        p += n, len -= (size_t)n;
    }
    return 0;
}

static int discard(struct conn *c, uint64_t len)
{
    uint8_t tmp[16384];
    while (len) {
        size_t n = len < sizeof(tmp) ? (size_t)len : sizeof(tmp);
        int rc = read_full(c, tmp, n);
        if (rc)
            return rc;
        len -= n;
    }
    return 0;
}

static void put16(uint8_t *p, uint16_t v)
{
    v = htobe16(v);
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
    v = htobe32(v);
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    v = htobe64(v);
    memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return be16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return be32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return be64toh(v);
}

/* --- handshake ---------------------------------------------------------------------- */

static int opt_reply(struct conn *c, uint32_t opt, uint32_t type, const void *data, uint32_t len)
{
    uint8_t h[20];
    put64(h, OPT_REPLY_MAGIC);
    put32(h + 8, opt);
    put32(h + 12, type);
    put32(h + 16, len);
    int rc = write_full(c, h, sizeof(h));
    return rc == 0 && len ? write_full(c, data, len) : rc;
}

static int opt_error(struct conn *c, uint32_t opt, uint32_t type, const char *why)
{
    return opt_reply(c, opt, type, why, (uint32_t)strlen(why));
}

/* The volume an export name names: "NAME" or "NAME/SECRET", the secret
 * right (also over TLS with the gateway's certificate, which proves the
 * server, not the client); over TLS-PSK, "NAME" of the identity the client
 * proved. */
static int attach(struct conn *c, const char *export, struct gw_volume **out)
{
    char name[GW_VOLUME_NAME_MAX + 1];
    const char *secret;
    *out = NULL;
    if (nbd_split_export(export, name, sizeof(name), &secret))
        return -ENOENT;
    if (c->tls_psk && strcmp(name, c->tls_user) != 0) {
        inec_log(INEC_LOG_WARN, "nbd", "export refused volume=%s reason=TLS identity %s", name,
                 c->tls_user);
        return -ENOENT;
    }
    struct gw_volume *v;
    int rc = gw_volume_open(c->srv->o, name, &v);
    if (rc)
        return rc == -EINVAL ? -ENOENT : rc;
    /* Over TLS-PSK the key (the volume's secret) proved it already. */
    if (!c->tls_psk && !gw_volume_secret_ok(v, secret)) {
        inec_log(INEC_LOG_WARN, "nbd", "export refused volume=%s reason=%s", name,
                 secret[0] ? "wrong secret" : "no secret");
        gw_volume_close(v);
        return -ENOENT;
    }
    *out = v;
    return 0;
}

static uint16_t transmission_flags(void)
{
    return TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | TF_SEND_TRIM | TF_SEND_WRITE_ZEROES |
           TF_CAN_MULTI_CONN;
}

static int list_cb(struct conn *c)
{
    json_t *vols = NULL;
    int rc = gw_volume_list(c->srv->o, &vols);
    if (rc)
        return opt_error(c, OPT_LIST, REP_ERR_INVALID, "listing the volumes failed");
    size_t i;
    json_t *v;
    json_array_foreach(vols, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        uint8_t buf[4 + GW_VOLUME_NAME_MAX];
        uint32_t n = (uint32_t)strlen(name);
        put32(buf, n);
        memcpy(buf + 4, name, n);
        if ((rc = opt_reply(c, OPT_LIST, REP_SERVER, buf, 4 + n)))
            break;
    }
    json_decref(vols);
    return rc ? rc : opt_reply(c, OPT_LIST, REP_ACK, NULL, 0);
}

/* NBD_OPT_INFO / NBD_OPT_GO; *go set when transmission begins. */
static int info_go(struct conn *c, uint32_t opt, const uint8_t *d, uint32_t len, bool *go)
{
    struct nbd_go q;
    const char *why = "";
    int rc = nbd_parse_go(d, len, &q, &why);
    if (rc)
        return opt_error(c, opt, rc == -ENOENT ? REP_ERR_UNKNOWN : REP_ERR_INVALID, why);
    struct gw_volume *v;
    rc = attach(c, q.export, &v);
    if (rc == -ENOENT)
        return opt_error(c, opt, REP_ERR_UNKNOWN, "no such export (or a wrong secret)");
    if (rc)
        return opt_error(c, opt, REP_ERR_INVALID, "the volume cannot be read now");
    uint8_t info[12];
    put16(info, NBD_INFO_EXPORT);
    put64(info + 2, gw_volume_size(v));
    put16(info + 10, transmission_flags());
    rc = opt_reply(c, opt, REP_INFO, info, 12);
    if (rc == 0) {
        uint8_t bs[14];
        put16(bs, NBD_INFO_BLOCK_SIZE);
        put32(bs + 2, 1);
        put32(bs + 6, 4096);
        put32(bs + 10, GW_NBD_MAX_PAYLOAD);
        rc = opt_reply(c, opt, REP_INFO, bs, 14);
    }
    if (rc == 0 && q.want_name) {
        /* The volume's name, never the secret that came with it. */
        uint32_t n = (uint32_t)strcspn(q.export, "/");
        uint8_t nb[2 + GW_VOLUME_NAME_MAX];
        put16(nb, NBD_INFO_NAME);
        memcpy(nb + 2, q.export, n);
        rc = opt_reply(c, opt, REP_INFO, nb, 2 + n);
    }
    if (rc == 0)
        rc = opt_reply(c, opt, REP_ACK, NULL, 0);
    if (rc == 0 && opt == OPT_GO) {
        if (strcmp(c->meta_export, q.export) != 0)
            c->meta_export[0] = '\0'; /* chosen for another export: none for this one */
        c->vol = v;
        *go = true;
        inec_log(INEC_LOG_INFO, "nbd", "attached export=%.*s size=%llu",
                 (int)strcspn(q.export, "/"), q.export, (unsigned long long)gw_volume_size(v));
    } else {
        gw_volume_close(v);
    }
    return rc;
}

/* NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT: "base:allocation" is the
 * one context (holes are stripes never written or zeroed whole). */
static int meta_context(struct conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
    struct nbd_meta q;
    const char *why = "";
    if (opt == OPT_SET_META)
        c->meta_export[0] = '\0'; /* a SET replaces what an earlier one chose, even failing */
    if (!c->structured)
        return opt_error(c, opt, REP_ERR_INVALID, "negotiate structured replies first");
    int rc = nbd_parse_meta(d, len, &q, &why);
    if (rc)
        return opt_error(c, opt, rc == -ENOENT ? REP_ERR_UNKNOWN : REP_ERR_INVALID, why);
    struct gw_volume *v;
    if ((rc = attach(c, q.export, &v)))
        return opt_error(c, opt, rc == -ENOENT ? REP_ERR_UNKNOWN : REP_ERR_INVALID,
                         rc == -ENOENT ? "no such export (or a wrong secret)"
                                       : "volume unreadable");
    gw_volume_close(v);
    bool chosen = q.allocation || (opt == OPT_LIST_META && (q.nqueries == 0 || q.base));
    rc = 0;
    if (chosen) {
        uint8_t r[4 + 15];
        put32(r, opt == OPT_SET_META ? ALLOCATION_ID : 0);
        memcpy(r + 4, "base:allocation", 15);
        rc = opt_reply(c, opt, REP_META_CONTEXT, r, sizeof(r));
        if (rc == 0 && opt == OPT_SET_META)
            snprintf(c->meta_export, sizeof(c->meta_export), "%s", q.export);
    }
    return rc ? rc : opt_reply(c, opt, REP_ACK, NULL, 0);
}

/* The PSK of identity `user`: the secret of the volume of that name. */
static int psk_lookup(gnutls_session_t session, const char *user, gnutls_datum_t *key)
{
    struct conn *c = gnutls_session_get_ptr(session);
    json_t *info = NULL;
    const char *hex = NULL;
    if (gw_volume_info(c->srv->o, user, &info) == 0)
        hex = json_string_value(json_object_get(info, "secret"));
    size_t n = hex ? strlen(hex) / 2 : 0;
    key->data = n ? gnutls_malloc(n) : NULL;
    key->size = (unsigned)n;
    for (size_t i = 0; key->data && i < n; i++) {
        unsigned b;
        sscanf(hex + 2 * i, "%2x", &b);
        key->data[i] = (unsigned char)b;
    }
    json_decref(info);
    if (!key->data) {
        inec_log(INEC_LOG_WARN, "nbd", "TLS refused: no volume with a secret named %.64s", user);
        return -1;
    }
    return 0;
}

/* The TLS handshake after NBD_OPT_STARTTLS was acknowledged: a PSK whose
 * identity is a volume name and whose key is that volume's secret, or, when
 * the gateway has one, its X.509 certificate (the client chooses). */
static int start_tls(struct conn *c)
{
    int rc = gnutls_init(&c->tls, GNUTLS_SERVER);
    if (rc == 0)
        rc = gnutls_priority_set_direct(c->tls, "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK", NULL);
    if (rc == 0)
        rc = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, c->srv->psk);
    if (rc == 0 && c->srv->x509)
        rc = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->srv->x509);
    if (rc == 0) {
        gnutls_session_set_ptr(c->tls, c);
        gnutls_transport_set_int(c->tls, c->fd);
        gnutls_handshake_set_timeout(c->tls, HANDSHAKE_S * 1000);
        do
            rc = gnutls_handshake(c->tls);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
    }
    if (rc < 0) {
        inec_log(INEC_LOG_WARN, "nbd", "TLS handshake failed: %s", gnutls_strerror(rc));
        return -EPROTO;
    }
    c->tls_psk = gnutls_auth_get_type(c->tls) == GNUTLS_CRD_PSK;
    const char *user = c->tls_psk ? gnutls_psk_server_get_username(c->tls) : NULL;
    snprintf(c->tls_user, sizeof(c->tls_user), "%s", user ? user : "");
    inec_log(INEC_LOG_DEBUG, "nbd", "TLS on auth=%s", c->tls_psk ? "psk" : "x509");
    c->structured = false; /* options agreed in clear do not carry over */
    c->meta_export[0] = '\0';
    return 0;
}

/* Options until one starts transmission (0, c->vol set) or the client
 * leaves or misbehaves (negative: close). */
static int handshake(struct conn *c)
{
    uint8_t greet[18];
    put64(greet, NBDMAGIC);
    put64(greet + 8, IHAVEOPT);
    put16(greet + 16, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
    int rc = write_full(c, greet, sizeof(greet));
    uint8_t cf[4];
    if (rc || (rc = read_full(c, cf, 4)))
        return rc;
    uint32_t cflags = get32(cf);
    if (cflags & ~(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
        return -EPROTO; /* the spec: unknown client flags end the session */
    c->no_zeroes = cflags & FLAG_NO_ZEROES;
    for (int nopt = 0; nopt < OPTIONS_MAX; nopt++) {
        uint8_t h[16];
        if ((rc = read_full(c, h, 16)))
            return rc;
        if (get64(h) != IHAVEOPT)
            return -EPROTO;
        uint32_t opt = get32(h + 8), len = get32(h + 12);
        if (len > OPTION_MAX)
            return -EMSGSIZE;
        uint8_t *d = malloc(len + 1);
        if (!d)
            return -ENOMEM;
        if ((rc = read_full(c, d, len))) {
            free(d);
            return rc;
        }
        d[len] = '\0';
        bool go = false;
        /* TLS required: before STARTTLS only it and ABORT are answered (the
         * NBD spec's FORCEDTLS); EXPORT_NAME has no error reply, so it hangs up. */
        if (c->tls_required && !c->tls && opt != OPT_STARTTLS && opt != OPT_ABORT) {
            free(d);
            if (opt == OPT_EXPORT_NAME) {
                inec_log(INEC_LOG_INFO, "nbd", "plain attach refused: TLS is required");
                return -EACCES;
            }
            if ((rc = opt_error(c, opt, REP_ERR_TLS_REQD,
                                "this server requires TLS: STARTTLS first (nbds://)")))
                return rc;
            continue;
        }
        switch (opt) {
        case OPT_EXPORT_NAME: {
            struct gw_volume *v;
            rc = memchr(d, '\0', len) ? -ENOENT : attach(c, (const char *)d, &v);
            if (rc == 0) {
                uint8_t r[10 + 124] = {0};
                put64(r, gw_volume_size(v));
                put16(r + 8, transmission_flags());
                rc = write_full(c, r, c->no_zeroes ? 10 : sizeof(r));
                c->vol = v;
                if (strcmp(c->meta_export, (const char *)d) != 0)
                    c->meta_export[0] = '\0';
                go = rc == 0;
            }
            /* The only answer to a bad name here is hanging up. */
            break;
        }
        case OPT_ABORT:
            opt_reply(c, opt, REP_ACK, NULL, 0);
            rc = -ECONNABORTED;
            break;
        case OPT_LIST:
            rc = len ? opt_error(c, opt, REP_ERR_INVALID, "LIST takes no data") : list_cb(c);
            break;
        case OPT_STRUCTURED_REPLY:
            if (len) {
                rc = opt_error(c, opt, REP_ERR_INVALID, "STRUCTURED_REPLY takes no data");
            } else {
                c->structured = true;
                rc = opt_reply(c, opt, REP_ACK, NULL, 0);
            }
            break;
        case OPT_LIST_META:
        case OPT_SET_META:
            rc = meta_context(c, opt, d, len);
            break;
        case OPT_INFO:
        case OPT_GO:
            rc = info_go(c, opt, d, len, &go);
            break;
        case OPT_STARTTLS:
            if (len)
                rc = opt_error(c, opt, REP_ERR_INVALID, "STARTTLS takes no data");
            else if (c->tls)
                rc = opt_error(c, opt, REP_ERR_INVALID, "TLS is on already");
            else if ((rc = opt_reply(c, opt, REP_ACK, NULL, 0)) == 0)
                rc = start_tls(c);
            break;
        default:
            rc = opt_error(c, opt, REP_ERR_UNSUP, "unknown option");
            break;
        }
        free(d);
        if (rc || go)
            return rc;
    }
    return -E2BIG;
}

/* --- transmission -------------------------------------------------------------------- */

static uint32_t nbd_errno(int rc)
{
    switch (rc) {
    case 0:
        return 0;
    case -ENOSPC:
    case -EFBIG:
        return NBD_ENOSPC;
    case -EINVAL:
        return NBD_EINVAL;
    case -ENOMEM:
        return NBD_ENOMEM;
    case -EPERM:
        return NBD_EPERM;
    default:
        return NBD_EIO;
    }
}

static int reply_simple(struct conn *c, uint64_t cookie, uint32_t err, const void *data, size_t len)
{
    uint8_t h[16];
    put32(h, SIMPLE_REPLY_MAGIC);
    put32(h + 4, err);
    put64(h + 8, cookie);
    pthread_mutex_lock(&c->send_lock);
    int rc = write_full(c, h, sizeof(h));
    if (rc == 0 && err == 0 && len)
        rc = write_full(c, data, len);
    pthread_mutex_unlock(&c->send_lock);
    return rc;
}

static int reply_chunk(struct conn *c, uint64_t cookie, uint16_t type, const void *head,
                       size_t headlen, const void *data, size_t len)
{
    uint8_t h[20];
    put32(h, STRUCTURED_MAGIC);
    put16(h + 4, REPLY_FLAG_DONE);
    put16(h + 6, type);
    put64(h + 8, cookie);
    put32(h + 16, (uint32_t)(headlen + len));
    pthread_mutex_lock(&c->send_lock);
    int rc = write_full(c, h, sizeof(h));
    if (rc == 0)
        rc = write_full(c, head, headlen);
    if (rc == 0 && len)
        rc = write_full(c, data, len);
    pthread_mutex_unlock(&c->send_lock);
    return rc;
}

/* A reply with no data, or an error: structured when negotiated (an error
 * chunk carries a message for the human), simple otherwise. */
static int reply(struct conn *c, const struct job *j, int rc, const char *why)
{
    uint32_t err = nbd_errno(rc);
    if (!c->structured || err == 0)
        return reply_simple(c, j->cookie, err, NULL, 0);
    uint8_t head[6];
    uint16_t n = (uint16_t)strlen(why);
    put32(head, err);
    put16(head + 4, n);
    uint8_t buf[6 + 256];
    memcpy(buf, head, 6);
    memcpy(buf + 6, why, n < 256 ? n : 256);
    put16(buf + 4, n < 256 ? n : 256);
    return reply_chunk(c, j->cookie, REPLY_TYPE_ERROR, buf, 6 + (n < 256 ? n : 256), NULL, 0);
}

static int do_read(struct conn *c, const struct job *j)
{
    uint8_t *buf = malloc(j->r.length ? j->r.length : 1);
    int rc = buf ? gw_volume_read(c->vol, j->r.offset, j->r.length, buf) : -ENOMEM;
    if (rc) {
        inec_log(INEC_LOG_WARN, "nbd", "read failed offset=%llu length=%u err=%s",
                 (unsigned long long)j->r.offset, j->r.length, strerror(-rc));
        free(buf);
        return reply(c, j, rc, "read failed");
    }
    int src;
    if (c->structured) {
        uint8_t off[8];
        put64(off, j->r.offset);
        src = reply_chunk(c, j->cookie, REPLY_TYPE_OFFSET_DATA, off, 8, buf, j->r.length);
    } else {
        src = reply_simple(c, j->cookie, 0, buf, j->r.length);
    }
    free(buf);
    return src;
}

/* BLOCK_STATUS on base:allocation: stripes with an object are data, the
 * others holes that read as zeros; at most STATUS_MAX_STRIPES stripes per
 * answer (the spec lets a server answer less than asked). */
static int do_block_status(struct conn *c, const struct job *j)
{
    uint64_t sb = gw_volume_stripe_bytes(c->vol), off = j->r.offset;
    uint64_t end = off + j->r.length, first = off / sb;
    size_t n = (size_t)((end - 1) / sb - first + 1);
    if (n > STATUS_MAX_STRIPES)
        n = STATUS_MAX_STRIPES, end = (first + n) * sb;
    bool *present = malloc(n);
    uint8_t *buf = malloc(4 + 8 * n);
    int rc = present && buf ? gw_volume_allocated(c->vol, first, n, present) : -ENOMEM;
    if (rc) {
        free(present);
        free(buf);
        return reply(c, j, rc, "block status failed");
    }
    put32(buf, ALLOCATION_ID);
    size_t nd = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k < n && present[k] == present[i])
            k++;
        uint64_t from = (first + i) * sb, to = (first + k) * sb;
        from = from < off ? off : from;
        to = to > end ? end : to;
        put32(buf + 4 + 8 * nd, (uint32_t)(to - from)); /* at most 4096 stripes: < 4 GiB */
        put32(buf + 8 + 8 * nd, present[i] ? 0 : STATE_HOLE | STATE_ZERO);
        nd++;
        i = k;
        if (j->r.flags & NBD_CMD_FLAG_REQ_ONE)
            break;
    }
    free(present);
    rc = reply_chunk(c, j->cookie, REPLY_TYPE_BLOCK_STATUS, buf, 4 + 8 * nd, NULL, 0);
    free(buf);
    return rc;
}

static void run_job(struct conn *c, struct job *j)
{
    int rc;
    switch (j->r.type) {
    case NBD_CMD_READ:
        rc = do_read(c, j);
        break;
    case NBD_CMD_BLOCK_STATUS:
        rc = do_block_status(c, j);
        break;
    case NBD_CMD_WRITE:
        rc = gw_volume_write(c->vol, j->r.offset, j->r.length, j->data);
        if (rc)
            inec_log(INEC_LOG_WARN, "nbd", "write failed offset=%llu length=%u err=%s",
                     (unsigned long long)j->r.offset, j->r.length, strerror(-rc));
        rc = reply(c, j, rc, "write failed");
        break;
    default: /* TRIM, WRITE_ZEROES: checked by the reader */
        rc = gw_volume_zero(c->vol, j->r.offset, j->r.length);
        rc = reply(c, j, rc, "zeroing failed");
        break;
    }
    if (rc) /* the client is gone: stop reading its requests */
        shutdown(c->fd, SHUT_RDWR);
}

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "nbd-worker");
    struct conn *c = arg;
    pthread_mutex_lock(&c->qlock);
    for (;;) {
        while (!c->head && !c->closing)
            pthread_cond_wait(&c->qcond, &c->qlock);
        if (!c->head)
            break;
        struct job *j = c->head;
        c->head = j->next;
        if (!c->head)
            c->tail = NULL;
        pthread_mutex_unlock(&c->qlock);
        run_job(c, j);
        free(j->data);
        free(j);
        pthread_mutex_lock(&c->qlock);
        c->inflight--;
        pthread_cond_broadcast(&c->qcond);
    }
    pthread_mutex_unlock(&c->qlock);
    return NULL;
}

/* Waits until at most `max` requests are queued or running. */
static void wait_inflight(struct conn *c, int max)
{
    pthread_mutex_lock(&c->qlock);
    while (c->inflight > max)
        pthread_cond_wait(&c->qcond, &c->qlock);
    pthread_mutex_unlock(&c->qlock);
}

static void enqueue(struct conn *c, struct job *j)
{
    wait_inflight(c, INFLIGHT_MAX - 1);
    pthread_mutex_lock(&c->qlock);
    c->inflight++;
    if (c->tail)
        c->tail->next = j;
    else
        c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->qcond);
    pthread_mutex_unlock(&c->qlock);
}

static void transmission(struct conn *c)
{
    for (int i = 0; i < NBD_WORKERS; i++)
        if (pthread_create(&c->workers[i], NULL, worker_main, c) == 0)
            c->nworkers++;
    struct timeval none = {0, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    while (c->nworkers) {
        uint8_t h[28];
        if (read_full(c, h, sizeof(h)))
            break;
        if (get32(h) != REQUEST_MAGIC) {
            inec_log(INEC_LOG_WARN, "nbd", "bad request magic: closing the connection");
            break;
        }
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
            break;
        j->r.flags = get16(h + 4);
        j->r.type = get16(h + 6);
        j->cookie = get64(h + 8);
        j->r.offset = get64(h + 16);
        j->r.length = get32(h + 24);
        if (j->r.type == NBD_CMD_DISC) {
            free(j);
            break;
        }
        const char *why = "";
        int rc = nbd_check_request(&j->r, gw_volume_size(c->vol), GW_NBD_MAX_PAYLOAD, &why);
        if (rc == 0 && j->r.type == NBD_CMD_BLOCK_STATUS && !c->meta_export[0])
            rc = -EINVAL, why = "no metadata context was negotiated";
        if (j->r.type == NBD_CMD_WRITE) { /* the payload follows whatever we answer */
            if (rc == 0 && !(j->data = malloc(j->r.length ? j->r.length : 1)))
                rc = -ENOMEM, why = "out of memory";
            /* A refused payload is read and dropped, unless it is absurd (the
             * spec lets a server hang up on a client that ignored the maximum). */
            int io = rc && j->r.length > 8 * GW_NBD_MAX_PAYLOAD ? -EMSGSIZE
                     : rc                                       ? discard(c, j->r.length)
                          : read_full(c, j->data, j->r.length);
            if (io == -EMSGSIZE)
                inec_log(INEC_LOG_WARN, "nbd", "a %u-byte write: closing the connection",
                         j->r.length);
            if (io) {
                free(j->data);
                free(j);
                break;
            }
        }
        if (rc || j->r.type == NBD_CMD_FLUSH) {
            if (j->r.type == NBD_CMD_FLUSH) /* every write before it is durable once answered */
                wait_inflight(c, 0);
            else
                inec_log(INEC_LOG_INFO, "nbd", "request refused type=%u offset=%llu length=%u: %s",
                         j->r.type, (unsigned long long)j->r.offset, j->r.length, why);
            int src = reply(c, j, rc, why);
            free(j->data);
            free(j);
            if (src)
                break;
            continue;
        }
        enqueue(c, j);
    }
    /* Requests in flight finish (their replies may still reach the client). */
    pthread_mutex_lock(&c->qlock);
    c->closing = true;
    pthread_cond_broadcast(&c->qcond);
    pthread_mutex_unlock(&c->qlock);
    for (int i = 0; i < c->nworkers; i++)
        pthread_join(c->workers[i], NULL);
}

static void *conn_main(void *arg)
{
    pthread_setname_np(pthread_self(), "nbd-conn");
    struct conn *c = arg;
    struct timeval tv = {HANDSHAKE_S, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int rc = handshake(c);
    if (rc == 0) {
        transmission(c);
    } else if (rc != -ECONNRESET && rc != -ECONNABORTED) {
        inec_log(INEC_LOG_WARN, "nbd", "handshake ended: %s",
                 rc == -EPROTO     ? "protocol violation"
                 : rc == -EMSGSIZE ? "option too long"
                 : rc == -E2BIG    ? "too many options"
                 : rc == -EAGAIN   ? "timed out"
                                   : strerror(-rc));
    }
    gw_volume_close(c->vol);
    c->vol = NULL;
    shutdown(c->fd, SHUT_RDWR);
    c->done = true;
    char b = 0;
    if (write(c->srv->wake[1], &b, 1) < 0) { /* the accept thread reaps us */
    }
    return NULL;
}

/* --- accepting ----------------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
    pthread_join(c->thread, NULL);
    if (c->tls)
        gnutls_deinit(c->tls);
    close(c->fd);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->qlock);
    pthread_cond_destroy(&c->qcond);
    free(c);
}

/* Joins the connections that ended (all of them when `all`, after shutting
 * their sockets). */
static void reap(struct gw_nbd_server *s, bool all)
{
    pthread_mutex_lock(&s->lock);
    struct conn **pp = &s->conns, *dead = NULL;
    while (*pp) {
        struct conn *c = *pp;
        if (all)
            shutdown(c->fd, SHUT_RDWR);
        if (all || c->done) {
            *pp = c->next;
            c->next = dead;
            dead = c;
            s->nconns--;
        } else {
            pp = &c->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
    while (dead) {
        struct conn *c = dead;
        dead = c->next;
        conn_free(c);
    }
}

static void accept_one(struct gw_nbd_server *s, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails harmlessly on Unix */
    pthread_mutex_lock(&s->lock);
    bool full = s->nconns >= CONNECTIONS_MAX;
    pthread_mutex_unlock(&s->lock);
    struct conn *c = full ? NULL : calloc(1, sizeof(*c));
    if (!c) {
        inec_log(INEC_LOG_WARN, "nbd", "connection refused: %d connections open", CONNECTIONS_MAX);
        close(fd);
        return;
    }
    c->srv = s;
    c->fd = fd;
    c->tls_required = s->tls_required && lfd == s->tcp_fd;
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->qlock, NULL);
    pthread_cond_init(&c->qcond, NULL);
    if (pthread_create(&c->thread, NULL, conn_main, c)) {
        close(fd);
        free(c);
        return;
    }
    pthread_mutex_lock(&s->lock);
    c->next = s->conns;
    s->conns = c;
    s->nconns++;
    pthread_mutex_unlock(&s->lock);
}

static void *accept_main(void *arg)
{
    pthread_setname_np(pthread_self(), "nbd-accept");
    struct gw_nbd_server *s = arg;
    for (;;) {
        struct pollfd p[3] = {
            {s->wake[0], POLLIN, 0}, {s->tcp_fd, POLLIN, 0}, {s->unix_fd, POLLIN, 0}};
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents) {
            char b[64];
            if (read(s->wake[0], b, sizeof(b)) < 0) {
            }
            pthread_mutex_lock(&s->lock);
            bool stop = s->stop;
            pthread_mutex_unlock(&s->lock);
            if (stop)
                break;
            reap(s, false);
        }
        for (int i = 1; i < 3; i++)
            if (p[i].revents & POLLIN)
                accept_one(s, p[i].fd);
    }
    return NULL;
}

static int listen_tcp(struct gw_nbd_server *s, const char *addr, char *msg, size_t msglen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (gw_parse_listen(addr, &ss, &len)) {
        snprintf(msg, msglen, "NBD listen address '%s' is not HOST:PORT", addr);
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 64)) {
        int rc = -errno;
        snprintf(msg, msglen, "NBD listen on %s: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    getsockname(fd, (struct sockaddr *)&ss, &len);
    s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
    s->tcp_fd = fd;
    return 0;
}

static int listen_unix(struct gw_nbd_server *s, const char *path, char *msg, size_t msglen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path)) {
        snprintf(msg, msglen, "NBD socket path '%s' is too long", path);
        return -ENAMETOOLONG;
    }
    strcpy(sun.sun_path, path);
    unlink(path); /* a socket left by a process that died */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) || listen(fd, 64)) {
        int rc = -errno;
        snprintf(msg, msglen, "NBD socket %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    chmod(path, 0660);
    snprintf(s->unix_path, sizeof(s->unix_path), "%s", path);
    s->unix_fd = fd;
    return 0;
}

int gw_nbd_server_start(const struct gw_nbd_config *cfg, struct gw_objects *o,
                        struct gw_nbd_server **out, char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_nbd_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->o = o;
    s->tcp_fd = s->unix_fd = s->wake[0] = s->wake[1] = -1;
    s->tls_required = cfg->tls_required;
    pthread_mutex_init(&s->lock, NULL);
    int rc = pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) ? -errno : 0;
    if (rc == 0 && gnutls_psk_allocate_server_credentials(&s->psk) < 0)
        rc = -ENOMEM;
    if (rc == 0)
        gnutls_psk_set_server_credentials_function(s->psk, psk_lookup);
    if (rc == 0 && cfg->tls) { /* the gateway's certificate, as reloaded (tls.h) */
        int grc = gnutls_certificate_allocate_credentials(&s->x509);
        if (grc < 0) {
            snprintf(msg, msglen, "NBD TLS certificate: %s", gnutls_strerror(grc));
            rc = -ENOMEM;
        } else {
            gw_tls_serve(cfg->tls, s->x509);
        }
    }
    if (rc == 0 && cfg->listen && cfg->listen[0])
        rc = listen_tcp(s, cfg->listen, msg, msglen);
    if (rc == 0 && cfg->unix_path && cfg->unix_path[0])
        rc = listen_unix(s, cfg->unix_path, msg, msglen);
    if (rc == 0)
        rc = -pthread_create(&s->accept_thread, NULL, accept_main, s);
    if (rc) {
        gw_nbd_server_stop(s);
        return rc;
    }
    s->started = true;
    *out = s;
    return 0;
}

uint16_t gw_nbd_server_port(const struct gw_nbd_server *s)
{
    return s ? s->port : 0;
}

void gw_nbd_server_stop(struct gw_nbd_server *s)
{
    if (!s)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_mutex_unlock(&s->lock);
        char b = 1;
        if (write(s->wake[1], &b, 1) < 0) {
        }
        pthread_join(s->accept_thread, NULL);
    }
    reap(s, true);
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    if (s->unix_fd >= 0) {
        close(s->unix_fd);
        unlink(s->unix_path);
    }
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    if (s->psk)
        gnutls_psk_free_server_credentials(s->psk);
    if (s->x509)
        gnutls_certificate_free_credentials(s->x509);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
