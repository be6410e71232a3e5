/* The cluster secret file and the mutual HMAC handshake (inec/auth.h): files
 * made 0600 and refused when others may read them, every rotation step, and
 * every way a proof must fail (wrong key, reflected, relayed, tampered). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "inec/auth.h"
#include "inec/hostport.h"

static char dir[64], path[128];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/inec-auth-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof(path), "%s/secret", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return rmdir(dir);
}

static void load(struct inec_keyring *kr)
{
    char err[300];
    int rc = inec_secret_load(path, kr, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
}

static void test_create_and_refuse(void **state)
{
    (void)state;
    char err[300];
    assert_int_equal(inec_secret_create(path, err, sizeof(err)), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    struct inec_keyring a, b;
    load(&a);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.role[0], INEC_KEY_CURRENT);
    assert_int_equal(inec_secret_create(path, err, sizeof(err)), 1); /* kept */
    load(&b);
    assert_memory_equal(a.key[0], b.key[0], INEC_SECRET_BYTES);
    static const mode_t loose[] = {0604, 0640, 0644, 0660};
    for (int i = 0; i < 4; i++) {
        chmod(path, loose[i]);
        assert_int_equal(inec_secret_load(path, &b, err, sizeof(err)), -EACCES);
        assert_non_null(strstr(err, "chmod 600"));
    }
    chmod(path, 0600);
    FILE *f = fopen(path, "w");
    fprintf(f, "current 00ff\n");
    fclose(f);
    assert_int_equal(inec_secret_load(path, &b, err, sizeof(err)), -EINVAL);
    f = fopen(path, "w");
    fprintf(f, "previous %064d\n", 0);
    fclose(f);
    assert_int_equal(inec_secret_load(path, &b, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "no 'current'"));
}

static void test_rotation_steps(void **state)
{
    (void)state;
    char err[300];
    struct inec_keyring k0, k1, k2, k3;
    assert_int_equal(inec_secret_create(path, err, sizeof(err)), 0);
    load(&k0);
    assert_int_equal(inec_secret_step(path, "stage", err, sizeof(err)), 0);
    load(&k1);
    assert_int_equal(k1.n, 2);
    assert_memory_equal(k1.key[0], k0.key[0], INEC_SECRET_BYTES); /* still proves with it */
    assert_int_equal(k1.role[1], INEC_KEY_NEXT);
    assert_int_equal(inec_secret_step(path, "rotate", err, sizeof(err)), 0);
    load(&k2);
    assert_int_equal(k2.n, 2);
    assert_memory_equal(k2.key[0], k1.key[1], INEC_SECRET_BYTES); /* the staged key */
    assert_int_equal(k2.role[1], INEC_KEY_PREVIOUS);
    assert_memory_equal(k2.key[1], k0.key[0], INEC_SECRET_BYTES);
    assert_int_equal(inec_secret_step(path, "retire", err, sizeof(err)), 0);
    load(&k3);
    assert_int_equal(k3.n, 1);
    assert_memory_equal(k3.key[0], k2.key[0], INEC_SECRET_BYTES);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(inec_secret_step(path, "bogus", err, sizeof(err)), -EINVAL);
    /* rotate with nothing staged makes a new key */
    assert_int_equal(inec_secret_step(path, "rotate", err, sizeof(err)), 0);
    load(&k1);
    assert_memory_not_equal(k1.key[0], k3.key[0], INEC_SECRET_BYTES);
}

static void keyring(struct inec_keyring *kr, uint8_t fill)
{
    memset(kr, 0, sizeof(*kr));
    char hex[80];
    for (int i = 0; i < INEC_SECRET_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned)(uint8_t)(fill + i));
    FILE *f = fopen(path, "w");
    fprintf(f, "current %s\n", hex);
    fclose(f);
    chmod(path, 0600);
    load(kr);
}

