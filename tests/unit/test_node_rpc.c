/*
 * The node service and its client, in-process over the mem transport: every
 * request type, the errors that must reach the client distinctly (unknown
 * type, oversize, corrupt chunk, dead node), and DEG encode and repair run
 * node to node with the results checked against the codec.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "codecs/codec.h"
#include "deg/deg.h"
#include "inec/auth.h"
#include "inec/inec.h"
#include "node/client.h"
#include "node/cpus.h"
#include "node/rpc.h"
#include "node/service.h"
#include "placement/placement.h"

#define DEVOPTS "transport=mem,engine_threads=2"

struct fixture {
    char dir[64];
    struct node_service *svc;
    struct inec_device *dev;
    struct node_client *c;
};

static void start(struct fixture *f, const char *dir)
{
    char err[256];
    struct node_service_config cfg = {.id = "n0",
                                      .domain = "rack1",
                                      .data_dir = dir,
                                      .device_options = DEVOPTS,
                                      .timeout_ms = 5000};
    assert_int_equal(node_service_start(&cfg, &f->svc, err, sizeof(err)), 0);
    struct node_client_opts o = {.timeout_ms = 5000};
    assert_int_equal(node_client_connect_local(f->dev, f->svc, &o, &f->c, err, sizeof(err)), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/inec-noderpc-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(inec_device_open(NULL, DEVOPTS, &f->dev), 0);
    start(f, f->dir);
    *state = f;
    return 0;
}

static void rm_tree(const char *root)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    node_client_close(f->c);
    node_service_stop(f->svc);
    inec_device_close(f->dev);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static struct node_chunk_id chunk_id(uint8_t tag, uint64_t stripe, uint32_t index)
{
    struct node_chunk_id id = {.stripe = stripe, .index = index};
    memset(id.object, tag, sizeof(id.object));
    return id;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* Fragments reassembled apart from any QP (rpc_rx_feed), with the frame a
 * hostile peer may send: a continuation claiming a larger total than the
 * first fragment sized the buffer by (found by fuzz/fuzz_rpc_frame) is
 * dropped with its message, never copied past the buffer. */
static size_t frame(uint8_t *f, uint32_t total, uint32_t offset, uint64_t id, const char *payload)
{
    static const uint32_t magic = 0x50524e49u; /* rpc.c's RPC_MAGIC */
    size_t n = strlen(payload);
    memset(f, 0, 32);
    memcpy(f, &magic, 4);
    f[4] = NODE_RPC_GET_META;
    rpc_put64(f + 8, id);
    rpc_put64(f + 16, (uint64_t)total | (uint64_t)offset << 32);
    memcpy(f + 32, payload, n);
    return 32 + n;
}

static void test_reassembly(void **state)
{
    (void)state;
    struct rpc_rx rx = {0};
    struct rpc_msg m;
    uint8_t f[128];
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 0, 1, "abcd"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 4, 1, "efgh"), &m), 1);
    assert_int_equal(m.len, 8);
    assert_memory_equal(m.data, "abcdefgh", 8);
    assert_int_equal(m.type, NODE_RPC_GET_META);
    free(m.data);
    /* the continuation claims 64 bytes of a message that has room for 8 */
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 0, 2, "abcd"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 64, 4, 2, "0123456789abcdef"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 4, 2, "efgh"), &m), 1); /* the real one */
    assert_memory_equal(m.data, "abcdefgh", 8);
    free(m.data);
    /* a continuation of another request, or out of order, or garbage */
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 0, 3, "abcd"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 4, 4, "efgh"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 5, 3, "fgh"), &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, 10, &m), 0);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 4, 3, "efgh"), &m), 0); /* dropped above */
    /* too large a message: its header, no data */
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, NODE_RPC_MAX_MSG + 1, 0, 5, "x"), &m), -EMSGSIZE);
    assert_null(m.data);
    assert_int_equal(rpc_rx_feed(&rx, f, frame(f, 8, 0, 6, "abcd"), &m), 0);
    rpc_rx_clear(&rx); /* a message half received is freed */
}

struct inventory {
    int n;
    struct node_chunk_id last;
    uint32_t len[8];
};

static int on_chunk(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    struct inventory *inv = arg;
    (void)version;
    if (inv->n)
        assert_true(memcmp(&inv->last, id, sizeof(*id)) != 0 && inv->last.stripe < id->stripe);
    inv->last = *id;
    inv->len[inv->n < 8 ? inv->n : 7] = len;
    inv->n++;
    return 0;
}

static int on_repair(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    (void)id, (void)version, (void)arg;
    return 0;
}

