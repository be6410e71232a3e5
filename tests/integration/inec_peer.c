/*
 * Multi-process tests of the offload engine over the tcp transport.
 *
 *   inec_peer flow [incoherent]  three processes on loopback:
 *       A: ec-send        X = M1 * D              -> B
 *       B: recv-ec-send   Y = M2 * [X0, X1, LB]   -> C
 *       C: recv-ec (XOR)  Z = Y ^ LC
 *     chunk cut in slices; C checks Z against codec_gf_* computed directly.
 *   inec_peer kill    this process and a peer; the peer is SIGKILLed while
 *     chains here wait on it: every one must complete with an error within
 *     a bounded time.
 *   inec_peer hang    the same with SIGSTOP: the peer's socket stays open and
 *     silent; the devices' timeout_ms (2 s here) must still fail everything.
 *   inec_peer abandon   a SEND larger than the sockets hold goes to a peer
 *     that stops taking data (SIGSTOP), and its QP is closed: the close must
 *     not wait for the peer, and the message must not go on from memory the
 *     sender reuses once the peer resumes (its RECV fails, never completes).
 *   inec_peer role NAME   a child (spawned by the three above).
 *
 * Children learn their peers' addresses and QP numbers on stdin and print
 * theirs on stdout, one line each. Every wait is bounded (alarm, timeouts).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codecs/gf.h"
#include "inec/auth.h"
#include "inec/inec.h"

#define K      3
#define CHUNK  (1u << 20)
#define SLICES 8
#define T_MS   20000

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if ((x) < 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, inec_errmsg());             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

struct node {
    struct inec_device *dev;
    struct inec_qp *qps[4];
    int nqps;
    struct inec_cq *cq, *calc_cq;
    struct inec_qp *calc;
    struct inec_mr *mr;
    uint8_t *mem;
};

/* Every process of a test proves the secret file the parent made (tcp
 * connections are authenticated, inec/auth.h). */
static const char *peer_options(void)
{
    static char opts[512];
    const char *secret = getenv("INEC_PEER_SECRET");
    snprintf(opts, sizeof(opts), "transport=tcp,listen=127.0.0.1:0,timeout_ms=2000%s%s",
             secret ? ",secret=" : "", secret ? secret : "");
    return opts;
}

static void node_open(struct node *n, size_t bytes)
{
    memset(n, 0, sizeof(*n));
    CHECK(inec_device_open("soft", peer_options(), &n->dev));
    CHECK(inec_cq_create(n->dev, 0, &n->cq));
    CHECK(inec_cq_create(n->dev, 0, &n->calc_cq));
    struct inec_qp_attr a = {.type = INEC_QP_CALC, .send_cq = n->calc_cq};
    CHECK(inec_qp_create(n->dev, &a, &n->calc));
    n->mem = calloc(1, bytes);
    CHECK(inec_mr_reg(n->dev, n->mem, bytes, &n->mr));
}

static struct inec_qp *node_qp(struct node *n)
{
    struct inec_qp_attr a = {.type = INEC_QP_RC, .send_cq = n->cq, .recv_cq = n->cq};
    struct inec_qp *qp;
    CHECK(inec_qp_create(n->dev, &a, &qp));
    n->qps[n->nqps++] = qp;
    return qp;
}

static void node_close(struct node *n)
{
    for (int i = 0; i < n->nqps; i++)
        inec_qp_destroy(n->qps[i]);
    inec_qp_destroy(n->calc);
    inec_mr_dereg(n->mr);
    inec_cq_destroy(n->cq);
    inec_cq_destroy(n->calc_cq);
    inec_device_close(n->dev);
    free(n->mem);
}

static void post_recv(struct inec_qp *qp, struct inec_sge sge)
{
    struct inec_wr wr = {.opcode = INEC_WR_RECV, .sg_list = &sge, .num_sge = 1};
    CHECK(inec_post_recv(qp, &wr, NULL));
}

static void read_line(char *buf, size_t len)
{
    if (!fgets(buf, (int)len, stdin))
        exit(1); /* the parent is gone */
}

static void tables(uint8_t *t1, uint8_t *t2)
{
    uint8_t m1[2 * K], m2[3];
    fill(m1, sizeof(m1), 4);
    fill(m2, sizeof(m2), 5);
    codec_gf_init_tables(2, K, m1, t1);
    codec_gf_init_tables(1, 3, m2, t2);
}