static void test_handshake_messages(void **state)
{
    (void)state;
    char err[300];
    struct inec_keyring a, b;
    keyring(&a, 1);
    keyring(&b, 2);
    struct inec_auth_m1 m1;
    struct inec_auth_m2 m2;
    struct inec_auth_m3 m3;
    const uint8_t *key;
    /* the good path */
    inec_auth_m1_make(&a, "gw", "10.0.0.1:7001", &m1);
    assert_int_equal(
        inec_auth_m2_make(&a, "cm", "10.0.0.1:7001", "n1", &m1, &m2, &key, err, sizeof(err)), 0);
    assert_int_equal(inec_auth_m2_check(&a, "cm", &m1, &m2, &m3, err, sizeof(err)), 0);
    assert_int_equal(inec_auth_m3_check(key, "cm", &m1, &m2, &m3, err, sizeof(err)), 0);
    /* a reflected proof (R's MAC sent back as I's) fails */
    struct inec_auth_m3 reflected;
    memcpy(reflected.mac, m2.mac, 32);
    assert_int_equal(inec_auth_m3_check(key, "cm", &m1, &m2, &reflected, err, sizeof(err)),
                     -EACCES);
    /* another context (a tcp device link) does not accept a cm proof */
    assert_int_equal(inec_auth_m3_check(key, "tcp", &m1, &m2, &m3, err, sizeof(err)), -EACCES);
    /* a tampered nonce or name fails on the initiator */
    m2.nonce[0] ^= 1;
    assert_int_equal(inec_auth_m2_check(&a, "cm", &m1, &m2, &m3, err, sizeof(err)), -EACCES);
    /* a key the responder does not hold ends it at once */
    inec_auth_m1_make(&b, "intruder", "10.0.0.1:7001", &m1);
    assert_int_equal(
        inec_auth_m2_make(&a, "cm", "10.0.0.1:7001", "n1", &m1, &m2, &key, err, sizeof(err)),
        -EACCES);
    /* a responder holding a's key but the initiator's M1 claiming a's id with
     * b's key: R answers, I's proof does not verify */
    inec_auth_m1_make(&a, "intruder", "10.0.0.1:7001", &m1);
    assert_int_equal(
        inec_auth_m2_make(&a, "cm", "10.0.0.1:7001", "n1", &m1, &m2, &key, err, sizeof(err)), 0);
    assert_int_equal(inec_auth_m2_check(&b, "cm", &m1, &m2, &m3, err, sizeof(err)), -EACCES);
    /* a handshake meant for another address (a relay) */
    inec_auth_m1_make(&a, "gw", "10.9.9.9:7001", &m1);
    assert_int_equal(
        inec_auth_m2_make(&a, "cm", "10.0.0.1:7001", "n1", &m1, &m2, &key, err, sizeof(err)),
        -EACCES);
    /* garbage */
    memset(&m1, 'x', sizeof(m1));
    assert_int_equal(inec_auth_m2_make(&a, "cm", NULL, "n1", &m1, &m2, &key, err, sizeof(err)),
                     -EPROTO);
}

static void test_rotation_handshake(void **state)
{
    (void)state;
    char err[300];
    struct inec_keyring old, rotated, staged;
    assert_int_equal(inec_secret_create(path, err, sizeof(err)), 0);
    load(&old);
    assert_int_equal(inec_secret_step(path, "stage", err, sizeof(err)), 0);
    load(&staged);
    assert_int_equal(inec_secret_step(path, "rotate", err, sizeof(err)), 0);
    load(&rotated);
    const struct inec_keyring *pairs[][2] = {
        {&old, &staged}, {&staged, &rotated}, {&rotated, &staged}, {&old, &rotated}};
    for (int i = 0; i < 4; i++) { /* initiator, responder: every neighbouring step works */
        struct inec_auth_m1 m1;
        struct inec_auth_m2 m2;
        struct inec_auth_m3 m3;
        const uint8_t *key;
        inec_auth_m1_make(pairs[i][0], "a", "h:1", &m1);
        assert_int_equal(
            inec_auth_m2_make(pairs[i][1], "tcp", "h:1", "b", &m1, &m2, &key, err, sizeof(err)), 0);
        assert_int_equal(inec_auth_m2_check(pairs[i][0], "tcp", &m1, &m2, &m3, err, sizeof(err)),
                         0);
        assert_int_equal(inec_auth_m3_check(key, "tcp", &m1, &m2, &m3, err, sizeof(err)), 0);
    }
    /* retired: the old key is no longer accepted */
    assert_int_equal(inec_secret_step(path, "retire", err, sizeof(err)), 0);
    struct inec_keyring retired;
    load(&retired);
    struct inec_auth_m1 m1;
    struct inec_auth_m2 m2;
    const uint8_t *key;
    inec_auth_m1_make(&old, "a", "h:1", &m1);
    assert_int_equal(
        inec_auth_m2_make(&retired, "tcp", "h:1", "b", &m1, &m2, &key, err, sizeof(err)), -EACCES);
}