static void test_chunks(void **state)
{
    struct fixture *f = *state;
    /* One fragment, and several (a multi-MiB chunk crosses NODE_RPC_FRAG many times). */
    size_t sizes[] = {0, 1000, NODE_RPC_FRAG - 40, (3u << 20) + 17, NODE_CHUNK_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct node_chunk_id id = chunk_id(1, i, 2);
        uint8_t *data = malloc(sizes[i] + 1);
        fill(data, sizes[i], (unsigned)i);
        assert_int_equal(node_client_put_chunk(f->c, &id, 7, data, sizes[i]), 0);
        void *got;
        size_t len;
        uint64_t ver;
        assert_int_equal(node_client_get_chunk(f->c, &id, &got, &len, &ver), 0);
        assert_int_equal(len, sizes[i]);
        assert_int_equal(ver, 7);
        assert_memory_equal(got, data, sizes[i]);
        free(got);
        /* Into registered memory: the node WRITEs the bytes there, and
         * nothing around them. */
        size_t room = sizes[i] + 64;
        uint8_t *mem = malloc(room);
        memset(mem, 0xa5, room);
        struct inec_mr *mr;
        assert_int_equal(inec_mr_reg(f->dev, mem, room, &mr), 0);
        ver = 0;
        len = 1;
        assert_int_equal(
            node_client_get_chunk_to(f->c, &id, mem + 32, sizes[i], inec_mr_rkey(mr), &len, &ver),
            0);
        assert_int_equal(len, sizes[i]);
        assert_int_equal(ver, 7);
        assert_memory_equal(mem + 32, data, sizes[i]);
        for (size_t b = 0; b < 32; b++)
            assert_true(mem[b] == 0xa5 && mem[32 + sizes[i] + b] == 0xa5);
        /* Less room than the chunk: refused, nothing written. */
        if (sizes[i]) {
            memset(mem, 0xa5, room);
            assert_int_equal(node_client_get_chunk_to(f->c, &id, mem, sizes[i] - 1,
                                                      inec_mr_rkey(mr), &len, NULL),
                             -EMSGSIZE);
            for (size_t b = 0; b < room; b++)
                assert_true(mem[b] == 0xa5);
        }
        inec_mr_dereg(mr);
        free(mem);
        free(data);
    }
    struct node_chunk_id id = chunk_id(1, 1, 2);
    assert_int_equal(node_client_put_chunk(f->c, &id, 6, "x", 1), -ESTALE);
    assert_int_equal(node_client_delete_chunk(f->c, &id, 7), 0);
    void *got;
    size_t len;
    assert_int_equal(node_client_get_chunk(f->c, &id, &got, &len, NULL), -ENOENT);
    assert_int_equal(node_client_delete_chunk(f->c, &id, 7), -ENOENT);
    /* Larger than any chunk: refused before anything is sent. */
    assert_int_equal(node_client_put_chunk(f->c, &id, 8, "x", NODE_CHUNK_MAX + 1), -EMSGSIZE);
    /* The connection is still good. */
    assert_int_equal(node_client_put_chunk(f->c, &id, 8, "y", 1), 0);
    /* The inventory: every chunk in id order, in pages. */
    struct inventory inv = {0};
    int more = 1, n;
    while (more) {
        n = node_client_list_chunks(f->c, inv.n ? &inv.last : NULL, 2, on_chunk, &inv, &more);
        assert_true(n >= 0 && n <= 2);
    }
    assert_int_equal(inv.n, 5); /* stripes 0, 2, 3, 4 and the rewritten 1 */
    assert_int_equal(inv.len[1], 1);
    assert_int_equal(node_client_list_repair(f->c, on_repair, NULL, &more), 0);
    assert_int_equal(more, 0);
}

/* A node from before NODE_RPC_GET_CHUNK_TO, over tcp as a separate node is
 * reached: it answers that request -EOPNOTSUPP ("unknown request type"), and
 * a plain GET_CHUNK with its one chunk. It counts what it was asked. */
#define OLD_CHUNK 5000
struct old_node {
    int lfd;
    char listen[64];
    struct inec_device *dev;
    pthread_t th;
    atomic_bool stop;
    atomic_int asked_to, asked_plain;
};

static void old_answer(struct old_node *on, struct rpc_ep *ep, const struct rpc_msg *m)
{
    struct rpc_msg h = {.type = m->type, .flags = RPC_F_RESPONSE, .req_id = m->req_id};
    if (m->type == NODE_RPC_GET_CHUNK) {
        atomic_fetch_add(&on->asked_plain, 1);
        static uint8_t body[8 + OLD_CHUNK];
        rpc_put64(body, 7);
        fill(body + 8, OLD_CHUNK, 9);
        assert_int_equal(rpc_ep_send(ep, &h, body, sizeof(body), NULL, 0, NULL, NULL), 0);
    } else {
        atomic_fetch_add(&on->asked_to, m->type == NODE_RPC_GET_CHUNK_TO);
        static const char msg[] = "unknown request type";
        h.status = -EOPNOTSUPP;
        assert_int_equal(rpc_ep_send(ep, &h, msg, sizeof(msg) - 1, NULL, 0, NULL, NULL), 0);
    }
}

static void *old_node_main(void *arg)
{
    struct old_node *on = arg;
    int fd = accept(on->lfd, NULL, NULL);
    assert_true(fd >= 0);
    struct inec_keyring kr;
    char err[300], peer[INEC_AUTH_NAME], line[512], addr[300];
    inec_keyring_get(NULL, &kr, err, sizeof(err)); /* this process's: the client's too */
    assert_int_equal(
        inec_auth_respond(fd, &kr, "cm", on->listen, "old", peer, 5000, err, sizeof(err)), 0);
    inec_keyring_clear(&kr);
    ssize_t got = 0, n;
    while (!memchr(line, '\n', (size_t)got) &&
           (n = recv(fd, line + got, sizeof(line) - 1 - (size_t)got, 0)) > 0)
        got += n;
    line[got] = 0;
    unsigned qpn = 0;
    assert_int_equal(sscanf(line, "{\"addr\":\"%299[^\"]\",\"qpn\":%u}", addr, &qpn), 2);
    struct inec_cq *cq, *scq;
    struct rpc_ep *ep;
    assert_int_equal(inec_cq_create(on->dev, 256, &cq), 0);
    assert_int_equal(inec_cq_create(on->dev, 256, &scq), 0);
    assert_int_equal(rpc_ep_open(on->dev, scq, cq, &ep), 0);
    assert_int_equal(rpc_ep_connect(ep, addr, qpn), 0);
    int len = snprintf(line, sizeof(line), "{\"addr\":\"%s\",\"qpn\":%u}\n",
                       inec_device_addr(on->dev), rpc_ep_qpn(ep));
    assert_int_equal(send(fd, line, (size_t)len, MSG_NOSIGNAL), len);
    close(fd);
    while (!atomic_load(&on->stop)) {
        struct inec_wc wc[16];
        struct rpc_msg m;
        int nw = inec_cq_wait(cq, 16, wc, 50);
        for (int i = 0; i < nw; i++) {
            if (rpc_ep_complete(ep, &wc[i], &m) == 1) {
                old_answer(on, ep, &m);
                free(m.data);
            }
        }
        while ((nw = inec_poll_cq(scq, 16, wc)) > 0)
            for (int i = 0; i < nw; i++)
                rpc_ep_complete(ep, &wc[i], &m);
    }
    rpc_ep_close(ep);
    inec_cq_destroy(cq);
    inec_cq_destroy(scq);
    return NULL;
}

