/*
 * The client side of tests/integration/node_tcp.py: talks to `inec node`
 * processes over the tcp transport.
 *
 *   node_peer encode ADDR,ADDR,...   ec-send a stripe (rs, k = nodes - 1, m = 1)
 *                                    from this process into the nodes' sink
 *                                    vertices, then read every chunk back
 *   node_peer verify ADDR,ADDR,...   read that stripe back (after restarts)
 *   node_peer writes ADDR N          put chunks 0..N-1, printing "ack I" after
 *                                    each acknowledged one, "fail I rc=E ms=T"
 *                                    at the first failure
 *   node_peer check ADDR N           chunks 0..N-1 read back byte-exact
 *   node_peer health ADDR TIMEOUT_MS prints "rc=E ms=T"
 * Exit status 0 when what was asked held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codecs/codec.h"
#include "deg/deg.h"
#include "inec/inec.h"
#include "node/client.h"

#define DEVOPTS devopts()

/* The nodes' cluster secret: INEC_SECRET_FILE (node_tcp.py makes it). */
static const char *devopts(void)
{
    static char opts[600];
    const char *secret = getenv("INEC_SECRET_FILE");
    snprintf(opts, sizeof(opts), "transport=tcp,listen=127.0.0.1:0,timeout_ms=3000%s%s",
             secret ? ",secret=" : "", secret ? secret : "");
    return opts;
}
#define STRIPE_LEN (256 * 1024 + 3)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static struct node_chunk_id chunk(uint64_t stripe, uint32_t index)
{
    struct node_chunk_id id = {.stripe = stripe, .index = index};
    memset(id.object, 0x5a, sizeof(id.object));
    return id;
}

static int connect_all(struct inec_device *dev, char *addrs, struct node_client **c, int timeout)
{
    int n = 0;
    char err[512];
    struct node_client_opts o = {.timeout_ms = timeout, .secret_file = getenv("INEC_SECRET_FILE")};
    for (char *a = strtok(addrs, ","); a && n < CODEC_MAX_CHUNKS; a = strtok(NULL, ","), n++)
        if (node_client_connect(dev, a, &o, &c[n], err, sizeof(err))) {
            fprintf(stderr, "node_peer: %s\n", err);
            return -1;
        }
    return n;
}

/* The stripe's chunks, encoded here as the reference. */
static struct codec *stripe_chunks(int n, uint8_t **chunks)
{
    char prof[64], err[256];
    struct codec_profile p;
    struct codec *c;
    snprintf(prof, sizeof(prof), "rs:k=%d,m=1", n - 1);
    if (codec_profile_parse(prof, &p, err, sizeof(err)) || codec_create(&p, &c, err, sizeof(err))) {
        fprintf(stderr, "node_peer: %s\n", err);
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        chunks[i] = malloc(STRIPE_LEN);
        fill(chunks[i], STRIPE_LEN, 100 + (unsigned)i);
    }
    codec_encode(c, STRIPE_LEN, chunks);
    return c;
}

static int verify(struct node_client **c, int n, uint8_t **chunks)
{
    for (int i = 0; i < n; i++) {
        struct node_chunk_id id = chunk(1, (uint32_t)i);
        void *got;
        size_t len;
        uint64_t ver;
        int rc = node_client_get_chunk(c[i], &id, &got, &len, &ver);
        if (rc) {
            fprintf(stderr, "node_peer: get chunk %d: %s\n", i, node_client_errmsg(c[i]));
            return 1;
        }
        bool same = len == STRIPE_LEN && ver == 9 && memcmp(got, chunks[i], len) == 0;
        free(got);
        if (!same) {
            fprintf(stderr, "node_peer: chunk %d differs\n", i);
            return 1;
        }
    }
    return 0;
}

