/*
 * `inec bench s3`: S3 PUT and GET throughput and latency through the real
 * HTTP stack, against ceilings measured in the same run.
 *
 * Clients are threads of this process, each with one keep-alive HTTP/1.1
 * connection over loopback, signing every request with SigV4
 * (gw_sigv4_sign; PUT bodies UNSIGNED-PAYLOAD or with their SHA-256 signed).
 * The gateway under test is embedded (this process's gw_s3_server and object
 * layer), its nodes in this process over mem (as `inec server`) or `inec
 * node` processes over tcp (as scripts/cluster.sh), one pass each; or it is
 * another process (`--cluster cluster.json`, `--endpoint`). The floor is the
 * same gw_s3_server with cfg.floor set: same HTTP library, same threads, same
 * signature checks, no storage; ratio = inec / floor. The disk limit is the
 * data directory's disk written sequentially with fdatasync, times the
 * profile's data fraction: what a PUT could reach if storing cost nothing
 * but the disk.
 *
 * Objects hold gw_s3_floor_bytes(key), the bytes the floor answers, so every
 * GET body of both servers is compared byte for byte with what it must be:
 * a wrong answer fails the run rather than looking fast.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "bench/bench.h"
#include "gateway/credentials.h"
#include "object/objects.h"
#include "gateway/s3_server.h"
#include "gateway/sigv4.h"
#include "inec/hostport.h"
#include "inec/log.h"

#define MAX_SIZES     16
#define MAX_CLIENTS   64
#define STORE_BUDGET  (256ull << 20) /* bytes kept per cell: bounds keys per client */
#define MAX_KEYS      100            /* per client per cell */
#define IO_TIMEOUT_S  60
#define RECV_BUF      (256u << 10)
#define SIGNED_HEADER "host;x-amz-content-sha256;x-amz-date"
#define DISK_ROUNDS   3 /* passes of the disk limit, the best counts */

struct target {
    const char *name;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char host[300]; /* the Host header */
    const char *access_key, *secret_key, *region;
};

enum op { OP_PUT, OP_GET };

struct stats {
    uint64_t ops, connects;
    double mbps, opss, p50, p95, p99; /* latencies in ms */
};

struct phase;

struct worker {
    struct phase *ph;
    int id;
    int fd;
    double *lat;
    size_t nlat, cap;
    uint64_t bytes;
    int keys;     /* distinct keys it wrote (PUT) or reads (GET) */
    int connects; /* connections opened: 1 while the server keeps them alive */
    char err[512];
    uint8_t *rbuf;
};

struct phase {
    const struct target *t;
    const char *bucket;
    enum op op;
    bool signed_payload;
    uint64_t size;
    int clients, keys_max;
    int *written; /* per client: keys written by the PUT phase */
    double t0, deadline;
    pthread_barrier_t start;
};

static void key_name(char *buf, size_t len, uint64_t size, int client, int k)
{
    snprintf(buf, len, "s%llu-c%d-k%d", (unsigned long long)size, client, k);
}

/* ---- one HTTP/1.1 connection ---- */

