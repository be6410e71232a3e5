/*
 * `inec bench primitive`: latency (p50/p95/p99) and bandwidth of the three
 * INEC primitives, coherent (the engine advances the chain) against
 * incoherent (the host waits, then posts each step), over the mem and tcp
 * transports (or on an RDMA NIC with --provider verbs), with floors measured
 * in the same run:
 *   xfer  the same network bytes moved by a raw TCP socket pair driven by
 *         io_uring (tcp) or by memcpy (mem), one transfer per hop;
 *   calc  the same calculation as one raw ISA-L ec_encode_data call.
 * Three devices A, B, C in this process (tcp: over loopback sockets):
 *   ec-send       A: 2 parities of 4 chunks (RS(4,2)), both sent to B
 *   recv-ec-send  A sends 2 chunks to B; B: 1 x 3 EC over them + a local
 *                 chunk, sent to C
 *   recv-ec       A sends 2 chunks to C; C: 1 x 3 EC over them + a local chunk
 * One iteration = one primitive, timed from the first post until the last
 * byte is in place (RECVs are posted beforehand, as a vertex would).
 * MB/s = network bytes / p50; xfer/coh = how close the primitive comes to the
 * raw transfer of the same bytes (1.0 = no overhead); flr/coh the same against
 * the serial floor xfer + calc (the CALC must finish before its SEND starts).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/erasure_code.h>
#include <liburing.h>

#include "bench/bench.h"
#include "codecs/gf.h"
#include "inec/inec.h"

#define TMO 30000

enum prim { EC_SEND, RECV_EC_SEND, RECV_EC, NPRIM };
static const char *const prim_names[] = {"ec-send", "recv-ec-send", "recv-ec"};

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/* ---- the three devices ------------------------------------------------ */

enum { A, B, C, NODES };
static const int slots[NODES] = {6, 4, 5}; /* chunk buffers per node */

struct rig {
    struct inec_device *dev[NODES];
    struct inec_cq *cq[NODES], *ccq[NODES];
    struct inec_qp *calc[NODES];
    struct inec_qp *ab, *ba, *bc, *cb, *ac, *ca;
    struct inec_mr *mr[NODES];
    uint8_t *mem[NODES];
    size_t max;
    uint8_t t_enc[2 * 4 * CODEC_GF_TABLE_BYTES], t_3[3 * CODEC_GF_TABLE_BYTES];
};

static int die(const char *what)
{
    fprintf(stderr, "inec bench primitive: %s: %s\n", what, inec_errmsg());
    return -1;
}

static int pair(struct rig *r, int x, struct inec_qp **qx, int y, struct inec_qp **qy)
{
    struct inec_qp_attr a = {.type = INEC_QP_RC};
    a.send_cq = a.recv_cq = r->cq[x];
    if (inec_qp_create(r->dev[x], &a, qx))
        return die("qp");
    a.send_cq = a.recv_cq = r->cq[y];
    if (inec_qp_create(r->dev[y], &a, qy))
        return die("qp");
    if (inec_qp_connect(*qx, inec_device_addr(r->dev[y]), inec_qp_num(*qy)) ||
        inec_qp_connect(*qy, inec_device_addr(r->dev[x]), inec_qp_num(*qx)))
        return die("connect");
    return 0;
}

static void rig_close(struct rig *r)
{
    struct inec_qp *qps[] = {r->ab, r->ba, r->bc, r->cb, r->ac, r->ca};
    for (size_t i = 0; i < sizeof(qps) / sizeof(qps[0]); i++)
        inec_qp_destroy(qps[i]);
    for (int i = 0; i < NODES; i++) {
        inec_qp_destroy(r->calc[i]);
        inec_mr_dereg(r->mr[i]);
        inec_cq_destroy(r->cq[i]);
        inec_cq_destroy(r->ccq[i]);
        inec_device_close(r->dev[i]);
        free(r->mem[i]);
    }
}