/* A gateway newer than its node: the first read into registered memory is
 * answered as an unknown request, asked again plainly at once, and every
 * later read of that client goes plainly; the bytes land in the caller's
 * memory all the same. */
static void test_old_node(void **state)
{
    (void)state;
    const char *opts = "transport=tcp,listen=127.0.0.1:0";
    struct old_node on = {0};
    assert_int_equal(inec_device_open(NULL, opts, &on.dev), 0);
    on.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(on.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(on.lfd, 1), 0);
    assert_int_equal(getsockname(on.lfd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(on.listen, sizeof(on.listen), "127.0.0.1:%u", ntohs(sa.sin_port));
    assert_int_equal(pthread_create(&on.th, NULL, old_node_main, &on), 0);

    struct inec_device *dev;
    struct node_client *c;
    char err[256];
    struct node_client_opts o = {.timeout_ms = 5000};
    assert_int_equal(inec_device_open(NULL, opts, &dev), 0);
    assert_int_equal(node_client_connect(dev, on.listen, &o, &c, err, sizeof(err)), 0);
    uint8_t want[OLD_CHUNK], *mem = calloc(1, OLD_CHUNK);
    fill(want, OLD_CHUNK, 9);
    struct inec_mr *mr;
    assert_int_equal(inec_mr_reg(dev, mem, OLD_CHUNK, &mr), 0);
    struct node_chunk_id id = chunk_id(3, 0, 0);
    for (int i = 0; i < 2; i++) {
        size_t len = 0;
        uint64_t ver = 0;
        memset(mem, 0, OLD_CHUNK);
        assert_int_equal(
            node_client_get_chunk_to(c, &id, mem, OLD_CHUNK, inec_mr_rkey(mr), &len, &ver), 0);
        assert_int_equal(len, OLD_CHUNK);
        assert_int_equal(ver, 7);
        assert_memory_equal(mem, want, OLD_CHUNK);
    }
    assert_int_equal(atomic_load(&on.asked_to), 1);
    assert_int_equal(atomic_load(&on.asked_plain), 2);
    /* Less room than the chunk: refused here, nothing written. */
    size_t len;
    memset(mem, 0, OLD_CHUNK);
    assert_int_equal(
        node_client_get_chunk_to(c, &id, mem, OLD_CHUNK - 1, inec_mr_rkey(mr), &len, NULL),
        -EMSGSIZE);
    assert_true(mem[0] == 0 && mem[OLD_CHUNK - 2] == 0);

    node_client_close(c);
    atomic_store(&on.stop, true);
    pthread_join(on.th, NULL);
    close(on.lfd);
    inec_mr_dereg(mr);
    free(mem);
    inec_device_close(dev);
    inec_device_close(on.dev);
}

struct seen {
    int n;
    char keys[8][32];
};

static int on_meta(const char *key, const void *blob, size_t len, void *arg)
{
    struct seen *s = arg;
    assert_true(s->n < 8);
    snprintf(s->keys[s->n++], 32, "%s", key);
    /* The blobs are key + NUL: a listing hands out only the part before the
     * first NUL (a gateway's tail stays on the node), a get the whole blob. */
    assert_int_equal(len, strlen(key));
    assert_memory_equal(blob, key, len);
    return 0;
}

/* Small RPCs leave from the endpoint's send buffers, registered once: no
 * registration per message (on verbs each would pin pages, ibv_reg_mr).
 * test_chunks covers the sends too large for them (sent in place). */
static void test_no_registration_per_rpc(void **state)
{
    struct fixture *f = *state;
    uint8_t d[1000];
    fill(d, sizeof(d), 5);
    struct node_chunk_id id = chunk_id(0x5a, 1, 0);
    struct inec_device_stats s0, s1;
    inec_device_stats(f->dev, &s0);
    for (int i = 0; i < 50; i++) {
        struct node_health h;
        assert_int_equal(node_client_health(f->c, &h), 0);
        assert_int_equal(node_client_put_meta(f->c, "bk", "k", (uint64_t)i + 1, 0, "v", 2, NULL),
                         0);
        assert_int_equal(node_client_put_chunk(f->c, &id, (uint64_t)i + 1, d, sizeof(d)), 0);
        void *got;
        size_t len;
        assert_int_equal(node_client_get_chunk(f->c, &id, &got, &len, NULL), 0);
        assert_int_equal(len, sizeof(d));
        assert_memory_equal(got, d, sizeof(d));
        free(got);
    }
    inec_device_stats(f->dev, &s1);
    /* Before: one or two per request, 200 to 250 here. */
    assert_true(s1.registrations - s0.registrations < 5);
}

/* A send's data is the caller's until its completion only when it went in
 * place; a message that fits a send buffer was copied when sent, so the
 * node client's call waits for no completion of it (node/client.c). */
static void test_in_place_sends(void **state)
{
    struct fixture *f = *state;
    struct inec_cq *cqa, *cqb;
    struct rpc_ep *a, *b;
    assert_int_equal(inec_cq_create(f->dev, 64, &cqa), 0);
    assert_int_equal(inec_cq_create(f->dev, 64, &cqb), 0);
    assert_int_equal(rpc_ep_open(f->dev, cqa, cqa, &a), 0);
    assert_int_equal(rpc_ep_open(f->dev, cqb, cqb, &b), 0);
    assert_int_equal(rpc_ep_connect(a, inec_device_addr(f->dev), rpc_ep_qpn(b)), 0);
    assert_int_equal(rpc_ep_connect(b, inec_device_addr(f->dev), rpc_ep_qpn(a)), 0);
    static uint8_t small[1000], large[64 << 10];
    fill(small, sizeof(small), 1);
    fill(large, sizeof(large), 2);
    struct rpc_msg h = {.type = 1, .req_id = 1};
    assert_int_equal(rpc_ep_send(a, &h, NULL, 0, small, sizeof(small), NULL, NULL), 0);
    assert_false(rpc_ep_sending_in_place(a));
    memset(small, 0, sizeof(small)); /* the caller may reuse it at once */
    h.req_id = 2;
    assert_int_equal(rpc_ep_send(a, &h, NULL, 0, large, sizeof(large), NULL, NULL), 0);
    assert_true(rpc_ep_sending_in_place(a)); /* until its completion is taken */
    struct inec_wc wc;
    while (rpc_ep_sending_in_place(a)) {
        assert_int_equal(inec_cq_wait(cqa, 1, &wc, 5000), 1);
        struct rpc_msg m;
        assert_true(rpc_ep_owns(a, &wc));
        assert_int_equal(rpc_ep_complete(a, &wc, &m), 0);
    }
    fill(small, sizeof(small), 1);
    for (int got = 0; got < 2;) {
        assert_int_equal(inec_cq_wait(cqb, 1, &wc, 5000), 1);
        struct rpc_msg m;
        if (rpc_ep_complete(b, &wc, &m) != 1)
            continue;
        got++;
        assert_int_equal(m.len, m.req_id == 1 ? sizeof(small) : sizeof(large));
        assert_memory_equal(m.data, m.req_id == 1 ? small : large, m.len);
        free(m.data);
    }
    rpc_ep_close(a);
    rpc_ep_close(b);
    inec_cq_destroy(cqa);
    inec_cq_destroy(cqb);
}

static void test_meta(void **state)
{
    struct fixture *f = *state;
    const char *keys[] = {"a/1", "a/2", "a/3", "b/1"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(
            node_client_put_meta(f->c, "bk", keys[i], 1, 0, keys[i], strlen(keys[i]) + 1, NULL), 0);
    void *blob;
    size_t len;
    assert_int_equal(node_client_get_meta(f->c, "bk", "a/2", &blob, &len), 0);
    assert_int_equal(len, 4);
    assert_string_equal(blob, "a/2");
    free(blob);
    assert_int_equal(node_client_get_meta(f->c, "bk", "zz", &blob, &len), -ENOENT);
    struct seen s = {0};
    int more = -1;
    assert_int_equal(node_client_list_meta(f->c, "bk", "a/", "a/1", 1, on_meta, &s, &more), 1);
    assert_string_equal(s.keys[0], "a/2");
    assert_int_equal(more, 1);
    memset(&s, 0, sizeof(s));
    assert_int_equal(node_client_list_meta(f->c, "bk", "a/", NULL, 0, on_meta, &s, &more), 3);
    assert_int_equal(more, 0);
    assert_string_equal(s.keys[2], "a/3");
    assert_int_equal(node_client_delete_meta(f->c, "bk", "a/2"), 0);
    assert_int_equal(node_client_delete_meta(f->c, "bk", "a/2"), -ENOENT);
    char longkey[NODE_KEY_MAX + 10];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = 0;
    assert_int_equal(node_client_put_meta(f->c, "bk", longkey, 1, 0, "x", 1, NULL), -ENAMETOOLONG);
}

struct ender {
    struct node_call *k;
    int rc;
};

static void *end_put(void *arg)
{
    struct ender *e = arg;
    uint64_t stored;
    e->rc = node_client_put_meta_end(e->k, &stored, NULL, NULL);
    return NULL;
}

struct getter {
    struct node_client *c;
    int rc;
};

static void *get_blocking(void *arg)
{
    struct getter *g = arg;
    void *blob = NULL;
    size_t len;
    g->rc = node_client_get_meta(g->c, "st", "k1", &blob, &len);
    free(blob);
    return NULL;
}

/* Calls in steps: two out at once from one thread on two clients, taken as
 * they come; a call ended on another thread than the one that started it;
 * and a blocking call on a client with a call out waits for that one to end. */
static void test_calls_in_steps(void **state)
{
    struct fixture *f = *state;
    char err[256];
    struct node_client_opts o = {.timeout_ms = 5000};
    struct node_client *c2;
    assert_int_equal(node_client_connect_local(f->dev, f->svc, &o, &c2, err, sizeof(err)), 0);
    struct node_call k1, k2;
    assert_int_equal(node_client_put_meta_start(f->c, "st", "k1", 7, 0, "one", 4, &k1), 0);
    assert_int_equal(node_client_get_meta_start(c2, "st", "none", &k2), 0);
    struct node_call *both[2] = {&k1, &k2};
    for (int i = 0; i < 1000; i++) {
        bool d1 = node_call_poll(&k1), d2 = node_call_poll(&k2);
        if (d1 && d2)
            break;
        assert_int_equal(node_calls_wait(both, 2, 5000), 0);
    }
    assert_true(k1.done && k2.done);
    void *blob;
    size_t len;
    assert_int_equal(node_client_put_meta_end(&k1, NULL, NULL, NULL), 0);
    assert_int_equal(node_client_get_meta_end(&k2, &blob, &len), -ENOENT);
    /* Started here, ended there. */
    assert_int_equal(node_client_put_meta_start(f->c, "st", "k1", 8, 0, "two", 4, &k1), 0);
    struct ender e = {&k1, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, end_put, &e), 0);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    /* A refusal names the version held, through the steps too. */
    uint64_t stored = 0;
    assert_int_equal(node_client_put_meta_start(f->c, "st", "k1", 5, 0, "old", 4, &k1), 0);
    assert_int_equal(node_client_put_meta_end(&k1, &stored, NULL, NULL), -ESTALE);
    assert_int_equal(stored, 8);
    /* The client is busy while a call is out: another call on it waits. */
    assert_int_equal(node_client_get_meta_start(f->c, "st", "k1", &k2), 0);
    struct getter g = {f->c, 1};
    assert_int_equal(pthread_create(&t, NULL, get_blocking, &g), 0);
    usleep(50 * 1000);
    assert_int_equal(g.rc, 1); /* still waiting for the client */
    assert_int_equal(node_client_get_meta_end(&k2, &blob, &len), 0);
    assert_int_equal(len, 4);
    assert_string_equal(blob, "two");
    free(blob);
    pthread_join(t, NULL);
    assert_int_equal(g.rc, 0);
    node_client_close(c2);
}

static void test_state(void **state)
{
    struct fixture *f = *state;
    struct node_chunk_id id = chunk_id(3, 0, 0);
    assert_int_equal(node_client_put_chunk(f->c, &id, 1, "hello", 5), 0);
    assert_int_equal(node_client_put_meta(f->c, "b", "k", 1, 0, "v", 1, NULL), 0);
    struct node_store_stats st;
    assert_int_equal(node_client_stats(f->c, &st), 0);
    assert_int_equal(st.chunks, 1);
    assert_int_equal(st.metas, 1);
    struct node_health h;
    assert_int_equal(node_client_health(f->c, &h), 0);
    assert_string_equal(h.id, "n0");
    assert_string_equal(h.domain, "rack1");
    assert_false(h.stopping);
    struct node_scrub_result r;
    assert_int_equal(node_client_scrub(f->c, &r), 0);
    assert_int_equal(r.checked, 1);
    assert_int_equal(r.corrupt, 0);
}

/* Blocking requests (chunk reads, metadata writes) run on workers the node
 * keeps: one after another they reuse one thread, not one thread each. */
static void test_workers_reused(void **state)
{
    struct fixture *f = *state;
    struct node_chunk_id id = chunk_id(4, 0, 0);
    assert_int_equal(node_client_put_chunk(f->c, &id, 1, "hello", 5), 0);
    struct node_health h0, h1;
    assert_int_equal(node_client_health(f->c, &h0), 0);
    for (int i = 0; i < 50; i++) {
        void *data = NULL;
        size_t n = 0;
        uint64_t version = 0;
        assert_int_equal(node_client_get_chunk(f->c, &id, &data, &n, &version), 0);
        assert_int_equal(n, 5);
        free(data);
        assert_int_equal(node_client_put_meta(f->c, "b", "w", (uint64_t)i + 1, 0, "v", 1, NULL), 0);
    }
    assert_int_equal(node_client_health(f->c, &h1), 0);
    /* 100 blocking requests in turn: a request may race its worker back to
     * idle now and then, never 100 times. */
    assert_true(h1.workers_started - h0.workers_started <= 8);
    assert_true(h1.workers >= 1 && h1.workers <= h1.workers_started);
}

/* Over tcp the node's engine takes its requests (inec_cq_set_notify): a
 * metadata read is answered there and a write handed to a worker, and the
 * loop, not woken, feeds almost none (it may take a request when its
 * 100 ms pass meets one). */
static void test_engine_feeds_requests(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/inec-noderpc-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char err[256];
    struct node_service_config cfg = {.id = "n0",
                                      .domain = "rack1",
                                      .data_dir = dir,
                                      .listen = "127.0.0.1:0",
                                      .timeout_ms = 5000};
    struct node_service *svc;
    assert_int_equal(node_service_start(&cfg, &svc, err, sizeof(err)), 0);
    struct inec_device *dev;
    assert_int_equal(inec_device_open(NULL, "transport=tcp,listen=127.0.0.1:0", &dev), 0);
    struct node_client_opts o = {.timeout_ms = 5000};
    struct node_client *c;
    if (node_client_connect(dev, node_service_listen_addr(svc), &o, &c, err, sizeof(err)))
        fail_msg("connect: %s", err);
    struct node_health h0, h1;
    assert_int_equal(node_client_health(c, &h0), 0);
    enum { N = 50 };
    for (int i = 0; i < N; i++) {
        assert_int_equal(node_client_put_meta(c, "b", "k", (uint64_t)i + 1, 0, "v", 1, NULL), 0);
        void *blob;
        size_t len;
        assert_int_equal(node_client_get_meta(c, "b", "k", &blob, &len), 0);
        free(blob);
    }
    assert_int_equal(node_client_health(c, &h1), 0);
    uint64_t engine = h1.requests_engine - h0.requests_engine,
             loop = h1.requests_loop - h0.requests_loop;
    print_message("%d requests: %llu fed by the engine, %llu by the loop\n", 2 * N + 1,
                  (unsigned long long)engine, (unsigned long long)loop);
    assert_int_equal(engine + loop, 2 * N + 1); /* and h0's own */
    assert_true(loop <= 5);
    node_client_close(c);
    inec_device_close(dev);
    node_service_stop(svc);
    rm_tree(dir);
}

/* A hand-made request on a raw QP: what the service answers to bytes the
 * client library would never send. Returns the response status. */
static int raw_request(struct fixture *f, uint16_t type, uint32_t total)
{
    struct inec_cq *cq;
    struct inec_qp *qp;
    struct inec_qp_attr qa = {.type = INEC_QP_RC};
    assert_int_equal(inec_cq_create(f->dev, 64, &cq), 0);
    qa.send_cq = qa.recv_cq = cq;
    assert_int_equal(inec_qp_create(f->dev, &qa, &qp), 0);
    uint8_t *buf = calloc(1, NODE_RPC_FRAG * 2);
    struct inec_mr *mr;
    assert_int_equal(inec_mr_reg(f->dev, buf, NODE_RPC_FRAG * 2, &mr), 0);
    struct inec_sge rs = {buf + NODE_RPC_FRAG, NODE_RPC_FRAG, mr};
    struct inec_wr rw = {.opcode = INEC_WR_RECV, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(inec_post_recv(qp, &rw, NULL), 0);
    uint32_t qpn;
    const char *addr;
    assert_int_equal(
        node_service_accept(f->svc, inec_device_addr(f->dev), inec_qp_num(qp), &qpn, &addr), 0);
    assert_int_equal(inec_qp_connect(qp, addr, qpn), 0);
    /* magic, type | flags << 16, request id, total | offset << 32, status */
    uint32_t w[2] = {0x50524e49u, type};
    memcpy(buf, w, 8);
    rpc_put64(buf + 8, 99);
    rpc_put64(buf + 16, total);
    struct inec_sge ss = {buf, 32 + 16, mr};
    struct inec_wr sw = {.opcode = INEC_WR_SEND, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(inec_post_send(qp, &sw, NULL), 0);
    struct inec_wc wc;
    int status = 1;
    for (int i = 0; i < 100 && status == 1; i++) {
        int n = inec_cq_wait(cq, 1, &wc, 5000);
        assert_int_equal(n, 1);
        assert_int_equal(wc.status, INEC_WC_SUCCESS);
        if (wc.opcode == INEC_WC_RECV) {
            assert_int_equal(rpc_get64(buf + NODE_RPC_FRAG + 8), 99); /* matched by id */
            status = (int32_t)(uint32_t)rpc_get64(buf + NODE_RPC_FRAG + 24);
        }
    }
    inec_qp_destroy(qp);
    inec_mr_dereg(mr);
    inec_cq_destroy(cq);
    free(buf);
    return status;
}

static void test_errors(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(raw_request(f, 200, 16), -EOPNOTSUPP);
    assert_int_equal(raw_request(f, NODE_RPC_PUT_CHUNK, NODE_RPC_MAX_MSG + 1), -EMSGSIZE);
    assert_int_equal(raw_request(f, NODE_RPC_GET_CHUNK, 16), -EPROTO); /* short head */
    /* The service goes on serving. */
    struct node_health h;
    assert_int_equal(node_client_health(f->c, &h), 0);
}

static void test_corrupt(void **state)
{
    struct fixture *f = *state;
    struct node_chunk_id id = chunk_id(4, 0, 1);
    uint8_t data[4096];
    fill(data, sizeof(data), 4);
    assert_int_equal(node_client_put_chunk(f->c, &id, 1, data, sizeof(data)), 0);
    node_client_close(f->c);
    node_service_stop(f->svc);
    /* Flip one payload byte of the only record. */
    DIR *d = opendir(f->dir);
    struct dirent *e;
    char path[512] = "";
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "seg-", 4) == 0)
            snprintf(path, sizeof(path), "%s/%s", f->dir, e->d_name);
    closedir(d);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, NODE_RECORD_HDR_BYTES + 100), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, NODE_RECORD_HDR_BYTES + 100), 1);
    close(fd);
    start(f, f->dir);
    void *got;
    size_t len;
    assert_int_equal(node_client_get_chunk(f->c, &id, &got, &len, NULL), -EBADMSG);
    assert_non_null(strstr(node_client_errmsg(f->c), "corrupt"));
    struct node_store_stats st;
    assert_int_equal(node_client_stats(f->c, &st), 0);
    assert_int_equal(st.repair, 1);
}

