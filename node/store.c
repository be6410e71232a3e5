/*
 * The chunk store: segments of checksummed records + an LMDB index.
 * The invariants live in store.h; this file opens and closes a store, and
 * each idea has a file of its own: store_record.c (the record on disk),
 * store_index.c, store_segments.c, store_write.c, store_read.c,
 * store_meta.c (metadata records), store_meta_log.c (their log),
 * store_stats.c, store_scrub.c,
 * store_compact.c, store_recover.c; store_internal.h is what they share.
 *
 * LMDB runs with MDB_NOMETASYNC: a power failure may undo the last committed
 * txn, never corrupt. That is safe because an undone batch txn is redone by the
 * tail rescan (its records are durable and past the old watermark). Every txn
 * that cannot be redone from the log is synced explicitly: registering a segment
 * (before the first record goes into it), the compaction switch (before the old
 * segment is unlinked) and the application of the metadata log (before the
 * log restarts). (A lost repair mark is found again by the next read or
 * scrub.)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"
#include "node/store_internal.h"

#define DEFAULT_SEG (256ull << 20)

const char *node_store_strerror(int err)
{
    switch (err) {
    case -EBADMSG:
        return "chunk corrupt (checksum or identity mismatch), marked for repair";
    case -ESTALE:
        return "a newer version is stored";
    case -EMSGSIZE:
        return "chunk or buffer size out of range";
    case -ENOSPC:
        return "store full (disk or capacity)";
    case -EBUSY:
        return "store is open in another process";
    case -ENAMETOOLONG:
        return "bucket + key too long";
    case -EUCLEAN:
        return "index does not match the segments (index lost or replaced?)";
    default:
        return strerror(err < 0 ? -err : err);
    }
}

/* Test hook: is this the n-th time the process passes the named point? */
int store_crash_due(struct node_store *s, const char *name)
{
    return s->crash_at[0] && strcmp(s->crash_at, name) == 0 &&
           atomic_fetch_add(&s->crash_hits, 1) + 1 >= s->crash_n;
}

int64_t store_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void store_crash_point(struct node_store *s, const char *name)
{
    if (store_crash_due(s, name))
        raise(SIGKILL);
}

void node_store_options_default(struct node_store_options *opt)
{
    *opt = (struct node_store_options){
        .segment_size = DEFAULT_SEG,
        .capacity = 0,
        .map_size = 4ull << 30,
        .group_commit = 1,
        .create = 1,
        .direct_min = NODE_DIRECT_MIN,
    };
}