/* transport "verbs": three opens of the RDMA device, connected through it. */
static int rig_open(struct rig *r, const char *transport, size_t max, int threads)
{
    memset(r, 0, sizeof(*r));
    r->max = max;
    bool verbs = strcmp(transport, "verbs") == 0;
    char opts[64] = "";
    int n = verbs ? 0 : snprintf(opts, sizeof(opts), "transport=%s", transport);
    if (threads && !verbs)
        snprintf(opts + n, sizeof(opts) - (size_t)n, ",engine_threads=%d", threads);
    for (int i = 0; i < NODES; i++) {
        if (inec_device_open(verbs ? "verbs" : "soft", opts, &r->dev[i]) ||
            inec_cq_create(r->dev[i], 0, &r->cq[i]) || inec_cq_create(r->dev[i], 0, &r->ccq[i]))
            return die("device");
        struct inec_qp_attr a = {.type = INEC_QP_CALC, .send_cq = r->ccq[i]};
        if (inec_qp_create(r->dev[i], &a, &r->calc[i]))
            return die("calc qp");
        size_t bytes = (size_t)slots[i] * max;
        r->mem[i] = malloc(bytes);
        if (!r->mem[i] || inec_mr_reg(r->dev[i], r->mem[i], bytes, &r->mr[i]))
            return die("memory");
        fill(r->mem[i], bytes, (unsigned)i + 1);
    }
    if (pair(r, A, &r->ab, B, &r->ba) || pair(r, B, &r->bc, C, &r->cb) ||
        pair(r, A, &r->ac, C, &r->ca))
        return -1;
    uint8_t m[8];
    fill(m, sizeof(m), 9);
    codec_gf_init_tables(2, 4, m, r->t_enc);
    codec_gf_init_tables(1, 3, m, r->t_3);
    return 0;
}

static struct inec_sge sge(struct rig *r, int node, int slot, size_t len)
{
    return (struct inec_sge){r->mem[node] + (size_t)slot * r->max, len, r->mr[node]};
}

static int recv1(struct rig *r, struct inec_qp *qp, int node, int slot, size_t len)
{
    struct inec_sge s = sge(r, node, slot, len);
    struct inec_wr wr = {.opcode = INEC_WR_RECV, .sg_list = &s, .num_sge = 1};
    return inec_post_recv(qp, &wr, NULL) ? die("post recv") : 0;
}

/* A plain sender: two chunks in one chain. */
static int send2(struct rig *r, struct inec_qp *qp, size_t len)
{
    struct inec_sge s[2] = {sge(r, A, 0, len), sge(r, A, 1, len)};
    struct inec_wr w[2] = {{.next = &w[1], .opcode = INEC_WR_SEND, .sg_list = &s[0], .num_sge = 1},
                           {.opcode = INEC_WR_SEND, .sg_list = &s[1], .num_sge = 1}};
    return inec_post_send(qp, w, NULL) ? die("post send") : 0;
}

static int vertex_b(struct rig *r, size_t len, uint64_t count, unsigned flags)
{
    struct inec_cq *cq = r->cq[B];
    struct inec_wait_desc wait = {&cq, &count, 1};
    struct inec_sge in[3] = {sge(r, B, 0, len), sge(r, B, 1, len), sge(r, B, 2, len)};
    struct inec_sge out = sge(r, B, 3, len);
    struct inec_mem_desc mem = {in, 3, &out, 1};
    struct inec_calc_desc calc = {.qp = r->calc[B],
                                  .kind = INEC_CALC_EC,
                                  .tables = r->t_3,
                                  .flags = flags,
                                  .timeout_ms = TMO};
    struct inec_stripe_send s = {.qp = r->bc, .buf = out};
    struct inec_stripe_desc stripe = {&s, 1};
    return inec_recv_ec_send(&wait, &calc, &mem, &stripe) ? die("recv-ec-send") : 0;
}

static int vertex_c(struct rig *r, size_t len, uint64_t count, unsigned flags, uint64_t *done)
{
    struct inec_cq *cq = r->cq[C];
    struct inec_wait_desc wait = {&cq, &count, 1};
    struct inec_sge in[3] = {sge(r, C, 1, len), sge(r, C, 2, len), sge(r, C, 3, len)};
    struct inec_sge out = sge(r, C, 4, len);
    struct inec_mem_desc mem = {in, 3, &out, 1};
    struct inec_calc_desc calc = {.qp = r->calc[C],
                                  .kind = INEC_CALC_EC,
                                  .tables = r->t_3,
                                  .flags = flags,
                                  .timeout_ms = TMO};
    int rc = inec_recv_ec(&wait, &calc, &mem);
    *done = calc.done_count;
    return rc ? die("recv-ec") : 0;
}

