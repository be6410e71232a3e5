/*
 * Pulls of the soft tcp transport (inec/providers/soft/tcp_pull.h) between
 * two real processes of this host: this program and a copy of itself it
 * starts as the receiver (INEC_PULL_CHILD). Large SENDs arrive whole and are
 * pulled (or, with pull=0 on either side, go through the socket), and a
 * message whose sender gave its memory back before the receiver pulled it
 * fails instead of delivering what the memory holds by then. A raw peer
 * that answers the hello wrongly gets no pulls placed.
 */
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "inec/auth.h"
#include "inec/inec.h"
#include "tcp_raw_peer.h"

#define T_MS 20000
#define MSG  (1u << 20) /* above PULL_MIN */
#define N    4

extern char **environ;

static uint8_t pattern(size_t i, int round)
{
    return (uint8_t)(i * 31 + (size_t)round * 7 + 1);
}

/* ---- the receiver (the child process) ----------------------------------- */

static void say(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fflush(out);
}

/* Lines to and from the parent on two pipes; exit status 0 when all held. */
static int receiver(int rfd, int wfd, const char *opts)
{
    FILE *in = fdopen(rfd, "r"), *out = fdopen(wfd, "w");
    struct inec_device *dev;
    struct inec_cq *cq;
    struct inec_qp *qp;
    struct inec_mr *mr;
    uint8_t *buf = calloc(N + 1, MSG);
    if (!in || !out || !buf || inec_device_open("soft", opts, &dev) || inec_cq_create(dev, 64, &cq))
        return 2;
    struct inec_qp_attr attr = {.type = INEC_QP_RC, .send_cq = cq, .recv_cq = cq};
    if (inec_qp_create(dev, &attr, &qp) || inec_mr_reg(dev, buf, (size_t)(N + 1) * MSG, &mr))
        return 2;
    say(out, "%s %u\n", inec_device_addr(dev), inec_qp_num(qp));
    char peer[128];
    unsigned pqpn;
    if (fscanf(in, "%127s %u", peer, &pqpn) != 2 || inec_qp_connect(qp, peer, pqpn))
        return 3;
    for (int i = 0; i <= N; i++) { /* one more for the last round */
        struct inec_sge sge = {buf + (size_t)i * MSG, MSG, mr};
        struct inec_wr wr = {
            .wr_id = (uint64_t)i, .opcode = INEC_WR_RECV, .sg_list = &sge, .num_sge = 1};
        if (inec_post_recv(qp, &wr, NULL))
            return 3;
    }
    say(out, "ready\n");
    struct inec_wc wc;
    for (int i = 0; i < N; i++) {
        if (inec_cq_wait(cq, 1, &wc, T_MS) != 1 || wc.status != INEC_WC_SUCCESS ||
            wc.byte_len != MSG)
            return 4;
    }
    for (size_t i = 0; i < (size_t)N * MSG; i++)
        if (buf[i] != pattern(i % MSG, (int)(i / MSG)))
            return 5;
    struct inec_device_stats st;
    inec_device_stats(dev, &st);
    say(out, "pulled %llu staged %llu\n", (unsigned long long)st.rx_pulled_bytes,
        (unsigned long long)st.rx_staged_bytes);
    /* The last round: the parent stops us, sends, takes the memory back. */
    if (inec_cq_wait(cq, 1, &wc, T_MS) != 1)
        return 6;
    say(out, "last %d %d\n", (int)wc.status,
        wc.status == INEC_WC_SUCCESS && buf[(size_t)N * MSG] == 0x22);
    inec_qp_destroy(qp);
    inec_mr_dereg(mr);
    inec_cq_destroy(cq);
    inec_device_close(dev);
    free(buf);
    return 0;
}

/* ---- the sender (the test) ----------------------------------------------- */

struct child {
    pid_t pid;
    FILE *in, *out; /* its lines, ours */
};