static void test_addr_matches(void **state)
{
    (void)state;
    assert_true(inec_auth_addr_matches("tcp:127.0.0.1:5000", "tcp:127.0.0.1:5000"));
    assert_true(inec_auth_addr_matches("127.0.0.1:5000", "tcp:127.0.0.1:5000"));
    assert_true(inec_auth_addr_matches("localhost:5000", "127.0.0.1:5000"));
    assert_true(inec_auth_addr_matches("10.1.2.3:5000", "0.0.0.0:5000"));
    assert_false(inec_auth_addr_matches("127.0.0.1:5001", "127.0.0.1:5000"));
    assert_false(inec_auth_addr_matches("127.0.0.2:5000", "127.0.0.1:5000"));
    assert_false(inec_auth_addr_matches("garbage", "127.0.0.1:5000"));
    /* IPv6: literals in brackets, the v6 wildcard, never v4 for v6 */
    assert_true(inec_auth_addr_matches("tcp:[::1]:5000", "tcp:[::1]:5000"));
    assert_true(inec_auth_addr_matches("[0:0::1]:5000", "[::1]:5000"));
    assert_true(inec_auth_addr_matches("[fd00::2]:5000", "[::]:5000"));
    assert_true(inec_auth_addr_matches("10.1.2.3:5000", "[::]:5000"));
    assert_false(inec_auth_addr_matches("[::1]:5001", "[::1]:5000"));
    assert_false(inec_auth_addr_matches("[::2]:5000", "[::1]:5000"));
    assert_false(inec_auth_addr_matches("127.0.0.1:5000", "[::1]:5000"));
    assert_false(inec_auth_addr_matches("::1:5000", "[::1]:5000"));
}