static int conn_open(const struct target *t, char *err, size_t errlen)
{
    int fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&t->addr, t->addrlen) != 0) {
        snprintf(err, errlen, "connecting to %s (%s): %s", t->host, t->name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const struct iovec *iov, int n)
{
    struct iovec v[2];
    memcpy(v, iov, (size_t)n * sizeof(*iov));
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)n};
    while (mh.msg_iovlen) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        while (mh.msg_iovlen && (size_t)w >= mh.msg_iov->iov_len) {
            w -= (ssize_t)mh.msg_iov->iov_len;
            mh.msg_iov++;
            mh.msg_iovlen--;
        }
        if (mh.msg_iovlen) {
            mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + w;
            mh.msg_iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

struct hdr_arg {
    const char *host, *date, *sha256;
};

static const char *sign_header(void *arg, const char *name)
{
    struct hdr_arg *h = arg;
    if (strcasecmp(name, "host") == 0)
        return h->host;
    if (strcasecmp(name, "x-amz-date") == 0)
        return h->date;
    if (strcasecmp(name, "x-amz-content-sha256") == 0)
        return h->sha256;
    return NULL;
}

/* Compares a piece of a GET body with the bytes the object must hold. */
static bool same_bytes(const char *key, uint64_t off, const uint8_t *p, size_t n)
{
    while (n) {
        size_t avail;
        const uint8_t *want = gw_s3_floor_bytes(key, off, &avail);
        size_t k = n < avail ? n : avail;
        if (memcmp(p, want, k) != 0)
            return false;
        p += k, off += k, n -= k;
    }
    return true;
}

/* The hex SHA-256 of a PUT body (the key's pattern), as a client that signs
 * its payload computes it before sending (boto3 does, over HTTP). */
static int body_sha256(const char *key, uint64_t size, char hex[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    for (uint64_t off = 0; ok && off < size;) {
        size_t avail;
        const uint8_t *p = gw_s3_floor_bytes(key, off, &avail);
        size_t k = size - off < avail ? (size_t)(size - off) : avail;
        ok = EVP_DigestUpdate(md, p, k) == 1;
        off += k;
    }
    uint8_t d[32];
    unsigned n = 0;
    ok = ok && EVP_DigestFinal_ex(md, d, &n) == 1 && n == 32;
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return ok ? 0 : -1;
}

/*
 * One request on the worker's connection: PUT sends `size` bytes of the
 * key's pattern (with its SHA-256 signed when w->ph->signed_payload, else
 * UNSIGNED-PAYLOAD); GET checks the body is exactly those bytes. Any other
 * method sends and expects no object body. Returns the status, or -1 with
 * w->err set (the connection is then closed).
 */
static int request(struct worker *w, const struct target *t, const char *method, const char *bucket,
                   const char *key, uint64_t size)
{
    char path[160], date[17], authz[512], head[2048], sha[65] = "UNSIGNED-PAYLOAD";
    snprintf(path, sizeof(path), "/%s%s%s", bucket, key ? "/" : "", key ? key : "");
    gw_sigv4_amz_date((int64_t)time(NULL), date);
    bool put = strcmp(method, "PUT") == 0 && key;
    if (put && w->ph && w->ph->signed_payload && body_sha256(key, size, sha) != 0) {
        snprintf(w->err, sizeof(w->err), "SHA-256 failed");
        return -1;
    }
    struct hdr_arg ha = {t->host, date, sha};
    struct gw_sigv4_request sreq = {method, path, NULL, sign_header, &ha, NULL};
    struct gw_sigv4_signer signer = {t->access_key, t->secret_key, t->region, SIGNED_HEADER, date};
    if (gw_sigv4_sign(&sreq, &signer, authz, sizeof(authz)) != 0) {
        snprintf(w->err, sizeof(w->err), "signing failed");
        return -1;
    }
    int hl =
        snprintf(head, sizeof(head),
                 "%s %s HTTP/1.1\r\nHost: %s\r\nx-amz-date: %s\r\n"
                 "x-amz-content-sha256: %s\r\nAuthorization: %s\r\n"
                 "Content-Length: %llu\r\n\r\n",
                 method, path, t->host, date, sha, authz, (unsigned long long)(put ? size : 0));
    if (w->fd < 0) {
        if ((w->fd = conn_open(t, w->err, sizeof(w->err))) < 0)
            return -1;
        w->connects++;
    }

    /* the request: headers and the first piece of body in one send */
    uint64_t off = 0;
    struct iovec iov[2] = {{head, (size_t)hl}, {NULL, 0}};
    int rc = 0;
    do {
        int n = 1;
        if (put && off < size) {
            size_t avail;
            const uint8_t *p = gw_s3_floor_bytes(key, off, &avail);
            size_t k = size - off < avail ? (size_t)(size - off) : avail;
            iov[n++] = (struct iovec){(void *)p, k};
            off += k;
        }
        rc = send_all(w->fd, iov[0].iov_len ? iov : iov + 1, iov[0].iov_len ? n : n - 1);
        iov[0].iov_len = 0;
    } while (rc == 0 && put && off < size);
    if (rc) {
        snprintf(w->err, sizeof(w->err), "%s %s: send: %s", method, path, strerror(errno));
        goto fail;
    }

    /* the response's head */
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == RECV_BUF - 1) {
            snprintf(w->err, sizeof(w->err), "%s %s: response head too long", method, path);
            goto fail;
        }
        ssize_t r = recv(w->fd, w->rbuf + have, RECV_BUF - 1 - have, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(w->err, sizeof(w->err), "%s %s: %s before a response", method, path,
                     r == 0 ? "connection closed" : strerror(errno));
            goto fail;
        }
        have += (size_t)r;
        w->rbuf[have] = '\0';
        end = strstr((char *)w->rbuf, "\r\n\r\n");
    }
    int status = 0;
    long long clen = -1;
    bool close_after = false;
    if (sscanf((char *)w->rbuf, "HTTP/1.%*d %d", &status) != 1) {
        snprintf(w->err, sizeof(w->err), "%s %s: not an HTTP response", method, path);
        goto fail;
    }
    for (char *line = strstr((char *)w->rbuf, "\r\n") + 2; line < end;
         line = strstr(line, "\r\n") + 2) {
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtoll(line + 15, NULL, 10);
        else if (strncasecmp(line, "Connection:", 11) == 0)
            close_after = strncasecmp(line + 11 + strspn(line + 11, " "), "close", 5) == 0;
        else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0) {
            snprintf(w->err, sizeof(w->err), "%s %s: chunked responses are not expected", method,
                     path);
            goto fail;
        }
    }
    if (status == 204 || status == 304 || strcmp(method, "HEAD") == 0)
        clen = 0; /* no body whatever the head says */
    if (clen < 0) {
        snprintf(w->err, sizeof(w->err), "%s %s: response without Content-Length", method, path);
        goto fail;
    }

    /* the body: checked piece by piece, kept only for an error message */
    bool check = strcmp(method, "GET") == 0 && key && status == 200;
    if (check && (uint64_t)clen != size) {
        snprintf(w->err, sizeof(w->err), "GET %s: %lld bytes, expected %llu", path, clen,
                 (unsigned long long)size);
        goto fail;
    }
    char errbody[300] = "";
    size_t body0 = (size_t)(end + 4 - (char *)w->rbuf);
    uint64_t got = 0, want = clen > 0 ? (uint64_t)clen : 0;
    uint8_t *piece = w->rbuf + body0;
    size_t plen = have - body0;
    for (;;) {
        if (got + plen > want) {
            snprintf(w->err, sizeof(w->err), "%s %s: more bytes than Content-Length", method, path);
            goto fail;
        }
        if (check && !same_bytes(key, got, piece, plen)) {
            snprintf(w->err, sizeof(w->err),
                     "GET %s: wrong bytes in [%llu, %llu): the server returned something else",
                     path, (unsigned long long)got, (unsigned long long)(got + plen));
            goto fail;
        }
        if (!check && got < sizeof(errbody) - 1) {
            size_t k = sizeof(errbody) - 1 - got < plen ? sizeof(errbody) - 1 - got : plen;
            memcpy(errbody + got, piece, k);
            errbody[got + k] = '\0';
        }
        got += plen;
        if (got == want)
            break;
        ssize_t r = recv(w->fd, w->rbuf, RECV_BUF, 0);
        if (r < 0 && errno == EINTR) {
            plen = 0;
            continue;
        }
        if (r <= 0) {
            snprintf(w->err, sizeof(w->err), "%s %s: body cut after %llu of %llu bytes (%s)",
                     method, path, (unsigned long long)got, (unsigned long long)want,
                     r == 0 ? "closed" : strerror(errno));
            goto fail;
        }
        piece = w->rbuf;
        plen = (size_t)r;
    }
    if (check)
        w->bytes += got;
    else if (put && status == 200)
        w->bytes += size;
    if (close_after) {
        close(w->fd);
        w->fd = -1;
    }
    if (status >= 300) {
        char *code = strstr(errbody, "<Code>");
        snprintf(w->err, sizeof(w->err), "%s %s: HTTP %d %.*s", method, path, status,
                 code ? (int)strcspn(code + 6, "<") : 0, code ? code + 6 : "");
    }
    return status;
fail:
    close(w->fd);
    w->fd = -1;
    return -1;
}

