/* The disk's own write rate and flush latency, as a benchmark's ceilings (bench.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

#define BLOCK      (1u << 20)
#define SYNC_EVERY (16u << 20) /* one fdatasync per 16 MiB: a large object's worth */

/* One pass: `bytes` in 1 MiB writes, an fdatasync every SYNC_EVERY. */
static int write_pass(int fd, const uint8_t *buf, uint64_t bytes, double *mbps)
{
    double t0 = bench_now();
    for (uint64_t off = 0; off < bytes; off += BLOCK) {
        if (pwrite(fd, buf, BLOCK, (off_t)off) != (ssize_t)BLOCK)
            return errno ? -errno : -EIO;
        if (((off + BLOCK) % SYNC_EVERY == 0 || off + BLOCK >= bytes) && fdatasync(fd) != 0)
            return -errno;
    }
    *mbps = (double)bytes / 1e6 / (bench_now() - t0);
    return 0;
}

int bench_disk_write_mbps(const char *dir, uint64_t bytes, int rounds, double *mbps, char *err,
                          size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/disk-limit.dat", dir);
    uint8_t *buf = malloc(BLOCK);
    int rc = buf ? 0 : -ENOMEM;
    for (size_t i = 0; buf && i < BLOCK; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 24); /* not zeros: no file system shortcut */
    *mbps = 0;
    for (int r = 0; rc == 0 && r < rounds; r++) {
        /* A new file each pass: what a node's segments are, appended. */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        double got = 0;
        rc = fd < 0 ? -errno : write_pass(fd, buf, bytes, &got);
        if (fd >= 0)
            close(fd);
        if (rc == 0 && got > *mbps)
            *mbps = got;
    }
    if (rc)
        snprintf(err, errlen, "writing %s: %s", path, strerror(-rc));
    free(buf);
    unlink(path);
    return rc;
}

#define FLUSH_FILES_MAX 64
#define FLUSH_SPAN      (256u << 10) /* each file's blocks, written before the rounds */

struct flush_run {
    int fds[FLUSH_FILES_MAX];
    int files, need, rounds;
    pthread_barrier_t start, end;
    atomic_int durable;
    double *reached; /* per round: when the need-th file was durable (the barrier publishes it) */
    atomic_int failed;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int go; /* 1: every thread started, run; -1: not all could start, quit */
};

struct flusher {
    struct flush_run *run;
    int i;
};

static void *flusher_main(void *arg)
{
    struct flusher *f = arg;
    struct flush_run *run = f->run;
    uint8_t block[4096];
    memset(block, 0x5a ^ f->i, sizeof(block));
    pthread_mutex_lock(&run->mu);
    while (!run->go)
        pthread_cond_wait(&run->cond, &run->mu);
    pthread_mutex_unlock(&run->mu);
    for (int r = 0; run->go > 0 && r < run->rounds; r++) {
        pthread_barrier_wait(&run->start);
        off_t at = (off_t)(r % (FLUSH_SPAN / sizeof(block))) * (off_t)sizeof(block);
        if (pwrite(run->fds[f->i], block, sizeof(block), at) != (ssize_t)sizeof(block) ||
            fdatasync(run->fds[f->i]) != 0)
            atomic_store(&run->failed, errno ? errno : EIO);
        if (atomic_fetch_add(&run->durable, 1) + 1 == run->need)
            run->reached[r] = bench_now();
        pthread_barrier_wait(&run->end);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bench_disk_flush_ms(const char *dir, int files, int need, int rounds, double *p50_ms, char *err,
                        size_t errlen)
{
    if (files < 1 || files > FLUSH_FILES_MAX || need < 1 || need > files || rounds < 1)
        return -EINVAL;
    struct flush_run run = {.files = files,
                            .need = need,
                            .rounds = rounds,
                            .mu = PTHREAD_MUTEX_INITIALIZER,
                            .cond = PTHREAD_COND_INITIALIZER};
    struct flusher fl[FLUSH_FILES_MAX];
    pthread_t th[FLUSH_FILES_MAX];
    double *waits = calloc((size_t)rounds, sizeof(double));
    run.reached = calloc((size_t)rounds, sizeof(*run.reached));
    uint8_t *span = calloc(1, FLUSH_SPAN);
    int rc = waits && run.reached && span ? 0 : -ENOMEM, started = 0;
    char path[4200];
    for (int i = 0; i < files; i++)
        run.fds[i] = -1;
    /* Blocks written (not merely allocated) before the rounds: an overwrite's
     * flush, as a node's metadata log does after its first round. */
    for (int i = 0; rc == 0 && i < files; i++) {
        snprintf(path, sizeof(path), "%s/flush-limit.%d", dir, i);
        run.fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (run.fds[i] < 0 || pwrite(run.fds[i], span, FLUSH_SPAN, 0) != FLUSH_SPAN ||
            fsync(run.fds[i]) != 0) {
            rc = errno ? -errno : -EIO;
            snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        }
    }
    if (rc == 0) {
        pthread_barrier_init(&run.start, NULL, (unsigned)files + 1);
        pthread_barrier_init(&run.end, NULL, (unsigned)files + 1);
        for (; started < files; started++) {
            fl[started] = (struct flusher){&run, started};
            if (pthread_create(&th[started], NULL, flusher_main, &fl[started]) != 0)
                break;
        }
        pthread_mutex_lock(&run.mu);
        run.go = started == files ? 1 : -1;
        pthread_cond_broadcast(&run.cond);
        pthread_mutex_unlock(&run.mu);
        for (int r = 0; run.go > 0 && r < rounds; r++) {
            atomic_store(&run.durable, 0);
            double t0 = bench_now();
            pthread_barrier_wait(&run.start);
            pthread_barrier_wait(&run.end);
            waits[r] = (run.reached[r] - t0) * 1e3;
        }
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&run.start);
        pthread_barrier_destroy(&run.end);
        if (run.go < 0)
            rc = -EAGAIN, snprintf(err, errlen, "cannot start %d threads", files);
        else if ((rc = -atomic_load(&run.failed)))
            snprintf(err, errlen, "flushing in %s: %s", dir, strerror(-rc));
    }
    if (rc == 0) {
        qsort(waits, (size_t)rounds, sizeof(double), cmp_double);
        *p50_ms = waits[rounds / 2];
    }
    for (int i = 0; i < files; i++) {
        if (run.fds[i] < 0)
            continue;
        close(run.fds[i]);
        snprintf(path, sizeof(path), "%s/flush-limit.%d", dir, i);
        unlink(path);
    }
    free(span);
    free(run.reached);
    free(waits);
    return rc;
}