static void test_dead_node(void **state)
{
    struct fixture *f = *state;
    node_service_stop(f->svc);
    f->svc = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct node_health h;
    int rc = node_client_health(f->c, &h);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(rc == -EHOSTDOWN || rc == -ETIMEDOUT);
    /* Bounded by the call timeout (5 s) plus slack, never a hang. */
    assert_true(t1.tv_sec - t0.tv_sec <= 7);
    assert_int_equal(node_client_health(f->c, &h), -EHOSTDOWN);
}

/* ---- DEG on an embedded cluster ---------------------------------------------------- */

#define NNODES 6
#define LEN    (64 * 1024 + 5)

struct cluster {
    char dir[64];
    struct inec_device *dev;
    struct node_service *svc[NNODES];
    struct node_client *c[NNODES];
};

static void cluster_start(struct cluster *cl)
{
    char err[256];
    snprintf(cl->dir, sizeof(cl->dir), "/tmp/inec-nodedeg-XXXXXX");
    assert_non_null(mkdtemp(cl->dir));
    assert_int_equal(inec_device_open(NULL, DEVOPTS, &cl->dev), 0);
    for (int i = 0; i < NNODES; i++) {
        char id[16], dir[96];
        snprintf(id, sizeof(id), "n%d", i);
        snprintf(dir, sizeof(dir), "%s/%s", cl->dir, id);
        struct node_service_config cfg = {
            .id = id, .data_dir = dir, .device_options = DEVOPTS, .timeout_ms = 5000};
        assert_int_equal(node_service_start(&cfg, &cl->svc[i], err, sizeof(err)), 0);
        assert_int_equal(
            node_client_connect_local(cl->dev, cl->svc[i], NULL, &cl->c[i], err, sizeof(err)), 0);
    }
}