/* HOST:PORT as every TCP endpoint reads and writes it. */
static void test_hostport(void **state)
{
    (void)state;
    char host[64], port[8], out[64];
    assert_int_equal(inec_hostport_split("10.0.0.1:7000", host, sizeof(host), port, sizeof(port)),
                     0);
    assert_string_equal(host, "10.0.0.1");
    assert_string_equal(port, "7000");
    assert_int_equal(inec_hostport_split("[fd00::2]:0", host, sizeof(host), port, sizeof(port)), 0);
    assert_string_equal(host, "fd00::2");
    assert_string_equal(port, "0");
    assert_int_equal(inec_hostport_split(":9", host, sizeof(host), port, sizeof(port)), 0);
    assert_string_equal(host, "");
    static const char *const bad[] = {
        "fd00::2:7000", "[fd00::2]7000", "[::1]", "h", "h:", "h:65536", "h:-1", "h:7x", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(inec_hostport_split(bad[i], host, sizeof(host), port, sizeof(port)),
                         -EINVAL);
    assert_int_equal(inec_hostport_split("a-long-name:1", host, 4, port, sizeof(port)), -EINVAL);

    inec_hostport_join("fd00::2", 7000, out, sizeof(out));
    assert_string_equal(out, "[fd00::2]:7000");
    inec_hostport_join("node-1", 7000, out, sizeof(out));
    assert_string_equal(out, "node-1:7000");

    struct sockaddr_storage ss;
    socklen_t len;
    assert_int_equal(inec_hostport_resolve("[::1]:80", false, &ss, &len), 0);
    inec_sockaddr_str((struct sockaddr *)&ss, true, out, sizeof(out));
    assert_string_equal(out, "[::1]:80");
    /* a name with both addresses: its IPv4 one */
    assert_int_equal(inec_hostport_resolve("localhost:80", false, &ss, &len), 0);
    inec_sockaddr_str((struct sockaddr *)&ss, true, out, sizeof(out));
    assert_string_equal(out, "127.0.0.1:80");
    assert_int_equal(inec_hostport_resolve(":80", true, &ss, &len), 0);
    inec_sockaddr_str((struct sockaddr *)&ss, false, out, sizeof(out));
    assert_string_equal(out, "0.0.0.0");
    assert_int_equal(inec_hostport_resolve("no-such-host.invalid:80", false, &ss, &len),
                     -EHOSTUNREACH);

    /* a link-local address keeps its scope both ways */
    unsigned lo = if_nametoindex("lo");
    if (lo) {
        struct sockaddr_in6 ll = {
            .sin6_family = AF_INET6, .sin6_port = htons(7000), .sin6_scope_id = lo};
        assert_int_equal(inet_pton(AF_INET6, "fe80::1", &ll.sin6_addr), 1);
        inec_sockaddr_str((struct sockaddr *)&ll, true, out, sizeof(out));
        assert_string_equal(out, "[fe80::1%lo]:7000");
        assert_int_equal(inec_hostport_resolve(out, false, &ss, &len), 0);
        assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_scope_id, lo);
    }

    /* A server's listener: HOST:PORT with the port the kernel chose, or why
     * there is none. */
    char bound[64], want[64], err[128];
    int lfd = inec_tcp_listen_bound("127.0.0.1:0", 4, bound, sizeof(bound), err, sizeof(err));
    assert_true(lfd >= 0);
    len = sizeof(ss);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
    snprintf(want, sizeof(want), "127.0.0.1:%u", inec_sockaddr_port((struct sockaddr *)&ss));
    assert_string_equal(bound, want);
    assert_int_equal(inec_tcp_listen_bound(bound, 4, out, sizeof(out), err, sizeof(err)),
                     -EADDRINUSE);
    assert_non_null(strstr(err, bound));
    close(lfd);
    assert_int_equal(inec_tcp_listen_bound("127.0.0.1", 4, out, sizeof(out), err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "is not HOST:PORT"));
    assert_int_equal(
        inec_tcp_listen_bound("no-such-host.invalid:0", 4, out, sizeof(out), err, sizeof(err)),
        -EHOSTUNREACH);
    assert_non_null(strstr(err, "cannot resolve the host"));

    /* A listener on the v6 loopback, its bound port read back. */
    int fd = inec_tcp_listen("[::1]:0", 4);
    if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) {
        print_message("no IPv6 loopback here: listen not checked\n");
        return;
    }
    assert_true(fd >= 0);
    len = sizeof(ss);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_true(inec_sockaddr_port((struct sockaddr *)&ss) > 0);
    close(fd);
}

struct side {
    int fd;
    const struct inec_keyring *kr;
    int rc;
    char err[300], peer[INEC_AUTH_NAME];
};

static void *responder(void *arg)
{
    struct side *s = arg;
    s->rc = inec_auth_respond(s->fd, s->kr, "cm", "127.0.0.1:7", "node", s->peer, 2000, s->err,
                              sizeof(s->err));
    if (s->rc)
        close(s->fd); /* as a server does */
    return NULL;
}

static void test_over_a_socket(void **state)
{
    (void)state;
    struct inec_keyring a, b;
    keyring(&a, 7);
    keyring(&b, 9);
    const struct inec_keyring *rk[] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        struct side r = {.fd = sv[1], .kr = rk[i]};
        pthread_t t;
        pthread_create(&t, NULL, responder, &r);
        char err[300], peer[INEC_AUTH_NAME];
        int rc =
            inec_auth_initiate(sv[0], &a, "cm", "gw", "127.0.0.1:7", peer, 2000, err, sizeof(err));
        pthread_join(t, NULL);
        if (i == 0) {
            assert_int_equal(rc, 0);
            assert_int_equal(r.rc, 0);
            assert_string_equal(peer, "node");
            assert_string_equal(r.peer, "gw");
            close(sv[1]);
        } else {
            assert_int_equal(rc, -EACCES);
            assert_int_equal(r.rc, -EACCES);
        }
        close(sv[0]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_refuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_handshake, setup, teardown),
        cmocka_unit_test(test_addr_matches),
        cmocka_unit_test(test_hostport),
        cmocka_unit_test_setup_teardown(test_over_a_socket, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