/* ---- phases: `clients` threads doing one op until the deadline ---- */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct phase *ph = w->ph;
    w->fd = conn_open(ph->t, w->err, sizeof(w->err));
    w->connects = 1;
    pthread_barrier_wait(&ph->start);
    if (w->fd < 0)
        return NULL;
    int nkeys = ph->op == OP_PUT ? ph->keys_max : ph->written[w->id];
    char key[64];
    for (int i = 0; i == 0 || bench_now() < ph->deadline; i++) {
        key_name(key, sizeof(key), ph->size, w->id, i % nkeys);
        double t0 = bench_now();
        int st = request(w, ph->t, ph->op == OP_PUT ? "PUT" : "GET", ph->bucket, key, ph->size);
        if (st != 200) {
            if (st >= 0 && !w->err[0])
                snprintf(w->err, sizeof(w->err), "HTTP %d", st);
            break;
        }
        if (w->nlat == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 1024;
            double *nl = realloc(w->lat, cap * sizeof(*nl));
            if (!nl) {
                snprintf(w->err, sizeof(w->err), "out of memory");
                break;
            }
            w->lat = nl, w->cap = cap;
        }
        w->lat[w->nlat++] = bench_now() - t0;
        if (ph->op == OP_PUT && i < nkeys)
            w->keys = i + 1;
    }
    if (w->fd >= 0)
        close(w->fd);
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_phase(struct phase *ph, double seconds, struct stats *st, char *err, size_t errlen)
{
    struct worker w[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    memset(w, 0, sizeof(w));
    pthread_barrier_init(&ph->start, NULL, (unsigned)ph->clients + 1);
    int started = 0, rc = 0;
    for (; started < ph->clients; started++) {
        w[started] = (struct worker){.ph = ph, .id = started, .fd = -1};
        if (!(w[started].rbuf = malloc(RECV_BUF)) ||
            pthread_create(&th[started], NULL, worker_main, &w[started]) != 0) {
            free(w[started].rbuf);
            break;
        }
    }
    if (started < ph->clients) { /* the barrier would never open: fail the rest */
        snprintf(err, errlen, "cannot start %d client threads", ph->clients);
        ph->clients = started;
        rc = -EAGAIN;
    }
    ph->t0 = bench_now();
    ph->deadline = ph->t0 + seconds;
    if (rc == 0)
        pthread_barrier_wait(&ph->start);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    double wall = bench_now() - ph->t0;
    pthread_barrier_destroy(&ph->start);

    size_t n = 0;
    uint64_t bytes = 0, connects = 0;
    for (int i = 0; i < started; i++) {
        if (w[i].err[0] && rc == 0) {
            snprintf(err, errlen, "%s client %d: %s", ph->t->name, i, w[i].err);
            rc = -EIO;
        }
        n += w[i].nlat;
        bytes += w[i].bytes;
        connects += (uint64_t)w[i].connects;
        if (ph->op == OP_PUT)
            ph->written[i] = w[i].keys;
    }
    double *all = rc == 0 && n ? malloc(n * sizeof(*all)) : NULL;
    if (rc == 0 && !all)
        rc = -ENOMEM;
    size_t k = 0;
    for (int i = 0; i < started; i++) {
        if (all)
            memcpy(all + k, w[i].lat, w[i].nlat * sizeof(*all));
        k += w[i].nlat;
        free(w[i].lat);
        free(w[i].rbuf);
    }
    if (rc == 0) {
        qsort(all, n, sizeof(*all), by_value);
        *st = (struct stats){
            .ops = n,
            .connects = connects,
            .mbps = (double)bytes / wall / 1e6,
            .opss = (double)n / wall,
            .p50 = all[(size_t)((double)(n - 1) * 0.50)] * 1e3,
            .p95 = all[(size_t)((double)(n - 1) * 0.95)] * 1e3,
            .p99 = all[(size_t)((double)(n - 1) * 0.99)] * 1e3,
        };
    }
    free(all);
    return rc;
}

/* MB/s of one core's MD5, measured now: a PUT's ETag is the MD5 of its body,
 * one sequential chain, so no single PUT can go faster however many disks. */
static double md5_limit_mbps(void)
{
    const size_t len = 16u << 20;
    uint8_t *buf = malloc(len), md[EVP_MAX_MD_SIZE];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    double best = 0;
    if (buf && ctx) {
        memset(buf, 0x5a, len);
        for (int i = 0; i < 4; i++) {
            double t0 = bench_now();
            unsigned n;
            EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
            EVP_DigestUpdate(ctx, buf, len);
            EVP_DigestFinal_ex(ctx, md, &n);
            double mbps = len / 1e6 / (bench_now() - t0);
            best = mbps > best ? mbps : best;
        }
    }
    EVP_MD_CTX_free(ctx);
    free(buf);
    return best;
}

/* ---- setup: targets, options ---- */

static int resolve(struct target *t, const char *hostport, char *err, size_t errlen)
{
    char host[256], port[8], dial[300];
    if (inec_hostport_split(hostport, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, errlen, "bad address '%s' (want HOST:PORT, an IPv6 HOST in brackets)",
                 hostport);
        return -EINVAL;
    }
    /* a wildcard listen address is reached on this host's loopback */
    bool any = !host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
    snprintf(dial, sizeof(dial), any ? "127.0.0.1:%s" : "%s", any ? port : hostport);
    socklen_t len;
    if (inec_hostport_resolve(dial, false, &t->addr, &len)) {
        snprintf(err, errlen, "cannot resolve '%s'", hostport);
        return -EINVAL;
    }
    t->addrlen = len;
    snprintf(t->host, sizeof(t->host), "%s", hostport);
    return 0;
}

static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    return v && *v ? v : getenv(b);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: inec bench s3 [--size S,S,...] [--clients N,N,...] [--seconds SEC]\n"
            "                     [--transport mem,tcp] [--payload unsigned,signed]\n"
            "                     [--quick] [--json] [--plot FILE.png] [--profile P] [--dir DIR]\n"
            "                     [--inline-max BYTES]\n"
            "                     [--cluster cluster.json | --endpoint HOST:PORT]\n\n"
            "S3 PUT, GET and degraded GET over HTTP/1.1 keep-alive connections from client\n"
            "threads (SigV4; every GET body checked byte for byte), against ceilings\n"
            "measured in the same run: the floor, the same S3 HTTP server with no storage\n"
            "(ratio = inec / floor MB/s), and the disk limit, sequential write + fdatasync\n"
            "of the data directory's disk x k/(k+m) (disk = PUT MB/s / it). MB = 1e6\n"
            "bytes; latencies per request, in ms.\n"
            "  --size      object sizes (4K,64K,1M,16M,64M; --quick 4K,1M,16M)\n"
            "  --clients   concurrent clients (1,4,16; --quick 1,4)\n"
            "  --seconds   time per phase per cell (2; --quick 0.25); every client does at\n"
            "              least one request\n"
            "  --transport the embedded gateway's nodes, one pass each (mem,tcp; --quick\n"
            "              mem): mem = 9 nodes in this process, as `inec server`; tcp = 9\n"
            "              `inec node` processes on loopback, as scripts/cluster.sh starts\n"
            "              them (vs mem = tcp MB/s / mem MB/s of the same cell)\n"
            "  --payload   PUT bodies UNSIGNED-PAYLOAD, or signed: the body's SHA-256 in\n"
            "              x-amz-content-sha256, computed by the client first, as boto3\n"
            "              does over HTTP (unsigned,signed)\n"
            "  --plot      MB/s against clients per transport, size and operation, floor\n"
            "              dashed\n"
            "  (default)   embedded: data in a temporary directory (--dir), profile\n"
            "              rs:k=6,m=3 (--profile); degraded GET stops m nodes (degr:\n"
            "              stripes decoded per GET; vs GET: MB/s over the same GETs with\n"
            "              every node up, measured right before)\n"
            "  --inline-max the embedded gateway's inline_max: bodies up to it go inline\n"
            "              in their metadata records (default 131072; 0: every body in stripes)\n"
            "  --cluster   the gateway of scripts/cluster.sh (listen and keys from\n"
            "              cluster.json, else its data dir's credentials.json)\n"
            "  --endpoint  any S3 gateway; keys from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY\n"
            "              (or INEC_ACCESS_KEY/INEC_SECRET_KEY), region AWS_DEFAULT_REGION\n"
            "  Against another process there is no degraded GET (its nodes are not ours)\n"
            "  and no disk limit (its disk is not ours).\n");
}