/* One primitive; returns its latency in seconds, < 0 on error. */
static double run_one(struct rig *r, enum prim p, size_t len, unsigned flags)
{
    const bool coherent = !(flags & INEC_PRIM_INCOHERENT);
    double t0;
    uint64_t target, done;
    switch (p) {
    case EC_SEND: {
        if (recv1(r, r->ba, B, 0, len) || recv1(r, r->ba, B, 1, len))
            return -1;
        target = inec_cq_expected(r->cq[B]);
        struct inec_sge in[4], out[2] = {sge(r, A, 4, len), sge(r, A, 5, len)};
        for (int i = 0; i < 4; i++)
            in[i] = sge(r, A, i, len);
        struct inec_mem_desc mem = {in, 4, out, 2};
        struct inec_calc_desc calc = {.qp = r->calc[A],
                                      .kind = INEC_CALC_EC,
                                      .tables = r->t_enc,
                                      .flags = flags,
                                      .timeout_ms = TMO};
        struct inec_stripe_send s[2] = {{.qp = r->ab, .buf = out[0]}, {.qp = r->ab, .buf = out[1]}};
        struct inec_stripe_desc stripe = {s, 2};
        t0 = bench_now();
        if (inec_ec_send(&calc, &mem, &stripe))
            return die("ec-send");
        if (inec_cq_wait_count(r->cq[B], target, TMO))
            return die("wait");
        return bench_now() - t0;
    }
    case RECV_EC_SEND: {
        if (recv1(r, r->ba, B, 0, len) || recv1(r, r->ba, B, 1, len))
            return -1;
        uint64_t tb = inec_cq_expected(r->cq[B]);
        if (recv1(r, r->cb, C, 0, len))
            return -1;
        target = inec_cq_expected(r->cq[C]);
        t0 = bench_now();
        if ((coherent && vertex_b(r, len, tb, flags)) || send2(r, r->ab, len) ||
            (!coherent && vertex_b(r, len, tb, flags)))
            return -1;
        if (inec_cq_wait_count(r->cq[C], target, TMO))
            return die("wait");
        return bench_now() - t0;
    }
    default: {
        if (recv1(r, r->ca, C, 1, len) || recv1(r, r->ca, C, 2, len))
            return -1;
        uint64_t tc = inec_cq_expected(r->cq[C]);
        t0 = bench_now();
        if ((coherent && vertex_c(r, len, tc, flags, &done)) || send2(r, r->ac, len) ||
            (!coherent && vertex_c(r, len, tc, flags, &done)))
            return -1;
        if (inec_cq_wait_count(r->ccq[C], done, TMO))
            return die("wait");
        return bench_now() - t0;
    }
    }
}

/* ---- floors ----------------------------------------------------------- */

struct raw_tcp {
    int tx, rx;
    struct io_uring ring;
};

static int raw_open(struct raw_tcp *t)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    t->tx = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || t->tx < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&sa, &sl) ||
        connect(t->tx, (struct sockaddr *)&sa, sizeof(sa)) || (t->rx = accept(l, NULL, NULL)) < 0)
        return -1;
    close(l);
    setsockopt(t->tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return io_uring_queue_init(8, &t->ring, 0);
}

static void raw_close(struct raw_tcp *t)
{
    io_uring_queue_exit(&t->ring);
    close(t->tx);
    close(t->rx);
}

/* Move n bytes from src to dst through the socket pair, one io_uring. */
static int raw_xfer(struct raw_tcp *t, const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t sent = 0, got = 0;
    bool tx_busy = false, rx_busy = false;
    while (got < n) {
        if (!tx_busy && sent < n) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
            io_uring_prep_send(sqe, t->tx, src + sent, n - sent, MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, 1);
            tx_busy = true;
        }
        if (!rx_busy) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
            io_uring_prep_recv(sqe, t->rx, dst + got, n - got, 0);
            io_uring_sqe_set_data64(sqe, 2);
            rx_busy = true;
        }
        struct io_uring_cqe *cqe;
        if (io_uring_submit_and_wait(&t->ring, 1) < 0 || io_uring_wait_cqe(&t->ring, &cqe))
            return -1;
        unsigned head, k = 0;
        io_uring_for_each_cqe(&t->ring, head, cqe)
        {
            if (cqe->res <= 0)
                return -1;
            if (io_uring_cqe_get_data64(cqe) == 1) {
                sent += (size_t)cqe->res;
                tx_busy = false;
            } else {
                got += (size_t)cqe->res;
                rx_busy = false;
            }
            k++;
        }
        io_uring_cq_advance(&t->ring, k);
    }
    return 0;
}