/* A child: set up, exchange, run its vertex, report, wait for "bye". */
static int role(const char *name, unsigned flags)
{
    alarm(60);
    struct node n;
    static uint8_t t1[2 * K * CODEC_GF_TABLE_BYTES], t2[3 * CODEC_GF_TABLE_BYTES];
    tables(t1, t2);
    char line[512], addr1[160], addr2[160];
    unsigned q1, q2;
    const size_t sl = CHUNK / SLICES;
    uint8_t *m;
    int rc = 0;
    if (strcmp(name, "A") == 0) {
        node_open(&n, 5 * CHUNK);
        m = n.mem;
        struct inec_qp *ab = node_qp(&n);
        printf("%s %u\n", inec_device_addr(n.dev), inec_qp_num(ab));
        fflush(stdout);
        read_line(line, sizeof(line));
        if (sscanf(line, "%159s %u", addr1, &q1) != 2)
            return 1;
        CHECK(inec_qp_connect(ab, addr1, q1));
        fill(m, K * CHUNK, 1);
        for (int s = 0; s < SLICES; s++) {
            size_t off = (size_t)s * sl;
            struct inec_sge in[K], out[2];
            for (int i = 0; i < K; i++)
                in[i] = (struct inec_sge){m + i * CHUNK + off, sl, n.mr};
            for (int i = 0; i < 2; i++)
                out[i] = (struct inec_sge){m + (3 + i) * CHUNK + off, sl, n.mr};
            struct inec_mem_desc mem = {in, K, out, 2};
            struct inec_calc_desc calc = {
                .qp = n.calc, .kind = INEC_CALC_EC, .tables = t1, .flags = flags};
            struct inec_stripe_send sends[2] = {
                {.qp = ab, .buf = out[0], .send_flags = INEC_SIGNALED},
                {.qp = ab, .buf = out[1], .send_flags = INEC_SIGNALED}};
            struct inec_stripe_desc stripe = {sends, 2};
            CHECK(inec_ec_send(&calc, &mem, &stripe));
        }
        CHECK(inec_cq_wait_count(n.cq, 2 * SLICES, T_MS));
        rc = inec_cq_errors(n.cq) != 0;
    } else if (strcmp(name, "B") == 0) {
        node_open(&n, 4 * CHUNK);
        m = n.mem;
        struct inec_qp *ba = node_qp(&n), *bc = node_qp(&n);
        printf("%s %u %u\n", inec_device_addr(n.dev), inec_qp_num(ba), inec_qp_num(bc));
        fflush(stdout);
        read_line(line, sizeof(line));
        if (sscanf(line, "%159s %u %159s %u", addr1, &q1, addr2, &q2) != 4)
            return 1;
        CHECK(inec_qp_connect(ba, addr1, q1));
        CHECK(inec_qp_connect(bc, addr2, q2));
        fill(m + 2 * CHUNK, CHUNK, 2);
        /* The RECVs are the only completions on n.cq: slice s is in at 2(s+1). */
        for (int s = 0; s < SLICES; s++) {
            size_t off = (size_t)s * sl;
            post_recv(ba, (struct inec_sge){m + off, sl, n.mr});
            post_recv(ba, (struct inec_sge){m + CHUNK + off, sl, n.mr});
        }
        for (int s = 0; s < SLICES; s++) {
            size_t off = (size_t)s * sl;
            struct inec_cq *wcq[1] = {n.cq};
            uint64_t wcount[1] = {2 * (uint64_t)(s + 1)};
            struct inec_wait_desc wait = {wcq, wcount, 1};
            struct inec_sge in[3] = {
                {m + off, sl, n.mr}, {m + CHUNK + off, sl, n.mr}, {m + 2 * CHUNK + off, sl, n.mr}};
            struct inec_sge out = {m + 3 * CHUNK + off, sl, n.mr};
            struct inec_mem_desc mem = {in, 3, &out, 1};
            struct inec_calc_desc calc = {
                .qp = n.calc, .kind = INEC_CALC_EC, .tables = t2, .flags = flags};
            struct inec_stripe_send send = {.qp = bc, .buf = out};
            struct inec_stripe_desc stripe = {&send, 1};
            CHECK(inec_recv_ec_send(&wait, &calc, &mem, &stripe));
        }
        CHECK(inec_cq_wait_count(n.calc_cq, SLICES, T_MS));
        rc = inec_cq_errors(n.cq) + inec_cq_errors(n.calc_cq) != 0;
    } else { /* C */
        node_open(&n, 3 * CHUNK);
        m = n.mem;
        struct inec_qp *cb = node_qp(&n);
        printf("%s %u\n", inec_device_addr(n.dev), inec_qp_num(cb));
        fflush(stdout);
        read_line(line, sizeof(line));
        if (sscanf(line, "%159s %u", addr1, &q1) != 2)
            return 1;
        CHECK(inec_qp_connect(cb, addr1, q1));
        fill(m + CHUNK, CHUNK, 3);
        for (int s = 0; s < SLICES; s++)
            post_recv(cb, (struct inec_sge){m + (size_t)s * sl, sl, n.mr});
        uint64_t done = 0;
        for (int s = 0; s < SLICES; s++) {
            size_t off = (size_t)s * sl;
            struct inec_cq *wcq[1] = {n.cq};
            uint64_t wcount[1] = {(uint64_t)(s + 1)};
            struct inec_wait_desc wait = {wcq, wcount, 1};
            struct inec_sge in[2] = {{m + off, sl, n.mr}, {m + CHUNK + off, sl, n.mr}};
            struct inec_sge out = {m + 2 * CHUNK + off, sl, n.mr};
            struct inec_mem_desc mem = {in, 2, &out, 1};
            struct inec_calc_desc calc = {.qp = n.calc, .kind = INEC_CALC_XOR, .flags = flags};
            CHECK(inec_recv_ec(&wait, &calc, &mem));
            done = calc.done_count;
        }
        CHECK(inec_cq_wait_count(n.calc_cq, done, T_MS));
        /* The reference, straight from codecs/. */
        uint8_t *all = malloc(K * CHUNK), *d[K], *x[2] = {malloc(CHUNK), malloc(CHUNK)};
        uint8_t *y = malloc(CHUNK), *lb = malloc(CHUNK);
        fill(all, K * CHUNK, 1); /* A's data */
        for (int i = 0; i < K; i++)
            d[i] = all + i * CHUNK;
        codec_gf_encode(CHUNK, 2, K, t1, d, x);
        fill(lb, CHUNK, 2);
        uint8_t *yin[3] = {x[0], x[1], lb};
        codec_gf_encode(CHUNK, 1, 3, t2, yin, &y);
        uint8_t *zin[2] = {y, m + CHUNK};
        codec_xor(CHUNK, 2, zin, y);
        rc = memcmp(y, m + 2 * CHUNK, CHUNK) != 0 || inec_cq_errors(n.calc_cq) != 0;
        printf("%s\n", rc ? "MISMATCH" : "EQUAL");
        fflush(stdout);
        free(all);
        free(x[0]);
        free(x[1]);
        free(y);
        free(lb);
    }
    printf("done %d\n", rc);
    fflush(stdout);
    read_line(line, sizeof(line)); /* "bye": nobody closes while others run */
    node_close(&n);
    return rc;
}