static void cluster_stop(struct cluster *cl)
{
    for (int i = 0; i < NNODES; i++) {
        node_client_close(cl->c[i]);
        node_service_stop(cl->svc[i]);
    }
    inec_device_close(cl->dev);
    rm_tree(cl->dir);
}

static void get_check(struct node_client *c, const struct node_stripe *s, int index,
                      const uint8_t *want)
{
    struct node_chunk_id id = {.stripe = s->stripe, .index = (uint32_t)index};
    memcpy(id.object, s->object, sizeof(id.object));
    void *got;
    size_t len;
    uint64_t ver;
    assert_int_equal(node_client_get_chunk(c, &id, &got, &len, &ver), 0);
    assert_int_equal(len, LEN);
    assert_int_equal(ver, s->version);
    assert_memory_equal(got, want, LEN);
    free(got);
}

static void test_deg_encode_repair(void **state)
{
    (void)state;
    struct cluster cl = {0};
    cluster_start(&cl);
    char err[512] = "";
    struct codec_profile p;
    struct codec *codec;
    assert_int_equal(codec_profile_parse("rs:k=3,m=2", &p, err, sizeof(err)), 0);
    assert_int_equal(codec_create(&p, &codec, err, sizeof(err)), 0);
    int n = codec_n(codec);
    uint8_t *chunks[CODEC_MAX_CHUNKS];
    for (int i = 0; i < n; i++) {
        chunks[i] = malloc(LEN);
        fill(chunks[i], LEN, 10 + (unsigned)i);
    }
    assert_int_equal(codec_encode(codec, LEN, chunks), 0);
    struct node_stripe s = {.stripe = 5, .version = 3};
    memset(s.object, 0xab, sizeof(s.object));
    struct deg_run_opts o = {.timeout_ms = 5000, .options = DEVOPTS};

    /* Encode: the gateway ec-sends, node i stores chunk i. */
    struct deg_request req = {.op = DEG_OP_ENCODE};
    deg_placement_default(&req.placement);
    struct deg_graph *g;
    assert_int_equal(deg_build(codec, &req, &g, err, sizeof(err)), 0);
    assert_int_equal(
        node_deg_run(g, LEN, chunks, cl.c, NNODES, &s, &o, NULL, NULL, err, sizeof(err)), 0);
    deg_graph_destroy(g);
    for (int i = 0; i < n; i++)
        get_check(cl.c[i], &s, i, chunks[i]);

    /* Repair: chunk 1 rebuilt on node 5 by the survivors, no gateway involved. */
    for (const char *scheme = "ppr"; scheme; scheme = NULL) {
        struct deg_request rr = {.op = DEG_OP_DECODE, .nerased = 1, .erased = {1}};
        deg_placement_default(&rr.placement);
        rr.placement.holder[1] = 5;
        struct codec_profile pp;
        struct codec *pc;
        assert_int_equal(codec_profile_parse("ppr:k=3,m=2", &pp, err, sizeof(err)), 0);
        assert_int_equal(codec_create(&pp, &pc, err, sizeof(err)), 0);
        assert_int_equal(deg_build(pc, &rr, &g, err, sizeof(err)), 0);
        for (int v = 0; v < g->nvertices; v++)
            assert_int_not_equal(g->vertices[v].node, DEG_GATEWAY);
        int rc = node_deg_run(g, LEN, NULL, cl.c, NNODES, &s, &o, NULL, NULL, err, sizeof(err));
        if (rc)
            fail_msg("repair: %s", err);
        deg_graph_destroy(g);
        codec_destroy(pc);
        get_check(cl.c[5], &s, 1, chunks[1]);
    }

    /* A node vertex whose local chunk is missing: the error names it. */
    struct deg_request rr = {.op = DEG_OP_DECODE, .nerased = 1, .erased = {0}};
    deg_placement_default(&rr.placement);
    rr.placement.holder[0] = 5;
    assert_int_equal(deg_build(codec, &rr, &g, err, sizeof(err)), 0);
    struct node_stripe missing = s;
    missing.stripe = 6;
    uint8_t *none[CODEC_MAX_CHUNKS] = {0};
    assert_int_equal(
        node_deg_run(g, LEN, none, cl.c, NNODES, &missing, &o, NULL, NULL, err, sizeof(err)),
        -ENOENT);
    assert_non_null(strstr(err, "local chunk"));
    deg_graph_destroy(g);

    for (int i = 0; i < n; i++)
        free(chunks[i]);
    codec_destroy(codec);
    cluster_stop(&cl);
}