static void child_start(struct child *c, const char *opts)
{
    int down[2], up[2];
    assert_int_equal(pipe(down), 0);
    assert_int_equal(pipe(up), 0);
    char env_child[64], env_opts[256];
    snprintf(env_child, sizeof(env_child), "INEC_PULL_CHILD=%d,%d", down[0], up[1]);
    snprintf(env_opts, sizeof(env_opts), "INEC_PULL_OPTS=%s", opts);
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 3, sizeof(*envp)); /* ours, then the two */
    assert_non_null(envp);
    memcpy(envp, environ, n * sizeof(*envp));
    envp[n] = env_child;
    envp[n + 1] = env_opts;
    char *argv[] = {"test_inec_pull", NULL};
    assert_int_equal(posix_spawn(&c->pid, "/proc/self/exe", NULL, NULL, argv, envp), 0);
    free(envp);
    close(down[0]);
    close(up[1]);
    c->in = fdopen(up[0], "r");
    c->out = fdopen(down[1], "w");
    assert_non_null(c->in);
    assert_non_null(c->out);
}

static int child_end(struct child *c)
{
    fclose(c->in);
    fclose(c->out);
    int st = 0;
    assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void post_send(struct inec_qp *qp, void *addr, struct inec_mr *mr, uint64_t id)
{
    struct inec_sge sge = {addr, MSG, mr};
    struct inec_wr wr = {
        .wr_id = id, .opcode = INEC_WR_SEND, .flags = INEC_SIGNALED, .sg_list = &sge, .num_sge = 1};
    assert_int_equal(inec_post_send(qp, &wr, NULL), 0);
}

/* send_opts: this side's device; recv_opts: the child's. Pulls happen only
 * when both allow them. */
static void run(const char *send_opts, const char *recv_opts, bool pulls)
{
    struct child c;
    child_start(&c, recv_opts);
    struct inec_device *dev;
    struct inec_cq *cq;
    struct inec_qp *qp;
    struct inec_mr *mr;
    uint8_t *buf = malloc((size_t)N * MSG);
    assert_int_equal(inec_device_open("soft", send_opts, &dev), 0);
    assert_int_equal(inec_cq_create(dev, 64, &cq), 0);
    struct inec_qp_attr attr = {.type = INEC_QP_RC, .send_cq = cq, .recv_cq = cq};
    assert_int_equal(inec_qp_create(dev, &attr, &qp), 0);
    assert_int_equal(inec_mr_reg(dev, buf, (size_t)N * MSG, &mr), 0);
    char peer[128];
    unsigned pqpn;
    assert_int_equal(fscanf(c.in, "%127s %u", peer, &pqpn), 2);
    assert_int_equal(inec_qp_connect(qp, peer, pqpn), 0);
    fprintf(c.out, "%s %u\n", inec_device_addr(dev), inec_qp_num(qp));
    fflush(c.out);
    char word[32];
    assert_int_equal(fscanf(c.in, "%31s", word), 1);
    assert_string_equal(word, "ready");
    /* Pulls start once the receiver checked this process (after the
     * handshake): until then messages go through the socket. */
    struct inec_device_stats st = {0};
    for (int i = 0; pulls && i < T_MS && !st.pull_peers; i++) {
        inec_device_stats(dev, &st);
        usleep(1000);
    }
    for (size_t i = 0; i < (size_t)N * MSG; i++)
        buf[i] = pattern(i % MSG, (int)(i / MSG));
    for (int i = 0; i < N; i++)
        post_send(qp, buf + (size_t)i * MSG, mr, (uint64_t)i);
    struct inec_wc wc;
    for (int i = 0; i < N; i++) {
        assert_int_equal(inec_cq_wait(cq, 1, &wc, T_MS), 1);
        assert_int_equal(wc.status, INEC_WC_SUCCESS);
    }
    unsigned long long pulled, staged;
    assert_int_equal(fscanf(c.in, " pulled %llu staged %llu", &pulled, &staged), 2);
    print_message("%s -> %s: %llu bytes pulled, %llu staged\n", send_opts, recv_opts, pulled,
                  staged);
    assert_int_equal(pulled, pulls ? (unsigned long long)N * MSG : 0);
    if (pulls) {
        /* The receiver stopped, a pull waits in its socket; the sender
         * closes the QP (its gate moves) and reuses the memory: the pull,
         * read after the receiver resumes, must fail. */
        assert_int_equal(kill(c.pid, SIGSTOP), 0);
        int st;
        assert_int_equal(waitpid(c.pid, &st, WUNTRACED), c.pid);
        memset(buf, 0x11, MSG);
        post_send(qp, buf, mr, 99);
        usleep(20000); /* the frame leaves from this thread or the engine */
        inec_qp_destroy(qp);
        qp = NULL;
        memset(buf, 0x22, MSG);
        assert_int_equal(kill(c.pid, SIGCONT), 0);
        int status, stale;
        assert_int_equal(fscanf(c.in, " last %d %d", &status, &stale), 2);
        assert_int_equal(stale, 0);
        assert_int_not_equal(status, INEC_WC_SUCCESS);
    } else {
        inec_qp_destroy(qp); /* the child's last RECV fails with the connection */
        qp = NULL;
        int status, stale;
        assert_int_equal(fscanf(c.in, " last %d %d", &status, &stale), 2);
    }
    assert_int_equal(child_end(&c), 0);
    inec_mr_dereg(mr);
    inec_cq_destroy(cq);
    inec_device_close(dev);
    free(buf);
}

/* The two processes prove one cluster secret (without one each process
 * makes up its own). */
static char tcp_opts[300];

static char secret_dir[] = "/tmp/inec-pull-XXXXXX";
static char secret_path[64];

static int make_secret(void **state)
{
    (void)state;
    char err[256];
    if (!mkdtemp(secret_dir))
        return -1;
    snprintf(secret_path, sizeof(secret_path), "%s/secret", secret_dir);
    const char *path = secret_path;
    if (inec_secret_create(path, err, sizeof(err)))
        return -1;
    snprintf(tcp_opts, sizeof(tcp_opts), "transport=tcp,listen=127.0.0.1:0,secret=%s", path);
    return 0;
}

static int drop_secret(void **state)
{
    (void)state;
    unlink(secret_path);
    rmdir(secret_dir);
    return 0;
}

static void with_pull0(char *out, size_t len)
{
    snprintf(out, len, "%s,pull=0", tcp_opts);
}

static void test_pulled(void **state)
{
    (void)state;
    run(tcp_opts, tcp_opts, true);
}

static void test_sender_refuses(void **state)
{
    (void)state;
    char off[320];
    with_pull0(off, sizeof(off));
    run(off, tcp_opts, false);
}

static void test_receiver_refuses(void **state)
{
    (void)state;
    char off[320];
    with_pull0(off, sizeof(off));
    run(tcp_opts, off, false);
}

/* ---- a raw peer speaking the frames (inec/providers/soft/tcp.c) ----------- */

/* The next frame with `flags` set in op's frames (others skipped); false on EOF. */
static bool raw_next(int fd, uint8_t op, uint32_t flags, struct raw_frame *f)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, T_MS) != 1 || recv(fd, f, sizeof(*f), MSG_WAITALL) != sizeof(*f))
            return false;
        if (f->op == op && (f->flags & flags) == flags)
            return true;
    }
}