/* The embedded pool's profile: m (how many nodes a stripe may lose) and the
 * fraction of stored bytes that are data, k / (k + m + l + r). */
static int pool_profile(struct gw_objects *o, double *data_fraction)
{
    json_t *pools = NULL;
    int k = 0, m = 0, l = 0, r = 0;
    if (gw_objects_pools_json(o, &pools) == 0) {
        const char *p = json_string_value(json_object_get(json_array_get(pools, 0), "profile"));
        const char *c = p ? strchr(p, ':') : NULL;
        for (; c && *c; c = strchr(c, ',')) {
            c++;
            int v = atoi(c + 2);
            if (c[1] != '=')
                continue;
            k = c[0] == 'k' ? v : k, m = c[0] == 'm' ? v : m;
            l = c[0] == 'l' ? v : l, r = c[0] == 'r' ? v : r;
        }
    }
    json_decref(pools);
    *data_fraction = k > 0 ? (double)k / (k + m + l + r) : 0;
    return m;
}

/*
 * The m nodes to stop: those holding the first m data chunks of `key`'s
 * first stripe, so GETs of it must decode (a small object's stripe may not
 * touch any node of a fixed choice). Other keys are placed elsewhere: the
 * "degr" column says how many stripes per GET were really decoded.
 */
static int pick_nodes(struct gw_objects *o, const char *bucket, const char *key, int m,
                      char ids[][16])
{
    json_t *obj = NULL;
    int rc = gw_objects_object_json(o, bucket, key, &obj);
    json_t *chunks = json_object_get(json_array_get(json_object_get(obj, "stripes"), 0), "chunks");
    if (!chunks) /* an inline object: m of its metadata homes */
        chunks = json_object_get(json_object_get(obj, "inline"), "homes");
    for (int i = 0; rc == 0 && i < m; i++) {
        const char *id =
            json_string_value(json_object_get(json_array_get(chunks, (size_t)i), "node"));
        if (!id || strlen(id) >= 16)
            rc = -EINVAL;
        else
            strcpy(ids[i], id);
    }
    json_decref(obj);
    return rc;
}

/* Stops (running false) or restarts the nodes `ids`: embedded through the
 * object layer, on tcp their processes. */