struct rebuilt_chunk {
    int chunk, calls;
    uint8_t *data;
};

static void keep_result(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                        const uint8_t *data, size_t len)
{
    (void)g;
    (void)v;
    struct rebuilt_chunk *r = arg;
    r->calls++;
    r->chunk = label.chunk;
    if (len == LEN)
        memcpy(r->data, data, LEN);
}

/* A decode session: node sources set up once, run stripe after stripe. Node
 * 0 is lost; stripe 1 has chunk i on node i, stripe 2 its chunks in another
 * order on the same nodes. One compiled graph over abstract holders
 * (participant c holds chunk c) serves both through node_of; a graph of
 * another shape is refused, and a source whose chunk is corrupt fails the
 * run at once (the gateway's input errors out, no timeout). */
static void test_deg_decode_session(void **state)
{
    (void)state;
    struct cluster cl = {0};
    cluster_start(&cl);
    char err[512] = "";
    struct codec_profile p;
    struct codec *codec;
    assert_int_equal(codec_profile_parse("rs:k=3,m=2", &p, err, sizeof(err)), 0);
    assert_int_equal(codec_create(&p, &codec, err, sizeof(err)), 0);
    int n = codec_n(codec);
    const int place[2][5] = {{0, 1, 2, 3, 4}, {3, 1, 0, 2, 4}}; /* node of chunk c */
    uint8_t *chunks[2][CODEC_MAX_CHUNKS];
    struct node_stripe st[2];
    for (int si = 0; si < 2; si++) {
        for (int i = 0; i < n; i++) {
            chunks[si][i] = malloc(LEN);
            fill(chunks[si][i], LEN, 50 + 10 * (unsigned)si + (unsigned)i);
        }
        assert_int_equal(codec_encode(codec, LEN, chunks[si]), 0);
        st[si] = (struct node_stripe){.stripe = 1 + (uint64_t)si, .version = 1};
        memset(st[si].object, 0xcd, sizeof(st[si].object));
        for (int i = 0; i < n; i++) {
            struct node_chunk_id id = {.stripe = st[si].stripe, .index = (uint32_t)i};
            memcpy(id.object, st[si].object, sizeof(id.object));
            assert_int_equal(node_client_put_chunk(cl.c[place[si][i]], &id, 1, chunks[si][i], LEN),
                             0);
        }
    }
    /* The chunk on node 0 is lost, the one on node 4 left out: nodes 1-3 send. */
    struct deg_graph *g[2];
    for (int si = 0; si < 2; si++) {
        struct deg_request req = {.op = DEG_OP_DECODE, .nerased = 1};
        deg_placement_default(&req.placement);
        for (int c = 0; c < n; c++) {
            req.placement.holder[c] = si == 0 ? place[0][c] : c; /* stripe 2's: abstract */
            if (place[si][c] == 0)
                req.erased[0] = c;
            req.unavailable[c] = place[si][c] == 4;
        }
        assert_int_equal(deg_build(codec, &req, &g[si], err, sizeof(err)), 0);
    }
    struct deg_run_opts o = {.timeout_ms = 5000, .options = DEVOPTS};
    assert_true(node_deg_session_fits(g[0]));
    struct node_deg_session *sess;
    assert_int_equal(node_deg_session_open(g[0], LEN, cl.c, NNODES, &o, &sess, err, sizeof(err)),
                     0);
    struct rebuilt_chunk r = {.chunk = -1, .data = malloc(LEN)};
    for (int round = 0; round < 2; round++) {
        for (int si = 0; si < 2; si++) {
            r.calls = 0;
            int rc = node_deg_session_decode(sess, g[si], si ? place[1] : NULL, LEN, &st[si],
                                             keep_result, &r, err, sizeof(err));
            if (rc)
                fail_msg("decode stripe %d: %s", si + 1, err);
            assert_int_equal(r.calls, 1);
            assert_int_equal(r.chunk, si ? 2 : 0);
            assert_memory_equal(r.data, chunks[si][r.chunk], LEN);
        }
    }
    /* Two rows where the session has one: refused, the session still good. */
    struct deg_request two = {.op = DEG_OP_DECODE, .nerased = 2, .erased = {0, 1}};
    deg_placement_default(&two.placement);
    struct deg_graph *g2;
    assert_int_equal(deg_build(codec, &two, &g2, err, sizeof(err)), 0);
    assert_int_equal(
        node_deg_session_decode(sess, g2, NULL, LEN, &st[0], keep_result, &r, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "does not match"));
    deg_graph_destroy(g2);
    /* Stripe 1's chunk 1 (node 1) overwritten by a corrupt copy... of another
     * length: the source fails its run, and the gateway's input with it. */
    struct node_chunk_id id = {.stripe = st[0].stripe, .index = 1};
    memcpy(id.object, st[0].object, sizeof(id.object));
    assert_int_equal(node_client_put_chunk(cl.c[1], &id, 2, chunks[0][1], LEN - 1), 0);
    assert_int_not_equal(
        node_deg_session_decode(sess, g[0], NULL, LEN, &st[0], keep_result, &r, err, sizeof(err)),
        0);
    assert_non_null(strstr(err, "c1"));
    node_deg_session_close(sess);
    free(r.data);
    for (int si = 0; si < 2; si++) {
        deg_graph_destroy(g[si]);
        for (int i = 0; i < n; i++)
            free(chunks[si][i]);
    }
    codec_destroy(codec);
    cluster_stop(&cl);
}