struct child {
    pid_t pid;
    FILE *in, *out;
};

static void spawn(struct child *c, const char *role_name, const char *arg)
{
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        exit(1);
    c->pid = fork();
    if (c->pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        execl("/proc/self/exe", "inec_peer", "role", role_name, arg, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c->in = fdopen(to[1], "w");
    c->out = fdopen(from[0], "r");
}

static void child_line(struct child *c, char *buf, size_t len)
{
    if (!fgets(buf, (int)len, c->out)) {
        fprintf(stderr, "child %d said nothing\n", (int)c->pid);
        exit(1);
    }
    buf[strcspn(buf, "\n")] = '\0';
}

static void tell(struct child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tell(struct child *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->in, fmt, ap);
    va_end(ap);
    fflush(c->in);
}

static int reap(struct child *c)
{
    int st;
    waitpid(c->pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int flow(const char *mode)
{
    alarm(90);
    struct child a, b, c;
    spawn(&a, "A", mode);
    spawn(&b, "B", mode);
    spawn(&c, "C", mode);
    char la[256], lb[256], lc[256], x[256];
    child_line(&a, la, sizeof(la));
    child_line(&b, lb, sizeof(lb));
    child_line(&c, lc, sizeof(lc));
    char aaddr[160], baddr[160], caddr[160];
    unsigned aq, bq1, bq2, cq;
    if (sscanf(la, "%159s %u", aaddr, &aq) != 2 ||
        sscanf(lb, "%159s %u %u", baddr, &bq1, &bq2) != 3 ||
        sscanf(lc, "%159s %u", caddr, &cq) != 2)
        return 1;
    tell(&a, "%s %u\n", baddr, bq1);
    tell(&b, "%s %u %s %u\n", aaddr, aq, caddr, cq);
    tell(&c, "%s %u\n", baddr, bq2);
    child_line(&c, x, sizeof(x));
    printf("flow %s: C's bytes vs codec_gf reference: %s\n", mode, x);
    int ok = strcmp(x, "EQUAL") == 0;
    char d[64];
    child_line(&a, d, sizeof(d));
    child_line(&b, d, sizeof(d));
    child_line(&c, d, sizeof(d));
    tell(&a, "bye\n");
    tell(&b, "bye\n");
    tell(&c, "bye\n");
    int ra = reap(&a), rb = reap(&b), rc = reap(&c);
    printf("exit codes A=%d B=%d C=%d\n", ra, rb, rc);
    struct child *all[3] = {&a, &b, &c};
    for (int i = 0; i < 3; i++) {
        fclose(all[i]->in);
        fclose(all[i]->out);
    }
    return ok && ra == 0 && rb == 0 && rc == 0 ? 0 : 1;
}

/* A child's side of the pairing (parent_pair): its QP, connected to the
 * parent's; NULL if the parent sent no address. */
static struct inec_qp *child_pair(struct node *n)
{
    struct inec_qp *qp = node_qp(n);
    printf("%s %u\n", inec_device_addr(n->dev), inec_qp_num(qp));
    fflush(stdout);
    char line[256], addr[160];
    unsigned q;
    read_line(line, sizeof(line));
    if (sscanf(line, "%159s %u", addr, &q) != 2)
        return NULL;
    CHECK(inec_qp_connect(qp, addr, q));
    return qp;
}

/* The victim: connects, never posts a RECV, never sends; killed by the parent. */
static int victim(void)
{
    alarm(60);
    struct node n;
    node_open(&n, 4096);
    if (!child_pair(&n))
        return 1;
    printf("connected\n");
    fflush(stdout);
    for (;;)
        pause();
}

/* Takes one big message: prints its RECV's status. */
#define BIG (32u << 20)
static int taker(void)
{
    alarm(60);
    struct node n;
    node_open(&n, BIG);
    struct inec_qp *qp = child_pair(&n);
    if (!qp)
        return 1;
    post_recv(qp, (struct inec_sge){n.mem, BIG, n.mr});
    printf("connected\n");
    fflush(stdout);
    struct inec_wc wc;
    CHECK(inec_cq_wait(n.cq, 1, &wc, T_MS));
    printf("%s\n", inec_wc_status_str(wc.status));
    fflush(stdout);
    char line[16];
    read_line(line, sizeof(line));
    node_close(&n);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The parent's side: spawns `role`, connects qp to the child's QP and waits
 * for the child to say it is connected. */
static int parent_pair(struct node *n, struct inec_qp *qp, struct child *c, const char *role)
{
    spawn(c, role, "");
    char line[256], addr[160];
    unsigned q;
    child_line(c, line, sizeof(line));
    if (sscanf(line, "%159s %u", addr, &q) != 2)
        return -1;
    CHECK(inec_qp_connect(qp, addr, q));
    tell(c, "%s %u\n", inec_device_addr(n->dev), inec_qp_num(qp));
    child_line(c, line, sizeof(line));
    return 0;
}

/* sig: SIGKILL (the peer dies: its kernel closes the socket) or SIGSTOP (the
 * peer hangs with its socket open: only the silence timeout can tell). */
static int kill_test(int sig)
{
    alarm(60);
    struct node n;
    node_open(&n, 1 << 20);
    struct inec_qp *qp = node_qp(&n);
    struct child v;
    if (parent_pair(&n, qp, &v, "victim"))
        return 1;

    /* Waiting on the victim: a SEND (no RECV there), two RECVs, and a
     * recv-ec chain plus an ec-send whose SEND goes to the victim. */
    uint8_t *m = n.mem;
    struct inec_sge s0 = {m, 1000, n.mr};
    struct inec_wr send = {.wr_id = 1, .opcode = INEC_WR_SEND, .sg_list = &s0, .num_sge = 1};
    CHECK(inec_post_send(qp, &send, NULL));
    post_recv(qp, (struct inec_sge){m + 4096, 1000, n.mr});
    post_recv(qp, (struct inec_sge){m + 8192, 1000, n.mr});
    struct inec_cq *wcq[1] = {n.cq};
    uint64_t wcount[1] = {inec_cq_expected(n.cq)};
    struct inec_wait_desc wait = {wcq, wcount, 1};
    struct inec_sge in[2] = {{m + 4096, 1000, n.mr}, {m + 8192, 1000, n.mr}};
    struct inec_sge out = {m + 12288, 1000, n.mr};
    struct inec_mem_desc mem = {in, 2, &out, 1};
    struct inec_calc_desc calc = {.qp = n.calc, .kind = INEC_CALC_XOR};
    CHECK(inec_recv_ec(&wait, &calc, &mem));
    uint64_t errors_before = inec_cq_errors(n.calc_cq);

    usleep(100000); /* let everything reach its waiting point */
    struct inec_wc wc;
    if (inec_poll_cq(n.cq, 1, &wc) != 0 || inec_cq_count(n.calc_cq) != 0) {
        fprintf(stderr, "something completed before the kill\n");
        return 1;
    }
    double t0 = now();
    kill(v.pid, sig);
    if (sig == SIGKILL)
        reap(&v);
    /* SEND + 2 RECVs on n.cq, WAIT + CALC on the calculator: all errors. */
    int errors = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(inec_cq_wait(n.cq, 1, &wc, T_MS));
        errors += wc.status != INEC_WC_SUCCESS;
        printf("  %s wr=%llu: %s\n", wc.opcode == INEC_WC_RECV ? "recv" : "send",
               (unsigned long long)wc.wr_id, inec_wc_status_str(wc.status));
    }
    for (int i = 0; i < 2; i++) {
        CHECK(inec_cq_wait(n.calc_cq, 1, &wc, T_MS));
        errors += wc.status != INEC_WC_SUCCESS;
        printf("  %s: %s\n", wc.opcode == INEC_WC_WAIT ? "wait" : "calc",
               inec_wc_status_str(wc.status));
    }
    double dt = now() - t0;
    printf("peer %s: %d of 5 waiting requests failed, in %.3f s\n",
           sig == SIGKILL ? "killed" : "stopped", errors, dt);
    if (sig != SIGKILL) {
        kill(v.pid, SIGKILL);
        reap(&v);
    }
    int ok = errors == 5 && inec_qp_in_error(qp) && inec_cq_errors(n.calc_cq) > errors_before;
    /* Posting to the dead QP fails fast too. */
    CHECK(inec_post_send(qp, &send, NULL));
    CHECK(inec_cq_wait(n.cq, 1, &wc, T_MS));
    ok &= wc.status == INEC_WC_FLUSH_ERR;
    node_close(&n);
    fclose(v.in);
    fclose(v.out);
    return ok && dt < 10.0 ? 0 : 1;
}

static int abandon_test(void)
{
    alarm(60);
    struct node n;
    node_open(&n, BIG);
    struct inec_qp *qp = node_qp(&n);
    struct child t;
    if (parent_pair(&n, qp, &t, "taker"))
        return 1;
    usleep(200000); /* the taker's credit for its RECV arrives */
    kill(t.pid, SIGSTOP);
    fill(n.mem, BIG, 9);
    struct inec_sge sg = {n.mem, BIG, n.mr};
    struct inec_wr send = {.wr_id = 1, .opcode = INEC_WR_SEND, .sg_list = &sg, .num_sge = 1};
    CHECK(inec_post_send(qp, &send, NULL));
    usleep(300000); /* what the sockets hold went out; the rest waits */
    struct inec_wc wc;
    int early = inec_poll_cq(n.cq, 1, &wc);
    double t0 = now();
    inec_qp_destroy(qp);
    n.nqps = 0;
    double dt = now() - t0;
    memset(n.mem, 0xee, BIG); /* the sender's memory is its own again */
    kill(t.pid, SIGCONT);
    char line[256];
    child_line(&t, line, sizeof(line));
    tell(&t, "bye\n");
    reap(&t);
    printf("close with a message half sent: %.3f s; the taker's RECV: %s\n", dt, line);
    node_close(&n);
    fclose(t.in);
    fclose(t.out);
    return early == 0 && dt < 1.0 && strcmp(line, inec_wc_status_str(INEC_WC_SUCCESS)) != 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "role") == 0) {
        if (strcmp(argv[2], "victim") == 0)
            return victim();
        if (strcmp(argv[2], "taker") == 0)
            return taker();
        unsigned flags = argc >= 4 && strcmp(argv[3], "incoherent") == 0 ? INEC_PRIM_INCOHERENT : 0;
        return role(argv[2], flags);
    }
    char dir[] = "/tmp/inec-peer-XXXXXX", secret[64], err[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    if (inec_secret_create(secret, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    setenv("INEC_PEER_SECRET", secret, 1);
    int rc = 2;
    if (argc >= 2 && strcmp(argv[1], "flow") == 0)
        rc = flow(argc >= 3 ? argv[2] : "coherent");
    else if (argc >= 2 && strcmp(argv[1], "kill") == 0)
        rc = kill_test(SIGKILL);
    else if (argc >= 2 && strcmp(argv[1], "hang") == 0)
        rc = kill_test(SIGSTOP);
    else if (argc >= 2 && strcmp(argv[1], "abandon") == 0)
        rc = abandon_test();
    else
        fprintf(stderr, "usage: inec_peer flow [coherent|incoherent] | kill | hang | abandon\n");
    unlink(secret);
    rmdir(dir);
    return rc;
}