static int cmd_encode(struct inec_device *dev, char *addrs, bool run)
{
    struct node_client *c[CODEC_MAX_CHUNKS] = {0};
    int n = connect_all(dev, addrs, c, 5000);
    if (n < 2)
        return 1;
    uint8_t *chunks[CODEC_MAX_CHUNKS];
    struct codec *codec = stripe_chunks(n, chunks);
    int rc = 0;
    if (run) {
        struct deg_request req = {.op = DEG_OP_ENCODE};
        deg_placement_default(&req.placement);
        struct deg_graph *g;
        char err[512];
        struct node_stripe s = {.stripe = 1, .version = 9};
        memset(s.object, 0x5a, sizeof(s.object));
        struct deg_run_opts o = {.timeout_ms = 5000, .options = DEVOPTS};
        rc = deg_build(codec, &req, &g, err, sizeof(err));
        if (rc == 0)
            rc = node_deg_run(g, STRIPE_LEN, chunks, c, n, &s, &o, NULL, NULL, err, sizeof(err));
        if (rc)
            fprintf(stderr, "node_peer: encode: %s\n", err);
        deg_graph_destroy(g);
    }
    if (rc == 0)
        rc = verify(c, n, chunks);
    for (int i = 0; i < n; i++) {
        node_client_close(c[i]);
        free(chunks[i]);
    }
    codec_destroy(codec);
    if (rc == 0)
        printf("ok\n");
    return rc ? 1 : 0;
}

static size_t write_len(int i)
{
    return 4096 + (size_t)i * 97;
}

static int cmd_writes(struct inec_device *dev, char *addr, int count, bool check)
{
    struct node_client *c;
    /* 10 s: a write waits for the node's fdatasync, which other tests'
     * I/O may slow for seconds; a stopped node fails the call at once. */
    if (connect_all(dev, addr, &c, 10000) != 1)
        return 1;
    uint8_t *buf = malloc(write_len(count));
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++) {
        struct node_chunk_id id = chunk(2, (uint32_t)i);
        fill(buf, write_len(i), (unsigned)i);
        if (!check) {
            long long t0 = now_ms();
            rc = node_client_put_chunk(c, &id, 1, buf, write_len(i));
            if (rc)
                printf("fail %d rc=%d ms=%lld\n", i, rc, now_ms() - t0);
            else
                printf("ack %d\n", i);
            fflush(stdout);
            continue;
        }
        void *got;
        size_t len;
        rc = node_client_get_chunk(c, &id, &got, &len, NULL);
        if (rc) {
            fprintf(stderr, "node_peer: acknowledged chunk %d: %s\n", i, node_client_errmsg(c));
            break;
        }
        if (len != write_len(i) || memcmp(got, buf, len)) {
            fprintf(stderr, "node_peer: acknowledged chunk %d differs\n", i);
            rc = 1;
        }
        free(got);
    }
    free(buf);
    node_client_close(c);
    if (check && rc == 0)
        printf("ok\n");
    return check && rc ? 1 : 0;
}

static int cmd_health(struct inec_device *dev, char *addr, int timeout)
{
    struct node_client *c = NULL;
    struct node_health h;
    char err[512];
    struct node_client_opts o = {.timeout_ms = timeout, .secret_file = getenv("INEC_SECRET_FILE")};
    long long t0 = now_ms();
    int rc = node_client_connect(dev, addr, &o, &c, err, sizeof(err));
    if (rc == 0)
        rc = node_client_health(c, &h);
    printf("rc=%d ms=%lld\n", rc, now_ms() - t0);
    if (rc == 0)
        printf("id=%s domain=%s\n", h.id, h.domain);
    node_client_close(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: node_peer encode|verify|writes|check|health ADDR [N]\n");
        return 2;
    }
    struct inec_device *dev;
    if (inec_device_open(NULL, DEVOPTS, &dev)) {
        fprintf(stderr, "node_peer: device: %s\n", inec_errmsg());
        return 1;
    }
    int rc = 2;
    int n = argc > 3 ? atoi(argv[3]) : 0;
    if (strcmp(argv[1], "encode") == 0 || strcmp(argv[1], "verify") == 0)
        rc = cmd_encode(dev, argv[2], argv[1][0] == 'e');
    else if (strcmp(argv[1], "writes") == 0 || strcmp(argv[1], "check") == 0)
        rc = cmd_writes(dev, argv[2], n, argv[1][0] == 'c');
    else if (strcmp(argv[1], "health") == 0)
        rc = cmd_health(dev, argv[2], n);
    inec_device_close(dev);
    return rc;
}
