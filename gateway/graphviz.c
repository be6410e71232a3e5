/* `dot -Tsvg` as a bounded child process. */
#include "gateway/graphviz.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SVG_MAX    (8u << 20)
#define TIMEOUT_MS 10000

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The DOT goes in a memfd rather than a pipe: dot reads all of it before it
 * writes, so a pipe larger than its buffer would deadlock against our read. */
static int dot_input(const char *dot)
{
    int fd = memfd_create("inec-dot", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(dot), off = 0;
    while (off < len) {
        ssize_t w = write(fd, dot + off, len - off);
        if (w < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        off += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int gw_dot_to_svg(const char *dot, char **svg, size_t *len, char *msg, size_t msglen)
{
    int in = dot_input(dot);
    if (in < 0)
        return snprintf(msg, msglen, "memfd: %s", strerror(-in)), in;
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        int e = errno;
        close(in);
        return snprintf(msg, msglen, "pipe: %s", strerror(e)), -e;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    /* The child must not inherit the server's blocked SIGTERM/SIGINT. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {"dot", "-Tsvg", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in);
    close(out[1]);
    if (rc) {
        close(out[0]);
        snprintf(msg, msglen, "cannot run graphviz's dot: %s (install the graphviz package)",
                 strerror(rc));
        return rc == ENOENT ? -ENOENT : -rc;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    long long deadline = now_ms() + TIMEOUT_MS;
    int err = 0;
    for (;;) {
        long long left = deadline - now_ms();
        struct pollfd p = {out[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            err = -ETIMEDOUT;
            snprintf(msg, msglen, "dot took longer than %d s", TIMEOUT_MS / 1000);
            break;
        }
        if (n + 65536 > cap) {
            if (cap >= SVG_MAX) {
                err = -EFBIG;
                snprintf(msg, msglen, "dot wrote more than %u MiB", SVG_MAX >> 20);
                break;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 65536 * 2);
            if (!nb) {
                err = -ENOMEM;
                break;
            }
            buf = nb;
        }
        ssize_t r = read(out[0], buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r < 0)
                err = -errno;
            break;
        }
        n += (size_t)r;
    }
    close(out[0]);
    if (err)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!err && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        err = -EIO;
        snprintf(msg, msglen, "dot failed (status %d)", status);
    }
    if (err) {
        free(buf);
        return err;
    }
    buf[n] = '\0';
    *svg = buf;
    *len = n;
    return 0;
}