int node_store_open(const char *dir, const struct node_store_options *opt, struct node_store **out,
                    char *err, size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    if (errlen)
        err[0] = 0;
    if (!dir || !out)
        return -EINVAL;
    *out = NULL;
    struct node_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    node_store_options_default(&s->opt);
    if (opt) {
        s->opt.capacity = opt->capacity;
        s->opt.group_commit = opt->group_commit;
        s->opt.create = opt->create;
        if (opt->direct_min)
            s->opt.direct_min = opt->direct_min;
        if (opt->segment_size)
            s->opt.segment_size = opt->segment_size;
        if (opt->map_size)
            s->opt.map_size = opt->map_size;
    }
    s->dirfd = s->lockfd = -1;
    pthread_rwlock_init(&s->seg_lock, NULL);
    pthread_mutex_init(&s->write_mu, NULL);
    pthread_mutex_init(&s->acked_mu, NULL);
    pthread_cond_init(&s->acked_cond, NULL);
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_mutex_init(&s->mq_mu, NULL);
    pthread_cond_init(&s->mq_cond, NULL);
    pthread_mutex_init(&s->pend_mu, NULL);
    pthread_cond_init(&s->pend_cond, NULL);
    pthread_mutex_init(&s->compact_mu, NULL);
    pthread_mutex_init(&s->scan_mu, NULL);
    pthread_cond_init(&s->q_cond, NULL);
    pthread_cond_init(&s->done_cond, NULL);
    s->ring.ring_fd = -1;
    s->direct_fd = -1;
    s->mlog_fd = -1;

    const char *crash = getenv("INEC_CRASH_AT");
    if (crash && *crash) {
        snprintf(s->crash_at, sizeof(s->crash_at), "%s", crash);
        char *colon = strchr(s->crash_at, ':');
        s->crash_n = 1;
        if (colon) {
            *colon = 0;
            s->crash_n = strtol(colon + 1, NULL, 10);
        }
    }

    int rc = 0;
    const char *what = "data directory";
    if (s->opt.create && mkdir(dir, 0755) != 0 && errno != EEXIST)
        rc = -errno;
    if (rc == 0 && (s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0 && (s->lockfd = openat(s->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
        rc = -errno;
    if (rc == 0 && flock(s->lockfd, LOCK_EX | LOCK_NB) != 0)
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
    if (rc == 0) {
        what = "index";
        char path[4096];
        snprintf(path, sizeof(path), "%s/index.mdb", dir);
        rc = mdb_err(mdb_env_create(&s->env));
        if (rc == 0)
            rc = mdb_err(mdb_env_set_maxdbs(s->env, 5));
        if (rc == 0)
            rc = mdb_err(mdb_env_set_mapsize(s->env, s->opt.map_size));
        if (rc == 0) /* one read txn per concurrent reader thread */
            rc = mdb_err(mdb_env_set_maxreaders(s->env, 1024));
        if (rc == 0)
            rc = mdb_err(
                mdb_env_open(s->env, path, MDB_NOSUBDIR | MDB_NOTLS | MDB_NOMETASYNC, 0644));
        if (rc == 0)
            rc = mdb_err(mdb_reader_check(s->env, NULL));
    }
    if (rc == 0) {
        MDB_txn *txn;
        rc = mdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
        if (rc == 0) {
            rc = mdb_err(mdb_dbi_open(txn, "chunks", MDB_CREATE, &s->chunks));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "segments", MDB_CREATE, &s->segs));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "repair", MDB_CREATE, &s->repair));
            if (rc == 0)
                rc = mdb_err(mdb_dbi_open(txn, "info", MDB_CREATE, &s->info));
            rc = store_commit_synced(s, txn, rc);
        }
    }
    if (rc == 0) {
        what = "metadata log";
        rc = store_meta_log_open(s);
    }
    if (rc == 0) {
        what = "metadata applier thread";
        rc = store_meta_start(s);
    }
    if (rc == 0) {
        what = "io_uring";
        rc = io_uring_queue_init(8, &s->ring, 0);
        if (rc)
            s->ring.ring_fd = -1;
    }
    if (rc == 0) {
        what = "recovery";
        rc = store_recover(s, err, errlen);
    }
    if (rc == 0 && s->opt.group_commit) {
        what = "writer thread";
        rc = -pthread_create(&s->writer, NULL, store_writer_main, s);
        s->writer_running = rc == 0;
    }
    if (rc) {
        if (errlen && !err[0])
            snprintf(err, errlen, "%s: %s: %s", dir, what, node_store_strerror(rc));
        node_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void node_store_close(struct node_store *s)
{
    if (!s)
        return;
    if (s->writer_running) {
        pthread_mutex_lock(&s->q_mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->q_cond);
        pthread_mutex_unlock(&s->q_mu);
        pthread_join(s->writer, NULL);
    }
    store_meta_close(s);
    store_direct_close(s);
    for (size_t i = 0; i < s->nseg; i++)
        close(s->seg[i].fd);
    free(s->seg);
    if (s->env)
        mdb_env_close(s->env);
    if (s->ring.ring_fd >= 0)
        io_uring_queue_exit(&s->ring);
    if (s->lockfd >= 0)
        close(s->lockfd);
    if (s->dirfd >= 0)
        close(s->dirfd);
    pthread_rwlock_destroy(&s->seg_lock);
    pthread_mutex_destroy(&s->write_mu);
    pthread_mutex_destroy(&s->acked_mu);
    pthread_cond_destroy(&s->acked_cond);
    pthread_mutex_destroy(&s->q_mu);
    pthread_mutex_destroy(&s->mq_mu);
    pthread_cond_destroy(&s->mq_cond);
    pthread_mutex_destroy(&s->pend_mu);
    pthread_cond_destroy(&s->pend_cond);
    pthread_mutex_destroy(&s->compact_mu);
    pthread_mutex_destroy(&s->scan_mu);
    pthread_cond_destroy(&s->q_cond);
    pthread_cond_destroy(&s->done_cond);
    free(s);
}