/* A map of n nodes on 127.0.0.1 and one elsewhere (TEST-NET-1: no machine's). */
static struct place_map *local_map(int n)
{
    char json[8192];
    int len = snprintf(json, sizeof(json),
                       "{\"nodes\": [{\"id\": \"far\", \"address\": \"192.0.2.9:1\"}");
    for (int i = 0; i < n; i++)
        len += snprintf(json + len, sizeof(json) - (size_t)len,
                        ", {\"id\": \"n%d\", \"address\": \"127.0.0.1:%d\"}", i, 7000 + i);
    snprintf(json + len, sizeof(json) - (size_t)len, "]}");
    struct place_map *m = NULL;
    char err[256];
    assert_int_equal(place_map_parse(json, strlen(json), &m, err, sizeof(err)), 0);
    return m;
}

/* A host is crowded from as many of its nodes as the CPUs this process may
 * run on: the node and gateway devices there open spin=0. */
static void test_host_crowded(void **state)
{
    (void)state;
    int cores = node_usable_cpus();
    struct place_map *fewer = local_map(cores - 1), *as_many = local_map(cores);
    assert_false(node_host_crowded(fewer, "127.0.0.1"));
    assert_true(node_host_crowded(as_many, "127.0.0.1:7000"));
    assert_int_equal(node_host_crowded(as_many, "192.0.2.9"), cores == 1); /* its one node */
    /* Listening on a wildcard, the nodes on any address of this machine count. */
    const char *wild[] = {"0.0.0.0:7000", "0.0.0.0", "[::]:7000", ":7000"};
    for (int i = 0; i < 4; i++) {
        assert_false(node_host_crowded(fewer, wild[i]));
        assert_true(node_host_crowded(as_many, wild[i]));
    }
    place_map_destroy(fewer);
    place_map_destroy(as_many);
}