/* ---- measurement ------------------------------------------------------ */

struct opts {
    double time;
    int iters;   /* fixed count, 0 = by time */
    int threads; /* engine_threads=N for the three devices, 0 = one each */
    bool json;
};

struct stats {
    double p50, p95, p99;
};

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct stats summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return (struct stats){v[n / 2], v[(n * 95) / 100], v[(n * 99) / 100]};
}

#define MAX_ITERS 5000

struct cell {
    struct rig *r;
    struct raw_tcp *raw; /* NULL: mem */
    enum prim p;
    size_t len;
    int what; /* 0 coherent, 1 incoherent, 2 raw transfer, 3 raw calc */
};

static double time_calc(struct rig *r, enum prim p, size_t len);
static double time_xfer(struct rig *r, struct raw_tcp *t, enum prim p, size_t len);

static double run_cell(const struct cell *c)
{
    switch (c->what) {
    case 0:
        return run_one(c->r, c->p, c->len, 0);
    case 1:
        return run_one(c->r, c->p, c->len, INEC_PRIM_INCOHERENT);
    case 2:
        return time_xfer(c->r, c->raw, c->p, c->len);
    default:
        return time_calc(c->r, c->p, c->len);
    }
}

/* Repeat until the time or iteration budget is spent, after 2 warm-ups. */
static int measure(const struct opts *o, const struct cell *c, struct stats *out)
{
    static double lat[MAX_ITERS];
    int n = 0;
    double end = 0;
    for (int w = -2; n < MAX_ITERS; w++) {
        double l = run_cell(c);
        if (l < 0)
            return -1;
        if (w < 0)
            continue;
        if (n == 0)
            end = bench_now() + o->time;
        lat[n++] = l;
        if (o->iters ? n >= o->iters : (n >= 5 && bench_now() > end))
            break;
    }
    *out = summarize(lat, n);
    return 0;
}

static double time_calc(struct rig *r, enum prim p, size_t len)
{
    uint8_t *in[4], *out[2];
    double t0 = bench_now();
    if (p == EC_SEND) {
        for (int i = 0; i < 4; i++)
            in[i] = r->mem[A] + (size_t)i * r->max;
        out[0] = r->mem[A] + 4 * r->max;
        out[1] = r->mem[A] + 5 * r->max;
        ec_encode_data((int)len, 4, 2, r->t_enc, in, out);
    } else {
        for (int i = 0; i < 3; i++)
            in[i] = r->mem[B] + (size_t)i * r->max;
        out[0] = r->mem[B] + 3 * r->max;
        ec_encode_data((int)len, 3, 1, r->t_3, in, out);
    }
    return bench_now() - t0;
}

/* The network part: 2 chunks in one transfer, plus one more hop for recv-ec-send. */
static double time_xfer(struct rig *r, struct raw_tcp *t, enum prim p, size_t len)
{
    uint8_t *src = r->mem[A], *dst = r->mem[C];
    double t0 = bench_now();
    int hops = p == RECV_EC_SEND ? 2 : 1;
    for (int h = 0; h < hops; h++) {
        size_t n = h == 0 ? 2 * len : len;
        if (t && raw_xfer(t, src, dst, n))
            return -1;
        if (!t)
            memcpy(dst, src, n);
    }
    return bench_now() - t0;
}