/* A device's hello answered with `proof` held in our memory (right: its
 * challenge), then a SEND pulled from `payload`: placed only when right. */
static void hello_answered(bool right)
{
    struct inec_device *dev;
    struct inec_cq *cq;
    struct inec_qp *qp;
    struct inec_mr *mr;
    uint8_t *dst = calloc(1, MSG), *payload = malloc(MSG);
    memset(payload, 0x5a, MSG);
    assert_int_equal(inec_device_open("soft", tcp_opts, &dev), 0);
    assert_int_equal(inec_cq_create(dev, 16, &cq), 0);
    struct inec_qp_attr attr = {.type = INEC_QP_RC, .send_cq = cq, .recv_cq = cq};
    assert_int_equal(inec_qp_create(dev, &attr, &qp), 0);
    assert_int_equal(inec_mr_reg(dev, dst, MSG, &mr), 0);
    struct inec_sge sge = {dst, MSG, mr};
    struct inec_wr rwr = {.opcode = INEC_WR_RECV, .sg_list = &sge, .num_sge = 1};
    assert_int_equal(inec_post_recv(qp, &rwr, NULL), 0);

    int fd = raw_peer_connect(inec_device_addr(dev), secret_path, T_MS);
    struct raw_frame f;
    assert_true(raw_next(fd, RAW_F_PING, RAW_FR_HELLO, &f));
    static uint64_t proof, gate = 7;
    proof = right ? f.len : f.len + 2;
    struct raw_frame pong = {.op = RAW_F_PONG,
                             .flags = RAW_FR_HELLO,
                             .imm = (uint32_t)getpid(),
                             .addr = (uint64_t)(uintptr_t)&proof};
    assert_int_equal(send(fd, &pong, sizeof(pong), MSG_NOSIGNAL), (ssize_t)sizeof(pong));
    if (right)
        assert_true(raw_next(fd, RAW_F_PONG, RAW_FR_PULLS, &f)); /* "send me pulls" */
    struct raw_frame h = {.dst_qpn = inec_qp_num(qp),
                          .src_qpn = 1,
                          .op = RAW_F_SEND,
                          .status = 1,
                          .flags = RAW_FR_PULL,
                          .len = MSG};
    uint64_t list[4] = {(uint64_t)(uintptr_t)&gate, gate, (uint64_t)(uintptr_t)payload, MSG};
    assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    assert_int_equal(send(fd, list, sizeof(list), MSG_NOSIGNAL), (ssize_t)sizeof(list));
    struct inec_wc wc;
    assert_int_equal(inec_cq_wait(cq, 1, &wc, T_MS), 1);
    struct inec_device_stats st;
    inec_device_stats(dev, &st);
    if (right) {
        assert_int_equal(wc.status, INEC_WC_SUCCESS);
        assert_memory_equal(dst, payload, MSG);
        assert_int_equal(st.rx_pulled_bytes, MSG);
    } else { /* a pull it did not agree to: the connection fails, nothing read */
        assert_int_not_equal(wc.status, INEC_WC_SUCCESS);
        assert_int_equal(st.rx_pulled_bytes, 0);
        for (size_t i = 0; i < MSG; i++)
            if (dst[i])
                fail_msg("byte %zu placed from a peer that failed the hello", i);
        assert_false(raw_next(fd, 0xff, 0, &f)); /* closed */
    }
    close(fd);
    inec_qp_destroy(qp);
    inec_mr_dereg(mr);
    inec_cq_destroy(cq);
    inec_device_close(dev);
    free(dst);
    free(payload);
}

static void test_hello_right(void **state)
{
    (void)state;
    hello_answered(true);
}

static void test_hello_wrong(void **state)
{
    (void)state;
    hello_answered(false);
}

int main(void)
{
    const char *child = getenv("INEC_PULL_CHILD");
    int rfd, wfd;
    if (child && sscanf(child, "%d,%d", &rfd, &wfd) == 2)
        return receiver(rfd, wfd, getenv("INEC_PULL_OPTS") ? getenv("INEC_PULL_OPTS") : "");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pulled),           cmocka_unit_test(test_sender_refuses),
        cmocka_unit_test(test_receiver_refuses), cmocka_unit_test(test_hello_right),
        cmocka_unit_test(test_hello_wrong),
    };
    return cmocka_run_group_tests_name("inec pull", tests, make_secret, drop_secret);
}