/* Writes text to root/rel, making its directories. */
static void put_file(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* A cgroup CPU quota caps the affinity, the smallest on the way from the
 * process's cgroup up to its hierarchy's mount point, rounded up to whole
 * CPUs; the cgroup path is taken relative to the mount's root (a container
 * without its own cgroup namespace). No quota, or no cgroup files: the
 * affinity. */
static void test_usable_cpus(void **state)
{
    (void)state;
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
    int affinity = CPU_COUNT(&set);
    char root[] = "/tmp/inec-cpus-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_int_equal(node_usable_cpus_at(root), affinity); /* nothing to read */

    /* v2, a pod's limit on the container's parent: 1.5 CPUs -> 2. */
    put_file(root, "proc/self/cgroup", "0::/kubepods/pod1/c1\n");
    put_file(root, "proc/self/mountinfo",
             "31 23 0:28 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n");
    put_file(root, "sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
    put_file(root, "sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
    put_file(root, "sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
    assert_int_equal(node_usable_cpus_at(root), min_int(affinity, 2));
    put_file(root, "sys/fs/cgroup/kubepods/cpu.max", "50000 100000\n"); /* an ancestor's */
    assert_int_equal(node_usable_cpus_at(root), 1);
    put_file(root, "sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
    put_file(root, "sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n");
    assert_int_equal(node_usable_cpus_at(root), affinity);
    rm_tree(root);

    /* v1 beside a v2 hierarchy without the cpu controller; the mount shows
     * the process's own cgroup as its root. */
    assert_non_null(mkdtemp(strcpy(root, "/tmp/inec-cpus-XXXXXX")));
    put_file(root, "proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n");
    put_file(root, "proc/self/mountinfo",
             "31 23 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
             "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup "
             "rw,cpu,cpuacct\n");
    put_file(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "100000\n");
    put_file(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    assert_int_equal(node_usable_cpus_at(root), 1);
    put_file(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    assert_int_equal(node_usable_cpus_at(root), affinity);
    rm_tree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_crowded),
        cmocka_unit_test(test_usable_cpus),
        cmocka_unit_test(test_reassembly),
        cmocka_unit_test_setup_teardown(test_chunks, setup, teardown),
        cmocka_unit_test(test_old_node),
        cmocka_unit_test_setup_teardown(test_no_registration_per_rpc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place_sends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_in_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workers_reused, setup, teardown),
        cmocka_unit_test(test_engine_feeds_requests),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_node, setup, teardown),
        cmocka_unit_test(test_deg_encode_repair),
        cmocka_unit_test(test_deg_decode_session),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