static int bench_transport(const char *transport, const size_t *sizes, int nsizes,
                           const struct opts *o, json_t *rows)
{
    struct rig r;
    struct raw_tcp raw = {.tx = -1, .rx = -1};
    bool tcp = strcmp(transport, "tcp") == 0, raw_ok = false;
    bool verbs = strcmp(transport, "verbs") == 0; /* no raw transfer floor */
    int rc = rig_open(&r, transport, sizes[nsizes - 1], o->threads);
    if (rc == 0 && tcp && !(raw_ok = raw_open(&raw) == 0)) {
        fprintf(stderr, "inec bench primitive: raw tcp set-up failed\n");
        rc = -1;
    }
    for (int si = 0; rc == 0 && si < nsizes; si++) {
        size_t len = sizes[si];
        for (int p = 0; p < NPRIM; p++) {
            struct stats st[4];
            memset(st, 0, sizeof(st));
            for (int w = 0; w < 4 && rc == 0; w++) {
                if (verbs && w == 2)
                    continue;
                struct cell c = {&r, tcp ? &raw : NULL, (enum prim)p, len, w};
                rc = measure(o, &c, &st[w]);
            }
            if (rc)
                break;
            struct stats coh = st[0], inc = st[1], xfer = st[2], calc = st[3];
            double net = (double)len * (p == RECV_EC_SEND ? 3 : 2);
            double mbps = net / coh.p50 / 1e6, ratio = inc.p50 / coh.p50,
                   vs_xfer = xfer.p50 / coh.p50,
                   vs_floor = verbs ? 0 : (xfer.p50 + calc.p50) / coh.p50;
            char sz[32];
            bench_size_text(len, sz, sizeof(sz));
            json_array_append_new(
                rows,
                json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "transport",
                          transport, "primitive", prim_names[p], "chunk_bytes", (json_int_t)len,
                          "coherent_p50_us", coh.p50 * 1e6, "coherent_p95_us", coh.p95 * 1e6,
                          "coherent_p99_us", coh.p99 * 1e6, "incoherent_p50_us", inc.p50 * 1e6,
                          "incoherent_p95_us", inc.p95 * 1e6, "incoherent_p99_us", inc.p99 * 1e6,
                          "incoherent_over_coherent", ratio, "coherent_mbps", mbps, "raw_xfer_us",
                          xfer.p50 * 1e6, "raw_calc_us", calc.p50 * 1e6, "xfer_over_coherent",
                          vs_xfer));
            if (!o->json) {
                printf("%-4s %-13s %5s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f %9.1f %9.1f %9.1f "
                       "%7.2f %7.2f\n",
                       transport, prim_names[p], sz, coh.p50 * 1e6, coh.p95 * 1e6, coh.p99 * 1e6,
                       inc.p50 * 1e6, inc.p95 * 1e6, inc.p99 * 1e6, ratio, mbps, xfer.p50 * 1e6,
                       calc.p50 * 1e6, vs_xfer, vs_floor);
            }
            fflush(stdout);
        }
    }
    for (int i = 0; rc == 0 && i < NODES; i++)
        if (inec_cq_errors(r.cq[i]) || inec_cq_errors(r.ccq[i])) {
            fprintf(stderr, "inec bench primitive: error completions on node %d\n", i);
            rc = -1;
        }
    if (raw_ok)
        raw_close(&raw);
    rig_close(&r);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench primitive [--quick] [--json] [--plot FILE.png]\n"
               "                            [--transport mem|tcp] [--size S,S,...]\n"
               "                            [--seconds SEC] [--iters N] [--engine-threads N]\n"
               "                            [--provider soft|verbs]\n\n"
               "Latency p50/p95/p99 (us) of ec-send, recv-ec-send and recv-ec, coherent vs\n"
               "incoherent, chunks 128 B .. 16 MiB, with the raw transfer (io_uring TCP or\n"
               "memcpy) and raw ISA-L floors of the same work. inc/coh > 1: coherent is\n"
               "faster; xfer/coh: fraction of the raw transfer's bandwidth reached.\n"
               "--size: the chunk sizes (K/M suffixes; default 128,1K,8K,64K,512K,1M,4M,16M,\n"
               "--quick 128,8K,1M); --seconds per cell (0.3, --quick 0.05); --iters N: N runs\n"
               "per cell instead; --plot: p50 latency against chunk size, incoherent dashed.\n"
               "--engine-threads N: the devices share N engine threads (default: one each).\n"
               "--provider verbs: the three devices are opens of the RDMA NIC (rows 'verbs';\n"
               "no raw transfer floor: xfer columns 0); fails if there is no device.\n");
}

