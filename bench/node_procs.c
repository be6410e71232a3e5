/* Node processes on loopback tcp for a benchmark (bench.h: bench_nodes_*). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "bench/bench.h"
#include "inec/auth.h"
#include "placement/placement.h"

#define START_TIMEOUT_S 30

extern char **environ;

struct bench_nodes {
    int n;
    char dir[4096], config[4200];
    pid_t pid[BENCH_NODES_MAX];
};

/* A free loopback port below the ephemeral range (32768+), as
 * scripts/cluster.sh picks them: a port bind(0) hands out can be taken by an
 * outgoing connection before the node binds it, and a node keeps its port
 * across a restart. */
static int free_port(const int *taken, int ntaken)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint16_t r;
        RAND_bytes((unsigned char *)&r, sizeof(r));
        int p = 20000 + r % 12000, dup = 0;
        for (int i = 0; i < ntaken; i++)
            dup |= taken[i] == p;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && !dup && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return p;
    }
    return -1;
}

static void log_path(const struct bench_nodes *c, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/n%d.log", c->dir, i);
}

/* Starts `inec node run` for node i (this very binary) and waits for its
 * "listening" line. */
int bench_nodes_start_one(struct bench_nodes *c, int i, char *err, size_t errlen)
{
    char exe[4096], id[16], log[4300];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        snprintf(err, errlen, "cannot find this program: %s", strerror(errno));
        return -errno;
    }
    exe[n] = '\0';
    snprintf(id, sizeof(id), "n%d", i);
    log_path(c, i, log, sizeof(log));
    unlink(log);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {exe, "node", "run", "--config", c->config, "--id", id, NULL};
    int rc = posix_spawn(&c->pid[i], exe, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc) {
        c->pid[i] = 0;
        snprintf(err, errlen, "starting node %s: %s", id, strerror(rc));
        return -rc;
    }
    double deadline = bench_now() + START_TIMEOUT_S;
    for (;;) {
        char line[512] = "";
        FILE *f = fopen(log, "r");
        bool up = false;
        while (f && fgets(line, sizeof(line), f))
            up |= strncmp(line, "listening", 9) == 0;
        if (f)
            fclose(f);
        if (up)
            return 0;
        int st;
        if (waitpid(c->pid[i], &st, WNOHANG) == c->pid[i] || bench_now() > deadline) {
            snprintf(err, errlen, "node %s did not start (see %s): %s", id, log, line);
            bench_nodes_stop_one(c, i);
            return -EIO;
        }
        usleep(20000);
    }
}

void bench_nodes_stop_one(struct bench_nodes *c, int i)
{
    if (c->pid[i] <= 0)
        return;
    kill(c->pid[i], SIGTERM);
    for (int t = 0; t < 500; t++) { /* 10 s, then SIGKILL */
        if (waitpid(c->pid[i], NULL, WNOHANG) == c->pid[i]) {
            c->pid[i] = 0;
            return;
        }
        usleep(20000);
    }
    kill(c->pid[i], SIGKILL);
    waitpid(c->pid[i], NULL, 0);
    c->pid[i] = 0;
}

int bench_nodes_start(const char *dir, int n, const char *profile, json_t **cfg,
                      struct bench_nodes **out, char *err, size_t errlen)
{
    if (n < 1 || n > BENCH_NODES_MAX)
        return -EINVAL;
    struct bench_nodes *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->n = n;
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    snprintf(c->config, sizeof(c->config), "%s/cluster.json", dir);
    char secret[4200];
    snprintf(secret, sizeof(secret), "%s/cluster.secret", dir);
    int rc = mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -errno;
    if (rc)
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(-rc));
    if (rc == 0 && (rc = inec_secret_create(secret, err, errlen)) > 0)
        rc = 0;
    json_t *nodes = json_array(), *data = json_object();
    int ports[BENCH_NODES_MAX];
    for (int i = 0; i < n && rc == 0; i++) {
        char id[16], addr[32], path[4300];
        if ((ports[i] = free_port(ports, i)) < 0) {
            snprintf(err, errlen, "no free loopback port");
            rc = -EADDRINUSE;
            break;
        }
        snprintf(id, sizeof(id), "n%d", i);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", ports[i]);
        snprintf(path, sizeof(path), "%s/node-%d", dir, i);
        json_array_append_new(nodes, json_pack("{s:s,s:s}", "id", id, "address", addr));
        json_object_set_new(data, id, json_pack("{s:s}", "data", path));
    }
    *cfg = json_pack("{s:s,s:{s:O,s:[{s:s,s:s,s:i}]},s:O}", "secret_file", secret, "map", "nodes",
                     nodes, "pools", "name", "default", "profile", profile, "chunk_size",
                     PLACE_CHUNK_SIZE, "nodes", data);
    json_decref(nodes);
    json_decref(data);
    if (rc == 0 && (!*cfg || json_dump_file(*cfg, c->config, JSON_INDENT(2)) != 0)) {
        snprintf(err, errlen, "writing %s", c->config);
        rc = -EIO;
    }
    for (int i = 0; i < n && rc == 0; i++)
        rc = bench_nodes_start_one(c, i, err, errlen);
    if (rc) {
        bench_nodes_stop(c);
        json_decref(*cfg);
        *cfg = NULL;
        return rc;
    }
    *out = c;
    return 0;
}

void bench_nodes_stop(struct bench_nodes *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        bench_nodes_stop_one(c, i);
    free(c);
}