static int set_nodes(struct gw_objects *o, struct bench_nodes *procs, char ids[][16], int m,
                     bool running, char *err, size_t errlen)
{
    for (int i = 0; i < m; i++) {
        int rc;
        if (!procs) {
            rc = gw_objects_node_set_running(o, ids[i], running);
            if (rc)
                snprintf(err, errlen, "%s node %s: %s", running ? "restarting" : "stopping", ids[i],
                         strerror(-rc));
        } else if (ids[i][0] != 'n' || atoi(ids[i] + 1) < 0 ||
                   atoi(ids[i] + 1) >= BENCH_NODES_MAX) {
            snprintf(err, errlen, "node %s is not one of ours", ids[i]);
            rc = -EINVAL;
        } else if (running) {
            rc = bench_nodes_start_one(procs, atoi(ids[i] + 1), err, errlen);
        } else {
            bench_nodes_stop_one(procs, atoi(ids[i] + 1));
            rc = 0;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Until the gateway sees every node up again (its failure detector marks a
 * stopped node down; the next cell's stopped nodes must be the only ones). */
/* Until the restarted nodes are up again and the repair their absence queued
 * (the degraded GETs report what they read around) is done: the next cell
 * then measures the steady state, not a cluster busy repairing. */
static int wait_all_up(struct gw_objects *o, char *err, size_t errlen)
{
    for (double deadline = bench_now() + 60;;) {
        json_t *cl = NULL, *n;
        size_t i;
        bool all = gw_objects_cluster_json(o, &cl) == 0;
        json_array_foreach(json_object_get(cl, "nodes"), i, n) all &=
            json_is_true(json_object_get(n, "up")) && !json_is_true(json_object_get(n, "suspect"));
        json_decref(cl);
        struct gw_objects_stats st;
        if (all && gw_objects_counters(o, &st) == 0 && st.repair_queue == 0)
            return 0;
        if (bench_now() > deadline) {
            snprintf(err, errlen, "the restarted nodes were not up and repaired within 60 s");
            return -ETIMEDOUT;
        }
        usleep(50000);
    }
}

/* Remote clusters: cluster.json's gateway section, else its credentials.json. */
static int cluster_target(const char *path, struct target *t, char *keys[2], char *err,
                          size_t errlen)
{
    json_error_t jerr;
    json_t *cfg = json_load_file(path, 0, &jerr);
    if (!json_is_object(cfg)) {
        snprintf(err, errlen, "%s: %s", path, cfg ? "not a JSON object" : jerr.text);
        json_decref(cfg);
        return -EINVAL;
    }
    json_t *g = json_object_get(cfg, "gateway");
    const char *listen = json_string_value(json_object_get(g, "listen"));
    const char *data = json_string_value(json_object_get(g, "data"));
    const char *ak = json_string_value(json_object_get(g, "access_key"));
    const char *sk = json_string_value(json_object_get(g, "secret_key"));
    const char *region = json_string_value(json_object_get(g, "region"));
    int rc = resolve(t, listen ? listen : "127.0.0.1:9000", err, errlen);
    json_t *cred = NULL;
    if (rc == 0 && (!ak || !sk)) {
        ak = env2("INEC_ACCESS_KEY", "AWS_ACCESS_KEY_ID");
        sk = env2("INEC_SECRET_KEY", "AWS_SECRET_ACCESS_KEY");
    }
    if (rc == 0 && (!ak || !sk)) {
        char file[4200];
        snprintf(file, sizeof(file), "%s/%s", data ? data : "./inec-gateway", GW_CREDENTIALS_FILE);
        cred = json_load_file(file, 0, &jerr);
        ak = json_string_value(json_object_get(cred, "access_key"));
        sk = json_string_value(json_object_get(cred, "secret_key"));
        if (!ak || !sk) {
            snprintf(err, errlen, "no S3 keys: not in %s, the environment or %.500s", path, file);
            rc = -EINVAL;
        }
    }
    if (rc == 0) {
        keys[0] = strdup(ak);
        keys[1] = strdup(sk);
        t->region = region ? strdup(region) : NULL;
    }
    json_decref(cred);
    json_decref(cfg);
    return rc;
}

/* One row: an operation of one cell on one transport. */
enum row_op { ROW_PUT, ROW_PUT_SIGNED, ROW_GET, ROW_GET_DEGR, ROW_OPS };
static const char *const row_names[ROW_OPS] = {"PUT", "PUT-sig", "GET", "GET-degr"};

struct cell {
    const char *transport;
    uint64_t size;
    int clients;
    enum row_op op;
    struct stats s, floor;
    double disk_limit; /* MB/s; 0: not measured */
    double mem_mbps;   /* the same cell over mem (tcp rows); 0: none */
    uint64_t degraded_stripes;
    double vs_get; /* GET-degr: MB/s over a GET of the same keys with every node up, just before */
};

static void print_header(bool embedded)
{
    printf("%-9s %-5s %7s %-8s %9s %9s %8s %8s %8s %10s %9s %6s %6s %6s%s\n", "transport", "size",
           "clients", "op", "MB/s", "ops/s", "p50 ms", "p95 ms", "p99 ms", "floor MB/s",
           "floor p50", "ratio", "disk", "vs mem", embedded ? "  degr vs GET" : "");
}

static void print_cell(const struct cell *c, json_t *rows, bool json)
{
    char sz[24];
    bench_size_text(c->size, sz, sizeof(sz));
    double ratio = c->floor.mbps > 0 ? c->s.mbps / c->floor.mbps : 0;
    bool put = c->op == ROW_PUT || c->op == ROW_PUT_SIGNED;
    double disk = put && c->disk_limit > 0 ? c->s.mbps / c->disk_limit : 0;
    double vs_mem = c->mem_mbps > 0 ? c->s.mbps / c->mem_mbps : 0;
    json_t *row = json_pack(
        "{s:s, s:s, s:I, s:i, s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:f, s:f}",
        "transport", c->transport, "size_text", sz, "size", (json_int_t)c->size, "clients",
        c->clients, "op",
        c->op == ROW_GET_DEGR ? "GET-degr"
        : put                 ? "PUT"
                              : "GET",
        "payload",
        !put                      ? "none"
        : c->op == ROW_PUT_SIGNED ? "signed"
                                  : "unsigned",
        "ops", (json_int_t)c->s.ops, "connections", (json_int_t)c->s.connects, "mbps", c->s.mbps,
        "ops_per_s", c->s.opss, "p50_ms", c->s.p50, "p95_ms", c->s.p95, "p99_ms", c->s.p99,
        "floor_mbps", c->floor.mbps, "floor_ops_per_s", c->floor.opss, "floor_p50_ms", c->floor.p50,
        "floor_p95_ms", c->floor.p95, "floor_p99_ms", c->floor.p99, "ratio", ratio);
    if (put && c->disk_limit > 0) {
        json_object_set_new(row, "disk_limit_mbps", json_real(c->disk_limit));
        json_object_set_new(row, "disk_ratio", json_real(disk));
    }
    if (vs_mem > 0)
        json_object_set_new(row, "mem_ratio", json_real(vs_mem));
    if (c->op == ROW_GET_DEGR) {
        json_object_set_new(row, "degraded_stripes", json_integer((json_int_t)c->degraded_stripes));
        json_object_set_new(row, "vs_get", json_real(c->vs_get));
    }
    json_array_append_new(rows, row);
    if (json)
        return;
    char degr[40] = "", dk[16] = "     -", vm[16] = "     -";
    if (c->op == ROW_GET_DEGR)
        snprintf(degr, sizeof(degr), " %5.2f %6.2f", (double)c->degraded_stripes / (double)c->s.ops,
                 c->vs_get);
    if (disk > 0)
        snprintf(dk, sizeof(dk), "%6.3f", disk);
    if (vs_mem > 0)
        snprintf(vm, sizeof(vm), "%6.3f", vs_mem);
    printf("%-9s %-5s %7d %-8s %9.1f %9.1f %8.2f %8.2f %8.2f %10.1f %9.2f %6.3f %s %s%s\n",
           c->transport, sz, c->clients, row_names[c->op], c->s.mbps, c->s.opss, c->s.p50, c->s.p95,
           c->s.p99, c->floor.mbps, c->floor.p50, ratio, dk, vm, degr);
    fflush(stdout);
}

/* A list of one or both of two names ("mem,tcp", "signed"): which it holds;
 * -1 for any other name or an empty list. */
static int parse_either(const char *v, const char *name_a, const char *name_b, bool *a, bool *b)
{
    *a = *b = false;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, name_a) == 0)
            *a = true;
        else if (strcmp(t, name_b) == 0)
            *b = true;
        else
            return -1;
    }
    return *a || *b ? 0 : -1;
}

/* The gateway under test of one pass: embedded over mem, embedded over tcp
 * node processes, or another process (--cluster, --endpoint). */
struct under_test {
    const char *transport;
    struct target t;
    struct gw_objects *o;
    struct gw_s3_server *srv;
    struct bench_nodes *procs;
    int m;
    double data_fraction;
    char mode[512];
};

/*
 * How long a small PUT's commit waits for the disk at least: its metadata
 * round's homes each write and flush at once, the round waiting for the
 * inline quorum (bench_disk_flush_ms). With the floor's p50 it is the least
 * a small PUT's p50 can be on this machine.
 */
struct flush_limit {
    int copies, need; /* the metadata homes, the inline quorum */
    double ms;        /* 0: not measured */
};

static int flush_limit(struct gw_objects *o, const char *dir, int rounds, struct flush_limit *f,
                       char *err, size_t errlen)
{
    json_t *cl = NULL;
    int rc = gw_objects_cluster_json(o, &cl);
    json_t *meta = json_object_get(cl, "metadata");
    f->copies = (int)json_integer_value(json_object_get(meta, "copies"));
    f->need = (int)json_integer_value(json_object_get(meta, "inline_quorum"));
    json_decref(cl);
    if (rc == 0 && (f->copies < 1 || f->need < 1))
        rc = -EPROTO, snprintf(err, errlen, "the gateway names no metadata quorum");
    return rc ? rc : bench_disk_flush_ms(dir, f->copies, f->need, rounds, &f->ms, err, errlen);
}

/* inline_max < 0: the gateway's default. */
static int open_embedded(struct under_test *u, const char *dir, const char *profile, int inline_max,
                         char *keys[2], char *err, size_t errlen)
{
    int rc;
    json_t *cfg = NULL;
    if (strcmp(u->transport, "mem") == 0) {
        json_t *opts = json_object();
        if (profile)
            json_object_set_new(opts, "profile", json_string(profile));
        if (inline_max >= 0)
            json_object_set_new(opts, "inline_max", json_integer(inline_max));
        rc = gw_objects_open_embedded_opts(dir, opts, &u->o, err, errlen);
        json_decref(opts);
    } else {
        rc = bench_nodes_start(dir, 9, profile ? profile : "rs:k=6,m=3", &cfg, &u->procs, err,
                               errlen);
        json_t *gw = json_object_get(cfg, "gateway");
        if (rc == 0 && inline_max >= 0 && !gw)
            json_object_set_new(cfg, "gateway", gw = json_object());
        if (rc == 0 && inline_max >= 0)
            json_object_set_new(gw, "inline_max", json_integer(inline_max));
        if (rc == 0)
            rc = gw_objects_open(cfg, &u->o, err, errlen);
        json_decref(cfg);
    }
    struct gw_s3_config scfg = {.listen = "127.0.0.1:0",
                                .access_key = keys[0],
                                .secret_key = keys[1],
                                .max_per_client = 256}; /* every client is on loopback */
    if (rc == 0)
        rc = gw_s3_server_start(&scfg, u->o, NULL, &u->srv, err, errlen);
    if (rc == 0) {
        char hp[32];
        snprintf(hp, sizeof(hp), "127.0.0.1:%u", gw_s3_server_port(u->srv));
        rc = resolve(&u->t, hp, err, errlen);
        u->m = pool_profile(u->o, &u->data_fraction);
        json_t *pools = NULL;
        gw_objects_pools_json(u->o, &pools);
        snprintf(u->mode, sizeof(u->mode), "%s: gateway in this process, %s, at %s; %s",
                 u->transport,
                 json_string_value(json_object_get(json_array_get(pools, 0), "profile")), hp,
                 u->procs ? "9 `inec node` processes over loopback tcp"
                          : "9 nodes in this process over mem");
        json_decref(pools);
    }
    return rc;
}

static void close_under_test(struct under_test *u)
{
    gw_s3_server_stop(u->srv, 1000);
    gw_objects_close(u->o);
    bench_nodes_stop(u->procs);
    u->srv = NULL, u->o = NULL, u->procs = NULL;
}

int bench_s3(int argc, char **argv)
{
    uint64_t sizes[MAX_SIZES], clients[MAX_SIZES];
    int nsizes = 0, nclients = 0;
    double seconds = 0;
    bool json = false, quick = false;
    const char *cluster = NULL, *endpoint = NULL, *dir = NULL, *profile = NULL, *plot_file = NULL;
    int inline_max = -1;
    const char *transports = NULL, *payloads = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--quick") == 0) {
            quick = true;
        } else if (strcmp(a, "--size") == 0 && v) {
            if ((nsizes = bench_parse_size_list("s3", v, (uint64_t)1 << 30, sizes, MAX_SIZES)) < 0)
                return 2;
            i++;
        } else if (strcmp(a, "--clients") == 0 && v) {
            if ((nclients = bench_parse_count_list("s3", "--clients", v, MAX_CLIENTS, clients,
                                                   MAX_SIZES)) < 0)
                return 2;
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            if (bench_parse_seconds("s3", v, 600, &seconds) < 0)
                return 2;
            i++;
        } else if (strcmp(a, "--plot") == 0 && v) {
            plot_file = argv[++i];
        } else if (strcmp(a, "--cluster") == 0 && v) {
            cluster = argv[++i];
        } else if (strcmp(a, "--endpoint") == 0 && v) {
            endpoint = argv[++i];
        } else if (strcmp(a, "--dir") == 0 && v) {
            dir = argv[++i];
        } else if (strcmp(a, "--profile") == 0 && v) {
            profile = argv[++i];
        } else if (strcmp(a, "--inline-max") == 0 && v) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || end == v || x < 0 || x > 262144) {
                fprintf(stderr,
                        "inec bench s3: --inline-max wants bytes in [0, 262144], not '%s'\n", v);
                return 2;
            }
            inline_max = (int)x;
            i++;
        } else if (strcmp(a, "--transport") == 0 && v) {
            transports = argv[++i];
        } else if (strcmp(a, "--payload") == 0 && v) {
            payloads = argv[++i];
        } else {
            fprintf(stderr, "inec bench s3: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    bool use_mem, use_tcp, unsigned_put, signed_put;
    const char *tr = transports ? transports : quick ? "mem" : "mem,tcp";
    if (parse_either(tr, "mem", "tcp", &use_mem, &use_tcp) != 0) {
        fprintf(stderr, "inec bench s3: --transport wants mem, tcp or mem,tcp, not '%s'\n",
                transports);
        return 2;
    }
    if (parse_either(payloads ? payloads : "unsigned,signed", "unsigned", "signed", &unsigned_put,
                     &signed_put) != 0) {
        fprintf(stderr,
                "inec bench s3: --payload wants unsigned, signed or unsigned,signed, not '%s'\n",
                payloads);
        return 2;
    }
    if (cluster && endpoint) {
        fprintf(stderr, "inec bench s3: --cluster or --endpoint, not both\n");
        return 2;
    }
    if ((cluster || endpoint) && (dir || profile || transports || inline_max >= 0)) {
        fprintf(stderr, "inec bench s3: --dir, --profile, --transport and --inline-max are for "
                        "the embedded gateway\n");
        return 2;
    }
    if (!nsizes) {
        static const uint64_t full[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
        static const uint64_t brief[] = {4 << 10, 1 << 20, 16 << 20};
        nsizes = quick ? 3 : 5;
        memcpy(sizes, quick ? brief : full, (size_t)nsizes * sizeof(*sizes));
    }
    if (!nclients) {
        static const uint64_t full[] = {1, 4, 16}, brief[] = {1, 4};
        nclients = quick ? 2 : 3;
        memcpy(clients, quick ? brief : full, (size_t)nclients * sizeof(*clients));
    }
    if (seconds == 0)
        seconds = quick ? 0.25 : 2;
    if (!getenv("INEC_LOG")) /* nodes stopping and starting are the plan, not news */
        inec_log_set_level(INEC_LOG_WARN);

    char err[1024] = "", tmpdir[4200] = "";
    char *keys[2] = {NULL, NULL};
    struct under_test passes[2] = {{0}};
    int npasses = 0;
    struct target floor_t = {.name = "floor"};
    struct gw_s3_server *floor_srv = NULL;
    int rc = 0;
    char bucket[64];
    snprintf(bucket, sizeof(bucket), "inec-bench-%d", (int)getpid());
    bool remote = cluster || endpoint;

    if (remote) {
        struct under_test *u = &passes[npasses++];
        u->transport = "remote";
        u->t.name = "inec";
        if (cluster) {
            rc = cluster_target(cluster, &u->t, keys, err, sizeof(err));
        } else {
            const char *ep = strncmp(endpoint, "http://", 7) == 0 ? endpoint + 7 : endpoint;
            char hp[300];
            snprintf(hp, sizeof(hp), "%.*s", (int)strcspn(ep, "/"), ep);
            const char *ak = env2("AWS_ACCESS_KEY_ID", "INEC_ACCESS_KEY");
            const char *sk = env2("AWS_SECRET_ACCESS_KEY", "INEC_SECRET_KEY");
            u->t.region = env2("AWS_DEFAULT_REGION", "AWS_REGION");
            if (strncmp(endpoint, "https://", 8) == 0) {
                snprintf(err, sizeof(err), "https endpoints are not supported");
                rc = -EINVAL;
            } else if (!ak || !sk) {
                snprintf(err, sizeof(err),
                         "--endpoint needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
                rc = -EINVAL;
            } else if ((rc = resolve(&u->t, hp, err, sizeof(err))) == 0) {
                keys[0] = strdup(ak);
                keys[1] = strdup(sk);
            }
        }
        char host[sizeof(u->t.host)]; /* not formatted from the struct it is formatted into */
        memcpy(host, u->t.host, sizeof(host));
        snprintf(u->mode, sizeof(u->mode), "remote: gateway at %s (%s); no degraded GET", host,
                 cluster ? cluster : "--endpoint");
    } else {
        uint8_t rnd[20];
        char hexkey[41];
        RAND_bytes(rnd, sizeof(rnd));
        for (int i = 0; i < 20; i++)
            snprintf(hexkey + 2 * i, 3, "%02x", rnd[i]);
        keys[0] = strdup("inec-bench");
        keys[1] = strdup(hexkey);
        if (dir) {
            snprintf(tmpdir, sizeof(tmpdir), "%s", dir);
        } else {
            const char *td = getenv("TMPDIR");
            snprintf(tmpdir, sizeof(tmpdir), "%s/inec-s3bench-XXXXXX", td && *td ? td : "/tmp");
            if (!mkdtemp(tmpdir)) {
                fprintf(stderr, "inec bench s3: mkdtemp %s: %s\n", tmpdir, strerror(errno));
                return 1;
            }
        }
        if (use_mem)
            passes[npasses++] = (struct under_test){.transport = "mem", .t = {.name = "inec"}};
        if (use_tcp)
            passes[npasses++] = (struct under_test){.transport = "tcp", .t = {.name = "inec"}};
    }
    if (rc == 0 && (!keys[0] || !keys[1]))
        rc = -ENOMEM;
    struct gw_s3_config fcfg = {.listen = "127.0.0.1:0",
                                .access_key = keys[0],
                                .secret_key = keys[1],
                                .region = passes[0].t.region,
                                .max_per_client = 256,
                                .floor = true};
    if (rc == 0)
        rc = gw_s3_server_start(&fcfg, NULL, NULL, &floor_srv, err, sizeof(err));
    if (rc == 0) {
        char hp[32];
        snprintf(hp, sizeof(hp), "127.0.0.1:%u", gw_s3_server_port(floor_srv));
        floor_t.access_key = keys[0];
        floor_t.secret_key = keys[1];
        floor_t.region = passes[0].t.region;
        rc = resolve(&floor_t, hp, err, sizeof(err));
    }
    /* The disk under the embedded nodes' data, in this run: their PUTs' ceiling. */
    double disk_raw = 0, md5_limit = remote ? 0 : md5_limit_mbps();
    struct flush_limit flush = {0};
    if (rc == 0 && !remote)
        rc = bench_disk_write_mbps(tmpdir, quick ? 64ull << 20 : 256ull << 20, DISK_ROUNDS,
                                   &disk_raw, err, sizeof(err));
    struct worker admin = {.fd = -1};
    if (rc == 0 && !(admin.rbuf = malloc(RECV_BUF)))
        rc = -ENOMEM;
    if (rc == 0 && request(&admin, &floor_t, "PUT", bucket, NULL, 0) != 200) {
        snprintf(err, sizeof(err), "creating bucket %s on the floor: %s", bucket, admin.err);
        rc = -EIO;
    }
    if (admin.fd >= 0)
        close(admin.fd);
    admin.fd = -1;

    /* The floor of every cell is measured once, in the first pass, next to it. */
    struct floor_cell {
        struct stats s[ROW_OPS];
        double mem_mbps[ROW_OPS];
        int written[MAX_CLIENTS];
    } *fl = calloc(MAX_SIZES * MAX_SIZES, sizeof(*fl));
    struct later {
        uint64_t size;
        int clients, keys_max;
        int written[MAX_CLIENTS];
        struct floor_cell *f;
    } *degr = calloc(MAX_SIZES * MAX_SIZES, sizeof(*degr));
    if (!degr || !fl)
        rc = rc ? rc : -ENOMEM;
    json_t *rows = json_array(), *modes = json_array();
    int max_keys[MAX_SIZES] = {0}, max_clients[MAX_SIZES] = {0};
    for (int pi = 0; pi < npasses && rc == 0; pi++) {
        struct under_test *u = &passes[pi];
        bool first = pi == 0, embedded = strcmp(u->transport, "remote") != 0;
        if (embedded) {
            char sub[4300];
            snprintf(sub, sizeof(sub), "%s/%s", tmpdir, u->transport);
            rc = open_embedded(u, sub, profile, inline_max, keys, err, sizeof(err));
            if (rc == 0 && flush.ms == 0)
                rc = flush_limit(u->o, tmpdir, quick ? 100 : 400, &flush, err, sizeof(err));
        }
        u->t.access_key = keys[0];
        u->t.secret_key = keys[1];
        if (rc == 0) {
            int st = request(&admin, &u->t, "PUT", bucket, NULL, 0);
            if (st != 200) {
                snprintf(err, sizeof(err), "creating bucket %s on %s: %s", bucket, u->transport,
                         admin.err[0] ? admin.err : "failed");
                rc = -EIO;
            }
            if (admin.fd >= 0)
                close(admin.fd);
            admin.fd = -1;
        }
        if (rc)
            break;
        double disk_limit = embedded ? disk_raw * u->data_fraction : 0;
        json_array_append_new(modes, json_string(u->mode));
        if (!json) {
            if (first)
                printf("inec bench s3: floor = the same S3 HTTP server, SigV4 checked, no storage "
                       "(ratio = inec MB/s / floor MB/s); %.2g s per phase\n",
                       seconds);
            printf("\n%s\n", u->mode);
            if (embedded)
                printf("disk limit: %.1f MB/s (write + fdatasync of the data directory's disk, "
                       "best of %d passes, %.1f MB/s, x %.3f data; disk = PUT MB/s / it); md5 "
                       "limit: %.1f MB/s "
                       "(one core's MD5, the ETag: no one PUT is faster)\nflush limit: %.2f ms "
                       "(p50 of %d files each written 4 KiB and flushed at once, until %d are: "
                       "a small PUT's metadata round; with floor p50, the least its p50 can be)\n",
                       disk_limit, DISK_ROUNDS, disk_raw, u->data_fraction, md5_limit, flush.ms,
                       flush.copies, flush.need);
            print_header(embedded);
        }
        int ndegr = 0;
        for (int si = 0; si < nsizes && rc == 0; si++) {
            for (int ci = 0; ci < nclients && rc == 0; ci++) {
                uint64_t size = sizes[si];
                int nc = (int)clients[ci];
                struct floor_cell *f = &fl[si * MAX_SIZES + ci];
                uint64_t k = STORE_BUDGET / ((uint64_t)nc * size);
                int keys_max = k < 1 ? 1 : k > MAX_KEYS ? MAX_KEYS : (int)k;
                if (keys_max > max_keys[si])
                    max_keys[si] = keys_max;
                if (nc > max_clients[si])
                    max_clients[si] = nc;
                int written[MAX_CLIENTS];
                for (int op = ROW_PUT; op <= ROW_GET && rc == 0; op++) {
                    if ((op == ROW_PUT && !unsigned_put) || (op == ROW_PUT_SIGNED && !signed_put))
                        continue;
                    struct phase p = {.t = &u->t,
                                      .bucket = bucket,
                                      .op = op == ROW_GET ? OP_GET : OP_PUT,
                                      .signed_payload = op == ROW_PUT_SIGNED,
                                      .size = size,
                                      .clients = nc,
                                      .keys_max = keys_max,
                                      .written = written};
                    struct cell c = {
                        u->transport, size, nc, (enum row_op)op, {0}, {0}, disk_limit, 0, 0, 0};
                    rc = run_phase(&p, seconds, &c.s, err, sizeof(err));
                    if (rc == 0 && first) {
                        struct phase fp = p;
                        fp.t = &floor_t;
                        fp.written = f->written;
                        rc = run_phase(&fp, seconds, &f->s[op], err, sizeof(err));
                    }
                    c.floor = f->s[op];
                    if (strcmp(u->transport, "mem") == 0)
                        f->mem_mbps[op] = c.s.mbps;
                    else
                        c.mem_mbps = f->mem_mbps[op];
                    if (rc == 0)
                        print_cell(&c, rows, json);
                }
                if (rc == 0) {
                    struct later *l = &degr[ndegr++];
                    *l = (struct later){size, nc, keys_max, {0}, f};
                    memcpy(l->written, written, sizeof(written));
                }
            }
        }
        /* Degraded GETs come last: each stops m nodes and restarts them, and a
         * PUT right after a restart measures recovery, not steady state. Every
         * cell's keys are still there (later cells overwrite them with the same
         * bytes). */
        for (int i = 0; i < ndegr && rc == 0 && embedded && u->m > 0; i++) {
            struct later *l = &degr[i];
            struct phase p = {.t = &u->t,
                              .bucket = bucket,
                              .op = OP_GET,
                              .size = l->size,
                              .clients = l->clients,
                              .keys_max = l->keys_max,
                              .written = l->written};
            struct cell deg = {
                u->transport, l->size, l->clients, ROW_GET_DEGR, {0}, l->f->s[ROW_GET], 0, 0, 0, 0};
            /* The same GETs with every node up right before: the machine's load
             * then is the degraded phase's. */
            struct stats healthy = {0};
            if ((rc = run_phase(&p, seconds, &healthy, err, sizeof(err))) != 0)
                break;
            struct gw_objects_stats before, after;
            char ids[MAX_CLIENTS][16], key[64];
            key_name(key, sizeof(key), l->size, 0, 0);
            gw_objects_counters(u->o, &before);
            bool picked = u->m <= MAX_CLIENTS && pick_nodes(u->o, bucket, key, u->m, ids) == 0;
            if (!picked) {
                snprintf(err, sizeof(err), "cannot find the nodes of %s", key);
                rc = -EINVAL;
            } else if ((rc = set_nodes(u->o, u->procs, ids, u->m, false, err, sizeof(err))) == 0) {
                rc = run_phase(&p, seconds, &deg.s, err, sizeof(err));
            }
            char rerr[512] = "";
            int rrc = picked ? set_nodes(u->o, u->procs, ids, u->m, true, rerr, sizeof(rerr)) : 0;
            if (rrc == 0 && picked)
                rrc = wait_all_up(u->o, rerr, sizeof(rerr));
            if (rc == 0 && rrc) {
                snprintf(err, sizeof(err), "%s", rerr);
                rc = rrc;
            }
            gw_objects_counters(u->o, &after);
            deg.degraded_stripes = after.degraded_reads - before.degraded_reads;
            deg.vs_get = healthy.mbps > 0 ? deg.s.mbps / healthy.mbps : 0;
            if (strcmp(u->transport, "mem") == 0)
                l->f->mem_mbps[ROW_GET_DEGR] = deg.s.mbps;
            else
                deg.mem_mbps = l->f->mem_mbps[ROW_GET_DEGR];
            if (rc == 0 && deg.degraded_stripes == 0) {
                snprintf(err, sizeof(err), "degraded GET read no stripe degraded");
                rc = -EIO;
            }
            if (rc == 0)
                print_cell(&deg, rows, json);
        }
        if (embedded)
            close_under_test(u);
    }
    if (rc) {
        fprintf(stderr, "inec bench s3: %s\n", err[0] ? err : strerror(-rc));
    } else {
        if (plot_file) {
            static const char *const group[] = {"transport", "size_text", "op", "payload"};
            static const char *const ys[] = {"mbps", "floor_mbps"};
            static const char *const names[] = {"inec", "floor (no storage)"};
            if (bench_plot_rows(plot_file, "inec bench s3: throughput against clients", "clients",
                                "MB/s", BENCH_LOG2_X | BENCH_LOG_Y, rows, group, 4, "clients", ys,
                                names, 2, 1) < 0) {
                fprintf(stderr, "inec bench s3: gnuplot failed writing %s\n", plot_file);
                rc = -EIO;
            }
        }
        if (json) {
            json_t *doc = json_pack("{s:s, s:O, s:f, s:O}", "bench", "s3", "targets", modes,
                                    "seconds", seconds, "results", rows);
            if (!remote) {
                json_object_set_new(doc, "disk_write_mbps", json_real(disk_raw));
                json_object_set_new(doc, "md5_limit_mbps", json_real(md5_limit));
                json_object_set_new(doc, "flush_limit_ms", json_real(flush.ms));
            }
            bench_json_print(doc);
        }
    }
    json_decref(rows);
    json_decref(modes);

    /* Another process keeps what we wrote: delete it (a missing key is fine). */
    if (remote && admin.rbuf && passes[0].t.addrlen) {
        char key[64];
        for (int si = 0; si < nsizes; si++)
            for (int c = 0; c < max_clients[si]; c++)
                for (int k = 0; k < max_keys[si]; k++) {
                    key_name(key, sizeof(key), sizes[si], c, k);
                    request(&admin, &passes[0].t, "DELETE", bucket, key, 0);
                }
        request(&admin, &passes[0].t, "DELETE", bucket, NULL, 0);
        if (admin.fd >= 0)
            close(admin.fd);
    }
    for (int i = 0; i < npasses; i++)
        close_under_test(&passes[i]);
    free(admin.rbuf);
    free(degr);
    free(fl);
    gw_s3_server_stop(floor_srv, 1000);
    if (tmpdir[0] && !dir)
        bench_rmtree(tmpdir);
    free(keys[0]);
    free(keys[1]);
    if (cluster && passes[0].t.region)
        free((char *)passes[0].t.region);
    return rc ? 1 : 0;
}