int bench_primitive(int argc, char **argv)
{
    static const size_t all[] = {128, 1024, 8192, 65536, 512 << 10, 1 << 20, 4 << 20, 16 << 20};
    static const size_t quick[] = {128, 8192, 1 << 20};
    struct opts o = {.time = 0.3};
    bool is_quick = false;
    const char *only = NULL, *plot_file = NULL, *provider = "soft";
    uint64_t chosen[16];
    int nchosen = 0;
    bool timed = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            is_quick = true;
        } else if (strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--plot") == 0 && v) {
            plot_file = argv[++i];
        } else if (strcmp(a, "--transport") == 0 && v &&
                   (strcmp(v, "mem") == 0 || strcmp(v, "tcp") == 0)) {
            only = argv[++i];
        } else if (strcmp(a, "--size") == 0 && v) {
            if ((nchosen = bench_parse_size_list("primitive", argv[++i], 64u << 20, chosen, 16)) <
                0)
                return 2;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            if (bench_parse_seconds("primitive", argv[++i], 600, &o.time) < 0)
                return 2;
            timed = true;
        } else if (strcmp(a, "--provider") == 0 && v &&
                   (strcmp(v, "soft") == 0 || strcmp(v, "verbs") == 0)) {
            provider = argv[++i];
        } else if (strcmp(a, "--engine-threads") == 0 && v && atoi(v) >= 0 && atoi(v) <= 64) {
            o.threads = atoi(argv[++i]);
        } else if (strcmp(a, "--iters") == 0 && v && atoi(v) > 0 && atoi(v) <= MAX_ITERS) {
            o.iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "inec bench primitive: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    bool verbs = strcmp(provider, "verbs") == 0;
    if (verbs && only) {
        fprintf(stderr, "inec bench primitive: --transport is soft's, not verbs'\n");
        return 2;
    }
    if (verbs) {
        struct inec_device *probe;
        if (inec_device_open("verbs", NULL, &probe)) {
            fprintf(stderr, "inec bench primitive: %s\n", inec_errmsg());
            return 1;
        }
        inec_device_close(probe);
    }
    if (is_quick && !timed)
        o.time = 0.05;
    int nsizes = nchosen ? nchosen : is_quick ? 3 : 8;
    size_t sizes[16];
    for (int i = 0; i < nsizes; i++)
        sizes[i] = nchosen ? (size_t)chosen[i] : is_quick ? quick[i] : all[i];
    /* The rig is sized for the largest chunk, which it expects last. */
    for (int i = 1; i < nsizes; i++)
        for (int j = i; j > 0 && sizes[j - 1] > sizes[j]; j--) {
            size_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }
    if (!o.json)
        printf("%-4s %-13s %5s %9s %9s %9s %9s %9s %9s %7s %9s %9s %9s %7s %7s\n", "tr",
               "primitive", "chunk", "coh_p50", "coh_p95", "coh_p99", "inc_p50", "inc_p95",
               "inc_p99", "inc/coh", "coh_MB/s", "xfer_us", "calc_us", "xfer/coh", "flr/coh");
    json_t *rows = json_array();
    int rc = 0;
    const char *transports[] = {"mem", "tcp"};
    for (int t = 0; t < 2 && rc == 0 && !verbs; t++)
        if (!only || strcmp(only, transports[t]) == 0)
            rc = bench_transport(transports[t], sizes, nsizes, &o, rows);
    if (verbs)
        rc = bench_transport("verbs", sizes, nsizes, &o, rows);
    if (rc == 0 && plot_file) {
        static const char *const group[] = {"transport", "primitive"};
        static const char *const ys[] = {"coherent_p50_us", "incoherent_p50_us"};
        static const char *const names[] = {"coherent", "incoherent"};
        if (bench_plot_rows(plot_file, "inec bench primitive: p50 latency", "chunk size (bytes)",
                            "microseconds", BENCH_LOG2_X | BENCH_LOG_Y, rows, group, 2,
                            "chunk_bytes", ys, names, 2, 1) < 0) {
            fprintf(stderr, "inec bench primitive: gnuplot failed writing %s\n", plot_file);
            rc = -1;
        }
    }
    if (rc == 0 && o.json)
        bench_json_print(json_pack("{s:s,s:f,s:i,s:O}", "bench", "primitive", "seconds", o.time,
                                   "iters", o.iters, "results", rows));
    json_decref(rows);
    return rc ? 1 : 0;
}
