/* The disk's own write rate, as a benchmark's ceiling (bench.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

#define BLOCK      (1u << 20)
#define SYNC_EVERY (16u << 20) /* one fdatasync per 16 MiB: a large object's worth */

int bench_disk_write_mbps(const char *dir, uint64_t bytes, double *mbps, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/disk-limit.dat", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    uint8_t *buf = malloc(BLOCK);
    int rc = buf ? 0 : -ENOMEM;
    for (size_t i = 0; buf && i < BLOCK; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 24); /* not zeros: no file system shortcut */
    double t0 = bench_now();
    for (uint64_t off = 0; rc == 0 && off < bytes; off += BLOCK) {
        if (pwrite(fd, buf, BLOCK, (off_t)off) != (ssize_t)BLOCK)
            rc = errno ? -errno : -EIO;
        else if ((off + BLOCK) % SYNC_EVERY == 0 || off + BLOCK >= bytes)
            rc = fdatasync(fd) == 0 ? 0 : -errno;
    }
    double secs = bench_now() - t0;
    if (rc)
        snprintf(err, errlen, "writing %s: %s", path, strerror(-rc));
    else
        *mbps = (double)bytes / 1e6 / secs;
    free(buf);
    close(fd);
    unlink(path);
    return rc;
}
